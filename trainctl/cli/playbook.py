"""`trainctl playbook list | show NAME | run NAME --run RUN [--dry-run] [--yes] [--resume ID] | probe`."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

import typer
from rich.table import Table
from rich.text import Text

from trainctl.cli.console import err, out, styled
from trainctl.errors import InputError
from trainctl.exit_codes import ExitCode
from trainctl.ops.playbook.audit import StepRecord, StepStatus
from trainctl.ops.playbook.executor import RunOptions, run_playbook
from trainctl.ops.playbook.validation import builtin_names, find_playbook, load_builtin

app = typer.Typer(
    help="Playbooks (other tools say runbooks): chain collect, diagnose, probe, evict-node and relaunch for one "
    "incident type.",
    no_args_is_help=True,
)

_STYLE = {
    StepStatus.OK: "green",
    StepStatus.FAILED: "bold red",
    StepStatus.SKIPPED: "dim",
    StepStatus.REFUSED: "bold red",
    StepStatus.PLANNED: "cyan",
    StepStatus.ESCALATED: "bold yellow",
}


def _emit_json(doc: object) -> None:
    print(json.dumps(doc, indent=2))  # plain print: `--json | jq` gets exactly the JSON text


@app.command("list")
def list_cmd(json_out: bool = typer.Option(False, "--json", help="Playbooks as JSON.")) -> None:
    """The built-in playbooks, the findings that trigger them and the confidence they act at."""
    books = [load_builtin(n) for n in builtin_names()]
    if json_out:
        _emit_json(
            [
                {
                    "name": b.name,
                    "description": b.description,
                    "trigger": b.trigger.to_dict(),
                    "steps": [{"id": s.id, "type": s.type.value, "destructive": s.destructive} for s in b.steps],
                }
                for b in books
            ]
        )
        return
    table = Table(title="trainctl playbooks")
    for col in ("name", "trigger", "acts at", "steps", "description"):
        table.add_column(col, overflow="fold")
    for b in books:
        trig = ",".join(k.value for k in b.trigger.kinds) + (
            f" ({','.join(c.value for c in b.trigger.categories)})" if b.trigger.categories else ""
        )
        steps = " > ".join(s.id + ("!" if s.destructive else "") for s in b.steps)
        table.add_row(b.name, trig, b.trigger.confidence_label, steps, b.description)
    out.print(table)
    err.print(styled("! marks destructive steps (need --yes or a confirmation)", "dim"))


@app.command("show")
def show_cmd(name: str = typer.Argument(..., help="Built-in name or a playbook YAML file.")) -> None:
    """Print a playbook's YAML (built-in or file), after validating it."""
    book = find_playbook(name)
    if Path(name).suffix in (".yaml", ".yml"):
        print(Path(name).read_text(), end="")
    else:
        from importlib import resources

        print((resources.files("trainctl.playbooks") / f"{book.name}.yaml").read_text(), end="")


def _parse_inputs(pairs: list[str]) -> dict[str, object]:
    inputs: dict[str, object] = {}
    for p in pairs:
        if "=" not in p:
            raise InputError(
                f"--input {p!r}: expected NAME=VALUE (VALUE may be JSON, e.g. --input 'relaunch_args=[\"--local\"]')"
            )
        k, v = p.split("=", 1)
        try:
            inputs[k] = json.loads(v)
        except ValueError:
            inputs[k] = v
    return inputs


def _confirm(question: str, default: bool) -> bool:
    return typer.confirm(question, default=default, err=True)


def _print_record(rec: StepRecord) -> None:
    cmd = shlex.join(rec.command)  # quoted as a person would type it
    err.print(
        Text.assemble(
            (f"[{rec.status.value:>7}] ", _STYLE[rec.status]),
            (f"{rec.step} ({rec.type}) ", "bold"),
            rec.decision,
            (f"\n          $ {cmd}" if cmd else "", "dim"),
            (f"\n          error: {rec.error}" if rec.error else "", "red"),
        )
    )


