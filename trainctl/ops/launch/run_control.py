"""Act on a multi-host run that `trainctl launch --hosts` started: find its options, dump, stop, relaunch.

Playbooks (and `trainctl evict-node --relaunch`) need three things the launch knows:
  - its options (hosts, spares, ssh config, checkpoint dir, trainer args): the launch request
    (trainctl.ops.launch.request.LaunchRequest) the launcher stored in RUN/launch.json
    (`record_launch`); nothing here parses a command line;
  - how to stop it: SIGINT to the supervisor (its `finally` stops every remote agent and rank
    group), then a sweep over SSH that kills any rank group left (the supervisor's own rule: the
    pids in ranks/rank-R.json are session leaders);
  - how to relaunch it: `trainctl launch --hosts NEW --spares LEFT ...` with the same options, a new
    run dir, no drill (the stored request, `relaunched`, rendered back to argv from the same
    declarations), as a subprocess that can be waited on. The trainer resumes from the newest
    complete checkpoint in the shared --checkpoint-dir (what the supervisor does on its own evictions).
    With no spare left the plan may be a smaller run (relaunch_plan.shrink_allowed: the reference
    trainer, or a user script with --allow-shrink given to `launch` or to `evict-node --relaunch`).

The supervisor is found as the process of this user holding RUN/logs/agent-*.log open (it streams
the remote agent logs there for the life of an attempt): exact ownership of this run's files, not
a match on a program name; only to stop it: its options come from launch.json alone.
"""

from __future__ import annotations

import json
import logging
import os
import shlex
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from trainctl.errors import InputError, LaunchError, TrainctlError
from trainctl.ops.launch.host_commands import hang_dump_command, rank_sweep_command
from trainctl.ops.launch.request import REQUEST_SCHEMA_VERSION, LaunchRequest

logger = logging.getLogger(__name__)

__all__ = [
    "LaunchOptions",
    "find_supervisor",
    "launch_options",
    "record_launch",
    "dump_live_ranks",
    "stop_run",
    "RelaunchHandle",
    "start_relaunch",
    "wait_relaunch",
    "new_run_steps",
    "relaunch_plan_for",
    "relaunch_without",
]

LAUNCH_RECORD = "launch.json"


@dataclass(frozen=True)
class LaunchOptions:
    """The `trainctl launch --hosts` options of a run: its stored launch request, and where it was found."""

    params: Mapping[str, Any]  # the request's fields (LaunchRequest.to_dict)
    cwd: str  # where the launch ran (paths in the request are already absolute)
    source: str  # the launch.json it came from
    supervisor_pid: int | None = None

    @property
    def request(self) -> LaunchRequest:
        return LaunchRequest.from_dict(dict(self.params), where=self.source)

    @property
    def hosts(self) -> list[str]:
        return list(self.request.host_names())

    @property
    def spares(self) -> list[str]:
        return list(self.request.spare_names())

    @property
    def ssh_config(self) -> str | None:
        v = self.params.get("ssh_config")
        return str(v) if v else None

    @property
    def run_dir(self) -> str | None:
        v = self.params.get("run_dir")
        return str(v) if v else None

    @property
    def remote_run_dir(self) -> str | None:
        return self.params.get("remote_run_dir") or self.run_dir

    @property
    def python(self) -> str | None:
        return self.params.get("python")

    def to_dict(self) -> dict[str, Any]:
        return {
            "params": {k: (list(v) if isinstance(v, tuple) else v) for k, v in self.params.items()},
            "cwd": self.cwd,
            "source": self.source,
            "supervisor_pid": self.supervisor_pid,
        }


def record_launch(run_dir: str | os.PathLike[str], request: LaunchRequest, cwd: str | None = None) -> Path:
    """Write RUN/launch.json: the launch request (schema 2) and where it ran. For `trainctl launch` to call."""
    from trainctl.rundir import atomic_write_text

    p = Path(run_dir) / LAUNCH_RECORD
    p.parent.mkdir(parents=True, exist_ok=True)
    doc = {"schema_version": REQUEST_SCHEMA_VERSION, "request": request.to_dict(), "cwd": cwd or os.getcwd()}
    atomic_write_text(p, json.dumps(doc, indent=2))
    return p


