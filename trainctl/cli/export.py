"""`trainctl export PATH --perfetto FILE`: the run as a trace for ui.perfetto.dev."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from trainctl.cli.console import err, exit_if_skipped, out
from trainctl.cli.outputs import refuse_onto_input
from trainctl.errors import InputError

if TYPE_CHECKING:
    from trainctl.analyzers import Analysis
    from trainctl.signals import Signals


def export(
    path: Path = typer.Argument(..., help="Run dir or collected dataset."),
    perfetto: Path = typer.Option(..., "--perfetto", help="Trace file to write (JSON; open it in ui.perfetto.dev)."),
) -> None:
    """One track per rank (by host) with each step's phases, Flight Recorder collectives, findings, GPU counters."""
    from trainctl.analyzers import run_analysis
    from trainctl.ops.diagnose.diagnosis import read_path
    from trainctl.ops.export.perfetto import trace_events, write_trace

    refuse_onto_input("--perfetto", perfetto, path)

    def drawn(signals: Signals) -> tuple[Analysis, int]:
        """Every read of the data the trace makes (the analysis, the tables streamed into the file)."""
        analysis = run_analysis(signals)
        events = trace_events(signals.tables, signals.rank_to_host(), analysis.findings)
        first = next(events, None)
        if first is None:  # an empty trace would open as a blank page, with no word why
            raise InputError(
                f"{path}: nothing to draw (no ranks, timeline, Flight Recorder collectives, GPU counters or timed "
                "findings); export draws a run dir or a collected dataset"
            )
        return analysis, write_trace(perfetto, itertools.chain([first], events))

    with err.status("exporting ...", spinner="dots"):
        # Read as diagnose reads it: a torn or corrupt part, or an analyzer that fails on its values, is said on
        # stderr and the rest drawn (a corrupt part of a lazy table is met as the trace streams it: the trace is then
        # written again without it).
        read = read_path(path, drawn, analysis=lambda done: done[0])
    out.print(str(perfetto), highlight=False)
    err.print(f"{read.result[1]} trace events; open it at https://ui.perfetto.dev", highlight=False)
    exit_if_skipped(read.skipped)
