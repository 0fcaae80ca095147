"""Performing each kind of typed action, for the executor: one function per StepType.

In-process where trainctl has the operation (`diagnose_path`, `collect`, `evict_node`, the probe,
notifications), a subprocess where a process must stand on its own (`trainctl launch`, which
outlives the playbook; the probe's torchrun workers; a notify command, an argv list). Each returns an
Outcome (outputs, the equivalent command, exit code, decision text, typed findings) or raises
StepFailed; none decides whether to act (trainctl.ops.playbook.planner did).
"""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trainctl.errors import TrainctlError
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
from trainctl.ops.playbook.model import DEFAULT_TIMEOUT_S, Playbook, StepType
from trainctl.ops.playbook.planner import PlannedStep, diagnose_outputs
from trainctl.ops.playbook.redact import Redactor
from trainctl.rundir import atomic_write_text

__all__ = ["StepFailed", "Outcome", "Env", "perform", "escalate"]

logger = logging.getLogger(__name__)


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


@dataclass(frozen=True)
class Env:
    """What performing an action needs besides the action (the executor makes one per step)."""

    playbook: Playbook
    run: Path
    incident_id: str
    incident_dir: Path
    ctx: Mapping[str, Any]
    redactor: Redactor
    say: Callable[[str], None]  # a progress line for a person (stderr)
    dry_run: bool = False
    yes: bool = False
    confirm: Callable[[str, bool], bool] | None = None  # a person at the terminal answers; None: nobody
    step_id: str = ""
    timeout_s: float = 0.0


# ---------------------------------------------------------------- performing each kind of action


def _diagnose(a: DiagnoseAction, env: Env) -> Outcome:
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
    if not env.dry_run and outputs["matched"]:
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


def _collect(a: CollectAction, env: Env) -> Outcome:
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


def _probe(a: ProbeAction, env: Env) -> Outcome:
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
                **({"size_bytes": a.size_bytes} if a.size_bytes else {}),  # else the probe's default
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
            **({"size_bytes": a.size_bytes} if a.size_bytes else {}),  # else the probe's default
            iters=a.iters,
            slow_host=a.slow_host,
            slow_delay_s=a.slow_delay_s,
            workdir=env.incident_dir / "probe",
            timeout_s=env.timeout_s,
        )
    except probe_mod.ProbeError as exc:
        raise StepFailed(str(exc)) from None
    return Outcome(verdict.to_dict(), a.command(), 0, verdict.summary())


def _evict(a: EvictAction, env: Env) -> Outcome:
    from trainctl.ops.evict.launched_run import LiveRelaunch, run_members
    from trainctl.ops.evict.operation import EvictRequest, evict_node, load_finding

    try:
        finding = load_finding(
            f"@{a.finding}" if isinstance(a.finding, str) else a.finding, where="with.finding", hosts=a.targets
        )
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


def _relaunch(a: RelaunchAction, env: Env) -> Outcome:
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


def _note(a: NotifyAction, env: Env) -> notify.Notification:
    return notify.Notification(
        env.playbook.name, env.incident_id, str(env.ctx["run"]["dir"]), a.message, a.severity, a.evidence
    )


def _notify(a: NotifyAction, env: Env) -> Outcome:
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


def _ask(a: AskAction, env: Env) -> Outcome:
    if env.yes:
        return Outcome({"answer": True}, (), None, "answered yes by --yes")
    if env.confirm is not None:
        ans = env.confirm(a.prompt, a.default)
        return Outcome({"answer": ans}, (), None, f"operator answered {'yes' if ans else 'no'}")
    return Outcome({"answer": a.default}, (), None, f"unattended: took the default ({'yes' if a.default else 'no'})")


_PERFORM: Mapping[type, Callable[[Any, Env], Outcome]] = {
    DiagnoseAction: _diagnose,
    CollectAction: _collect,
    ProbeAction: _probe,
    EvictAction: _evict,
    RelaunchAction: _relaunch,
    NotifyAction: _notify,
    AskAction: _ask,
}


def perform(action: Action, env: Env) -> Outcome:
    return _PERFORM[type(action)](action, env)


def escalate(planned: PlannedStep, env: Env) -> tuple[dict[str, Any], tuple[str, ...], str | None]:
    """Hand the doubtful findings to a person: each notify target, and stderr. Never fails the playbook."""
    sent, errors = [], []
    for note in planned.escalation:
        env.say(f"escalated: {note.message}")
        if note.url and not env.dry_run:
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
        "would_notify": [n.url for n in planned.escalation if n.url] if env.dry_run else [],
    }
    command = ("POST", planned.escalation[0].url) if planned.escalation and planned.escalation[0].url else ()
    return outputs, command, ("; ".join(errors) or None)
