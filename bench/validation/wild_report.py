"""Score `trainctl diagnose --json` on fleetwild scenarios, as a user would run it.

    python bench/validation/wild_report.py --freeze              # write frozen/wild_{dev,heldout}.json
    python bench/validation/wild_report.py --split dev [--json OUT] [--jobs 2]
    python bench/validation/wild_report.py --split heldout

Each scenario of the frozen list is regenerated (bench/validation/fleetwild.py) into a temp dir and
checked against its frozen sha256 (a scenario whose data changed is refused, not scored); then
`.venv/bin/trainctl diagnose DIR --json` runs in a subprocess (exit 0 or 3 are answers; anything else,
a traceback or stdout that is not JSON is a CLI failure). A host is flagged when a `faulty_host`
finding names it in `hosts`; its category is right when one such finding's `category` equals the label.

Dev prints every false positive and miss with one line of what the data looked like; held-out prints
aggregates and per-kind counts only, so it stays unread for later tuning.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from collections import Counter, defaultdict
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pyarrow.compute as pc

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(HERE))
import fleetwild  # noqa: E402

FROZEN = HERE / "frozen"
SPLITS = {
    "dev": dict(path=FROZEN / "wild_dev.json", seed=20260511, faulty=25, clean=15, prefix="wdev"),
    "heldout": dict(path=FROZEN / "wild_heldout.json", seed=918273645, faulty=55, clean=25, prefix="wheld"),
}


def freeze() -> None:
    for name, cfg in SPLITS.items():
        specs = fleetwild.make_scenarios(cfg["seed"], cfg["faulty"], cfg["clean"], cfg["prefix"])
        entries = [{"spec": s, "sha256": fleetwild.tables_sha256(fleetwild.build_tables(s))} for s in specs]
        doc = {"generator": "bench/validation/fleetwild.py", "master_seed": cfg["seed"], "scenarios": entries}
        cfg["path"].write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")
        print(f"{name}: {len(entries)} scenarios -> {cfg['path'].relative_to(ROOT)}", file=sys.stderr)


def _describe(tables: dict, spec: dict, host: str) -> str:
    """One line of what the host's data looked like next to its peers (load samples only)."""

    def stats(h: str) -> dict:
        t = tables.get(("gpu_metrics", h))
        if t is None or t.num_rows == 0:
            return {}
        busy = pc.fill_null(pc.greater(t["sm_util_pct"], 50), False)
        b = t.filter(busy)
        out = {"rows": t.num_rows}
        for c in ("power_w", "temp_c", "sm_clock_mhz"):
            v = b[c].to_numpy(zero_copy_only=False).astype(float)
            v = v[~np.isnan(v)]
            out[c] = float(np.median(v)) if len(v) else float("nan")
            if c == "temp_c" and len(v):
                out["temp_max"] = float(v.max())
        thr = t["throttle_reasons"].drop_null().to_numpy()
        out["thr"] = int(np.bitwise_or.reduce(thr)) if len(thr) else 0
        out["xid"] = sorted(set(t["xid"].drop_null().to_pylist()))
        for c in ("ecc_dbe_total", "ecc_sbe_total", "nvlink_crc_errors_total"):
            v = t[c].drop_null().to_numpy()
            out[c] = int(v.max() - v.min()) if len(v) else None
        g = b["pcie_link_gen"].drop_null().to_numpy()
        w = b["pcie_link_width"].drop_null().to_numpy()
        out["pcie"] = f"gen{int(g.min()) if len(g) else '-'}x{int(w.min()) if len(w) else '-'}"
        return out

    me = stats(host)
    peers = [stats(h) for h in spec["hosts"] if h != host and spec["sku_by_host"][h] == spec["sku_by_host"][host]]
    peers = [p for p in peers if p]

    def med(k: str) -> float:
        v = [p[k] for p in peers if k in p and p[k] == p[k]]
        return float(np.median(v)) if v else float("nan")

    if not me:
        return f"{spec['sku_by_host'][host]}: no gpu rows"
    q = [f"{x['kind']}@{x['at_s']:.0f}s" for x in spec["quirks"] if x["host"] == host]
    return (
        f"{spec['sku_by_host'][host]} {spec['n_hosts']}h x{spec['gpus_per_host']} dt={spec['interval_s']:.0f}s "
        f"rows={me['rows']}(peers {med('rows'):.0f}) P={me['power_w']:.0f}W({med('power_w'):.0f}) "
        f"T={me['temp_c']:.0f}/{me.get('temp_max', float('nan')):.0f}C({med('temp_c'):.0f}/{med('temp_max'):.0f}) "
        f"clk={me['sm_clock_mhz']:.0f}({med('sm_clock_mhz'):.0f}) thr=0x{me['thr']:x} xid={me['xid']} "
        f"dDBE={me['ecc_dbe_total']} dSBE={me['ecc_sbe_total']} dCRC={me['nvlink_crc_errors_total']} {me['pcie']}"
        + (f" quirks={q}" if q else "")
    )


