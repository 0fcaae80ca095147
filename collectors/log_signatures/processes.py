"""Process listings (ps, defunct) and stack dumps of stuck processes."""

from __future__ import annotations

from trainctl.collectors.log_signatures.rule import (
    Blame,
    C,
    K,
    S,
    Signature,
    sig,
)

# process listings (procps `ps`: a zombie's command is shown as "<defunct>")
LISTINGS: tuple[Signature, ...] = (
    sig(
        "process_defunct",
        r"\bZ[sl+<N]*\s+.*?\[(?P<command>[^\]\n]{1,60})\] <defunct>|(?P<command2>\S{1,60}) <defunct>",
        K.CRASH,
        C.EXIT_CODE,
        S.WARNING,
        Blame.NONE,
        ["<defunct>"],
        "A process exited and was never reaped (a zombie): a worker died under a parent that is stuck.",
    ),
    sig(
        "process_uninterruptible",
        # procps ps aux columns (USER PID %CPU %MEM VSZ RSS TTY STAT START TIME COMMAND); STAT D is
        # "uninterruptible sleep (usually IO)" (ps(1)): a python rank in D waits in the kernel (storage,
        # a driver) and cannot even be killed until it returns; the driver's own tools in D (nvidia-smi,
        # nvidia-persistenced) wait on the GPU driver itself.
        r"^\S+\s+(?P<pid>\d+)\s+[\d.]+\s+[\d.]+\s+\d+\s+\d+\s+\S+\s+(?P<stat>D\S*)\s+\S+\s+\S+\s+"
        r"(?P<command>\S*(?:python|nvidia-)\S*[^\n]{0,200})",
        K.HUNG_COLLECTIVE,
        None,
        S.WARNING,
        Blame.NONE,
        ["python", "nvidia-"],
        "ps shows a python process or an NVIDIA tool in uninterruptible sleep (D): stuck in the kernel, on I/O or a driver.",
        generic=True,
    ),
    sig(
        "process_zombie_top",
        # procps top's default task columns (src/top/top.c, Fieldstab): PID USER PR NI VIRT RES SHR S %CPU
        # %MEM TIME+ COMMAND; S is the process state, Z a zombie.
        # Not anchored: a short listing pasted under its header may be joined to it as one wrapped line.
        r"(?<!\S)(?P<pid>\d+)\s+\S+\s+(?:-?\d+|rt)\s+-?\d+\s+\S+\s+\S+\s+\S+\s+Z\s+[\d.]+\s+[\d.]+\s+[\d:.]+\s+"
        r"(?P<command>\S{1,60})",
        K.CRASH,
        C.EXIT_CODE,
        S.WARNING,
        Blame.NONE,
        [" z "],
        "A zombie in a top listing (state Z): a worker died and its parent never reaped it.",
    ),
)


# stacks of stuck processes
STACKS: tuple[Signature, ...] = (
    sig(
        "gdb_frame_in_cuda",
        # gdb's backtrace (gdb/stack.c print_frame): "#N  0xADDR in FUNC (ARGS) from LIB". A thread whose
        # frames are in libcuda/libcudart/libnccl was caught inside a CUDA or NCCL call: a stuck rank.
        r"^#\d+\s+0x[0-9a-fA-F]+ in (?P<func>\S+) \([^)\n]*\) from (?P<lib>\S*lib(?:cuda|cudart|nccl)\S*)",
        K.HUNG_COLLECTIVE,
        None,
        S.INFO,
        Blame.NONE,
        ["libcuda", "libcudart", "libnccl"],
        "gdb backtrace of a thread inside a CUDA/NCCL library call (a rank stuck there).",
        generic=True,
    ),
    sig(
        "gdb_frame_in_store",
        # gdb's backtrace (gdb/stack.c print_frame: "#N  0xADDR in FUNC (ARGS) from LIB", or without
        # the address for frame 0) of a thread inside c10d's TCPStore client (torch/csrc/distributed/
        # c10d/TCPStore.cpp doGet/doWait/get/wait/check): a rank blocked on the rendezvous store,
        # waiting for a key another rank never set.
        r"^#\d+\s+(?:0x[0-9a-fA-F]+ in )?(?P<func>(?:void |std::\S+ )?c10d::(?:TCPStore::(?:doGet|doWait|get|wait|check)"
        r"|tcputil::recv\w*)[^(\n]*)\(",
        K.RENDEZVOUS_ERROR,
        None,
        S.WARNING,
        Blame.NONE,
        ["c10d::tcpstore::", "c10d::tcputil::recv"],
        "gdb backtrace of a thread blocked in the c10d TCPStore client (a rank waiting on rendezvous).",
        generic=True,
    ),
)
