"""Score the faulty-host analyzer on the frozen splits of both generators (BENCHMARKS.md, "Faulty hosts").

For each generator (fleetgen: the second generator; fleetsim: the first simulator) and split (dev,
held-out): regenerate every frozen scenario, refuse it if its sha256 changed, run the analyzer the
way `trainctl diagnose` does (find_faulty_hosts, then consolidate: one finding per host) and score
hosts: a host is flagged when a faulty_host finding names it.

- precision, recall over faulty hosts; category accuracy = flagged faulty hosts whose primary
  category is the label's; hosts flagged on clean fleets (no fault injected) must be 0.
- per fault kind: recall and category hits; the false-positive and missed cases, named.
- `--detector baseline` scores the analyzer as it is on another git revision (default main), loaded
  from `git show REV:analyzers/faulty_hosts.py`, for the before/after comparison in the same run.

    .venv/bin/python bench/validation/report.py --split dev            # tuning: dev only
    .venv/bin/python bench/validation/report.py --split both --json out.json --markdown
"""

from __future__ import annotations

import argparse
import importlib.util
import inspect
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from fleetgen import table_sha256
from splits import SPLIT_CHOICES, build, load, splits_named

from trainctl.analyzers.consolidate import consolidate
from trainctl.analyzers.faulty_hosts import find_faulty_hosts, pipeline_roles
from trainctl.rundir import HostRanks, RunInfo

ROOT = Path(__file__).resolve().parents[2]


def baseline_detector(rev: str) -> Any:
    src = subprocess.run(
        ["git", "-C", str(ROOT), "show", f"{rev}:analyzers/faulty_hosts.py"], check=True, capture_output=True, text=True
    ).stdout
    d = tempfile.mkdtemp(prefix="trainctl-baseline-")
    path = Path(d) / "faulty_hosts_baseline.py"
    path.write_text(src)
    spec = importlib.util.spec_from_file_location("faulty_hosts_baseline", path)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses look their module up while the class is built
    spec.loader.exec_module(mod)
    return mod.find_faulty_hosts


