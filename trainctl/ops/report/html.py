"""The incident report as one self-contained HTML page: no script, no network at view time.

Every value that comes from data (summaries quote log lines, host names, paths) is escaped with
html.escape; the pictures are inline SVG built here, so the page renders anywhere, offline.
"""

from __future__ import annotations

import html
import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from trainctl.findings import Finding, Report, sort_findings
from trainctl.ops.report.heatmap import Grid

__all__ = ["render_html", "heatmap_svg"]

_CSS = """
body{font:14px/1.4 system-ui,sans-serif;margin:24px;color:#1d1d1f}
h1{font-size:20px} h2{font-size:16px;margin-top:28px}
table{border-collapse:collapse;margin:8px 0} td,th{border:1px solid #ccc;padding:3px 6px;vertical-align:top}
.critical{color:#b00020;font-weight:bold} .warning{color:#9a6700} .info{color:#0969da}
details pre{white-space:pre-wrap;font-size:12px;background:#f6f8fa;padding:6px}
.legend{font-size:12px;color:#555} .cell-x{background:#b00020;color:#fff} .cell-w{background:#f2cc60}
.cell-ok{background:#d1f0d6} .cell-q{background:#eee}
"""

# Viridis, 9 stops (matplotlib's colormap, sampled): perceptually even, readable in grey.
_VIRIDIS = ["#440154", "#472d7b", "#3b528b", "#2c728e", "#21918c", "#28ae80", "#5ec962", "#addc30", "#fde725"]


def _color(v: float, lo: float, hi: float) -> str:
    if not math.isfinite(v):
        return "#ffffff"
    t = 0.0 if hi <= lo else min(1.0, max(0.0, (v - lo) / (hi - lo)))
    return _VIRIDIS[int(round(t * (len(_VIRIDIS) - 1)))]


def heatmap_svg(grid: Grid, *, cell_px: int = 4, max_px: int = 900) -> str:
    """Ranks as rows, step buckets as columns; colour scale from the 1st to the 99th percentile."""
    n_r, n_c = grid.values_ms.shape
    cw = max(1, min(cell_px, max_px // max(1, n_c)))
    ch = max(1, min(cell_px * 2, 600 // max(1, n_r)))
    finite = grid.values_ms[np.isfinite(grid.values_ms)]
    lo, hi = (float(np.percentile(finite, 1)), float(np.percentile(finite, 99))) if finite.size else (0.0, 1.0)
    rects = []
    for i in range(n_r):
        for j in range(n_c):
            v = float(grid.values_ms[i, j])
            rects.append(
                f'<rect x="{j * cw}" y="{i * ch}" width="{cw}" height="{ch}" fill="{_color(v, lo, hi)}">'
                f"<title>rank {grid.ranks[i]}, steps {grid.first_step + j * grid.steps_per_col}-"
                f"{grid.first_step + (j + 1) * grid.steps_per_col - 1}: {v:.2f} ms</title></rect>"
            )
    w, h = n_c * cw, n_r * ch
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" role="img" '
        f'aria-label="{html.escape(grid.title)}">{"".join(rects)}</svg>'
        f'<div class="legend">{html.escape(grid.title)}: {n_r} ranks (top = rank {grid.ranks[0]}) x {n_c} columns of '
        f"{grid.steps_per_col} step(s) from step {grid.first_step}; colour from {lo:.2f} ms (dark) to {hi:.2f} ms "
        "(yellow)</div>"
    )


def _hang_map_html(f: Finding) -> str:
    hm = f.evidence.get("hang_map") if isinstance(f.evidence, Mapping) else None
    if not isinstance(hm, Mapping):
        return ""
    states = hm.get("states") or {}
    hosts = hm.get("hosts") or {}
    css = {"culprit": "cell-x", "waiting": "cell-w", "finished": "cell-ok"}
    out = []
    for stage in hm.get("stages") or []:
        rows = []
        for row in stage:
            cells = []
            for r in row:
                if r is None:
                    cells.append("<td></td>")
                    continue
                st = str(states.get(str(r), "no_data"))
                host = hosts.get(str(r)) or ""
                cells.append(
                    f'<td class="{css.get(st, "cell-q")}">r{html.escape(str(r))}<br>{html.escape(str(host))}'
                    f"<br>{html.escape(st)}</td>"
                )
            rows.append("<tr>" + "".join(cells) + "</tr>")
        out.append("<table>" + "".join(rows) + "</table>")
    return "".join(out)


def _finding_html(f: Finding) -> str:
    ev = json.dumps(f.to_dict()["evidence"], indent=1, default=str)
    if len(ev) > 20000:
        ev = ev[:20000] + f"\n... ({len(ev)} characters in all; `trainctl diagnose --json` has every one)"
    return (
        f'<tr><td class="{f.severity.value}">{f.severity.value}</td><td>{html.escape(f.kind.value)}</td>'
        f"<td>{html.escape(f.category.value if f.category else '')}</td>"
        f"<td>{html.escape(','.join(map(str, f.ranks[:16])))}</td><td>{html.escape(','.join(f.hosts[:8]))}</td>"
        f"<td>{f.confidence:.2f}</td><td>{html.escape(f.summary)}"
        f"<details><summary>evidence</summary><pre>{html.escape(ev)}</pre></details>{_hang_map_html(f)}</td></tr>"
    )


def render_html(
    report: Report, grids: Sequence[Grid], coverage: Sequence[Mapping[str, Any]] = (), *, generated: str = ""
) -> str:
    findings = sort_findings(report.findings)
    parts = [
        "<!doctype html><html><head><meta charset='utf-8'>",
        f"<title>trainctl report: {html.escape(report.source)}</title><style>{_CSS}</style></head><body>",
        f"<h1>trainctl report: {html.escape(report.source)}</h1>",
        f"<p>run {html.escape(str(report.run_id or '-'))} ({html.escape(report.source_kind)}); {html.escape(generated)}</p>",
        f"<h2>Findings ({len(findings)})</h2>",
    ]
    if findings:
        parts.append(
            "<table><tr><th>severity</th><th>kind</th><th>category</th><th>ranks</th><th>hosts</th><th>conf</th>"
            "<th>summary and evidence</th></tr>" + "".join(_finding_html(f) for f in findings) + "</table>"
        )
    else:
        parts.append("<p>No findings.</p>")
    for note in report.notes:
        parts.append(f"<p class='legend'>note: {html.escape(note)}</p>")
    for s in report.skipped:
        parts.append(f"<p class='warning'>skipped: {html.escape(s)}</p>")
    if grids:
        parts.append("<h2>Heat-maps</h2>")
        for g in grids:
            parts.append(f"<h3>{html.escape(g.title)}</h3>{heatmap_svg(g)}")
    if coverage:
        parts.append("<h2>Collection coverage</h2><table><tr><th>host</th><th>kind</th><th>ok</th><th>error</th></tr>")
        for r in coverage:
            parts.append(
                f"<tr><td>{html.escape(str(r.get('host')))}</td><td>{html.escape(str(r.get('kind')))}</td>"
                f"<td>{'yes' if r.get('ok') else 'no'}</td><td>{html.escape(str(r.get('error') or ''))}</td></tr>"
            )
        parts.append("</table>")
    parts.append("</body></html>")
    return "".join(parts)
