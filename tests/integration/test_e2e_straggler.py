"""Issue 2, end to end on real processes (torchrun, gloo, 4 ranks): launch, then diagnose.

- an unmodified DDP script (no trainctl import) whose rank's input pipeline (its DataLoader's
  collate) sleeps about 25% of a step every step is named as a `data` straggler, on its host;
- a clean run of the same script, and a clean reference-trainer run, have no straggler;
- the reference trainer with `--inject straggler:rank=2,factor=1.5` (`trainctl demo`) is named
  as a compute straggler, rank 2 on node02.

Every rank's input pipeline reads for IO_S per batch (a sleep, like storage latency), so steps are
long enough to compare without burning the shared CPUs; the slow rank reads SLOW_S longer.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from trainctl.rundir import read_run_info

pytestmark = pytest.mark.slow
SCRIPT = Path(__file__).resolve().parents[1] / "fixtures" / "runtime" / "ddp_train.py"
STEPS = "40"
IO_S, SLOW_S = 0.04, 0.015  # a step is ~IO_S + SLOW_S + a few ms of compute: SLOW_S is ~25% of it
REF_STEPS = "80"  # the demo's default; 8-step windows: a few preempted steps cannot fill a window on a busy machine

_runs: dict[str, tuple[Path, str]] = {}


def _launched(cli, tmp_path_factory, name: str, *args: str) -> tuple[Path, str]:
    """Launch once per module (several tests read the same run)."""
    if name not in _runs:
        run = tmp_path_factory.mktemp(name) / "run"
        r = cli(
            "launch", "--local", *args[: args.index("--")], "--run-dir", run, *args[args.index("--") :], timeout=150
        )
        assert r.code == 0, r.stderr[-3000:]
        _runs[name] = (run, r.stderr)
    return _runs[name]


def _stragglers(cli, run: Path) -> list[dict]:
    res = cli("diagnose", run, "--json", "--fail-on", "never")
    assert res.code == 0, res.stderr
    return [f for f in json.loads(res.stdout)["findings"] if f["kind"] == "straggler"]


def _assert_none(stragglers: list[dict]) -> None:
    """A clean run has no straggler; if one is named, the whole finding (its windows, its slowdown) is printed:
    these runs share 2 CPUs, and a spurious one seen twice in full-suite runs on 2026-11-27 left only its head."""
    assert stragglers == [], json.dumps(stragglers, indent=1, default=str)[:6000]


def _script_args(*extra: str) -> tuple[str, ...]:
    return ("--", str(SCRIPT), "--steps", STEPS, "--io-s", str(IO_S), *extra)


@pytest.mark.timeout(150)
def test_plain_ddp_script_slow_input_pipeline_is_a_data_straggler(cli, tmp_path_factory) -> None:
    assert "trainctl" not in SCRIPT.read_text().replace("no trainctl import", "")
    run, _ = _launched(
        cli,
        tmp_path_factory,
        "script-slow",
        "--nproc-per-node",
        "4",
        *_script_args("--slow-data-rank", "1", "--slow-data-s", str(SLOW_S)),
    )
    fs = _stragglers(cli, run)
    assert [(f["ranks"], f["hosts"]) for f in fs] == [([1], ["node01"])], fs
    f = fs[0]
    # The extra time is in the DataLoader (timed by the shim), so the category is data, not compute.
    assert f["category"] == "data" and f["evidence"]["phase"] == "data"
    # 40 ms + 15 ms vs 40 ms: about 1.37x
    assert 1.2 <= f["evidence"]["slowdown"] <= 1.7, f["evidence"]
    assert "rank 1 on node01" in f["summary"]


@pytest.mark.timeout(150)
def test_clean_plain_ddp_script_on_two_simulated_hosts_has_no_straggler(cli, tmp_path_factory) -> None:
    run, _ = _launched(
        cli, tmp_path_factory, "script-clean", "--hosts-local", "2", "--nproc-per-node", "2", *_script_args()
    )
    assert [h.host for h in read_run_info(run).hosts] == ["node01", "node02"]
    _assert_none(_stragglers(cli, run))


@pytest.mark.timeout(150)
def test_clean_reference_trainer_has_no_straggler(cli, tmp_path_factory) -> None:
    run, _ = _launched(
        cli, tmp_path_factory, "ref-clean", "--hosts-local", "2", "--nproc-per-node", "2", "--", "--steps", REF_STEPS
    )
    _assert_none(_stragglers(cli, run))


@pytest.mark.timeout(150)
def test_demo_reports_the_injected_straggler_rank_and_host(cli, tmp_path) -> None:
    run = tmp_path / "demo"
    res = cli("demo", "--run-dir", run, env={**os.environ, "COLUMNS": "200"}, timeout=150)
    assert res.code == 0, res.stderr[-3000:]
    assert "--inject straggler:rank=2,factor=1.5" in res.stderr
    # The report (stdout) names the straggler's rank and host.
    rows = [line for line in res.stdout.splitlines() if "straggler" in line and "rank " in line]
    assert len(rows) == 1 and "rank 2 on node02" in rows[0], res.stdout
    fs = _stragglers(cli, run)
    assert [(f["ranks"], f["hosts"], f["category"]) for f in fs] == [([2], ["node02"], "compute")], fs
    assert fs[0]["evidence"]["phase"] == "forward"
    assert 1.3 <= fs[0]["evidence"]["phases"]["forward"]["slowdown"] <= 1.8, fs[0]["evidence"]
