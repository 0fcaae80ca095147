"""The faulty-host judgement on hand-built fleets: healthy variance blames nobody; hard signals get
the category their meaning says, name the value (a power limit in W, a link's width) and blame only
the host the evidence came from.

Tables are built here with numpy (no simulator), so each test states exactly what the fleet does.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime

import numpy as np
import pyarrow as pa
import pytest

from trainctl.analyzers.consolidate import consolidate
from trainctl.analyzers.faulty_hosts import find_faulty_hosts
from trainctl.findings import Category
from trainctl.nvml_codes import GPU_IDLE, HW_POWER_BRAKE, HW_SLOWDOWN, HW_THERMAL, SW_POWER_CAP, SW_THERMAL

T0 = 1_800_000_000 * 10**9
H100 = "NVIDIA H100 80GB HBM3"
A100 = "NVIDIA A100-SXM4-80GB"


@dataclass
class Fleet:
    """hosts x gpus x seconds of a synchronous job: 30 s idle, then training at ~95% util."""

    hosts: int = 12
    gpus: int = 4
    seconds: int = 480
    seed: int = 0
    names: list[str] = field(init=False)

    def __post_init__(self) -> None:
        H, G, T = self.hosts, self.gpus, self.seconds
        rng = np.random.default_rng(self.seed)
        self.names = [f"h{i:02d}" for i in range(H)]
        t = np.arange(T)
        self.busy = np.broadcast_to(t >= 30, (H, G, T)).copy()
        self.util = np.where(self.busy, 95 + rng.normal(0, 1.5, (H, G, T)), 0.0)
        self.power = np.where(self.busy, 560 + rng.normal(0, 12, (H, G, T)), 70.0)
        self.clock = np.where(self.busy, 1900 + rng.normal(0, 10, (H, G, T)), 345.0)
        self.temp = np.where(self.busy, 62 + rng.normal(0, 1, (H, G, T)), 35.0)
        self.limit = np.full((H, G, T), 700.0)
        self.default = np.full((H, G), 700.0)
        self.sku = np.full(H, H100, object)
        self.gen = np.where(self.busy, 5, 1).astype(np.int8)  # idle links train down (ASPM)
        self.width = np.full((H, G, T), 16, np.int8)
        self.crc = np.zeros((H, G, T), np.int64)
        self.sbe = np.zeros((H, G, T), np.int64)
        self.replays = np.zeros((H, G, T), np.int64)
        self.throttle = np.where(self.busy, SW_POWER_CAP, GPU_IDLE).astype(np.uint64)
        self.xid = np.full((H, G, T), -1, np.int32)
        self.cpu = np.where(t[None, :] >= 30, 30 + rng.normal(0, 3, (H, T)), 5.0)

    def h(self, name: str) -> int:
        return self.names.index(name)

    def gpu_table(self, every_s: int = 1, drop: tuple[str, ...] = ()) -> pa.Table:
        """One row per GPU every `every_s` seconds; `drop`: columns an exporter does not report."""
        H, G, T = self.util.shape
        hh, gg, tt = (a.ravel() for a in np.meshgrid(np.arange(H), np.arange(G), np.arange(T), indexing="ij"))
        keep = tt % every_s == 0
        hh, gg, tt = hh[keep], gg[keep], tt[keep]
        x = self.xid[hh, gg, tt]
        t = pa.table(
            {
                "ts": pa.array(T0 + tt * 10**9 + hh * 10**7, pa.timestamp("ns", tz="UTC")),
                "gpu": pa.array(gg.astype(np.int16)),
                "gpu_name": pa.array(self.sku[hh].tolist()),
                "sm_util_pct": pa.array(self.util[hh, gg, tt].astype(np.float32)),
                "power_w": pa.array(self.power[hh, gg, tt].astype(np.float32)),
                "power_limit_w": pa.array(self.limit[hh, gg, tt].astype(np.float32)),
                "power_limit_default_w": pa.array(self.default[hh, gg].astype(np.float32)),
                "temp_c": pa.array(self.temp[hh, gg, tt].astype(np.float32)),
                "temp_slowdown_c": pa.array(np.full(len(hh), 87.0, np.float32)),
                "sm_clock_mhz": pa.array(self.clock[hh, gg, tt].astype(np.int32)),
                "pcie_link_gen": pa.array(self.gen[hh, gg, tt]),
                "pcie_link_gen_max": pa.array(np.full(len(hh), 5, np.int8)),
                "pcie_link_width": pa.array(self.width[hh, gg, tt]),
                "pcie_link_width_max": pa.array(np.full(len(hh), 16, np.int8)),
                "pcie_replay_errors_total": pa.array(self.replays[hh, gg, tt]),
                "ecc_sbe_volatile": pa.array(self.sbe[hh, gg, tt]),
                "nvlink_crc_errors_total": pa.array(self.crc[hh, gg, tt]),
                "throttle_reasons": pa.array(self.throttle[hh, gg, tt], pa.uint64()),
                "xid": pa.array(x, pa.int32(), mask=x < 0),
                "host": pa.array([self.names[i] for i in hh]),
            }
        )
        return t.drop_columns(list(drop))

    def host_table(self, every_s: int = 1) -> pa.Table:
        H, T = self.cpu.shape
        hh, tt = (a.ravel() for a in np.meshgrid(np.arange(H), np.arange(T), indexing="ij"))
        keep = tt % every_s == 0
        hh, tt = hh[keep], tt[keep]
        return pa.table(
            {
                "ts": pa.array(T0 + tt * 10**9 + hh * 10**7, pa.timestamp("ns", tz="UTC")),
                "cpu_util_pct": pa.array(self.cpu[hh, tt].astype(np.float32)),
                "host": pa.array([self.names[i] for i in hh]),
            }
        )

    def findings(self, every_s: int = 1, drop: tuple[str, ...] = (), **kw):
        return find_faulty_hosts(self.gpu_table(every_s, drop), self.host_table(every_s), **kw)


def _hosts(findings) -> list[tuple[str, str]]:
    return sorted((f.hosts[0], f.category.value) for f in findings)


def test_healthy_variance_blames_nobody() -> None:
    """Per-GPU power tens of watts apart at equal load, clocks binned 150 MHz apart, a hot rack
    15 C warmer, a second SKU at its own power and clocks, idle links at gen 1, the SW power-cap
    bit at load, a steady data-loader CPU load on two hosts: all healthy."""
    f = Fleet(hosts=16, seed=1)
    rng = np.random.default_rng(7)
    f.power += np.where(f.busy, rng.normal(0, 25, (16, 4, 1)), 0)
    f.clock -= np.where(f.busy, rng.uniform(0, 150, (16, 4, 1)), 0)
    f.temp[8:12] += np.where(f.busy[8:12], 15.0, 5.0)
    for h in range(12, 16):  # four A100 hosts: 400 W parts at 1410 MHz
        f.sku[h] = A100
        f.default[h] = 400.0
        f.limit[h] = 400.0
        f.power[h] = np.where(f.busy[h], 330 + rng.normal(0, 8, f.power[h].shape), 60.0)
        f.clock[h] = np.where(f.busy[h], 1380 + rng.normal(0, 8, f.clock[h].shape), 210.0)
    f.cpu[:2] += np.where(f.cpu[:2] > 10, 18.0, 0.0)
    assert f.findings() == []


def test_lowered_power_limit_is_power_and_names_the_limit() -> None:
    f = Fleet()
    h = f.h("h05")
    f.limit[h, 2, 200:] = 450.0  # nvidia-smi -pl 450 on one GPU
    f.power[h, 2, 200:] = np.minimum(f.power[h, 2, 200:], 445.0)
    f.clock[h, 2, 200:] -= 250
    (fi,) = f.findings()
    assert (fi.hosts, fi.category) == (("h05",), Category.POWER)
    assert "450 W" in fi.summary and "700 W" in fi.summary
    ev = next(s for s in fi.evidence["signals"] if s.get("metric") == "power_limit_w")
    assert (ev["gpu"], ev["enforced_limit_w"], ev["default_limit_w"], ev["peer_usual_limit_w"]) == (
        2,
        450.0,
        700.0,
        700.0,
    )


def test_a_gpu_held_at_its_power_cap_below_its_peers_is_power_where_no_limit_is_reported() -> None:
    """No power_limit_w column (an exporter that does not report it): one GPU held at its power cap (SW power cap set)
    130 W below its peers at the same load runs under a lower limit than theirs: power, not a generic outlier or
    nothing. Healthy spread at the cap (tens of watts) and a capped pod of 4 hosts (site policy) name nobody."""
    f = Fleet(seed=2)
    rng = np.random.default_rng(5)
    f.power += np.where(f.busy, rng.normal(0, 25, (12, 4, 1)), 0)  # per-GPU spread at equal load
    assert f.findings(drop=("power_limit_w",)) == []
    f.power[f.h("h04"), 1, 200:] = 430 + rng.normal(0, 5, 280)  # capped lower from 200 s
    (fi,) = consolidate(f.findings(drop=("power_limit_w",)))  # the power reading names it, not the generic outlier
    assert (fi.hosts, fi.category) == (("h04",), Category.POWER)
    sig = fi.evidence["findings"][0]["evidence"]["signals"][0]
    assert sig["gpu"] == 1 and sig["power_w_median"] == pytest.approx(430, abs=10)
    assert sig["peer_power_w_median"] == pytest.approx(560, abs=15)
    pod = Fleet(seed=2)
    pod.power[:4] = np.where(pod.busy[:4], 430.0, 70.0)  # a pod of 4 hosts capped lower: policy
    assert pod.findings(drop=("power_limit_w",)) == []


def test_a_capped_gpu_drawing_less_than_uncapped_peers_is_power() -> None:
    """No power_limit_w column, peers running below their cap (no SW power-cap bit, as an A100 at ~280 W of 400 W
    does): a host's GPUs held at their cap 60 W below them have a lower limit (under one limit the capped GPU would
    draw more, not less). Where the peers are at their cap too, 60 W is healthy spread and names nobody."""
    f = Fleet(seed=3)
    h = f.h("h07")
    f.power[h, :, 200:] = 500 + np.random.default_rng(1).normal(0, 4, (4, 280))
    assert f.findings(drop=("power_limit_w",)) == []  # everyone at the cap: 60 W is within the 100 W floor
    f.throttle[:] = np.where(f.busy, 0, GPU_IDLE).astype(np.uint64)
    f.throttle[h, :, 200:] |= SW_POWER_CAP
    (fi,) = f.findings(drop=("power_limit_w",))
    assert (fi.hosts, fi.category) == (("h07",), Category.POWER)
    sig = fi.evidence["signals"][0]
    assert sig["power_w_median"] == pytest.approx(500, abs=8) and sig["peer_power_w_median"] == pytest.approx(
        560, abs=8
    )


def test_an_unnamed_second_sku_at_its_own_cap_is_not_a_lower_limit() -> None:
    """No gpu_name, no limits (an exporter that reports neither): 2 hosts of H100 PCIe (350 W) beside 2 of H100 SXM
    drawing ~560 W uncapped. Only the PCIe GPUs whose silicon wants more than 350 W sit at the cap (one per host, too
    few to be read as policy on their own); the others draw just under it, uncapped. The population that runs at or
    below the cap is two whole hosts: a second SKU, not two faults. One such host alone is still named."""
    f = Fleet(hosts=4, seed=4)
    rng = np.random.default_rng(7)
    f.throttle[:] = np.where(f.busy, 0, GPU_IDLE).astype(np.uint64)  # the SXM GPUs run below their cap
    for h in (0, 1):
        f.power[h] = np.where(f.busy[h], 332 + rng.normal(0, 3, (4, 480)), 45.0)
        f.power[h, 0] = np.where(f.busy[h, 0], 345 + rng.normal(0, 1, 480), 45.0)
        f.throttle[h, 0] |= np.where(f.busy[h, 0], SW_POWER_CAP, 0).astype(np.uint64)
    drop = ("gpu_name", "power_limit_w", "power_limit_default_w")
    assert f.findings(drop=drop) == []
    one = Fleet(hosts=4, seed=4)
    one.throttle[:] = np.where(one.busy, 0, GPU_IDLE).astype(np.uint64)
    one.power[0], one.throttle[0] = f.power[0], f.throttle[0]
    assert ("h00", "power") in _hosts(consolidate(one.findings(drop=drop)))


def test_site_power_policy_is_not_a_fault() -> None:
    # A capped pod (a quarter of the hosts at 600 W) and, separately, a fleet capped at 550 W.
    pod = Fleet(hosts=12)
    pod.limit[:3] = 600.0
    pod.power[:3] = np.minimum(pod.power[:3], 595.0)
    assert pod.findings() == []
    fleet = Fleet(hosts=12)
    fleet.limit[:] = 550.0
    fleet.power = np.minimum(fleet.power, 545.0)
    assert fleet.findings() == []
    # ...but a GPU capped below the fleet's policy is named, against the policy.
    fleet.limit[4, 1, 100:] = 300.0
    (fi,) = fleet.findings()
    assert (fi.hosts, fi.category) == (("h04",), Category.POWER) and "300 W" in fi.summary


def test_pcie_downgrade_only_under_load_with_replays_as_evidence() -> None:
    f = Fleet()
    # Healthy: every idle link at gen 1 (already), and a 1 s retrain lag when load returns.
    f.gen[:, :, 30] = 1
    assert f.findings() == []
    h = f.h("h07")
    f.width[h, 3, 150:] = 8  # trained down to x8 and stays there under load
    f.replays[h, 3, 150:] = np.arange(330) // 4  # ~15 replays a minute (NVIDIA: at most 8)
    (fi,) = f.findings()
    assert (fi.hosts, fi.category) == (("h07",), Category.PCIE_DOWNGRADE)
    ev = fi.evidence["signals"][0]
    assert (ev["gpu"], ev["pcie_link_width_min"], ev["pcie_link_width_max"]) == (3, 8.0, 16.0)
    assert ev["pcie_replays_per_min"] > 8
    assert "x8" in fi.summary and "x16" in fi.summary


def test_pcie_downgrade_without_a_reported_maximum_is_judged_against_its_skus_peers() -> None:
    """dcgm-exporter and DESIGN.md's minimum columns give the current link only: a GPU under load below what the
    GPUs of its SKU run at under load is downgraded; idle links at gen 1 and a second SKU at gen 4 are not."""
    no_max = ("pcie_link_gen_max", "pcie_link_width_max")
    f = Fleet()
    for h in range(8, 12):  # four A100 hosts: gen 4 parts
        f.sku[h] = A100
        f.gen[h] = np.where(f.busy[h], 4, 1)
    assert f.findings(drop=no_max) == []
    h = f.h("h07")
    f.width[h, 3, 150:] = 4
    (fi,) = f.findings(drop=no_max)
    assert (fi.hosts, fi.category) == (("h07",), Category.PCIE_DOWNGRADE)
    ev = fi.evidence["signals"][0]
    assert (ev["gpu"], ev["pcie_link_width_min"], ev["pcie_link_width_max"], ev["reference"]) == (
        3,
        4.0,
        16.0,
        "peers_under_load",
    )
    assert "x4 under load (its SKU's GPUs run at gen 5 x16 under load)" in fi.summary
    # two platforms of one SKU (a third of the hosts at gen 4 under load) are two populations, not a downgrade; with
    # the name gone the board's default limit still tells the peers apart
    two = Fleet()
    two.gen[8:] = np.where(two.busy[8:], 4, 1)
    assert two.findings(drop=no_max) == []
    (fi,) = f.findings(drop=(*no_max, "gpu_name"))
    assert fi.hosts == ("h07",) and "x4 under load" in fi.summary
    # a maximum for one of the two (width) and none for the other (gen): read, not a KeyError
    (fi,) = f.findings(drop=("pcie_link_gen_max",))
    assert fi.category is Category.PCIE_DOWNGRADE and "(max gen 5 x16)" in fi.summary
    # no SKU at all: the link is judged against its own history under load (x16 from 30 s to 150 s, then x4), as a
    # third generator's dev-like fleet with neither `_max` nor a name showed it, and against its host's other GPUs
    # (one baseboard, one SKU): at x4 from its first loaded sample it has no history, but 3 of 3 siblings at x16
    unknown = (*no_max, "gpu_name", "power_limit_default_w")
    (fi,) = f.findings(drop=unknown)
    assert fi.hosts == ("h07",) and fi.evidence["signals"][0]["reference"] == "own_history_under_load"
    assert "x4 under load (it ran at gen 5 x16 under load before" in fi.summary
    f.width[h, 3, :] = 4
    (fi,) = f.findings(drop=unknown)
    assert fi.hosts == ("h07",) and fi.evidence["signals"][0]["reference"] == "host_siblings_under_load"
    assert "x4 under load (its host's other GPUs run at gen 5 x16 under load" in fi.summary
    # with no majority on its host (two GPUs of four at x4 from the start) nothing says which is right: not named
    f.width[h, 2, :] = 4
    assert f.findings(drop=unknown) == []


def test_one_host_under_a_lower_limit_is_not_site_policy_however_small_its_sku() -> None:
    """A policy caps a pod or a fleet: a lower limit on one host alone is named, even where that host is half of
    its SKU (a mixed fleet of 2 A100 and 2 H100 hosts); the same limit on 2 hosts of 4 is policy."""
    f = Fleet(hosts=4)
    for h in (0, 1):
        f.sku[h], f.default[h], f.limit[h] = A100, 400.0, 400.0
        f.power[h] = np.where(f.busy[h], 330.0, 60.0)
    f.limit[3, :, 200:] = 470.0
    f.power[3, :, 200:] = np.minimum(f.power[3, :, 200:], 465.0)
    (fi,) = f.findings()
    assert (fi.hosts, fi.category) == (("h03",), Category.POWER)
    assert "470 W, below the default 700 W and the 700 W its peers run at" in fi.summary
    pod = Fleet(hosts=4)
    pod.limit[2:, :, 200:] = 470.0
    pod.power[2:, :, 200:] = np.minimum(pod.power[2:, :, 200:], 465.0)
    assert pod.findings() == []


def test_a_throttle_bit_in_one_sample_is_not_a_condition_held() -> None:
    """At 30 s sampling a 60 s persistence window is 2 samples: one sample with the thermal bit (a hot-aisle blip)
    is not a held slowdown; the bit in consecutive samples is."""
    f = Fleet()
    h = f.h("h02")
    f.throttle[h, 1, 295:305] |= SW_THERMAL  # seen by the sample at 300 s only
    f.temp[h, 1, 295:305] += 8
    assert f.findings(every_s=30) == []
    f.throttle[h, 1, 290:400] |= SW_THERMAL
    (fi,) = f.findings(every_s=30)
    assert (fi.hosts, fi.category) == (("h02",), Category.THERMAL)


@pytest.mark.parametrize(
    ("bits", "category"), [(HW_THERMAL | HW_SLOWDOWN, Category.THERMAL), (HW_POWER_BRAKE | HW_SLOWDOWN, Category.POWER)]
)
def test_a_hardware_slowdown_in_a_runs_last_two_samples_is_held(bits: int, category: Category) -> None:
    """At 10 s sampling a GPU whose hardware cuts its clocks (HW thermal slowdown, the HW power brake) in the run's
    last 20 s has no 60 s window left to fill: the data ends in the condition, so it counts as held. One sample is
    not; two that pass mid-run (a blip seen to end) are not; the driver's SW thermal bit in the last two is not."""
    f = Fleet()
    h = f.h("h05")
    f.throttle[h, 2, 455:] |= bits  # samples at 460 and 470 s
    f.clock[h, 2, 455:] -= 250
    f.temp[h, 2, 400:] += 20
    (fi,) = f.findings(every_s=10)
    assert (fi.hosts, fi.category) == (("h05",), category)
    assert "GPU 2 on h05" in fi.summary and "in 2 samples" in fi.summary
    g = Fleet()
    g.throttle[h, 2, 465:] |= bits  # the sample at 470 s only
    assert g.findings(every_s=10) == []
    g.throttle[h, 2, 295:315] |= bits  # 300 and 310 s, gone at 320 s
    assert g.findings(every_s=10) == []
    g.throttle[h, 2, 455:] |= SW_THERMAL
    assert g.findings(every_s=10) == []


