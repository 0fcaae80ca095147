"""`trainctl compare A B` on two real local runs (torchrun + gloo, the reference trainer): a clean run
against the same run with a compute straggler injected on rank 1."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from trainctl.exit_codes import ExitCode

pytestmark = pytest.mark.slow


@pytest.mark.timeout(300)
def test_compare_a_clean_run_with_a_straggler_run(cli, tmp_path: Path) -> None:
    runs = {}
    for name, inject in (("a", None), ("b", "straggler:rank=1,factor=3.0")):
        run = tmp_path / name
        args = ["launch", "--local", "--hosts-local", "2", "--nproc-per-node", "1", "--run-dir", run]
        args += ["--inject", inject] if inject else []
        r = cli(*args, "--", "--steps", "30")
        assert r.code == ExitCode.OK, r.stderr
        runs[name] = run
    r = cli("compare", runs["a"], runs["b"], "--json")
    assert r.code == 0, r.stderr
    doc = json.loads(r.stdout)
    phases = {p["phase"]: p for p in doc["phases"]}
    assert phases["step"]["a_steps"] == phases["step"]["b_steps"] == 30
    # rank 1 of 2 runs its forward 3x slower: B's p90 forward time is well above A's
    assert phases["forward"]["b_p90_ms"] > 1.5 * phases["forward"]["a_p90_ms"], phases["forward"]
    assert doc["hosts_both"] == ["node01", "node02"] and doc["hosts_only_a"] == doc["hosts_only_b"] == []
    slow = [f for f in doc["findings"] if f["kind"] == "straggler" and f["ranks"] == [1]]
    assert slow and slow[0]["status"] in ("new", "persists") and slow[0]["severity"] == "critical", doc["findings"]
    # the table form renders the same comparison for a person
    t = cli("compare", runs["a"], runs["b"])
    assert t.code == 0 and "forward" in t.stdout and "straggler" in t.stdout, t.stdout
    # a bad path is one line naming it, no traceback
    bad = cli("compare", runs["a"], tmp_path / "missing")
    assert bad.code != 0 and "missing" in bad.stderr and "Traceback" not in bad.stderr
