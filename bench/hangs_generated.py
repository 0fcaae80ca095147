"""Hang culprits on NCCL-format dumps of a 16-rank pp x tp x ep job: trainctl vs its previous
analyzer vs torch's fr_trace, on the same dumps.

    .venv/bin/python bench/hangs_generated.py [--baseline-ref main] [--buffers 8,40,2000] [--fuzz 150]
        [--p2p single,batched] [--fr-trace]

Dumps: tests/fixtures/hangs/fr_job.py (FlightRecorder + ProcessGroupNCCL modelled from torch
2.13's source), Megatron-style layout (pp 4 x tp 2 x dp/ep 2), each rank as the culprit that stops
at 7 points of its program, per buffer size, with single send/recv and with batch_isend_irecv. "exact": the culprit and nobody else named by a
critical finding; "healthy named": some healthy rank named (its confidence max in brackets).
--fuzz N adds N seeded cases mixing single/batched p2p, missing dumps, ranks with recording off, stuck kernels, NCCL
timing and all three file formats (trainctl only). --fr-trace also runs torch's analyzer on the
2000-entry grid (slow: a process per case).
"""

from __future__ import annotations

import argparse
import importlib.util
import random
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "fixtures" / "hangs"))
import fr_job as J  # noqa: E402

from trainctl.ops.diagnose.diagnosis import diagnose_path  # noqa: E402
from trainctl.rundir import read_run_info  # noqa: E402
from trainctl.schemas import SignalKind  # noqa: E402

TP, PP, DP = 2, 4, 2
WORLD = TP * PP * DP
GROUPS, _ = J.megatron_groups(TP, PP, DP)
PROGRAMS = {"single": J.megatron_programs(TP, PP, DP), "batched": J.megatron_programs(TP, PP, DP, batched=True)}
HOSTS = J.megatron_hosts(WORLD)
NAMED = {}
for g in GROUPS[1:]:
    NAMED.setdefault(g.desc, []).append(g.ranks)


def _baseline(ref: str):
    """The analyzer and collector of `ref`, loaded under other names."""
    mods = {}
    tmp = Path(tempfile.mkdtemp())
    for name, path in (("base_fr", "collectors/flight_recorder.py"), ("base_hangs", "analyzers/hangs.py")):
        src = subprocess.run(["git", "show", f"{ref}:{path}"], cwd=ROOT, capture_output=True, text=True, check=True)
        f = tmp / f"{name}.py"
        f.write_text(src.stdout)
        spec = importlib.util.spec_from_file_location(name, f)
        m = importlib.util.module_from_spec(spec)
        sys.modules[name] = m
        spec.loader.exec_module(m)
        mods[name] = m
    return mods["base_fr"], mods["base_hangs"]


def _score(named: dict[int, float], culprit: int, stats: dict) -> None:
    stats["cases"] += 1
    wrong = {r: c for r, c in named.items() if r != culprit}
    if set(named) == {culprit}:
        stats["exact"] += 1
    if wrong:
        stats["healthy named"] += 1
        stats["max conf"] = max(stats["max conf"], max(wrong.values()))
        if max(wrong.values()) >= 0.75:
            stats["healthy named >=0.75"] += 1
    if culprit not in named:
        stats["culprit missed"] += 1


def _new() -> dict:
    return {"cases": 0, "exact": 0, "healthy named": 0, "healthy named >=0.75": 0, "culprit missed": 0, "max conf": 0.0}


