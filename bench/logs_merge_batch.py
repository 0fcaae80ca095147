"""Merge gathered log excerpts into a new corpus batch and freeze its held-out hash (never scores).

    .venv/bin/python bench/logs_merge_batch.py --name corpus_ext9.jsonl --hash heldout9.sha256 A.jsonl B.jsonl

Each row is validated (keys, category, culprit type); a row whose thread is in any earlier file, or
whose text shares >= 15 % of its 60-character shingles with an earlier row, is dropped (and said).
Rows are split by bench/logs_accuracy.py's frozen rule (sha256 of the id, odd -> held-out); the
held-out rows' hash is written next to the batch, to be committed before anything scores them.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from logs_accuracy import LABEL_KINDS, split_of  # noqa: E402

FIX = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "logs"
KEYS = {"id", "category", "subcategory", "source_url", "log", "culprit_rank", "culprit_host", "note"}


def shingles(text: str, n: int = 60) -> set[str]:
    t = " ".join(text.split())
    return {t[i : i + n] for i in range(0, max(1, len(t) - n + 1), 10)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--name", required=True, help="the batch's file name under tests/fixtures/logs")
    ap.add_argument("--hash", required=True, help="the held-out hash file's name")
    ap.add_argument("inputs", nargs="+", type=Path)
    args = ap.parse_args()
    every = [
        json.loads(line) for f in sorted(FIX.glob("*.jsonl")) for line in f.read_text().splitlines() if line.strip()
    ]
    old = [r for r in every if "source_url" in r and "log" in r]  # excerpts (source_lines.jsonl is not one)
    used = {r["source_url"] for r in old}
    old_sh = [shingles(r["log"]) for r in old]
    rows, dropped = [], []
    for f in args.inputs:
        for line in f.read_text().splitlines():
            if not line.strip():
                continue
            r = json.loads(line)
            if (
                set(r) != KEYS
                or r["category"] not in LABEL_KINDS
                or not (r["culprit_rank"] is None or isinstance(r["culprit_rank"], int))
            ):
                raise SystemExit(f"{f}: row {r.get('id')!r} is not a labelled excerpt (keys, category, culprit_rank)")
            if r["source_url"] in used:
                dropped.append((r["id"], "thread used before"))
                continue
            sh = shingles(r["log"])
            dup = max((len(sh & o) / max(1, len(sh)) for o in old_sh), default=0.0)
            if dup >= 0.15:
                dropped.append((r["id"], f"near-duplicate {dup:.2f}"))
                continue
            used.add(r["source_url"])
            old_sh.append(sh)
            rows.append(r)
    (FIX / args.name).write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
    held = [r for r in rows if split_of(r["id"]) == "heldout"]
    blob = "".join(json.dumps(r, ensure_ascii=False, sort_keys=True) + "\n" for r in held).encode()
    day = datetime.now(UTC).strftime("%Y-%m-%d")
    (FIX / args.hash).write_text(
        f"{hashlib.sha256(blob).hexdigest()}  held-out rows of {args.name} (json.dumps(row, ensure_ascii=False, "
        f"sort_keys=True) per line, in file order); frozen {day} before any score\n"
    )
    print(f"{len(rows)} rows, {len(held)} held-out; dropped: {dropped}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
