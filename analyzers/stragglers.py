"""Straggler analysis over the `timeline` table (rank x step x phase durations).

Two steps, as in HTA's straggler analysis ("compute a metric", then "pick candidates"):

1. `window_stats` (DuckDB, out of core): per (rank, phase, window of steps), the per-step
   duration of that phase: a low quantile (`quantile`, default p25) for work phases, the median for
   communication/wait. Works on a loaded `pa.Table` or a lazy `pyarrow.dataset.Dataset`; only
   the small aggregate (ranks x phases x windows rows) reaches pandas.
2. `find_stragglers` (plain pandas/numpy on the aggregate): each rank's window median is divided by
   the median of the *other* ranks in the same window and phase. A ratio of 1.5 means the rank took
   1.5x as long as a typical peer for the same steps.

Why this shape:
- Only intra-rank durations are compared, never timestamps across hosts, so clock offsets between
  hosts do not matter.
- Comparing ranks within the same steps cancels everything the whole job shares: a job-wide
  slowdown, a slow shared filesystem, or steps with longer sequences all move the peers' median too.
- Where `tokens` is set, work phases are compared per token (rescaled to the job's mean tokens per
  step so the numbers still read as ms): a rank that packs more tokens is not slow for it.
- Medians over a window ignore single slow steps (GC pause, checkpoint), and a finding needs
  `min_windows` slow windows that cover at least `persistence` of its step range: short blips are
  not stragglers. A slowdown of seconds, not the whole run, must also cost a tenth of a step
  (`brief_min_step_share`): a healthy rank on shared cores loses a few percent of a step for seconds.
- In synchronous training every healthy rank *waits* for the straggler, so their `communication` /
  `wait` time grows by what the straggler's work phases grew. The culprit is the rank whose own
  work (data, forward, backward, compute, optimizer) is long. A communication straggler is only
  claimed when its collective time is long while its work is normal *and* no rank has a work
  slowdown at the same steps that its peers could be waiting for; even then confidence is capped,
  because phase timings alone cannot tell a slow link from a group waiting on something untimed.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from trainctl.findings import Category, Finding, FindingKind, Severity
from trainctl.schemas import Phase, SignalKind
from trainctl.signals import LazyTable, Signals, TableLike

if TYPE_CHECKING:  # pandas costs ~0.25 s to import: the decision runs on numpy, pandas is imported where used
    import pandas as pd

__all__ = [
    "PHASE_CATEGORY",
    "WORK_PHASES",
    "COMM_PHASES",
    "TOKEN_SCALED_PHASES",
    "window_stats",
    "find_stragglers",
    "analyze",
    "analyze_with_notes",
    "BELOW_FLOOR",
    "register_timeline",
    "timeline_extent",
]

logger = logging.getLogger(__name__)

# What each timed phase says about a slow rank. `step` (the whole step) is not compared: in
# synchronous training every rank's step takes the same time, straggler or not.
PHASE_CATEGORY: Mapping[str, Category] = {
    Phase.DATA.value: Category.DATA,
    Phase.FORWARD.value: Category.COMPUTE,
    Phase.BACKWARD.value: Category.COMPUTE,
    Phase.COMPUTE.value: Category.COMPUTE,
    Phase.OPTIMIZER.value: Category.COMPUTE,
    Phase.COMMUNICATION.value: Category.COMMUNICATION,
    Phase.WAIT.value: Category.COMMUNICATION,
}
WORK_PHASES = frozenset(p for p, c in PHASE_CATEGORY.items() if c is not Category.COMMUNICATION)
COMM_PHASES = frozenset(p for p, c in PHASE_CATEGORY.items() if c is Category.COMMUNICATION)
# Phases whose cost grows with the tokens of the step; gradients (communication) and the
# optimizer step do not depend on the batch.
TOKEN_SCALED_PHASES = frozenset({Phase.DATA.value, Phase.FORWARD.value, Phase.BACKWARD.value, Phase.COMPUTE.value})
# Order in which phases are named in summaries.
_PHASE_ORDER = [p.value for p in Phase]

# `_packed_stats` queries a timeline of at least twice this many rows in chunks of ranks of about
# this many rows, at most _MAX_CHUNKS (the 49M-row benchmark, median wall of the whole diagnosis:
# 4 chunks 1.27 s, 8 chunks 1.23 s, 12 1.25 s, 16 1.26 s).
_CHUNK_ROWS = 4_000_000
_MAX_CHUNKS = 8
_CHUNK_REREAD = 0.1  # the share of the rows that files spanning chunk boundaries may add

# Windows when `window_steps` is not given: about this many per run, each 1..50 steps.
_AUTO_WINDOWS = 10
_MAX_AUTO_WINDOW_STEPS = 50
# Below this many steps a run gets no straggler verdict: with ~10 windows a window holds one step,
# so a "persistent" slowdown is three single steps, which scheduling noise alone produces (a 5-step
# xid drill named two healthy ranks). `notes` says so instead.
MIN_STEPS = 20


# Phases as small integer codes in the packed sort keys of `_packed_stats` (sorted names, so the
# codes do not depend on dict order).
_PHASE_NAMES = tuple(sorted(PHASE_CATEGORY))
_PHASE_IS_WORK = np.array([p in WORK_PHASES for p in _PHASE_NAMES])


def _sql_list(values: Iterable[str]) -> str:
    return ", ".join("'" + v.replace("'", "''") + "'" for v in sorted(values))


@dataclass(frozen=True)
class WindowPlan:
    """How steps were grouped: windows of `window_steps`, every `step_stride`-th step sampled."""

    min_step: int
    max_step: int
    window_steps: int
    step_stride: int

    @property
    def sample_sql(self) -> str:
        """The SQL filter that keeps the sampled steps; empty when every step is used."""
        return f"AND (step - {self.min_step}) % {self.step_stride} = 0" if self.step_stride > 1 else ""


@dataclass(frozen=True)
class _Extent:
    """What is known of the timeline before scanning it: from Parquet footers, or one cheap scan."""

    min_step: int | None  # None: no rows
    max_step: int | None
    min_rank: int | None
    max_rank: int | None
    max_duration_ns: int | None
    varying_tokens: bool  # `tokens` holds more than one value: compare work per token
    # From footers only (None after a scan): the rows, and each local Parquet file's (min, max)
    # rank in file order.
    rows: int | None = None
    file_ranks: tuple[tuple[int, int], ...] | None = None


@dataclass(frozen=True)
class _Windows:
    """One row per (rank, phase, window), as numpy columns: what `window_stats` returns as a
    DataFrame. find_stragglers decides on these; pandas (~0.25 s to import, a fifth of the
    diagnosis of the 49M-row benchmark) is imported only for the communication checks."""

    rank: np.ndarray  # int64
    phase: np.ndarray  # int64 index into _PHASE_NAMES
    win: np.ndarray  # int64
    n: np.ndarray  # int64: the window's rows (sampled steps)
    v_ns: np.ndarray  # float64

    def take(self, which: np.ndarray) -> _Windows:
        return _Windows(*(getattr(self, f.name)[which] for f in fields(self)))


_NO_WINDOWS = _Windows(*(np.empty(0, np.int64) for _ in range(4)), np.empty(0))


def window_stats(
    timeline: TableLike | LazyTable,
    *,
    window_steps: int | None = None,
    samples_per_window: int | None = 12,
    quantile: float = 0.25,
) -> tuple[pd.DataFrame, WindowPlan]:
    """Aggregate a timeline to one value per (rank, phase, window of steps), in one scan.

    Args:
        timeline: the `timeline` table (trainctl.schemas), a `pa.Table` or a lazy
            `pyarrow.dataset.Dataset`; DuckDB scans it directly, reading only the needed columns.
        window_steps: steps per window; None picks about ten windows per run (1..50 steps each).
        samples_per_window: a window median needs about this many steps; longer windows are
            sampled every k-th step (k = window_steps // samples_per_window) to bound the cost on
            huge runs. None: use every step. Windows of fewer than 2x this many steps (every run
            under ~240 steps with the defaults) are never sampled.

    Returns:
        (stats, plan). `stats` has one row per (rank, phase, window) with columns rank, phase
        (categorical), win, n (rows), first_step, last_step and v_ns: the per-step duration in ns,
        the `quantile` for work phases (see find_stragglers for why not the median), the median
        for communication/wait (waiting is not one-sided noise); both interpolated linearly, as
        DuckDB's quantile_cont. For token-scaled phases whose rows all have `tokens` > 0 (when
        tokens vary), v_ns is the quantile of duration / tokens times the job's mean tokens per
        step, so ranks are compared per token while the number still reads as a step's time.
    """
    import pandas as pd

    w, plan = _window_values(timeline, window_steps, samples_per_window, quantile)
    first = plan.min_step + w.win * plan.window_steps
    stats = pd.DataFrame(
        {
            "rank": w.rank,
            "phase": pd.Categorical.from_codes(w.phase, categories=_PHASE_NAMES),
            "win": w.win,
            "n": w.n,
            "first_step": first,
            "last_step": np.minimum(first + plan.window_steps - 1, plan.max_step),
            "v_ns": w.v_ns,
        }
    )
    return stats, plan


def _window_values(
    timeline: TableLike | LazyTable, window_steps: int | None, samples_per_window: int | None, quantile: float
) -> tuple[_Windows, WindowPlan]:
    """`window_stats` as numpy columns."""
    # DuckDB's connect (~18 ms) releases the GIL: it runs while the footers give the extent.
    with ThreadPoolExecutor(max_workers=1) as worker:
        connecting = worker.submit(duckdb.connect)
        local = _local_parquet(timeline)
        ext = _footer_extent(local[1]) if local and local[0] else None
    con = connecting.result()
    try:
        register_timeline(con, timeline)
        ext = ext or _scanned_extent(con)
        if ext.min_step is None:
            return _NO_WINDOWS, WindowPlan(0, -1, window_steps or 1, 1)
        if window_steps is None:
            n_steps = ext.max_step - ext.min_step + 1
            window_steps = int(min(_MAX_AUTO_WINDOW_STEPS, max(1, n_steps // _AUTO_WINDOWS)))
        if window_steps < 1:
            raise ValueError(f"window_steps must be >= 1, got {window_steps}")
        stride = 1
        if samples_per_window and window_steps >= 2 * samples_per_window:
            stride = window_steps // samples_per_window
        plan = WindowPlan(ext.min_step, ext.max_step, int(window_steps), stride)
        packed = None if ext.varying_tokens else _packed_stats(con, timeline, ext, plan, quantile)
        return (packed if packed is not None else _aggregated_stats(con, plan, quantile)), plan
    finally:
        con.close()


def _packed_stats(
    con: duckdb.DuckDBPyConnection,
    timeline: TableLike | LazyTable,
    ext: _Extent,
    plan: WindowPlan,
    quantile: float,
) -> _Windows | None:
    """Quantiles by sorting packed integers; None when the keys would not fit in 63 bits.

    DuckDB's holistic aggregates (quantile_cont over ~800k small groups) cost about as much as
    the scan itself on the 49M-row benchmark. Here DuckDB only scans, filters and packs each row
    into one int64, group (rank, phase, window) in the high bits and the duration in the low
    bits; a numpy sort then orders every group's durations at once, and each quantile is read
    at its position. The same numbers as quantile_cont (tested against pandas), 1.8 s instead
    of 2.8 s on the benchmark (2 cores; bench/straggler_scale.py).

    A big timeline is queried in chunks of ranks (rank is the keys' high part, so the chunks'
    sorted keys follow each other): one thread runs the next chunk's query in DuckDB (which
    releases the GIL) while this one sorts the last chunk and reads its quantiles, work that
    otherwise waits for the whole scan on one core.
    """
    n_win = (plan.max_step - plan.min_step) // plan.window_steps + 1
    n_groups = (ext.max_rank + 1) * len(_PHASE_NAMES) * n_win
    value_bits = 63 - max(1, (n_groups - 1).bit_length())
    if ext.min_rank < 0 or ext.max_duration_ns is None or ext.max_duration_ns >= 1 << value_bits:
        return None
    # Phase codes come from a join with a 7-row table rather than `phase IN (...)` plus a CASE over
    # the strings: DuckDB pushes the join's keys into the Parquet scan as a filter and maps each
    # row with one hash probe (the IN list became a mark join over all 49M rows, the CASE up to 7
    # string compares per row: 0.25-0.3 CPU s more on the benchmark).
    codes = ", ".join(f"('{p}', {i})" for i, p in enumerate(_PHASE_NAMES))
    queries = [
        f"""
        SELECT ((rank::BIGINT * {len(_PHASE_NAMES)} + p.code) * {n_win} + (step - {plan.min_step}) // {plan.window_steps})
               * {1 << value_bits} + duration_ns AS k
        FROM {source} JOIN (VALUES {codes}) AS p(name, code) ON phase = p.name
        WHERE duration_ns >= 0 {plan.sample_sql} {ranks}
        """
        for source, ranks in _rank_chunks(timeline, ext)
    ]
    # The worker uses `con` alone until the last chunk is fetched (a cursor would not see a
    # registered pa.Table); the chunks run one after the other, each on all of DuckDB's threads.
    with ThreadPoolExecutor(max_workers=1) as worker:
        pending = [worker.submit(lambda sql: con.execute(sql).fetchnumpy()["k"], sql) for sql in queries]
        try:
            parts = (_group_quantiles(f.result(), n_win, value_bits, quantile) for f in pending)
            return next(parts) if len(pending) == 1 else _gathered(parts, min(n_groups, ext.rows))
        except BaseException:  # an error or Ctrl-C: the chunks not yet started are not run, the running one stops
            for f in pending:
                f.cancel()
            con.interrupt()
            raise


def _gathered(parts: Iterable[_Windows], capacity: int) -> _Windows:
    """The chunks' windows as one set of columns, each chunk copied in as it comes (while the next
    is queried) rather than all concatenated after the last; `capacity` (groups or rows, whichever
    is fewer) bounds the columns, whose pages are touched only where written."""
    out = _Windows(*(np.empty(capacity, getattr(_NO_WINDOWS, f.name).dtype) for f in fields(_Windows)))
    filled = 0
    for part in parts:
        end = filled + len(part.n)
        for f in fields(_Windows):
            getattr(out, f.name)[filled:end] = getattr(part, f.name)
        filled = end
    return out.take(slice(0, filled))


def _rank_chunks(timeline: TableLike | LazyTable, ext: _Extent) -> list[tuple[str, str]]:
    """(FROM source, rank filter) of each chunk of `_packed_stats`, in rank order.

    Each chunk reads only the files whose footers' rank range meets its ranks (a rank filter over
    every file would have DuckDB read all 1,024 footers of the benchmark once per chunk). A file
    that holds several chunks' ranks is read by each of them, so files not split by rank (one
    host's parts rotated by time, each with all its ranks) are read in one query instead: chunks
    pay only while they read at most _CHUNK_REREAD more rows than the files hold.
    """
    n_chunks = min(_MAX_CHUNKS, (ext.rows or 0) // _CHUNK_ROWS)
    local = _local_parquet(timeline)
    if local is None or ext.file_ranks is None or n_chunks < 2:
        return [("timeline", "")]
    files, footers = local
    span = ext.max_rank - ext.min_rank + 1
    bounds = [ext.min_rank + span * i // n_chunks for i in range(n_chunks + 1)]
    chunks = [
        (lo, hi, [i for i, (f_lo, f_hi) in enumerate(ext.file_ranks) if f_lo <= hi and f_hi >= lo])
        for lo, hi in zip(bounds[:-1], (b - 1 for b in bounds[1:]))
    ]
    if sum(footers[i].num_rows for *_, which in chunks for i in which) > (1 + _CHUNK_REREAD) * ext.rows:
        return [("timeline", "")]
    has_tokens = [_has_tokens(meta) for meta in footers]
    return [
        (_read_parquet([files[i] for i in which], [has_tokens[i] for i in which]), f"AND rank BETWEEN {lo} AND {hi}")
        for lo, hi, which in chunks
        if which
    ]


def _group_quantiles(keys: np.ndarray, n_win: int, value_bits: int, quantile: float) -> _Windows:
    """Each group's quantile from packed keys (see _packed_stats): sorted here, in place."""
    keys = np.asarray(keys, dtype=np.int64)
    if len(keys) == 0:
        return _NO_WINDOWS
    if not keys.flags.writeable:
        keys = keys.copy()
    keys.sort()  # in place: 80 MB for 10M rows, sorted in ~0.1 s
    group = keys >> value_bits
    edge = np.empty(len(keys), dtype=bool)
    edge[0] = True
    np.not_equal(group[1:], group[:-1], out=edge[1:])
    starts = np.flatnonzero(edge)
    n = np.diff(starts, append=len(keys))
    gid = group[starts]
    del group, edge
    win = gid % n_win
    phase_code = (gid // n_win) % len(_PHASE_NAMES)
    rank = gid // (n_win * len(_PHASE_NAMES))
    # quantile_cont: linear interpolation between the values at floor and ceil of q * (n - 1).
    q = np.where(_PHASE_IS_WORK[phase_code], quantile, 0.5)
    pos = q * (n - 1)
    lo = np.floor(pos).astype(np.int64)
    frac = pos - lo
    mask = (1 << value_bits) - 1
    v_lo = (keys[starts + lo] & mask).astype(np.float64)
    v_hi = (keys[starts + np.minimum(lo + 1, n - 1)] & mask).astype(np.float64)
    return _Windows(rank=rank, phase=phase_code, win=win, n=n, v_ns=v_lo + (v_hi - v_lo) * frac)


def _aggregated_stats(con: duckdb.DuckDBPyConnection, plan: WindowPlan, quantile: float) -> _Windows:
    """Quantiles with DuckDB's quantile_cont: the path for per-token values (doubles)."""
    scaled = _sql_list(TOKEN_SCALED_PHASES)
    value = f"CASE WHEN tokens > 0 AND phase IN ({scaled}) THEN duration_ns / tokens ELSE duration_ns::DOUBLE END"
    # One aggregate returns both quantiles (work phases use the low one, communication the
    # median): a second aggregate would cost a second per-group selection.
    res = con.execute(
        f"""
        SELECT * EXCLUDE (qs), qs[1] AS vq, qs[2] AS vm FROM (
        SELECT rank, phase, (step - {plan.min_step}) // {plan.window_steps} AS win, count(*) AS n,
               count(*) FILTER (WHERE tokens > 0) AS nt, sum(tokens) AS tokens_sum,
               quantile_cont({value}, [{float(quantile)}, 0.5]) AS qs
        FROM timeline
        WHERE phase IN ({_sql_list(_PHASE_NAMES)}) {plan.sample_sql}
        GROUP BY ALL)
        """
    ).fetchnumpy()
    # NULL sums (no tokens in the group) come back masked; they are only read where tokens are set.
    col = {k: np.ma.getdata(v) for k, v in res.items()}
    code = {p: i for i, p in enumerate(_PHASE_NAMES)}
    phase = np.array([code[p] for p in col["phase"]], dtype=np.int64)
    n, nt = col["n"].astype(np.int64), col["nt"].astype(np.int64)
    v = np.where(_PHASE_IS_WORK[phase], col["vq"], col["vm"])
    # Per-token quantiles are rescaled to the mean tokens per step of the scaled phases' rows.
    is_scaled = np.isin(phase, [code[p] for p in TOKEN_SCALED_PHASES])
    full = is_scaled & (nt == n)
    partial = is_scaled & (nt > 0) & (nt < n)
    if partial.any():
        # Mixed per-token and absolute values in one quantile mean nothing; leave those out.
        logger.warning(
            "timeline: %d (rank, phase, window) groups have tokens on only some rows; skipped", int(partial.sum())
        )
    mean_tokens = float(col["tokens_sum"][full].sum()) / max(1, int(nt[full].sum()))
    keep = ~partial
    return _Windows(
        rank=col["rank"].astype(np.int64)[keep],
        phase=phase[keep],
        win=col["win"].astype(np.int64)[keep],
        n=n[keep],
        v_ns=np.where(full, v * mean_tokens, v)[keep],
    )


def timeline_extent(
    con: duckdb.DuckDBPyConnection, timeline: TableLike | LazyTable, files: list[str] | None
) -> _Extent:
    """Step and rank range, longest duration and whether tokens vary: footers first, else a scan."""
    return (_footer_extent(_local_parquet(timeline)[1]) if files else None) or _scanned_extent(con)


def _scanned_extent(con: duckdb.DuckDBPyConnection) -> _Extent:
    """`timeline_extent` by a scan of the registered timeline (no footers, or footers without statistics)."""
    lo, hi, rlo, rhi, dmax, tlo, thi = con.execute(
        "SELECT min(step), max(step), min(rank), max(rank), max(duration_ns), min(tokens), max(tokens) FROM timeline"
    ).fetchone()
    if lo is None:
        return _Extent(None, None, None, None, None, False)
    return _Extent(int(lo), int(hi), int(rlo), int(rhi), int(dmax), tlo is not None and tlo != thi)


def _local_parquet(timeline: TableLike | LazyTable) -> tuple[list[str], list[pq.FileMetaData]] | None:
    """The local Parquet files behind a lazy timeline and their footers; None for anything else.

    The footers were read when the table was loaded (trainctl.dataset.open_lazy / open_dataset;
    pyarrow keeps them on a Dataset's fragments), so this reads no file.
    """
    if isinstance(timeline, LazyTable):
        return list(timeline.files), list(timeline.footers)
    if isinstance(timeline, pa.Table):
        return None
    import pyarrow.dataset as pads  # already imported: the timeline is a Dataset
    import pyarrow.fs as pafs

    if isinstance(timeline, pads.FileSystemDataset) and isinstance(timeline.filesystem, pafs.LocalFileSystem):
        return [str(f) for f in timeline.files], [frag.metadata for frag in timeline.get_fragments()]
    return None


def _footer_extent(footers: list[pq.FileMetaData]) -> _Extent | None:
    """The extent from the Parquet footers' statistics; None when a file lacks them."""
    want = ("step", "rank", "duration_ns", "tokens")
    lo: dict[str, Any] = {}
    hi: dict[str, Any] = {}
    rows = 0
    file_ranks = []
    for meta in footers:
        names = meta.schema.names
        rank_lo = rank_hi = None
        for i in range(meta.num_row_groups):
            rg = meta.row_group(i)
            rows += rg.num_rows
            for col in want:
                if col not in names:
                    continue
                st = rg.column(names.index(col)).statistics
                if st is None:
                    return None
                if st.has_null_count and st.null_count == rg.num_rows:
                    continue  # all null (tokens of a user script)
                if not st.has_min_max:
                    return None
                lo[col] = st.min if col not in lo else min(lo[col], st.min)
                hi[col] = st.max if col not in hi else max(hi[col], st.max)
                if col == "rank":
                    rank_lo = st.min if rank_lo is None else min(rank_lo, st.min)
                    rank_hi = st.max if rank_hi is None else max(rank_hi, st.max)
        # A file without rows has no rank range; (1, 0) matches no chunk of ranks.
        file_ranks.append((1, 0) if rank_lo is None else (int(rank_lo), int(rank_hi)))
    if rows == 0 or "step" not in lo:
        return _Extent(None, None, None, None, None, False)
    varying = "tokens" in lo and lo["tokens"] != hi["tokens"]
    return _Extent(
        int(lo["step"]),
        int(hi["step"]),
        int(lo["rank"]),
        int(hi["rank"]),
        int(hi["duration_ns"]),
        varying,
        rows,
        tuple(file_ranks),
    )


def register_timeline(con: duckdb.DuckDBPyConnection, timeline: TableLike | LazyTable) -> list[str] | None:
    """Expose `timeline` to DuckDB as a view with the columns the query needs.

    Local Parquet files (a LazyTable or a Dataset over them) are read by DuckDB's own Parquet
    reader (parallel, with projection and filter pushdown): scanning them through Arrow's dataset
    scanner took 4x longer on the 49M-row benchmark. Files may omit the nullable `tokens` column
    (trainctl.schemas), so columns are unioned by name when some file lacks it (reading every
    schema first costs time).
    """
    if isinstance(timeline, LazyTable) and not timeline.files:
        timeline = timeline.open()
    local = _local_parquet(timeline)
    if local is not None:
        files, footers = local
        if not files:
            con.register("timeline", timeline.schema.empty_table())
            return None
        has_tokens = [_has_tokens(meta) for meta in footers]
        tokens = "tokens" if any(has_tokens) else "NULL::BIGINT AS tokens"
        con.execute(
            f"CREATE VIEW timeline AS SELECT rank, step, phase, duration_ns, {tokens} "
            f"FROM {_read_parquet(files, has_tokens)}"
        )
        return files
    if isinstance(timeline, pa.Table):
        table = timeline
    elif "tokens" in timeline.schema.names:
        con.register("timeline", timeline)
        return None
    else:
        table = timeline.to_table(columns=["rank", "step", "phase", "duration_ns"])
    if "tokens" not in table.column_names:
        table = table.append_column("tokens", pa.nulls(table.num_rows, pa.int64()))
    con.register("timeline", table)
    return None


def _has_tokens(meta: pq.FileMetaData) -> bool:
    return "tokens" in meta.schema.names


def _read_parquet(files: list[str], has_tokens: list[bool]) -> str:
    """DuckDB's scan of local Parquet files; columns are unioned by name when only some of the
    files have the nullable `tokens` (has_tokens: per file)."""
    union = "union_by_name = true, " if any(has_tokens) and not all(has_tokens) else ""
    return f"read_parquet([{_sql_list(files)}], {union}hive_partitioning = false)"


def _peer_median(w: _Windows, group_key: np.ndarray, order: np.ndarray) -> np.ndarray:
    """Median of v_ns over the *other* ranks of each (phase, win) group, aligned with `w`
    (`group_key`, `order`: from _phase_window_order).

    Leaving the rank out matters in small jobs: with 2 ranks, a rank 1.5x slower than its peer
    would otherwise be compared with a median that already contains half of its own slowness.

    In a group sorted by value, the median without the row at position `pos` takes at most three
    values, by whether `pos` is below, at or above the middle `h` = (size - 1) // 2: odd sizes
    (an even number of peers) give (v[h] + v[h+1]) / 2, (v[h-1] + v[h+1]) / 2, (v[h-1] + v[h]) / 2;
    even sizes give v[h+1] up to the middle and v[h] above it. So they are computed per group and
    repeated over its rows: a few small arrays instead of a dozen row-sized ones, whose fresh
    memory was most of this function's 0.13 s on the 49M-row benchmark (now ~0.005 s).
    """
    starts, sizes = _group_starts(group_key)
    h = (sizes - 1) // 2
    odd = sizes % 2 == 1

    def at(offset: int) -> np.ndarray:
        # the value at `offset` from each group's middle; clipped: used only where it exists
        return w.v_ns[order[np.clip(starts + h + offset, 0, len(order) - 1)]]

    lower, mid, upper = at(-1), at(0), at(1)
    values = np.where(
        odd[:, None],
        np.stack([(mid + upper) / 2.0, (lower + upper) / 2.0, (lower + mid) / 2.0], axis=1),
        np.stack([upper, upper, mid], axis=1),  # even: the middle column has no rows
    )
    lengths = np.stack([np.where(odd, h, h + 1), odd.astype(np.int64), sizes - 1 - h], axis=1)
    alone = sizes == 1  # no peer: NaN
    values[alone] = np.nan
    lengths[alone] = (1, 0, 0)
    out = np.empty(len(order))
    out[order] = np.repeat(values.ravel(), lengths.ravel())
    return out


def _group_starts(group_key: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Where each (phase, window) group starts in the rows sorted by _phase_window_order, and its
    size: from the keys' counts, without gathering the keys in that order."""
    sizes = np.bincount(group_key)
    sizes = sizes[sizes > 0]  # the groups in key order, as the sorted rows visit them
    return np.cumsum(sizes) - sizes, sizes


def _phase_window_order(w: _Windows) -> tuple[np.ndarray, np.ndarray]:
    """Each row's (phase, window) group key, and the order that sorts the rows by (group, v_ns):
    a value sort, then a stable sort by group, which numpy does as a radix sort when the key fits
    16 bits (phases x windows); 3x faster than np.lexsort. Computed once for the peer medians and
    the typical step (0.05 CPU s per sort on the benchmark's 0.8M windows)."""
    n_win = int(w.win.max()) + 1
    # uint16 keys where they fit: a quarter of the memory (fresh memory is what costs on the benchmark).
    small = len(_PHASE_NAMES) * n_win <= 1 << 16
    key = w.phase.astype(np.uint16) * np.uint16(n_win) + w.win.astype(np.uint16) if small else w.phase * n_win + w.win
    by_value = np.argsort(w.v_ns)
    return key, by_value[np.argsort(key[by_value], kind="stable")]


@dataclass(frozen=True)
class _Episode:
    """A run of slow windows of one (rank, phase)."""

    rank: int
    phase: str
    wins: tuple[int, ...]  # the slow windows
    first_step: int
    last_step: int
    span_windows: int  # windows from the first slow one to the last, slow or not
    ratio: float  # median over the slow windows of rank / peer median
    rank_ms: float
    peer_ms: float


def _episodes(
    rank: int, phase: str, slow: _SlowWindows, plan: WindowPlan, *, min_windows: int, persistence: float
) -> list[_Episode]:
    """Group one (rank, phase)'s slow windows (in window order) into episodes that are `persistence` dense."""
    runs: list[list[int]] = []
    for w in slow.win.tolist():
        if runs:
            cur = runs[-1]
            if (len(cur) + 1) / (w - cur[0] + 1) >= persistence:
                cur.append(w)
                continue
        runs.append([w])
    out = []
    for run in runs:
        if len(run) < min_windows:
            continue
        rows = np.isin(slow.win, run)
        first = plan.min_step + int(slow.win[rows].min()) * plan.window_steps
        last = min(plan.min_step + int(slow.win[rows].max()) * plan.window_steps + plan.window_steps - 1, plan.max_step)
        out.append(
            _Episode(
                rank=rank,
                phase=phase,
                wins=tuple(run),
                first_step=first,
                last_step=last,
                span_windows=run[-1] - run[0] + 1,
                ratio=float(np.median(slow.ratio[rows])),
                rank_ms=float(np.median(slow.v_ns[rows]) / 1e6),
                peer_ms=float(np.median(slow.peer_ns[rows]) / 1e6),
            )
        )
    return out


@dataclass(frozen=True)
class _SlowWindows:
    """One (rank, phase)'s slow windows, in window order."""

    win: np.ndarray
    ratio: np.ndarray
    v_ns: np.ndarray
    peer_ns: np.ndarray


def _overlaps(a: _Episode, b: _Episode) -> bool:
    return a.first_step <= b.last_step and b.first_step <= a.last_step


def _fmt_phases(phases: Iterable[str]) -> str:
    return "+".join(sorted(phases, key=lambda p: _PHASE_ORDER.index(p) if p in _PHASE_ORDER else 99))


def find_stragglers(
    timeline: TableLike | LazyTable,
    *,
    rank_to_host: Mapping[int, str] | None = None,
    warn_factor: float = 1.2,
    critical_factor: float = 2.0,
    window_steps: int | None = None,
    min_windows: int = 3,
    persistence: float = 0.75,
    min_step_share: float = 0.02,
    brief_min_step_share: float = 0.10,
    brief_min_lost_steps: float = 2.0,
    sustained_s: float = 60.0,
    whole_run_share: float = 0.75,
    critical_step_share: float = 0.10,
    comm_min_step_share: float = 0.05,
    comm_confidence_cap: float = 0.6,
    samples_per_window: int | None = 12,
    quantile: float = 0.25,
    min_steps: int = MIN_STEPS,
    notes: list[str] | None = None,
) -> list[Finding]:
    """Find ranks that are persistently slower than their peers in their own work.

    Args:
        timeline: the `timeline` table (pa.Table or lazy pyarrow Dataset). A `host` column (added
            by trainctl.dataset readers) names hosts when `rank_to_host` does not.
        rank_to_host: rank -> host from the run's RunInfo; wins over the `host` column.
        warn_factor: a window is slow when the rank's median phase time is at least this many
            times its peers' median (1.2 = 20% slower); the finding is a warning from here.
        critical_factor: a finding whose slowdown reaches this factor is critical (2.0 = twice as
            long as the median peer), if its effect also reaches `critical_step_share`.
        window_steps: steps per window; None = about ten windows per run, 1..50 steps each.
        min_windows: slow windows an episode needs; with `window_steps` this is the shortest
            slowdown (in steps) that is reported.
        persistence: fraction of the windows between an episode's first and last slow window that
            must be slow (0.75: one healthy window in four is tolerated).
        min_step_share: the rank's extra time in a phase must be at least this share of a
            typical step (0.02 = 2%); a 0.1 ms phase that is 1.5x slower costs nothing. This
            floor holds for a sustained slowdown (see `sustained_s`); a brief one needs
            `brief_min_step_share`.
        brief_min_step_share: the floor for a slowdown that lasts under `sustained_s` and covers
            less than `whole_run_share` of the run (0.10 = 10% of a step, GREYHOUND's slow
            iteration; research/seeds.md). Seconds of a rank 1.3x slower in one small phase, 3% of
            a step, is what scheduling gives a healthy rank on shared cores: 2 of 24 clean 4-rank
            reference runs on 2 idle cores named one so (forward, steps 0-23 and 8-31), and CI's
            full suite another (optimizer, steps 56-79); BENCHMARKS.md, "Brief stragglers".
        brief_min_lost_steps: a brief slowdown must also have cost the job this many typical steps in all (its
            extra time per step x its steps; in steps, so it holds at any step time): a few steps' scheduling noise
            is not a machine to act on. A 3-rank nan drill of 20 steps on 2 busy cores named a rank whose
            collectives took 12 ms more for 6 steps: 27% of a 45 ms step, 1.6 steps in all.
        sustained_s: wall seconds (steps x the typical step) from which a slowdown is sustained.
            Production detectors wait longer before naming a slow machine (Mycroft 15 s, ByteRobust
            5 rounds of 10 s, Aegis 10 min; research/seeds.md); 60 s, and on a long run any episode
            of `min_windows` windows of up to 50 steps is past it.
        whole_run_share: an episode spanning this share of the run's steps is sustained too: a
            short run slow from end to end is as persistent as it can show (a drill, the demo).
        critical_step_share: a critical finding needs both the factor and this much extra time per
            typical step (0.10 = 10%). A small phase doubles easily: an optimizer phase of 2.4 ms
            took 5.0 ms on a host that lost its share of 2 busy cores for a few windows (2.06x, but
            4.6% of a 57 ms step). That is worth a warning, not a drain.
        comm_min_step_share: the floor for a communication suspect (0.05 = 5% of a step), from
            window medians and again paired step by step (`_paired_excess_ms`). Its evidence is
            indirect (its own collective time, with nobody's work slow), and a host that is
            descheduled around a CPU collective shows the same for a few windows.
        comm_confidence_cap: highest confidence of a communication straggler (see module notes).
        samples_per_window: see `window_stats`; bounds the cost on huge runs by sampling steps.
        quantile: the per-window statistic of each rank's step durations (0.25 = 25th
            percentile). Scheduling noise is one-sided: preemption by other processes, interrupts
            and GC pauses only ever add time, so on shared CPUs a rank's median drifts 30-100%
            above its peers' for dozens of steps while its low quantile stays put. A real
            straggler (slow device, slow input) shifts every step, so the low quantile moves with
            it. Measured on 4 ranks sharing 2 busy cores (load 45): per-window noise sigma of
            forward/backward 0.31-0.40 with the median, 0.14-0.23 with p25; an injected 1.5x
            forward read 1.30x (median) vs 1.53x (p25), and a clean run's worst rank 2.27x vs 1.13x.
        min_steps: a timeline spanning fewer steps yields no finding (see MIN_STEPS; `notes`
            gives the reason to the report).
        notes: when given and no straggler is named, the largest work-phase episode seen under
            its floor (`min_step_share`, or `brief_min_step_share` when brief) is described in one
            line appended here (starting with BELOW_FLOOR), from the episodes this call computed:
            no second pass. It changes no finding.

    Returns:
        One Finding per straggling rank, kind `straggler`, category compute/data/communication.
        `evidence` holds `slowdown` (rank / median peer time of the phases named in the summary),
        `phase`, `phases` (each slow phase's factor and ms), `steps` [first, last], `rank_ms` and
        `median_ms` (per-step ms of those phases; work phases at the job's mean tokens per step),
        `windows` (slow / spanned, `window_steps` each); communication findings add
        `paired_excess_ms` (see `_paired_excess_ms`).
    """
    if not 1.0 < warn_factor <= critical_factor:
        raise ValueError(f"need 1 < warn_factor <= critical_factor, got {warn_factor} and {critical_factor}")
    if not 0.0 < persistence <= 1.0:
        raise ValueError(f"persistence must be in (0, 1], got {persistence}")
    if not 0.0 <= quantile <= 0.5:
        raise ValueError(f"quantile must be in [0, 0.5], got {quantile}")
    w, plan = _window_values(timeline, window_steps, samples_per_window, quantile)
    window_steps = plan.window_steps
    if len(w.v_ns) == 0 or plan.max_step - plan.min_step + 1 < min_steps:
        return []
    # The takes copy every column (33 MB of fresh memory on the benchmark): only when a row goes.
    positive = w.v_ns > 0
    if not positive.all():
        w = w.take(positive)
    group_key, order = _phase_window_order(w)
    peer_ns = _peer_median(w, group_key, order)
    keep = peer_ns > 0  # NaN (no peer) is dropped too
    if not keep.all():
        w, peer_ns, group_key = w.take(keep), peer_ns[keep], group_key[keep]
        order = (np.cumsum(keep) - 1)[order[keep[order]]]  # the kept rows, still by (group, value)
    ratio = w.v_ns / peer_ns
    # Only (rank, phase) pairs with enough slow windows go on to the per-rank Python below; the
    # pairs are formed for the slow rows alone (a few of the 0.8M windows on the benchmark).
    slow = np.flatnonzero(ratio >= warn_factor)
    # A straggler is slower than most of its peers. Where half the ranks of a (phase, window) or more read slow against
    # the others, the odd one out is a fast minority, not slow ones: 3 ranks on 2 busy cores, one of them on a core of
    # its own, named the other two (a 20-step nan drill, 1.8x each). With 2 ranks the one slow rank is half: kept.
    if len(slow) == 0:
        return []  # no window is slow (a run of one rank has no peers: every row was dropped above)
    sizes = np.bincount(group_key)
    slow_in_group = np.bincount(group_key[slow], minlength=len(sizes))
    slow = slow[2 * slow_in_group[group_key[slow]] <= sizes[group_key[slow]]]
    pair = w.rank[slow] * len(_PHASE_NAMES) + w.phase[slow]
    slow_pairs, slow_counts = np.unique(pair, return_counts=True)
    candidates = slow_pairs[slow_counts >= min_windows]  # ascending: by rank, then phase
    if len(candidates) == 0:
        return []
    wanted = np.isin(pair, candidates)
    rows, pair = slow[wanted], pair[wanted]
    by_pair = np.lexsort((w.win[rows], pair))
    rows, pair = rows[by_pair], pair[by_pair]
    episodes: list[_Episode] = []
    for at in np.split(np.arange(len(rows)), np.flatnonzero(np.diff(pair)) + 1):
        group = rows[at]
        slow_windows = _SlowWindows(w.win[group], ratio[group], w.v_ns[group], peer_ns[group])
        rank, code = divmod(int(pair[at[0]]), len(_PHASE_NAMES))
        episodes.extend(
            _episodes(rank, _PHASE_NAMES[code], slow_windows, plan, min_windows=min_windows, persistence=persistence)
        )
    step_ms = _typical_step_ms(w, group_key, order)
    typical_ms = {e: float(np.median([step_ms.get(x, 0.0) for x in e.wins])) for e in episodes}

    run_steps = plan.max_step - plan.min_step + 1

    def sustained(e: _Episode) -> bool:
        steps = e.last_step - e.first_step + 1
        return steps * typical_ms[e] / 1e3 >= sustained_s or steps >= whole_run_share * run_steps

    def floor_ms(e: _Episode, share: float) -> float:
        """The least extra time per step that names `e`: `share` of a typical step; if brief, at least
        `brief_min_step_share` of one and `brief_min_lost_steps` typical steps over its steps."""
        if sustained(e):
            return share * typical_ms[e]
        lost_ms = brief_min_lost_steps * typical_ms[e] / (e.last_step - e.first_step + 1)
        return max(max(share, brief_min_step_share) * typical_ms[e], lost_ms)

    comm_share = max(min_step_share, comm_min_step_share)
    work = [e for e in episodes if e.phase in WORK_PHASES and e.rank_ms - e.peer_ms >= floor_ms(e, min_step_share)]
    comm = [e for e in episodes if e.phase in COMM_PHASES and e.rank_ms - e.peer_ms >= floor_ms(e, comm_share)]

    by_rank: dict[int, list[_Episode]] = {}
    for e in work:
        by_rank.setdefault(e.rank, []).append(e)
    # A rank with long collectives is a suspect only if nobody's work was slow at those steps
    # (otherwise it is waiting for them) and its own work was not short (a fast rank waits longer).
    comm_suspects: dict[int, list[_Episode]] = {}
    stats = _frame(w, peer_ns) if comm else None
    work_total = _work_total_ns(stats) if stats is not None else None
    unexplained = [
        e
        for e in comm
        if e.rank not in by_rank
        and not any(_overlaps(e, w) for w in work)
        and not _work_deficit_explains(stats, e, window_steps)
        and not _other_rank_explains(work_total, e)
    ]
    paired_ms = _paired_excess_ms(timeline, unexplained, plan)
    for e in unexplained:
        if paired_ms[e] >= floor_ms(e, comm_share):
            comm_suspects.setdefault(e.rank, []).append(e)

    hosts = dict(rank_to_host or {})
    wanted = set(by_rank) | set(comm_suspects)
    if wanted - set(hosts):
        hosts.update({r: h for r, h in _hosts_of(timeline, wanted - set(hosts)).items()})

    def critical(eps: list[_Episode]) -> bool:
        extra_ms = sum(e.rank_ms - e.peer_ms for e in eps)
        return extra_ms >= critical_step_share * float(np.median([typical_ms[e] for e in eps]))

    findings = []
    for rank, eps in sorted(by_rank.items()):
        findings.append(
            _finding(
                rank,
                hosts.get(rank),
                _work_category(eps),
                eps,
                plan=plan,
                warn_factor=warn_factor,
                critical_factor=critical_factor,
                min_windows=min_windows,
                cap=1.0,
                effect_is_critical=critical,
            )
        )
    for rank, eps in sorted(comm_suspects.items()):
        findings.append(
            _finding(
                rank,
                hosts.get(rank),
                (Category.COMMUNICATION, eps),
                eps,
                plan=plan,
                warn_factor=warn_factor,
                critical_factor=critical_factor,
                min_windows=min_windows,
                cap=comm_confidence_cap,
                effect_is_critical=critical,
                paired_ms={e.phase: paired_ms[e] for e in eps},
            )
        )
    if notes is not None and not findings:
        # Work episodes only: one in communication under its floor is mostly a rank waiting for another.
        named = set(work)
        under = [e for e in episodes if e.phase in WORK_PHASES and e not in named and e.rank_ms > e.peer_ms]
        if under:
            e = max(under, key=lambda e: e.rank_ms - e.peer_ms)
            host = (rank_to_host or {}).get(e.rank) or _host_without_scan(timeline, e.rank)
            notes.append(
                _below_floor_note(
                    e,
                    host,
                    typical_ms[e],
                    brief=not sustained(e),
                    min_step_share=min_step_share,
                    brief_min_step_share=brief_min_step_share,
                    brief_min_lost_steps=brief_min_lost_steps,
                    sustained_s=sustained_s,
                )
            )
    return findings


# How find_stragglers' note on a slowdown it saw but did not name begins (distinct from NOT_JUDGED:
# the run was judged, and nothing reached the floor).
BELOW_FLOOR = "stragglers: none named, largest slowdown under the floor"


def _below_floor_note(
    e: _Episode,
    host: str | None,
    typical_ms: float,
    *,
    brief: bool,
    min_step_share: float,
    brief_min_step_share: float,
    brief_min_lost_steps: float,
    sustained_s: float,
) -> str:
    """One line on an episode under its floor: who, which phase, how much, and why it is not named."""
    extra_ms = e.rank_ms - e.peer_ms
    share = extra_ms / typical_ms if typical_ms > 0 else 0.0
    where = f"rank {e.rank}" + (f" on {host}" if host else "")
    extra = f"{extra_ms:.2f}" if extra_ms < 10 else f"{extra_ms:.1f}"
    line = (
        f"{BELOW_FLOOR}: {where}, {e.phase} {e.ratio:.2f}x its peers (steps {e.first_step}-{e.last_step}): "
        f"{extra} ms more per step, {share:.1%} of a typical {typical_ms:.1f} ms step, "
    )
    if not brief:
        return line + f"under the {min_step_share * 100:g}% floor (min_step_share)"
    lasted_s = (e.last_step - e.first_step + 1) * typical_ms / 1e3
    lost_steps = extra_ms * (e.last_step - e.first_step + 1) / typical_ms if typical_ms > 0 else 0.0
    return line + (
        f"brief (about {lasted_s:.2g} s, under sustained_s {sustained_s:g} s): a brief slowdown needs "
        f"{max(min_step_share, brief_min_step_share) * 100:g}% (brief_min_step_share) and {brief_min_lost_steps:g}"
        f" steps lost in all (brief_min_lost_steps; this one: {lost_steps:.2g})"
    )


def _host_without_scan(timeline: TableLike | LazyTable, rank: int) -> str | None:
    """The rank's host where it is known without reading the timeline again: a table in memory's
    `host` column, or the folders of a LazyTable's files whose footers' rank range (_footer_extent)
    holds the rank, when they agree; None otherwise (a pyarrow Dataset, footers without statistics,
    several hosts' files span the rank)."""
    if isinstance(timeline, pa.Table):
        return _hosts_of(timeline, {rank}).get(rank)
    if not isinstance(timeline, LazyTable):
        return None
    ext = _footer_extent(list(timeline.footers))
    if ext is None or ext.file_ranks is None:
        return None
    found = {host for host, (lo, hi) in zip(timeline.hosts, ext.file_ranks, strict=True) if lo <= rank <= hi}
    return found.pop() if len(found) == 1 else None


def _paired_excess_ms(
    timeline: TableLike | LazyTable, episodes: list[_Episode], plan: WindowPlan
) -> dict[_Episode, float]:
    """Per episode: the median, over the steps of its slow windows, of the rank's time in its phase
    minus the median of the other ranks' at the same step (ms per step).

    A paired comparison, for communication suspects: their evidence is indirect, and a window's
    median compares different steps. When the whole job stalls in its collectives for a few steps
    (every rank's gloo wait swinging 10-200 ms from step to step on 2 shared cores), the median of
    4 such steps lands on a different step for each rank: a clean run's rank read 41.1 vs 31.7 ms
    per step from window medians (1.30x) and 0.8 ms more at the same steps. A slow link adds its
    time to every step, so the two measures agree there. One query per phase reads the suspects'
    windows (the sampled steps, as window_stats reads them): 1.5-1.8 s for a suspect over a whole
    49M-row timeline (BENCHMARKS.md), paid only where a suspect is left.
    """
    out: dict[_Episode, float] = {}
    for phase in sorted({e.phase for e in episodes}):
        mine = [e for e in episodes if e.phase == phase]
        wins = sorted({w for e in mine for w in e.wins})
        steps, ranks, v = _phase_steps(timeline, phase, wins, plan)
        step_win = (steps - plan.min_step) // plan.window_steps
        for e in mine:
            out[e] = _paired_ms(v[np.isin(step_win, e.wins)], ranks, e.rank)
    return out


def _phase_steps(
    timeline: TableLike | LazyTable, phase: str, wins: list[int], plan: WindowPlan
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(steps, ranks, [step x rank] ns) of one phase over some windows; NaN where a rank has no row."""
    con = duckdb.connect()
    try:
        register_timeline(con, timeline)
        got = con.execute(
            f"SELECT step, rank, sum(duration_ns)::DOUBLE AS v FROM timeline WHERE phase = '{phase}' {plan.sample_sql} "
            f"AND (step - {plan.min_step}) // {plan.window_steps} IN ({', '.join(str(int(w)) for w in wins)}) "
            "GROUP BY step, rank"
        ).fetchnumpy()
    finally:
        con.close()
    steps, at_step = np.unique(got["step"], return_inverse=True)
    ranks, at_rank = np.unique(got["rank"], return_inverse=True)
    v = np.full((len(steps), len(ranks)), np.nan)
    v[at_step, at_rank] = got["v"]
    return steps, ranks, v


def _paired_ms(v: np.ndarray, ranks: np.ndarray, rank: int) -> float:
    at = int(np.searchsorted(ranks, rank))
    if at >= len(ranks) or ranks[at] != rank or len(ranks) < 2:
        return 0.0
    own, peers = v[:, at], np.delete(v, at, axis=1)
    seen = ~np.isnan(own) & ~np.isnan(peers).all(axis=1)
    if not seen.any():
        return 0.0
    return float(np.median(own[seen] - np.nanmedian(peers[seen], axis=1)) / 1e6)


def _typical_step_ms(w: _Windows, group_key: np.ndarray, order: np.ndarray) -> dict[int, float]:
    """Per window: the sum over phases of the median rank's time (a typical step), in ms
    (`group_key`, `order`: from _phase_window_order).

    `data` is left out when `compute` is timed, because the script's `compute` contains it.
    """
    # Median per (phase, window): the middle of each group of the sorted rows.
    starts, sizes = _group_starts(group_key)
    median = (w.v_ns[order[starts + (sizes - 1) // 2]] + w.v_ns[order[starts + sizes // 2]]) / 2.0
    first = order[starts]  # a row of each group, for its phase and window
    win, phase = w.win[first], w.phase[first]
    compute, data = _PHASE_NAMES.index(Phase.COMPUTE.value), _PHASE_NAMES.index(Phase.DATA.value)
    if (phase == compute).any():
        win, phase, median = win[phase != data], phase[phase != data], median[phase != data]
    # Summed over phases in phase order with Kahan's compensation, as pandas' groupby sum does, so
    # the numbers are the ones the pandas version of this function gave.
    n_win = int(w.win.max()) + 1
    total = np.zeros(n_win)
    comp = np.zeros(n_win)
    for code in np.unique(phase):
        at = phase == code
        wi = win[at]
        y = median[at] - comp[wi]
        t = total[wi] + y
        comp[wi] = t - total[wi] - y
        total[wi] = t
    return {int(x): float(total[x] / 1e6) for x in np.unique(win)}


def _frame(w: _Windows, peer_ns: np.ndarray) -> pd.DataFrame:
    """The windows as a DataFrame, for the communication checks (rare: pandas is imported here)."""
    import pandas as pd

    return pd.DataFrame(
        {
            "rank": w.rank,
            "phase": pd.Categorical.from_codes(w.phase, categories=_PHASE_NAMES),
            "win": w.win,
            "v_ns": w.v_ns,
            "peer_ns": peer_ns,
        }
    )


def _work_total_ns(stats: pd.DataFrame) -> pd.DataFrame:
    """[win x rank] per-step work time (work phases; `data` left out when `compute` has it)."""
    work = stats[stats["phase"].isin(WORK_PHASES)]
    if Phase.COMPUTE.value in set(work["phase"].unique()):
        work = work[work["phase"] != Phase.DATA.value]
    return work.pivot_table(index="win", columns="rank", values="v_ns", aggfunc="sum")


def _other_rank_explains(work_total: pd.DataFrame | None, e: _Episode) -> bool:
    """True when, in most of the episode's windows, another rank's extra work is at least half of
    this rank's extra collective time: it is waiting for that rank, even one below `warn_factor`.
    """
    if work_total is None or work_total.empty:
        return False
    wins = [w for w in e.wins if w in work_total.index]
    if not wins:
        return False
    wt = work_total.loc[wins]
    others = wt.drop(columns=[e.rank], errors="ignore")
    if others.empty:
        return False
    worst_extra = others.max(axis=1) - wt.median(axis=1)
    excess = (e.rank_ms - e.peer_ms) * 1e6
    return bool((worst_extra >= 0.5 * excess).mean() >= 0.5)


def _work_deficit_explains(stats: pd.DataFrame, e: _Episode, window_steps: int) -> bool:
    """True when the rank's extra collective time is mostly time its short work left it waiting."""
    import pandas as pd

    rows = stats[(stats["rank"] == e.rank) & stats["win"].isin(e.wins)]
    work = rows[rows["phase"].isin(WORK_PHASES)].assign(short_ns=lambda d: (d["peer_ns"] - d["v_ns"]).clip(lower=0))
    if work.empty:
        return False
    # User-script `compute` already contains `data`: take the larger of it and the other phases' sum.
    is_compute = work["phase"] == Phase.COMPUTE.value
    other = work[~is_compute].groupby("win")["short_ns"].sum()
    compute = work[is_compute].groupby("win")["short_ns"].sum()
    deficit = float(pd.concat([other, compute], axis=1).fillna(0.0).max(axis=1).median())
    excess = (e.rank_ms - e.peer_ms) * 1e6
    return deficit > 0.5 * excess


def _work_category(eps: list[_Episode]) -> tuple[Category, list[_Episode]]:
    """Pick data vs compute by which phases' extra time per step is larger.

    User-script timelines time `compute` from step start to the first collective, which includes
    the input pipeline when `data` is timed too; so data's excess is taken out of compute's.
    """
    excess = {e.phase: e.rank_ms - e.peer_ms for e in eps}
    data_ex = sum(v for p, v in excess.items() if PHASE_CATEGORY[p] is Category.DATA)
    compute_ex = sum(v for p, v in excess.items() if PHASE_CATEGORY[p] is Category.COMPUTE)
    if Phase.COMPUTE.value in excess and data_ex > 0:
        compute_ex = max(0.0, compute_ex - min(data_ex, excess[Phase.COMPUTE.value]))
    cat = Category.DATA if data_ex >= compute_ex else Category.COMPUTE
    chosen = [e for e in eps if PHASE_CATEGORY[e.phase] is cat]
    if cat is Category.DATA and Phase.COMPUTE.value in excess:
        chosen = chosen or [e for e in eps if e.phase == Phase.COMPUTE.value]
    return cat, chosen


def _finding(
    rank: int,
    host: str | None,
    cat_eps: tuple[Category, list[_Episode]],
    all_eps: list[_Episode],
    *,
    plan: WindowPlan,
    warn_factor: float,
    critical_factor: float,
    min_windows: int,
    cap: float,
    effect_is_critical: Callable[[list[_Episode]], bool],
    paired_ms: Mapping[str, float] | None = None,
) -> Finding:
    category, eps = cat_eps
    rank_ms = sum(e.rank_ms for e in eps)
    peer_ms = sum(e.peer_ms for e in eps)
    slowdown = rank_ms / peer_ms if peer_ms > 0 else max(e.ratio for e in eps)
    first = min(e.first_step for e in eps)
    last = max(e.last_step for e in eps)
    main = max(eps, key=lambda e: e.rank_ms - e.peer_ms)
    severity = Severity.CRITICAL if slowdown >= critical_factor and effect_is_critical(eps) else Severity.WARNING
    # Confidence: how persistent (slow windows, density) and how far above the warning line.
    n_slow = max(len(e.wins) for e in eps)
    density = min(len(e.wins) / e.span_windows for e in eps)
    persist = min(1.0, n_slow / (2 * min_windows)) * density
    margin = min(1.0, max(0.0, (slowdown - warn_factor) / (warn_factor - 1.0)))
    confidence = min(cap, 0.99, 0.4 + 0.3 * persist + 0.3 * margin)
    phases = _fmt_phases({e.phase for e in eps})
    where = f"rank {rank}" + (f" on {host}" if host else "")
    if category is Category.COMMUNICATION:
        summary = (
            f"{where} spends {slowdown:.2f}x the median {phases} time (steps {first}-{last}) "
            "while its own work is normal and its peers do not wait for it"
        )
    else:
        summary = f"{where} spends {slowdown:.2f}x the median {phases} time (steps {first}-{last})"
    summary += f": {rank_ms:.1f} ms vs {peer_ms:.1f} ms per step"
    evidence = {
        "slowdown": round(slowdown, 3),
        "phase": main.phase,
        "steps": [first, last],
        "rank_ms": round(rank_ms, 3),
        "median_ms": round(peer_ms, 3),
        "phases": {
            e.phase: {
                "slowdown": round(e.ratio, 3),
                "rank_ms": round(e.rank_ms, 3),
                "median_ms": round(e.peer_ms, 3),
                "steps": [e.first_step, e.last_step],
            }
            for e in sorted(all_eps, key=lambda e: e.phase)
        },
        "windows": {
            "slow": n_slow,
            "spanned": max(e.span_windows for e in eps),
            "window_steps": plan.window_steps,
            "step_stride": plan.step_stride,
        },
        "compared_with": "median of the other ranks at the same steps",
    }
    if paired_ms:
        # Communication suspects: the per-step paired excess that let the finding stand.
        evidence["paired_excess_ms"] = round(sum(paired_ms.values()), 3)
    return Finding(
        kind=FindingKind.STRAGGLER,
        severity=severity,
        summary=summary,
        category=category,
        hosts=(host,) if host else (),
        ranks=(rank,),
        confidence=round(confidence, 3),
        evidence=evidence,
    )


def _hosts_of(timeline: TableLike | LazyTable, ranks: set[int]) -> dict[int, str]:
    """rank -> host from the table's `host` column, for the few ranks that need naming."""
    if isinstance(timeline, LazyTable):
        return _hosts_of_files(timeline, ranks)
    names = timeline.schema.names
    if "host" not in names:
        return {}
    import pyarrow.compute as pc  # ~0.05 s to import; only this rare path needs it

    want = pa.array(sorted(ranks), pa.int32())
    if isinstance(timeline, pa.Table):
        t = timeline.select(["rank", "host"]).filter(pc.is_in(timeline["rank"], value_set=want))
    else:
        t = timeline.to_table(columns=["rank", "host"], filter=pc.field("rank").isin(want))
    out: dict[int, str] = {}
    for r, h in zip(t["rank"].to_pylist(), t["host"].to_pylist()):
        if h is not None:
            out.setdefault(int(r), str(h))
    return out


def _hosts_of_files(timeline: LazyTable, ranks: set[int]) -> dict[int, str]:
    """rank -> host of the first file (in dataset order) holding the rank: a LazyTable's `host`
    is its files' folders. DuckDB scans the rank column; opening the files as a pyarrow Dataset
    would import pyarrow.dataset and pandas (~0.25 s) for a collected dataset (no run.json)."""
    con = duckdb.connect()
    try:
        found = con.execute(
            f"SELECT DISTINCT rank, filename FROM read_parquet([{_sql_list(timeline.files)}], filename = true) "
            f"WHERE rank IN ({', '.join(str(int(r)) for r in sorted(ranks))})"
        ).fetchall()
    finally:
        con.close()
    position = {f: i for i, f in enumerate(timeline.files)}
    first: dict[int, int] = {}
    for rank, file in found:
        first[int(rank)] = min(first.get(int(rank), len(position)), position[file])
    return {rank: timeline.hosts[i] for rank, i in first.items()}


def analyze(signals: Signals) -> list[Finding]:
    return analyze_with_notes(signals)[0]


def analyze_with_notes(signals: Signals) -> tuple[list[Finding], list[str]]:
    """`analyze`, and from the same pass the note on a slowdown seen under the floor (BELOW_FLOOR)
    when no straggler is named (run_analysis reports it with `notes`)."""
    timeline = signals.source(SignalKind.TIMELINE)
    if timeline is None:
        return [], []
    seen: list[str] = []
    return find_stragglers(timeline, rank_to_host=signals.rank_to_host(), notes=seen), seen


def step_span(timeline: TableLike | LazyTable) -> int:
    """Steps the timeline covers (last - first + 1), 0 when it has none; footers first, else a scan."""
    con = duckdb.connect()
    try:
        ext = timeline_extent(con, timeline, register_timeline(con, timeline))
    finally:
        con.close()
    return 0 if ext.min_step is None else int(ext.max_step - ext.min_step + 1)


NOT_JUDGED = "stragglers: not judged"  # how notes() begins (compare reads it: B could not judge A's stragglers)


def notes(signals: Signals, *, min_steps: int = MIN_STEPS) -> list[str]:
    """Why there is no straggler verdict, when the reason is the run's length (for Report.notes)."""
    timeline = signals.source(SignalKind.TIMELINE)
    if timeline is None:
        # a run dir without one (deleted, never written, every part unreadable) must not read as a run with
        # no straggler; a log, a dump folder or a metrics dataset is not expected to hold one
        if signals.run is None:
            return []
        return [f"{NOT_JUDGED}, no timeline to read (the ranks' step timings, timeline/ of the run dir)"]
    span = step_span(timeline)
    if span >= min_steps:
        return []
    return [
        f"{NOT_JUDGED}, the timeline covers {span} step(s), fewer than the {min_steps} its windows need "
        "(a slowdown over a few single steps is indistinguishable from scheduling noise)"
    ]
