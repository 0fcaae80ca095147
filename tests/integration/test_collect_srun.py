"""Collect inside a Slurm allocation (issue 18 item 2): one srun step, every node collects itself into
a shared folder, the client takes each node's archive for that node only. A REAL launched run, split
into what each node would hold, comes back and is diagnosed like the run dir.

Nothing is faked: a real Slurm cluster on loopback (tests/slurm_cluster.py: munged, slurmctld and one
slurmd per node, each node in its own mount namespace), allocations made by salloc, the step run by
Slurm's own srun and slurmstepd, the node's own collect included.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from run_split import split_by_host  # noqa: E402 (tests/ is on sys.path)
from slurm_cluster import SlurmCluster, slurm_available  # noqa: E402

from trainctl import dataset

pytestmark = [pytest.mark.slow, pytest.mark.skipif(slurm_available() is not None, reason=str(slurm_available()))]


@pytest.fixture(scope="module")
def launched(cli, tmp_path_factory) -> Path:
    local = tmp_path_factory.mktemp("srun") / "run"
    res = cli("launch", "--local", "--hosts-local", "2", "--nproc-per-node", "2", "--run-dir", local,
                  "--inject", "straggler:rank=2,factor=2", "--", "--steps", "40", timeout=240)  # fmt: skip
    assert res.code == 0, res.stderr
    return local


def _rows(root: Path) -> list:
    return sorted(tuple(r.values()) for r in dataset.read_table(root, "timeline").to_pylist())


@pytest.mark.timeout(360)
def test_every_node_of_the_allocation_collects_itself_and_the_run_is_diagnosed(cli, launched: Path, tmp_path) -> None:
    with SlurmCluster(tmp_path / "slurm", ["node01", "node02"]) as slurm:
        remote_run = slurm.remote_root / "runs" / "llm"
        placed = split_by_host(launched, slurm, remote_run)
        assert placed["node01"] and placed["node02"]
        job = slurm.allocate()
        out = tmp_path / "ds"
        # what a shell inside the allocation has (the default --hosts is SLURM_JOB_NODELIST)
        env = slurm.env(SLURM_JOB_ID=job, SLURM_JOB_NODELIST="node[01-02]")
        col = cli("collect", remote_run, "--srun", "--out", out, "--json", env=env, timeout=180)
        assert col.code == 0, col.stderr
        assert json.loads(col.stdout)["failed_hosts"] == []
        assert not list(out.glob(".srun-*"))  # the shared scratch is removed

    assert _rows(out) == _rows(launched)
    diag = json.loads(cli("diagnose", out, "--json", "--fail-on", "never").stdout)
    slow = [f for f in diag["findings"] if f["kind"] == "straggler" and f["ranks"] == [2]]
    assert [(f["hosts"], f["category"]) for f in slow] == [(["node02"], "compute")]
    status = dataset.read_table(out, "collection_status").to_pylist()
    assert {r["host"] for r in status} == {"node01", "node02"} and all(r["ok"] for r in status)


@pytest.mark.timeout(360)
def test_a_node_lost_mid_step_is_a_failed_host_with_sruns_reason(cli, launched: Path, tmp_path) -> None:
    with SlurmCluster(tmp_path / "slurm", ["node01", "node02", "node03"]) as slurm:
        remote_run = slurm.remote_root / "runs" / "llm"
        split_by_host(launched, slurm, remote_run)
        job = slurm.allocate()
        slurm.stop_node("node03")  # the machine dies under the job: slurmctld still counts it allocated
        out = tmp_path / "ds"
        col = cli("collect", remote_run, "--srun", "--hosts", "node[01-03]", "--srun-jobid", job, "--out", out,
                  "--json", env=slurm.env(), timeout=180)  # fmt: skip
    assert col.code == 0, col.stderr  # 2 of 3 nodes: partial, not a failed collect
    assert json.loads(col.stdout)["failed_hosts"] == ["node03"]
    gone = [r for r in dataset.read_table(out, "collection_status").to_pylist() if r["host"] == "node03"]
    assert [r["error_type"] for r in gone] == ["srun"]
    # srun's own words (Slurm src/api/step_launch.c: "Task launch for %ps failed on node %s: %m")
    assert "no archive from node03 via srun" in gone[0]["error"]
    assert "failed on node node03" in gone[0]["error"], gone[0]["error"]
    assert _rows(out) == _rows(launched)  # node03 held nothing of this run; the others' data is whole


def test_srun_outside_an_allocation_is_a_clear_error(cli, tmp_path) -> None:
    r = cli("collect", "/runs/x", "--srun", "--out", tmp_path / "ds", env={"PATH": "/usr/bin:/bin"})
    assert r.code != 0 and "SLURM_JOB_NODELIST" in r.stderr and "Traceback" not in r.stderr
    with SlurmCluster(tmp_path / "slurm", ["node01"]) as slurm:
        r = cli("collect", "/runs/x", "--srun", "--hosts", "node01", "--srun-jobid", "999", "--out", tmp_path / "ds",
                "--json", env=slurm.env())  # fmt: skip
    assert r.code == 1 and "Invalid job id specified" in r.stderr + r.stdout, (r.stdout, r.stderr)


@pytest.mark.timeout(360)
def test_nodes_still_collecting_when_a_lost_node_aborts_the_step_are_collected_again(
    launched: Path, tmp_path, monkeypatch
) -> None:
    """Slurm aborts the whole step when one node's task launch fails (step_launch.c _fail_step_tasks) and cancels the
    others after KillWait (30 s): a node whose collect takes longer (a big run dir, a busy node) lost its collect with
    the lost node's. Here node01's interpreter starts 40 s late (a wrapper around the real one), the rest is real."""
    import sys

    from trainctl.ops.collect.collection import CollectOptions
    from trainctl.ops.collect.in_allocation import SrunOptions, collect_in_allocation

    slow = tmp_path / "python-slow-on-node01"
    slow.write_text(f'#!/bin/sh\n[ "$SLURMD_NODENAME" = node01 ] && [ ! -e "$0.slept" ] && : > "$0.slept" && sleep 40\n'
                    f'exec {sys.executable} "$@"\n')  # fmt: skip
    slow.chmod(0o755)
    with SlurmCluster(tmp_path / "slurm", ["node01", "node02", "node03"]) as slurm:
        remote_run = slurm.remote_root / "runs" / "llm"
        split_by_host(launched, slurm, remote_run)
        job = slurm.allocate()
        slurm.stop_node("node03")
        for k, v in slurm.env().items():
            monkeypatch.setenv(k, v)
        out = tmp_path / "ds"
        opts = CollectOptions(str(remote_run), out, ("node01", "node02", "node03"), timeout_s=60)
        res = collect_in_allocation(opts, SrunOptions(str(slow), out, job))
    assert (slow.parent / (slow.name + ".slept")).exists()  # node01 did start late the first time
    assert res.failed_hosts == ["node03"]
    assert _rows(out) == _rows(launched)  # node01's rows are there: collected in the second step
