"""`trainctl launch [OPTIONS] [-- SCRIPT ARGS...]`: start a supervised run (torchrun underneath)."""

from __future__ import annotations

import sys
from pathlib import Path

import typer

from trainctl.cli.console import err, out
from trainctl.errors import InputError
from trainctl.exit_codes import ExitCode


def build_spec(
    *,
    local: bool,
    hosts: str | None,
    hosts_local: int,
    nproc_per_node: int,
    run_dir: Path | None,
    inject: list[str],
    max_restarts: int,
    hang_timeout: float,
    keep_hung: bool,
    script_and_args: list[str],
    spares: str | None = None,
    allow_quarantined: bool = False,
    checkpoint_every: int = 0,
    checkpoint_dir: Path | None = None,
    steps: int | None = None,
    ssh_config: str | None = None,
    remote_run_dir: str | None = None,
    python: str | None = None,
    rank_env: list[str] = (),
    allow_shrink: bool = False,
    fail_slow_ratio: float | None = None,
):
    from trainctl.ops.launch.local import LaunchSpec, default_run_id, simulated_hosts

    if hosts and local:
        raise InputError("--hosts and --local exclude each other: --hosts runs over SSH, --local on this machine")
    if not local and not hosts:
        raise InputError("say where to run: --local (ranks on this machine, --hosts-local N simulated hosts)")
    if hosts_local < 1:
        raise InputError(f"--hosts-local {hosts_local}: must be >= 1")
    if hosts and keep_hung:
        # The supervisor acts on a hang (dump, diagnose, evict/restart); leaving it up is a choice
        # made by not detecting hangs at all.
        raise InputError(
            "--keep-hung applies to --local; with --hosts pass --hang-timeout 0 to leave a hung run up "
            "for inspection (then `trainctl playbook run hung-collective --run RUN`)"
        )
    if allow_shrink and not hosts:
        raise InputError(
            "--allow-shrink applies to --hosts (the supervisor's relaunch after an eviction); "
            "--local runs are not relaunched"
        )
    if fail_slow_ratio is not None and not hosts:
        raise InputError(
            "--fail-slow-ratio applies to --hosts (the supervisor watches the step time); "
            "for a --local run, `trainctl diagnose RUN_DIR` names stragglers"
        )
    if fail_slow_ratio is not None and fail_slow_ratio != 0 and fail_slow_ratio <= 1:
        raise InputError(
            f"--fail-slow-ratio {fail_slow_ratio}: must be > 1 (times the attempt's baseline step time, "
            "e.g. 1.5), or 0 to turn fail-slow detection off"
        )
    script, args = None, list(script_and_args or [])
    if args and not args[0].startswith("-"):
        script, args = args[0], args[1:]  # `-- train.py --lr 1e-3`; leading options go to the reference trainer
    run_id = default_run_id()
    if script is None:
        if steps is not None:
            args += ["--steps", str(steps)]
        if checkpoint_every:
            args += ["--checkpoint-every", str(checkpoint_every)]
            if checkpoint_dir:
                args += ["--checkpoint-dir", str(checkpoint_dir)]
    if hosts:
        import os
        import sys

        from trainctl.inventory import parse_hosts
        from trainctl.ops.launch.supervisor import HostsSpec

        names = tuple(h.name for h in parse_hosts(hosts))
        if checkpoint_every and not checkpoint_dir and len(names) > 1:
            raise InputError(
                "--checkpoint-every with --hosts needs --checkpoint-dir on storage every host shares "
                "(a replacement host must read the evicted host's shards)"
            )
        spare_names = tuple(h.name for h in parse_hosts(spares)) if spares else ()
        local_dir = (run_dir or Path("runs") / run_id).resolve()
        env = dict(e.split("=", 1) for e in rank_env)
        bad = [e for e in rank_env if "=" not in e]
        if bad:
            raise InputError(f"--env {bad[0]!r}: expected NAME=VALUE")
        return HostsSpec(
            run_dir=local_dir,
            remote_run_dir=remote_run_dir or str(local_dir),
            run_id=run_id,
            hosts=names,
            nproc_per_node=nproc_per_node,
            spares=spare_names,
            script=str(Path(script).resolve()) if script else None,
            args=tuple(args),
            inject=tuple(inject),
            max_restarts=max_restarts,
            hang_timeout_s=hang_timeout or None,
            ssh_config=ssh_config,
            python=python or sys.executable,
            env=env,
            allow_quarantined=allow_quarantined,
            ledger_home=os.environ.get("TRAINCTL_HOME") or None,
            allow_shrink=allow_shrink,
            **(
                {}
                if fail_slow_ratio is None
                else {
                    "fail_slow": fail_slow_ratio != 0,
                    "fail_slow_ratio": fail_slow_ratio or HostsSpec.fail_slow_ratio,
                }
            ),
        )
    return LaunchSpec(
        run_dir=run_dir or Path("runs") / run_id,
        run_id=run_id,
        nproc_per_node=nproc_per_node,
        hosts=simulated_hosts(hosts_local),
        script=script,
        args=tuple(args),
        inject=tuple(inject),
        max_restarts=max_restarts,
        hang_timeout_s=hang_timeout or None,
        keep_hung=keep_hung,
    )


