"""The GPU path end to end on real hardware (issue 16): NCCL ranks, CUDA-event timelines, placement,
NVML metrics, NCCL's own logs and the NCCL Flight Recorder of a hung rank."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from trainctl import dataset
from trainctl.schemas import SignalKind


def _gpus() -> int:
    import torch

    return torch.cuda.device_count()


@pytest.mark.timeout(600)
def test_reference_trainer_on_nccl_with_cuda_event_timelines(cli, tmp_path: Path) -> None:
    n = min(_gpus(), 4)
    hosts = 2 if n >= 2 else 1
    run = tmp_path / "run"
    r = cli("launch", "--local", "--hosts-local", hosts, "--nproc-per-node", n // hosts, "--run-dir", run,
            "--", "--steps", "30", "--tp", "2" if n >= 2 else "1")  # fmt: skip
    assert r.code == 0, r.stderr
    t = dataset.read_table(run, SignalKind.TIMELINE).to_pandas()
    assert set(t["source"]) == {"cuda_event"} and (t["duration_ns"] > 0).all()
    assert t["rank"].nunique() == hosts * (n // hosts)
    logs = list((run / "logs").glob("*/nccl-rank-*.log"))
    assert logs, "NCCL_DEBUG_FILE per rank"
    d = cli("diagnose", run, "--json", "--fail-on", "never")
    assert d.code in (0, 6), d.stderr
    assert json.loads(d.stdout)["findings"] is not None


@pytest.mark.timeout(600)
def test_a_hung_nccl_rank_is_named_from_the_nccl_recorder(cli, tmp_path: Path) -> None:
    if _gpus() < 2:
        pytest.skip("needs 2 GPUs")
    run = tmp_path / "run"
    r = cli("launch", "--local", "--hosts-local", "2", "--nproc-per-node", "1", "--run-dir", run,
            "--inject", "hang:rank=1,step=5", "--hang-timeout", "20", "--", "--steps", "40")  # fmt: skip
    assert r.code == 5, r.stderr
    assert list((run / "fr").rglob("*nccl*")), "the NCCL recorder's dumps"
    d = json.loads(cli("diagnose", run, "--json", "--fail-on", "never").stdout)
    top = d["findings"][0]
    assert top["kind"] == "hung_collective" and top["ranks"] == [1] and top["hosts"] == ["node02"]


@pytest.mark.timeout(300)
def test_one_gpu_stuck_kernel_shows_in_the_nccl_recorder_and_nccl_logs_its_init(cli, tmp_path: Path) -> None:
    """The one-GPU form of the hang drill (a lent machine may have a single GPU, and NCCL refuses two
    ranks on one): an unmodified script's GPU stops; the hang dump asks the NCCL recorder, which
    shows the completed all_reduces and the stuck step's as scheduled; NCCL's INFO init lines land in
    the rank's own file and parse. The dumps and the diagnosis stay in the run dir (recorded data)."""
    import torch

    from trainctl.collectors import flight_recorder, nccl_topology

    run = tmp_path / "run"
    r = cli("launch", "--local", "--hosts-local", "1", "--nproc-per-node", "1", "--run-dir", run,
            "--hang-timeout", "20", "--env", "NCCL_DEBUG=INFO", "--env", "NCCL_DEBUG_SUBSYS=INIT,NET",
            "--", str(Path(__file__).with_name("stuck_kernel_script.py")))  # fmt: skip
    d = cli("diagnose", run, "--json", "--fail-on", "never")
    (run / "diagnose.json").write_text(d.stdout)
    assert r.code == 5, r.stderr
    dumps = flight_recorder.load_dumps(flight_recorder.find_dumps(run / "fr"), root=run / "fr")
    nccl = [x for x in dumps if x.recorder == "nccl"]
    assert nccl and nccl[0].rank == 0 and nccl[0].comm_lib_version, [(x.path, x.recorder, x.entries) for x in dumps]
    entries = nccl[0].entries
    assert {str(e.get("profiling_name")) for e in entries} == {"nccl:all_reduce"}, entries
    states = [e.get("state") for e in entries]
    assert states[0] == "completed" and states[-1] == "scheduled", states
    log_file = run / "logs" / "node01" / "nccl-rank-0.log"
    procs = nccl_topology.parse_nccl_lines(log_file.read_text(errors="replace").splitlines())
    want = ".".join(map(str, torch.cuda.nccl.version()))
    assert procs and procs[0].version and procs[0].version.startswith(want), (want, procs)
    assert procs[0].network, procs[0]
    assert d.code == 0, d.stderr
    top = json.loads(d.stdout)["findings"][0]
    assert (top["kind"], top["ranks"], top["hosts"]) == ("hung_collective", [0], ["node01"]), top


