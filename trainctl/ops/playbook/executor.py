"""The executor: the one loop that performs what the planner decides, and writes the audit log.

For each step it asks trainctl.ops.playbook.planner.plan_step what to do and performs the typed
action through trainctl.ops.playbook.perform (in-process with typed findings; a subprocess only where
a process must stand on its own). A diagnose step's typed findings go back into the planner's state
for its confidence gate. Every step becomes one StepRecord, passed through the run's Redactor,
appended to RUN/incidents/<incident>/audit.jsonl (trainctl.ops.playbook.audit) and handed to the
caller (the CLI renders it).

Safety rules, whatever the YAML says:
- destructive steps (evict-node, relaunch, a notify command) run only with --yes or an interactive
  "yes"; a non-interactive run without --yes refuses and changes nothing;
- below the playbook's confidence gate nothing destructive runs: the planner escalates;
- --dry-run performs only read-only steps (diagnose), shows every other step's command, and writes
  nothing: no incident dir, no audit, no ledger entry, no notification;
- `--resume INCIDENT` reuses the outputs of steps that completed and runs the rest.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any

from trainctl.errors import PlaybookError, TrainctlError
from trainctl.findings import Finding
from trainctl.ops.playbook.actions import NotifyAction
from trainctl.ops.playbook.audit import AUDIT_FILE, AuditLog, StepRecord, StepStatus, read_audit
from trainctl.ops.playbook.model import DEFAULT_TIMEOUT_S, FailureAction, Playbook, Step, StepType
from trainctl.ops.playbook.perform import Env, StepFailed, escalate, perform
from trainctl.ops.playbook.planner import Decision, PlannedStep, PlanState, plan_step
from trainctl.ops.playbook.redact import Redactor
from trainctl.rundir import read_run_info

__all__ = ["RunOptions", "PlaybookResult", "run_playbook"]

logger = logging.getLogger(__name__)

Confirm = Callable[[str, bool], bool]  # (question, default) -> answer


@dataclass(frozen=True)
class RunOptions:
    dry_run: bool = False
    yes: bool = False
    interactive: bool = False  # a person at a terminal can answer questions
    confirm: Confirm | None = None
    resume: str | None = None  # incident id
    inputs: Mapping[str, Any] = field(default_factory=dict)
    incident_id: str | None = None  # chosen by the caller (tests); default: time + playbook name
    progress: Callable[[str], None] | None = None  # progress lines for a person (stderr); default: the log


@dataclass(frozen=True)
class PlaybookResult:
    playbook: str
    incident_id: str | None
    audit_path: Path | None
    dry_run: bool
    records: tuple[StepRecord, ...]
    completed: bool

    def to_dict(self) -> dict[str, Any]:
        # "runbook": the key `playbook run --json` has always printed (automation reads it)
        return {
            "runbook": self.playbook,
            "incident": self.incident_id,
            "dry_run": self.dry_run,
            "audit": str(self.audit_path) if self.audit_path else None,
            "completed": self.completed,
            "steps": [r.to_dict() for r in self.records],
        }


def _now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


def _incident_id(playbook: str) -> str:
    return f"inc-{datetime.now(UTC).strftime('%Y%m%d-%H%M%S')}-{playbook}-{os.getpid()}"


# ---------------------------------------------------------------- the loop


def _launch_context(run: Path) -> dict[str, Any]:
    """What a `launch --hosts` run's steps need: ssh config, run dir on the hosts, spares, live supervisor.

    From RUN/launch.json or the live supervisor (trainctl.ops.launch.run_control); a run started
    with --local has neither, and its steps work on the local run dir.
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


def _typed(docs: Any) -> tuple[Finding, ...]:
    out = []
    for d in docs or []:
        try:
            out.append(Finding.from_dict(d))
        except (KeyError, ValueError, TypeError, AttributeError):
            continue
    return tuple(out)


def _redactor(playbook: Playbook, inputs: Mapping[str, Any]) -> Redactor:
    red = Redactor()
    for name, value in inputs.items():
        # declared secrets, and every URL (a webhook URL is a credential whoever declared it)
        if name in playbook.secret_inputs or (isinstance(value, str) and "://" in value):
            red.add(value)
    return red


def run_playbook(
    playbook: Playbook,
    run_dir: str | os.PathLike[str],
    opts: RunOptions = RunOptions(),
    on_record: Callable[[StepRecord], None] | None = None,
) -> PlaybookResult:
    """Run (or plan, with dry_run) the playbook against RUN_DIR; see the module docstring."""
    run = Path(run_dir).resolve()
    if not run.is_dir():
        raise PlaybookError(
            f"--run {run_dir}: not a directory; pass the --run-dir of `trainctl launch` (it holds run.json)"
        )
    inputs = {**playbook.inputs, **opts.inputs}
    redactor = _redactor(playbook, inputs)
    with redactor.logging(logging.getLogger("trainctl"), logging.getLogger()):
        try:
            return _run(playbook, run, opts, inputs, redactor, on_record)
        except TrainctlError as exc:
            clean = redactor.text(str(exc))
            if clean == str(exc):
                raise
            raise type(exc)(clean) from None  # the same error, its secrets masked


