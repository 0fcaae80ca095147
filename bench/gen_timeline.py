"""Write a synthetic timeline for benchmark (b): 8,192 ranks x 1,000 steps x 6 phases (49M rows).

The run dir it writes (default bench/out/timeline-8192) looks like what `trainctl launch` leaves:
run.json (RunInfo, 8 ranks per host) plus `timeline/host=nodeNNNN/part-rank<R>-0.parquet`, one
part per host holding its 8 ranks, written through trainctl.dataset.write_table (so the files are
contract-valid). Durations are whole microseconds. One rank (default 5003) is a compute straggler: its forward and backward take
`--factor` times longer from step 120 on, and, as in synchronous training, every other rank waits
for it in `communication`. Durations carry lognormal jitter so the Parquet is not trivially small.

    .venv/bin/python bench/gen_timeline.py [--ranks 8192] [--steps 1000] [--out bench/out/timeline-8192]
"""

from __future__ import annotations

import argparse
import logging
import shutil
import time
from pathlib import Path

import numpy as np
import pyarrow as pa

from trainctl import dataset
from trainctl.rundir import HostRanks, RunInfo, write_run_info
from trainctl.schemas import SignalKind

logger = logging.getLogger("bench.gen_timeline")

# Phase -> typical duration in ms on a healthy rank (the reference trainer's phases).
PHASE_MS = {"data": 4.0, "forward": 30.0, "backward": 60.0, "communication": 20.0, "optimizer": 8.0}
PHASES = [*PHASE_MS, "step"]  # 6 phases; `step` is the whole step
TOKENS = 8192


def host_table(
    ranks: np.ndarray, steps: int, *, slow_rank: int, factor: float, slow_from: int, rng: np.random.Generator
) -> pa.Table:
    n_r = len(ranks)
    step = np.arange(steps, dtype=np.int64)
    # [rank, step] arrays per phase, in ns, with ~5% lognormal jitter.
    dur = {p: (ms * 1e6 * rng.lognormal(0.0, 0.05, size=(n_r, steps))) for p, ms in PHASE_MS.items()}
    slow_extra = np.zeros(steps)
    slow_extra[slow_from:] = (factor - 1.0) * (PHASE_MS["forward"] + PHASE_MS["backward"]) * 1e6
    is_slow = ranks == slow_rank
    for p in ("forward", "backward"):
        dur[p][is_slow, slow_from:] *= factor
    # Synchronous training: everyone but the straggler waits for it inside the collective.
    dur["communication"][~is_slow] += slow_extra
    dur["step"] = sum(dur[p] for p in PHASE_MS)
    # Rows in the order the runtime's spool writes them: per rank, step by step, phase by phase.
    n_p = len(PHASES)
    base_ns = 1_795_000_000_000_000_000
    step_start = base_ns + np.cumsum(dur["step"], axis=1) - dur["step"]
    starts, offset = [], np.zeros((n_r, steps))
    for p in PHASES:
        starts.append(step_start + (0 if p == "step" else offset))
        if p != "step":
            offset = offset + dur[p]
    # Whole microseconds, the resolution of CUDA events (~0.5 us) and of most perf_counter use.
    d = np.round(np.stack([dur[p] for p in PHASES], axis=-1) / 1e3).astype(np.int64) * 1000
    ts = np.round(np.stack(starts, axis=-1) / 1e3).astype(np.int64) * 1000
    shape = (n_r, steps, n_p)
    n = n_r * steps * n_p
    return pa.table(
        {
            "rank": pa.array(np.broadcast_to(ranks[:, None, None], shape).ravel(), pa.int32()),
            "local_rank": pa.array(np.broadcast_to((ranks % 8)[:, None, None], shape).ravel(), pa.int16()),
            "step": pa.array(np.broadcast_to(step[None, :, None], shape).ravel(), pa.int64()),
            "phase": pa.DictionaryArray.from_arrays(
                pa.array(np.broadcast_to(np.arange(n_p, dtype=np.int32)[None, None, :], shape).ravel()),
                pa.array(PHASES),
            ).cast(pa.string()),
            "start_ts": pa.array(ts.ravel(), pa.timestamp("ns", tz="UTC")),
            "duration_ns": pa.array(d.ravel(), pa.int64()),
            "tokens": pa.array(np.full(n, TOKENS, dtype=np.int64), pa.int64()),
            "source": pa.array(["perf_counter"] * n, pa.string()),
        }
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ranks", type=int, default=8192)
    ap.add_argument("--steps", type=int, default=1000)
    ap.add_argument("--per-host", type=int, default=8)
    ap.add_argument("--slow-rank", type=int, default=5003)
    ap.add_argument("--factor", type=float, default=1.5)
    ap.add_argument("--slow-from", type=int, default=120)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, default=Path(__file__).parent / "out" / "timeline-8192")
    args = ap.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")

    if args.out.exists():
        shutil.rmtree(args.out)
    rng = np.random.default_rng(args.seed)
    n_hosts = args.ranks // args.per_host
    hosts = []
    t0 = time.perf_counter()
    for h in range(n_hosts):
        host = f"node{h + 1:04d}"
        ranks = np.arange(h * args.per_host, (h + 1) * args.per_host, dtype=np.int64)
        t = host_table(
            ranks, args.steps, slow_rank=args.slow_rank, factor=args.factor, slow_from=args.slow_from, rng=rng
        )
        dataset.write_table(args.out, SignalKind.TIMELINE, host, t, part=f"rank{int(ranks[0])}-0")
        hosts.append(HostRanks(host, tuple(int(r) for r in ranks)))
        if (h + 1) % 128 == 0:
            logger.info("%d/%d hosts written (%.0f s)", h + 1, n_hosts, time.perf_counter() - t0)
    write_run_info(
        args.out,
        RunInfo(
            run_id="bench-8192",
            world_size=args.ranks,
            nproc_per_node=args.per_host,
            hosts=tuple(hosts),
            layout={"dp": args.ranks, "tp": 1, "pp": 1},
            created_ts_ns=time.time_ns(),
        ),
    )
    size = sum(p.stat().st_size for p in args.out.rglob("*.parquet"))
    logger.info(
        "wrote %d rows (%d ranks x %d steps x %d phases) to %s: %.0f MB of Parquet in %.0f s; straggler rank %d on %s",
        args.ranks * args.steps * len(PHASES),
        args.ranks,
        args.steps,
        len(PHASES),
        args.out,
        size / 1e6,
        time.perf_counter() - t0,
        args.slow_rank,
        f"node{args.slow_rank // args.per_host + 1:04d}",
    )


if __name__ == "__main__":
    main()
