"""`trainctl diagnose PATH --watch`: a log that grows while it is watched; the round after a watchdog
timeout is appended prints it as new, and the exit code follows the last round's findings."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from trainctl.exit_codes import ExitCode

TIMEOUT_LINE = (
    "[rank1]:[E1206 18:44:12.715298746 ProcessGroupNCCL.cpp:607] [Rank 1] Watchdog caught collective operation "
    "timeout: WorkNCCL(SeqNum=7, OpType=ALLREDUCE, NumelIn=8, NumelOut=8, Timeout(ms)=600000) ran for 600061 "
    "milliseconds before timing out.\n"
)


def _watch(log: Path, *extra: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-c", "from trainctl.cli.app import main; main()", "diagnose", str(log), "--watch",
         "--interval-s", "0.3", *extra],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


@pytest.mark.timeout(120)
def test_watch_prints_what_appears_and_exits_by_the_last_round(tmp_path: Path) -> None:
    log = tmp_path / "train.log"
    log.write_text("step 1 loss 2.10\n")
    p = _watch(log, "--rounds", "8")
    # the first round ran on the quiet log: a watched log is live, its end is where the run has got to, not a stop
    # (on its own, `diagnose` reads the same log as a run that stopped printing: log_ends_mid_run)
    assert "round 1: no change (0 findings)" in p.stderr.readline()
    with log.open("a") as fh:
        fh.write(TIMEOUT_LINE)
    out, rest = p.communicate(timeout=100)
    assert p.returncode == ExitCode.FINDINGS, rest
    new = [line for line in out.splitlines() if " new " in line]
    assert len(new) == 1 and "critical" in new[0] and "hung_collective" in new[0] and "ALLREDUCE" in new[0], out
    # later rounds see the same finding: nothing printed again
    assert "no change (1 findings)" in rest


@pytest.mark.timeout(120)
def test_watch_json_lines_and_fail_on_never(tmp_path: Path) -> None:
    log = tmp_path / "train.log"
    log.write_text(TIMEOUT_LINE)
    p = _watch(log, "--rounds", "2", "--json", "--fail-on", "never")
    out, err = p.communicate(timeout=100)
    assert p.returncode == ExitCode.OK, err
    (row,) = [json.loads(line) for line in out.splitlines()]
    assert (row["round"], row["status"], row["kind"], row["severity"]) == (1, "new", "hung_collective", "critical")
