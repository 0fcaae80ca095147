"""`trainctl launch --hosts` on real sshd test hosts with no spare: Xid 79 on node02 evicts it and the
supervisor relaunches the reference trainer *smaller* (dp 3 -> 2) from the larger world's checkpoint."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from trainctl.ops.evict.quarantine import Ledger

pytestmark = [pytest.mark.slow, pytest.mark.sshd]


def _events(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "supervisor.jsonl").read_text().splitlines()]


@pytest.mark.timeout(300)
def test_xid_with_no_spare_shrinks_and_resumes(sshd_cluster, cli, tmp_path):
    cluster = sshd_cluster(3)
    shared = tmp_path / "shared-ckpt"
    run_dir = tmp_path / "sup"
    steps, every, fault_step = 10, 3, 7
    # No --tp: 3 ranks default to tp=1; the relaunch on 2 ranks must keep tp=1 (pinned), not pick 2.
    r = cli(
        "launch",
        "--hosts",
        "node01,node02,node03",
        "--nproc-per-node",
        "1",
        "--ssh-config",
        cluster.ssh_config,
        "--run-dir",
        run_dir,
        "--remote-run-dir",
        cluster.remote_root / "run",
        "--env",
        "GLOO_SOCKET_IFNAME=lo",
        "--steps",
        steps,
        "--checkpoint-every",
        every,
        "--checkpoint-dir",
        shared,
        "--hang-timeout",
        "60",
        "--inject",
        f"xid:host=node02,code=79,step={fault_step}",
        "--",
        "--log-every",
        "1",
        env={**os.environ, "TRAINCTL_HOME": str(tmp_path / "home")},
        timeout=280,
    )
    assert r.code == 0, r.stderr[-4000:]
    ev = _events(run_dir)
    attempts = [e for e in ev if e["event"] == "attempt_started"]
    assert [(a["hosts"], a["world_size"]) for a in attempts] == [
        (["node01", "node02", "node03"], 3),
        (["node01", "node03"], 2),
    ]
    plan = next(e for e in ev if e["event"] == "relaunch_plan")
    assert plan["kind"] == "shrink" and plan["plan"]["layout"] == {"dp": 2, "tp": 1, "pp": 1}
    assert "dp 3 -> 2" in plan["reason"]
    assert list(Ledger(tmp_path / "home").entries()) == ["node02"]
    rows = cluster.loss_rows()
    first = {x["step"]: x["loss"] for x in rows if x["attempt"] == "1"}
    second = [x for x in rows if x["attempt"] == "2"]
    assert sorted(first) == list(range(1, fault_step + 1))
    resumed_from = second[0]["step"] - 1
    assert resumed_from % every == 0 and 0 < resumed_from < fault_step
    assert [x["step"] for x in second] == list(range(resumed_from + 1, steps + 1))
    # loss continuity: the first step after the resume runs the restored weights on replica 0's
    # next batch, exactly what the 3-replica world computed there; later steps average 2 replicas'
    # gradients instead of 3, so they only track the first attempt.
    assert second[0]["loss"] == pytest.approx(first[resumed_from + 1], rel=1e-6, abs=1e-6)
    for x in second[1:]:
        if x["step"] in first:
            assert x["loss"] == pytest.approx(first[x["step"]], rel=0.15), (x, first)
    logs = "".join(
        p.read_text() for n in cluster.names for p in (cluster.host_root(n) / "run" / "logs").glob("*/rank-0.log")
    )
    assert (
        f"resumed from checkpoint step {resumed_from}: " in logs
        and "(written by dp=3 x tp=1 x pp=1 (3 ranks), resumed as dp=2 x tp=1 x pp=1 (2 ranks))" in logs
    ), logs[-2000:]
    # the smaller world's checkpoints record its layout and hold its 2 ranks only
    m = json.loads((shared / f"step-{steps - steps % every}" / "rank-0" / "manifest.json").read_text())
    assert (m["world_size"], m["layout"]) == (2, {"dp": 2, "tp": 1, "pp": 1})
