"""Equivalence check for speed work on the faulty-host analyzer: the findings of another revision's
analyzer and this tree's must be identical, field for field (evidence, timestamps, order), on every
frozen scenario, from in-memory tables and, every Nth scenario, from the same tables written as a
Parquet dataset (the path `trainctl diagnose` takes at scale: footers, skipped columns).

    .venv/bin/python bench/validation/same_findings.py --rev 1990597 [--every 4] [--split dev]

Exits 1 and names the scenarios whose findings differ. report.py scores accuracy; this one only
says whether anything changed.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from report import baseline_detector, run_info_of
from splits import build, load

from trainctl.analyzers.faulty_hosts import find_faulty_hosts, pipeline_roles
from trainctl.dataset import open_dataset, write_table
from trainctl.schemas import SignalKind


def _dump(findings: list[Any]) -> str:
    return json.dumps([f.to_dict() for f in findings], sort_keys=True, default=str)


def _write(root: str, kind: SignalKind, t: Any) -> None:
    if not isinstance(t, pa.Table):
        t = pa.Table.from_pandas(t, preserve_index=False)
    hosts = t.column("host")
    for h in sorted(set(hosts.to_pylist())):
        write_table(root, kind, h, t.filter(pc.equal(hosts, h)), part="x")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rev", required=True, help="git revision of the analyzer to compare with")
    ap.add_argument("--every", type=int, default=4, help="also compare from Parquet on every Nth scenario")
    ap.add_argument("--split", choices=["dev", "heldout", "heldout2", "all"], default="all")
    a = ap.parse_args()
    base = baseline_detector(a.rev)
    differ: list[str] = []
    n_tables = n_datasets = 0
    for split in ["dev", "heldout", "heldout2"] if a.split == "all" else [a.split]:
        for gen in ("fleetgen", "fleetsim"):
            for k, row in enumerate(load(split)["generators"][gen]):
                gm, hm, labels = build(gen, row["spec"])
                roles = pipeline_roles(run_info_of(labels))
                kw = {"peer_groups": roles} if roles else {}
                name = f"{split}/{gen}/{row['spec']['name']}"
                n_tables += 1
                if _dump(find_faulty_hosts(gm, hm, **kw)) != _dump(base(gm, hm, **kw)):
                    differ.append(f"{name} (tables)")
                if k % a.every:
                    continue
                with tempfile.TemporaryDirectory() as d:
                    _write(d, SignalKind.GPU_METRICS, gm)
                    _write(d, SignalKind.HOST_METRICS, hm)
                    g, h = open_dataset(d, SignalKind.GPU_METRICS), open_dataset(d, SignalKind.HOST_METRICS)
                    n_datasets += 1
                    if _dump(find_faulty_hosts(g, h, **kw)) != _dump(base(g, h, **kw)):
                        differ.append(f"{name} (dataset)")
            print(
                f"{split}/{gen}: so far {n_tables} from tables, {n_datasets} from datasets, {len(differ)} differ",
                file=sys.stderr,
            )
    for name in differ:
        print(f"differs: {name}", file=sys.stderr)
    sys.exit(1 if differ else 0)


if __name__ == "__main__":
    main()
