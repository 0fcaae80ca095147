"""Runbooks: the YAML schema, its validation (file:line + fix), the engine, and the audit log.

A runbook chains trainctl's own commands for one incident type. Each step calls the stable CLI
contract (DESIGN.md) as a subprocess and parses its JSON and exit code, so runbooks keep working
while the commands behind them change, and an SRE can re-type any step by hand from the audit.

Safety rules the engine enforces, whatever the YAML says:
- `evict-node` and `relaunch` steps are destructive (derived from the type, never declared): they
  run only with `--yes` or an interactive "yes"; a non-interactive run without `--yes` refuses.
- `--dry-run` executes only read-only steps that write nothing (diagnose), prints every other
  step's resolved command as the plan, and writes no incident dir, audit or ledger entry.
- Every executed step appends one JSON record to RUN/incidents/<incident>/audit.jsonl (inputs,
  outputs, decision, timestamps, duration); `--resume INCIDENT` replays completed steps' outputs
  from it and runs only what did not finish.
"""

from __future__ import annotations

import json
import logging
import os
import shlex
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import Enum
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from trainctl.errors import PlaybookError, PlaybookInvalid
from trainctl.exit_codes import ExitCode
from trainctl.findings import Category, FindingKind
from trainctl.ops.playbook.expr import Expr, ExprError, evaluate, parse, render, template_roots
from trainctl.rundir import atomic_write_text, read_run_info

logger = logging.getLogger(__name__)

__all__ = [
    "StepType",
    "FailureAction",
    "OnFailure",
    "Step",
    "Trigger",
    "Runbook",
    "load_runbook",
    "parse_runbook",
    "builtin_names",
    "load_builtin",
    "find_runbook",
    "RunOptions",
    "StepRecord",
    "RunbookResult",
    "run_runbook",
    "read_audit",
]

AUDIT_FILE = "audit.jsonl"
RESERVED_ROOTS = ("run", "incident", "inputs", "trigger")


class StepType(str, Enum):
    COLLECT = "collect"
    DIAGNOSE = "diagnose"
    PROBE = "probe"
    EVICT_NODE = "evict-node"
    RELAUNCH = "relaunch"
    NOTIFY = "notify"
    ASK = "ask"

    @property
    def destructive(self) -> bool:
        """Changes the fleet or the job: needs --yes or a confirmation, never runs in --dry-run."""
        return self in (StepType.EVICT_NODE, StepType.RELAUNCH)

    @property
    def dry_run_safe(self) -> bool:
        """Read-only and writes nothing: executed even in --dry-run so the plan shows real culprits."""
        return self is StepType.DIAGNOSE


# Per-type default timeouts (seconds); a step's `timeout_s` overrides, the runbook's caps.
DEFAULT_TIMEOUT_S: Mapping[StepType, float] = {
    StepType.COLLECT: 900,
    StepType.DIAGNOSE: 600,
    StepType.PROBE: 600,
    StepType.EVICT_NODE: 300,
    StepType.RELAUNCH: 600,
    StepType.NOTIFY: 30,
    StepType.ASK: 600,
}

# The keys each step type accepts under `with:` (anything else is a typo and is rejected).
WITH_KEYS: Mapping[StepType, frozenset[str]] = {
    StepType.COLLECT: frozenset({"hosts", "out", "args"}),
    StepType.DIAGNOSE: frozenset({"path"}),
    StepType.PROBE: frozenset(
        {
            "hosts",
            "local",
            "nproc_per_host",
            "size_bytes",
            "iters",
            "slow_host",
            "slow_delay_s",
            "ssh_config",
            "workdir",
            "env",
        }
    ),
    StepType.EVICT_NODE: frozenset({"hosts", "reason", "finding", "relaunch", "spares", "allow_shrink", "scheduler"}),
    StepType.RELAUNCH: frozenset({"args"}),
    StepType.NOTIFY: frozenset({"message", "command", "url"}),
    StepType.ASK: frozenset({"prompt", "default"}),
}
REQUIRED_WITH: Mapping[StepType, frozenset[str]] = {
    StepType.EVICT_NODE: frozenset({"hosts", "reason"}),
    StepType.RELAUNCH: frozenset({"args"}),
    StepType.NOTIFY: frozenset({"message"}),
    StepType.ASK: frozenset({"prompt"}),
}


class FailureAction(str, Enum):
    STOP = "stop"
    CONTINUE = "continue"
    GOTO = "goto"


@dataclass(frozen=True)
class OnFailure:
    action: FailureAction = FailureAction.STOP
    target: str | None = None  # step id for GOTO

    def __str__(self) -> str:
        return f"goto {self.target}" if self.action is FailureAction.GOTO else self.action.value


@dataclass(frozen=True)
class Step:
    id: str
    type: StepType
    with_: Mapping[str, Any] = field(default_factory=dict)
    when: Expr | None = None
    timeout_s: float | None = None
    on_failure: OnFailure = OnFailure()
    description: str = ""
    line: int = 0

    @property
    def destructive(self) -> bool:
        return self.type.destructive


@dataclass(frozen=True)
class Trigger:
    kinds: tuple[FindingKind, ...] = ()
    categories: tuple[Category, ...] = ()

    def matches(self, finding: Mapping[str, Any]) -> bool:
        if self.kinds and finding.get("kind") not in {k.value for k in self.kinds}:
            return False
        if self.categories and finding.get("category") not in {c.value for c in self.categories}:
            return False
        return True

    def to_dict(self) -> dict[str, list[str]]:
        return {"kinds": [k.value for k in self.kinds], "categories": [c.value for c in self.categories]}


@dataclass(frozen=True)
class Runbook:
    name: str
    description: str
    trigger: Trigger
    steps: tuple[Step, ...]
    inputs: Mapping[str, Any] = field(default_factory=dict)  # name -> default
    timeout_s: float | None = None
    source: str = ""

    def step_index(self, step_id: str) -> int:
        return next(i for i, s in enumerate(self.steps) if s.id == step_id)


# ---------------------------------------------------------------- loading and validation


