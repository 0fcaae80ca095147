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


def test_probe_tells_a_slow_link_from_a_slow_host(tmp_path) -> None:
    # node01<->node02 is slow only when those two talk; each is fast with its other neighbour.
    v = run_local_probe(
        HOSTS, slow_link=("node01", "node02"), slow_delay_s=0.2, iters=5, workdir=tmp_path, timeout_s=200
    )
    assert v.slow_links == ("node01|node02",)
    assert v.slow_hosts == () and v.pair_blamed == () and v.bisection == ()
    assert "slow link(s) node01<->node02" in v.summary()
    # busbw per group and size, as nccl-tests defines it; the slow link's is the lowest.
    largest = str(v.sizes_bytes[-1])
    bw = {k: d[largest] for k, d in v.busbw_gbps.items() if "|" in k}
    assert min(bw, key=bw.get) == "node01|node02"
