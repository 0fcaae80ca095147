"""`trainctl export PATH --perfetto FILE`: the run as a trace for ui.perfetto.dev."""

from __future__ import annotations

from pathlib import Path

import typer

from trainctl.cli.console import err, out


def export(
    path: Path = typer.Argument(..., help="Run dir or collected dataset."),
    perfetto: Path = typer.Option(..., "--perfetto", help="Trace file to write (JSON; open it in ui.perfetto.dev)."),
) -> None:
    """One track per rank (by host) with each step's phases, Flight Recorder collectives, findings, GPU counters."""
    from trainctl.analyzers import run_analysis
    from trainctl.ops.diagnose.diagnosis import load_signals
    from trainctl.ops.export.perfetto import trace_events, write_trace

    with err.status("exporting ...", spinner="dots"):
        signals = load_signals(path)
        findings = run_analysis(signals).findings
        n = write_trace(perfetto, trace_events(signals.tables, signals.rank_to_host(), findings))
    out.print(str(perfetto), highlight=False)
    err.print(f"{n} trace events; open it at https://ui.perfetto.dev", highlight=False)