def _compose_with_lines(text: str, source: str) -> tuple[Any, dict[tuple, int]]:
    """Parse YAML keeping each value's 1-based line, keyed by its path (("steps", 2, "type"))."""
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
        line = mark.line + 1 if mark else 1
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise PlaybookInvalid(
            f"{source}:{line}: not valid YAML ({problem}); fix the indentation or quoting on that line"
        ) from exc
    lines: dict[tuple, int] = {}
    constructor = yaml.SafeLoader("")  # construct scalars with YAML 1.1 rules (yes/no, numbers)

    def build(n: yaml.Node, path: tuple) -> Any:
        lines[path] = n.start_mark.line + 1
        if isinstance(n, yaml.MappingNode):
            d: dict[Any, Any] = {}
            for k, v in n.value:
                key = constructor.construct_object(k, deep=True)
                if key in d:
                    raise PlaybookInvalid(f"{source}:{k.start_mark.line + 1}: key {key!r} appears twice; keep one")
                lines[path + (key, "__key__")] = k.start_mark.line + 1
                d[key] = build(v, path + (key,))
            return d
        if isinstance(n, yaml.SequenceNode):
            return [build(v, path + (i,)) for i, v in enumerate(n.value)]
        return constructor.construct_object(n, deep=True)

    if node is None:
        raise PlaybookInvalid(f"{source}:1: the file is empty; a runbook needs name, description, trigger and steps")
    return build(node, ()), lines


class _Validator:
    def __init__(self, source: str, lines: Mapping[tuple, int]) -> None:
        self.source = source
        self.lines = lines

    def fail(self, path: tuple, what: str, fix: str) -> None:
        p = path
        while p and p not in self.lines:
            p = p[:-1]
        # the key's line (`with:`) reads better than the first line of its block
        line = self.lines.get(p + ("__key__",)) or self.lines.get(p, 1)
        raise PlaybookInvalid(f"{self.source}:{line}: {what}; {fix}")

    def key_fail(self, path: tuple, what: str, fix: str) -> None:
        key_path = path + ("__key__",)
        line = self.lines.get(key_path) or self.lines.get(path, 1)
        raise PlaybookInvalid(f"{self.source}:{line}: {what}; {fix}")


_TOP_KEYS = {"name", "description", "trigger", "inputs", "steps", "timeout_s"}
_STEP_KEYS = {"id", "type", "with", "when", "timeout_s", "on_failure", "description"}


