"""Benchmark of the faulty-host analyzer on simulated fleets (trainctl.simulation.fleet).

Accuracy: scenarios with one or two faults of every kind (13 kinds), healthy quirks (7 kinds) on
other hosts, quirk-only fleets and clean fleets; precision and recall of *faulty hosts* (a host is
flagged when a faulty_host finding names it), category accuracy (primary category == expected),
and detection delay from fault onset (the finding's detected_ts). Compared in the same run:
Minder's continuity (240 s), ours (120 s), 60 s, and no continuity (1 window). The held-out and
second-generator scores are bench/validation/report.py's; this script is the first simulator's
own scenarios, the magnitude sweep and the scale run.

Scale: 1,024 hosts x 8 GPUs x 15 min at 1 Hz (7.4M gpu_metrics rows), written as a dataset and
analysed the way `trainctl diagnose` does (lazy dataset -> needed columns -> analyzer); reports
wall and CPU seconds (user+sys, and each apart; on a shared machine CPU time is the honest measure).

    .venv/bin/python bench/faulty_hosts.py [--quick] [--skip-scale] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import numpy as np
import pandas as pd

from trainctl.analyzers.consolidate import consolidate
from trainctl.analyzers.faulty_hosts import find_faulty_hosts
from trainctl.dataset import open_dataset
from trainctl.schemas import SignalKind
from trainctl.simulation.fleet import (
    FAULT_KINDS,
    QUIRK_KINDS,
    FaultSpec,
    FleetScenario,
    QuirkSpec,
    host_names,
    simulate,
    write_fleet,
)

SETTINGS = {
    "ours (continuity 120 s)": {},
    "continuity 60 s": {"continuity_s": 60.0},
    "Minder continuity 240 s": {"continuity_s": 240.0},
    "no continuity (1 window)": {"continuity_s": 1.0, "continuity_fraction": 1.0},
    "window 16 samples": {"outlier_window": 16},
}
HOST_QUIRKS = [q for q in QUIRK_KINDS if q != "fleet_pause"]


def scenarios(seeds: int, hosts: int, seconds: int) -> list[FleetScenario]:
    rng = np.random.default_rng(2026)
    names = host_names(hosts)
    out = []

    def quirks(avoid: set[str], n: int) -> tuple[QuirkSpec, ...]:
        free = [h for h in names if h not in avoid]
        picks = rng.choice(len(free), n, replace=False)
        qs = [QuirkSpec(str(rng.choice(HOST_QUIRKS)), free[i]) for i in picks]
        if rng.random() < 0.5:
            qs.append(QuirkSpec("fleet_pause", None, float(rng.uniform(200, seconds - 100))))
        return tuple(qs)

    for kind in FAULT_KINDS:
        for s in range(seeds):
            h = names[int(rng.integers(0, hosts))]
            f = FaultSpec(kind, h, float(rng.uniform(120, seconds - 300)))
            out.append(
                FleetScenario(
                    hosts, 8, seconds, (f,), quirks({h}, 3), seed=int(rng.integers(1 << 30)), name=f"{kind}#{s}"
                )
            )
    for s in range(seeds * 2):  # two simultaneous faults of random kinds
        hs = [names[i] for i in rng.choice(hosts, 2, replace=False)]
        ks = rng.choice(list(FAULT_KINDS), 2, replace=False)
        fs = tuple(FaultSpec(str(k), h, float(rng.uniform(120, seconds - 300))) for k, h in zip(ks, hs))
        out.append(
            FleetScenario(
                hosts, 8, seconds, fs, quirks(set(hs), 3), seed=int(rng.integers(1 << 30)), name=f"two-faults#{s}"
            )
        )
    for q in QUIRK_KINDS:
        for s in range(seeds):
            h = names[int(rng.integers(0, hosts))]
            qs = (
                (QuirkSpec(q, None, float(rng.uniform(200, seconds - 100))),)
                if q == "fleet_pause"
                else (QuirkSpec(q, h),)
            )
            out.append(
                FleetScenario(
                    hosts, 8, seconds, (), qs + quirks({h}, 2), seed=int(rng.integers(1 << 30)), name=f"quirk-{q}#{s}"
                )
            )
    for s in range(seeds * 2):
        out.append(FleetScenario(hosts, 8, seconds, (), (), seed=int(rng.integers(1 << 30)), name=f"clean#{s}"))
    return out


def accuracy(seeds: int, hosts: int, seconds: int) -> dict:
    scs = scenarios(seeds, hosts, seconds)
    res = {
        name: {
            "tp": 0,
            "fp": 0,
            "fn": 0,
            "cat_ok": 0,
            "delays": defaultdict(list),
            "fp_cases": [],
            "fn_cases": [],
            "cpu_s": 0.0,
        }
        for name in SETTINGS
    }
    for sc in scs:
        sim = simulate(sc)
        truth = {f["host"]: f for f in sim.labels["faults"]}
        start_ns = sim.labels["start_ts_ns"]
        for name, kw in SETTINGS.items():
            c0 = time.process_time()
            found = consolidate(find_faulty_hosts(sim.gpu_metrics, sim.host_metrics, **kw))
            r = res[name]
            r["cpu_s"] += time.process_time() - c0
            flagged = {f.hosts[0]: f for f in found if f.hosts}
            for h, f in flagged.items():
                if h in truth:
                    r["tp"] += 1
                    r["cat_ok"] += int(f.category is not None and f.category.value == truth[h]["category"])
                    det = f.evidence.get("detected_ts")
                    if det:
                        delay = (pd.Timestamp(det).value - start_ns) / 1e9 - truth[h]["onset_s"]
                        r["delays"][truth[h]["kind"]].append(delay)
                else:
                    r["fp"] += 1
                    r["fp_cases"].append(f"{sc.name}: {h} {f.category.value if f.category else ''} {f.summary[:100]}")
            for h, t in truth.items():
                if h not in flagged:
                    r["fn"] += 1
                    r["fn_cases"].append(f"{sc.name}: {h} {t['kind']}")
    summary = {
        "scenarios": len(scs),
        "hosts": hosts,
        "seconds": seconds,
        "faults": sum(len(s.faults) for s in scs),
        "quirks": sum(len(s.quirks) for s in scs),
        "settings": {},
    }
    for name, r in res.items():
        p = r["tp"] / max(1, r["tp"] + r["fp"])
        rc = r["tp"] / max(1, r["tp"] + r["fn"])
        all_d = [d for v in r["delays"].values() for d in v]
        summary["settings"][name] = {
            "precision": round(p, 4),
            "recall": round(rc, 4),
            "f1": round(2 * p * rc / max(1e-9, p + rc), 4),
            "tp": r["tp"],
            "fp": r["fp"],
            "fn": r["fn"],
            "category_accuracy": round(r["cat_ok"] / max(1, r["tp"]), 4),
            "delay_s_median": round(statistics.median(all_d), 1) if all_d else None,
            "delay_s_p90": round(float(np.percentile(all_d, 90)), 1) if all_d else None,
            "delay_s_by_kind": {k: round(statistics.median(v), 1) for k, v in sorted(r["delays"].items())},
            "analyze_cpu_s_per_scenario": round(r["cpu_s"] / len(scs), 3),
            "fp_cases": r["fp_cases"][:10],
            "fn_cases": r["fn_cases"][:10],
        }
    return summary


def magnitude_sweep(seeds: int, hosts: int, seconds: int) -> dict:
    """Where the quiet-fault detection stops: recall by fault strength (1.0 = the default effect)."""
    rng = np.random.default_rng(7)
    names = host_names(hosts)
    out: dict = {}
    for kind in ("quiet_slowdown", "nic_degraded", "cpu_contention"):
        for m in (0.1, 0.2, 0.35, 0.5, 1.0):
            hit, fp = 0, 0
            for _ in range(seeds):
                h = names[int(rng.integers(0, hosts))]
                sc = FleetScenario(
                    hosts, 8, seconds, (FaultSpec(kind, h, 300.0, magnitude=m),), seed=int(rng.integers(1 << 30))
                )
                sim = simulate(sc)
                flagged = {f.hosts[0] for f in consolidate(find_faulty_hosts(sim.gpu_metrics, sim.host_metrics))}
                hit += int(h in flagged)
                fp += len(flagged - {h})
            out[f"{kind}@{m}"] = {"recall": hit / seeds, "false_hosts": fp}
    return out


def _baseline(rev: str = "main"):
    """The analyzer as it is on another git revision, for an A/B in the same run."""
    import importlib.util
    import subprocess

    root = Path(__file__).resolve().parents[1]
    src = subprocess.run(
        ["git", "-C", str(root), "show", f"{rev}:analyzers/faulty_hosts.py"], check=True, capture_output=True, text=True
    ).stdout
    path = Path(tempfile.mkdtemp(prefix="trainctl-baseline-")) / "faulty_hosts_baseline.py"
    path.write_text(src)
    spec = importlib.util.spec_from_file_location("faulty_hosts_baseline", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses look their module up while the class is built
    spec.loader.exec_module(mod)
    return mod.find_faulty_hosts


def scale(hosts: int = 1024, gpus: int = 8, seconds: int = 900, reps: int = 3, baseline: str | None = "main") -> dict:
    """Load + analyse a 1,024-host fleet from Parquet as `trainctl diagnose` does; with `baseline`,
    the other revision's analyzer runs on the same files, alternating, so machine load hits both."""
    faults = (
        FaultSpec("quiet_slowdown", host_names(hosts)[99], 300),
        FaultSpec("ecc_dbe", host_names(hosts)[499], 300),
        FaultSpec("nic_degraded", host_names(hosts)[799], 400),
    )
    sc = FleetScenario(
        hosts,
        gpus,
        seconds,
        faults,
        (QuirkSpec("fleet_pause", None, 600), QuirkSpec("sw_power_cap", host_names(hosts)[5])),
        seed=11,
    )
    t = time.time()
    sim = simulate(sc)
    gen_s = time.time() - t
    detectors = {"current": find_faulty_hosts}
    if baseline:
        detectors[f"baseline@{baseline}"] = _baseline(baseline)
    runs: dict[str, list[tuple[float, float, float]]] = {k: [] for k in detectors}  # wall, user, system
    found: dict[str, list] = {}
    with tempfile.TemporaryDirectory(prefix="trainctl-bench-") as d:
        t = time.time()
        write_fleet(sim, d)
        write_s = time.time() - t
        del sim
        for _ in range(reps):
            for name, detect in detectors.items():
                t, ru = time.time(), resource.getrusage(resource.RUSAGE_SELF)
                g, h = open_dataset(d, SignalKind.GPU_METRICS), open_dataset(d, SignalKind.HOST_METRICS)
                rows = g.count_rows()
                out = consolidate(detect(g, h))
                end = resource.getrusage(resource.RUSAGE_SELF)
                runs[name].append((time.time() - t, end.ru_utime - ru.ru_utime, end.ru_stime - ru.ru_stime))
                found[name] = sorted((f.hosts[0], f.category.value) for f in out)
    return {
        "hosts": hosts,
        "gpus": gpus,
        "seconds": seconds,
        "gpu_rows": rows,
        "simulate_s": round(gen_s, 1),
        "write_s": round(write_s, 1),
        "reps": reps,
        "load_and_analyze": {
            name: {
                "wall_s_median": round(statistics.median(w for w, _, _ in r), 2),
                "cpu_s_median": round(statistics.median(u + s for _, u, s in r), 2),
                # System time apart: on the dev VM first-touching fresh memory is most of it.
                "user_s_median": round(statistics.median(u for _, u, _ in r), 2),
                "sys_s_median": round(statistics.median(s for _, _, s in r), 2),
                "wall_s_all": [round(w, 2) for w, _, _ in r],
            }
            for name, r in runs.items()
        },
        "found": found,
        "expected": sorted((f.host, FAULT_KINDS[f.kind]) for f in faults),
        "loadavg_1m": os.getloadavg()[0],
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="2 seeds per kind instead of 4")
    ap.add_argument("--skip-scale", action="store_true")
    ap.add_argument("--skip-accuracy", action="store_true")
    ap.add_argument("--json", type=Path)
    ap.add_argument("--reps", type=int, default=3, help="scale: load+analyse repetitions per detector")
    ap.add_argument("--baseline", default="main", help="scale: git revision to compare with ('' for none)")
    a = ap.parse_args()
    out: dict = {}
    if not a.skip_accuracy:
        out["accuracy"] = accuracy(2 if a.quick else 4, 32, 900)
        print(json.dumps(out["accuracy"], indent=1), file=sys.stderr)
    if not a.skip_accuracy:
        out["magnitude"] = magnitude_sweep(2 if a.quick else 4, 32, 900)
        print(json.dumps(out["magnitude"], indent=1), file=sys.stderr)
    if not a.skip_scale:
        out["scale"] = scale(reps=a.reps, baseline=a.baseline or None)
        print(json.dumps(out["scale"], indent=1), file=sys.stderr)
    if a.json:
        a.json.write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
