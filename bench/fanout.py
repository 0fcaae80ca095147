"""Fan-out benchmark: the same files from N loopback sshd hosts, trainctl vs OpenSSH, in one run.

Each host (tests/sshd.py: own sshd, host key, address, filesystem) holds a run dir with a 4 MiB
binary file (fr/<host>/rank-0.pkl) and a 200-line text file (logs/<host>/rank-0.log), the job of
shared/research/fanout-baseline.md. Variants, each into a freshly emptied output dir:

  trainctl       `trainctl collect RUN --hosts ... --kinds fr_dumps,rank_logs` as a user runs it
                 (a new process: Python start-up included), one connection per host: a probe exec
                 (manifest), then one tar stream of the two files
  openssh-cm     `xargs -P N` over hosts: `ssh host 'cd RUN && find ...'` then `scp` of the two
                 files, multiplexed with ControlMaster; masters made during the run (cold), so both
                 tools pay one handshake per host
  openssh-warm   the same, masters kept from the previous run (no handshakes at all)

Wall time: median of REPEATS runs after one warm-up, variants interleaved. Output sizes are
checked after every run.

    .venv/bin/python bench/fanout.py [--hosts 32,64] [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from sshd import SshdCluster  # noqa: E402

BIN_BYTES = 4 << 20


def prepare(cluster: SshdCluster) -> None:
    text = "".join(f"line {i}: step {i} loss 2.{i:04d} tokens/s 123456.7 rank 0 all good here\n" for i in range(200))
    blob = os.urandom(BIN_BYTES)
    for h in cluster.names:
        run = cluster.host_root(h) / "run"
        (run / "fr" / h).mkdir(parents=True, exist_ok=True)
        (run / "logs" / h).mkdir(parents=True, exist_ok=True)
        (run / "fr" / h / "rank-0.pkl").write_bytes(blob)
        (run / "logs" / h / "rank-0.log").write_text(text)


def expected_bytes(cluster: SshdCluster) -> int:
    h = cluster.names[0]
    run = cluster.host_root(h) / "run"
    return len(cluster.names) * (
        (run / "fr" / h / "rank-0.pkl").stat().st_size + (run / "logs" / h / "rank-0.log").stat().st_size
    )


def out_bytes(out: Path) -> int:
    return sum(p.stat().st_size for p in out.rglob("*") if p.is_file() and p.suffix in (".pkl", ".log"))


def run_trainctl(cluster: SshdCluster, hosts: list[str], out: Path) -> tuple[float, float, float]:
    """(fan-out time trainctl reports, the process's CPU s, its peak RSS GiB) for one collect."""
    argv = [
        sys.executable,
        "-c",
        "from trainctl.cli.app import main; main()",
        "collect",
        str(cluster.remote_root / "run"),
        "--hosts",
        ",".join(hosts),
        "--out",
        str(out),
        "--ssh-config",
        str(cluster.ssh_config),
        "--kinds",
        "fr_dumps,rank_logs",
        "--json",
    ]
    with tempfile.TemporaryFile() as so, tempfile.TemporaryFile() as se:
        p = subprocess.Popen(argv, stdout=so, stderr=se)
        _, status, ru = os.wait4(p.pid, 0)  # this child's own rusage: CPU and peak RSS
        p.returncode = os.waitstatus_to_exitcode(status)
        so.seek(0)
        se.seek(0)
        stdout, stderr = so.read().decode(), se.read().decode()
    if p.returncode != 0:
        raise RuntimeError(f"trainctl collect exited {p.returncode}: {stderr[-3000:]}\n{stdout[-3000:]}")
    return float(json.loads(stdout)["duration_s"]), ru.ru_utime + ru.ru_stime, ru.ru_maxrss / 2**20


HOST_SH = r"""
h=$1; d=$OUT/$h; mkdir -p "$d"
ssh $SSHOPTS "$h" "cd $RUN && find . -type f -printf '%P %s %T@\n'" > "$d/manifest.txt"
scp -q $SSHOPTS "$h:$RUN/fr/$h/rank-0.pkl" "$h:$RUN/logs/$h/rank-0.log" "$d/"
"""


def run_openssh(cluster: SshdCluster, hosts: list[str], out: Path, cm_dir: Path) -> None:
    env = dict(
        os.environ,
        OUT=str(out),
        RUN=str(cluster.remote_root / "run"),
        SSHOPTS=f"-F {cluster.ssh_config} -o ControlMaster=auto -o ControlPath={cm_dir}/%C -o ControlPersist=600",
    )
    subprocess.run(
        ["xargs", "-P", str(len(hosts)), "-n", "1", "sh", "-c", HOST_SH, "host"],
        input="\n".join(hosts).encode(),
        env=env,
        check=True,
        timeout=600,
    )


def close_masters(cluster: SshdCluster, hosts: list[str], cm_dir: Path) -> None:
    for h in hosts:
        subprocess.run(
            ["ssh", "-F", str(cluster.ssh_config), "-o", f"ControlPath={cm_dir}/%C", "-O", "exit", h],
            capture_output=True,
            timeout=30,
        )


def bench(n: int, repeats: int, base: Path) -> dict[str, list[float]]:
    cluster = SshdCluster(base / f"n{n}", n)
    cluster.start()
    try:
        prepare(cluster)
        hosts = cluster.names
        want = expected_bytes(cluster)
        cm_cold, cm_warm = base / f"cm{n}c", base / f"cm{n}w"
        cm_cold.mkdir()
        cm_warm.mkdir()
        times: dict[str, list[float]] = {"trainctl": [], "openssh-cm": [], "openssh-warm": []}
        cpu: dict[str, list[float]] = {k: [] for k in times}
        inner: list[float] = []
        rss: list[float] = []
        for i in range(repeats + 1):  # first round is the warm-up
            for name in times:
                out = base / f"out-{n}-{name}"
                shutil.rmtree(out, ignore_errors=True)
                out.mkdir()
                if name == "openssh-cm":
                    close_masters(cluster, hosts, cm_cold)
                ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
                t0 = time.perf_counter()
                if name == "trainctl":
                    fan, _, peak = run_trainctl(cluster, hosts, out)
                else:
                    run_openssh(cluster, hosts, out, cm_cold if name == "openssh-cm" else cm_warm)
                dt = time.perf_counter() - t0
                ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
                got = out_bytes(out)
                assert got == want, f"{name}: fetched {got} bytes, expected {want}"
                if i:
                    times[name].append(dt)
                    cpu[name].append(ru1.ru_utime + ru1.ru_stime - ru0.ru_utime - ru0.ru_stime)
                    if name == "trainctl":
                        inner.append(fan)
                        rss.append(peak)
        close_masters(cluster, hosts, cm_cold)
        close_masters(cluster, hosts, cm_warm)
        return {"wall": times, "cpu": cpu, "inner": {"trainctl fan-out only": inner}, "rss_gib": rss}
    finally:
        cluster.stop()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--hosts", default="32,64")
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    print(
        f"# {platform.node()} {os.cpu_count()} cpus, python {platform.python_version()}, "
        f"load {os.getloadavg()[0]:.1f}, {time.strftime('%Y-%m-%d %H:%M')}"
    )
    print("| N | variant | median wall s | runs (wall s) | median client CPU s | CPU ms per host | peak RSS GiB |")
    print("|---|---|---|---|---|---|---|")
    trainctl_cpu: dict[int, float] = {}
    with tempfile.TemporaryDirectory(prefix="trainctl-bench-") as d:
        for n in (int(x) for x in args.hosts.split(",")):
            r = bench(n, args.repeats, Path(d))
            for name, ts in r["wall"].items():
                c = statistics.median(r["cpu"][name])
                peak = f"{max(r['rss_gib']):.2f}" if name == "trainctl" else ""
                if name == "trainctl":
                    trainctl_cpu[n] = c
                print(
                    f"| {n} | {name} | {statistics.median(ts):.2f} | {' '.join(f'{t:.2f}' for t in ts)} "
                    f"| {c:.2f} | {c / n * 1000:.1f} | {peak} |",
                    flush=True,
                )
            ts = r["inner"]["trainctl fan-out only"]
            print(
                f"| {n} | trainctl, fan-out only (no Python start-up) | {statistics.median(ts):.2f} "
                f"| {' '.join(f'{t:.2f}' for t in ts)} | | | |",
                flush=True,
            )
    ns = sorted(trainctl_cpu)
    if len(ns) > 1:  # the CLI's start-up CPU cancels out: what one more host costs
        lo, hi = ns[0], ns[-1]
        print(
            f"\ntrainctl client CPU per additional host ({lo} -> {hi} hosts): "
            f"{(trainctl_cpu[hi] - trainctl_cpu[lo]) / (hi - lo) * 1000:.1f} ms"
        )


if __name__ == "__main__":
    main()
