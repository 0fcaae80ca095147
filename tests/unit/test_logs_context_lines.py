"""Lines whose meaning comes from the lines around them, in their printers' formats: Open MPI's lost-daemon
message and its hostname line, scontrol's node record and its Reason, torchelastic's SIGABRT exit after a
watchdog timeout, a Paddle C++ traceback inside an NCCL collective, and wrapped lines under a task label."""

from __future__ import annotations

from trainctl.analyzers.logs import analyze_log_events
from trainctl.collectors.logs import clean_lines, parse_log_text
from trainctl.findings import FindingKind, sort_findings


def _first(text: str):
    return sort_findings(analyze_log_events(parse_log_text(text, "x.log")))[0]


def test_open_mpis_old_lost_daemon_message_names_its_node_as_a_peer() -> None:
    # orte/mca/errmgr/base/help-errmgr-base.txt [node-died], Open MPI 1.x-3.x
    text = (
        "ORTE has lost communication with its daemon located on node:\n\n"
        "   hostname:  ip-10-15-20-17.ec2.internal\n\n"
        "This is usually due to either a failure of the TCP network\n"
    )
    f = _first(text)
    assert f.kind is FindingKind.CRASH and f.hosts == ("ip-10-15-20-17.ec2.internal",)
    assert f.confidence < 0.9  # the end that went away, not proven faulty


def test_a_drained_nodes_reason_blames_the_node_of_its_record() -> None:
    text = (
        "NodeName=gpu-node-12 Arch=x86_64 CoresPerSocket=1\n"
        "   State=IDLE+DRAIN ThreadsPerCore=1 TmpDisk=0 Weight=1 Owner=N/A MCS_label=N/A\n"
        "   Reason=gres/gpu count reported lower than configured (0 < 8) [slurm@2024-12-19T11:03:34]\n"
    )
    f = _first(text)
    assert f.kind is FindingKind.FAULTY_HOST and f.hosts == ("gpu-node-12",)


def test_a_sigabrt_exit_after_watchdog_timeouts_is_their_consequence() -> None:
    text = (
        "ERROR:torch.distributed.elastic.multiprocessing.api:failed (exitcode: -6) local_rank: 0 (pid: 514946) of binary: \n"
        "[E ProcessGroupNCCL.cpp:821] [Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=27962, "
        "OpType=BROADCAST, Timeout(ms)=1800000) ran for 1807582 milliseconds before timing out.\n"
    )
    assert _first(text).kind is FindingKind.HUNG_COLLECTIVE


def test_a_paddle_stack_inside_an_nccl_collective_killed_from_outside_is_a_hang() -> None:
    text = (
        "C++ Traceback (most recent call last):\n"
        "7   paddle::imperative::AllReduce(paddle::framework::Variable const&, int, bool)\n"
        "8   ncclAllReduce\n"
        "10  ncclBarrierEnqueueWait(ncclComm*)\n"
        "Error Message Summary:\n"
        "FatalError: `Termination signal` is detected by the operating system.\n"
    )
    assert _first(text).kind is FindingKind.HUNG_COLLECTIVE


def test_equal_length_lines_under_a_task_label_are_not_wrapped_into_one() -> None:
    long = "x" * 150
    text = (
        f"  3: 2020-04-03 09:00:45.480838: W grpc_remote_master.cc:157] RPC failed {long}\n"
        f"  3: 2020-04-03 09:00:45.480839: W grpc_remote_master.cc:157] RPC failed {long}\n"
        "  3: WARNING:tensorflow:An error occurred when attempting to close the session.\n"
    )
    assert len(list(clean_lines(text))) == 3