def run_info_of(labels: dict[str, Any], gpus_per_host: int = 8) -> RunInfo | None:
    """The RunInfo `trainctl launch` would have written for this fleet: 8 ranks per host in host order,
    and the pipeline grid when the fleet has stages (fleetgen puts host i in stage i * S // H, which is
    Megatron's rank order). diagnose passes pipeline_roles(RunInfo) to the analyzer; so does the bench."""
    stages = int((labels.get("fleet") or {}).get("pp_stages") or 1)
    hosts = labels.get("hosts") or []
    if stages <= 1 or not hosts or (len(hosts) * gpus_per_host) % stages:
        return None
    world = len(hosts) * gpus_per_host
    return RunInfo(
        run_id=str(labels.get("name")),
        world_size=world,
        nproc_per_node=gpus_per_host,
        hosts=tuple(
            HostRanks(h, tuple(range(i * gpus_per_host, (i + 1) * gpus_per_host))) for i, h in enumerate(hosts)
        ),
        layout={"pp": stages, "dp": world // stages, "tp": 1},
    )


def score(split: str, generator: str, detect: Any, *, limit: int | None = None) -> dict[str, Any]:
    rows = load(split)["generators"][generator]
    if limit:
        rows = rows[:limit]
    tp = fp = fn = cat_ok = 0
    clean_fleets = clean_flagged = 0
    by_kind: dict[str, dict[str, int]] = defaultdict(lambda: {"faults": 0, "found": 0, "category_ok": 0})
    fp_cases, fn_cases, cat_cases = [], [], []
    cpu = 0.0
    for row in rows:
        gm, hm, labels = build(generator, row["spec"])
        if table_sha256(gm, hm) != row["sha256"]:
            raise SystemExit(
                f"{split}/{generator}/{row['spec']['name']}: generated data differs from the frozen digest"
            )
        c0 = time.process_time()
        found = consolidate(detect(gm, hm, peer_groups=pipeline_roles(run_info_of(labels))))
        cpu += time.process_time() - c0
        flagged = {f.hosts[0]: f for f in found if f.kind.value == "faulty_host" and len(f.hosts) == 1}
        truth: dict[str, dict[str, Any]] = {}
        for f in labels["faults"]:
            truth.setdefault(f["host"], f)
        if not truth:
            clean_fleets += 1
            clean_flagged += len(flagged)
        for h, f in flagged.items():
            cat = f.category.value if f.category else None
            if h in truth:
                tp += 1
                ok = cat == truth[h]["category"]
                cat_ok += ok
                by_kind[truth[h]["kind"]]["found"] += 1
                by_kind[truth[h]["kind"]]["category_ok"] += ok
                if not ok:
                    cat_cases.append(f"{row['spec']['name']}: {h} {truth[h]['kind']} -> {cat}: {f.summary[:140]}")
            else:
                fp += 1
                fp_cases.append(f"{row['spec']['name']}: {h} {cat}: {f.summary[:160]}")
        for h, t in truth.items():
            by_kind[t["kind"]]["faults"] += 1
            if h not in flagged:
                fn += 1
                fn_cases.append(f"{row['spec']['name']}: {h} {t['kind']} onset {t.get('onset_s')}")
    p = tp / max(1, tp + fp)
    r = tp / max(1, tp + fn)
    return {
        "split": split,
        "generator": generator,
        "fleets": len(rows),
        "faulty_hosts": tp + fn,
        "precision": round(p, 4),
        "recall": round(r, 4),
        "category_accuracy": round(cat_ok / max(1, tp), 4),
        "tp": tp,
        "fp": fp,
        "fn": fn,
        "category_ok": cat_ok,
        "clean_fleets": clean_fleets,
        "hosts_flagged_on_clean_fleets": clean_flagged,
        "analyze_cpu_s_per_fleet": round(cpu / max(1, len(rows)), 3),
        "by_kind": {k: dict(v) for k, v in sorted(by_kind.items())},
        # Named cases, the first 100 of each (the counts above are complete).
        "fp_cases": fp_cases[:100],
        "fn_cases": fn_cases[:100],
        "category_misses": cat_cases[:100],
    }


def markdown(results: list[dict[str, Any]]) -> str:
    head = (
        "| generator | split | fleets | faulty hosts | precision | recall | category accuracy | FP hosts | "
        "hosts flagged on clean fleets |\n|---|---|---|---|---|---|---|---|---|\n"
    )
    lines = []
    for r in results:
        lines.append(
            f"| {r['generator']} | {r['split']} | {r['fleets']} | {r['faulty_hosts']} | {r['precision']:.3f} | "
            f"{r['recall']:.3f} | {r['category_accuracy']:.3f} ({r['category_ok']}/{r['tp']}) | {r['fp']} | "
            f"{r['hosts_flagged_on_clean_fleets']} ({r['clean_fleets']} fleets) |"
        )
    return head + "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--split", choices=SPLIT_CHOICES, default="dev")
    ap.add_argument("--generator", choices=["fleetgen", "fleetsim", "both"], default="both")
    ap.add_argument("--detector", choices=["current", "baseline"], default="current")
    ap.add_argument("--rev", default="main", help="git revision of the baseline analyzer")
    ap.add_argument("--limit", type=int, help="first N scenarios per list (quick looks)")
    ap.add_argument("--kw", action="append", default=[], help="NAME=VALUE keyword for the detector (ablations)")
    ap.add_argument("--json", type=Path)
    ap.add_argument("--markdown", action="store_true")
    ap.add_argument("--cases", action="store_true", help="print the FP / missed / miscategorised cases")
    ap.add_argument(
        "--no-roles", action="store_true", help="do not pass pipeline roles (the harness before 2026-11-25)"
    )
    a = ap.parse_args()
    base = find_faulty_hosts if a.detector == "current" else baseline_detector(a.rev)
    kw = {k: float(v) for k, v in (x.split("=", 1) for x in a.kw)}

    takes_roles = "peer_groups" in inspect.signature(base).parameters

    def detect(gm: Any, hm: Any, peer_groups: Any = None) -> Any:
        roles = {"peer_groups": peer_groups} if peer_groups and takes_roles and not a.no_roles else {}
        return base(gm, hm, **kw, **roles)

    splits = splits_named(a.split)
    gens = ["fleetgen", "fleetsim"] if a.generator == "both" else [a.generator]
    results = []
    for split in splits:
        for gen in gens:
            r = score(split, gen, detect, limit=a.limit)
            results.append(r)
            brief = {k: v for k, v in r.items() if k not in ("fp_cases", "fn_cases", "category_misses", "by_kind")}
            print(json.dumps(brief), file=sys.stderr)
            if a.cases:
                for key in ("fp_cases", "fn_cases", "category_misses"):
                    for c in r[key]:
                        print(f"  {key[:-6] if key.endswith('_cases') else key}: {c}", file=sys.stderr)
    meta = {
        "detector": (a.detector if a.detector == "current" else f"baseline@{a.rev}")
        + (f" {kw}" if kw else "")
        + (" no-roles" if a.no_roles else ""),
        "machine": os.uname().nodename,
        "loadavg_1m": os.getloadavg()[0],
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
    }
    if a.markdown:
        print(markdown(results))
    if a.json:
        a.json.write_text(json.dumps({"meta": meta, "results": results}, indent=1))


if __name__ == "__main__":
    main()
