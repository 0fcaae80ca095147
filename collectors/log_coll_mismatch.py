"""Readings of NCCL's COLL trace (issue 13 item 3): processes that called different collectives at the same point,
and (a log on its own) where the trace ends: every process in the same collective, or some behind the others.

With NCCL_DEBUG_SUBSYS=COLL every process prints each collective it enqueues (NVIDIA/nccl 2.30.7, 5067397c,
src/enqueue.cc; v2.4.8-1 src/enqueue.cc the same): INFO(NCCL_COLL, "%s: opCount %lx sendbuff %p recvbuff %p
count %zu datatype %d op %d root %d comm %p [nranks=%d] stream %p"). opCount counts the collectives of one
communicator, so the processes of that communicator must print the same operation, count, datatype, reduction
op and root at each opCount; where they differ, the ranks called different collectives (or sizes) there: the
classic hang that TORCH_DISTRIBUTED_DEBUG=DETAIL names in torch. Which side is wrong is the program's question,
so the reading blames nobody; it names the processes that differ from the rest.

A process is its NCCL prefix's host and pid; the comm pointer is the process's own address, so the lines of two
processes are compared only where each process shows one communicator of the same size (several communicators
per process cannot be paired across processes from the text).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

from trainctl.collectors.nccl_topology import comm_pointer_rank, nccl_process

_COLL = re.compile(
    r"\bNCCL INFO (?P<op>\w+): opCount (?P<op_count>[0-9a-f]+) sendbuff \S+ recvbuff \S+ count (?P<count>\d+) "
    r"datatype (?P<dtype>\d+) op (?P<redop>\d+) root (?P<root>-?\d+) comm (?P<comm>0x[0-9a-f]+) \[nranks=(?P<nranks>\d+)\]"
)
MAX_PROCESSES = 4096  # bounded work on any input


@dataclass(frozen=True)
class CollMismatch:
    """At `op_count`, these processes' (op, count, datatype, reduction op, root) differ from the others'."""

    op_count: str
    calls_by_process: dict[str, str]  # "host:pid" -> "Broadcast count 53 datatype 4 op 0 root 0"
    odd_processes: tuple[str, ...]  # those whose call is not the most common one
    lines: tuple[tuple[int, str, str], ...]  # (line_no, process, text) of every call at that opCount, odd ones first


def read_coll_mismatch(records: Iterable[tuple[int, str | None, int | None, str]]) -> CollMismatch | None:
    """The first opCount at which the processes of one communicator called different collectives, from these
    (line_no, host, nccl_pid, text) records; None where the lines prove none (or cannot be paired)."""
    comms: dict[str, set[str]] = {}
    nranks: dict[str, str] = {}
    calls: dict[str, dict[str, tuple[int, str, str]]] = {}  # op_count -> process -> (line, call, text)
    for n, host, pid, text in records:
        if host is None or pid is None or "opCount" not in text:
            continue
        m = _COLL.search(text)
        if not m:
            continue
        proc = f"{host}:{pid}"
        if proc not in comms and len(comms) >= MAX_PROCESSES:
            continue
        comms.setdefault(proc, set()).add(m.group("comm"))
        nranks[proc] = m.group("nranks")
        call = f"{m.group('op')} count {m.group('count')} datatype {m.group('dtype')} op {m.group('redop')} root {m.group('root')}"
        calls.setdefault(m.group("op_count"), {}).setdefault(proc, (n, call, text))
    if len(comms) < 2 or any(len(c) != 1 for c in comms.values()) or len(set(nranks.values())) != 1:
        return None
    for op_count in sorted(calls, key=lambda c: int(c, 16)):
        by_proc = calls[op_count]
        kinds = Counter(call for _, call, _ in by_proc.values())
        if len(by_proc) < 2 or len(kinds) < 2:
            continue
        common = kinds.most_common(1)[0][0]
        return CollMismatch(
            op_count=op_count,
            calls_by_process={p: call for p, (_, call, _) in by_proc.items()},
            odd_processes=tuple(p for p, (_, call, _) in by_proc.items() if call != common),
            lines=tuple(
                (n, p, text)
                for p, (n, call, text) in sorted(by_proc.items(), key=lambda kv: (kv[1][1] == common, kv[1][0]))
            ),
        )
    return None


@dataclass(frozen=True)
class CollTraceEnd:
    """A log that ends in NCCL's COLL trace: each process's last collective, and those that stopped before the rest."""

    op: str  # the furthest collective called ("AllReduce")
    op_count: str  # its opCount as printed (hex)
    nranks: int
    last_by_process: dict[str, str]  # "host:pid" -> the opCount (hex) of its last call
    behind: tuple[str, ...]  # processes whose last call is before the furthest one (a minority), else ()
    rank_behind: dict[str, int]  # their ranks, where an init line (comm pointer -> rank) or a rank prefix says
    line_no: int  # the log's last COLL line


def read_coll_trace_end(
    records: Iterable[tuple[int, str | None, int | None, int | None, str]],
) -> CollTraceEnd | None:
    """Where the COLL trace of a log handed over on its own ends, from its (line_no, host, nccl_pid, rank, text)
    records: None unless the log's last line is a COLL line and the trace holds two or more processes of one
    communicator each, all of one size (as read_coll_mismatch pairs them).

    NCCL prints a COLL line when a process enqueues a collective and nothing when it completes, so a trace that
    ends is read for who called what last: every process at the same opCount entered that collective together and
    it did not finish (a transfer stuck on a link or a GPU); a minority whose last call is earlier never called the
    collectives the others did, and the others wait in them for it (Flight Recorder's "did not enter", from the
    log). Either way the excerpt may simply have been cut there: low confidence, said so."""
    rows = list(records)
    if not rows or "opCount" not in rows[-1][4] or not _COLL.search(rows[-1][4]):
        return None
    comm_of: dict[str, set[str]] = {}
    nranks: set[str] = set()
    last: dict[str, tuple[int, str, int, str]] = {}  # process -> (opCount, op, line_no, text)
    rank_of_comm: dict[tuple[str, str], int] = {}  # (process, comm pointer) -> rank, from its init line
    for n, host, pid, rank, text in rows:
        if (init := comm_pointer_rank(text)) and (proc := _process(host, pid, text)):
            rank_of_comm[(proc, init[0])] = init[1]
        if "opCount" not in text or not (m := _COLL.search(text)):
            continue
        proc = _process(host, pid, text)
        if proc is None:
            return None  # a COLL line whose process the text does not say: the trace cannot be split by process
        if proc not in comm_of and len(comm_of) >= MAX_PROCESSES:
            continue
        comm_of.setdefault(proc, set()).add(m["comm"])
        nranks.add(m["nranks"])
        if rank is not None:
            rank_of_comm.setdefault((proc, m["comm"]), rank)
        count = int(m["op_count"], 16)
        if proc not in last or count >= last[proc][0]:
            last[proc] = (count, m["op"], n, text)
    if len(last) < 2 or any(len(c) != 1 for c in comm_of.values()) or len(nranks) != 1:
        return None
    top = max(c for c, _, _, _ in last.values())
    behind = sorted(p for p, (c, _, _, _) in last.items() if c < top)
    if behind and 2 * len(behind) >= len(last):
        return None  # half or more behind: which side stopped is not for the trace to say
    op = next(o for c, o, _, _ in last.values() if c == top)
    return CollTraceEnd(
        op=op,
        op_count=f"{top:x}",
        nranks=int(next(iter(nranks))),
        last_by_process={p: f"{c:x}" for p, (c, _, _, _) in sorted(last.items())},
        behind=tuple(behind),
        rank_behind={p: r for p in behind for c in comm_of[p] if (r := rank_of_comm.get((p, c))) is not None},
        line_no=rows[-1][0],
    )


def _process(host: str | None, pid: int | None, text: str) -> str | None:
    """The printer as the log reader took it off the prefix, or, where it left the prefix on the line (a host it does
    not take for a machine's name, such as a redacted "<host>"), as the prefix says."""
    return f"{host}:{pid}" if host is not None and pid is not None else nccl_process(text)
