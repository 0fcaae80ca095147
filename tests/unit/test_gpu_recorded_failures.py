"""Failures recorded on a real NVIDIA H100 (2026-11-26 22:45-23:00 UTC, torch 2.11.0+cu130, NCCL
2.28.9, driver 580.159.04) by tests/gpu/test_gpu_failures.py, diagnosed on CPU in every CI run.
tests/fixtures/gpu_h100/README.md says how each was made; nobody edited them.

Three of them showed gaps that the gloo drills could not: a CUDA OOM gave three critical findings
(a crash on top), a device-side assert whose rank was then aborted by NCCL's watchdog gave two, and a
real NCCL "Duplicate GPU detected" log printed torchrun's exit banner above NCCL's own words.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from trainctl.analyzers.faulty_hosts import find_faulty_hosts
from trainctl.schemas import SignalKind, schema_for

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "gpu_h100"

# run dir, (kind, category, rank, host), words the top finding's summary must hold
RUNS = [
    ("crash_drill_run", ("crash", "exception", 0, "node01"), "injected crash drill"),
    ("nan_drill_run", ("numerical", "nan_loss", 0, "node01"), "loss nan at step 5"),
    ("xid_drill_run", ("faulty_host", "gpu_lost", 0, "node01"), "Xid 79"),
    # the error file's AcceleratorError (the rank exited by its exception)
    ("device_assert_run", ("crash", "cuda_error", 0, "node01"), "device-side assert triggered"),
    # the same script on another try: NCCL's watchdog saw the sticky CUDA error and aborted the
    # process (SIGABRT, no error file); the abort is evidence of the assert's finding, not a second one
    ("device_assert_abort_run", ("crash", "cuda_error", 0, "node01"), "device-side assert triggered"),
    ("oom_run", ("oom", None, 0, "node01"), "CUDA out of memory"),
]


def _diagnose(cli, path: Path) -> list[dict]:
    r = cli("diagnose", path, "--json", "--fail-on", "never")
    assert r.code == 0 and "Traceback" not in r.stderr, r.stderr
    return json.loads(r.stdout)["findings"]


@pytest.mark.parametrize("name, expected, words", RUNS, ids=[r[0] for r in RUNS])
def test_a_failure_recorded_on_an_h100_is_one_critical_finding_naming_its_rank(
    cli, tmp_path: Path, name, expected, words
) -> None:
    run = tmp_path / "run"
    shutil.copytree(FIX / name, run)
    findings = _diagnose(cli, run)
    assert findings, name
    top = findings[0]
    kind, category, rank, host = expected
    assert (top["kind"], top["category"], top["hosts"]) == (kind, category, [host]), top
    assert rank in top["ranks"], top
    assert words in top["summary"], top["summary"]
    assert [f["summary"] for f in findings[1:] if f["severity"] == "critical"] == []
    assert top["evidence"], top


def test_the_oom_printed_by_the_rank_and_by_the_agent_is_folded_into_the_first_failure(cli, tmp_path: Path) -> None:
    run = tmp_path / "run"
    shutil.copytree(FIX / "oom_run", run)
    top = _diagnose(cli, run)[0]
    assert top["evidence"]["error_file"].endswith("errors/rank-0.json")
    folded = top["evidence"]["followed_by"]
    assert {f["kind"] for f in folded} >= {"oom"}, folded
    assert all(f["hosts"] == ["node01"] for f in folded if f["kind"] == "oom"), folded


def test_nccls_duplicate_gpu_refusal_is_the_top_finding_of_its_log(cli) -> None:
    """Plain torchrun, two ranks on one GPU: NCCL init.cc:904 "Duplicate GPU detected", then
    torchrun's ChildFailedError banner. The cause comes first; the banner follows it."""
    findings = _diagnose(cli, FIX / "duplicate_gpu_torchrun.log")
    top = findings[0]
    assert top["kind"] == "network_error" and "Duplicate GPU detected" in top["summary"], findings
    assert top["evidence"]["first_failure"] is True
    assert [f["kind"] for f in findings[1:]] == ["crash"], findings  # the banner: what followed


