"""An error file's exception, classified by the log signatures where it is read
(trainctl/ops/diagnose/run_events.py), and the finding the first failure becomes (analyzers/root_cause.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from trainctl.analyzers.root_cause import findings_from_run_events
from trainctl.dataset import read_table, write_table
from trainctl.ops.diagnose.diagnosis import diagnose_path
from trainctl.ops.diagnose.run_events import MAX_MESSAGE_CHARS, parse_run_dir_events
from trainctl.schemas import SignalKind, schema_for

CUBLAS = (
    "RuntimeError: CUDA error: CUBLAS_STATUS_EXECUTION_FAILED when calling `cublasGemmEx( handle, opa, opb, m, n, "
    "k, &falpha, a, CUDA_R_16BF, lda, b, CUDA_R_16BF, ldb, &fbeta, c, CUDA_R_16BF, ldc, CUDA_R_32F, "
    "CUBLAS_GEMM_DEFAULT_TENSOR_OP)`"
)
# message, (row kind, row category), (finding kind, category), words of the summary
CASES = [
    (
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of "
        "79.18 GiB of which 1.50 GiB is free.",
        ("oom", None),
        ("oom", None),
        "rank 1 ran out of memory first",
    ),
    (
        "OutOfMemoryError: HIP out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 63.98 GiB",
        ("oom", None),
        ("oom", None),
        "rank 1 ran out of memory first",
    ),
    (CUBLAS, ("crash", "cuda_error"), ("crash", "cuda_error"), "rank 1 failed first: RuntimeError: CUDA error"),
    (
        "RuntimeError: cuDNN error: CUDNN_STATUS_INTERNAL_ERROR",
        ("crash", "cuda_error"),
        ("crash", "cuda_error"),
        "cuDNN",
    ),
    (
        "torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1970, "
        "unhandled system error (run with NCCL_DEBUG=INFO for details), NCCL version 2.21.5",
        ("network_error", "nccl"),
        ("network_error", "nccl"),
        "rank 1 failed first",
    ),
    # no signature knows it: the unclassified-error fallback is not a classification
    ("ValueError: invalid literal for int() with base 10: 'abc'", (None, None), ("crash", "exception"), "ValueError"),
]
IDS = ["cuda_oom", "hip_oom", "cublas", "cudnn", "nccl", "value_error"]
# torch.OutOfMemoryError without the caching allocator's "Tried to allocate": the memory-fraction
# limit (c10/cuda/CUDACachingAllocator.cpp, set_per_process_memory_fraction) and XPU's allocator,
# which root_cause's old regex took by the class name alone; the log signatures know both.
CASES += [
    (
        "torch.OutOfMemoryError: Allocation on device 0 would exceed allowed memory. (out of memory)\n"
        "Currently allocated     : 9.43 GiB",
        ("oom", None),
        ("oom", None),
        "rank 1 ran out of memory first",
    ),
    (
        "torch.OutOfMemoryError: XPU out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 64.00 GiB",
        ("oom", None),
        ("oom", None),
        "rank 1 ran out of memory first",
    ),
]
IDS += ["memory_fraction_oom", "xpu_oom"]


def _error_file(run: Path, rank: int, message: str, ts_ns: int, *, plain: bool = False) -> None:
    doc = (
        {"message": message}
        if plain  # torchelastic writes a plain string for some failures
        else {"message": {"message": message, "extraInfo": {"py_callstack": "Traceback ...", "timestamp_ns": ts_ns}}}
    )
    (run / "errors").mkdir(parents=True, exist_ok=True)
    (run / "errors" / f"rank-{rank}.json").write_text(json.dumps(doc))


@pytest.mark.parametrize("message, row, finding, words", CASES, ids=IDS)
def test_an_error_files_exception_is_classified_where_it_is_read(tmp_path: Path, message, row, finding, words) -> None:
    _error_file(tmp_path, 1, message, 1_000_000_000)
    _error_file(tmp_path, 0, "RuntimeError: Connection closed by peer", 2_000_000_000)  # later: not the first
    rows = parse_run_dir_events(tmp_path, None)[SignalKind.RUN_EVENTS].to_pylist()
    first = next(r for r in rows if r["rank"] == 1)
    assert (first["kind"], first["category"]) == row
    (f,) = findings_from_run_events(rows, {})
    assert (f.kind.value, f.category.value if f.category else None, f.ranks) == (*finding, (1,))
    assert words in f.summary, f.summary


def test_a_plain_string_error_file_is_classified_and_the_size_cap_holds(tmp_path: Path) -> None:
    oom = "OutOfMemoryError: CUDA out of memory. Tried to allocate 158.36 GiB. GPU 0 has a total capacity of 79.18 GiB"
    _error_file(tmp_path, 0, oom + " x" * 10 * MAX_MESSAGE_CHARS, 0, plain=True)
    (r,) = parse_run_dir_events(tmp_path, None)[SignalKind.RUN_EVENTS].to_pylist()
    assert (r["kind"], r["category"], len(r["message"])) == ("oom", None, MAX_MESSAGE_CHARS)
    (tmp_path / "numerics").mkdir()
    (tmp_path / "numerics" / "rank-0.json").write_text(json.dumps({"step": 3, "loss": "nan"}))
    rows = parse_run_dir_events(tmp_path, None)[SignalKind.RUN_EVENTS].to_pylist()
    assert [(x["event"], x["kind"]) for x in rows] == [("exception", "oom"), ("nonfinite_loss", None)]


def test_a_collected_dataset_is_read_by_the_same_reader_and_an_old_run_events_file_reads_as_unclassified(
    tmp_path: Path,
) -> None:
    """collect brings errors/ back as it is, so a dataset's error file is classified as a run dir's; a
    run_events Parquet written before the kind/category columns is still read, the columns null."""
    ds = tmp_path / "ds"
    write_table(ds, SignalKind.HOST_FACTS, "node01", pa.table({"kernel": ["6.8"]}))
    _error_file(ds, 0, "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.", 5)
    top = diagnose_path(ds).findings[0]
    assert (top.kind.value, top.ranks, top.evidence["error_file"]) == ("oom", (0,), "errors/rank-0.json")

    # a file as the writer of the schema before kind/category wrote it (its columns, its metadata)
    old = tmp_path / "old"
    now = schema_for(SignalKind.RUN_EVENTS)
    before = pa.schema([f for f in now if f.name not in ("kind", "category")], metadata=now.metadata)
    part = old / SignalKind.RUN_EVENTS.value / "host=node01" / "part-0.parquet"
    part.parent.mkdir(parents=True)
    row = {"ts": 5, "rank": 0, "event": "exception", "message": "torch.OutOfMemoryError: CUDA out of memory."}
    pq.write_table(pa.Table.from_pylist([row], schema=before), part)
    assert "kind" not in pq.read_schema(part).names
    (r,) = read_table(old, SignalKind.RUN_EVENTS).to_pylist()
    assert (r["kind"], r["category"], r["host"]) == (None, None, "node01")
    top = diagnose_path(old).findings[0]
    assert (top.kind.value, top.category.value, top.ranks) == ("crash", "exception", (0,))


def test_a_rank_report_that_does_not_parse_is_said_and_its_host_comes_from_the_layout(tmp_path: Path, caplog) -> None:
    from trainctl.rundir import HostRanks, RunInfo

    run = RunInfo(
        run_id="r", world_size=2, nproc_per_node=1, hosts=(HostRanks("node01", (0,)), HostRanks("node02", (1,)))
    )
    _error_file(tmp_path, 1, "RuntimeError: CUDA error: an illegal memory access was encountered", 1_000_000_000)
    (tmp_path / "ranks").mkdir()
    (tmp_path / "ranks" / "rank-0.json").write_text(json.dumps({"rank": 1, "host": "node07"}))  # rank 1 moved
    (tmp_path / "ranks" / "rank-1.json").write_bytes(b"\x00\x01 half-written")
    (tmp_path / "ranks" / "rank-2.json").write_text(json.dumps({"rank": "one", "host": "x"}))
    (r,) = parse_run_dir_events(tmp_path, run)[SignalKind.RUN_EVENTS].to_pylist()
    assert (r["rank"], r["host"]) == (1, "node07")  # the rank's own report wins over the layout
    said = [m for m in caplog.messages if "skipped" in m]
    assert any("ranks/rank-1.json: unreadable" in m for m in said), said
    assert any("ranks/rank-2.json: not a rank report" in m for m in said), said
