"""torch.distributed.debug's periodic dumps as diagnose input (issue 17 item 7).

The fixtures are real: torch 2.13's `start_debug_server(dump_dir=..., dump_interval=3)` in a
2-rank gloo job under torchrun on this machine (the scripts are next to them, *.py.txt):
- hang_gloo/: rank 1 sleeps instead of entering the 4th all_reduce; rank 0 waits in it;
- wedged_rank/: rank 1 SIGSTOPs itself (its worker server stops answering too), rank 0 waits.
Copies lose their mtimes, so the dumps' times come from their names' stamps.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pandas as pd
import pyarrow as pa

from trainctl.analyzers import stack_hangs
from trainctl.collectors import torch_debug_dumps as tdd
from trainctl.findings import FindingKind, Severity
from trainctl.ops.diagnose.diagnosis import InputKind, detect_input, diagnose_path
from trainctl.ops.diagnose.hang_inputs import parse_run_dir_hang_artefacts
from trainctl.rundir import HostRanks, RunInfo
from trainctl.runtime import nccl_env
from trainctl.schemas import SignalKind

FIXTURES = Path(__file__).parents[1] / "fixtures" / "torch_debug"


def _copy(name: str, dest: Path, keep: int | None = None) -> Path:
    files = sorted(p for p in (FIXTURES / name).iterdir() if p.suffix == ".txt" and not p.name.endswith(".py.txt"))
    stacks = [p for p in files if p.name.startswith("stacks_")]
    chosen = [p for p in files if p not in stacks] + (stacks[-keep:] if keep else stacks)
    dest.mkdir(parents=True, exist_ok=True)
    for p in chosen:
        shutil.copy(p, dest / p.name)  # mtime = now: the stamps must carry the order and spacing
    return dest


def test_sections_of_a_partial_dump_name_the_silent_rank_and_why() -> None:
    text = (FIXTURES / "wedged_rank" / "stacks_20261126_092515.txt").read_text()
    sections, total = tdd.parse_debug_dump(text)
    assert total == 2
    assert [s.rank for s in sections] == [0, 1]
    assert sections[0].host == "vm" and sections[0].error is None and "in all_reduce" in sections[0].text
    assert sections[1].text == "" and sections[1].error.startswith("Timeout: HTTPConnectionPool")


def test_stamp_time_takes_the_offset_from_a_kept_mtime_and_is_utc_without_one() -> None:
    utc = tdd.stamp_ts_ns("20261126_092049")
    assert utc == int(pd.Timestamp("2026-11-26T09:20:49Z").value)
    # written at 09:20:49 local time in UTC-05:00, i.e. 14:20:49Z, and the file kept its mtime (+0.4 s)
    mtime = int(pd.Timestamp("2026-11-26T14:20:49.4Z").value)
    assert tdd.stamp_ts_ns("20261126_092049", mtime) == int(pd.Timestamp("2026-11-26T14:20:49Z").value)
    assert tdd.stamp_ts_ns("20261126_092049", utc + 3 * 86400 * 10**9) == utc  # a copy made days later


def test_a_dump_dir_is_detected_and_the_rank_that_never_joined_is_named(tmp_path) -> None:
    d = _copy("hang_gloo", tmp_path / "dumps")
    assert detect_input(d) is InputKind.TORCH_DEBUG_DUMPS
    report = diagnose_path(d)
    top = report.findings[0]
    assert top.kind is FindingKind.HUNG_COLLECTIVE and top.severity is Severity.CRITICAL
    assert top.ranks == (1,) and top.hosts == ("vm",)
    assert top.evidence["outside_collectives"] == {"1": "<module>(), hang.py:10"}
    assert top.evidence["waiting"] == {"0": "in all_reduce() from <module>(), hang.py:11"}
    assert top.evidence["snapshots"] == 3 and top.evidence["unchanged_for_s"] == 6.0
    assert stack_hangs.CONFIDENCE_STUCK == top.confidence < 0.9  # stacks alone never reach a runbook's evict gate
    assert [f for f in report.findings if f.severity is Severity.CRITICAL] == [top]


def test_one_snapshot_is_only_a_warning(tmp_path) -> None:
    d = _copy("hang_gloo", tmp_path / "dumps", keep=1)
    (top,) = diagnose_path(d).findings
    assert top.severity is Severity.WARNING and top.ranks == (1,)
    assert top.confidence == stack_hangs.CONFIDENCE_ONE_SNAPSHOT
    assert "newest snapshot only" in top.summary


def test_a_rank_whose_worker_stopped_answering_is_named_below_a_rank_seen_outside(tmp_path) -> None:
    d = _copy("wedged_rank", tmp_path / "dumps")
    (top,) = diagnose_path(d).findings
    assert top.ranks == (1,) and top.evidence["no_stack"] == [1] and top.evidence["outside_collectives"] == {}
    assert top.severity is Severity.CRITICAL and top.confidence < stack_hangs.CONFIDENCE_STUCK
    assert "gave no stack" in top.summary


def _rows(snapshots: list[dict[int, tuple[str, str, int]]], step_s: float = 3.0) -> pd.DataFrame:
    """Stacks rows: per snapshot, rank -> innermost (function, file, line) over a script's <module>."""
    rows = []
    for i, snap in enumerate(snapshots):
        ts = pd.Timestamp("2026-11-26T10:00:00Z") + pd.Timedelta(seconds=i * step_s)
        for rank, (func, filename, line) in snap.items():
            frames = [(func, filename, line), ("<module>", "/job/train.py", 40)]
            for depth, (f, fn, ln) in enumerate(frames):
                rows.append(
                    {"ts": ts, "rank": rank, "pid": None, "thread": "MainThread", "depth": depth, "function": f,
                     "filename": fn, "line": ln, "source": "dump_traceback", "host": f"node0{rank // 2 + 1}"}
                )  # fmt: skip
    return pd.DataFrame(rows)


