"""nccl_procs -> findings: a rank that fell back to sockets, NCCL versions that differ, P2P off on a host.

Pure: the table in (trainctl.collectors.nccl_topology writes it from NCCL's own INFO init lines),
findings out. Each rule compares a process with the rest of the job, so a cluster that runs on
sockets everywhere (Ethernet, or gloo-era CPU hosts) is not a finding: only the odd one out is.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from typing import Any

import pyarrow as pa

from trainctl.findings import Category, Finding, FindingKind, Severity
from trainctl.schemas import SignalKind
from trainctl.signals import Signals

__all__ = ["analyze_nccl", "analyze"]


def _ranks(rows: Iterable[Mapping[str, Any]]) -> list[int]:
    return sorted({int(r["rank"]) for r in rows if r.get("rank") is not None})


def _where(rows: list[Mapping[str, Any]]) -> str:
    ranks = _ranks(rows)
    return f"rank{'s' if len(ranks) != 1 else ''} {', '.join(map(str, ranks[:8]))}" if ranks else "a process"


def _is_socket(row: Mapping[str, Any]) -> bool | None:
    net = (row.get("network") or "").strip().lower()
    if not net:
        return None
    return net == "socket"


def analyze_nccl(procs: pa.Table, *, majority: float = 0.5) -> list[Finding]:
    """Findings from nccl_procs (columns of the contract plus `host`).

    majority: the share of processes (with that fact known) that must agree before the rest are
    called out; at or below it nobody is (a split job is a configuration, not one bad host).
    """
    rows = procs.to_pylist()
    findings: list[Finding] = []

    # 1. Fell back to sockets while the job runs on IB (or a net plugin): every collective that
    #    crosses that rank's host goes at TCP speed. Why is on the host: NCCL_IB_DISABLE, no HCA
    #    visible (container without /dev/infiniband), a missing plugin, HCAs down.
    known = [r for r in rows if _is_socket(r) is not None]
    fast = [r for r in known if not _is_socket(r)]
    if known and len(fast) / len(known) > majority:
        nets = Counter(str(r["network"]) for r in fast)
        usual, _ = nets.most_common(1)[0]
        by_host: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
        for r in known:
            if _is_socket(r):
                by_host[str(r["host"])].append(r)
        for host, rs in sorted(by_host.items()):
            findings.append(
                Finding(
                    kind=FindingKind.NETWORK_ERROR,
                    severity=Severity.WARNING,
                    category=Category.SOCKET,
                    summary=(
                        f"{_where(rs)} on {host} fell back to sockets: NCCL chose 'Socket' while {len(fast)} of "
                        f"{len(known)} processes use {usual}; check NCCL_IB_DISABLE, the HCAs and the net plugin on {host}"
                    ),
                    hosts=(host,),
                    ranks=tuple(_ranks(rs)),
                    confidence=0.9,
                    evidence={
                        "network": "Socket",
                        "job_network": usual,
                        "processes_on_job_network": len(fast),
                        "processes_known": len(known),
                        "net_devices": sorted({str(r["net_devices"]) for r in rs if r.get("net_devices")})[:4],
                        "sources": sorted({str(r["source"]) for r in rs if r.get("source")})[:8],
                    },
                )
            )

    # 2. Different NCCL versions in one job: protocols and tuning differ, and a mismatch is a known
    #    cause of hangs at init; the minority version is the odd one out.
    versions = [r for r in rows if r.get("nccl_version")]
    counts = Counter(str(r["nccl_version"]) for r in versions)
    if len(counts) > 1:
        usual, n_usual = counts.most_common(1)[0]
        if n_usual / len(versions) > majority:
            odd = [r for r in versions if r["nccl_version"] != usual]
            by_host = defaultdict(list)
            for r in odd:
                by_host[str(r["host"])].append(r)
            for host, rs in sorted(by_host.items()):
                vs = sorted({str(r["nccl_version"]) for r in rs})
                findings.append(
                    Finding(
                        kind=FindingKind.NETWORK_ERROR,
                        severity=Severity.WARNING,
                        category=Category.NCCL,
                        summary=(
                            f"{_where(rs)} on {host} run NCCL {', '.join(vs)} while {n_usual} of {len(versions)} "
                            f"processes run {usual}; install the job's NCCL on {host}"
                        ),
                        hosts=(host,),
                        ranks=tuple(_ranks(rs)),
                        confidence=0.85,
                        evidence={"nccl_version": vs, "job_nccl_version": usual, "versions": dict(counts)},
                    )
                )

    # 3. No P2P inside a host while the other hosts use it: intra-node traffic goes through host
    #    memory (SHM) instead of NVLink/PCIe peer access (NCCL_P2P_DISABLE, ACS/IOMMU, a container
    #    without IPC).
    host_links: dict[str, Counter[str]] = defaultdict(Counter)
    for r in rows:
        host_links[str(r["host"])]["p2p"] += int(r.get("links_p2p") or 0)
        host_links[str(r["host"])]["shm"] += int(r.get("links_shm") or 0)
    intra = {h: c for h, c in host_links.items() if c["p2p"] + c["shm"] > 0}
    p2p_hosts = [h for h, c in intra.items() if c["p2p"] > 0]
    if intra and len(p2p_hosts) / len(intra) > majority:
        for host, c in sorted(intra.items()):
            if c["p2p"] == 0:
                rs = [r for r in rows if str(r["host"]) == host]
                findings.append(
                    Finding(
                        kind=FindingKind.NETWORK_ERROR,
                        severity=Severity.WARNING,
                        category=Category.NCCL,
                        summary=(
                            f"NCCL on {host} connects its GPUs through shared memory ({c['shm']} SHM links, no P2P) "
                            f"while {len(p2p_hosts)} of {len(intra)} hosts use P2P; check NCCL_P2P_DISABLE, ACS and "
                            f"IOMMU settings on {host}"
                        ),
                        hosts=(host,),
                        ranks=tuple(_ranks(rs)),
                        confidence=0.7,
                        evidence={"links_shm": c["shm"], "links_p2p": 0, "hosts_with_p2p": len(p2p_hosts)},
                    )
                )
    return findings


def analyze(signals: Signals) -> list[Finding]:
    return analyze_nccl(signals.table(SignalKind.NCCL_PROCS))
