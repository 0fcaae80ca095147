"""Typed actions: what a step does, built from its rendered `with:` and checked before anything runs.

One frozen dataclass per StepType (the one set of action kinds, trainctl.ops.playbook.model). The
planner builds them (`build_action`), the executor performs them, and each knows the trainctl
command line that does the same by hand (`command()`), which the dry-run plan and the audit show.

Values rendered from templates are data. They are never split as shell words or parsed by a
shell, and a value that comes from a step's outputs (findings quote log lines, hosts come from
diagnoses) may not start an argument with '-': it could otherwise become an option of the program
it is passed to. Hosts to evict are checked by trainctl.ops.evict.targets (no ALL, selectors,
options or globs; members of the run). Operator-given values (`inputs`, `run`, `incident`,
`trigger`) are trusted like the playbook's own text.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trainctl.errors import PlaybookError, TrainctlError
from trainctl.ops.evict.schedulers import SchedulerKind
from trainctl.ops.evict.targets import check_host_name, expand_targets, resolve_targets
from trainctl.ops.playbook.expr import template_roots
from trainctl.ops.playbook.model import RESERVED_ROOTS, Step, StepType

__all__ = [
    "ActionInvalid",
    "CollectAction",
    "DiagnoseAction",
    "ProbeAction",
    "EvictAction",
    "RelaunchAction",
    "NotifyAction",
    "AskAction",
    "Action",
    "build_action",
    "host_list",
    "evict_wait_timeout_s",
]

TRUSTED_ROOTS = frozenset(RESERVED_ROOTS)  # the operator's and trainctl's own values, not a step's outputs
TC = "trainctl"


class ActionInvalid(PlaybookError):
    """A step's rendered parameters cannot make a safe action (the message names the step, value and fix)."""


def host_list(value: Any) -> list[str]:
    """Hosts as written or rendered: a list (flattened), or a comma list / hostlist in one string."""
    if value is None or value == "":
        return []
    if isinstance(value, str):
        return [value.strip()] if value.strip() else []
    if isinstance(value, (list, tuple)):
        hosts: list[str] = []
        for v in value:
            for h in host_list(v):
                if h not in hosts:
                    hosts.append(h)
        return hosts
    return [str(value)]


def _checked_hosts(sid: str, field_: str, value: Any) -> tuple[str, ...]:
    """Hosts that reach SSH or a scheduler: one plain host name each (a hostlist is expanded)."""
    out: list[str] = []
    for spec in host_list(value):
        try:
            out += [h for h in expand_targets(spec) if h not in out]
        except TrainctlError as exc:
            raise ActionInvalid(f"step {sid!r}: with.{field_}: {exc}") from None
    return tuple(out)


def _argv(sid: str, field_: str, raw: Any, rendered: Any) -> tuple[str, ...]:
    """An argv list: one rendered item per argument, none from a step's outputs starting with '-'."""
    if isinstance(raw, str):  # the whole list is one template, e.g. ${inputs.relaunch_args}
        if not isinstance(rendered, list):
            raise ActionInvalid(f"step {sid!r}: with.{field_} renders to {rendered!r}, not a list; pass a list")
        pairs = [(raw, item) for item in rendered]
    else:
        pairs = list(zip(raw, rendered))
    out: list[str] = []
    for raw_item, item in pairs:
        if isinstance(item, (list, tuple, dict)) or item is None:
            raise ActionInvalid(
                f"step {sid!r}: with.{field_} item {raw_item!r} renders to {item!r}; each item must be one argument"
            )
        text = ("true" if item else "false") if isinstance(item, bool) else str(item)
        from_outputs = sorted(template_roots(raw_item) - TRUSTED_ROOTS) if isinstance(raw_item, str) else []
        if from_outputs and text.startswith("-") and raw_item.lstrip().startswith("${"):
            raise ActionInvalid(
                f"step {sid!r}: with.{field_} item {text[:60]!r} comes from {', '.join(from_outputs)} and starts "
                "with '-'; a value from a finding or log can never become an option"
            )
        out.append(text)
    return tuple(out)


def _bool(sid: str, key: str, value: Any, default: bool) -> bool:
    if value is None:
        return default
    if isinstance(value, bool):
        return value
    raise ActionInvalid(f"step {sid!r}: with.{key} renders to {value!r}, not yes/no")


def _number(sid: str, key: str, value: Any, default: float, *, integer: bool = False) -> float:
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not (value > 0) or value != value:
        raise ActionInvalid(f"step {sid!r}: with.{key} renders to {value!r}, not a positive number")
    if integer and int(value) != value:
        raise ActionInvalid(f"step {sid!r}: with.{key} renders to {value!r}, not a whole number")
    return int(value) if integer else float(value)


@dataclass(frozen=True)
class CollectAction:
    kind = StepType.COLLECT
    where: str  # the run dir on the hosts (a `launch --hosts` run's remote dir), or the local run dir
    hosts: tuple[str, ...]
    out: str
    ssh_config: str | None = None
    kinds: tuple[str, ...] | None = None
    live: bool = False  # a live run: dump every rank's Flight Recorder and stacks first

    def command(self) -> tuple[str, ...]:
        extra = ["--ssh-config", self.ssh_config] if self.ssh_config else []
        extra += ["--kinds", ",".join(self.kinds)] if self.kinds else []
        return (TC, "collect", self.where, "--hosts", ",".join(self.hosts), "--out", self.out, "--json", *extra)


