"""`trainctl report PATH [--out FILE.html] [--png FILE.png]`: the incident as one HTML file."""

from __future__ import annotations

from pathlib import Path

import typer

from trainctl.cli.console import err, exit_if_skipped, out
from trainctl.cli.outputs import refuse_onto_input, same_path
from trainctl.errors import InputError, UsageError


def report(
    path: Path = typer.Argument(..., help="Run dir, collected dataset, Flight Recorder dump dir, or a log file."),
    out_file: Path | None = typer.Option(
        None,
        "--out",
        help="HTML file to write (default: PATH/report.html for a directory; for a file, PATH with its extension "
        "replaced by .report.html: oom.log -> oom.report.html).",
    ),
    png: Path | None = typer.Option(
        None,
        "--png",
        # '\\[': Typer renders help as rich markup, where a bare [report] is a style tag (it read 'needs trainctl').
        help="Also write the step-time heat-map as a PNG for a ticket (or the format its extension names: .svg, "
        ".pdf, ...); needs the report extra: pip install 'trainctl\\[report]'.",
    ),
) -> None:
    """Findings with evidence, rank x step heat-maps, hang maps and coverage, in one offline HTML file."""
    from trainctl.ops.report.build import build_report

    default = path / "report.html" if path.is_dir() else path.with_suffix(".report.html")
    target = out_file or default
    # Before anything is read or written. The default is the report's own file (in the run dir, or next
    # to the log), which nothing reads back; any other path in the input directory is refused.
    refuse_onto_input("--out", target, path, allowed=default)
    png_format = None
    if png is not None:
        refuse_onto_input("--png", png, path)
        png_format = _png_format(png, target)
    with err.status("building the report ...", spinner="dots"):
        page, rep, grids = build_report(path)
    target.write_text(page, encoding="utf-8")
    if png is not None:
        if not grids:
            raise InputError(f"{path}: no timeline, so no heat-map to draw; --png needs a run with a timeline")
        _write_png(_pick(rep, grids), png, png_format)
        out.print(str(png), highlight=False)
    out.print(str(target), highlight=False)
    err.print(f"{len(rep.findings)} finding(s), {len(grids)} heat-map(s)", highlight=False)
    exit_if_skipped(rep.skipped)


def _pick(rep, grids):
    """The picture a ticket needs: the phase the top straggler finding names, else the whole step."""
    from trainctl.findings import FindingKind, sort_findings

    top = next((f for f in sort_findings(rep.findings) if f.kind is FindingKind.STRAGGLER), None)
    phase = str(top.evidence.get("phase", "")).split("+")[0] if top is not None else ""
    return next((g for g in grids if g.title.startswith(f"{phase} ")), grids[0]) if phase else grids[0]


def _matplotlib():
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise InputError("--png needs matplotlib: pip install 'trainctl[report]'") from exc
    return plt


def _png_format(png: Path, html: Path) -> str:
    """The format matplotlib is to write --png in, checked before anything is written: the extension's, or
    PNG for a name without one. Passed to savefig, so the file is the path given (savefig alone appends
    `.png` to a name without an extension, and to a directory's name, while trainctl printed the name)."""
    if png.is_dir():
        raise UsageError(f"--png {png}: is a directory; name the picture's file, e.g. {png / 'heatmap.png'}")
    if same_path(png, html):
        raise UsageError(f"--png {png}: the HTML report goes there too (--out); give the picture its own name")
    fmt = png.suffix[1:].lower() or "png"
    _matplotlib()  # without the extra, say so before anything is written
    from matplotlib.backend_bases import FigureCanvasBase

    known = FigureCanvasBase.get_supported_filetypes()
    if fmt not in known:
        raise UsageError(
            f"--png {png}: matplotlib cannot write '.{fmt}' files; end the name in .png (or one of "
            f"{', '.join('.' + k for k in sorted(known) if k != 'png')})"
        )
    return fmt


def _write_png(grid, png: Path, fmt: str) -> None:
    plt = _matplotlib()
    fig, ax = plt.subplots(figsize=(10, max(2.0, min(8.0, len(grid.ranks) * 0.25 + 1))))
    import numpy as np

    finite = grid.values_ms[np.isfinite(grid.values_ms)]
    lo, hi = (np.percentile(finite, 1), np.percentile(finite, 99)) if finite.size else (None, None)
    im = ax.imshow(grid.values_ms, aspect="auto", interpolation="nearest", cmap="viridis", vmin=lo, vmax=hi)
    ax.set_xlabel(f"step (x{grid.steps_per_col}, from {grid.first_step})")
    ax.set_ylabel("rank")
    ax.set_title(grid.title)
    fig.colorbar(im, ax=ax, label="ms")
    fig.tight_layout()
    fig.savefig(png, dpi=100, format=fmt)
    plt.close(fig)
