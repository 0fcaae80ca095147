"""A run dir every host mounts: each host's sweep and hang dump touch only its own ranks (issue 17 item 8).

The commands are run for real with `sh` on real processes here. The other "machine" is the one
thing simulated: a rank file that names another host with a pid that, on this machine, is some
process of ours (as another machine's pid number would be).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from trainctl.ops.launch.host_commands import hang_dump_command, rank_sweep_command
from trainctl.runtime import hang_dump


def _sleeper(run_id: str | None) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if k != "TRAINCTL_RUN_ID"}
    if run_id:
        env["TRAINCTL_RUN_ID"] = run_id
    # its own session, as torchrun starts each worker: pgid == pid
    return subprocess.Popen(["sleep", "60"], env=env, start_new_session=True)


def _rank_file(run: Path, rank: int, host: str, pid: int) -> None:
    (run / "ranks").mkdir(parents=True, exist_ok=True)
    body = {"rank": rank, "local_rank": 0, "host": host, "pid": pid, "world_size": 3}
    (run / "ranks" / f"rank-{rank}.json").write_text(json.dumps(body))


def _gone(p: subprocess.Popen, timeout_s: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if p.poll() is not None:
            return True
        time.sleep(0.05)
    return False


@pytest.fixture
def procs():
    started: list[subprocess.Popen] = []
    yield started
    for p in started:
        if p.poll() is None:
            p.kill()
        p.wait()


def test_the_sweep_kills_this_hosts_ranks_of_this_run_and_nothing_else(tmp_path: Path, procs) -> None:
    run = tmp_path / "shared-run"
    mine, other_host, reused = _sleeper("r-1"), _sleeper("r-1"), _sleeper("another-run")
    procs += [mine, other_host, reused]
    _rank_file(run, 0, "node01", mine.pid)
    _rank_file(run, 1, "node02", other_host.pid)  # node02's rank: its pid means nothing on node01
    _rank_file(run, 2, "node01", reused.pid)  # a pid reused since by a process of another run
    out = subprocess.run(["sh", "-c", rank_sweep_command(str(run), "node01", "r-1")], capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout.strip() == "1", out
    assert _gone(mine)
    assert other_host.poll() is None and reused.poll() is None


def test_without_a_run_id_the_host_check_still_holds(tmp_path: Path, procs) -> None:
    run = tmp_path / "run"
    mine, other_host = _sleeper(None), _sleeper(None)
    procs += [mine, other_host]
    _rank_file(run, 0, "node01", mine.pid)
    _rank_file(run, 1, "node02", other_host.pid)
    out = subprocess.run(["sh", "-c", rank_sweep_command(str(run), "node01", None)], capture_output=True, text=True)
    assert out.stdout.strip() == "1" and _gone(mine) and other_host.poll() is None


def test_host_names_are_quoted_never_interpreted(tmp_path: Path, procs) -> None:
    run = tmp_path / "run dir; touch pwned"
    mine = _sleeper("r-1")
    procs.append(mine)
    _rank_file(run, 0, "node01", mine.pid)
    cmd = rank_sweep_command(str(run), "node01$(touch pwned)", "r-1'; touch pwned; '")
    out = subprocess.run(["sh", "-c", cmd], capture_output=True, text=True, cwd=tmp_path)
    assert out.stdout.strip() == "0" and not (tmp_path / "pwned").exists() and mine.poll() is None


def test_the_hang_dump_of_a_host_asks_only_its_own_ranks_and_keeps_its_own_status(tmp_path: Path, procs) -> None:
    run = tmp_path / "shared-run"
    a, b = _sleeper("r-1"), _sleeper("r-1")
    procs += [a, b]
    _rank_file(run, 0, "node01", a.pid)
    _rank_file(run, 1, "node02", b.pid)
    cmd = hang_dump_command(sys.executable, str(run), "node02")
    out = subprocess.run(["sh", "-c", cmd], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    ok, total = map(int, out.stdout.split())
    assert ok == 0 and total >= 3  # no rank served a dump (sleep has no debug socket); all tried were node02's
    status = json.loads((run / "hang_dumps.node02.json").read_text())
    assert status and all("/node02/" in path for path in status)
    assert not (run / "hang_dumps.json").exists() and not (run / "hang_dumps.node01.json").exists()


def test_the_local_launcher_still_dumps_every_rank_into_one_status(tmp_path: Path) -> None:
    run = tmp_path / "run"
    _rank_file(run, 0, "node01", 1)
    _rank_file(run, 1, "node02", 1)
    hang_dump.main([str(run)])
    status = json.loads((run / "hang_dumps.json").read_text())
    assert any("/node01/" in p for p in status) and any("/node02/" in p for p in status)


def test_a_shared_listing_is_told_from_a_host_offering_what_its_owner_lacks() -> None:
    from trainctl.collectors.rundir_sync import FileStat, shared_view

    st = FileStat(10, 1)
    listings = {
        "node01": {"logs/node01/rank-0.log": st, "logs/node02/rank-1.log": FileStat(12, 2)},
        "node02": {"logs/node01/rank-0.log": st, "logs/node02/rank-1.log": st},
    }
    # each lists the other's files, which their owners list too (a live log grew in between)
    assert shared_view(["logs/node02/rank-1.log"], listings)
    assert shared_view(["logs/node01/rank-0.log"], listings)
    # a file under node01's path that node01 does not have; an owner that never answered
    assert not shared_view(["timeline/host=node01/part-evil.parquet"], listings)
    assert not shared_view(["logs/node03/rank-2.log"], listings)
    assert not shared_view([], listings)
