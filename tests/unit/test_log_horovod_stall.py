"""Horovod's stall inspector (horovod/common/stall_inspector.cc; v0.13.6-0.16.1 common/operations.cc): a warning
that names the ranks missing from the stalled tensors, in each of its eras and under mpirun's tags."""

from __future__ import annotations

from log_text import findings

from trainctl.findings import Category, FindingKind, Severity

PREAMBLE = (
    "One or more tensors were submitted to be reduced, gathered or broadcasted by subset of ranks and are waiting "
    "for remainder of ranks for more than 60 seconds. This may indicate that different ranks are trying to submit "
    "different tensors or that only subset of ranks is submitting tensors, which will cause deadlock. "
)


def test_one_missing_rank_is_the_rank_behind() -> None:
    (f,) = findings(
        f"[2020-03-11 09:17:03.371594: W horovod/common/stall_inspector.cc:105] {PREAMBLE}\n"
        "Missing ranks:\n"
        "1: [DistributedAdamOptimizer_Allreduce/HorovodAllreduce_gradients_AddN_10_0, "
        "DistributedAdamOptimizer_Allreduce/HorovodAllreduce_gradients_AddN_11_0]\n"
    )
    assert (f.kind, f.category, f.severity, f.ranks) == (
        FindingKind.HUNG_COLLECTIVE,
        Category.COLLECTIVE_TIMEOUT,
        Severity.WARNING,
        (1,),
    )
    assert "rank 1 missing" in f.summary


def test_several_missing_ranks_blame_nobody_and_shutdown_is_critical() -> None:
    # v0.16.2-0.20.0 "Stalled ranks:", under mpirun --tag-output (the coordinator, rank 0, prints it)
    (f,) = findings(
        f"[1,0]<stderr>:[2019-09-02 10:00:00.000000: E horovod/common/stall_inspector.cc:98] {PREAMBLE}\n"
        "[1,0]<stderr>:Stalled ranks:\n"
        "[1,0]<stderr>:2!: [HorovodAllreduce_grad_0]\n"
        "[1,0]<stderr>:3!: [HorovodAllreduce_grad_0]\n"
        '[1,0]<stderr>:One or more rank (marked by "!") is stalled for longer than 120 seconds. Will shutdown.\n'
    )
    assert (f.kind, f.severity, f.ranks) == (FindingKind.HUNG_COLLECTIVE, Severity.CRITICAL, ())
    assert "ranks 2, 3 missing" in f.summary


def test_old_stalled_ops_format() -> None:
    # v0.13.6-0.16.1: "Stalled ops:" then "TENSOR [missing ranks: R]", each tensor after the first in its own message
    (f,) = findings(
        f"[2018-11-02 14:02:11.110386: W horovod/common/operations.cc:588] {PREAMBLE}\n"
        "Stalled ops:HorovodAllreduce_gradients_conv1_0 [missing ranks: 3]\n"
        "[2018-11-02 14:02:11.110457: W horovod/common/operations.cc:588] HorovodAllreduce_gradients_fc_0 "
        "[missing ranks: 3]\n"
    )
    assert (f.kind, f.ranks) == (FindingKind.HUNG_COLLECTIVE, (3,))
