"""Lines the team wrote for formats the corpus lacks: one per era of the corpus README's drift
table, plus noise variants (ANSI, pdsh, Ray, tqdm, markdown, terminal wraps) and run-dir parsing.
Each asserts the exact classification, extracted fields and culprit."""

from __future__ import annotations

import json

import pytest

from trainctl.analyzers.logs import analyze_log_events
from trainctl.collectors.logs import clean_lines, parse_log_text, parse_run_logs
from trainctl.findings import Category, FindingKind, Severity


def events(text: str, **kw) -> list[dict]:
    rows = [r for r in parse_log_text(text, source="t.log", **kw).to_pylist() if r["kind"]]
    for r in rows:
        r["f"] = json.loads(r["fields"] or "{}")
    return rows


def first_finding(text: str, **kw):
    fs = analyze_log_events(parse_log_text(text, source="t.log", **kw))
    assert fs
    return fs[0]


# ---- one line per era of the drift table ------------------------------------------------------
WATCHDOG_ERAS = [
    # <=1.10: no SeqNum
    (
        "[E ProcessGroupNCCL.cpp:566] [Rank 2] Watchdog caught collective operation timeout: WorkNCCL(OpType=ALLREDUCE, "
        "Timeout(ms)=1800000) ran for 1800428 milliseconds before timing out.",
        None,
        "ALLREDUCE",
        2,
        None,
    ),
    # timestamp-less [rankN]: middle form
    (
        "[rank1]:[E ProcessGroupNCCL.cpp:523] [Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=77, "
        "OpType=ALLGATHER, NumelIn=10, NumelOut=20, Timeout(ms)=600000) ran for 600100 milliseconds before timing out.",
        77,
        "ALLGATHER",
        1,
        None,
    ),
    # ~2.4 PG tag with description
    (
        "[rank6]:[E1011 10:02:03.123456789 ProcessGroupNCCL.cpp:616] [PG 0 (default_pg) Rank 6] Watchdog caught collective "
        "operation timeout: WorkNCCL(SeqNum=12, OpType=REDUCE_SCATTER, NumelIn=8, NumelOut=1, Timeout(ms)=600000) ran for "
        "600002 milliseconds before timing out.",
        12,
        "REDUCE_SCATTER",
        6,
        "0(default_pg)",
    ),
    # 2.5+ named GUID on a non-default group: the tag's rank is group-local, so no global rank from it
    (
        "[E1206 18:44:12.715298746 ProcessGroupNCCL.cpp:632] [PG ID 3 PG GUID 99(EXPERT_MODEL_PARALLEL_GROUP) Rank 1] Watchdog "
        "caught collective operation timeout: WorkNCCL(SeqNum=5, OpType=ALLTOALL_BASE, NumelIn=4, NumelOut=4, Timeout(ms)=600000) "
        "ran for 600001 milliseconds before timing out.",
        5,
        "ALLTOALL_BASE",
        None,
        "99(EXPERT_MODEL_PARALLEL_GROUP)",
    ),
]


@pytest.mark.parametrize("line,seq,op,rank,pg", WATCHDOG_ERAS)
def test_watchdog_timeout_eras(line, seq, op, rank, pg) -> None:
    (e,) = [e for e in events(line) if e["signature"] == "nccl_watchdog_timeout"]
    assert (e["kind"], e["category"], e["seq"], e["op"], e["rank"], e["pg"]) == (
        "hung_collective",
        "collective_timeout",
        seq,
        op,
        rank,
        pg,
    )
    assert e["culprit_rank"] is None and e["culprit_host"] is None  # the reporter is not the culprit


def test_legacy_communicator_aborted_wrapper_still_finds_the_timeout() -> None:
    line = (
        "RuntimeError: NCCL communicator was aborted on rank 3.  Original reason for failure was: [Rank 3] Watchdog caught "
        "collective operation timeout: WorkNCCL(SeqNum=9, OpType=BROADCAST, Timeout(ms)=1800000) ran for 1800123 milliseconds before timing out."
    )
    f = first_finding(line)
    assert (f.kind, f.category, f.ranks, f.evidence["seqs"]) == (
        FindingKind.HUNG_COLLECTIVE,
        Category.COLLECTIVE_TIMEOUT,
        (),
        [9],
    )


@pytest.mark.parametrize(
    "line,sig,seq,enq,comp",
    [
        (
            "[rank0]:[E ProcessGroupNCCL.cpp:1316] [PG 0 Rank 0] Timeout at NCCL work: 40, last enqueued NCCL work: 41, last completed NCCL work: 39.",
            "nccl_timeout_at_work",
            40,
            41,
            39,
        ),
        (
            "[rank2]:[E321 02:07:08.465150152 ProcessGroupNCCL.cpp:1664] [PG 1 Rank 2] Exception (either an error or timeout) detected by "
            "watchdog at work: 7, last enqueued NCCL work: 8, last completed NCCL work: 6.",
            "nccl_watchdog_exception_at_work",
            7,
            8,
            6,
        ),
        (
            "[rank2]:[E626 16:48:25.440238649 ProcessGroupNCCL.cpp:2268] [PG ID 0 PG GUID 0(default_pg) Rank 2]  failure detected by watchdog "
            "at work sequence id: 3 PG status: last enqueued work: 4, last completed work: 2",
            "nccl_watchdog_failure_seq",
            3,
            4,
            2,
        ),
    ],
)
def test_progress_counter_eras(line, sig, seq, enq, comp) -> None:
    (e,) = events(line)
    assert (e["signature"], e["seq"], e["f"]["last_enqueued"], e["f"]["last_completed"], e["rank"]) == (
        sig,
        seq,
        enq,
        comp,
        int(line[5]),
    )


def test_heartbeat_monitor_and_dump_signals() -> None:
    text = (
        "[rank0]:[F1011 10:02:03.1 ProcessGroupNCCL.cpp:1306] [PG 0 (default_pg) Rank 0] [PG 0 (default_pg) Rank 0] "
        "ProcessGroupNCCL's watchdog got stuck for 480 seconds without making progress in monitoring enqueued collectives.\n"
        "[rank4]:[E1011 10:02:03.1 ProcessGroupNCCL.cpp:1400] [PG 0 Rank 4] Received a timeout signal from this local rank and will start to dump the debug info.\n"
    )
    ev = events(text)
    assert [(e["signature"], e["f"].get("stuck_s")) for e in ev] == [
        ("nccl_heartbeat_stuck", 480),
        ("nccl_dump_signal", None),
    ]


@pytest.mark.parametrize(
    "line,exit_code,category,generic",
    [
        (
            "ERROR:torch.distributed.elastic.multiprocessing.api:failed (exitcode: 1) local_rank: 3 (pid: 77) of binary: /usr/bin/python",
            1,
            "exit_code",
            False,
        ),
        (
            "[2024-03-18 17:38:50,208] torch.distributed.elastic.multiprocessing.api: [ERROR] failed (exitcode: -6) local_rank: 0 (pid: 9) of binary: python",
            -6,
            "signal",
            False,
        ),
        (
            "E1026 04:09:30.101000 2904014 torch/distributed/elastic/multiprocessing/api.py:882] failed (exitcode: -11) local_rank: 1 (pid: 5) of binary: python",
            -11,
            "signal",
            False,
        ),
        (
            "[2024-03-18 17:38:50,208] torch.distributed.elastic.multiprocessing.api: [ERROR] failed",
            None,
            "exit_code",
            True,
        ),
    ],
)
def test_elastic_agent_eras(line, exit_code, category, generic) -> None:
    (e,) = events(line)
    assert (e["signature"], e["exit_code"], e["category"], bool(e["f"].get("generic"))) == (
        "elastic_agent_failed",
        exit_code,
        category,
        generic,
    )
    assert e["culprit_rank"] is None  # a local rank only
    if exit_code == -11:
        assert e["f"]["signal"] == "SIGSEGV"


def test_elastic_banner_earliest_root_cause_is_blamed_and_mixed_hosts_are_not() -> None:
    text = """Failures:
[1]:
  time      : 2025-01-01_10:00:09
  host      : node02
  rank      : 9 (local_rank: 1)
  exitcode  : 1 (pid: 12)
  error_file: /tmp/e.json
  traceback : Traceback (most recent call last):
------------------------------------------------------------
Root Cause (first observed failure):
[0]:
  time      : 2025-01-01_10:00:02
  host      : node01
  rank      : 3 (local_rank: 3)
  exitcode  : 1 (pid: 11)
  error_file: /tmp/d.json
  traceback : Traceback (most recent call last):
============================================================"""
    f = first_finding(text)
    assert (f.kind, f.category, f.ranks, f.hosts) == (FindingKind.CRASH, Category.EXIT_CODE, (3,), ())
    assert f.evidence["culprit_basis"] == ["elastic_earliest_failure"]


@pytest.mark.parametrize(
    "text,endpoint,blamed",
    [
        (
            "[E socket.cpp:793] [c10d] The client socket has timed out after 60s while trying to connect to (node07, 29500).",
            "node07",
            True,
        ),
        (
            "[E521 15:43:02.707733876 socket.cpp:1023] [c10d] The client socket has timed out after 600000ms while trying to connect to (10.1.2.3, 29500).\n"
            "[W521 15:43:02.7 TCPStore.cpp:318] [c10d] TCP client failed to connect/validate to host 10.1.2.3:29500 - timed out (try=1, timeout=600000ms)",
            "10.1.2.3",
            True,
        ),
        (
            "[W socket.cpp:558] [c10d] The client socket has failed to connect to [node07]:29500 (errno: 111 - Connection refused).",
            "node07",
            False,
        ),
    ],
)
def test_c10d_connect_eras(text, endpoint, blamed) -> None:
    f = first_finding(text)
    assert f.kind is FindingKind.RENDEZVOUS_ERROR
    assert f.hosts == ((endpoint,) if blamed else ())
    assert endpoint in f.evidence["peers"]