def test_intermittent_dips_move_a_window_mean_but_are_not_a_departure() -> None:
    """A host whose GPUs dip to ~40% power in 3 of every 8 samples for 5 minutes (its data loader stalls) is 150 W
    below its peers by the 8-sample mean, never by the median; the same drop held in every sample is a departure."""
    f = Fleet()
    h = f.h("h06")
    dips = np.zeros(f.seconds, bool)
    dips[150:450] = (np.arange(300) % 8) < 3
    f.power[h, :, dips] = 220.0
    f.util[h, :, dips] = 35.0
    assert f.findings() == []
    f.power[h, :, 150:450] = 400.0
    (fi,) = f.findings()
    assert (fi.hosts, fi.category) == (("h06",), Category.METRIC_OUTLIER) and "power_w" in fi.summary


def _start_late(f: Fleet, h: int, at_s: int, ramp_s: int, power_w: float) -> None:
    """Host h idles until at_s, then warms up to power_w over ramp_s while its peers run steady."""
    t = np.arange(f.seconds)
    ramp = np.clip((t - at_s) / ramp_s, 0.0, 1.0)
    busy = t >= at_s
    f.busy[h] = busy
    f.util[h] = np.where(busy, 20 + 75 * ramp, 0.0)
    f.power[h] = np.where(busy, 150 + (power_w - 150) * ramp, 70.0)
    f.clock[h] = np.where(busy, 1900.0, 345.0)
    f.gen[h] = np.where(busy, 5, 1)
    f.throttle[h] = np.where(busy, SW_POWER_CAP, GPU_IDLE)


