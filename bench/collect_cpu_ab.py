"""Client CPU per host of the collect operation, before/after issue 18's two fixes, interleaved.

    .venv/bin/python bench/collect_cpu_ab.py [--hosts 16,64] [--repeats 5]

The hosts and files of bench/fanout.py (N loopback sshd hosts, 4 MiB + 12 KB each). Each run calls
trainctl.ops.collect.collection.collect in this process with a fresh SshClient; CPU is this
process's own plus its children's (`ssh -G`). "before" restores what the fixes removed: tarfile
reading the channel in 10 KiB pieces and paramiko's HostKeys scanning known_hosts per lookup.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import resource
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import paramiko

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parent))
import fanout  # noqa: E402
from sshd import SshdCluster  # noqa: E402

import trainctl.collectors.ssh as ssh  # noqa: E402
import trainctl.ops.collect.collection as coll  # noqa: E402

NOW_BUFSIZE = coll.TAR_BUFSIZE
NOW_KNOWN_HOSTS = ssh._KnownHosts


class _ScanningKnownHosts(ssh._KnownHosts):
    """paramiko's HostKeys, as before: every lookup scans every entry."""

    def __init__(self, path: str) -> None:
        self.hk = paramiko.HostKeys()
        if os.path.isfile(path):
            self.hk.load(path)

    def lookup(self, name: str) -> list[paramiko.PKey]:
        e = self.hk.lookup(name)
        return list(e.values()) if e is not None else []

    def add(self, name: str, key: paramiko.PKey) -> None:
        self.hk.add(name, key.get_name(), key)


def _variant(name: str) -> None:
    coll.TAR_BUFSIZE = 10240 if name == "before" else NOW_BUFSIZE
    ssh._KnownHosts = _ScanningKnownHosts if name == "before" else NOW_KNOWN_HOSTS


def _cpu_s() -> float:
    a, b = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return a.ru_utime + a.ru_stime + b.ru_utime + b.ru_stime


def bench(n: int, repeats: int, base: Path) -> list[dict]:
    cluster = SshdCluster(base / f"n{n}", n)
    cluster.start()
    try:
        fanout.prepare(cluster)
        out = base / f"out{n}"
        opts = coll.CollectOptions(
            run_dir=str(cluster.remote_root / "run"),
            out=out,
            hosts=tuple(cluster.names),
            kinds=coll.parse_kinds(["fr_dumps,rank_logs"]),
            ssh_config=str(cluster.ssh_config),
        )
        runs: dict[str, list[tuple[float, float]]] = {"before": [], "now": []}
        for i in range(repeats + 1):  # the first round warms up
            for name in runs:
                _variant(name)
                shutil.rmtree(out, ignore_errors=True)
                c0, t0 = _cpu_s(), time.perf_counter()
                result = coll.collect(opts, client=ssh.SshClient(ssh_config=opts.ssh_config))
                wall, cpu = time.perf_counter() - t0, _cpu_s() - c0
                assert fanout.out_bytes(out) == fanout.expected_bytes(cluster), "not every byte arrived"
                assert not result.failed_hosts, result.failed_hosts
                if i:
                    runs[name].append((wall, cpu / n * 1000))
        _variant("now")
        return [
            {
                "hosts": n,
                "variant": name,
                "wall_s_median": round(statistics.median(w for w, _ in rs), 2),
                "wall_s": [round(w, 2) for w, _ in rs],
                "cpu_ms_per_host_median": round(statistics.median(c for _, c in rs), 1),
                "cpu_ms_per_host": [round(c, 1) for _, c in rs],
            }
            for name, rs in runs.items()
        ]
    finally:
        cluster.stop()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hosts", default="16,64")
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    logging.disable(logging.WARNING)  # the benchmark's random .pkl files are not Flight Recorder dumps
    print(
        f"# {os.uname().nodename}, load {os.getloadavg()[0]:.1f}, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}"
    )
    with tempfile.TemporaryDirectory(prefix="trainctl-cpu-ab-") as d:
        for n in (int(x) for x in args.hosts.split(",")):
            for row in bench(n, args.repeats, Path(d)):
                print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
