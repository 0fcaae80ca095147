"""Readings of absence (collectors/log_progress.py -> analyzers/log_progress.py): a log with no error
line whose progress stopped gets one low-confidence hang finding with its evidence; a log that ends
normally, or that says what failed, gets none of it. Lines in the formats their printers use."""

from __future__ import annotations

import pytest

from trainctl.analyzers.log_progress import PROGRESS_CONFIDENCE
from trainctl.analyzers.logs import analyze_log_events
from trainctl.collectors.logs import parse_log_text
from trainctl.findings import Category, FindingKind, Severity


def findings(text: str):
    return analyze_log_events(parse_log_text(text, source="t.log"))


def only(text: str):
    fs = findings(text)
    assert len(fs) == 1
    f = fs[0]
    assert f.kind is FindingKind.HUNG_COLLECTIVE
    assert f.confidence == PROGRESS_CONFIDENCE
    assert f.evidence["read_from_absence"] is True
    return f


NCCL_SETUP = """node1:100:201 [0] NCCL INFO Trees [0] 1/-1/-1->0->-1 [1] 1/-1/-1->0->-1
node1:101:202 [1] NCCL INFO P2P Chunksize set to 524288
node1:100:201 [0] NCCL INFO Channel 00/0 : 0[4f000] -> 1[52000] via P2P/IPC/read
node1:101:202 [1] NCCL INFO Channel 00 : 1[52000] -> 0[4f000] via SHM/direct/direct"""


def test_nccl_setup_that_never_completes_is_a_hang_at_init_with_no_rank():
    f = only(NCCL_SETUP)
    assert f.evidence["signatures"] == ["nccl_init_incomplete"]
    assert f.ranks == ()
    assert f.evidence["nccl_info_lines"] == 4
    assert "Init COMPLETE" in f.summary


def complete(rank: int, nranks: int = 3) -> str:
    return (
        f"node1:10{rank}:20{rank} [{rank}] NCCL INFO ncclCommInitRank comm 0x55d{rank} rank {rank} nranks {nranks}"
        f" cudaDev {rank} nvmlDev {rank} busId {rank}000 commId 0xabc - Init COMPLETE"
    )


def test_nccl_init_completed_by_all_ranks_but_one_names_that_rank_from_the_roster():
    f = only(NCCL_SETUP + "\n" + complete(0) + "\n" + complete(2) + "\n" + NCCL_SETUP.splitlines()[-1])
    assert f.ranks == (1,)
    assert f.evidence["arrived_ranks"] == [0, 2]


def test_nccl_setup_that_completed_or_was_followed_by_progress_is_nothing():
    done = NCCL_SETUP + "\n" + "\n".join(complete(r) for r in range(3))
    assert findings(done) == []
    assert findings(NCCL_SETUP + "\nEpoch 0 step 10 loss 2.31") == []


def test_a_short_roster_that_proves_no_rank_is_a_hang_at_init_naming_nobody():
    """1 of 3 completed: the other two never did or are not in this log; either way the log ends in
    NCCL set-up, and no roster names one rank."""
    f = only(NCCL_SETUP + "\n" + complete(0) + "\n" + NCCL_SETUP.splitlines()[-1])
    assert f.ranks == () and "channels were still connecting" in f.summary
    f = only(NCCL_SETUP + "\n" + complete(0))  # ends at the completion itself
    assert f.ranks == () and "only 1 of 3 ranks" in f.summary


def test_a_one_process_log_names_no_rank_from_a_two_rank_roster():
    """Rank 0 of 2 completing says nothing of rank 1 when no other rank's lines are in the log: the
    set-up that follows is rank 0's next communicator, hung or cut, with no culprit."""
    f = only(complete(0, nranks=2) + "\n" + NCCL_SETUP)
    assert f.ranks == () and "arrived_ranks" not in f.evidence
    assert "after the last 'Init COMPLETE'" in f.summary


def test_a_communicator_whose_init_began_after_every_other_completed_is_a_hang_at_init():
    every = "\n".join(complete(r) for r in range(3))
    f = only(NCCL_SETUP + "\n" + every + "\n" + NCCL_SETUP)
    assert f.ranks == () and f.evidence["signatures"] == ["nccl_init_incomplete"]
    assert "a communicator's init began after the last 'Init COMPLETE'" in f.summary
    # channels connecting after Init COMPLETE: a first collective's (NCCL_RUNTIME_CONNECT), not an init
    f = only(NCCL_SETUP + "\n" + every + "\n" + NCCL_SETUP.splitlines()[-1])
    assert "channels were still connecting" in f.summary


LOCKSTEP = "\n".join(
    [f"Rank {r}: After broadcast" for r in (1, 0, 3, 2)] + [f"pass forward on device {r} step 3942" for r in (2, 1, 3)]
)


def test_ranks_that_never_printed_the_last_lockstep_message_are_low_confidence_suspects():
    f = only(LOCKSTEP)
    assert f.evidence["signatures"] == ["lockstep_ranks_behind"]
    assert f.ranks == (0,)
    assert f.evidence["ranks_behind"] == [0]
    assert f.evidence["world_ranks"] == [0, 1, 2, 3]
    assert f.evidence["last_line_by_rank"]["0"].endswith("Rank 0: After broadcast")
    assert f.evidence["last_line_by_rank"]["3"].endswith("pass forward on device 3 step 3942")


def test_lockstep_where_every_rank_printed_the_last_message_or_most_did_not_is_nothing():
    every = LOCKSTEP + "\npass forward on device 0 step 3942"
    assert findings(every) == []
    few = "\n".join([f"Rank {r}: After broadcast" for r in range(4)] + ["pass forward on device 2 step 1"])
    assert findings(few) == []  # one rank printed on alone: a rank ahead, not three behind


def test_a_rank_whose_line_a_terminal_wrap_joined_to_another_still_counts_as_printed():
    joined = LOCKSTEP.replace("device 3 step 3942", "device 3 step 3942pass forward on device 0 step 3942")
    assert findings(joined) == []


def test_py_spy_and_cut_traceback_frames_without_an_exception_are_a_stuck_process():
    # frames in a collective are the stack_frame_in_collective signature's; these wait elsewhere
    pyspy = "    wait (threading.py:320)\n    get (queue.py:171)\n    main (train.py:88)"
    f = only(pyspy)
    assert f.evidence["signatures"] == ["stack_dump_no_exception"]
    assert f.evidence["frames"][1] == "get (queue.py:171)"
    assert f.evidence["waiting_frames"] == ["wait (threading.py:320)"]
    assert f.ranks == ()
    fault = '  File "torch/cuda/streams.py", line 90 in synchronize\n  File "train.py", line 12 in step'
    assert only(fault).evidence["waiting_frames"][0].startswith("synchronize")