def find_supervisor(run_dir: str | os.PathLike[str]) -> int | None:
    """The pid of this user's process holding RUN/logs/agent-*.log open for writing, or None."""
    logs = str(Path(run_dir).resolve() / "logs") + "/agent-"
    me = os.getuid()
    for d in Path("/proc").iterdir():
        if not d.name.isdigit() or int(d.name) == os.getpid():
            continue
        try:
            if d.stat().st_uid != me:
                continue
            for fd in (d / "fd").iterdir():
                try:
                    if os.readlink(fd).startswith(logs):
                        return int(d.name)
                except OSError:
                    continue
        except OSError:
            continue  # exited or not ours
    return None


def launch_options(run_dir: str | os.PathLike[str]) -> LaunchOptions:
    """The run's launch request from RUN/launch.json (and its live supervisor's pid, to stop it)."""
    run = Path(run_dir).resolve()
    rec = run / LAUNCH_RECORD
    pid = find_supervisor(run)
    if not rec.is_file():
        if pid is None:
            raise InputError(
                f"{run}: no {LAUNCH_RECORD} and no live `trainctl launch --hosts` supervisor of this run on this "
                f"machine; relaunch by hand with `trainctl launch --hosts ...` (the options are in supervisor.jsonl)"
            )
        raise InputError(
            f"{run}: no {LAUNCH_RECORD} (supervisor pid {pid} is live, but trainctl reads a run's options only from "
            f"its launch record); stop it and relaunch by hand with `trainctl launch --hosts ...`"
        )
    try:
        doc = json.loads(rec.read_text())
    except (OSError, ValueError) as exc:
        raise InputError(
            f"{rec}: unreadable launch record ({exc}); relaunch by hand with `trainctl launch ...`"
        ) from exc
    if not isinstance(doc, dict) or doc.get("schema_version") != REQUEST_SCHEMA_VERSION:
        old = doc.get("argv") if isinstance(doc, dict) else None
        how = f"`trainctl launch {shlex.join(map(str, old))}`" if isinstance(old, list) else "`trainctl launch ...`"
        raise InputError(
            f"{rec}: written by an older trainctl (schema {doc.get('schema_version', 1) if isinstance(doc, dict) else '?'},"
            f" not {REQUEST_SCHEMA_VERSION}); relaunch by hand with {how}"
        )
    request = LaunchRequest.from_dict(doc.get("request"), where=str(rec))  # a wrong shape: one line, here
    if not request.hosts:
        raise InputError(
            f"{run} was launched without --hosts; playbook relaunch acts on `trainctl launch --hosts` runs"
        )
    return LaunchOptions(request.to_dict(), str(doc.get("cwd") or run), str(rec), pid)


def _remote(opts: LaunchOptions):
    from trainctl.collectors.ssh import SshClient
    from trainctl.ops.remote import RemoteHosts

    return RemoteHosts(SshClient(ssh_config=opts.ssh_config))


def dump_live_ranks(opts: LaunchOptions, hosts: Sequence[str], *, timeout_s: float = 60.0) -> dict[str, str]:
    """Flight Recorder + stacks of every live rank, on each host (trainctl.runtime.hang_dump over SSH).

    A hung run's evidence lives in its ranks' memory; this writes it into the run dir on each host
    (fr/H/, stacks/H/) before anything is stopped, so `collect` fetches it. Returns host -> "ok/total" or error.
    """
    import sys

    py = opts.python or sys.executable
    rd = str(opts.remote_run_dir)
    with _remote(opts) as remote:
        res = remote.fan_out(
            hosts,
            lambda h: remote.run(h, hang_dump_command(py, rd, h), timeout_s=timeout_s),
        )
    return {h: ("/".join(o.value.split()) if o.ok else f"error: {o.error}") for h, o in res.outcomes.items()}


