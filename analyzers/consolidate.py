"""One finding per faulty host, citing all its evidence (runs after every other analyzer).

Several analyzers can blame the same host for different reasons: the metrics analyzer for an ECC
error and an outlier, the log analyzer for an Xid line, collect for an unreachable host. An SRE
wants one line per machine to evict, with everything that supports it. `consolidate` merges the
`faulty_host` findings of each host into one (highest severity; the primary category is the most
severe finding's, ties broken by CATEGORY_PRIORITY; evidence is the union), and attaches what else
the signals say about that host: classified log lines (Xid, kind faulty_host), straggler findings
on it, failed collection rows. Findings of other kinds pass through untouched.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

from trainctl.findings import Category, Finding, FindingKind
from trainctl.schemas import SignalKind
from trainctl.signals import Signals

__all__ = ["CATEGORY_PRIORITY", "consolidate"]

logger = logging.getLogger(__name__)

# Which category names the host when severities tie: the most specific, least ambiguous first.
CATEGORY_PRIORITY: tuple[Category, ...] = (
    Category.GPU_LOST,
    Category.ECC,
    Category.XID,
    Category.NVLINK,
    Category.PCIE_DOWNGRADE,
    Category.POWER,
    Category.THERMAL,
    Category.UNREACHABLE,
    Category.METRIC_OUTLIER,
)


def _prio(c: Category | None) -> int:
    return CATEGORY_PRIORITY.index(c) if c in CATEGORY_PRIORITY else len(CATEGORY_PRIORITY)


def _log_lines(signals: Signals | None, host: str, limit: int) -> list[str]:
    if signals is None:
        return []
    t = signals.table(SignalKind.LOG_EVENTS)
    if t is None or not t.num_rows or "host" not in t.column_names:
        return []
    import pyarrow as pa
    import pyarrow.compute as pc

    hosts = t.column("host")
    if pa.types.is_dictionary(hosts.type):
        hosts = hosts.cast(pa.string())
    mask = pc.equal(hosts, host)
    kinds = pc.equal(t.column("kind"), FindingKind.FAULTY_HOST.value) if "kind" in t.column_names else None
    xid = pc.is_valid(t.column("xid")) if "xid" in t.column_names else None
    which = kinds if xid is None else xid if kinds is None else pc.or_kleene(kinds, xid)
    if which is None:
        return []
    rows = t.filter(pc.and_kleene(mask, pc.fill_null(which, False))).slice(0, limit).to_pylist()
    return [f"{r.get('source', '')}:{r.get('line_no', '')}: {str(r.get('message', ''))[:300]}" for r in rows]


def _collection_failures(signals: Signals | None, host: str) -> list[dict[str, Any]]:
    if signals is None:
        return []
    t = signals.table(SignalKind.COLLECTION_STATUS)
    if t is None or not t.num_rows or "host" not in t.column_names:
        return []
    rows = [r for r in t.to_pylist() if r.get("host") == host and not r.get("ok")]
    return [
        {"kind": r.get("kind"), "error_type": r.get("error_type"), "error": (r.get("error") or "")[:300]} for r in rows
    ]


def _host_ranks(signals: Signals | None, host: str) -> tuple[int, ...]:
    if signals is None or signals.run is None:
        return ()
    return tuple(sorted(r for r, h in signals.rank_to_host().items() if h == host))


def consolidate(
    findings: Iterable[Finding], signals: Signals | None = None, *, max_log_lines: int = 20
) -> list[Finding]:
    """Merge `faulty_host` findings per host; other kinds are returned unchanged, in order.

    A faulty_host finding that names several hosts is left alone (it is about their link, not one
    machine). The merged finding sits where the host's first finding was.
    """
    findings = list(findings)
    by_host: dict[str, list[Finding]] = {}
    for f in findings:
        if f.kind is FindingKind.FAULTY_HOST and len(f.hosts) == 1:
            by_host.setdefault(f.hosts[0], []).append(f)
    if not by_host:
        return findings
    stragglers: dict[str, list[Finding]] = {}
    for f in findings:
        if f.kind is FindingKind.STRAGGLER:
            for h in f.hosts:
                stragglers.setdefault(h, []).append(f)

    out: list[Finding] = []
    emitted: set[str] = set()
    for f in findings:
        if not (f.kind is FindingKind.FAULTY_HOST and len(f.hosts) == 1):
            out.append(f)
            continue
        host = f.hosts[0]
        if host in emitted:
            continue
        emitted.add(host)
        group = by_host[host]
        out.append(_merge(host, group, stragglers.get(host, []), signals, max_log_lines))
    return out


def _merge(
    host: str, group: list[Finding], stragglers: list[Finding], signals: Signals | None, max_log_lines: int
) -> Finding:
    ordered = sorted(group, key=lambda f: (-f.severity.rank, _prio(f.category), -f.confidence))
    top = ordered[0]
    categories: list[str] = []
    for f in ordered:
        if f.category is not None and f.category.value not in categories:
            categories.append(f.category.value)
    miss = 1.0
    for f in group:
        miss *= 1.0 - f.confidence
    detected = sorted(str(f.evidence["detected_ts"]) for f in group if f.evidence.get("detected_ts"))
    evidence: dict[str, Any] = {
        "categories": categories,
        "findings": [
            {
                "category": f.category.value if f.category else None,
                "severity": f.severity.value,
                "summary": f.summary,
                "confidence": f.confidence,
                "evidence": dict(f.evidence),
            }
            for f in ordered
        ],
    }
    if detected:
        evidence["detected_ts"] = detected[0]
    logs = _log_lines(signals, host, max_log_lines)
    if logs:
        evidence["log_lines"] = logs
    if stragglers:
        evidence["stragglers"] = [
            {"summary": s.summary, "ranks": list(s.ranks), "evidence": dict(s.evidence)} for s in stragglers
        ]
    failures = _collection_failures(signals, host)
    if failures:
        evidence["collection_failures"] = failures
    others = [c for c in categories if c != (top.category.value if top.category else None)]
    summary = top.summary if not others else f"{top.summary}; also {', '.join(others)}"
    if len(group) == 1 and not (logs or stragglers or failures):
        return group[0]
    ranks = tuple(sorted({r for f in group for r in f.ranks} | set(_host_ranks(signals, host))))
    return Finding(
        kind=FindingKind.FAULTY_HOST,
        severity=max((f.severity for f in group), key=lambda s: s.rank),
        summary=summary,
        category=top.category,
        hosts=(host,),
        ranks=ranks,
        confidence=round(min(0.99, max(1.0 - miss, top.confidence)), 3),
        evidence=evidence,
        playbook=top.playbook,
    )
