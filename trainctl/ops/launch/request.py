"""A launch request: every `trainctl launch` option, declared once, as one frozen value.

The house issue's rule: a launch option is declared in exactly one place. This dataclass is that
place. Each field carries its flag, its help and the modes it applies to (`--local`, `--hosts`);
from these declarations
- the CLI builds the `trainctl launch` command (trainctl.cli.launch generates its Typer options),
- the request validates itself (every error one line with the value and the fix),
- it is stored in RUN/launch.json and read back (`to_dict` / `from_dict`, versioned),
- it gives the supervisor's and the local launcher's specs (HostsSpec, LaunchSpec: views of it),
- a relaunch is the stored request with new hosts, spares and run dir (`relaunched`), rendered back
  to `trainctl launch` argv from the same declarations (`to_argv`), so nothing ever re-parses a
  recorded command line.

The torchrun command line and the host plan (which ranks run on which host) that both launchers
use are built here too (`torchrun_argv`, `host_plan`).
"""

from __future__ import annotations

import math
import re
import sys
import typing
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from enum import Enum
from pathlib import Path
from typing import Any

from trainctl.errors import InputError
from trainctl.inventory import parse_hosts
from trainctl.rundir import HostRanks
from trainctl.runtime.rank_map import default_tp

__all__ = [
    "Mode",
    "OptionDecl",
    "LaunchRequest",
    "REQUEST_SCHEMA_VERSION",
    "option_decls",
    "torchrun_argv",
    "host_plan",
    "reference_layout",
    "simulated_hosts",
    "trainer_tp",
    "TRAINER_MODULE",
    "SHIM_MODULE",
]

REQUEST_SCHEMA_VERSION = 2  # launch.json: 1 held the launch's argv, 2 holds the request itself
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class Mode(str, Enum):
    LOCAL = "local"
    HOSTS = "hosts"


_BOTH = frozenset(Mode)


@dataclass(frozen=True)
class OptionDecl:
    """How one field of the request appears on the command line."""

    flag: str | None  # None: the positional SCRIPT ARGS
    help: str
    modes: frozenset[Mode] = _BOTH
    relaunch: bool = True  # carried into a relaunch (drills and mode switches are not)
    metavar: str | None = None


def _opt(default: Any, flag: str | None, help: str, *, modes: frozenset[Mode] = _BOTH, relaunch: bool = True,
         metavar: str | None = None) -> Any:  # fmt: skip
    return field(default=default, metadata={"cli": OptionDecl(flag, help, modes, relaunch, metavar)})


_LOCAL = frozenset({Mode.LOCAL})
_HOSTS = frozenset({Mode.HOSTS})


def check_drill_targets(drills: Iterable[Any], *, world: int, hosts: Sequence[str]) -> None:
    """Every --inject drill aims at something in this run: a rank below the world size, a host of the run
    (or a spare, which may stand in for it). Checked when the request is parsed, again by the local launcher
    and the supervisor on their own specs (a spec may come from a file, not from the CLI)."""
    from trainctl.runtime import inject

    for d in drills:
        r = getattr(d, "rank", None)
        if r is not None and r >= world:
            raise InputError(
                f"--inject {d.spec()!r}: rank {r} does not exist (world size {world}); pick a rank below {world}"
            )
        if isinstance(d, inject.Xid) and d.host not in hosts:
            raise InputError(f"--inject {d.spec()!r}: host {d.host!r} is not in this run ({', '.join(hosts)})")


