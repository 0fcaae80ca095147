"""`trainctl launch [OPTIONS] [-- SCRIPT ARGS...]`: start a supervised run (torchrun underneath)."""

from __future__ import annotations

import inspect
import os
import typing
from collections.abc import Callable, Sequence
from dataclasses import fields, replace
from pathlib import Path
from typing import Any

import typer
from rich.text import Text

from trainctl.cli.console import err, out, styled
from trainctl.errors import TrainctlError, UsageError
from trainctl.exit_codes import ExitCode
from trainctl.ops.launch.request import TRAINER_MODULE, LaunchRequest, OptionDecl
from trainctl.rundir import RUN_INFO_FILE, read_run_info


def _with_run_dir(request: LaunchRequest, run_id: str) -> LaunchRequest:
    """The run dir decided: --run-dir, else ./runs/<run_id>; absolute for --hosts (it is the default
    path on every host and the key of the run's records)."""
    run_dir = request.run_dir or Path("runs") / run_id
    _refuse_a_finished_run(run_dir)
    return replace(request, run_dir=run_dir.resolve() if request.hosts else run_dir)


def _refuse_a_finished_run(run_dir: Path) -> None:
    """A run dir that holds another run's run.json: launching into it overwrote that run's run.json and timeline
    and left its metrics and logs to be diagnosed as this run's. (A relaunch's new run dir holds only launch.json.)"""
    if not (run_dir / RUN_INFO_FILE).is_file():
        return
    try:
        info = read_run_info(run_dir)
        which = f"run {info.run_id}" if info else "a run"
    except TrainctlError:
        which = "a run"
    raise UsageError(
        f"--run-dir {run_dir}: already holds {which} ({run_dir / RUN_INFO_FILE}); its timeline, metrics and logs "
        "would mix with this run's: pick a new directory, or leave --run-dir out (./runs/<run_id>)"
    )


def build_spec(**options: Any):
    """A launcher's spec from launch options given as keyword arguments (the CLI's parameter names;
    the rest take their defaults): validated, with the run dir decided. HostsSpec for --hosts,
    LaunchSpec for --local."""
    from trainctl.ops.launch.local import LaunchSpec, default_run_id
    from trainctl.ops.launch.supervisor import HostsSpec

    defaults = {f.name: f.default for f in fields(LaunchRequest)}
    request = LaunchRequest.from_cli({**defaults, **options}, cwd=os.getcwd()).validate()
    run_id = default_run_id()
    request = _with_run_dir(request, run_id)
    if request.hosts:
        return HostsSpec.from_request(request, run_id)
    return LaunchSpec.from_request(request, run_id)


def run_spec(spec) -> object:
    """Launch and supervise, progress on stderr; returns the LaunchResult."""
    from trainctl.ops.launch.local import launch_local

    with err.status("starting ...", spinner="dots") as st:
        result = launch_local(
            spec,
            notify=lambda m: err.print(styled("trainctl:", "dim", f" {m}"), highlight=False, soft_wrap=True),
            status=lambda m: st.update(Text(m)),  # data, never markup
        )
    return result


def run_hosts(spec, request: LaunchRequest) -> None:
    """Multi-host: the supervisor's loop; exit 0 when the run finished, RUN_FAILED when it stopped."""
    from trainctl.ops.launch.local import format_root_cause
    from trainctl.ops.launch.run_control import record_launch
    from trainctl.ops.launch.supervisor import supervise_hosts

    # launch.json: the request `evict-node --relaunch` and playbooks replay when this supervisor is gone.
    record_launch(spec.run_dir, request)
    with err.status("starting ...", spinner="dots") as st:
        res = supervise_hosts(
            spec,
            notify=lambda m: err.print(f"trainctl: {m}", highlight=False, markup=False, soft_wrap=True),
            status=lambda m: st.update(Text(m)),  # data, never markup
        )
    out.print(str(spec.run_dir), highlight=False)
    if res.ok:
        err.print(
            styled(
                "run finished",
                "green",
                f" after {res.attempts} attempt(s) in {res.elapsed_s:.1f}s on {', '.join(res.hosts)}"
                + (f"; evicted {', '.join(res.evicted)}" if res.evicted else ""),
            ),
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
        styled(
            "run stopped:",
            "bold red",
            f" {res.reason}; decisions in {spec.run_dir}/supervisor.jsonl, evidence under {spec.run_dir}/incidents/",
        ),
        highlight=False,
    )
    raise typer.Exit(ExitCode.RUN_FAILED)