@app.command("run")
def run_cmd(
    name: str = typer.Argument(..., help="Built-in playbook name (see `playbook list`) or a YAML file."),
    run: Path = typer.Option(..., "--run", help="The run dir (--run-dir of `trainctl launch`)."),
    dry_run: bool = typer.Option(
        False, "--dry-run", help="Print the plan; run only read-only steps; change and write nothing."
    ),
    yes: bool = typer.Option(False, "--yes", "-y", help="Allow destructive steps and answer yes to questions."),
    resume: str | None = typer.Option(None, "--resume", help="Incident id to resume: completed steps are skipped."),
    inputs: list[str] = typer.Option([], "--input", help="Playbook input NAME=VALUE (repeatable)."),
    json_out: bool = typer.Option(False, "--json", help="The result (every step's record) as JSON on stdout."),
) -> None:
    """Run a playbook against a run; every step is appended to RUN/incidents/<id>/audit.jsonl."""
    book = find_playbook(name)
    interactive = sys.stdin.isatty() and sys.stderr.isatty()
    opts = RunOptions(
        dry_run=dry_run,
        yes=yes,
        interactive=interactive,
        confirm=_confirm,
        resume=resume,
        inputs=_parse_inputs(inputs),
        progress=lambda line: err.print(line, highlight=False, markup=False),
    )
    err.print(
        Text.assemble(
            (book.name, "bold"), f" on {run}", (" (dry run: nothing will be changed)" if dry_run else "", "cyan")
        )
    )
    result = run_playbook(book, run, opts, on_record=_print_record)
    if json_out:
        _emit_json(result.to_dict())
    else:
        table = Table(title=f"{book.name}: " + ("plan (dry run)" if dry_run else f"incident {result.incident_id}"))
        for col in ("step", "type", "status", "decision", "command"):
            table.add_column(col, overflow="fold")
        for r in result.records:
            table.add_row(
                r.step,
                r.type + (" !" if r.destructive else ""),
                Text(r.status.value, style=_STYLE[r.status]),
                r.decision,
                shlex.join(r.command),
            )
        out.print(table)
        if result.audit_path:
            err.print(f"audit: {result.audit_path}")
    if not result.completed:
        raise typer.Exit(ExitCode.ERROR)


@app.command("probe")
def probe_cmd(
    hosts_local: int = typer.Option(
        4, "--hosts-local", min=1, help="Simulated hosts on this machine (node01..nodeNN)."
    ),
    nproc_per_host: int = typer.Option(1, "--nproc-per-node", min=1, help="Ranks per simulated host."),
    slow_host: str | None = typer.Option(None, "--slow-host", help="Drill: make this host slow on purpose."),
    slow_delay_s: float = typer.Option(
        0.2, "--slow-delay", min=0.0, help="Drill: seconds the slow host sleeps before each collective."
    ),
    iters: int = typer.Option(5, "--iters", min=1, help="Collectives per test."),
    workdir: Path = typer.Option(Path("probe-out"), "--workdir", help="Where worker logs and the result go."),
    json_out: bool = typer.Option(False, "--json", help="Verdict and timings as JSON."),
) -> None:
    """Collective self-test (intra-host all-to-all, neighbour all-reduce, bisection) that names a slow host."""
    from trainctl.runtime.probe import run_local_probe

    hosts = [f"node{i + 1:02d}" for i in range(hosts_local)]
    with err.status(f"probing {len(hosts)} hosts ...", spinner="dots"):
        verdict = run_local_probe(
            hosts,
            nproc_per_host=nproc_per_host,
            iters=iters,
            slow_host=slow_host,
            slow_delay_s=slow_delay_s,
            workdir=workdir,
        )
    if json_out:
        _emit_json(verdict.to_dict())
    else:
        out.print(verdict.summary())
