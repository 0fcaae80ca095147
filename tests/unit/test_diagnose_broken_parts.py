"""A run dir with a torn file is diagnosed from the rest (README "Hostile and broken input"): the file is said
on stderr, listed in `skipped`, exit 6; what it would have given is said missing, not read as a clean run."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

TRAINER_RUN = Path(__file__).parents[1] / "fixtures" / "gpu_h100" / "trainer_run"
CRASH_RUN = TRAINER_RUN.with_name("crash_drill_run")  # a timeline and an error file: ranks/ is read twice
WIDE = {**os.environ, "COLUMNS": "1000"}  # one warning, one stderr line: nothing wrapped mid-path


@pytest.fixture
def run(tmp_path: Path) -> Path:
    return Path(shutil.copytree(TRAINER_RUN, tmp_path / "run"))


def _diagnose(cli, run: Path) -> dict:
    r = cli("diagnose", run, "--json")
    assert r.code == 6 and "Traceback" not in r.stderr, r
    return json.loads(r.stdout)


def test_a_torn_metrics_part_is_skipped_and_the_others_are_read(cli, run: Path) -> None:
    torn = sorted((run / "gpu_metrics" / "host=node01").glob("part-*.parquet"))[1]
    torn.write_bytes(b"")
    report = _diagnose(cli, run)
    assert any(f"{torn}: not a readable Parquet file" in s for s in report["skipped"]), report["skipped"]
    assert report["summary"]["steps"] > 0  # the timeline is read as before


def test_a_run_whose_timeline_is_unreadable_says_stragglers_were_not_judged(cli, run: Path) -> None:
    (part,) = (run / "timeline" / "host=node01").glob("part-*.parquet")
    part.write_bytes(b"PAR1 torn")
    report = _diagnose(cli, run)
    assert any(str(part) in s for s in report["skipped"])
    assert "stragglers: not judged, no timeline to read" in " ".join(report["notes"]), report["notes"]


def test_a_run_dir_with_no_timeline_says_so(cli, run: Path) -> None:
    shutil.rmtree(run / "timeline")
    r = cli("diagnose", run, "--json")
    assert r.code == 0, r
    assert json.loads(r.stdout)["notes"] == [
        "stragglers: not judged, no timeline to read (the ranks' step timings, timeline/ of the run dir)"
    ]


def test_a_rank_report_that_does_not_parse_is_said_where_the_mfu_needed_it(cli, run: Path) -> None:
    (run / "ranks" / "rank-0.json").write_text("x\n")
    report = _diagnose(cli, run)
    assert any("ranks/rank-0.json: unreadable" in s for s in report["skipped"]), report["skipped"]


def test_a_bad_rank_report_of_a_crash_run_is_said_once_on_stderr(cli, tmp_path: Path) -> None:
    # The run events (the crash's host) and the throughput summary (the MFU) both rest on ranks/.
    run = Path(shutil.copytree(CRASH_RUN, tmp_path / "run"))
    (run / "ranks" / "rank-0.json").write_text("x\n")
    r = cli("diagnose", run, "--json", "--fail-on", "never", env=WIDE)
    assert r.code == 6 and "Traceback" not in r.stderr, r
    assert r.stderr.count("ranks/rank-0.json: unreadable") == 1, r.stderr
    report = json.loads(r.stdout)
    assert [s for s in report["skipped"] if "rank-0.json" in s] == [
        f"{run}/ranks/rank-0.json: unreadable (Expecting value: line 1 column 1 (char 0)), skipped"
    ]
    # Both readers still ran: the crash is on its host (run.json's), and the summary has the timeline's steps.
    assert [(f["kind"], f["hosts"]) for f in report["findings"]][:1] == [("crash", ["node01"])]
    assert report["summary"]["steps"] > 0