def stop_run(opts: LaunchOptions, hosts: Sequence[str], *, grace_s: float = 30.0) -> dict[str, Any]:
    """Stop the run: SIGINT its supervisor (it stops its agents), then kill rank groups left on each host."""
    done: dict[str, Any] = {"supervisor_pid": opts.supervisor_pid, "supervisor": "none found"}
    pid = opts.supervisor_pid
    if pid is not None:
        try:
            os.kill(pid, signal.SIGINT)  # KeyboardInterrupt: its finally stops agents and rank groups
            deadline = time.monotonic() + grace_s
            while time.monotonic() < deadline and Path(f"/proc/{pid}").exists() and not _zombie(pid):
                time.sleep(0.2)
            if Path(f"/proc/{pid}").exists() and not _zombie(pid):
                os.kill(pid, signal.SIGKILL)
                done["supervisor"] = f"SIGKILL after {grace_s:.0f}s"
            else:
                done["supervisor"] = "stopped by SIGINT"
        except ProcessLookupError:
            done["supervisor"] = "already gone"
    # The supervisor's own sweep: each rank is a session leader under torchrun; its agent is its
    # parent. Each host kills only its own ranks of this run (rank_sweep: a shared run dir).
    rd = str(opts.remote_run_dir)
    run_id = _run_id(opts.run_dir)
    with _remote(opts) as remote:
        res = remote.fan_out(
            hosts, lambda h: remote.run(h, rank_sweep_command(rd, h, run_id, with_agents=True), check=False)
        )
    done["rank_groups_killed"] = {
        h: (int(o.value.strip() or 0) if o.ok else f"error: {o.error}") for h, o in res.outcomes.items()
    }
    return done


def _run_id(run_dir: str | None) -> str | None:
    """The run's id from its run.json; None when there is none to read (stopping goes on without it)."""
    from trainctl.rundir import read_run_info

    try:
        info = read_run_info(run_dir) if run_dir else None
    except TrainctlError:
        return None
    return info.run_id if info is not None else None


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] == "Z"
    except OSError:
        return True


# ---------------------------------------------------------------- relaunch


def relaunch_argv(
    opts: LaunchOptions,
    *,
    hosts: Sequence[str],
    spares: Sequence[str],
    run_dir: str,
    remote_run_dir: str,
    tp: int | None = None,
) -> list[str]:
    """`launch` argv for the relaunch: same options on `hosts`, a new run dir, no drills.

    `tp`: the reference trainer's tensor-parallel size, passed explicitly when the launch did not
    (its default follows the world size's parity, and a smaller world must keep the shards' tp).
    """
    new = opts.request.relaunched(hosts=hosts, spares=spares, run_dir=run_dir, remote_run_dir=remote_run_dir, tp=tp)
    return ["launch", *new.to_argv(relaunch=True)]


@dataclass
class RelaunchHandle:
    """A relaunched run started as `trainctl launch` (a subprocess of this one), to be waited on."""

    argv: list[str]
    run_dir: str
    remote_run_dir: str
    hosts: list[str]
    ssh_config: str | None
    proc: subprocess.Popen | None = None
    log_path: str = ""
    result: dict[str, Any] = field(default_factory=dict)


