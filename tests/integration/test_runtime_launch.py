"""Real torchrun + gloo runs through `trainctl launch --local` (4 ranks, 2 simulated hosts)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from procs import alive, processes_mentioning  # noqa: E402 (tests/ is on sys.path)

from trainctl import dataset
from trainctl.rundir import read_run_info

pytestmark = pytest.mark.slow
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "runtime"
PHASES = {"data", "forward", "backward", "communication", "optimizer", "step"}


@pytest.mark.timeout(120)
def test_reference_trainer_timeline_heartbeats_and_rank_map(cli, tmp_path: Path) -> None:
    run = tmp_path / "run"
    r = cli("launch", "--local", "--hosts-local", "2", "--nproc-per-node", "2", "--run-dir", run, "--", "--steps", "12")
    assert r.code == 0, r.stderr
    info = read_run_info(run)
    assert info is not None and info.world_size == 4
    assert sorted(r for h in info.hosts for r in h.ranks) == [0, 1, 2, 3]
    assert [h.host for h in info.hosts] == ["node01", "node02"]
    assert {h.host: len(h.ranks) for h in info.hosts} == {"node01": 2, "node02": 2}
    assert info.groups == {"tp": ((0, 1), (2, 3)), "dp": ((0, 2), (1, 3))}
    t = dataset.read_table(run, "timeline").to_pandas()
    assert sorted(t["rank"].unique()) == [0, 1, 2, 3]
    assert len(t) == 4 * 12 * len(PHASES)
    for rank, g in t.groupby("rank"):
        assert set(g["phase"]) == PHASES
        assert sorted(g["step"].unique()) == list(range(12))
        assert (g["duration_ns"] > 0).all()
        assert set(g["tokens"]) == {256}
        assert g["host"].iloc[0] == info.host_of(int(rank))
    for rank in range(4):
        hb = json.loads((run / "heartbeats" / f"rank-{rank}.json").read_text())
        assert (hb["rank"], hb["step"], hb["phase"]) == (rank, 11, "done")
        assert (run / "logs" / info.host_of(rank) / f"rank-{rank}.log").is_file()
    log = (run / "logs" / info.host_of(0) / "rank-0.log").read_text()
    assert "tokens/s" in log
    # diagnose's summary from the timeline against the trainer's own wall-clock print: two
    # independent measures of one run (the print covers its last window, the summary steps 1-11)
    summary = json.loads(cli("diagnose", run, "--json", "--fail-on", "never").stdout)["summary"]
    printed_tps, printed_mfu = (float(x) for x in re.findall(r"tokens/s (\d+) mfu ([\d.]+)%", log)[-1])
    assert summary["steps"] == 11 and 0.5 < summary["tokens_per_s"] / printed_tps < 2.0, (summary, log)
    assert summary["mfu"] is not None and 0.5 < 100 * summary["mfu"] / max(printed_mfu, 1e-9) < 2.0, (summary, log)


@pytest.mark.timeout(120)
def test_unmodified_ddp_script_gets_compute_and_wait(cli, tmp_path: Path) -> None:
    script = FIXTURES / "ddp_train.py"
    assert "trainctl" not in script.read_text().replace("no trainctl import", "")
    run = tmp_path / "run"
    r = cli(
        "launch",
        "--local",
        "--nproc-per-node",
        "4",
        "--run-dir",
        run,
        "--",
        script,
        "--steps",
        "25",
        "--slow-rank",
        "2",
        "--slow-s",
        "0.03",
    )
    assert r.code == 0, r.stderr
    t = dataset.read_table(run, "timeline").to_pandas()
    for phase in ("compute", "wait", "step", "data"):
        sub = t[t["phase"] == phase]
        assert sorted(sub["rank"].unique()) == [0, 1, 2, 3], phase
        for rank, g in sub.groupby("rank"):
            assert sorted(g["step"]) == list(range(25)), (phase, rank)
    med = t.groupby(["rank", "phase"])["duration_ns"].median()
    # rank 2 sleeps 30 ms before its first collective each step: its compute is the long one and
    # its peers wait for it
    assert med[(2, "compute")] > 20e6 > max(med[(r, "compute")] for r in (0, 1, 3))
    assert med[(2, "wait")] < min(med[(r, "wait")] for r in (0, 1, 3))
    assert set(t[t["phase"] == "compute"]["source"]) == {"flight_recorder"}
    for rank in range(4):
        fr = json.loads((run / "fr" / "node01" / f"rank-{rank}.json").read_text())
        assert any(e["profiling_name"] == "gloo:all_reduce" for e in fr["entries"])


@pytest.mark.timeout(120)
def test_crash_drill_names_root_cause_rank(cli, tmp_path: Path) -> None:
    run = tmp_path / "run"
    r = cli(
        "launch",
        "--local",
        "--hosts-local",
        "2",
        "--nproc-per-node",
        "2",
        "--run-dir",
        run,
        "--inject",
        "crash:rank=1,step=3",
        "--",
        "--steps",
        "30",
    )
    assert r.code == 4, r.stderr
    assert "Root Cause (first observed failure):" in r.stderr
    assert "  rank      : 1 (local_rank: 1)" in r.stderr
    assert "injected crash drill (crash:rank=1,step=3)" in r.stderr
    assert f"error_file: {run.resolve()}/errors/rank-1.json" in r.stderr
    assert "  exitcode  : 1 (pid: " in r.stderr


@pytest.mark.timeout(150)
def test_hang_drill_dumps_every_rank_then_tree_is_gone(cli, tmp_path: Path) -> None:
    run = tmp_path / "run"
    r = cli(
        "launch",
        "--local",
        "--hosts-local",
        "2",
        "--nproc-per-node",
        "2",
        "--run-dir",
        run,
        "--inject",
        "hang:rank=3,step=4",
        "--hang-timeout",
        "5",
        "--",
        "--steps",
        "200",
    )
    assert r.code == 5, r.stderr
    assert "hang detected" in r.stderr
    info = read_run_info(run)
    ranks = json.loads("{}")
    for rank in range(4):
        host = info.host_of(rank)
        fr = json.loads((run / "fr" / host / f"rank-{rank}.json").read_text())
        assert fr["entries"], rank
        assert (run / "fr" / host / f"rank-{rank}.pkl").stat().st_size > 0
        stack = (run / "stacks" / host / f"rank-{rank}.txt").read_text()
        assert "File " in stack
        ranks[rank] = json.loads((run / "ranks" / f"rank-{rank}.json").read_text())["pid"]
    assert "hang_forever" in (run / "stacks" / info.host_of(3) / "rank-3.txt").read_text()
    # the hung rank never enqueued the dp all_reduce its peer is waiting in
    status = json.loads((run / "hang_dumps.json").read_text())
    assert all(v == "ok" for k, v in status.items() if not k.endswith(".pyspy.txt"))
    assert not [p for p in ranks.values() if alive(p)]
    assert processes_mentioning(info.run_id) == []


def test_bad_inject_spec_is_one_line_error(cli, tmp_path: Path) -> None:
    r = cli("launch", "--local", "--run-dir", tmp_path / "x", "--inject", "straggler:rank=9,factor=2")
    assert r.code == 1
    assert "rank 9 does not exist (world size 2)" in r.stderr
    assert "Traceback" not in r.stderr
    r = cli("launch", "--hosts", "node[01-02]")
    # multi-host launch exists now (tests/integration/test_multihost_*): an unknown host is one line
    assert r.code == 1 and "cannot resolve 'node01'" in r.stderr and "Traceback" not in r.stderr