@pytest.mark.parametrize(
    "line",
    [
        "RuntimeError: The server socket has failed to bind to [::]:29500 (errno: 98 - Address already in use).",
        "torch.distributed.DistNetworkError: The server socket has failed to listen on any local network address. port: 29500, useIpv6: 0, code: -98, name: EADDRINUSE, message: address already in use",
        "[I ProcessGroupNCCL.cpp] Waiting in store based barrier to initialize process group for rank: 3, key: store_based_barrier_key:1 (world_size=8, worker_count=6, timeout=0:30:00)",
        "torch.distributed.DistStoreError: Timed out after 901 seconds waiting for clients. 7/8 clients joined.",
    ],
)
def test_rendezvous_forms(line) -> None:
    f = first_finding(line)
    assert (f.kind, f.ranks, f.hosts) == (FindingKind.RENDEZVOUS_ERROR, (), ())


@pytest.mark.parametrize(
    "line,gpu",
    [
        (
            "RuntimeError: CUDA out of memory. Tried to allocate 20.00 MiB (GPU 0; 15.78 GiB total capacity; 14.1 GiB already allocated; 8.75 MiB free; 14.5 GiB reserved in total by PyTorch)",
            0,
        ),
        (
            "RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB (GPU 1; 10.92 GiB total capacity; 8.1 GiB already allocated; 1.2 GiB free; 8.3 GiB cached)",
            1,
        ),
        (
            "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.00 GiB. GPU 2 has a total capacty of 79.15 GiB of which 1.0 GiB is free.",
            2,
        ),
        (
            "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.00 GiB. GPU 3 has a total capacity of 79.15 GiB of which 10 MiB is free. Including non-PyTorch memory, this process has 79 GiB memory in use.",
            3,
        ),
    ],
)
def test_oom_eras(line, gpu) -> None:
    (e,) = events(line, rank=5, host="node02")
    assert (e["kind"], e["f"]["gpu"], e["culprit_rank"], e["culprit_host"]) == ("oom", gpu, 5, "node02")


@pytest.mark.parametrize(
    "line", ["torch.OutOfMemoryError: CUDA out of memory.", "RuntimeError: CUDA out of memory.  ", "HIP out of memory."]
)
def test_the_oom_messages_head_alone_is_the_same_oom(line: str) -> None:
    # a line cut after its first sentence (a log table's column, a terminal's wrap) was an unclassified warning
    (e,) = events(line, rank=5, host="node02")
    assert (e["kind"], e["signature"], e["culprit_rank"], e["culprit_host"]) == ("oom", "cuda_oom", 5, "node02")


def test_legacy_thc_ecc_error_is_a_faulty_gpu() -> None:
    (e,) = events(
        "THCudaCheck FAIL file=/pytorch/aten/src/THC/THCCachingHostAllocator.cpp line=278 error=39 : "
        "cuda runtime error (39) : uncorrectable ECC error encountered at /pytorch/aten/src/THC/generic/THCStorage.cpp:32",
        rank=2,
        host="node09",
    )
    assert (e["kind"], e["category"], e["culprit_rank"], e["culprit_host"]) == ("faulty_host", "ecc", 2, "node09")


@pytest.mark.parametrize(
    "line,status,peer_blamed",
    [
        (
            "node3:1:2 [0] transport/net_ib.cc:1234 NCCL WARN NET/IB : Got completion from peer 10.0.0.7<4000> with error 12, opcode 0, len 0, vendor err 129",
            12,
            True,
        ),
        (
            "node3:1:2 [0] ib_plugin.c:1418 NCCL WARN NET/IB : Got completion from peer 10.0.0.7<4000> with status=5 opcode=1 len=0 vendor err 249 (Recv) localGid ::ffff:10.0.0.3 remoteGids::ffff:10.0.0.7",
            5,
            False,
        ),
        # NCCL 2.28.7+ (v2.29.2-1 src/transport/net_ib/p2p.cc ncclIbLogCompletionWithError): the status by name
        (
            "node3:1:2 [0] transport/net_ib/p2p.cc:550 NCCL WARN NET/IB: Got completion from peer 10.0.0.7<4000> with status=IBV_WC_RETRY_EXC_ERR(12) opcode=IBV_WC_RDMA_WRITE(1) vendor_err=129  hca mlx5_0",
            12,
            True,
        ),
        # its GIN transport (v2.29.2-1 src/transport/net_ib/gin.cc)
        (
            "node3:1:2 [0] transport/net_ib/gin.cc:522 NCCL WARN NET/IB/GIN: Got completion from peer 10.0.0.7<4000> with status=5 opcode=0 len=0 vendor err 249 (Send) hca mlx5_0",
            5,
            False,
        ),
        # a line cut before its vendor error (x6b-011's paste): the status and the peer are already there
        (
            "node3:1:2 [4] transport/net_ib.cc:1238 NCCL WARN NET/IB : Got completion from peer 10.0.0.7<37948> with error 12, opcode 2, len 1, ven",
            12,
            True,
        ),
    ],
)
def test_ib_completion_eras(line, status, peer_blamed) -> None:
    (e,) = events(line)
    assert (e["category"], e["f"]["ib_status"], e["host"]) == ("ib", status, "node3")
    assert e["culprit_host"] == ("10.0.0.7" if peer_blamed else None)


@pytest.mark.parametrize(
    "line,peer_blamed",
    [
        (
            "[E ProcessGroupGloo.cpp:144] Gloo connectFullMesh failed with [../third_party/gloo/gloo/transport/tcp/pair.cc:144] no error",
            False,
        ),
        (
            "RuntimeError: [/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:534] Connection closed by peer [10.0.0.9]:5000",
            False,
        ),
        (
            "RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:575] Read error [10.0.0.9]:5000: Connection reset by peer",
            True,
        ),
        (
            "RuntimeError: [../third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:81] Timed out waiting 1800000ms for recv operation to complete",
            False,
        ),
    ],
)
def test_gloo_eras(line, peer_blamed) -> None:
    f = first_finding(line)
    assert f.hosts == (("10.0.0.9",) if peer_blamed else ())


@pytest.mark.parametrize(
    "line,severity",
    [
        (
            "[2023-01-01 00:00:00,000] [INFO] [loss_scaler.py:181:update_scale] [deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 65536, reducing to 32768",
            Severity.INFO,
        ),
        (
            "[2023-01-01 00:00:00,000] [INFO] [loss_scaler.py:188:update_scale] [deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 1, but hysteresis is 2. Reducing hysteresis to 1",
            Severity.INFO,
        ),
        (
            "Exception: Current loss scale already at minimum - cannot decrease scale anymore. Exiting run.",
            Severity.CRITICAL,
        ),
    ],
)
def test_deepspeed_overflow_eras(line, severity) -> None:
    f = first_finding(line)
    assert (f.kind, f.category, f.severity, f.ranks) == (FindingKind.NUMERICAL, Category.OVERFLOW, severity, ())


@pytest.mark.parametrize(
    "line",
    [
        "{'loss': nan, 'learning_rate': 1e-05, 'epoch': 0.5}",
        "step 120 | loss=NaN | lr 3e-4",
        "Loss is nan, stopping training",
    ],
)
def test_nan_loss_forms(line) -> None:
    f = first_finding(line)
    assert (f.kind, f.category) == (FindingKind.NUMERICAL, Category.NAN_LOSS)


def test_kernel_r570_fallen_off_bus_without_xid_token_blames_the_host() -> None:
    text = (
        "[ 1843.308145] NVRM: The NVIDIA GPU 0000:b3:00.0\n"
        "               NVRM: (PCI ID: 10de:26b5) installed in this system has\n"
        "               NVRM: fallen off the bus and is not responding to commands.\n"
        "[ 1843.439662] NVRM: The NVIDIA probe routine failed for 1 device(s).\n"
    )
    f = first_finding(text, host="gpu-node-17")
    assert (f.kind, f.category, f.hosts, f.evidence["gpu_pcis"]) == (
        FindingKind.FAULTY_HOST,
        Category.GPU_LOST,
        ("gpu-node-17",),
        ["0000:b3:00"],
    )


def test_kernel_xid_79_and_ecc_in_journalctl_with_hostname() -> None:
    text = (
        "Nov 22 10:00:01 node05 kernel: NVRM: Xid (PCI:0000:41:00): 48, pid=1234, name=python, An uncorrectable double bit error (DBE) has been detected on GPU in the framebuffer at partition 1, subpartition 0.\n"
        "Nov 22 10:00:09 node05 kernel: NVRM: Xid (PCI:0000:41:00): 79, pid=1234, name=python, GPU has fallen off the bus.\n"
    )
    ev = events(text)
    assert [(e["xid"], e["category"], e["culprit_host"]) for e in ev] == [
        (48, "ecc", "node05"),
        (79, "gpu_lost", "node05"),
    ]
    fs = analyze_log_events(parse_log_text(text))
    assert [(f.category, f.hosts) for f in fs] == [(Category.ECC, ("node05",)), (Category.GPU_LOST, ("node05",))]


