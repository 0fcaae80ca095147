"""The faulty-host analyzer on simulated fleets (trainctl.simulation.fleet, fixed seeds, small sizes).

Each fault type must name exactly its host with the expected category; each healthy quirk and a
clean fleet must produce nothing.
"""

from __future__ import annotations

import pyarrow as pa
import pytest

from trainctl.analyzers.consolidate import consolidate
from trainctl.analyzers.faulty_hosts import XID_TABLE, find_faulty_hosts, xid_info
from trainctl.errors import InputError
from trainctl.findings import Category, FindingKind, Severity
from trainctl.simulation.fleet import (
    FAULT_KINDS,
    QUIRK_KINDS,
    FaultSpec,
    FleetScenario,
    QuirkSpec,
    parse_fault,
    parse_quirk,
    simulate,
)

HOSTS, GPUS, SECONDS = 8, 4, 360


def _analyze(sc: FleetScenario, **kw):
    r = simulate(sc)
    return consolidate(find_faulty_hosts(r.gpu_metrics, r.host_metrics, **kw)), r


@pytest.mark.parametrize("kind", sorted(FAULT_KINDS))
@pytest.mark.parametrize("seed", [0, 1])
def test_each_fault_names_its_host_and_category(kind: str, seed: int) -> None:
    findings, r = _analyze(FleetScenario(HOSTS, GPUS, SECONDS, faults=(FaultSpec(kind, "node03", 150),), seed=seed))
    assert [(f.kind, f.hosts, f.category) for f in findings] == [
        (FindingKind.FAULTY_HOST, ("node03",), Category(FAULT_KINDS[kind]))
    ]
    f = findings[0]
    # Detected after the onset, within the documented rules' delays (persistence 60 s, continuity 60 s).
    detected = f.evidence["detected_ts"]
    assert "00:02:30" <= detected[11:19] <= "00:04:30", detected


@pytest.mark.parametrize("quirk", QUIRK_KINDS)
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_healthy_quirks_do_not_alarm(quirk: str, seed: int) -> None:
    q = QuirkSpec(quirk, None) if quirk == "fleet_pause" else QuirkSpec(quirk, "node02")
    findings, _ = _analyze(FleetScenario(HOSTS, GPUS, SECONDS, quirks=(q,), seed=seed))
    assert findings == []


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_clean_fleet_has_no_findings(seed: int) -> None:
    findings, _ = _analyze(FleetScenario(HOSTS, GPUS, SECONDS, seed=seed))
    assert findings == []


def test_two_faults_among_quirks() -> None:
    sc = FleetScenario(
        16,
        GPUS,
        480,
        seed=7,
        faults=(FaultSpec("nvlink_crc", "node04", 120), FaultSpec("cpu_contention", "node11", 200)),
        quirks=(
            QuirkSpec("fleet_pause", None, 300),
            QuirkSpec("sw_power_cap", "node05"),
            QuirkSpec("old_ecc", "node06"),
            QuirkSpec("low_crc", "node07"),
            QuirkSpec("pcie_idle", "node08"),
            QuirkSpec("warm_host", "node09"),
            QuirkSpec("blips", "node10"),
        ),
    )
    findings, _ = _analyze(sc)
    assert sorted((f.hosts[0], f.category.value) for f in findings) == [
        ("node04", "nvlink"),
        ("node11", "metric_outlier"),
    ]


def test_evidence_names_gpu_values_and_xids() -> None:
    findings, r = _analyze(
        FleetScenario(HOSTS, GPUS, SECONDS, faults=(FaultSpec("xid64", "node05", 100, gpu=2),), seed=3)
    )
    (f,) = findings
    assert f.severity is Severity.CRITICAL and f.category is Category.ECC
    sigs = f.evidence["signals"]
    assert {s.get("xid") for s in sigs if "xid" in s} == {48, 64}
    assert {s["gpu"] for s in sigs} == {2}
    dbe = next(s for s in sigs if s.get("metric") == "ecc_dbe_total")
    assert (dbe["from"], dbe["to"]) == (0.0, 5.0)  # one more DBE a minute from 100 s to 360 s


def test_gpu_lost_cites_count_drop_and_silent_gpu() -> None:
    findings, _ = _analyze(
        FleetScenario(HOSTS, GPUS, SECONDS, faults=(FaultSpec("gpu_lost", "node02", 100, gpu=1),), seed=0)
    )
    (f,) = findings
    assert f.category is Category.GPU_LOST
    sigs = f.evidence["signals"]
    assert any(s.get("metric") == "gpu_count" and (s["from"], s["to"]) == (4, 3) for s in sigs)
    assert any(s.get("gpu") == 1 and "last_sample_ts" in s for s in sigs)


def test_outlier_needs_continuity() -> None:
    # 60 s of CPU contention (300 s to the end): with Minder's 240 s continuity (the host must be
    # the outlier in 80% of 240 windows) that is not enough; with our 60 s it is.
    sc = FleetScenario(HOSTS, GPUS, SECONDS, faults=(FaultSpec("cpu_contention", "node03", 300),), seed=0)
    r = simulate(sc)
    assert [f.hosts for f in find_faulty_hosts(r.gpu_metrics, r.host_metrics, continuity_s=240)] == []
    assert [f.hosts for f in find_faulty_hosts(r.gpu_metrics, r.host_metrics, continuity_s=60)] == [("node03",)]


