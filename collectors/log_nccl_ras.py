"""NCCL's RAS report (`ncclras`, NCCL 2.24+), read for the processes it finds dead and the ranks behind the rest.

NCCL's reliability, availability and serviceability subsystem answers `ncclras` with a report of every process and
communicator of the job (NVIDIA/nccl 2.30.7, 5067397c, src/ras/client_support.cc). Its "Errors" section lists
    DEAD
      N job processes are considered dead (unreachable via the RAS network)
      Process P on node H managing GPU G
and its "Warnings" section, per communicator whose ranks disagree,
    #0-0 (0123456789abcdef) MISMATCH
      Communicator ranks have different AllReduce operation counts
      30 ranks have launched up to operation 6650
      Rank 7 has launched up to operation 6649 -- GPU 7 managed by process 1234 on node node01
(a group's ranks are listed only when the group is an outlier, rasCountIsOutlier; a group of one is written on the
rank's own line; a group of several under its "N ranks have ..." line as "Rank R -- GPU G managed by process P on node
H"). A rank that launched fewer operations than the most any rank launched never called the collectives the others
wait in: Flight Recorder's "did not enter", from NCCL itself. The rank is the communicator's rank (not the job's: the
report does not say which job rank it is), so the host and process are what the reading names.

The "Errors" section also lists, per communicator whose ranks hold an error (rasClientBreakDownErrors),
    #0-0 (0123456789abcdef) ERROR
      Asynchronous error on 1 rank
      Rank 3 reported Unhandled CUDA error -- GPU 3 managed by process 1234 on node node01
("Initialization error[s] on N rank[s]" for ncclCommInit's state; several ranks with one error go under "N ranks
reported <error>" as "Rank R -- GPU G managed by process P on node H"). <error> is the report's own name of
ncclResult_t (ncclErrorToString: "Unhandled CUDA error", "System error", "Internal error", "Invalid argument",
"Invalid usage", "Remote process error", "Unexpected error"). The INCOMPLETE section (processes that gave no
communicator data in time) is not read: NCCL says only that they did not answer, not that they failed.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

_DEAD_HEADER = re.compile(r"^\s*\d+ job process(?:es are| is) considered dead \(unreachable via the RAS network\)")
_PROCESS = re.compile(r"^\s*Process (?P<pid>\d+) on node (?P<node>\S+) managing GPUs? ")
_BLOCK = re.compile(r"^#\d+-\d+ \((?P<comm>[0-9a-f]+)\) (?P<what>[A-Z]+)\s*$")
_OP_COUNTS = re.compile(r"^\s*Communicator ranks have different (?P<op>\w+) operation counts")
_GROUP = re.compile(
    r"^\s*(?P<count>\d+) ranks have (?:launched up to operation (?P<value>\d+)|not launched any operations)"
)
_RANK = re.compile(
    r"^\s*Rank (?P<rank>\d+)(?: has (?:launched up to operation (?P<value>\d+)|(?P<none>not launched any operations)))?"
    r" -- (?:GPU (?P<gpu>\d+)(?: \(NVML \d+\))? managed by process (?P<pid>\d+) on node (?P<node>\S+)"
    r"|\[process information not found\])"
)
_ERRORS_HEADER = re.compile(r"^\s*(?P<phase>Initialization|Asynchronous) errors? on \d+ ranks?\s*$")
_ERROR_GROUP = re.compile(r"^\s*\d+ ranks reported (?P<error>[A-Za-z][\w ]*?)\s*$")
_ERROR_RANK = re.compile(
    r"^\s*Rank (?P<rank>\d+)(?: reported (?P<error>[A-Za-z][\w ]*?))? -- (?:GPU (?P<gpu>\d+)(?: \(NVML \d+\))?"
    r" managed by process (?P<pid>\d+) on node (?P<node>\S+)|\[process information not found\])"
)
MAX_LINES = 200_000  # bounded work on any input


@dataclass(frozen=True)
class RasProcess:
    """A process the report names: where it runs and the line that says so."""

    pid: int | None
    node: str | None
    line_no: int
    text: str
    comm_rank: int | None = None
    comm: str | None = None
    op: str | None = None
    launched: int | None = None  # operations it launched (0: none)
    most_launched: int | None = None  # the most any rank of its communicator launched
    error: str | None = None  # the ncclResult_t it reported, as the report names it ("Unhandled CUDA error", ...)
    phase: str | None = None  # "Initialization" (ncclCommInit's state) or "Asynchronous" (ncclCommGetAsyncError's)


@dataclass(frozen=True)
class RasReport:
    dead: tuple[RasProcess, ...]  # processes the report considers dead
    behind: tuple[RasProcess, ...]  # ranks that launched fewer operations than the most any rank did (a minority)
    errored: tuple[RasProcess, ...] = ()  # ranks that reported an NCCL error (the Errors section's ERROR blocks)


def read_nccl_ras(lines: Iterable[tuple[int, str]]) -> RasReport | None:
    """The dead processes, the ranks behind and the ranks with an error of `ncclras`'s report in these (line_no,
    text) lines, else None."""
    dead: list[RasProcess] = []
    behind: list[RasProcess] = []
    errored: list[RasProcess] = []
    section: str | None = None  # "dead"; "counts" in a MISMATCH block's operation counts; "errors" in an ERROR block
    phase: str | None = None
    group_error: str | None = None
    error_block = False  # just after an ERROR block's header, before its first errors line
    comm: str | None = None
    op: str | None = None
    block: list[tuple[int | None, RasProcess | None, int]] = []  # (launched, listed rank or None, group size)
    group_value: int | None = None

    def close_block() -> None:
        if section == "counts" and block:
            behind.extend(_behind(block))
        block.clear()

    for i, (n, text) in enumerate(lines):
        if i >= MAX_LINES:
            break
        if (
            section is None
            and not error_block
            and not (
                "considered dead" in text or "operation counts" in text or ") MISMATCH" in text or ") ERROR" in text
            )
        ):
            continue  # outside the report's sections: a few substring tests per line of any log
        if _DEAD_HEADER.match(text):
            close_block()
            section = "dead"
            continue
        if (b := _BLOCK.match(text)) is not None:
            close_block()
            section, comm, op = None, b["comm"], None
            error_block = b["what"] == "ERROR"
            continue
        if (e := _ERRORS_HEADER.match(text)) is not None and (error_block or section == "errors"):
            close_block()
            section, phase, group_error, error_block = "errors", e["phase"], None, False
            continue
        if (oc := _OP_COUNTS.match(text)) is not None:
            close_block()
            section, op, group_value = "counts", oc["op"], None
            continue
        if section == "dead" and (p := _PROCESS.match(text)) is not None:
            dead.append(RasProcess(int(p["pid"]), p["node"], n, text.strip()))
            continue
        if section == "counts":
            if (g := _GROUP.match(text)) is not None:
                group_value = int(g["value"] or 0)
                block.append((group_value, None, int(g["count"])))
                continue
            if (r := _RANK.match(text)) is not None:
                own = r["value"] is not None or r["none"] is not None
                value = int(r["value"] or 0) if own else group_value
                proc = RasProcess(
                    int(r["pid"]) if r["pid"] else None, r["node"], n, text.strip(), int(r["rank"]), comm, op, value
                )
                block.append((value, proc, 1 if own else 0))
                continue
        if section == "errors":
            if (g := _ERROR_GROUP.match(text)) is not None:
                group_error = g["error"]
                continue
            if (r := _ERROR_RANK.match(text)) is not None and (r["error"] or group_error):
                pid = int(r["pid"]) if r["pid"] else None
                errored.append(RasProcess(pid, r["node"], n, text.strip(), int(r["rank"]), comm,
                                          error=r["error"] or group_error, phase=phase))  # fmt: skip
                continue
        close_block()  # any other line ends the section's list
        section, error_block = None, False
    close_block()
    return RasReport(tuple(dead), tuple(behind), tuple(errored)) if dead or behind or errored else None


def _behind(block: list[tuple[int | None, RasProcess | None, int]]) -> list[RasProcess]:
    """The listed ranks of one operation-count block that launched fewer than the most, when they are a minority of
    the ranks the block counts (one rank ahead of the rest is not the rest behind)."""
    values = [v for v, _, _ in block if v is not None]
    if not values:
        return []
    top = max(values)
    total = sum(size for _, _, size in block)
    late = [p for v, p, _ in block if p is not None and v is not None and v < top]
    n_late = sum(size for v, _, size in block if v is not None and v < top)
    if not late or 2 * n_late >= total:
        return []
    return [RasProcess(p.pid, p.node, p.line_no, p.text, p.comm_rank, p.comm, p.op, p.launched, top) for p in late]