def test_a_late_starter_warming_up_is_not_compared_until_it_has_warmed_up() -> None:
    """One host of twelve starts 3 minutes after its peers and takes 4 minutes to reach their power (a staggered
    start: its data loader, allocator and autotuning warm up while they run steady): not a departure. The same late
    host that stays 160 W below them once warmed up is one."""
    f = Fleet(seconds=1000)
    _start_late(f, f.h("h05"), 210, 240, 560.0)
    assert f.findings() == []
    _start_late(f, f.h("h05"), 210, 240, 400.0)
    (fi,) = f.findings()
    assert (fi.hosts, fi.category) == (("h05",), Category.METRIC_OUTLIER) and "power_w" in fi.summary
    assert fi.evidence["signals"][0]["detected_ts"] >= _iso_at(210 + 300)
    # a host that starts with its group (20 s after it, within a persistence window) is compared from its start: in a
    # run of 6 minutes a fault from the start is not hidden as a warm-up (a second generator's CPU-contention host)
    short = Fleet(seconds=360)
    _start_late(short, short.h("h05"), 50, 1, 400.0)
    (fi,) = short.findings()
    assert (fi.hosts, fi.category) == (("h05",), Category.METRIC_OUTLIER) and "power_w" in fi.summary


def test_a_late_starter_is_late_for_the_peers_running_then_not_for_hosts_that_join_later() -> None:
    """Six hosts: three start together, h03 two minutes after them, and two replacements (h04, h05) join 10 and 13
    minutes in. h03 warms up while the three run steady, so it is late for them; the whole group's median start
    (pulled up by the two replacements) would have compared its warm-up with their steady work (a third generator's
    clean fleet, with late joiners, named such a host)."""
    f = Fleet(hosts=6, seconds=1400)
    for h in range(3):
        _start_late(f, h, 30, 1, 560.0)
    _start_late(f, f.h("h03"), 150, 240, 560.0)
    _start_late(f, f.h("h04"), 600, 240, 560.0)
    _start_late(f, f.h("h05"), 800, 240, 560.0)
    assert f.findings() == []
    _start_late(f, f.h("h03"), 150, 240, 400.0)  # ...and once warmed up, a departure is still one
    (fi,) = f.findings()
    assert (fi.hosts, fi.category) == (("h03",), Category.METRIC_OUTLIER) and "power_w" in fi.summary


