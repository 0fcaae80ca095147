"""`report`, `export` and `compare` that skipped some input: the output is written, what was skipped is said on
stderr, and the exit code is 6 (ExitCode.PARTIAL), as under diagnose, so that automation can tell a report, trace
or comparison of part of a run from one of all of it (README "Hostile and broken input")."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from broken_parquet import WIDE

from trainctl.exit_codes import ExitCode

TRAINER_RUN = Path(__file__).parents[1] / "fixtures" / "gpu_h100" / "trainer_run"
COMMANDS = ["report", "export", "compare"]


def _run(cli, command: str, path: Path, tmp_path: Path):
    """`trainctl COMMAND PATH ...` (compare: PATH against a clean copy of the trainer run) and what it wrote."""
    if command == "report":
        r = cli("report", path, env=WIDE)
        return r, (path / "report.html").read_text() if r.code in (0, 6) else None
    if command == "export":
        r = cli("export", path, "--perfetto", tmp_path / "trace.json", env=WIDE)
        return r, json.loads((tmp_path / "trace.json").read_text()) if r.code in (0, 6) else None
    r = cli("compare", path, TRAINER_RUN, "--json", env=WIDE)
    return r, json.loads(r.stdout) if r.code in (0, 6) else None


@pytest.mark.parametrize("command", COMMANDS)
def test_a_torn_part_is_said_the_rest_written_and_the_exit_code_is_partial(cli, tmp_path: Path, command: str) -> None:
    run = Path(shutil.copytree(TRAINER_RUN, tmp_path / "run"))
    torn = sorted((run / "gpu_metrics" / "host=node01").glob("part-*.parquet"))[1]
    torn.write_bytes(b"PAR1 torn")
    r, written = _run(cli, command, run, tmp_path)
    assert r.code == ExitCode.PARTIAL and "Traceback" not in r.stderr, r
    assert written, r  # the report, the trace, the comparison: all written from the rest
    assert r.stderr.count(f"{torn}: not a readable Parquet file") == 1, r.stderr


@pytest.mark.parametrize("command", COMMANDS)
def test_the_same_run_whole_exits_0(cli, tmp_path: Path, command: str) -> None:
    # The control of the test above: 6 comes from the torn part, not from the run.
    run = Path(shutil.copytree(TRAINER_RUN, tmp_path / "run"))
    r, written = _run(cli, command, run, tmp_path)
    assert r.code == ExitCode.OK and written and "WARNING" not in r.stderr, r
