"""Processes that called different collectives at the same point (issue 13 item 3): a reading of NCCL's COLL trace.

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
