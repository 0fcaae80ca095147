"""Build the report of a path: diagnose it, draw its timeline's heat-maps, list its coverage."""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path

from trainctl.analyzers import Analysis, run_analysis
from trainctl.findings import Report
from trainctl.ops.diagnose.diagnosis import detect_input, read_path
from trainctl.ops.report.heatmap import Grid, phases_of, step_grid
from trainctl.ops.report.html import render_html
from trainctl.schemas import SignalKind
from trainctl.signals import Signals

__all__ = ["build_report", "timeline_grids"]


def timeline_grids(signals, *, max_cols: int = 200) -> list[Grid]:
    t = signals.tables.get(SignalKind.TIMELINE)
    if t is None:
        return []
    grids = [g for g in [step_grid(t, None, max_cols=max_cols)] if g is not None]
    for phase in phases_of(t):
        if phase != "step":
            g = step_grid(t, phase, max_cols=max_cols)
            if g is not None:
                grids.append(g)
    return grids


def build_report(path: str | os.PathLike[str]) -> tuple[str, Report, list[Grid]]:
    """(html, report, grids) of PATH (run dir, dataset, Flight Recorder dir or log file), read as diagnose reads
    it: a torn or corrupt part, or an analyzer that fails on its values, is said on stderr, listed among the report's
    skipped inputs, and the rest drawn."""
    p = Path(path)
    kind = detect_input(p)
    read = read_path(p, _drawn, kind=kind, analysis=lambda done: done[1])
    signals, analysis, grids, coverage = read.result
    report = Report(
        signals.run.run_id if signals.run else None,
        analysis.findings,
        str(p),
        kind.value,
        analysis.notes,
        read.skipped,
    )
    generated = f"generated {datetime.now(UTC).isoformat(timespec='seconds')} by trainctl report"
    return render_html(report, grids, coverage, generated=generated), report, grids


def _drawn(signals: Signals) -> tuple[Signals, Analysis, list[Grid], list[dict]]:
    """Every read the report makes of the data: the analysis, the heat-maps, the coverage table."""
    status = signals.table(SignalKind.COLLECTION_STATUS)
    coverage = status.to_pylist() if status is not None else []
    return signals, run_analysis(signals), timeline_grids(signals), coverage