def test_gpu_processes_still_resident_with_no_error_are_a_stuck_job():
    smi = "\n".join(f"|    {g}   N/A  N/A     {1800 + g}      C   /usr/bin/python3    13195MiB |" for g in range(3))
    f = only(smi)
    assert f.evidence["signatures"] == ["gpu_processes_resident"]
    assert f.evidence["gpu_processes"][2] == "GPU 2 pid 1802 /usr/bin/python3 13195 MiB"
    # nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv: no GPU index
    apps = "pid, process_name, used_gpu_memory [MiB]\n" + "".join(
        f"{3456700 + i}, /usr/bin/python3, 40213 MiB\n" for i in (1, 2)
    )
    f = only(apps)
    assert f.evidence["gpu_processes"] == [
        "GPU ? pid 3456701 /usr/bin/python3 40213 MiB",
        "GPU ? pid 3456702 /usr/bin/python3 40213 MiB",
    ]
    assert findings(apps.splitlines()[0] + "\n" + apps.splitlines()[1]) == []  # one process proves nothing


def test_a_normal_end_or_an_error_line_leaves_no_reading_of_absence():
    assert findings(LOCKSTEP + "\nTraining completed.") == []
    assert findings(NCCL_SETUP + "\nworker exited with code 0") == []
    fs = findings(LOCKSTEP + "\nRuntimeError: CUDA error: an illegal memory access was encountered")
    assert fs and not any(f.evidence.get("read_from_absence") for f in fs)


def test_quiet_logs_with_nothing_to_read_stay_silent():
    assert findings("loading model\nEpoch 1 step 5 loss 2.0\nEpoch 1 step 6 loss 1.9") == []
    assert findings("") == []


# Lightning's own lines (lightning/fabric/utilities/distributed.py; pytorch_lightning 1.x: "initializing ddp")
def _pl_members(ranks, world: int, word: str = "initializing ddp") -> str:
    return "GPU available: True, used: True\n" + "".join(
        f"{word}: GLOBAL_RANK: {r}, MEMBER: {r + 1}/{world}\n" for r in ranks
    )


def test_lightning_members_missing_from_init_are_a_hang_at_init_naming_nobody_when_several_are_missing():
    f = only(_pl_members([1, 2, 0, 3], 8))
    assert f.kind is FindingKind.HUNG_COLLECTIVE and f.ranks == () and f.hosts == ()
    assert f.confidence == PROGRESS_CONFIDENCE and "4 of 8" in f.summary and "4, 5, 6, 7" in f.summary


def test_lightning_init_missing_one_member_names_it_from_the_roster():
    f = only(_pl_members([0, 2, 3], 4, "Initializing distributed"))
    assert f.ranks == (1,) and f.evidence["arrived_ranks"] == [0, 2, 3]


def test_lightning_init_that_registered_every_process_is_nothing():
    text = _pl_members([0, 1], 4) + "All distributed processes registered. Starting with 4 processes\n"
    assert findings(text) == []
    assert findings(_pl_members([0, 1, 2, 3], 4)) == []


def _barrier(key: int, added: list[int], completed: list[int], world: int = 4) -> str:
    """torch distributed_c10d._store_based_barrier's two INFO lines, in Python logging's default format."""
    prefix = "INFO:torch.distributed.distributed_c10d:"
    return "".join(
        f"{prefix}Added key: store_based_barrier_key:{key} to store for rank: {r}\n" for r in added
    ) + "".join(
        f"{prefix}Rank {r}: Completed store-based barrier for key:store_based_barrier_key:{key} with {world} nodes.\n"
        for r in completed
    )


def test_a_store_based_barrier_entered_and_never_completed_is_a_hang_at_group_creation():
    f = only(_barrier(1, [0, 1, 2, 3], [0, 1, 2, 3]) + _barrier(2, [2, 1], []))
    assert f.ranks == () and "barrier 2 was entered by ranks 1, 2 and completed by none" in f.summary
    assert f.evidence["arrived_ranks"] == [1, 2] and f.evidence["missing_ranks"] == [0, 3]


def test_a_store_based_barrier_missing_one_rank_names_it_when_the_world_size_is_known():
    f = only(_barrier(1, [0, 1, 2, 3], [0, 1, 2, 3]) + _barrier(2, [0, 1, 3], []))
    assert f.ranks == (2,) and f.evidence["world_size"] == 4


def test_store_based_barriers_that_completed_are_nothing():
    assert findings(_barrier(1, [0, 1], [0, 1], world=2)) == []
    assert findings(_barrier(1, [0, 1], [1], world=2)) == []  # one rank completing is enough


# Native dumps in their printers' formats (collectors/log_progress.py cites each): gdb's
# print_frame ("#N  0xPC in func (args) at file:line" / "... from lib"), lldb's default frame-format
# ("frame #N: 0xPC module`func(args) + off" / "... at file:line:col"), py-spy dump --native. (A gdb
# frame "from libnccl/libcuda" is the gdb_frame_in_cuda signature's, not a reading of absence.)
GDB_BT = """Thread 3 (Thread 0x7f3b2effd640 (LWP 4242) "python"):
#0  0x00007f3b9c6907ea in __futex_abstimed_wait_common64 (private=0, cancel=true, abstime=0x0, op=393, expected=0, futex_word=0x55c7a0) at ./nptl/futex-internal.c:57
#1  0x00007f3b9c693300 in __pthread_cond_wait_common (abstime=0x0, clockid=0, mutex=0x55c7a8, cond=0x55c7a0) at ./nptl/pthread_cond_wait.c:503
#2  0x00007f3b4a1c2d10 in std::condition_variable::wait(std::unique_lock<std::mutex>&) () from /lib/x86_64-linux-gnu/libstdc++.so.6
#3  0x00007f3b12345678 in ncclCommAbort (comm=0x55c7c0) at src/init.cc:2093
#4  0x00007f3b23456789 in c10d::ProcessGroupNCCL::abort (this=0x55c7b0) at /pytorch/torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1187"""


def test_a_gdb_backtrace_is_a_stuck_process_quoting_the_native_waits():
    f = only(GDB_BT)
    assert f.evidence["signatures"] == ["stack_dump_no_exception"]
    assert f.ranks == () and f.hosts == ()
    assert f.evidence["frames"][2] == "std::condition_variable::wait (/lib/x86_64-linux-gnu/libstdc++.so.6)"
    assert f.evidence["frames"][4] == (
        "c10d::ProcessGroupNCCL::abort (/pytorch/torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1187)"
    )
    assert f.evidence["waiting_frames"][3] == "ncclCommAbort (src/init.cc:2093)"
    # the innermost wait, and the outermost one it sits under
    assert "waiting in __futex_abstimed_wait_common64 (./nptl/futex-internal.c:57) under ncclCommAbort" in f.summary


