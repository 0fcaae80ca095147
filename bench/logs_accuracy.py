"""Log signatures scored on labelled real excerpts: dev and held-out side by side (issue 13 item 3).

    .venv/bin/python bench/logs_accuracy.py [--json OUT] [--carriers]

Splits (frozen; tests/fixtures/logs/README.md):
- dev: the 35 rows of shared/corpus (tests/fixtures/logs/real_logs_dev.jsonl), which the signatures
  were developed on, plus the new excerpts whose split rule says dev;
- held-out: the new excerpts (tests/fixtures/logs/corpus_ext.jsonl, 32 rows, corpus_ext2.jsonl,
  74 rows, and corpus_ext3.jsonl, 60 rows, each gathered later than the one before) whose
  sha256(id) is odd; each file's held-out hash is recorded (heldout.sha256, heldout2.sha256,
  heldout3.sha256) when its split was frozen, before any score on it, and no signature was tuned
  on them. Each batch is also reported on its own (held-out-1, -2, -3). corpus_dev4.jsonl,
  gathered after held-out-3 was frozen, is dev only. corpus_ext5.jsonl (57 rows, gathered after
  that) is split the same way: held-out-4 (heldout5.sha256) and dev. corpus_dev6.jsonl is dev only.
  corpus_ext7.jsonl (59 rows, gathered after dev6) is split the same way: held-out-5
  (heldout7.sha256) and dev; so is corpus_ext8.jsonl (54 rows): held-out-6 (heldout8.sha256) and dev,
  and corpus_ext9.jsonl (32 rows, gathered 2026-11-26 20:00-20:50 UTC while the analyzer's last
  changes were being written by others): held-out-7 (heldout9.sha256) and dev; so is
  every later batch corpus_extN.jsonl (gathered 2026-11-26 and after) the same way: its held-out half is
  the next held-out-k (heldoutN.sha256) and the rest dev. tests/fixtures/logs/README.md gives each batch's
  rows, scope and gathering time; SPLIT_BATCHES below finds the files.

`--carriers` scores each split again under every launcher prefix and shipper envelope of
bench/log_carriers.py (kind accuracy and silent rows only): a verdict must not depend on how the log
reached the user.

`--dev-only --words-alone` also scores the unclassified fallback's guess from words
(collectors/log_vocabulary.py) on every dev row's error-looking lines as if no signature knew them,
against the fallback's old answer (crash).

Misses are printed for the dev split only (`--show-heldout-misses` prints the others: reading them
makes the held-out rows dev rows for whoever reads them).

Per row: the excerpt is written to a file and diagnosed as `trainctl diagnose FILE` does
(trainctl.ops.diagnose.diagnose_path: every analyzer, root cause, consolidation), findings in the
order diagnose prints them (trainctl.findings.sort_findings); `--order analyzer` scores the log
analyzer's own order instead (parse + analyze_log_events), as this bench did before 2026-11-26
23:30 UTC, when the two were found to differ (a crash banner printed above the NCCL error the
analyzer had put first). Then
- found: at least one finding (else "silent");
- kind: the first finding's kind is the label's (LABEL_KINDS below; categories whose label allows
  several kinds list them);
- culprit: where the label names a rank/host, the first finding names it;
- blame without evidence: a finding names a rank or host that appears nowhere in the excerpt's text
  (a rank the finding reads off a complete roster of the others, evidence `arrived_ranks`, counts as
  evidenced: the lines naming every other rank are its evidence).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import sys
import tempfile
from collections import Counter
from collections.abc import Callable
from pathlib import Path

from trainctl.analyzers.logs import analyze_log_events
from trainctl.collectors.logs import parse_log_text
from trainctl.findings import Finding, sort_findings
from trainctl.findings import FindingKind as K

ROOT = Path(__file__).resolve().parents[1]
DEV = ROOT / "tests" / "fixtures" / "logs" / "real_logs_dev.jsonl"
EXT = ROOT / "tests" / "fixtures" / "logs" / "corpus_ext.jsonl"
EXT2 = ROOT / "tests" / "fixtures" / "logs" / "corpus_ext2.jsonl"
EXT3 = ROOT / "tests" / "fixtures" / "logs" / "corpus_ext3.jsonl"
# Gathered after held-out-3 was frozen, for development only (no held-out split of its own): the
# third batch's held-out rows stay the test of what these rows teach.
DEV4 = ROOT / "tests" / "fixtures" / "logs" / "corpus_dev4.jsonl"
EXT5 = ROOT / "tests" / "fixtures" / "logs" / "corpus_ext5.jsonl"
DEV6 = ROOT / "tests" / "fixtures" / "logs" / "corpus_dev6.jsonl"  # after held-out-4 was frozen: dev only
EXT7 = ROOT / "tests" / "fixtures" / "logs" / "corpus_ext7.jsonl"  # held-out-5 + dev (heldout7.sha256)


def _batch_number(path: Path) -> int:
    return int(re.fullmatch(r"corpus_ext(\d*)\.jsonl", path.name)[1] or 1)  # type: ignore[index]


# Every batch split by the frozen rule, in the order gathered (corpus_ext.jsonl, corpus_ext2.jsonl, ...; each
# with its held-out hash, heldoutN.sha256, committed before any score): their held-out halves are held-out-1,
# held-out-2, ... A new batch is its file and its hash (bench/logs_merge_batch.py); nothing here to edit.
SPLIT_BATCHES = tuple(sorted((ROOT / "tests" / "fixtures" / "logs").glob("corpus_ext*.jsonl"), key=_batch_number))

# label category -> kinds a correct first finding may have
LABEL_KINDS: dict[str, set[K]] = {
    "nccl_watchdog_timeout": {K.HUNG_COLLECTIVE},
    "nccl_timeout": {K.HUNG_COLLECTIVE},
    "hang": {K.HUNG_COLLECTIVE},
    "nccl_network_error": {K.NETWORK_ERROR},
    "nccl_network": {K.NETWORK_ERROR},
    "nccl_error": {K.NETWORK_ERROR, K.CRASH},
    "collective_mismatch": {K.COLLECTIVE_MISMATCH},
    "cuda_hw_error": {K.FAULTY_HOST, K.CRASH},
    "cuda_error": {K.CRASH},
    "oom": {K.OOM},
    "nan_loss": {K.NUMERICAL},
    "elastic_failure": {K.CRASH},
    "rendezvous": {K.RENDEZVOUS_ERROR},
    "gloo": {K.NETWORK_ERROR, K.HUNG_COLLECTIVE},
    "process_listing": {K.CRASH, K.HUNG_COLLECTIVE},
    # "kernel" is dmesg lines, "AER, MCE, the OOM killer" (tests/fixtures/logs/README.md, the briefs' definition): a
    # hardware fault of the host, or its kernel's out-of-memory killer (an out-of-memory, and read so). Until
    # 2026-11-27 only FAULTY_HOST counted, which scored every OOM-killer excerpt read as an OOM a miss.
    "kernel": {K.FAULTY_HOST, K.OOM},
    "other_error": set(K),  # any finding: the point is not to be silent
}


def split_of(row_id: str) -> str:
    """The frozen rule: sha256 of the id, odd -> held-out."""
    return "heldout" if hashlib.sha256(row_id.encode()).digest()[0] % 2 else "dev"


def load(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.is_file() else []


def dev_rows() -> list[dict]:
    """Every dev row: the dev-only files and the dev half of each split batch (never a held-out row)."""
    rows = load(DEV) + [r for p in (EXT, EXT2, EXT3) for r in load(p) if split_of(r["id"]) == "dev"] + load(DEV4)
    rows += [r for r in load(EXT5) if split_of(r["id"]) == "dev"] + load(DEV6)
    later = SPLIT_BATCHES[SPLIT_BATCHES.index(EXT7) :]  # every batch split after the dev-only files
    return rows + [r for p in later for r in load(p) if split_of(r["id"]) == "dev"]


def _mentioned(value: object, text: str) -> bool:
    v = re.escape(str(value))
    return bool(re.search(rf"(?:(?<![\w.])|(?<=rank)|(?<=Rank)|(?<=RANK)){v}(?!\w)", text))


def analyzer_order(row: dict) -> list[Finding]:
    """The log analyzer's findings in its own order (first failure of each incident first)."""
    return analyze_log_events(parse_log_text(row["log"], source=f"{row['id']}.log"))


