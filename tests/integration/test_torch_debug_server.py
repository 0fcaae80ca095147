"""torch's own debug server, periodic dumps on, in a real hung gloo job under torchrun: diagnose
reads its dump dir and names the rank that never joined (issue 17 item 7)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow
SCRIPT = Path(__file__).resolve().parents[1] / "fixtures" / "runtime" / "debug_server_hang.py"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.timeout(120)
def test_periodic_dumps_of_a_hung_job_name_the_rank_that_never_joined(cli, tmp_path: Path) -> None:
    dumps = tmp_path / "stacks" / "node01"
    env = {
        **os.environ,
        "TRAINCTL_TORCH_DEBUG_DIR": str(dumps),
        "DEBUG_FRONTEND_PORT": str(_free_port()),
        "OMP_NUM_THREADS": "1",
    }
    torchrun = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", "--rdzv-backend", "c10d",
                "--rdzv-endpoint", f"127.0.0.1:{_free_port()}", str(SCRIPT)]  # fmt: skip
    proc = subprocess.Popen(
        torchrun, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True
    )
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and len(list(dumps.glob("stacks_*.txt"))) < 5:
            assert proc.poll() is None, proc.stderr.read().decode()[-2000:] if proc.stderr else ""
            time.sleep(0.5)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    assert len(list(dumps.glob("stacks_*.txt"))) >= 5, "torch's periodic dumper wrote too few dumps"

    res = cli("diagnose", dumps, "--json")
    assert res.code == 3, res.stderr
    report = json.loads(res.stdout)
    assert report["source_kind"] == "torch_debug_dumps"
    (top,) = report["findings"]
    assert (top["kind"], top["severity"], top["ranks"]) == ("hung_collective", "critical", [1])
    assert top["evidence"]["outside_collectives"]["1"].startswith("<module>(), debug_server_hang.py:")
    assert "all_reduce" in top["evidence"]["waiting"]["0"]
