"""Process checks for real-process tests: is a pid alive, which processes carry a string.

Importable from any test (pytest puts tests/ on sys.path), like tests/sshd.py.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

# The console script of the venv running the tests, for processes started with Popen.
TRAINCTL = str(Path(sys.executable).parent / "trainctl")


def alive(pid: int) -> bool:
    """True while `pid` exists and is not a zombie (a reaped-later child counts as gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"  # the state follows the (command name)


def processes_mentioning(needle: str) -> list[int]:
    """Pids (other than this test process) whose command line contains `needle`, e.g. a run id."""
    found = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit() and int(d.name) != os.getpid():
            try:
                if needle in (d / "cmdline").read_bytes().decode(errors="replace"):
                    found.append(int(d.name))
            except OSError:
                pass
    return found


def stop_group(proc: subprocess.Popen, grace_s: float = 30.0) -> None:
    """Stop a test's process group (started with start_new_session): SIGINT, then SIGKILL."""
    if proc.poll() is not None:
        return
    os.killpg(proc.pid, signal.SIGINT)
    try:
        proc.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
