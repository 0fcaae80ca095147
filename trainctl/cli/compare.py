"""`trainctl compare RUN_A RUN_B [--json]`: step time by phase, hosts and findings, A against B."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.table import Table
from rich.text import Text

from trainctl.cli.console import err, exit_if_skipped, out

if TYPE_CHECKING:
    from trainctl.analyzers.compare import RunComparison


def _ms(v: float | None) -> Text:
    return Text("-" if v is None else f"{v:,.1f}")


def compare(
    run_a: Path = typer.Argument(..., help="The reference run (run dir or collected dataset)."),
    run_b: Path = typer.Argument(..., help="The run to compare with it."),
    json_out: bool = typer.Option(False, "--json", help="The comparison as JSON on stdout."),
) -> None:
    """What changed from RUN_A to RUN_B: step time by phase, the hosts used, findings new/resolved/persisting."""
    from trainctl.ops.diagnose.compare import compare_paths

    with err.status(Text(f"comparing {run_a} with {run_b} ..."), spinner="dots"):
        cmp = compare_paths(run_a, run_b)
    if json_out:
        doc = json.dumps(cmp.to_dict(), indent=2)
        out.print_json(doc) if out.is_terminal else print(doc)
    else:
        _print_tables(cmp, run_a, run_b)
    exit_if_skipped(cmp.skipped)  # each said on stderr as it was met (and in the JSON's skipped)


def _print_tables(cmp: RunComparison, run_a: Path, run_b: Path) -> None:
    from trainctl.analyzers.compare import ChangeStatus

    phases = Table(title=Text(f"step time by phase (ms per rank and step): A = {run_a}, B = {run_b}"))
    for col in ("phase", "A median", "B median", "change", "A p90", "B p90", "steps A/B"):
        phases.add_column(col, overflow="fold", justify="left" if col == "phase" else "right")
    for p in cmp.phases:
        change = p.median_change_pct
        style = (
            "red" if change is not None and change >= 10 else "green" if change is not None and change <= -10 else ""
        )
        phases.add_row(
            Text(p.phase),
            _ms(p.a_median_ms),
            _ms(p.b_median_ms),
            Text("-" if change is None else f"{change:+.1f}%", style=style),
            _ms(p.a_p90_ms),
            _ms(p.b_p90_ms),
            Text(f"{p.a_steps}/{p.b_steps}"),
        )
    out.print(phases if cmp.phases else Text("no timeline in either run: no step times to compare"))
    out.print(
        Text(
            f"hosts: {len(cmp.hosts_both)} in both; only in A: {', '.join(cmp.hosts_only_a) or '-'}; "
            f"only in B: {', '.join(cmp.hosts_only_b) or '-'}"
        ),
        soft_wrap=True,
    )
    if not cmp.findings:
        out.print(Text("no findings in either run", style="green"))
        return
    table = Table(title=Text("findings"))
    for col in ("status", "severity", "kind", "category", "ranks", "hosts", "summary"):
        table.add_column(col, overflow="fold")
    style = {
        ChangeStatus.NEW: "red",
        ChangeStatus.PERSISTS: "yellow",
        ChangeStatus.NOT_JUDGED: "dim",
        ChangeStatus.RESOLVED: "green",
    }
    for f in cmp.findings:
        table.add_row(
            Text(f.status.value, style=style[f.status]),
            Text(f.severity if f.a_severity in (None, f.severity) else f"{f.a_severity} -> {f.severity}"),
            Text(f.kind),
            Text(f.category or ""),
            Text(",".join(map(str, f.ranks[:8])) + (",..." if len(f.ranks) > 8 else "")),
            Text(",".join(f.hosts[:4]) + (",..." if len(f.hosts) > 4 else "")),
            Text(f.summary),
        )
    out.print(table)
