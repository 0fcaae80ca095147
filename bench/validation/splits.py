"""Dev and held-out scenario lists for the faulty-host validation, frozen before any tuning.

Two generators, two splits each:
- `fleetgen` (bench/validation/fleetgen.py, the second generator, written apart from the detector)
- `fleetsim` (trainctl/simulation/fleet.py, the first simulator, written with the detector)

Each split is a list drawn from its own master seed. `freeze` writes every scenario's full spec
and the sha256 of the data it generates to frozen/<split>.json; report.py regenerates the data,
refuses to score a scenario whose digest changed, and never moves a scenario between splits.
The held-out lists were frozen, committed and hashed before analyzers/faulty_hosts.py was changed
(git log bench/validation/frozen/heldout.json); tuning looks at dev only.

    .venv/bin/python bench/validation/splits.py freeze   # (re)writes frozen/dev.json, frozen/heldout.json
    .venv/bin/python bench/validation/splits.py check    # regenerates and compares every digest
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np
from fleetgen import FAULTS, draw_fleet, generate, spec_from_dict, spec_to_dict, table_sha256

from trainctl.simulation.fleet import (
    FAULT_KINDS,
    QUIRK_KINDS,
    FaultSpec,
    FleetScenario,
    QuirkSpec,
    host_names,
    simulate,
)

FROZEN = Path(__file__).resolve().parent / "frozen"
# heldout2 was drawn and frozen on 2026-11-25, after heldout had been scored and its misses read,
# and before the bench's harness passed pipeline roles: a held-out set nobody had looked at.
# heldout3 was drawn and frozen on 2026-11-26 (commit before any score on it), with the analyzer
# as it stood then: a third set nobody had looked at, because heldout's misses had been read.
MASTER_SEEDS = {"dev": 101, "heldout": 202, "heldout2": 303, "heldout3": 505}
FLEETSIM_SEEDS = {"dev": 2026, "heldout": 3030, "heldout2": 4040, "heldout3": 6060}
# fleetgen: per fault kind, single-fault fleets; two-fault fleets; clean fleets.
SIZES = {"dev": (3, 12, 20), "heldout": (6, 24, 24), "heldout2": (6, 24, 24), "heldout3": (6, 24, 24)}
FLEETSIM_SIZES = {
    "dev": (3, 6, 1, 20),
    "heldout": (4, 8, 2, 20),
    "heldout2": (4, 8, 2, 20),
    "heldout3": (4, 8, 2, 20),
}  # per kind, two-fault, per quirk, clean
# What --split accepts: one split, "both" (dev and the first held-out, the original pair) or "all".
SPLIT_CHOICES = [*MASTER_SEEDS, "both", "all"]


def splits_named(choice: str) -> list[str]:
    return {"both": ["dev", "heldout"], "all": list(MASTER_SEEDS)}.get(choice, [choice])


def fleetgen_specs(split: str) -> list[dict[str, Any]]:
    rng = np.random.default_rng(MASTER_SEEDS[split])
    per_kind, two, clean = SIZES[split]
    out = []
    for kind in FAULTS:
        for i in range(per_kind):
            out.append(draw_fleet(rng, f"{kind}#{i}", [kind]))
    kinds = list(FAULTS)
    for i in range(two):
        pair = [str(k) for k in rng.choice(kinds, 2, replace=False)]
        out.append(draw_fleet(rng, f"two:{pair[0]}+{pair[1]}#{i}", pair))
    for i in range(clean):
        out.append(draw_fleet(rng, f"clean#{i}", []))
    return [spec_to_dict(s) for s in out]


def fleetsim_scenarios(split: str, hosts: int = 32, seconds: int = 900) -> list[dict[str, Any]]:
    """The first simulator's fleets: its faults among its healthy quirks (as bench/faulty_hosts.py)."""
    rng = np.random.default_rng(FLEETSIM_SEEDS[split])
    per_kind, two, per_quirk, clean = FLEETSIM_SIZES[split]
    names = host_names(hosts)
    host_quirks = [q for q in QUIRK_KINDS if q != "fleet_pause"]
    out: list[FleetScenario] = []

    def quirks(avoid: set[str], n: int) -> tuple[QuirkSpec, ...]:
        free = [h for h in names if h not in avoid]
        picks = rng.choice(len(free), n, replace=False)
        qs = [QuirkSpec(str(rng.choice(host_quirks)), free[i]) for i in picks]
        if rng.random() < 0.5:
            qs.append(QuirkSpec("fleet_pause", None, float(rng.uniform(200, seconds - 100))))
        return tuple(qs)

    def seed() -> int:
        return int(rng.integers(1 << 30))

    for kind in FAULT_KINDS:
        for s in range(per_kind):
            h = names[int(rng.integers(0, hosts))]
            f = FaultSpec(kind, h, float(rng.uniform(120, seconds - 300)))
            out.append(FleetScenario(hosts, 8, seconds, (f,), quirks({h}, 3), seed=seed(), name=f"{kind}#{s}"))
    for s in range(two):
        hs = [names[i] for i in rng.choice(hosts, 2, replace=False)]
        ks = rng.choice(list(FAULT_KINDS), 2, replace=False)
        fs = tuple(FaultSpec(str(k), h, float(rng.uniform(120, seconds - 300))) for k, h in zip(ks, hs))
        out.append(FleetScenario(hosts, 8, seconds, fs, quirks(set(hs), 3), seed=seed(), name=f"two-faults#{s}"))
    for q in QUIRK_KINDS:
        for s in range(per_quirk):
            h = names[int(rng.integers(0, hosts))]
            qs = (
                (QuirkSpec(q, None, float(rng.uniform(200, seconds - 100))),)
                if q == "fleet_pause"
                else (QuirkSpec(q, h),)
            )
            out.append(FleetScenario(hosts, 8, seconds, (), qs + quirks({h}, 2), seed=seed(), name=f"quirk-{q}#{s}"))
    for s in range(clean):
        out.append(FleetScenario(hosts, 8, seconds, (), quirks(set(), 3), seed=seed(), name=f"clean#{s}"))
    return [asdict(s) for s in out]


