"""From a safely loaded YAML document to a Playbook: the schema (pydantic), then the cross-references.

The schema says, once, which keys each level and each step type takes, which are required and
what type each value has (a `${...}` template stands for any value, checked again when the step's
action is built). Every error is one line `FILE:LINE: what is wrong; the fix`, naming the field:
pydantic finds it, `_explain` words it. Then what a schema cannot say: step ids (unique, not
reserved, usable in expressions), expressions that parse and refer only to earlier steps, goto
targets that exist.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from enum import Enum
from importlib import resources
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt, StrictStr, ValidationError

from trainctl.errors import PlaybookError, PlaybookInvalid
from trainctl.findings import Category, FindingKind
from trainctl.ops.evict.schedulers import SchedulerKind
from trainctl.ops.playbook.expr import ExprError, parse, template_roots
from trainctl.ops.playbook.loader import Document, load_yaml, read_playbook_file
from trainctl.ops.playbook.model import (
    RESERVED_ROOTS,
    ConfidenceLevel,
    FailureAction,
    OnFailure,
    Playbook,
    Step,
    StepType,
    Trigger,
)

__all__ = [
    "WITH_SCHEMAS",
    "parse_playbook",
    "load_playbook",
    "builtin_names",
    "load_builtin",
    "find_playbook",
]

# ---------------------------------------------------------------- the schema

TEMPLATE_PATTERN = r"^\s*\$\{.*\}\s*$"
Template = Annotated[str, Field(pattern=TEMPLATE_PATTERN, strict=True)]
Seconds = Annotated[float, Field(gt=0, allow_inf_nan=False, strict=True)]
Count = Annotated[int, Field(gt=0, strict=True)]
Hosts = list[StrictStr] | StrictStr  # a YAML list, a comma list or Slurm hostlist, or a ${...} template


class _Schema(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


class CollectWith(_Schema):
    hosts: Hosts | None = Field(None, description="a list of hosts or a ${...} template (default: the run's hosts)")
    out: StrictStr | None = Field(None, description="a directory (default: the incident dir's dataset/)")
    kinds: list[StrictStr] | StrictStr | None = Field(None, description="signal kinds as `trainctl collect --kinds`")


class DiagnoseWith(_Schema):
    path: StrictStr | None = Field(None, description="a run dir, dataset, dump dir or log file (default: the run)")


class ProbeWith(_Schema):
    hosts: Hosts | None = Field(None, description="a list of hosts or a ${...} template (default: the run's hosts)")
    local: StrictBool | Template = Field(True, description="yes/no: simulated hosts here, or the real hosts over SSH")
    nproc_per_host: Count | Template = Field(1, description="a positive whole number")
    size_bytes: Count | Template | None = Field(None, description="a positive whole number of bytes")
    iters: Count | Template = Field(5, description="a positive whole number")
    slow_host: StrictStr | None = Field(None, description="a host name (a drill)")
    slow_delay_s: Seconds | Template = Field(0.2, description="a positive, finite number of seconds")
    ssh_config: StrictStr | None = Field(None, description="a path to an OpenSSH client config")
    workdir: StrictStr | None = Field(None, description="an absolute directory on every host")
    env: dict[StrictStr, StrictStr | StrictInt] | Template | None = Field(
        None, description="a mapping of environment variables, e.g. {GLOO_SOCKET_IFNAME: eth0}"
    )


class EvictNodeWith(_Schema):
    hosts: Hosts = Field(description="a list of hosts or a ${...} template, e.g. ${diagnose.hosts}")
    reason: StrictStr = Field(description="text (the audit trail and the Slurm drain reason)")
    finding: StrictStr | None = Field(None, description="a finding file, e.g. ${diagnose.finding_file}")
    relaunch: StrictBool | Template = Field(False, description="yes/no")
    spares: Hosts | None = Field(None, description="a list of standby hosts or a ${...} template")
    allow_shrink: StrictBool | Template = Field(False, description="yes/no")
    scheduler: SchedulerKind | Template | None = Field(None, description="none, slurm or k8s")


class RelaunchWith(_Schema):
    args: list[StrictStr] | Template = Field(description="a list of `trainctl launch` arguments, one per item")


class NotifyWith(_Schema):
    message: StrictStr = Field(description="text")
    url: StrictStr | None = Field(
        None, description="a webhook URL or an apprise URL (slack://, pagerduty://, mailto://, ...)"
    )
    command: list[StrictStr] | None = Field(
        None, description="a list: the program and its arguments, one per item (never a shell line)"
    )


class AskWith(_Schema):
    prompt: StrictStr = Field(description="text")
    default: StrictBool = Field(False, description="yes/no (the answer of unattended runs)")


WITH_SCHEMAS: Mapping[StepType, type[_Schema]] = {
    StepType.COLLECT: CollectWith,
    StepType.DIAGNOSE: DiagnoseWith,
    StepType.PROBE: ProbeWith,
    StepType.EVICT_NODE: EvictNodeWith,
    StepType.RELAUNCH: RelaunchWith,
    StepType.NOTIFY: NotifyWith,
    StepType.ASK: AskWith,
}

Confidence = ConfidenceLevel | Annotated[float, Field(gt=0, le=1, allow_inf_nan=False, strict=True)]


class TriggerSchema(_Schema):
    kinds: list[FindingKind] = Field(default_factory=list, description="finding kinds")
    categories: list[Category] = Field(default_factory=list, description="finding categories")
    confidence: Confidence = Field(
        ConfidenceLevel.HIGH, description="high, medium or low, or a number in (0, 1]: act at or above it"
    )


class InputSchema(_Schema):
    default: Any = None
    description: StrictStr = ""
    secret: StrictBool = Field(False, description="yes/no: never show the value in records or logs")


class StepSchema(_Schema):
    id: StrictStr = Field(description="a name of letters, digits and underscores")
    type: StepType
    with_: dict[Any, Any] = Field(default_factory=dict, alias="with", description="a mapping of parameters")
    when: StrictStr | StrictBool | None = Field(None, description="an expression, e.g. diagnose.hosts")
    timeout_s: Seconds | None = Field(None, description="a positive, finite number of seconds")
    on_failure: StrictStr = Field("stop", description="stop, continue or goto STEP_ID")
    description: StrictStr = Field("", description="text")


class PlaybookSchema(_Schema):
    name: StrictStr = Field(description="letters, digits and dashes")
    description: StrictStr = Field(description="one sentence saying when to use this playbook")
    trigger: dict[Any, Any] = Field(default_factory=dict, description="a mapping: kinds, categories, confidence")
    inputs: dict[StrictStr, Any] = Field(default_factory=dict, description="a mapping of name -> {default, ...}")
    steps: list[Any] = Field(min_length=1, description="a non-empty list of steps")
    timeout_s: Seconds | None = Field(None, description="a positive, finite number of seconds")


# ---------------------------------------------------------------- errors, worded


def _fields(schema: type[BaseModel]) -> list[str]:
    return sorted(f.alias or name for name, f in schema.model_fields.items())


def _field(schema: type[BaseModel], key: Any) -> Any:
    for name, f in schema.model_fields.items():
        if key in (name, f.alias):
            return f
    return None


def _one_of(enum: type[Enum]) -> str:
    return ", ".join(e.value for e in enum)


class _Level:
    """Where in the file a schema is applied and how its errors are worded."""

    def __init__(self, doc: Document, base: tuple, schema: type[BaseModel], *, sid: str = "", stype: str = "") -> None:
        self.doc, self.base, self.schema, self.sid, self.stype = doc, base, schema, sid, stype

    def fail(self, path: tuple, what: str, fix: str, *, key: bool = True) -> PlaybookInvalid:
        return PlaybookInvalid(f"{self.doc.source}:{self.doc.line_of(path, key=key)}: {what}; {fix}")

    def validate(self, data: Any) -> Any:
        try:
            return self.schema.model_validate(data)
        except ValidationError as exc:
            errors = exc.errors()
            first = min(errors, key=lambda e: self.doc.line_of(self.base + self._data_loc(e["loc"], data)))
            raise self.explain(first, data) from None

    @staticmethod
    def _data_loc(loc: Sequence[Any], data: Any) -> tuple:
        """The part of pydantic's loc that walks the data (it adds union branch names after it)."""
        out: list[Any] = []
        cur = data
        for part in loc:
            if isinstance(cur, dict) and part in cur:
                cur = cur[part]
            elif isinstance(cur, list) and isinstance(part, int) and 0 <= part < len(cur):
                cur = cur[part]
            else:
                if not out or isinstance(cur, (dict, list)):
                    out.append(part)  # a missing or extra key: its parent's line
                break
            out.append(part)
        return tuple(out)

    def explain(self, e: Mapping[str, Any], data: Any) -> PlaybookInvalid:
        loc = self._data_loc(e["loc"], data)
        path = self.base + loc
        etype = e["type"]
        key = loc[0] if loc else None
        value = e.get("input")
        if etype == "extra_forbidden":
            return self.fail(path, *self._unknown_key(loc[-1]))
        if etype == "missing":
            return self.fail(path, *self._missing(loc[-1]))
        f = _field(self.schema, key)
        if key == "type" and self.schema is StepSchema:
            return self.fail(path, f"step {self.sid!r} has unknown type {value!r}", f"use one of {_one_of(StepType)}")
        if etype == "enum" and self.schema is TriggerSchema and key in ("kinds", "categories"):
            what = "finding kind" if key == "kinds" else "category"
            enum = FindingKind if key == "kinds" else Category
            return self.fail(path, f"unknown {what} {value!r}", f"use one of {_one_of(enum)}", key=False)
        if f is not None and f.description and "seconds" in f.description:
            return self.fail(
                path,
                f"{self._where()}{key} {value!r} is not a positive, finite number of seconds",
                f"write e.g. `{key}: 300`",
            )
        expected = f.description if f is not None and f.description else e["msg"].lower()
        return self.fail(path, f"{self._where()}{key} {value!r} is not {expected}", "see docs/playbooks.md (Schema)")

    def _where(self) -> str:
        if self.schema is StepSchema:
            return f"step {self.sid!r}: "
        if self.stype:
            return f"step {self.sid!r} ({self.stype}): with."
        if self.schema is InputSchema:
            return f"input {self.sid!r}: "
        return "trigger." if self.schema is TriggerSchema else ""

    def _unknown_key(self, key: Any) -> tuple[str, str]:
        allowed = ", ".join(_fields(self.schema))
        if self.schema is PlaybookSchema:
            return f"unknown key {key!r}", f"use one of {allowed}"
        if self.schema is TriggerSchema:
            return f"unknown trigger key {key!r}", "use kinds: [...], categories: [...] and confidence: high|medium|low"
        if self.schema is InputSchema:
            return f"unknown key {key!r} in input {self.sid!r}", "use default:, description: and secret:"
        if self.schema is StepSchema:
            return f"unknown step key {key!r}", f"use one of {allowed} (parameters go under `with:`)"
        return f"step {self.sid!r} ({self.stype}) does not take {key!r}", f"use {allowed}"

    def _missing(self, key: Any) -> tuple[str, str]:
        if self.schema is PlaybookSchema:
            return f"missing required key {key!r}", f"add `{key}:` at the top level"
        if self.schema is StepSchema:
            if key == "type":
                return f"step {self.sid!r} has no type", f"add `type:` with one of {_one_of(StepType)}"
            return (
                f"step {self.sid} has no {key}",
                "give it an id of letters, digits and underscores (conditions refer to it)",
            )
        return f"step {self.sid!r} ({self.stype}) needs with.{key}", f"add `{key}:` under `with:`"


