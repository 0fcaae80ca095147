"""Instrumentation overhead of the reference trainer, A/B interleaved in one run.

One `trainctl launch --local` run (4 ranks, 2 simulated hosts, torchrun + gloo); the trainer
switches its instrumentation (phase timeline + heartbeats) on and off every --block steps, so both
arms see the same machine load over time. Rank 0's step wall times per arm are compared:
overhead = median(on) / median(off) - 1 (also the trimmed means). Target: <= 2 % of step time.

    .venv/bin/python bench/instrumentation_overhead.py [--steps 400 --block 10]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path


def trimmed_mean(xs: list[int], frac: float = 0.1) -> float:
    xs = sorted(xs)
    k = int(len(xs) * frac)
    xs = xs[k: len(xs) - k] or xs
    return sum(xs) / len(xs)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=400)
    p.add_argument("--block", type=int, default=10)
    p.add_argument("--hosts-local", type=int, default=2)
    p.add_argument("--nproc-per-node", type=int, default=2)
    a = p.parse_args()
    with tempfile.TemporaryDirectory() as d:
        run = Path(d) / "run"
        cmd = [sys.executable, "-c", "from trainctl.cli.app import main; main()", "launch", "--local",
               "--hosts-local", str(a.hosts_local), "--nproc-per-node", str(a.nproc_per_node), "--run-dir", str(run),
               "--", "--steps", str(a.steps), "--ab-block", str(a.block), "--log-every", "1000000"]
        subprocess.run(cmd, check=True)
        ab = json.loads((run / "ab_overhead.json").read_text())
    on, off = ab["on"], ab["off"]
    med_on, med_off = statistics.median(on), statistics.median(off)
    tm_on, tm_off = trimmed_mean(on), trimmed_mean(off)
    result = {
        "steps_on": len(on), "steps_off": len(off),
        "median_step_ms_on": med_on / 1e6, "median_step_ms_off": med_off / 1e6,
        "overhead_median_pct": 100 * (med_on / med_off - 1),
        "trimmed_mean_step_ms_on": tm_on / 1e6, "trimmed_mean_step_ms_off": tm_off / 1e6,
        "overhead_trimmed_mean_pct": 100 * (tm_on / tm_off - 1),
        "target_pct": 2.0,
    }
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