def test_application_xid_does_not_blame_the_host() -> None:
    (e,) = events(
        "[Mon Nov 22 10:00:01 2026] NVRM: Xid (PCI:0000:41:00): 31, pid=1, name=python, Ch 00000010, intr 10000000. MMU Fault",
        host="node05",
    )
    assert (e["xid"], e["severity"], e["culprit_host"], str(e["ts"])) == (
        31,
        "warning",
        None,
        "2026-11-22 10:00:01+00:00",
    )
    # NVIDIA's catalog puts 31 (and 43) on the application: the program crashed on the GPU
    assert (e["kind"], e["category"]) == ("crash", "cuda_error")


# ---- noise ---------------------------------------------------------------------------------------
CORE = (
    "[rank3]:[E1206 18:44:12.715298746 ProcessGroupNCCL.cpp:1895] [PG ID 0 PG GUID 0(default_pg) Rank 3] Process group "
    "watchdog thread terminated with exception: CUDA error: an illegal memory access was encountered"
)


@pytest.mark.parametrize(
    "text,host",
    [
        (f"\x1b[31m{CORE}\x1b[0m", None),  # ANSI colours
        (f"#033[31m{CORE}#033[0m", None),  # ANSI colours as rsyslog escapes ESC (/var/log/messages)
        (f"^[[31m{CORE}^[[0m", None),  # ... and in caret notation (cat -v, less)
        (f"#033[2m#033[36m(TrainWorker pid=4242, ip=10.3.4.5)#033[0m {CORE}", "10.3.4.5"),  # Ray, via rsyslog
        (f"node17: {CORE}", "node17"),  # pdsh
        (f"gpu-a100-3.cluster.local: {CORE}", "gpu-a100-3.cluster.local"),
        (f"(TrainWorker pid=4242, ip=10.3.4.5) {CORE}", "10.3.4.5"),  # Ray
        (f"Epoch 0:  37%|███▋      | 370/1000 [01:02<01:45,  5.97it/s, loss=2.31]\r{CORE}", None),  # tqdm redraw
        (f"Epoch 0:  37%|███▋      | 370/1000 [01:02<01:45,  5.97it/s]{CORE}", None),  # tqdm glued without \r
        (f"> {CORE}", None),  # markdown quote
        (f"+> {CORE}", None),  # quoted in a diff
    ],
)
def test_noise_variants_keep_rank_and_host(text, host) -> None:
    f = first_finding(text)
    assert (f.kind, f.category, f.ranks, f.hosts) == (
        FindingKind.CRASH,
        Category.CUDA_ERROR,
        (3,),
        ((host,) if host else ()),
    )


def test_terminal_wrap_mid_word_is_joined() -> None:
    width = 100
    body = CORE.replace(
        "CUDA error",
        "[Rank 3] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=4, OpType=BROADCAST, "
        "NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600010 milliseconds before timing out. x",
    )
    chunks = [body[i : i + width] for i in range(0, len(body), width)]
    text = (
        "\n".join(chunks)
        + "\nException raised from checkTimeout at ProcessGroupNCCL.cpp:632 (most recent call first):\n"
    )
    (e,) = [e for e in events(text) if e["signature"] == "nccl_watchdog_timeout"]
    assert (e["seq"], e["op"], e["line_no"], e["rank"]) == (4, "BROADCAST", 1, 3)


def test_same_length_records_are_not_joined() -> None:
    text = "\n".join(
        f" iteration {i:8d}/ 1000 | lm loss: nan | grad norm: 1.0 | skipped: 0 | nan iterations: 0 |" for i in range(3)
    )
    assert [e["line_no"] for e in events(text)] == [1, 2, 3]


def test_rows_of_a_fixed_width_table_of_one_length_are_not_joined() -> None:
    """kubectl's pod printer pads its columns: rows whose AGE is as long come out at one length (>= 60), and rows
    whose columns start at the same places are a table's rows, not a line a terminal wrapped."""
    table = (
        "NAME                   READY   STATUS             RESTARTS      AGE\n"
        "train-worker-0         0/1     CrashLoopBackOff   5 (2m ago)    20m\n"
        "train-worker-1         1/1     Running            0             20m\n"
    )
    assert len({len(ln) for ln in table.splitlines()}) == 1 and len(table.splitlines()[0]) >= 60
    (e,) = [e for e in events(table) if e["kind"]]
    assert (e["signature"], e["line_no"]) == ("kubectl_pod_status", 2)


def test_run_dir_logs_take_rank_and_host_from_the_path(tmp_path) -> None:
    (tmp_path / "logs" / "node02").mkdir(parents=True)
    (tmp_path / "logs" / "node02" / "rank-5.log").write_text(
        "step 10\nRuntimeError: CUDA error: an illegal memory access was encountered\n"
    )
    (tmp_path / "logs" / "node01").mkdir(parents=True)
    (tmp_path / "logs" / "node01" / "rank-0.log").write_text(
        "[E ProcessGroupNCCL.cpp:737] [Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=3, OpType=ALLREDUCE, Timeout(ms)=60000) ran for 60001 milliseconds before timing out.\n"
    )
    (tmp_path / "kernel" / "node02").mkdir(parents=True)
    (tmp_path / "kernel" / "node02" / "dmesg.txt").write_text(
        "[  12.5] NVRM: Xid (PCI:0000:3b:00): 94, pid=7, name=python, Contained: CBU\n"
    )
    t = parse_run_logs(tmp_path)
    rows = sorted(
        (r["source"].split("/")[-1], r["rank"], r["host"], r["signature"], r["culprit_rank"], r["culprit_host"])
        for r in t.to_pylist()
    )
    assert rows == [
        ("dmesg.txt", None, "node02", "nvrm_xid", None, "node02"),
        ("rank-0.log", 0, "node01", "nccl_watchdog_timeout", None, None),
        ("rank-5.log", 5, "node02", "cuda_error", 5, "node02"),
    ]
    fs = analyze_log_events(t)
    assert {(f.kind, f.category, f.ranks, f.hosts) for f in fs} == {
        (FindingKind.FAULTY_HOST, Category.ECC, (), ("node02",)),
        (FindingKind.CRASH, Category.CUDA_ERROR, (5,), ("node02",)),
        (FindingKind.HUNG_COLLECTIVE, Category.COLLECTIVE_TIMEOUT, (), ()),
    }


# ---- signatures from primary sources, wave 2 (lines written from the printing code's format strings) ----
def test_megatron_nan_checks_name_their_own_rank_and_node() -> None:
    # param_and_grad_buffer.py assert (core 0.4-0.8)
    f = first_finding(
        "AssertionError: Rank 14: found NaN in local grad norm in backward pass before data-parallel "
        "communication collective. Device: 6, node: gpu-r07-n3"
    )
    assert (f.kind, f.category) == (FindingKind.NUMERICAL, Category.NAN_LOSS)
    assert f.ranks == (14,) and f.hosts == ("gpu-r07-n3",)
    # rerun_state_machine.py (core 0.9+)
    f = first_finding(
        "RuntimeError: Rank 5, node trn-a12, device 5, iteration 1200: Unexpected result nan "
        "(message='found NaN in local grad norm for bucket #0 in backward pass before data-parallel communication collective')"
    )
    assert f.kind is FindingKind.NUMERICAL and f.ranks == (5,) and f.hosts == ("trn-a12",)
    # the loss check without a rank prefix: numerical, nobody blamed
    f = first_finding("found NaN in local forward loss calculation")
    assert f.kind is FindingKind.NUMERICAL and f.ranks == () and f.hosts == ()


def test_megatron_rerun_state_machine_lines_name_one_culprit() -> None:
    # rerun_state_machine.py validate_result: logger.error(f"Unexpected result {result} on rank {rank} at
    # iteration #{it} invocation #{n} (message='{message}')"), then log_failure's f"Rank {rank}, node
    # {node}, device {device}, iteration #{it}: {message}!": one culprit with its node, not two findings.
    fs = analyze_log_events(
        parse_log_text(
            "ERROR:megatron.core.rerun_state_machine:Unexpected result nan on rank 6 at iteration #40 invocation #1 "
            "(message='found NaN in local grad norm for bucket #0 in backward pass before data-parallel communication "
            "collective')\n"
            "ERROR:megatron.core.rerun_state_machine:Rank 6, node trn-b03, device 6, iteration #40: First rerun: "
            "unexpected result is reproducible within the tolerance (nan = nan). Need to rerun on a different GPU to "
            "verify correctness.!"
        )
    )
    assert [(f.kind, f.ranks, f.hosts) for f in fs] == [(FindingKind.NUMERICAL, (6,), ("trn-b03",))]


def test_mpirun_names_the_rank_and_node_that_died_but_not_a_redacted_node() -> None:
    # Open MPI help-errmgr-base.txt: "%s noticed that process rank %lu with PID %lu on node %s exited on signal %d (%s)."
    f = first_finding("mpirun noticed that process rank 12 with PID 4242 on node gpu-c07 exited on signal 9 (Killed).")
    assert (f.kind, f.ranks, f.hosts) == (FindingKind.CRASH, (12,), ("gpu-c07",))
    f = first_finding("mpirun noticed that process rank 7 with PID 0 on node HOSTNAME exited on signal 9 (Killed).")
    assert (f.ranks, f.hosts) == ((7,), ())


