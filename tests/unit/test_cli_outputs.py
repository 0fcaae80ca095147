"""Output paths of `export`, `report` and `fleet-sim`: a command never writes onto its own input, and
prints the path it wrote. A refusal is one line, exit 2 (usage), before anything is written."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

FIXTURE = Path(__file__).parents[1] / "fixtures" / "gpu_h100" / "oom_run"


@pytest.fixture
def run(tmp_path: Path) -> Path:
    shutil.copytree(FIXTURE, tmp_path / "run")
    return tmp_path / "run"


def test_export_refuses_to_overwrite_the_run_it_reads(cli, run: Path, tmp_path: Path) -> None:
    before = (run / "run.json").read_bytes()
    line = cli("export", run, "--perfetto", run / "run.json").error_line(2)
    assert line.startswith(f"error: --perfetto {run / 'run.json'}: inside the input directory {run}"), line
    assert (run / "run.json").read_bytes() == before
    (tmp_path / "link").symlink_to(run)  # through a symlink, and a new file in it: still the input
    cli("export", tmp_path / "link", "--perfetto", run / "trace.json").error_line(2)
    assert not (run / "trace.json").exists()
    assert cli("export", run, "--perfetto", tmp_path / "trace.json").code == 0


def test_a_dash_is_not_taken_for_a_file_named_dash(cli, run: Path, tmp_path: Path) -> None:
    for args in (("export", run, "--perfetto", "-"), ("report", run, "--out", "-")):
        line = cli(*args, cwd=str(tmp_path)).error_line(2)
        assert "this writes a file, not stdout" in line, line
    assert not (tmp_path / "-").exists()


def test_report_refuses_to_overwrite_the_log_it_reads(cli, tmp_path: Path) -> None:
    victim = tmp_path / "victim.log"
    shutil.copy(FIXTURE / "logs" / "node01" / "rank-0.log", victim)
    before = victim.read_bytes()
    line = cli("report", victim, "--out", victim).error_line(2)
    assert line.startswith(f"error: --out {victim}: that is the input file itself"), line
    (tmp_path / "hard.log").hardlink_to(victim)
    cli("report", victim, "--out", tmp_path / "hard.log").error_line(2)
    assert victim.read_bytes() == before


def test_report_writes_only_its_own_file_into_the_run(cli, run: Path, tmp_path: Path) -> None:
    cli("report", run, "--out", run / "timeline" / "x.html").error_line(2)
    cli("report", run, "--png", run / "heat.png").error_line(2)
    assert not (run / "heat.png").exists() and not (run / "report.html").exists()
    assert cli("report", run, "--out", run / "report.html").code == 0  # the default, named: allowed


def test_report_png_is_written_where_it_says(cli, run: Path, tmp_path: Path) -> None:
    # matplotlib alone appended .png to a name without an extension and to a directory's name, while
    # report printed the name it was given
    r = cli("report", run, "--out", tmp_path / "r.html", "--png", tmp_path / "noext")
    assert r.code == 0, r.stderr
    assert r.stdout.splitlines()[0] == str(tmp_path / "noext")
    assert (tmp_path / "noext").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and not (tmp_path / "noext.png").exists()
    (tmp_path / "pics").mkdir()
    line = cli("report", run, "--out", tmp_path / "r2.html", "--png", tmp_path / "pics").error_line(2)
    assert line.startswith(f"error: --png {tmp_path / 'pics'}: is a directory"), line
    assert not (tmp_path / "pics.png").exists() and not (tmp_path / "r2.html").exists()


@pytest.mark.parametrize(
    "out, png, said",
    [
        ("r.png", "r1.html", "matplotlib cannot write '.html' files"),  # was a ValueError traceback, HTML written
        ("same.png", "same.png", "the HTML report goes there too (--out)"),  # was the PNG over the HTML, exit 0
    ],
)
def test_report_png_refusals_come_before_anything_is_written(cli, run: Path, tmp_path: Path, out, png, said) -> None:
    line = cli("report", run, "--out", tmp_path / out, "--png", tmp_path / png).error_line(2)
    assert line.startswith(f"error: --png {tmp_path / png}: {said}"), line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run"]


def test_report_png_help_names_the_extra(cli) -> None:
    r = cli("report", "--help", env={**os.environ, "COLUMNS": "400"})
    assert "pip install 'trainctl[report]'" in r.stdout, r.stdout


def test_report_help_says_where_the_default_goes(cli, tmp_path: Path) -> None:
    # the help said PATH/report.html for every PATH; a log's report goes next to it as NAME.report.html
    helped = " ".join(cli("report", "--help", env={**os.environ, "COLUMNS": "400"}).stdout.split())
    assert "PATH/report.html for a directory" in helped and "oom.log -> oom.report.html" in helped, helped
    shutil.copy(FIXTURE / "logs" / "node01" / "rank-0.log", tmp_path / "oom.log")
    r = cli("report", tmp_path / "oom.log")
    assert r.code == 0 and r.stdout.strip() == str(tmp_path / "oom.report.html"), r
    assert (tmp_path / "oom.report.html").exists()
