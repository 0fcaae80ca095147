"""torchelastic's failure banner names the first failure its own agent observed (torch/distributed/elastic/
multiprocessing/errors/__init__.py ChildFailedError.format_msg, 'Root Cause (first observed failure)'). On a run of
several agents that is not the run's first failure: a rank on another node may have failed before, and this node's
rank only aborted (exit -6, torch's NCCL watchdog after the collective that rank left behind timed out) or raised
(exit 1). Where an earlier line blames another rank for its own failure, that failure is put first."""

from __future__ import annotations

from trainctl.analyzers.logs import analyze_log_events
from trainctl.collectors.logs import parse_log_text
from trainctl.findings import FindingKind

OOM = (
    "[rank11]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 3 has a total capacity of "
    "79.15 GiB of which 1.20 GiB is free. Including non-PyTorch memory, this process has 77.9 GiB memory in use.\n"
)
TIMEOUT = (
    "[rank0]:[E1206 18:54:10.715298746 ProcessGroupNCCL.cpp:607] [PG ID 0 PG GUID 0(default_pg) Rank 0] Watchdog "
    "caught collective operation timeout: WorkNCCL(SeqNum=1234, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, "
    "Timeout(ms)=600000) ran for 600026 milliseconds before timing out.\n"
)


def banner(rank: int, exitcode: int, traceback: str) -> str:
    # torch 2.4+ ChildFailedError.format_msg, as torchrun prints it on the agent of node-1
    return (
        "torch.distributed.elastic.multiprocessing.errors.ChildFailedError:\n"
        "============================================================\n"
        "train.py FAILED\n"
        "------------------------------------------------------------\n"
        "Failures:\n"
        "  <NO_OTHER_FAILURES>\n"
        "------------------------------------------------------------\n"
        "Root Cause (first observed failure):\n"
        "[0]:\n"
        "  time      : 2024-12-06_18:54:11\n"
        "  host      : node-1\n"
        f"  rank      : {rank} (local_rank: {rank % 8})\n"
        f"  exitcode  : {exitcode} (pid: 2904040)\n"
        "  error_file: <N/A>\n"
        f"  traceback : {traceback}\n"
        "============================================================\n"
    )


def kinds_and_ranks(text: str):
    return [(f.kind, f.ranks) for f in analyze_log_events(parse_log_text(text, source="t.log"))]


def test_a_watchdog_abort_on_this_node_follows_another_ranks_oom() -> None:
    found = kinds_and_ranks(OOM + TIMEOUT + banner(0, -6, "Signal 6 (SIGABRT) received by PID 2904040"))
    assert found[0] == (FindingKind.OOM, (11,))
    assert (FindingKind.CRASH, (0,)) in found[1:]  # the banner is kept, below


def test_the_banners_own_rank_failing_first_stays_the_root_cause() -> None:
    found = kinds_and_ranks(OOM.replace("rank11", "rank0") + banner(0, 1, "To enable traceback see: ..."))
    assert found[0][1] == (0,)


def test_a_banner_killed_by_a_signal_is_not_moved() -> None:
    # SIGKILL (-9: the OOM killer, the scheduler) is a failure of the banner's own rank, whatever else was printed
    found = kinds_and_ranks(OOM + banner(0, -9, "Signal 9 (SIGKILL) received by PID 2904040"))
    assert found[0] == (FindingKind.CRASH, (0,))


def test_an_exit_1_banner_follows_the_exception_its_rank_raised_with_that_exceptions_own_blame() -> None:
    """Exit 1 is the interpreter's for an uncaught exception: the rendezvous timeout printed before the banner is what
    rank 1 raised, and goes first naming the store it could not reach, not rank 1 (which only waited for it)."""
    raised = (
        "torch.distributed.DistNetworkError: The client socket has timed out after 1800s while trying to connect to "
        "(10.0.0.1, 29500).\n"
    )
    found = analyze_log_events(parse_log_text(raised + banner(1, 1, "To enable traceback see: ..."), source="t.log"))
    assert found[0].kind is FindingKind.RENDEZVOUS_ERROR and found[0].hosts == ("10.0.0.1",)
    assert (found[1].kind, found[1].ranks) == (FindingKind.CRASH, (1,))  # the banner is kept, below
    # another rank's prefixed line is not this rank's exception: the late-banner rule's (above), not this one
    other = raised.replace("torch.distributed", "[rank5]: torch.distributed", 1)
    assert kinds_and_ranks(other + banner(1, 1, "To enable traceback see: ..."))[0] == (FindingKind.CRASH, (1,))


def test_an_exception_no_signature_knows_raised_inside_the_rendezvous_goes_before_its_exit_1_banner() -> None:
    """A traceback through init_process_group into the store's creation ends in an exception no signature knows:
    it was raised while the group was being formed, a rendezvous failure read at its exception line; the exit-1
    banner of the rank that raised it comes after it. A known exception there says more and is read as itself."""
    tb = (
        "Traceback (most recent call last):\n"
        '  File "/workspace/train.py", line 40, in <module>\n'
        '    dist.init_process_group(backend="nccl")\n'
        '  File "/usr/lib/python3/dist-packages/torch/distributed/distributed_c10d.py", line 1141, in init_process_group\n'
        "    store, rank, world_size = next(rendezvous_iterator)\n"
        '  File "/usr/lib/python3/dist-packages/torch/distributed/rendezvous.py", line 172, in _create_c10d_store\n'
        "    return TCPStore(\n"
    )
    found = analyze_log_events(
        parse_log_text(tb + "RuntimeError: frobnicated the widget\n" + banner(2, 1, "To enable ..."), source="t.log")
    )
    assert found[0].kind is FindingKind.RENDEZVOUS_ERROR and found[0].severity.value == "critical"
    assert "RuntimeError: frobnicated the widget" in found[0].summary
    assert found[0].evidence["raised_in"][0].startswith('File "/usr/lib/python3/dist-packages/torch/distributed/rendez')
    assert FindingKind.CRASH not in [f.kind for f in found[:1]]
    # a known exception (a CUDA error) raised there is that exception
    cuda = "RuntimeError: CUDA error: an illegal memory access was encountered\n"
    assert kinds_and_ranks(tb + cuda + banner(2, 1, "To enable ..."))[0][0] is FindingKind.CRASH
    # a traceback that does not run through the rendezvous stays the banner's crash
    plain = tb.replace("distributed_c10d.py", "trainer.py").replace("rendezvous.py", "loader.py")
    assert (
        kinds_and_ranks(plain + "RuntimeError: frobnicated the widget\n" + banner(2, 1, "x"))[0][0] is FindingKind.CRASH
    )


def test_a_minus_6_banner_follows_its_own_ranks_watchdog_timeout() -> None:
    """-6 is the abort torch's NCCL watchdog raises after the timeout it reported ("we are taking the entire process
    down"): the banner naming rank 0 says where that hang surfaced, and the timeout goes first. A -9 banner (killed
    from outside) is a failure of its own and stays first."""
    found = kinds_and_ranks(TIMEOUT + banner(0, -6, "Signal 6 (SIGABRT) received by PID 2904040"))
    assert found[0][0] is FindingKind.HUNG_COLLECTIVE
    assert (FindingKind.CRASH, (0,)) in found[1:]
    assert kinds_and_ranks(TIMEOUT + banner(0, -9, "Signal 9 (SIGKILL) received by PID 2904040"))[0] == (
        FindingKind.CRASH,
        (0,),
    )
