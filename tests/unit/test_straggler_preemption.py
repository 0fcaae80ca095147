"""Work phases are compared on a low per-window quantile: one-sided preemption noise is not a straggler."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
from straggler_timelines import make_timeline

from trainctl.analyzers.stragglers import find_stragglers


def _preempted(every_other_from: int, until: int, rank: int, extra: float) -> pa.Table:
    """4 ranks, 80 steps; `rank`'s forward is preempted (x extra) on every other step in [from, until)."""
    t = make_timeline(ranks=4, steps=80, jitter=0.05, seed=3).to_pandas()
    hit = (
        (t["rank"] == rank)
        & (t["phase"] == "forward")
        & t["step"].between(every_other_from, until - 1)
        & (t["step"] % 2 == 0)
    )
    t.loc[hit, "duration_ns"] = (t.loc[hit, "duration_ns"] * extra).astype(np.int64)
    return pa.Table.from_pandas(t, preserve_index=False).cast(make_timeline(ranks=4, steps=2).schema)


def test_every_other_step_preempted_is_not_a_straggler() -> None:
    t = _preempted(16, 48, rank=3, extra=2.2)
    assert find_stragglers(t) == []
    # The window median (half the steps delayed) would have blamed it: the quantile is what saves it.
    assert [f.ranks for f in find_stragglers(t, quantile=0.5)] == [(3,)]


def test_a_rank_slow_on_every_step_is_still_found() -> None:
    t = make_timeline(ranks=4, steps=80, jitter=0.05, seed=3, slow_rank=3, factor=1.5, slow_steps=(16, 48))
    fs = find_stragglers(t)
    assert [(f.ranks, f.evidence["phase"], f.evidence["steps"]) for f in fs] == [((3,), "forward", [16, 47])]
