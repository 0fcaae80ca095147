"""Periodic dumps of torch's debug server (torch.distributed.debug) -> `stacks` rows.

torch 2.13's `torch.distributed.debug.start_debug_server(dump_dir=D, dump_interval=S)` runs a
frontend on rank 0 that, every S seconds, asks every rank's worker server for its handlers' output
and writes one text file per handler (torch/distributed/debug/_frontend.py, PeriodicDumper._run):

    D/<handler.dump_filename()>_<time.strftime("%Y%m%d_%H%M%S")>.txt

with the handlers' dump() texts (torch/distributed/debug/_debug_handlers.py): `stacks` (each
rank's `dump_traceback`, faulthandler format), `pyspy_dump` (each rank's py-spy dump, when
enabled), `fr_trace` (tables rendered by torch's own Flight Recorder analyzer) and
`torchcomms_health_check`. The per-rank texts share one layout (StacksHandler.dump and friends):

    PARTIAL DATA: 1/2 workers responded        <- only when some worker did not answer
      Rank 1: <why>

    === Rank 0: http://<hostname>:<port>/handler/dump_traceback? ===
    <that rank's text, or "Error: <HTTP status>">

Stacks and py-spy dumps become `stacks` rows (one snapshot per file, at the time of its name's stamp:
stamp_ts_ns), so the hang analyzers see where every rank is now and, across
successive dumps, whether it moved. Ranks that did not answer are returned too: a rank whose
worker server is silent is a rank that may be gone. `fr_trace` files are torch's analyzer's
rendering of the Flight Recorder (tables, not the entries) and are not re-read: trainctl takes the
Flight Recorder itself from the ranks (trainctl.runtime.hang_dump).
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pyarrow as pa

from trainctl.collectors import stacks as stk
from trainctl.errors import DatasetError

__all__ = [
    "DUMP_FILE",
    "RankSection",
    "DebugDump",
    "parse_debug_dump",
    "find_debug_dumps",
    "detect_debug_dump_dir",
    "read_debug_dumps",
    "stamp_ts_ns",
    "MAX_DUMP_BYTES",
]

logger = logging.getLogger(__name__)

# PeriodicDumper: f"{handler.dump_filename()}_{timestamp}.txt", timestamp = strftime("%Y%m%d_%H%M%S")
DUMP_FILE = re.compile(r"^(?P<handler>[a-z][a-z0-9_]*?)_(?P<stamp>\d{8}_\d{6})\.txt$")
# The handlers whose per-rank text is a stack dump, and its parser's format.
STACK_HANDLERS = {"stacks": "dump_traceback", "pyspy_dump": "py-spy"}
# StacksHandler.dump: f"=== Rank {i}: {addr} ===" and format_fetch_summary's lines.
_SECTION = re.compile(r"^=== Rank (\d+): (\S+) ===\s*$")
_PARTIAL = re.compile(r"^PARTIAL DATA: (\d+)/(\d+) workers responded\s*$")
_FAILED = re.compile(r"^  Rank (\d+): (.*)$")
_ERROR_BODY = re.compile(r"^Error: (\d+)\s*$")
MAX_DUMP_BYTES = 64 << 20  # one dump file read at most (issue 15: bounded work on any input)


@dataclass(frozen=True)
class RankSection:
    """One rank's part of a dump: its worker's address, its text, or why it has none."""

    rank: int
    host: str | None  # the worker URL's host: socket.gethostname() on that rank
    text: str
    error: str | None = None  # the worker did not answer (HTTP status or the frontend's reason)


@dataclass(frozen=True)
class DebugDump:
    """One file of the periodic dumper."""

    path: str
    handler: str  # stacks, pyspy_dump, fr_trace, ...
    stamp: str  # the file name's strftime stamp (local time of rank 0's frontend)
    ts_ns: int  # the file's mtime
    sections: tuple[RankSection, ...]
    workers_total: int | None = None  # from "PARTIAL DATA: k/n", when some did not answer

    @property
    def silent_ranks(self) -> tuple[int, ...]:
        return tuple(s.rank for s in self.sections if s.error is not None)


def parse_debug_dump(text: str) -> tuple[tuple[RankSection, ...], int | None]:
    """Split a dump's text into its ranks' sections (pure); also the worker count when partial."""
    total: int | None = None
    reasons: dict[int, str] = {}
    sections: list[tuple[int, str, list[str]]] = []
    for line in text.splitlines():
        m = _SECTION.match(line)
        if m:
            sections.append((int(m.group(1)), m.group(2), []))
            continue
        if sections:
            sections[-1][2].append(line)
            continue
        pm = _PARTIAL.match(line)
        if pm:
            total = int(pm.group(2))
            continue
        fm = _FAILED.match(line)
        if fm:
            reasons[int(fm.group(1))] = fm.group(2).strip()
    out = []
    for rank, addr, lines in sections:
        if rank > stk.INT32_MAX:  # not a rank (the schema's int32): a garbled header
            continue
        body = "\n".join(lines).strip("\n")
        em = _ERROR_BODY.match(body.strip())
        error = None
        if em or rank in reasons:
            error = reasons.get(rank) or f"HTTP {em.group(1)}"  # type: ignore[union-attr]
        out.append(RankSection(rank, urlsplit(addr).hostname, "" if error else body, error))
    return tuple(out), total


def find_debug_dumps(root: str | os.PathLike[str]) -> list[Path]:
    """The dumper's files directly in `root` (it writes no sub-folders), oldest first."""
    base = Path(root)
    if not base.is_dir():
        return []
    files = [p for p in base.iterdir() if DUMP_FILE.match(p.name) and p.is_file()]
    return sorted(files, key=lambda p: (DUMP_FILE.match(p.name).group("stamp"), p.name))  # type: ignore[union-attr]