def _fr_trace(out: Path) -> set[int]:
    flat = out / "flat"
    flat.mkdir()
    for p in (out / "fr").glob("*/rank-*.pkl"):
        (flat / f"nccl_trace_rank_{p.stem.split('-')[1]}").write_bytes(p.read_bytes())
    res = subprocess.run(
        [sys.executable, "-m", "torch.distributed.flight_recorder.fr_trace", str(flat), "-p", "nccl_trace_rank_"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    text = res.stdout + res.stderr
    named = {int(x) for m in re.finditer(r"missing ranks: \{([\d, ]+)\}", text) for x in m.group(1).split(",")}
    named |= {int(x) for x in re.findall(r"Culprit rank (\d+)", text)}
    return named


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--baseline-ref", default="main")
    ap.add_argument("--buffers", default="8,40,2000")
    ap.add_argument("--fuzz", type=int, default=150)
    ap.add_argument("--fr-trace", action="store_true")
    ap.add_argument("--p2p", default="single,batched")
    a = ap.parse_args()
    base_fr, base_hangs = _baseline(a.baseline_ref)
    t0 = time.time()
    for variant, buf in [(v, b) for v in a.p2p.split(",") for b in map(int, a.buffers.split(","))]:
        programs = PROGRAMS[variant]
        mine, base, torch_fr = _new(), _new(), _new()
        for culprit in range(WORLD):
            n = len(programs[culprit])
            for k in sorted({1, 5, 9, n // 3, n // 2, n - 3, n - 1}):
                job = J.Job(WORLD, GROUPS, programs, stop_at={culprit: k}, buffer_size=buf).run()
                with tempfile.TemporaryDirectory() as d:
                    out = Path(d)
                    job.write(out, hosts=HOSTS)
                    J.run_json(out, HOSTS, NAMED, {"tp": TP, "pp": PP, "dp": DP})
                    fs = [f for f in diagnose_path(out).findings if f.severity.value == "critical"]
                    _score({r: f.confidence for f in fs for r in f.ranks}, culprit, mine)
                    dumps = base_fr.load_dumps(base_fr.find_dumps(out / "fr", max_depth=1), root=out / "fr")
                    t = base_fr.dumps_to_tables(dumps)
                    bs = base_hangs.analyze_hangs(
                        t[SignalKind.COLLECTIVES].to_pandas(),
                        t[SignalKind.PG_STATUS].to_pandas(),
                        None,
                        read_run_info(out),
                    )
                    _score(
                        {r: f.confidence for f in bs if f.severity.value == "critical" for r in f.ranks}, culprit, base
                    )
                    if a.fr_trace and buf == 2000 and variant == "single":
                        _score(dict.fromkeys(_fr_trace(out), 1.0), culprit, torch_fr)
        print(f"{variant} p2p, buffer {buf}: trainctl {mine}")
        print(f"{variant} p2p, buffer {buf}: {a.baseline_ref} {base}")
        if torch_fr["cases"]:
            print(f"{variant} p2p, buffer {buf}: torch fr_trace {torch_fr}")
    if a.fuzz:
        rng = random.Random(20261124)
        stats = _new()
        for _ in range(a.fuzz):
            programs = PROGRAMS[rng.choice(["single", "batched"])]
            culprit = rng.randrange(WORLD)
            k = rng.randrange(len(programs[culprit]))
            healthy = [r for r in range(WORLD) if r != culprit]
            missing = rng.sample(healthy, rng.choice([0, 0, 1, 2]))
            disabled = frozenset(rng.sample(healthy, rng.choice([0, 0, 1])))
            stuck = rng.random() < 0.2
            job = J.Job(
                WORLD,
                GROUPS,
                programs,
                stop_at={} if stuck else {culprit: k},
                stuck_kernel_at={culprit: k} if stuck else {},
                buffer_size=rng.choice([4, 8, 16, 64, 2000]),
                timing=rng.random() < 0.5,
                disabled=disabled,
            ).run()
            with tempfile.TemporaryDirectory() as d:
                out = Path(d)
                job.write(out, hosts=HOSTS, fmt=rng.choice(["pickle", "json", "raw"]), missing=missing)
                J.run_json(out, HOSTS, NAMED, {"tp": TP, "pp": PP, "dp": DP})
                fs = [f for f in diagnose_path(out).findings if f.severity.value == "critical"]
                _score({r: f.confidence for f in fs for r in f.ranks}, culprit, stats)
        print(f"fuzz ({a.fuzz} mixed cases): trainctl {stats}")
    print(f"wall {time.time() - t0:.0f} s")


if __name__ == "__main__":
    main()
