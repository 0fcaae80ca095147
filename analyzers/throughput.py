"""What the run achieved: step time, tokens/s and MFU, from the timeline (issue 16 item 7).

Pure: the timeline (a table or a dataset of Parquet files, scanned by DuckDB as the straggler
analysis scans it) and each rank's own report in, one summary out (diagnose's `summary`).
- Which steps: the last SUMMARY_STEPS (what the run does now; a window the footers' step
  statistics let DuckDB read cheaply on a 49M-row timeline), never the first WARMUP_FRACTION of
  the run (at least one step), where allocator, autograd and NCCL set-up make steps long.
- Step time: per (rank, step) the `step` row where the trainer writes one, else the sum of that
  step's phases (a user script's compute + wait); the job's step is its slowest rank's.
- Tokens/s: the timeline's `tokens` are what each rank processed; tensor-parallel peers process
  the same tokens, so the job's tokens per step are the ranks' sum divided by tp (one tp for the
  run, from the ranks' reports; none when they disagree).
- MFU: model FLOPs per token (the trainer's dense 6N count over the whole model, written to
  ranks/rank-R.json) x tokens/s over the sum of the ranks' peak FLOP/s (the trainer's assumption,
  named in `peak_basis`). tp cancels: each rank does 1/tp of a replica's FLOPs.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping
from typing import Any

import duckdb
import pandas as pd
import pyarrow as pa

from trainctl.analyzers.stragglers import register_timeline, timeline_extent
from trainctl.signals import LazyTable, TableLike

__all__ = ["MIN_STEPS", "RANK_SAMPLE", "SUMMARY_STEPS", "WARMUP_FRACTION", "summarize"]

WARMUP_FRACTION = 0.1
MIN_STEPS = 3  # fewer steady steps than this: no summary (a number over one or two steps misleads)
SUMMARY_STEPS = 200
# Ranks read: in synchronous training every rank's step spans the same collectives, so a block of
# ranks tells the step time, and tokens scale with the ranks; reading 64 of 8,192 ranks lets
# DuckDB skip the other files by their rank statistics (49M rows: 1.8 s -> well under one).
RANK_SAMPLE = 64

_PER_STEP = """
WITH per AS (
    SELECT rank, step, SUM(duration_ns) FILTER (WHERE phase = 'step') AS step_ns, SUM(duration_ns) AS all_ns,
           MAX(tokens) AS tokens
    FROM timeline WHERE step >= ? AND rank BETWEEN ? AND ? GROUP BY rank, step)
SELECT step, MAX(COALESCE(step_ns, all_ns)) AS wall_ns, SUM(tokens) AS tokens, COUNT(tokens) AS with_tokens,
       list(DISTINCT rank) AS ranks
FROM per GROUP BY step ORDER BY step
"""


def summarize(
    timeline: TableLike | LazyTable | pd.DataFrame | None, ranks: Mapping[int, Mapping[str, Any]]
) -> dict[str, Any] | None:
    """{"steps", "step_time_ms_median", "tokens_per_s", "mfu", "basis"}; None without enough steps."""
    if timeline is None:
        return None
    if isinstance(timeline, pd.DataFrame):
        timeline = pa.Table.from_pandas(timeline, preserve_index=False)
    con = duckdb.connect()
    try:
        ext = timeline_extent(con, timeline, register_timeline(con, timeline))
        if ext.min_step is None:
            return None
        span = ext.max_step - ext.min_step + 1
        warm = max(1, int(span * WARMUP_FRACTION))
        lo = max(ext.min_step + warm, ext.max_step - SUMMARY_STEPS + 1)
        rank_hi = min(ext.max_rank, ext.min_rank + RANK_SAMPLE - 1)
        rows = con.execute(_PER_STEP, [lo, ext.min_rank, rank_hi]).fetchall()
    finally:
        con.close()
    if len(rows) < MIN_STEPS:
        return None
    walls = [int(r[1]) for r in rows]
    out: dict[str, Any] = {
        "steps": len(rows),
        "step_time_ms_median": round(statistics.median(walls) / 1e6, 3),
        "tokens_per_s": None,
        "mfu": None,
        "basis": f"steps {rows[0][0]}-{rows[-1][0]} (the first {warm} of the run are warm-up; at most the last "
        f"{SUMMARY_STEPS}); a step is its slowest rank's",
    }
    all_ranks = ext.max_rank - ext.min_rank + 1
    if rank_hi < ext.max_rank:
        out["basis"] += f"; ranks {ext.min_rank}-{rank_hi} of {all_ranks} read, tokens scaled to all"
    seen = sorted({int(r) for row in rows for r in row[4]})
    tps_known = {int(info.get("tp") or 1) for r, info in ranks.items() if int(r) in seen} or {1}
    counted = [(int(r[2]), int(r[1])) for r in rows if r[3]]
    if len(tps_known) != 1 or not counted:
        return out
    seconds = sum(w for _, w in counted) / 1e9
    if seconds <= 0:
        return out
    scale = all_ranks / len(seen)  # 1 unless a block of ranks was read
    tps = sum(t for t, _ in counted) / tps_known.pop() / seconds * scale
    out["tokens_per_s"] = round(tps, 1)
    infos = [ranks.get(r, {}) for r in seen]
    fpt = {info.get("model_flops_per_token") for info in infos}
    peaks = [info.get("peak_flops_per_s") for info in infos]
    if len(fpt) == 1 and None not in fpt and all(isinstance(p, (int, float)) and p > 0 for p in peaks):
        out["mfu"] = round(tps * float(fpt.pop()) / (float(sum(peaks)) * scale), 6)
        out["peak_basis"] = infos[0].get("peak_basis")
    return out
