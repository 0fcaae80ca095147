"""Collector parsers on recorded output (tests/fixtures/collect/*.json: command, output, expected).

Each fixture pins the exact command the collector builds and what its parser makes of the
recorded output; a regression test is a new JSON file (pyinfra's facts tests).
"""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

import pytest

from trainctl.collectors import host_facts, kernel_log, pyspy_dump, rundir_sync

FIXTURES = sorted((Path(__file__).parents[1] / "fixtures" / "collect").glob("*.json"))


def _run(case: dict):
    c = case["collector"]
    if c == "kernel_log":
        return kernel_log.COMMAND, asdict(kernel_log.parse(case["output"], case["exit_code"]))
    if c == "host_facts":
        return host_facts.command("python3"), host_facts.parse(case["output"])
    if c == "manifest":
        got = rundir_sync.parse_manifest(case["output"].encode())
        return rundir_sync.manifest_command("/runs/r-1"), {k: [v.size_bytes, v.mtime_ns] for k, v in got.items()}
    if c == "pyspy_ranks":
        return pyspy_dump.ranks_command("/runs/r-1"), [
            asdict(p) for p in pyspy_dump.parse_ranks(case["output"], case["host"])
        ]
    if c == "pyspy":
        procs = [pyspy_dump.RankProc(2, 4242, "node02"), pyspy_dump.RankProc(3, 4243, "node02")]
        got = pyspy_dump.parse(case["output"], case["nonce"])
        return pyspy_dump.command(procs, case["nonce"]), {str(k): v for k, v in got.items()}
    raise AssertionError(f"unknown collector {c}")


@pytest.mark.parametrize("path", FIXTURES, ids=[p.stem for p in FIXTURES])
def test_parser_on_recorded_output(path: Path) -> None:
    case = json.loads(path.read_text())
    command, got = _run(case)
    assert command == case["command"], f"command changed:\nGOT  {command!r}\nWANT {case['command']!r}"
    if isinstance(got, dict) and "lines" in got:
        got["lines"] = list(got["lines"])
    assert got == case["expected"], f"\nGOT  {json.dumps(got, indent=1)}\nWANT {json.dumps(case['expected'], indent=1)}"


def test_fixture_set_covers_every_collector() -> None:
    kinds = {json.loads(p.read_text())["collector"] for p in FIXTURES}
    assert kinds == {"kernel_log", "host_facts", "manifest", "pyspy_ranks", "pyspy"}


@pytest.mark.parametrize(
    "path,kind",
    [
        ("run.json", "run_info"),
        ("ranks/rank-12.json", "ranks"),
        ("heartbeats/rank-3.json", "heartbeats"),
        ("errors/rank-3.json", "errors"),
        ("timeline/host=node01/part-rank0-0.parquet", "timeline"),
        ("gpu_metrics/host=node01/part-a.parquet", "gpu_metrics"),
        ("stacks/host=node01/part-a.parquet", "stacks"),
        ("stacks/node01/rank-3.txt", "stack_dumps"),
        ("stacks/node01/rank-3.pyspy.txt", "stack_dumps"),
        ("fr/node01/rank-3.pkl", "fr_dumps"),
        ("logs/node01/rank-3.log", "rank_logs"),
        ("collection_status/host=node01/part-collect.parquet", None),  # written by collect itself
        ("heartbeats/.rank-3.json.abc.tmp", None),  # an atomic write in progress
        ("checkpoints/step-10/model.pt", None),
        ("logs/../etc/passwd", None),
        ("notes.txt", None),
    ],
)
def test_classify(path: str, kind: str | None) -> None:
    assert rundir_sync.classify(path) == kind


def test_changed_fetches_only_new_or_modified_selected_files() -> None:
    st = rundir_sync.FileStat
    remote = {
        "run.json": st(10, 1),
        "logs/n1/rank-0.log": st(20, 5),
        "logs/n1/rank-1.log": st(7, 9),
        "fr/n1/rank-0.pkl": st(3, 3),
    }
    local = {"run.json": st(10, 1), "logs/n1/rank-0.log": st(20, 4)}
    assert rundir_sync.changed(remote, local, ["run_info", "rank_logs"]) == {
        "logs/n1/rank-0.log": "rank_logs",
        "logs/n1/rank-1.log": "rank_logs",
    }
