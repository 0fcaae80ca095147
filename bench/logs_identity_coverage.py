"""The culprit across lines (issue 13 items 3 and 4) over multi-line cases built from the sources' formats.

    .venv/bin/python bench/logs_identity_coverage.py [--misses]

tests/fixtures/logs/source_identity.jsonl holds excerpts of several lines, each as its source prints
it (NCCL's init line and WARN prefix, torch's rank prefix, pdsh's host prefix, CNTK's CudaCall), with
the finding and the culprit the lines prove together (null: nobody). A case is right by the rule of
bench/logs_source_coverage.py (first finding's kind, category, severity and exact culprit; no other
finding blames anyone else). Reads no corpus row.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from logs_source_coverage import mismatch

CASES = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "logs" / "source_identity.jsonl"


def load() -> list[dict]:
    rows = [json.loads(line) for line in CASES.read_text().splitlines() if line.strip()]
    return [{**r, "line": "\n".join(r["lines"])} for r in rows]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--misses", action="store_true", help="print every case the analyzer gets wrong")
    args = ap.parse_args()
    rows = load()
    misses = [(r["id"], m) for r in rows if (m := mismatch(r))]
    print(f"multi-line cases right: {len(rows) - len(misses)}/{len(rows)}")
    if args.misses:
        for rid, m in misses:
            print(f"  {rid}: {m}")


if __name__ == "__main__":
    main()