# ---------------------------------------------------------------- the playbook


def _or_empty(value: Any) -> Any:
    return {} if value is None else value


def parse_playbook(text: str, source: str = "<playbook>") -> Playbook:
    doc = load_yaml(text, source)
    data = doc.data
    top = _Level(doc, (), PlaybookSchema)
    if not isinstance(data, dict):
        raise top.fail(
            (),
            "a playbook is a mapping (name:, description:, trigger:, steps:)",
            "start the file with `name: my-playbook`",
        )
    data = {**data, **{k: _or_empty(data.get(k)) for k in ("trigger", "inputs") if k in data}}
    spec: PlaybookSchema = top.validate(data)
    if not spec.name.replace("-", "").replace("_", "").isalnum():
        raise top.fail(
            ("name",), f"name {spec.name!r} is not a plain name", "use letters, digits and dashes, e.g. hung-collective"
        )

    trig_raw = dict(data.get("trigger") or {})
    for k in ("kinds", "categories"):
        if isinstance(trig_raw.get(k), str):
            trig_raw[k] = [trig_raw[k]]  # `kinds: hung_collective` is a list of one
    trig: TriggerSchema = _Level(doc, ("trigger",), TriggerSchema).validate(trig_raw)

    inputs: dict[str, Any] = {}
    secret: set[str] = set()
    for iname, raw in spec.inputs.items():
        if isinstance(raw, dict):
            ispec: InputSchema = _Level(doc, ("inputs", iname), InputSchema, sid=iname).validate(raw)
            inputs[iname] = ispec.default
            if ispec.secret:
                secret.add(iname)
        else:
            inputs[iname] = raw  # `name: default` shorthand

    steps: list[Step] = []
    seen: set[str] = set()
    for i, raw in enumerate(spec.steps):
        steps.append(_step(doc, i, raw, seen, inputs))
        seen.add(steps[-1].id)
    ids = {s.id for s in steps}
    for i, s in enumerate(steps):
        if s.on_failure.action is FailureAction.GOTO and s.on_failure.target not in ids:
            raise top.fail(
                ("steps", i, "on_failure"),
                f"step {s.id!r}: on_failure goes to unknown step {s.on_failure.target!r}",
                f"use one of {', '.join(sorted(ids))}",
            )
    return Playbook(
        name=spec.name,
        description=spec.description,
        trigger=Trigger(tuple(trig.kinds), tuple(trig.categories), trig.confidence),
        steps=tuple(steps),
        inputs=inputs,
        secret_inputs=frozenset(secret),
        timeout_s=spec.timeout_s,
        source=source,
    )


