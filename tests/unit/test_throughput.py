"""diagnose's throughput summary (analyzers/throughput.py): step time, tokens/s and MFU from the
timeline, worked by hand here from the definitions (issue 16 item 7)."""

from __future__ import annotations

import pandas as pd

from trainctl.analyzers.throughput import summarize


def _timeline(ms_by_rank: dict[int, float], steps: int, tokens: int = 1000) -> pd.DataFrame:
    rows = []
    for rank, ms in ms_by_rank.items():
        for step in range(steps):
            for phase, frac in (("forward", 0.4), ("backward", 0.6), ("step", 1.0)):
                rows.append(
                    {"rank": rank, "step": step, "phase": phase, "duration_ns": int(ms * frac * 1e6), "tokens": tokens}
                )
    return pd.DataFrame(rows)


def test_tensor_parallel_peers_share_tokens_and_the_slowest_rank_sets_the_step() -> None:
    # one replica of tp 2: ranks 0 and 1 see the same 1,000 tokens a step; rank 1 takes 200 ms
    ranks = {r: {"tp": 2, "model_flops_per_token": 6e6, "peak_flops_per_s": 1e12, "peak_basis": "test"} for r in (0, 1)}
    s = summarize(_timeline({0: 100.0, 1: 200.0}, steps=10), ranks)
    assert s is not None and s["steps"] == 9  # step 0 dropped as warm-up
    assert s["step_time_ms_median"] == 200.0
    assert s["tokens_per_s"] == 5000.0  # 1,000 tokens per 0.2 s
    assert s["mfu"] == 0.015  # 5,000 x 6e6 FLOP over 2 x 1e12 FLOP/s


def test_two_replicas_double_the_tokens_and_no_peak_means_no_mfu() -> None:
    s = summarize(_timeline({0: 100.0, 1: 100.0}, steps=10), {0: {"tp": 1}, 1: {"tp": 1}})
    assert s is not None and s["tokens_per_s"] == 20000.0 and s["mfu"] is None


def test_a_user_scripts_phases_sum_to_its_step_and_too_few_steps_say_nothing() -> None:
    t = _timeline({0: 50.0}, steps=6)
    t = t[t["phase"] != "step"]  # compute + wait style: no `step` row
    s = summarize(t, {})
    assert s is not None and s["step_time_ms_median"] == 50.0
    assert summarize(_timeline({0: 50.0}, steps=3), {}) is None  # 2 steady steps: no number
    assert summarize(None, {}) is None


def test_a_large_job_is_read_from_a_block_of_ranks_and_its_tokens_scaled_to_all() -> None:
    t = _timeline({r: 100.0 for r in range(100)}, steps=10)  # 100 ranks x 1,000 tokens per 0.1 s step
    s = summarize(t, {})
    assert s is not None and s["tokens_per_s"] == 1_000_000.0 and "ranks 0-63 of 100 read" in s["basis"]