def _stderr_line(stderr: str) -> str:
    """stderr's last message: rich wraps a log record over lines, so the record is joined back together."""
    records: list[str] = []
    for line in stderr.strip().splitlines():
        if line[:1].isspace() and records:
            records[-1] += " " + line.strip()
        else:
            records.append(line.strip())
    records = [" ".join(r.split()) for r in records if r.strip()]
    bad = [r for r in records if any(w in r for w in ("Error", "error", "failed", "Traceback"))]
    return (bad or records or [""])[-1]


def run_one(entry: dict, timeout_s: int) -> dict:
    spec = entry["spec"]
    tables = fleetwild.build_tables(spec)
    got = fleetwild.tables_sha256(tables)
    res: dict = {"id": spec["id"], "labels": spec["labels"], "faults": [(f["kind"], f["host"]) for f in spec["faults"]]}
    if got != entry["sha256"]:
        res["refused"] = f"regenerated data sha256 {got[:12]} != frozen {entry['sha256'][:12]}"
        return res
    with tempfile.TemporaryDirectory(prefix="fleetwild-") as d:
        import pyarrow.parquet as pq

        for (kind, host), tbl in tables.items():
            p = Path(d) / kind / f"host={host}"
            p.mkdir(parents=True, exist_ok=True)
            pq.write_table(tbl, p / "part-0.parquet")
        cmd = [str(ROOT / ".venv" / "bin" / "trainctl"), "diagnose", d, "--json"]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
        except subprocess.TimeoutExpired:
            res["cli_failure"] = f"timeout after {timeout_s}s"
            return res
    err_last = _stderr_line(proc.stderr)
    if proc.returncode not in (0, 3) or "Traceback (most recent call last)" in proc.stderr:
        res["cli_failure"] = f"exit {proc.returncode}: {err_last}"
        return res
    try:
        doc = json.loads(proc.stdout)
    except json.JSONDecodeError as e:
        res["cli_failure"] = f"stdout not JSON ({e}); stderr: {err_last}"
        return res
    flagged: dict[str, list[str]] = defaultdict(list)
    for f in doc.get("findings", []):
        if f.get("kind") == "faulty_host":
            for h in f.get("hosts") or []:
                flagged[h].append(str(f.get("category")))
    res["flagged"] = dict(flagged)
    res["other_kinds"] = sorted({f.get("kind") for f in doc.get("findings", []) if f.get("kind") != "faulty_host"})
    wrong = [h for h in flagged if h not in spec["labels"]] + [h for h in spec["labels"] if h not in flagged]
    res["notes"] = {h: _describe(tables, spec, h) for h in wrong}
    return res


