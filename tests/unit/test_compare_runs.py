"""`trainctl compare`: two runs' step times by phase, hosts and findings (analyzers/compare.py, pure)."""

from __future__ import annotations

import pyarrow as pa
import pytest

from trainctl.analyzers.compare import ChangeStatus, compare_runs, phase_stats
from trainctl.findings import Category, Finding, FindingKind, Severity
from trainctl.rundir import HostRanks, RunInfo
from trainctl.schemas import SignalKind
from trainctl.signals import Signals


def _timeline(forward_ms: dict[int, float], steps: int = 30) -> pa.Table:
    rows = {"rank": [], "step": [], "phase": [], "duration_ns": []}
    for rank, ms in forward_ms.items():
        for step in range(steps):
            for phase, v in (("forward", ms), ("step", ms + 5.0)):
                rows["rank"].append(rank)
                rows["step"].append(step)
                rows["phase"].append(phase)
                rows["duration_ns"].append(int(v * 1e6))
    return pa.table(rows)


def _run(hosts: list[str], forward_ms: dict[int, float]) -> Signals:
    per = len(forward_ms) // len(hosts)
    info = RunInfo(
        "r",
        len(forward_ms),
        per,
        tuple(HostRanks(h, tuple(range(i * per, (i + 1) * per))) for i, h in enumerate(hosts)),
    )
    return Signals(info, {SignalKind.TIMELINE: _timeline(forward_ms)})


def _straggler(rank: int, host: str, sev: Severity) -> Finding:
    return Finding(FindingKind.STRAGGLER, sev, f"rank {rank} slow", Category.COMPUTE, (host,), (rank,), 0.9)


def test_phase_change_hosts_and_finding_status() -> None:
    a = _run(["n1", "n2"], {0: 10.0, 1: 10.0, 2: 10.0, 3: 10.0})
    b = _run(["n1", "n3"], {0: 12.0, 1: 12.0, 2: 12.0, 3: 24.0})
    fa = [_straggler(3, "n2", Severity.WARNING), _straggler(1, "n1", Severity.WARNING)]
    fb = [
        _straggler(3, "n2", Severity.CRITICAL),
        Finding(FindingKind.FAULTY_HOST, Severity.CRITICAL, "xid 79", Category.GPU_LOST, ("n3",)),
    ]
    c = compare_runs(a, fa, b, fb)
    phases = {p.phase: p for p in c.phases}
    assert [p.phase for p in c.phases][0] == "step"  # the whole step leads
    fwd = phases["forward"]
    assert (fwd.a_median_ms, fwd.b_median_ms, fwd.median_change_pct) == (10.0, 12.0, 20.0)
    assert fwd.b_p90_ms == pytest.approx(24.0) and fwd.a_steps == fwd.b_steps == 30
    assert (c.hosts_only_a, c.hosts_only_b, c.hosts_both) == (("n2",), ("n3",), ("n1",))
    got = {(f.status, f.kind, f.ranks, f.a_severity, f.severity) for f in c.findings}
    assert got == {
        (ChangeStatus.NEW, "faulty_host", (), None, "critical"),
        (ChangeStatus.PERSISTS, "straggler", (3,), "warning", "critical"),
        (ChangeStatus.RESOLVED, "straggler", (1,), "warning", "warning"),
    }
    assert [f.status for f in c.findings] == [ChangeStatus.NEW, ChangeStatus.PERSISTS, ChangeStatus.RESOLVED]
    assert c.to_dict()["findings"][0]["status"] == "new"


def test_runs_without_timeline_or_findings_compare_empty() -> None:
    empty = Signals(None, {})
    c = compare_runs(empty, [], empty, [])
    assert c.phases == () and c.findings == () and c.hosts_both == ()
    assert phase_stats(None) == {}
    # a phase only one run has: no change is claimed
    b = _run(["n1"], {0: 5.0})
    c = compare_runs(empty, [], b, [])
    assert {p.phase: p.median_change_pct for p in c.phases} == {"step": None, "forward": None}


