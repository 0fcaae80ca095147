"""Coverage of the log signatures over the inventory of format strings that matter (issue 13 item 3).

    .venv/bin/python bench/logs_source_coverage.py [--misses] [--cases tests/fixtures/logs/source_identity.jsonl]

tests/fixtures/logs/source_lines.jsonl holds one line per format string, instantiated as the code
prints it (NCCL's WARN prefix, torch's glog prefix, a launcher's prefix), with its source (project,
file, version) and the finding it should give: kind, category, severity, and the culprit where the
line settles it (null: nobody). A line is right when the first finding of parse + analyze has that
kind, category and severity, names exactly that culprit, and no finding blames anyone else.
Unlike bench/logs_accuracy.py this reads no corpus row: the inventory comes from the sources.

`--cases source_identity.jsonl`: the same rule over excerpts of several lines (`lines`), each as its
source prints it, whose culprit only the lines together prove (docs/log-signatures.md, "Naming the
culprit across lines").
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from trainctl.analyzers.logs import analyze_log_events
from trainctl.collectors.logs import parse_log_text

INVENTORY = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "logs" / "source_lines.jsonl"
IDENTITY_CASES = INVENTORY.with_name("source_identity.jsonl")


def load(path: Path = INVENTORY) -> list[dict]:
    """The rows; a multi-line case's `lines` become its `line` (one excerpt)."""
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [{**r, "line": "\n".join(r["lines"])} if "lines" in r else r for r in rows]


def mismatch(row: dict) -> str | None:
    """What the classifier got wrong on one inventory line (None: right)."""
    findings = analyze_log_events(parse_log_text(row["line"], source=f"{row['id']}.log"))
    if not findings:
        return "no finding"
    first = findings[0]
    got = (first.kind.value, first.category.value if first.category else None, first.severity.value)
    want = (row["kind"], row["category"], row["severity"])
    if got != want:
        return f"got {got}, want {want}: {first.summary[:100]}"
    want_ranks = () if row["culprit_rank"] is None else (row["culprit_rank"],)
    want_hosts = () if row["culprit_host"] is None else (row["culprit_host"],)
    if (first.ranks, first.hosts) != (want_ranks, want_hosts):
        return f"culprit {first.ranks}/{first.hosts}, want {want_ranks}/{want_hosts}"
    extra = [
        f.summary[:60]
        for f in findings[1:]
        if not (set(f.ranks) <= set(want_ranks) and set(f.hosts) <= set(want_hosts))
    ]
    return f"another finding blames: {extra}" if extra else None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--misses", action="store_true", help="print every line the classifier gets wrong")
    ap.add_argument("--cases", type=Path, default=INVENTORY, help="another inventory (e.g. source_identity.jsonl)")
    args = ap.parse_args()
    rows = load(args.cases)
    misses = [(r["id"], m) for r in rows if (m := mismatch(r))]
    print(f"{args.cases.name}: right {len(rows) - len(misses)}/{len(rows)}")
    if args.misses:
        for rid, m in misses:
            print(f"  {rid}: {m}")


if __name__ == "__main__":
    main()
