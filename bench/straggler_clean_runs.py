"""Stragglers named on recorded real runs under each rule of analyzers/stragglers.py, on the same
timelines in one process: false findings on clean runs, and what injected stragglers still give.

    # clean runs recorded on this machine (any number of run dirs; nothing injected):
    .venv/bin/trainctl launch --local --hosts-local 2 --nproc-per-node 2 --run-dir RUN -- --steps 80
    # injected ones (the drill's rank is the expected straggler):
    .venv/bin/trainctl launch --local ... --run-dir RUN --inject straggler:rank=2,factor=1.5 -- --steps 80
    .venv/bin/python bench/straggler_clean_runs.py RUN... [--straggler RANK RUN]... [--scale bench/out/timeline-8192]

Rules, each the one before it plus one check:
- "window medians only": communication suspects are not paired step by step (the paired check made to
  pass everything; the rule before 2026-11-27);
- "paired": the paired check, one 2%-of-a-step floor however brief the slowdown (before 2026-11-28);
- "now": a slowdown shorter than `sustained_s` that spans under `whole_run_share` of the run needs
  `brief_min_step_share` of a step.
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

RULES = ("window medians only", "paired", "now")


def _findings(run: Path, rule: str) -> list[tuple[int, str]]:
    """(rank, "rank R category 1.23x steps A-B") of each straggler named under `rule`."""
    timeline = pads.dataset(run / "timeline", format="parquet", partitioning="hive").to_table()

    def everything(_timeline, episodes, _plan):
        return dict.fromkeys(episodes, math.inf)

    patch = (
        mock.patch.object(stragglers, "_paired_excess_ms", everything) if rule == RULES[0] else contextlib.nullcontext()
    )
    # The brief floor switched off: the same as the sustained one.
    kwargs = {} if rule == "now" else {"brief_min_step_share": 0.02}
    with patch:
        fs = stragglers.find_stragglers(timeline, **kwargs)
    return [
        (
            f.ranks[0],
            f"rank {f.ranks[0]} {f.category.value} {f.evidence['slowdown']:.2f}x "
            f"steps {f.evidence['steps'][0]}-{f.evidence['steps'][1]}",
        )
        for f in fs
    ]


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
    ap.add_argument("runs", nargs="*", type=Path, help="clean run dirs (nothing injected)")
    ap.add_argument(
        "--straggler", nargs=2, action="append", default=[], metavar=("RANK", "RUN"), help="an injected run, its rank"
    )
    ap.add_argument("--scale", type=Path, help="a run dir of bench/gen_timeline.py, for the check's cost")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    flagged = dict.fromkeys(RULES, 0)
    for run in args.runs:
        row = {rule: _findings(run, rule) for rule in RULES}
        for rule, fs in row.items():
            flagged[rule] += bool(fs)
        print(f"clean {run}: " + "; ".join(f"{rule} {[s for _, s in fs] or 'none'}" for rule, fs in row.items()))
    if args.runs:
        n = len(args.runs)
        print("clean runs with a straggler finding: " + ", ".join(f"{r} {flagged[r]} of {n}" for r in RULES))
    named = dict.fromkeys(RULES, 0)
    wrong = dict.fromkeys(RULES, 0)
    for rank_s, run_s in args.straggler:
        row = {rule: _findings(Path(run_s), rule) for rule in RULES}
        for rule, fs in row.items():
            named[rule] += any(r == int(rank_s) for r, _ in fs)
            wrong[rule] += sum(r != int(rank_s) for r, _ in fs)
        print(
            f"rank {rank_s} injected, {run_s}: "
            + "; ".join(f"{r} {[s for _, s in fs] or 'none'}" for r, fs in row.items())
        )
    if args.straggler:
        n = len(args.straggler)
        print(
            "injected runs whose straggler is named (other ranks named): "
            + ", ".join(f"{r} {named[r]} of {n} ({wrong[r]})" for r in RULES)
        )
    if args.scale:
        _scale(args.scale, args.repeat)


if __name__ == "__main__":
    np.seterr(all="ignore")
    main()