C10D = "/venv/site-packages/torch/distributed/distributed_c10d.py"


def test_a_healthy_run_caught_at_different_places_is_not_a_hang() -> None:
    # rank 1 is behind at one snapshot, then everyone moves on: never the same place twice
    snaps = [
        {0: ("all_reduce", C10D, 3252), 1: ("forward", "/job/model.py", 10)},
        {0: ("forward", "/job/model.py", 12), 1: ("all_reduce", C10D, 3252)},
        {0: ("all_reduce", C10D, 3252), 1: ("backward", "/job/model.py", 30)},
    ]
    assert stack_hangs.analyze_stack_hangs(_rows(snaps)) == []
    (alone,) = stack_hangs.analyze_stack_hangs(_rows(snaps[-1:]))  # the last picture alone is ambiguous
    assert alone.severity is Severity.WARNING and alone.ranks == (1,)
    # the same place twice, but for less than MIN_STUCK_S: not yet a hang, and not a warning either
    assert stack_hangs.analyze_stack_hangs(_rows([snaps[0], snaps[0]], step_s=2.0)) == []


def test_everyone_stuck_in_collectives_names_nobody() -> None:
    snap = {r: ("all_reduce", C10D, 3252) for r in range(4)}
    (f,) = stack_hangs.analyze_stack_hangs(_rows([snap, snap, snap]), world=4)
    assert f.ranks == () and f.hosts == () and f.severity is Severity.WARNING
    assert stack_hangs.analyze_stack_hangs(_rows([snap]), world=4) == []  # one picture of that: nothing


def test_hosts_come_from_the_run_and_a_rank_missing_from_the_world_is_no_stack() -> None:
    snap = {0: ("barrier", C10D, 4000), 1: ("barrier", C10D, 4000), 2: ("barrier", C10D, 4000)}
    (f,) = stack_hangs.analyze_stack_hangs(_rows([snap, snap, snap]), world=4, hosts={3: "gpu-17"})
    assert f.ranks == (3,) and f.hosts == ("gpu-17",) and f.evidence["no_stack"] == [3]


def test_the_flight_recorder_speaks_where_it_is_present() -> None:
    from trainctl.signals import Signals

    snap = {0: ("all_reduce", C10D, 3252), 1: ("forward", "/job/model.py", 10)}
    stacks = pa.Table.from_pandas(_rows([snap, snap, snap]), preserve_index=False)
    alone = Signals(None, {SignalKind.STACKS: stacks}, "x")
    assert stack_hangs.analyze(alone)
    coll = pa.table({"rank": pa.array([0], pa.int32())})
    assert stack_hangs.analyze(Signals(None, {SignalKind.STACKS: stacks, SignalKind.COLLECTIVES: coll}, "x")) == []


def test_a_run_dir_reads_the_dumps_in_a_hosts_stacks_folder_with_the_runs_host_names(tmp_path) -> None:
    run = RunInfo("r-1", 2, 1, (HostRanks("node01", (0,)), HostRanks("node02", (1,))))
    _copy("hang_gloo", tmp_path / "stacks" / "node01")  # rank 0's frontend writes every rank's stacks
    stacks = parse_run_dir_hang_artefacts(tmp_path, run)[SignalKind.STACKS].to_pandas()
    assert set(zip(stacks["rank"], stacks["host"])) == {(0, "node01"), (1, "node02")}
    assert stacks["ts"].nunique() == 3


def test_ranks_are_told_where_the_debug_server_should_dump(tmp_path) -> None:
    env = nccl_env.rank_env(tmp_path, "node02", {})
    assert env["TRAINCTL_TORCH_DEBUG_DIR"] == str(tmp_path / "stacks" / "node02")
    assert os.path.basename(env["TRAINCTL_TORCH_DEBUG_DIR"]) == "node02"


def test_a_dump_file_is_read_only_up_to_its_cap(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(tdd, "MAX_DUMP_BYTES", 4096)
    d = _copy("hang_gloo", tmp_path / "dumps", keep=1)
    big = next(d.glob("stacks_*.txt"))
    big.write_text(big.read_text() + "\n" + "x" * 100_000)  # a hostile or broken dump: read up to the cap only
    table, dumps = tdd.read_debug_dumps(d)
    assert len(dumps[0].sections) == 2 and table.num_rows > 0
