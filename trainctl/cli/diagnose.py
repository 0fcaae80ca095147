"""`trainctl diagnose PATH [--json] [--fail-on warning|critical]`."""

from __future__ import annotations

import json
import time
from dataclasses import asdict
from datetime import UTC, datetime
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.text import Text

from trainctl.cli.console import err, exit_if_skipped, out
from trainctl.cli.hangmap import hang_maps
from trainctl.cli.render import findings_table
from trainctl.errors import TrainctlError
from trainctl.exit_codes import ExitCode
from trainctl.findings import Report, Severity

if TYPE_CHECKING:
    from trainctl.ops.diagnose.window import TimeWindow


class FailOn(str, Enum):
    WARNING = "warning"
    CRITICAL = "critical"
    NEVER = "never"


def diagnose(
    ctx: typer.Context,
    path: Path = typer.Argument(..., help="Run dir, collected dataset, Flight Recorder dump dir, or a log file."),
    json_out: bool = typer.Option(False, "--json", help="Findings JSON on stdout (schema_version 1)."),
    fail_on: FailOn = typer.Option(FailOn.CRITICAL, "--fail-on", help="Exit 3 when a finding is at least this severe."),
    since: str | None = typer.Option(
        None, "--since", help="Only rows from this time: ISO 8601 with offset (no offset = UTC), or 30m / 2h / 1d ago."
    ),
    until: str | None = typer.Option(None, "--until", help="Only rows up to this time (same forms as --since)."),
    watch: bool = typer.Option(
        False, "--watch", help="Diagnose again every --interval-s and print what changed (new, resolved, severity)."
    ),
    interval_s: float = typer.Option(
        10.0, "--interval-s", min=0.1, max=86400.0, help="With --watch: seconds between rounds (at most a day)."
    ),
    rounds: int | None = typer.Option(None, "--rounds", min=1, help="With --watch: stop after N rounds (else Ctrl-C)."),
) -> None:
    """Find stragglers, hung collectives, faulty hosts and crashes in PATH, with evidence."""
    # Imported here, not at module level: the analyzers pull in DuckDB, pandas and pyarrow.dataset
    # (~0.5 s), which `trainctl --help`, `collect` and every other command must not pay for.
    from trainctl.ops.diagnose.diagnosis import diagnose_path
    from trainctl.ops.diagnose.window import TimeWindow, parse_time

    if not watch:
        _refuse_watch_only_flags(ctx)
    window = TimeWindow(parse_time(since, flag="--since"), parse_time(until, flag="--until"))

    if watch:
        report = _watch(path, window, json_out, interval_s, rounds)
        _exit_code(report, fail_on)
        return
    with err.status(Text(f"diagnosing {path} ..."), spinner="dots"):
        report = diagnose_path(path, window)
    if json_out:
        out.print_json(report.to_json()) if out.is_terminal else print(report.to_json())
    else:
        out.print(findings_table(report))
        for hang_map in hang_maps(report):  # the rank grid of each hung collective (issue 3)
            out.print(hang_map)
        if report.summary:  # what the run achieved (analyzers/throughput.py)
            out.print(throughput_line(report.summary), highlight=False, markup=False, soft_wrap=True)
        for note in report.notes:  # why an analysis gave no verdict (e.g. a run too short)
            out.print(f"note: {note}", highlight=False, markup=False, soft_wrap=True)
    # What was skipped is not printed again here: each line was said on stderr once as it was met (read_path).
    _exit_code(report, fail_on)


def _refuse_watch_only_flags(ctx: typer.Context) -> None:
    """--rounds / --interval-s typed without --watch: a usage error, not silently one diagnosis.

    Only on the command line: the config file and TRAINCTL_DIAGNOSE_* set them as defaults for the
    times --watch is given, so they must not break every plain `diagnose`."""
    for name, flag, what in (
        ("rounds", "--rounds", "it ends the watch after N rounds"),
        ("interval_s", "--interval-s", "seconds between the watch's rounds"),
    ):
        source = ctx.get_parameter_source(name)
        if source is not None and source.name == "COMMANDLINE":  # by name: Typer's Click is vendored
            raise typer.BadParameter(
                f"only applies with --watch ({what}); add --watch, or drop {flag}", param_hint=f"'{flag}'"
            )


def throughput_line(summary: dict) -> str:
    """'throughput: 64,111 tokens/s, step 4.1 ms (median of 27 steps), MFU 0.01% (peak: ...)'."""
    parts = []
    if summary.get("tokens_per_s") is not None:
        parts.append(f"{summary['tokens_per_s']:,.0f} tokens/s")
    parts.append(f"step {summary['step_time_ms_median']:g} ms (median of {summary['steps']} steps)")
    if summary.get("mfu") is not None:
        peak = summary.get("peak_basis") or "the trainer's assumption"
        parts.append(f"MFU {100 * summary['mfu']:.2f}% (peak: {peak})")
    return "throughput: " + ", ".join(parts)


def _exit_code(report: Report, fail_on: FailOn) -> None:
    worst = report.max_severity()
    if fail_on is not FailOn.NEVER and worst is not None and worst.rank >= Severity(fail_on.value).rank:
        raise typer.Exit(ExitCode.FINDINGS)
    exit_if_skipped(report.skipped)  # nothing at or above --fail-on in what could be read, but not all could be


def _watch(path: Path, window: TimeWindow, json_out: bool, interval_s: float, rounds: int | None) -> Report:
    """Diagnose PATH every interval_s (a live run dir, a log that grows) and print each round's
    changes: the first round's findings as new, then new, resolved and re-graded ones. Returns the
    last round's report (its severity sets the exit code); Ctrl-C ends the watch."""
    from trainctl.analyzers.compare import ChangeStatus, finding_changes
    from trainctl.ops.diagnose.diagnosis import diagnose_path

    report: Report | None = None
    n = 0
    try:
        while rounds is None or n < rounds:
            if n:
                time.sleep(interval_s)
            n += 1
            try:
                current = diagnose_path(path, window, live=True)  # a log that grows: its end is not a stop
            except TrainctlError as exc:
                if report is None:
                    raise
                err.print(Text(f"round {n}: {exc}; trying again in {interval_s:g}s", style="yellow"), soft_wrap=True)
                continue
            ts = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
            changes = [
                c
                for c in finding_changes(list(report.findings) if report else [], list(current.findings))
                if c.status is not ChangeStatus.PERSISTS or c.a_severity != c.severity
            ]
            for c in changes:
                if json_out:
                    print(json.dumps({"ts": ts, "round": n, **asdict(c), "status": c.status.value}), flush=True)
                else:
                    sev = c.severity if c.a_severity in (None, c.severity) else f"{c.a_severity} -> {c.severity}"
                    who = " ".join(
                        x for x in (f"ranks {','.join(map(str, c.ranks[:8]))}" if c.ranks else "",
                                    f"hosts {','.join(c.hosts[:4])}" if c.hosts else "") if x
                    )  # fmt: skip
                    head = f"{ts} {c.status.value:<8} {sev:<8} {c.kind}" + (f" {who}" if who else "")
                    out.print(Text(f"{head}: {c.summary}"), soft_wrap=True)
            if not changes and not json_out:
                err.print(Text(f"{ts} round {n}: no change ({len(current.findings)} findings)", style="dim"))
            report = current
    except KeyboardInterrupt:
        err.print("watch stopped")
    if report is None:
        raise TrainctlError(f"{path}: no round of --watch finished")
    return report
