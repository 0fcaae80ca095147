"""The held-out log excerpts stay frozen: same rows, same split rule, same hash as when the split was made."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from bench_modules import load_bench  # tests/ is on sys.path

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "logs"


def _bench():
    return load_bench("logs_accuracy")


def _rows(name: str) -> list[dict]:
    return [json.loads(line) for line in (FIX / name).read_text().splitlines() if line.strip()]


def _heldout_matches_hash(rows: list[dict], hash_file: str) -> list[dict]:
    """The held-out rows, after checking them against the hash written when their split was frozen."""
    held = [r for r in rows if _bench().split_of(r["id"]) == "heldout"]
    blob = "".join(json.dumps(r, ensure_ascii=False, sort_keys=True) + "\n" for r in held).encode()
    assert hashlib.sha256(blob).hexdigest() == (FIX / hash_file).read_text().split()[0]
    return held


def test_heldout_rows_match_the_frozen_hash() -> None:
    rows = _rows("corpus_ext.jsonl")
    held = _heldout_matches_hash(rows, "heldout.sha256")
    assert len(held) == 14 and len(rows) == 32 and len({r["id"] for r in rows}) == 32


def test_every_excerpt_gets_a_finding_or_is_reported(tmp_path) -> None:
    scores = _bench().score([json.loads(line) for line in (FIX / "corpus_ext.jsonl").read_text().splitlines()])
    assert scores["blame_without_evidence"] == 0
    assert scores["rows"] == 32 and scores["with_finding"] >= 31  # x-029 (held-out) is silent: reported, not tuned


def test_second_heldout_batch_matches_its_frozen_hash() -> None:
    rows = _rows("corpus_ext2.jsonl")
    held = _heldout_matches_hash(rows, "heldout2.sha256")
    assert len(held) == 32 and len(rows) == 74 and len({r["id"] for r in rows}) == 74
    # no row repeats an excerpt of the other files (the batch was de-duplicated before the split)
    others = {r["log"][:200] for name in ("corpus_ext.jsonl", "real_logs_dev.jsonl") for r in _rows(name)}
    assert not [r["id"] for r in rows if r["log"][:200] in others]


def test_second_batch_never_blames_without_evidence() -> None:
    rows = _rows("corpus_ext2.jsonl")
    scores = _bench().score(rows)
    assert scores["blame_without_evidence"] == 0
    dev = _bench().score([r for r in rows if _bench().split_of(r["id"]) == "dev"])
    assert dev["silent"] == 0  # the dev rows were developed against; held-out misses are reported, not tuned


def test_third_heldout_batch_matches_its_frozen_hash() -> None:
    rows = _rows("corpus_ext3.jsonl")
    held = _heldout_matches_hash(rows, "heldout3.sha256")
    assert len(held) == 27 and len(rows) == 60 and len({r["id"] for r in rows}) == 60
    others = {
        r["log"][:200] for name in ("corpus_ext.jsonl", "corpus_ext2.jsonl", "real_logs_dev.jsonl") for r in _rows(name)
    }
    assert not [r["id"] for r in rows if r["log"][:200] in others]


def test_third_batch_never_blames_without_evidence() -> None:
    rows = _rows("corpus_ext3.jsonl")
    assert _bench().score(rows)["blame_without_evidence"] == 0
    dev = _bench().score([r for r in rows if _bench().split_of(r["id"]) == "dev"])
    assert dev["silent"] <= 1  # x3a-022, an nvidia-smi process table with nothing failing in it


def test_fourth_heldout_batch_matches_its_frozen_hash() -> None:
    rows = _rows("corpus_ext5.jsonl")
    held = _heldout_matches_hash(rows, "heldout5.sha256")
    assert len(held) == 30 and len(rows) == 57 and len({r["id"] for r in rows}) == 57
    older = {r["source_url"] for name in ("corpus_ext.jsonl", "corpus_ext2.jsonl", "corpus_ext3.jsonl",
                                          "corpus_dev4.jsonl", "real_logs_dev.jsonl") for r in _rows(name)}  # fmt: skip
    assert not [r["id"] for r in rows if r["source_url"] in older]  # threads used in no earlier file


def test_fourth_batch_never_blames_without_evidence_and_its_dev_rows_are_found() -> None:
    rows = _rows("corpus_ext5.jsonl")
    assert _bench().score(rows)["blame_without_evidence"] == 0
    dev = _bench().score([r for r in rows if _bench().split_of(r["id"]) == "dev"])
    assert dev["silent"] == 0 and dev["kind_accuracy"] == 1.0


def test_fifth_heldout_batch_matches_its_frozen_hash() -> None:
    rows = _rows("corpus_ext7.jsonl")
    held = _heldout_matches_hash(rows, "heldout7.sha256")
    assert len(held) == 30 and len(rows) == 59 and len({r["id"] for r in rows}) == 59
    older = {r["source_url"] for name in ("corpus_ext.jsonl", "corpus_ext2.jsonl", "corpus_ext3.jsonl", "corpus_dev4.jsonl",
                                          "corpus_ext5.jsonl", "corpus_dev6.jsonl", "real_logs_dev.jsonl")
             for r in _rows(name)}  # fmt: skip
    assert not [r["id"] for r in rows if r["source_url"] in older]  # threads used in no earlier file


def test_fifth_batch_never_blames_without_evidence() -> None:
    assert _bench().score(_rows("corpus_ext7.jsonl"))["blame_without_evidence"] == 0


def test_sixth_heldout_batch_matches_its_frozen_hash() -> None:
    rows = _rows("corpus_ext8.jsonl")
    held = _heldout_matches_hash(rows, "heldout8.sha256")
    assert len(held) == 27 and len(rows) == 54 and len({r["id"] for r in rows}) == 54
    older = {r["source_url"] for name in ("corpus_ext.jsonl", "corpus_ext2.jsonl", "corpus_ext3.jsonl", "corpus_dev4.jsonl",
                                          "corpus_ext5.jsonl", "corpus_dev6.jsonl", "corpus_ext7.jsonl",
                                          "real_logs_dev.jsonl")
             for r in _rows(name)}  # fmt: skip
    assert not [r["id"] for r in rows if r["source_url"] in older]  # threads used in no earlier file
    assert _bench().score(rows)["blame_without_evidence"] == 0


@pytest.mark.parametrize(
    "name, hash_file, n_held, n_rows",
    [
        ("corpus_ext9.jsonl", "heldout9.sha256", 14, 32),
        ("corpus_ext10.jsonl", "heldout10.sha256", 11, 20),
        ("corpus_ext11.jsonl", "heldout11.sha256", 29, 63),
        ("corpus_ext12.jsonl", "heldout12.sha256", 24, 48),
        ("corpus_ext13.jsonl", "heldout13.sha256", 45, 88),
        ("corpus_ext14.jsonl", "heldout14.sha256", 48, 94),
        ("corpus_ext15.jsonl", "heldout15.sha256", 42, 94),
        ("corpus_ext16.jsonl", "heldout16.sha256", 42, 81),
        ("corpus_ext17.jsonl", "heldout17.sha256", 24, 47),
        ("corpus_ext18.jsonl", "heldout18.sha256", 71, 117),
        ("corpus_ext19.jsonl", "heldout19.sha256", 42, 94),
        ("corpus_ext20.jsonl", "heldout20.sha256", 70, 127),
        ("corpus_ext21.jsonl", "heldout21.sha256", 48, 101),
        ("corpus_ext22.jsonl", "heldout22.sha256", 36, 72),
        ("corpus_ext23.jsonl", "heldout23.sha256", 28, 72),
        ("corpus_ext24.jsonl", "heldout24.sha256", 30, 65),
        ("corpus_ext25.jsonl", "heldout25.sha256", 34, 74),
        ("corpus_ext26.jsonl", "heldout26.sha256", 32, 66),
        ("corpus_ext27.jsonl", "heldout27.sha256", 28, 51),
        ("corpus_ext28.jsonl", "heldout28.sha256", 26, 48),
        ("corpus_ext29.jsonl", "heldout29.sha256", 38, 65),
        ("corpus_ext30.jsonl", "heldout30.sha256", 33, 64),
        ("corpus_ext31.jsonl", "heldout31.sha256", 16, 36),
    ],
    ids=[
        "seventh",
        "eighth",
        "ninth",
        "tenth",
        "eleventh",
        "twelfth",
        "thirteenth",
        "fourteenth",
        "fifteenth",
        "sixteenth",
        "seventeenth",
        "eighteenth",
        "nineteenth",
        "twentieth",
        "twenty-first",
        "twenty-second",
        "twenty-third",
        "twenty-fourth",
        "twenty-fifth",
        "twenty-sixth",
        "twenty-seventh",
        "twenty-eighth",
        "twenty-ninth",
    ],
)
def test_later_heldout_batch_matches_its_frozen_hash(name: str, hash_file: str, n_held: int, n_rows: int) -> None:
    rows = _rows(name)
    held = _heldout_matches_hash(rows, hash_file)
    assert len(held) == n_held and len(rows) == n_rows and len({r["id"] for r in rows}) == n_rows
    older = {r["source_url"] for f in FIX.glob("*.jsonl") if f.name != name
             for r in _rows(f.name) if "source_url" in r}  # fmt: skip
    assert not [r["id"] for r in rows if r["source_url"] in older]  # threads used in no earlier file


def test_every_batch_the_bench_finds_is_split_and_matches_the_hash_frozen_with_it() -> None:
    """The bench scores whatever corpus_ext*.jsonl files there are: each must carry the held-out hash committed
    with it, and the batches come in the order they were gathered (held-out-1, -2, ...)."""
    batches = _bench().SPLIT_BATCHES
    numbers = [int(p.name.removeprefix("corpus_ext").removesuffix(".jsonl") or 1) for p in batches]
    assert numbers == sorted(numbers) and numbers[:3] == [1, 2, 3] and len(batches) >= 26
    for p, n in zip(batches, numbers, strict=True):
        assert _heldout_matches_hash(_rows(p.name), f"heldout{n if n > 1 else ''}.sha256")
