"""analyzers/hangs.py on hand-built Flight Recorder tables (cases the real-process tests do not reach)."""

from __future__ import annotations

import pandas as pd

from trainctl.analyzers.hangs import analyze_hangs, rank_grid
from trainctl.findings import Category, FindingKind
from trainctl.rundir import HostRanks, RunInfo

RUN = RunInfo(
    "r",
    4,
    2,
    (HostRanks("node01", (0, 1)), HostRanks("node02", (2, 3))),
    groups={"tp": ((0, 1), (2, 3)), "dp": ((0, 2), (1, 3))},
    layout={"dp": 2, "tp": 2, "pp": 1},
)


def _rows(
    rank: int,
    pg: str,
    seqs,
    *,
    desc: str = "default_pg",
    op: str = "all_reduce",
    size: int = 16,
    retired_last: bool = False,
    first_record: int = 0,
    overrides: dict | None = None,
) -> list[dict]:
    rows = []
    seqs = list(seqs)
    for i, s in enumerate(seqs):
        o = (overrides or {}).get(s, {})
        rows.append(
            {
                "rank": rank,
                "pg_name": pg,
                "pg_desc": desc,
                "pg_ranks": None,
                "seq": s,
                "record_id": first_record + i,
                "op": o.get("op", op),
                "input_sizes": [[o.get("size", size)]],
                "output_sizes": [[o.get("size", size)]],
                "input_dtypes": [o.get("dtype", "Float")],
                "output_dtypes": [o.get("dtype", "Float")],
                "enqueue_ts": pd.Timestamp(1_700_000_000_000_000_000 + s * 1000 + rank, tz="UTC"),
                "retired": i < len(seqs) - 1 or retired_last,
                "frames": None,
            }
        )
    return rows


def _df(*groups: list[dict]) -> pd.DataFrame:
    return pd.DataFrame([r for g in groups for r in g])


def test_size_mismatch_majority_names_the_deviating_rank_even_if_it_is_rank_0() -> None:
    df = _df(_rows(0, "0", range(1, 5), overrides={4: {"size": 8}}), *(_rows(r, "0", range(1, 5)) for r in (1, 2, 3)))
    (f,) = analyze_hangs(df, run=RUN)
    assert f.kind is FindingKind.COLLECTIVE_MISMATCH and f.category is Category.SIZE_MISMATCH
    assert f.ranks == (0,) and f.hosts == ("node01",) and f.evidence["seq"] == 4
    assert f.evidence["vote"] == "3 of 4"


def test_dtype_mismatch_is_a_type_mismatch_and_a_tie_is_not_blamed_on_anyone() -> None:
    df = _df(_rows(0, "0", range(1, 3)), _rows(1, "0", range(1, 3), overrides={2: {"dtype": "Half"}}))
    (f,) = analyze_hangs(df)
    assert f.category is Category.TYPE_MISMATCH and f.evidence["mismatch"] == "dtype"
    assert f.ranks == (0, 1) and f.confidence == 0.4 and "tied" in f.summary


def test_ring_buffer_wrap_aligns_by_seq_and_uses_pg_status() -> None:
    # rank 0 kept seq 50-60 (records 990..), rank 1 kept 45-59: only 50-59 compare; rank 1 is behind.
    df = _df(
        _rows(0, "0", range(50, 61), first_record=990),
        _rows(1, "0", range(45, 60), first_record=985, retired_last=True),
        _rows(1, "0", [], overrides={}),
    )
    # A mismatch at seq 47 exists only on rank 1's side of the wrap: it must not be compared.
    df.loc[(df["rank"] == 1) & (df["seq"] == 47), "op"] = "broadcast"
    status = pd.DataFrame(
        [{"rank": 0, "pg_name": "0", "last_enqueued_seq": 60}, {"rank": 1, "pg_name": "0", "last_enqueued_seq": 59}]
    )
    (f,) = analyze_hangs(df, status)
    assert f.kind is FindingKind.HUNG_COLLECTIVE and f.ranks == (1,) and f.evidence["seq"] == 60
    assert f.evidence["buffer_wrapped_ranks"] == [0, 1]


