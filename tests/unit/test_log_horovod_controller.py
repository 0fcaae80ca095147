"""Horovod's coordinator errors (horovod/common/controller.cc ConstructResponse, common/common.h SHUT_DOWN_ERROR):
ranks that submitted one tensor's collective differently are a collective mismatch naming no rank, and the
"Horovod has been shut down" every later collective fails with is a follow-on of the error before it."""

from __future__ import annotations

import pytest
from log_text import findings

from trainctl.findings import FindingKind

SHUT_DOWN = (
    "Horovod has been shut down. This was caused by an exception on one of the ranks or an attempt to allreduce, "
    "allgather or broadcast a tensor after one of the ranks finished execution. If the shutdown was caused by an "
    "exception, you should see the exception in the log before the first shutdown message."
)


@pytest.mark.parametrize(
    "line",
    [
        # torch: horovod/torch/mpi_ops.py synchronize raises HorovodInternalError(e)
        "horovod.common.exceptions.HorovodInternalError: Mismatched ALLREDUCE tensor shapes: One rank sent a tensor "
        "of shape [10, 4], but another rank sent a tensor of shape [12, 4].",
        # TensorFlow: the op's status as FailedPreconditionError
        "tensorflow.python.framework.errors_impl.FailedPreconditionError: Mismatched data types: One rank had type "
        "float32, but another rank had type int64.",
        "horovod.common.exceptions.HorovodInternalError: Mismatched operations: One rank did an ALLREDUCE, but "
        "another rank did an ALLGATHER.",
        "RuntimeError: Mismatched MPI operations: One rank did an allreduce, but another rank did an allgather.",
        "horovod.common.exceptions.HorovodInternalError: Mismatched BROADCAST root ranks: One rank specified root "
        "rank 0, but another rank specified root rank 1.",
        "horovod.common.exceptions.HorovodInternalError: Mismatched ALLGATHER tensor shapes: One rank sent a tensor "
        "with dimension 1 equal to 3, but another rank sent a tensor with dimension 1 equal to 5.",
    ],
)
def test_coordinator_mismatch_is_a_collective_mismatch_naming_nobody(line: str) -> None:
    # under mpirun --tag-output: the printing rank is one of every rank failing the same way, not the culprit
    f = findings(f"[1,1]<stderr>:Traceback (most recent call last):\n[1,1]<stderr>:{line}\n")[0]
    assert (f.kind, f.ranks, f.hosts) == (FindingKind.COLLECTIVE_MISMATCH, (), ())


def test_shut_down_after_a_mismatch_is_the_mismatch() -> None:
    f = findings(
        "tensorflow.python.framework.errors_impl.FailedPreconditionError: Mismatched ALLREDUCE tensor shapes: "
        "One rank sent a tensor of rank 2, but another rank sent a tensor of rank 1.\n"
        f"tensorflow.python.framework.errors_impl.UnknownError: {SHUT_DOWN}\n"
        f"tensorflow.python.framework.errors_impl.UnknownError: {SHUT_DOWN}\n"
    )[0]
    assert f.kind is FindingKind.COLLECTIVE_MISMATCH


def test_shut_down_after_an_oom_is_the_oom() -> None:
    f = findings(
        "[1,0]<stderr>:RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB (GPU 0; 15.78 GiB total "
        "capacity; 13.1 GiB already allocated; 1.2 GiB free; 14 GiB reserved in total by PyTorch)\n"
        f"[1,1]<stderr>:horovod.common.exceptions.HorovodInternalError: {SHUT_DOWN}\n"
    )[0]
    assert (f.kind, f.ranks) == (FindingKind.OOM, (0,))


def test_shut_down_alone_is_a_follow_on_crash() -> None:
    (f,) = findings(f"horovod.common.exceptions.HorovodInternalError: {SHUT_DOWN}\n")
    assert f.kind is FindingKind.CRASH
    assert f.ranks == () and f.hosts == ()