def diagnose_order(row: dict) -> list[Finding]:
    """What `trainctl diagnose FILE --json` prints for the excerpt saved as a file."""
    from trainctl.ops.diagnose.diagnosis import diagnose_path

    name = re.sub(r"[^\w.-]", "_", row["id"])
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / f"{name}.log"
        path.write_text(row["log"])
        return sort_findings(diagnose_path(path).findings)


def score(rows: list[dict], findings_of: Callable[[dict], list[Finding]] = diagnose_order) -> dict:
    n = len(rows)
    found = kind_ok = culprit_n = culprit_ok = unevidenced = 0
    misses: list[str] = []
    by_cat: Counter[str] = Counter()
    for row in rows:
        findings = findings_of(row)
        want = LABEL_KINDS.get(row["category"], set(K))
        if findings:
            found += 1
        first = findings[0] if findings else None
        ok = first is not None and first.kind in want
        kind_ok += ok
        by_cat[row["category"]] += 0 if ok else 1
        if not ok:
            misses.append(
                f"{row['id']} ({row['category']}): {first.kind.value + ': ' + first.summary[:80] if first else 'silent'}"
            )
        if row.get("culprit_rank") is not None or row.get("culprit_host"):
            culprit_n += 1
            good = first is not None
            if good and row.get("culprit_rank") is not None:
                good = row["culprit_rank"] in first.ranks
            if good and row.get("culprit_host"):
                good = row["culprit_host"] in first.hosts
            culprit_ok += good
            if not good:
                named = f"{first.ranks} {first.hosts}" if first else "nothing"
                misses.append(
                    f"{row['id']} culprit rank {row.get('culprit_rank')} host {row.get('culprit_host')}: named {named}"
                )
        text = row["log"]
        for f in findings:
            # A rank read from a complete roster of arrivals (evidence "arrived_ranks": every other
            # rank of the world says it is waiting) is evidenced by the lines that name the others.
            by_absence = "arrived_ranks" in f.evidence
            if any(not (_mentioned(r, text) or by_absence) for r in f.ranks) or any(
                not _mentioned(h, text) for h in f.hosts
            ):
                unevidenced += 1
                misses.append(f"{row['id']}: blames {f.ranks} {f.hosts} without the text naming them")
    return {
        "rows": n,
        "with_finding": found,
        "silent": n - found,
        "kind_accuracy": round(kind_ok / n, 3) if n else None,
        "culprit_labelled": culprit_n,
        "culprit_accuracy": round(culprit_ok / culprit_n, 3) if culprit_n else None,
        "blame_without_evidence": unevidenced,
        "misses": misses,
    }