def test_ray_oom_names_the_node_that_ran_out_of_host_memory() -> None:
    f = first_finding(
        "ray.exceptions.OutOfMemoryError: Task was killed due to the node running low on memory.\n"
        "Memory on the node (IP: 10.0.62.231, ID: e5d9) where the task (task ID: 4353, name=f, pid=11362, memory "
        "used=1.25GB) was running was 27.71GB / 28.80GB (0.962273), which exceeds the memory usage threshold of 0.95."
    )
    assert (f.kind, f.hosts) == (FindingKind.OOM, ("10.0.62.231",))


@pytest.mark.parametrize("missing", [0, 5])
def test_the_rank_absent_from_a_complete_store_barrier_roster_is_named(missing: int) -> None:
    # torch 1.7-1.13 distributed_c10d._store_based_barrier logs this from every rank that arrived
    line = (
        "INFO:root:Waiting in store based barrier to initialize process group for rank: {r}, key: "
        "store_based_barrier_key:1 (world_size=6, worker_count=5, timeout=0:30:00)"
    )
    text = "\n".join(line.format(r=r) for r in range(6) if r != missing)
    f = first_finding(text)
    assert (f.kind, f.ranks) == (FindingKind.RENDEZVOUS_ERROR, (missing,)), f.summary
    assert f.evidence["arrived_ranks"] == [r for r in range(6) if r != missing]
    # a roster with a gap of its own (a waiting line not pasted) names nobody
    partial = "\n".join(line.format(r=r) for r in range(6) if r not in (missing, 3 if missing != 3 else 2))
    assert first_finding(partial).ranks == ()


def test_an_nvidia_smi_row_with_uncorrectable_ecc_is_an_ecc_fault_and_rows_are_not_joined() -> None:
    # nvidia-smi pads every table row to one width; the wrap detector must not join rows as if cut
    table = (
        "| GPU  Name                 Persistence-M | Bus-Id        Disp.A | Volatile Uncorr. ECC |\n"
        "|=========================================+======================+======================|\n"
        "|   0  NVIDIA H100 80GB HBM3          On  | 00000000:1A:00.0 Off |                    2 |\n"
        "| N/A   33C    P0              71W / 700W |      4MiB / 81559MiB |      0%      Default |\n"
        "|   1  NVIDIA H100 80GB HBM3          On  | 00000000:40:00.0 Off |                    0 |\n"
        "| N/A   31C    P0              70W / 700W |      4MiB / 81559MiB |      0%      Default |\n"
    )
    fs = analyze_log_events(parse_log_text(table, host="gpu-n07"))
    assert [(f.kind, f.category, f.hosts) for f in fs] == [(FindingKind.FAULTY_HOST, Category.ECC, ("gpu-n07",))]
    assert fs[0].evidence["gpu_pcis"] == ["00000000:1a:00.0"]


def test_nccl_device_mismatch_blames_nobody() -> None:
    f = first_finding(
        "node7:1234:1290 [3] init.cc:1900 NCCL WARN Mismatched collective detected, please check your collective "
        "calls at and around rank 27. You can use NCCL_DEBUG=INFO and NCCL_DEBUG_SUBSYS=COLL to see the collective logs"
    )
    assert f.kind is FindingKind.COLLECTIVE_MISMATCH and f.ranks == ()


def test_cuda_error_suffix_alone_is_a_cuda_crash_but_the_error_line_wins() -> None:
    f = first_finding(
        "CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be "
        "incorrect.\nFor debugging consider passing CUDA_LAUNCH_BLOCKING=1"
    )
    assert (f.kind, f.category) == (FindingKind.CRASH, Category.CUDA_ERROR) and f.confidence == 0.5
    f = first_finding(
        "[rank2]: RuntimeError: CUDA error: an illegal memory access was encountered\n"
        "[rank2]: CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below "
        "might be incorrect."
    )
    assert f.kind is FindingKind.CRASH and f.ranks == (2,) and f.confidence > 0.5


def test_stacks_of_stuck_processes_py_spy_decimal_tid_and_gdb_in_libcuda() -> None:
    f = first_finding(
        'Process 4242: python train.py\nPython v3.11.4 (/usr/bin/python3.11)\n\nThread 4242 (idle): "MainThread"\n'
        "    all_reduce (torch/distributed/distributed_c10d.py:2288)\n    step (train.py:88)\n"
    )
    assert f.kind is FindingKind.HUNG_COLLECTIVE and "all_reduce" in f.summary
    f = first_finding(
        "#0  0x00007f1c2a1b2c3d in ?? () from /usr/lib/x86_64-linux-gnu/libcuda.so.1\n"
        "#1  0x00007f1c2a0a1b2c in cudaStreamSynchronize () from /usr/local/cuda/lib64/libcudart.so.12\n"
    )
    assert f.kind is FindingKind.HUNG_COLLECTIVE and f.ranks == ()
    # a gdb frame in an ordinary library is not a hang
    assert not analyze_log_events(parse_log_text("#0  0x00007f1c in poll () from /lib/x86_64-linux-gnu/libc.so.6\n"))


def test_top_zombie_and_rendezvous_traceback_and_redacted_xid() -> None:
    f = first_finding(
        "    PID USER      PR  NI    VIRT    RES    SHR S  %CPU  %MEM     TIME+ COMMAND\n"
        "  90210 alice     20   0       0      0      0 Z   0.0   0.0   3:02.11 python3\n"
    )
    assert f.kind is FindingKind.CRASH and "python3" in json.dumps(f.evidence)
    assert not analyze_log_events(
        parse_log_text("  90211 alice     20   0   12.3g   1.1g  20480 S  99.0   1.2   3:02.11 python3\n")
    )
    f = first_finding(
        '  File "/opt/venv/lib/python3.11/site-packages/torch/distributed/elastic/rendezvous/dynamic_rendezvous.py", '
        "line 1139, in next_rendezvous\n"
    )
    assert f.kind is FindingKind.RENDEZVOUS_ERROR and f.confidence == 0.5
    f = first_finding("kernel: NVRM: Xid (PCI:...): 79, pid=1234, GPU has fallen off the bus.", host="h9")
    assert f.kind is FindingKind.FAULTY_HOST and f.hosts == ("h9",)


def test_mpi_tag_output_and_stream_tags_are_peeled() -> None:
    f = first_finding("[1,6]<stderr>:RuntimeError: CUDA error: an illegal memory access was encountered")
    assert f.kind is FindingKind.CRASH and f.ranks == (6,)
    f = first_finding(
        "job-a.node-3.nolog [stderr] [rank3]:[E909 09:55:46.996672294 ProcessGroupNCCL.cpp:1709] "
        "[PG 0 (default_pg) Rank 3] Timeout at NCCL work: 2070, last enqueued"
    )
    assert f.kind is FindingKind.HUNG_COLLECTIVE and "2070" in f.summary


# ---- third batch's dev rows showed these formats; each line written here from its source's format ----


def test_nccl_allocation_failure_under_an_unhandled_cuda_error_is_one_out_of_memory() -> None:
    # NCCL src/include/alloc.h WARN("Failed to CUDA calloc %ld bytes"), surfacing as ncclUnhandledCudaError
    text = (
        "[rank3]:torch.distributed.DistBackendError: NCCL error in: /pytorch/torch/csrc/distributed/c10d/NCCLUtils.hpp:317, "
        "unhandled cuda error (run with NCCL_DEBUG=INFO for details), NCCL version 2.26.2\n"
        "[rank3]:ncclUnhandledCudaError: Call to CUDA function failed.\n"
        "[rank3]:Last error:\n"
        "[rank3]:Failed to CUDA calloc async 33554432 bytes\n"
    )
    fs = analyze_log_events(parse_log_text(text, source="t.log"))
    assert [(f.kind, f.ranks) for f in fs] == [(FindingKind.OOM, (3,))]
    (e,) = [r for r in events("gpu07:1234:1300 [2] NCCL WARN Failed to CUDA host alloc 4096 bytes") if r["kind"]]
    assert (e["signature"], e["kind"], e["f"]["alloc"], e["culprit_host"]) == (
        "nccl_cuda_alloc_failed",
        "oom",
        "host alloc",
        "gpu07",
    )


def test_a_cuda_call_out_of_memory_as_the_last_error_of_an_unhandled_cuda_error_is_one_out_of_memory() -> None:
    # NCCL src/include/checks.h CUDACHECK: WARN("Cuda failure '%s'", cudaGetErrorString(err)); torch quotes
    # ncclGetLastError() after "Last error:" (older NCCL and torch: no rank prefix)
    text = (
        "RuntimeError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1269, unhandled cuda error"
        " (run with NCCL_DEBUG=INFO for details), NCCL version 2.14.3\n"
        "ncclUnhandledCudaError: Call to CUDA function failed.\n"
        "Last error:\n"
        "Cuda failure 'out of memory'\n"
    )
    assert [f.kind for f in analyze_log_events(parse_log_text(text, source="t.log"))] == [FindingKind.OOM]
    # another CUDA failure there stays what it was (not an out-of-memory)
    other = text.replace("out of memory", "an illegal memory access was encountered")
    assert FindingKind.OOM not in [f.kind for f in analyze_log_events(parse_log_text(other, source="t.log"))]