def _step(doc: Document, i: int, raw: Any, earlier: set[str], inputs: Mapping[str, Any]) -> Step:
    path = ("steps", i)
    level = _Level(doc, path, StepSchema, sid=str(raw.get("id")) if isinstance(raw, dict) else str(i + 1))
    if not isinstance(raw, dict):
        raise level.fail(path, f"step {i + 1} is not a mapping", "write `- id: NAME` then `type: TYPE` under it")
    sid = raw.get("id")
    if not isinstance(sid, str) or not sid.isidentifier():
        raise level.fail(
            path + ("id",) if "id" in raw else path,
            f"step {i + 1} has id {sid!r}",
            "give it an id of letters, digits and underscores (conditions refer to it)",
        )
    if sid in earlier:
        raise level.fail(path + ("id",), f"step id {sid!r} is used twice", "give every step its own id")
    if sid in RESERVED_ROOTS:
        raise level.fail(
            path + ("id",), f"step id {sid!r} is reserved", f"rename it; {', '.join(RESERVED_ROOTS)} are built-in names"
        )
    raw = {**raw, "with": _or_empty(raw.get("with"))}
    spec: StepSchema = level.validate(raw)
    stype = spec.type
    with_level = _Level(doc, path + ("with",), WITH_SCHEMAS[stype], sid=sid, stype=stype.value)
    with_level.validate(spec.with_)
    if stype is StepType.NOTIFY and not (spec.with_.get("command") or "url" in spec.with_):
        raise level.fail(
            path + ("with",),
            f"notify step {sid!r} has neither url nor command",
            "add `url: https://...` (or an apprise URL)",
        )
    try:
        roots = template_roots(spec.with_)
    except ExprError as exc:
        raise level.fail(
            path + ("with",),
            f"step {sid!r}: bad ${{...}} template: {exc}",
            "see docs/playbooks.md for the expression grammar",
        ) from None
    _check_roots(level, path + ("with",), sid, roots, earlier)
    when = None
    if spec.when is not None:
        try:
            when = parse(str(spec.when).lower() if isinstance(spec.when, bool) else spec.when)
        except ExprError as exc:
            raise level.fail(
                path + ("when",),
                f"step {sid!r}: when does not parse: {exc}",
                "see docs/playbooks.md for the expression grammar",
            ) from None
        _check_roots(level, path + ("when",), sid, when.roots(), earlier)
    return Step(
        id=sid,
        type=stype,
        with_=spec.with_,
        when=when,
        timeout_s=spec.timeout_s,
        on_failure=_on_failure(level, spec.on_failure, path + ("on_failure",), sid),
        description=spec.description,
        line=doc.lines.get(path, 0),
    )


