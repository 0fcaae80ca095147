"""`trainctl collect RUN --srun --out DATASET`: inside a Slurm allocation, every node collects itself.

Past one client on the engine a Slurm cluster already has (issue 18 item 2): one `srun` step, one
task per node (`--overlap`, so it runs beside the training step), and each task runs trainctl's own
collect for its node with `--this-host` (the direct path's manifest, fetch and py-spy commands, run
with `sh -c` on the node: no SSH anywhere) into `<scratch>/<node>/`, then leaves one tar of that
dataset there. The scratch folder is on the file system every node and the client share (default:
inside --out, which must then be shared). Slurm does the fan-out (slurmd's tree), each node spends
its own CPU, and the client only unpacks one archive per node.

A node that cannot take the step (its slurmd gone while slurmctld still counts it allocated) aborts the whole
step in Slurm: srun's step_launch.c `_fail_step_tasks` sets the launch state's `abort` on any node's failed task
launch ("Task launch for %ps failed on node %s"), and srun then cancels the step on every node, killing the
healthy nodes' collects if they have not finished. So the client runs the step again on the nodes that left no
archive and were not named as failed launches (`hosts_to_retry`, at most MAX_ROUNDS steps in all).

What the client checks, as for a gateway: each archive is taken only for paths about its own node
(trainctl.ops.collect.gateways.extract_archive; others refused and recorded as foreign_paths), capped
at the node's byte cap; a node that left no archive (its task failed or was killed, srun could not
start it) is a failed host with srun's own last lines as the reason. A node is named by Slurm
(SLURMD_NODENAME), so --hosts must be Slurm's node names (the default, SLURM_JOB_NODELIST, is).
Trust: the shared file system is the transport, so a node could write another's folder; every task
runs as the same user, as the training job does, and attribution is by folder name.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import re
import shlex
import shutil
import subprocess
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from trainctl.collectors.remote_script import new_nonce
from trainctl.errors import InputError
from trainctl.ops.collect.collection import (
    CollectOptions,
    CollectResult,
    HostReport,
    Progress,
    StatusRow,
    TarMemberRefused,
    write_status,
)
from trainctl.ops.collect.gateways import extract_archive, reports_from_summary

__all__ = ["SrunOptions", "srun_argv", "node_script", "collect_in_allocation", "hosts_to_retry", "MAX_ROUNDS"]

ARCHIVE = "dataset.tar"  # what each task leaves in <scratch>/<node>/
SUMMARY = "summary.json"  # its collect's --json summary
_STDERR_TAIL = 4000
logger = logging.getLogger(__name__)
MAX_ROUNDS = 3  # srun steps per collect: the first, then again on the nodes a lost node's abort took down
# Slurm src/api/step_launch.c _launch_tasks: error("Task launch for %ps failed on node %s: %m") (older: "%u.%u")
_LAUNCH_FAILED = re.compile(r"Task launch for \S+ failed on node (?P<node>[^\s:]+):")


def hosts_to_retry(todo: list[str], has_archive: set[str], srun_stderr: str) -> list[str]:
    """The nodes to run the step on again (pure): those of `todo` that left no archive, when the step was aborted
    by nodes srun names as failed launches, less those nodes. Nothing when no launch failed (a node's own failure
    is its answer) or when every node without an archive is one that failed to launch."""
    lost = {m.group("node") for m in _LAUNCH_FAILED.finditer(srun_stderr)}
    if not lost:
        return []
    return [h for h in todo if h not in has_archive and h not in lost]


@dataclass(frozen=True)
class SrunOptions:
    python: str  # the interpreter with trainctl on the nodes (default: this one's path, a shared venv)
    scratch: Path  # on the file system the nodes and this machine share
    jobid: str | None = None  # the allocation (default: SLURM_JOB_ID, i.e. the one we run in)
    srun: str = "srun"


def node_script(o: CollectOptions, s: SrunOptions) -> str:
    """What every task runs: its node's own collect into <scratch>/<node>/, then one archive of it."""
    q = shlex.quote
    argv = [
        s.python, "-m", "trainctl.cli.app", "collect", o.run_dir, "--this-host", "--out", '"$d/ds"',
        "--json", "--timeout-s", str(o.timeout_s), "--max-failed-hosts", "1",
        "--max-host-gib", str(o.max_host_bytes / 2**30), "--max-host-files", str(o.max_host_files),
        "--max-file-gib", str(o.max_file_bytes / 2**30),
        *(["--kinds", ",".join(o.kinds)] if o.kinds else []),
    ]  # fmt: skip
    cmd = " ".join(a if a == '"$d/ds"' else q(a) for a in argv)
    return (
        f'h="${{SLURMD_NODENAME:-$(hostname -s)}}"; d={q(str(s.scratch))}/"$h"; mkdir -p "$d" || exit 1; '
        f'{cmd} --hosts "$h" > "$d/{SUMMARY}" 2> "$d/collect.err"; '
        f'tar -C "$d/ds" -cf "$d/{ARCHIVE}.part" . && mv "$d/{ARCHIVE}.part" "$d/{ARCHIVE}"'
    )