def test_a_host_doing_its_peers_work_at_less_power_with_no_reason_held_down_is_not_named() -> None:
    """Unnamed GPUs, no power limits reported: one host's GPUs draw 280 W where their peers draw 560 W, at the same
    utilisation, with no clock-event reason set (a third generator's clean fleet: an H100 PCIe host among SXM hosts).
    Nothing held them down: they need less power for the same work. The same host held at a power cap (its reasons
    say so) is named, and so is one that also does less work (its utilisation says so)."""
    unnamed = ("gpu_name", "power_limit_w", "power_limit_default_w")
    f = Fleet()
    f.throttle = np.where(f.busy, 0, GPU_IDLE).astype(np.uint64)  # 560 W, under a 700 W limit: not at the cap
    h = f.h("h05")
    f.power[h] = np.where(f.busy[h], 280 + np.random.default_rng(5).normal(0, 6, f.power[h].shape), 60.0)
    f.clock[h] = np.where(f.busy[h], 1750.0, 345.0)
    assert f.findings(drop=unnamed) == []
    capped = Fleet()
    capped.throttle = f.throttle.copy()
    capped.power[h], capped.clock[h] = f.power[h], f.clock[h]
    capped.throttle[h] = np.where(f.busy[h], SW_POWER_CAP, GPU_IDLE)
    assert _hosts(capped.findings(drop=unnamed)) == [("h05", "metric_outlier"), ("h05", "power")]
    f.util[h] = np.where(f.busy[h], 60.0, 0.0)
    (fi,) = f.findings(drop=unnamed)
    assert fi.hosts == ("h05",) and {s["metric"] for s in fi.evidence["signals"]} == {"sm_util_pct"}


