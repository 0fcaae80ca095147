"""`trainctl agent`: the per-host metrics sampler (NVML + /proc), standalone."""

from __future__ import annotations

import os
import signal
import socket
import threading
from pathlib import Path

import typer

from trainctl.cli.console import err, out


def agent(
    out_dir: Path | None = typer.Option(
        None, "--out", help="Run dir or dataset dir to write into (default: $TRAINCTL_RUN_DIR, else ./metrics)."
    ),
    interval_s: float = typer.Option(1.0, "--interval-s", min=0.05, help="Sampling period in seconds."),
    duration_s: float | None = typer.Option(
        None, "--duration-s", min=0.0, help="Stop after this many seconds (default: until Ctrl-C/SIGTERM)."
    ),
    host: str | None = typer.Option(
        None, "--host", help="Host name for the partition (default: $TRAINCTL_HOST, else the hostname)."
    ),
    flush_s: float = typer.Option(10.0, "--flush-s", min=0.1, help="Write a Parquet part this often."),
) -> None:
    """Sample GPU (NVML) and host (/proc) metrics at 1 Hz into gpu_metrics/ and host_metrics/ parts."""
    from trainctl.runtime.metrics_agent import AgentConfig, MetricsAgent  # pyarrow: only when sampling

    out_path = out_dir or Path(os.environ.get("TRAINCTL_RUN_DIR") or "metrics")
    name = host or os.environ.get("TRAINCTL_HOST") or socket.gethostname().split(".")[0]
    stop = threading.Event()

    def _stop(signum: int, _frame: object) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    err.print(f"sampling {name} every {interval_s:g} s into {out_path} (Ctrl-C to stop)")
    stats = MetricsAgent(AgentConfig(out_path, name, interval_s, flush_s, duration_s)).run(stop)
    gpu = f"{stats.gpu_rows} gpu_metrics rows" if stats.nvml else f"no gpu_metrics ({stats.nvml_reason})"
    out.print(
        f"{name}: {stats.samples} samples, {stats.host_rows} host_metrics rows, {gpu}, {len(stats.parts)} parts in {out_path}"
    )
