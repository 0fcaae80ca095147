"""Score `trainctl diagnose` (and torch's own analyzer) on the Flight Recorder dumps frwild.py wrote.

    .venv/bin/python bench/validation/frwild_report.py /tmp/frwild [SCENARIO ...]

For each OUT/<scenario>/ with a labels.json, as a user would:
  - `trainctl diagnose OUT/<scenario> --json --fail-on never` on the folder as torch's tooling left it
    (files `nccl_trace_rank_<R>`, torch's default dump name), view "as-is";
  - the same on a copy whose files are renamed `rank-<R>.pkl` / `rank-<R>.json` (the name trainctl's docs show
    for a run dir's `fr/H/rank-R.*`), kept in OUT/_renamed/<scenario>/, view "renamed": the analyzer's verdict
    once the files are read at all (trainctl reads no file whose name holds "nccl", torch's default name);
  - torch's analyzer `python -m torch.distributed.flight_recorder.fr_trace` on the folder as-is, and on a copy
    whose pg_config is filled in from the job's known topology (gloo leaves it empty, which crashes the analyzer;
    JSON dumps are converted to pickle, the only format it reads), view "torch+pgcfg".
Scores: top finding's kind, culprit ranks (set equality with the first hung_collective / collective_mismatch
finding's `ranks`), no extra critical finding blaming a healthy rank, healthy control clean; CLI failures
(exit not 0/3/6, a traceback, JSON that does not parse) with stderr's last line. Writes OUT/report.json.
"""

from __future__ import annotations

import argparse
import json
import pickle
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
TRAINCTL = REPO / ".venv" / "bin" / "trainctl"
PY = REPO / ".venv" / "bin" / "python"
PREFIX = "nccl_trace_rank_"
HANG_KINDS = ("hung_collective", "collective_mismatch")


def _dumps(d: Path) -> dict[int, Path]:
    out = {}
    for p in d.iterdir():
        m = re.fullmatch(re.escape(PREFIX) + r"(\d+)(\.json)?", p.name)
        if m:
            out[int(m.group(1))] = p
    return dict(sorted(out.items()))


def run_trainctl(d: Path) -> dict:
    cmd = [str(TRAINCTL), "diagnose", str(d), "--json", "--fail-on", "never"]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    res: dict = {"cmd": " ".join(cmd), "rc": p.returncode, "cli_error": None, "findings": []}
    err_lines = [ln for ln in p.stderr.strip().splitlines() if ln.strip()]
    last = err_lines[-1] if err_lines else ""
    try:
        doc = json.loads(p.stdout)
        res["findings"] = doc.get("findings", [])
        res["notes"] = doc.get("notes", [])
        res["skipped"] = doc.get("skipped", [])
        res["source_kind"] = doc.get("source_kind")
    except json.JSONDecodeError as e:
        res["cli_error"] = f"JSON does not parse ({e}); stderr: {last}"
    if p.returncode not in (0, 3, 6):
        res["cli_error"] = f"exit {p.returncode}; stderr: {last}"
    elif "Traceback" in p.stderr:
        res["cli_error"] = f"traceback on stderr: {last}"
    return res


def score(res: dict, lab: dict) -> dict:
    exp_kind, exp_ranks = lab["expect_kind"], set(lab["expect_ranks"])
    f = res["findings"]
    top = f[0] if f else None
    first = next((x for x in f if x["kind"] in HANG_KINDS), None)
    if exp_kind is None:
        kind_ok = first is None
        ranks_ok = first is None
        extra = [x for x in f if x.get("severity") == "critical"]
    else:
        kind_ok = top is not None and top["kind"] == exp_kind
        ranks_ok = first is not None and set(first.get("ranks") or []) == exp_ranks
        extra = [
            x for x in f if x.get("severity") == "critical" and set(x.get("ranks") or []) - exp_ranks and x is not first
        ]
        if first is not None and set(first.get("ranks") or []) - exp_ranks:
            extra.append(first)
    ok = kind_ok and ranks_ok and not extra and res["cli_error"] is None
    got = first or top
    return {
        "ok": ok,
        "kind_ok": kind_ok,
        "ranks_ok": ranks_ok,
        "extra_blame": [(x["kind"], x.get("ranks")) for x in extra],
        "got_kind": got["kind"] if got else None,
        "got_ranks": got.get("ranks") if got else None,
        "confidence": got.get("confidence") if got else None,
        "summary": (got.get("summary") or "")[:120] if got else "",
        "n_findings": len(f),
    }


