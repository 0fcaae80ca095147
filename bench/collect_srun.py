"""Collect inside a Slurm allocation (`collect --srun`) vs over SSH, the same files from N nodes, in one run.

Each of N nodes holds the fan-out benchmark's run dir (bench/fanout.py `prepare`: a 4 MiB binary
and a 200-line log per node). Two clusters run side by side on loopback, each node in its own mount
namespace with the same files: a real Slurm cluster (tests/slurm_cluster.py: munged, slurmctld, one
slurmd per node; an allocation made by salloc) and real sshd hosts (tests/sshd.py). Variants,
interleaved, each into a freshly emptied output dir, as a user runs them (a new process):

  srun   `trainctl collect RUN --srun --srun-jobid JOB --kinds fr_dumps,rank_logs`: one srun step,
         every node runs trainctl's own collect for itself into a shared scratch, the client
         unpacks one archive per node
  ssh    `trainctl collect RUN --hosts ... --ssh-config ... --kinds fr_dumps,rank_logs`

Reported: wall time, the client's CPU (trainctl and its srun / ssh -G children), and the CPU the
whole machine spent (every node's work included: on this machine the N nodes share its 2 cores,
so the srun wall time here is bounded by all nodes' CPU, where on a cluster each node spends its
own). Output sizes are checked after every run.

    .venv/bin/python bench/collect_srun.py [--hosts 16,64] [--repeats 3]
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from fanout import expected_bytes, out_bytes, prepare  # noqa: E402
from slurm_cluster import SlurmCluster  # noqa: E402
from sshd import SshdCluster  # noqa: E402


def _machine_cpu_s() -> float:
    """CPU seconds the whole machine has spent (user + nice + system), from /proc/stat."""
    fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]
    return (int(fields[0]) + int(fields[1]) + int(fields[2])) / os.sysconf("SC_CLK_TCK")


def run_collect(args: list[str], env: dict[str, str]) -> tuple[float, float, float]:
    """(wall s, the client process tree's CPU s, the machine's CPU s) for one `trainctl collect`."""
    argv = [sys.executable, "-c", "from trainctl.cli.app import main; main()", "collect", *args, "--json"]
    m0, t0 = _machine_cpu_s(), time.perf_counter()
    with tempfile.TemporaryFile() as so, tempfile.TemporaryFile() as se:
        p = subprocess.Popen(argv, stdout=so, stderr=se, env=env)
        _, status, ru = os.wait4(p.pid, 0)  # the client's own rusage, its waited-for children included
        wall = time.perf_counter() - t0
        if os.waitstatus_to_exitcode(status) != 0:
            se.seek(0)
            raise RuntimeError(f"trainctl collect {args[:3]} failed: {se.read().decode()[-3000:]}")
    return wall, ru.ru_utime + ru.ru_stime, _machine_cpu_s() - m0


def bench(n: int, repeats: int, base: Path) -> dict[str, dict[str, list[float]]]:
    names = [f"node{i:04d}" for i in range(1, n + 1)]
    with SlurmCluster(base / f"slurm{n}", names) as slurm, SshdCluster(base / f"ssh{n}", names) as ssh:
        prepare(slurm)
        prepare(ssh)
        want = expected_bytes(slurm)
        job = slurm.allocate()
        variants = {
            "srun": (
                [str(slurm.remote_root / "run"), "--srun", "--srun-jobid", job, "--hosts", ",".join(names)],
                slurm.env(),
            ),
            "ssh": (
                [str(ssh.remote_root / "run"), "--hosts", ",".join(names), "--ssh-config", str(ssh.ssh_config)],
                dict(os.environ),
            ),
        }
        res: dict[str, dict[str, list[float]]] = {v: {"wall": [], "cpu": [], "machine": []} for v in variants}
        for i in range(repeats + 1):  # the first round is the warm-up
            for name, (args, env) in variants.items():
                out = base / f"out-{n}-{name}"
                shutil.rmtree(out, ignore_errors=True)
                wall, cpu, machine = run_collect([*args, "--kinds", "fr_dumps,rank_logs", "--out", str(out)], env)
                got = out_bytes(out)
                assert got == want, f"{name}: fetched {got} bytes, expected {want}"
                if i:
                    for k, v in (("wall", wall), ("cpu", cpu), ("machine", machine)):
                        res[name][k].append(v)
        return res


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hosts", default="16,64")
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    print(
        f"# {platform.node()} {os.cpu_count()} cpus, python {platform.python_version()}, "
        f"load {os.getloadavg()[0]:.1f}, {time.strftime('%Y-%m-%d %H:%M')}"
    )
    print("| N | variant | median wall s | runs (wall s) | client CPU s | client CPU ms per node "
          "| machine CPU s (all nodes) | machine CPU ms per node |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory(prefix="trainctl-bench-srun-") as d:
        for n in (int(x) for x in args.hosts.split(",")):
            for name, r in bench(n, args.repeats, Path(d)).items():
                c, m = statistics.median(r["cpu"]), statistics.median(r["machine"])
                print(
                    f"| {n} | {name} | {statistics.median(r['wall']):.2f} | {' '.join(f'{t:.2f}' for t in r['wall'])} "
                    f"| {c:.2f} | {c / n * 1000:.1f} | {m:.2f} | {m / n * 1000:.1f} |",
                    flush=True,
                )


if __name__ == "__main__":
    main()
