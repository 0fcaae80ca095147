"""`diagnose --since/--until` (issue 17 item 6): the window keeps only its rows, in every timed table."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from trainctl.errors import InputError
from trainctl.ops.diagnose.window import parse_time


def test_times_keep_their_offsets_and_relative_durations() -> None:
    assert parse_time("2026-11-25T03:00:00+01:00", flag="--since") == datetime(2026, 11, 25, 2, 0, tzinfo=UTC)
    assert parse_time("2026-11-25T03:00:00", flag="--since").tzinfo is UTC  # no offset: UTC, as documented
    now = datetime(2026, 11, 25, 12, 0, tzinfo=UTC)
    assert parse_time("90m", flag="--since", now=now) == datetime(2026, 11, 25, 10, 30, tzinfo=UTC)
    with pytest.raises(InputError, match="--until 'yesterday': not a time"):
        parse_time("yesterday", flag="--until")


def test_a_window_before_the_crash_sees_no_crash(cli, tmp_path) -> None:
    log = tmp_path / "kern.log"
    log.write_text(
        "2026-11-25T01:00:00,000000+00:00 NVRM: Xid (PCI:0000:18:00): 79, pid=1, name=python, GPU has fallen off the bus.\n"
        "2026-11-25T03:00:00,000000+00:00 NVRM: Xid (PCI:0000:3b:00): 48, pid=2, name=python, An uncorrectable double "
        "bit error (DBE) has been detected on GPU.\n"
    )

    def xids(*flags):
        r = cli("diagnose", log, "--json", "--fail-on", "never", *flags)
        assert r.code == 0, r.stderr
        return sorted(x for f in json.loads(r.stdout)["findings"] for x in f["evidence"].get("xids", []))

    assert xids() == [48, 79]
    assert xids("--since", "2026-11-25T02:00:00+00:00") == [48]
    assert xids("--until", "2026-11-25T03:00:00+01:00") == [79]  # 02:00 UTC
    r = cli("diagnose", log, "--since", "soon")
    assert r.code == 1 and "--since 'soon': not a time" in r.stderr and "Traceback" not in r.stderr


def _kern_log(tmp_path):
    log = tmp_path / "kern.log"
    log.write_text(
        "2026-11-25T01:00:00,000000+00:00 NVRM: Xid (PCI:0000:18:00): 79, pid=1, name=python, GPU has fallen off the bus.\n"
        "nvidia-smi: no time on this line\n"
    )
    return log


def test_a_window_says_what_it_kept_and_one_that_missed_the_run_is_not_a_clean_run(cli, tmp_path) -> None:
    log = _kern_log(tmp_path)
    r = cli("diagnose", log, "--json", "--fail-on", "never", "--since", "2030-01-01T00:00:00+00:00")
    assert r.code == 0, r.stderr
    report = json.loads(r.stdout)
    assert report["findings"] == []
    assert report["notes"] == [
        "the window (since 2030-01-01T00:00:00+00:00) kept none of the 1 timed rows: the run's records lie outside "
        "it; widen it, or drop --since/--until"
    ]
    r = cli("diagnose", log, "--fail-on", "never", "--until", "2026-11-25T02:00:00+00:00")
    assert "note: the window (until 2026-11-25T02:00:00+00:00) kept 1 of 1 timed rows" in r.stdout, r.stdout


def test_reversed_bounds_are_refused(cli, tmp_path) -> None:
    r = cli("diagnose", _kern_log(tmp_path), "--since", "2026-11-25T03:00:00+00:00", "--until", "2026-11-25T01:00:00Z")
    assert r.code == 1 and "Traceback" not in r.stderr
    assert "--since 2026-11-25T03:00:00+00:00 is after --until 2026-11-25T01:00:00+00:00" in r.stderr, r.stderr


def test_the_helps_ago_form_and_times_outside_the_records_range() -> None:
    now = datetime(2026, 11, 25, 12, 0, tzinfo=UTC)
    assert parse_time("1d ago", flag="--since", now=now) == datetime(2026, 11, 24, 12, 0, tzinfo=UTC)
    # a tester's tracebacks: OverflowError from the duration, ArrowInvalid from a year past Arrow's nanoseconds
    for flag, value in (("--since", "99999999d"), ("--until", "2300-01-01"), ("--since", "1600-01-01")):
        with pytest.raises(InputError, match=rf"{flag} '{value}': outside the years 1678-2261"):
            parse_time(value, flag=flag, now=now)


def test_a_window_that_keeps_no_timed_row_analyses_nothing(cli, tmp_path) -> None:
    """The run's untimed rows (an exit code) read alone made other verdicts than the run's: its OOM, read with
    the error file's time, became an OOM and a crash; a window that missed the run says so and finds nothing."""
    import shutil
    from pathlib import Path

    run = tmp_path / "oom_run"
    shutil.copytree(Path(__file__).parents[1] / "fixtures" / "gpu_h100" / "oom_run", run)
    whole = json.loads(cli("diagnose", run, "--json", "--fail-on", "never").stdout)
    assert [f["kind"] for f in whole["findings"]] == ["oom"]
    r = cli("diagnose", run, "--json", "--fail-on", "never", "--since", "2030-01-01")
    assert r.code == 0, r.stderr
    report = json.loads(r.stdout)
    assert report["findings"] == [] and "kept none of the" in report["notes"][-1], report