@dataclass(frozen=True)
class DiagnoseAction:
    kind = StepType.DIAGNOSE
    path: str

    def command(self) -> tuple[str, ...]:
        return (TC, "diagnose", self.path, "--json", "--fail-on", "never")


@dataclass(frozen=True)
class ProbeAction:
    kind = StepType.PROBE
    hosts: tuple[str, ...]
    local: bool = True
    nproc_per_host: int = 1
    size_bytes: int | None = None  # None: the probe's own default (it depends on the backend)
    iters: int = 5
    slow_host: str | None = None
    slow_delay_s: float = 0.2
    ssh_config: str | None = None
    workdir: str | None = None
    env: Mapping[str, str] = field(default_factory=dict)

    def command(self) -> tuple[str, ...]:
        return (TC, "playbook", "probe", "--hosts", ",".join(self.hosts), *(() if self.local else ("--ssh",)))


@dataclass(frozen=True)
class EvictAction:
    kind = StepType.EVICT_NODE
    targets: tuple[str, ...]  # checked names (expanded hostlists)
    reason: str
    run: str
    finding: str | Mapping[str, Any] | None = None  # a finding file, or the finding itself
    relaunch: bool = False
    spares: tuple[str, ...] = ()
    allow_shrink: bool = False
    scheduler: SchedulerKind | None = None
    wait_timeout_s: float | None = None  # with a relaunch: how long to wait for the relaunched run

    def command(self) -> tuple[str, ...]:
        argv = [TC, "evict-node", ",".join(self.targets), "--reason", self.reason, "--run", self.run, "--json"]
        if isinstance(self.finding, str) and self.finding:
            argv += ["--finding", f"@{self.finding}"]
        if self.relaunch:
            # the executor's own gate (--yes or a confirmation) already allowed this destructive step
            argv += ["--relaunch", "--yes"]
            if self.wait_timeout_s:
                argv += ["--wait-timeout", str(int(self.wait_timeout_s))]
            if self.allow_shrink:  # a user script may come back smaller (the reference trainer always may)
                argv += ["--allow-shrink"]
        if self.spares:
            argv += ["--spares", ",".join(self.spares)]
        if self.scheduler is not None:
            argv += ["--scheduler", self.scheduler.value]
        return tuple(argv)

    def describe(self) -> str:
        return f"evict {','.join(self.targets)}" + (" and relaunch the run" if self.relaunch else "")


@dataclass(frozen=True)
class RelaunchAction:
    kind = StepType.RELAUNCH
    args: tuple[str, ...]

    def command(self) -> tuple[str, ...]:
        return (TC, "launch", *self.args)

    def describe(self) -> str:
        return "relaunch the run: trainctl launch " + " ".join(self.args)


@dataclass(frozen=True)
class NotifyAction:
    kind = StepType.NOTIFY
    message: str
    url: str | None = None  # None or "": no notification target configured (the audit keeps the message)
    command_argv: tuple[str, ...] | None = None
    severity: str = "info"
    evidence: tuple[Mapping[str, Any], ...] = ()

    @property
    def destructive(self) -> bool:
        return bool(self.command_argv)  # runs a program on this machine: gated like evict-node

    def command(self) -> tuple[str, ...]:
        if self.command_argv:
            return self.command_argv
        return ("POST", self.url) if self.url else ()

    def describe(self) -> str:
        return "run the notify command " + " ".join(self.command_argv or ())


@dataclass(frozen=True)
class AskAction:
    kind = StepType.ASK
    prompt: str
    default: bool = False

    def command(self) -> tuple[str, ...]:
        return ("ask", self.prompt)


Action = CollectAction | DiagnoseAction | ProbeAction | EvictAction | RelaunchAction | NotifyAction | AskAction


def evict_wait_timeout_s(step_timeout_s: float) -> float:
    """A relaunch waits for the new run for most of the step's time, leaving a minute for the rest."""
    return max(step_timeout_s - 60, 30)


def _run_members(ctx: Mapping[str, Any], spares: Sequence[str]) -> frozenset[str] | None:
    run = ctx.get("run") or {}
    hosts = list(run.get("hosts") or [])
    if not hosts:
        return None
    return frozenset(hosts) | frozenset(run.get("spares") or []) | frozenset(spares)


