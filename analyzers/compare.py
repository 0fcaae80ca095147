"""Two runs side by side (`trainctl compare RUN_A RUN_B`): step time by phase, hosts, findings.

Pure: each run's Signals and findings in, a `RunComparison` out. The usual question is "what
changed between yesterday's good run and today's slow one" (or before and after an eviction):

- phases: per phase, the median and p90 of the per-rank, per-step durations, the steps seen,
  and B's change against A in percent. Per-rank values, not per-step maxima: a straggler shows up
  in the p90 while the median says whether every rank got slower.
- hosts: the hosts each run used (its RunInfo, else the hosts named by its metrics), as only in
  A, only in B, both.
- findings: matched by (kind, category, hosts, ranks): `new` in B, `resolved` (only in A),
  `persists` (with A's severity, so a warning that became critical shows), `not judged in B` (only in A, of a
  kind B had no data to judge: a straggler of A against a B with no timeline).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from enum import Enum
from typing import Any

import duckdb

from trainctl.findings import Finding, FindingKind
from trainctl.schemas import SignalKind
from trainctl.signals import Signals, TableLike

__all__ = [
    "ChangeStatus",
    "FindingChange",
    "PhaseChange",
    "RunComparison",
    "RunProfile",
    "compare_runs",
    "finding_changes",
    "phase_stats",
    "run_profile",
]


class ChangeStatus(str, Enum):
    NEW = "new"  # in B only
    RESOLVED = "resolved"  # in A only
    PERSISTS = "persists"  # in both
    NOT_JUDGED = "not judged in B"  # in A only, and B holds no data to judge it on (a run with no timeline)


@dataclass(frozen=True)
class PhaseStats:
    median_ms: float
    p90_ms: float
    steps: int
    ranks: int


@dataclass(frozen=True)
class PhaseChange:
    phase: str
    a_median_ms: float | None
    b_median_ms: float | None
    a_p90_ms: float | None
    b_p90_ms: float | None
    a_steps: int
    b_steps: int
    median_change_pct: float | None  # (B - A) / A; None when a side has no rows of this phase


@dataclass(frozen=True)
class FindingChange:
    status: ChangeStatus
    kind: str
    category: str | None
    hosts: tuple[str, ...]
    ranks: tuple[int, ...]
    severity: str  # B's, or A's for a resolved finding
    a_severity: str | None  # A's, where A has it
    summary: str  # B's summary where the finding is in B, else A's


@dataclass(frozen=True)
class RunComparison:
    a: str
    b: str
    phases: tuple[PhaseChange, ...]
    hosts_only_a: tuple[str, ...]
    hosts_only_b: tuple[str, ...]
    hosts_both: tuple[str, ...]
    findings: tuple[FindingChange, ...]
    # The inputs of either run that were skipped (a torn part, an analyzer that failed on odd values), as
    # Report.skipped lists them for diagnose: each one line, already said on stderr. Set by the reader
    # (ops/diagnose/compare.py), not here: comparing is pure, reading is not. With them the exit code is 6.
    skipped: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        for f in d["findings"]:
            f["status"] = f["status"].value
        d["skipped"] = list(self.skipped)  # a list, as in diagnose's JSON
        return d


def phase_stats(timeline: TableLike | None) -> dict[str, PhaseStats]:
    """phase -> median/p90 of per-rank step durations (ms), distinct steps and ranks."""
    if timeline is None:
        return {}
    con = duckdb.connect()
    try:
        con.register("t", timeline)
        rows = con.execute(
            "SELECT phase, quantile_cont(duration_ns, 0.5), quantile_cont(duration_ns, 0.9), "
            "count(DISTINCT step), count(DISTINCT rank) FROM t WHERE duration_ns >= 0 GROUP BY phase"
        ).fetchall()
    finally:
        con.close()
    return {
        str(p): PhaseStats(round(med / 1e6, 3), round(p90 / 1e6, 3), int(steps), int(ranks))
        for p, med, p90, steps, ranks in rows
        if med is not None
    }


def _hosts(signals: Signals) -> set[str]:
    hosts = set(signals.rank_to_host().values())
    if hosts:
        return hosts
    for kind in (SignalKind.GPU_METRICS, SignalKind.HOST_METRICS):
        t = signals.tables.get(kind)
        if t is None or not signals.has(kind):
            continue
        con = duckdb.connect()
        try:
            con.register("t", t)
            hosts |= {str(h) for (h,) in con.execute("SELECT DISTINCT host FROM t WHERE host IS NOT NULL").fetchall()}
        finally:
            con.close()
    return hosts


@dataclass(frozen=True)
class RunProfile:
    """What one run brings to a comparison besides its findings: its step times by phase and its hosts."""

    phases: dict[str, PhaseStats]
    hosts: frozenset[str]


def run_profile(signals: Signals) -> RunProfile:
    """One run's side of a comparison: every read of its tables a comparison makes (its timeline, its metrics'
    hosts), so that a loader can read each run on its own and retry it without a part it could not read."""
    return RunProfile(phase_stats(signals.tables.get(SignalKind.TIMELINE)), frozenset(_hosts(signals)))


def _key(f: Finding) -> tuple[str, str | None, tuple[str, ...], tuple[int, ...]]:
    return (f.kind.value, f.category.value if f.category else None, tuple(sorted(f.hosts)), tuple(sorted(f.ranks)))


def finding_changes(
    before: list[Finding], after: list[Finding], not_judged_after: frozenset[FindingKind] = frozenset()
) -> list[FindingChange]:
    """Findings matched by (kind, category, hosts, ranks): new in `after`, persisting (with the
    earlier severity), resolved (only in `before`); new first. Used by `compare` (run A -> run B)
    and by `diagnose --watch` (one round -> the next). A finding only in `before` whose kind `after`
    could not judge (not_judged_after: its analyzer said why, as a run with no timeline does) is not
    resolved: nothing in `after` says it went away."""
    by_a = {_key(f): f for f in before}
    by_b = {_key(f): f for f in after}
    changes = []
    for k, f in by_b.items():
        prev = by_a.get(k)
        status = ChangeStatus.PERSISTS if prev else ChangeStatus.NEW
        a_sev = prev.severity.value if prev else None
        changes.append(FindingChange(status, k[0], k[1], k[2], f.ranks, f.severity.value, a_sev, f.summary))
    for k, f in by_a.items():
        if k not in by_b:
            sev = f.severity.value
            status = ChangeStatus.NOT_JUDGED if f.kind in not_judged_after else ChangeStatus.RESOLVED
            changes.append(FindingChange(status, k[0], k[1], k[2], f.ranks, sev, sev, f.summary))
    order = {ChangeStatus.NEW: 0, ChangeStatus.PERSISTS: 1, ChangeStatus.NOT_JUDGED: 2, ChangeStatus.RESOLVED: 3}
    changes.sort(key=lambda c: (order[c.status], c.kind, c.hosts))
    return changes


def _pct(a: float | None, b: float | None) -> float | None:
    if a is None or b is None or a <= 0:
        return None
    return round((b - a) / a * 100.0, 1)


def compare_runs(
    a: Signals | RunProfile,
    a_findings: list[Finding],
    b: Signals | RunProfile,
    b_findings: list[Finding],
    *,
    a_name: str = "A",
    b_name: str = "B",
    b_not_judged: frozenset[FindingKind] = frozenset(),
) -> RunComparison:
    """A against B, from each run's Signals or its `run_profile` (read already)."""
    a, b = (r if isinstance(r, RunProfile) else run_profile(r) for r in (a, b))
    pa_, pb_ = a.phases, b.phases
    phases = []
    for phase in sorted(set(pa_) | set(pb_), key=lambda p: (p != "step", p)):  # the whole step first
        sa, sb = pa_.get(phase), pb_.get(phase)
        phases.append(
            PhaseChange(
                phase,
                sa.median_ms if sa else None,
                sb.median_ms if sb else None,
                sa.p90_ms if sa else None,
                sb.p90_ms if sb else None,
                sa.steps if sa else 0,
                sb.steps if sb else 0,
                _pct(sa.median_ms if sa else None, sb.median_ms if sb else None),
            )
        )
    ha, hb = a.hosts, b.hosts
    changes = finding_changes(a_findings, b_findings, b_not_judged)
    return RunComparison(
        a_name,
        b_name,
        tuple(phases),
        tuple(sorted(ha - hb)),
        tuple(sorted(hb - ha)),
        tuple(sorted(ha & hb)),
        tuple(changes),
    )
