"""A loss that jumps from a real value to exactly 0 and stays there to the end of the log is a numerical
finding (collectors/logs.py _loss_collapse); a loss that converges through small values, a single 0, or a
log that already reports a NaN, is not this finding."""

from __future__ import annotations

from trainctl.analyzers.logs import analyze_log_events
from trainctl.collectors.logs import parse_log_text
from trainctl.findings import FindingKind, Severity


def _findings(losses: list[float], fmt: str = "{{'loss': {v}, 'learning_rate': 1e-05, 'epoch': 0.0}}") -> list:
    text = "".join(fmt.format(v=v) + "\n" for v in losses)
    return analyze_log_events(parse_log_text(text, "x.log"))


def test_a_loss_that_drops_to_exactly_zero_and_stays_is_numerical() -> None:
    (f,) = _findings([1.7172, 1.7636, 1.7367, 1.7638, 0.0, 0.0, 0.0])
    assert f.kind is FindingKind.NUMERICAL and f.severity is Severity.WARNING and f.ranks == () and f.hosts == ()
    assert f.summary.startswith("loss fell from 1.7638 to exactly 0 and stayed there (3 lines")
    assert f.evidence["lines"][0].startswith("x.log:5:")  # the first zero


def test_the_same_in_megatrons_and_lightnings_spelling() -> None:
    assert _findings([2.3, 2.1, 0.0, 0.0], "iteration 10 | lm loss: {v} | grad norm: 1.0 |")
    assert _findings([2.3, 2.1, 0.0, 0.0], "Epoch 0: loss={v}, v_num=3")


def test_converging_a_single_zero_or_a_recovery_is_nothing() -> None:
    assert _findings([2.3, 0.4, 0.03, 0.0, 0.0]) == []  # converged through small values (a memorised toy task)
    assert _findings([2.3, 2.1, 0.0]) == []  # one zero line
    assert _findings([2.3, 0.0, 0.0, 1.9]) == []  # the loss came back: zeros do not end the log


def test_zero_loss_from_the_first_step_is_numerical_only_when_the_gradient_norm_is_zero_too() -> None:
    fmt = "{{'loss': {v}, 'grad_norm': 0.0, 'learning_rate': 4e-07, 'epoch': 0.05}}"
    (f,) = _findings([0.0, 0.0, 0.0], fmt)
    assert f.kind is FindingKind.NUMERICAL and f.ranks == () and f.hosts == ()
    assert f.summary.startswith(
        "loss is exactly 0 on every printed step (3 lines to the end), and so is the gradient norm"
    )
    assert _findings([0.0, 0.0, 0.0]) == []  # no gradient norm printed: a loss that is 0 from the start proves nothing
    assert _findings([0.0, 0.0], "{{'loss': {v}, 'grad_norm': 0.35, 'epoch': 0.1}}") == []  # gradients still flow


def test_a_loss_that_ends_at_several_times_its_low_is_a_divergence() -> None:
    (f,) = _findings([2.2758, 11.0545], "iteration 1 | lm_loss: {v} | number of nan iterations:   0 |")
    assert f.kind is FindingKind.NUMERICAL and f.severity is Severity.WARNING and f.ranks == () and f.hosts == ()
    assert f.summary.startswith("loss diverged: it ends at 11.0545, 4.9x its earlier low of 2.2758")
    assert _findings([11.67, 8.85, 8712.59, 15806.38], "Step 100/3995, loss: {v}, lbox: 3.6")


def test_a_loss_that_falls_wobbles_or_rises_by_little_is_nothing() -> None:
    assert _findings([2.3, 1.9, 1.7, 1.75]) == []  # an ordinary wobble
    assert _findings([0.01, 0.02, 0.05]) == []  # 5x, but a rise of 0.04: noise on a converged loss
    assert _findings([2.3, 11.0, 1.9]) == []  # a spike that came back
    assert _findings([9.0]) == []  # one line is no trend
