"""GPU timelines on the streams where the work runs, read without blocking (issue 16 item 4).

No GPU here: torch.cuda (Event, current_stream) and ProcessGroupNCCL's Work are faked at that
boundary, with the semantics of torch 2.13's: Event.record(stream) queues on that stream,
Event.query() is the non-blocking cudaEventQuery, elapsed_time() is in milliseconds and raises
while an event is not complete; Work.is_completed() queries the work's end event and
Work._get_duration() is WorkNCCL::getDuration (ms between the NCCL stream's start and end events,
only with TORCH_NCCL_ENABLE_TIMING=1). The Work without timing is a real one: gloo's.
Everything else (the recorder, its writer thread, the Parquet parts) is the real code.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import torch
import torch.distributed as dist

from trainctl import dataset
from trainctl.runtime import instrument
from trainctl.runtime.instrument import Recorder, WorkTimingUnavailable, work_duration_ns
from trainctl.schemas import SignalKind


class FakeStream:
    def __init__(self, name: str) -> None:
        self.name = name


class FakeEvent:
    clock_ms = 0.0  # the fake GPU's clock: tests advance it

    def __init__(self, enable_timing: bool = False) -> None:
        assert enable_timing
        self.stream: FakeStream | None = None
        self.at_ms: float | None = None
        self.done = False

    def record(self, stream: FakeStream | None = None) -> None:
        self.stream, self.at_ms = stream, FakeEvent.clock_ms

    def query(self) -> bool:
        return self.done

    def elapsed_time(self, end: FakeEvent) -> float:
        if not (self.done and end.done):
            raise RuntimeError("CUDA error: device not ready")
        return float(end.at_ms - self.at_ms)  # type: ignore[operator]

    def synchronize(self) -> None:  # pragma: no cover - the recorder must never call it
        raise AssertionError("the writer thread blocked on a CUDA event")


class FakeCuda:
    def __init__(self) -> None:
        self.compute = FakeStream("compute")
        self.events: list[FakeEvent] = []

    def current_stream(self) -> FakeStream:
        return self.compute

    def Event(self, enable_timing: bool = False) -> FakeEvent:  # noqa: N802 (torch.cuda's name)
        e = FakeEvent(enable_timing)
        self.events.append(e)
        return e


class FakeNcclWork:
    def __init__(self, ms: float | None) -> None:
        self.ms, self.done = ms, False

    def is_completed(self) -> bool:
        return self.done

    def _get_duration(self) -> float:
        if self.ms is None:
            raise RuntimeError("getDuration only works if timing was enabled")
        return self.ms


def _gpu_recorder(tmp_path: Path, cuda: FakeCuda) -> Recorder:
    rec = Recorder(tmp_path, rank=1, local_rank=1, host="node01")
    rec._cuda, rec.source = cuda, "cuda_event"  # what a device of type cuda selects
    return rec


def _phase(rec: Recorder, name: str, ms: float) -> None:
    with rec.phase(name):
        FakeEvent.clock_ms += ms


def _rows(tmp_path: Path) -> dict[tuple[int, str], int]:
    t = dataset.read_table(tmp_path, SignalKind.TIMELINE).to_pandas()
    return {(int(s), p): int(d) for s, p, d in zip(t["step"], t["phase"], t["duration_ns"])}


def test_phases_record_on_the_compute_stream_and_tp_time_comes_from_the_nccl_stream(tmp_path) -> None:
    cuda = FakeCuda()
    rec = _gpu_recorder(tmp_path, cuda)
    fwd_work, bwd_work = FakeNcclWork(3.0), FakeNcclWork(2.0)
    _phase(rec, "forward", 10.0)
    _phase(rec, "backward", 20.0)
    _phase(rec, "communication", 4.0)
    rec.move_work("forward", "communication", [fwd_work])
    rec.move_work("backward", "communication", [bwd_work])
    rec.end_step(0)
    assert {e.stream.name for e in cuda.events} == {"compute"}  # type: ignore[union-attr]
    for e in cuda.events:
        e.done = True
    fwd_work.done = bwd_work.done = True
    rec.close()
    ms = 1_000_000
    assert _rows(tmp_path) == {(0, "forward"): 7 * ms, (0, "backward"): 18 * ms, (0, "communication"): 9 * ms}


def test_without_nccl_timing_nothing_moves(tmp_path) -> None:
    cuda = FakeCuda()
    rec = _gpu_recorder(tmp_path, cuda)
    work = FakeNcclWork(None)  # NCCL without TORCH_NCCL_ENABLE_TIMING
    _phase(rec, "forward", 10.0)
    _phase(rec, "communication", 4.0)
    rec.move_work("forward", "communication", [work])
    rec.end_step(0)
    for e in cuda.events:
        e.done = True
    work.done = True
    rec.close()
    assert _rows(tmp_path) == {(0, "forward"): 10_000_000, (0, "communication"): 4_000_000}


def test_a_kernel_that_never_ends_holds_back_only_its_own_rows(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(instrument, "CLOSE_WAIT_S", 0.3)
    cuda = FakeCuda()
    rec = _gpu_recorder(tmp_path, cuda)
    rec.spool.flush_interval_s = 0.05  # type: ignore[union-attr]
    _phase(rec, "forward", 10.0)
    rec.end_step(0)
    step0 = list(cuda.events)
    _phase(rec, "forward", 12.0)  # step 1: its kernel hangs (events never complete)
    rec.end_step(1)
    hung_work = FakeNcclWork(1.0)
    _phase(rec, "communication", 1.0)
    rec.move_work("forward", "communication", [hung_work])
    rec.end_step(2)
    for e in step0:
        e.done = True
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and not list(tmp_path.glob("timeline/host=node01/*.parquet")):
        time.sleep(0.05)  # the writer flushes step 0 by itself while step 1's events stay pending
    assert _rows(tmp_path) == {(0, "forward"): 10_000_000}
    rec.close()  # waits CLOSE_WAIT_S for the rest, then drops and counts them
    assert _rows(tmp_path) == {(0, "forward"): 10_000_000}
    assert rec.spool.unresolved_rows == 2  # type: ignore[union-attr]


def test_a_backend_without_timing_says_so_with_a_real_gloo_work(tmp_path) -> None:
    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'store'}", rank=0, world_size=1)
    try:
        work = dist.all_reduce(torch.ones(4), async_op=True)
        work.wait()
        assert work.is_completed()
        with pytest.raises(WorkTimingUnavailable, match="getDuration"):
            work_duration_ns(work)
    finally:
        dist.destroy_process_group()
    pending = FakeNcclWork(2.5)
    assert work_duration_ns(pending) is None  # running: not known yet, and never waited for
    pending.done = True
    assert work_duration_ns(pending) == 2_500_000
