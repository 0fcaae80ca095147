"""Fail-slow inside the supervisor, on 2 real sshd test hosts: a straggler drill that starts mid-run
slows the whole job; the supervisor notices from heartbeats, collects + diagnoses the live run with
trigger fail_slow, records the incident and lets the run finish (the policy continues on stragglers)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.sshd]


@pytest.mark.timeout(280)
def test_straggler_from_step_300_is_a_fail_slow_incident_and_the_run_continues(sshd_cluster, cli, tmp_path):
    # `trainctl launch --local` has its own loop (trainctl.ops.launch.local), not the supervisor's: sshd hosts.
    cluster = sshd_cluster(2)
    run_dir = tmp_path / "sup"
    # The supervisor polls heartbeats at 1 Hz and takes its baseline after its first observation;
    # on a quiet machine a step takes ~15 ms, so the slowdown must start seconds into training.
    start, steps = 300, 450
    r = cli(
        "launch",
        "--hosts",
        "node01,node02",
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
        "--hang-timeout",
        "90",
        "--inject",
        f"straggler:rank=1,factor=8,phase=forward,start_step={start}",
        "--",
        "--log-every",
        "50",
        "--tp",
        "1",
        env={**os.environ, "TRAINCTL_HOME": str(tmp_path / "home")},
        timeout=260,
    )
    assert r.code == 0, r.stderr[-4000:]
    ev = [json.loads(x) for x in (run_dir / "supervisor.jsonl").read_text().splitlines()]
    slow = [e for e in ev if e["event"] == "fault_detected" and e["trigger"] == "fail_slow"]
    assert len(slow) == 1, [e for e in ev if e["event"] == "fault_detected"]
    assert slow[0]["evidence"]["step"] > start and slow[0]["evidence"]["ratio"] > 1.5
    incident = [e for e in ev if e["event"] == "incident"]
    assert len(incident) == 1 and incident[0]["trigger"] == "fail_slow"
    assert Path(incident[0]["dataset"]).is_dir()
    decisions = [e for e in ev if e["event"] == "decision"]
    assert [d["action"]["kind"] for d in decisions] == ["continue", "finish"]
    assert decisions[0]["trigger"] == "fail_slow"
    # nothing was stopped or relaunched: one attempt ran every step
    assert len([e for e in ev if e["event"] == "attempt_started"]) == 1
    loss = [
        json.loads(x)
        for n in cluster.names
        if (cluster.host_root(n) / "run" / "loss.jsonl").is_file()
        for x in (cluster.host_root(n) / "run" / "loss.jsonl").read_text().splitlines()
    ]
    assert [x["step"] for x in loss] == list(range(1, steps + 1))