def fleetsim_from_dict(d: dict[str, Any]) -> FleetScenario:
    d = dict(d)
    d["faults"] = tuple(FaultSpec(**f) for f in d["faults"])
    d["quirks"] = tuple(QuirkSpec(**q) for q in d["quirks"])
    return FleetScenario(**d)


def build(generator: str, d: dict[str, Any]) -> tuple[Any, Any, dict[str, Any]]:
    """(gpu_metrics, host_metrics, labels) of one frozen scenario."""
    if generator == "fleetgen":
        g = generate(spec_from_dict(d))
        return g.gpu_metrics, g.host_metrics, g.labels
    r = simulate(fleetsim_from_dict(d))
    return r.gpu_metrics, r.host_metrics, r.labels


def freeze(split: str) -> Path:
    FROZEN.mkdir(exist_ok=True)
    doc: dict[str, Any] = {"split": split, "generators": {}}
    for generator, specs in (("fleetgen", fleetgen_specs(split)), ("fleetsim", fleetsim_scenarios(split))):
        rows = []
        for d in specs:
            gm, hm, _ = build(generator, d)
            rows.append({"spec": d, "sha256": table_sha256(gm, hm)})
            print(f"{split} {generator} {d['name']}: {rows[-1]['sha256'][:12]}", file=sys.stderr)
        doc["generators"][generator] = rows
    path = FROZEN / f"{split}.json"
    path.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")
    return path


def load(split: str) -> dict[str, Any]:
    return json.loads((FROZEN / f"{split}.json").read_text())


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("action", choices=["freeze", "check"])
    ap.add_argument("--split", choices=SPLIT_CHOICES, default="both")
    a = ap.parse_args()
    for split in splits_named(a.split):
        if a.action == "freeze":
            print(freeze(split))
            continue
        bad = 0
        for generator, rows in load(split)["generators"].items():
            for row in rows:
                gm, hm, _ = build(generator, row["spec"])
                if table_sha256(gm, hm) != row["sha256"]:
                    bad += 1
                    print(f"{split} {generator} {row['spec']['name']}: digest changed", file=sys.stderr)
        print(f"{split}: {'all digests match' if not bad else f'{bad} digests changed'}")
        if bad:
            sys.exit(1)


if __name__ == "__main__":
    main()
