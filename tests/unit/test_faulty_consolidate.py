"""consolidate(): one faulty_host finding per host, with every analyzer's evidence (findings built in memory)."""

from __future__ import annotations

import json

import pyarrow as pa

from trainctl.analyzers import Analyzer, run_analyzers
from trainctl.analyzers.consolidate import consolidate
from trainctl.findings import Category, Finding, FindingKind, Report, Severity
from trainctl.rundir import HostRanks, RunInfo
from trainctl.schemas import SignalKind
from trainctl.signals import Signals

FH = FindingKind.FAULTY_HOST


def fh(host: str, cat: Category, sev: Severity, conf: float = 0.8, **ev) -> Finding:
    return Finding(
        FH,
        sev,
        f"{cat.value} on {host}",
        cat,
        (host,),
        (),
        conf,
        {"detected_ts": ev.pop("det", "2026-11-22T00:05:00.000+00:00"), **ev},
    )


def test_merges_per_host_highest_severity_union_evidence() -> None:
    straggler = Finding(
        FindingKind.STRAGGLER,
        Severity.WARNING,
        "rank 5 on node03 is slow",
        Category.COMPUTE,
        ("node03",),
        (5,),
        0.9,
        {"slowdown": 1.4},
    )
    crash = Finding(FindingKind.CRASH, Severity.CRITICAL, "rank 1 died", Category.SIGNAL, ("node01",), (1,), 1.0, {})
    findings = [
        fh(
            "node03",
            Category.METRIC_OUTLIER,
            Severity.WARNING,
            0.8,
            metric="power_w",
            det="2026-11-22T00:06:00.000+00:00",
        ),
        crash,
        fh("node07", Category.THERMAL, Severity.WARNING, 0.95),
        fh(
            "node03", Category.ECC, Severity.CRITICAL, 0.97, metric="ecc_dbe_total", det="2026-11-22T00:04:00.000+00:00"
        ),
        straggler,
        fh("node03", Category.XID, Severity.CRITICAL, 0.9, xid=119),
    ]
    out = consolidate(findings)
    # Other kinds untouched and in order; node03's three become one, where its first one was.
    assert [(f.kind, f.hosts) for f in out] == [
        (FH, ("node03",)),
        (FindingKind.CRASH, ("node01",)),
        (FH, ("node07",)),
        (FindingKind.STRAGGLER, ("node03",)),
    ]
    merged = out[0]
    assert merged.severity is Severity.CRITICAL
    assert merged.category is Category.ECC  # critical ties: ECC ranks before XID; the outlier is only a warning
    assert merged.evidence["categories"] == ["ecc", "xid", "metric_outlier"]
    assert [e["category"] for e in merged.evidence["findings"]] == ["ecc", "xid", "metric_outlier"]
    assert merged.evidence["findings"][0]["evidence"]["metric"] == "ecc_dbe_total"
    assert merged.evidence["detected_ts"] == "2026-11-22T00:04:00.000+00:00"  # earliest
    assert merged.evidence["stragglers"][0]["ranks"] == [5]
    assert merged.confidence == 0.99  # 1 - (0.03 * 0.1 * 0.2) capped
    assert merged.summary == "ecc on node03; also xid, metric_outlier"
    assert out[2] is findings[2]  # a host with a single finding and nothing else to add stays as it was
    json.loads(Report(None, tuple(out)).to_json())  # still plain JSON


def test_cites_log_lines_collection_failures_and_ranks() -> None:
    logs = pa.table(
        {
            "host": ["node02", "node02", "node02", "node09"],
            "source": [
                "kernel/node02/dmesg.txt",
                "logs/node02/rank-4.log",
                "logs/node02/rank-4.log",
                "kernel/node09/dmesg.txt",
            ],
            "line_no": [7, 120, 121, 3],
            "kind": [None, "faulty_host", "crash", None],
            "xid": pa.array([48, None, None, 79], pa.int32()),
            "message": [
                "NVRM: Xid (PCI:0000:18:00): 48, pid=77, DBE (0x1,0x2)",
                "CUDA error: uncorrectable ECC error encountered",
                "Traceback (most recent call last):",
                "NVRM: Xid 79",
            ],
        }
    )
    status = pa.table(
        {
            "host": ["node02", "node02"],
            "kind": ["stacks", "timeline"],
            "ok": [False, True],
            "error_type": ["TimeoutError", None],
            "error": ["py-spy timed out", None],
        }
    )
    run = RunInfo("r1", 8, 4, (HostRanks("node01", (0, 1, 2, 3)), HostRanks("node02", (4, 5, 6, 7))))
    signals = Signals(run, {SignalKind.LOG_EVENTS: logs, SignalKind.COLLECTION_STATUS: status})
    (merged,) = consolidate(
        [fh("node02", Category.ECC, Severity.CRITICAL), fh("node02", Category.POWER, Severity.WARNING)], signals
    )
    assert merged.evidence["log_lines"] == [
        "kernel/node02/dmesg.txt:7: NVRM: Xid (PCI:0000:18:00): 48, pid=77, DBE (0x1,0x2)",
        "logs/node02/rank-4.log:120: CUDA error: uncorrectable ECC error encountered",
    ]
    assert merged.evidence["collection_failures"] == [
        {"kind": "stacks", "error_type": "TimeoutError", "error": "py-spy timed out"}
    ]
    assert merged.ranks == (4, 5, 6, 7)


def test_multi_host_and_no_faulty_findings_pass_through() -> None:
    link = Finding(FH, Severity.WARNING, "link between node01 and node02", Category.NVLINK, ("node01", "node02"))
    other = Finding(FindingKind.OOM, Severity.CRITICAL, "oom", None, ("node01",))
    assert consolidate([link, other]) == [link, other]
    assert consolidate([]) == []


def test_run_analyzers_consolidates_across_analyzers() -> None:
    a = Analyzer("a", (SignalKind.LOG_EVENTS,), lambda s: [fh("node05", Category.XID, Severity.CRITICAL, 0.9, xid=79)])
    b = Analyzer("b", (SignalKind.LOG_EVENTS,), lambda s: [fh("node05", Category.GPU_LOST, Severity.CRITICAL, 0.95)])
    logs = pa.table(
        {
            "host": ["node05"],
            "source": ["x.log"],
            "line_no": [1],
            "message": ["hello"],
            "kind": [None],
            "xid": pa.array([None], pa.int32()),
        }
    )
    out = run_analyzers(Signals(None, {SignalKind.LOG_EVENTS: logs}), [a, b])
    assert [(f.hosts, f.category, f.evidence["categories"]) for f in out] == [
        (("node05",), Category.GPU_LOST, ["gpu_lost", "xid"])
    ]