def test_subgroup_membership_inferred_from_entries_without_run_info() -> None:
    df = _df(
        *(_rows(r, "0", range(1, 4)) for r in range(4)),
        _rows(2, "2", range(1, 3), desc="tp"),
        _rows(3, "2", range(1, 2), desc="tp", retired_last=True),
    )
    (f,) = analyze_hangs(df)
    assert f.ranks == (3,) and f.evidence["pg_name"] == "2" and f.evidence["seq"] == 2
    assert f.evidence["members"] == [2, 3] and f.evidence["membership"].startswith("inferred")
    assert f.evidence["hang_map"]["states"] == {"0": "finished", "1": "finished", "2": "waiting", "3": "culprit"}


def test_subgroup_member_with_no_entries_is_found_through_run_groups() -> None:
    # rank 1 never called the tp collective at all: only run.json knows it belongs to pg "1".
    df = _df(*(_rows(r, "0", range(1, 4), retired_last=True) for r in range(4)), _rows(0, "1", [1], desc="tp"))
    (f,) = analyze_hangs(df, run=RUN)
    assert f.ranks == (1,) and f.evidence["members"] == [0, 1] and "tp" in f.evidence["membership"]


def test_two_groups_hung_by_one_rank_give_one_finding() -> None:
    # rank 1 skipped the tp all_reduce (pg 1) that rank 0 waits in; ranks 2,3 wait in world seq 5.
    df = _df(
        _rows(0, "0", range(1, 5), retired_last=True),
        _rows(1, "0", range(1, 5), retired_last=True),
        _rows(2, "0", range(1, 6)),
        _rows(3, "0", range(1, 6)),
        _rows(0, "1", [1], desc="tp"),
        _rows(2, "2", [1], desc="tp", retired_last=True),
        _rows(3, "2", [1], desc="tp", retired_last=True),
    )
    (f,) = analyze_hangs(df, run=RUN)
    assert f.ranks == (1,) and f.evidence["pg_name"] == "1" and f.evidence["seq"] == 1
    assert f.evidence["also_hung"][0]["pg_name"] == "0" and f.evidence["also_hung"][0]["seq"] == 5
    assert f.evidence["hang_map"]["states"] == {"0": "waiting", "1": "culprit", "2": "waiting", "3": "waiting"}


def test_cross_order_deadlock_blames_both_sides() -> None:
    # rank 0 waits in pg 1 (for rank 1), rank 1 waits in pg 2 (for rank 0): nobody is free.
    df = _df(_rows(0, "1", [1], desc="a"), _rows(1, "2", [1], desc="b"))
    run = RunInfo("r", 2, 2, (HostRanks("h", (0, 1)),), groups={"a": ((0, 1),), "b": ((0, 1),)})
    fs = analyze_hangs(df, run=run)
    assert sorted(f.ranks for f in fs) == [(0,), (1,)]
    assert all("different order" in f.summary for f in fs)


def test_missing_dump_is_evidence_with_lower_confidence() -> None:
    df = _df(*(_rows(r, "0", range(1, 5)) for r in range(3)))
    (f,) = analyze_hangs(df, run=RUN)
    assert f.ranks == (3,) and f.hosts == ("node02",) and f.confidence == 0.6
    assert "left no Flight Recorder dump" in f.summary and f.evidence["missing_dumps"] == [3]
    assert f.evidence["hang_map"]["states"]["3"] == "culprit"


def test_clean_dumps_give_no_finding() -> None:
    assert analyze_hangs(_df(*(_rows(r, "0", range(1, 5), retired_last=True) for r in range(4))), run=RUN) == []


def test_grid_from_layout_with_pipeline_and_fallback_row() -> None:
    run = RunInfo(
        "r",
        8,
        4,
        (HostRanks("a", tuple(range(4))), HostRanks("b", tuple(range(4, 8)))),
        layout={"tp": 2, "dp": 2, "pp": 2},
    )
    g = rank_grid(run, range(8))
    assert g["axes"] == {"stage": "pp", "row": "dp", "col": "tp"}
    assert g["stages"] == [[[0, 1], [2, 3]], [[4, 5], [6, 7]]]
    assert rank_grid(None, [0, 1, 2])["stages"] == [[[0, 1, 2]]]