def start_relaunch(
    opts: LaunchOptions,
    *,
    hosts: Sequence[str],
    spares: Sequence[str],
    run_dir: str,
    remote_run_dir: str,
    trainctl: Sequence[str],
    env: Mapping[str, str] | None = None,
    tp: int | None = None,
) -> RelaunchHandle:
    new = opts.request.relaunched(hosts=hosts, spares=spares, run_dir=run_dir, remote_run_dir=remote_run_dir, tp=tp)
    argv = ["launch", *new.to_argv(relaunch=True)]
    Path(run_dir).mkdir(parents=True, exist_ok=True)
    record_launch(run_dir, new, cwd=os.getcwd())
    log_path = str(Path(run_dir) / "launch.log")
    log = open(log_path, "ab")
    try:
        # Its own session: stopping this CLI (Ctrl-C on a playbook) must not take the relaunched run down.
        proc = subprocess.Popen(
            [*trainctl, *argv],
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env={**os.environ, **(env or {})},
            start_new_session=True,
        )
    finally:
        log.close()
    logger.info("relaunched pid=%d: %s", proc.pid, shlex.join(["trainctl", *argv]))
    return RelaunchHandle(argv, run_dir, remote_run_dir, list(hosts), opts.ssh_config, proc, log_path)


def wait_relaunch(h: RelaunchHandle, timeout_s: float) -> dict[str, Any]:
    """Wait for the relaunched run to finish (or `timeout_s`); its exit status and steps. It keeps running on timeout."""
    assert h.proc is not None
    try:
        code: int | None = h.proc.wait(timeout=max(timeout_s, 0.1))
    except subprocess.TimeoutExpired:
        code = None
    steps = new_run_steps(h.ssh_config, h.hosts, h.remote_run_dir)
    h.result = {
        "pid": h.proc.pid,
        "exit_code": code,
        "finished": code is not None,
        "ok": code == 0,
        "run_dir": h.run_dir,
        "remote_run_dir": h.remote_run_dir,
        "hosts": h.hosts,
        "log": h.log_path,
        "command": ["trainctl", *h.argv],
        **steps,
    }
    return h.result


def new_run_steps(ssh_config: str | None, hosts: Sequence[str], remote_run_dir: str) -> dict[str, Any]:
    """First and last step the run logged (rank 0's loss.jsonl, on whichever host rank 0 ran)."""
    from trainctl.collectors.ssh import SshClient
    from trainctl.ops.remote import RemoteHosts

    path = shlex.quote(f"{remote_run_dir}/loss.jsonl")
    rows: list[dict] = []
    with RemoteHosts(SshClient(ssh_config=ssh_config)) as remote:
        res = remote.fan_out(hosts, lambda h: remote.run(h, f"cat {path} 2>/dev/null; true"))
    for o in res.outcomes.values():
        for line in (o.value or "").splitlines() if o.ok else []:
            try:
                rows.append(json.loads(line))
            except ValueError:
                continue
    steps = sorted({int(r["step"]) for r in rows if "step" in r})
    return {
        "first_step": steps[0] if steps else None,
        "last_step": steps[-1] if steps else None,
        "steps_logged": len(steps),
    }


def next_run_dir(run_dir: str | os.PathLike[str]) -> str:
    run = Path(run_dir).resolve()
    n = 1
    while Path(f"{run}-relaunch{n}").exists():
        n += 1
    return f"{run}-relaunch{n}"


def _hosts_and_spares(
    info: Any, opts: LaunchOptions | None, spares: Sequence[str] | None
) -> tuple[list[str], list[str]]:
    """The run's current hosts (run.json's, else the launch's) and the spares a relaunch may use:
    `spares`, else the launch's --spares (else run.json's), less the current hosts."""
    current = [h.host for h in info.hosts] if info else list(opts.hosts)  # type: ignore[union-attr]
    default = opts.spares if opts is not None else [str(x) for x in (info.extra.get("spares") or [])]
    return current, [s for s in (list(spares) if spares else default) if s not in current]


