"""A/B: per-window median (before) vs quantile_cont(v, [0.25, 0.5]) (stragglers now) in one DuckDB pass.

.venv/bin/python bench/gen_timeline.py --ranks 2048 --steps 1000 --out /tmp/integ_tl2048
.venv/bin/python bench/straggler_quantile_ab.py
"""

import glob
import resource
import time

import duckdb

files = sorted(glob.glob("/tmp/integ_tl2048/timeline/*/*.parquet"))
lst = ", ".join(f"'{f}'" for f in files)
aggs = {
    "median (before)": "median(duration_ns::DOUBLE) AS v",
    "quantile_cont [0.25, 0.5] (now)": "quantile_cont(duration_ns::DOUBLE, [0.25, 0.5]) AS qs",
}
res = {k: [] for k in aggs}
con = duckdb.connect()
for _ in range(3):
    for name, agg in aggs.items():
        r0 = resource.getrusage(resource.RUSAGE_SELF)
        t0 = time.perf_counter()
        n = con.execute(
            f"SELECT count(*) FROM (SELECT rank, phase, step // 100 AS win, {agg} FROM read_parquet([{lst}]) "
            f"WHERE phase IN ('backward','communication','data','forward','optimizer') AND step % 8 = 0 GROUP BY ALL)"
        ).fetchone()[0]
        r1 = resource.getrusage(resource.RUSAGE_SELF)
        res[name].append((time.perf_counter() - t0, r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime))
for k, v in res.items():
    print(k, "wall", [round(a, 2) for a, _ in v], "cpu", [round(b, 2) for _, b in v], "groups", n)
