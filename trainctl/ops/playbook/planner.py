"""The planner: playbook + typed findings + state -> what to do with each step, and why. Pure: no I/O.

`plan_step` decides one step from the state the executor has reached (outputs of earlier steps,
their typed findings, what a dry run left unknown, what a resumed incident already did, --yes);
the executor performs the decision and comes back for the next step. `plan_playbook` runs the
same decisions over a whole playbook for given findings, without performing anything: the
dry-run preview, and what the unit tests check.

Decisions, in the order they are tried:

    REUSE     --resume: the step completed earlier in this incident; its outputs are reused
    ESCALATE  a destructive step that acts on a diagnosis (its `when:` or `with:` read a diagnose
              step, directly or through an `ask`), while the latest diagnosis found the playbook's
              kind of fault only below its confidence gate; or an eviction of a host that only
              such findings name: not done; a notification with the evidence goes to the
              playbook's notify targets, and a person decides. Never an eviction on evidence the
              playbook does not trust.
    SKIP      `when:` is false
    INVALID   the rendered parameters are not a safe action (a refused host, an option from data)
    PREVIEW   --dry-run, a read-only step (diagnose): run for real so the plan shows real culprits
    PLAN      --dry-run, any other step: shown with its command, not run
    CONFIRM   destructive, no --yes, a person at the terminal: ask first
    REFUSE    destructive, no --yes, nobody to ask: stop, nothing changed
    RUN       do it
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from trainctl.findings import Finding
from trainctl.inventory import host_key
from trainctl.ops.playbook.actions import (
    Action,
    ActionInvalid,
    DiagnoseAction,
    EvictAction,
    NotifyAction,
    build_action,
)
from trainctl.ops.playbook.expr import evaluate, render, template_roots
from trainctl.ops.playbook.model import DEFAULT_TIMEOUT_S, Playbook, Step, StepType, Trigger

__all__ = [
    "Decision",
    "PlanState",
    "PlannedStep",
    "diagnose_outputs",
    "gate",
    "plan_step",
    "plan_playbook",
]


class Decision(str, Enum):
    REUSE = "reuse"
    ESCALATE = "escalate"
    SKIP = "skip"
    INVALID = "invalid"
    PREVIEW = "preview"
    PLAN = "plan"
    CONFIRM = "confirm"
    REFUSE = "refuse"
    RUN = "run"


@dataclass(frozen=True)
class PlanState:
    """Where the executor is: the expression context, typed findings by diagnose step, and the options."""

    context: Mapping[str, Any]  # run, incident, inputs, trigger, and each earlier step's outputs by id
    findings: Mapping[str, tuple[Finding, ...]] = field(default_factory=dict)  # diagnose step id -> findings
    pending: frozenset[str] = frozenset()  # dry run: steps whose outputs are unknown
    prior: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)  # --resume: latest record per step
    escalated: bool = False  # an earlier step already escalated
    dry_run: bool = False
    yes: bool = False
    interactive: bool = False


@dataclass(frozen=True)
class PlannedStep:
    step: Step
    decision: Decision
    reason: str
    args: Mapping[str, Any] = field(default_factory=dict)  # `with:` after templating
    action: Action | None = None
    escalation: tuple[NotifyAction, ...] = ()  # ESCALATE: the notifications to send
    evidence: tuple[Finding, ...] = ()  # ESCALATE: the findings below the gate
    depends_on: frozenset[str] = frozenset()  # dry run: the unknown outputs this step reads

    @property
    def command(self) -> tuple[str, ...]:
        """The trainctl command that does the same by hand (a placeholder while inputs are unknown)."""
        if self.action is not None:
            return self.action.command()
        if self.depends_on:
            return ("trainctl", self.step.type.value, f"<from {', '.join(sorted(self.depends_on))}>")
        return ()


def diagnose_outputs(findings: Sequence[Finding], trigger: Trigger, *, path: str = "") -> dict[str, Any]:
    """A diagnose step's outputs: every finding, those the playbook acts on (its kinds, at or above the
    gate: `matched`, their `hosts`, `ranks` and first one as `culprit`) and those below the gate."""
    matched = [f for f in findings if trigger.acts_on(f)]
    below = [f for f in findings if trigger.matches(f) and not trigger.acts_on(f)]
    hosts: list[str] = []
    for f in matched:
        hosts += [h for h in f.hosts if h not in hosts]
    return {
        "path": path,
        "findings": [f.to_dict() for f in findings],
        "matched": [f.to_dict() for f in matched],
        "below_gate": [f.to_dict() for f in below],
        "hosts": hosts,
        "ranks": sorted({int(r) for f in matched for r in f.ranks}),
        "culprit": matched[0].to_dict() if matched else None,
    }


def gate(
    trigger: Trigger, findings: Mapping[str, Sequence[Finding]]
) -> tuple[tuple[Finding, ...], tuple[Finding, ...]]:
    """(acted on, below the gate) among the latest diagnosis's findings of the trigger's kinds."""
    if not findings:
        return (), ()
    latest = list(findings.values())[-1]
    return (
        tuple(f for f in latest if trigger.acts_on(f)),
        tuple(f for f in latest if trigger.matches(f) and not trigger.acts_on(f)),
    )


def _reads_diagnosis(playbook: Playbook, index: int) -> bool:
    """Does step `index` act on a diagnosis: do its `when:` or `with:` read a diagnose step's outputs,
    directly or through earlier steps (an `ask` about the culprit)?"""
    by_id = {s.id: s for s in playbook.steps}
    seen: set[str] = set()
    todo = [playbook.steps[index]]
    while todo:
        s = todo.pop()
        roots = (s.when.roots() if s.when else set()) | template_roots(s.with_)
        for r in roots - seen:
            seen.add(r)
            dep = by_id.get(r)
            if dep is None:
                continue
            if dep.type is StepType.DIAGNOSE:
                return True
            todo.append(dep)
    return False


def _evidence_line(f: Finding) -> str:
    ranks = f" ranks {','.join(map(str, f.ranks))}" if f.ranks else ""
    return f"{f.kind.value} on {','.join(f.hosts) or '-'}{ranks} (confidence {f.confidence:.2f}): {f.summary}"


def _escalate(playbook: Playbook, step: Step, state: PlanState, below: Sequence[Finding], why: str) -> PlannedStep:
    ctx = state.context
    run_id = (ctx.get("run") or {}).get("id", "")
    label = playbook.trigger.confidence_label
    message = (
        f"{playbook.name} on {run_id}: not acting on {len(below)} finding(s) below this playbook's confidence gate "
        f"{label}; a person decides. " + " | ".join(_evidence_line(f) for f in below)
    )
    severity = "critical" if any(f.severity.value == "critical" for f in below) else "warning"
    evidence = tuple(f.to_dict() for f in below)
    targets: list[str] = []
    for s in playbook.steps:  # the playbook's own notification targets, as they render now
        if s.type is StepType.NOTIFY and "url" in s.with_:
            try:
                url = render(s.with_["url"], ctx)
            except Exception:  # noqa: BLE001 - a target that cannot render now is left out, not an error
                continue
            if isinstance(url, str) and url and url not in targets:
                targets.append(url)
    notes = tuple(NotifyAction(message, u, None, severity, evidence) for u in targets) or (
        NotifyAction(message, None, None, severity, evidence),
    )
    reason = (
        f"{why}; {len(below)} finding(s) below the confidence gate {label}: "
        + "; ".join(_evidence_line(f) for f in below)
        + f"; not {step.type.value}: escalated to a person"
        + (f" ({len(targets)} notify target(s))" if targets else " (no notify target: stderr and the audit)")
    )
    return PlannedStep(step, Decision.ESCALATE, reason, escalation=notes, evidence=tuple(below))


def plan_step(playbook: Playbook, index: int, state: PlanState) -> PlannedStep:
    """Decide step `index` from `state` (see the module docstring for the decisions and their order)."""
    step = playbook.steps[index]
    ctx = state.context
    done = state.prior.get(step.id)
    if done and done.get("status") in ("ok", "skipped"):
        incident = (ctx.get("incident") or {}).get("id", "")
        return PlannedStep(
            step,
            Decision.REUSE,
            f"completed earlier in {incident} ({done.get('ended_ts', '?')}); reused its outputs on resume",
            args=done.get("inputs", {}),
        )

    acted, below = gate(playbook.trigger, state.findings)
    if step.destructive and below and not acted and _reads_diagnosis(playbook, index):
        if state.escalated:
            return PlannedStep(step, Decision.SKIP, "escalated earlier in this incident; not acting below the gate")
        return _escalate(playbook, step, state, below, "the diagnosis is not confident enough to act on")

    unknown = (step.when.roots() if step.when else set()) & state.pending
    if step.when is not None and not unknown and not evaluate(step.when, ctx):
        return PlannedStep(step, Decision.SKIP, f"condition false: when {step.when.source}")

    args = render(step.with_, ctx)
    depends = frozenset(template_roots(step.with_) & state.pending)
    timeout_s = step.timeout_s or DEFAULT_TIMEOUT_S[step.type]
    try:
        action: Action | None = build_action(step, args, ctx, timeout_s=timeout_s)
    except ActionInvalid as exc:
        if state.dry_run and (depends or unknown):
            action = None  # its inputs come from steps the dry run did not perform
        else:
            return PlannedStep(step, Decision.INVALID, str(exc), args=args)

    if isinstance(action, EvictAction) and below:
        # by host_key: a target spelled NODE02 is the node02 a below-gate finding names
        trusted = {host_key(h) for f in acted for h in f.hosts}
        doubted = {host_key(h) for f in below for h in f.hosts}
        only_below = [h for h in action.targets if host_key(h) not in trusted and host_key(h) in doubted]
        if only_below:
            doubtful = [f for f in below if {host_key(h) for h in f.hosts} & {host_key(h) for h in only_below}]
            return _escalate(playbook, step, state, doubtful, f"{','.join(only_below)} is named only below the gate")

    destructive = step.destructive or (isinstance(action, NotifyAction) and action.destructive)
    if state.dry_run:
        if step.type.dry_run_safe and isinstance(action, DiagnoseAction):
            return PlannedStep(
                step, Decision.PREVIEW, "read-only: runs in the dry run", args, action, depends_on=depends
            )
        if step.when is not None and unknown:
            cond = f"would run if {step.when.source} (depends on {', '.join(sorted(unknown))})"
        elif depends:
            cond = f"would run on the output of {', '.join(sorted(depends))}"
        else:
            cond = "would run"
        return PlannedStep(
            step,
            Decision.PLAN,
            cond + ("; destructive: needs --yes" if destructive else ""),
            args,
            action,
            depends_on=depends | frozenset(unknown),
        )
    if destructive and not state.yes:
        if state.interactive:
            return PlannedStep(step, Decision.CONFIRM, "destructive: asking the operator", args, action)
        return PlannedStep(
            step, Decision.REFUSE, "destructive step in a non-interactive run without --yes", args, action
        )
    return PlannedStep(step, Decision.RUN, "", args, action)


def plan_playbook(
    playbook: Playbook,
    findings: Mapping[str, Sequence[Finding]],
    context: Mapping[str, Any],
    *,
    yes: bool = False,
) -> list[PlannedStep]:
    """Every step's decision for a diagnosis with `findings` (by diagnose step id), performing nothing.

    Like a dry run: a diagnose step with findings given takes them as its outputs; any other step
    that would run leaves its outputs unknown, so later steps that read them are planned on them.
    """
    ctx: dict[str, Any] = dict(context)
    typed: dict[str, tuple[Finding, ...]] = {}
    pending: set[str] = set()
    planned: list[PlannedStep] = []
    escalated = False
    for i, step in enumerate(playbook.steps):
        state = PlanState(ctx, dict(typed), frozenset(pending), escalated=escalated, dry_run=True, yes=yes)
        p = plan_step(playbook, i, state)
        planned.append(p)
        if p.decision is Decision.PREVIEW and step.id in findings and isinstance(p.action, DiagnoseAction):
            typed[step.id] = tuple(findings[step.id])
            ctx[step.id] = {**diagnose_outputs(typed[step.id], playbook.trigger, path=p.action.path), "status": "ok"}
        elif p.decision is Decision.SKIP:
            ctx[step.id] = {"status": "skipped"}
        elif p.decision is Decision.ESCALATE:
            escalated = True
            ctx[step.id] = {"status": "escalated"}
        else:
            pending.add(step.id)
            ctx[step.id] = None
    return planned
