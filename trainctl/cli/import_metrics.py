"""`trainctl import-metrics SOURCE... --out DATASET`: dcgm-exporter / node-exporter output into a dataset."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from trainctl.cli.console import err, out


def import_metrics(
    sources: list[str] = typer.Argument(..., help="dcgm-exporter or node-exporter /metrics URLs, or saved scrapes."),
    out_dir: Path = typer.Option(..., "--out", help="Dataset to add gpu_metrics / host_metrics to."),
    host: str | None = typer.Option(
        None, "--host", help="Host the samples belong to (dcgm-exporter's Hostname label wins; node-exporter needs it)."
    ),
    samples: int = typer.Option(1, "--samples", min=1, help="Scrapes per URL (rates need 2 or more)."),
    every_s: float = typer.Option(1.0, "--every-s", min=0.0, help="Seconds between scrapes of a URL."),
    json_out: bool = typer.Option(False, "--json", help="Summary as JSON on stdout."),
) -> None:
    """Read metrics your fleet already exports, so `diagnose` judges hosts without trainctl's agent."""
    from trainctl.ops.collect.prometheus_import import import_metrics as run_import

    with err.status("reading metrics ...", spinner="dots"):
        result = run_import(sources, out_dir, host=host, samples=samples, every_s=every_s)
    for line in result.skipped:
        err.print(f"skipped: {line}", highlight=False)
    if json_out:
        print(json.dumps(result.to_dict()))
        return
    for h, n in sorted(result.gpu_rows.items()):
        out.print(f"{h}: {n} gpu_metrics rows", highlight=False)
    for h, n in sorted(result.host_rows.items()):
        out.print(f"{h}: {n} host_metrics rows", highlight=False)
    out.print(f"next: trainctl diagnose {out_dir}", highlight=False)