def _iso_at(s: int) -> str:
    return datetime.fromtimestamp(T0 / 1e9 + s, UTC).isoformat(timespec="milliseconds")


def test_nvlink_crc_judged_at_nvidias_rate() -> None:
    f = Fleet()
    f.crc[2, 1] = np.cumsum(np.random.default_rng(3).poisson(0.05, 480))  # a trickle
    f.crc[3, 0, 200:] += 150  # one retrain burst
    assert f.findings() == []
    f.crc[9, 2, 250:] += np.cumsum(np.full(230, 150))  # 150 errors/s sustained
    (fi,) = f.findings()
    assert (fi.hosts, fi.category) == (("h09",), Category.NVLINK)
    assert fi.evidence["signals"][0]["peak_rate_per_s"] == pytest.approx(150, rel=0.05)


def test_nvlink_crc_held_below_the_failing_rate_is_dcgms_warning_held() -> None:
    """Below NVIDIA's failing rate (100/s) DCGM's health watch warns on any CRC error in its minute; a link whose
    minute-by-minute count holds a median of 10/min or more for 10 minutes is that warning held: named, a warning below
    the runbooks' gate. The healthy trickle (3/min here) and a retrain's one-second burst on top of it are not."""
    f = Fleet(seconds=1500)
    rng = np.random.default_rng(3)
    f.crc[2, 1] = np.cumsum(rng.poisson(0.05, 1500))  # a trickle, 3/min
    f.crc[3, 0] = np.cumsum(rng.poisson(0.05, 1500))
    f.crc[3, 0, 700:] += 150  # one retrain burst on top of it
    assert f.findings() == []
    f.crc[9, 2, 300:] += np.cumsum(rng.poisson(0.5, 1200))  # 30/min from 300 s
    (fi,) = f.findings()
    assert (fi.hosts, fi.category, fi.confidence) == (("h09",), Category.NVLINK, 0.7)
    sig = fi.evidence["signals"][0]
    assert sig["median_per_min"] == pytest.approx(30, rel=0.25) and sig["gpu"] == 2
    assert sig["detected_ts"] >= _iso_at(300 + 300)  # the median of ten minutes: half of them at least before it