def score(results: list[dict], specs: dict[str, dict]) -> dict:
    tp = fp = fn = cat_ok = clean_flagged = 0
    kind_tot: Counter = Counter()
    kind_hit: Counter = Counter()
    kind_cat: Counter = Counter()
    fps, misses, failures, refused = [], [], [], []
    n_clean = 0
    for r in results:
        spec = specs[r["id"]]
        if "refused" in r:
            refused.append((r["id"], r["refused"]))
            continue
        if "cli_failure" in r:
            failures.append((r["id"], r["cli_failure"]))
            for f in spec["faults"]:
                kind_tot[f["kind"]] += 1
            fn += len(spec["labels"])
            continue
        labels, flagged = spec["labels"], r["flagged"]
        if not labels:
            n_clean += 1
            clean_flagged += len(flagged)
        for f in spec["faults"]:
            k, h = f["kind"], f["host"]
            kind_tot[k] += 1
            if h in flagged:
                kind_hit[k] += 1
                if labels[h] in flagged[h]:
                    kind_cat[k] += 1
        for h in flagged:
            if h in labels:
                tp += 1
                cat_ok += labels[h] in flagged[h]
            else:
                fp += 1
                fps.append(dict(id=r["id"], host=h, named=flagged[h], clean=not labels, data=r["notes"].get(h, "")))
        for h, lab in labels.items():
            if h not in flagged:
                fn += 1
                kind = next(f["kind"] for f in spec["faults"] if f["host"] == h)
                misses.append(dict(id=r["id"], host=h, label=lab, kind=kind, data=r["notes"].get(h, "")))
    return dict(
        scenarios=len(results),
        faulty_hosts=tp + fn,
        flagged=tp + fp,
        precision=tp / (tp + fp) if tp + fp else None,
        recall=tp / (tp + fn) if tp + fn else None,
        category_accuracy=cat_ok / tp if tp else None,
        clean_fleets=n_clean,
        clean_fleet_hosts_flagged=clean_flagged,
        per_kind={k: dict(n=kind_tot[k], found=kind_hit[k], category_ok=kind_cat[k]) for k in sorted(kind_tot)},
        false_positives=fps,
        misses=misses,
        cli_failures=failures,
        refused=refused,
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--split", choices=sorted(SPLITS), default="dev")
    ap.add_argument("--json", dest="json_out", type=Path)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--timeout", type=int, default=600, help="seconds per CLI run")
    ap.add_argument("--only", nargs="*", help="scenario ids (dev debugging)")
    ap.add_argument("--freeze", action="store_true", help="(re)write the frozen scenario lists and exit")
    a = ap.parse_args(argv)
    if a.freeze:
        freeze()
        return 0
    doc = json.loads(SPLITS[a.split]["path"].read_text())
    entries = doc["scenarios"]
    if a.only:
        entries = [e for e in entries if e["spec"]["id"] in set(a.only)]
    specs = {e["spec"]["id"]: e["spec"] for e in entries}
    done = 0

    def job(e: dict) -> dict:
        nonlocal done
        r = run_one(e, a.timeout)
        done += 1
        print(f"[{done}/{len(entries)}] {r['id']}", file=sys.stderr, flush=True)
        return r

    with ThreadPoolExecutor(max_workers=max(1, a.jobs)) as ex:
        results = list(ex.map(job, entries))
    s = score(results, specs)
    pct = lambda x: "n/a" if x is None else f"{x:.3f}"  # noqa: E731
    print(f"split={a.split} scenarios={s['scenarios']} faulty_hosts={s['faulty_hosts']} flagged={s['flagged']}")
    print(f"precision={pct(s['precision'])} recall={pct(s['recall'])} category_accuracy={pct(s['category_accuracy'])}")
    print(f"clean fleets={s['clean_fleets']} hosts flagged on clean fleets={s['clean_fleet_hosts_flagged']}")
    print("per fault kind (label): found/n, category right")
    for k, v in s["per_kind"].items():
        print(f"  {k:15s} ({fleetwild.FAULT_LABELS[k]:14s}) {v['found']}/{v['n']}  cat {v['category_ok']}")
    print(f"CLI failures: {len(s['cli_failures'])}")
    for sid, msg in s["cli_failures"]:
        print(f"  {sid}: {msg}")
    if s["refused"]:
        print(f"REFUSED (data no longer matches its frozen hash): {len(s['refused'])}")
        for sid, msg in s["refused"]:
            print(f"  {sid}: {msg}")
    out = dict(s)
    if a.split == "dev":
        print(f"false positives: {len(s['false_positives'])}")
        for x in s["false_positives"]:
            print(f"  FP {x['id']} {x['host']} named={x['named']} {'clean fleet' if x['clean'] else ''}: {x['data']}")
        print(f"misses: {len(s['misses'])}")
        for x in s["misses"]:
            print(f"  MISS {x['id']} {x['host']} {x['kind']}->{x['label']}: {x['data']}")
        out["results"] = results
    else:  # held-out: aggregates only
        out["false_positives"] = len(s["false_positives"])
        out["misses"] = len(s["misses"])
    if a.json_out:
        a.json_out.write_text(json.dumps(out, indent=1, default=str) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