def report_result(result, spec) -> None:
    from trainctl.ops.launch.local import ActionKind, format_root_cause

    if result.status is ActionKind.SUCCEEDED:
        err.print(styled("run finished", "green", f" in {result.elapsed_s:.1f}s: {result.run_dir}"), highlight=False)
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
            styled(
                "run failed:",
                "bold red",
                f" {result.reason}; logs under {result.run_dir}/logs; next: trainctl diagnose {result.run_dir}",
            ),
            highlight=False,
        )
        out.print(str(result.run_dir), highlight=False)
        raise typer.Exit(ExitCode.RUN_FAILED)
    err.print(
        styled(
            "run hung:",
            "bold red",
            f" {result.reason}; dumps in {result.run_dir}/fr and {result.run_dir}/stacks; "
            f"next: trainctl diagnose {result.run_dir}",
        ),
        highlight=False,
    )
    out.print(str(result.run_dir), highlight=False)
    raise typer.Exit(ExitCode.RUN_HUNG)


def _launch(**params: Any) -> None:
    """Start a supervised run: torchrun agents, heartbeats, hang dumps, first-failure report."""
    from trainctl.ops.launch.local import LaunchSpec, default_run_id
    from trainctl.ops.launch.supervisor import HostsSpec

    request = LaunchRequest.from_cli(params, cwd=os.getcwd()).validate()
    run_id = default_run_id()
    request = _with_run_dir(request, run_id)
    if request.hosts:
        run_hosts(HostsSpec.from_request(request, run_id), request)
        return
    spec = LaunchSpec.from_request(request, run_id)
    report_result(run_spec(spec), spec)


def _cli_type(hint: Any) -> Any:
    """The field's type as Typer takes it: tuple[str, ...] -> list[str] (Typer collects lists)."""
    args = typing.get_args(hint)
    if typing.get_origin(hint) is tuple:
        return list[args[0]]
    return hint


def _typer_command(body: Callable[..., None]) -> Callable[..., None]:
    """`body` with a signature of Typer options generated from LaunchRequest's declarations: the
    CLI declares no option of its own, so one added to the request is on the command line too."""
    hints = typing.get_type_hints(LaunchRequest)
    params = []
    for f in fields(LaunchRequest):
        decl: OptionDecl = f.metadata["cli"]
        default = list(f.default) if isinstance(f.default, tuple) else f.default
        annotation = _cli_type(hints[f.name])
        if decl.flag is None:
            info = typer.Argument(None, metavar=decl.metavar, help=decl.help)
            annotation = annotation | None
        else:
            info = typer.Option(default, decl.flag, help=decl.help, metavar=decl.metavar)
        params.append(inspect.Parameter(f.name, inspect.Parameter.KEYWORD_ONLY, default=info, annotation=annotation))

    def command(**kwargs: Any) -> None:
        body(**kwargs)

    # Typer reads the signature; no functools.wraps (inspect would unwrap to body's **params).
    command.__name__, command.__doc__ = body.__name__.lstrip("_"), body.__doc__
    command.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    return command


launch = _typer_command(_launch)


def request_from_argv(argv: Sequence[str], *, cwd: str | Path | None = None) -> LaunchRequest:
    """`trainctl launch ARGV` parsed by the launch command itself, as a LaunchRequest (not validated):
    what the CLI records for a run, for callers that hold a command line (tests, scripts)."""
    app = typer.Typer(add_completion=False)
    app.command()(launch)
    ctx = typer.main.get_command(app).make_context("launch", list(argv), resilient_parsing=False)
    return LaunchRequest.from_cli(ctx.params, cwd=cwd or os.getcwd())
