"""The supervisor's decision: findings in, one Action out. Pure: no I/O, no clock, no processes.

The supervisor loop observes (crash, hang, fail-slow), collects and diagnoses, then calls
`decide()` and performs the returned Action (evict + relaunch, restart in place, stop). Keeping the
decision pure (torchelastic's rendezvous ops return an `_Action`; one executor acts) makes every
branch a table-driven unit test and every decision loggable with its evidence.

Rules, first match wins (each names the findings it rests on):

1. A deterministic user-code error: ImportError / ModuleNotFoundError / SyntaxError /
   IndentationError / TabError / NameError in a crash's summary or evidence, a bad script exit
   (exit code 2, "can't open file"), or a collective mismatch (ranks calling different
   collectives) -> STOP_AND_REPORT. Restarting or evicting cannot fix code; it would only loop.
2. A hardware fault on a host -> EVICT_AND_RELAUNCH those hosts: a `faulty_host` finding, or any
   finding in the xid / ecc / gpu_lost / unreachable categories, with confidence >=
   `evict_min_confidence`. Evictions do not use up `max_restarts` (membership changes are not
   retries, as in torchelastic); the relaunch plan stops when no hosts are left.
3. A config error: `oom`, or `numerical` (NaN loss, overflow) -> STOP_AND_REPORT. Same
   config, same failure; a person must change the batch size or learning rate.
4. A host blamed again: a hang (`hung_collective`) or crash whose culprit hosts already carry
   `repeat_evict_after - 1` earlier faults in this run (`host_fault_counts`) -> evict them.
   One hang on a host is treated as software; the same host hanging twice is the machine.
5. A software fault (crash, hang, network / rendezvous error, or a fault the trigger saw but
   diagnosis could not explain) -> RESTART_IN_PLACE while `restarts_used < max_restarts`, else
   STOP_AND_REPORT ("restart budget exhausted").
6. Nothing actionable on a fail-slow or periodic trigger (stragglers, missing data) -> CONTINUE.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any

from trainctl.findings import Category, Finding, FindingKind
from trainctl.inventory import host_key

__all__ = ["ActionKind", "Trigger", "Action", "decide", "USER_CODE_ERROR_RE"]


class ActionKind(str, Enum):
    EVICT_AND_RELAUNCH = "evict_and_relaunch"
    RESTART_IN_PLACE = "restart_in_place"
    STOP_AND_REPORT = "stop_and_report"
    CONTINUE = "continue"


class Trigger(str, Enum):
    """What made the supervisor ask: a rank died, progress stopped, the run slowed, or a routine check."""

    CRASH = "crash"
    HANG = "hang"
    FAIL_SLOW = "fail_slow"
    PERIODIC = "periodic"


@dataclass(frozen=True)
class Action:
    kind: ActionKind
    reason: str
    hosts: tuple[str, ...] = ()  # hosts to evict (EVICT_AND_RELAUNCH only)
    evidence: tuple[Finding, ...] = ()  # the findings this decision rests on
    restarts_used: int = 0
    max_restarts: int = 0
    rule: str = ""  # which rule fired (for logs and tests)

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind.value,
            "reason": self.reason,
            "hosts": list(self.hosts),
            "rule": self.rule,
            "restarts_used": self.restarts_used,
            "max_restarts": self.max_restarts,
            "evidence": [f.to_dict() for f in self.evidence],
        }


# Exceptions that fail the same way on every restart: the script cannot even run.
USER_CODE_ERROR_RE = re.compile(
    r"\b(ImportError|ModuleNotFoundError|SyntaxError|IndentationError|TabError|NameError)\b"
    r"|can't open file|No module named"
)
HARDWARE_CATEGORIES = frozenset({Category.XID, Category.ECC, Category.GPU_LOST, Category.UNREACHABLE})
SOFTWARE_FAULT_KINDS = frozenset(
    {
        FindingKind.CRASH,
        FindingKind.HUNG_COLLECTIVE,
        FindingKind.NETWORK_ERROR,
        FindingKind.RENDEZVOUS_ERROR,
    }
)
CONFIG_ERROR_KINDS = frozenset({FindingKind.OOM, FindingKind.NUMERICAL})


def _strings(value: Any) -> Iterable[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, Mapping):
        for v in value.values():
            yield from _strings(v)
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from _strings(v)


def _exit_code(f: Finding) -> int | None:
    for key in ("exitcode", "exit_code", "returncode"):
        v = f.evidence.get(key)
        if isinstance(v, int) and not isinstance(v, bool):
            return v
    return None


def _is_user_code_error(f: Finding) -> bool:
    if f.kind is FindingKind.COLLECTIVE_MISMATCH:
        return True
    if f.kind is not FindingKind.CRASH:
        return False
    if f.category is Category.EXIT_CODE and _exit_code(f) == 2:  # python: usage / can't open file
        return True
    return any(USER_CODE_ERROR_RE.search(s) for s in (f.summary, *_strings(f.evidence)))


def _is_hardware(f: Finding, min_conf: float) -> bool:
    return (
        f.confidence >= min_conf
        and bool(f.hosts)
        and (f.kind is FindingKind.FAULTY_HOST or f.category in HARDWARE_CATEGORIES)
    )


def _hosts_of(findings: Sequence[Finding]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(h for f in findings for h in f.hosts))


def decide(
    findings: Sequence[Finding],
    restarts_used: int,
    max_restarts: int,
    *,
    trigger: Trigger = Trigger.CRASH,
    host_fault_counts: Mapping[str, int] | None = None,
    evict_min_confidence: float = 0.7,
    repeat_evict_after: int = 2,
) -> Action:
    """Choose what the supervisor does next (the module docstring lists the rules in order).

    Args:
        findings: everything diagnosis found for this fault (any analyzer).
        restarts_used: in-place restarts already spent in this run.
        max_restarts: the run's --max-restarts budget for in-place restarts.
        trigger: what the supervisor observed; CONTINUE is only possible for FAIL_SLOW / PERIODIC.
        host_fault_counts: earlier faults (crash or hang) blamed on each host in this run, by any
            spelling of the host (counted by `host_key`: NODE02 and node02 are one machine).
        evict_min_confidence: a hardware finding below this confidence does not evict.
        repeat_evict_after: the number of faults on one host (this one included) that evicts it.
    """
    findings = tuple(findings)
    counts: dict[str, int] = {}
    for h, n in (host_fault_counts or {}).items():
        key = host_key(h)
        counts[key] = counts.get(key, 0) + n
    budget = dict(restarts_used=restarts_used, max_restarts=max_restarts)

    user = tuple(f for f in findings if _is_user_code_error(f))
    if user:
        return Action(
            ActionKind.STOP_AND_REPORT,
            f"user code error, a restart would fail the same way: {user[0].summary}",
            evidence=user,
            rule="user_code_error",
            **budget,
        )

    hw = tuple(f for f in findings if _is_hardware(f, evict_min_confidence))
    if hw:
        hosts = _hosts_of(hw)
        return Action(
            ActionKind.EVICT_AND_RELAUNCH,
            f"hardware fault on {', '.join(hosts)}: {hw[0].summary}",
            hosts=hosts,
            evidence=hw,
            rule="hardware_fault",
            **budget,
        )

    config = tuple(f for f in findings if f.kind in CONFIG_ERROR_KINDS)
    if config:
        return Action(
            ActionKind.STOP_AND_REPORT,
            f"configuration error ({config[0].kind.value}), same config fails the same way: {config[0].summary}",
            evidence=config,
            rule="config_error",
            **budget,
        )

    soft = tuple(f for f in findings if f.kind in SOFTWARE_FAULT_KINDS)
    repeat = tuple(
        f
        for f in soft
        if f.kind in (FindingKind.HUNG_COLLECTIVE, FindingKind.CRASH)
        and f.hosts
        and f.confidence >= evict_min_confidence
        and all(counts.get(host_key(h), 0) + 1 >= repeat_evict_after for h in f.hosts)
    )
    if repeat:
        hosts = _hosts_of(repeat)
        return Action(
            ActionKind.EVICT_AND_RELAUNCH,
            f"{', '.join(hosts)} blamed for {repeat_evict_after} faults in this run: {repeat[0].summary}",
            hosts=hosts,
            evidence=repeat,
            rule="repeat_offender",
            **budget,
        )

    if soft or trigger in (Trigger.CRASH, Trigger.HANG):
        what = soft[0].summary if soft else f"{trigger.value} with no diagnosis"
        if restarts_used < max_restarts:
            return Action(
                ActionKind.RESTART_IN_PLACE,
                f"software fault, restart {restarts_used + 1}/{max_restarts}: {what}",
                evidence=soft,
                rule="software_fault",
                **budget,
            )
        return Action(
            ActionKind.STOP_AND_REPORT,
            f"restart budget exhausted ({restarts_used}/{max_restarts} used): {what}",
            evidence=soft,
            rule="restarts_exhausted",
            **budget,
        )

    return Action(
        ActionKind.CONTINUE,
        f"nothing actionable on a {trigger.value} check"
        + (f" ({len(findings)} finding(s) reported)" if findings else ""),
        evidence=findings,
        rule="continue",
        **budget,
    )
