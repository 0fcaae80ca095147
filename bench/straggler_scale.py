"""Benchmark (b): straggler analysis of the 49M-row synthetic timeline (bench/gen_timeline.py).

Each measurement runs in its own child process so peak RSS (ru_maxrss) is that measurement's own:
  full      trainctl.ops.diagnose.diagnosis.load_signals(DIR) -> stragglers.analyze (the `diagnose` path)
  pandas    pyarrow read of the timeline + pandas groupby(rank, phase) median (the issue's baseline)
  read      pyarrow read of the timeline alone (baseline)
  duckdb    DuckDB median(duration_ns) per (rank, phase) straight over the files (reference)

    .venv/bin/python bench/gen_timeline.py
    .venv/bin/python bench/straggler_scale.py [--dir bench/out/timeline-8192] [--repeat 3] [--only full,duckdb]
        [--base REV]

--base REV adds `base`: the full path of commit REV (taken with `git archive` and laid out as
installed, as bench/collect_cpu_ab.py does, on PYTHONPATH), run right after each `full`, so a
change is measured against its base and DuckDB in one interleaved run.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

DEFAULT_DIR = Path(__file__).parent / "out" / "timeline-8192"
KINDS = ("full", "pandas", "read", "duckdb")


def _peak_rss_mib() -> float:
    # Linux reports ru_maxrss in KiB; /proc's VmHWM says the same, read it when present.
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def measure(what: str, root: Path) -> dict:
    ru0 = resource.getrusage(resource.RUSAGE_SELF)
    cpu0 = ru0.ru_utime + ru0.ru_stime
    t0 = time.perf_counter()
    detail: dict = {}
    if what == "full":
        from trainctl.analyzers import stragglers
        from trainctl.ops.diagnose.diagnosis import load_signals
        from trainctl.schemas import SignalKind

        t_imp = time.perf_counter()
        signals = load_signals(root)
        t1 = time.perf_counter()
        findings = stragglers.analyze(signals)
        detail = {
            # Both sides pay their own imports inside wall_s/cpu_s (here pandas, pyarrow.dataset,
            # DuckDB and trainctl; the reference only DuckDB); neither pays interpreter start-up.
            "imports_s": round(t_imp - t0, 3),
            "load_signals_s": round(t1 - t_imp, 3),
            "analyze_s": round(time.perf_counter() - t1, 3),
            "lazy": type(signals.source(SignalKind.TIMELINE)).__name__,
            "findings": [f.summary for f in findings],
        }
    elif what in ("pandas", "read"):
        import pyarrow.dataset as pads

        ds = pads.dataset(root / "timeline", format="parquet", partitioning="hive")
        table = ds.to_table()
        detail["rows"] = table.num_rows
        if what == "pandas":
            med = table.to_pandas().groupby(["rank", "phase"])["duration_ns"].median()
            detail["groups"] = len(med)
    elif what == "duckdb":
        import duckdb

        con = duckdb.connect()
        # Consume the medians (sum) so the optimizer cannot drop them, as it does under count(*).
        n, total = con.execute(
            f"SELECT count(*), sum(m) FROM (SELECT rank, phase, median(duration_ns) AS m "
            f"FROM read_parquet('{root}/timeline/*/*.parquet') GROUP BY ALL)"
        ).fetchone()
        detail["groups"] = n
    else:
        raise SystemExit(f"unknown measurement {what!r}")
    ru = resource.getrusage(resource.RUSAGE_SELF)
    # CPU seconds (all threads) alongside wall time: on a shared machine wall time mostly measures
    # the neighbours, CPU time what this path costs.
    return {
        "what": what,
        "wall_s": round(time.perf_counter() - t0, 3),
        "cpu_s": round(ru.ru_utime + ru.ru_stime - cpu0, 3),
        "peak_rss_mib": round(_peak_rss_mib(), 1),
        **detail,
    }


def _kinds(text: str) -> list[str]:
    kinds = [k.strip() for k in text.split(",") if k.strip()]
    unknown = [k for k in kinds if k not in KINDS]
    if not kinds or unknown:
        raise argparse.ArgumentTypeError(f"{text!r}: pick from {', '.join(KINDS)} (comma separated)")
    return kinds


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dir", type=Path, default=DEFAULT_DIR)
    ap.add_argument("--repeat", type=int, default=3)
    # A comma list runs those measurements interleaved in one run (`--only full,duckdb`: the
    # diagnosis and its DuckDB reference under the same neighbours, as issue 18 compares them).
    ap.add_argument("--only", type=_kinds, metavar="full,pandas,read,duckdb")
    ap.add_argument("--base", metavar="REV", help="also measure the full path of commit REV, after each `full`")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if not (args.dir / "timeline").is_dir():
        raise SystemExit(f"{args.dir}: no timeline; run bench/gen_timeline.py first")
    if args.child:
        print(json.dumps(measure(args.only[0], args.dir)))
        return
    size_mb = sum(p.stat().st_size for p in (args.dir / "timeline").rglob("*.parquet")) / 1e6
    print(
        f"# {platform.node()} {platform.machine()} cpus={os.cpu_count()} load={os.getloadavg()[0]:.1f} "
        f"python={platform.python_version()} data={args.dir} ({size_mb:.0f} MB)",
        flush=True,
    )
    kinds = args.only or ["full", "read", "duckdb", "pandas"]
    with tempfile.TemporaryDirectory(prefix="straggler-base-") as tmp:
        env = {}
        if args.base:
            from collect_cpu_ab import base_tree  # bench/ is this script's folder

            env["base"] = {**os.environ, "PYTHONPATH": str(base_tree(args.base, Path(tmp)))}
            kinds = [k for kind in kinds for k in ((kind, "base") if kind == "full" else (kind,))]
        # Interleaved rounds, so a noisy neighbour hits every measurement alike.
        for rnd in range(args.repeat):
            for what in kinds:
                out = subprocess.run(
                    [sys.executable, __file__, "--dir", str(args.dir), "--only", "full" if what == "base" else what]
                    + ["--child"],
                    capture_output=True,
                    text=True,
                    check=True,
                    env=env.get(what),
                )
                res = json.loads(out.stdout.strip().splitlines()[-1])
                res.update(what=what, round=rnd, load1=round(os.getloadavg()[0], 1))
                print(json.dumps(res), flush=True)


if __name__ == "__main__":
    main()
