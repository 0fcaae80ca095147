"""`trainctl export PATH --perfetto FILE`: the run as a trace for ui.perfetto.dev."""

from __future__ import annotations

import itertools
from pathlib import Path

import typer

from trainctl.cli.console import err, out
from trainctl.cli.outputs import refuse_onto_input
from trainctl.errors import InputError


def export(
    path: Path = typer.Argument(..., help="Run dir or collected dataset."),
    perfetto: Path = typer.Option(..., "--perfetto", help="Trace file to write (JSON; open it in ui.perfetto.dev)."),
) -> None:
    """One track per rank (by host) with each step's phases, Flight Recorder collectives, findings, GPU counters."""
    from trainctl.analyzers import run_analysis
    from trainctl.ops.diagnose.diagnosis import load_signals
    from trainctl.ops.export.perfetto import trace_events, write_trace

    refuse_onto_input("--perfetto", perfetto, path)
    with err.status("exporting ...", spinner="dots"):
        signals = load_signals(path)
        findings = run_analysis(signals).findings
        events = trace_events(signals.tables, signals.rank_to_host(), findings)
        first = next(events, None)
        if first is None:  # an empty trace would open as a blank page, with no word why
            raise InputError(
                f"{path}: nothing to draw (no ranks, timeline, Flight Recorder collectives, GPU counters or timed "
                "findings); export draws a run dir or a collected dataset"
            )
        n = write_trace(perfetto, itertools.chain([first], events))
    out.print(str(perfetto), highlight=False)
    err.print(f"{n} trace events; open it at https://ui.perfetto.dev", highlight=False)