def test_ecc_by_counter_sbe_rate() -> None:
    f = Fleet()
    f.sbe[4, 0] = np.arange(480) // 300  # an SBE every five minutes: normal
    assert f.findings() == []
    f.sbe[6, 3, 220:] = np.cumsum(np.full(260, 2))  # 120 correctable errors a minute
    (fi,) = f.findings()
    assert (fi.hosts, fi.category) == (("h06",), Category.ECC)
    assert fi.evidence["signals"][0]["peak_rate_per_min"] == pytest.approx(120, rel=0.05)


def test_an_sbe_storm_is_read_from_the_lifetime_total_where_no_volatile_counter_is_exported() -> None:
    """DESIGN.md's column is `ecc_sbe_total` (dcgm-exporter: DCGM_FI_DEV_ECC_SBE_AGG_TOTAL): old history is a constant,
    a storm is a rate."""
    f = Fleet()
    f.sbe += 5000  # every GPU's lifetime history
    f.sbe[6, 3, 220:] += np.cumsum(np.full(260, 2))  # 120 correctable errors a minute
    t = f.gpu_table()
    t = t.rename_columns(["ecc_sbe_total" if c == "ecc_sbe_volatile" else c for c in t.column_names])
    (fi,) = find_faulty_hosts(t, f.host_table())
    assert (fi.hosts, fi.category) == (("h06",), Category.ECC)
    sig = fi.evidence["signals"][0]
    assert sig["metric"] == "ecc_sbe_total" and sig["peak_rate_per_min"] == pytest.approx(120, rel=0.05)


