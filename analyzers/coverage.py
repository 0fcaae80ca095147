"""collection_status -> missing_data findings (and unreachable hosts -> faulty_host).

Missing data is never silent: every host x kind that `trainctl collect` could not bring back
becomes evidence. A host that could not be reached at all is also a faulty_host/unreachable
finding with moderate confidence: a host that stops answering SSH mid-run is one of the strongest
signals that it is the broken one, but a wrong address or a firewall looks the same.
"""

from __future__ import annotations

from collections import defaultdict

import pyarrow as pa

from trainctl.findings import Category, Finding, FindingKind, Severity
from trainctl.schemas import SignalKind
from trainctl.signals import Signals

__all__ = ["UNREACHABLE_TYPES", "QUIET_TYPES", "coverage_findings", "analyze"]

# Reasons that mean "could not talk to the host at all".
UNREACHABLE_TYPES = frozenset({"unreachable", "timeout"})
# Reasons that mean the host is fine but lacks a tool or a permission: reported as info only.
# Grouped across hosts at info level: a tool or permission missing, or files offered under another
# host's paths that their owner did not list (refused by collect). On a shared run dir every host
# lists every host's files and their owners list them too: collect records that as ok
# (`shared_run_dir`), which is no finding at all.
QUIET_TYPES = frozenset({"not_installed", "permission", "foreign_paths"})


def coverage_findings(
    status: pa.Table,
    *,
    unreachable_confidence: float = 0.6,
    max_hosts_listed: int = 20,
) -> list[Finding]:
    """Findings from a collection_status table (columns of the contract plus `host`).

    unreachable_confidence: confidence of the faulty_host finding for a host that failed every
      kind with an unreachable/timeout reason (moderate: a network or config problem looks alike).
    max_hosts_listed: hosts named in one finding grouped across hosts (a missing tool).
    """
    rows = status.select(["host", "kind", "ok", "error_type", "error"]).to_pylist()
    by_host: dict[str, list[dict]] = defaultdict(list)
    for r in rows:
        by_host[r["host"]].append(r)
    findings: list[Finding] = []
    partial: dict[tuple[str, str], list[dict]] = defaultdict(list)  # (host, error_type)
    quiet: dict[tuple[str, str], list[dict]] = defaultdict(list)  # (kind, error_type)
    for host in sorted(by_host):
        rs = by_host[host]
        bad = [r for r in rs if not r["ok"]]
        if not bad:
            continue
        if len(bad) == len(rs):
            etypes = sorted({r["error_type"] or "unknown" for r in bad})
            err = bad[0]["error"]
            findings.append(
                Finding(
                    kind=FindingKind.MISSING_DATA,
                    severity=Severity.WARNING,
                    hosts=(host,),
                    confidence=1.0,
                    summary=f"no data from {host}: {etypes[0]} ({len(bad)} kinds missing)",
                    evidence={"error_type": etypes, "error": err, "kinds": sorted(r["kind"] for r in bad)},
                )
            )
            if set(etypes) <= UNREACHABLE_TYPES:
                findings.append(
                    Finding(
                        kind=FindingKind.FAULTY_HOST,
                        severity=Severity.WARNING,
                        category=Category.UNREACHABLE,
                        hosts=(host,),
                        confidence=unreachable_confidence,
                        summary=f"{host} did not answer SSH during collection ({etypes[0]})",
                        evidence={"error_type": etypes, "error": err},
                    )
                )
            continue
        for r in bad:
            etype = r["error_type"] or "unknown"
            if etype in QUIET_TYPES:  # a tool or permission missing: one finding across hosts
                quiet[(r["kind"], etype)].append(r)
            else:
                partial[(host, etype)].append(r)
    for (host, etype), rs in sorted(partial.items()):
        kinds = sorted(r["kind"] for r in rs)
        findings.append(
            Finding(
                kind=FindingKind.MISSING_DATA,
                severity=Severity.WARNING,
                hosts=(host,),
                confidence=1.0,
                summary=f"{', '.join(kinds[:4])}{' ...' if len(kinds) > 4 else ''} missing from {host} ({etype}): {rs[0]['error']}",
                evidence={"kinds": kinds, "error_type": etype, "error": rs[0]["error"]},
            )
        )
    for (kind, etype), rs in sorted(quiet.items()):
        hosts = sorted({r["host"] for r in rs})
        findings.append(
            Finding(
                kind=FindingKind.MISSING_DATA,
                severity=Severity.INFO,
                hosts=tuple(hosts[:max_hosts_listed]),
                confidence=1.0,
                summary=f"{kind} missing on {len(hosts)} host(s) ({etype}): {rs[0]['error']}",
                evidence={
                    "kind": kind,
                    "error_type": etype,
                    "hosts": hosts[:max_hosts_listed],
                    "host_count": len(hosts),
                    "error": rs[0]["error"],
                },
            )
        )
    return findings


def analyze(signals: Signals) -> list[Finding]:
    t = signals.table(SignalKind.COLLECTION_STATUS)
    return [] if t is None else coverage_findings(t)
