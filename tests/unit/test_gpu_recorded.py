"""Run dirs recorded on a real NVIDIA H100 (2026-11-26, torch 2.11.0+cu130, NCCL 2.28.9, driver
580.159.04) by the gpu suite (tests/gpu), diagnosed on CPU: the NCCL Flight Recorder as torch writes
it, NCCL's own INFO lines, CUDA-event timelines. tests/fixtures/gpu_h100/README.md says how.

The stuck-kernel run is the one that showed the gap: a one-rank NCCL job whose all_reduce waited
behind a kernel that never ended was diagnosed as a crash (trainctl's own SIGTERM, read from the
torchrun agent's log) and not as the hang it was.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from trainctl import dataset
from trainctl.collectors import flight_recorder, nccl_topology
from trainctl.schemas import SignalKind

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "gpu_h100"


@pytest.fixture
def stuck_run(tmp_path: Path) -> Path:
    run = tmp_path / "run"
    shutil.copytree(FIX / "stuck_kernel_run", run)
    return run


def test_a_stuck_kernel_under_an_nccl_collective_is_a_hang_of_that_rank_not_a_crash(cli, stuck_run: Path) -> None:
    r = cli("diagnose", stuck_run, "--json", "--fail-on", "never")
    assert r.code == 0, r.stderr
    findings = json.loads(r.stdout)["findings"]
    assert len(findings) == 1, [f["summary"] for f in findings]
    top = findings[0]
    assert (top["kind"], top["ranks"], top["hosts"]) == ("hung_collective", [0], ["node01"])
    assert top["confidence"] < 0.9  # below the runbooks' eviction gate: no hardware evidence
    assert "all_reduce #11 of default_pg" in top["summary"] and "never completed" in top["summary"]
    assert "stuck_kernel_script.py:36" in top["summary"]  # the rank's live stack (py-spy)
    # trainctl's own stop (torchrun's "Received 15 death signal") is folded, not dropped
    folded = top["evidence"]["followed_by"]
    assert [f["kind"] for f in folded] == ["crash"] and "SIGTERM" in folded[0]["summary"]


def test_after_nccls_watchdog_timed_the_collective_out_the_rank_that_stopped_is_named(cli, tmp_path: Path) -> None:
    """PG timeout 10 s under a launcher hang timeout of 120 s: the watchdog timed the all_reduce out
    and dumped its recorder into the run dir (fr/node01/nccl_trace_rank_0), but with the kernel still
    spinning the rank never exited; the launcher then declared the hang. The watchdog's lines say who
    noticed (rank 0, which is also the one that stopped: it is alone); the root names it."""
    run = tmp_path / "run"
    shutil.copytree(FIX / "watchdog_timeout_run", run)
    findings = json.loads(cli("diagnose", run, "--json", "--fail-on", "never").stdout)["findings"]
    assert len(findings) == 1, [f["summary"] for f in findings]
    top = findings[0]
    assert (top["kind"], top["ranks"], top["hosts"]) == ("hung_collective", [0], ["node01"])
    assert sorted(f["kind"] for f in top["evidence"]["followed_by"]) == ["crash", "hung_collective"]
    watchdog = flight_recorder.load_dump(run / "fr" / "node01" / "nccl_trace_rank_0")
    assert (watchdog.recorder, watchdog.fmt, watchdog.rank) == ("nccl", "pickle", 0)
    assert [e["state"] for e in watchdog.entries][-2:] == ["scheduled", "scheduled"]


def test_the_nccl_recorder_as_torch_2_11_writes_it_loads_the_same_from_json_and_pickle() -> None:
    fr = FIX / "stuck_kernel_run" / "fr" / "node01"
    js, pk = (flight_recorder.load_dump(fr / f"nccl-rank-0.{ext}") for ext in ("json", "pkl"))
    for d in (js, pk):
        assert (d.recorder, d.rank, d.comm_lib_version, d.version) == ("nccl", 0, "2.28.9", "2.10")
        assert [e["collective_seq_id"] for e in d.entries] == list(range(1, 13))
        assert [e["state"] for e in d.entries] == ["completed"] * 10 + ["scheduled"] * 2
    # torch's JSON writes pg_status' counters as strings ("10"), its pickle as ints: one table either way
    assert (
        js.pg_status["0"]["last_completed_collective"] == "10" and pk.pg_status["0"]["last_completed_collective"] == 10
    )
    for d in (js, pk):
        st = flight_recorder.dumps_to_tables([d])[SignalKind.PG_STATUS].to_pylist()
        assert [(r["last_enqueued_seq"], r["last_completed_seq"]) for r in st] == [(12, 10)]
    # the CPU recorder of an NCCL-only run is empty, and says so
    assert flight_recorder.load_dump(fr / "rank-0.json").entries == ()


def test_nccl_2_28_info_lines_parse(stuck_run: Path) -> None:
    text = (stuck_run / "logs" / "node01" / "nccl-rank-0.log").read_text()
    (p,) = nccl_topology.parse_nccl_lines(text.splitlines())
    assert (p.version, p.network, p.rank, p.nranks, p.cuda_dev) == ("2.28.9+cuda13.0", "Socket", 0, 1, 0)
    assert p.gdr is False  # "NET/Socket : GPU Direct RDMA Disabled for HCA 0 'eth0'"


def test_cuda_event_timelines_from_the_reference_trainer_on_nccl(cli) -> None:
    t = dataset.read_table(FIX / "trainer_run", SignalKind.TIMELINE).to_pandas()
    assert set(t["source"]) == {"cuda_event"}
    assert {"forward", "backward", "optimizer", "step"} <= set(t["phase"])
    steps = t[t["phase"] == "step"]
    assert steps["step"].nunique() == 30 and (steps["duration_ns"] > 0).all()
    r = cli("diagnose", FIX / "trainer_run", "--json", "--fail-on", "never")
    assert r.code == 0 and json.loads(r.stdout)["findings"] == [], r.stdout  # a healthy run: nothing to say


def test_the_nvml_agent_on_a_real_h100_fills_every_field_that_device_has() -> None:
    t = dataset.read_table(FIX / "watchdog_timeout_run", SignalKind.GPU_METRICS).to_pandas()
    assert len(t) > 100 and set(t["gpu_name"]) == {"NVIDIA H100 80GB HBM3"}
    last = t.iloc[-1]
    assert 50 < last["power_w"] < last["power_limit_w"] == last["power_limit_default_w"] == 700.0
    assert (last["pcie_link_gen"], last["pcie_link_width"]) == (last["pcie_link_gen_max"], last["pcie_link_width_max"])
    assert last["sm_clock_mhz"] <= last["sm_clock_max_mhz"] and last["temp_c"] < last["temp_slowdown_c"]
    # a VM's single GPU has no NVLink: NVML says "not supported", stored as null, not as 0 errors
    assert t["nvlink_crc_errors_total"].isna().all()