def detect_debug_dump_dir(path: Path) -> bool:
    return any(DUMP_FILE.match(p.name).group("handler") in STACK_HANDLERS for p in find_debug_dumps(path))  # type: ignore[union-attr]


def _load(path: Path) -> DebugDump:
    m = DUMP_FILE.match(path.name)
    assert m is not None
    try:
        with open(path, "rb") as fh:
            raw = fh.read(MAX_DUMP_BYTES + 1)
        mtime_ns = path.stat().st_mtime_ns
    except OSError as exc:
        raise DatasetError(f"{path}: cannot read torch debug dump ({exc.strerror})") from exc
    if len(raw) > MAX_DUMP_BYTES:  # stacks of thousands of ranks fit well inside; more is not a dump
        logger.warning("%s: over %d MiB; only its first %d MiB read", path, MAX_DUMP_BYTES >> 20, MAX_DUMP_BYTES >> 20)
        raw = raw[:MAX_DUMP_BYTES]
    text = raw.decode("utf-8", errors="replace")
    sections, total = parse_debug_dump(text)
    return DebugDump(
        str(path), m.group("handler"), m.group("stamp"), stamp_ts_ns(m.group("stamp"), mtime_ns), sections, total
    )


def stamp_ts_ns(stamp: str, mtime_ns: int | None = None) -> int:
    """The dump's time from its name's stamp (pure).

    The stamp is rank 0's local time with no offset. The file's mtime, where the copy kept it
    (collect's tar does), gives the offset: their difference rounded to a 15-minute time zone step.
    A copy that lost its mtimes (cp without -p) reads the stamp as UTC: the spacing of successive
    dumps, which is what the analyzers use, is right either way, and a dump's order never depends
    on when it was copied.
    """
    as_utc = int(datetime.strptime(stamp, "%Y%m%d_%H%M%S").replace(tzinfo=UTC).timestamp()) * 10**9
    if mtime_ns is None:
        return as_utc
    step = 15 * 60 * 10**9
    offset = round((mtime_ns - as_utc) / step) * step
    return as_utc + offset if abs(offset) <= 14 * 3600 * 10**9 else as_utc


def read_debug_dumps(
    root: str | os.PathLike[str], *, rank_hosts: Mapping[int, str] | None = None, last: int = 5
) -> tuple[pa.Table, list[DebugDump]]:
    """The `stacks` rows of the newest `last` stack dumps per handler in `root`, and those dumps.

    `rank_hosts` (the run's rank -> host) names hosts where the run knows them; otherwise the
    worker URL's hostname is used. Several snapshots are kept (each with its own `ts`) so an
    analyzer can tell a rank that stays in one place from one caught in passing.
    """
    by_handler: dict[str, list[Path]] = {}
    for p in find_debug_dumps(root):
        handler = DUMP_FILE.match(p.name).group("handler")  # type: ignore[union-attr]
        if handler in STACK_HANDLERS:
            by_handler.setdefault(handler, []).append(p)
    dumps = [_load(p) for paths in by_handler.values() for p in paths[-last:]]
    rows: list[dict[str, Any]] = []
    hosts: list[str | None] = []
    for d in dumps:
        parse = stk.parse_pyspy_dump if STACK_HANDLERS[d.handler] == "py-spy" else stk.parse_dump_traceback
        for s in d.sections:
            if s.error is not None:
                continue
            new = parse(s.text, rank=s.rank, ts_ns=d.ts_ns)
            rows.extend(new)
            host = (rank_hosts or {}).get(s.rank) or s.host
            hosts.extend([host] * len(new))
    if dumps and not rows:
        logger.warning("%s: torch debug dumps hold no stack frames", root)
    for d in dumps[-1:]:
        if d.silent_ranks:
            logger.info("%s: no answer from rank(s) %s", d.path, ", ".join(map(str, d.silent_ranks)))
    return stk.rows_to_table(rows, hosts), dumps
