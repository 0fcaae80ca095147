"""`trainctl evict-node HOST ...` and `trainctl nodes list|restore|audit|rebuild`: the quarantine ledger."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import typer
from rich.table import Table

from trainctl.cli.console import err, out
from trainctl.errors import InputError, TrainctlError
from trainctl.exit_codes import ExitCode
from trainctl.findings import Finding
from trainctl.ops.evict.quarantine import Ledger
from trainctl.ops.evict.relaunch_plan import PlanKind
from trainctl.ops.evict.schedulers import SchedulerKind, drain_commands, format_argv, resume_commands, run_commands
from trainctl.rundir import RunInfo, is_run_dir, read_run_info

nodes_app = typer.Typer(help="The quarantine ledger: list, restore, audit trail.", no_args_is_help=True)


def _emit_json(doc: Any) -> None:
    # print(), not rich: `--json | jq` must get exactly the JSON text.
    print(json.dumps(doc, indent=2))


def _load_finding(spec: str | None) -> dict[str, Any] | None:
    if spec is None:
        return None
    where = "--finding"
    text = spec
    if spec.startswith("@"):
        path = Path(spec[1:])
        where = str(path)
        try:
            text = path.read_text()
        except OSError as exc:
            raise InputError(
                f"{path}: cannot read the finding file ({exc.strerror}); pass --finding @FILE or inline JSON"
            ) from exc
    try:
        doc = json.loads(text)
    except ValueError as exc:
        raise InputError(f"{where}: not JSON ({exc}); pass one finding object from `trainctl diagnose --json`") from exc
    if isinstance(doc, dict) and "findings" in doc and isinstance(doc["findings"], list) and len(doc["findings"]) == 1:
        doc = doc["findings"][0]  # a whole report with one finding is fine too
    try:
        return Finding.from_dict(doc).to_dict()
    except (KeyError, ValueError, TypeError, AttributeError) as exc:
        raise InputError(
            f"{where}: not a trainctl finding ({exc!r}); it needs kind, severity and summary as in `trainctl diagnose --json`"
        ) from exc


def _resolve_run(run: str | None) -> tuple[str | None, RunInfo | None]:
    """--run is a run dir (run.json gives the id and hosts) or a bare run id recorded as given."""
    if run is None:
        return None, None
    if is_run_dir(run):
        info = read_run_info(run)
        return (info.run_id if info else run), info
    return run, None


def _fmt_ts(ts_ns: int) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%SZ", time.gmtime(ts_ns / 1e9))


def evict_node(
    host: str = typer.Argument(..., help="The host to quarantine, as the scheduler names it."),
    reason: str = typer.Option(..., "--reason", help="Why (audit trail; also the Slurm drain reason)."),
    run: str | None = typer.Option(None, "--run", help="Run dir (or run id) this eviction belongs to."),
    finding: str | None = typer.Option(None, "--finding", help="The finding as JSON, or @FILE (from diagnose --json)."),
    relaunch: bool = typer.Option(
        False,
        "--relaunch",
        help="Stop the run and relaunch it without HOST from its newest checkpoint (needs --run RUN_DIR of a `launch --hosts` run).",
    ),
    spares: str | None = typer.Option(None, "--spares", help="Comma list of standby hosts for --relaunch."),
    allow_shrink: bool = typer.Option(
        False,
        "--allow-shrink",
        help="With --relaunch and no spare left: relaunch on fewer hosts (smaller dp) even for a user SCRIPT; say so only if it can resume at a smaller world size. The reference trainer always may.",
    ),
    scheduler: SchedulerKind = typer.Option(
        SchedulerKind.NONE, "--scheduler", help="Also drain HOST in the scheduler."
    ),
    dry_run: bool = typer.Option(
        False, "--dry-run", help="Show what would change and the exact commands; change nothing."
    ),
    json_out: bool = typer.Option(False, "--json", help="Machine-readable result on stdout."),
    yes: bool = typer.Option(False, "--yes", help="With --relaunch: stop the live run without asking."),
    wait_timeout: float = typer.Option(
        1800.0,
        "--wait-timeout",
        help="With --relaunch: seconds to wait for the relaunched run to finish (it keeps running after).",
    ),
) -> None:
    """Quarantine HOST in the ledger (with an audit record), drain it in the scheduler, relaunch the run without it."""
    finding_doc = _load_finding(finding)
    run_id, info = _resolve_run(run)
    if relaunch and info is None:
        raise InputError(
            f"--relaunch needs --run RUN_DIR holding run.json (got {run!r}); it gives the hosts and layout"
        )
    ledger = Ledger()
    commands = drain_commands(scheduler, host, reason)
    plan = None
    if relaunch and info is not None and run is not None:
        from trainctl.ops.launch import run_control

        # The same plan the relaunch executes (run_control.relaunch_without), so --dry-run tells the truth.
        plan, _ = run_control.relaunch_plan_for(
            run,
            [host],
            spares=_split(spares),
            quarantined=sorted(ledger.quarantined_hosts()),
            allow_shrink=allow_shrink,
        )
    doc: dict[str, Any] = {
        "host": host,
        "reason": reason,
        "run": run_id,
        "dry_run": dry_run,
        "ledger": str(ledger.state_path),
        "scheduler": scheduler.value,
        "commands": [list(c) for c in commands],
        "finding": finding_doc,
        "relaunch": plan.to_dict() if plan else None,
    }
    if dry_run:
        if json_out:
            _emit_json(doc)
        else:
            out.print(f"dry run: would quarantine {host} in {ledger.state_path} (reason: {reason})", highlight=False)
            for c in commands:
                out.print(f"dry run: would run: {format_argv(c)}", highlight=False, markup=False)
            if plan:
                _print_plan(plan)
        return
    if relaunch and run is not None:
        # before the ledger changes: refuse the whole thing, not half of it
        if plan is not None and plan.kind is PlanKind.STOP:
            raise InputError(f"cannot relaunch {run} without {host}: {plan.reason} (nothing was changed)")
        _check_relaunch(run, host, yes=yes)
    entry = ledger.evict(
        host,
        reason=reason,
        run=run_id,
        finding=finding_doc,
        extra={"scheduler": scheduler.value, "commands": [list(c) for c in commands]},
    )
    err.print(f"quarantined {host} in {ledger.state_path} (eviction #{entry.evictions})", highlight=False)
    try:
        for c in commands:
            err.print(f"running: {format_argv(c)}", highlight=False, markup=False)
        run_commands(commands)
    except TrainctlError as exc:
        # The ledger keeps the host (trainctl will not launch on it); the drain can be retried.
        raise type(exc)(
            f"{host} is quarantined in the ledger, but the {scheduler.value} drain failed: {exc}; "
            f"fix it and rerun `trainctl evict-node {host} --reason ... --scheduler {scheduler.value}`"
        ) from exc
    doc["entry"] = entry.to_dict()
    failed = False
    if relaunch and run is not None:
        doc["relaunch"] = _execute_relaunch(
            run, host, spares, ledger, yes=yes, wait_timeout_s=wait_timeout, allow_shrink=allow_shrink
        )
        failed = not doc["relaunch"].get("ok")
    if json_out:
        _emit_json(doc)
    else:
        out.print(f"evicted {host}: {reason}" + (f" (run {run_id})" if run_id else ""), highlight=False)
        if doc.get("relaunch"):
            r = doc["relaunch"]
            out.print(f"relaunch plan: {r['plan']['kind']}: {r['plan']['reason']}", highlight=False)
            out.print(
                f"relaunched on {','.join(r['hosts'])} as {r['run_dir']}: "
                + (f"exit {r['exit_code']}" if r["finished"] else f"still running after {wait_timeout:.0f}s")
                + f", steps {r['first_step']}..{r['last_step']}",
                highlight=False,
            )
    if failed:
        raise typer.Exit(ExitCode.RUN_FAILED)


def _split(spares: str | None) -> list[str] | None:
    return [s.strip() for s in spares.split(",") if s.strip()] if spares else None


def _execute_relaunch(
    run: str,
    host: str,
    spares: str | None,
    ledger: Ledger,
    *,
    yes: bool,
    wait_timeout_s: float,
    allow_shrink: bool = False,
) -> dict[str, Any]:
    """Stop the run, start it again without HOST (trainctl.ops.launch.run_control), wait for it."""
    from trainctl.ops.launch import run_control
    from trainctl.ops.playbook.engine import trainctl_argv

    plan, stopped, handle = run_control.relaunch_without(
        run,
        [host],
        spares=_split(spares),
        quarantined=sorted(ledger.quarantined_hosts()),
        trainctl=trainctl_argv(),
        allow_shrink=allow_shrink,
    )
    err.print(
        f"stopped {run} ({stopped['supervisor']}); relaunched on {','.join(plan.hosts)} as {handle.run_dir} "
        f"(pid {handle.proc.pid}, log {handle.log_path}); waiting up to {wait_timeout_s:.0f}s",
        highlight=False,
    )
    res = run_control.wait_relaunch(handle, wait_timeout_s)
    return {**res, "plan": plan.to_dict(), "stopped": stopped}


def _check_relaunch(run: str, host: str, *, yes: bool) -> None:
    import sys

    from trainctl.ops.launch import run_control

    run_control.launch_options(run)  # the run's launch options must be known (InputError says how)
    if not yes:
        if not sys.stdin.isatty():
            raise InputError(
                f"--relaunch stops run {run} and starts it again without {host}; pass --yes to allow it "
                f"(nothing was changed)"
            )
        if not typer.confirm(f"stop {run} and relaunch it without {host}?", default=False):
            raise InputError("relaunch declined; nothing changed (neither the ledger nor the run)")


def _print_plan(plan) -> None:
    out.print(f"relaunch plan: {plan.kind.value}: {plan.reason}", highlight=False)
    if plan.hosts:
        out.print(f"relaunch hosts: {','.join(plan.hosts)} (world size {plan.world_size})", highlight=False)


@nodes_app.command("list")
def list_nodes(json_out: bool = typer.Option(False, "--json", help="The ledger's entries as JSON.")) -> None:
    """Quarantined hosts, when and why."""
    ledger = Ledger()
    entries = ledger.entries()
    if json_out:
        _emit_json({"ledger": str(ledger.state_path), "hosts": [entries[h].to_dict() for h in sorted(entries)]})
        return
    if not entries:
        out.print(f"no quarantined hosts ({ledger.state_path})", highlight=False)
        return
    table = Table(title=f"quarantined hosts ({ledger.state_path})")
    for col in ("host", "since", "reason", "run", "by", "evictions"):
        table.add_column(col, overflow="fold")
    for h in sorted(entries):
        e = entries[h]
        table.add_row(h, _fmt_ts(e.since_ts_ns), e.reason, e.run or "", e.by, str(e.evictions))
    out.print(table)


@nodes_app.command("restore")
def restore_node(
    host: str = typer.Argument(..., help="The quarantined host to return to service."),
    reason: str = typer.Option("restored by operator", "--reason", help="Why (audit trail)."),
    scheduler: SchedulerKind = typer.Option(
        SchedulerKind.NONE, "--scheduler", help="Also resume HOST in the scheduler."
    ),
    dry_run: bool = typer.Option(False, "--dry-run", help="Show the exact commands; change nothing."),
    json_out: bool = typer.Option(False, "--json", help="Machine-readable result on stdout."),
) -> None:
    """Take HOST out of quarantine (scheduler resume first, so a failed resume keeps it quarantined)."""
    ledger = Ledger()
    entries = ledger.entries()
    if host not in entries:
        known = ", ".join(sorted(entries)) or "none"
        raise InputError(f"host {host!r} is not quarantined (quarantined: {known}); see `trainctl nodes list`")
    commands = resume_commands(scheduler, host)
    doc: dict[str, Any] = {
        "host": host,
        "dry_run": dry_run,
        "scheduler": scheduler.value,
        "commands": [list(c) for c in commands],
        "ledger": str(ledger.state_path),
    }
    if dry_run:
        if json_out:
            _emit_json(doc)
        else:
            out.print(f"dry run: would restore {host} in {ledger.state_path}", highlight=False)
            for c in commands:
                out.print(f"dry run: would run: {format_argv(c)}", highlight=False, markup=False)
        return
    run_commands(commands)
    old = ledger.restore(host, reason=reason, extra={"scheduler": scheduler.value})
    doc["entry"] = old.to_dict()
    if json_out:
        _emit_json(doc)
    else:
        out.print(f"restored {host} (was quarantined since {_fmt_ts(old.since_ts_ns)}: {old.reason})", highlight=False)


@nodes_app.command("audit")
def audit(
    host: str | None = typer.Option(None, "--host", help="Only this host's records."),
    json_out: bool = typer.Option(False, "--json", help="The records as a JSON list."),
) -> None:
    """The append-only audit trail: every eviction and restore, oldest first."""
    records = [r for r in Ledger().audit() if host is None or r.host == host]
    if json_out:
        _emit_json([r.to_dict() for r in records])
        return
    table = Table(title="trainctl quarantine audit trail")
    for col in ("time", "action", "host", "reason", "run", "by", "pid"):
        table.add_column(col, overflow="fold")
    for r in records:
        table.add_row(_fmt_ts(r.ts_ns), r.action.value, r.host, r.reason, r.run or "", r.by, str(r.pid))
    out.print(table)


@nodes_app.command("rebuild")
def rebuild() -> None:
    """Rebuild quarantine.json from the audit trail (the fix when it is corrupt)."""
    ledger = Ledger()
    entries = ledger.rebuild_from_audit()
    out.print(
        f"rebuilt {ledger.state_path} from {ledger.audit_path}: {len(entries)} quarantined host(s)", highlight=False
    )
