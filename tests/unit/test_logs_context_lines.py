"""Lines whose meaning comes from the lines around them, in their printers' formats: Open MPI's lost-daemon
message and its hostname line, scontrol's node record and its Reason, torchelastic's SIGABRT exit after a
watchdog timeout, a Paddle C++ traceback inside an NCCL collective, and wrapped lines under a task label."""

from __future__ import annotations

import pytest

from trainctl.analyzers.logs import analyze_log_events
from trainctl.collectors.logs import clean_lines, parse_log_text
from trainctl.findings import FindingKind, sort_findings


def _first(text: str):
    return sort_findings(analyze_log_events(parse_log_text(text, "x.log")))[0]


@pytest.mark.parametrize(
    "text, kind, host",
    [
        # Open MPI 1.x-3.x orte/mca/errmgr/base/help-errmgr-base.txt [node-died]: the hostname line names the node
        # that went away (a peer: not proven faulty, so below a runbook's gate)
        ("ORTE has lost communication with its daemon located on node:\n\n"
         "   hostname:  ip-10-15-20-17.ec2.internal\n\n"
         "This is usually due to either a failure of the TCP network\n",
         FindingKind.CRASH, "ip-10-15-20-17.ec2.internal"),
        # scontrol show node: the Reason line blames the node of its record's NodeName
        ("NodeName=gpu-node-12 Arch=x86_64 CoresPerSocket=1\n"
         "   State=IDLE+DRAIN ThreadsPerCore=1 TmpDisk=0 Weight=1 Owner=N/A MCS_label=N/A\n"
         "   Reason=gres/gpu count reported lower than configured (0 < 8) [slurm@2024-12-19T11:03:34]\n",
         FindingKind.FAULTY_HOST, "gpu-node-12"),
    ],
    ids=["orte-lost-daemon-hostname", "scontrol-drain-reason"],
)  # fmt: skip
def test_a_line_names_the_node_its_neighbour_gives(text: str, kind: FindingKind, host: str) -> None:
    f = _first(text)
    assert f.kind is kind and f.hosts == (host,)
    if kind is FindingKind.CRASH:
        assert f.confidence < 0.9  # the end that went away, not proven faulty


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


def _coll(host: str, pid: int, op_count: int, op: str, count: int, dtype: int, comm: str, nranks: int = 8) -> str:
    # NVIDIA/nccl src/enqueue.cc INFO(NCCL_COLL, "%s: opCount %lx sendbuff %p recvbuff %p count %zu datatype %d op %d
    # root %d comm %p [nranks=%d] stream %p")
    return (
        f"{host}:{pid}:{pid} [0] NCCL INFO {op}: opCount {op_count:x} sendbuff 0x7f88e4000000 recvbuff 0x7f88e4000000 "
        f"count {count} datatype {dtype} op 0 root 0 comm {comm} [nranks={nranks}] stream 0x55f20d2f5db0\n"
    )


def test_processes_that_enqueue_different_collectives_at_one_op_count_are_a_mismatch_naming_nobody() -> None:
    text = _coll("n1", 100, 0, "Broadcast", 25503912, 6, "0x7f01") + "".join(
        _coll("n1", pid, 0, "Broadcast", 53, 4, f"0x7f{pid}") for pid in (101, 102, 103)
    )
    f = _first(text)
    assert f.kind is FindingKind.COLLECTIVE_MISMATCH and f.ranks == () and f.hosts == ()
    assert "opCount 0: n1:100 Broadcast count 25503912 datatype 6" in f.summary and "the other 3 called" in f.summary


def test_agreeing_or_unpairable_coll_traces_are_not_a_mismatch() -> None:
    same = "".join(_coll("n1", pid, 0, "AllReduce", 53, 4, f"0x7f{pid}") for pid in (100, 101))
    assert not [
        f for f in analyze_log_events(parse_log_text(same, "x.log")) if f.kind is FindingKind.COLLECTIVE_MISMATCH
    ]
    # two communicators in one process: its opCounts cannot be paired with another process's
    two_comms = _coll("n1", 100, 0, "AllReduce", 3, 7, "0x7f01") + _coll("n1", 100, 0, "AllReduce", 2, 7, "0x7f02")
    two_comms += _coll("n1", 101, 0, "AllReduce", 2, 7, "0x7f03") + _coll("n1", 101, 0, "AllReduce", 3, 7, "0x7f04")
    assert not [
        f for f in analyze_log_events(parse_log_text(two_comms, "x.log")) if f.kind is FindingKind.COLLECTIVE_MISMATCH
    ]