def run_spec(spec) -> object:
    """Launch and supervise, progress on stderr; returns the LaunchResult."""
    from trainctl.ops.launch.local import launch_local

    with err.status("starting ...", spinner="dots") as st:
        result = launch_local(
            spec,
            notify=lambda m: err.print(f"[dim]trainctl:[/] {m}", highlight=False, soft_wrap=True),
            status=lambda m: st.update(m),
        )
    return result


def run_hosts(spec) -> None:
    """Multi-host: the supervisor's loop; exit 0 when the run finished, ExitCode.RUN_FAILED when it stopped."""
    from trainctl.ops.launch.local import TRAINER_MODULE, format_root_cause
    from trainctl.ops.launch.run_control import record_launch
    from trainctl.ops.launch.supervisor import supervise_hosts

    # launch.json: what `evict-node --relaunch` and runbooks replay when this supervisor is gone.
    argv = sys.argv[1:]
    record_launch(spec.run_dir, argv[argv.index("launch") + 1 :] if "launch" in argv else argv)
    with err.status("starting ...", spinner="dots") as st:
        res = supervise_hosts(
            spec,
            notify=lambda m: err.print(f"trainctl: {m}", highlight=False, markup=False, soft_wrap=True),
            status=lambda m: st.update(m),
        )
    out.print(str(spec.run_dir), highlight=False)
    if res.ok:
        err.print(
            f"[green]run finished[/] after {res.attempts} attempt(s) in {res.elapsed_s:.1f}s on {', '.join(res.hosts)}"
            + (f"; evicted {', '.join(res.evicted)}" if res.evicted else ""),
            highlight=False,
        )
        return
    if res.root_cause is not None:
        err.print(
            format_root_cause(res.root_cause, spec.script or TRAINER_MODULE),
            highlight=False,
            markup=False,
            soft_wrap=True,
        )
    err.print(
        f"[bold red]run stopped:[/] {res.reason}; decisions in {spec.run_dir}/supervisor.jsonl, "
        f"evidence under {spec.run_dir}/incidents/",
        highlight=False,
        markup=False,
    )
    raise typer.Exit(ExitCode.RUN_FAILED)


def report_result(result, spec) -> None:
    from trainctl.ops.launch.local import TRAINER_MODULE, ActionKind, format_root_cause

    if result.status is ActionKind.SUCCEEDED:
        err.print(f"[green]run finished[/] in {result.elapsed_s:.1f}s: {result.run_dir}", highlight=False)
        out.print(str(result.run_dir), highlight=False)
        return
    if result.status is ActionKind.FAILED:
        if result.root_cause is not None:
            err.print(
                format_root_cause(result.root_cause, spec.script or TRAINER_MODULE),
                highlight=False,
                markup=False,
                soft_wrap=True,
            )
        err.print(
            f"[bold red]run failed:[/] {result.reason}; logs under {result.run_dir}/logs; "
            f"next: trainctl diagnose {result.run_dir}",
            highlight=False,
        )
        out.print(str(result.run_dir), highlight=False)
        raise typer.Exit(ExitCode.RUN_FAILED)
    err.print(
        f"[bold red]run hung:[/] {result.reason}; dumps in {result.run_dir}/fr and {result.run_dir}/stacks; "
        f"next: trainctl diagnose {result.run_dir}",
        highlight=False,
    )
    out.print(str(result.run_dir), highlight=False)
    raise typer.Exit(ExitCode.RUN_HUNG)


