"""Remote command templates: quoting and status parsing (no SSH needed)."""

from __future__ import annotations

import subprocess

import pytest

from trainctl.errors import LaunchError
from trainctl.ops.remote import RemoteProcess, parse_status, poll_command, start_command


def test_start_command_quotes_everything_and_runs_detached(tmp_path):
    log = tmp_path / "a dir" / "x;rm -rf y.log"
    cmd = start_command(
        ["sh", "-c", 'echo "$1 $FOO"; exit 3', "sh", "it's $(bad)"],
        log_path=str(log),
        env={"FOO": "a b;c"},
        cwd=str(tmp_path),
    )
    out = subprocess.run(["sh", "-c", cmd], capture_output=True, text=True, timeout=10)
    pid = int(out.stdout.strip())
    proc = RemoteProcess("h", "t", pid, str(log), str(log) + ".exit")
    for _ in range(100):
        line = subprocess.run(["sh", "-c", poll_command(proc)], capture_output=True, text=True).stdout
        if not line.startswith("alive"):
            break
        subprocess.run(["sleep", "0.05"])
    st = parse_status(proc, line)
    assert (st.alive, st.exit_code, st.killed) == (False, 3, False)
    assert log.read_text() == "it's $(bad) a b;c\n"
    assert not (tmp_path / "y.log").exists()


def test_parse_status_lines():
    p = RemoteProcess("h", "n", 12, "/l", "/l.exit")
    assert parse_status(p, "alive\n").alive
    assert parse_status(p, "exit 0").exit_code == 0
    assert parse_status(p, "exit -9").exit_code == -9
    assert parse_status(p, "gone").killed
    with pytest.raises(LaunchError, match="unexpected status"):
        parse_status(p, "bash: ps: not found")