def test_nccls_return_trail_alone_names_the_result_code() -> None:
    text = "".join(
        f"nd20-01:191191:219889 [0] NCCL INFO {site} -> 2\n" for site in ("misc/socket.cc:564", "bootstrap.cc:270")
    )
    f = _first(text)
    assert f.kind is FindingKind.NETWORK_ERROR and "ncclSystemError (2)" in f.summary and f.hosts == ()
    # one line alone is not enough (a retried call), and a WARN line that says more wins
    assert analyze_log_events(parse_log_text("n:1:1 [0] NCCL INFO bootstrap.cc:270 -> 2\n", "x.log")) == []


def test_a_bare_clock_time_prefix_is_peeled_and_starts_a_record() -> None:
    text = (
        "05:54:36 Unable to shutdown processes via 15, forcefully exitting via 9\n"
        "05:54:36 Unable to shutdown processes via 15, forcefully exitting via 9\n"
        "05:54:36 failed (exitcode: 138) local_rank: 0 (pid: 56341) of binary: bin/echo1.py\n"
    )
    assert [r.text[:6] for r in clean_lines(text)] == ["Unable", "Unable", "failed"]
    assert _first(text).kind is FindingKind.CRASH


def test_a_lone_field_line_is_not_a_torchelastic_entry_but_fields_of_a_cut_entry_are():
    # A terminal wrap that left "rank: 1" on a row of its own (the tail of c10d's "Added key ... for rank: 1")
    # must not read as torchelastic's failure entry; an excerpt cut inside a real entry shows several fields.
    wrapped = (
        "[2022-02-08 19:04:25,632][torch.distributed.distributed_c10d][INFO] - Added key: store_based_barrier_key:1"
        " to store for \nrank: 1\n"
    )
    assert [r for r in parse_log_text(wrapped).to_pylist() if r["signature"] == "elastic_failure"] == []
    cut = "  host      : node-3\n  rank      : 5 (local_rank: 1)\n  exitcode  : -9 (pid: 4242)\n"
    (row,) = [r for r in parse_log_text(cut).to_pylist() if r["signature"] == "elastic_failure"]
    assert row["kind"] == "crash" and row["rank"] == 5


def test_a_users_ctrl_c_is_a_stall_someone_stopped_unless_a_failure_came_before_it():
    # torchelastic's agent on SIGINT (agent/server/api.py "Received %s death signal", multiprocessing/api.py
    # "Sending process %s closing signal %s"): a person stopped the run; with nothing failing before it, the
    # person judged it stuck
    interrupt = (
        "[2024-04-23 22:04:33,011] torch.distributed.elastic.agent.server.api: [WARNING] Received Signals.SIGINT death"
        " signal, shutting down workers\n"
        "[2024-04-23 22:04:33,012] torch.distributed.elastic.multiprocessing.api: [WARNING] Sending process 1486799"
        " closing signal SIGINT\n"
    )
    f = _first("[INFO] [axolotl.train.log:61] [PID:1486799] [RANK:0] Starting trainer...\n" + interrupt)
    assert f.kind is FindingKind.HUNG_COLLECTIVE and f.ranks == () and f.hosts == ()
    assert f.summary.startswith("the run was stopped by hand (SIGINT")
    crashed = "[rank0]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n" + interrupt
    assert _first(crashed).kind is FindingKind.OOM


def test_the_keep_alive_warnings_tail_cut_onto_its_own_line_is_not_a_rendezvous_timeout():
    # dynamic_rendezvous.py's keep-alive warning ends "... due to an error of type RendezvousTimeoutError."; a
    # paste that wrapped it must not read its tail as the critical RendezvousTimeoutError exception
    text = (
        "WARNING:torch.distributed.elastic.rendezvous.dynamic_rendezvous:The node 'cn136_961_0' has failed to send a"
        " keep-alive heartbeat to the rendezvous '159009' due to an\nerror of type RendezvousTimeoutError.\n"
    )
    rows = [r for r in parse_log_text(text).to_pylist() if r["kind"]]
    assert [(r["signature"], r["severity"]) for r in rows] == [("elastic_keepalive_failed", "warning")]
    assert [r["signature"] for r in parse_log_text("torch.distributed.elastic.rendezvous.api.RendezvousTimeoutError")
            .to_pylist()] == ["rendezvous_timeout"]  # fmt: skip