def renamed_copy(d: Path, keep: Path) -> Path:
    """OUT/_renamed/<scenario>/rank-<R>.pkl|json, kept so a wrong verdict can be reproduced."""
    dst = keep / d.name
    shutil.rmtree(dst, ignore_errors=True)
    dst.mkdir(parents=True)
    for r, p in _dumps(d).items():
        shutil.copy(p, dst / f"rank-{r}{'.json' if p.suffix == '.json' else '.pkl'}")
    return dst


def _load(p: Path) -> dict:
    if p.suffix == ".json":
        return json.loads(p.read_text())
    with open(p, "rb") as f:
        return pickle.load(f)


def pgcfg_copy(d: Path, lab: dict, tmp: Path) -> Path:
    """Pickles with pg_config filled from the known topology (name, desc from the entries, ranks)."""
    dst = tmp / (d.name + "-pgcfg")
    dst.mkdir()
    dumps = {r: _load(p) for r, p in _dumps(d).items()}
    desc: dict[str, str] = {"0": "default_pg"}
    for dump in dumps.values():
        for e in dump.get("entries", []):
            name, dsc = e["process_group"][0], e["process_group"][1]
            desc[str(name)] = dsc
    for r, dump in dumps.items():
        dump["pg_config"] = {
            name: {"name": name, "desc": desc.get(name, "undefined"), "ranks": str(ranks)}
            for name, ranks in lab["groups"].items()
            if r in ranks
        }
        for e in dump.get("entries", []):
            e["process_group"] = tuple(e["process_group"])
            for k in ("time_discovered_started_ns", "time_discovered_completed_ns"):
                if e.get(k) == 0:
                    e[k] = None
        (dst / f"{PREFIX}{r}").write_bytes(pickle.dumps(dump))
    return dst


_MISSING = re.compile(r"missing ranks: \{([\d, ]*)\}")
_CULPRIT = re.compile(r"Culprit rank (\d+); Error type: (\w+)")


