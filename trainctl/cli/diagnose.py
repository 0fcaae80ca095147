"""`trainctl diagnose PATH [--json] [--fail-on warning|critical]`."""

from __future__ import annotations

from enum import Enum
from pathlib import Path

import typer
from rich.text import Text

from trainctl.cli.console import err, out
from trainctl.cli.hangmap import hang_maps
from trainctl.cli.render import findings_table
from trainctl.exit_codes import ExitCode
from trainctl.findings import Severity


class FailOn(str, Enum):
    WARNING = "warning"
    CRITICAL = "critical"
    NEVER = "never"


def diagnose(
    path: Path = typer.Argument(..., help="Run dir, collected dataset, Flight Recorder dump dir, or a log file."),
    json_out: bool = typer.Option(False, "--json", help="Findings JSON on stdout (schema_version 1)."),
    fail_on: FailOn = typer.Option(FailOn.CRITICAL, "--fail-on", help="Exit 3 when a finding is at least this severe."),
    since: str | None = typer.Option(
        None, "--since", help="Only rows from this time: ISO 8601 with offset (no offset = UTC), or 30m / 2h / 1d ago."
    ),
    until: str | None = typer.Option(None, "--until", help="Only rows up to this time (same forms as --since)."),
) -> None:
    """Find stragglers, hung collectives, faulty hosts and crashes in PATH, with evidence."""
    # Imported here, not at module level: the analyzers pull in DuckDB, pandas and pyarrow.dataset
    # (~0.5 s), which `trainctl --help`, `collect` and every other command must not pay for.
    from trainctl.ops.diagnose.diagnosis import diagnose_path
    from trainctl.ops.diagnose.window import TimeWindow, parse_time

    window = TimeWindow(parse_time(since, flag="--since"), parse_time(until, flag="--until"))

    with err.status(Text(f"diagnosing {path} ..."), spinner="dots"):
        report = diagnose_path(path, window)
    if json_out:
        out.print_json(report.to_json()) if out.is_terminal else print(report.to_json())
    else:
        out.print(findings_table(report))
        for hang_map in hang_maps(report):  # the rank grid of each hung collective (issue 3)
            out.print(hang_map)
        for note in report.notes:  # why an analysis gave no verdict (e.g. a run too short)
            out.print(f"note: {note}", highlight=False, markup=False, soft_wrap=True)
    for line in report.skipped[:20] if not json_out else ():  # (the loaders' warnings said it as it happened)
        err.print(Text(f"skipped: {line}", style="yellow"), soft_wrap=True)
    worst = report.max_severity()
    if fail_on is not FailOn.NEVER and worst is not None and worst.rank >= Severity(fail_on.value).rank:
        raise typer.Exit(ExitCode.FINDINGS)
    if report.skipped:
        # Nothing at or above --fail-on in what could be read, but not everything could: say so.
        raise typer.Exit(ExitCode.PARTIAL)