@pytest.mark.timeout(300)
def test_nccl_watchdog_timeout_dumps_its_recorder_into_the_run_dir(cli, tmp_path: Path) -> None:
    """Item 1: with the process group's timeout below the launcher's, NCCL's watchdog times the
    stuck all_reduce out, dumps its recorder where launch pointed TORCH_FR_DUMP_TEMP_FILE and
    aborts the rank. The diagnosis stays in the run dir (recorded data)."""
    from trainctl.collectors import flight_recorder

    run = tmp_path / "run"
    r = cli("launch", "--local", "--hosts-local", "1", "--nproc-per-node", "1", "--run-dir", run,
            "--hang-timeout", "40", "--env", "PG_TIMEOUT_S=10",
            "--", str(Path(__file__).with_name("stuck_kernel_script.py")))  # fmt: skip
    d = cli("diagnose", run, "--json", "--fail-on", "never")
    (run / "diagnose.json").write_text(d.stdout)
    # Seen on an H100: the watchdog times out and dumps, but with the kernel still spinning its abort
    # does not end the rank, so the launcher declares the hang (5); a rank that does exit fails (4).
    assert r.code in (4, 5), r.stderr
    watchdog = [p for p in (run / "fr").rglob("nccl_trace_rank_*")]
    assert watchdog, sorted(str(p) for p in run.rglob("*"))
    dump = flight_recorder.load_dump(watchdog[0])
    assert dump.recorder == "nccl" and [e["state"] for e in dump.entries][-1] == "scheduled"
    top = json.loads(d.stdout)["findings"][0]
    assert (top["kind"], top["ranks"], top["hosts"]) == ("hung_collective", [0], ["node01"]), top


def test_more_simulated_hosts_than_gpus_is_a_clear_error(cli, tmp_path: Path) -> None:
    n = _gpus()
    r = cli("launch", "--local", "--hosts-local", n + 1, "--nproc-per-node", "1", "--run-dir", tmp_path / "run",
            "--", "--steps", "5")  # fmt: skip
    assert r.code != 0 and "--backend gloo" in r.stderr and "Traceback" not in r.stderr, r.stderr


@pytest.mark.timeout(400)
def test_the_demo_works_on_a_gpu_machine(cli, tmp_path: Path) -> None:
    """Item 3: the README's first command on a GPU box (NCCL on 4+ GPUs, else its ranks on CPU)."""
    r = cli("demo", "--run-dir", tmp_path / "demo", "--steps", "60", "--json", timeout=380)
    assert r.code == 0, r.stderr
    top = json.loads(r.stdout)["findings"][0]
    assert top["kind"] == "straggler" and top["ranks"] == [2] and top["hosts"] == ["node02"], top


def test_nvml_sampler_reads_every_gpu_of_this_machine() -> None:
    import time

    from trainctl.runtime.metrics_agent import NvmlSampler

    s = NvmlSampler()
    try:
        n = s.open()
        rows = s.sample(time.time_ns())
    finally:
        s.close()
    assert n == _gpus() and len(rows) == n
    assert all(r["power_w"] is None or r["power_w"] > 0 for r in rows)


@pytest.mark.timeout(600)
def test_gpu_straggler_drill_slows_the_gpu_itself(cli, tmp_path: Path) -> None:
    if _gpus() < 2:
        pytest.skip("needs 2 GPUs")
    run = tmp_path / "run"
    r = cli("launch", "--local", "--hosts-local", "2", "--nproc-per-node", "1", "--run-dir", run,
            "--inject", "straggler:rank=1,factor=2.0", "--", "--steps", "80")  # fmt: skip
    assert r.code == 0, r.stderr
    top = json.loads(cli("diagnose", run, "--json", "--fail-on", "never").stdout)["findings"][0]
    assert top["kind"] == "straggler" and top["ranks"] == [1] and top["hosts"] == ["node02"]


def test_nccl_work_timing_and_non_blocking_phase_events(tmp_path: Path, monkeypatch) -> None:
    """Item 4 on hardware: an async NCCL collective's Work reports its NCCL-stream time with
    TORCH_NCCL_ENABLE_TIMING=1, and a GPU phase's row is resolved by query, not synchronize."""
    import torch
    import torch.distributed as dist

    from trainctl.runtime.instrument import Recorder, work_duration_ns

    monkeypatch.setenv("TORCH_NCCL_ENABLE_TIMING", "1")
    torch.cuda.set_device(0)
    dist.init_process_group("nccl", init_method=f"file://{tmp_path / 'store'}", rank=0, world_size=1)
    try:
        x = torch.ones(64 * 1024 * 1024 // 4, device="cuda")
        rec = Recorder(tmp_path / "run", rank=0, local_rank=0, host="gpu", device=torch.device("cuda"))
        with rec.phase("forward"):
            y = x @ x if x.dim() == 2 else (x * 2).sum()
        with rec.phase("communication"):
            work = dist.all_reduce(x, async_op=True)
            work.wait()
        rec.move_work("forward", "communication", [work])
        rec.end_step(0)
        torch.cuda.synchronize()
        assert work_duration_ns(work) > 0
        rec.close()
        t = dataset.read_table(tmp_path / "run", SignalKind.TIMELINE).to_pandas()
        assert set(t["phase"]) == {"forward", "communication"} and (t["duration_ns"] > 0).all()
        assert float(y) > 0
    finally:
        dist.destroy_process_group()