LLDB_BT = """* thread #1, name = 'python', stop reason = signal SIGSTOP
  * frame #0: 0x00007f1a2b3c4d5e libc.so.6`__GI___poll(fds=0x00007ffd, nfds=1, timeout=-1) at poll.c:29:10
    frame #1: 0x00007f1a11223344 libcuda.so.1`cuStreamSynchronize + 122
    frame #2: 0x00007f1a55667788 libtorch_cuda.so`c10d::ProcessGroupNCCL::waitForFutureOrTimeout(std::future<bool>&, std::chrono::duration<long, std::ratio<1l, 1000l>> const&) + 401
    frame #3: 0x0000000000401000"""


def test_an_lldb_backtrace_with_or_without_its_backticks_is_a_stuck_process():
    f = only(LLDB_BT)
    assert f.ranks == ()
    assert f.evidence["frames"] == [
        "__GI___poll (poll.c:29)",
        "cuStreamSynchronize (libcuda.so.1)",
        "c10d::ProcessGroupNCCL::waitForFutureOrTimeout (libtorch_cuda.so)",
        "??",
    ]
    assert len(f.evidence["waiting_frames"]) == 3
    assert f.summary.count("waitForFutureOrTimeout") == 1
    # a paste that lost lldb's backticks (markdown) still splits a shared object from its function
    assert only(LLDB_BT.replace("`", "")).evidence["frames"] == f.evidence["frames"]


def test_py_spy_native_frames_are_read_and_lines_that_only_look_numbered_are_not():
    native = (
        "    pthread_cond_timedwait@@GLIBC_2.3.2 (libpthread-2.31.so)\n"
        "    c10d::ProcessGroupNCCL::workCleanupLoop (ProcessGroupNCCL.cpp:1432)\n"
        "    run (threading.py:953)"
    )
    f = only(native)
    assert f.evidence["frames"][:2] == [
        "pthread_cond_timedwait@@GLIBC_2.3.2 (libpthread-2.31.so)",
        "c10d::ProcessGroupNCCL::workCleanupLoop (ProcessGroupNCCL.cpp:1432)",
    ]
    assert f.evidence["waiting_frames"] == ["pthread_cond_timedwait@@GLIBC_2.3.2 (libpthread-2.31.so)"]
    assert findings("#1 GPU is fine\n#2 loss went down (a lot)\nEpoch (1)\n    loss (avg)") == []


def test_a_dump_whose_frame_lines_one_rank_printed_names_that_rank_as_its_reporter_not_a_suspect():
    frames = GDB_BT.splitlines()[1:]
    f = only("\n".join(f"[rank3]: {t}" for t in frames))
    assert f.ranks == () and f.evidence["reporting_ranks"] == [3]
    assert f.summary.startswith("stack dump of a live process (rank 3) with no exception (5 frames)")
    mixed = only("\n".join(f"[rank{i % 2}]: {t}" for i, t in enumerate(frames)))  # two ranks' frames: nobody's
    assert mixed.ranks == () and "reporting_ranks" not in mixed.evidence


# nvidia-smi's device table (the GPU's index row, then its usage row), as drivers 375-560 print it.
def _smi(*gpus: tuple[int, int, int], watts: int = 166) -> str:
    rows = []
    for index, mib, util in gpus:
        rows.append(f"|   {index}  TITAN RTX           Off  | 00000000:1A:00.0 Off |                  N/A |")
        rows.append(f"| 41%   55C    P2   {watts:3d}W / 280W |  {mib:5d}MiB / 24220MiB |    {util:3d}%      Default |")
        rows.append("+-------------------------------+----------------------+----------------------+")
    return "\n".join(rows) + "\n"


def test_an_idle_gpu_holding_memory_beside_busy_ones_is_a_stuck_process_naming_no_rank():
    f = only(_smi((0, 11510, 49), (1, 11598, 49), (2, 11928, 0)))
    assert f.evidence["signatures"] == ["gpu_table_idle_while_others_busy"]
    assert f.evidence["gpu_util_pct"] == {"0": 49, "1": 49, "2": 0}
    assert f.ranks == () and f.hosts == ()  # a device index is not a rank
    assert f.summary.startswith("GPU 2 idle (0 %) while holding memory and GPU 0, 1 busy")


def test_every_gpu_holding_memory_and_idle_is_processes_alive_waiting_on_the_host():
    f = only(_smi((0, 21614, 0), (1, 17562, 0)))
    assert f.evidence["signatures"] == ["gpu_table_all_idle_holding_memory"]
    assert f.evidence["gpu_memory_used_mib"] == {"0": 21614, "1": 17562} and f.ranks == () and f.hosts == ()
    assert findings(_smi((0, 21614, 0), (1, 3, 0))) == []  # one GPU has no process on it: nothing proven


def test_a_gpu_without_a_process_between_gpus_holding_one_is_a_process_gone():
    """GPU 1 empty between GPUs 0 and 2 that hold a process's memory: that GPU's process is gone (nvidia-smi
    device table, nvidia-smi(1)). Empty GPUs after the last held one are a job given fewer GPUs: nothing."""
    f = only(_smi((0, 15234, 100), (1, 3, 0), (2, 15234, 100)))
    assert f.evidence["signatures"] == ["gpu_table_gpu_without_process"]
    assert f.evidence["gpus_without_process"] == [1] and f.ranks == () and f.hosts == ()
    assert f.summary.startswith("GPU 1 holds no process's memory (3 MiB) while GPU 0, 2 on either side hold one")
    assert findings(_smi((0, 15234, 100), (1, 15234, 100), (2, 3, 0), (3, 0, 0))) == []  # the job uses GPUs 0-1
    assert findings(_smi((0, 3, 0), (1, 15234, 100), (2, 15234, 100))) == []  # nor does an empty first one count


def test_process_rows_of_pmon_fuser_and_ps_with_chosen_columns_are_the_training_alive():
    # nvidia-smi pmon (nvidia-smi(1)): "# gpu pid type sm mem enc dec command", "-" for a GPU with no process
    pmon = (
        "# gpu        pid  type    sm   mem   enc   dec   command\n"
        "# Idx          #   C/G     %     %     %     %   name\n"
        "    0      12345     C   100     0     -     -   python\n"
        "    1      12346     C   100     0     -     -   python\n"
        "    2          -     -     -     -     -     -   -\n"
    )
    f = only(pmon)
    assert f.evidence["signatures"] == ["gpu_processes_resident"]
    assert f.evidence["gpu_processes"] == ["GPU 0 pid 12345 python", "GPU 1 pid 12346 python"]
    # psmisc fuser -v (src/fuser.c print_matches): NAME: USER PID ACCESS COMMAND, the access as [fF.][r.][c.][e.][m.]
    fuser = (
        "                     USER        PID ACCESS COMMAND\n"
        "/dev/nvidia0:        root      23451 F...m python\n"
        "/dev/nvidia1:        root      23452 F...m python\n"
        "/dev/nvidiactl:      root      23451 F...m python\n"
    )
    g = only(fuser)
    assert g.evidence["signatures"] == ["training_processes_listed"] and g.summary.startswith("2 training processes")
    # ps -eo pid,ppid,stat,etime,cmd (ps(1): the STAT column's state codes and flags)
    ps = (
        " 23451  23440 Sl+   02:13:05 python -u train.py --local_rank=0\n"
        " 23452  23440 Sl+   02:13:05 python -u train.py --local_rank=1\n"
    )
    h = only(ps)
    assert h.evidence["processes"] == ["python pid 23451 state Sl+", "python pid 23452 state Sl+"]
    assert findings(ps.splitlines()[0] + "\n") == []  # one process proves nothing
    assert findings(" 23451  23440 Sl+   02:13:05 bash\n 23452  23440 Sl+   02:13:05 vim\n") == []  # not a trainer


