"""Rendering findings for people (rich table) and machines (JSON)."""

from __future__ import annotations

from rich.table import Table
from rich.text import Text

from trainctl.findings import Report, Severity, sort_findings

_STYLE = {Severity.CRITICAL: "bold red", Severity.WARNING: "yellow", Severity.INFO: "cyan"}


def _evidence_text(evidence: dict) -> str:
    parts = []
    for k, v in evidence.items():
        if isinstance(v, float):
            v = f"{v:.3g}"
        elif isinstance(v, (list, tuple)) and len(v) > 6:
            v = f"[{', '.join(map(str, v[:6]))}, ...]"
        elif isinstance(v, dict):
            continue  # nested detail belongs to --json
        parts.append(f"{k}={v}")
    return " ".join(parts)


def findings_table(report: Report) -> Table | Text:
    if not report.findings:
        return Text(f"no findings in {report.source} ({report.source_kind})", style="green")
    # Every cell is a Text, never markup: summaries quote log lines, paths and host names, and a
    # `[/x]` in them must print as it is, not crash the renderer.
    title = Text(f"trainctl diagnose: {report.source}" + (f" (run {report.run_id})" if report.run_id else ""))
    table = Table(title=title, show_lines=False, expand=False)
    for col in ("severity", "kind", "category", "ranks", "hosts", "conf", "summary", "playbook"):
        table.add_column(col, overflow="fold")
    for f in sort_findings(report.findings):
        ranks = ",".join(map(str, f.ranks[:8])) + (",..." if len(f.ranks) > 8 else "")
        hosts = ",".join(f.hosts[:4]) + (",..." if len(f.hosts) > 4 else "")
        table.add_row(
            Text(f.severity.value, style=_STYLE[f.severity]),
            Text(f.kind.value),
            Text(f.category.value if f.category else ""),
            Text(ranks),
            Text(hosts),
            Text(f"{f.confidence:.2f}"),
            Text(f.summary),
            Text(f.playbook or ""),
        )
    return table
