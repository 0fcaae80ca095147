"""Real 4-rank gloo jobs driven into hangs; their real Flight Recorder dumps and stacks diagnosed.

Each scenario (tests/fixtures/hangs/hang_scenario.py) spawns 4 ranks on 2 simulated hosts, dumps
every live rank through its debug server (as `trainctl launch` does on hang detection) and kills
them; `trainctl diagnose DIR --json` must then name exactly the culprit rank(s), pg, seq and op.
"""

from __future__ import annotations

import json
import os
import pickle
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

SCENARIO = Path(__file__).resolve().parents[1] / "fixtures" / "hangs" / "hang_scenario.py"
pytestmark = [pytest.mark.slow]

_cache: dict[str, Path] = {}


@pytest.fixture(scope="module")
def scenario(tmp_path_factory):
    def make(name: str, *extra: str) -> Path:
        if name not in _cache:
            d = tmp_path_factory.mktemp(name)
            env = {**os.environ, "GLOO_SOCKET_IFNAME": "lo"}
            res = subprocess.run(
                [sys.executable, str(SCENARIO), name, str(d), *extra],
                capture_output=True,
                text=True,
                timeout=240,
                env=env,
            )
            assert res.returncode == 0, res.stderr[-3000:]
            _cache[name] = d
        return _cache[name]

    return make


def _diagnose(cli, path: Path) -> tuple[int, list[dict]]:
    res = cli("diagnose", str(path), "--json")
    assert res.code in (0, 3), res.stderr
    return res.code, json.loads(res.stdout)["findings"]


def _only(findings: list[dict], kind: str) -> dict:
    hits = [f for f in findings if f["kind"] == kind]
    assert len(hits) == 1, findings
    return hits[0]


@pytest.mark.timeout(300)
def test_one_rank_never_joins_all_reduce(scenario, cli) -> None:
    code, fs = _diagnose(cli, scenario("never_joins"))
    assert code == 3 and [f["kind"] for f in fs] == ["hung_collective"]
    f = fs[0]
    assert f["ranks"] == [3] and f["hosts"] == ["node02"] and f["severity"] == "critical"
    ev = f["evidence"]
    assert (ev["pg_name"], ev["pg_desc"], ev["seq"], ev["op"]) == ("0", "default_pg", 4, "all_reduce")
    assert ev["waiting_ranks"] == [0, 1, 2]
    assert ev["stack"] == {"3": "read_shard(), hang_scenario.py:44"}
    assert "rank 3 on node02 is in read_shard(), hang_scenario.py:44" in f["summary"]
    assert ev["hang_map"]["states"] == {"0": "waiting", "1": "waiting", "2": "waiting", "3": "culprit"}


@pytest.mark.timeout(300)
def test_hang_map_is_printed_after_the_table(scenario, cli) -> None:
    # A wide console (pytest exports its own COLUMNS), so table cells are not folded.
    res = cli("diagnose", str(scenario("never_joins")), env={**os.environ, "COLUMNS": "200"})
    assert res.code == 3
    table_end = res.stdout.index("hung_collective")
    grid = res.stdout.index("hang map: all_reduce seq 4 of pg 0 (default_pg)")
    assert grid > table_end and "X r3" in res.stdout and res.stdout.count("W r") == 3


@pytest.mark.timeout(300)
def test_one_rank_calls_a_different_collective(scenario, cli) -> None:
    _, fs = _diagnose(cli, scenario("wrong_op"))
    f = _only(fs, "collective_mismatch")
    assert f["ranks"] == [2] and f["hosts"] == ["node02"] and f["category"] == "type_mismatch"
    ev = f["evidence"]
    assert (ev["pg_name"], ev["seq"], ev["per_rank"]["2"], ev["per_rank"]["0"]) == ("0", 4, "broadcast", "all_reduce")
    assert ev["majority_ranks"] == [0, 1, 3]
    assert not [x for x in fs if x["kind"] == "hung_collective"]


