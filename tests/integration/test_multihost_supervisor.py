"""`trainctl launch --hosts` on real sshd test hosts, real torchrun + gloo: evict on Xid 79, relaunch
on a spare from the last checkpoint with loss continuity; a broken user script stops without retries."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from trainctl.ops.evict.quarantine import Ledger

pytestmark = [pytest.mark.slow, pytest.mark.sshd]


def _events(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "supervisor.jsonl").read_text().splitlines()]


def _env(tmp_path: Path) -> dict:
    return {**os.environ, "TRAINCTL_HOME": str(tmp_path / "home")}


@pytest.mark.timeout(300)
def test_xid_on_node02_evicts_it_and_resumes_on_the_spare(sshd_cluster, cli, tmp_path):
    cluster = sshd_cluster(4)  # node01..node03 + node04 as the spare
    shared = tmp_path / "shared-ckpt"  # outside remote_root: every host sees it (shared storage)
    run_dir = tmp_path / "sup"
    steps, every, fault_step = 10, 3, 7
    r = cli(
        "launch",
        "--hosts",
        "node01,node02,node03",
        "--spares",
        "node04",
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
        "--tp",
        "1",
        env=_env(tmp_path),
        timeout=280,
    )
    assert r.code == 0, r.stderr[-4000:]
    ev = _events(run_dir)
    attempts = [e for e in ev if e["event"] == "attempt_started"]
    assert [a["hosts"] for a in attempts] == [["node01", "node02", "node03"], ["node01", "node04", "node03"]]
    decision = next(e for e in ev if e["event"] == "decision" and e["attempt"] == 1)
    assert decision["action"]["kind"] == "evict_and_relaunch" and decision["action"]["hosts"] == ["node02"]
    # the ledger entry carries the kernel-log finding as evidence
    entry = Ledger(tmp_path / "home").entries()["node02"]
    assert entry.run and entry.finding is not None
    assert entry.finding["hosts"] == ["node02"] and entry.finding["category"] in ("gpu_lost", "xid")
    assert "79" in json.dumps(entry.finding)
    assert list(Ledger(tmp_path / "home").entries()) == ["node02"]
    # the run finished every step; the relaunch resumed from a checkpoint taken before the fault
    rows = cluster.loss_rows()
    first = [x for x in rows if x["attempt"] == "1"]
    second = [x for x in rows if x["attempt"] == "2"]
    assert max(x["step"] for x in second) == steps
    resumed_from = second[0]["step"] - 1
    assert resumed_from % every == 0 and 0 < resumed_from < fault_step
    assert [x["step"] for x in first] == list(range(1, fault_step + 1))  # step index 7 (8th step) never finished
    assert [x["step"] for x in second] == list(range(resumed_from + 1, steps + 1))
    # loss continuity: the steps replayed after the resume log exactly what the uninterrupted
    # first attempt logged at those steps (same weights, optimizer state, RNG and data position)
    before = {x["step"]: x["loss"] for x in first}
    for x in second:
        if x["step"] in before:
            assert x["loss"] == pytest.approx(before[x["step"]], rel=1e-6, abs=1e-6), x
    assert any(x["step"] in before for x in second)
    # node02 was never used again, and its kernel-log line made it into the incident dataset
    ds = run_dir / "incidents" / "1" / "dataset"
    assert "Xid (PCI:0000:18:00): 79" in (ds / "kernel" / "node02" / "dmesg.txt").read_text()


@pytest.mark.timeout(150)
def test_bad_user_script_stops_without_retries(sshd_cluster, cli, tmp_path):
    cluster = sshd_cluster(2)
    script = tmp_path / "train_bad.py"
    script.write_text("import torch\nimport trainctl_no_such_module  # a typo: ImportError on every rank\n")
    run_dir = tmp_path / "sup"
    r = cli(
        "launch",
        "--hosts",
        "node01,node02",
        "--nproc-per-node",
        "1",
        "--max-restarts",
        "3",
        "--ssh-config",
        cluster.ssh_config,
        "--run-dir",
        run_dir,
        "--remote-run-dir",
        cluster.remote_root / "run",
        "--env",
        "GLOO_SOCKET_IFNAME=lo",
        "--hang-timeout",
        "60",
        "--",
        script,
        env=_env(tmp_path),
        timeout=140,
    )
    assert r.code == 4, r.stderr[-3000:]
    ev = _events(run_dir)
    assert len([e for e in ev if e["event"] == "attempt_started"]) == 1
    decision = [e for e in ev if e["event"] == "decision"]
    assert len(decision) == 1 and decision[0]["action"]["kind"] == "stop_and_report"
    assert decision[0]["action"]["rule"] == "user_code_error"
    assert "trainctl_no_such_module" in json.dumps(decision[0]["evidence"])
    assert Ledger(tmp_path / "home").entries() == {}