def test_a_straggler_of_a_against_a_b_that_could_not_judge_one_is_not_resolved() -> None:
    a = _run(["n1", "n2"], {0: 10.0, 1: 10.0, 2: 10.0, 3: 20.0})
    no_timeline = Signals(a.run, {})
    c = compare_runs(
        a, [_straggler(3, "n2", Severity.WARNING)], no_timeline, [], b_not_judged=frozenset({FindingKind.STRAGGLER})
    )
    assert [(f.status, f.kind) for f in c.findings] == [(ChangeStatus.NOT_JUDGED, "straggler")]
    assert c.to_dict()["findings"][0]["status"] == "not judged in B"


def test_compare_reads_b_without_a_timeline_as_not_judged_and_refuses_a_log(cli, tmp_path) -> None:
    import json
    import shutil
    from pathlib import Path

    from trainctl.ops.diagnose import compare as ops_compare
    from trainctl.ops.diagnose.diagnosis import load_signals

    run = Path(__file__).parents[1] / "fixtures" / "gpu_h100" / "trainer_run"
    b = Path(shutil.copytree(run, tmp_path / "b"))
    shutil.rmtree(b / "timeline")
    analysis_b = ops_compare.run_analysis(load_signals(b))
    assert ops_compare._not_judged(analysis_b) == frozenset({FindingKind.STRAGGLER})
    log = tmp_path / "train.log"
    log.write_text("RuntimeError: CUDA error: an illegal memory access was encountered\n")
    r = cli("compare", run, log, "--json")
    assert r.code == 1 and "Traceback" not in r.stderr
    assert f"{log}: log file, not a run; compare takes two runs" in " ".join(r.stderr.split()), r.stderr
    ok = cli("compare", run, b, "--json")
    assert ok.code == 0 and json.loads(ok.stdout)["findings"] == [], ok


def test_a_corrupt_part_of_a_lazy_table_is_skipped_and_said_and_the_rest_compared(tmp_path) -> None:
    # Every table lazy, as a big run's timeline is: the corrupt parts are met as the analyzers and the phase
    # statistics read them, not as the tables load. A's gpu_metrics part and B's only timeline part are corrupt.
    import json
    import shutil
    from pathlib import Path

    from broken_parquet import corrupt_pages, trainctl

    run = Path(__file__).parents[1] / "fixtures" / "gpu_h100" / "trainer_run"
    bad = {
        "a": "gpu_metrics/host=node01/part-agent-497-000001.parquet",
        "b": "timeline/host=node01/part-rank0-00000.parquet",
    }
    broken, without = tmp_path / "broken", tmp_path / "without"
    for side, part in bad.items():
        shutil.copytree(run, broken / side)
        shutil.copytree(run, without / side)
        corrupt_pages(broken / side / part)
        (without / side / part).unlink()
    expected = trainctl("compare", without / "a", without / "b", "--json")
    assert expected.returncode == 0 and expected.stderr == "", expected
    r = trainctl("compare", broken / "a", broken / "b", "--json")
    assert r.returncode == 6, r.stderr  # compared, but parts were skipped
    for side, part in bad.items():
        assert r.stderr.count(str(broken / side / part)) == 1, r.stderr
    assert r.stderr.count("cannot read Parquet data") == 2, r.stderr
    got, want = json.loads(r.stdout), json.loads(expected.stdout)
    assert {k: v for k, v in got.items() if k not in ("a", "b", "skipped")} == {
        k: v for k, v in want.items() if k not in ("a", "b", "skipped")
    }
    # The JSON lists both parts it left out, one line each, as it said them; the comparison without them lists none.
    assert want["skipped"] == [] and len(got["skipped"]) == 2, got["skipped"]
    for side, part in bad.items():
        assert sum(str(broken / side / part) in line for line in got["skipped"]) == 1, got["skipped"]
    assert [p["phase"] for p in got["phases"]][:1] == ["step"] and got["phases"][0]["b_steps"] == 0  # A's timeline read


def test_a_run_that_is_not_there_is_said_as_compare_takes_it(cli, tmp_path) -> None:
    """`compare A NOPE` said '...; pass a run dir, a collected dataset, a Flight Recorder dump dir or a log file',
    two of which compare then refuses."""
    line = cli("compare", tmp_path / "nope", tmp_path).error_line()
    assert line.startswith(f"error: {tmp_path / 'nope'}: no such file or directory"), line
    assert "log file" not in line and "run dirs or collected datasets" in line, line
