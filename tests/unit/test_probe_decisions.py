"""The probe's pure decisions: bandwidth as nccl-tests defines it, the size sweep, and judging
groups against the fleet's median (so a slow host, a slow link and healthy noise are told apart)."""

from __future__ import annotations

import pytest

from trainctl.runtime.probe import (
    MIB,
    bandwidth_gbps,
    pair_baseline_s,
    pair_suspects,
    size_sweep,
    slow_groups,
    slow_links,
)

H = [f"node0{i}" for i in range(1, 9)]


def ring(times: dict[int, float], n: int, fast: float = 0.05) -> dict[tuple[str, str], float]:
    """Ring pairs (i, i+1) of n hosts, `fast` unless given in `times` by the pair's first index."""
    return {(H[i], H[(i + 1) % n]): times.get(i, fast) for i in range(n)}


def test_bandwidth_follows_nccl_tests_definitions() -> None:
    # 64 MiB all-reduce over 8 ranks in 10 ms: algbw = S/t, busbw = algbw x 2(n-1)/n.
    algbw, busbw = bandwidth_gbps("all_reduce", 64 * MIB, 0.010, 8)
    assert algbw == pytest.approx(64 * MIB / 0.010 / 1e9)
    assert busbw == pytest.approx(algbw * 2 * 7 / 8)
    # all-to-all: x (n-1)/n; one rank moves nothing.
    assert bandwidth_gbps("all_to_all", MIB, 0.001, 4)[1] == pytest.approx(MIB / 0.001 / 1e9 * 3 / 4)
    assert bandwidth_gbps("all_reduce", MIB, 0.001, 1)[1] == 0.0


def test_size_sweep_reaches_the_largest_size() -> None:
    assert size_sweep(64 * MIB) == [MIB, 8 * MIB, 64 * MIB]
    assert size_sweep(100 * MIB) == [MIB, 8 * MIB, 64 * MIB, 100 * MIB]
    assert size_sweep(MIB) == [MIB]
    assert size_sweep(4096) == [4096]


def test_a_bad_host_is_blamed_even_when_half_the_pairs_hold_it() -> None:
    # 4 hosts: node03 is in 2 of the 4 ring pairs, so the median pair is slow; the median over
    # hosts of each host's best pair is not.
    pairs = ring({1: 1.05, 2: 1.05}, 4)
    assert pair_baseline_s(pairs) == pytest.approx(0.05)
    involved, blamed = pair_suspects(pairs)
    assert blamed == {"node03"} and slow_links(pairs) == set() and involved == {"node02", "node03", "node04"}


def test_a_slow_link_is_not_a_slow_host() -> None:
    # node01<->node02 slow; both are fast with their other neighbour.
    pairs = ring({0: 1.0}, 4)
    involved, blamed = pair_suspects(pairs)
    assert blamed == set() and slow_links(pairs) == {("node01", "node02")} and involved == {"node01", "node02"}
    # With 8 hosts, a bad host and a slow link elsewhere are told apart.
    pairs = ring({2: 1.0, 3: 1.0, 6: 0.9}, 8)
    assert pair_suspects(pairs)[1] == {"node04"} and slow_links(pairs) == {("node07", "node08")}


def test_healthy_spread_blames_nobody() -> None:
    # Every pair within 2x of the rest, or within the absolute floor: noise, not a fault.
    pairs = ring({0: 0.09, 3: 0.3}, 6)
    assert pair_suspects(pairs)[1] == set() and slow_links(pairs) == set()


def test_intra_host_groups_are_judged_against_the_median_not_the_fastest() -> None:
    # One unusually fast host must not make every normal host "slow" (the fastest-group baseline did).
    times = {"node01": 0.01, "node02": 0.5, "node03": 0.5, "node04": 0.52, "node05": 0.5}
    assert slow_groups(times) == set()
    assert slow_groups({**times, "node05": 1.6}) == {"node05"}
