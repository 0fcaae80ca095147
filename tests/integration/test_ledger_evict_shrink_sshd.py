"""`trainctl evict-node HOST --relaunch` with no spare left, on real sshd test hosts: the operator's
path to a smaller run. A hung run of the reference trainer (hang drill, --hang-timeout 0 so the
supervisor leaves it up) on 3 hosts is stopped and relaunched on the other 2 (dp 3 -> 2) from the
newest checkpoint, and finishes; the ledger holds the host."""

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


@pytest.mark.timeout(300)
def test_evict_node_relaunch_shrinks_without_spares(sshd_cluster, cli, tmp_path):
    cluster = sshd_cluster(3)
    shared = tmp_path / "shared-ckpt"
    run_dir = tmp_path / "run"
    env = {**os.environ, "TRAINCTL_HOME": str(tmp_path / "home")}
    steps, every, hang_rank, hang_step = 10, 2, 2, 5
    sup = subprocess.Popen(
        [
            TRAINCTL,
            "launch",
            "--hosts",
            "node01,node02,node03",
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
        ],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=open(tmp_path / "launch.err", "wb"),
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 150
        while cluster.rank_files("heartbeats").get(hang_rank, {}).get("step") != hang_step:
            assert sup.poll() is None, (tmp_path / "launch.err").read_text()[-3000:]
            assert time.monotonic() < deadline, f"no hang seen: {cluster.rank_files('heartbeats')}"
            time.sleep(0.5)
        info = json.loads((run_dir / "run.json").read_text())
        victim = next(h["host"] for h in info["hosts"] if hang_rank in h["ranks"])
        survivors = [h for h in ("node01", "node02", "node03") if h != victim]
        pids = [d["pid"] for d in cluster.rank_files("ranks").values()]
        assert len(pids) == 3

        # --dry-run shows the same plan the relaunch will execute, and changes nothing
        r = cli(
            "evict-node",
            victim,
            "--reason",
            "hung rank",
            "--run",
            run_dir,
            "--relaunch",
            "--dry-run",
            "--json",
            env=env,
            timeout=60,
        )
        assert r.code == 0, r.stderr
        dry = json.loads(r.stdout)["relaunch"]
        assert dry["kind"] == "shrink" and dry["hosts"] == survivors and dry["layout"] == {"dp": 2, "tp": 1, "pp": 1}
        assert Ledger(tmp_path / "home").entries() == {} and sup.poll() is None

        r = cli(
            "evict-node",
            victim,
            "--reason",
            "hung rank",
            "--run",
            run_dir,
            "--relaunch",
            "--yes",
            "--json",
            "--wait-timeout",
            "200",
            env=env,
            timeout=260,
        )
        assert r.code == 0, r.stderr[-4000:]
        doc = json.loads(r.stdout)
        rl = doc["relaunch"]
        assert rl["plan"]["kind"] == "shrink" and rl["hosts"] == survivors, rl
        assert rl["exit_code"] == 0 and rl["last_step"] == steps, rl
        resumed_from = rl["first_step"] - 1
        assert resumed_from % every == 0 and 0 < resumed_from <= hang_step
        new_info = json.loads((Path(rl["run_dir"]) / "run.json").read_text())
        assert [h["host"] for h in new_info["hosts"]] == survivors and new_info["layout"]["dp"] == 2
        # the hung run is gone, the victim is quarantined with this reason and run
        sup.wait(timeout=30)
        assert not any(alive(p) for p in pids)
        entries = Ledger(tmp_path / "home").entries()
        assert list(entries) == [victim] and entries[victim].reason == "hung rank"
        # the smaller world's newest checkpoint holds its 2 ranks only
        m = json.loads((shared / f"step-{steps}" / "rank-0" / "manifest.json").read_text())
        assert (m["world_size"], m["layout"]) == (2, {"dp": 2, "tp": 1, "pp": 1})
        assert sorted(p.name for p in (shared / f"step-{steps}").iterdir()) == ["rank-0", "rank-1"]
    finally:
        stop_group(sup)