def _trace() -> list[dict]:
    return [json.loads(line) for line in (FIX / "nvml_idle_load_idle.jsonl").read_text().splitlines()]


def test_the_h100_trace_shows_what_a_healthy_gpu_does_under_load() -> None:
    """The facts the faulty-hosts rules must not take for faults, read from the real GPU: at full load
    a healthy H100 draws near its 700 W limit, holds clocks below their maximum and reports the SW
    power cap reason (nvml.h nvmlClocksEventReasonSwPowerCap, 0x4); its PCIe link stayed at x16 gen 5."""
    rows = _trace()
    load = [r for r in rows if r["phase"] == "load" and (r["sm_util_pct"] or 0) >= 90]
    idle = [r for r in rows if r["phase"] == "idle" and (r["sm_util_pct"] or 0) == 0]
    assert len(load) >= 20 and len(idle) >= 20
    # medians: power lags the phase by a sample or two at each edge
    assert np.median([r["power_w"] for r in load]) > 4 * np.median([r["power_w"] for r in idle])
    assert max(r["sm_clock_mhz"] for r in load) < min(r["sm_clock_max_mhz"] for r in load)
    assert {int(r["throttle_reasons"]) & 0x4 for r in load[5:]} == {0x4}
    assert {(r["pcie_link_gen"], r["pcie_link_width"]) for r in rows} == {(5, 16)}


def test_a_fleet_replaying_the_real_h100_trace_with_staggered_starts_names_no_host() -> None:
    """8 hosts x 8 GPUs, every GPU the recorded H100 (idle, 20 s of bf16 matmuls, idle) played four
    times over, each host starting later than the one before (staggered starts): a healthy fleet
    whose hosts sit at the power cap at different moments. No host is faulty."""
    assert find_faulty_hosts(gpu_metrics=_fleet(_trace())) == []


def test_the_same_fleet_with_one_gpu_held_to_a_lowered_power_limit_names_that_host() -> None:
    """The replay is live: node04's GPU 2 held to 400 W (nvidia-smi -pl 400; the board default stays
    700 W) draws at most 400 W and clocks lower under load; the power rule names node04."""
    found = find_faulty_hosts(gpu_metrics=_fleet(_trace(), capped=("node04", 2, 400.0)))
    assert [(f.hosts, f.category.value) for f in found] == [(("node04",), "power")], found


def _fleet(rows: list[dict], capped: tuple[str, int, float] | None = None) -> pa.Table:
    n = len(rows)
    period_ns = int(np.median(np.diff([r["ts"] for r in rows])))
    t0 = rows[0]["ts"]
    schema = schema_for(SignalKind.GPU_METRICS)
    cols = [f.name for f in schema]
    out: dict[str, list] = {c: [] for c in [*cols, "host"]}
    for h in range(8):
        shift = h * (1 + h % 3)
        for gpu in range(8):
            for k in range(4 * n):
                src = rows[(k + shift) % n]
                for c in cols:
                    out[c].append(src.get(c))
                out["ts"][-1] = t0 + k * period_ns
                out["gpu"][-1] = gpu
                out["gpu_uuid"][-1] = f"GPU-{h:02d}{gpu:02d}"
                out["host"].append(f"node{h + 1:02d}")
                if capped and (out["host"][-1], gpu) == capped[:2]:
                    limit = capped[2]
                    scale = min(1.0, limit / max(src["power_w"], 1.0))
                    out["power_limit_w"][-1] = limit
                    out["power_w"][-1] = src["power_w"] * scale
                    out["sm_clock_mhz"][-1] = int(src["sm_clock_mhz"] * (scale if scale < 1 else 1.0))
    out["throttle_reasons"] = [None if v is None else int(v) for v in out["throttle_reasons"]]
    fields = [*schema, pa.field("host", pa.string())]
    return pa.table({f.name: pa.array(out[f.name], type=_plain(f.type)) for f in fields})


def _plain(t: pa.DataType) -> pa.DataType:
    return (
        t.value_type if pa.types.is_dictionary(t) else pa.timestamp("ns", tz="UTC") if pa.types.is_timestamp(t) else t
    )