def parse_runbook(text: str, source: str = "<runbook>") -> Runbook:
    data, lines = _compose_with_lines(text, source)
    v = _Validator(source, lines)
    if not isinstance(data, dict):
        v.fail(
            (),
            "a runbook is a mapping (name:, description:, trigger:, steps:)",
            "start the file with `name: my-runbook`",
        )
    for key in data:
        if key not in _TOP_KEYS:
            v.key_fail((key,), f"unknown key {key!r}", f"use one of {', '.join(sorted(_TOP_KEYS))}")
    for key in ("name", "description", "steps"):
        if key not in data:
            v.fail((), f"missing required key {key!r}", f"add `{key}:` at the top level")
    name = data["name"]
    if not isinstance(name, str) or not name.replace("-", "").replace("_", "").isalnum():
        v.fail(("name",), f"name {name!r} is not a plain name", "use letters, digits and dashes, e.g. hung-collective")
    if not isinstance(data["description"], str):
        v.fail(("description",), "description must be text", "write one sentence saying when to use this runbook")

    trig = data.get("trigger") or {}
    if not isinstance(trig, dict):
        v.fail(("trigger",), "trigger must be a mapping", "write `trigger: {kinds: [hung_collective]}`")
    for key in trig:
        if key not in ("kinds", "categories"):
            v.key_fail(("trigger", key), f"unknown trigger key {key!r}", "use kinds: [...] and/or categories: [...]")
    kinds = _enum_list(v, trig.get("kinds", []), ("trigger", "kinds"), FindingKind, "finding kind")
    cats = _enum_list(v, trig.get("categories", []), ("trigger", "categories"), Category, "category")

    inputs_raw = data.get("inputs") or {}
    if not isinstance(inputs_raw, dict):
        v.fail(
            ("inputs",),
            "inputs must be a mapping of name -> {default, description}",
            "write `inputs: {reason: {default: hung}}`",
        )
    inputs: dict[str, Any] = {}
    for iname, spec in inputs_raw.items():
        if isinstance(spec, dict):
            for k in spec:
                if k not in ("default", "description"):
                    v.key_fail(
                        ("inputs", iname, k), f"unknown key {k!r} in input {iname!r}", "use default: and description:"
                    )
            inputs[str(iname)] = spec.get("default")
        else:
            inputs[str(iname)] = spec

    timeout_s = _positive(v, data.get("timeout_s"), ("timeout_s",))

    steps_raw = data["steps"]
    if not isinstance(steps_raw, list) or not steps_raw:
        v.fail(("steps",), "steps must be a non-empty list", "add `- id: diagnose\n    type: diagnose`")
    steps: list[Step] = []
    seen: set[str] = set()
    for i, raw in enumerate(steps_raw):
        path = ("steps", i)
        if not isinstance(raw, dict):
            v.fail(path, f"step {i + 1} is not a mapping", "write `- id: NAME` then `type: TYPE` under it")
        for key in raw:
            if key not in _STEP_KEYS:
                v.key_fail(
                    path + (key,),
                    f"unknown step key {key!r}",
                    f"use one of {', '.join(sorted(_STEP_KEYS))} (parameters go under `with:`)",
                )
        sid = raw.get("id")
        if not isinstance(sid, str) or not sid.replace("-", "_").isidentifier() or "-" in sid:
            v.fail(
                path + ("id",) if "id" in raw else path,
                f"step {i + 1} has id {sid!r}",
                "give it an id of letters, digits and underscores (conditions refer to it)",
            )
        if sid in seen:
            v.fail(path + ("id",), f"step id {sid!r} is used twice", "give every step its own id")
        if sid in RESERVED_ROOTS:
            v.fail(
                path + ("id",),
                f"step id {sid!r} is reserved",
                f"rename it; {', '.join(RESERVED_ROOTS)} are built-in names",
            )
        if "type" not in raw:
            v.fail(path, f"step {sid!r} has no type", f"add `type:` with one of {', '.join(t.value for t in StepType)}")
        try:
            stype = StepType(raw["type"])
        except ValueError:
            v.fail(
                path + ("type",),
                f"step {sid!r} has unknown type {raw['type']!r}",
                f"use one of {', '.join(t.value for t in StepType)}",
            )
        with_ = raw.get("with") or {}
        if not isinstance(with_, dict):
            v.fail(path + ("with",), f"step {sid!r}: with must be a mapping", "write `with: {key: value}`")
        for key in with_:
            if key not in WITH_KEYS[stype]:
                v.key_fail(
                    path + ("with", key),
                    f"step {sid!r} ({stype.value}) does not take {key!r}",
                    f"use {', '.join(sorted(WITH_KEYS[stype]))}",
                )
        for key in REQUIRED_WITH.get(stype, ()):
            if key not in with_:
                v.fail(
                    path + ("with",) if "with" in raw else path,
                    f"step {sid!r} ({stype.value}) needs with.{key}",
                    f"add `{key}:` under `with:`",
                )
        if stype is StepType.NOTIFY and not ("command" in with_ or "url" in with_):
            v.fail(
                path + ("with",),
                f"notify step {sid!r} has neither command nor url",
                "add `command: [...]` or `url: http://...`",
            )
        if stype is StepType.ASK and "default" in with_ and not isinstance(with_["default"], bool):
            v.fail(
                path + ("with", "default"),
                f"ask step {sid!r}: default {with_['default']!r} is not yes/no",
                "write `default: no` (the answer of unattended runs)",
            )
        try:
            roots = template_roots(with_)
        except ExprError as exc:
            v.fail(
                path + ("with",),
                f"step {sid!r}: bad ${{...}} template: {exc}",
                "see docs/playbooks.md for the expression grammar",
            )
        _check_roots(v, path + ("with",), sid, roots, seen, inputs)
        when = None
        if "when" in raw:
            if not isinstance(raw["when"], (str, bool)):
                v.fail(
                    path + ("when",), f"step {sid!r}: when must be an expression", "write e.g. `when: diagnose.hosts`"
                )
            try:
                when = parse(str(raw["when"]).lower() if isinstance(raw["when"], bool) else raw["when"])
            except ExprError as exc:
                v.fail(
                    path + ("when",),
                    f"step {sid!r}: when does not parse: {exc}",
                    "see docs/playbooks.md for the expression grammar",
                )
            _check_roots(v, path + ("when",), sid, when.roots(), seen, inputs)
        on_failure = _on_failure(v, raw.get("on_failure", "stop"), path + ("on_failure",), sid)
        steps.append(
            Step(
                id=sid,
                type=stype,
                with_=with_,
                when=when,
                timeout_s=_positive(v, raw.get("timeout_s"), path + ("timeout_s",)),
                on_failure=on_failure,
                description=str(raw.get("description", "")),
                line=lines.get(path, 0),
            )
        )
        seen.add(sid)
    ids = {s.id for s in steps}
    for i, s in enumerate(steps):
        if s.on_failure.action is FailureAction.GOTO and s.on_failure.target not in ids:
            v.fail(
                ("steps", i, "on_failure"),
                f"step {s.id!r}: on_failure goes to unknown step {s.on_failure.target!r}",
                f"use one of {', '.join(sorted(ids))}",
            )
    return Runbook(
        name=name,
        description=data["description"],
        trigger=Trigger(kinds, cats),
        steps=tuple(steps),
        inputs=inputs,
        timeout_s=timeout_s,
        source=source,
    )


def _enum_list(v: _Validator, raw: Any, path: tuple, enum: type[Enum], what: str) -> tuple:
    if isinstance(raw, str):
        raw = [raw]
    if not isinstance(raw, list):
        v.fail(path, f"{path[-1]} must be a list", f"write `{path[-1]}: [a, b]`")
    outv = []
    for i, item in enumerate(raw):
        try:
            outv.append(enum(item))
        except ValueError:
            v.fail(path + (i,), f"unknown {what} {item!r}", f"use one of {', '.join(e.value for e in enum)}")
    return tuple(outv)


def _positive(v: _Validator, raw: Any, path: tuple) -> float | None:
    if raw is None:
        return None
    if isinstance(raw, bool) or not isinstance(raw, (int, float)) or raw <= 0:
        v.fail(path, f"{path[-1]} {raw!r} is not a positive number of seconds", f"write e.g. `{path[-1]}: 300`")
    return float(raw)


def _on_failure(v: _Validator, raw: Any, path: tuple, sid: str) -> OnFailure:
    if isinstance(raw, str):
        parts = raw.split()
        if parts == ["stop"]:
            return OnFailure(FailureAction.STOP)
        if parts == ["continue"]:
            return OnFailure(FailureAction.CONTINUE)
        if len(parts) == 2 and parts[0] == "goto":
            return OnFailure(FailureAction.GOTO, parts[1])
    v.fail(path, f"step {sid!r}: on_failure {raw!r} is not understood", "write `stop`, `continue` or `goto STEP_ID`")
    raise AssertionError


def _check_roots(
    v: _Validator, path: tuple, sid: str, roots: set[str], earlier: set[str], inputs: Mapping[str, Any]
) -> None:
    for root in sorted(roots):
        if root in RESERVED_ROOTS or root in earlier:
            continue
        v.fail(
            path,
            f"step {sid!r} refers to {root!r}, which is not an earlier step",
            f"use an earlier step's id or one of {', '.join(RESERVED_ROOTS)} (steps run top to bottom)",
        )


def load_runbook(path: str | os.PathLike[str]) -> Runbook:
    p = Path(path)
    try:
        text = p.read_text()
    except OSError as exc:
        raise PlaybookInvalid(
            f"{p}: cannot read ({exc.strerror}); pass a runbook YAML file or a built-in name"
        ) from exc
    return parse_runbook(text, str(p))


