"""Append-only JSON-lines records that survive kill -9 at any byte of a write.

The audit trails (the quarantine ledger's audit.jsonl, each incident's audit.jsonl) are written one
record per line with one O_APPEND write and an fsync. A process killed in the middle of that write
leaves a torn last line: a prefix of the record and no newline. Left alone, the next append is glued
onto it and that record is lost too, and a strict reader fails on the glued line for good. So:

- `append_record` first looks at the file's last byte; when it is not a newline and the tail is
  not a whole record missing only its newline (then the line is finished), the torn tail is moved aside to `<file>.torn-<ns>` (kept for a person to look at, never silently deleted), the file
  is truncated back to its last complete line, and only then is the new record appended.
- `read_records` skips a torn last line with a warning, and recovers a record glued onto a torn
  one by an older writer (the longest JSON object that ends the line); a line that holds no record
  at all is set aside with a warning, never an error that stops every later command.

Writers must serialise appends to one file themselves (the ledger holds its flock; an incident has
one executor).
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

__all__ = ["append_record", "read_records", "heal_torn_tail", "CorruptRecord"]

logger = logging.getLogger(__name__)


def heal_torn_tail(path: str | os.PathLike[str]) -> Path | None:
    """Set aside a last line with no newline (a write cut short); returns where it went, or None."""
    p = Path(path)
    try:
        fd = os.open(p, os.O_RDWR)
    except FileNotFoundError:
        return None
    try:
        size = os.fstat(fd).st_size
        if size == 0:
            return None
        os.lseek(fd, size - 1, os.SEEK_SET)
        if os.read(fd, 1) == b"\n":
            return None
        # Walk back to the last newline in blocks (a record is small; the file may not be).
        end = size
        keep = 0
        block = 1 << 16
        while end > 0:
            start = max(0, end - block)
            os.lseek(fd, start, os.SEEK_SET)
            chunk = os.read(fd, end - start)
            i = chunk.rfind(b"\n")
            if i >= 0:
                keep = start + i + 1
                break
            end = start
        os.lseek(fd, keep, os.SEEK_SET)
        torn = os.read(fd, size - keep)
        try:  # every byte but the newline arrived: the record is whole, finish its line
            if isinstance(json.loads(torn), dict):
                os.lseek(fd, size, os.SEEK_SET)
                os.write(fd, b"\n")
                os.fsync(fd)
                return None
        except ValueError:
            pass
        aside = p.with_name(f"{p.name}.torn-{time.time_ns()}")
        aside.write_bytes(torn)
        os.ftruncate(fd, keep)
        os.fsync(fd)
        logger.warning(
            "%s: the last record was torn (a write cut short, %d bytes); set aside in %s", p, len(torn), aside
        )
        return aside
    finally:
        os.close(fd)


def append_record(path: str | os.PathLike[str], doc: Mapping[str, Any]) -> None:
    """Append one JSON record as one line: heal a torn tail first, then one O_APPEND write + fsync."""
    p = Path(path)
    line = (json.dumps(doc, sort_keys=False, default=str) + "\n").encode()
    heal_torn_tail(p)
    fd = os.open(p, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line)
        os.fsync(fd)
    finally:
        os.close(fd)


def _recover(line: str) -> Any | None:
    """A record glued onto a torn one (`{"a": 1, "b{"a": 2}`): the longest suffix that is a JSON object."""
    i = line.find("{", 1)
    while i > 0:
        try:
            doc = json.loads(line[i:])
            if isinstance(doc, dict):
                return doc
        except ValueError:
            pass
        i = line.find("{", i + 1)
    return None


class CorruptRecord(ValueError):
    """A line in the middle of the file that holds no record (not a write cut short: an edit)."""

    def __init__(self, path: Path, line_no: int, text: str) -> None:
        super().__init__(f"{path}:{line_no}: not a JSON record: {text[:80]!r}")
        self.path, self.line_no = path, line_no


def read_records(path: str | os.PathLike[str], *, strict: bool = False) -> list[Any]:
    """Every whole record of the file, oldest first; a torn last line is skipped with a warning.

    strict: a middle line that holds no record raises CorruptRecord (an append-only trail where a
    lost record matters, e.g. evictions); otherwise it is skipped with a warning."""
    p = Path(path)
    try:
        data = p.read_bytes()
    except FileNotFoundError:
        return []
    text = data.decode("utf-8", errors="replace")
    lines = text.split("\n")
    complete = text.endswith("\n")
    out: list[Any] = []
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            out.append(json.loads(line))
            continue
        except ValueError:
            pass
        if n == len(lines) and not complete:
            logger.warning("%s:%d: skipping a torn last record (a write cut short)", p, n)
            continue
        doc = _recover(line)
        if doc is not None:
            logger.warning("%s:%d: a record glued onto a torn one; the torn part is skipped", p, n)
            out.append(doc)
        elif strict:
            raise CorruptRecord(p, n, line)
        else:
            logger.warning("%s:%d: not a JSON record, skipped", p, n)
    return out