def test_a_progress_bars_description_is_kept_as_text_and_its_bar_dropped() -> None:
    """tqdm's l_bar is "{desc}: {percentage}%|": the YOLO trainers print their epoch, memory and loss columns there
    (ultralytics engine/trainer.py), so a NaN loss column must reach the signatures; the bar itself is noise."""
    row = "      1/100      3.21G        nan        nan        nan         24        640: 100%|██████████| 10/10 [00:01<00:00]"
    (rec,) = clean_lines(row)
    assert "3.21G        nan" in rec.text and "%|" not in rec.text and "██" not in rec.text
    (f,) = analyze_log_events(parse_log_text("      Epoch    GPU_mem   box_loss   cls_loss\n" + row + "\n"))
    assert f.kind is FindingKind.NUMERICAL and f.ranks == () and f.hosts == ()
    healthy = row.replace("nan", "1.234")
    assert analyze_log_events(parse_log_text(healthy + "\n")) == []
    # a bare bar, or one whose description is only a label, leaves no text of its own
    assert [r.text for r in clean_lines(" 45%|████▌     | 450/1000 [01:00<01:13, 7.5it/s]\nnext")] == ["next"]


@pytest.mark.parametrize(
    "line",
    [
        # syslog's host field redacted by the person who pasted it; NCCL's host:pid:tid prefix on a loopback name
        "Apr 12 00:54:42 hostname kernel: amdgpu 0000:2f:00.0: [drm:amdgpu_ring_test_helper [amdgpu]] *ERROR* ring kiq_2.1.0 test failed (-110)",
        "localhost:4242:4250 [0] NCCL WARN Cuda failure 'an illegal memory access was encountered'",
        "Apr 12 00:54:42 hostname python[123]: FooBarError: something weird",
    ],
)
def test_a_host_name_that_names_no_machine_is_never_blamed_and_the_run_dirs_host_stands(line: str) -> None:
    fs = analyze_log_events(parse_log_text(line + "\n", source="t.log"))
    assert fs and all(not f.hosts for f in fs), [(f.summary, f.hosts) for f in fs]
    # in a run dir's rank log the path names the host: a loopback name in the text does not replace it
    fs = analyze_log_events(parse_log_text(line + "\n", source="logs/node07/rank-3.log", rank=3, host="node07"))
    assert fs and all(set(f.hosts) <= {"node07"} for f in fs)
    named = line.replace("hostname", "gpu-node-17").replace("localhost", "gpu-node-17")
    assert any("gpu-node-17" in f.hosts for f in analyze_log_events(parse_log_text(named + "\n", source="t.log")))


# NCCL's "%s:%d:%d [%d] " host:pid:tid [dev] prefix (src/debug.cc), socket.h's recv failure, init.cc's CUDACHECK
RESET_SEEN_BY_B = "nodeb:46841:46987 [0] include/socket.h:428 NCCL WARN Net : Call to recv from 10.1.0.7<36048> failed : Connection reset by peer\n"
A_FAILED = "nodea:104934:104934 [1] init.cc:204 NCCL WARN Cuda failure 'an illegal memory access was encountered'\n"


def test_a_peers_connection_reset_is_the_echo_of_another_processs_own_failure_in_either_order() -> None:
    for text in (RESET_SEEN_BY_B + A_FAILED, A_FAILED + RESET_SEEN_BY_B):
        fs = analyze_log_events(parse_log_text(text, source="t.log"))
        assert fs[0].kind is FindingKind.CRASH and fs[0].hosts == ("nodea",), text
        assert fs[0].evidence["first_failure"] and any(f.kind is FindingKind.NETWORK_ERROR for f in fs[1:])
    # the reporter's own failure after it lost its peer may be the loss's consequence: the order stands
    same = RESET_SEEN_BY_B + A_FAILED.replace("nodea:104934:104934", "nodeb:46841:46987")
    assert analyze_log_events(parse_log_text(same, source="t.log"))[0].kind is FindingKind.NETWORK_ERROR
