"""The executor: the one loop that performs what the planner decides, and writes the audit log.

For each step it asks trainctl.ops.playbook.planner.plan_step what to do, performs the typed action
(trainctl.ops.playbook.actions) in-process: `diagnose_path` for diagnose (typed findings, kept for
the planner's confidence gate), `collect` for collect, `evict_node` for evict-node, the probe,
apprise or an HTTP POST for notify. Subprocesses only where a process must stand on its own: the
relaunched run (`trainctl launch`, which outlives the playbook), the probe's torchrun workers and a
notify command (an argv list, never a shell line). Every step becomes one StepRecord, passed through
the run's Redactor, appended to RUN/incidents/<incident>/audit.jsonl (trainctl.ops.playbook.audit)
and handed to the caller (the CLI renders it).

Safety rules, whatever the YAML says:
- destructive steps (evict-node, relaunch, a notify command) run only with --yes or an interactive
  "yes"; a non-interactive run without --yes refuses and changes nothing;
- below the playbook's confidence gate nothing destructive runs: the planner escalates;
- --dry-run performs only read-only steps (diagnose), shows every other step's command, and writes
  nothing: no incident dir, no audit, no ledger entry, no notification;
- `--resume INCIDENT` reuses the outputs of steps that completed and runs the rest.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any

from trainctl.errors import PlaybookError, TrainctlError
from trainctl.exit_codes import ExitCode
from trainctl.findings import Finding
from trainctl.ops.evict.schedulers import SchedulerKind
from trainctl.ops.playbook import notify
from trainctl.ops.playbook.actions import (
    Action,
    AskAction,
    CollectAction,
    DiagnoseAction,
    EvictAction,
    NotifyAction,
    ProbeAction,
    RelaunchAction,
)
from trainctl.ops.playbook.audit import AUDIT_FILE, AuditLog, StepRecord, StepStatus, read_audit
from trainctl.ops.playbook.model import DEFAULT_TIMEOUT_S, FailureAction, Playbook, Step, StepType
from trainctl.ops.playbook.planner import Decision, PlannedStep, PlanState, diagnose_outputs, plan_step
from trainctl.ops.playbook.redact import Redactor
from trainctl.rundir import atomic_write_text, read_run_info

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


class StepFailed(Exception):
    def __init__(
        self,
        message: str,
        outputs: Mapping[str, Any] | None = None,
        command: tuple[str, ...] = (),
        exit_code: int | None = None,
    ):
        super().__init__(message)
        self.outputs = dict(outputs or {})
        self.command = tuple(command)
        self.exit_code = exit_code


@dataclass(frozen=True)
class Outcome:
    outputs: dict[str, Any]
    command: tuple[str, ...]
    exit_code: int | None
    decision: str
    findings: tuple[Finding, ...] | None = None  # a diagnose step's typed findings


@dataclass
class _Env:
    """What performing an action needs besides the action."""

    playbook: Playbook
    run: Path
    incident_id: str
    incident_dir: Path
    ctx: Mapping[str, Any]
    opts: RunOptions
    redactor: Redactor
    say: Callable[[str], None]
    step_id: str = ""
    timeout_s: float = 0.0


def _now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


def _incident_id(playbook: str) -> str:
    return f"inc-{datetime.now(UTC).strftime('%Y%m%d-%H%M%S')}-{playbook}-{os.getpid()}"


# ---------------------------------------------------------------- performing each kind of action


def _diagnose(a: DiagnoseAction, env: _Env) -> Outcome:
    from trainctl.ops.diagnose.diagnosis import diagnose_path

    try:
        report = diagnose_path(a.path)
    except TrainctlError as exc:
        raise StepFailed(str(exc), command=a.command(), exit_code=ExitCode.ERROR) from None
    except Exception as exc:  # noqa: BLE001 - an analyzer's bug fails this step, as its own process would
        logger.debug("diagnose %s failed", a.path, exc_info=True)
        raise StepFailed(f"diagnose {a.path} failed: {type(exc).__name__}: {exc}", command=a.command()) from None
    trig = env.playbook.trigger
    outputs = diagnose_outputs(report.findings, trig, path=a.path)
    if not env.opts.dry_run and outputs["matched"]:
        finding_file = env.incident_dir / f"{env.step_id}-finding.json"
        atomic_write_text(finding_file, json.dumps(outputs["matched"][0], indent=2))
        outputs["finding_file"] = str(finding_file)
    below = outputs["below_gate"]
    decision = (
        f"{len(report.findings)} finding(s), {len(outputs['matched'])} match the trigger at or above its confidence "
        f"gate {trig.confidence_label}"
        + (f", {len(below)} below it" if below else "")
        + f"; culprit hosts {','.join(outputs['hosts']) or 'none'} ranks {','.join(map(str, outputs['ranks'])) or 'none'}"
    )
    return Outcome(outputs, a.command(), int(ExitCode.OK), decision, tuple(report.findings))


def _collect(a: CollectAction, env: _Env) -> Outcome:
    from trainctl.ops.collect.collection import CollectOptions, check_failed_hosts, collect, parse_kinds

    dumps = None
    if a.live:
        # a live (hung) run's evidence is in its ranks' memory: Flight Recorder + stacks first
        from trainctl.ops.launch import run_control

        dumps = run_control.dump_live_ranks(run_control.launch_options(env.run), list(a.hosts))
    if logging.getLogger("trainctl").getEffectiveLevel() > logging.DEBUG:
        logging.getLogger("paramiko").setLevel(logging.CRITICAL)  # per-host outcomes are in collection_status
    opts = CollectOptions(
        run_dir=a.where,
        out=Path(a.out),
        hosts=a.hosts,
        ssh_config=a.ssh_config,
        **({"kinds": parse_kinds(list(a.kinds))} if a.kinds else {}),
    )
    result = collect(opts)  # never raises for a bad host: each host's outcome is in the result
    doc = json.loads(json.dumps(result.to_dict(), default=str))
    outputs: dict[str, Any] = {"out": a.out, "result": doc, "incomplete": bool(doc.get("failed_hosts"))}
    if dumps is not None:
        outputs["hang_dumps"] = dumps
    try:
        check_failed_hosts(result, len(a.hosts) - 1)  # every host failed: nothing to diagnose
    except TrainctlError as exc:
        raise StepFailed(str(exc), outputs, a.command(), int(ExitCode.ERROR)) from None
    return Outcome(
        outputs,
        a.command(),
        int(ExitCode.OK),
        (f"dumped live ranks ({', '.join(f'{h} {v}' for h, v in dumps.items())}); " if dumps else "")
        + f"collected into {a.out}"
        + (" (incomplete)" if outputs["incomplete"] else ""),
    )


def _probe(a: ProbeAction, env: _Env) -> Outcome:
    from trainctl.runtime import probe as probe_mod  # torch-free at import; torch runs in the workers

    if len(a.hosts) < 2:
        raise StepFailed(f"probe needs at least 2 hosts, got {list(a.hosts)}; pass with.hosts")
    if not a.local:
        # real hosts: the same worker, torchrun started on each host over SSH
        from trainctl.ops.playbook.probe_remote import run_remote_probe

        run = env.ctx["run"]
        workdir = a.workdir or f"{run.get('remote_dir') or run['dir']}/probe-{env.incident_id}"
        try:
            verdict = run_remote_probe(
                list(a.hosts),
                workdir=workdir,
                ssh_config=a.ssh_config,
                env=dict(a.env),
                nproc_per_host=a.nproc_per_host,
                size_bytes=a.size_bytes,
                iters=a.iters,
                slow_host=a.slow_host,
                slow_delay_s=a.slow_delay_s,
                timeout_s=env.timeout_s,
            )
        except (probe_mod.ProbeError, OSError) as exc:
            raise StepFailed(str(exc)) from None
        except Exception as exc:  # noqa: BLE001 - ssh errors (trainctl.errors subclasses) fail the step, not the playbook
            raise StepFailed(f"probe over SSH failed: {exc}") from None
        return Outcome(verdict.to_dict(), a.command(), 0, verdict.summary())
    try:
        verdict = probe_mod.run_local_probe(
            list(a.hosts),
            nproc_per_host=a.nproc_per_host,
            size_bytes=a.size_bytes,
            iters=a.iters,
            slow_host=a.slow_host,
            slow_delay_s=a.slow_delay_s,
            workdir=env.incident_dir / "probe",
            timeout_s=env.timeout_s,
        )
    except probe_mod.ProbeError as exc:
        raise StepFailed(str(exc)) from None
    return Outcome(verdict.to_dict(), a.command(), 0, verdict.summary())


def _evict(a: EvictAction, env: _Env) -> Outcome:
    from trainctl.ops.evict.launched_run import LiveRelaunch, run_members
    from trainctl.ops.evict.operation import EvictRequest, evict_node, load_finding

    try:
        finding = load_finding(f"@{a.finding}" if isinstance(a.finding, str) else a.finding, where="with.finding")
        result = evict_node(
            EvictRequest(
                targets=a.targets,
                reason=a.reason,
                run=a.run,
                findings=(finding,) if finding else (),
                scheduler=a.scheduler or SchedulerKind.NONE,
                relaunch=(
                    LiveRelaunch(
                        spares=a.spares or None,
                        allow_shrink=a.allow_shrink,
                        wait_timeout_s=a.wait_timeout_s or 1800.0,
                        confirmed=True,  # the executor's own gate (--yes or a confirmation) allowed this step
                    )
                    if a.relaunch
                    else None
                ),
                members=run_members(a.run, spares=a.spares),
            ),
            progress=env.say,
        )
    except TrainctlError as exc:
        raise StepFailed(str(exc), command=a.command(), exit_code=int(ExitCode.ERROR)) from None
    outputs: dict[str, Any] = {"evicted": list(result.hosts), "results": [result.to_dict()]}
    decision = f"evicted {','.join(result.hosts)}"
    rl = result.relaunch
    if rl is not None:
        outputs["relaunch"] = rl.to_dict()
        decision += (
            f"; relaunched on {','.join(rl.hosts)} as {rl.run_dir}: "
            f"exit {rl.exit_code}, steps {rl.first_step}..{rl.last_step}"
        )
        if not rl.ok:
            raise StepFailed(decision, outputs, a.command(), int(ExitCode.RUN_FAILED))
    return Outcome(outputs, a.command(), int(ExitCode.OK), decision)


def _relaunch(a: RelaunchAction, env: _Env) -> Outcome:
    # A subprocess on purpose: the launch is a run of its own (its supervisor, its process group).
    from trainctl.ops.evict.launched_run import trainctl_argv

    argv = [*trainctl_argv(), "launch", *a.args]
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=env.timeout_s)
    except subprocess.TimeoutExpired:
        raise StepFailed(
            f"`trainctl launch` did not finish within {env.timeout_s:.0f}s; raise the step's timeout_s",
            command=a.command(),
        ) from None
    if proc.stderr:
        sys.stderr.write(env.redactor.text(proc.stderr))
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["(no message)"])[-1]
        raise StepFailed(
            f"`trainctl launch` exited {proc.returncode}: {last}", command=a.command(), exit_code=proc.returncode
        )
    return Outcome({"args": list(a.args)}, a.command(), proc.returncode, "relaunched")


def _note(a: NotifyAction, env: _Env) -> notify.Notification:
    return notify.Notification(
        env.playbook.name, env.incident_id, str(env.ctx["run"]["dir"]), a.message, a.severity, a.evidence
    )


def _notify(a: NotifyAction, env: _Env) -> Outcome:
    note = _note(a, env)
    try:
        if a.command_argv:
            code = notify.run_command(a.command_argv, note, timeout_s=env.timeout_s, redactor=env.redactor)
            return Outcome({"message": a.message}, a.command(), code, "notified by command")
        if a.url:
            sent = notify.send(a.url, note, timeout_s=env.timeout_s, redactor=env.redactor)
            outputs = {
                "url": a.url,
                "service": sent.service.value,
                "http_status": sent.http_status,
                "message": a.message,
            }
            how = f" (HTTP {sent.http_status})" if sent.http_status is not None else ""
            verb = "posted to" if sent.service is notify.Service.WEBHOOK else f"sent ({sent.service.value}) to"
            return Outcome(outputs, a.command(), sent.http_status, f"{verb} {a.url}{how}")
    except notify.NotifyError as exc:
        raise StepFailed(str(exc), command=a.command()) from None
    env.say(f"notify: {a.message}")
    return Outcome(
        {"message": a.message, "sent": False},
        (),
        None,
        "no notification target configured (url empty): the message is in the audit and on stderr",
    )


def _ask(a: AskAction, env: _Env) -> Outcome:
    opts = env.opts
    if opts.yes:
        return Outcome({"answer": True}, (), None, "answered yes by --yes")
    if opts.interactive and opts.confirm is not None:
        ans = opts.confirm(a.prompt, a.default)
        return Outcome({"answer": ans}, (), None, f"operator answered {'yes' if ans else 'no'}")
    return Outcome({"answer": a.default}, (), None, f"unattended: took the default ({'yes' if a.default else 'no'})")


_PERFORM: Mapping[type, Callable[[Any, _Env], Outcome]] = {
    DiagnoseAction: _diagnose,
    CollectAction: _collect,
    ProbeAction: _probe,
    EvictAction: _evict,
    RelaunchAction: _relaunch,
    NotifyAction: _notify,
    AskAction: _ask,
}


def _perform(action: Action, env: _Env) -> Outcome:
    return _PERFORM[type(action)](action, env)


def _escalate(planned: PlannedStep, env: _Env) -> tuple[dict[str, Any], tuple[str, ...], str | None]:
    """Hand the doubtful findings to a person: each notify target, and stderr. Never fails the playbook."""
    sent, errors = [], []
    for note in planned.escalation:
        env.say(f"escalated: {note.message}")
        if note.url and not env.opts.dry_run:
            try:
                notify.send(
                    note.url, _note(note, env), timeout_s=DEFAULT_TIMEOUT_S[StepType.NOTIFY], redactor=env.redactor
                )
                sent.append(note.url)
            except notify.NotifyError as exc:
                errors.append(str(exc))
    outputs = {
        "escalated": [f.to_dict() for f in planned.evidence],
        "gate": env.playbook.trigger.to_dict(),
        "notified": sent,
        "would_notify": [n.url for n in planned.escalation if n.url] if env.opts.dry_run else [],
    }
    command = ("POST", planned.escalation[0].url) if planned.escalation and planned.escalation[0].url else ()
    return outputs, command, ("; ".join(errors) or None)


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
            raise PlaybookError(clean) from None


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
    env = _Env(playbook, run, incident_id, incident_dir, ctx, opts, redactor, lambda s: say_to(redactor.text(s)))
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
            outputs, command, error = _escalate(planned, env)
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
            env.timeout_s, env.step_id = timeout_s, step.id
            outcome = _perform(planned.action, env)
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
