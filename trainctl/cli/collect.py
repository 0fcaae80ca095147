"""`trainctl collect RUN_DIR --hosts SPEC --out DATASET`: fan out over SSH, one dataset back.

`--k8s-job NAME` (or `--k8s-selector SEL`) instead of `--hosts`: the pods of a Kubernetes training
job, reached through `kubectl exec` (trainctl.collectors.kubectl). `--gateways`: a tree through
gateway hosts. `--srun`: inside a Slurm allocation, each node collects itself (one srun step) and
the results come back through a shared folder (trainctl.ops.collect.in_allocation)."""

from __future__ import annotations

import json
import logging
import os
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

from trainctl.cli.console import err, out
from trainctl.inventory import parse_hosts

if TYPE_CHECKING:
    from trainctl.ops.collect.collection import CollectResult, HostReport


def _summary(result: CollectResult) -> Table:
    t = Table(title=Text(f"collected into {result.out} in {result.duration_s:.1f}s"), title_justify="left")
    for col in ("host", "status", "kinds ok", "files", "bytes", "problem"):
        t.add_column(col, justify="right" if col in ("kinds ok", "files", "bytes") else "left")
    for rep in result.reports:
        bad = [r for r in rep.rows if not r.ok]
        status = Text("failed", "red") if rep.failed else (Text("partial", "yellow") if bad else Text("ok", "green"))
        problem = rep.error or (f"{bad[0].kind}: {bad[0].error_type}: {bad[0].error}" if bad else "")
        t.add_row(
            Text(rep.host),
            status,
            f"{len(rep.rows) - len(bad)}/{len(rep.rows)}",
            str(rep.files_fetched),
            f"{rep.bytes_fetched:,}",
            Text(problem),
        )
    return t


def _targets(
    hosts: str | None,
    k8s_job: str | None,
    k8s_selector: str | None,
    *,
    namespace: str,
    context: str | None,
    container: str | None,
) -> tuple[Any, tuple[str, ...]]:
    """(the client collect connects through, or None for SSH; the target names)."""
    from trainctl.errors import InputError

    given = [f for f, v in (("--hosts", hosts), ("--k8s-job", k8s_job), ("--k8s-selector", k8s_selector)) if v]
    if not given and hosts is not None:
        given = ["--hosts"]  # given, but blank: said below as what it is, not as a missing option
    if len(given) != 1:
        raise InputError(
            f"collect needs exactly one of --hosts, --k8s-job, --k8s-selector (got {', '.join(given) or 'none'}); "
            "e.g. --hosts node[01-04] or --k8s-job my-pytorchjob --namespace training"
        )
    if hosts is not None:
        names = tuple(h.name for h in parse_hosts(hosts))
        if not names:
            raise InputError(
                f"--hosts {hosts!r} names no host; e.g. --hosts node[01-04], --hosts node01,node02 or --hosts @hostfile"
            )
        return None, names
    from trainctl.collectors.kubectl import KubectlClient, find_job_pods

    selector, pods = find_job_pods(k8s_job, namespace=namespace, selector=k8s_selector, context=context)
    err.print(
        f"[dim]{len(pods)} pods ({selector}): "
        + ", ".join(
            f"{p.name} on {p.node or '?'}" + ("" if p.phase in (None, "Running") else f" [{p.phase}]") for p in pods[:8]
        )
        + (" ..." if len(pods) > 8 else "")
        + "[/dim]"
    )
    return KubectlClient(pods, context=context, container=container), tuple(p.name for p in pods)


def _pyarrow_without_pandas() -> None:
    """Keep pandas (~0.3-1 s of imports) out of the collect process.

    pyarrow imports pandas on the first `pa.array()` of Python objects, only to check whether the
    input is a pandas object; collect never passes one. An import that fails once makes pyarrow
    record "no pandas" for its array-like checks; code that really needs pandas (`to_pandas`)
    retries the import and gets it, since the blocker is removed right away.
    """
    if "pandas" in sys.modules:
        return
    import pyarrow as pa

    class _NoPandas:  # a finder consulted first: `import pandas` -> ImportError, only while it is in place
        @staticmethod
        def find_spec(name: str, *_: object) -> None:
            if name == "pandas":
                raise ImportError("pandas kept out of trainctl collect")
            return None

    sys.meta_path.insert(0, _NoPandas)  # type: ignore[arg-type]
    try:
        pa.array([0])
    finally:
        sys.meta_path.remove(_NoPandas)  # type: ignore[arg-type]


