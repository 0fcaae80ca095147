"""`diagnose --since/--until`: keep only the rows of a time window, in every table that has a time.

Times are ISO 8601 with their UTC offset (`2026-11-25T03:00:00+01:00`; no offset means UTC, said in
the help) or a duration back from now (`30m`, `2h`, `1d`). The time column of each kind is the one
its schema defines (trainctl.schemas): a row without a time is kept (it cannot be placed).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import pyarrow as pa

from trainctl.errors import InputError
from trainctl.schemas import SignalKind

__all__ = ["TimeWindow", "parse_time", "apply_window", "timed_rows_kept", "window_note", "TIME_COLUMN"]

TIME_COLUMN: Mapping[SignalKind, str] = {
    SignalKind.TIMELINE: "start_ts",
    SignalKind.GPU_METRICS: "ts",
    SignalKind.HOST_METRICS: "ts",
    SignalKind.LOG_EVENTS: "ts",
    SignalKind.COLLECTIVES: "enqueue_ts",
    SignalKind.RUN_EVENTS: "ts",
}
_REL = re.compile(r"^(\d+(?:\.\d+)?)\s*([smhd])(?:\s+ago)?$")  # "2h" and the help's "2h ago"
# The timestamps' range (Arrow's, in nanoseconds since the epoch: 1677-09-21 to 2262-04-11), whole years inside it
_EARLIEST = datetime(1678, 1, 1, tzinfo=UTC)
_LATEST = datetime(2262, 1, 1, tzinfo=UTC)
_UNIT = {"s": 1, "m": 60, "h": 3600, "d": 86400}


@dataclass(frozen=True)
class TimeWindow:
    since: datetime | None = None
    until: datetime | None = None

    def __post_init__(self) -> None:
        if self.since is not None and self.until is not None and self.since > self.until:
            raise InputError(
                f"--since {self.since.isoformat()} is after --until {self.until.isoformat()}: no time is in that "
                "window; swap them"
            )

    def __bool__(self) -> bool:
        return self.since is not None or self.until is not None

    def describe(self) -> str:
        bounds = [f"{name} {t.isoformat()}" for name, t in (("since", self.since), ("until", self.until)) if t]
        return " and ".join(bounds)


def parse_time(text: str | None, *, flag: str, now: datetime | None = None) -> datetime | None:
    if text is None or not text.strip():
        return None
    t = text.strip()
    m = _REL.match(t)
    try:
        if m:
            dt = (now or datetime.now(UTC)) - timedelta(seconds=float(m.group(1)) * _UNIT[m.group(2)])
        else:
            dt = datetime.fromisoformat(t)
    except ValueError:
        raise InputError(
            f"{flag} {text!r}: not a time; pass ISO 8601 with its offset (2026-11-25T03:00:00+00:00) or a duration "
            "back from now (30m, 2h, 1d)"
        ) from None
    except OverflowError:  # a duration back past year 1
        dt = datetime.min.replace(tzinfo=UTC)
    dt = dt if dt.tzinfo else dt.replace(tzinfo=UTC)
    if not _EARLIEST <= dt < _LATEST:
        raise InputError(
            f"{flag} {text!r}: outside the years {_EARLIEST.year}-{_LATEST.year - 1} that the records' timestamps can"
            f" hold; drop {flag} to keep every row on that side"
        )
    return dt


def apply_window(tables: dict[SignalKind, object], window: TimeWindow) -> dict[SignalKind, object]:
    if not window:
        return tables
    # Imported here: pyarrow.dataset imports pandas (~0.25 s), pyarrow.compute costs ~0.05 s, and only a
    # windowed diagnose filters with them.
    import pyarrow.compute as pc
    import pyarrow.dataset as pads

    out = dict(tables)
    for kind, col in TIME_COLUMN.items():
        t = out.get(kind)
        if t is None:
            continue
        names = t.schema.names
        if col not in names:
            continue
        field = t.schema.field(col)
        if not pa.types.is_timestamp(field.type):
            continue
        cond = None
        for bound, op in ((window.since, pc.greater_equal), (window.until, pc.less_equal)):
            if bound is None:
                continue
            scalar = pa.scalar(bound, type=pa.timestamp("ns", tz="UTC")).cast(field.type)
            c = pc.field(col).is_null() | op(pc.field(col), scalar)
            cond = c if cond is None else cond & c
        if isinstance(t, pads.Dataset):
            out[kind] = t.to_table(filter=cond)
        else:
            out[kind] = pads.dataset(t).to_table(filter=cond)
    return out


def timed_rows_kept(before: Mapping[SignalKind, object], after: Mapping[SignalKind, object]) -> tuple[int, int]:
    """(rows that carry a time kept by the window, such rows before it), over every timed table (rows without a
    time are kept, and not counted)."""
    kept = total = 0
    for kind, col in TIME_COLUMN.items():
        if kind in before and kind in after:
            total += _timed_rows(before[kind], col)
            kept += _timed_rows(after[kind], col)
    return kept, total


def window_note(kept: int, total: int, window: TimeWindow) -> str:
    """What the window kept (timed_rows_kept), so that a window that missed the run is not read as a clean run."""
    if total == 0:
        return f"the window ({window.describe()}) filtered nothing: no row here carries a time"
    if kept == 0:
        return (
            f"the window ({window.describe()}) kept none of the {total} timed rows: the run's records lie outside it; "
            "widen it, or drop --since/--until"
        )
    return f"the window ({window.describe()}) kept {kept} of {total} timed rows"


def _timed_rows(t: object, col: str) -> int:
    import pyarrow.compute as pc
    import pyarrow.dataset as pads

    if col not in t.schema.names:  # type: ignore[attr-defined]
        return 0
    if isinstance(t, pads.Dataset):
        return int(t.count_rows(filter=pc.field(col).is_valid()))
    column = t.column(col)  # type: ignore[attr-defined]
    return len(column) - column.null_count
