"""The launcher's hang record (hang.json) as the hang finding of last resort (analyzers/launcher_hang.py)."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pandas as pd

from trainctl.analyzers import launcher_hang
from trainctl.analyzers.root_cause import rank_root_cause
from trainctl.findings import Category, Finding, FindingKind, Severity
from trainctl.ops.diagnose.run_events import parse_run_dir_events
from trainctl.schemas import SignalKind

DETECTED = 2_000_000_000_000_000_000


def _rows(*ranks: int) -> list[dict]:
    return [
        {"rank": r, "event": launcher_hang.EVENT, "message": "no rank made progress for 20.1s", "ts": DETECTED}
        for r in ranks
    ]


def _coll(rank: int, seq: int, state: str, age_s: float) -> dict:
    return {
        "rank": rank, "pg_name": "0", "pg_desc": "default_pg", "seq": seq, "op": "all_reduce", "state": state,
        "backend": "nccl", "retired": state == "completed", "record_id": seq,
        "enqueue_ts": pd.Timestamp(DETECTED - int(age_s * 1e9), unit="ns"),
    }  # fmt: skip


def test_several_ranks_all_pending_in_one_collective_are_a_hang_nobody_is_blamed_for() -> None:
    coll = pd.DataFrame([_coll(r, s, st, 30) for r in range(4) for s, st in ((6, "completed"), (7, "scheduled"))])
    f = launcher_hang.launcher_hang_finding(_rows(0, 1, 2, 3), coll, None, {r: f"node0{r // 2 + 1}" for r in range(4)})
    assert f is not None and f.kind is FindingKind.HUNG_COLLECTIVE and f.severity is Severity.CRITICAL
    assert f.ranks == () and f.hosts == () and f.confidence == 0.5  # nothing for a runbook to evict
    assert "all 4 stopped ranks have a collective pending" in f.summary and "all_reduce #7 of default_pg" in f.summary
    assert [x["pending_collective"]["seq"] for x in f.evidence["ranks"]] == [7, 7, 7, 7]


def test_one_rank_with_nothing_pending_stopped_in_host_code() -> None:
    coll = pd.DataFrame([_coll(0, 3, "completed", 40)])
    f = launcher_hang.launcher_hang_finding(_rows(0), coll, None, {0: "node01"})
    assert f is not None and f.ranks == (0,) and f.hosts == ("node01",)
    assert "no collective was pending in its Flight Recorder: it stopped in host code" in f.summary
    blind = launcher_hang.launcher_hang_finding(_rows(0), None, None, {0: "node01"})
    assert blind is not None and "where it stopped is not known" in blind.summary  # no recorder: no guess


def test_no_record_no_finding() -> None:
    assert launcher_hang.launcher_hang_finding([{"rank": 0, "event": "exception"}], None, None, {}) is None


def _hang(basis: str | None, ranks: tuple[int, ...]) -> Finding:
    return Finding(
        kind=FindingKind.HUNG_COLLECTIVE, severity=Severity.CRITICAL, category=Category.COLLECTIVE_TIMEOUT,
        summary=f"hang {basis}", ranks=ranks, hosts=(), confidence=0.9, evidence={"basis": basis} if basis else {},
    )  # fmt: skip


def test_a_localised_hang_is_the_root_and_the_launcher_record_folds_under_it() -> None:
    record = _hang(launcher_hang.BASIS, ())
    fr = _hang("flight recorder", (3,))
    out = rank_root_cause([record, fr])
    assert out == [out[0]] and out[0].ranks == (3,)
    assert [x["summary"] for x in out[0].evidence["followed_by"]] == [record.summary]


def test_hang_json_is_read_and_a_malformed_one_is_skipped(tmp_path: Path, caplog) -> None:
    run = tmp_path / "run"
    run.mkdir()
    doc = {"reason": "no rank made progress", "stale_ranks": [1, 0, 1], "detected_ts_ns": DETECTED}
    (run / "hang.json").write_text(json.dumps(doc))
    rows = parse_run_dir_events(run, None)[SignalKind.RUN_EVENTS].to_pylist()
    assert [(r["rank"], r["event"], r["source"]) for r in rows] == [
        (1, "hang_detected", "hang.json"),
        (0, "hang_detected", "hang.json"),
    ]
    for bad in ('{"stale_ranks": "all"}', "[1, 2]", '{"stale_ranks": [0]}', "{not json"):
        (run / "hang.json").write_text(bad)
        with caplog.at_level(logging.WARNING):
            assert SignalKind.RUN_EVENTS not in parse_run_dir_events(run, None)


def test_a_hostile_stale_rank_list_keeps_only_its_ranks(tmp_path: Path) -> None:
    (tmp_path / "hang.json").write_text(json.dumps({"stale_ranks": [[1], {"a": 1}, 2, True, -3], "detected_ts_ns": 5}))
    rows = parse_run_dir_events(tmp_path, None)[SignalKind.RUN_EVENTS].to_pylist()
    assert [r["rank"] for r in rows] == [2]


def test_a_numerics_file_needs_a_step_or_a_loss_and_an_int64_min_timestamp_has_no_instant(tmp_path: Path) -> None:
    # Found by tests/fuzz: {"timestamp_ns": -2**63} came back from Arrow as pandas' NaT, whose
    # .timestamp() raised in the root-cause sort; and a document without step or loss claimed a NaN.
    from trainctl.analyzers.root_cause import findings_from_run_events

    (tmp_path / "numerics").mkdir()
    (tmp_path / "numerics" / "rank-0.json").write_text(json.dumps({"timestamp_ns": -(2**63)}))
    assert parse_run_dir_events(tmp_path, None) == {}
    for r, step in ((0, 7), (1, 5)):
        doc = {"rank": r, "step": step, "loss": "nan", "timestamp_ns": -(2**63)}
        (tmp_path / "numerics" / f"rank-{r}.json").write_text(json.dumps(doc))
    rows = next(t for t in parse_run_dir_events(tmp_path, None).values()).to_pylist()
    (f,) = findings_from_run_events(rows, {})
    assert (f.kind, f.ranks) == (FindingKind.NUMERICAL, (1,))  # the earlier step, whatever the time says