@dataclass(frozen=True)
class LaunchRequest:
    """Every option of `trainctl launch`, in the order `--help` lists them."""

    script_and_args: tuple[str, ...] = _opt(
        (), None, "An unmodified torch script and its args (after --). None: the reference trainer; leading "
        "--options go to it.", metavar="[-- SCRIPT ARGS...]",
    )  # fmt: skip
    local: bool = _opt(False, "--local", "Run the ranks on this machine.", modes=_LOCAL, relaunch=False)
    hosts: str | None = _opt(
        None, "--hosts", "Hostfile, comma list or Slurm nodelist: torchrun on each over SSH, supervised (evict + "
        "relaunch on hardware faults).", modes=_HOSTS, relaunch=False,
    )  # fmt: skip
    hosts_local: int = _opt(
        1, "--hosts-local", "With --local: simulate N hosts (node01..), one torchrun agent each.", modes=_LOCAL,
        relaunch=False,
    )  # fmt: skip
    nproc_per_node: int = _opt(2, "--nproc-per-node", "Ranks per host.")
    run_dir: Path | None = _opt(None, "--run-dir", "Run directory (default ./runs/<run_id>).", relaunch=False)
    inject: tuple[str, ...] = _opt(
        (), "--inject", "Drill, repeatable: straggler:rank=2,factor=1.5 | hang:rank=3,step=20 | crash:rank=1,step=30 "
        "| nan:rank=0,step=10 | xid:host=H,code=79,step=S", relaunch=False,
    )  # fmt: skip
    max_restarts: int = _opt(
        0, "--max-restarts", "--local: torchrun restarts of the worker group; --hosts: in-place restarts the "
        "supervisor may spend on software faults.",
    )  # fmt: skip
    hang_timeout: float = _opt(
        300.0, "--hang-timeout", "Seconds without heartbeat progress before the run counts as hung (0 = never)."
    )
    keep_hung: bool = _opt(
        False, "--keep-hung", "--local: after dumping a hung run, keep it up for inspection (with --hosts: "
        "--hang-timeout 0).", modes=_LOCAL, relaunch=False,
    )  # fmt: skip
    spares: str | None = _opt(
        None, "--spares", "With --hosts: standby hosts that replace evicted ones (same syntax as --hosts).",
        modes=_HOSTS, relaunch=False,
    )  # fmt: skip
    allow_quarantined: bool = _opt(False, "--allow-quarantined", "Launch even on hosts in the quarantine ledger.")
    checkpoint_every: int = _opt(
        0, "--checkpoint-every", "Reference trainer: async checkpoint every N steps (resume picks the newest "
        "complete one).",
    )  # fmt: skip
    checkpoint_dir: Path | None = _opt(
        None, "--checkpoint-dir", "Checkpoint directory; with --hosts it must be on storage every host shares."
    )
    steps: int | None = _opt(None, "--steps", "Reference trainer: total steps.")
    ssh_config: Path | None = _opt(
        None, "--ssh-config", "With --hosts: OpenSSH client config (default ~/.ssh/config).", modes=_HOSTS
    )
    remote_run_dir: str | None = _opt(
        None, "--remote-run-dir", "With --hosts: the run dir on the hosts (default: the absolute --run-dir).",
        modes=_HOSTS, relaunch=False,
    )  # fmt: skip
    python: str | None = _opt(
        None, "--python", "With --hosts: the Python on the hosts (default: this one, e.g. a shared venv).",
        modes=_HOSTS,
    )  # fmt: skip
    backend: str | None = _opt(
        None, "--backend", "nccl or gloo (default: nccl where the ranks see GPUs, else gloo); gloo on a GPU machine "
        "runs the ranks on CPU.",
    )  # fmt: skip
    rank_env: tuple[str, ...] = _opt(
        (), "--env", "NAME=VALUE for every rank, repeatable (e.g. GLOO_SOCKET_IFNAME=eth0, NCCL_DEBUG=INFO)."
    )
    fail_slow_ratio: float | None = _opt(
        None, "--fail-slow-ratio", "With --hosts: the run is fail-slow when its recent median step time exceeds R "
        "x the attempt's baseline on 3 consecutive polls (default 1.5); then it is collected and diagnosed live. 0 "
        "turns fail-slow detection off.", modes=_HOSTS,
    )  # fmt: skip
    allow_shrink: bool = _opt(
        False, "--allow-shrink", "With --hosts and a SCRIPT: after an eviction with no spare left, relaunch on fewer "
        "hosts (smaller dp); say so only if SCRIPT can resume at a smaller world size. The reference trainer "
        "always may.", modes=_HOSTS,
    )  # fmt: skip

    # ------------------------------------------------------------------ building

    @classmethod
    def from_cli(cls, params: Mapping[str, Any], *, cwd: str | Path) -> LaunchRequest:
        """The request from the CLI's parsed options; relative paths become absolute against `cwd`.

        Every field must be present in `params` (the CLI passes all of them); lists become tuples.
        """
        missing = {f.name for f in fields(cls)} - set(params)
        if missing:
            raise InputError(f"launch options missing: {', '.join(sorted(missing))}")
        # Typer gives None for a repeatable option never passed, and lists for the rest.
        values = {f.name: _frozen(params[f.name], f.default) for f in fields(cls)}
        req = cls(**values)
        return req._absolute(Path(cwd))

    def _absolute(self, cwd: Path) -> LaunchRequest:
        def absolute(p: Path | str | None) -> Path | None:
            if p in (None, ""):
                return None
            p = Path(p)
            return p if p.is_absolute() else cwd / p

        script, args = self.script, self.script_args
        rest = (str(absolute(script)), *args) if script is not None and self.hosts else self.script_and_args
        return replace(
            self,
            run_dir=absolute(self.run_dir),
            checkpoint_dir=absolute(self.checkpoint_dir),
            ssh_config=absolute(self.ssh_config),
            script_and_args=tuple(rest),
        )

    # ------------------------------------------------------------------ what it says

    @property
    def mode(self) -> Mode:
        return Mode.HOSTS if self.hosts else Mode.LOCAL

    @property
    def script(self) -> str | None:
        """The user's SCRIPT, or None for the reference trainer (leading --options go to it)."""
        rest = self.script_and_args
        return str(rest[0]) if rest and not str(rest[0]).startswith("-") else None

    @property
    def script_args(self) -> tuple[str, ...]:
        return tuple(self.script_and_args[1:] if self.script is not None else self.script_and_args)

    def host_names(self) -> tuple[str, ...]:
        return tuple(h.name for h in parse_hosts(self.hosts)) if self.hosts else ()

    def spare_names(self) -> tuple[str, ...]:
        return tuple(h.name for h in parse_hosts(self.spares)) if self.spares else ()

    def env(self) -> dict[str, str]:
        """What every rank gets in its environment: --env entries, and the backend when one was chosen."""
        env = dict(e.split("=", 1) for e in self.rank_env)
        if self.backend:
            env["TRAINCTL_BACKEND"] = self.backend
        return env

    def trainer_args(self) -> tuple[str, ...]:
        """SCRIPT's args, or the reference trainer's: its own options plus --steps / --checkpoint-*."""
        args = list(self.script_args)
        if self.script is None:
            if self.steps is not None:
                args += ["--steps", str(self.steps)]
            if self.checkpoint_every:
                args += ["--checkpoint-every", str(self.checkpoint_every)]
                if self.checkpoint_dir:
                    args += ["--checkpoint-dir", str(self.checkpoint_dir)]
        return tuple(args)

    # ------------------------------------------------------------------ validation

    def validate(self) -> LaunchRequest:
        """Self, or an InputError naming the value and the fix; nothing has started yet."""
        if self.hosts and self.local:
            raise InputError("--hosts and --local exclude each other: --hosts runs over SSH, --local on this machine")
        if not self.local and not self.hosts:
            raise InputError("say where to run: --local (ranks on this machine, --hosts-local N simulated hosts)")
        if self.hosts_local < 1:
            raise InputError(f"--hosts-local {self.hosts_local}: must be >= 1")
        if self.nproc_per_node < 1:
            raise InputError(f"--nproc-per-node {self.nproc_per_node}: must be >= 1")
        if self.max_restarts < 0:
            raise InputError(f"--max-restarts {self.max_restarts}: must be >= 0")
        if not math.isfinite(self.hang_timeout) or self.hang_timeout < 0:
            raise InputError(f"--hang-timeout {self.hang_timeout}: must be a number of seconds >= 0 (0 = never)")
        if self.checkpoint_every < 0:
            raise InputError(f"--checkpoint-every {self.checkpoint_every}: must be >= 0 (0 = no checkpoints)")
        if self.steps is not None and self.steps < 1:
            raise InputError(f"--steps {self.steps}: must be >= 1")
        if self.backend not in (None, "nccl", "gloo"):
            raise InputError(f"--backend {self.backend!r}: must be nccl or gloo (or left out: nccl on GPUs, else gloo)")
        self._check_mode_options()
        if self.fail_slow_ratio is not None and (
            not math.isfinite(self.fail_slow_ratio) or (self.fail_slow_ratio != 0 and self.fail_slow_ratio <= 1)
        ):
            raise InputError(
                f"--fail-slow-ratio {self.fail_slow_ratio}: must be > 1 (times the attempt's baseline step time, "
                "e.g. 1.5), or 0 to turn fail-slow detection off"
            )
        for e in self.rank_env:
            name, eq, value = e.partition("=")
            if not eq or not _ENV_NAME.match(name):
                raise InputError(
                    f"--env {e!r}: expected NAME=VALUE with NAME of letters, digits and _ (e.g. NCCL_DEBUG=INFO)"
                )
            if "\0" in value or "\n" in value:
                raise InputError(f"--env {name}: the value holds a NUL or newline; pass one line of text")
        if self.hosts:
            hosts, spares = self.host_names(), self.spare_names()  # InventoryError names the bad host
            if set(hosts) & set(spares):
                raise InputError(
                    f"--hosts {','.join(hosts)} / --spares {','.join(spares)}: a host appears twice; list it once"
                )
            if self.checkpoint_every and not self.checkpoint_dir and len(hosts) > 1:
                raise InputError(
                    "--checkpoint-every with --hosts needs --checkpoint-dir on storage every host shares "
                    "(a replacement host must read the evicted host's shards)"
                )
            if self.remote_run_dir is not None and not str(self.remote_run_dir).startswith("/"):
                raise InputError(
                    f"--remote-run-dir {self.remote_run_dir!r}: must be absolute (it is the same path on every host)"
                )
            if self.ssh_config is not None and not Path(self.ssh_config).is_file():
                raise InputError(f"--ssh-config {self.ssh_config}: no such file; pass your OpenSSH client config")
        elif self.spares:
            raise InputError("--spares applies to --hosts (standby hosts for the supervisor's relaunch)")
        self._check_drills()
        return self

    def _check_mode_options(self) -> None:
        if self.hosts and self.keep_hung:
            # The supervisor acts on a hang (dump, diagnose, evict/restart); leaving it up is a choice
            # made by not detecting hangs at all.
            raise InputError(
                "--keep-hung applies to --local; with --hosts pass --hang-timeout 0 to leave a hung run up "
                "for inspection (then `trainctl playbook run hung-collective --run RUN`)"
            )
        if self.allow_shrink and not self.hosts:
            raise InputError(
                "--allow-shrink applies to --hosts (the supervisor's relaunch after an eviction); "
                "--local runs are not relaunched"
            )
        if self.fail_slow_ratio is not None and not self.hosts:
            raise InputError(
                "--fail-slow-ratio applies to --hosts (the supervisor watches the step time); "
                "for a --local run, `trainctl diagnose RUN_DIR` names stragglers"
            )

    def _check_drills(self) -> None:
        from trainctl.runtime import inject

        drills = inject.parse_specs(self.inject)  # InputError names the bad spec
        hosts = (*self.host_names(), *self.spare_names()) if self.hosts else simulated_hosts(self.hosts_local)
        world = self.nproc_per_node * (len(self.host_names()) if self.hosts else self.hosts_local)
        check_drill_targets(drills, world=world, hosts=hosts)

    # ------------------------------------------------------------------ launch.json

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for f in fields(self):
            v = getattr(self, f.name)
            out[f.name] = list(v) if isinstance(v, tuple) else (str(v) if isinstance(v, Path) else v)
        return out

    @classmethod
    def from_dict(cls, d: Any, *, where: str = "launch.json") -> LaunchRequest:
        """Read back what to_dict wrote; a wrong shape is a one-line error naming the field."""
        if not isinstance(d, Mapping):
            raise InputError(f"{where}: the request is not an object; relaunch by hand with `trainctl launch ...`")
        hints = typing.get_type_hints(cls)
        values: dict[str, Any] = {}
        for f in fields(cls):
            if f.name not in d:
                continue  # a request written before the option existed: its default
            values[f.name] = _coerce(d[f.name], hints[f.name], f"{where}: {f.name}")
        unknown = set(d) - {f.name for f in fields(cls)}
        if unknown:
            raise InputError(
                f"{where}: unknown option(s) {', '.join(sorted(map(str, unknown)))}; written by a newer trainctl?"
            )
        return cls(**values)

    # ------------------------------------------------------------------ relaunch

    def relaunched(
        self, *, hosts: Sequence[str], spares: Sequence[str], run_dir: str, remote_run_dir: str,
        tp: int | None = None, allow_shrink: bool | None = None,
    ) -> LaunchRequest:  # fmt: skip
        """The same options on `hosts`, a new run dir, no drills.

        `tp`: the reference trainer's tensor-parallel size, passed explicitly when the launch did not
        (its default follows the world size's parity, and a smaller world must keep the shards' tp).
        """
        rest = list(self.script_and_args)
        if tp is not None and self.script is None and not any(a == "--tp" or str(a).startswith("--tp=") for a in rest):
            rest += ["--tp", str(tp)]
        return replace(
            self,
            hosts=",".join(hosts),
            spares=",".join(spares) or None,
            run_dir=Path(run_dir),
            remote_run_dir=remote_run_dir,
            inject=(),
            script_and_args=tuple(rest),
            allow_shrink=self.allow_shrink if allow_shrink is None else allow_shrink,
        )

    def to_argv(self, *, relaunch: bool = False) -> list[str]:
        """`trainctl launch` argv (without `launch`) that builds this request again.

        relaunch: only the options a relaunch carries, after --hosts/--run-dir/--remote-run-dir/--spares.
        An option at its "off" value (None, empty, False) is left out.
        """
        head: list[str] = []
        if relaunch:
            head = [
                "--hosts",
                str(self.hosts),
                "--run-dir",
                str(self.run_dir),
                "--remote-run-dir",
                str(self.remote_run_dir),
            ]
            if self.spares:
                head += ["--spares", str(self.spares)]
        argv: list[str] = []
        for f in fields(self):
            decl: OptionDecl = f.metadata["cli"]
            if decl.flag is None or (relaunch and not decl.relaunch):
                continue
            v = getattr(self, f.name)
            if v is None or v == () or v is False:
                continue
            if v is True:
                argv.append(decl.flag)
            elif isinstance(v, tuple):
                for x in v:
                    argv += [decl.flag, str(x)]
            else:
                argv += [decl.flag, str(v)]
        tail = ["--", *self.script_and_args] if self.script_and_args else []
        return head + argv + tail


