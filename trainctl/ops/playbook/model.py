"""What a playbook is once loaded: its steps, their one set of kinds, the trigger and its confidence gate.

Other tools call this a runbook; trainctl says playbook everywhere (the CLI `trainctl playbook`,
the folder playbooks/, the findings' `playbook` field).

StepType is the one set of action kinds. The YAML `type:` of a step is a StepType, the planner
(trainctl.ops.playbook.planner) decides about StepTypes and the executor
(trainctl.ops.playbook.executor) performs the typed action of each (trainctl.ops.playbook.actions).
How they map onto the supervisor's own decisions (trainctl.runtime.policy.ActionKind), which act
on a run without a playbook:

    policy.ActionKind     playbook step
    EVICT_AND_RELAUNCH    evict-node with `relaunch: true` (same launch, without the hosts)
    RESTART_IN_PLACE      relaunch (`trainctl launch ARGS`: a new launch, e.g. a smaller batch)
    STOP_AND_REPORT       notify / ask, and the planner's escalation below the confidence gate
    CONTINUE              a step whose `when:` is false (skipped)
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from trainctl.findings import Category, Finding, FindingKind
from trainctl.ops.playbook.expr import Expr

__all__ = [
    "StepType",
    "DEFAULT_TIMEOUT_S",
    "ConfidenceLevel",
    "confidence_threshold",
    "FailureAction",
    "OnFailure",
    "Step",
    "Trigger",
    "Playbook",
    "RESERVED_ROOTS",
]

# Names every expression may start from besides the ids of earlier steps.
RESERVED_ROOTS = ("run", "incident", "inputs", "trigger")


class StepType(str, Enum):
    """The one set of action kinds: the YAML step type, what the planner plans and the executor performs."""

    COLLECT = "collect"
    DIAGNOSE = "diagnose"
    PROBE = "probe"
    EVICT_NODE = "evict-node"  # quarantine + drain hosts; with `relaunch: true` also restart the run without them
    RELAUNCH = "relaunch"  # start `trainctl launch ARGS` (a new launch with new arguments)
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


# Per-type default timeouts (seconds); a step's `timeout_s` overrides, the playbook's caps.
DEFAULT_TIMEOUT_S: Mapping[StepType, float] = {
    StepType.COLLECT: 900,
    StepType.DIAGNOSE: 600,
    StepType.PROBE: 600,
    StepType.EVICT_NODE: 300,
    StepType.RELAUNCH: 600,
    StepType.NOTIFY: 30,
    StepType.ASK: 600,
}


class ConfidenceLevel(str, Enum):
    """The confidence scale a playbook's gate is written in (a finding's `confidence` is in [0, 1]).

    high   >= 0.90  the evidence names the culprit directly (e.g. every rank's Flight Recorder
                    dump agrees; a log line names the rank and host)
    medium >= 0.70  strong but indirect (some dumps missing; a classified error without a culprit)
    low    >= 0.50  a lead worth a person's look (absence of a rank as the only evidence)
    """

    LOW = "low"
    MEDIUM = "medium"
    HIGH = "high"

    @property
    def min_confidence(self) -> float:
        return _LEVELS[self]


_LEVELS = {ConfidenceLevel.LOW: 0.5, ConfidenceLevel.MEDIUM: 0.7, ConfidenceLevel.HIGH: 0.9}


def confidence_threshold(value: ConfidenceLevel | float) -> float:
    return value.min_confidence if isinstance(value, ConfidenceLevel) else float(value)


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
        """Destructive by type, and a notify that runs a command (an arbitrary program on this machine)."""
        return self.type.destructive or (self.type is StepType.NOTIFY and bool(self.with_.get("command")))


@dataclass(frozen=True)
class Trigger:
    """Which findings a playbook handles, and the confidence at or above which it acts on them.

    A finding of the trigger's kinds below `confidence` is not acted on: the planner escalates it
    to a person with its evidence and never evicts on it.
    """

    kinds: tuple[FindingKind, ...] = ()
    categories: tuple[Category, ...] = ()
    confidence: ConfidenceLevel | float = ConfidenceLevel.HIGH

    @property
    def min_confidence(self) -> float:
        return confidence_threshold(self.confidence)

    @property
    def confidence_label(self) -> str:
        c = self.confidence
        return f"{c.value} (>= {c.min_confidence:g})" if isinstance(c, ConfidenceLevel) else f">= {c:g}"

    def matches(self, finding: Finding) -> bool:
        """Of the trigger's kinds and categories (whatever its confidence)."""
        if self.kinds and finding.kind not in self.kinds:
            return False
        if self.categories and finding.category not in self.categories:
            return False
        return True

    def acts_on(self, finding: Finding) -> bool:
        """Matches, at or above the gate."""
        return self.matches(finding) and finding.confidence >= self.min_confidence

    def to_dict(self) -> dict[str, Any]:
        c = self.confidence
        return {
            "kinds": [k.value for k in self.kinds],
            "categories": [c.value for c in self.categories],
            "confidence": c.value if isinstance(c, ConfidenceLevel) else c,
            "min_confidence": self.min_confidence,
        }


@dataclass(frozen=True)
class Playbook:
    name: str
    description: str
    trigger: Trigger
    steps: tuple[Step, ...]
    inputs: Mapping[str, Any] = field(default_factory=dict)  # name -> default
    secret_inputs: frozenset[str] = frozenset()  # inputs whose values never appear in a record or log
    timeout_s: float | None = None
    source: str = ""

    def step_index(self, step_id: str) -> int:
        return next(i for i, s in enumerate(self.steps) if s.id == step_id)
