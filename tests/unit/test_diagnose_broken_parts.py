"""A run dir with a torn file is diagnosed from the rest (README "Hostile and broken input"): the file is said
on stderr, listed in `skipped`, exit 6; what it would have given is said missing, not read as a clean run."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from broken_parquet import WIDE, corrupt_pages, trainctl
from straggler_timelines import make_timeline

from trainctl import dataset
from trainctl.schemas import SignalKind

TRAINER_RUN = Path(__file__).parents[1] / "fixtures" / "gpu_h100" / "trainer_run"
CRASH_RUN = TRAINER_RUN.with_name("crash_drill_run")  # a timeline and an error file: ranks/ is read twice


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


@pytest.mark.parametrize("kind", ["gpu_metrics", "timeline"])  # timeline: opened lazily (a pyarrow Dataset)
def test_a_directory_named_like_a_part_is_skipped_and_said_as_a_directory(cli, run: Path, kind: str) -> None:
    """A folder named part-x.parquet was 'not a readable Parquet file ... it may be truncated' (nothing was cut), or,
    where the kind is opened as a dataset, pyarrow's 'points to a directory' ended the whole diagnosis."""
    host_dir = next((run / kind).glob("host=*"))
    folder = host_dir / "part-zz.parquet"
    folder.mkdir()
    report = _diagnose(cli, run)
    said = [s for s in report["skipped"] if str(folder) in s]
    assert said and "a directory named like a Parquet part" in said[0] and "truncated" not in said[0], report


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


def _diagnose_as(run: Path, lazy: bool) -> subprocess.CompletedProcess:
    """`trainctl diagnose RUN --json`; `lazy`: every table stays lazy, read by the analyzers as a big one is."""
    return trainctl("diagnose", run, "--json", lazy=lazy)


def _diagnose_loaded_or_lazy(run: Path, lazy: bool) -> tuple[int, str, dict]:
    proc = _diagnose_as(run, lazy)
    return proc.returncode, proc.stderr, json.loads(proc.stdout)


@pytest.mark.parametrize("lazy", [False, True], ids=["loaded", "lazy"])
@pytest.mark.parametrize(
    "part",
    ["gpu_metrics/host=node01/part-agent-497-000001.parquet", "timeline/host=node01/part-rank0-00000.parquet"],
    ids=["one-of-three-metrics-parts", "the-only-timeline-part"],
)
def test_a_part_with_corrupt_data_pages_is_skipped_like_a_torn_one(tmp_path: Path, part: str, lazy: bool) -> None:
    # What the run gives without the part at all is what it gives with the part corrupt, plus the part said once.
    without = Path(shutil.copytree(TRAINER_RUN, tmp_path / "without"))
    (without / part).unlink()
    code, _, expected = _diagnose_loaded_or_lazy(without, lazy)
    assert code == 0 and expected["skipped"] == [], expected
    run = Path(shutil.copytree(TRAINER_RUN, tmp_path / "run"))
    corrupt_pages(run / part)
    code, stderr, report = _diagnose_loaded_or_lazy(run, lazy)
    assert code == 6, stderr
    assert stderr.count(str(run / part)) == 1, stderr
    (said,) = report["skipped"]  # and no analyzer failed on it
    assert said.startswith(f"{run / part}: cannot read Parquet data (Couldn't deserialize thrift: "), said
    assert said.endswith("its footer reads but its data is corrupt: re-run collect for this host or delete the file")
    for key in ("findings", "notes", "summary"):
        assert report[key] == expected[key], key


def test_a_corrupt_part_of_a_lazy_timeline_leaves_the_straggler_on_the_other_hosts_found(tmp_path: Path) -> None:
    # A collected dataset's timeline over 4 hosts, read by DuckDB as a big one is; node01's part is corrupt.
    t = make_timeline(ranks=8, slow_rank=3, factor=1.7, phase="backward")  # rank 3 is on node02
    run, without = tmp_path / "run", tmp_path / "without"
    by_host = {h: t.filter(pc.equal(t["host"], h)) for h in sorted(set(t["host"].to_pylist()))}
    bad = dataset.write_table(run, SignalKind.TIMELINE, "node01", by_host.pop("node01"))
    for h, part in by_host.items():  # the other hosts' parts, in both
        for root in (run, without):
            dataset.write_table(root, SignalKind.TIMELINE, h, part)
    corrupt_pages(bad)
    _, _, expected = _diagnose_loaded_or_lazy(without, lazy=True)
    assert [(f["kind"], f["ranks"], f["hosts"]) for f in expected["findings"]] == [("straggler", [3], ["node02"])]
    code, stderr, report = _diagnose_loaded_or_lazy(run, lazy=True)
    assert code == 6 and stderr.count(str(bad)) == 1, stderr
    assert [s.split(": cannot read Parquet data")[0] for s in report["skipped"]] == [str(bad)]
    for key in ("findings", "notes", "summary"):
        assert report[key] == expected[key], key


