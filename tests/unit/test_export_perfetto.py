"""`trainctl export --perfetto`: Trace Event Format JSON with one track per rank, grouped by host
(issue 17 item 2). Perfetto's trace processor downloads its binary at first use, which this machine
cannot; the test checks the format's rules (ph, ts/dur in us, pid/tid, metadata names) itself."""

from __future__ import annotations

import json

import pyarrow.compute as pc
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


def test_nothing_to_draw_is_an_error_not_a_blank_trace(cli, tmp_path) -> None:
    log = tmp_path / "train.log"
    log.write_text("step 1 loss 2.31\n")
    out = tmp_path / "trace.json"
    r = cli("export", log, "--perfetto", out)
    assert r.code == 1 and "Traceback" not in r.stderr
    assert f"{log}: nothing to draw" in r.stderr, r.stderr
    assert not out.exists()
