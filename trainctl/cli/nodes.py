"""`trainctl evict-node HOST ...` and `trainctl nodes list|restore|audit|rebuild`: the quarantine ledger."""

from __future__ import annotations

import json
import sys
import time
from typing import Any

import typer
from rich.table import Table

from trainctl.cli.console import err, out
from trainctl.errors import InputError
from trainctl.exit_codes import ExitCode
from trainctl.inventory import HostAddress, host_key
from trainctl.ops.evict.launched_run import LiveRelaunch, run_members
from trainctl.ops.evict.operation import EvictRequest, load_finding
from trainctl.ops.evict.operation import evict_node as run_eviction
from trainctl.ops.evict.quarantine import Ledger
from trainctl.ops.evict.relaunch_plan import RelaunchPlan
from trainctl.ops.evict.schedulers import SchedulerKind, format_argv, resume_commands, run_commands
from trainctl.ops.evict.targets import check_host_name, expand_targets

nodes_app = typer.Typer(help="The quarantine ledger: list, restore, audit trail.", no_args_is_help=True)


def _emit_json(doc: Any) -> None:
    # print(), not rich: `--json | jq` must get exactly the JSON text.
    print(json.dumps(doc, indent=2))


def _fmt_ts(ts_ns: int) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%SZ", time.gmtime(ts_ns / 1e9))


def _split(spares: str | None) -> tuple[str, ...] | None:
    return tuple(s.strip() for s in spares.split(",") if s.strip()) if spares else None


def evict_node(
    host: str = typer.Argument(
        ...,
        help="The host to quarantine, as the scheduler names it (RFC 1123 name or IP; a run's node02:2222 is the "
        "host node02); with --run RUN_DIR also a Slurm hostlist of the run's hosts, e.g. node[02-03]. ALL, "
        "selectors, options and globs are refused.",
    ),
    reason: str = typer.Option(..., "--reason", help="Why (audit trail; also the Slurm drain reason)."),
    run: str | None = typer.Option(None, "--run", help="Run dir (or run id) this eviction belongs to."),
    finding: str | None = typer.Option(
        None,
        "--finding",
        help="The finding about HOST as JSON, or @FILE: one finding of `diagnose --json`, or its whole report "
        "(the finding naming HOST is taken). A finding that does not name HOST is refused.",
    ),
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
        min=0.0,
        help="With --relaunch: seconds to wait for the relaunched run to finish (it keeps running after).",
    ),
) -> None:
    """Quarantine HOST in the ledger (with an audit record), drain it in the scheduler, relaunch the run without it."""
    # The operation (trainctl.ops.evict.operation) does the work; this parses and renders.
    # The evidence must be about HOST (else the ledger would record another host's fault as HOST's);
    # expand_targets refuses a bad HOST with the same error the eviction would.
    found = load_finding(finding, hosts=expand_targets(host) if finding else None)
    spare_list = _split(spares)
    request = EvictRequest(
        targets=(host,),
        reason=reason,
        run=run,
        findings=(found,) if found else (),
        scheduler=scheduler,
        relaunch=(
            LiveRelaunch(spares=spare_list, allow_shrink=allow_shrink, wait_timeout_s=wait_timeout, confirmed=yes)
            if relaunch
            else None
        ),
        members=run_members(run, spares=spare_list or ()),
        dry_run=dry_run,
    )
    result = run_eviction(
        request,
        confirm=(lambda q: typer.confirm(q, default=False)) if sys.stdin.isatty() else None,
        progress=lambda line: err.print(line, highlight=False, markup=False),
    )
    if json_out:
        _emit_json(result.to_dict())
    elif dry_run:
        who = ",".join(result.hosts)
        out.print(f"dry run: would quarantine {who} in {result.ledger_path} (reason: {reason})", highlight=False)
        for line in result.commands_shell:
            out.print(f"dry run: would run: {line}", highlight=False, markup=False)
        if result.relaunch_plan is not None:
            _print_plan(result.relaunch_plan)
    else:
        who = ",".join(result.hosts)
        out.print(f"evicted {who}: {reason}" + (f" (run {result.run_id})" if result.run_id else ""), highlight=False)
        rl = result.relaunch
        if rl is not None:
            out.print(f"relaunch plan: {rl.plan.kind.value}: {rl.plan.reason}", highlight=False)
            out.print(
                f"relaunched on {','.join(rl.hosts)} as {rl.run_dir}: "
                + (f"exit {rl.exit_code}" if rl.finished else f"still running after {wait_timeout:.0f}s")
                + f", steps {rl.first_step}..{rl.last_step}",
                highlight=False,
            )
    if result.relaunch is not None and not result.relaunch.ok:
        raise typer.Exit(ExitCode.RUN_FAILED)


def _print_plan(plan: RelaunchPlan) -> None:
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
        table.add_row(e.host, _fmt_ts(e.since_ts_ns), e.reason, e.run or "", e.by, str(e.evictions))
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
    if host_key(host) not in entries:
        known = ", ".join(sorted(e.host for e in entries.values())) or "none"
        raise InputError(f"host {host!r} is not quarantined (quarantined: {known}); see `trainctl nodes list`")
    # Any spelling finds the entry (host_key: NODE02, node02:2222); the scheduler and the ledger get
    # the name the host was quarantined (and drained) under, less a port that a ledger written
    # before entries dropped it may hold (node07:2222 -> node07: scontrol has no ports).
    host = HostAddress.split(entries[host_key(host)].host).host
    if scheduler is not SchedulerKind.NONE:
        check_host_name(host)  # the name reaches scontrol/kubectl: one host, never an option or ALL
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
    records = [r for r in Ledger().audit() if host is None or host_key(r.host) == host_key(host)]
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