def test_every_gpu_at_full_utilization_and_idle_power_is_kernels_spinning_in_a_wait():
    f = only(_smi((0, 11304, 100), (1, 11312, 100), (2, 11314, 97), watts=70))
    assert f.evidence["signatures"] == ["gpu_table_busy_at_idle_power"] and f.kind is FindingKind.HUNG_COLLECTIVE
    assert f.evidence["gpu_power_fraction_of_cap"] == {"0": 0.25, "1": 0.25, "2": 0.25} and f.ranks == ()
    assert "shows 97-100 % utilization while drawing at most 25 % of its power cap" in f.summary
    # one GPU computing (its power up) or one below 90 %: not a table of waiting kernels
    assert findings(_smi((0, 11304, 100), (1, 11312, 85), watts=70)) == []


def test_gpu_tables_that_prove_nothing_stay_silent():
    assert findings(_smi((0, 70000, 100), (1, 70000, 97))) == []  # all busy: training, or all spinning
    assert findings(_smi((0, 4, 0), (1, 70000, 97))) == []  # an idle GPU with no process on it
    assert findings(_smi((0, 11510, 0))) == []  # one GPU: nothing to compare with


# gpustat (gpustat/core.py GPUStat.print_to): "[index] name | temp°C, util % | used / total MB | user(MiB)"
def _gpustat(*gpus: tuple[int, int, int], power: str = "") -> str:
    rows = ["gpu-node-3                 Mon Jan  8 10:00:00 2024  535.104.05"]
    for index, mib, util in gpus:
        rows.append(
            f"[{index}] NVIDIA A100-SXM4-80GB | 45°C, {util:3d} %{power} | {mib:5d} / 81920 MB | alice({mib - 13}M)"
        )
    return "\n".join(rows) + "\n"


# nvidia-smi --query-gpu=index,utilization.gpu,memory.used,power.draw,power.limit --format=csv
def _smi_csv(*gpus: tuple[int, int, int], watts: float = 350.0) -> str:
    rows = ["index, utilization.gpu [%], memory.used [MiB], power.draw [W], power.limit [W]"]
    rows += [f"{index}, {util} %, {mib} MiB, {watts:.2f} W, 400.00 W" for index, mib, util in gpus]
    return "\n".join(rows) + "\n"


def test_gpustats_and_the_csv_query_tables_are_read_like_nvidia_smis():
    f = only(_gpustat((0, 40211, 100), (1, 40211, 100), (2, 40211, 0), (3, 40211, 100)))
    assert f.evidence["signatures"] == ["gpu_table_idle_while_others_busy"]
    assert f.evidence["gpu_util_pct"] == {"0": 100, "1": 100, "2": 0, "3": 100} and f.ranks == ()
    spin = only(_gpustat((0, 40211, 100), (1, 40211, 100), power=",   85 /  400 W"))
    assert spin.evidence["signatures"] == ["gpu_table_busy_at_idle_power"]
    f = only(_smi_csv((0, 40211, 100), (1, 40211, 100), (2, 40211, 100), watts=85.12))
    assert f.evidence["signatures"] == ["gpu_table_busy_at_idle_power"]
    assert f.evidence["gpu_power_fraction_of_cap"] == {"0": 0.21, "1": 0.21, "2": 0.21}
    assert only(_smi_csv((0, 40211, 0), (1, 39000, 0))).evidence["signatures"] == ["gpu_table_all_idle_holding_memory"]


def test_gpustat_and_csv_tables_that_prove_nothing_stay_silent():
    assert findings(_gpustat((0, 40211, 100), (1, 40211, 100))) == []  # all busy, no power shown: training
    assert findings(_smi_csv((0, 40211, 100), (1, 40211, 100))) == []  # all busy at 350 of 400 W: computing
    assert findings(_gpustat((0, 3, 0), (1, 40211, 100))) == []  # an idle GPU with no process on it
    # the CSV without its header (--format=csv,noheader): the columns are not named, nothing is read
    assert findings("\n".join(_smi_csv((0, 40211, 0), (1, 39000, 0)).splitlines()[1:]) + "\n") == []


TQDM_START = (
    "[2025-01-12 09:24:19,964] [INFO] [config.py:989:print_user_config]   json = {\n"
    '    "train_batch_size": 256\n'
    "}\n"
    "Train epoch:   0%|                                        | 0/1 [00:00<?, ?it/s]\n"
    "Train step of epoch 0:   0%|                           | 0/4887 [00:00<?, ?it/s]\n"
)


def test_a_log_that_ends_on_bars_with_nothing_done_is_a_first_step_that_never_finished():
    f = only(TQDM_START)
    assert f.evidence["signatures"] == ["first_step_never_finished"]
    assert f.evidence["progress_bars"] == ["0/1 [00:00<?, ?it/s]", "0/4887 [00:00<?, ?it/s]"]
    assert "0 of 1, 4887" in f.summary and f.evidence["lines"][0].startswith("t.log:4:")  # the first of the bars


def test_bars_that_moved_or_lines_after_them_are_nothing():
    moved = TQDM_START + "Train step of epoch 0:   0%|                  | 1/4887 [00:03<4:00:00,  0.33it/s]\n"
    assert findings(moved) == []
    assert findings(TQDM_START + "step 1 loss 2.31\n") == []


# A file diagnosed on its own ends where its run stopped printing; a run dir's rank log may be a live one.
def alone(text: str):
    return analyze_log_events(parse_log_text(text, source="t.log", ends_where_it_stopped=True))


