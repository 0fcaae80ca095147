"""Client CPU per host of the collect operation: this tree against an earlier commit, interleaved.

    .venv/bin/python bench/collect_cpu_ab.py [--hosts 16,64] [--repeats 5] [--base REV]

The hosts and files of bench/fanout.py (N loopback sshd hosts, 4 MiB + 12 KB each). Every sample
is a new Python process that imports one variant's trainctl, runs one warm-up collect and then
one measured collect (trainctl.ops.collect.collection.collect with a fresh SshClient); CPU is
that process's own plus its children's (`ssh -G`) over the measured collect, from getrusage.
Variants: `now` (this working tree, as installed) and `base` (commit REV, default HEAD, taken
with `git archive` and laid out as installed, so no worktree is created). Samples alternate
base, now, base, now... so load from other work on the machine falls on both alike.

Earlier tables in BENCHMARKS.md ("before" = the 10 KiB tar reads and the scanning known_hosts
lookup) came from this script's in-process version at commit 85563c3.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "bench"))


def _cpu_s() -> tuple[float, float]:
    a, b = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return a.ru_utime + a.ru_stime, b.ru_utime + b.ru_stime


def child(spec: dict) -> None:
    """One sample: warm-up collect, measured collect; prints one JSON line."""
    import fanout

    import trainctl.collectors.ssh as ssh
    import trainctl.ops.collect.collection as coll

    logging.disable(logging.WARNING)  # the benchmark's random .pkl files are not Flight Recorder dumps
    out = Path(spec["out"])
    opts = coll.CollectOptions(
        run_dir=spec["run_dir"],
        out=out,
        hosts=tuple(spec["hosts"]),
        kinds=coll.parse_kinds(["fr_dumps,rank_logs"]),
        ssh_config=spec["ssh_config"],
        max_workers=spec["max_workers"],
    )
    for _ in ("warm-up", "measured"):  # only the last one counts
        shutil.rmtree(out, ignore_errors=True)
        (s0, c0), t0 = _cpu_s(), time.perf_counter()
        result = coll.collect(opts, client=ssh.SshClient(ssh_config=opts.ssh_config))
        wall = time.perf_counter() - t0
        (s1, c1) = _cpu_s()
        assert not result.failed_hosts, [r.error for r in result.reports if r.failed][:3]
        assert fanout.out_bytes(out) == spec["expected_bytes"], "not every byte arrived"
    n = len(spec["hosts"])
    print(
        json.dumps(
            {
                "code": coll.__file__,
                "wall_s": wall,
                "self_ms": (s1 - s0) / n * 1000,
                "children_ms": (c1 - c0) / n * 1000,
            }
        )
    )


def base_tree(rev: str, dest: Path) -> Path:
    """Commit `rev`'s packages laid out as installed (dest/trainctl/collectors/...), for PYTHONPATH."""
    src = dest / "src"
    src.mkdir(parents=True)
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", rev], check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(src)], input=archive, check=True)
    subprocess.run([sys.executable, str(src / "scripts" / "import_tree.py"), str(dest / "tree")], check=True)
    return dest / "tree"


def sample(variant: str, tree: Path | None, spec: dict) -> dict:
    env = dict(os.environ)
    if tree is not None:  # sys.path comes before the editable install's finder: REV's trainctl wins
        env["PYTHONPATH"] = str(tree)
    res = subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), "--child", json.dumps(spec)],
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    if res.returncode != 0:
        raise RuntimeError(f"{variant} sample failed:\n{res.stderr[-3000:]}")
    return json.loads(res.stdout.strip().splitlines()[-1])


def bench(n: int, repeats: int, base: Path, tree: Path, max_workers: int) -> list[dict]:
    import fanout
    from sshd import SshdCluster

    cluster = SshdCluster(base / f"n{n}", n)
    cluster.start()
    try:
        fanout.prepare(cluster)
        spec = {
            "run_dir": str(cluster.remote_root / "run"),
            "hosts": cluster.names,
            "ssh_config": str(cluster.ssh_config),
            "out": str(base / f"out{n}"),
            "expected_bytes": fanout.expected_bytes(cluster),
            "max_workers": max_workers,
        }
        runs: dict[str, list[dict]] = {"base": [], "now": []}
        for _ in range(repeats):
            for name in runs:
                runs[name].append(sample(name, tree if name == "base" else None, spec))
        return [_row(n, name, rs) for name, rs in runs.items()]
    finally:
        cluster.stop()


def _row(n: int, name: str, rs: list[dict]) -> dict:
    total = [r["self_ms"] + r["children_ms"] for r in rs]
    return {
        "hosts": n,
        "variant": name,
        "code": str(Path(rs[0]["code"]).parents[2]),
        "cpu_ms_per_host_median": round(statistics.median(total), 1),
        "cpu_ms_per_host": [round(c, 1) for c in total],
        "children_ms_per_host_median": round(statistics.median(r["children_ms"] for r in rs), 1),
        "wall_s_median": round(statistics.median(r["wall_s"] for r in rs), 2),
        "wall_s": [round(r["wall_s"], 2) for r in rs],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hosts", default="16,64")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--base", default="HEAD", help="the commit to compare against (default HEAD)")
    ap.add_argument("--max-workers", type=int, default=16)
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(json.loads(args.child))
        return
    print(
        f"# {os.uname().nodename}, load {os.getloadavg()[0]:.1f}, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, "
        f"base {args.base}",
        flush=True,
    )
    with tempfile.TemporaryDirectory(prefix="trainctl-cpu-ab-") as d:
        tree = base_tree(args.base, Path(d) / "base")
        for n in (int(x) for x in args.hosts.split(",")):
            for row in bench(n, args.repeats, Path(d), tree, args.max_workers):
                print(json.dumps(row), flush=True)
    print(f"# load {os.getloadavg()[0]:.1f} at the end", flush=True)


if __name__ == "__main__":
    main()
