"""The log signatures against the inventory of format strings taken from the code that prints them
(tests/fixtures/logs/source_lines.jsonl; bench/logs_source_coverage.py): each line, instantiated as its
source prints it, gives the expected finding and culprit."""

from __future__ import annotations

import pytest
from bench_modules import load_bench  # tests/ is on sys.path

from trainctl.collectors.logs import _KEYWORDS, _keyword_hits

coverage = load_bench("logs_source_coverage")
ROWS = coverage.load()


def test_every_inventory_line_cites_its_source() -> None:
    assert len(ROWS) >= 100 and len({r["id"] for r in ROWS}) == len(ROWS)
    for r in ROWS:
        assert all(r["source"].get(k) for k in ("project", "file", "version")), r["id"]


@pytest.mark.parametrize("row", ROWS, ids=[r["id"] for r in ROWS])
def test_inventory_line(row: dict) -> None:
    assert coverage.mismatch(row) is None, coverage.mismatch(row)


def test_keyword_gate_finds_every_keyword_of_a_line() -> None:
    """The two-level gate (keywords that contain no other first) hits what testing every keyword hits."""
    lines = [r["line"] for r in ROWS] + ["number of nan iterations:   2 | nan", "Fatal Python error: Aborted", "plain"]
    for line in lines:
        low = line.lower()
        assert set(_keyword_hits(low)) == {k for k in _KEYWORDS if k in low}, line
    assert len(_keyword_hits("number of nan iterations: 2")) == 2  # "nan" and, within it, "nan iterations"