TQDM_MIDWAY = "".join(f" 96%|█████████▌| {n}/64146 [4:33:5{n % 10}<10:29,  4.31it/s]\n" for n in range(61430, 61440))
# tqdm redraws in place: one raw line holds every state, the last one is where it stopped
TQDM_REDRAWN = "\r".join(f"Epoch 9 / 500:   1%|       | {n}/701 [00:0{n}<08:14,  1.41it/s]" for n in range(1, 7))
KERAS_UNKNOWN = "".join(f"     {n}/Unknown - {n + 4}s 2s/step - loss: 2.{9 - n} - acc: 0.0{n}\n" for n in range(2, 9))
KERAS3 = "".join(f"  {n}/120 ━━━━━━━━━━━━━━━━━━━━ 5s 57ms/step - loss: 0.5{n}\n" for n in range(1, 6))
MEGATRON = "".join(
    f" [2024-05-01 10:0{n}:00] iteration      {n}0/  500000 | consumed samples: {n * 1280} | lm loss: 7.1{n} |\n"
    for n in range(1, 6)
)
# mmcv 1.x TextLoggerHook._log_info: "Epoch [{epoch}][{iter}/{len}]\tlr: ..." (by epoch), "Iter [{iter}/{max}]" (by iter)
MMCV_EPOCH = "".join(
    f"2019-02-25 07:3{n}:23,255 - INFO - Epoch [2][{n}00/7330]\tlr: 0.02000, eta: 0:56:27, time: 1.403, loss: 0.5194\n"
    for n in range(1, 4)
)
MMCV_ITER = "2022-05-22 03:39:14,809 - mmseg - INFO - Iter [50/320000]\tlr: 9.997e-05, loss: 5.6491\n"
# mmengine LogProcessor.get_log_after_iter: "Epoch(train) [{epoch}][{iter}/{len}]  " with the epoch right-aligned to the
# width of max_epochs and the iteration to the width of the length; "Iter(train) [{iter}/{max_iters}]  "
MMENGINE_EPOCH = "".join(
    f"2023/03/01 10:0{n}:00 - mmengine - INFO - Epoch(train)  [1][{n * 50:4d}/7330]  lr: 2.0000e-02  eta: 1 day\n"
    for n in range(1, 4)
)
MMENGINE_ITER = "2023/03/01 10:00:00 - mmengine - INFO - Iter(train) [ 50/90000]  lr: 2.0000e-02  eta: 1 day\n"
# Chainer's ProgressBar (chainer/training/extensions/util.py): a report row, then the bar block it redraws in place


def chainer_bar(iteration: int, epoch: int, length: int, unit: str) -> str:
    return (
        f"0           {iteration}         288.4       324.985        251.815\n"
        "     total [#.................................................]  3.62%\n"
        "this epoch [###########################.......................] 54.35%\n"
        f"{iteration:10} iter, {epoch} epoch / {length} {unit}\n"
        "   0.69902 iters/sec. Estimated time to finish: 3:10:15.971187.\n"
    )


def test_a_counter_short_of_its_total_at_the_end_of_a_log_on_its_own_is_progress_that_stopped():
    for text, n, total in (
        (TQDM_MIDWAY, 61439, 64146),
        (TQDM_REDRAWN + "\ndone progbar.update\n", 6, 701),
        (KERAS_UNKNOWN, 8, None),
        (KERAS3, 5, 120),
        (MEGATRON, 50, 500000),
        (MMCV_EPOCH, 300, 7330),
        (MMCV_ITER, 50, 320000),
        (MMENGINE_EPOCH, 150, 7330),
        (MMENGINE_ITER, 50, 90000),
        (chainer_bar(300, 0, 15, "epochs"), 0, 15),
        (chainer_bar(300, 0, 90000, "iterations"), 300, 90000),
    ):
        f = only_alone(text)
        assert f.evidence["signatures"] == ["progress_stopped_short"], text
        assert (f.evidence["progress_n"], f.evidence["progress_total"]) == (n, total)
        assert f.ranks == () and f.hosts == ()


def test_a_counter_is_not_read_from_a_rank_log_of_a_run_dir_nor_when_it_reached_its_total():
    assert findings(TQDM_MIDWAY) == []  # a live rank's log always ends mid-run: the heartbeats judge it
    done = TQDM_MIDWAY + " 100%|██████████| 64146/64146 [4:40:00<00:00,  3.81it/s]\n"
    assert alone(done) == []
    assert alone(TQDM_MIDWAY + "Training completed. Do not forget to share your model\n") == []
    assert alone(chainer_bar(6000, 20, 20, "epochs")) == []  # the bar's last state at the end of its training
    assert alone(chainer_bar(90000, 7, 90000, "iterations")) == []
    # a run that went on printing after its last counter (a checkpoint save) stopped in that, not in the loop
    saved = TQDM_MIDWAY + "".join(f"12:45:1{i}.224 [I] Saving checkpoint at step 10 part {i}\n" for i in range(3))
    assert mid_run(saved)  # stopped in the save: the weakest reading, not the counter's
    # an error line after it says what failed instead
    assert alone(TQDM_MIDWAY + "RuntimeError: CUDA error: an illegal memory access was encountered\n")[0].kind is (
        FindingKind.CRASH
    )


def test_a_wait_among_the_last_lines_of_a_log_on_its_own_is_a_wait_that_never_ended():
    text = "GPU driver auto installation is disabled.\nWaiting for GPU driver libraries to be available.\n"
    f = only_alone(text)
    assert f.evidence["signatures"] == ["log_ends_waiting"]
    assert f.evidence["waiting_line"] == "Waiting for GPU driver libraries to be available."
    # a health check after the wait does not end it; a timeout is a failure, not a wait
    assert only_alone(text + "DEBUG 12-17 00:40:55 client.py:165] Heartbeat successful.\n")
    assert mid_run("Waiting for GPU driver libraries to be available.\n" + "step 1 loss 2.31\n" * 3)  # it went on
    assert alone("bootstrap.cc:89 CCOM WARN Timeout waiting for incoming connection (waited 120 sec)\n") == []
    assert findings(text) == []


def only_alone(text: str):
    fs = alone(text)
    assert len(fs) == 1, fs
    assert fs[0].kind is FindingKind.HUNG_COLLECTIVE and fs[0].confidence == PROGRESS_CONFIDENCE
    return fs[0]


def mid_run(text: str) -> bool:
    """The log on its own gives only the weakest reading, a run at work whose log ends (none of the others)."""
    return only_alone(text).evidence["signatures"] == ["log_ends_mid_run"]


TOP = """top - 10:47:42 up 3 min,  0 users,  load average: 5.27, 1.96, 0.75
Tasks:  25 total,   9 running,  16 sleeping,   0 stopped,   0 zombie
    PID USER      PR  NI    VIRT    RES    SHR S  %CPU  %MEM     TIME+ COMMAND
    549 root      20   0   60.7g  25.7g 220344 R  87.0   5.1   0:54.15 python
    551 root      20   0   60.7g  25.7g 220340 S   0.3   5.1   0:54.22 python3.10
      1 root      20   0    4.4m   3.2m   2.9m S   0.0   0.0   0:00.03 bash
"""
PS_AUX = """USER         PID %CPU %MEM    VSZ   RSS TTY      STAT START   TIME COMMAND
root        4711 99.8  2.1 91283744 5625120 ?   Rl   10:01  52:10 /opt/conda/bin/python -u train.py --local_rank=0
root        4712 99.9  2.1 91283744 5625120 ?   Rl   10:01  52:11 /opt/conda/bin/python -u train.py --local_rank=1
"""
PSTREE = """           ├─sge_shepherd(15966)───python3(16362)───bash(16529)─┬─mpirun(16554)───{mpirun}(16738)
           │                                                    ├─python3(16530)
           │                                                    └─python3(16531)
"""


