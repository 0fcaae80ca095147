"""What the run achieved: step time, tokens/s and MFU, from the timeline (issue 16 item 7).

Pure: the timeline table and each rank's own report in, one summary out (diagnose's `summary`).
- Step time: per (rank, step) the `step` row where the trainer writes one, else the sum of that
  step's phases (a user script's compute + wait); the job's step is its slowest rank's.
- Warm-up is dropped: the first WARMUP_FRACTION of the steps (at least one), where allocator,
  autograd and NCCL set-up make steps long.
- Tokens/s: the timeline's `tokens` are what each rank processed; tensor-parallel peers process
  the same tokens, so the job's tokens per step are the ranks' sum divided by tp.
- MFU: model FLOPs per token (the trainer's dense 6N count over the whole model, written to
  ranks/rank-R.json) x tokens/s over the sum of the ranks' peak FLOP/s (the trainer's assumption,
  named in `peak_basis`). tp cancels: each rank does 1/tp of a replica's FLOPs.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd

__all__ = ["MIN_STEPS", "WARMUP_FRACTION", "summarize"]

WARMUP_FRACTION = 0.1
MIN_STEPS = 3  # fewer steady steps than this: no summary (a number over one or two steps misleads)


def _step_ns(t: pd.DataFrame) -> pd.Series:
    steps = t[t["phase"] == "step"]
    if not steps.empty:
        return steps.groupby(["rank", "step"])["duration_ns"].sum()
    return t.groupby(["rank", "step"])["duration_ns"].sum()


def summarize(timeline: pd.DataFrame | None, ranks: Mapping[int, Mapping[str, Any]]) -> dict[str, Any] | None:
    """{"steps", "step_time_ms_median", "tokens_per_s", "mfu", "basis"}; None without enough steps."""
    if timeline is None or timeline.empty:
        return None
    per = _step_ns(timeline)
    steps = sorted(per.index.get_level_values("step").unique())
    skip = max(1, int(len(steps) * WARMUP_FRACTION))
    steady = steps[skip:]
    if len(steady) < MIN_STEPS:
        return None
    per = per[per.index.get_level_values("step").isin(steady)]
    wall_ns = per.groupby(level="step").max()  # the job waits for its slowest rank
    out: dict[str, Any] = {
        "steps": len(steady),
        "step_time_ms_median": round(float(wall_ns.median()) / 1e6, 3),
        "tokens_per_s": None,
        "mfu": None,
        "basis": f"steps {steady[0]}-{steady[-1]} (the first {skip} dropped as warm-up); a step is its slowest rank's",
    }
    tok = timeline[timeline["step"].isin(steady) & timeline["tokens"].notna()] if "tokens" in timeline else None
    if tok is None or tok.empty:
        return out
    tp = {int(r): int(info.get("tp") or 1) for r, info in ranks.items()}
    # one row per (rank, step) carries the tokens (the `step` row, else any phase's)
    tok = tok.sort_values("phase").drop_duplicates(["rank", "step"])
    job_tokens = sum(int(row.tokens) / tp.get(int(row.rank), 1) for row in tok.itertuples(index=False))
    seconds = float(wall_ns[wall_ns.index.isin(tok["step"].unique())].sum()) / 1e9
    if seconds <= 0:
        return out
    tps = job_tokens / seconds
    out["tokens_per_s"] = round(tps, 1)
    infos = [ranks.get(int(r), {}) for r in per.index.get_level_values("rank").unique()]
    fpt = {info.get("model_flops_per_token") for info in infos}
    peaks = [info.get("peak_flops_per_s") for info in infos]
    if len(fpt) == 1 and None not in fpt and all(isinstance(p, (int, float)) and p > 0 for p in peaks):
        out["mfu"] = round(tps * float(fpt.pop()) / float(sum(peaks)), 6)
        out["peak_basis"] = infos[0].get("peak_basis")
    return out
