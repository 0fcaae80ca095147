"""Fail-slow detection from heartbeats: the job's step time against its own earlier baseline.

Pure: the supervisor feeds it what it already reads each poll (every rank's heartbeat step and
`ts_ns`); no clock, no I/O. A fail-slow (a throttling GPU, a degraded link, a noisy neighbour)
neither crashes nor hangs: the job keeps stepping, slower. The job moves at its slowest rank's
pace (every step ends in collectives), so the detector follows the *minimum* step over ranks
and the time, on that rank's own clock, at which it was first seen. Steps completed between two
observations share the interval equally.

The baseline is the median step time of the first `baseline_steps` steps after `warmup_steps`
(first steps include compilation, allocator growth and a checkpoint restore); the current rate
is the median over the last `window_steps` steps. The job is fail-slow when current >
`ratio` x baseline on `consecutive_checks` consecutive checks that saw new steps (medians and the
run of checks make one slow step, or a checkpoint save, not enough). It fires once; the
supervisor then collects and diagnoses with Trigger.FAIL_SLOW.
"""

from __future__ import annotations

import logging
import statistics
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

__all__ = ["FailSlowDetector", "FailSlowVerdict", "job_progress"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class FailSlowVerdict:
    step: int  # the job's (minimum) step when it fired
    baseline_step_s: float
    recent_step_s: float
    ratio: float  # recent / baseline
    consecutive_checks: int

    def to_dict(self) -> dict[str, float | int]:
        return {
            "step": self.step,
            "baseline_step_s": round(self.baseline_step_s, 6),
            "recent_step_s": round(self.recent_step_s, 6),
            "ratio": round(self.ratio, 3),
            "consecutive_checks": self.consecutive_checks,
        }

    def summary(self) -> str:
        return (
            f"step time {self.recent_step_s * 1e3:.1f} ms (median of the last steps) is {self.ratio:.2f}x the "
            f"run's own baseline {self.baseline_step_s * 1e3:.1f} ms, at step {self.step}"
        )


def job_progress(beats: Iterable[Mapping]) -> tuple[int, float] | None:
    """(minimum step over ranks, that rank's heartbeat time in seconds) from one poll's heartbeats;
    None before every rank has started stepping (step < 0 is the heartbeat's start state)."""
    best: tuple[int, float] | None = None
    for hb in beats:
        try:
            step, ts_s = int(hb["step"]), int(hb["ts_ns"]) / 1e9
        except (KeyError, TypeError, ValueError):
            continue
        if step < 0:
            return None
        if best is None or step < best[0] or (step == best[0] and ts_s < best[1]):
            best = (step, ts_s)
    return best


@dataclass
class FailSlowDetector:
    """Feed `observe(step, ts_s)` once per poll; it returns a verdict the first time the job is fail-slow.

    Args (thresholds, documented): warmup_steps skipped before the baseline; baseline_steps in it;
    window_steps in the current median; ratio that counts as slow; consecutive_checks in a row.
    """

    warmup_steps: int = 3
    baseline_steps: int = 10
    window_steps: int = 5
    ratio: float = 1.5
    consecutive_checks: int = 3
    _last: tuple[int, float] | None = field(default=None, init=False)
    _step_s: list[float] = field(default_factory=list, init=False)  # one per completed step, in order
    _run: int = field(default=0, init=False)
    fired: FailSlowVerdict | None = field(default=None, init=False)

    def __post_init__(self) -> None:
        if min(self.baseline_steps, self.window_steps, self.consecutive_checks) < 1 or self.ratio <= 1.0:
            raise ValueError("FailSlowDetector: steps and checks must be >= 1 and ratio > 1")

    @property
    def baseline_step_s(self) -> float | None:
        base = self._step_s[self.warmup_steps : self.warmup_steps + self.baseline_steps]
        return statistics.median(base) if len(base) == self.baseline_steps else None

    def observe(self, step: int, ts_s: float) -> FailSlowVerdict | None:
        if self.fired is not None:
            return None
        last = self._last
        if last is None:
            self._last = (step, ts_s)
            return None
        if step <= last[0]:
            # the same step seen again (a later phase of it) or an older file: the step's anchor
            # stays the time it was first seen, so intervals are step-to-step. Not a check.
            return None
        self._last = (step, ts_s)
        n = step - last[0]
        self._step_s.extend([max(ts_s - last[1], 0.0) / n] * n)
        base = self.baseline_step_s
        if base is None or len(self._step_s) < self.warmup_steps + self.baseline_steps + self.window_steps:
            return None  # the current window must not overlap the baseline
        recent = statistics.median(self._step_s[-self.window_steps :])
        if base > 0 and recent > self.ratio * base:
            self._run += 1
        else:
            self._run = 0
        if self._run >= self.consecutive_checks:
            self.fired = FailSlowVerdict(step, base, recent, recent / base if base else float("inf"), self._run)
            logger.info("fail-slow: %s", self.fired.summary())
            return self.fired
        return None
