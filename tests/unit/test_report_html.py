"""`trainctl report`: one offline HTML page that headless Chromium renders without a console error
(issue 17 item 1). Chromium is Debian's package, installed by scripts/test.sh; the console check is
shown to work on a page that does log an error."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pyarrow.compute as pc
import pytest
from broken_parquet import corrupt_pages, trainctl
from straggler_timelines import make_timeline

from trainctl import dataset
from trainctl.rundir import HostRanks, RunInfo, write_run_info
from trainctl.schemas import SignalKind

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
needs_chromium = pytest.mark.skipif(CHROMIUM is None, reason="chromium not installed (scripts/test.sh installs it)")


def _run(tmp_path: Path) -> Path:
    t = make_timeline(ranks=8, per_host=2, slow_rank=5, factor=1.6, phase="forward", slow_steps=(40, 200))
    hosts = sorted(set(t["host"].to_pylist()))
    for h in hosts:
        dataset.write_table(tmp_path, SignalKind.TIMELINE, h, t.filter(pc.equal(t["host"], h)), part="p0")
    info = RunInfo("r-report", 8, 2, tuple(HostRanks(h, (2 * i, 2 * i + 1)) for i, h in enumerate(hosts)))
    write_run_info(tmp_path, info)
    return tmp_path


def _render(page: Path) -> tuple[str, str]:
    res = subprocess.run(
        [CHROMIUM, "--headless=new", "--no-sandbox", "--disable-gpu", "--enable-logging=stderr", "--v=0",
         "--dump-dom", page.resolve().as_uri()],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    return res.stdout, res.stderr


def test_report_has_findings_heatmaps_and_a_png(cli, tmp_path) -> None:
    run = _run(tmp_path / "run")
    r = cli("report", run, "--png", tmp_path / "heat.png")
    assert r.code == 0, r.stderr
    page = (run / "report.html").read_text()
    assert "straggler" in page and page.count("<svg") >= 2 and "rank 5" in page
    assert "<script" not in page and not re.search(r"(?:src|href)\s*=\s*[\"']?https?:", page)  # nothing fetched
    assert (tmp_path / "heat.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_corrupt_part_of_a_lazy_timeline_is_skipped_said_and_listed_and_the_rest_drawn(tmp_path) -> None:
    # The timeline left lazy, as a big one is: node01's corrupt part is met as the analysis and the heat-maps read
    # it. The report is the one of the run without that part, plus the part said once and listed as skipped.
    run, without = _run(tmp_path / "run"), _run(tmp_path / "without")
    (part,) = (run / "timeline" / "host=node01").glob("*.parquet")
    corrupt_pages(part)
    (without / "timeline" / "host=node01" / part.name).unlink()
    expected = trainctl("report", without)
    assert expected.returncode == 0, expected.stderr
    r = trainctl("report", run)
    assert r.returncode == 6 and r.stdout == f"{run / 'report.html'}\n", r  # written, but a part was skipped
    assert r.stderr.count(str(part)) == 1, r.stderr
    assert r.stderr.splitlines()[-1] == expected.stderr.splitlines()[-1] == "1 finding(s), 6 heat-map(s)"
    page, want = (run / "report.html").read_text(), (without / "report.html").read_text()
    (skipped,) = re.findall(r"<p class='warning'>skipped: ([^<]*)</p>", page)
    assert skipped.startswith(f"{part}: cannot read Parquet data ("), skipped
    assert _body(page).replace(str(run), str(without)) == _body(want)


def _body(page: str) -> str:
    """The page but its time of writing and its skipped inputs."""
    page = re.sub(r"<p class='warning'>skipped: [^<]*</p>", "", page)
    return re.sub(r"generated [^ ]+ by trainctl report", "", page)


@needs_chromium
def test_headless_chromium_renders_it_without_console_errors(cli, tmp_path) -> None:
    bad = tmp_path / "bad.html"
    bad.write_text('<html><body><script>console.error("boom")</script></body></html>')
    assert "CONSOLE" in _render(bad)[1]  # the check sees console output when there is some
    run = _run(tmp_path / "run")
    assert cli("report", run).code == 0
    dom, log = _render(run / "report.html")
    assert "<svg" in dom and "trainctl report" in dom
    assert "CONSOLE" not in log, log


@needs_chromium
def test_data_is_escaped_not_executed(cli, tmp_path) -> None:
    log = tmp_path / "x.log"
    log.write_text('RuntimeError: CUDA error: an illegal memory access <script>console.error("pwned")</script>\n')
    r = cli("report", log, "--out", tmp_path / "x.html")
    assert r.code == 0, r.stderr
    page = (tmp_path / "x.html").read_text()
    assert "&lt;script&gt;" in page and "<script>" not in page
    assert "CONSOLE" not in _render(tmp_path / "x.html")[1]