def builtin_names() -> list[str]:
    root = resources.files("trainctl.playbooks")
    return sorted(e.name[: -len(".yaml")] for e in root.iterdir() if e.name.endswith(".yaml"))


def load_builtin(name: str) -> Runbook:
    entry = resources.files("trainctl.playbooks") / f"{name}.yaml"
    if not entry.is_file():
        raise PlaybookError(
            f"no built-in runbook {name!r}; `trainctl playbook list` shows {', '.join(builtin_names())}"
        )
    return parse_runbook(entry.read_text(), f"playbooks/{name}.yaml")


def find_runbook(name_or_path: str) -> Runbook:
    """A built-in name, or a path to a YAML file (a team's own runbook)."""
    if name_or_path.endswith((".yaml", ".yml")) or os.sep in name_or_path:
        return load_runbook(name_or_path)
    return load_builtin(name_or_path)


# ---------------------------------------------------------------- running


def trainctl_argv() -> list[str]:
    """How steps call trainctl: TRAINCTL_CMD if set, else the console script of this Python."""
    if os.environ.get("TRAINCTL_CMD"):
        return shlex.split(os.environ["TRAINCTL_CMD"])
    script = Path(sys.executable).parent / "trainctl"
    if script.is_file():
        return [str(script)]
    return [sys.executable, "-c", "from trainctl.cli.app import main; main()"]


Confirm = Callable[[str, bool], bool]  # (question, default) -> answer


@dataclass(frozen=True)
class RunOptions:
    dry_run: bool = False
    yes: bool = False
    interactive: bool = False  # a person at a terminal can answer questions
    confirm: Confirm | None = None
    resume: str | None = None  # incident id
    inputs: Mapping[str, Any] = field(default_factory=dict)
    incident_id: str | None = None  # chosen by the caller (tests); default: time + runbook name


class StepStatus(str, Enum):
    OK = "ok"
    FAILED = "failed"
    SKIPPED = "skipped"
    REFUSED = "refused"
    PLANNED = "planned"  # --dry-run: would run


@dataclass(frozen=True)
class StepRecord:
    """One audit line: what a step was given, what it did and why."""

    step: str
    type: str
    destructive: bool
    status: StepStatus
    decision: str
    inputs: Mapping[str, Any] = field(default_factory=dict)
    outputs: Mapping[str, Any] = field(default_factory=dict)
    command: tuple[str, ...] = ()
    exit_code: int | None = None
    error: str | None = None
    started_ts: str = ""
    ended_ts: str = ""
    duration_s: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "event": "step",
            "step": self.step,
            "type": self.type,
            "destructive": self.destructive,
            "status": self.status.value,
            "decision": self.decision,
            "inputs": _plain(self.inputs),
            "outputs": _plain(self.outputs),
            "command": list(self.command),
            "exit_code": self.exit_code,
            "error": self.error,
            "started_ts": self.started_ts,
            "ended_ts": self.ended_ts,
            "duration_s": round(self.duration_s, 3),
        }


@dataclass(frozen=True)
class RunbookResult:
    runbook: str
    incident_id: str | None
    audit_path: Path | None
    dry_run: bool
    records: tuple[StepRecord, ...]
    completed: bool

    def to_dict(self) -> dict[str, Any]:
        return {
            "runbook": self.runbook,
            "incident": self.incident_id,
            "dry_run": self.dry_run,
            "audit": str(self.audit_path) if self.audit_path else None,
            "completed": self.completed,
            "steps": [r.to_dict() for r in self.records],
        }


class _StepFailed(Exception):
    def __init__(
        self,
        message: str,
        outputs: Mapping[str, Any] | None = None,
        command: Sequence[str] = (),
        exit_code: int | None = None,
    ):
        super().__init__(message)
        self.outputs = dict(outputs or {})
        self.command = tuple(command)
        self.exit_code = exit_code


def _now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


def _plain(value: Any) -> Any:
    return json.loads(json.dumps(value, default=str))