def test_the_firmwares_hardware_error_takes_its_event_severity_and_an_interface_is_no_host() -> None:
    # drivers/firmware/efi/cper.c cper_estatus_print: "event severity: %s" after ghes.c's header line
    head = "[ 84.2] {1}[Hardware Error]: Hardware error from APEI Generic Hardware Error Source: 0\n"
    for sev, want in (("fatal", "critical"), ("recoverable", "critical"), ("corrected", "warning")):  # the header's
        fs = analyze_log_events(parse_log_text(f"{head}[ 84.2] {{1}}[Hardware Error]: event severity: {sev}\n", "t"))
        assert fs[0].kind is FindingKind.FAULTY_HOST and fs[0].severity.value == want, sev
    # IPoIB's "ib0: " is the interface (ipoib_warn), not pdsh's host; a host named like one with a leading zero is
    for ifname in ("ib0", "ib0.8001", "ibp202s0"):
        (f,) = analyze_log_events(parse_log_text(f"{ifname}: transmit timeout: latency 10000 msecs\n", source="t.log"))
        assert (f.kind, f.hosts) == (FindingKind.NETWORK_ERROR, ()), ifname
    cuda = "RuntimeError: CUDA error: an illegal memory access was encountered\n"
    assert analyze_log_events(parse_log_text("ib01: " + cuda, source="t.log"))[0].hosts == ("ib01",)


def test_a_ray_task_that_raised_out_of_memory_names_the_workers_ip() -> None:
    # ray python/ray/exceptions.py: RayTaskError re-raised as "RayTaskError(<cause class>)", its str ending in the
    # worker's "(pid=N, ip=X)": not a Ray prefix of a next message (nothing follows it)
    (f,) = analyze_log_events(
        parse_log_text(
            "ray.exceptions.RayTaskError(OutOfMemoryError): ray::TrainWorker.train() (pid=1234, ip=10.0.0.2)\n",
            source="t.log",
        )
    )
    assert (f.kind, f.hosts) == (FindingKind.OOM, ("10.0.0.2",))
    # a Ray prefix glued mid-line still splits the line (its host is the next message's printer's)
    (g,) = analyze_log_events(
        parse_log_text(
            "step 3 done (TrainWorker pid=77, ip=10.0.0.9) torch.OutOfMemoryError: CUDA out of memory.\n",
            source="t.log",
        )
    )
    assert (g.kind, g.hosts) == (FindingKind.OOM, ("10.0.0.9",))


def test_slurm_cgroup_oom_names_the_node_from_slurmstepd_and_srun() -> None:
    text = (
        "slurmstepd-dgx-b17: error: Detected 3 oom-kill event(s) in StepId=77120.0. Some of your processes may have been "
        "killed by the cgroup out-of-memory handler.\n"
        "srun: error: dgx-b17: task 5: Out Of Memory\n"
    )
    f = first_finding(text)
    assert (f.kind, f.hosts, f.ranks) == (FindingKind.OOM, ("dgx-b17",), ())
    # a cancelled step is not an OOM (it is only quoted as an unclassified error, never silence)
    got = events("slurmstepd: error: *** JOB 77120 ON dgx-b17 CANCELLED AT 2026-11-26T10:00:00 ***")
    assert got and all(r["kind"] != "oom" for r in got)


def test_device_side_asserts_are_crashes_of_that_process_with_or_without_backticks() -> None:
    for line in (
        "/pytorch/aten/src/ATen/native/cuda/Loss.cu:250: nll_loss_forward_reduce_cuda_kernel_2d: block: [0,0,0], thread: "
        "[5,0,0] Assertion `t >= 0 && t < n_classes` failed.",
        "[rank1]: ../aten/src/ATen/native/cuda/IndexKernel.cu:92] Assertion -sizes[i] <= index && index < sizes[i] failed.",
    ):
        (e,) = events(line)
        assert (e["signature"], e["kind"], e["category"]) == ("cuda_device_assert", "crash", "cuda_error")
    assert (
        events("[rank1]: ../aten/src/ATen/native/cuda/IndexKernel.cu:92] Assertion -sizes[i] <= index failed.")[0][
            "culprit_rank"
        ]
        == 1
    )
    # glibc's host-side assert (apostrophe, no kernel context) is not a GPU fault
    assert not [
        r
        for r in events("python: malloc.c:2379: sysmalloc: Assertion `(old_top == initial_top (av)' failed.")
        if r["signature"] == "cuda_device_assert"
    ]


def test_edac_memory_errors_on_the_host_that_logs_them() -> None:
    ce, ue = events(
        "Nov 26 10:00:01 gpu-a17 kernel: EDAC MC0: 12 CE memory read error on CPU_SrcID#0_Ha#0_Chan#1_DIMM#0 (channel:1 slot:0 page:0x1 offset:0x0 grain:32 syndrome:0x0)\n"
        "Nov 26 10:00:09 gpu-a17 kernel: EDAC MC0: 1 UE memory read error on CPU_SrcID#0_Ha#0_Chan#1_DIMM#0 (channel:1 slot:0 page:0x1 offset:0x0 grain:32)\n"
    )
    assert (ce["kind"], ce["category"], ce["severity"], ce["culprit_host"]) == (
        "faulty_host",
        "mce",
        "warning",
        "gpu-a17",
    )
    assert (ue["severity"], ue["f"]["edac"]) == ("critical", "UE")


def test_the_torchrun_agent_stopped_by_a_signal_blames_no_worker() -> None:
    for line, sig in (
        (
            "[2026-11-26 10:00:00,000] torch.distributed.elastic.agent.server.api: [WARNING] Received 1 death signal, shutting down workers",
            "SIGHUP",
        ),
        (
            "W1126 10:00:00.000000 42 torch/distributed/elastic/agent/server/api.py:704] Received Signals.SIGTERM death signal, shutting down workers",
            "SIGTERM",
        ),
    ):
        f = first_finding(
            line
            + "\nW1126 10:00:00.100000 42 torch/distributed/elastic/multiprocessing/api.py:900] Sending process 4242 closing signal "
            + sig
        )
        assert (f.kind, f.category, f.ranks, f.hosts) == (FindingKind.CRASH, Category.SIGNAL, (), ())
        assert sig in json.dumps(f.evidence)


def test_an_unresolvable_host_name_is_a_rendezvous_error_that_blames_nobody() -> None:
    for line in (
        "[W1126 10:00:00.000000 1 socket.cpp:755] [c10d] The IPv4 network addresses of (trainer-0.headless, 29500) cannot be "
        "retrieved (gai error: -2 - Name or service not known).",
        "RuntimeError: host not found: Temporary failure in name resolution",
    ):
        f = first_finding(line)
        assert (f.kind, f.hosts, f.ranks) == (FindingKind.RENDEZVOUS_ERROR, (), ())


def test_log_shipper_time_then_mpi_tag_then_nccl_prefix_and_an_old_ib_async_event() -> None:
    line = (
        "2026-11-26T10:00:00.123Z: [1,6]<stdout>:node-17:815:864 [0] transport/net_ib.cu:80 NCCL WARN NET/IB : "
        "Got async event : local catastrophic error"
    )
    (e,) = events(line)
    assert (e["signature"], e["rank"], e["host"], e["culprit_host"]) == ("nccl_ib_async_event", 6, "node-17", "node-17")
    assert str(e["ts"]) == "2026-11-26 10:00:00.123000+00:00"


# ---- the fourth (dev-only) batch showed these; lines written from each source's format ----------


def test_fairseq_loss_scale_overflows_are_numerical_and_the_minimum_is_critical() -> None:
    f = first_finding(
        "2026-11-26 10:00:00 | INFO | fairseq.trainer | NOTE: overflow detected, setting loss scale to: 0.0009765625\n"
    )
    assert (f.kind, f.category, f.severity) == (FindingKind.NUMERICAL, Category.OVERFLOW, Severity.INFO)
    fs = analyze_log_events(
        parse_log_text("FloatingPointError: Minimum loss scale reached (0.0001). Your loss is probably exploding.")
    )
    assert fs[0].kind is FindingKind.NUMERICAL
    assert any(f.category is Category.OVERFLOW and f.severity is Severity.CRITICAL for f in fs)


def test_dataloader_workers_killed_for_memory_are_oom_and_by_other_signals_crashes() -> None:
    assert (
        first_finding("RuntimeError: DataLoader worker (pid 4242) is killed by signal: Killed. ").kind
        is FindingKind.OOM
    )
    assert (
        first_finding("RuntimeError: DataLoader worker (pid 4242) is killed by signal: Bus error. ").kind
        is FindingKind.OOM
    )
    f = first_finding("RuntimeError: DataLoader worker (pid 4242) is killed by signal: Segmentation fault. ")
    assert (f.kind, f.category) == (FindingKind.CRASH, Category.SIGNAL)


def test_xla_oom_extension_cuda_check_and_amd_ras() -> None:
    assert (
        first_finding("  (0) RESOURCE_EXHAUSTED: Out of memory while trying to allocate 1073741824 bytes.").kind
        is FindingKind.OOM
    )
    f = first_finding("Error an illegal memory access was encountered at line 512 in file /src/csrc/kernels.cu")
    assert (f.kind, f.category) == (FindingKind.CRASH, Category.CUDA_ERROR)
    (e,) = events(
        "[ 1.0] amdgpu 0000:1c:00.0: {3}uncorrectable hardware error(ERREVENT_ATHUB_INTERRUPT) detected!", host="mi3"
    )
    assert (e["kind"], e["gpu_pci"], e["culprit_host"]) == ("faulty_host", "0000:1c:00", "mi3")


