"""Collect through 2 gateways vs directly, the same hosts and files, in one run (issue 18 item 2).

N loopback sshd data hosts (tests/sshd.py; bench/fanout.py's files: a 4 MiB binary and a 200-line
log per host) plus 2 sshd gateway hosts. Variants, interleaved, each into an emptied output dir:

  direct     `trainctl collect RUN --hosts data[...]`: the client connects to every host
  gateways   the same with `--gateways gw01,gw02`: the client connects to the two gateways, each
             runs trainctl's collect over its half and streams its dataset back

Per variant: wall time of the whole command and the client process's own CPU (wait4 rusage: the
gateways' work is not in it). On this one machine the gateways share the client's cores, so the
wall time shows the tree's overhead, not its gain; the client CPU shows what the tree takes off
the client, which is what bounds a flat fan-out past ~1,000 hosts.

    .venv/bin/python bench/collect_gateways.py [--hosts 32] [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
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
from sshd import SshdCluster  # noqa: E402


def run(cluster: SshdCluster, hosts: list[str], out: Path, gateways: list[str] | None) -> tuple[float, float]:
    argv = [sys.executable, "-c", "from trainctl.cli.app import main; main()", "collect",
            str(cluster.remote_root / "run"), "--hosts", ",".join(hosts), "--out", str(out),
            "--ssh-config", str(cluster.ssh_config), "--kinds", "fr_dumps,rank_logs", "--json"]  # fmt: skip
    if gateways:
        argv += ["--gateways", ",".join(gateways), "--gateway-ssh-config", str(cluster.ssh_config)]
    t0 = time.monotonic()
    with tempfile.TemporaryFile() as so, tempfile.TemporaryFile() as se:
        p = subprocess.Popen(argv, stdout=so, stderr=se)
        _, status, ru = os.wait4(p.pid, 0)
        wall = time.monotonic() - t0
        if os.waitstatus_to_exitcode(status) != 0:
            se.seek(0)
            raise RuntimeError(se.read().decode()[-3000:])
    return wall, ru.ru_utime + ru.ru_stime


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--hosts", type=int, default=32)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    base = Path(tempfile.mkdtemp(prefix="gwbench-"))
    data = [f"data{i:03d}" for i in range(1, args.hosts + 1)]
    gws = ["gw01", "gw02"]
    cluster = SshdCluster(base / "c", [*gws, *data])
    cluster.start()
    try:
        prepare(cluster)
        want = expected_bytes(cluster) * args.hosts // (args.hosts + 2)
        res: dict[str, list[tuple[float, float]]] = {"direct": [], "gateways": []}
        for i in range(args.repeats + 1):  # the first round warms caches and is dropped
            for name, g in (("direct", None), ("gateways", gws)):
                out = base / "out"
                shutil.rmtree(out, ignore_errors=True)
                got = run(cluster, data, out, g)
                assert out_bytes(out) == want, (name, out_bytes(out), want)
                if i:
                    res[name].append(got)
        summary = {
            name: {
                "wall_s_median": round(statistics.median(w for w, _ in v), 2),
                "wall_s_min_max": [round(min(w for w, _ in v), 2), round(max(w for w, _ in v), 2)],
                "client_cpu_s_median": round(statistics.median(c for _, c in v), 2),
                "client_cpu_ms_per_host": round(1000 * statistics.median(c for _, c in v) / args.hosts, 1),
            }
            for name, v in res.items()
        }
        print(json.dumps({"machine": f"{platform.node()} {os.cpu_count()} cores", "hosts": args.hosts,
                          "repeats": args.repeats, **summary}, indent=2))  # fmt: skip
    finally:
        cluster.stop()
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
