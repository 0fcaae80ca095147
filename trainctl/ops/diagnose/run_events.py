"""What the runtime wrote about failures in a run dir, as tables (called by trainctl.ops.diagnose.diagnosis).

A local run dir and a collected dataset hold the same files (collect brings errors/ and numerics/
back as they are), so both are read the same way:

- errors/rank-R.json: torchelastic's error file (written by `@record` / trainctl.runtime.trainer's
  write_error_file): the exception, its traceback and the time. torchelastic names the root cause
  by the smallest error-file timestamp (torch/distributed/elastic/multiprocessing/errors/__init__.py,
  ChildFailedError.get_first_failure); diagnose uses the same rule (analyzers/root_cause.py). The
  exception's message is classified here by the log signatures (collectors/logs.py: CUDA/HIP OOM,
  CUDA/cuBLAS/cuDNN errors, NCCL and gloo errors, ECC, ...), which analyzers may not import: the row
  carries their kind and category, null when no signature knows the message.
- numerics/rank-R.json: the first step whose local loss was NaN or inf on that rank
  (trainer.record_nonfinite_loss), read as a fact rather than guessed from printed loss lines.
- hang.json: the launcher's own record of a hang it detected and stopped (why, when, the ranks
  that stopped), one `hang_detected` row per stopped rank (analyzers/launcher_hang.py).
- drills/H/kernel.log: the xid drill's stand-in for host H's kernel log; parsed as kernel/H/dmesg.txt
  is after a collect, so a drill is diagnosed the same with or without collecting.

Every file is read with a size cap: a run dir is input we did not write.
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
from collections.abc import Iterator, Mapping
from contextvars import ContextVar
from pathlib import Path
from types import ModuleType
from typing import Any

import pyarrow as pa

from trainctl.dataset import HOST_COLUMN
from trainctl.findings import Category
from trainctl.rundir import RunInfo
from trainctl.schemas import SignalKind, empty_table, schema_for

__all__ = [
    "parse_run_dir_events",
    "read_rank_reports",
    "rank_reports_read_once",
    "MAX_EVENT_FILE_BYTES",
    "TRACEBACK_LINES",
]

logger = logging.getLogger(__name__)

MAX_EVENT_FILE_BYTES = 1 << 20  # an error file is a few KB; past 1 MiB it is not one
TRACEBACK_LINES = 8  # the traceback's last lines kept as evidence (innermost frames and the exception)
MAX_MESSAGE_CHARS = 2000  # an exception's message kept (and classified): its first lines say what failed


def _read_json(path: Path) -> Any | None:
    try:
        if path.stat().st_size > MAX_EVENT_FILE_BYTES:
            logger.warning("%s: over %d bytes, not read", path, MAX_EVENT_FILE_BYTES)
            return None
        return json.loads(path.read_text(errors="replace"))
    except (OSError, ValueError) as exc:
        logger.warning("%s: unreadable (%s), skipped", path, exc)
        return None


def _rank_of(path: Path) -> int | None:
    stem = path.stem
    if not stem.startswith("rank-") or not stem[5:].isdigit() or len(stem) > 15:
        return None
    rank = int(stem[5:])
    return rank if rank < 2**31 else None  # ranks are int32 in every table


_INT64 = 2**63


def _int64(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) and -_INT64 <= v < _INT64 else None


def _ts_ns(*values: Any) -> int | None:
    for v, scale in zip(values, (1, 10**9)):
        try:
            if v is not None and str(v).strip():
                return _int64(int(str(v).strip()[:30]) * scale)
        except ValueError:
            continue
    return None


def _log_parser() -> ModuleType:
    # Imported where used: it compiles ~150 log signatures (~40 ms), which a run dir without error
    # files or drills skips.
    from trainctl.collectors import logs

    return logs


@functools.lru_cache(maxsize=4096)
def _classify(message: str) -> tuple[str | None, str | None]:
    """What the log signatures say of an exception's message (kind, category), as a log line saying
    it would be diagnosed: the first specific (non-generic) event's, else the first generic one's;
    (None, None) when only the unclassified-error fallback matched (an error that no signature
    knows, such as a ValueError). Only the message: the traceback's frames would read as a stack
    dump. Cached: the ranks of one crash often raise the same text (~0.2 ms a message)."""
    rows = _log_parser().parse_log_text(message).select(["kind", "category", "fields"]).to_pylist()
    known = [r for r in rows if r["kind"] is not None and r["category"] != Category.UNCLASSIFIED.value]
    known.sort(key=lambda r: bool(r["fields"] and json.loads(r["fields"]).get("generic")))  # stable: order kept
    return (known[0]["kind"], known[0]["category"]) if known else (None, None)


def _error_row(path: Path, rank: int, doc: Any) -> dict[str, Any] | None:
    """One torchelastic error file -> a row; None when it does not have the documented shape."""
    msg = doc.get("message") if isinstance(doc, Mapping) else None
    if isinstance(msg, str):  # torchelastic writes a plain string for some failures
        message, tail, ts = msg, None, None
    elif isinstance(msg, Mapping):
        extra = msg.get("extraInfo") if isinstance(msg.get("extraInfo"), Mapping) else {}
        tb = str(extra.get("py_callstack") or "")
        tail = "\n".join(tb.rstrip().splitlines()[-TRACEBACK_LINES:]) or None
        message, ts = str(msg.get("message") or ""), _ts_ns(extra.get("timestamp_ns"), extra.get("timestamp"))
    else:
        return None
    message = message[:MAX_MESSAGE_CHARS]
    kind, category = _classify(message)
    return {
        "rank": rank,
        "event": "exception",
        "message": message,
        "detail": tail,
        "ts": ts,
        "kind": kind,
        "category": category,
    }


def _numerics_row(path: Path, rank: int, doc: Any) -> dict[str, Any] | None:
    # runtime/trainer.py record_nonfinite_loss writes rank, step, loss and timestamp_ns; a document
    # with neither a step nor a loss is not that record (it would claim a NaN nobody saw).
    if not isinstance(doc, Mapping) or ("step" not in doc and "loss" not in doc):
        return None
    step = doc.get("step")
    return {
        "rank": rank,
        "event": "nonfinite_loss",
        "step": _int64(step),
        "message": str(doc.get("loss", "nan"))[:64],
        "detail": None,
        "ts": _ts_ns(doc.get("timestamp_ns"), doc.get("timestamp")),
    }


MAX_HANG_RANKS = 1 << 20  # a record listing more ranks than any job has is not one


def _hang_rows(root: Path) -> list[dict[str, Any]]:
    """hang.json (trainctl.ops.launch.local writes it before stopping a hung run) -> one row per
    stopped rank; [] when absent or not of that shape."""
    p = root / "hang.json"
    doc = _read_json(p) if p.is_file() else None
    if not isinstance(doc, Mapping):
        return []
    ranks = doc.get("stale_ranks")
    ts = _int64(doc.get("detected_ts_ns"))
    if not isinstance(ranks, list) or not ranks or len(ranks) > MAX_HANG_RANKS or ts is None:
        logger.warning("%s: not a hang record (stale_ranks, detected_ts_ns), skipped", p)
        return []
    reason = str(doc.get("reason") or "no rank made progress")[:500]
    valid = (r for r in ranks if isinstance(r, int) and not isinstance(r, bool) and 0 <= r < 2**31)
    return [
        {"rank": r, "event": "hang_detected", "message": reason, "detail": None, "ts": ts, "source": "hang.json"}
        for r in dict.fromkeys(valid)  # ints only before hashing: a hostile list may hold lists
    ]


# The rank reports already read by this diagnosis, by run dir (rank_reports_read_once); None outside one.
_READ_ONCE: ContextVar[dict[Path, dict[int, Mapping[str, Any]]] | None] = ContextVar("rank_reports", default=None)


@contextlib.contextmanager
def rank_reports_read_once() -> Iterator[None]:
    """Within: read_rank_reports reads each run dir's ranks/ once and hands the same reports to every later
    caller. One diagnosis reads them for the run events' hosts and again for the throughput summary; read twice,
    a malformed report was warned about twice on stderr (listed once in `skipped`). Scoped to one diagnosis, not a
    process-wide cache: a supervisor or a test diagnosing the same run dir again must read (and warn) afresh."""
    token = _READ_ONCE.set({})
    try:
        yield
    finally:
        _READ_ONCE.reset(token)


def read_rank_reports(root: Path) -> dict[int, Mapping[str, Any]]:
    """ranks/rank-R.json by rank, read as the other structured files are (their size cap) and a malformed one
    said (skipped): rundir.read_rank_files skips it quietly, as a file mid-write is for a live run's supervisor,
    and a diagnosed run's reports are what its hosts (run events) and its MFU (the throughput summary) rest on.
    Inside rank_reports_read_once, a run dir's reports are read (and a bad one said) once."""
    memo = _READ_ONCE.get()
    if memo is not None and root in memo:
        return dict(memo[root])
    reports: dict[int, Mapping[str, Any]] = {}
    for path in sorted((root / "ranks").glob("rank-*.json")):
        info = _read_json(path)
        if isinstance(info, Mapping) and type(info.get("rank")) is int:  # not a bool
            reports[info["rank"]] = info
        elif info is not None:
            logger.warning("%s: not a rank report (no integer rank), skipped", path)
    if memo is not None:
        memo[root] = dict(reports)
    return reports


