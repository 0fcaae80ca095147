"""`trainctl export --perfetto`: Trace Event Format JSON with one track per rank, grouped by host
(issue 17 item 2). Perfetto's trace processor downloads its binary at first use, which this machine
cannot; the test checks the format's rules (ph, ts/dur in us, pid/tid, metadata names) itself."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pyarrow.compute as pc
from broken_parquet import corrupt_pages, trainctl
from straggler_timelines import make_timeline

from trainctl import dataset
from trainctl.rundir import HostRanks, RunInfo, write_run_info
from trainctl.schemas import SignalKind


def test_one_track_per_rank_by_host_with_phases_and_findings(cli, tmp_path) -> None:
    t = make_timeline(ranks=4, per_host=2, steps=60, slow_rank=3, factor=2.0, phase="forward")
    hosts = sorted(set(t["host"].to_pylist()))
    for h in hosts:
        dataset.write_table(tmp_path / "run", SignalKind.TIMELINE, h, t.filter(pc.equal(t["host"], h)), part="p")
    write_run_info(
        tmp_path / "run", RunInfo("r", 4, 2, tuple(HostRanks(h, (2 * i, 2 * i + 1)) for i, h in enumerate(hosts)))
    )
    r = cli("export", tmp_path / "run", "--perfetto", tmp_path / "trace.json")
    assert r.code == 0, r.stderr
    doc = json.loads((tmp_path / "trace.json").read_text())
    ev = doc["traceEvents"]
    procs = {e["pid"]: e["args"]["name"] for e in ev if e["ph"] == "M" and e["name"] == "process_name"}
    threads = {(e["pid"], e["tid"]): e["args"]["name"] for e in ev if e["ph"] == "M" and e["name"] == "thread_name"}
    assert sorted(procs.values()) == hosts
    assert sorted(threads.values()) == [f"rank {r}" for r in range(4)]  # one track per rank
    for p, tid in threads:  # each rank's track sits under its own host
        assert procs[p] == hosts[tid // 2]
    slices = [e for e in ev if e["ph"] == "X"]
    assert len(slices) == t.num_rows and all(e["dur"] >= 0 and isinstance(e["ts"], float) for e in slices)
    assert {e["name"] for e in slices} == set(t["phase"].to_pylist())
    marks = [e for e in ev if e["ph"] == "i" and e.get("s") == "g"]
    assert any("straggler" in e["name"] and e["args"]["ranks"] == [3] for e in marks)
    assert doc["metadata"]["events"] == len(ev)


def test_a_corrupt_part_of_a_lazy_table_is_skipped_and_said_and_the_rest_drawn(tmp_path) -> None:
    # A run dir's tables left lazy, as a big one is: the corrupt gpu_metrics part is met as the analysis and the
    # trace stream it. The trace is the one of the run without that part, and the part is said once.
    fixture = Path(__file__).parents[1] / "fixtures" / "gpu_h100" / "trainer_run"
    part = "gpu_metrics/host=node01/part-agent-497-000001.parquet"
    run, without = (
        Path(shutil.copytree(fixture, tmp_path / "run")),
        Path(shutil.copytree(fixture, tmp_path / "without")),
    )
    corrupt_pages(run / part)
    (without / part).unlink()
    expected = trainctl("export", without, "--perfetto", tmp_path / "expected.json")
    assert expected.returncode == 0, expected.stderr
    r = trainctl("export", run, "--perfetto", tmp_path / "trace.json")
    assert r.returncode == 6 and r.stdout == f"{tmp_path / 'trace.json'}\n", r  # written, but a part was skipped
    assert r.stderr.count(str(run / part)) == 1 and "cannot read Parquet data" in r.stderr, r.stderr
    doc = json.loads((tmp_path / "trace.json").read_text())
    assert doc == json.loads((tmp_path / "expected.json").read_text())
    assert any(e["ph"] == "C" for e in doc["traceEvents"])  # the other parts' GPU counters are drawn
    # A trace that cannot be written is said as such, not as tables that could not be read.
    r = trainctl("export", run, "--perfetto", tmp_path / "no-such-folder" / "trace.json")
    assert r.returncode == 1 and r.stderr.splitlines()[-1] == (
        f"error: {tmp_path / 'no-such-folder' / 'trace.json'}: No such file or directory; check the path, its folder "
        "and its permissions (-vv: traceback)"
    ), r.stderr


def test_nothing_to_draw_is_an_error_not_a_blank_trace(cli, tmp_path) -> None:
    log = tmp_path / "train.log"
    log.write_text("config: run.yaml\nseed: 1234\n")  # no failure and no run at work: no finding, no timeline
    out = tmp_path / "trace.json"
    r = cli("export", log, "--perfetto", out)
    assert r.code == 1 and "Traceback" not in r.stderr
    assert f"{log}: nothing to draw" in r.stderr, r.stderr
    assert not out.exists()