def test_tiny_fleet_skips_comparison() -> None:
    sc = FleetScenario(3, GPUS, SECONDS, faults=(FaultSpec("cpu_contention", "node02", 100),), seed=0)
    findings, _ = _analyze(sc)
    assert findings == []  # 3 hosts < min_fleet_hosts=4: no fleet to compare against


def test_log_xids_and_unreachable_collection() -> None:
    # Unreachable hosts come from analyzers/coverage.py; consolidate folds them in per host.
    logs = pa.table(
        {
            "ts": pa.array([1_795_305_700 * 10**9] * 3, pa.timestamp("ns", tz="UTC")),
            "host": ["node01", "node02", "node02"],
            "source": ["kernel/node01/dmesg.txt", "kernel/node02/dmesg.txt", "kernel/node02/dmesg.txt"],
            "line_no": [10, 4, 5],
            "xid": pa.array([79, 13, 13], pa.int32()),
            "message": [
                "NVRM: Xid (PCI:0000:18:00): 79, pid=1234, GPU has fallen off the bus.",
                "NVRM: Xid (PCI:0000:3b:00): 13, Graphics Exception",
                "NVRM: Xid (PCI:0000:3b:00): 13, Graphics Exception",
            ],
        }
    )
    status = pa.table(
        {
            "host": ["node03", "node03", "node04"],
            "kind": ["timeline", "gpu_metrics", "timeline"],
            "ok": [False, False, False],
            "error_type": ["unreachable", "unreachable", "no_run_dir"],
            "error": ["ssh node03:22: timed out", "ssh node03:22: timed out", "no timeline parts"],
        }
    )
    from trainctl.analyzers import run_analyzers
    from trainctl.schemas import SignalKind
    from trainctl.signals import Signals

    findings = run_analyzers(Signals(None, {SignalKind.LOG_EVENTS: logs, SignalKind.COLLECTION_STATUS: status}))
    findings = [f for f in findings if f.kind.value == "faulty_host"]
    got = sorted((f.hosts[0], f.category.value, f.severity.value) for f in findings)
    # Xid 13 is the application's doing; node04's missing file is missing data, not a dead host.
    assert got == [("node01", "gpu_lost", "critical"), ("node03", "unreachable", "warning")]
    node01 = next(f for f in find_faulty_hosts(None, None, logs) if f.hosts == ("node01",))
    assert node01.evidence["signals"][0]["log"] == "kernel/node01/dmesg.txt:10"


def test_xid_table_meanings() -> None:
    assert xid_info(48).category is Category.ECC and xid_info(48).severity is Severity.CRITICAL
    assert xid_info(79).category is Category.GPU_LOST
    assert xid_info(74).category is Category.NVLINK and xid_info(145).category is Category.NVLINK
    assert not xid_info(13).blames_host and not xid_info(31).blames_host and not xid_info(43).blames_host
    assert xid_info(63).severity is Severity.WARNING and xid_info(64).severity is Severity.CRITICAL
    assert xid_info(999).blames_host and xid_info(999).category is Category.XID
    assert {13, 31, 43, 45, 48, 61, 62, 63, 64, 68, 74, 79, 92, 94, 95, 119, 120, 154} <= set(XID_TABLE)


def test_spec_parsing() -> None:
    assert parse_fault("thermal@node03:120") == FaultSpec("thermal", "node03", 120.0)
    assert parse_fault("nic_degraded@4:300:0.5") == FaultSpec("nic_degraded", "4", 300.0, magnitude=0.5)
    assert parse_fault("gpu_lost@node01") == FaultSpec("gpu_lost", "node01", None)
    assert parse_quirk("fleet_pause:300") == QuirkSpec("fleet_pause", None, 300.0)
    assert parse_quirk("blips@node02") == QuirkSpec("blips", "node02", None)
    from trainctl.errors import InputError

    with pytest.raises(InputError, match="KIND@HOST"):
        parse_fault("melted@node01")


def test_host_metrics_only_and_lazy_dataset(tmp_path) -> None:
    from trainctl.dataset import open_dataset
    from trainctl.simulation.fleet import write_fleet

    r = simulate(FleetScenario(HOSTS, GPUS, SECONDS, faults=(FaultSpec("cpu_contention", "node06", 120),), seed=4))
    # CPU-only fleet (no NVML anywhere): host metrics alone still name the host.
    assert [(f.hosts, f.category) for f in find_faulty_hosts(None, r.host_metrics)] == [
        (("node06",), Category.METRIC_OUTLIER)
    ]
    # Read lazily from Parquet as diagnose does for big tables: same answer.
    write_fleet(r, tmp_path)
    lazy = find_faulty_hosts(open_dataset(tmp_path, "gpu_metrics"), open_dataset(tmp_path, "host_metrics"))
    assert [(f.hosts, f.category) for f in lazy] == [(("node06",), Category.METRIC_OUTLIER)]


def test_a_fault_the_simulation_would_never_show_is_refused_not_labelled() -> None:
    # Before: onset past the end (or negative: Python's slice from the end) wrote a label naming a
    # faulty host whose data showed no fault, or a fault in the wrong seconds.
    for onset in (500.0, -2.0):
        with pytest.raises(InputError, match=f"onset {onset:g} s is outside the simulated 12 s"):
            simulate(FleetScenario(2, 2, 12, (FaultSpec("xid64", "node01", onset),), seed=0))
    with pytest.raises(InputError, match="magnitude 3 must be > 0 and <= 1"):
        parse_fault("nic_degraded@node01:5:3")
