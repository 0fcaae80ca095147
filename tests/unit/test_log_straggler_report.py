"""Megatron-LM's own straggler reports (megatron/core/utils.py StragglerDetector.report, the format of
megatron/core/README_STRAGGLER.md) read for a rank that stays the slowest (collectors/log_straggler_report.py)."""

from __future__ import annotations

from pathlib import Path

from trainctl.analyzers.logs import analyze_log_events
from trainctl.collectors.logs import parse_log_text
from trainctl.findings import FindingKind, Severity, sort_findings
from trainctl.ops.diagnose.diagnosis import diagnose_path


def _report(minute: int, min_ms: float, max_ms: float, max_rank: int) -> str:
    # rank 0 prints it (here under srun --label's "0: "), every log interval
    return (
        f" 0: INFO:megatron.core.utils:[2024-03-14 23:{minute:02d}:56] | MnRtt/Rnk: {min_ms:.2f}ms/8 | MxRtt/Rnk: "
        f"{max_ms:.2f}ms/{max_rank} | MnPwr/Rnk: 601796W/8 | MxPwr/Rnk: 683801W/18 | MnTmp/Rnk: 52C/0 | MxTmp/Rnk: "
        "65C/21 | MnUtl/Rnk: 97%/8 | MxUtl/Rnk: 100%/6 | MnClk/Rnk: 1950MHz/28 | MxClk/Rnk: 1980MHz/0 | MnDRtt/Rnk: "
        "14.27ms/23 | MxDRtt/Rnk: 34.65ms/3 | MnEtpt/Rnk: 296.02TF/0 | MxEtpt/Rnk: 297.32TF/8\n"
    )


def _findings(text: str):
    return [f for f in analyze_log_events(parse_log_text(text, "x.log")) if f.kind is FindingKind.STRAGGLER]


def test_a_rank_the_reports_keep_naming_slowest_is_a_straggler_named_by_rank_only() -> None:
    text = "".join(_report(m, 3450.0, hi, r) for m, (hi, r) in enumerate([(4468.2, 5), (4400.0, 5), (3470.0, 0),
                                                                         (4420.0, 5)]))  # fmt: skip
    (f,) = _findings(text)
    assert (f.ranks, f.hosts, f.severity) == ((5,), (), Severity.WARNING)
    assert "slowest rank in 3 of 4 reports" in f.summary and "1.281x" in f.summary
    assert f.confidence < 0.9  # below the runbooks' gate: a straggler is evicted on the timeline's evidence


def test_healthy_spread_one_report_or_a_slowest_rank_that_moves_is_no_straggler() -> None:
    # README_STRAGGLER.md's own example: 3453.08 vs 3468.20 ms, every report
    assert _findings("".join(_report(m, 3453.08, 3468.20, 0) for m in range(6))) == []
    assert _findings(_report(0, 3450.0, 4600.0, 5)) == []  # one report is a moment
    moving = "".join(_report(m, 3450.0, 4500.0, 5 + m % 2) for m in range(4))  # 5, 6, 5, 6: no rank stays slowest
    assert _findings(moving) == []


def test_a_crash_outranks_the_straggler(tmp_path: Path) -> None:
    log = tmp_path / "train.log"
    log.write_text(
        "".join(_report(m, 3450.0, 4500.0, 5) for m in range(3))
        + "[rank2]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.\n"
    )
    findings = sort_findings(diagnose_path(log).findings)
    assert findings[0].kind is FindingKind.OOM and findings[0].ranks == (2,)
    assert any(f.kind is FindingKind.STRAGGLER and f.ranks == (5,) for f in findings)