def srun_argv(o: CollectOptions, s: SrunOptions) -> list[str]:
    """One step, one task per node, beside the running job (pure)."""
    import hostlist

    n = len(o.hosts)
    return [
        s.srun, *([f"--jobid={s.jobid}"] if s.jobid else []), "--overlap", f"--nodes={n}", f"--ntasks={n}",
        "--ntasks-per-node=1", f"--nodelist={hostlist.collect_hostlist(list(o.hosts))}", "--kill-on-bad-exit=0",
        "sh", "-c", node_script(o, s),
    ]  # fmt: skip


def _failed(host: str, why: str, started: datetime, out: Path) -> HostReport:
    row = StatusRow(host, "srun", False, None, 0, 0.0, "srun", why)
    write_status(out, host, [row], started, part="collect")
    return HostReport(host, [row], failed=True, error=why)


def collect_in_allocation(opts: CollectOptions, s: SrunOptions, *, progress: Progress | None = None) -> CollectResult:
    """Collect every node of `opts.hosts` through one srun step (again on the nodes a lost node's abort took
    down); never raises for a bad node."""
    if not opts.run_dir.startswith("/"):
        raise InputError(f"run dir {opts.run_dir!r} must be an absolute path (as on the nodes)")
    exe = shutil.which(s.srun)
    if exe is None:
        raise InputError(
            "--srun: no srun on PATH; run collect inside the job's allocation (sbatch/salloc) on a machine with "
            "Slurm's client, or collect over SSH with --hosts"
        )
    opts.out.mkdir(parents=True, exist_ok=True)
    # hidden: a scratch left by a client that died is never read as part of the dataset
    scratch = s.scratch / f".srun-{new_nonce()}"
    s = SrunOptions(s.python, scratch, s.jobid, exe)
    started = datetime.now(UTC)
    t0 = time.monotonic()
    scratch.mkdir(parents=True)
    try:
        todo, tails, rc_of = list(opts.hosts), [], {}
        for _ in range(MAX_ROUNDS):
            rc, tail = _step(dataclasses.replace(opts, hosts=tuple(todo)), s)
            tails.append(tail)
            rc_of.update(dict.fromkeys(todo, rc))  # the exit of the last step each node was in
            retry = hosts_to_retry(todo, {h for h in todo if (scratch / h / ARCHIVE).is_file()}, tail)
            if not retry:
                break
            logger.warning(
                "srun: a node that could not take the step aborted it (Slurm cancels every node's task then); "
                "collecting %s again",
                ", ".join(retry),
            )
            for h in retry:  # what the cancelled task left half-written
                shutil.rmtree(scratch / h, ignore_errors=True)
            todo = retry
        tail = "\n".join(tails)  # each step's end: the first names the lost node, a later one may not
        reports: list[HostReport] = []
        for host in opts.hosts:
            rep = _one(opts, scratch / host, host, rc_of[host], tail, started)
            reports.append(rep)
            if progress is not None:
                progress(host, rep.bytes_fetched, rep)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return CollectResult(opts.out, tuple(reports), time.monotonic() - t0)


def _step(opts: CollectOptions, s: SrunOptions) -> tuple[int | None, str]:
    """One srun step over opts.hosts: its exit code (None: it did not finish in time) and its stderr's end."""
    try:
        proc = subprocess.run(
            srun_argv(opts, s), capture_output=True, timeout=opts.timeout_s * 4 + 120, stdin=subprocess.DEVNULL
        )
        return proc.returncode, proc.stderr.decode(errors="replace")[-_STDERR_TAIL:].strip()
    except subprocess.TimeoutExpired as exc:
        return None, f"srun did not finish within {exc.timeout:g}s"


def _one(opts: CollectOptions, d: Path, host: str, rc: int | None, tail: str, started: datetime) -> HostReport:
    archive = d / ARCHIVE
    if not archive.is_file():
        err = d / "collect.err"  # the node's own collect ran but left no archive: its last words
        if err.is_file():
            with err.open("rb") as fh:  # its end only: a task's stderr can be any size
                fh.seek(max(0, err.stat().st_size - 1000))
                tail = tail + "\n" + fh.read().decode(errors="replace")
        mine = [ln for ln in tail.splitlines() if host in ln] or tail.splitlines()[-2:]
        return _failed(
            host,
            f"no archive from {host} via srun (exit {rc}): {' | '.join(mine)[-500:] or 'no output'}",
            started,
            opts.out,
        )
    try:
        summary = json.loads((d / SUMMARY).read_text(errors="replace") or "{}")
    except (OSError, ValueError):
        summary = {}
    try:
        with archive.open("rb") as fh:
            written, refused = extract_archive(fh, opts.out, {host}, opts.max_host_bytes + (64 << 20))
    except (TarMemberRefused, OSError, EOFError) as exc:
        return _failed(host, f"{host}'s archive refused: {exc}", started, opts.out)
    (rep,) = reports_from_summary(summary, [host], written, refused, f"node {host}", opts.out, started)
    return rep
