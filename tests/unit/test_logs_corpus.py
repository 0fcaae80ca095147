"""Every labelled real excerpt of the corpus (tests/fixtures/logs, a copy of shared/corpus) through
parse + analyze: the first finding has the labelled kind/category, and culprits match the labels
exactly (null = nobody blamed, by any finding).

The corpus labels use their own categories; LABEL_TO_FINDING maps them onto DESIGN.md's kinds and
categories by rule (no per-row expectations).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from trainctl.analyzers.logs import analyze_log_events
from trainctl.collectors.logs import parse_log_text
from trainctl.findings import Category, FindingKind

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "logs" / "real_logs_dev.jsonl"
ROWS = [json.loads(line) for line in FIXTURE.read_text().splitlines() if line.strip()]


def expected_kind_category(category: str, sub: str) -> tuple[FindingKind, Category | None]:
    """Corpus label -> (kind, category), by rule over the label's words."""
    if category == "nccl_watchdog_timeout":
        return FindingKind.HUNG_COLLECTIVE, Category.COLLECTIVE_TIMEOUT
    if category == "hang":
        return FindingKind.HUNG_COLLECTIVE, None
    if category == "cuda_hw_error":
        if sub.startswith("xid"):
            return FindingKind.FAULTY_HOST, Category.NVLINK if "nvlink" in sub else Category.XID
        return FindingKind.CRASH, Category.CUDA_ERROR
    if category == "elastic_failure":
        return FindingKind.CRASH, Category.SIGNAL if "sigkill" in sub else Category.EXIT_CODE
    if category == "gloo":
        return FindingKind.NETWORK_ERROR, Category.GLOO
    if category == "nan_loss":
        return FindingKind.NUMERICAL, Category.OVERFLOW if "overflow" in sub else Category.NAN_LOSS
    if category == "oom":
        return FindingKind.OOM, None
    if category == "rendezvous":
        return FindingKind.RENDEZVOUS_ERROR, None
    if category == "nccl_network_error":
        if "ib" in sub.split("_"):
            return FindingKind.NETWORK_ERROR, Category.IB
        if "socket" in sub or "connection_reset" in sub:
            return FindingKind.NETWORK_ERROR, Category.SOCKET
        return FindingKind.NETWORK_ERROR, Category.NCCL
    raise AssertionError(f"unmapped corpus category {category!r}")


def test_corpus_is_the_labelled_dev_set() -> None:
    assert len(ROWS) == 35
    assert len({r["id"] for r in ROWS}) == 35


@pytest.mark.parametrize("row", ROWS, ids=[r["id"] for r in ROWS])
def test_corpus_row(row: dict) -> None:
    table = parse_log_text(row["log"], source=f"{row['id']}.log")
    findings = analyze_log_events(table)
    assert findings, f"{row['id']}: no finding"
    first = findings[0]
    kind, category = expected_kind_category(row["category"], row["subcategory"])
    assert (first.kind, first.category) == (kind, category), first.summary
    want_ranks = () if row["culprit_rank"] is None else (row["culprit_rank"],)
    want_hosts = () if row["culprit_host"] is None else (row["culprit_host"],)
    assert (first.ranks, first.hosts) == (want_ranks, want_hosts), first.summary
    for f in findings:  # no other finding blames anyone the labels do not
        assert set(f.ranks) <= set(want_ranks) and set(f.hosts) <= set(want_hosts), f.summary
    assert first.evidence["first_failure"] is True
    assert all(line.startswith(f"{row['id']}.log:") for line in first.evidence["lines"])


def test_corpus_extracted_fields_match_hints() -> None:
    """The hints the labels carry (seq, op, gpu_pci, xids, exit codes) are what the parser extracts."""
    checked = 0
    for row in ROWS:
        hints = row["hints"]
        t = parse_log_text(row["log"], source=row["id"]).to_pylist()
        if "seq" in hints and row["category"] == "nccl_watchdog_timeout":
            assert hints["seq"] in {e["seq"] for e in t}, row["id"]
            checked += 1
        if "op" in hints:
            assert hints["op"] in {e["op"] for e in t}, row["id"]
            checked += 1
        if "gpu_pci" in hints:
            assert hints["gpu_pci"].removeprefix("PCI:") in {e["gpu_pci"] for e in t}, row["id"]
            checked += 1
        if "xids" in hints:
            assert set(hints["xids"]) == {e["xid"] for e in t if e["xid"] is not None}, row["id"]
            checked += 1
        if "root_xids" in hints:
            assert set(hints["root_xids"]) == {e["xid"] for e in t if e["xid"] is not None}, row["id"]
            checked += 1
        if "exitcode" in hints:
            assert hints["exitcode"] in {e["exit_code"] for e in t}, row["id"]
            checked += 1
        if "timeout_ms" in hints:
            assert any(json.loads(e["fields"] or "{}").get("timeout_ms") == hints["timeout_ms"] for e in t), row["id"]
            checked += 1
    assert checked >= 15
