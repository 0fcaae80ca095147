"""The collective self-test with real torchrun agents (one per simulated host) on gloo."""

from __future__ import annotations

import pytest

from trainctl.runtime.probe import run_local_probe

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]
HOSTS = ["node01", "node02", "node03", "node04"]


def test_probe_names_the_host_made_slow_on_purpose(tmp_path) -> None:
    v = run_local_probe(HOSTS, slow_host="node03", slow_delay_s=0.2, iters=5, workdir=tmp_path, timeout_s=200)
    assert v.slow_hosts == ("node03",) and v.failing_hosts == ()
    assert v.pair_blamed == ("node03",)  # both of node03's neighbour pairs were slow
    assert [r["slow"] for r in v.bisection] == [[["node02", "node03"]], [["node03"]]]
    assert v.intra_host_s["node03"] >= 5 * 0.2  # the injected sleeps are real


def test_probe_on_a_clean_set_names_nobody(tmp_path) -> None:
    v = run_local_probe(HOSTS, iters=5, workdir=tmp_path, timeout_s=200)
    assert v.slow_hosts == () and v.failing_hosts == () and v.bisection == ()
    assert sorted(v.pair_s) == ["node01|node02", "node02|node03", "node03|node04", "node04|node01"]
