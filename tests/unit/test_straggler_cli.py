"""`trainctl diagnose RUN_DIR` on a run dir holding a synthetic straggler timeline (real CLI process)."""

from __future__ import annotations

import json

import pyarrow.compute as pc
import pytest
from straggler_timelines import make_timeline

from trainctl import dataset
from trainctl.rundir import HostRanks, RunInfo, write_run_info
from trainctl.schemas import SignalKind


def _run_dir(tmp_path, **kwargs):
    t = make_timeline(ranks=8, per_host=2, **kwargs)
    hosts = sorted(set(t["host"].to_pylist()))
    for h in hosts:
        part = t.filter(pc.equal(t["host"], h))
        for r in sorted(set(part["rank"].to_pylist())):
            dataset.write_table(
                tmp_path, SignalKind.TIMELINE, h, part.filter(pc.equal(part["rank"], r)), part=f"rank{r}-0"
            )
    info = RunInfo(
        run_id="synthetic-straggler",
        world_size=8,
        nproc_per_node=2,
        hosts=tuple(HostRanks(h, tuple(2 * i + k for k in range(2))) for i, h in enumerate(hosts)),
    )
    write_run_info(tmp_path, info)
    return tmp_path


def test_diagnose_json_names_rank_and_host(tmp_path, cli) -> None:
    run = _run_dir(tmp_path, slow_rank=5, factor=1.5, phase=["forward", "backward"], slow_steps=(40, 200))
    res = cli("diagnose", run, "--json", "--fail-on", "never")
    assert res.code == 0, res.stderr
    report = json.loads(res.stdout)
    assert report["run_id"] == "synthetic-straggler"
    assert report["source_kind"] == "run_dir"
    stragglers = [f for f in report["findings"] if f["kind"] == "straggler"]
    assert [(f["ranks"], f["hosts"], f["category"], f["severity"]) for f in stragglers] == [
        ([5], ["node03"], "compute", "warning")
    ]
    f = stragglers[0]
    assert f["summary"].startswith("rank 5 on node03 spends 1.")
    assert "x the median forward+backward time (steps 40-199): " in f["summary"]
    assert f["evidence"]["steps"] == [40, 199]
    assert f["evidence"]["slowdown"] == pytest.approx(1.5, rel=0.05)
    assert f["playbook"] == "straggler"


@pytest.mark.parametrize("fail_on, code", [("warning", 3), ("critical", 0), ("never", 0)])
def test_fail_on_exit_codes(tmp_path, cli, fail_on: str, code: int) -> None:
    run = _run_dir(tmp_path, slow_rank=2, factor=1.5, phase="forward")
    res = cli("diagnose", run, "--fail-on", fail_on)
    assert res.code == code, res.stderr
    # The table names the rank and host (rich may wrap the summary, so check the compact columns).
    assert "straggler" in res.stdout and "node02" in res.stdout


def test_clean_run_has_no_findings(tmp_path, cli) -> None:
    res = cli("diagnose", _run_dir(tmp_path), "--fail-on", "warning")
    assert res.code == 0, res.stderr
    assert "no findings" in res.stdout