def test_app_xids_blame_nobody_and_xid92_is_ecc() -> None:
    f = Fleet()
    f.xid[1, 0, 300:] = 31  # illegal address: the application's doing
    f.xid[2, 1, 310:] = 13
    assert f.findings() == []
    f.xid[8, 2, 320:] = 92
    (fi,) = f.findings()
    assert (fi.hosts, fi.category, fi.evidence["signals"][0]["xid"]) == (("h08",), Category.ECC, 92)


def test_departure_that_starts_needs_one_floor_a_steady_one_one_and_a_half() -> None:
    """CPU 35 points above peers: if it starts inside the data it is a departure (own history);
    the same offset held from the first second is indistinguishable from a role and needs 1.5
    floors (1.5 x 25 = 37.5). Every finding names only the deviating host and carries its own numbers."""
    steady = Fleet(hosts=16)
    steady.cpu[5] += np.where(steady.cpu[5] > 10, 35.0, 0.0)
    assert steady.findings() == []
    started = Fleet(hosts=16)
    started.cpu[5, 250:] += 35.0
    (fi,) = started.findings()
    assert (fi.hosts, fi.category) == (("h05",), Category.METRIC_OUTLIER)
    ev = fi.evidence["signals"][0]
    assert ev["metric"] == "cpu_util_pct" and ev["direction"] == "above peers"
    assert ev["deviation"] == pytest.approx(35, abs=3) and ev["floor"] == 25.0
    assert ev["peer_hosts"] == 16 and ev["value"] == pytest.approx(65, abs=4)
    for extra in (45.0, 60.0):  # steady but over 1.5 floors
        big = Fleet(hosts=16)
        big.cpu[5] += np.where(big.cpu[5] > 10, extra, 0.0)
        assert _hosts(big.findings()) == [("h05", "metric_outlier")]


def test_roles_compare_like_with_like() -> None:
    # Two data-loader hosts run 60 points more CPU from the start: alone, they look like outliers.
    f = Fleet(hosts=16)
    f.cpu[:2] += np.where(f.cpu[:2] > 10, 60.0, 0.0)
    assert _hosts(f.findings()) == [("h00", "metric_outlier"), ("h01", "metric_outlier")]
    roles = {n: ("loader" if i < 2 else "trainer") for i, n in enumerate(f.names)}
    assert f.findings(peer_groups=roles) == []