def collect(
    run_dir: str = typer.Argument(
        ..., help="The run dir on the hosts (absolute, as given to `trainctl launch --run-dir`)."
    ),
    hosts: str | None = typer.Option(
        None, "--hosts", help="node01,node02 | node[01-16,20] | hostfile ('node01 slots=8') | @file."
    ),
    out_dir: Path = typer.Option(..., "--out", help="Dataset directory to write (same layout as a run dir)."),
    ssh_config: Path | None = typer.Option(None, "--ssh-config", help="OpenSSH client config (default ~/.ssh/config)."),
    kinds: list[str] | None = typer.Option(
        None, "--kinds", help="Only these kinds (comma list; 'tables', 'files' are groups)."
    ),
    max_failed_hosts: int | None = typer.Option(
        None,
        "--max-failed-hosts",
        min=0,
        help="Exit 1 when more hosts fail than this (default: only when every host fails).",
    ),
    timeout_s: float = typer.Option(60.0, "--timeout-s", min=0.1, help="Per remote command, transfers included."),
    connect_timeout_s: float | None = typer.Option(
        None, "--connect-timeout-s", min=0.1, help="TCP + SSH handshake (default: ConnectTimeout, else 10)."
    ),
    accept_new_host_keys: bool = typer.Option(
        False, "--accept-new-host-keys", help="Trust and save unknown host keys (changed keys are still refused)."
    ),
    max_workers: int = typer.Option(16, "--max-workers", min=1, max=16, help="Hosts worked on at once (at most 16)."),
    max_host_gib: float = typer.Option(
        64.0, "--max-host-gib", min=0.0, help="Bytes one host may send per collect (files past it are skipped)."
    ),
    max_host_files: int = typer.Option(200_000, "--max-host-files", min=1, help="Files one host may send."),
    max_file_gib: float = typer.Option(8.0, "--max-file-gib", min=0.0, help="Largest single file taken."),
    json_out: bool = typer.Option(False, "--json", help="Summary as JSON on stdout."),
    k8s_job: str | None = typer.Option(
        None, "--k8s-job", help="Instead of --hosts: the pods of this Kubernetes job (PyTorchJob, JobSet, Job)."
    ),
    k8s_selector: str | None = typer.Option(
        None, "--k8s-selector", help="Instead of --hosts: the pods matching this label selector."
    ),
    namespace: str = typer.Option("default", "--namespace", help="With --k8s-*: the job's namespace."),
    context: str | None = typer.Option(None, "--context", help="With --k8s-*: the kubeconfig context."),
    container: str | None = typer.Option(
        None, "--container", help="With --k8s-*: the container to exec in (default: each pod's first)."
    ),
    gateways: str | None = typer.Option(
        None, "--gateways", help="Collect through these hosts (a tree): each collects its slice of --hosts."
    ),
    gateway_python: str | None = typer.Option(
        None, "--gateway-python", help="With --gateways: the Python with trainctl on them (default: this one's path)."
    ),
    gateway_ssh_config: str | None = typer.Option(
        None, "--gateway-ssh-config", help="With --gateways: the ssh config on the gateways for their hosts."
    ),
    srun: bool = typer.Option(
        False,
        "--srun",
        help="Inside a Slurm allocation: one srun task per node collects that node, through a "
        "folder all share (--srun-scratch); --hosts defaults to SLURM_JOB_NODELIST.",
    ),  # fmt: skip
    srun_jobid: str | None = typer.Option(
        None, "--srun-jobid", help="With --srun: the job whose allocation to run in (default: SLURM_JOB_ID)."
    ),
    srun_scratch: Path | None = typer.Option(
        None, "--srun-scratch", help="With --srun: a folder on the file system the nodes share (default: inside --out)."
    ),
    this_host: bool = typer.Option(
        False, "--this-host", hidden=True, help="The one --hosts entry is this machine: run its commands here."
    ),
) -> None:
    """Fetch every host's run dir artefacts, kernel log, live stacks and host facts into DATASET."""
    # paramiko and pyarrow load only when this command runs (the CLI's start-up stays light).
    from trainctl.errors import InputError
    from trainctl.ops.collect.collection import CollectOptions, check_failed_hosts, parse_kinds
    from trainctl.ops.collect.collection import collect as run_collect

    _pyarrow_without_pandas()

    # paramiko logs handshake noise (and tracebacks of hosts we gave up on) at ERROR; the outcome
    # of every host is in collection_status and the summary instead.
    if logging.getLogger("trainctl").level > logging.DEBUG:
        logging.getLogger("paramiko").setLevel(logging.CRITICAL)
    if srun and not hosts and not (k8s_job or k8s_selector):
        hosts = os.environ.get("SLURM_JOB_NODELIST") or None
        if hosts is None:
            raise InputError("--srun needs --hosts or SLURM_JOB_NODELIST (run it inside the job's allocation)")
    client, names = _targets(hosts, k8s_job, k8s_selector, namespace=namespace, context=context, container=container)
    if this_host:
        if client is not None or len(names) != 1:
            raise InputError("--this-host collects exactly one --hosts entry: this machine")
        from trainctl.collectors.local_exec import LocalClient

        client = LocalClient()
    opts = CollectOptions(
        run_dir=run_dir,
        out=out_dir,
        hosts=names,
        kinds=parse_kinds(kinds),
        ssh_config=str(ssh_config) if ssh_config else None,
        timeout_s=timeout_s,
        connect_timeout_s=connect_timeout_s,
        accept_new_host_keys=accept_new_host_keys,
        max_workers=max_workers,
        max_host_bytes=int(max_host_gib * 2**30),
        max_host_files=max_host_files,
        max_file_bytes=int(max_file_gib * 2**30),
        # this machine's collect (an srun task): its own interpreter says which torch and NCCL
        **({"python": sys.executable} if this_host else {}),
    )
    lock = threading.Lock()
    state = {"bytes": 0, "failed": 0}
    with Progress(
        TextColumn("[bold]collect"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("hosts"),
        TextColumn("{task.fields[failed]} failed"),
        TextColumn("{task.fields[mib]:.1f} MiB"),
        TimeElapsedColumn(),
        console=err,
        transient=not err.is_terminal,
    ) as bar:
        task = bar.add_task("collect", total=len(names), failed=0, mib=0.0)

        def progress(host: str, nbytes: int, report: HostReport | None) -> None:
            with lock:
                state["bytes"] += nbytes
                if report is not None and report.failed:
                    state["failed"] += 1
                bar.update(
                    task, advance=1 if report is not None else 0, failed=state["failed"], mib=state["bytes"] / 2**20
                )

        if srun:
            from trainctl.ops.collect.in_allocation import SrunOptions, collect_in_allocation

            if client is not None or gateways:
                raise InputError("--srun works with --hosts (Slurm node names), not with --k8s-*, --gateways")
            s = SrunOptions(sys.executable, srun_scratch or out_dir, srun_jobid or os.environ.get("SLURM_JOB_ID"))
            result = collect_in_allocation(opts, s, progress=progress)
        elif gateways:
            from trainctl.ops.collect.gateways import GatewayOptions, collect_via_gateways

            if client is not None:
                raise InputError("--gateways works with --hosts (SSH), not with --k8s-job/--k8s-selector")
            gw = GatewayOptions(
                tuple(h.name for h in parse_hosts(gateways)), gateway_python or sys.executable, gateway_ssh_config
            )
            result = collect_via_gateways(opts, gw, progress=progress)
        else:
            result = run_collect(opts, client=client, progress=progress)
    if json_out:
        print(json.dumps(result.to_dict(), indent=2, default=str))
    else:
        out.print(_summary(result))
    check_failed_hosts(result, len(names) - 1 if max_failed_hosts is None else max_failed_hosts)
