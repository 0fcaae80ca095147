"""Regression tests for each class of hostile input of issue 15, at the level a user meets them (the CLI)."""

from __future__ import annotations

import json
import os
import pickle

import pytest

from trainctl.exit_codes import ExitCode


def _one_line_error(r) -> None:
    assert r.code == ExitCode.ERROR, (r.code, r.stderr)
    assert "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr


@pytest.mark.parametrize("kind", ["fifo", "devnull", "loop"])
def test_special_files_as_input(cli, tmp_path, kind) -> None:
    p = tmp_path / "x"
    if kind == "fifo":
        os.mkfifo(p)
    elif kind == "loop":
        os.symlink(p, p)
    else:
        p = "/dev/null"
    r = cli("diagnose", p, timeout=60)  # a FIFO must not block the read
    if kind == "devnull":
        assert r.code in (ExitCode.OK, ExitCode.ERROR) and "Traceback" not in r.stderr
    else:
        _one_line_error(r)


def test_markup_in_data_prints_as_it_is(cli, tmp_path) -> None:
    log = tmp_path / "weird [bold]x[-] [-x].log"  # "/" cannot be in a file name; markup in the text
    log.write_text("RuntimeError: CUDA error: an illegal memory access [/x] was encountered\n")
    r = cli("diagnose", log, "--fail-on", "never")
    assert r.code in (ExitCode.OK, ExitCode.PARTIAL) and "Traceback" not in r.stderr, r.stderr
    assert "[/x]" in r.stdout


def test_one_bad_flight_recorder_dump_is_skipped_and_said(cli, tmp_path) -> None:
    """A run dir with a good timeline and one hostile FR dump: the rest is analysed, the skip is
    listed in the JSON and the exit code says partial input."""
    from trainctl import dataset
    from trainctl.rundir import HostRanks, RunInfo, write_run_info

    run = tmp_path / "run"
    write_run_info(run, RunInfo("r", 2, 1, (HostRanks("node01", (0,)), HostRanks("node02", (1,)))))
    import pyarrow as pa

    t = pa.table({"rank": [0, 1] * 30, "step": [s for s in range(30) for _ in (0, 1)], "phase": ["forward"] * 60,
                  "duration_ns": [1_000_000] * 60, "source": ["perf_counter"] * 60})  # fmt: skip
    dataset.write_table(run, "timeline", "node01", t.filter(pa.compute.equal(t["rank"], 0)), part="r0")
    dataset.write_table(run, "timeline", "node02", t.filter(pa.compute.equal(t["rank"], 1)), part="r1")
    (run / "fr" / "node01").mkdir(parents=True)
    (run / "fr" / "node01" / "rank-0.pkl").write_bytes(pickle.dumps({"entries": 7, "rank": 2**70}))
    (run / "fr" / "node02").mkdir(parents=True)
    (run / "fr" / "node02" / "rank-1.json").write_text('{"entries": [{"record_id": 1e400, "profiling_name": ["x"]}]')
    r = cli("diagnose", run, "--json")
    assert "Traceback" not in r.stderr, r.stderr
    doc = json.loads(r.stdout)
    assert doc["skipped"], doc
    assert r.code == ExitCode.PARTIAL, (r.code, r.stderr)


def test_launch_env_value_that_looks_like_an_option_stays_a_value(tmp_path) -> None:
    from trainctl.cli.launch import request_from_argv

    req = request_from_argv(["--hosts", "n1", "--env", "X=--rm -rf /", "--", "t.py"], cwd=tmp_path).validate()
    assert req.env() == {"X": "--rm -rf /"}
    argv = req.to_argv()
    assert argv[argv.index("--env") + 1] == "X=--rm -rf /"  # one argv element: never split, never an option


def test_a_timestamp_years_off_is_a_skipped_analyzer_not_a_hang(cli, tmp_path) -> None:
    import pyarrow as pa

    from trainctl import dataset

    for host, ts in (("n1", 1_795_000_000 * 10**9), ("n2", 2 * 10**18)):  # 2026 and 2033
        t = pa.table({"ts": pa.array([ts], pa.int64()).cast(pa.timestamp("ns", tz="UTC")), "gpu": pa.array([0], pa.int16()),
                      "power_w": pa.array([300.0], pa.float32())})  # fmt: skip
        dataset.write_table(tmp_path / "ds", "gpu_metrics", host, t)
    r = cli("diagnose", tmp_path / "ds", "--json", timeout=60)
    assert r.code == ExitCode.PARTIAL, (r.code, r.stderr)
    assert any("faulty_hosts" in s and "days" in s for s in json.loads(r.stdout)["skipped"])
