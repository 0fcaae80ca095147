"""`trainctl fleet-sim`: write a simulated fleet's gpu_metrics/host_metrics (and ground truth)."""

from __future__ import annotations

import math
from pathlib import Path

import typer

from trainctl.cli.console import err, out
from trainctl.errors import UsageError
from trainctl.simulation.fleet import (
    FAULT_KINDS,
    LABELS_FILE,
    QUIRK_KINDS,
    FleetScenario,
    parse_fault,
    parse_quirk,
    simulate,
    write_fleet,
)


def fleet_sim(
    out_dir: Path = typer.Option(
        ..., "--out", help="Dataset directory to write, new or empty (<kind>/host=H/part-sim.parquet)."
    ),
    hosts: int = typer.Option(16, "--hosts", min=1, help="Number of hosts (named node01..nodeNN)."),
    gpus: int = typer.Option(8, "--gpus", min=1, help="GPUs per host."),
    minutes: float = typer.Option(10.0, "--minutes", min=0.1, help="Simulated duration in minutes (1 Hz samples)."),
    fault: list[str] = typer.Option(
        [],
        "--fault",
        help=f"KIND@HOST[:onset_s[:magnitude]], repeatable (magnitude scales quiet faults, 0 < m <= 1, 1.0 default). KIND: {', '.join(FAULT_KINDS)}.",
    ),
    quirk: list[str] = typer.Option(
        [],
        "--quirk",
        help=f"Healthy quirk KIND@HOST[:at_s] (fleet_pause[:at_s] is fleet-wide). KIND: {', '.join(QUIRK_KINDS)}.",
    ),
    seed: int = typer.Option(0, "--seed", help="Random seed (same seed, same data)."),
) -> None:
    """Simulate a training fleet's GPU/host metrics with injected faults, for demos, tests and benchmarks."""
    if not math.isfinite(minutes):  # inf passes min=0.1 and was an OverflowError traceback
        raise typer.BadParameter(f"{minutes} is not a number of minutes; e.g. --minutes 10", param_hint="'--minutes'")
    # diagnose reads every host folder it finds: an older simulation's hosts left in --out would be judged
    # with this one's (silent, then unreachable or faulty). No merging: a new or empty directory only.
    if out_dir.is_dir() and any(out_dir.iterdir()):
        raise UsageError(
            f"--out {out_dir}: directory is not empty (an older dataset's hosts would mix with this "
            "one's); pick a new or empty directory"
        )
    sc = FleetScenario(
        hosts=hosts,
        gpus=gpus,
        seconds=int(minutes * 60),
        seed=seed,
        faults=tuple(parse_fault(f) for f in fault),
        quirks=tuple(parse_quirk(q) for q in quirk),
    )
    with err.status(f"simulating {hosts} hosts x {gpus} GPUs x {sc.seconds} s ...", spinner="dots"):
        result = simulate(sc)
        write_fleet(result, out_dir)
    out.print(
        f"wrote {result.gpu_metrics.num_rows:,} gpu_metrics and {result.host_metrics.num_rows:,} host_metrics rows "
        f"to {out_dir}; ground truth in {out_dir / LABELS_FILE}"
        + (f"; faulty: {', '.join(result.labels['faulty_hosts'])}" if result.labels["faulty_hosts"] else "")
    )
    err.print(f"next: trainctl diagnose {out_dir}")