def test_verbs_calls_ofi_plugin_and_refused_ssh() -> None:
    (e,) = events(
        "gpu03:2712:2824 [0] misc/ibvwrap.cc:123 NCCL WARN Call to ibv_reg_mr failed with error Cannot allocate memory"
    )
    assert (e["signature"], e["category"], e["culprit_host"]) == ("nccl_ibv_call_failed", "ib", "gpu03")
    (e,) = events(
        "gpu03:2712:2824 [0] misc/ibvwrap.cc:150 NCCL WARN Call to ibv_modify_qp failed with 110 Connection timed out"
    )
    assert e["culprit_host"] is None
    f = first_finding(
        "gpu03:1:2 [7] nccl_net_ofi_rdma_init:7700 NCCL WARN NET/OFI Unable to find a protocol that worked."
    )
    assert (f.kind, f.hosts) == (FindingKind.NETWORK_ERROR, ())
    f = first_finding(
        "10.0.0.7: worker@10.0.0.7: Permission denied (publickey,password).\npdsh@head: 10.0.0.7: ssh exited with exit code 255"
    )
    assert (f.kind, f.hosts) == (FindingKind.RENDEZVOUS_ERROR, ())


def test_a_failure_while_the_process_group_forms_is_a_rendezvous_error() -> None:
    text = (
        "Traceback (most recent call last):\n"
        '  File "/opt/conda/lib/python3.10/site-packages/torch/distributed/distributed_c10d.py", line 1520, in init_process_group\n'
        "    store, rank, world_size = next(rendezvous_iterator)\n"
        "RuntimeError: Connection reset by peer\n"
    )
    assert first_finding(text).kind is FindingKind.RENDEZVOUS_ERROR


def test_old_py_spy_thread_lines_without_a_name_and_nvidia_smi_err() -> None:
    (e,) = events("Thread 0x7F4AA36D9700 (active)")
    assert e["signature"] == "stack_dump_thread"
    (e,) = events("| N/A   29C    P0   ERR! / 250W |    593MiB / 16160MiB |      0%      Default |")
    assert (e["signature"], e["kind"], e["culprit_host"]) == ("nvidia_smi_err_field", "faulty_host", None)


def test_an_agents_failed_rendezvous_shutdown_at_the_end_of_a_run_is_not_an_error() -> None:
    # DynamicRendezvousHandler.shutdown() once the store's host has gone (every multi-agent run's end)
    bye = (
        "W1126 12:06:25.458000 25562 torch/distributed/elastic/rendezvous/dynamic_rendezvous.py:1298] The node "
        "'localhost_25562_0' has failed to shutdown the rendezvous 'r-1' due to an error of type "
        "RendezvousConnectionError."
    )
    assert events(bye) == []
    real = "torch.distributed.elastic.rendezvous.api.RendezvousConnectionError: The connection to the C10d store has failed."
    assert [e["signature"] for e in events(real)] == ["rendezvous_connection_error"]


# Lines in the formats their printing code writes (cited at each signature in collectors/logs.py).
@pytest.mark.parametrize(
    "text,signature,kind",
    [
        ("node5:240:240 [6] misc/socket.cc:533 NCCL WARN socketPollConnect: Connect to 10.0.0.4<56849> returned "
         "111(Connection refused) errno 115(Operation now in progress)", "nccl_socket_poll_connect_error", "network_error"),
        ("libfabric:7:1708520807::efa:cq:efa_rdm_rxe_handle_error():321<warn> err: 12, message: Connection timed out "
         "My EFA addr: fi_addr_efa://[fe80::1]:0:1 My host id: i-1", "libfabric_completion_error", "network_error"),
        ("[rank3]: torch.distributed.DistBackendError: [3] is setting up NCCL communicator and retrieving ncclUniqueId "
         "from [0] via c10d key-value store by key '0', but store->get('0') got error: Connection reset by peer. This may "
         "indicate a possible application crash on rank 0 or a network set up issue.",
         "nccl_unique_id_store_error", "rendezvous_error"),
        ("  what():  [horovod/common/gloo/http_store.cc:57] Wait timeout after 300 seconds for key(s): 3. You may want to "
         "increase the timeout via HOROVOD_GLOO_TIMEOUT_SECONDS", "horovod_gloo_store_timeout", "rendezvous_error"),
        ("    all_gather_into_tensor (torch/distributed/distributed_c10d.py:3012)", "stack_frame_in_collective",
         "hung_collective"),
        ('  File "/opt/venv/lib/python3.11/site-packages/torch/distributed/distributed_c10d.py", line 4551 in barrier',
         "stack_frame_in_collective", "hung_collective"),
        ("[ 1250.95] [Hardware Error]: MC4 Error (node 6): DRAM ECC error detected on the NB.", "mce_amd_decoded",
         "faulty_host"),
        ("[594675.02] python invoked oom-killer: gfp_mask=0x14200ca(GFP_HIGHUSER_MOVABLE), order=0, oom_score_adj=0",
         "oom_killer_invoked", "oom"),
        ("THCudaCheck FAIL file=/pytorch/aten/src/THC/THCCachingHostAllocator.cpp line=265 error=2 : out of memory",
         "thc_cuda_check_fail", "oom"),
        ("THCudaCheck FAIL file=/pytorch/aten/src/THC/THCGeneral.cpp line=405 error=77 : an illegal memory access was "
         "encountered", "thc_cuda_check_fail", "crash"),
        ("RuntimeError: The server socket has failed to listen on any local network address. The server socket has "
         "failed to bind to [::]:29500 (errno: 98 - Address already in use).", "store_port_in_use", "rendezvous_error"),
        ("[rank3]:[W101 10:15:17.529361055 TCPStore.cpp:125] [c10d] sendBytes failed on SocketImpl(fd=12, "
         "addr=[node3]:41000, remote=[node1]:29500): Broken pipe", "store_socket_failed", "rendezvous_error"),
        ("(raylet) node_manager.cc:3277: 1 Workers (tasks / actors) killed due to memory pressure (OOM), 0 Workers "
         "crashed due to other reasons at node (ID: abc, IP: 10.0.0.7) over the last time period.",
         "ray_memory_monitor_kill", "oom"),
        ("  Warning  Evicted  2m  kubelet  The node was low on resource: memory. Threshold quantity: 100Mi, available: "
         "40Mi.", "kubelet_eviction", "oom"),
        ("  Warning  Evicted  2m  kubelet  The node was low on resource: ephemeral-storage. Threshold quantity: 10Gi.",
         "kubelet_eviction", "crash"),
        ("        Pending                           : Yes", "nvidia_smi_remap_pending", "faulty_host"),
        ("accelerate.utils.operations.DistributedOperationException: Cannot apply desired operation due to shape "
         "mismatches. All shapes across devices must be valid.", "accelerate_shape_mismatch", "collective_mismatch"),
        ("[rank1]:[E1101 10:00:00.000 ProcessGroupNCCL.cpp:616] [Rank 1] Watchdog caught collective operation timeout",
         "nccl_watchdog_timeout", "hung_collective"),
        ("torch.distributed.DistNetworkError: Failed to recv, got 0 bytes. Connection was likely closed. Did the remote "
         "server shutdown or crash?", "c10d_store_connection_closed", "rendezvous_error"),
        ("RuntimeError: Stop_waiting response is expected", "c10d_store_connection_closed", "rendezvous_error"),
        ("torch.distributed.DistNetworkError: Connection reset by peer", "c10d_store_connection_closed",
         "rendezvous_error"),
        ("RuntimeError: connect() timed out. Original timeout was 1800000 ms.", "c10d_connect_timeout_legacy",
         "rendezvous_error"),
        ("horovod.runner.common.util.timeout.TimeoutException: Timed out waiting for tasks to start. Please check "
         "connectivity between servers. You may need to increase the --start-timeout parameter if you have too many "
         "servers. Timeout after 30 seconds.", "horovod_start_timeout", "rendezvous_error"),
        ('  File "/usr/lib/python3/site-packages/horovod/run/common/util/timeout.py", line 32, in check_time_out_for',
         "horovod_start_timeout", "rendezvous_error"),
        ("torch.distributed.elastic.rendezvous.api.RendezvousStateError: The node 'n0_1' has failed to read the state "
         "of the rendezvous 'job'.", "rendezvous_state_error", "rendezvous_error"),
        ("link mlx5_0/1 subnet_prefix fe80:0000:0000:0000 lid 7 sm_lid 1 lmc 0 state DOWN physical_state POLLING",
         "rdma_port_not_active", "network_error"),
        ("\t\tState: Down", "rdma_port_not_active", "network_error"),
        ("[ 12.3] nvidia 0000:41:00.0: AMD-Vi: Event logged [IO_PAGE_FAULT domain=0x0010 address=0xfd000000 flags=0x0020]",
         "iommu_fault", "faulty_host"),
        ("DMAR: [DMA Read NO_PASID] Request device [41:00.0] fault addr 0xf4000000 [fault reason 0x06] PTE Read access "
         "is not set", "iommu_fault", "faulty_host"),
        ("[Sat Apr  3 05:23:42 2021] watchdog: BUG: soft lockup - CPU#7 stuck for 23s! [python:25222]", "kernel_lockup",
         "faulty_host"),
        ("[ 1234.5] INFO: task python3:4242 blocked for more than 120 seconds.", "kernel_lockup", "faulty_host"),
        ("root  86177 11.7  0.4 1360975668 2593156 pts/40 Dl+ 16:12   0:25 python train.py --cfg a.yaml",
         "process_uninterruptible", "hung_collective"),
        (" iter 4500   time/iter: 0.49  lr: 0.0001 loss_mn: nan loss_c: nan   losses: nan", "loss_nan", "numerical"),
        ("[ 84.2] {1}[Hardware Error]: Hardware error from APEI Generic Hardware Error Source: 0", "apei_hardware_error",
         "faulty_host"),
        ("[ 84.2] rcu: INFO: rcu_sched self-detected stall on CPU", "kernel_lockup", "faulty_host"),
        ("[ 84.2] rcu: INFO: rcu_preempt detected stalls on CPUs/tasks:", "kernel_lockup", "faulty_host"),
        ("[ 84.2] BUG: unable to handle page fault for address: ffffb1c0c0000000", "kernel_oops_or_panic",
         "faulty_host"),
        ("[ 84.2] BUG: unable to handle kernel NULL pointer dereference at 0000000000000008", "kernel_oops_or_panic",
         "faulty_host"),
        ("[ 84.2] Kernel panic - not syncing: Fatal exception in interrupt", "kernel_oops_or_panic", "faulty_host"),
        ("[ 84.2] Kernel panic - not syncing: Out of memory: compulsory panic_on_oom is enabled", "kernel_oops_or_panic",
         "oom"),
        ("[ 84.2] EXT4-fs error (device nvme0n1p1): ext4_find_entry:1455: inode #2: comm python: reading directory",
         "ext4_fs_error", "faulty_host"),
        ("[ 84.2] ib0: transmit timeout: latency 10000 msecs", "ipoib_transmit_timeout", "network_error"),
        ("RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:568] Application timeout caused pair closure",
         "gloo_pair_closed_by_timeout", "hung_collective"),
        # a tqdm bar_format without {rate_fmt}: the postfix follows the times (tqdm/std.py format_meter's r_bar)
        ("epoch 001:  10%|#         | 100/1000 [01:00<09:00, loss=nan, nll_loss=nan, ppl=nan]", "loss_nan", "numerical"),
        # written from the format strings cited at each signature (collectors/logs.py)
        ("gpu3:1:2 [0] transport/net_ib.cc:667 NCCL WARN NET/IB : collective mismatch error local size 4096 remote 8192 "
         "addr 0 rkey 1a seq 3/3", "nccl_ib_size_mismatch", "collective_mismatch"),
        ("gpu3:1:2 [0] NCCL WARN NET/IB : req 0/1 tag 7 peer 10.0.0.6<4242> collective mismatch error, local size 8 remote "
         "size 4", "nccl_ib_size_mismatch", "collective_mismatch"),
        ("ray.exceptions.OutOfMemoryError: 2 worker(s) were killed due to the node running low on memory.",
         "ray_node_low_memory", "oom"),
        ("[ 485.3] watchdog: BUG: soft lockup - CPU#11 stuck for 27s! [k", "kernel_lockup", "faulty_host"),
        ("#4  0x00007f77 in c10d::TCPStore::doGet(std::string const&) () from /x/torch/lib/libtorch_cpu.so",
         "gdb_frame_in_store", "rendezvous_error"),
        ("RuntimeError: NCCL communicator was aborted on rank 3.", "nccl_comm_aborted", "hung_collective"),
        ("Primary job  terminated normally, but 1 process returned", "mpirun_nonzero_exit", "crash"),
        ("gpu-ser015:2123:2230 [3] include/socket.h:194 WARN Call to recv failed : Connection reset by peer",
         "nccl_socket_io_failed_legacy", "network_error"),
        ("Feb 17 08:02:35 dgx-a kernel: NVRM: nvAssertOkFailedNoLog: Assertion failed: GPU lost from the bus "
         "[NV_ERR_GPU_IS_LOST] (0x0000000F) returned from rmStatus @ kernel_ce_gv100.c:106", "nvrm_fallen_off_bus",
         "faulty_host"),
        ("(raylet) A worker died or was killed while executing a task by an unexpected system error. To troubleshoot "
         "the problem, check the logs for the dead worker. RayTask ID: ff Worker ID: fe Node ID: 20 Worker IP address: "
         "10.0.7.57 Worker port: 10046 Worker PID: 89513 Worker exit type: SYSTEM_ERROR", "ray_worker_died", "crash"),
    ],
)  # fmt: skip
def test_signatures_from_the_printing_code(text, signature, kind) -> None:
    ev = [e for e in events(text) if e["signature"] == signature]
    assert ev and ev[0]["kind"] == kind, events(text)