def _on_failure(level: _Level, raw: str, path: tuple, sid: str) -> OnFailure:
    parts = raw.split()
    if parts == ["stop"]:
        return OnFailure(FailureAction.STOP)
    if parts == ["continue"]:
        return OnFailure(FailureAction.CONTINUE)
    if len(parts) == 2 and parts[0] == "goto":
        return OnFailure(FailureAction.GOTO, parts[1])
    raise level.fail(
        path, f"step {sid!r}: on_failure {raw!r} is not understood", "write `stop`, `continue` or `goto STEP_ID`"
    )


def _check_roots(level: _Level, path: tuple, sid: str, roots: set[str], earlier: set[str]) -> None:
    for root in sorted(roots):
        if root in RESERVED_ROOTS or root in earlier:
            continue
        raise level.fail(
            path,
            f"step {sid!r} refers to {root!r}, which is not an earlier step",
            f"use an earlier step's id or one of {', '.join(RESERVED_ROOTS)} (steps run top to bottom)",
        )


# ---------------------------------------------------------------- where playbooks come from


def load_playbook(path: str | os.PathLike[str]) -> Playbook:
    return parse_playbook(read_playbook_file(path), str(path))


def builtin_names() -> list[str]:
    root = resources.files("trainctl.playbooks")
    return sorted(e.name[: -len(".yaml")] for e in root.iterdir() if e.name.endswith(".yaml"))


def load_builtin(name: str) -> Playbook:
    entry = resources.files("trainctl.playbooks") / f"{name}.yaml"
    if not entry.is_file():
        # "runbook" as other tools say it, so a newcomer's word finds the right command
        raise PlaybookError(
            f"no built-in runbook {name!r} among trainctl's playbooks; `trainctl playbook list` shows "
            f"{', '.join(builtin_names())}"
        )
    return parse_playbook(entry.read_text(), f"playbooks/{name}.yaml")


def find_playbook(name_or_path: str) -> Playbook:
    """A built-in name, or a path to a YAML file (a team's own playbook)."""
    if name_or_path.endswith((".yaml", ".yml")) or os.sep in name_or_path:
        return load_playbook(name_or_path)
    return load_builtin(name_or_path)
