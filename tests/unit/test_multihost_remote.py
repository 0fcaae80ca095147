"""Remote command templates: quoting and status parsing (no SSH needed)."""

from __future__ import annotations

import subprocess

import pytest

from trainctl.errors import LaunchError
from trainctl.ops.remote import RemoteProcess, parse_status, poll_command, start_command, stop_command


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


def test_stop_command_stops_the_group_under_dash_too(tmp_path):
    # Debian's /bin/sh is dash, some users' login shell too: its kill refuses `kill -KILL -- -PGID`.
    log = str(tmp_path / "logs" / "sleeper.log")
    cmd = start_command(["sh", "-c", "sleep 60 & sleep 60"], log_path=log)
    pgid = int(subprocess.run(["sh", "-c", cmd], capture_output=True, text=True, timeout=10).stdout.strip())
    proc = RemoteProcess("h", "sleeper", pgid, log, log + ".exit")
    line = subprocess.run(["dash", "-c", stop_command(proc, grace_s=2)], capture_output=True, text=True, timeout=20)
    assert parse_status(proc, line.stdout).alive is False, line
    states = subprocess.run(["ps", "-o", "stat=", "-g", str(pgid)], capture_output=True, text=True).stdout.split()
    assert all(s.startswith("Z") for s in states), states  # dead (zombies until this sandbox's init reaps them)
