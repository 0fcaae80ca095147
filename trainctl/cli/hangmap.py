"""The terminal hang map: the rank grid (pp stages x dp rows x tp columns) with each rank's state.

MegaScale-style (seeds.md §2): the culprit is the rank the others wait on that waits on nobody;
every rank blocked in a hung op (behind it, in a follow-on group, in a send/recv chain) is W.
The grid and the states come from the hung_collective finding's `evidence["hang_map"]` (built by
trainctl.analyzers.hangs), so `--json` carries the same data.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rich.console import Group
from rich.table import Table
from rich.text import Text

from trainctl.findings import Finding, FindingKind, Report

__all__ = ["hang_maps", "render_hang_map"]

_STYLE = {
    "waiting": "yellow",
    "culprit": "bold white on red",
    "finished": "green",
    "no_data": "dim",
    "unknown": "dim italic",
}
_MARK = {"waiting": "W", "culprit": "X", "finished": ".", "no_data": "?", "unknown": "~"}


def render_hang_map(finding: Finding) -> Group | None:
    hm: Mapping[str, Any] | None = finding.evidence.get("hang_map")
    if not hm:
        return None
    states: Mapping[str, str] = hm.get("states", {})
    hosts: Mapping[str, str | None] = hm.get("hosts", {})
    axes = hm.get("axes", {})
    ev = finding.evidence
    p2p = "p2p " if ev.get("kind") == "p2p" else ""
    title = f"hang map: {ev.get('op') or 'collective'} {p2p}seq {ev.get('seq')} of pg {ev.get('pg_name')}" + (
        f" ({ev['pg_desc']})" if ev.get("pg_desc") else ""
    )
    parts: list[Any] = [Text(title, style="bold")]
    for i, stage in enumerate(hm.get("stages", [])):
        table = Table(
            show_header=True, show_lines=True, title=Text(f"{axes['stage']} stage {i}") if axes.get("stage") else None
        )
        ncols = max((len(row) for row in stage), default=0)
        table.add_column(Text(str(axes.get("row") or "")), style="bold")
        for c in range(ncols):
            table.add_column(Text(f"{axes.get('col') or 'rank'} {c}" if axes.get("row") else ""), justify="center")
        for j, row in enumerate(stage):
            cells = []
            for r in row:
                if r is None:
                    cells.append(Text(""))
                    continue
                st = states.get(str(r), "no_data")
                st = st if st in _MARK else "no_data"
                host = hosts.get(str(r))
                cells.append(Text(f"{_MARK[st]} r{r}" + (f"\n{host}" if host else ""), style=_STYLE[st]))
            table.add_row(Text(f"{axes.get('row')} {j}" if axes.get("row") else ""), *cells)
        parts.append(table)
    parts.append(
        Text(
            "X culprit (never arrived)   W waiting (blocked in a hung op)   . finished   ? no data (no dump)   "
            "~ unknown (ring buffer rolled past it)",
            style="dim",
        )
    )
    return Group(*parts)


def hang_maps(report: Report) -> list[Group]:
    return [
        g for f in report.findings if f.kind is FindingKind.HUNG_COLLECTIVE if (g := render_hang_map(f)) is not None
    ]