@pytest.mark.timeout(300)
def test_one_rank_of_a_subgroup_skips_its_collective(scenario, cli) -> None:
    _, fs = _diagnose(cli, scenario("subgroup_skip"))
    f = _only(fs, "hung_collective")
    assert f["ranks"] == [1] and f["hosts"] == ["node01"]
    ev = f["evidence"]
    assert (ev["pg_name"], ev["pg_desc"], ev["seq"], ev["op"]) == ("1", "tp", 1, "all_reduce")
    assert ev["members"] == [0, 1] and ev["membership"] == "run.json group 'tp'"
    assert ev["stack"] == {"1": "read_shard(), hang_scenario.py:44"}
    # Ranks 2,3 then wait in world seq 5: the same root cause, reported inside this finding.
    assert [(h["pg_name"], h["seq"]) for h in ev["also_hung"]] == [("0", 5)]
    assert ev["hang_map"]["states"] == {"0": "waiting", "1": "culprit", "2": "waiting", "3": "waiting"}


@pytest.mark.timeout(300)
def test_two_ranks_one_collective_behind_from_json_dumps(scenario, cli) -> None:
    d = scenario("two_behind", "--json")
    assert sorted(p.name for p in (d / "fr" / "node02").iterdir()) == ["rank-2.json", "rank-3.json"]
    _, fs = _diagnose(cli, d)
    f = _only(fs, "hung_collective")
    assert f["ranks"] == [2, 3] and f["hosts"] == ["node02"]
    assert (f["evidence"]["seq"], f["evidence"]["op"], f["evidence"]["waiting_ranks"]) == (4, "all_reduce", [0, 1])
    assert f["evidence"]["stack"] == {
        "2": "read_shard(), hang_scenario.py:44",
        "3": "read_shard(), hang_scenario.py:44",
    }


@pytest.mark.timeout(300)
def test_killed_rank_leaves_no_dump_and_is_named_with_lower_confidence(scenario, cli) -> None:
    d = scenario("killed")
    assert not (d / "fr" / "node02" / "rank-3.pkl").exists()
    _, fs = _diagnose(cli, d)
    f = _only(fs, "hung_collective")
    assert f["ranks"] == [3] and f["hosts"] == ["node02"] and f["confidence"] < 0.7
    assert "left no Flight Recorder dump" in f["summary"] and f["evidence"]["missing_dumps"] == [3]
    assert f["evidence"]["hang_map"]["states"]["3"] == "culprit"


@pytest.mark.timeout(300)
def test_raw_dump_dir_with_some_ranks_missing_still_answers(scenario, cli, tmp_path) -> None:
    src = scenario("never_joins")
    for p in (src / "fr").glob("*/rank-*.pkl"):
        if p.name != "rank-1.pkl":
            shutil.copy(p, tmp_path / f"trace_{p.stem.split('-')[1]}")
    _, fs = _diagnose(cli, tmp_path)
    f = _only(fs, "hung_collective")
    assert f["ranks"] == [3] and f["hosts"] == [] and f["confidence"] == 0.75
    assert f["evidence"]["missing_dumps"] == [1] and "no dump from rank(s) 1" in f["summary"]
    assert f["evidence"]["hang_map"]["states"] == {"0": "waiting", "1": "no_data", "2": "waiting", "3": "culprit"}


class _Evil:
    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


@pytest.mark.timeout(60)
def test_hostile_pickle_is_refused_with_exit_1(cli, tmp_path) -> None:
    marker = tmp_path / "side-effect"
    dumps = tmp_path / "dumps"
    dumps.mkdir()
    (dumps / "trace_0").write_bytes(pickle.dumps({"version": "2.10", "pg_status": {}, "entries": [_Evil(str(marker))]}))
    res = cli("diagnose", str(dumps), "--json")
    assert res.code == 1 and res.stdout == ""
    assert "refusing to unpickle" in res.stderr and "posix.system" in res.stderr and "trace_0" in res.stderr
    assert not marker.exists()


@pytest.mark.timeout(300)
def test_stock_analyzer_crashes_on_gloo_dumps_where_trainctl_answers(scenario, cli, tmp_path) -> None:
    src = scenario("never_joins")
    for p in (src / "fr").glob("*/rank-*.pkl"):
        shutil.copy(p, tmp_path / f"trace_{p.stem.split('-')[1]}")
    stock = subprocess.run(
        [sys.executable, "-m", "torch.distributed.flight_recorder.fr_trace", str(tmp_path), "-p", "trace_"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert stock.returncode != 0 and "KeyError" in stock.stderr
    _, fs = _diagnose(cli, tmp_path)
    assert _only(fs, "hung_collective")["ranks"] == [3]
