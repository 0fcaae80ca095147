"""`diagnose`, `report`, `export` and `compare` that skipped some input: the output is written, what was skipped is
said on stderr, once, and the exit code is 6 (ExitCode.PARTIAL), so that automation can tell a diagnosis, report,
trace or comparison of part of a run from one of all of it (README "Hostile and broken input")."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest
from broken_parquet import WIDE

from trainctl import dataset
from trainctl.exit_codes import ExitCode

TRAINER_RUN = Path(__file__).parents[1] / "fixtures" / "gpu_h100" / "trainer_run"
COMMANDS = ["diagnose", "report", "export", "compare"]  # diagnose: its table form (the JSON has tests of its own)


def _run(cli, command: str, path: Path, tmp_path: Path):
    """`trainctl COMMAND PATH ...` (compare: PATH against a clean copy of the trainer run) and what it wrote."""
    if command == "diagnose":
        r = cli("diagnose", path, env=WIDE)
        return r, r.stdout
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


def test_compare_json_lists_the_skipped_as_diagnose_json_does(cli, tmp_path: Path) -> None:
    # A script reading compare --json must see what the 6 was for: the same `skipped` list of one-line strings, the
    # same lines, that diagnose --json gives for the same run (the clean side adds none).
    run = Path(shutil.copytree(TRAINER_RUN, tmp_path / "run"))
    sorted((run / "gpu_metrics" / "host=node01").glob("part-*.parquet"))[1].write_bytes(b"PAR1 torn")
    diagnosed = json.loads(cli("diagnose", run, "--json", env=WIDE).stdout)["skipped"]
    r, compared = _run(cli, "compare", run, tmp_path)
    assert r.code == ExitCode.PARTIAL, r
    assert compared["skipped"] == diagnosed and len(diagnosed) == 1, (compared["skipped"], diagnosed)


@pytest.mark.parametrize("command", COMMANDS)
def test_the_same_run_whole_exits_0(cli, tmp_path: Path, command: str) -> None:
    # The control of the test above: 6 comes from the torn part, not from the run.
    run = Path(shutil.copytree(TRAINER_RUN, tmp_path / "run"))
    r, written = _run(cli, command, run, tmp_path)
    assert r.code == ExitCode.OK and written and "WARNING" not in r.stderr, r
    if command == "compare":  # nothing skipped: the key is there, empty, as in diagnose's JSON
        assert written["skipped"] == [], written


def _years_off(root: Path) -> Path:
    """A dataset whose GPU metrics span years (one host's clock off): the faulty-host analyzer fails on it."""
    for host, ts in (("n1", 1_795_000_000 * 10**9), ("n2", 2 * 10**18)):  # 2026 and 2033
        t = pa.table({"ts": pa.array([ts], pa.int64()).cast(pa.timestamp("ns", tz="UTC")),
                      "gpu": pa.array([0], pa.int16()), "power_w": pa.array([300.0], pa.float32())})  # fmt: skip
        dataset.write_table(root, "gpu_metrics", host, t)
    return root


FAILED = "analyzer faulty_hosts: failed on this input (ValueError: metrics span"


@pytest.mark.parametrize("command", COMMANDS)
def test_an_analyzer_that_fails_on_odd_values_is_said_once_and_the_exit_code_is_partial(
    cli, tmp_path: Path, command: str
) -> None:
    data = _years_off(tmp_path / "ds")
    r, written = _run(cli, command, data, tmp_path)
    assert r.code == ExitCode.PARTIAL and "Traceback" not in r.stderr, r
    assert written, r
    assert r.stderr.count(FAILED) == 1 and f"{data}: {FAILED}" in r.stderr, r.stderr  # named by the run it met
    if command == "report":  # and listed among the page's skipped inputs, once
        assert written.count(f"<p class='warning'>skipped: {data}: {FAILED}") == 1, written
    if command == "compare":  # and in the JSON's skipped, once for each run it failed on (here: A)
        (skipped,) = written["skipped"]
        assert skipped.startswith(f"{data}: {FAILED}"), skipped


def test_compare_says_a_failed_analyzer_for_each_run_it_failed_on(cli, tmp_path: Path) -> None:
    a, b = _years_off(tmp_path / "a"), _years_off(tmp_path / "b")
    r = cli("compare", a, b, env=WIDE)
    assert r.code == ExitCode.PARTIAL and "no findings in either run" in r.stdout, r
    assert r.stderr.count(FAILED) == 2 and f"{a}: {FAILED}" in r.stderr and f"{b}: {FAILED}" in r.stderr, r.stderr


def test_diagnose_says_a_failed_analyzer_the_same_way_and_lists_it_once(cli, tmp_path: Path) -> None:
    # One reader says it for all four commands: on stderr also under --json, and once in the JSON's skipped.
    data = _years_off(tmp_path / "ds")
    r = cli("diagnose", data, "--json", env=WIDE)
    assert r.code == ExitCode.PARTIAL, r
    assert r.stderr.count(FAILED) == 1 and f"{data}: {FAILED}" in r.stderr, r.stderr
    (skipped,) = json.loads(r.stdout)["skipped"]
    assert skipped.startswith(f"{data}: {FAILED}"), skipped


THROUGHPUT_FAILED = "throughput summary: failed on this input"


@pytest.mark.parametrize("json_out", [False, True])
def test_diagnose_says_a_failed_throughput_summary_once_in_either_form(tmp_path: Path, json_out: bool) -> None:
    # The one skip no loader logs as it meets it (_analysed keeps it until the read is done): said on stderr once,
    # as every other skip is, in the table form and under --json alike, and listed once in the JSON.
    code = (
        "import duckdb; from trainctl.ops.diagnose import diagnosis\n"
        "def _throughput(p, signals): raise duckdb.IOException('page checksum mismatch')\n"
        "diagnosis._throughput = _throughput\n"
        "from trainctl.cli.app import main; main()"
    )
    args = ["diagnose", TRAINER_RUN, *(["--json"] if json_out else [])]
    r = subprocess.run([sys.executable, "-c", code, *map(str, args)], capture_output=True, text=True, env=WIDE)
    assert r.returncode == ExitCode.PARTIAL and "Traceback" not in r.stderr, r
    assert r.stderr.count(THROUGHPUT_FAILED) == 1, r.stderr
    if json_out:
        assert [s for s in json.loads(r.stdout)["skipped"] if THROUGHPUT_FAILED in s] == [
            f"{THROUGHPUT_FAILED} (IOException: page checksum mismatch); the findings stand"
        ], r.stdout