def option_decls() -> dict[str, OptionDecl]:
    """field name -> its declaration, in declaration order (for the CLI and its tests)."""
    return {f.name: f.metadata["cli"] for f in fields(LaunchRequest)}


def _frozen(v: Any, default: Any) -> Any:
    if v is None and isinstance(default, tuple):
        return ()
    return tuple(v) if isinstance(v, list) else v


def _coerce(v: Any, hint: Any, where: str) -> Any:
    """JSON value -> the field's type, or a one-line error."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    optional = type(None) in args
    if v is None:
        if optional:
            return None
        raise InputError(f"{where} is null; rewrite launch.json or relaunch by hand")
    base = next((a for a in args if a is not type(None)), hint) if optional else hint
    if typing.get_origin(base) is tuple:
        if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
            raise InputError(f"{where} must be a list of strings, got {type(v).__name__}")
        return tuple(v)
    ok = {bool: lambda x: isinstance(x, bool), int: lambda x: isinstance(x, int) and not isinstance(x, bool),
          float: lambda x: isinstance(x, (int, float)) and not isinstance(x, bool), str: lambda x: isinstance(x, str),
          Path: lambda x: isinstance(x, str)}  # fmt: skip
    check = ok.get(base) or ok.get(origin)  # type: ignore[arg-type]
    if check is None or not check(v):
        raise InputError(f"{where} has {v!r}, not a {getattr(base, '__name__', base)}")
    if base is Path:
        return Path(v)
    return float(v) if base is float else v


# ------------------------------------------------------------------ what both launchers run


def simulated_hosts(n: int) -> tuple[str, ...]:
    width = max(2, len(str(n)))
    return tuple(f"node{i:0{width}d}" for i in range(1, n + 1))


def trainer_tp(args: Sequence[str], world: int) -> int:
    """The reference trainer's --tp in `args`, else its default (runtime.rank_map.default_tp)."""
    for i, a in enumerate(args):
        if a == "--tp" and i + 1 < len(args):
            try:
                return int(args[i + 1])
            except ValueError:
                raise InputError(f"--tp {args[i + 1]!r}: must be an integer that divides the world size") from None
        if a.startswith("--tp="):
            try:
                return int(a.split("=", 1)[1])
            except ValueError:
                raise InputError(f"{a!r}: --tp must be an integer that divides the world size") from None
    return default_tp(world)