# procps-ng ps -ef (UID PID PPID C STIME TTY TIME CMD), as a user greps it
PS_EF = """$ ps -ef | grep python
root      123456       1 99 10:02 ?        05:12:33 /opt/conda/bin/python -u train.py --local_rank=0
root      123457       1 99 Nov27 ?        1-05:12:30 /opt/conda/bin/python -u train.py --local_rank=1
root      123460  120000  0 15:00 pts/0    00:00:00 grep --color=auto python
"""


def test_a_listing_of_the_trainings_processes_alive_is_a_job_stuck_not_crashed():
    for text, first in ((TOP, "python pid 549 state R 87.0% CPU"), (PS_AUX, "python pid 4711 state Rl 99.8% CPU"),
                        (PSTREE, "python3 pid 16362"), (PS_EF, "python pid 123456 99% CPU")):  # fmt: skip
        f = only(text)
        assert f.evidence["signatures"] == ["training_processes_listed"]
        assert f.evidence["processes"][0] == first and f.ranks == () and f.hosts == ()
    # one process, or none of the training's own, says nothing
    assert findings(TOP.splitlines()[2] + "\n" + TOP.splitlines()[3]) == []
    assert findings("    1 root      20   0    4.4m   3.2m   2.9m S   0.0   0.0   0:00.03 bash\n" * 3) == []


# NVIDIA/nccl-tests' output (src/common.cu, src/util.cu), as all_reduce_perf prints it
COLL_TEST_HEAD = """# nThread 1 nGpus 1 minBytes 8 maxBytes 134217728 step: 2(factor) warmup iters: 5 iters: 20 agg iters: 1 validation: 1 graph: 0
#
# Using devices
#  Rank  0 Group  0 Pid  61927 on      node1 device  0 [0x1a] NVIDIA H100 80GB HBM3
#  Rank  1 Group  0 Pid  61928 on      node1 device  1 [0x1b] NVIDIA H100 80GB HBM3
#
#                                                              out-of-place                       in-place
#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)
"""
COLL_TEST_ROWS = """           8             2     float     sum      -1    10.52    0.00    0.00      0    10.31    0.00    0.00      0
          16             4     float     sum      -1    10.48    0.00    0.00      0    10.44    0.00    0.00      0
"""


def test_a_collective_test_that_stops_before_its_end_line_is_stuck_in_the_next_size():
    f = only(COLL_TEST_HEAD)
    assert f.evidence["signatures"] == ["collective_test_unfinished"] and f.evidence["result_rows"] == 0
    assert "before its first result row" in f.summary
    f = only(COLL_TEST_HEAD + COLL_TEST_ROWS)
    assert f.evidence["result_rows"] == 2 and "after its row for 16 bytes (float sum)" in f.summary
    # rccl-tests' header spelling
    assert only(
        COLL_TEST_HEAD.replace("# nThread 1 nGpus 1 minBytes 8", "# nThreads: 1 nGpus: 2 nRanks: 1 minBytes: 8")
    )
    done = COLL_TEST_HEAD + COLL_TEST_ROWS + "# Out of bounds values : 0 OK\n# Avg bus bandwidth    : 0.00012 \n#\n"
    assert findings(done) == []


# Start-up lines in their printers' formats (collectors/log_progress.py _JOINING / _JOINED cite each source).
C10D_CONNECTING = """[W socket.cpp:401] [c10d] The server socket cannot be initialized on [::]:29501 (errno: 97 - Address family \
not supported by protocol).
[I socket.cpp:648] [c10d - trace] The client socket is attempting to connect to [master-0.svc]:23456.
[I socket.cpp:725] [c10d] The client socket has connected to [master-0.svc]:23456 on [worker-0]:38244.
"""
DEEPSPEED_INIT = """[2024-06-11 00:23:36,254] [INFO] [comm.py:637:init_distributed] cdb=None
[2024-06-11 00:23:36,254] [INFO] [comm.py:668:init_distributed] Initializing TorchBackend in DeepSpeed with backend nccl
/usr/lib/python3/site-packages/transformers/training_args.py:1474: FutureWarning: `evaluation_strategy` is deprecated
  warnings.warn(
"""
ELASTIC_DONE = """[INFO] 2021-06-29 12:04:55,398 api: [default] Rendezvous'ing worker group
[INFO] 2021-06-29 12:05:25,634 api: [default] Rendezvous complete for workers. Result:
  restart_count=0
  master_addr=master1
  master_port=43923
  group_rank=0
"""
HF_TRAINER = """[INFO|trainer.py:2128] 2025-04-24 20:44:49,943 >> ***** Running training *****
[INFO|trainer.py:2129] 2025-04-24 20:44:49,943 >>   Num examples = 100,000
[INFO|trainer.py:2130] 2025-04-24 20:44:49,943 >>   Num Epochs = 1
[INFO|trainer.py:2136] 2025-04-24 20:44:49,943 >>   Total optimization steps = 3,125
[INFO|trainer.py:2137] 2025-04-24 20:44:49,943 >>   Number of trainable parameters = 7,840,794
"""
MEGATRON_START = """> initializing torch distributed ...
> initialized tensor model parallel with size 2
> initialized pipeline model parallel with size 2
training ...
[before the start of training step] datetime: 2025-04-13 23:41:00
"""
NCCL_DONE_THEN_NOTE = """node01:322:322 [3] NCCL INFO ncclCommInitRank comm 0x55f5be32f460 rank 3 nranks 16 cudaDev 3 nvmlDev 3 \
busId 5a000 commId 0x4e2671c9674e940d - Init COMPLETE
[2025-04-01 09:58:02 TP0] Custom allreduce is disabled because this process group spans across nodes.
[2025-04-01 09:58:02 TP1] Custom allreduce is disabled because this process group spans across nodes.
"""


def test_a_log_on_its_own_that_ends_while_joining_its_group_is_a_rendezvous_that_never_completed():
    for text, last in (
        (C10D_CONNECTING, "[c10d] The client socket has connected to [master-0.svc]:23456 on [worker-0]:38244."),
        (DEEPSPEED_INIT, "Initializing TorchBackend in DeepSpeed with backend nccl"),  # a warning after it
        (
            "I0301 20:48:15.700560 1398 distributed.py:79] Connecting to JAX distributed service on 10.68.5.45:1234\n",
            "JAX",
        ),
    ):
        fs = alone(text)
        assert len(fs) == 1, text
        f = fs[0]
        assert f.kind is FindingKind.RENDEZVOUS_ERROR and f.confidence == PROGRESS_CONFIDENCE
        assert f.evidence["signatures"] == ["log_ends_in_set_up"] and f.evidence["stage"] == "joining"
        assert last in f.evidence["last_set_up_line"]
        assert f.ranks == () and f.hosts == ()