@pytest.mark.parametrize(
    "lazy, break_", [(False, "torn"), (False, "corrupt"), (True, "corrupt")], ids=["torn", "corrupt", "corrupt-lazy"]
)
def test_a_dataset_whose_every_part_is_unreadable_says_so_not_did_the_run_start(
    tmp_path: Path, lazy: bool, break_: str
) -> None:
    data = tmp_path / "dataset"  # a collected dataset holding only gpu_metrics, its 3 parts all broken
    shutil.copytree(TRAINER_RUN / "gpu_metrics", data / "gpu_metrics")
    parts = sorted(data.glob("gpu_metrics/host=node01/*.parquet"))
    for part in parts:
        if break_ == "torn":
            part.write_bytes(b"PAR1 torn")
        else:
            corrupt_pages(part)
    proc = _diagnose_as(data, lazy)
    assert proc.returncode == 1 and proc.stdout == "", proc
    *warnings, error = [line for line in proc.stderr.splitlines() if line.strip()]
    assert [w.split()[1] for w in warnings] == [f"{p}:" for p in parts]  # each said once, by name
    assert error == _nothing_left(data, parts)


def _nothing_left(data: Path, parts: list[Path]) -> str:
    names = ", ".join(str(p.relative_to(data)) for p in parts)
    return (
        f"error: {data}: nothing left to read: all 3 of its Parquet files could not be read ({names}; said above: "
        "torn or corrupt) and it holds no dumps or logs; re-run trainctl collect and run this command again on the "
        "new copy"
    )


@pytest.mark.parametrize("command", ["report", "export", "compare"])
def test_a_run_whose_every_part_is_unreadable_is_the_same_error_under_every_command(
    tmp_path: Path, command: str
) -> None:
    # The fix it names is the command the user ran, not diagnose (which it said under report, export and compare).
    data = tmp_path / "dataset"
    shutil.copytree(TRAINER_RUN / "gpu_metrics", data / "gpu_metrics")
    parts = sorted(data.glob("gpu_metrics/host=node01/*.parquet"))
    for part in parts:
        part.write_bytes(b"PAR1 torn")
    args = {"report": [], "export": ["--perfetto", tmp_path / "trace.json"], "compare": [data]}[command]
    proc = trainctl(command, data, *args, lazy=False)
    assert proc.returncode == 1 and proc.stdout == "", proc
    assert proc.stderr.splitlines()[-1] == _nothing_left(data, parts), proc.stderr
    assert not (tmp_path / "trace.json").exists() and not (data / "report.html").exists()


@pytest.mark.parametrize("command", ["diagnose", "report"])
def test_an_analyzer_warning_is_said_once_when_a_corrupt_lazy_part_makes_the_analysis_run_again(
    tmp_path: Path, command: str
) -> None:
    # The straggler analysis warns of (rank, phase, window) groups with tokens on only some rows; the faulty-host
    # analysis then fails on the corrupt gpu_metrics part, which is left out, and every analyzer runs again.
    data = tmp_path / "dataset"
    t = make_timeline(ranks=4, per_host=2, tokens=lambda rng, ranks, steps: rng.integers(2048, 8192, (ranks, steps)))
    rank0_even_steps = pc.and_(pc.equal(t["rank"], 0), pc.equal(pc.bit_wise_and(t["step"], 1), 0))
    tokens = pc.if_else(rank0_even_steps, pa.scalar(None, t["tokens"].type), t["tokens"])
    t = t.set_column(t.schema.get_field_index("tokens"), "tokens", tokens)
    for host in sorted(set(t["host"].to_pylist())):
        dataset.write_table(data, SignalKind.TIMELINE, host, t.filter(pc.equal(t["host"], host)))
    shutil.copytree(TRAINER_RUN / "gpu_metrics", data / "gpu_metrics")
    part = data / "gpu_metrics" / "host=node01" / "part-agent-497-000001.parquet"
    corrupt_pages(part)
    r = trainctl(command, data, *(["--json"] if command == "diagnose" else []))
    assert r.returncode == 6, r.stderr  # done, but a part was skipped: under every command that reads a run
    # And listed once among the skipped inputs, the page's or the JSON's: read_path's once-only filter lets the
    # warning said in both passes through once, and nothing after it de-duplicates (with the filter off, twice).
    if command == "diagnose":
        listed = json.loads(r.stdout)["skipped"]
    else:
        listed = re.findall(r"<p class='warning'>skipped: ([^<]*)</p>", (data / "report.html").read_text())
    assert [s for s in listed if "groups have tokens on only some rows" in s] == [
        "timeline: 30 (rank, phase, window) groups have tokens on only some rows; skipped"
    ], listed
    assert r.stderr.count(f"{part}: cannot read Parquet data") == 1, r.stderr
    assert r.stderr.count("timeline: 30 (rank, phase, window) groups have tokens on only some rows; skipped") == 1, (
        r.stderr
    )
