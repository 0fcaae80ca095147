"""Bad input to `diagnose` (and an output path the system refuses): one line naming the path and what was expected, exit 1, no traceback."""

from __future__ import annotations

import os

import pytest


def test_empty_dir(cli, tmp_path) -> None:
    line = cli("diagnose", tmp_path).error_line()
    assert line.startswith(f"error: {tmp_path}: directory is empty")


def test_parquet_parts_outside_host_folders_are_said_where_they_are(cli, tmp_path) -> None:
    """Parts straight in gpu_metrics/ (no host=<host>/) were "holds no signals yet ... did the run start?"."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    (tmp_path / "gpu_metrics").mkdir()
    for i in range(2):
        pq.write_table(pa.table({"gpu": pa.array([0], pa.int16())}), tmp_path / "gpu_metrics" / f"part-{i}.parquet")
    res = cli("diagnose", tmp_path)
    assert res.code == 1 and "Traceback" not in res.stderr
    line = res.error_line()
    assert f"{tmp_path / 'gpu_metrics'}: 2 Parquet part(s) not in host=<host>/ folders" in line
    assert "no signals" not in line


def test_collect_out_onto_a_launch_run_dir_is_a_usage_error(cli, tmp_path) -> None:
    """`collect --out RUN` wrote collection_status (and would write parts) into the run dir of `trainctl launch`.
    A dataset collect wrote before is collected into again (its sync state says so)."""
    run = tmp_path / "run"
    run.mkdir()
    (run / "run.json").write_text("{}")
    res = cli("collect", str(run), "--hosts", "127.0.0.9", "--out", run, "--connect-timeout-s", "1")
    assert res.code == 2 and "Traceback" not in res.stderr
    line = res.error_line(2)
    assert f"--out {run}: a run dir of `trainctl launch`" in line and "run-collected" in line
    assert sorted(p.name for p in run.iterdir()) == ["run.json"]
    (run / ".trainctl-collect").mkdir()  # collected into before: not refused (the host is down: exit 1, not 2)
    again = cli("collect", str(run), "--hosts", "127.0.0.9", "--out", run, "--connect-timeout-s", "1")
    assert again.code == 1 and "a run dir of" not in again.stderr


def test_dir_that_is_not_a_run(cli, tmp_path) -> None:
    (tmp_path / "notes.txt").write_text("hello")
    line = cli("diagnose", tmp_path).error_line()
    assert f"{tmp_path}: not a trainctl run dir" in line


def test_missing_path(cli, tmp_path) -> None:
    line = cli("diagnose", tmp_path / "nope").error_line()
    assert "no such file or directory" in line


def test_truncated_parquet(cli, tmp_path) -> None:
    import pyarrow as pa

    from trainctl import dataset

    p = dataset.write_table(
        tmp_path,
        "timeline",
        "n1",
        pa.table({"rank": pa.array([0], pa.int32()), "step": [1], "phase": ["forward"], "duration_ns": [5]}),
    )
    p.write_bytes(p.read_bytes()[:30])
    # said with one line naming it and skipped (README "Hostile and broken input"); nothing else is there to
    # diagnose, so that is an error (a run dir with other files is diagnosed from them: test_diagnose_broken_parts)
    r = cli("diagnose", tmp_path, "--json")
    assert r.code == 1 and "Traceback" not in r.stderr, r
    assert "".join(f"{p}: not a readable Parquet file".split()) in "".join(r.stderr.split())  # rich wraps stderr


def test_usage_error_exits_2(cli) -> None:
    assert cli("diagnose").code == 2


def test_an_output_the_system_refuses_is_one_line_not_a_traceback(cli, tmp_path) -> None:
    (tmp_path / "train.log").write_text("step 1 loss 2.31\n")
    missing = tmp_path / "no-such-folder" / "report.html"
    line = cli("report", tmp_path / "train.log", "--out", missing).error_line()
    assert line.startswith(f"error: {missing}: No such file or directory; check the path"), line
    assert not missing.parent.exists()


@pytest.mark.parametrize(
    "argv, flag",
    [
        (["playbook", "probe", "--iters", "0"], "--iters"),  # zero collectives measured nothing, said 'no slow host'
        (["playbook", "probe", "--hosts-local", "0"], "--hosts-local"),
        (["demo", "--steps", "5"], "--steps"),  # under the straggler analysis' minimum: a demo without its finding
        (["collect", "x", "--hosts", "a", "--out", "y", "--timeout-s", "-5"], "--timeout-s"),
        (["collect", "x", "--hosts", "a", "--out", "y", "--max-failed-hosts", "-1"], "--max-failed-hosts"),
        (["fleet-sim", "--out", "y", "--minutes", "inf"], "--minutes"),  # was a traceback (OverflowError)
        (["diagnose", "x", "--watch", "--interval-s", "inf"], "--interval-s"),  # a traceback after round 1
    ],
)
def test_values_that_mean_nothing_are_usage_errors(cli, argv, flag) -> None:
    res = cli(*argv)
    assert res.code == 2 and f"Invalid value for '{flag}'" in res.stderr, res.stderr


@pytest.mark.parametrize("flag, value", [("--rounds", "3"), ("--interval-s", "2")])
def test_watch_only_flags_without_watch_are_usage_errors(cli, tmp_path, flag, value) -> None:
    # they were ignored: one diagnosis, exit 0, and the operator thought a watch had run
    (tmp_path / "train.log").write_text("step 1 loss 2.31\n")
    res = cli("diagnose", tmp_path / "train.log", flag, value)
    assert res.code == 2 and f"Invalid value for '{flag}'" in res.stderr and "--watch" in res.stderr, res.stderr
    assert res.stdout == ""
    # as a default in the config file it applies to --watch and leaves a plain diagnose alone
    (tmp_path / "c.toml").write_text(f"[diagnose]\n{flag[2:]} = {value}\n")
    env = {**os.environ, "TRAINCTL_CONFIG": str(tmp_path / "c.toml")}
    assert cli("diagnose", tmp_path / "train.log", env=env).code == 0


def test_the_demo_minimum_is_the_straggler_analysis_minimum() -> None:
    from trainctl.analyzers.stragglers import MIN_STEPS
    from trainctl.cli.demo import DEMO_MIN_STEPS

    assert DEMO_MIN_STEPS == MIN_STEPS


def test_a_link_that_leads_nowhere_is_said_as_a_link(cli, tmp_path) -> None:
    """A dangling link or a loop of links said 'no such file or directory' while `ls` shows the name."""
    (tmp_path / "a").symlink_to(tmp_path / "b")
    (tmp_path / "b").symlink_to(tmp_path / "a")
    (tmp_path / "gone").symlink_to(tmp_path / "moved-away")
    line = cli("diagnose", tmp_path / "a").error_line()
    assert line.startswith(f"error: {tmp_path / 'a'}: a symbolic link that leads to no file (a loop of links)"), line
    line = cli("diagnose", tmp_path / "gone").error_line()
    assert line.startswith(
        f"error: {tmp_path / 'gone'}: a symbolic link to {tmp_path / 'moved-away'}, which does not exist"
    ), line


def test_launch_into_a_run_dir_that_holds_a_run_is_refused(cli, tmp_path) -> None:
    """`launch --run-dir OLD` overwrote OLD's run.json and timeline and left its gpu_metrics beside the new run's:
    `diagnose OLD` then said 'GPU 0 on node01 stopped reporting' (critical), a finding about no run at all."""
    from trainctl.rundir import HostRanks, RunInfo, write_run_info

    old = tmp_path / "old"
    write_run_info(old, RunInfo(run_id="r-old", world_size=1, nproc_per_node=1, hosts=(HostRanks("node01", (0,)),)))
    before = (old / "run.json").read_text()
    line = cli("launch", "--local", "--run-dir", old, "--", "--steps", "2").error_line(code=2)
    assert f"--run-dir {old}: already holds run r-old" in line, line
    assert (old / "run.json").read_text() == before and sorted(p.name for p in old.iterdir()) == ["run.json"]