def test_a_log_on_its_own_that_ends_after_its_set_up_with_no_step_is_a_first_step_that_never_finished():
    for text, last in (
        (ELASTIC_DONE, "Rendezvous complete for workers"),  # its indented Result block follows it
        (HF_TRAINER, "Number of trainable parameters = 7,840,794"),
        (MEGATRON_START, "[before the start of training step]"),
        (NCCL_DONE_THEN_NOTE, "Init COMPLETE"),  # two lines of the server's own after it
        ("All distributed processes registered. Starting with 4 processes\n" + "-" * 100 + "\n", "registered"),
        # DDP's _pre_forward in the second iteration (here through mmcv's logger)
        ("2022-05-12 22:06:13,674 - mmcv - INFO - Reducer buckets have been rebuilt in this iteration.\n", "Reducer"),
        # the OpenMMLab runners' and detectron2's last line before their loop
        ("2020-01-14 09:01:53,683 - INFO - workflow: [('train', 1)], max: 12 epochs\n", "max: 12 epochs"),
        ("2021-06-01 10:00:00,000 - mmseg - INFO - workflow: [('train', 1)], max: 160000 iters\n", "160000 iters"),
        ("2023/03/01 10:00:00 - mmengine - INFO - Checkpoints will be saved to /work_dirs/rtm.\n", "Checkpoints"),
        ("[03/08 10:00:00 d2.engine.train_loop]: Starting training from iteration 0\n", "from iteration 0"),
    ):
        f = only_alone(text)
        assert f.evidence["signatures"] == ["log_ends_in_set_up"] and f.evidence["stage"] == "joined"
        assert last in f.evidence["last_set_up_line"], text


def test_set_up_followed_by_steps_or_many_lines_or_in_a_run_dirs_rank_log_is_nothing():
    for text in (C10D_CONNECTING, HF_TRAINER, MEGATRON_START):
        assert findings(text) == []  # a rank log of a live run ends in its set-up while it starts
    assert mid_run(HF_TRAINER + "{'loss': 1.7172, 'learning_rate': 4.9e-05, 'epoch': 0.01}\n")  # stepped: not set-up
    rebuilt = "INFO:root:Reducer buckets have been rebuilt in this iteration.\n"
    assert mid_run(rebuilt + "2022-05-22 03:39:14,809 - mmseg - INFO - loss: 5.6491\n")
    for stepped in (
        alone(MEGATRON_START + " [2025-04-13 23:41:12] iteration       10/    1000 | lm loss: 7.1 |\n"),
        alone(rebuilt + MMCV_ITER),
    ):
        assert [f.evidence["signatures"] for f in stepped] == [["progress_stopped_short"]]  # the counter's reading
    assert mid_run(DEEPSPEED_INIT + "".join(f"Loaded shard {i} of the model from disk\n" for i in range(3)))
    # the collectives NCCL's COLL subsystem traces are the run's work, not its set-up
    coll = "node1:100:100 [0] NCCL INFO AllReduce: opCount 5 sendbuff 0x7f sendbuff 0x7e count 3 datatype 7 op 0\n"
    assert mid_run(NCCL_DONE_THEN_NOTE + coll * 4)


def test_a_log_on_its_own_that_ends_as_its_run_begins_a_piece_of_set_up_is_a_run_stopped_in_its_set_up():
    """No set-up marker, no step: the last lines announce set-up work begun ("Initializing ...", "Loading ...",
    "Setting up ..."), and nothing says it finished. A weak hang (or the excerpt cut there), as a marker's reading."""
    for text, last in (
        (
            "11:05:18    INFO Applied activation checkpointing (freq=1)\n"
            "11:07:08    INFO Initializing checkpoint manager (interval=20 resume_step=None)\n",
            "Initializing checkpoint manager",
        ),
        (
            "[NeMo I 2025-10-13 13:29:27 utils:661] Setting up optimizer with config OptimizerConfig(lr=3e-4)\n",
            "Setting up",
        ),
        ("Synchronizing parameters for rank 0...\n", "Synchronizing"),
        ("INFO:root:Instantiating PipeStageExecutor for stage 4\nINFO:root:[2] Instantiating RankWorker\n", "[2]"),
    ):
        f = only_alone(text)
        assert f.kind is FindingKind.HUNG_COLLECTIVE and f.confidence == PROGRESS_CONFIDENCE
        assert f.evidence["signatures"] == ["log_ends_in_set_up"] and f.evidence["stage"] == "set-up begun"
        assert last in f.evidence["last_set_up_line"] and f.ranks == () and f.hosts == ()
        assert findings(text) == []  # a live run's rank log ends in its set-up while it starts
    # earlier steps do not matter (a restart's set-up, an evaluation's); a step after it, or a line that names a step
    # ("Starting epoch 3": progress), set-up work that finished, or more lines after it: nothing
    assert only_alone("epoch 1 step 10 loss 2.31\nLoading checkpoint shards\n").kind is FindingKind.HUNG_COLLECTIVE
    assert mid_run("Loading checkpoint shards\nepoch 1 step 10 loss 2.31\n")
    assert mid_run("epoch 2 step 20 loss 2.05\nStarting epoch 3\n")
    assert mid_run("Initializing model\nModel initialized in 3.2 s\nDataset ready: 1000 samples\nNum workers: 8\n")