def build_action(step: Step, args: Mapping[str, Any], ctx: Mapping[str, Any], *, timeout_s: float) -> Action:
    """The typed action of `step` from its rendered `args`; ActionInvalid when a value is not safe to act on."""
    sid, t, raw = step.id, step.type, step.with_
    run = ctx.get("run") or {}
    run_dir = str(run.get("dir", ""))
    if t is StepType.DIAGNOSE:
        return DiagnoseAction(str(args.get("path") or run_dir))
    if t is StepType.COLLECT:
        hosts = _checked_hosts(sid, "hosts", args.get("hosts")) or _checked_hosts(sid, "run.hosts", run.get("hosts"))
        kinds = args.get("kinds")
        return CollectAction(
            # a `launch --hosts` run lives at its remote run dir on every host; a --local run is here
            where=str(run.get("remote_dir") or run_dir),
            hosts=hosts,
            out=str(args.get("out") or Path(str((ctx.get("incident") or {}).get("dir", "."))) / "dataset"),
            ssh_config=str(run["ssh_config"]) if run.get("ssh_config") else None,
            kinds=tuple(host_list(kinds)) if kinds else None,
            live=bool(run.get("live")),
        )
    if t is StepType.PROBE:
        hosts = _checked_hosts(sid, "hosts", args.get("hosts")) or _checked_hosts(sid, "run.hosts", run.get("hosts"))
        env = args.get("env") or {}
        if not isinstance(env, Mapping):
            raise ActionInvalid(f"step {sid!r}: with.env renders to {env!r}, not a mapping")
        slow = args.get("slow_host")
        return ProbeAction(
            hosts=hosts,
            local=_bool(sid, "local", args.get("local"), True),
            nproc_per_host=int(_number(sid, "nproc_per_host", args.get("nproc_per_host"), 1, integer=True)),
            size_bytes=(
                int(_number(sid, "size_bytes", args["size_bytes"], 1, integer=True)) if args.get("size_bytes") else None
            ),
            iters=int(_number(sid, "iters", args.get("iters"), 5, integer=True)),
            slow_host=check_host_name(str(slow)) if slow else None,
            slow_delay_s=_number(sid, "slow_delay_s", args.get("slow_delay_s"), 0.2),
            ssh_config=str(args.get("ssh_config") or run.get("ssh_config") or "") or None,
            workdir=str(args["workdir"]) if args.get("workdir") else None,
            env={str(k): str(v) for k, v in env.items()},
        )
    if t is StepType.EVICT_NODE:
        spares = _checked_hosts(sid, "spares", args.get("spares"))
        specs = host_list(args.get("hosts"))
        if not specs:
            raise ActionInvalid(
                f"step {sid!r}: no host to evict (the hosts expression is empty); guard the step with `when:` on the culprit"
            )
        try:
            targets = resolve_targets(specs, members=_run_members(ctx, spares), run_label=str(run.get("id") or run_dir))
        except TrainctlError as exc:
            raise ActionInvalid(f"step {sid!r}: {exc}") from None
        sched = args.get("scheduler")
        try:
            scheduler = SchedulerKind(sched) if sched else None
        except ValueError:
            raise ActionInvalid(f"step {sid!r}: with.scheduler {sched!r} is not none, slurm or k8s") from None
        finding = args.get("finding")
        if finding is not None and not isinstance(finding, (str, Mapping)):
            raise ActionInvalid(f"step {sid!r}: with.finding renders to {finding!r}, not a finding file or finding")
        relaunch = _bool(sid, "relaunch", args.get("relaunch"), False)
        return EvictAction(
            targets=targets,
            reason=str(args.get("reason") or ""),
            run=run_dir,
            finding=finding or None,
            relaunch=relaunch,
            spares=spares,
            allow_shrink=_bool(sid, "allow_shrink", args.get("allow_shrink"), False),
            scheduler=scheduler,
            wait_timeout_s=evict_wait_timeout_s(timeout_s) if relaunch else None,
        )
    if t is StepType.RELAUNCH:
        return RelaunchAction(_argv(sid, "args", raw.get("args"), args.get("args")))
    if t is StepType.NOTIFY:
        url = args.get("url")
        if url is not None and not isinstance(url, str):
            raise ActionInvalid(f"step {sid!r}: with.url renders to {url!r}, not a URL")
        cmd = _argv(sid, "command", raw["command"], args.get("command")) if raw.get("command") else None
        if url and "://" not in url:
            raise ActionInvalid(f"step {sid!r}: notify url {url[:20]!r}... is not a URL; write scheme://...")
        return NotifyAction(str(args.get("message", "")), url or None, cmd)
    if t is StepType.ASK:
        return AskAction(str(args.get("prompt", "")), _bool(sid, "default", args.get("default"), False))
    raise AssertionError(t)


def _evict_args(
    host: str, args: Mapping[str, Any], run: Path, *, relaunch: bool | None = None, wait_timeout_s: float | None = None
) -> list[str]:
    """The evict-node argv (less `trainctl`) for `host` with a step's rendered `args`: the command the audit shows."""
    rl = bool(args.get("relaunch")) if relaunch is None else relaunch
    action = EvictAction(
        targets=(check_host_name(host),),
        reason=str(args.get("reason")),
        run=str(run),
        finding=args.get("finding"),
        relaunch=rl,
        spares=tuple(host_list(args.get("spares"))),
        allow_shrink=bool(args.get("allow_shrink")),
        scheduler=SchedulerKind(args["scheduler"]) if args.get("scheduler") else None,
        wait_timeout_s=wait_timeout_s if rl else None,
    )
    return list(action.command()[1:])