def relaunch_plan_for(
    run_dir: str | os.PathLike[str],
    exclude: Sequence[str],
    *,
    spares: Sequence[str] | None = None,
    quarantined: Sequence[str] = (),
    allow_shrink: bool = False,
    opts: LaunchOptions | None = None,
) -> tuple[Any, LaunchOptions | None]:
    """The RelaunchPlan that `relaunch_without` executes; `evict-node --dry-run` prints the same one.

    Hosts come from run.json (the current attempt's), spares from `spares` else the launch's
    --spares, and whether the run may come back smaller from relaunch_plan.shrink_allowed: the
    reference trainer always, a user script when `allow_shrink` (evict-node's flag) or the launch's
    own --allow-shrink says so. `opts`: the launch options when known; else they are looked up and,
    when they cannot be found, the plan is made from run.json alone. Returns (plan, opts or None).
    """
    from trainctl.ops.evict.relaunch_plan import plan_relaunch, shrink_allowed
    from trainctl.rundir import read_run_info

    run = Path(run_dir).resolve()
    info = read_run_info(run)
    if opts is None:
        try:
            opts = launch_options(run)
        except InputError:
            if info is None:
                raise
    current, spare_list = _hosts_and_spares(info, opts, spares)
    script = info.script if info is not None else opts.request.script  # type: ignore[union-attr]
    opt_in = bool(
        allow_shrink
        or (opts is not None and opts.params.get("allow_shrink"))
        or (info is not None and info.extra.get("allow_shrink"))
    )
    may_shrink, hint = shrink_allowed(script=script, opt_in=opt_in)
    nproc = int(
        (opts.params.get("nproc_per_node") if opts is not None else None) or (info.nproc_per_node if info else 1)
    )
    plan = plan_relaunch(
        current,
        quarantined=set(quarantined) | set(exclude),
        spares=spare_list,
        nproc_per_node=nproc,
        layout=info.layout if info else None,
        allow_shrink=may_shrink,
        no_shrink_hint=hint,
    )
    return plan, opts


def relaunch_without(
    run_dir: str | os.PathLike[str],
    exclude: Sequence[str],
    *,
    spares: Sequence[str] | None = None,
    quarantined: Sequence[str] = (),
    trainctl: Sequence[str],
    env: Mapping[str, str] | None = None,
    stop_grace_s: float = 30.0,
    allow_shrink: bool = False,
) -> tuple[Any, dict[str, Any], RelaunchHandle]:
    """Stop the run and start it again without `exclude`, on the remaining hosts plus spares.

    Returns (RelaunchPlan, what stop_run did, the handle to wait on). The plan keeps the world size
    when spares allow (the evicted host's ranks go to a spare, so its checkpoint shards are read by
    the same ranks), else comes back smaller when relaunch_plan_for allows it (the reference
    trainer maps the larger world's checkpoint; a user script needs `allow_shrink`), else raises
    LaunchError with the plan's reason (nothing is stopped).
    """
    from trainctl.ops.evict.relaunch_plan import PlanKind
    from trainctl.rundir import read_run_info

    run = Path(run_dir).resolve()
    opts = launch_options(run)
    info = read_run_info(run)
    plan, _ = relaunch_plan_for(
        run, exclude, spares=spares, quarantined=quarantined, allow_shrink=allow_shrink, opts=opts
    )
    if plan.kind is PlanKind.STOP:
        raise LaunchError(f"cannot relaunch {run} without {','.join(exclude)}: {plan.reason}")
    current, spare_list = _hosts_and_spares(info, opts, spares)
    if allow_shrink and not opts.params.get("allow_shrink"):
        opts = replace(opts, params={**opts.params, "allow_shrink": True})  # the relaunched run may shrink again
    tp = int(info.layout["tp"]) if info is not None and info.layout.get("tp") else None
    stopped = stop_run(opts, current, grace_s=stop_grace_s)
    new_dir = next_run_dir(run)
    remote_new = f"{str(opts.remote_run_dir).rstrip('/')}-{Path(new_dir).name.rsplit('-', 1)[-1]}"
    left = [s for s in spare_list if s not in plan.hosts]
    handle = start_relaunch(
        opts,
        hosts=plan.hosts,
        spares=left,
        run_dir=new_dir,
        remote_run_dir=remote_new,
        trainctl=trainctl,
        env=env,
        tp=tp,
    )
    return plan, stopped, handle