def launch(
    script_and_args: list[str] | None = typer.Argument(
        None,
        metavar="[-- SCRIPT ARGS...]",
        help="An unmodified torch script and its args (after --). None: the reference trainer; leading --options go to it.",
    ),
    local: bool = typer.Option(False, "--local", help="Run the ranks on this machine."),
    hosts: str | None = typer.Option(
        None,
        "--hosts",
        help="Hostfile, comma list or Slurm nodelist: torchrun on each over SSH, supervised (evict + relaunch on hardware faults).",
    ),
    hosts_local: int = typer.Option(
        1, "--hosts-local", help="With --local: simulate N hosts (node01..), one torchrun agent each."
    ),
    nproc_per_node: int = typer.Option(2, "--nproc-per-node", help="Ranks per host."),
    run_dir: Path | None = typer.Option(None, "--run-dir", help="Run directory (default ./runs/<run_id>)."),
    inject: list[str] = typer.Option(
        [],
        "--inject",
        help="Drill, repeatable: straggler:rank=2,factor=1.5 | hang:rank=3,step=20 | crash:rank=1,step=30 | nan:rank=0,step=10 | xid:host=H,code=79,step=S",
    ),
    max_restarts: int = typer.Option(
        0,
        "--max-restarts",
        help="--local: torchrun restarts of the worker group; --hosts: in-place restarts the supervisor may spend on software faults.",
    ),
    hang_timeout: float = typer.Option(
        300.0, "--hang-timeout", help="Seconds without heartbeat progress before the run counts as hung (0 = never)."
    ),
    keep_hung: bool = typer.Option(
        False,
        "--keep-hung",
        help="--local: after dumping a hung run, keep it up for inspection (with --hosts: --hang-timeout 0).",
    ),
    spares: str | None = typer.Option(
        None, "--spares", help="With --hosts: standby hosts that replace evicted ones (same syntax as --hosts)."
    ),
    allow_quarantined: bool = typer.Option(
        False, "--allow-quarantined", help="Launch even on hosts in the quarantine ledger."
    ),
    checkpoint_every: int = typer.Option(
        0,
        "--checkpoint-every",
        help="Reference trainer: async checkpoint every N steps (resume picks the newest complete one).",
    ),
    checkpoint_dir: Path | None = typer.Option(
        None, "--checkpoint-dir", help="Checkpoint directory; with --hosts it must be on storage every host shares."
    ),
    steps: int | None = typer.Option(None, "--steps", help="Reference trainer: total steps."),
    ssh_config: str | None = typer.Option(
        None, "--ssh-config", help="With --hosts: OpenSSH client config (default ~/.ssh/config)."
    ),
    remote_run_dir: str | None = typer.Option(
        None, "--remote-run-dir", help="With --hosts: the run dir on the hosts (default: the absolute --run-dir)."
    ),
    python: str | None = typer.Option(
        None, "--python", help="With --hosts: the Python on the hosts (default: this one, e.g. a shared venv)."
    ),
    rank_env: list[str] = typer.Option(
        [], "--env", help="With --hosts: NAME=VALUE for every rank, repeatable (e.g. GLOO_SOCKET_IFNAME=eth0)."
    ),
    fail_slow_ratio: float | None = typer.Option(
        None,
        "--fail-slow-ratio",
        help="With --hosts: the run is fail-slow when its recent median step time exceeds R x the attempt's baseline on 3 consecutive polls (default 1.5); then it is collected and diagnosed live. 0 turns fail-slow detection off.",
    ),
    allow_shrink: bool = typer.Option(
        False,
        "--allow-shrink",
        help="With --hosts and a SCRIPT: after an eviction with no spare left, relaunch on fewer hosts (smaller dp); say so only if SCRIPT can resume at a smaller world size. The reference trainer always may.",
    ),
) -> None:
    """Start a supervised run: torchrun agents, heartbeats, hang dumps, first-failure report."""
    spec = build_spec(
        local=local,
        hosts=hosts,
        hosts_local=hosts_local,
        nproc_per_node=nproc_per_node,
        run_dir=run_dir,
        inject=inject,
        max_restarts=max_restarts,
        hang_timeout=hang_timeout,
        keep_hung=keep_hung,
        script_and_args=script_and_args or [],
        spares=spares,
        allow_quarantined=allow_quarantined,
        checkpoint_every=checkpoint_every,
        checkpoint_dir=checkpoint_dir,
        steps=steps,
        ssh_config=ssh_config,
        remote_run_dir=remote_run_dir,
        python=python,
        rank_env=rank_env,
        allow_shrink=allow_shrink,
        fail_slow_ratio=fail_slow_ratio,
    )
    from trainctl.ops.launch.supervisor import HostsSpec

    if isinstance(spec, HostsSpec):
        run_hosts(spec)
        return
    report_result(run_spec(spec), spec)
