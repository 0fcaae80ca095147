"""`trainctl launch [OPTIONS] [-- SCRIPT ARGS...]`: start a supervised run (torchrun underneath)."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from trainctl.cli.console import err, out
from trainctl.errors import InputError, LaunchError

# Exit codes of a launched run that did not succeed: the run's failure is not a trainctl error
# (exit 1 is kept for those), so automation can tell "bad flags" from "the job crashed/hung".
EXIT_RUN_FAILED = 4
EXIT_RUN_HUNG = 5


def build_spec(
    *, local: bool, hosts: Optional[str], hosts_local: int, nproc_per_node: int, run_dir: Optional[Path],
    inject: List[str], max_restarts: int, hang_timeout: float, keep_hung: bool, script_and_args: List[str],
):
    from trainctl.ops.launch import LaunchSpec, default_run_id, simulated_hosts

    if hosts:
        raise InputError("--hosts (SSH multi-host launch) is not available in this build yet; use --local --hosts-local N to simulate N hosts on this machine")
    if not local:
        raise InputError("say where to run: --local (ranks on this machine, --hosts-local N simulated hosts)")
    if hosts_local < 1:
        raise InputError(f"--hosts-local {hosts_local}: must be >= 1")
    script, args = None, list(script_and_args or [])
    if args and not args[0].startswith("-"):
        script, args = args[0], args[1:]  # `-- train.py --lr 1e-3`; leading options go to the reference trainer
    run_id = default_run_id()
    return LaunchSpec(
        run_dir=run_dir or Path("runs") / run_id, run_id=run_id, nproc_per_node=nproc_per_node,
        hosts=simulated_hosts(hosts_local), script=script, args=tuple(args), inject=tuple(inject),
        max_restarts=max_restarts, hang_timeout_s=hang_timeout or None, keep_hung=keep_hung,
    )


def run_spec(spec) -> "object":
    """Launch and supervise, progress on stderr; returns the LaunchResult."""
    from trainctl.ops.launch import TRAINER_MODULE, launch_local

    with err.status("starting ...", spinner="dots") as st:
        result = launch_local(spec, notify=lambda m: err.print(f"[dim]trainctl:[/] {m}", highlight=False, soft_wrap=True),
                              status=lambda m: st.update(m))
    return result


def report_result(result, spec) -> None:
    from trainctl.ops.launch import TRAINER_MODULE, ActionKind, format_root_cause

    if result.status is ActionKind.SUCCEEDED:
        err.print(f"[green]run finished[/] in {result.elapsed_s:.1f}s: {result.run_dir}", highlight=False)
        out.print(str(result.run_dir), highlight=False)
        return
    if result.status is ActionKind.FAILED:
        if result.root_cause is not None:
            err.print(format_root_cause(result.root_cause, spec.script or TRAINER_MODULE), highlight=False, markup=False, soft_wrap=True)
        err.print(f"[bold red]run failed:[/] {result.reason}; logs under {result.run_dir}/logs; "
                  f"next: trainctl diagnose {result.run_dir}", highlight=False)
        out.print(str(result.run_dir), highlight=False)
        raise typer.Exit(EXIT_RUN_FAILED)
    err.print(f"[bold red]run hung:[/] {result.reason}; dumps in {result.run_dir}/fr and {result.run_dir}/stacks; "
              f"next: trainctl diagnose {result.run_dir}", highlight=False)
    out.print(str(result.run_dir), highlight=False)
    raise typer.Exit(EXIT_RUN_HUNG)


def launch(
    script_and_args: Optional[List[str]] = typer.Argument(None, metavar="[-- SCRIPT ARGS...]",
        help="An unmodified torch script and its args (after --). None: the reference trainer; leading --options go to it."),
    local: bool = typer.Option(False, "--local", help="Run the ranks on this machine."),
    hosts: Optional[str] = typer.Option(None, "--hosts", help="Hostfile, comma list or Slurm nodelist (SSH launch; not in this build)."),
    hosts_local: int = typer.Option(1, "--hosts-local", help="With --local: simulate N hosts (node01..), one torchrun agent each."),
    nproc_per_node: int = typer.Option(2, "--nproc-per-node", help="Ranks per host."),
    run_dir: Optional[Path] = typer.Option(None, "--run-dir", help="Run directory (default ./runs/<run_id>)."),
    inject: List[str] = typer.Option([], "--inject", help="Drill, repeatable: straggler:rank=2,factor=1.5 | hang:rank=3,step=20 | crash:rank=1,step=30 | nan:rank=0,step=10 | xid:host=H,code=79,step=S"),
    max_restarts: int = typer.Option(0, "--max-restarts", help="torchrun restarts of the worker group."),
    hang_timeout: float = typer.Option(300.0, "--hang-timeout", help="Seconds without heartbeat progress before the run counts as hung (0 = never)."),
    keep_hung: bool = typer.Option(False, "--keep-hung", help="After dumping a hung run, keep it up for inspection."),
) -> None:
    """Start a supervised run: torchrun agents, heartbeats, hang dumps, first-failure report."""
    spec = build_spec(local=local, hosts=hosts, hosts_local=hosts_local, nproc_per_node=nproc_per_node, run_dir=run_dir,
                      inject=inject, max_restarts=max_restarts, hang_timeout=hang_timeout, keep_hung=keep_hung,
                      script_and_args=script_and_args or [])
    report_result(run_spec(spec), spec)