def reference_layout(world: int, tp: int) -> tuple[dict[str, tuple[tuple[int, ...], ...]], dict[str, int]]:
    """The reference trainer's named groups and layout: ranks [0..tp) the first tp group, {r, r+tp, ...} a dp group."""
    dp = world // tp
    groups = {
        "tp": tuple(tuple(range(i * tp, (i + 1) * tp)) for i in range(dp)),
        "dp": tuple(tuple(range(j, world, tp)) for j in range(tp)),
    }
    return groups, {"dp": dp, "tp": tp, "pp": 1}


def host_plan(hosts: Sequence[str], nproc_per_node: int) -> tuple[HostRanks, ...]:
    """Ranks by host in host order (torchrun's node ranks follow join order, so the launchers
    rewrite this from the ranks' own reports once they are up)."""
    return tuple(HostRanks(h, tuple(range(i * nproc_per_node, (i + 1) * nproc_per_node))) for i, h in enumerate(hosts))


TRAINER_MODULE = "trainctl.runtime.trainer"
SHIM_MODULE = "trainctl.runtime.shim"


def torchrun_argv(
    *, python: str = sys.executable, nnodes: int, nproc_per_node: int, rdzv_endpoint: str, rdzv_id: str,
    max_restarts: int, script: str | None, args: Sequence[str], rdzv_conf: str | None = None,
) -> list[str]:  # fmt: skip
    """One torchrun agent: c10d rendezvous, the reference trainer or SCRIPT under the shim."""
    cmd = [
        python, "-m", "torch.distributed.run", "--nnodes", str(nnodes), "--nproc-per-node", str(nproc_per_node),
        "--rdzv-backend", "c10d", "--rdzv-endpoint", rdzv_endpoint, "--rdzv-id", rdzv_id,
    ]  # fmt: skip
    if rdzv_conf:
        cmd += ["--rdzv-conf", rdzv_conf]
    cmd += ["--max-restarts", str(max_restarts), "--monitor-interval", "0.5"]
    if script is None:
        return [*cmd, "-m", TRAINER_MODULE, *args]
    return [*cmd, "-m", SHIM_MODULE, script, *args]
