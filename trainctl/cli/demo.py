"""`trainctl demo`: the embedded default job, end to end.

A local run of 4 ranks as 2 simulated hosts (torchrun agents) of the reference trainer with an
injected straggler (rank 2 takes 1.5x its forward time), then `diagnose` on the run dir.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import typer

from trainctl.cli.console import err, out, styled
from trainctl.cli.render import findings_table
from trainctl.exit_codes import ExitCode

DEMO_MIN_STEPS = 20

DEMO_HOSTS = 2
DEMO_RANKS_PER_HOST = 2


def demo(
    run_dir: Path | None = typer.Option(None, "--run-dir", help="Default ./runs/demo-<timestamp>."),
    # min: the straggler analysis judges no timeline under analyzers.stragglers.MIN_STEPS steps (the
    # demo's point is its finding; importing the analyzer here would slow every command's start).
    steps: int = typer.Option(
        80, "--steps", min=DEMO_MIN_STEPS, help="Training steps of the reference trainer (at least 20)."
    ),
    json_out: bool = typer.Option(False, "--json", help="Findings JSON on stdout."),
) -> None:
    """Launch 2 simulated hosts x 2 ranks with a straggler on rank 2, then diagnose and print the report."""
    from trainctl.cli.launch import build_spec, run_spec
    from trainctl.ops.diagnose.diagnosis import diagnose_path
    from trainctl.ops.launch.local import ActionKind, device_count, format_root_cause
    from trainctl.ops.launch.placement import backend_that_fits, visible_gpus

    # On a machine with 1-3 GPUs the 4 ranks run on CPU (gloo): the demo shows diagnosis, and
    # NCCL refuses two ranks on one GPU. With 4 or more they run on their own GPUs over NCCL.
    gpus = visible_gpus(os.environ, device_count())
    backend = backend_that_fits(DEMO_HOSTS * DEMO_RANKS_PER_HOST, gpus)
    run_dir = run_dir or Path("runs") / time.strftime("demo-%Y%m%d-%H%M%S")
    spec = build_spec(
        local=True,
        hosts=None,
        hosts_local=DEMO_HOSTS,
        nproc_per_node=DEMO_RANKS_PER_HOST,
        backend=backend,
        run_dir=run_dir,
        inject=["straggler:rank=2,factor=1.5"],
        max_restarts=0,
        hang_timeout=120.0,
        keep_hung=False,
        script_and_args=["--steps", str(steps)],
    )
    err.print(
        styled(
            "trainctl demo",
            "bold",
            f": 2 hosts x 2 ranks, reference trainer, --inject straggler:rank=2,factor=1.5 -> {run_dir}"
            + (
                f" (ranks on CPU with gloo: this machine shows {len(gpus)} GPU(s), the demo needs 4)" if backend else ""
            ),
        )
    )
    result = run_spec(spec)
    if result.status is not ActionKind.SUCCEEDED:
        if result.root_cause is not None:
            err.print(
                format_root_cause(result.root_cause, "trainctl.runtime.trainer"),
                markup=False,
                highlight=False,
                soft_wrap=True,
            )
        err.print(styled("demo run did not finish:", "bold red", f" {result.reason}; see {result.run_dir}/logs"))
        raise typer.Exit(ExitCode.RUN_FAILED)
    err.print(f"run finished in {result.elapsed_s:.1f}s; diagnosing {result.run_dir}")
    report = diagnose_path(result.run_dir)
    if json_out:
        print(report.to_json())
    else:
        out.print(findings_table(report))
