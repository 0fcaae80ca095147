"""Flight Recorder loading (safe unpickler, any prefix, pickle/JSON) and stack parsers, on recorded output.

tests/fixtures/hangs/recorded/ was produced once by tests/fixtures/hangs/hang_scenario.py never_joins
--pyspy: 4 real gloo ranks, rank 3 blocked in read_shard(), dumps taken through the ranks' debug
servers and `py-spy dump`.
"""

from __future__ import annotations

import json
import os
import pickle
import shutil
from pathlib import Path

import pytest

from trainctl.collectors import flight_recorder as fr
from trainctl.collectors import stacks as stk
from trainctl.errors import FlightRecorderError, UnsafePickleError
from trainctl.schemas import SignalKind

REC = Path(__file__).resolve().parents[1] / "fixtures" / "hangs" / "recorded"


class _Evil:
    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def test_recorded_dumps_parse_into_tables() -> None:
    dumps = fr.load_dumps(fr.find_dumps(REC), root=REC)
    assert [(d.rank, d.host, d.fmt, d.version) for d in dumps] == [
        (0, "node01", "pickle", "2.10"),
        (1, "node01", "pickle", "2.10"),
        (2, "node02", "pickle", "2.10"),
        (3, "node02", "pickle", "2.10"),
    ]
    t = fr.dumps_to_tables(dumps)
    coll = t[SignalKind.COLLECTIVES].to_pandas()
    assert len(coll) == 15  # seq 1-4 on ranks 0-2, seq 1-3 on rank 3
    assert set(coll["op"]) == {"all_reduce"}
    assert coll.groupby("rank")["seq"].max().to_dict() == {0: 4, 1: 4, 2: 4, 3: 3}
    assert coll["pg_ranks"].isna().all()  # gloo: pg_config holds no ranks for the group
    frames = json.loads(coll[(coll["rank"] == 0) & (coll["seq"] == 4)]["frames"].iloc[0])
    assert frames[-1]["name"] == "all_reduce"  # stored innermost last
    st = t[SignalKind.PG_STATUS].to_pandas().set_index("rank")["last_enqueued_seq"].to_dict()
    assert st == {0: 4, 1: 4, 2: 4, 3: 3}


def test_any_prefix_flat_dir_and_json(tmp_path: Path) -> None:
    for d in fr.find_dumps(REC):
        shutil.copy(d, tmp_path / f"nccl_trace_rank_{fr.rank_from_name(d)}")
    (tmp_path / "notes.txt").write_text("not a dump 7")
    dumps = fr.load_dumps(fr.find_dumps(tmp_path), root=tmp_path)
    assert [d.rank for d in dumps] == [0, 1, 2, 3] and all(d.host is None for d in dumps)
    # JSON dump (counters as strings, as _dump_fr_trace_json writes them); pickle wins for the same rank.
    raw = fr.safe_loads((REC / "fr/node02/rank-3.pkl").read_bytes())
    raw["pg_status"] = {k: {kk: str(vv) for kk, vv in v.items()} for k, v in raw["pg_status"].items()}
    for e in raw["entries"]:
        e.pop("frames")
        e["process_group"] = list(e["process_group"])
    (tmp_path / "x9.json").write_text(json.dumps(raw))
    d9 = fr.load_dump(tmp_path / "x9.json")
    assert d9.rank == 9 and d9.fmt == "json"
    tables = fr.dumps_to_tables([d9])
    assert tables[SignalKind.PG_STATUS].column("last_enqueued_seq").to_pylist() == [3]
    assert tables[SignalKind.STACKS].num_rows == 0


def test_hostile_pickle_is_refused_and_never_runs(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    bad = tmp_path / "rank-0.pkl"
    bad.write_bytes(pickle.dumps({"version": "2.10", "entries": [_Evil(str(marker))]}))
    with pytest.raises(UnsafePickleError) as ei:
        fr.load_dump(bad)
    assert str(bad) in str(ei.value) and "posix.system" in str(ei.value)
    assert not marker.exists()


def test_truncated_and_unnamed_dumps_fail_clearly(tmp_path: Path) -> None:
    data = (REC / "fr/node01/rank-0.pkl").read_bytes()
    (tmp_path / "rank-0.pkl").write_bytes(data[: len(data) // 2])
    with pytest.raises(FlightRecorderError, match="rank-0.pkl"):
        fr.load_dump(tmp_path / "rank-0.pkl")
    (tmp_path / "dump.pkl").write_bytes(data)
    with pytest.raises(FlightRecorderError, match="cannot tell which rank"):
        fr.load_dump(tmp_path / "dump.pkl")


def test_normalize_op() -> None:
    assert fr.normalize_op("gloo:all_reduce") == "all_reduce"
    assert fr.normalize_op("nccl:send 1->2") == "send"
    assert fr.normalize_op(None) == "unknown"


def test_dump_traceback_parser_on_recorded_output() -> None:
    rows = stk.parse_dump_traceback((REC / "stacks/node02/rank-3.txt").read_text(), rank=3)
    main = [r for r in rows if r["thread"] == stk.MAIN_THREAD]
    assert [(r["depth"], r["function"], Path(r["filename"]).name, r["line"]) for r in main[:2]] == [
        (0, "read_shard", "hang_scenario.py", 44),
        (1, "rank_main", "hang_scenario.py", 80),
    ]
    assert main[-1]["function"] == "<module>" and all(r["source"] == "dump_traceback" for r in rows)
    # The server thread ("Current thread", no Python frame) contributes no rows.
    assert {r["thread"] for r in rows} == {stk.MAIN_THREAD}


def test_pyspy_parser_on_recorded_output() -> None:
    rows = stk.parse_pyspy_dump((REC / "stacks/node01/rank-0.pyspy.txt").read_text(), rank=0)
    assert rows[0]["pid"] > 0 and rows[0]["thread"] == "MainThread"
    assert [(r["depth"], r["function"], r["filename"], r["line"]) for r in rows[:3]] == [
        (0, "all_reduce", "torch/distributed/distributed_c10d.py", 3252),
        (1, "_exception_logger.<locals>.wrapper", "torch/distributed/c10d_logger.py", 83),
        (2, "rank_main", "hang_scenario.py", 81),
    ]


def test_read_stack_files_maps_both_formats() -> None:
    t = stk.read_stack_files(REC).to_pandas()
    assert set(t["source"]) == {"dump_traceback", "py-spy"}
    assert sorted(t["host"].unique()) == ["node01", "node02"]
    assert sorted(t["rank"].unique()) == [0, 1, 2, 3]


def test_a_torn_dump_next_to_a_good_one_of_the_same_recorder_is_skipped(tmp_path: Path) -> None:
    # The NCCL watchdog writes nccl_trace_rank_<R> with std::ofstream; a rank aborted mid-write
    # leaves it torn. The live dump of the same recorder is used; alone, the torn file still fails.
    data = (REC / "fr/node01/rank-0.pkl").read_bytes()
    (tmp_path / "rank-0.pkl").write_bytes(data)
    (tmp_path / "rank-0.json").write_bytes(b'{"version": "2.10", "entries": [')
    (d,) = fr.load_dumps(fr.find_dumps(tmp_path), root=tmp_path)
    assert d.path.name == "rank-0.pkl"
    (tmp_path / "rank-1.pkl").write_bytes(data[: len(data) // 3])
    with pytest.raises(FlightRecorderError, match="rank-1.pkl"):
        fr.load_dumps(fr.find_dumps(tmp_path), root=tmp_path)