def read_audit(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    records = []
    for n, line in enumerate(Path(path).read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            records.append(json.loads(line))
        except ValueError:
            # The last line of an interrupted run may be half-written; everything before it holds.
            logger.warning("%s:%d: skipping a truncated audit record", path, n)
    return records


class _Audit:
    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)

    def append(self, doc: Mapping[str, Any]) -> None:
        # One write per record, flushed and fsynced: an interrupted run leaves whole lines behind.
        with open(self.path, "a") as f:
            f.write(json.dumps(_plain(doc)) + "\n")
            f.flush()
            os.fsync(f.fileno())


def _launch_context(run: Path) -> dict[str, Any]:
    """What a `launch --hosts` run's steps need: ssh config, run dir on the hosts, spares, live supervisor.

    From RUN/launch.json or the live supervisor's command line (trainctl.ops.launch.run_control); a run
    started with --local has neither, and its steps work on the local run dir as before.
    """
    from trainctl.ops.launch import run_control

    if not (run / run_control.LAUNCH_RECORD).is_file() and not (run / "supervisor.jsonl").is_file():
        return {}
    try:
        lo = run_control.launch_options(run)
    except Exception as exc:  # noqa: BLE001 - a finished run: steps fall back to the local dir
        logger.info("no launch options for %s: %s", run, exc)
        return {}
    return {
        "ssh_config": lo.ssh_config,
        "remote_dir": lo.remote_run_dir,
        "spares": lo.spares,
        "supervisor_pid": lo.supervisor_pid,
        "live": lo.supervisor_pid is not None,
    }


def _incident_id(runbook: str) -> str:
    return f"inc-{datetime.now(UTC).strftime('%Y%m%d-%H%M%S')}-{runbook}-{os.getpid()}"


def _as_host_list(value: Any) -> list[str]:
    if value is None or value == "":
        return []
    if isinstance(value, str):
        return [h.strip() for h in value.split(",") if h.strip()]
    if isinstance(value, (list, tuple)):
        hosts: list[str] = []
        for v in value:
            for h in _as_host_list(v):
                if h not in hosts:
                    hosts.append(h)
        return hosts
    return [str(value)]


def run_runbook(
    runbook: Runbook,
    run_dir: str | os.PathLike[str],
    opts: RunOptions = RunOptions(),
    on_record: Callable[[StepRecord], None] | None = None,
) -> RunbookResult:
    """Run (or plan, with dry_run) the runbook against RUN_DIR; see the module docstring."""
    run = Path(run_dir).resolve()
    if not run.is_dir():
        raise PlaybookError(
            f"--run {run_dir}: not a directory; pass the --run-dir of `trainctl launch` (it holds run.json)"
        )
    info = read_run_info(run)
    run_hosts = [h.host for h in info.hosts] if info else []

    prior: dict[str, dict[str, Any]] = {}
    if opts.resume:
        incident_id = opts.resume
        audit_path = run / "incidents" / incident_id / AUDIT_FILE
        if not audit_path.is_file():
            raise PlaybookError(
                f"--resume {incident_id}: no {audit_path}; `ls {run / 'incidents'}` lists this run's incidents"
            )
        records = read_audit(audit_path)
        start = next((r for r in records if r.get("event") == "start"), None)
        if start and start.get("runbook") != runbook.name:
            raise PlaybookError(
                f"--resume {incident_id}: that incident ran runbook {start.get('runbook')!r}, not {runbook.name!r}; resume it with that runbook"
            )
        for r in records:
            if r.get("event") == "step":
                prior[r["step"]] = r  # the latest record of each step wins
    else:
        incident_id = opts.incident_id or _incident_id(runbook.name)
        audit_path = run / "incidents" / incident_id / AUDIT_FILE
    incident_dir = audit_path.parent

    inputs = dict(runbook.inputs)
    inputs.update(opts.inputs)
    ctx: dict[str, Any] = {
        "run": {"dir": str(run), "id": info.run_id if info else run.name, "hosts": run_hosts, **_launch_context(run)},
        "incident": {"id": incident_id, "dir": str(incident_dir)},
        "inputs": inputs,
        "trigger": runbook.trigger.to_dict(),
    }
    audit = None if opts.dry_run else _Audit(audit_path)
    if audit:
        audit.append(
            {
                "event": "resume" if opts.resume else "start",
                "runbook": runbook.name,
                "source": runbook.source,
                "run": str(run),
                "incident": incident_id,
                "inputs": inputs,
                "yes": opts.yes,
                "ts": _now_iso(),
            }
        )

    deadline = time.monotonic() + runbook.timeout_s if runbook.timeout_s else None
    records: list[StepRecord] = []
    planned: set[str] = set()  # dry-run: steps whose outputs are unknown
    i = 0
    budget = 4 * len(runbook.steps)  # goto loops end here rather than forever
    completed = True

    def emit(rec: StepRecord) -> None:
        records.append(rec)
        if audit:
            audit.append({**rec.to_dict(), "incident": incident_id, "runbook": runbook.name})
        if on_record:
            on_record(rec)

    while i < len(runbook.steps):
        budget -= 1
        if budget < 0:
            raise PlaybookError(
                f"{runbook.source}: on_failure goto loops did not end after {4 * len(runbook.steps)} steps; make the goto target a step that can succeed"
            )
        step = runbook.steps[i]
        started, t0 = _now_iso(), time.monotonic()

        done = prior.get(step.id)
        if done and done.get("status") in (StepStatus.OK.value, StepStatus.SKIPPED.value):
            ctx[step.id] = {**done.get("outputs", {}), "status": done["status"]}
            emit(
                StepRecord(
                    step.id,
                    step.type.value,
                    step.destructive,
                    StepStatus(done["status"]),
                    f"completed earlier in {incident_id} ({done.get('ended_ts', '?')}); reused its outputs on resume",
                    inputs=done.get("inputs", {}),
                    outputs=done.get("outputs", {}),
                    started_ts=started,
                    ended_ts=_now_iso(),
                )
            )
            i += 1
            continue

        unknown = (step.when.roots() if step.when else set()) & planned
        if step.when is not None and not unknown and not evaluate(step.when, ctx):
            ctx[step.id] = {"status": StepStatus.SKIPPED.value}
            emit(
                StepRecord(
                    step.id,
                    step.type.value,
                    step.destructive,
                    StepStatus.SKIPPED,
                    f"condition false: when {step.when.source}",
                    started_ts=started,
                    ended_ts=_now_iso(),
                )
            )
            i += 1
            continue
        args = render(step.with_, ctx)

        # A read-only step fed by a planned step (diagnose of `collect.out or run.dir`) previews on
        # what exists here; when that cannot run (a `launch --hosts` run: its signals are on the
        # hosts, nothing local to diagnose) it is planned with the rest instead of failing the plan.
        needs_planned: set[str] = set()
        preview = None
        if opts.dry_run and step.type.dry_run_safe and template_roots(step.with_) & planned:
            try:
                preview = _execute(
                    step, args, ctx, run, incident_dir, runbook, opts, step.timeout_s or DEFAULT_TIMEOUT_S[step.type]
                )
            except _StepFailed:
                needs_planned = template_roots(step.with_) & planned
        if opts.dry_run and (not step.type.dry_run_safe or needs_planned):
            unknown = unknown | needs_planned
            cond = (
                f"would run if {step.when.source} (depends on {', '.join(sorted(unknown))})"
                if step.when is not None and unknown
                else (
                    f"would run on the output of {', '.join(sorted(needs_planned))}" if needs_planned else "would run"
                )
            )
            planned.add(step.id)
            ctx[step.id] = None
            emit(
                StepRecord(
                    step.id,
                    step.type.value,
                    step.destructive,
                    StepStatus.PLANNED,
                    cond + ("; destructive: needs --yes" if step.destructive else ""),
                    inputs=args,
                    command=tuple(_plan_command(step, args, ctx, run)),
                    started_ts=started,
                    ended_ts=_now_iso(),
                )
            )
            i += 1
            continue

        if step.destructive and not opts.yes:
            what = _describe(step, args)
            if opts.interactive and opts.confirm is not None:
                ok = opts.confirm(f"step {step.id}: {what}. Proceed?", False)
                if not ok:
                    emit(
                        StepRecord(
                            step.id,
                            step.type.value,
                            True,
                            StepStatus.REFUSED,
                            "operator declined at the prompt",
                            inputs=args,
                            started_ts=started,
                            ended_ts=_now_iso(),
                            duration_s=time.monotonic() - t0,
                        )
                    )
                    raise PlaybookError(
                        f"step {step.id!r} ({what}) declined; nothing was changed. Resume later with --resume {incident_id}"
                    )
            else:
                emit(
                    StepRecord(
                        step.id,
                        step.type.value,
                        True,
                        StepStatus.REFUSED,
                        "destructive step in a non-interactive run without --yes",
                        inputs=args,
                        started_ts=started,
                        ended_ts=_now_iso(),
                    )
                )
                raise PlaybookError(
                    f"step {step.id!r} would {what}, which is destructive, and this run is not interactive; "
                    f"rerun with --yes to allow it (steps already done are kept: add --resume {incident_id})"
                )

        timeout_s = step.timeout_s or DEFAULT_TIMEOUT_S[step.type]
        if deadline is not None:
            timeout_s = min(timeout_s, max(deadline - time.monotonic(), 0.0))
            if timeout_s <= 0:
                emit(
                    StepRecord(
                        step.id,
                        step.type.value,
                        step.destructive,
                        StepStatus.FAILED,
                        "runbook timeout_s reached before this step",
                        inputs=args,
                        error=f"runbook timeout_s={runbook.timeout_s} exceeded",
                        started_ts=started,
                        ended_ts=_now_iso(),
                    )
                )
                completed = False
                break
        try:
            outputs, command, code, decision = preview or _execute(
                step, args, ctx, run, incident_dir, runbook, opts, timeout_s
            )
        except _StepFailed as exc:
            ctx[step.id] = {**exc.outputs, "status": StepStatus.FAILED.value, "error": str(exc)}
            emit(
                StepRecord(
                    step.id,
                    step.type.value,
                    step.destructive,
                    StepStatus.FAILED,
                    f"failed; on_failure {step.on_failure}",
                    inputs=args,
                    outputs=exc.outputs,
                    command=exc.command,
                    exit_code=exc.exit_code,
                    error=str(exc),
                    started_ts=started,
                    ended_ts=_now_iso(),
                    duration_s=time.monotonic() - t0,
                )
            )
            if step.on_failure.action is FailureAction.CONTINUE:
                i += 1
                continue
            if step.on_failure.action is FailureAction.GOTO:
                i = runbook.step_index(step.on_failure.target or "")
                continue
            completed = False
            break
        ctx[step.id] = {**outputs, "status": StepStatus.OK.value}
        emit(
            StepRecord(
                step.id,
                step.type.value,
                step.destructive,
                StepStatus.OK,
                decision,
                inputs=args,
                outputs=outputs,
                command=tuple(command),
                exit_code=code,
                started_ts=started,
                ended_ts=_now_iso(),
                duration_s=time.monotonic() - t0,
            )
        )
        i += 1

    if audit:
        audit.append(
            {"event": "end", "runbook": runbook.name, "incident": incident_id, "completed": completed, "ts": _now_iso()}
        )
    return RunbookResult(
        runbook.name,
        None if opts.dry_run else incident_id,
        None if opts.dry_run else audit_path,
        opts.dry_run,
        tuple(records),
        completed,
    )


def _describe(step: Step, args: Mapping[str, Any]) -> str:
    if step.type is StepType.EVICT_NODE:
        hosts = ",".join(_as_host_list(args.get("hosts"))) or "(no host)"
        return f"evict {hosts}" + (" and relaunch the run" if args.get("relaunch") else "")
    return "relaunch the run: trainctl launch " + " ".join(map(str, args.get("args") or []))


def _plan_command(step: Step, args: Mapping[str, Any], ctx: Mapping[str, Any], run: Path) -> list[str]:
    """The command a step would run, for the --dry-run plan (and the audit)."""
    tc = ["trainctl"]
    if step.type is StepType.COLLECT:
        return tc + _collect_args(args, ctx, run)
    if step.type is StepType.EVICT_NODE:
        cmds: list[str] = []
        for h in _as_host_list(args.get("hosts")) or ["<hosts from earlier steps>"]:
            cmds += (["&&"] if cmds else []) + tc + _evict_args(h, args, run)
        return cmds
    if step.type is StepType.RELAUNCH:
        return tc + ["launch", *map(str, args.get("args") or [])]
    if step.type is StepType.PROBE:
        return tc + ["playbook", "probe", "--hosts", ",".join(_as_host_list(args.get("hosts")) or ctx["run"]["hosts"])]
    if step.type is StepType.NOTIFY:
        if args.get("url"):
            return ["POST", str(args["url"])]
        cmd = args.get("command")
        return shlex.split(cmd) if isinstance(cmd, str) else [str(c) for c in cmd or []]
    if step.type is StepType.ASK:
        return ["ask", str(args.get("prompt", ""))]
    return tc + ["diagnose", str(args.get("path") or run), "--json"]


def _collect_args(args: Mapping[str, Any], ctx: Mapping[str, Any], run: Path) -> list[str]:
    hosts = _as_host_list(args.get("hosts")) or list(ctx["run"]["hosts"])
    out = str(args.get("out") or Path(ctx["incident"]["dir"]) / "dataset")
    extra = [str(a) for a in args.get("args") or []]
    if ctx["run"].get("ssh_config") and "--ssh-config" not in extra:
        extra += ["--ssh-config", str(ctx["run"]["ssh_config"])]
    # a `launch --hosts` run lives at its remote run dir on every host; a --local run is here
    where = str(ctx["run"].get("remote_dir") or run)
    return ["collect", where, "--hosts", ",".join(hosts), "--out", out, "--json", *extra]


def _evict_args(
    host: str, args: Mapping[str, Any], run: Path, *, relaunch: bool | None = None, wait_timeout_s: float | None = None
) -> list[str]:
    argv = ["evict-node", host, "--reason", str(args.get("reason")), "--run", str(run), "--json"]
    if args.get("finding"):
        argv += ["--finding", f"@{args['finding']}"]
    if args.get("relaunch") if relaunch is None else relaunch:
        # the engine's own gate (--yes or a confirmation) already allowed this destructive step
        argv += ["--relaunch", "--yes"]
        if wait_timeout_s:
            argv += ["--wait-timeout", str(int(wait_timeout_s))]
        if args.get("allow_shrink"):  # a user script may come back smaller (the reference trainer always may)
            argv += ["--allow-shrink"]
    if args.get("spares"):
        argv += ["--spares", ",".join(_as_host_list(args["spares"]))]
    if args.get("scheduler"):
        argv += ["--scheduler", str(args["scheduler"])]
    return argv


def _call(
    argv: Sequence[str], timeout_s: float, *, want_json: bool = True, ok_codes: Sequence[int] = (0,)
) -> tuple[Any, int]:
    """Run a trainctl command; its stderr streams to ours (progress), its stdout is the result."""
    full = trainctl_argv() + list(argv)
    shown = ["trainctl", *argv]
    logger.info("running %s", shlex.join(shown))
    try:
        proc = subprocess.run(full, capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired as exc:
        raise _StepFailed(
            f"`{shlex.join(shown)}` did not finish within {timeout_s:.0f}s; raise the step's timeout_s", command=shown
        ) from exc
    if proc.stderr:
        sys.stderr.write(proc.stderr)
    doc: Any = None
    if want_json and proc.stdout.strip():
        try:
            doc = json.loads(proc.stdout)
        except ValueError:
            doc = None
    if proc.returncode not in ok_codes:
        last = (proc.stderr.strip().splitlines() or ["(no message)"])[-1]
        raise _StepFailed(
            f"`{shlex.join(shown)}` exited {proc.returncode}: {last}",
            outputs={"result": doc} if doc is not None else {},
            command=shown,
            exit_code=proc.returncode,
        )
    if want_json and doc is None:
        raise _StepFailed(f"`{shlex.join(shown)}` printed no JSON on stdout", command=shown, exit_code=proc.returncode)
    return doc, proc.returncode


def _execute(
    step: Step,
    args: Mapping[str, Any],
    ctx: Mapping[str, Any],
    run: Path,
    incident_dir: Path,
    runbook: Runbook,
    opts: RunOptions,
    timeout_s: float,
) -> tuple[dict[str, Any], list[str], int | None, str]:
    """Perform one step: returns (outputs, command, exit code, decision text) or raises _StepFailed."""
    t = step.type
    if t is StepType.DIAGNOSE:
        path = str(args.get("path") or run)
        argv = ["diagnose", path, "--json", "--fail-on", "never"]
        doc, code = _call(argv, timeout_s)
        findings = list(doc.get("findings", []))
        matched = [f for f in findings if runbook.trigger.matches(f)]
        hosts = _as_host_list([f.get("hosts", []) for f in matched])
        ranks = sorted({int(r) for f in matched for r in f.get("ranks", [])})
        outputs: dict[str, Any] = {
            "path": path,
            "findings": findings,
            "matched": matched,
            "hosts": hosts,
            "ranks": ranks,
            "culprit": matched[0] if matched else None,
        }
        if not opts.dry_run and matched:
            finding_file = incident_dir / f"{step.id}-finding.json"
            atomic_write_text(finding_file, json.dumps(matched[0], indent=2))
            outputs["finding_file"] = str(finding_file)
        decision = (
            f"{len(findings)} finding(s), {len(matched)} match the trigger; culprit hosts {','.join(hosts) or 'none'}"
            f" ranks {','.join(map(str, ranks)) or 'none'}"
        )
        return outputs, ["trainctl", *argv], code, decision
    if t is StepType.COLLECT:
        argv = _collect_args(args, ctx, run)
        dumps = None
        if ctx["run"].get("live"):
            # a live (hung) run's evidence is in its ranks' memory: Flight Recorder + stacks first
            from trainctl.ops.launch import run_control

            dumps = run_control.dump_live_ranks(
                run_control.launch_options(run), _as_host_list(args.get("hosts")) or ctx["run"]["hosts"]
            )
        doc, code = _call(argv, timeout_s, ok_codes=(ExitCode.OK,))
        out = argv[argv.index("--out") + 1]
        outputs = {"out": out, "result": doc, "incomplete": bool((doc or {}).get("failed_hosts"))}
        if dumps is not None:
            outputs["hang_dumps"] = dumps
        return (
            outputs,
            ["trainctl", *argv],
            code,
            (f"dumped live ranks ({', '.join(f'{h} {v}' for h, v in dumps.items())}); " if dumps else "")
            + f"collected into {out}"
            + (" (incomplete)" if (doc or {}).get("failed_hosts") else ""),
        )
    if t is StepType.EVICT_NODE:
        hosts = _as_host_list(args.get("hosts"))
        if not hosts:
            raise _StepFailed(
                "no host to evict (the hosts expression is empty); guard the step with `when:` on the culprit"
            )
        results, command = [], []
        relaunch_doc = None
        for n, h in enumerate(hosts):
            # one relaunch, with the last host: the run restarts once without all of them
            last = n == len(hosts) - 1
            rl = bool(args.get("relaunch")) and last
            argv = _evict_args(h, args, run, relaunch=rl, wait_timeout_s=max(timeout_s - 60, 30) if rl else None)
            try:
                doc, _ = _call(argv, timeout_s)
            except _StepFailed as exc:
                exc.outputs = {"evicted": hosts[:n], "results": results, **exc.outputs}
                raise
            results.append(doc)
            if rl:
                relaunch_doc = doc.get("relaunch")
            command += (["&&"] if command else []) + ["trainctl", *argv]
        outputs = {"evicted": hosts, "results": results}
        decision = f"evicted {','.join(hosts)}"
        if relaunch_doc:
            outputs["relaunch"] = relaunch_doc
            decision += (
                f"; relaunched on {','.join(relaunch_doc.get('hosts', []))} as {relaunch_doc.get('run_dir')}: "
                f"exit {relaunch_doc.get('exit_code')}, steps {relaunch_doc.get('first_step')}..{relaunch_doc.get('last_step')}"
            )
        return outputs, command, 0, decision
    if t is StepType.RELAUNCH:
        argv = ["launch", *map(str, args.get("args") or [])]
        _, code = _call(argv, timeout_s, want_json=False)
        return {"args": list(argv[1:])}, ["trainctl", *argv], code, "relaunched"
    if t is StepType.NOTIFY:
        return _notify(args, ctx, runbook, timeout_s)
    if t is StepType.ASK:
        default = bool(args.get("default", False))
        prompt = str(args.get("prompt"))
        if opts.yes:
            return {"answer": True}, [], None, "answered yes by --yes"
        if opts.interactive and opts.confirm is not None:
            ans = opts.confirm(prompt, default)
            return {"answer": ans}, [], None, f"operator answered {'yes' if ans else 'no'}"
        return {"answer": default}, [], None, f"unattended: took the default ({'yes' if default else 'no'})"
    if t is StepType.PROBE:
        return _probe(args, ctx, incident_dir, timeout_s)
    raise AssertionError(t)


def _notify(
    args: Mapping[str, Any], ctx: Mapping[str, Any], runbook: Runbook, timeout_s: float
) -> tuple[dict[str, Any], list[str], int | None, str]:
    message = str(args.get("message"))
    payload = {"runbook": runbook.name, "incident": ctx["incident"]["id"], "run": ctx["run"]["dir"], "message": message}
    if args.get("url"):
        url = str(args["url"])
        if not url.startswith(("http://", "https://")):
            raise _StepFailed(f"notify url {url!r} is not http(s); write the webhook's full URL")
        req = urllib.request.Request(
            url, data=json.dumps(payload).encode(), headers={"Content-Type": "application/json"}, method="POST"
        )
        try:
            with urllib.request.urlopen(req, timeout=timeout_s) as resp:
                status = resp.status
        except (urllib.error.URLError, OSError) as exc:
            raise _StepFailed(f"POST {url} failed: {exc}; check the webhook URL", command=["POST", url]) from exc
        return (
            {"url": url, "http_status": status, "message": message},
            ["POST", url],
            status,
            f"posted to {url} (HTTP {status})",
        )
    cmd = args.get("command")
    argv = shlex.split(cmd) if isinstance(cmd, str) else [str(c) for c in cmd or []]
    env = {
        **os.environ,
        "TRAINCTL_MESSAGE": message,
        "TRAINCTL_INCIDENT": ctx["incident"]["id"],
        "TRAINCTL_RUNBOOK": runbook.name,
    }
    try:
        proc = subprocess.run(
            argv, input=json.dumps(payload), text=True, capture_output=True, timeout=timeout_s, env=env
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise _StepFailed(f"notify command {argv[:1]} failed: {exc}", command=argv) from exc
    if proc.returncode != 0:
        raise _StepFailed(
            f"notify command exited {proc.returncode}: {proc.stderr.strip()[-200:]}",
            command=argv,
            exit_code=proc.returncode,
        )
    return {"message": message}, argv, 0, "notified by command"


def _probe(
    args: Mapping[str, Any], ctx: Mapping[str, Any], incident_dir: Path, timeout_s: float
) -> tuple[dict[str, Any], list[str], int | None, str]:
    from trainctl.runtime import probe as probe_mod  # torch-free at import; torch runs in the workers

    hosts = _as_host_list(args.get("hosts")) or list(ctx["run"]["hosts"])
    if len(hosts) < 2:
        raise _StepFailed(f"probe needs at least 2 hosts, got {hosts}; pass with.hosts")
    if not args.get("local", True):
        # real hosts: the same worker, torchrun started on each host over SSH (trainctl.ops.playbook.probe_remote)
        from trainctl.ops.playbook.probe_remote import run_remote_probe

        ssh_config = args.get("ssh_config") or ctx["run"].get("ssh_config")
        workdir = str(
            args.get("workdir") or f"{ctx['run'].get('remote_dir') or ctx['run']['dir']}/probe-{ctx['incident']['id']}"
        )
        env = {str(k): str(v) for k, v in (args.get("env") or {}).items()}
        try:
            verdict = run_remote_probe(
                hosts,
                workdir=workdir,
                ssh_config=str(ssh_config) if ssh_config else None,
                env=env,
                nproc_per_host=int(args.get("nproc_per_host", 1)),
                size_bytes=int(args.get("size_bytes", 1 << 20)),
                iters=int(args.get("iters", 5)),
                slow_host=args.get("slow_host"),
                slow_delay_s=float(args.get("slow_delay_s", 0.2)),
                timeout_s=timeout_s,
            )
        except (probe_mod.ProbeError, OSError) as exc:
            raise _StepFailed(str(exc)) from exc
        except Exception as exc:  # noqa: BLE001 - ssh errors (trainctl.errors subclasses) fail the step, not the runbook
            raise _StepFailed(f"probe over SSH failed: {exc}") from exc
        d = verdict.to_dict()
        return d, ["trainctl", "playbook", "probe", "--hosts", ",".join(hosts), "--ssh"], 0, verdict.summary()
    try:
        verdict = probe_mod.run_local_probe(
            hosts,
            nproc_per_host=int(args.get("nproc_per_host", 1)),
            size_bytes=int(args.get("size_bytes", 1 << 20)),
            iters=int(args.get("iters", 5)),
            slow_host=args.get("slow_host"),
            slow_delay_s=float(args.get("slow_delay_s", 0.2)),
            workdir=incident_dir / "probe",
            timeout_s=timeout_s,
        )
    except probe_mod.ProbeError as exc:
        raise _StepFailed(str(exc)) from exc
    d = verdict.to_dict()
    return d, ["trainctl", "playbook", "probe", "--hosts", ",".join(hosts)], 0, verdict.summary()