def _run(
    playbook: Playbook,
    run: Path,
    opts: RunOptions,
    inputs: dict[str, Any],
    redactor: Redactor,
    on_record: Callable[[StepRecord], None] | None,
) -> PlaybookResult:
    info = read_run_info(run)
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
        ran = start and (start.get("runbook") or start.get("playbook"))
        if ran and ran != playbook.name:
            raise PlaybookError(
                f"--resume {incident_id}: that incident ran playbook {ran!r}, not {playbook.name!r}; resume it with that playbook"
            )
        for r in records:
            if r.get("event") == "step":
                prior[r["step"]] = r  # the latest record of each step wins
    else:
        incident_id = opts.incident_id or _incident_id(playbook.name)
        audit_path = run / "incidents" / incident_id / AUDIT_FILE
    incident_dir = audit_path.parent

    ctx: dict[str, Any] = {
        "run": {
            "dir": str(run),
            "id": info.run_id if info else run.name,
            "hosts": [h.host for h in info.hosts] if info else [],
            **_launch_context(run),
        },
        "incident": {"id": incident_id, "dir": str(incident_dir)},
        "inputs": inputs,
        "trigger": playbook.trigger.to_dict(),
    }
    say_to = opts.progress or logger.info
    env = Env(
        playbook,
        run,
        incident_id,
        incident_dir,
        ctx,
        redactor,
        lambda s: say_to(redactor.text(s)),
        dry_run=opts.dry_run,
        yes=opts.yes,
        confirm=opts.confirm if opts.interactive else None,
    )
    audit = None if opts.dry_run else AuditLog(audit_path)
    if audit:
        # "runbook": the audit records' key for the playbook's name since the first incident (resume reads it)
        audit.append(
            redactor.value(
                {
                    "event": "resume" if opts.resume else "start",
                    "runbook": playbook.name,
                    "source": playbook.source,
                    "run": str(run),
                    "incident": incident_id,
                    "inputs": inputs,
                    "yes": opts.yes,
                    "ts": _now_iso(),
                }
            )
        )

    records: list[StepRecord] = []

    def emit(rec: StepRecord) -> None:
        rec = replace(
            rec,
            decision=redactor.text(rec.decision),
            inputs=redactor.value(dict(rec.inputs)),
            outputs=redactor.value(dict(rec.outputs)),
            command=tuple(redactor.value(list(rec.command))),
            error=redactor.text(rec.error) if rec.error else rec.error,
        )
        records.append(rec)
        if audit:
            audit.append({**rec.to_dict(), "incident": incident_id, "runbook": playbook.name})
        if on_record:
            on_record(rec)

    deadline = time.monotonic() + playbook.timeout_s if playbook.timeout_s else None
    typed: dict[str, tuple[Finding, ...]] = {}
    pending: set[str] = set()
    escalated = False
    completed = True
    budget = 4 * len(playbook.steps)  # goto loops end here rather than forever
    i = 0
    while i < len(playbook.steps):
        budget -= 1
        if budget < 0:
            raise PlaybookError(
                f"{playbook.source}: on_failure goto loops did not end after {4 * len(playbook.steps)} steps; "
                "make the goto target a step that can succeed"
            )
        step = playbook.steps[i]
        started, t0 = _now_iso(), time.monotonic()
        state = PlanState(
            ctx, dict(typed), frozenset(pending), prior, escalated, opts.dry_run, opts.yes, opts.interactive
        )
        planned = plan_step(playbook, i, state)
        for note in planned.escalation:
            redactor.add(note.url)
        if isinstance(planned.action, NotifyAction):
            redactor.add(planned.action.url)

        record = partial(_record, emit, step, started, t0)
        d = planned.decision
        if d is Decision.REUSE:
            done = prior[step.id]
            ctx[step.id] = {**done.get("outputs", {}), "status": done["status"]}
            if step.type is StepType.DIAGNOSE:
                typed[step.id] = _typed(done.get("outputs", {}).get("findings"))
            record(
                StepStatus(done["status"]),
                planned.reason,
                inputs=done.get("inputs", {}),
                outputs=done.get("outputs", {}),
            )
            i += 1
            continue
        if d is Decision.SKIP:
            ctx[step.id] = {"status": StepStatus.SKIPPED.value}
            record(StepStatus.SKIPPED, planned.reason)
            i += 1
            continue
        if d is Decision.ESCALATE:
            outputs, command, error = escalate(planned, env)
            escalated = True
            ctx[step.id] = {**outputs, "status": StepStatus.ESCALATED.value}
            record(StepStatus.ESCALATED, planned.reason, outputs=outputs, command=command, error=error)
            i += 1
            continue
        if d is Decision.PLAN:
            pending.add(step.id)
            ctx[step.id] = None
            record(StepStatus.PLANNED, planned.reason, inputs=planned.args, command=planned.command)
            i += 1
            continue
        if d is Decision.REFUSE:
            what = _describe(planned)
            record(StepStatus.REFUSED, planned.reason, inputs=planned.args)
            raise PlaybookError(
                f"step {step.id!r} would {what}, which is destructive, and this run is not interactive; "
                f"rerun with --yes to allow it (steps already done are kept: add --resume {incident_id})"
            )
        if d is Decision.CONFIRM:
            what = _describe(planned)
            if not (opts.confirm and opts.confirm(f"step {step.id}: {what}. Proceed?", False)):
                record(StepStatus.REFUSED, "operator declined at the prompt", inputs=planned.args)
                raise PlaybookError(
                    f"step {step.id!r} ({what}) declined; nothing was changed. Resume later with --resume {incident_id}"
                )

        # RUN, PREVIEW, CONFIRM (allowed) and INVALID (a failure) from here
        try:
            if d is Decision.INVALID or planned.action is None:
                raise StepFailed(planned.reason or f"step {step.id!r}: nothing to do")
            timeout_s = step.timeout_s or DEFAULT_TIMEOUT_S[step.type]
            if deadline is not None:
                timeout_s = min(timeout_s, max(deadline - time.monotonic(), 0.0))
                if timeout_s <= 0:
                    record(
                        StepStatus.FAILED,
                        "playbook timeout_s reached before this step",
                        inputs=planned.args,
                        error=f"playbook timeout_s={playbook.timeout_s} exceeded",
                    )
                    completed = False
                    break
            outcome = perform(planned.action, replace(env, timeout_s=timeout_s, step_id=step.id))
        except StepFailed as exc:
            if d is Decision.PREVIEW and planned.depends_on:
                # a read-only preview on the output of a planned step (diagnose of `collect.out or
                # run.dir` on a `launch --hosts` run, nothing local yet): planned with the rest
                pending.add(step.id)
                ctx[step.id] = None
                record(
                    StepStatus.PLANNED,
                    f"would run on the output of {', '.join(sorted(planned.depends_on))}",
                    inputs=planned.args,
                    command=planned.command,
                )
                i += 1
                continue
            ctx[step.id] = {**exc.outputs, "status": StepStatus.FAILED.value, "error": str(exc)}
            record(
                StepStatus.FAILED,
                f"failed; on_failure {step.on_failure}",
                inputs=planned.args,
                outputs=exc.outputs,
                command=exc.command or planned.command,
                exit_code=exc.exit_code,
                error=str(exc),
            )
            if step.on_failure.action is FailureAction.CONTINUE:
                i += 1
                continue
            if step.on_failure.action is FailureAction.GOTO:
                i = playbook.step_index(step.on_failure.target or "")
                continue
            completed = False
            break
        ctx[step.id] = {**outcome.outputs, "status": StepStatus.OK.value}
        if outcome.findings is not None:
            typed[step.id] = outcome.findings
        record(
            StepStatus.OK,
            outcome.decision,
            inputs=planned.args,
            outputs=outcome.outputs,
            command=outcome.command,
            exit_code=outcome.exit_code,
        )
        i += 1

    if audit:
        audit.append(
            {
                "event": "end",
                "runbook": playbook.name,
                "incident": incident_id,
                "completed": completed,
                "ts": _now_iso(),
            }
        )
    return PlaybookResult(
        playbook.name,
        None if opts.dry_run else incident_id,
        None if opts.dry_run else audit_path,
        opts.dry_run,
        tuple(records),
        completed,
    )


def _record(
    emit: Callable[[StepRecord], None],
    step: Step,
    started: str,
    t0: float,
    status: StepStatus,
    decision: str,
    **kw: Any,
) -> None:
    emit(
        StepRecord(
            step.id,
            step.type.value,
            step.destructive,
            status,
            decision,
            started_ts=started,
            ended_ts=_now_iso(),
            duration_s=time.monotonic() - t0,
            **kw,
        )
    )


def _describe(planned: PlannedStep) -> str:
    a = planned.action
    if a is not None and hasattr(a, "describe"):
        return a.describe()
    return f"run {planned.step.type.value} step {planned.step.id}"
