"""Synthetic timelines for the straggler tests, built in memory the way synchronous training behaves.

Each step, every rank does its work phases, then enters the collective; the collective ends when the
last rank arrives, so a rank's communication (or `wait`) time is its own base transfer time plus
the time it waited for the slowest rank of that step. That is what makes the waiting ranks look
"slow" in communication, and what the analyzer must not blame.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import pyarrow as pa

REFERENCE_MS = {"data": 4.0, "forward": 30.0, "backward": 60.0, "communication": 20.0, "optimizer": 8.0}
# The shim's phases for an unmodified script: compute (step start to first collective, input
# included), wait (first collective to step end); `data` where the DataLoader was timed.
SCRIPT_MS = {"data": 10.0, "compute": 90.0, "wait": 15.0}

WORK = ("data", "forward", "backward", "compute", "optimizer")
WAIT = ("communication", "wait")


def make_timeline(
    *,
    ranks: int = 8,
    steps: int = 200,
    per_host: int = 2,
    shape: str = "reference",
    slow_rank: int | Sequence[int] | None = None,
    factor: float = 1.5,
    phase: str | Sequence[str] | None = None,
    slow_steps: tuple[int, int] | None = None,
    jitter: float = 0.05,
    job_slowdown: tuple[int, float] | None = None,
    tokens: Callable[[np.random.Generator, int, int], np.ndarray] | None = None,
    rank_scale: dict[int, float] | None = None,
    comm_extra_ms: dict[int, float] | None = None,
    with_step: bool = True,
    sync: bool = True,
    seed: int = 0,
) -> pa.Table:
    """A `timeline` table with the `host` column the readers add.

    Args:
        shape: "reference" (data/forward/backward/communication/optimizer [+ step]) or "script"
            (data/compute/wait [+ step]; compute includes data, as the shim measures it).
        slow_rank, factor, phase, slow_steps: those ranks' `phase` durations are multiplied by
            `factor` for steps in [start, end) (all steps when None); phase None = forward
            (reference) or compute (script).
        jitter: sigma of the lognormal noise on every duration (0.05 ~ 5%).
        job_slowdown: (from_step, factor): every rank's work slows down together from that step.
        tokens: f(rng, ranks, steps) -> [ranks, steps] tokens; work durations scale with
            tokens / mean tokens (varying sequence lengths / packing). None: constant 4096.
        rank_scale: rank -> factor applied to all its work phases (e.g. 0.6 = a fast rank).
        comm_extra_ms: rank -> ms its own collective takes longer, peers not waiting for it.
        sync: every rank waits for the step's slowest rank in its collective; False leaves the
            waits out (to model a subgroup waiting, add them with `comm_extra_ms`).
    """
    rng = np.random.default_rng(seed)
    base = dict(REFERENCE_MS if shape == "reference" else SCRIPT_MS)
    slow = [] if slow_rank is None else ([slow_rank] if isinstance(slow_rank, int) else list(slow_rank))
    phase = phase or ("forward" if shape == "reference" else "compute")
    slow_phases = [phase] if isinstance(phase, str) else list(phase)
    for p in slow_phases:
        assert p in base, f"phase {p} is not in the {shape} shape"
    tok = (
        np.full((ranks, steps), 4096, dtype=np.int64) if tokens is None else tokens(rng, ranks, steps).astype(np.int64)
    )
    tok_scale = tok / tok.mean()
    step_idx = np.arange(steps)

    dur: dict[str, np.ndarray] = {}
    for p, ms in base.items():
        d = ms * rng.lognormal(0.0, jitter, size=(ranks, steps))
        if p in WORK:
            if p != "data" or shape == "reference":
                d = d * tok_scale
            if job_slowdown is not None:
                d[:, step_idx >= job_slowdown[0]] *= job_slowdown[1]
            for r, s in (rank_scale or {}).items():
                d[r] *= s
        dur[p] = d
    in_window = (
        np.ones(steps, dtype=bool) if slow_steps is None else (step_idx >= slow_steps[0]) & (step_idx < slow_steps[1])
    )
    for r in slow:
        for p in slow_phases:
            dur[p][r, in_window] *= factor
    if shape == "script":
        # The shim's `compute` runs from step start to the first collective: input included.
        dur["compute"] = dur["compute"] + dur["data"]
        work_total = dur["compute"]
    else:
        work_total = dur["data"] + dur["forward"] + dur["backward"]
    # Everyone leaves the collective when the last rank has arrived.
    arrival = work_total
    waited = arrival.max(axis=0, keepdims=True) - arrival if sync else np.zeros_like(arrival)
    wait_phase = "communication" if shape == "reference" else "wait"
    dur[wait_phase] = dur[wait_phase] + waited
    for r, extra in (comm_extra_ms or {}).items():
        dur[wait_phase][r] += extra
    if with_step:
        dur["step"] = sum(v for p, v in dur.items() if not (shape == "script" and p == "data"))

    rows_rank, rows_step, rows_phase, rows_dur, rows_tok = [], [], [], [], []
    for p, d in dur.items():
        rows_rank.append(np.repeat(np.arange(ranks), steps))
        rows_step.append(np.tile(step_idx, ranks))
        rows_phase.append(np.full(ranks * steps, p, dtype=object))
        rows_dur.append((d * 1e6).astype(np.int64).ravel())
        rows_tok.append(tok.ravel())
    rank_col = np.concatenate(rows_rank)
    return pa.table(
        {
            "rank": pa.array(rank_col, pa.int32()),
            "step": pa.array(np.concatenate(rows_step), pa.int64()),
            "phase": pa.array(np.concatenate(rows_phase), pa.string()),
            "duration_ns": pa.array(np.concatenate(rows_dur), pa.int64()),
            "tokens": pa.array(np.concatenate(rows_tok), pa.int64()),
            "host": pa.array([host_of(int(r), per_host) for r in rank_col], pa.string()),
        }
    )


def host_of(rank: int, per_host: int = 2) -> str:
    return f"node{rank // per_host + 1:02d}"
