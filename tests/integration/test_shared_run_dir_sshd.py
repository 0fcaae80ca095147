"""`launch --hosts` with a --remote-run-dir that every host mounts (issue 17 item 8), on real sshd
test hosts with real torchrun + gloo: a hang drill is detected, each host dumps only its own ranks,
the rank map follows what the ranks say, and the incident names the hung rank."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pyarrow.parquet as pq
import pytest

pytestmark = [pytest.mark.slow, pytest.mark.sshd]


@pytest.mark.timeout(300)
def test_a_hang_on_a_shared_run_dir_is_dumped_per_host_and_diagnosed(sshd_cluster, cli, tmp_path: Path) -> None:
    cluster = sshd_cluster(2)
    shared = tmp_path / "shared-run"  # outside remote_root: every test host sees the same files
    run_dir = tmp_path / "sup"
    r = cli(
        "launch", "--hosts", "node01,node02", "--nproc-per-node", "2", "--max-restarts", "0",
        "--ssh-config", cluster.ssh_config, "--run-dir", run_dir, "--remote-run-dir", shared,
        "--env", "GLOO_SOCKET_IFNAME=lo", "--hang-timeout", "10",
        "--inject", "hang:rank=1,step=4", "--", "--steps", "40", "--tp", "1",
        env={**os.environ, "TRAINCTL_HOME": str(tmp_path / "home")}, timeout=280,
    )  # fmt: skip
    assert r.code in (4, 5), r.stderr[-4000:]
    events = [json.loads(line) for line in (run_dir / "supervisor.jsonl").read_text().splitlines()]

    # One rank file per rank in the shared dir, each naming its host; the supervisor's rank map agrees.
    named = {
        int(d["rank"]): d["host"] for d in (json.loads(p.read_text()) for p in (shared / "ranks").glob("rank-*.json"))
    }
    assert sorted(named) == [0, 1, 2, 3] and sorted(set(named.values())) == ["node01", "node02"]
    rank_map = next(e for e in events if e["event"] == "rank_map")["hosts"]
    assert {r: h for h, ranks in rank_map.items() for r in ranks} == named

    # Each host dumped only the ranks that name it, into its own status file.
    for host in ("node01", "node02"):
        status = json.loads((shared / f"hang_dumps.{host}.json").read_text())
        mine = [r for r, h in named.items() if h == host]
        assert status and all(f"/{host}/" in p for p in status), status
        assert {int(p.rsplit("rank-", 1)[1].split(".")[0]) for p in status} == set(mine)
        assert sum(v == "ok" for v in status.values()) >= 3 * len(mine)  # fr json + pickle + stacks per rank
    dumps = next(e for e in events if e["event"] == "hang_dumps")["hosts"]
    assert set(dumps) == {"node01", "node02"}

    # The incident's collect saw every host list every host's files: a shared dir, not a fault.
    incident = next(e for e in events if e["event"] == "incident")
    assert not [f for f in incident["findings"] if "attribution" in f or "foreign" in f], incident["findings"]
    status = [r for p in (run_dir / "incidents" / "1" / "dataset" / "collection_status").glob("host=*/*.parquet")
              for r in pq.read_table(p).to_pylist()]  # fmt: skip
    shared_rows = [r for r in status if r["error_type"] == "shared_run_dir"]
    assert sorted(r["kind"] for r in shared_rows) == ["attribution", "attribution"] and all(
        r["ok"] for r in shared_rows
    )

    res = cli("diagnose", shared, "--json")
    hung = [f for f in json.loads(res.stdout)["findings"] if f["kind"] == "hung_collective"]
    assert hung and hung[0]["ranks"] == [1] and hung[0]["hosts"] == [named[1]], res.stdout[-3000:]

    # The supervisor left its hang record in the incident's dataset (as `launch --local` does in the
    # run dir): the SIGTERM it sent after the dumps folds under the hang, never a crash of its own.
    ds = run_dir / "incidents" / "1" / "dataset"
    record = json.loads((ds / "hang.json").read_text())
    assert sorted(record["stale_ranks"]) == [0, 1, 2, 3] and record["detected_ts_ns"] > 0
    found = json.loads(cli("diagnose", ds, "--json", "--fail-on", "never").stdout)["findings"]
    assert found[0]["kind"] == "hung_collective" and found[0]["ranks"] == [1], found
    assert not [f for f in found if f["severity"] == "critical" and f["kind"] == "crash"], found