def test_roles_too_small_to_compare_are_pooled_not_skipped() -> None:
    # 16 hosts in 8 pipeline stages: two hosts per stage is no peer group; a host whose clocks are
    # held low from 200 s is still compared with the rest, and no healthy host is named.
    f = Fleet(hosts=16)
    f.clock[9, :, 200:] = np.where(f.busy[9, :, 200:], 1100.0, 345.0)
    roles = {n: f"pp stage {i // 2}" for i, n in enumerate(f.names)}
    assert [h for h, _ in _hosts(f.findings(peer_groups=roles))] == ["h09"]
    assert _hosts(Fleet(hosts=16).findings(peer_groups=roles)) == []


def test_clock_held_low_and_a_checkpoint_do_not_reset_continuity() -> None:
    """Clocks held at 1100 MHz from 220 s, a 40 s checkpoint at 300 s, data ends at 400 s: 140 s of
    comparable seconds, 80 + 60 of them held. Counted in wall time (the last 120 s hold only 80
    held seconds) it would never alarm; the checkpoint is neither for nor against."""
    f = Fleet(seconds=400)
    f.busy[:, :, 300:340] = False  # a checkpoint: every GPU idles 40 s
    f.util[:, :, 300:340] = 0
    f.clock[:, :, 300:340] = 345
    f.power[:, :, 300:340] = 70
    h = f.h("h10")
    held = np.zeros(400, bool)
    held[220:] = True
    held[300:340] = False
    f.clock[h][:, held] = 1100  # every GPU of the host held at 1100 MHz
    f.power[h][:, held] = 300
    found = f.findings()
    assert _hosts(found) == [("h10", "metric_outlier")]
    ev = found[0].evidence["signals"]
    clock = next(s for s in ev if s["metric"] == "sm_clock_mhz")
    assert clock["deviation"] == pytest.approx(-800, abs=40) and clock["unit"] == "MHz"
    assert sorted(clock["gpus_deviating"]) == [0, 1, 2, 3]
    assert found[0].evidence["detected_ts"] > "2027-01-15T08:05:40"  # after the checkpoint (T0 + 340 s)


def test_hot_gpu_before_it_throttles_is_thermal() -> None:
    f = Fleet()
    ramp = np.clip((np.arange(480) - 200) / 60, 0, 1) * 20
    f.temp[3, 1] += ramp  # failed fan: 20 C hotter than its own usual and its peers, no bit yet
    (fi,) = f.findings()
    assert (fi.hosts, fi.category) == (("h03",), Category.THERMAL)
    assert fi.evidence["signals"][0]["metric"] == "temp_c"


def test_lazy_dataset_reads_evidence_columns_for_the_named_host(tmp_path) -> None:
    from trainctl.dataset import open_dataset, write_table

    f = Fleet()
    f.width[7, 3, 150:] = 8
    f.replays[7, 3, 150:] = np.arange(330)
    gt = f.gpu_table()
    for name in f.names:
        write_table(tmp_path, "gpu_metrics", name, gt.filter(pa.compute.equal(gt["host"], name)), part="t")
    (fi,) = find_faulty_hosts(open_dataset(tmp_path, "gpu_metrics"), None)
    assert fi.hosts == ("h07",)
    assert fi.evidence["signals"][0]["pcie_replays_per_min"] == pytest.approx(60, rel=0.1)


def test_pipeline_roles_from_the_runs_grid() -> None:
    from trainctl.analyzers.faulty_hosts import analyze, pipeline_roles
    from trainctl.rundir import HostRanks, RunInfo
    from trainctl.schemas import SignalKind
    from trainctl.signals import Signals

    # dp 4 x tp 4 x pp 4 on 16 hosts of 4 GPUs: Megatron's order puts 16 ranks per stage.
    f = Fleet(hosts=16)
    hosts = tuple(HostRanks(n, tuple(range(4 * i, 4 * i + 4))) for i, n in enumerate(f.names))
    run = RunInfo("r", 64, 4, hosts, layout={"dp": 4, "tp": 4, "pp": 4})
    roles = pipeline_roles(run)
    assert roles["h00"] == "pp stage 0" and roles["h03"] == "pp stage 0" and roles["h04"] == "pp stage 1"
    assert pipeline_roles(RunInfo("r", 64, 4, hosts, layout={"dp": 16, "tp": 4, "pp": 1})) is None
    # The first stage's hosts run the data loader: 60 points more CPU, from the start. Compared
    # across roles, two of them look faulty; diagnose compares them with their own stage.
    f.cpu[:2] += np.where(f.cpu[:2] > 10, 60.0, 0.0)
    tables = {SignalKind.GPU_METRICS: f.gpu_table(), SignalKind.HOST_METRICS: f.host_table()}
    assert _hosts(analyze(Signals(None, tables))) == [("h00", "metric_outlier"), ("h01", "metric_outlier")]
    assert analyze(Signals(run, tables)) == []
