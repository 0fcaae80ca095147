"""Communication suspects checked step by step (analyzers/stragglers.py `_paired_excess_ms`): clean runs'
false findings with and without the paired check, on the same recorded timelines, and the check's cost at scale.

    # clean runs recorded on this machine (any number of run dirs; nothing injected):
    .venv/bin/trainctl launch --local --hosts-local 2 --nproc-per-node 2 --run-dir RUN \\
        -- tests/fixtures/runtime/ddp_train.py --steps 40 --io-s 0.04
    .venv/bin/python bench/straggler_comm_check.py RUN... [--scale bench/out/timeline-8192]

"window medians only" is the rule before the paired check (the check made to pass everything), so both
columns read the same timelines in the same process.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import resource
import time
from pathlib import Path
from unittest import mock

import numpy as np
import pyarrow.dataset as pads

from trainctl.analyzers import stragglers
from trainctl.ops.diagnose.diagnosis import load_signals
from trainctl.schemas import Phase, SignalKind


def _findings(run: Path, paired: bool) -> list[str]:
    timeline = pads.dataset(run / "timeline", format="parquet", partitioning="hive").to_table()

    def everything(_timeline, episodes, _plan):
        return dict.fromkeys(episodes, math.inf)

    rule = contextlib.nullcontext() if paired else mock.patch.object(stragglers, "_paired_excess_ms", everything)
    with rule:
        fs = stragglers.find_stragglers(timeline)
    return [f"rank {f.ranks[0]} {f.category.value} {f.evidence['slowdown']:.2f}x" for f in fs]


def _scale(root: Path, repeat: int) -> None:
    signals = load_signals(root)
    timeline = signals.source(SignalKind.TIMELINE)
    _, plan = stragglers._window_values(timeline, None, 12, 0.25)
    n_win = (plan.max_step - plan.min_step) // plan.window_steps + 1
    # Suspects slow in every window: the most steps the check can read. 1 suspect, then 8 (a host's ranks).
    for n in (1, 8):
        eps = [
            stragglers._Episode(
                r, Phase.COMMUNICATION.value, tuple(range(n_win)), plan.min_step, plan.max_step, n_win, 1.5, 30.0, 20.0
            )
            for r in range(100, 100 + n)
        ]
        for i in range(repeat):
            t0, r0 = time.perf_counter(), resource.getrusage(resource.RUSAGE_SELF)
            got = stragglers._paired_excess_ms(timeline, eps, plan)
            r1 = resource.getrusage(resource.RUSAGE_SELF)
            cpu = r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime
            print(
                f"paired check, {n} suspect(s) over all {n_win} windows, round {i}: {time.perf_counter() - t0:.2f} s wall, "
                f"{cpu:.2f} CPU s, paired excess {max(got.values()):.2f} ms at most, peak RSS {r1.ru_maxrss / 1024:.0f} MiB"
            )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("runs", nargs="*", type=Path)
    ap.add_argument("--scale", type=Path, help="a run dir of bench/gen_timeline.py, for the check's cost")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    flagged = {False: 0, True: 0}
    for run in args.runs:
        row = {paired: _findings(run, paired) for paired in (False, True)}
        for paired, fs in row.items():
            flagged[paired] += bool(fs)
        print(f"{run}: window medians only {row[False] or 'none'}; with the paired check {row[True] or 'none'}")
    if args.runs:
        n = len(args.runs)
        print(
            f"clean runs with a straggler finding: window medians only {flagged[False]} of {n}, "
            f"with the paired check {flagged[True]} of {n}"
        )
    if args.scale:
        _scale(args.scale, args.repeat)


if __name__ == "__main__":
    np.seterr(all="ignore")
    main()