def test_a_log_on_its_own_from_a_run_at_work_that_ends_on_an_ordinary_line_stopped_there():
    """The weakest reading: a step, a loss or set-up was printed, and the log ends on anything with no error and
    no normal end (an evaluation begun, a checkpoint saved, an epoch begun). Low confidence, no rank, no host."""
    for text, last in (
        (
            "{'loss': 1.2345, 'learning_rate': 1.9e-05, 'epoch': 0.5}\n***** Running Evaluation *****\n"
            "  Num examples = 1000\n  Batch size = 8\n",
            "Batch size = 8",
        ),
        (
            "{'loss': 0.9, 'learning_rate': 1e-05, 'epoch': 1.0}\nSaving model checkpoint to output/checkpoint-500\n"
            "Configuration saved in output/checkpoint-500/config.json\n",
            "Configuration saved",
        ),
        (
            "2023-05-05 12:00:00 | INFO | fairseq.trainer | begin training epoch 1\n"
            "2023-05-05 12:00:00 | INFO | fairseq_cli.train | Start iterating over samples\n",
            "Start iterating over samples",
        ),
    ):
        f = only_alone(text)
        assert f.evidence["signatures"] == ["log_ends_mid_run"] and last in f.evidence["last_line"]
        assert f.ranks == () and f.hosts == () and "or the excerpt was cut" in f.summary
        assert findings(text) == []  # a run dir's rank log of a live run always ends mid-run
    # the work line is named where the log ends on something else
    g = only_alone("step 7 loss 2.1\nsyncing metrics to the dashboard\n")
    assert g.evidence["last_work_line"] == "step 7 loss 2.1" and "(line 2, work last at line 1)" in g.summary
    # no work printed (a config dump), the shell's prompt came back, a counter at its total, a trainer's normal end
    assert alone("batch_size: 8\nlr: 0.0001\nseed: 1234\n") == []
    assert alone("step 7 loss 2.1\nuser@node1:~/run$ \n") == []
    assert alone("step 7 loss 2.1\n(venv) root@gpu-3:/workspace# \n") == []
    assert alone("Epoch 9: 100%|██████████| 701/701 [08:14<00:00,  1.41it/s, loss=0.31]\nval_acc 0.91\n") == []
    # ... unless a counter before it stands short of its total: the loop that finished was inside that one
    nested = (
        "{'loss': 0.04116132, 'grad_norm': 0.06237533, 'epoch': 0.12}\n"
        "Train:   2%|▏         | 56/2290 [1:41:55<93:10:01, 150.14s/it]INFO [block_pool.py:292] reset prefix cache\n"
        "100%|██████████| 32/32 [00:00<00:00, 52966.74it/s]\n"
        "100%|██████████| 32/32 [00:00<00:00, 58661.59it/s]\n"
    )
    assert mid_run(nested)
    assert alone(nested.replace("56/2290", "2290/2290")) == []
    for end in (
        "`Trainer.fit` stopped: `max_epochs=10` reached.",  # Lightning fit_loop.py
        "[after training is done] datetime: 2024-05-01 10:00:00",  # Megatron-LM training.py
        "2023-05-05 13:00:00 | INFO | fairseq_cli.train | done training in 3600.1 seconds",  # fairseq_cli/train.py
    ):
        assert alone(f"step 7 loss 2.1\n{end}\n") == [], end


def test_a_log_on_its_own_that_ends_saying_something_failed_quotes_those_lines():
    text = (
        "2022-05-20 06:14:58.873 Verifying GPU driver installation\n"
        "2022-05-20 06:14:58.902 failed to verify GPU driver installation: exit status 255\n"
    )
    (f,) = alone(text)
    assert (f.kind, f.severity, f.ranks, f.hosts) == (FindingKind.CRASH, Severity.WARNING, (), ())
    assert f.category is Category.UNCLASSIFIED
    assert "failed to verify GPU driver installation" in f.summary and "the log ends on 1 line" in f.summary
    # its words name a kind where they say one
    efa = (
        "Unable to write to EQ: Missing or unavailable event queue. err: Input/output error (5) prov/efa/src/rxr.h:1\n"
    )
    assert alone(efa)[0].kind is FindingKind.NETWORK_ERROR


def test_failure_words_are_read_only_at_the_end_of_a_log_on_its_own_and_never_for_a_count_of_none():
    text = "failed to verify GPU driver installation: exit status 255\n"
    assert findings(text) == []  # a run dir's rank log: a live rank's last line is not where it stopped
    assert alone(text + "".join(f"Verified shard {i} of the dataset\n" for i in range(3))) == []  # it went on
    assert mid_run("epoch 3 finished: 0 errors, 12 warnings\n")  # no failure words read: an epoch, the run at work
    assert alone("validation done without errors\nerrors: 0\n") == []


def test_the_terminals_ctrl_c_echo_is_read_wherever_it_is_glued() -> None:
    # a traceback the echo begins, cut by the paste before its KeyboardInterrupt line: the user's Ctrl-C
    cut = (
        "^C^CTraceback (most recent call last):\n"
        '  File "/usr/lib/python3.7/subprocess.py", line 1019, in wait\n'
        "    return self._wait(timeout=timeout)\n"
        '  File "/usr/lib/python3.7/subprocess.py", line 1653, in _wait\n'
        "    (pid, sts) = self._try_wait(0)\n"
    )
    f = only(cut)
    assert f.summary.startswith("the user interrupted (Ctrl-C) a process") and f.kind is FindingKind.HUNG_COLLECTIVE
    # a launcher prefix after the echo is still read: the exception is rank 1's
    (g,) = findings("^C[rank1]: KeyError: 'input_ids'\n")
    assert g.ranks == (1,) and g.kind is FindingKind.CRASH


def test_a_log_on_its_own_that_ends_on_ctrl_c_was_stopped_by_hand() -> None:
    f = only_alone("step 12 loss 2.31\n^C\n")
    assert f.evidence["signatures"] == ["log_ends_interrupted"] and f.kind is FindingKind.HUNG_COLLECTIVE
    assert mid_run("^C\nstep 12 loss 2.31\nstep 13\nstep 14\ndone 15\n")  # it went on after the ^C


# strace(1): a call that has not returned has no ") = RESULT" (another thread's call cutting in: "<unfinished ...>")
@pytest.mark.parametrize(
    "trace, call",
    [
        ("futex(0x55dcd81e08c8, FUTEX_WAIT_PRIVATE, 0, NULL\n", "futex"),
        ("strace: Process 1234 attached\n[pid  1240] poll([{fd=5, events=POLLIN}], 1, -1 <unfinished ...>\n", "poll"),
        (
            'openat(AT_FDCWD, "/dev/nvidia0", O_RDWR) = 5\nioctl(5, _IOC(_IOC_READ|_IOC_WRITE, 0x46, 0x2a, 0x20), 0x7ffd\n',
            "ioctl",
        ),
    ],
)
def test_an_strace_that_ends_inside_a_blocking_call_is_a_process_blocked_in_it(trace: str, call: str) -> None:
    f = only_alone(trace)
    assert f.evidence["signatures"] == ["strace_ends_in_blocking_call"] and f"inside {call}()" in f.summary


def test_an_strace_whose_last_call_returned_proves_nothing() -> None:
    done = "futex(0x55, FUTEX_WAKE_PRIVATE, 1) = 0\nmprotect(0x7f6ef5ef9000, 4096, PROT_NONE) = 0\n"
    assert alone(done) == []


def test_set_up_lines_of_gloo_vllm_and_zero3_say_the_group_formed():
    """gloo's connectFullMesh line, vLLM's parallel-group assignment and DeepSpeed ZeRO-3's offload statistics are
    printed once the group exists: a log on its own that stops a few lines after them stopped in set-up."""
    for line in (
        "[Gloo] Rank 0 is connected to 3 peer ranks. Expected number of connected peer ranks is : 3",
        "INFO 10-17 16:49:11 [parallel_state.py:1208] rank 0 in world size 4 is assigned as DP rank 0, PP rank 0, TP"
        " rank 0, EP rank 0",
        "Parameter Offload - Persistent parameters statistics: param_count = 490, numel = 1143024",
    ):
        f = only_alone(f"{line}\nWARNING tokenizer has new PAD tokens\n")
        assert f.kind is FindingKind.HUNG_COLLECTIVE and f.ranks == (), line
    assert alone("config: a\nWARNING tokenizer has new PAD tokens\n") == []
