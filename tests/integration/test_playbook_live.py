"""hung-collective playbook on a live hung `trainctl launch --hosts` run of real sshd test hosts.

The run hangs (rank drill) with --hang-timeout 0, so its supervisor keeps it up for an operator:
`--dry-run` must change nothing; `--yes` collects over SSH (dumping the live ranks first), names
the culprit rank and host, quarantines that host with the finding, stops the hung run and relaunches
it from the newest checkpoint on the remaining hosts plus the spare, and waits for it to finish.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest
from procs import TRAINCTL, alive, stop_group  # noqa: E402 (tests/ is on sys.path)

from trainctl.ops.evict.quarantine import Ledger

pytestmark = [pytest.mark.slow, pytest.mark.sshd]


def _files(d: Path) -> set[str]:
    return {str(p.relative_to(d)) for p in d.rglob("*") if p.is_file()}


@pytest.mark.timeout(420)
def test_hung_collective_runbook_live(sshd_cluster, cli, tmp_path):
    cluster = sshd_cluster(4)  # node01..03 run, node04 is the spare
    shared = tmp_path / "shared-ckpt"
    run_dir = tmp_path / "run"
    env = {**os.environ, "TRAINCTL_HOME": str(tmp_path / "home")}
    steps, every, hang_rank, hang_step = 10, 2, 1, 5
    sup = subprocess.Popen(
        [
            TRAINCTL,
            "launch",
            "--hosts",
            "node01,node02,node03",
            "--spares",
            "node04",
            "--nproc-per-node",
            "1",
            "--ssh-config",
            str(cluster.ssh_config),
            "--run-dir",
            str(run_dir),
            "--remote-run-dir",
            str(cluster.remote_root / "run"),
            "--env",
            "GLOO_SOCKET_IFNAME=lo",
            "--steps",
            str(steps),
            "--checkpoint-every",
            str(every),
            "--checkpoint-dir",
            str(shared),
            "--hang-timeout",
            "0",
            "--inject",
            f"hang:rank={hang_rank},step={hang_step}",
            "--",
            "--log-every",
            "1",
            "--tp",
            "1",
        ],
        env=env,
        stdout=subprocess.PIPE,
        stderr=open(tmp_path / "launch.err", "wb"),
        start_new_session=True,
    )
    try:
        # wait for the hang: the drill rank's heartbeat reaches the step, nobody moves after it
        deadline = time.monotonic() + 150
        while True:
            assert sup.poll() is None, (tmp_path / "launch.err").read_text()[-3000:]
            beats = cluster.rank_files("heartbeats")
            info = json.loads((run_dir / "run.json").read_text()) if (run_dir / "run.json").is_file() else {}
            mapped = sum(len(h["ranks"]) for h in info.get("hosts", [])) == 3 and len(beats) == 3
            if mapped and beats.get(hang_rank, {}).get("step") == hang_step:
                break
            assert time.monotonic() < deadline, f"no hang seen: {beats}"
            time.sleep(0.5)
        time.sleep(4)
        info = json.loads((run_dir / "run.json").read_text())
        culprit = next(h["host"] for h in info["hosts"] if hang_rank in h["ranks"])
        pids = {r: int(d["pid"]) for r, d in cluster.rank_files("ranks").items()}
        assert len(pids) == 3 and all(alive(p) for p in pids.values())
        before = _files(run_dir)

        # (a) --dry-run: the plan, and nothing changes
        r = cli("playbook", "run", "hung-collective", "--run", run_dir, "--dry-run", env=env, timeout=120)
        assert r.code == 0, r.stderr[-3000:]
        assert "evict" in r.stdout and "collect" in r.stdout
        assert not (run_dir / "incidents").exists()
        assert Ledger(tmp_path / "home").entries() == {}
        assert not (tmp_path / "home").exists() or not any((tmp_path / "home").rglob("*.jsonl"))
        assert sup.poll() is None and all(alive(p) for p in pids.values())
        assert {f for f in _files(run_dir) if not f.startswith("logs/")} == {
            f for f in before if not f.startswith("logs/")
        }
        assert not any((cluster.host_root(n) / "run" / "fr").exists() for n in cluster.names)  # no dump taken

        # (b) --yes: collect, diagnose, evict, relaunch from the checkpoint, finish
        r = cli("playbook", "run", "hung-collective", "--run", run_dir, "--yes", "--json", env=env, timeout=380)
        assert r.code == 0, r.stderr[-4000:]
        res = json.loads(r.stdout)
        steps_by_id = {s["step"]: s for s in res["steps"]}
        assert res["completed"] is True
        assert steps_by_id["collect"]["status"] == "ok"
        dumps = steps_by_id["collect"]["outputs"]["hang_dumps"]  # host -> "artefacts ok/total" on that host
        assert sorted(dumps) == ["node01", "node02", "node03"]
        assert all(int(v.split("/")[0]) >= 1 for v in dumps.values()), dumps
        diag = steps_by_id["diagnose"]
        assert diag["status"] == "ok" and diag["outputs"]["hosts"] == [culprit], diag["decision"]
        assert hang_rank in diag["outputs"]["ranks"]
        ev = steps_by_id["evict"]
        assert ev["status"] == "ok", ev
        rl = ev["outputs"]["relaunch"]
        expect_hosts = ["node04" if h == culprit else h for h in ["node01", "node02", "node03"]]
        # the plan keeps rank order by host position in run.json
        assert sorted(rl["hosts"]) == sorted(expect_hosts) and culprit not in rl["hosts"]
        assert rl["exit_code"] == 0 and rl["last_step"] == steps
        resumed_from = rl["first_step"] - 1
        assert resumed_from % every == 0 and 0 < resumed_from <= hang_step
        # the hung run is gone: supervisor stopped, every old rank dead
        sup.wait(timeout=30)
        assert not any(alive(p) for p in pids.values())
        # ledger: the culprit, with the hang finding as evidence
        entries = Ledger(tmp_path / "home").entries()
        assert list(entries) == [culprit]
        assert entries[culprit].finding["kind"] in ("hung_collective", "collective_mismatch")
        assert culprit in entries[culprit].finding["hosts"]
        # the audit log: every step with its evidence
        audit = [json.loads(x) for x in (Path(res["audit"])).read_text().splitlines()]
        assert [a["step"] for a in audit if a["event"] == "step"] == [
            "collect",
            "diagnose",
            "notify",
            "confirm",
            "evict",
        ]
        by = {a["step"]: a for a in audit if a["event"] == "step"}
        assert by["diagnose"]["outputs"]["culprit"]["kind"] in ("hung_collective", "collective_mismatch")
        assert by["evict"]["outputs"]["relaunch"]["exit_code"] == 0 and by["evict"]["command"][:3] == [
            "trainctl",
            "evict-node",
            culprit,
        ]
        assert audit[-1]["event"] == "end" and audit[-1]["completed"] is True
    finally:
        stop_group(sup)
