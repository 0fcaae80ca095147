"""NCCL's own INFO/WARN files in a run dir or dataset -> nccl_procs / nccl_links tables.

trainctl.runtime.nccl_env points each rank's NCCL_DEBUG_FILE at logs/<host>/nccl-rank-<R>.log, so
the host comes from the folder and the rank from the name. A pasted log (`diagnose some.log`)
is read with the same parser, from the text the log parser read (parse_nccl_text); its rank is NCCL's own.
"""

from __future__ import annotations

import io
import re
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path

import pyarrow as pa

from trainctl.collectors import nccl_topology
from trainctl.rundir import RunInfo
from trainctl.schemas import SignalKind

__all__ = ["NCCL_LOG", "MAX_FILE_BYTES", "parse_run_dir_nccl", "parse_nccl_file", "parse_nccl_text"]

NCCL_LOG = re.compile(r"^nccl-rank-(\d+)\.log$")
# NCCL INFO at init is a few hundred lines per communicator; a file far past this is read up to it
# (its first part holds the init lines), with the cut logged.
MAX_FILE_BYTES = 64 << 20


def _lines(lines: Iterable[str], limit_bytes: int) -> Iterator[str]:
    read = 0
    for line in lines:
        read += len(line)
        if read > limit_bytes:
            return
        yield line


def parse_nccl_file(
    path: Path, *, host: str | None, rank: int | None, limit_bytes: int = MAX_FILE_BYTES
) -> dict[SignalKind, pa.Table]:
    with path.open("r", encoding="utf-8", errors="replace", newline="") as fh:
        procs = nccl_topology.parse_nccl_lines(_lines(fh, limit_bytes))
    return nccl_topology.to_tables(procs, host=host, rank=rank, source=str(path))


def parse_nccl_text(text: str, source: str, *, limit_bytes: int = MAX_FILE_BYTES) -> dict[SignalKind, pa.Table]:
    """A pasted log's NCCL lines, hosts and ranks as NCCL logged them; the lines are not copied out of `text`."""
    procs = nccl_topology.parse_nccl_lines(_lines(io.StringIO(text, newline=""), limit_bytes))
    return nccl_topology.to_tables(procs, host=None, rank=None, source=source)


def parse_run_dir_nccl(root: Path, run: RunInfo | None) -> Mapping[SignalKind, pa.Table]:
    logs = root / "logs"
    if not logs.is_dir():
        return {}
    parts: dict[SignalKind, list[pa.Table]] = {SignalKind.NCCL_PROCS: [], SignalKind.NCCL_LINKS: []}
    for host_dir in sorted(p for p in logs.iterdir() if p.is_dir()):
        for f in sorted(host_dir.iterdir()):
            m = NCCL_LOG.match(f.name)
            if m is None or not f.is_file():
                continue
            try:
                tables = parse_nccl_file(f, host=host_dir.name, rank=int(m.group(1)))
            except OSError:
                continue  # unreadable: the log analyzer and coverage say what is missing
            for kind, t in tables.items():
                parts[kind].append(t)
    return {k: pa.concat_tables(ts) for k, ts in parts.items() if ts and sum(t.num_rows for t in ts)}