def _hosts_by_rank(root: Path, run: RunInfo | None) -> dict[int, str]:
    hosts: dict[int, str] = {r: h.host for h in run.hosts for r in h.ranks} if run is not None else {}
    # the ranks' own report wins (node ranks follow join order)
    hosts.update({r: str(info["host"]) for r, info in read_rank_reports(root).items() if info.get("host")})
    return hosts


def _events_table(root: Path, run: RunInfo | None) -> pa.Table:
    rows: list[dict[str, Any]] = []
    for folder, make in (("errors", _error_row), ("numerics", _numerics_row)):
        d = root / folder
        if not d.is_dir():
            continue
        for p in sorted(d.glob("rank-*.json")):
            rank = _rank_of(p)
            doc = _read_json(p) if rank is not None else None
            row = make(p, rank, doc) if doc is not None else None
            if row is None:
                if rank is not None and doc is not None:
                    logger.warning("%s: not a %s file, skipped", p, folder)
                continue
            row["source"] = str(p.relative_to(root))
            rows.append(row)
    rows.extend(_hang_rows(root))
    schema = schema_for(SignalKind.RUN_EVENTS)
    if not rows:
        return empty_table(schema)
    hosts = _hosts_by_rank(root, run)
    table = pa.Table.from_pylist([{f.name: r.get(f.name) for f in schema} for r in rows], schema=schema)
    return table.append_column(HOST_COLUMN, pa.array([hosts.get(r["rank"]) for r in rows], pa.string()))


def _drill_kernel_logs(root: Path, run: RunInfo | None) -> pa.Table | None:
    drills = root / "drills"
    if not drills.is_dir():
        return None
    _logs = _log_parser()
    known = [h.host for h in run.hosts] if run is not None else []
    tables = []
    for host_dir in sorted(p for p in drills.iterdir() if p.is_dir()):
        f = host_dir / "kernel.log"
        if f.is_file():
            host = host_dir.name
            tables.append(_logs.attribute_to_host(_logs.parse_log_file(f, host=host), host, known or [host]))
    return pa.concat_tables(tables, promote_options="default") if tables else None


def parse_run_dir_events(root: Path, run: RunInfo | None) -> Mapping[SignalKind, pa.Table]:
    out: dict[SignalKind, pa.Table] = {}
    events = _events_table(root, run)
    if events.num_rows:
        out[SignalKind.RUN_EVENTS] = events
    kernel = _drill_kernel_logs(root, run)
    if kernel is not None and kernel.num_rows:
        out[SignalKind.LOG_EVENTS] = kernel
    return out