def test_a_store_that_went_away_follows_what_took_it_down_and_a_shutdown_warning_is_no_rendezvous_error() -> None:
    """The store's host died first (rank 0's OOM); the other rank's lost store connection is its consequence.
    The agent's goodbye, "... due to an error of type RendezvousError.", is no rendezvous failure of its own."""
    text = (
        "[rank0]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.\n"
        "[rank1]: torch.distributed.DistNetworkError: Failed to recv, got 0 bytes. Connection was likely closed. "
        "Did the remote server shutdown or crash?\n"
    )
    assert first_finding(text).kind is FindingKind.OOM
    bye = (
        "WARNING:torch.distributed.elastic.rendezvous.dynamic_rendezvous:The node 'n0_1' has failed to shutdown the "
        "rendezvous 'job' due to an error of type RendezvousError."
    )
    assert not [e for e in events(bye) if e["signature"] == "rendezvous_state_error"]


@pytest.mark.parametrize(
    "event",
    [
        "mlx5_1:1 Got async event : GID table change",  # NCCL <= 2.18 printed every async event so
        "Got async event : LID change",
        "mlx5_1:1 Got non-fatal async event: port active(9)",  # 2.2x's own words for the harmless ones
        "mlx5_1:1 GID table changed",
    ],
)
def test_an_hcas_harmless_async_event_is_information_that_blames_nobody(event: str) -> None:
    """NCCL's async thread (src/transport/net_ib/common.cc ncclIbAsyncThreadMain) warns of every HCA event; a port
    coming up or an address or subnet-manager change (rdma-core ibv_event_type_str's names) is no failure, of the
    host that logs it or of anyone: information only. A port error still is, and blames the host that logs it."""
    (i,) = analyze_log_events(parse_log_text(f"node1:12:34 [0] NCCL WARN NET/IB : {event}\n", "x.log"))
    assert (i.kind, i.severity, i.hosts, i.ranks) == (FindingKind.NETWORK_ERROR, Severity.INFO, (), ())
    (f,) = analyze_log_events(
        parse_log_text("node1:12:34 [0] NCCL WARN NET/IB : mlx5_1:1 Got async event : port error\n", "x.log")
    )
    assert (f.kind, f.hosts) == (FindingKind.NETWORK_ERROR, ("node1",))


def test_an_exceptions_traceback_is_not_a_live_stack() -> None:
    # a traceback has ", in" (an exception unwound); faulthandler's live dump has " in" without the comma
    tb = '  File "/x/torch/distributed/distributed_c10d.py", line 4551, in barrier'
    assert not [e for e in events(tb) if e["signature"] == "stack_frame_in_collective"]
    # a user function that happens to be called broadcast, outside any communication module
    assert not [e for e in events("    broadcast (myapp/model.py:12)") if e["signature"] == "stack_frame_in_collective"]


def test_syslogd_wall_message_names_the_host_of_the_line_after_it() -> None:
    text = (
        "Message from syslogd@gpu-a17 at Nov 10 08:58:06 ...\n"
        " kernel:[Hardware Error]: MC4 Error (node 3): DRAM ECC error detected on the NB.\n"
        " kernel:[Hardware Error]: MC4 Error (node 3): DRAM ECC error detected on the NB.\n"
    )
    ev = [e for e in events(text) if e["signature"] == "mce_amd_decoded"]
    assert [e["host"] for e in ev] == ["gpu-a17", None]  # only the message it announced


def test_a_torchelastic_banner_for_an_exception_yields_to_the_exceptions_own_finding() -> None:
    # the "Failures:" list (other ranks' failures); a "Root Cause" entry that settles the culprit
    # keeps its place first (the rank and host are what it settles)
    text = """train.py FAILED
------------------------------------------------------------
Failures:
[1]:
  time      : 2025-03-11_18:33:20
  host      : node07
  rank      : 1 (local_rank: 1)
  exitcode  : 1 (pid: 340055)
  error_file: /tmp/error.json
  traceback : Traceback (most recent call last):
  RuntimeError: Detected mismatch between collectives on ranks. Rank 1 is running collective: CollectiveFingerPrint(SequenceNumber=1OpType=BARRIER), but Rank 2 is running collective: CollectiveFingerPrint(SequenceNumber=0OpType=BARRIER).
"""
    assert first_finding(text).kind.value == "collective_mismatch"


def test_a_message_less_exception_is_an_error_looking_line() -> None:
    fs = analyze_log_events(
        parse_log_text('  File "x.py", line 3, in f\n    raise EOFError\nEOFError\n', source="t.log")
    )
    assert fs and fs[0].category is not None and fs[0].category.value == "unclassified"
    # with torch's rank prefix it is that rank's exception (collectors/logs.py _ranked_exceptions)
    fs = analyze_log_events(parse_log_text("[rank0]: EOFError\n", source="t.log"))
    assert fs and fs[0].category is not None and fs[0].category.value == "exception" and fs[0].ranks == (0,)


