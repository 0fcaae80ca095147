"""Instrumentation overhead of the reference trainer, A/B interleaved in one run.

One `trainctl launch --local` run (default 4 ranks, 2 simulated hosts, torchrun + gloo); the trainer
switches its instrumentation (phase timeline + heartbeats) on and off every --block steps, so both
arms see the same machine load over time. Rank 0's step wall times per arm are compared:
overhead = median(on) / median(off) - 1 (also the trimmed means). Target: <= 2 % of step time.

Step times on a shared 2-core machine spread by +-20 %, so a few hundred steps cannot resolve 2 %:
the 95 % interval comes from a block bootstrap (on/off block pairs resampled together, which keeps
the slow drifts of the machine inside each pair), and the default run is 1,200 steps.

    .venv/bin/python bench/instrumentation_overhead.py [--steps 1200 --block 10] [--hosts-local 2 --nproc-per-node 2]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path


def trimmed_mean(xs: list[int], frac: float = 0.1) -> float:
    xs = sorted(xs)
    k = int(len(xs) * frac)
    xs = xs[k : len(xs) - k] or xs
    return sum(xs) / len(xs)


def overhead_pct(on: list[int], off: list[int]) -> tuple[float, float]:
    """(median, trimmed-mean) overhead of `on` over `off`, in %."""
    return (
        100 * (statistics.median(on) / statistics.median(off) - 1),
        100 * (trimmed_mean(on) / trimmed_mean(off) - 1),
    )


def block_bootstrap(
    on: list[int], off: list[int], block: int, *, rounds: int = 2000, seed: int = 0
) -> tuple[float, float]:
    """95 % interval of the median overhead, resampling (on block, off block) pairs with replacement.

    The trainer alternates on/off blocks of `block` steps, so the k-th on block and the k-th off
    block ran back to back; resampling them together keeps what the machine did at that time.
    """
    pairs = [(on[i : i + block], off[i : i + block]) for i in range(0, min(len(on), len(off)), block)]
    rng = random.Random(seed)
    est = []
    for _ in range(rounds):
        pick = [pairs[rng.randrange(len(pairs))] for _ in pairs]
        a = [x for p in pick for x in p[0]]
        b = [x for p in pick for x in p[1]]
        est.append(100 * (statistics.median(a) / statistics.median(b) - 1))
    est.sort()
    return est[int(0.025 * rounds)], est[int(0.975 * rounds) - 1]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=1200)
    p.add_argument("--block", type=int, default=10)
    p.add_argument("--hosts-local", type=int, default=2)
    p.add_argument("--nproc-per-node", type=int, default=2)
    a = p.parse_args()
    with tempfile.TemporaryDirectory() as d:
        run = Path(d) / "run"
        cmd = [
            sys.executable,
            "-c",
            "from trainctl.cli.app import main; main()",
            "launch",
            "--local",
            "--hosts-local",
            str(a.hosts_local),
            "--nproc-per-node",
            str(a.nproc_per_node),
            "--run-dir",
            str(run),
            "--",
            "--steps",
            str(a.steps),
            "--ab-block",
            str(a.block),
            "--log-every",
            "1000000",
        ]
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        ab = json.loads((run / "ab_overhead.json").read_text())
    on, off = ab["on"], ab["off"]
    med_pct, tm_pct = overhead_pct(on, off)
    lo, hi = block_bootstrap(on, off, a.block)
    result = {
        "machine": f"{platform.node()} {platform.machine()} cpus={os.cpu_count()} python={platform.python_version()}",
        "ranks": a.hosts_local * a.nproc_per_node,
        "steps_on": len(on),
        "steps_off": len(off),
        "median_step_ms_on": round(statistics.median(on) / 1e6, 3),
        "median_step_ms_off": round(statistics.median(off) / 1e6, 3),
        "overhead_median_pct": round(med_pct, 2),
        "overhead_median_95ci_pct": [round(lo, 2), round(hi, 2)],
        "overhead_trimmed_mean_pct": round(tm_pct, 2),
        "step_ms_off_p10_p90": [round(sorted(off)[int(q * len(off))] / 1e6, 2) for q in (0.1, 0.9)],
        "target_pct": 2.0,
    }
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