def run_torch(d: Path) -> dict:
    cmd = [str(PY), "-m", "torch.distributed.flight_recorder.fr_trace", str(d), "--prefix", PREFIX]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    text = p.stdout + p.stderr
    ranks: set[int] = set()
    kinds: list[str] = []
    m = _MISSING.search(text)
    if m and m.group(1).strip():
        ranks |= {int(x) for x in m.group(1).split(",") if x.strip()}
        kinds.append("not all ranks joining")
    for rank, etype in _CULPRIT.findall(text):
        ranks.add(int(rank))
        kinds.append(etype)
    if p.returncode != 0:
        tail = [ln for ln in text.strip().splitlines() if ln.strip()]
        verdict = f"CRASH: {tail[-1][:100] if tail else p.returncode}"
    elif kinds:
        verdict = f"{'/'.join(dict.fromkeys(kinds))} ranks={sorted(ranks)}"
    elif "No errors found" in text:
        verdict = "no errors found"
    elif "cannot decide" in text:
        verdict = "cannot decide"
    else:
        verdict = "no verdict"
    return {"cmd": " ".join(cmd), "rc": p.returncode, "verdict": verdict, "ranks": sorted(ranks), "tail": text[-2000:]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("names", nargs="*")
    a = ap.parse_args()
    sys.path.insert(0, str(Path(__file__).parent))
    from frwild import SCENARIOS

    order = [s.name for s in SCENARIOS]
    dirs = sorted(
        (p for p in a.out.iterdir() if (p / "labels.json").exists()),
        key=lambda p: (order.index(p.name) if p.name in order else len(order), p.name),
    )
    if a.names:
        dirs = [p for p in dirs if p.name in a.names]
    rows = []
    with tempfile.TemporaryDirectory(prefix="frwild-report-") as t:
        tmp = Path(t)
        for d in dirs:
            lab = json.loads((d / "labels.json").read_text())
            asis = run_trainctl(d)
            ren = run_trainctl(renamed_copy(d, a.out / "_renamed"))
            torch_raw = run_torch(d) if lab["format"] == "pickle" else {"verdict": "n/a (JSON: reads pickle only)"}
            torch_cfg = run_torch(pgcfg_copy(d, lab, tmp))
            rows.append(
                {
                    "scenario": d.name,
                    "dir": str(d),
                    "expect_kind": lab["expect_kind"],
                    "expect_ranks": lab["expect_ranks"],
                    "dumps": len(_dumps(d)),
                    "world": lab["world"],
                    "asis": {**asis, **score(asis, lab)},
                    "renamed": {**ren, **score(ren, lab)},
                    "torch_raw": torch_raw,
                    "torch_pgcfg": torch_cfg,
                    "note": lab.get("note", ""),
                }
            )
            print(".", end="", file=sys.stderr, flush=True)
    print(file=sys.stderr)
    (a.out / "report.json").write_text(json.dumps(rows, indent=1, default=str))
    _print(rows)


def _v(s: dict) -> str:
    if s.get("cli_error"):
        return "CLI FAIL"
    if s["got_kind"] is None:
        return "no finding"
    conf = f" c={s['confidence']:.2f}" if isinstance(s["confidence"], (int, float)) else ""
    return f"{s['got_kind']} {s['got_ranks']}{conf}"


def _print(rows: list[dict]) -> None:
    hdr = f"{'scenario':17s} {'expected':28s} | {'trainctl as-is':16s} | {'trainctl renamed rank-R.pkl':38s} ok | torch+pgcfg"
    print(hdr)
    print("-" * len(hdr))
    for r in rows:
        exp = f"{r['expect_kind'] or 'clean'} {r['expect_ranks'] if r['expect_kind'] else ''}".strip()
        a, n = r["asis"], r["renamed"]
        print(
            f"{r['scenario']:17s} {exp:28s} | {_v(a)[:16]:16s} | {_v(n)[:38]:38s} {'OK' if n['ok'] else 'XX'} | "
            f"{r['torch_pgcfg']['verdict'][:60]}"
        )
    print()
    print("summaries (renamed view), torch's analyzer on the folder as-is:")
    for r in rows:
        n = r["renamed"]
        why = []
        if not n["kind_ok"]:
            why.append("kind")
        if not n["ranks_ok"]:
            why.append("ranks")
        if n["extra_blame"]:
            why.append(f"extra critical {n['extra_blame']}")
        if n["cli_error"]:
            why.append(n["cli_error"])
        print(f"  {r['scenario']}: {n['summary'] or '-'}")
        if why:
            print(f"      WRONG: {', '.join(why)}; reproduce: {n['cmd']}")
        print(f"      torch raw: {r['torch_raw']['verdict'][:110]}")
    for view in ("asis", "renamed"):
        ok = sum(r[view]["ok"] for r in rows)
        fails = [(r["scenario"], r[view]["cli_error"]) for r in rows if r[view]["cli_error"]]
        print(f"\n{view}: {ok}/{len(rows)} right; CLI failures: {len(fails)}")
        for r in rows:
            if not r[view]["ok"]:
                print(f"  wrong: {r['scenario']}: {r[view]['cmd']}")
        for name, err in fails:
            print(f"  {name}: {err}")
    tok = sum(
        1
        for r in rows
        if (r["expect_kind"] is None and r["torch_pgcfg"]["verdict"] in ("no errors found", "no verdict"))
        or (r["expect_kind"] and set(r["torch_pgcfg"].get("ranks", [])) == set(r["expect_ranks"]))
    )
    print(f"torch+pgcfg: {tok}/{len(rows)} name the expected ranks (or nothing on a clean run)")


if __name__ == "__main__":
    main()
