"""Readings of absence: what a log with no error line says about a run that stopped (issue 13 item 3).

Called by collectors/logs.py only when no signature and no error-looking line matched, so a log
that says what failed never reaches it. Each reading is low confidence (it is read from what is
missing, and an excerpt may simply be cut) and carries the lines it rests on; analyzers/log_progress.py
turns it into a finding. docs/log-signatures.md "Progress stopped (reading absence)".
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from trainctl.collectors.log_signatures.rule import K
from trainctl.collectors.nccl_topology import comm_rank

# NCCL (NVIDIA/nccl 2.30.7, 5067397c): src/debug.cc ncclDebugLog prefixes INFO lines with
# "host:pid:tid [cudaDev] NCCL INFO " (the [n] is the CUDA device, not the rank); src/init.cc's
# INFO(NCCL_INIT, "%s comm %p rank %d nranks %d cudaDev %d nvmlDev %d busId %lx commId 0x%llx - Init
# COMPLETE") is a communicator's last set-up line (older releases: "comm %p rank %d nranks %d cudaDev
# %d nvmlDev %d - Init COMPLETE"); the ring / tree / channel / transport lines come before it
# (src/transport/generic.cc "Connected all rings, ...").
_NCCL_INFO = re.compile(r"\bNCCL INFO\b")
_NCCL_DONE = re.compile(r"Init COMPLETE")
_COMM_ID = re.compile(r"\bcommId (0x[0-9a-f]+)")  # rank and nranks: nccl_topology.comm_rank
_NCCL_SETUP = re.compile(
    r"\bNCCL INFO (?:Channel \d+|Trees|Ring \d+|P2P Chunksize|Connected all|Init START|comm 0x|NET/|Bootstrap|Setting affinity|cudaDriverVersion|NCCL_)"
)
# Lines only a communicator's init prints (2.30.7 src/init.cc: "... - Init START", "Trees%s", "P2P
# Chunksize set to %d", "Setting affinity for GPU %d to %s", "Using network %s"; <= 2.4 "comm %p rank
# %d nranks %d cudaDev %d nvmlDev %d" before its "Init COMPLETE"; a process's first init also
# bootstrap.cc "Bootstrap: Using", src/plugin/net "NET/Plugin", misc/cudawrap.cc "cudaDriverVersion
# %d", the transports' "NET/Socket : Using" / "NET/IB : Using"). Channel connection lines are not
# among them: since 2.22 (NCCL_RUNTIME_CONNECT) channels connect at a communicator's first
# collective, after Init COMPLETE.
_NCCL_INIT_ONLY = re.compile(
    r"\bNCCL INFO (?:.*- Init START|Trees|P2P Chunksize|Setting affinity|Bootstrap ?: Using|NET/Plugin"
    r"|cudaDriverVersion|Using network|NET/(?:Socket|IB) ?: Using"
    r"|comm 0x[0-9a-f]+ rank \d+ nranks \d+ cudaDev \d+ nvmlDev \d+\s*$)"
)
# A rank or device number in a message the application prints once per rank ("Rank 3: After
# broadcast", "pass forward on device 3 step 3942", "[rank3]: ...").
_RANK_IN_LINE = re.compile(r"\b(?:[Rr]ank|RANK|[Dd]evice|local_rank)\s*[:=#]?\s*(\d{1,5})\b")
_NUMBER = re.compile(r"\d+")
# Stack frames without an exception: py-spy dump (benfred/py-spy src/dump.rs print_traces:
# "    {name} ({filename}:{line})"), faulthandler (CPython Python/traceback.c dump_frame:
# '  File "x.py", line 12 in func'), and a traceback's frame lines ('  File "x.py", line 12, in
# func') whose exception line is absent.
_PYSPY_FRAME = re.compile(r"^\s*([\w<>.]+) \(([^()\s]+\.py):(\d+)\)\s*$")
_PY_FRAME = re.compile(r'^\s*File "([^"]+)", line (\d+),? in (\S+)')
# Native frames of a live process (where it sat in C/C++: NCCL, CUDA, libc):
# - gdb `bt` / `thread apply all bt` (gdb/stack.c print_frame_info / print_frame): "#" and the level
#   (field_fmt_signed(2, ui_left, "level")), the pc and " in " when it is not at a line's start, the
#   function and its " (args)", then " at file:line" (debug info) or " from /lib/x.so" (none):
#   "#2  0x00007f.. in c10d::ProcessGroupNCCL::abort (this=0x..) at ProcessGroupNCCL.cpp:1187",
#   "#3  0x00007f.. in ncclCommAbort () from /usr/lib/x86_64-linux-gnu/libnccl.so.2";
# - lldb `bt` (llvm-project lldb/source/Core/Debugger.cpp / CoreProperties.td DEFAULT_FRAME_FORMAT:
#   "frame #${frame.index}: ${frame.pc}" "{ ${module.file.basename}{`${function.name-with-args}
#   ${function.pc-offset}}}" "{ at ${line.file.basename}:${line.number}{:${line.column}}}"), the
#   selected frame marked "* ": "frame #2: 0x00007fb0.. libtorch_cuda.so`c10d::...(...) + 725";
# - py-spy dump --native (src/dump.rs as above; src/native_stack_trace.rs: a symbol's frame names
#   its source file and line, or its module with no line): "    pthread_cond_wait (libc.so.6)",
#   "    c10d::ProcessGroupNCCL::waitForFutureOrTimeout (ProcessGroupNCCL.cpp:1042)".
_GDB_FRAME = re.compile(
    r"^\s*#\d{1,4}\s+(?:0x[0-9a-fA-F]+ in )?(?P<func>[\w:~<].*\))(?: at (?P<loc>\S+:\d+)| from (?P<lib>\S+))?\s*$"
)
# clean_lines drops backticks (markdown code spans), so lldb's "libc.so.6`syscall" arrives as
# "libc.so.6syscall": a shared object's name ends at its ".so[.N]", another module's at the backtick.
_LLDB_FRAME = re.compile(
    r"^\s*(?:\* )?frame #\d{1,4}: 0x[0-9a-fA-F]+"
    r"(?: (?P<lib>[^\s`]+?\.(?:so(?:\.\d+)*|dylib|dll)|[^\s`]+(?=`))`?(?P<func>[A-Za-z_~].*?)?(?: \+ \d+)?)?"
    r"(?: at (?P<loc>[^\s:]+:\d+)(?::\d+)?)?\s*$"
)
_NATIVE_FILE = r"[^()\s]*\.(?:so(?:\.\d+)*|c|cc|cpp|cxx|cu|h|hpp|cuh)"
_PYSPY_NATIVE_FRAME = re.compile(rf"^\s*(?P<func>[\w:~<>.@$]+) \((?P<loc>{_NATIVE_FILE}(?::\d+)?)\)\s*$")
_FUNC_NAME = re.compile(r"(?:[^\s(<]|<[^<>]*(?:<[^<>]*>[^<>]*)*>)+")  # a C++ name, its template arguments kept
# Frames that wait (quoted as where the process sat): collectives and syncs, a `.item()` (a host sync
# on the GPU stream), Ray's idle worker loop (ray/_private/worker.py main_loop: waiting for a task);
# native waits: a futex, a condition variable or semaphore, epoll / poll, a CUDA stream sync, NCCL's
# abort, torch's ProcessGroupNCCL::waitForFutureOrTimeout (what abort and shutdown wait in).
_WAIT_FRAME = re.compile(
    r"all_reduce|allreduce|all_gather|allgather|reduce_scatter|broadcast|barrier|\bwait\b|_wait|synchronize"
    r"|\.item\(\)|recv|send|join|main_loop|_run_ddp_forward|get_future"
    r"|futex|pthread_cond_\w*wait|sem_\w*wait|(?<![a-z])poll\b|ncclCommAbort|waitFor",
    re.I,
)
# The exception line of a traceback the user's Ctrl-C raised: CPython raises KeyboardInterrupt in
# the main thread on SIGINT (Modules/signalmodule.c), so the traceback is where the user found the
# live process, not a failure of the run (collectors/logs.py does not quote it as an error line).
# Python's KeyboardInterrupt ends a Ctrl-C traceback; the terminal's echo of Ctrl-C is "^C" (a record of its own,
# log_records.clean_lines)
KEYBOARD_INTERRUPT = re.compile(r"^\s*KeyboardInterrupt\s*$")
_CTRL_C = re.compile(r"^\s*\^C\s*$")
INTERRUPTED = re.compile(f"{KEYBOARD_INTERRUPT.pattern}|{_CTRL_C.pattern}")
# A GPU process table row: nvidia-smi's "Processes:" section (| GPU GI CI PID Type Name Usage |)
# or a condensed "GPU PID name memory" listing (nvidia-smi is closed source: the formats are the dev
# rows' x3a-022 and e7b-021).
# Searched, not anchored: a pasted table is often joined into one line by terminal-wrap repair.
_GPU_PROC = re.compile(
    r"(?<![\w.])(\d{1,3})\s+(?:N/A\s+N/A\s+)?(\d{2,8})\s+(?:[CG](?:\+G)?\s+)?([^\s|]*[A-Za-z][^\s|]*)\s+(\d+)\s?MiB(?![a-z])"
)
# A normal end: nothing stopped. Besides the generic words, the trainers' own last lines: Lightning's fit loop
# (src/lightning/pytorch/loops/fit_loop.py: "`Trainer.fit` stopped: `max_epochs=N` reached.", and max_steps),
# Megatron-LM's (megatron/training/training.py pretrain: print_datetime('after training is done')), fairseq's
# (fairseq_cli/train.py main: "done training in {:.1f} seconds").
_NORMAL_END = re.compile(
    r"exit(?:ed)? (?:with )?(?:code|status) 0\b|Training completed|training finished|SUCCEEDED|Finished training"
    r"|Done!?\s*$|`?Trainer\.fit`? stopped: `?max_(?:epochs|steps)=|\[after training is done\]|\bdone training in [\d.]+ s",
    re.I,
)


@dataclass(frozen=True)
class Reading:
    """One reading of absence: what stopped, the suspects (if any), the lines it rests on."""

    signature: str
    summary: str
    line_no: int
    suspect_ranks: tuple[int, ...] = ()
    evidence: dict[str, Any] = field(default_factory=dict)
    kind: K = K.HUNG_COLLECTIVE  # where it stopped: in a collective or step (most), or joining the group


def read_progress(
    lines: Iterable[tuple[int, str]],
    rank_of_line: Mapping[int, int] | None = None,
    raw_tail: Sequence[tuple[int, str]] = (),
    *,
    ends_where_it_stopped: bool = False,
    counter_of_line: Mapping[int, int] | None = None,
) -> Reading | None:
    """The first reading that holds for these (line_no, text) lines of a log with no error line;
    rank_of_line: the rank a line's own prefix names ("[rank3]: "), peeled off its text; raw_tail: the
    log's last non-blank lines as written (progress bars, which the cleaned lines drop, included).

    ends_where_it_stopped: the log is one file handed to `diagnose` on its own (a pasted excerpt, a
    job's saved output), whose end is where the run stopped printing; then a progress counter short of
    its total, or a wait, among its last lines is read too. A run dir's or a collected dataset's rank
    logs are not: a live, healthy rank's log always ends mid-run, and their liveness is the heartbeats'
    and timelines' to judge (analyzers/hangs.py). counter_of_line: the number of a "[N] " prefix the reader
    peeled off a line (a line counter, or gpustat's GPU index)."""
    numbered = [(n, t) for n, t in lines if t.strip()]
    if any(_NORMAL_END.search(t) for _, t in numbered):
        return None

    def stack_dump(ls: list[tuple[int, str]]) -> Reading | None:
        return _stack_dump(ls, rank_of_line or {})

    def gpu_table_idle(ls: list[tuple[int, str]]) -> Reading | None:
        return _gpu_table_idle(ls, counter_of_line or {})

    readings = (
        _nccl_init,
        _lightning_init,
        _store_barrier,
        _lockstep,
        stack_dump,
        _gpu_processes,
        gpu_table_idle,
        _training_processes_listed,
        _collective_test_unfinished,
    )
    for read in readings if numbered else ():
        if (r := read(numbered)) is not None:
            return r
    r = _first_step_pending(raw_tail)
    if r is None and ends_where_it_stopped:
        r = (
            _counter_short_of_total(raw_tail)
            or _waiting_at_end(raw_tail)
            or _interrupted_at_end(numbered)
            or _strace_blocked_at_end(numbered)
            or _ends_in_set_up(numbered)
            or _set_up_begun_at_end(numbered)
        )
    return r


def _nccl_init(lines: list[tuple[int, str]]) -> Reading | None:
    nccl = [(n, t) for n, t in lines if _NCCL_INFO.search(t)]
    if not nccl or not any(_NCCL_SETUP.search(t) for _, t in nccl) or lines[-1][0] != nccl[-1][0]:
        return None  # no NCCL set-up, or something printed after it: the run went on past it
    evidence: dict[str, Any] = {
        "last_nccl_lines": [f"{n}: {t[:300]}" for n, t in nccl[-8:]],
        "nccl_info_lines": len(nccl),
    }
    if not any(_NCCL_DONE.search(t) for _, t in nccl):
        return Reading(
            "nccl_init_incomplete",
            f"NCCL set-up never completed: {len(nccl)} NCCL INFO set-up lines, no 'Init COMPLETE', and the log ends"
            " there (hung at NCCL init, or the excerpt is cut)",
            nccl[-1][0],
            evidence=evidence,
        )
    # Some ranks completed: a culprit only where the roster proves it (one communicator, nranks N,
    # every rank but one printed Init COMPLETE) and the log holds the other process too: two ranks
    # completed, or the missing rank's own init line (Init START, or <= 2.4's "comm %p rank %d nranks
    # %d ...") is there without its Init COMPLETE. One process's log (rank 0 of 2 complete, nothing of
    # rank 1) shows no other rank, so it says nothing of rank 1.
    done: dict[tuple[str, int], set[int]] = {}
    started: dict[tuple[str, int], set[int]] = {}
    for _, t in nccl:
        completed = _NCCL_DONE.search(t) is not None
        if (rn := comm_rank(t)) is not None and (completed or _NCCL_INIT_ONLY.search(t)):
            cid = m.group(1) if (m := _COMM_ID.search(t)) else ""
            (done if completed else started).setdefault((cid, rn[1]), set()).add(rn[0])
    short = [
        (n, ranks)
        for key, ranks in done.items()
        if len(ranks) == (n := key[1]) - 1 and (n >= 3 or set(range(n)) - ranks <= started.get(key, set()))
    ]
    if len(short) != 1:
        # No roster proves a culprit: the log still ends in NCCL set-up after the last Init COMPLETE,
        # a later communicator's init (its init-only lines) or channels connecting (at init before
        # 2.22, at a communicator's first collective since: NCCL_RUNTIME_CONNECT), with no rank named.
        # Or it ends at an Init COMPLETE while some communicator shows fewer ranks completing than it
        # has (the others never completed, or their lines are not in this log: nobody is named).
        last_done = max(i for i, (_, t) in enumerate(nccl) if _NCCL_DONE.search(t))
        after = [t for _, t in nccl[last_done + 1 :]]
        short_rosters = [(len(ranks), n) for (_, n), ranks in done.items() if len(ranks) < n]
        if any(_NCCL_INIT_ONLY.search(t) for t in after):
            what = "a communicator's init began after the last 'Init COMPLETE'"
        elif any(_NCCL_SETUP.search(t) for t in after):
            what = "channels were still connecting after the last 'Init COMPLETE'"
        elif short_rosters:
            k, n = short_rosters[0]
            what = f"only {k} of {n} ranks of a communicator printed 'Init COMPLETE'"
        else:
            return None
        return Reading(
            "nccl_init_incomplete",
            f"NCCL set-up never completed: {what} (line {nccl[last_done][0]}), and the log ends there"
            " (hung in NCCL set-up, or the excerpt is cut)",
            nccl[-1][0],
            evidence=evidence,
        )
    n, ranks = short[0]
    missing = next(r for r in range(n) if r not in ranks)
    return Reading(
        "nccl_init_incomplete",
        f"NCCL set-up never completed on rank {missing}: {n - 1} of {n} ranks printed 'Init COMPLETE', and the log"
        " ends in NCCL set-up",
        nccl[-1][0],
        suspect_ranks=(missing,),
        evidence={**evidence, "arrived_ranks": sorted(ranks)},
    )


# Lightning prints, on every process, right before torch's init_process_group (lightning/fabric/
# utilities/distributed.py _init_dist_connection, 2.x: "Initializing distributed: GLOBAL_RANK: {r},
# MEMBER: {r + 1}/{world_size}"; pytorch_lightning 1.x ddp plugins: "initializing ddp: ..."), and
# rank 0, once every process joined, "All distributed processes registered. Starting with {n}
# processes" (1.x: "All DDP processes registered. ...").
_PL_MEMBER = re.compile(r"[Ii]nitializing (?:ddp|distributed): GLOBAL_RANK: (\d{1,6}), MEMBER: (\d{1,6})/(\d{1,6})")
_PL_REGISTERED = re.compile(r"All (?:DDP|distributed) processes registered")


def _lightning_init(lines: list[tuple[int, str]]) -> Reading | None:
    """Fewer Lightning members announced their process-group init than its world size, and rank 0
    never said all registered: the others wait in init_process_group for the missing ones."""
    members: dict[int, set[int]] = {}
    last = 0
    for n, t in lines:
        if _PL_REGISTERED.search(t):
            return None
        if m := _PL_MEMBER.search(t):
            members.setdefault(int(m.group(3)), set()).add(int(m.group(1)))
            last = n
    short = [(w, seen) for w, seen in members.items() if len(seen) < w]
    if len(short) != 1:
        return None
    world, seen = short[0]
    missing = [r for r in range(world) if r not in seen]
    shown = ", ".join(map(str, missing[:8])) + (", ..." if len(missing) > 8 else "")
    return Reading(
        "lightning_init_incomplete",
        f"process-group init never completed: {len(seen)} of {world} Lightning members announced it"
        f" (never: rank {shown}) and rank 0 never printed 'All distributed processes registered'",
        last,
        # a suspect only when one member is missing (the roster then proves who everyone waits for)
        suspect_ranks=tuple(missing) if len(missing) == 1 else (),
        evidence={"arrived_ranks": sorted(seen), "world_size": world, "missing_ranks": missing},
    )


# torch/distributed/distributed_c10d.py _store_based_barrier (1.8-2.0, the barrier every new process group
# ran after init): each rank logs "Added key: store_based_barrier_key:{N} to store for rank: {rank}", then waits
# until all have, then logs "Rank {rank}: Completed store-based barrier for key:store_based_barrier_key:{N}
# with {world_size} nodes." A key added and never completed by anyone: the group's creation waits there.
_BARRIER_ADDED = re.compile(r"Added key: store_based_barrier_key:(\d+) to store for rank: (\d+)")
_BARRIER_DONE = re.compile(
    r"Completed store-based barrier for key:\s*store_based_barrier_key:(\d+)(?:\s+with (\d+) nodes)?"
)


def _store_barrier(lines: list[tuple[int, str]]) -> Reading | None:
    """The last store-based barrier key was added by some ranks and completed by none: process-group
    creation is stuck in it, waiting for the ranks that never added theirs."""
    added: dict[int, set[int]] = {}
    done: set[int] = set()
    world: int | None = None
    last_added = (0, -1)  # (line, key)
    for n, t in lines:
        if m := _BARRIER_DONE.search(t):
            done.add(int(m.group(1)))
            world = int(m.group(2)) if m.group(2) else world
        elif m := _BARRIER_ADDED.search(t):
            key = int(m.group(1))
            added.setdefault(key, set()).add(int(m.group(2)))
            last_added = (n, key)
    line, key = last_added
    if key < 0 or key in done or any(k > key for k in done):
        return None
    arrived = sorted(added[key])
    # a suspect only when the world size is known and exactly one rank is missing from the key
    missing = [r for r in range(world) if r not in added[key]] if world else []
    return Reading(
        "store_barrier_incomplete",
        f"process-group creation never completed: store-based barrier {key} was entered by rank"
        f"{'s' if len(arrived) != 1 else ''} {', '.join(map(str, arrived))} and completed by none"
        + (f" (of {world}; never entered: rank {', '.join(map(str, missing[:8]))})" if missing else ""),
        line,
        suspect_ranks=tuple(missing) if len(missing) == 1 else (),
        evidence={"barrier_key": key, "arrived_ranks": arrived, "world_size": world, "missing_ranks": missing},
    )


def _template(text: str) -> tuple[str, int] | None:
    """The message with its rank number as <R> and every other number as #, and the rank."""
    m = _RANK_IN_LINE.search(text)
    if m is None:
        return None
    return _NUMBER.sub("#", text[: m.start(1)]) + "<R>" + _NUMBER.sub("#", text[m.end(1) :]), int(m.group(1))


def _printers(tpl: str, lines: list[tuple[int, str]]) -> dict[int, tuple[int, str]]:
    """Every rank that printed this message anywhere in a line: terminal-wrap repair can join two
    ranks' lines into one, and a rank whose line was joined to another's still printed it."""
    pat = re.compile(re.escape(tpl).replace("\\#", r"\d+").replace("<R>", r"(\d{1,5})"))
    return {int(m.group(1)): (n, m.group(0)) for n, t in lines for m in pat.finditer(t)}


def _lockstep(lines: list[tuple[int, str]]) -> Reading | None:
    """A message every rank prints in turn: the ranks that did not print the last one fell behind."""
    printed: dict[str, dict[int, tuple[int, str]]] = {}
    order: list[str] = []
    for n, t in lines:
        tr = _template(t)
        if tr is None:
            continue
        tpl, rank = tr
        if tpl not in printed:
            printed[tpl] = {}
            order.append(tpl)
        printed[tpl][rank] = (n, t)
    steps = [tpl for tpl in order if len(printed[tpl]) >= 2]
    if len(steps) < 2:
        return None
    world = set().union(*(printed[tpl] for tpl in steps))
    last_tpl = max(steps, key=lambda tpl: max(n for n, _ in printed[tpl].values()))
    behind = sorted(world - _printers(last_tpl, lines).keys())
    if not behind or len(behind) * 2 > len(world):
        return None  # everyone printed it, or most did not: no lockstep to fall behind in
    last_by_rank: dict[str, str] = {}
    for tpl in order:
        for rank, (n, t) in printed[tpl].items():
            last_by_rank[str(rank)] = f"{n}: {t[:300]}"
    return Reading(
        "lockstep_ranks_behind",
        f"progress stopped: ranks {behind} never printed the message the other {len(world) - len(behind)} ranks"
        f" printed last ({last_tpl[:120]!r}); they are suspects, read from absence",
        max(n for n, _ in printed[last_tpl].values()),
        suspect_ranks=tuple(behind),
        evidence={"last_line_by_rank": dict(sorted(last_by_rank.items(), key=lambda kv: int(kv[0]))),
                  "world_ranks": sorted(world), "ranks_behind": behind},
    )  # fmt: skip


def _native_frame(text: str) -> str | None:
    """A native frame as "function (file:line)" / "function (module)", or None: not a native frame line."""
    m = _GDB_FRAME.match(text) or _LLDB_FRAME.match(text) or _PYSPY_NATIVE_FRAME.match(text)
    if m is None:
        return None
    func = m.group("func")
    name = n.group(0) if func and (n := _FUNC_NAME.match(func)) else "??"  # lldb prints a bare pc for no symbol
    where = m.group("loc") or m.groupdict().get("lib")
    return f"{name} ({where})" if where else name


def _stack_dump(lines: list[tuple[int, str]], rank_of_line: Mapping[int, int]) -> Reading | None:
    """Stack frames with no exception: a dump (py-spy, faulthandler, gdb, lldb, a cut traceback) of a
    live process; the rank whose prefix every frame line carries is the one dumped (a reporter, not a
    suspect: a stack that waits does not say whom it waits for)."""
    frames: list[tuple[int, str]] = []
    native: list[str] = []
    for n, t in lines:
        if m := _PYSPY_FRAME.match(t):
            frames.append((n, f"{m.group(1)} ({m.group(2)}:{m.group(3)})"))
        elif m := _PY_FRAME.match(t):
            frames.append((n, f"{m.group(3)} ({m.group(1)}:{m.group(2)})"))
        elif f := _native_frame(t):
            frames.append((n, f))
            native.append(f)
    if len(frames) < 2:
        return None
    waiting = [f for _, f in frames if _WAIT_FRAME.search(f)] or [
        t.strip() for _, t in lines if _WAIT_FRAME.search(t) and not _PY_FRAME.match(t)
    ]
    # Native dumps list the innermost frame first: where a caller waits too, it says what the process
    # waited for (torch's waitForFutureOrTimeout above a libstdc++ futex); Python tracebacks list the
    # outermost first, so only native frames get the caller.
    native_waits = [f for f in native if _WAIT_FRAME.search(f)]
    where = waiting[0][:100] if waiting else ""
    if len(native_waits) > 1 and native_waits[-1] != waiting[0]:
        where += f" under {native_waits[-1][:100]}"
    interrupted = any(INTERRUPTED.match(t) for _, t in lines)
    dumped = {rank_of_line.get(n) for n, _ in frames}
    rank = dumped.pop() if len(dumped) == 1 else None
    return Reading(
        "stack_dump_no_exception",
        ("the user interrupted (Ctrl-C) a process" if interrupted else "stack dump of a live process")
        + (f" (rank {rank})" if rank is not None else "")
        + f" with no exception ({len(frames)} frames)"
        + (f", waiting in {where}" if where else "")
        + ": the process was stuck, not crashed; the frames do not say which rank the others wait for",
        frames[0][0],
        evidence={"frames": [f for _, f in frames[:20]], "waiting_frames": waiting[:5]}
        | ({"reporting_ranks": [rank]} if rank is not None else {}),
    )


# nvidia-smi's device table, each GPU's second row: "| Fan  Temp  Perf  Pwr:Usage/Cap | Memory-Usage |
# GPU-Util  Compute M. |" ("| 41%   55C    P2   166W / 280W |  11510MiB / 24220MiB |     49%      Default |");
# the row above it starts with the GPU's index ("|   2  TITAN RTX   Off  | 00000000:3D:00.0 Off |"). nvidia-smi is
# closed source: the format is that of every driver since 375 (dev row e13a-026, driver 460; 535 the same).
_SMI_INDEX = re.compile(r"^\|\s+(\d{1,3})\s+\S")
# the device table's second row: fan, temperature, perf state, "Pwr:Usage/Cap" (watts, or N/A), memory, GPU-Util
_SMI_USAGE = re.compile(
    r"^\|\s*(?:\d+%|N/A)\s+(?:\d+C|N/A)\s+P\d+\s+(?:(?P<draw>\d+)W\s*/\s*(?P<cap>\d+)W\s*|[^|]*)"
    r"\|\s*(?P<used>\d+)MiB\s*/\s*\d+MiB\s*\|\s*(?P<util>\d+)%"
)
HELD_MIB = 1024  # a GPU holding at least this much memory has a training process on it
BUSY_PCT = 20  # utilization at which a GPU is running kernels (NCCL's waiting kernels spin at up to 100 %)
# GPU-Util is the share of time a kernel was resident (nvidia-smi(1)), not how hard it works: NCCL's kernels
# waiting for a peer spin on a flag in memory and keep it at 100 % while the board draws near its idle power
# (V100 ~40 of 300 W, A100 ~55 of 400 W, H100 ~70 of 700 W). Training at full utilization draws half its cap or
# more; a whole table at 90 % or more and at most 30 % of the cap is kernels that wait, not kernels that compute.
SPIN_UTIL_PCT = 90
SPIN_POWER_FRACTION = 0.30


def _span(rows: list[tuple[Any, ...]], i: int) -> str:
    lo, hi = min(r[i] for r in rows), max(r[i] for r in rows)
    return f"{lo}" if lo == hi else f"{lo}-{hi}"


# gpustat (wookayin/gpustat gpustat/core.py GPUStat.print_to, 1.x): "[{index}] {name} |{temp:>3}°C, [{fan:>3} %, ]
# {util:>3} %[ (E: .. D: ..)][,  {draw:>3} / {limit:>3} W] | {used:>5} / {total:>5} MB | user(40198M) ..." (the fan
# and power only with --show-fan / --show-power; a pasted degree sign may be lost)
# (The log's reader peels "[N] " off a line's start as a line counter: the index is then the number it peeled.)
_GPUSTAT_ROW = re.compile(
    r"^(?:\[(?P<index>\d{1,3})\] )?[^|\[]*\|\s*(?:\d+|\?\?)\W{0,2}C,\s+(?:(?:\d+|\?\?) %,\s+)?(?P<util>\d+) %(?: \([^)]*\))?"
    r"(?:,\s+(?P<draw>\d+)\s*(?:/\s*(?P<cap>\d+)\s*)?W)?\s*\|\s*(?P<used>\d+)\s*/\s*\d+ MB"
)
# nvidia-smi --query-gpu=<fields> --format=csv: a header naming each field with its unit in brackets
# ("index, name, utilization.gpu [%], memory.used [MiB], power.draw [W], power.limit [W]"), then one row per GPU
# ("0, NVIDIA A100-SXM4-80GB, 100 %, 40211 MiB, 85.12 W, 400.00 W"); nvidia-smi --help-query-gpu names the fields.
_SMI_CSV_FIELDS = {
    "index": "index",
    "utilization.gpu": "util",
    "memory.used": "used",
    "power.draw": "draw",
    "power.limit": "cap",
    "enforced.power.limit": "cap",
}
_NUMBER_IN_CELL = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(?:%|MiB|W)?\s*$")
# One GPU of a table: (line_no, index, MiB used, GPU-Util %, power draw / cap or None where not shown)
_GpuRow = tuple[int, int, int, int, float | None]


def _power_fraction(draw: str | None, cap: str | None) -> float | None:
    return float(draw) / float(cap) if draw and cap and float(cap) > 0 else None


def _smi_table_rows(lines: list[tuple[int, str]]) -> list[_GpuRow]:
    gpus: list[_GpuRow] = []
    index: int | None = None
    for n, t in lines:
        if m := _SMI_INDEX.match(t):
            index = int(m.group(1))
        elif (m := _SMI_USAGE.match(t)) and index is not None:
            gpus.append((n, index, int(m["used"]), int(m["util"]), _power_fraction(m["draw"], m["cap"])))
            index = None
    return gpus


def _gpustat_rows(lines: list[tuple[int, str]], peeled: Mapping[int, int]) -> list[_GpuRow]:
    gpus: list[_GpuRow] = []
    for n, t in lines:
        m = _GPUSTAT_ROW.match(t.strip())
        index = int(m["index"]) if m and m["index"] else peeled.get(n) if m else None
        if m and index is not None:
            gpus.append((n, index, int(m["used"]), int(m["util"]), _power_fraction(m["draw"], m["cap"])))
    return gpus


def _smi_csv_rows(lines: list[tuple[int, str]]) -> list[_GpuRow]:
    gpus: list[_GpuRow] = []
    columns: dict[str, int] = {}  # field -> its column, from the header last seen
    width = 0
    for n, t in lines:
        cells = [c.strip() for c in t.split(",")]
        names = [c.split(" [", 1)[0] for c in cells]
        if "utilization.gpu" in names and "memory.used" in names:
            columns = {_SMI_CSV_FIELDS[c]: i for i, c in enumerate(names) if c in _SMI_CSV_FIELDS}
            width = len(cells)
            continue
        if not columns or len(cells) != width:
            columns = {} if gpus else columns
            continue
        got = {k: _NUMBER_IN_CELL.match(cells[i]) for k, i in columns.items()}
        if got["util"] is None or got["used"] is None:
            continue
        draw, cap = got.get("draw"), got.get("cap")
        power = _power_fraction(draw[1] if draw else None, cap[1] if cap else None)
        index = int(float(got["index"][1])) if got.get("index") else len(gpus)
        gpus.append((n, index, int(float(got["used"][1])), int(float(got["util"][1])), power))
    return gpus


def _gpu_table_idle(lines: list[tuple[int, str]], peeled: Mapping[int, int]) -> Reading | None:
    """A GPU table (nvidia-smi's device table, gpustat's lines, nvidia-smi --query-gpu's CSV) in which every
    GPU holds a process's memory and some or all run no kernel. Some idle, some busy: in a job stuck in a
    collective the ranks that entered it spin in NCCL's kernels and the one that never arrived sits idle. All
    idle: the processes are alive and wait on the host side. (Either way the snapshot may have fallen between
    two steps: a lead, not proof.) peeled: the number a line's "[N] " prefix had (gpustat's GPU index)."""
    gpus = _smi_table_rows(lines) or _gpustat_rows(lines, peeled) or _smi_csv_rows(lines)
    held = [g for g in gpus if g[2] >= HELD_MIB]
    if len(held) >= 2 and (r := _gpu_missing_between(gpus, held)) is not None:
        return r
    if len(held) < 2 or len(held) < len(gpus):
        return None
    idle = [g[1] for g in held if g[3] == 0]
    busy = [g[1] for g in held if g[3] >= BUSY_PCT]
    evidence = {"gpu_util_pct": {str(g[1]): g[3] for g in held}, "gpu_memory_used_mib": {str(g[1]): g[2] for g in held}}
    if all(g[3] >= SPIN_UTIL_PCT and g[4] is not None and g[4] <= SPIN_POWER_FRACTION for g in held):
        evidence["gpu_power_fraction_of_cap"] = {str(g[1]): round(g[4] or 0.0, 2) for g in held}
        return Reading(
            "gpu_table_busy_at_idle_power",
            f"every GPU ({', '.join(str(g[1]) for g in held)}) holds a process's memory and shows {_span(held, 3)} %"
            f" utilization while drawing at most {round(100 * max(g[4] or 0.0 for g in held))} % of its power cap,"
            " no error printed: kernels spinning while they wait (NCCL's, for a peer that never came), not computing",
            held[0][0],
            evidence=evidence,
        )
    if len(idle) == len(held):
        # every process alive (each GPU holds its memory) and none running a kernel: they wait on the host
        # side (a data loader, a store or rendezvous wait, a CPU collective), not in NCCL's spinning kernels
        return Reading(
            "gpu_table_all_idle_holding_memory",
            f"every GPU ({', '.join(map(str, idle))}) holds a process's memory and runs nothing (0 %), no error"
            " printed: the processes are alive and wait on the host side (or the snapshot fell between steps)",
            held[0][0],
            evidence=evidence,
        )
    if not idle or not busy:
        return None
    return Reading(
        "gpu_table_idle_while_others_busy",
        f"GPU {', '.join(map(str, idle))} idle (0 %) while holding memory and GPU {', '.join(map(str, busy))} busy, "
        "no error printed: one process stuck outside the collective the others wait in (the index is a device, "
        "not a rank)",
        held[0][0],
        evidence=evidence,
    )


EMPTY_MIB = 128  # a GPU holding at most this much runs no training process (a display server, the driver's own)


def _gpu_missing_between(gpus: list[_GpuRow], held: list[_GpuRow]) -> Reading | None:
    """A table in which GPUs hold a training process's memory on both sides of one that holds none: the process
    meant for that GPU is gone (exited, or never reached the GPU) while the others hold theirs and wait for it.
    Only a gap counts: a job given fewer GPUs than the host has leaves the last ones empty, not one in between."""
    top = max(g[1] for g in held)
    gap = [g for g in gpus if g[2] <= EMPTY_MIB and min(h[1] for h in held) < g[1] < top]
    if not gap:
        return None
    return Reading(
        "gpu_table_gpu_without_process",
        f"GPU {', '.join(str(g[1]) for g in gap)} holds no process's memory ({', '.join(f'{g[2]} MiB' for g in gap)})"
        f" while GPU {', '.join(str(g[1]) for g in held)} on either side hold one, no error printed: the process of"
        " that GPU is gone (exited, or never reached the GPU) and the others wait for it (the index is a device,"
        " not a rank)",
        gap[0][0],
        evidence={
            "gpu_memory_used_mib": {str(g[1]): g[2] for g in gpus},
            "gpu_util_pct": {str(g[1]): g[3] for g in gpus},
            "gpus_without_process": [g[1] for g in gap],
        },
    )


# tqdm/std.py format_meter: before the first iteration finishes there is no rate, so the bar's right part is
# "[{elapsed}<?, ?{unit}/s]" ("0/4887 [00:00<?, ?it/s]"); any finished iteration prints a rate instead.
_TQDM_NOTHING_DONE = re.compile(r"(?<![\d.])0/(\d+) \[[\d:]{4,9}<\?, \?[^\s\]/]{0,20}/s\]")


def _first_step_pending(raw_tail: Sequence[tuple[int, str]]) -> Reading | None:
    """The log ends on tqdm bars at 0 of N with no rate yet: nothing after them, so the first step never
    finished while the log was kept (stuck in the first forward or collective, or cut at start-up)."""
    bars = []
    for n, t in reversed(raw_tail):
        m = _TQDM_NOTHING_DONE.search(t.rsplit("\r", 1)[-1])
        if not m:
            break
        bars.append((n, m.group(0)))
    if not bars:
        return None
    return Reading(
        "first_step_never_finished",
        "the log ends on progress bars at 0 of "
        + ", ".join(b.split("/")[1].split(" ")[0] for _, b in reversed(bars))
        + " with no rate yet (tqdm's '?it/s'), no error printed: the first step never finished",
        bars[-1][0],
        evidence={"progress_bars": [b for _, b in reversed(bars)]},
    )


# nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv (nvidia-smi(1)): the header "pid,
# process_name, used_gpu_memory [MiB]", then a row per process, "12345, /usr/bin/python3, 40000 MiB" (no GPU index).
_SMI_APPS_CSV = re.compile(r"^\s*(\d{2,8}),\s*([^,\n]*[A-Za-z][^,\n]*?),\s*(\d+) MiB\s*$")
# nvidia-smi pmon (nvidia-smi(1) "pmon": "# gpu pid type sm mem enc dec [jpg ofa] [fb] command", one row per process
# per GPU, "-" where a value is not sampled; a GPU with no process is a row of "-"): a process on a GPU.
_SMI_PMON_ROW = re.compile(r"^\s*(\d{1,3})\s+(\d{2,8})\s+[CGM][+CGM]{0,2}\s+(?:(?:\d+|-)\s+){2,8}([^\s\d-]\S*)\s*$")


def _gpu_processes(lines: list[tuple[int, str]]) -> Reading | None:
    """A GPU process table with no error: the training processes are alive and hold their memory."""
    rows = [(n, m.groups()) for n, t in lines for m in _GPU_PROC.finditer(t)]
    rows += [(n, ("?", *m.groups())) for n, t in lines if (m := _SMI_APPS_CSV.match(t))]
    rows += [(n, (*m.groups(), None)) for n, t in lines if (m := _SMI_PMON_ROW.match(t))]  # pmon shows no MiB
    if len(rows) < 2:
        return None
    return Reading(
        "gpu_processes_resident",
        f"{len(rows)} processes still hold GPU memory and no error was printed: the job is stuck (or left"
        " orphans), not crashed",
        rows[0][0],
        evidence={
            "gpu_processes": [
                f"GPU {gpu} pid {pid} {name}" + (f" {mib} MiB" if mib is not None else "")
                for _, (gpu, pid, name, mib) in rows[:16]
            ]
        },
    )


# Progress counters that name their total, as the frameworks print them:
# - tqdm (tqdm/std.py format_meter, 4.x): "{l_bar}{bar}| {n_fmt}/{total_fmt} [{elapsed}<{remaining},
#   {rate_fmt}{postfix}]", redrawn in place with "\r" (so several states share one raw line);
# - Keras Progbar (keras-team/keras keras/src/utils/progbar.py update, verbose=1): "%{numdigits}d/%d"
#   then the bar, the ETA or elapsed time and "{t}s/step" / "ms/step"; "%7d/Unknown" when the total is
#   not known (a dataset of unknown length); tf.keras 2.x put " - " before the time and "[==>...]" as bar
#   (not anchored at the line's start: a launcher's or CI runner's prefix may come before it);
# - Megatron-LM (megatron/training/training.py training_log): " iteration {:8d}/{:8d} |".
# - OpenMMLab: mmcv 1.x TextLoggerHook (mmcv/runner/hooks/logger/text.py _log_info) "Epoch [{epoch}][{iter}/{len}]"
#   and "Iter [{iter}/{max_iters}]"; mmengine LogProcessor (mmengine/runner/log_processor.py get_log_after_iter)
#   "Epoch({mode}) [{epoch}][{iter}/{len}]" (epoch and iter right-aligned with spaces) and "Iter({mode}) [{iter}/{max}]":
#   the iteration within the epoch (or of the run) and its total;
# - Chainer's ProgressBar (chainer/training/extensions/util.py, 4.x to 7.x; pytorch-pfn-extras' copy): "{:10} iter,
#   {} epoch / {} epochs" (training length in epochs) or "... / {} iterations" (in iterations), redrawn in place.
_TQDM_COUNTER = re.compile(r"(?<![\d.])(\d+)/(\d+) \[[\d:]{4,9}<[\d:?]{1,9},")
_KERAS_COUNTER = re.compile(
    r"(?<![\w/.:-])(\d+)/(\d+|Unknown)\s(?:[\s\u2501=>.\[\]-]|\x1b\[[\d;]*m){0,200}?"
    r"(?:ETA: [\d:]+s?|\d+s)\b[^\n]{0,40}?(?:\d+(?:s|ms|us)/(?:step|sample)|\s-\s\w+:|$)"
)
_MEGATRON_COUNTER = re.compile(r"\biteration\s+(\d+)/\s*(\d+)\s*\|")
_OPENMMLAB_COUNTER = re.compile(r"\b(?:Epoch|Iter)(?:\((?:train|val|test)\))?\s*(?:\[\s*\d+\]\s*)?\[\s*(\d+)/(\d+)\]")
_CHAINER_EPOCHS = re.compile(r"\b\d+ iter, (\d+) epoch / (\d+) epochs\b")
_CHAINER_ITERATIONS = re.compile(r"\b(\d+) iter, \d+ epoch / (\d+) iterations\b")
_COUNTERS = (_TQDM_COUNTER, _KERAS_COUNTER, _MEGATRON_COUNTER, _OPENMMLAB_COUNTER, _CHAINER_EPOCHS, _CHAINER_ITERATIONS)


# A log's end, where the readings of a log on its own look (a counter, a wait, the ^C echo, set-up lines, failure
# words): its last three lines. A heartbeat, a health check or a prompt may follow what stopped; a run that went on
# printing other things (a checkpoint save, an evaluation) stopped in those, not in what came before them.
END_LINES = 3


def _last_counter(raw_tail: Sequence[tuple[int, str]]) -> tuple[int, str, int, int | None] | None:
    """The last progress counter among the log's last raw lines: (line_no, its text, n, total or None)."""
    for n, t in reversed(raw_tail[-END_LINES:]):
        found = [m for pat in _COUNTERS for m in pat.finditer(t)]
        if found:
            m = max(found, key=lambda m: m.start())  # the last state a redrawn bar showed
            total = None if m.group(2) == "Unknown" else int(m.group(2))
            return n, m.group(0).strip(), int(m.group(1)), total
    return None


def _outer_loop_short(raw_tail: Sequence[tuple[int, str]], before_line: int) -> bool:
    """A counter short of its known total among the raw tail's lines before `before_line`: the loop that finished
    at the end was an inner one (a rollout's or an evaluation's bar under the trainer's bar of steps), and the run
    was still in the outer loop."""
    return any(
        int(m.group(2)) > int(m.group(1))
        for n, t in raw_tail
        if n < before_line
        for pat in _COUNTERS
        for m in pat.finditer(t)
        if m.group(2) != "Unknown"
    )


def _counter_short_of_total(raw_tail: Sequence[tuple[int, str]]) -> Reading | None:
    """The log's last progress counter stands short of its total (or of a total it does not know):
    the loop was running, and the log ends there with no error and no normal end."""
    last = _last_counter(raw_tail)
    if last is None:
        return None
    line_no, counter, n, total = last
    if total is not None and n >= total:
        return None  # the loop finished; what came after it is not a stalled loop
    return Reading(
        "progress_stopped_short",
        f"progress stopped at {n}/{total if total is not None else '?'} ({counter[:120]!r}): the log ends there with"
        " no error and no normal end, so the loop stopped (hung, or killed without a message) or the excerpt"
        " was cut while it ran",
        line_no,
        evidence={"last_progress": counter[:300], "progress_n": n, "progress_total": total},
    )


# The last thing a process said was that it waits ("Waiting for GPU driver libraries to be available.",
# vLLM's "Waiting for output from MQLLMEngine."): the application's own words, any printer.
# A timeout "waiting for" something is a failure already reported, not a wait still going on.
_WAITING = re.compile(r"(?<![Tt]imeout )(?<![Tt]imed out )\b[Ww]aiting (?:for|on|until)\b")


def _waiting_at_end(raw_tail: Sequence[tuple[int, str]]) -> Reading | None:
    """A wait among the log's last lines with nothing after it that says the wait ended."""
    for n, t in reversed(raw_tail[-END_LINES:]):
        text = t.rsplit("\r", 1)[-1].strip()
        if _WAITING.search(text):
            return Reading(
                "log_ends_waiting",
                f"the log ends waiting ({text[:160]!r}, line {n}) with no error after it: what it waited for"
                " never came (or the excerpt was cut there)",
                n,
                evidence={"waiting_line": text[:300]},
            )
    return None


# strace(1) writes a system call's name and arguments when the call starts and ") = RESULT" when it returns; a call
# still running when the trace stopped (or when another thread's call cut in: "<unfinished ...>") has no result.
# The calls a process blocks in: futex (a lock or a condition: Python's GIL, a thread join, a CUDA/NCCL host wait),
# poll/epoll/select (sockets: a store, a peer), wait4/waitid (a child), read/recv (a pipe or socket), ioctl (the GPU
# driver), nanosleep.
_STRACE_BLOCKED = re.compile(
    r"^(?:\[pid\s+\d+\]\s+|\d+\s+)?(?:\d\d:\d\d:\d\d(?:\.\d+)?\s+)?"
    r"(?P<call>futex|poll|ppoll|epoll_wait|epoll_pwait2?|select|pselect6|wait4|waitid|read|recvfrom|recvmsg|accept4?"
    r"|connect|ioctl|nanosleep|clock_nanosleep)\((?P<args>.*?)(?:\s*<unfinished \.\.\.>)?\s*$"
)


def _strace_blocked_at_end(lines: list[tuple[int, str]]) -> Reading | None:
    """An strace whose last line is a blocking system call with no result: the process is in it still."""
    n, t = lines[-1] if lines else (0, "")
    m = _STRACE_BLOCKED.match(t.strip())
    if m is None or re.search(r"\)\s+=\s+\S", m["args"]):
        return None
    return Reading(
        "strace_ends_in_blocking_call",
        f"the trace ends inside {m['call']}() with no result ({t.strip()[:120]!r}): the process is blocked in that"
        " call (a lock or condition for futex, a socket or peer for poll/read, the GPU driver for ioctl), not crashed",
        n,
        evidence={"blocking_call": t.strip()[:300]},
    )


def _interrupted_at_end(lines: list[tuple[int, str]]) -> Reading | None:
    """The terminal's echo of Ctrl-C ("^C", a record of its own: log_records.clean_lines) among the log's last
    lines (the window of a wait: a user who stops a run stops waiting for it), with no failure line anywhere:
    stopped by hand."""
    for n, t in reversed(lines[-END_LINES:]):
        if _CTRL_C.match(t):
            return Reading(
                "log_ends_interrupted",
                f"the run was stopped by hand (the terminal's '^C', line {n}) with no failure line before it: most"
                " often a stall someone gave up on",
                n,
                evidence={"interrupted_line": t.strip()[:300]},
            )
    return None


# Set-up lines, each printed once while a job starts, in the order a start goes through them. A log handed
# over on its own that ends in them, with no step after, stopped there. Two stages:
# - joining the process group (init_process_group / the rendezvous has not returned: every rank waits there
#   for the ones that never joined):
#   torch/csrc/distributed/c10d/socket.cpp (1.11+): "[c10d] The client socket has connected to {} on {}.",
#   "... will attempt to connect to an IPv6 address of ...", "[c10d - trace] The client socket is attempting
#   to connect to ...", "The client socket cannot be initialized to connect to ...", "The server socket has
#   started to listen on ...", "The server socket cannot be initialized on ...";
#   torch/distributed/elastic/agent/server/api.py (1.9-1.13) "[default] Rendezvous'ing worker group";
#   elastic/rendezvous/dynamic_rendezvous.py next_rendezvous "The node '{}' attempts to join the next round of
#   the rendezvous '{}'."; distributed_c10d.py _store_based_barrier "Added key: store_based_barrier_key:{} to
#   store for rank: {}", "Waiting in store based barrier to initialize process group for rank: {}, ...";
#   DeepSpeed deepspeed/comm/comm.py init_distributed "cdb=None", "Initializing TorchBackend in DeepSpeed with
#   backend {}"; Megatron-LM megatron/training/initialize.py _initialize_distributed "> initializing torch
#   distributed ..."; Lightning _init_dist_connection "Initializing distributed: GLOBAL_RANK: ..." (its
#   roster is read by _lightning_init); JAX jax/_src/distributed.py "Starting JAX distributed service on {}",
#   "Connecting to JAX distributed service on {}".
# - joined, the first step not done (stuck in the first collective or step, or in what comes before it):
#   NCCL's INFO lines (its communicators are made at the group's first collective, or eagerly), "Init
#   COMPLETE" last; api.py "[{role}] Rendezvous complete for workers. Result:"; dynamic_rendezvous.py "The
#   node '{}' has joined round {} of the rendezvous '{}' as rank {} in a world of size {}."; distributed_c10d.py
#   "Rank {}: Completed store-based barrier for key:{} with {} nodes."; Lightning "All distributed processes
#   registered. Starting with {} processes" (1.x "All DDP processes registered."); Megatron-LM
#   parallel_state "> initialized tensor model parallel with size {}" (older "> initializing ..."),
#   training.py "training ..." and print_datetime "[before the start of training step] datetime: {}";
#   transformers trainer.py _inner_training_loop "***** Running training *****" and its "  Num Epochs = ",
#   "  Total optimization steps = ", "  Number of trainable parameters = " lines; torch/nn/parallel/
#   distributed.py DistributedDataParallel._pre_forward (1.7+; mmcv's MMDistributedDataParallel the same through
#   its logger) "Reducer buckets have been rebuilt in this iteration." (once, in the second iteration's forward:
#   the first steps began and none was printed after it); OpenMMLab's runners right before their loop: mmcv 1.x
#   EpochBasedRunner/IterBasedRunner.run "workflow: %s, max: %d epochs" ("... iters"), mmengine CheckpointHook
#   .before_train "Checkpoints will be saved to {}."; detectron2 engine/train_loop.py TrainerBase.train "Starting
#   training from iteration {}".
# NCCL_DEBUG_SUBSYS=COLL's "NCCL INFO AllReduce: opCount ..." lines are collectives called, not set-up.
_JOINING = re.compile(
    r"\[c10d(?: - \w+)?\] The (?:client|server) socket (?:has connected to|will attempt to connect|is attempting to"
    r" connect|cannot be initialized|has started to listen)"
    r"|Rendezvous'ing worker group|attempts to join the next round of the rendezvous"
    r"|Added key: store_based_barrier_key|Waiting in store based barrier"
    r"|init_distributed\] cdb=None|Initializing TorchBackend in DeepSpeed"
    r"|^> initializing torch distributed\b|[Ii]nitializing (?:ddp|distributed): GLOBAL_RANK:"
    r"|(?:Connecting to|Starting) JAX distributed service on"
)
_JOINED = re.compile(
    r"\bNCCL INFO (?!\w+: opCount)|Rendezvous complete for workers|has joined round \d+ of the rendezvous"
    r"|Completed store-based barrier for key|All (?:DDP|distributed) processes registered"
    r"|^> initializ(?:ed|ing) (?:tensor|pipeline)[\w ]{0,20} parallel with size|^training \.\.\.\s*$"
    r"|\[before the start of training step\] datetime:"
    r"|\*{5} Running training \*{5}|\b(?:Num Epochs|Total optimization steps|Number of trainable parameters) = [\d,]+"
    r"|Reducer buckets have been rebuilt in this iteration"
    # gloo's full mesh formed (gloo/rendezvous/context.cc Context::connectFullMesh, 2024+: "[Gloo] Rank %d is connected
    # to %d peer ranks. Expected number of connected peer ranks is : %d"); vLLM's parallel groups assigned
    # (vllm/distributed/parallel_state.py initialize_model_parallel: "rank %s in world size %s is assigned as DP rank
    # %s, PP rank %s, ..."); DeepSpeed ZeRO-3's engine set-up past the group (deepspeed/runtime/zero/
    # parameter_offload.py: "Parameter Offload - Persistent parameters statistics: param_count = ..., numel = ...")
    r"|\[Gloo\] Rank \d+ is connected to \d+ peer ranks|\brank \d+ in world size \d+ is assigned as DP rank"
    r"|Parameter Offload - Persistent parameters statistics"
    r"|\bworkflow: \[.{0,200}\], max: \d+ (?:epochs|iters)\b|\bCheckpoints will be saved to \S|Starting training from iteration \d+"
)
# A line that says a step, an iteration, an epoch or a loss: the run got past its set-up.
_STEPPED = re.compile(
    r"\b(?:loss|step|iter(?:ation)?s?|epoch|it/s|s/it|samples?/s(?:ec)?|tokens?/s(?:ec)?|throughput|tflops)\b", re.I
)
_KEY_VALUE = re.compile(r"^\s*\w+=\S")
_SAYS_SOMETHING = re.compile(
    r"^(?:\[\w+\]|(?!\[\w+\])).*?[A-Za-z]{2}"
)  # a word beyond a leading level tag ("[INFO] ----")


def _ends_in_set_up(lines: list[tuple[int, str]]) -> Reading | None:
    """A log on its own that ends in its run's set-up lines (or a few lines after the last one, none of them
    a step): the run stopped while joining the process group (a rendezvous that never completed), or after
    it, before the first step finished."""
    last: int | None = None
    for i in range(len(lines) - 1, -1, -1):
        t = lines[i][1]
        if _JOINING.search(t) or _JOINED.search(t):
            last = i
            break
        # an indented or "key=value" line continues the one above it (torchelastic's "Result:" block, a
        # warning's source line); a rule of dashes or '=' says nothing
        if not t[:1].isspace() and not _KEY_VALUE.match(t) and _SAYS_SOMETHING.search(t):
            if len(lines) - 1 - i >= END_LINES or _STEPPED.search(t):
                return None
    if last is None:
        return None
    n, t = lines[last]
    joining = _JOINING.search(t) is not None
    stage = (
        "while joining the process group (the rendezvous or init_process_group never returned: it waits for"
        " the ranks that did not join)"
        if joining
        else "after its set-up, before a first step was printed (stuck in the first collective or step)"
    )
    return Reading(
        "log_ends_in_set_up",
        f"the log ends in its run's set-up ({t.strip()[:160]!r}, line {n}) with no error and no step after it:"
        f" the run stopped {stage}, or the excerpt was cut there",
        n,
        evidence={"last_set_up_line": t.strip()[:300], "stage": "joining" if joining else "joined"},
        kind=K.RENDEZVOUS_ERROR if joining else K.HUNG_COLLECTIVE,
    )


# A line announcing a piece of set-up work as it begins ("Initializing checkpoint manager", "Loading checkpoint
# shards", "Setting up optimizer with config ...", "Instantiating PipeStageExecutor", "creating communicator"): the
# present participle of the set-up verbs every framework logs before its loop, after a logger's prefix or at the start.
_SET_UP_BEGUN = re.compile(
    r"(?:^|[\s\]>:|-])(?:[Ii]nitiali[sz]ing|[Ii]nstantiating|[Ll]oading|[Bb]uilding|[Cc]reating|[Ss]etting up"
    r"|[Ss]ynchroni[sz]ing|[Cc]onnecting|[Ss]tarting|[Ll]aunching|[Pp]reparing|[Cc]ompiling|[Ww]arming up)\b"
)


def _set_up_begun_at_end(lines: list[tuple[int, str]]) -> Reading | None:
    """A log on its own whose last lines announce a piece of set-up work begun, with no step and no line after it
    saying it finished: the run stopped there (a communicator, a checkpoint, a dataset that never came), or the
    excerpt was cut there. As for `_ends_in_set_up`'s markers, what came before (a healthy start, earlier steps)
    does not matter: where the log ends does. A line that names a step, an epoch or a loss is progress, not set-up
    ("Starting epoch 3"). The markers name the stage; this reads the run's own words where no marker is printed."""
    # the last line that is a step or announces set-up work, among the last few: set-up work, not a step
    last = next(
        ((n, t) for n, t in reversed(lines[-END_LINES:]) if _STEPPED.search(t) or _SET_UP_BEGUN.search(t[:300])), None
    )
    if last is None or _STEPPED.search(last[1]):
        return None
    n, t = last
    return Reading(
        "log_ends_in_set_up",
        f"the log ends as its run begins a piece of set-up ({t.strip()[:160]!r}, line {n}), with no step and no"
        " line saying it finished: the run stopped in its set-up (a communicator, a checkpoint, a dataset that never"
        " came), or the excerpt was cut there",
        n,
        evidence={"last_set_up_line": t.strip()[:300], "stage": "set-up begun"},
        kind=K.HUNG_COLLECTIVE,
    )


# A shell prompt with nothing after it ("user@node:~/run$ ", "root@host:/# ", "(venv) $ "): the shell came back, so the
# process the log is of exited (bash's default PS1 '\u@\h:\w\$ ', zsh's '%n@%m %~ %# ').
_PROMPT_AT_END = re.compile(r"^\s*(?:\(\S+\)\s*)?(?:[\w.-]+@[\w.-]+(?::\S*|\s+\S+)?\s*)?[$#%>]\s*$")


def stopped_mid_run(lines: list[tuple[int, str]], raw_tail: Sequence[tuple[int, str]]) -> Reading | None:
    """The weakest reading, after every other (read_progress's, and the failure words of the log's last lines:
    collectors/logs.py): a log on its own from a run at work (a step, an epoch, a loss or a rate printed, or its
    set-up) that ends with no error line and no normal end, on an ordinary line ("Saving model checkpoint to ...",
    "***** Running Evaluation *****", "begin training epoch 2", a step). A log handed to `diagnose` on its own is
    where its run stopped printing, and a run that stops printing with nothing said stopped there: hung (most often,
    in a collective or its I/O), or killed without a message, or the excerpt was cut, as the summary says. Not where
    the shell's prompt came back after it (the process exited) or its last progress counter stands at its total (the
    loop finished)."""
    lines = [(n, t) for n, t in lines if t.strip()]
    if not lines or any(_NORMAL_END.search(t) for _, t in lines):
        return None
    at_work = next(
        (
            (n, t)
            for n, t in reversed(lines)
            if _STEPPED.search(t) or _SET_UP_BEGUN.search(t[:300]) or _JOINING.search(t) or _JOINED.search(t)
        ),
        None,
    )
    if at_work is None or _PROMPT_AT_END.match(lines[-1][1]):
        return None
    last = _last_counter(raw_tail)
    if last is not None and last[3] is not None and last[2] >= last[3] and not _outer_loop_short(raw_tail, last[0]):
        return None
    n, t = lines[-1]
    work_n, work = at_work
    where = "" if work_n == n else f", work last at line {work_n}"
    return Reading(
        "log_ends_mid_run",
        f"the log ends mid-run on {t.strip()[:80]!r} (line {n}{where}) with no error and no normal end: the run"
        " stopped there (hung, or killed without a message), or the excerpt was cut",
        n,
        evidence={"last_line": t.strip()[:300], "last_work_line": work.strip()[:300]},
    )


# A process listing of the training's own processes, none of them a zombie or in D (those are
# signatures: collectors/log_signatures/processes.py), each row in its printer's columns:
# - procps-ng top (src/top/top.c Fieldstab, default fields): PID USER PR NI VIRT RES SHR S %CPU %MEM TIME+ COMMAND;
# - procps-ng ps aux (ps/output.c, the BSD "u" format): USER PID %CPU %MEM VSZ RSS TTY STAT START TIME COMMAND;
# - psmisc pstree -p (src/pstree.c out_args / print_tree): "name(pid)" joined by line-drawing glyphs
#   ("─┬─", "├─", "└─", or ASCII "-+-", "|-", "`-"), threads in braces "{name}(tid)".
_TRAINER = r"(?:python[\d.]*|torchrun|deepspeed|accelerate|mpirun|horovodrun|srun|ray::\S+)"
_TOP_ROW = re.compile(
    rf"^\s*(?P<pid>\d+)\s+\S+\s+(?:-?\d+|rt)\s+-?\d+\s+\S+\s+\S+\s+\S+\s+(?P<state>[RSDTtIZ])\s+(?P<cpu>[\d.]+)\s+[\d.]+"
    rf"\s+[\d:.]+\s+(?P<cmd>{_TRAINER})\b"
)
_PS_AUX_ROW = re.compile(
    rf"^\S+\s+(?P<pid>\d+)\s+(?P<cpu>[\d.]+)\s+[\d.]+\s+\d+\s+\d+\s+\S+\s+(?P<state>[RSDTtIZ]\S*)\s+\S+\s+\S+\s+"
    rf"(?:\S*/)?(?P<cmd>{_TRAINER})\b"
)
# procps-ng ps -ef (ps/output.c, the "-f" full format): UID PID PPID C STIME TTY TIME CMD (no state column; C is the
# CPU use, an integer percent)
_PS_EF_ROW = re.compile(
    rf"^\S+\s+(?P<pid>\d+)\s+\d+\s+(?P<cpu>\d{{1,4}})\s+[\w:.]+\s+(?:\?|pts/\d+|tty\w*)\s+(?:\d+-)?[\d:]+\s+"
    rf"(?:\S*/)?(?P<cmd>{_TRAINER})\b"
)
_PSTREE_NODE = re.compile(rf"(?:[\u2500-\u257f]|[-+|`]-)(?P<cmd>{_TRAINER})\((?P<pid>\d+)\)")
# procps-ng ps -o / -eo with columns of the user's choosing (ps(1) "STANDARD FORMAT SPECIFIERS"): the pid first, a
# STAT column (ps(1) "PROCESS STATE CODES": one of D I R S T t W X Z, then the BSD flags < N L s l +) somewhere
# before the command (ps -eo pid,ppid,stat,etime,cmd).
_PS_COLUMNS_ROW = re.compile(
    rf"^\s*(?P<pid>\d+)\s+(?:[\w:.%/-]+\s+){{0,6}}?(?P<state>[DIRSTtWXZ][<NLsl+]{{0,5}})\s+(?:[\w:.%/-]+\s+){{0,6}}?"
    rf"(?:\S*/)?(?P<cmd>{_TRAINER})\b"
)
# psmisc fuser -v (src/fuser.c print_matches): "NAME:" on the first process's line, then the user (" %-8s "), the pid
# ("%6d") and the access (" %c%c%c%c%c ": [fF.] open for reading / writing, [r.] root, [c.] cwd, [e.] executable,
# [m.] mapped) before the command: a process holding the file (fuser -v /dev/nvidia*: a GPU's device).
_FUSER_ROW = re.compile(rf"^(?:\S+:)?\s+\S+\s+(?P<pid>\d+)\s+[fF.][r.][c.][e.][m.]\s+(?:\S*/)?(?P<cmd>{_TRAINER})\b")
_PROCESS_ROWS = (_TOP_ROW, _PS_AUX_ROW, _PS_EF_ROW, _PS_COLUMNS_ROW, _FUSER_ROW)


def _training_processes_listed(lines: list[tuple[int, str]]) -> Reading | None:
    """Two or more of the training's processes in a process listing and no error printed: they are
    alive (stuck, or not finished when it was taken), not crashed."""
    rows: list[tuple[int, str, str]] = []  # line_no, pid, what the listing says of it
    for n, t in lines:
        if m := next((m for pattern in _PROCESS_ROWS if (m := pattern.match(t))), None):
            said = m.groupdict()
            state = f" state {said['state']}" if said.get("state") else ""
            cpu = f" {said['cpu']}% CPU" if said.get("cpu") else ""
            rows.append((n, m.group("pid"), f"{m.group('cmd')} pid {m.group('pid')}{state}{cpu}"))
        else:
            rows += [(n, m.group("pid"), f"{m.group('cmd')} pid {m.group('pid')}") for m in _PSTREE_NODE.finditer(t)]
    pids = len({pid for _, pid, _ in rows})
    if pids < 2:
        return None
    return Reading(
        "training_processes_listed",
        f"{pids} training processes are alive in a process listing and no error was printed: the job is stuck"
        " (or was still running when it was taken), not crashed",
        rows[0][0],
        evidence={"processes": [what for _, _, what in rows[:16]]},
    )


# NVIDIA/nccl-tests (src/common.cu run/threadRunTests, src/util.cu writeBenchmarkLine*): a header
# "# nThread %d nGpus %d minBytes %zu maxBytes %zu step: ..." (rccl-tests: "# nThreads: %d nGpus: %d nRanks:
# %d minBytes: ..."), "# Using devices" and one "#  Rank %2d Group %2d Pid %6d on %10s device %2d [%s] %s"
# line per rank, the column header "#       size         count      type   redop    root     time   algbw
# busbw #wrong ...", one row per size ("%12li  %12li  %8s  %6s  %6s" then time, algbw, busbw, #wrong, twice),
# and at the end "# Out of bounds values : %d %s" and "# Avg bus bandwidth    : %g". A test whose output
# stops before its end line, with no error, is stuck in the collective of the size after its last row.
_COLL_TEST_HEADER = re.compile(r"^#\s*nThreads?:? \d+ nGpus:? \d+\b.*\bminBytes:? \d+")
_COLL_TEST_END = re.compile(r"^#\s*(?:Avg bus bandwidth|Out of bounds values)\s*:")
# Searched, not anchored: rows of one width may be joined into one line by terminal-wrap repair.
_COLL_TEST_ROW = re.compile(
    r"(?<!\S)(\d+)\s+(\d+)\s+([a-z]\w*)\s+([a-z]\w*)\s+-?\d+\s+[\d.]+\s+[\d.]+\s+[\d.]+\s+(?:\d+|N/A)\b"
)


def _collective_test_unfinished(lines: list[tuple[int, str]]) -> Reading | None:
    """nccl-tests / rccl-tests output that stops before its end line: the next size never completed."""
    if not any(_COLL_TEST_HEADER.match(t) for _, t in lines) or any(_COLL_TEST_END.match(t) for _, t in lines):
        return None
    rows = [(n, m) for n, t in lines if not t.lstrip().startswith("#") for m in _COLL_TEST_ROW.finditer(t)]
    if rows:
        n, m = rows[-1]
        where = f"after its row for {m.group(1)} bytes ({m.group(3)} {m.group(4)}): the next size never completed"
    else:
        n = lines[-1][0]
        where = "before its first result row: the first collective (or the communicators' set-up) never completed"
    return Reading(
        "collective_test_unfinished",
        f"the collective test (nccl-tests) stopped {where}, no error printed and no 'Avg bus bandwidth' line",
        n,
        evidence={"result_rows": len(rows), "last_row": rows[-1][1].group(0).strip() if rows else None},
    )
