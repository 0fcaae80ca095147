"""The pure fail-slow detector on exact synthetic heartbeat sequences (no clocks, no processes)."""

from __future__ import annotations

import pytest

from trainctl.ops.launch.fail_slow import FailSlowDetector, job_progress


def _feed(det: FailSlowDetector, points: list[tuple[int, float]]):
    """Observe each (step, ts_s); return [(index, verdict)] for the observations that fired."""
    return [(i, v) for i, (st, ts) in enumerate(points) if (v := det.observe(st, ts)) is not None]


def _steady(n_steps: int, step_s: float, t0: float = 100.0, start: int = 0) -> list[tuple[int, float]]:
    return [(start + i, t0 + i * step_s) for i in range(n_steps + 1)]


def test_steady_job_never_fires():
    det = FailSlowDetector()
    assert _feed(det, _steady(200, 0.1)) == []
    assert det.baseline_step_s == pytest.approx(0.1)


def test_persistent_slowdown_fires_once_after_consecutive_checks():
    det = FailSlowDetector(warmup_steps=3, baseline_steps=10, window_steps=5, ratio=1.5, consecutive_checks=3)
    pts = _steady(30, 0.1)  # steps 0..30 at 100 ms
    t = pts[-1][1]
    pts += [(30 + i, t + i * 0.2) for i in range(1, 21)]  # then 200 ms per step
    fired = _feed(det, pts)
    assert len(fired) == 1
    idx, v = fired[0]
    # window of 5 steps turns slow (median) at the 3rd slow step; 3 consecutive checks -> 5th slow step
    assert pts[idx][0] == 35 and v.step == 35
    assert v.baseline_step_s == pytest.approx(0.1) and v.recent_step_s == pytest.approx(0.2)
    assert v.ratio == pytest.approx(2.0) and v.consecutive_checks == 3
    assert det.observe(60, t + 100.0) is None  # fires once per attempt


def test_one_slow_step_or_a_short_blip_does_not_fire():
    det = FailSlowDetector()
    pts = _steady(30, 0.1)
    t = pts[-1][1]
    pts += [(31, t + 2.0)]  # one 2 s step (a checkpoint save)
    pts += [(31 + i, t + 2.0 + i * 0.1) for i in range(1, 30)]
    assert _feed(det, pts) == []
    det2 = FailSlowDetector(window_steps=5, consecutive_checks=4)
    pts = _steady(30, 0.1)
    t = pts[-1][1]
    # 3 slow steps: the median of the last 5 is slow while >= 3 of them are slow: exactly 3 checks
    pts += [(30 + i, t + i * 0.3) for i in range(1, 4)]
    t = pts[-1][1]
    pts += [(33 + i, t + i * 0.1) for i in range(1, 30)]
    assert _feed(det2, pts) == []


def test_steps_between_polls_share_the_interval_and_stale_points_are_ignored():
    det = FailSlowDetector(warmup_steps=0, baseline_steps=4, window_steps=2, ratio=1.5, consecutive_checks=2)
    # polls see 2 steps at a time: 4 baseline steps of 0.5 s each
    assert _feed(det, [(0, 0.0), (2, 1.0), (4, 2.0)]) == []
    assert det.baseline_step_s == pytest.approx(0.5)
    assert det.observe(4, 2.5) is None  # no new step: not a check
    assert det.observe(3, 2.6) is None  # an older heartbeat: ignored
    assert det.observe(6, 4.0) is None  # 1.0 s per step: slow, 1st check
    v = det.observe(8, 6.0)  # 2nd check
    assert v is not None and v.step == 8 and v.recent_step_s == pytest.approx(1.0) and v.ratio == pytest.approx(2.0)


def test_no_check_until_baseline_and_window_do_not_overlap():
    det = FailSlowDetector(warmup_steps=2, baseline_steps=3, window_steps=3, ratio=1.5, consecutive_checks=1)
    pts = [(0, 0.0), (1, 5.0), (2, 10.0)]  # two slow warm-up steps: not in the baseline
    pts += [(3, 10.1), (4, 10.2), (5, 10.3)]  # baseline 0.1
    pts += [(6, 10.5), (7, 10.7)]  # only 2 window steps so far: no check
    assert _feed(det, pts) == []
    v = det.observe(8, 10.9)
    assert v is not None and v.baseline_step_s == pytest.approx(0.1) and v.recent_step_s == pytest.approx(0.2)


def test_job_progress_is_the_slowest_rank():
    beats = [
        {"rank": 0, "step": 12, "ts_ns": 5_000_000_000},
        {"rank": 1, "step": 10, "ts_ns": 4_000_000_000},
        {"rank": 2, "step": 10, "ts_ns": 3_000_000_000},
    ]
    assert job_progress(beats) == (10, 3.0)
    assert job_progress(beats + [{"rank": 3, "step": -1, "ts_ns": 1}]) is None  # a rank not stepping yet
    assert job_progress([]) is None


def test_bad_thresholds_are_refused():
    with pytest.raises(ValueError):
        FailSlowDetector(ratio=1.0)
    with pytest.raises(ValueError):
        FailSlowDetector(window_steps=0)
