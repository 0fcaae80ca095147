"""Issue 3, end to end: a live hang of an unmodified DDP script (one rank blocked in its data
loading) is detected by `trainctl launch`, every rank is dumped before anything is killed, and
`trainctl diagnose` names the culprit rank, host and the blocking data-loading frame.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from procs import alive, processes_mentioning  # noqa: E402 (tests/ is on sys.path)

from trainctl.rundir import read_run_info

pytestmark = pytest.mark.slow
SCRIPT = Path(__file__).resolve().parents[1] / "fixtures" / "runtime" / "ddp_train.py"
HANG_TIMEOUT_S = 8
# ddp_train.py: the line of read_shard() that blocks (the culprit's innermost frame).
READ_SHARD_LINE = next(i for i, line in enumerate(SCRIPT.read_text().splitlines(), 1) if "time.sleep(0.2)" in line)
ARGS = ["--steps", "400", "--io-s", "0.01", "--hang-data-rank", "2", "--hang-data-step", "5"]


def _rank_pids(run: Path) -> dict[int, int]:
    return {r: json.loads((run / "ranks" / f"rank-{r}.json").read_text())["pid"] for r in range(4)}


@pytest.mark.timeout(150)
def test_live_hang_in_data_loading_is_detected_dumped_and_diagnosed(cli, tmp_path: Path) -> None:
    assert "trainctl" not in SCRIPT.read_text().replace("no trainctl import", "")
    run = tmp_path / "run"
    r = cli(
        "launch",
        "--local",
        "--nproc-per-node",
        "4",
        "--hang-timeout",
        str(HANG_TIMEOUT_S),
        "--run-dir",
        run,
        "--",
        SCRIPT,
        *ARGS,
        timeout=140,
    )
    assert r.code == 5, r.stderr
    assert "hang detected: no rank made progress" in r.stderr

    # Detected within hang-timeout + 10 s of the culprit's last heartbeat (both wall clock).
    hang = json.loads((run / "hang.json").read_text())
    culprit_hb = json.loads((run / "heartbeats" / "rank-2.json").read_text())
    assert (culprit_hb["step"], culprit_hb["phase"]) == (5, "data")
    detect_s = (hang["detected_ts_ns"] - culprit_hb["ts_ns"]) / 1e9
    assert HANG_TIMEOUT_S <= detect_s <= HANG_TIMEOUT_S + 10, detect_s

    # Every rank's Flight Recorder (json + pickle with stacks) and Python stacks, taken from the live ranks.
    info = read_run_info(run)
    assert info is not None
    status = json.loads((run / "hang_dumps.json").read_text())
    for rank in range(4):
        host = info.host_of(rank)
        for rel in (f"fr/{host}/rank-{rank}.json", f"fr/{host}/rank-{rank}.pkl", f"stacks/{host}/rank-{rank}.txt"):
            assert status[str(run.resolve() / rel)] == "ok", rel
            assert (run / rel).stat().st_size > 0, rel
    assert hang["dumps_ok"] >= 12 and hang["dumped_ts_ns"] >= hang["detected_ts_ns"]
    assert "read_shard" in (run / "stacks" / info.host_of(2) / "rank-2.txt").read_text()

    # The process tree is gone.
    assert not [p for p in _rank_pids(run).values() if alive(p)]
    assert processes_mentioning(info.run_id) == []  # torchrun agents carry it as --rdzv-id

    res = cli("diagnose", run, "--json")
    assert res.code == 3, res.stderr
    hung = [f for f in json.loads(res.stdout)["findings"] if f["kind"] == "hung_collective"]
    assert len(hung) == 1, res.stdout
    f = hung[0]
    assert f["ranks"] == [2] and f["hosts"] == [info.host_of(2)] == ["node01"]
    ev = f["evidence"]
    assert (ev["pg_desc"], ev["op"], ev["waiting_ranks"]) == ("default_pg", "all_reduce", [0, 1, 3])
    assert ev["stack"] == {"2": f"read_shard(), ddp_train.py:{READ_SHARD_LINE}"}
    assert ev["stack_frames"]["2"]["function"] == "read_shard" and ev["stack_frames"]["2"]["line"] == READ_SHARD_LINE
    assert f"rank 2 on node01 is in read_shard(), ddp_train.py:{READ_SHARD_LINE}" in f["summary"]

    # Table mode prints the hang map after the findings table.
    res = cli("diagnose", run, env={**os.environ, "COLUMNS": "200"})
    assert res.code == 3
    assert res.stdout.index("hang map: all_reduce seq") > res.stdout.index("hung_collective")
    assert "X r2" in res.stdout and res.stdout.count("W r") == 3


@pytest.mark.timeout(150)
def test_keep_hung_leaves_the_run_up_after_the_dump(tmp_path: Path) -> None:
    run = tmp_path / "run"
    cmd = [
        sys.executable,
        "-c",
        "from trainctl.cli.app import main; main()",
        "launch",
        "--local",
        "--nproc-per-node",
        "4",
        "--hang-timeout",
        str(HANG_TIMEOUT_S),
        "--keep-hung",
        "--run-dir",
        str(run),
        "--",
        str(SCRIPT),
        *ARGS,
    ]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while not (run / "hang.json").exists():
            assert proc.poll() is None, proc.communicate()[1][-3000:]
            assert time.monotonic() < deadline, "no hang detected"
            time.sleep(0.5)
        time.sleep(3)  # well past the dump: nothing was killed
        pids = _rank_pids(run)
        assert all(alive(p) for p in pids.values()), pids
        assert proc.poll() is None
        proc.send_signal(signal.SIGINT)  # what Ctrl-C does
        _, stderr = proc.communicate(timeout=60)
        assert proc.returncode == 5, stderr[-3000:]
        assert "--keep-hung: leaving the run up" in stderr
        assert not [p for p in pids.values() if alive(p)]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
        for pid in _rank_pids(run).values() if (run / "ranks" / "rank-3.json").exists() else []:
            if alive(pid):  # only this test's ranks (torchrun gives each its own session)
                try:
                    os.killpg(pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
