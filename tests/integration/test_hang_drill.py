"""The hang drill on 4 simulated hosts x 2 ranks (tp 2): exactly one critical finding, the hung rank.

`trainctl launch --local --hosts-local 4 --nproc-per-node 2 --inject hang:rank=R,step=S` runs the
reference trainer (tp groups {0,1},{2,3},..., dp groups {0,2,4,6},{1,3,5,7}) until rank R blocks
before its dp all_reduce of step S. Its dp peers wait there; their tp partners run on into the next
step and wait in a tp all_reduce: follow-on hangs in other groups, on other hosts. `diagnose` must
name rank R on its host and list everyone else as blocked behind it, not as culprits.

While the run is held up (--keep-hung), the ranks' environment is read from /proc: the launcher set
what points the NCCL watchdog's own Flight Recorder dump into RUN/fr/<host>/.
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
from procs import alive  # noqa: E402 (tests/ is on sys.path)

from trainctl.rundir import read_run_info

pytestmark = pytest.mark.slow
CULPRIT, STEP = 2, 4  # rank 2 is on node02; its dp group is {0,2,4,6}


def _environ(pid: int) -> dict[str, str]:
    raw = Path(f"/proc/{pid}/environ").read_bytes()
    return dict(kv.split("=", 1) for kv in raw.decode(errors="replace").split("\0") if "=" in kv)


@pytest.mark.timeout(400)
def test_hang_drill_gives_one_critical_finding_naming_the_hung_rank_and_host(cli, tmp_path: Path) -> None:
    run = tmp_path / "run"
    cmd = [
        sys.executable,
        "-c",
        "from trainctl.cli.app import main; main()",
        "launch",
        "--local",
        "--hosts-local",
        "4",
        "--nproc-per-node",
        "2",
        "--inject",
        f"hang:rank={CULPRIT},step={STEP}",
        "--hang-timeout",
        "10",
        "--keep-hung",
        "--steps",
        "40",
        "--run-dir",
        str(run),
        "--",
        "--tp",
        "2",
    ]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    pids: dict[int, int] = {}
    try:
        deadline = time.monotonic() + 300
        while not (run / "hang.json").exists():
            assert proc.poll() is None, proc.communicate()[1][-3000:]
            assert time.monotonic() < deadline, "no hang detected"
            time.sleep(0.5)
        info = read_run_info(run)
        assert info is not None and info.world_size == 8
        pids = {r: json.loads((run / "ranks" / f"rank-{r}.json").read_text())["pid"] for r in range(8)}
        for r, pid in pids.items():
            env = _environ(pid)
            prefix = str(run.resolve() / "fr" / info.host_of(r) / "nccl_trace_rank_")
            assert env["TORCH_FR_DUMP_TEMP_FILE"] == env["TORCH_NCCL_DEBUG_INFO_TEMP_FILE"] == prefix
            assert env["TORCH_NCCL_DUMP_ON_TIMEOUT"] == "1" and env["TORCH_NCCL_ENABLE_MONITORING"] == "1"
            assert int(env["TORCH_FR_BUFFER_SIZE"]) > 0
            assert (run / "fr" / info.host_of(r)).is_dir()  # made by the rank: the writer makes none
        proc.send_signal(signal.SIGINT)
        _, stderr = proc.communicate(timeout=120)
        assert proc.returncode == 5, stderr[-3000:]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
        for pid in pids.values():
            if alive(pid):
                try:
                    os.killpg(pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass

    res = cli("diagnose", run, "--json")
    assert res.code == 3, res.stderr
    findings = json.loads(res.stdout)["findings"]
    critical = [f for f in findings if f["severity"] == "critical"]
    assert len(critical) == 1, [(f["kind"], f["ranks"], f["summary"]) for f in critical]
    f = critical[0]
    assert f["kind"] == "hung_collective" and f["ranks"] == [CULPRIT] and f["hosts"] == [info.host_of(CULPRIT)]
    ev = f["evidence"]
    assert ev["basis"] == "proof" and f["confidence"] >= 0.9
    assert (ev["pg_desc"], ev["op"]) == ("dp", "all_reduce")
    assert ev["stack"][str(CULPRIT)].startswith("hang_forever()")
    # Everyone else who is stuck is the cascade, on the other hosts too: blocked, never a culprit.
    blocked = {int(r) for r in ev["blocked"]}
    assert CULPRIT not in blocked and {0, 4, 6} <= blocked  # its dp peers
    assert {r for r, s in ev["hang_map"]["states"].items() if s == "culprit"} == {str(CULPRIT)}
    assert any(h["pg_desc"] == "tp" for h in ev.get("also_hung", [])), ev.get("also_hung")