def words_alone(rows: list[dict]) -> dict:
    """The unclassified fallback's guess from words (collectors/log_vocabulary.py) as if no signature knew
    any line: on each row's error-looking lines, kind accuracy of the words' kind against calling every
    such log a crash (what the fallback said before). Dev rows only: it measures the rules, not a split."""
    from trainctl.collectors.log_vocabulary import kind_from_words
    from trainctl.collectors.logs import _ERRORISH, _HARMLESS, clean_lines

    n = crash_ok = words_ok = 0
    for row in rows:
        lines = [r.text for r in clean_lines(row["log"]) if _ERRORISH.search(r.text[:4000])]
        lines = [t for t in lines if not _HARMLESS.search(t[:4000])]
        if not lines:
            continue
        want = LABEL_KINDS.get(row["category"], set(K))
        guess = kind_from_words(lines)
        n += 1
        crash_ok += K.CRASH in want
        words_ok += (guess.kind if guess else K.CRASH) in want
    return {
        "rows_with_error_lines": n,
        "crash_accuracy": round(crash_ok / n, 3),
        "words_accuracy": round(words_ok / n, 3),
    }


def _print_carriers(splits: dict[str, list[dict]], of: Callable[[dict], list[Finding]]) -> None:
    """Kind accuracy and silent rows of each split as it reads plain and under each carrier."""
    from log_carriers import CARRIERS  # bench/ is the script's directory

    carriers = {"(plain)": (lambda log: log, False), **CARRIERS}
    print(f"\n{'kind accuracy / silent':>24}" + "".join(f"{s:>16}" for s in splits))
    for name, (carry, _) in carriers.items():
        scores = [score([dict(r, log=carry(r["log"])) for r in rows], of) for rows in splits.values()]
        print(f"{name:>24}" + "".join(f"{s['kind_accuracy']!s:>10} / {s['silent']:<3}" for s in scores))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", type=Path, help="write the scores here too")
    ap.add_argument("--show-heldout-misses", action="store_true", help="also print the held-out misses")
    ap.add_argument(
        "--dev-only",
        action="store_true",
        help="score the dev split alone (for whoever works on signatures: no held-out number to tune on)",
    )
    ap.add_argument(
        "--order",
        choices=("diagnose", "analyzer"),
        default="diagnose",
        help="score what diagnose prints (default) or the log analyzer's own order",
    )
    ap.add_argument(
        "--carriers",
        action="store_true",
        help="also score every split with its logs rewritten by each launcher/shipper of bench/log_carriers.py",
    )
    ap.add_argument(
        "--words-alone",
        action="store_true",
        help="with --dev-only: also score the unclassified fallback's words as if no signature knew any dev line",
    )
    args = ap.parse_args()
    order = diagnose_order if args.order == "diagnose" else analyzer_order
    found: dict[int, list[Finding]] = {}  # a row scored in its batch and in the whole split is diagnosed once

    def of(row: dict) -> list[Finding]:
        if id(row) not in found:
            found[id(row)] = order(row)
        return found[id(row)]

    dev = dev_rows()
    if args.dev_only:
        dev_score = score(dev, of)
        for c, v in dev_score.items():
            if c != "misses":
                print(f"{c:>24} {v!s:>11}")
        for m in dev_score["misses"]:
            print(f"  dev miss: {m}", file=sys.stderr)
        if args.words_alone:
            for c, v in words_alone(dev).items():
                print(f"{'words alone: ' + c:>36} {v!s:>8}")
        return 0
    held = [[r for r in load(p) if split_of(r["id"]) == "heldout"] for p in SPLIT_BATCHES]
    every_heldout = [r for batch in held for r in batch]
    out = {"dev": score(dev, of), "heldout": score(every_heldout, of)}
    out |= {f"heldout{i}": score(batch, of) for i, batch in enumerate(held, 1)}
    cols = ("rows", "with_finding", "silent", "kind_accuracy", "culprit_labelled", "culprit_accuracy",
            "blame_without_evidence")  # fmt: skip
    splits = ("dev", "heldout", *(f"heldout{i}" for i in range(1, len(held) + 1)))
    names = ("dev", "held-out", *(f"held-out-{i}" for i in range(1, len(held) + 1)))
    print(f"{'':>24}" + "".join(f"{s:>11}" for s in names))
    for c in cols:
        print(f"{c:>24}" + "".join(f"{out[s][c]!s:>11}" for s in splits))
    if args.carriers:
        _print_carriers({"dev": dev, "held-out": every_heldout}, order)  # new rows: not the cache
    for split in ("dev", "heldout") if args.show_heldout_misses else ("dev",):
        for m in out[split]["misses"]:
            print(f"  {split} miss: {m}", file=sys.stderr)
    if args.json:
        if not args.show_heldout_misses:  # the file is read too: it keeps the held-out rows unread
            for split in splits[1:]:
                out[split] = {k: v for k, v in out[split].items() if k != "misses"}
        args.json.write_text(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
