"""Python stacks of live (hung) ranks -> `stacks` rows.

Two sources, both text:
- faulthandler format, which is what the rank debug server's `dump_traceback` handler returns
  (torch `_WorkerServer`) and what `faulthandler.dump_traceback(all_threads=True)` prints;
- `py-spy dump --pid PID` output, taken from outside the process (needs ptrace rights).

Parsers are pure (text in, rows out; depth 0 = innermost frame, where the thread is now). The
run-dir reader maps `stacks/<host>/rank-R.txt` (dump_traceback) and `stacks/<host>/rank-R.pyspy.txt`
(py-spy) to those parsers.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pyarrow as pa

from trainctl.errors import DatasetError
from trainctl.schemas import SignalKind, empty_table, schema_for

__all__ = [
    "MAIN_THREAD",
    "parse_dump_traceback",
    "parse_pyspy_dump",
    "rows_to_table",
    "read_stack_files",
    "pyspy_dump",
]

logger = logging.getLogger(__name__)

MAIN_THREAD = "MainThread"
INT32_MAX = 2**31 - 1  # the schema's rank/line/depth columns
HOST_COLUMN = "host"

_FH_THREAD = re.compile(r"^(Current thread|Thread) (0x[0-9a-fA-F]+)(?: \[([^\]]*)\])? \(most recent call first\):\s*$")
_FH_STACK = re.compile(r"^Stack \(most recent call first\):\s*$")
_FH_FRAME = re.compile(r'^\s+File "(.*)", line (\d+|\?\?\?) in (.+?)\s*$')
_SPY_PROCESS = re.compile(r"^Process (\d+):")
_SPY_THREAD = re.compile(r'^Thread (\S+) \(([^)]*)\)(?:: "(.*)")?\s*$')
_SPY_FRAME = re.compile(r"^ {4}(\S.*?) \((.+?)(?::(\d+))?\)\s*$")
_RANK_FILE = re.compile(r"^rank-(\d+)(\.pyspy)?\.txt$")


def _row(
    rank: int,
    pid: int | None,
    thread: str,
    depth: int,
    func: str,
    filename: str | None,
    line: int | None,
    source: str,
    ts_ns: int | None,
) -> dict[str, Any]:
    return {
        "ts": ts_ns,
        "rank": rank,
        "pid": pid,
        "thread": thread,
        "depth": depth,
        "function": func,
        "filename": filename,
        "line": line if line is not None and 0 <= line <= INT32_MAX else None,  # a garbled number is no line
        "source": source,
    }


def parse_dump_traceback(
    text: str, *, rank: int, pid: int | None = None, ts_ns: int | None = None
) -> list[dict[str, Any]]:
    """Rows from faulthandler text (innermost frame first, as faulthandler prints them).

    faulthandler names threads only by their id, so the thread whose outermost frame is
    `<module>` (the interpreter's main program) is labelled MainThread: that is the thread a
    training loop runs in, and the one hang evidence must come from.
    """
    threads: list[tuple[str, list[tuple[str, str, int | None]]]] = []
    current: list[tuple[str, str, int | None]] | None = None
    for raw in text.splitlines():
        m = _FH_THREAD.match(raw)
        if m or _FH_STACK.match(raw):
            tid = (m.group(3) or m.group(2)) if m else "0x0"
            current = []
            threads.append((tid, current))
            continue
        fm = _FH_FRAME.match(raw)
        if fm and current is not None:
            line = int(fm.group(2)) if fm.group(2).isdigit() else None
            current.append((fm.group(3), fm.group(1), line))
    main_idx = next((i for i, (_, fr) in enumerate(threads) if fr and fr[-1][0] == "<module>"), None)
    rows: list[dict[str, Any]] = []
    for i, (tid, frames) in enumerate(threads):
        name = MAIN_THREAD if i == main_idx else tid
        for depth, (func, filename, line) in enumerate(frames):
            rows.append(_row(rank, pid, name, depth, func, filename, line, "dump_traceback", ts_ns))
    return rows


def parse_pyspy_dump(text: str, *, rank: int, ts_ns: int | None = None) -> list[dict[str, Any]]:
    """Rows from `py-spy dump` output (innermost frame first, as py-spy prints them)."""
    rows: list[dict[str, Any]] = []
    pid: int | None = None
    thread: str | None = None
    depth = 0
    for raw in text.splitlines():
        pm = _SPY_PROCESS.match(raw)
        if pm:
            pid = int(pm.group(1))
            continue
        tm = _SPY_THREAD.match(raw)
        if tm:
            thread = tm.group(3) or tm.group(1)
            depth = 0
            continue
        fm = _SPY_FRAME.match(raw)
        if fm and thread is not None:
            rows.append(
                _row(
                    rank,
                    pid,
                    thread,
                    depth,
                    fm.group(1),
                    fm.group(2),
                    int(fm.group(3)) if fm.group(3) else None,
                    "py-spy",
                    ts_ns,
                )
            )
            depth += 1
    return rows


def rows_to_table(rows: list[dict[str, Any]], hosts: Iterable[str | None]) -> pa.Table:
    if not rows:
        return empty_table(SignalKind.STACKS, host_column=HOST_COLUMN)
    t = pa.Table.from_pylist(rows, schema=schema_for(SignalKind.STACKS))
    return t.append_column(HOST_COLUMN, pa.array(list(hosts), pa.string()))


def read_stack_files(root: str | os.PathLike[str]) -> pa.Table:
    """Parse every `stacks/<host>/rank-R.txt` and `rank-R.pyspy.txt` under root into one table."""
    base = Path(root) / "stacks"
    rows: list[dict[str, Any]] = []
    hosts: list[str | None] = []
    if base.is_dir():
        for host_dir in sorted(p for p in base.iterdir() if p.is_dir() and not p.name.startswith("host=")):
            for f in sorted(host_dir.iterdir()):
                m = _RANK_FILE.match(f.name)
                if not m:
                    continue
                try:
                    text = f.read_text(errors="replace")
                    ts_ns = int(f.stat().st_mtime_ns)
                except OSError as exc:
                    raise DatasetError(f"{f}: cannot read stack dump ({exc.strerror})") from exc
                rank = int(m.group(1))
                new = (
                    parse_pyspy_dump(text, rank=rank, ts_ns=ts_ns)
                    if m.group(2)
                    else parse_dump_traceback(text, rank=rank, ts_ns=ts_ns)
                )
                if not new:
                    logger.warning("%s: no stack frames found", f)
                rows.extend(new)
                hosts.extend([host_dir.name] * len(new))
    return rows_to_table(rows, hosts)


def pyspy_dump(pid: int, *, timeout_s: float = 30.0) -> str:
    """Run `py-spy dump --pid PID` (the collector's command); returns its stdout.

    Raises DatasetError when py-spy is missing or fails (typically ptrace permission: run as the
    rank's user or root, or set kernel.yama.ptrace_scope=0).
    """
    exe = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    if not Path(exe).exists():
        raise DatasetError("py-spy not found; install it with `pip install py-spy` (the trainctl[runtime] extra)")
    try:
        res = subprocess.run([exe, "dump", "--pid", str(pid)], capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired as exc:
        raise DatasetError(f"py-spy dump --pid {pid} took more than {timeout_s:g} s") from exc
    if res.returncode != 0:
        raise DatasetError(
            f"py-spy dump --pid {pid} failed: {res.stderr.strip() or res.returncode}; check ptrace permission"
        )
    return res.stdout