@pytest.mark.parametrize(
    "text",
    [
        # c10::Error's backtrace header (c10/util/Exception.cpp), the message line above it lost in the paste
        "Exception raised from deviceCount at /pytorch/aten/src/ATen/hip/impl/HIPGuardImplMasqueradingAsCUDA.h:102"
        " (most recent call first):\nframe #0: c10::Error::Error(c10::SourceLocation, std::string) + 0x68 (0x7f69ad843fc8"
        " in /opt/conda/lib/python3.10/site-packages/torch/lib/libc10.so)\n",
        # cuda-gdb's API error checking
        "[New Thread 0x7fffe6d73700 (LWP 12424)]\nwarning: Cuda API error detected: cudaDeviceEnablePeerAccess returned (0x2c0)\n",
        # an absl::Status as XLA / JAX's coordination service print it (absl/status/status.cc Status::ToString)
        "DEADLINE_EXCEEDED: Deadline Exceeded\nRPC: /tensorflow.CoordinationService/Heartbeat\n",
        "INTERNAL: Failed to launch CUDA kernel\n",
    ],
)
def test_a_printers_own_failure_header_is_an_error_looking_line(text: str) -> None:
    fs = analyze_log_events(parse_log_text(text, source="t.log"))
    assert fs and fs[0].category is not None and fs[0].category.value == "unclassified"
    assert fs[0].ranks == () and fs[0].hosts == ()


def test_a_task_that_could_not_join_the_coordination_service_is_a_rendezvous_error() -> None:
    for text in (
        "DEADLINE_EXCEEDED: Deadline Exceeded\nRPC: /tensorflow.CoordinationService/RegisterTask\n",
        "F0726 22:13:21 client.h:80] Terminating process because the JAX distributed service detected fatal errors."
        " ... ALREADY_EXISTS: Aborted connect attempt as there is a request from a newer incarnation."
        " RPC: CoordinationService/RegisterTask\n",
    ):
        (f,) = analyze_log_events(parse_log_text(text, source="t.log"))
        assert (f.kind, f.ranks, f.hosts) == (FindingKind.RENDEZVOUS_ERROR, (), ())


def test_status_words_in_prose_are_not_error_looking() -> None:
    assert analyze_log_events(parse_log_text("step 3: the INTERNAL: UNKNOWN: counters are fine\nOK: done\n")) == []
    # a healthy JAX start-up's warning (glog W level) carries a status code too
    warn = (
        "W0312 10:00:01.000000  4711 xla_bridge.py:863] Unable to initialize backend 'rocm': NOT_FOUND: Could not find"
    )
    assert analyze_log_events(parse_log_text(warn + ' registered platform with name: "rocm"\n')) == []


def test_the_remap_field_says_nothing_when_it_is_no_and_a_healthy_port_is_not_a_finding() -> None:
    assert not events("        Pending                           : No")
    assert not events("link mlx5_7/1 subnet_prefix fe80:0000:0000:0000 lid 3403 state ACTIVE physical_state LINK_UP")


def test_a_dead_ray_actor_is_blamed_on_the_node_its_context_names() -> None:
    """ray python/ray/exceptions.py ActorDiedError: the message, then tab-indented context lines; the
    "ip:" line names the node the dead actor ran on (the context ends at the first other line)."""
    ctx = ["\tclass_name: TrainWorker", "\tactor_id: 81d5", "\tpid: 2318", "\tname: TrainWorker_0:2", "\tip: 10.2.4.26"]
    text = "\n".join(["ray.exceptions.ActorDiedError: The actor died unexpectedly before finishing this task.", *ctx])
    f = first_finding(text)
    assert (f.kind, f.hosts) == (FindingKind.CRASH, ("10.2.4.26",))
    # an "ip:" line after the context has ended names nobody
    later = "\n".join(["ray.exceptions.ActorDiedError: The actor died unexpectedly before finishing this task.",
                       "The actor is dead because its worker process has died.", "ip: 10.9.9.9"])  # fmt: skip
    assert first_finding(later).hosts == ()


def test_a_gdb_frame_inside_nccl_says_where_the_thread_sat() -> None:
    """gdb's backtrace line (gdb/stack.c print_frame) alone: the summary names the function and the
    library, not an empty per-rank collective trace."""
    f = first_finding("#3  0x00007f1c2a3b4c5d in ncclCommAbort () from /usr/lib/x86_64-linux-gnu/libnccl.so.2")
    assert f.kind is FindingKind.HUNG_COLLECTIVE
    assert (
        f.summary == "stack of a live process: a thread inside ncclCommAbort (/usr/lib/x86_64-linux-gnu/libnccl.so.2)"
    )


def test_torchelastics_closing_signal_is_not_the_exit_of_a_worker_that_exited_with_1() -> None:
    # torch/distributed/elastic/multiprocessing/api.py: the agent sends SIGTERM to the others after one fails;
    # "exit code 1 (SIGTERM)" read as if the signal had ended the process that raised
    text = (
        "W1126 22:48:34.571000 1600 torch/distributed/elastic/multiprocessing/api.py:1012] Sending process 1619"
        " closing signal SIGTERM\n"
        "E1126 22:48:34.636000 1600 torch/distributed/elastic/multiprocessing/api.py:986] failed (exitcode: 1)"
        " local_rank: 0 (pid: 1618) of binary: /usr/bin/python3\n"
    )
    f = first_finding(text)
    assert f.kind is FindingKind.CRASH and "exit code 1" in f.summary and "SIGTERM" not in f.summary, f.summary
    killed = text.replace("exitcode: 1", "exitcode: -9")
    assert "exit code -9 (SIGKILL)" in first_finding(killed).summary


def test_a_failure_the_line_says_is_being_retried_is_a_warning_and_its_last_word_stays_critical() -> None:
    retried = "urllib3.connectionpool: Retrying (attempt 1/5) after connection broken by ConnectionResetError(104)\n"
    f = first_finding(retried + "step 5 loss 2.0\n")
    assert (f.kind, f.severity) == (FindingKind.NETWORK_ERROR, Severity.WARNING)
    given_up = retried + "ConnectionResetError: [Errno 104] Connection reset by peer\n"
    assert first_finding(given_up).severity is Severity.CRITICAL


# ---- HCCL (Ascend) error codes, from its message table (hicann/hcomm hcomm_g_msg) ----------------------------
HCCL_CODES = [
    # EI0006 as the error manager prints it, and as newer CANN titles it (e30b-003's form)
    (
        "EI0006: [PID: 176930] 2025-07-01-00:40:04.135.732 Getting socket times out. Reason: Remote Rank did not "
        "send the data in time. Please check the reason for the rank being stuck",
        FindingKind.HUNG_COLLECTIVE,
        Category.COLLECTIVE_TIMEOUT,
    ),
    (
        "[PID: 108272] 2026-05-21-21:41:11.284.296 Communication_Error_Get_Socket(EI0006): Getting socket times "
        "out. Reason: No abnormal periods were discovered.",
        FindingKind.HUNG_COLLECTIVE,
        Category.COLLECTIVE_TIMEOUT,
    ),
    (
        "EI0005: [PID: 42] 2025-03-01-10:00:00.000.000 The arguments for collective communication are inconsistent "
        "between ranks: tag [AllReduce_group_1], parameter [count], local [1024], remote [2048]",
        FindingKind.COLLECTIVE_MISMATCH,
        None,
    ),
    (
        "EI0013: [PID: 42] 2025-03-01-10:00:00.000.000 An error CQE occurred during operator execution. Local "
        "information: server 10.0.0.1, device ID 3, device IP 192.168.1.3. Peer information: server 10.0.0.2, "
        "device ID 3, device IP 192.168.1.11.",
        FindingKind.NETWORK_ERROR,
        Category.IB,
    ),
]


# ---- a framework's check of an NCCL call, with NCCL's ncclGetErrorString text -------------------------------
FRAMEWORK_NCCL_CALLS = [
    # Horovod horovod/common/ops/nccl_operations.cc NCCLContext::ErrorCheck
    (
        "horovod.common.exceptions.HorovodInternalError: ncclAllReduce failed: unhandled system error",
        FindingKind.NETWORK_ERROR,
        Category.NCCL,
    ),
    (
        "tensorflow.python.framework.errors_impl.UnknownError: ncclCommInitRank failed: internal error",
        FindingKind.NETWORK_ERROR,
        Category.NCCL,
    ),
    # XLA xla/service/gpu nccl_utils.cc ToStatus
    (
        "jaxlib.xla_extension.XlaRuntimeError: INTERNAL: external/xla/xla/service/gpu/nccl_utils.cc:305: NCCL "
        "operation ncclCommInitRank(&comm, nranks, id, rank) failed: unhandled cuda error (run with "
        "NCCL_DEBUG=INFO for details). Last NCCL warning(error) log entry (may be unrelated) ''.",
        FindingKind.CRASH,
        Category.CUDA_ERROR,
    ),
]


@pytest.mark.parametrize("text,kind,category", HCCL_CODES + FRAMEWORK_NCCL_CALLS)
def test_printers_own_error_codes_name_no_rank_or_host(text, kind, category) -> None:
    f = first_finding(text)
    assert (f.kind, f.category, f.ranks, f.hosts) == (kind, category, (), ())


def test_a_program_naming_itself_is_no_host() -> None:
    # a command-line tool's "prog: message" (nvidia-smi; CPython's Modules/main.c "python3: can't open file") is not
    # pdsh's "host: line"
    f = first_finding("nvidia-smi: No devices were found")
    assert (f.kind, f.hosts) == (FindingKind.FAULTY_HOST, ())
    (rec,) = clean_lines("python3: can't open file '/work/train.py': [Errno 2] No such file or directory")
    assert rec.host is None
