"""The metrics agent's NVML and /proc paths.

There is no GPU on the test machines, so NVML is replaced at its true boundary: FakeNvml exposes
the pynvml function names the agent calls and returns fixed per-GPU values (typical of an H100
SXM, written by hand, not a capture), raising pynvml's own NVMLError classes where a device lacks a
field. Everything above that boundary (field mapping, units, nulls, Xid events, lost GPUs,
Parquet parts) is the agent's real code path.
"""

from __future__ import annotations

import logging
import types
from pathlib import Path

import pyarrow as pa
import pynvml
import pytest

from trainctl.dataset import read_table
from trainctl.runtime.metrics_agent import (
    AgentConfig,
    HostSampler,
    MetricsAgent,
    NvmlSampler,
    parse_loadavg,
    parse_meminfo,
    parse_net_dev,
    parse_proc_stat,
)

PROC_STAT = """cpu  4705 150 1120 16250 520 0 37 0 0 0
cpu0 2353 75 560 8125 260 0 18 0 0 0
intr 114930548 113199788 3 0 5 263 0 4 [...]
"""
PROC_STAT_2 = """cpu  4905 150 1220 16450 520 0 37 0 0 0
"""
MEMINFO = """MemTotal:       16303428 kB
MemFree:         8022844 kB
MemAvailable:   12165772 kB
Buffers:          318076 kB
Cached:          3712928 kB
"""
NET_DEV = """Inter-|   Receive                                                |  Transmit
 face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed
    lo: 9999999    1000    0    0    0     0          0         0 9999999    1000    0    0    0     0       0          0
  eth0: 1000000    2000    0    0    0     0          0         0  500000    1500    0    0    0     0       0          0
  ib0:  3000000    2000    0    0    0     0          0         0 2500000    1500    0    0    0     0       0          0
"""
NET_DEV_2 = NET_DEV.replace("1000000    2000", "3000000    2000").replace("2500000    1500", "4500000    1500")


class FakeNvml:
    """pynvml's surface as the agent uses it; per-GPU dicts of values, NVMLError where unsupported."""

    NVMLError = pynvml.NVMLError

    def __init__(self, gpus: list[dict], *, init_error: int | None = None) -> None:
        for k in dir(pynvml):
            if k.startswith("NVML_") or k.startswith("nvmlEventType"):
                setattr(self, k, getattr(pynvml, k))
        self.gpus = gpus
        self.init_error = init_error
        self.events: list[types.SimpleNamespace] = []
        self.lost: set[int] = set()

    def _v(self, h: int, key: str):
        if h in self.lost:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_GPU_IS_LOST)
        v = self.gpus[h].get(key)
        if v is None:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)
        return v

    def nvmlInit(self):
        if self.init_error is not None:
            raise pynvml.NVMLError(self.init_error)

    def nvmlShutdown(self): ...
    def nvmlDeviceGetCount(self):
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, i):
        return i

    def nvmlDeviceGetIndex(self, h):
        return h

    def nvmlDeviceGetUUID(self, h):
        return self._v(h, "uuid")

    def nvmlDeviceGetPciInfo(self, h):
        return types.SimpleNamespace(busId=self._v(h, "bus"))

    def nvmlDeviceGetUtilizationRates(self, h):
        return types.SimpleNamespace(gpu=self._v(h, "util"), memory=self._v(h, "mem_util"))

    def nvmlDeviceGetMemoryInfo(self, h):
        return types.SimpleNamespace(used=self._v(h, "mem_used"), total=self._v(h, "mem_total"), free=0)

    def nvmlDeviceGetPowerUsage(self, h):
        return self._v(h, "power_mw")

    def nvmlDeviceGetEnforcedPowerLimit(self, h):
        return self._v(h, "limit_mw")

    def nvmlDeviceGetTemperature(self, h, sensor):
        return self._v(h, "temp")

    def nvmlDeviceGetClockInfo(self, h, clk):
        return self._v(h, "sm_clock")

    def nvmlDeviceGetMaxClockInfo(self, h, clk):
        return self._v(h, "sm_clock_max")

    def nvmlDeviceGetCurrPcieLinkGeneration(self, h):
        return self._v(h, "gen")

    def nvmlDeviceGetMaxPcieLinkGeneration(self, h):
        return self._v(h, "gen_max")

    def nvmlDeviceGetCurrPcieLinkWidth(self, h):
        return self._v(h, "width")

    def nvmlDeviceGetMaxPcieLinkWidth(self, h):
        return self._v(h, "width_max")

    def nvmlDeviceGetTotalEccErrors(self, h, err_type, counter):
        return self._v(h, "ecc")[(err_type, counter)]

    def nvmlDeviceGetRetiredPages(self, h, cause):
        return self._v(h, "retired")[cause]

    def nvmlDeviceGetRemappedRows(self, h):
        return self._v(h, "remapped")

    def nvmlDeviceGetNvLinkState(self, h, link):
        links = self._v(h, "links")
        if link not in links:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        return pynvml.NVML_FEATURE_ENABLED

    def nvmlDeviceGetNvLinkErrorCounter(self, h, link, counter):
        return self._v(h, "links")[link][counter]

    def nvmlDeviceGetCurrentClocksEventReasons(self, h):
        return self._v(h, "throttle")

    def nvmlDeviceGetName(self, h):
        return self._v(h, "name")

    def nvmlDeviceGetVbiosVersion(self, h):
        return self._v(h, "vbios")

    def nvmlDeviceGetPowerManagementDefaultLimit(self, h):
        return self._v(h, "default_limit_mw")

    def nvmlDeviceGetTemperatureThreshold(self, h, which):
        return self._v(h, "thresholds")[which]

    def nvmlDeviceGetPcieReplayCounter(self, h):
        return self._v(h, "replays")

    def nvmlEventSetCreate(self):
        return "event-set"

    def nvmlEventSetFree(self, s): ...
    def nvmlDeviceRegisterEvents(self, h, types_, s): ...
    def nvmlEventSetWait_v2(self, s, timeout_ms):
        if not self.events:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_TIMEOUT)
        return self.events.pop(0)


def h100(**over) -> dict:
    g = {
        "uuid": "GPU-5b3c1a2e-0000-4f4b-9a7c-1234567890ab",
        "bus": b"00000000:18:00.0",
        "util": 97,
        "mem_util": 41,
        "mem_used": 71_000_000_000,
        "mem_total": 85_899_345_920,
        "power_mw": 612_345,
        "limit_mw": 700_000,
        "temp": 64,
        "sm_clock": 1980,
        "sm_clock_max": 1980,
        "gen": 5,
        "gen_max": 5,
        "width": 16,
        "width_max": 16,
        "ecc": {(1, 0): 0, (1, 1): 2, (0, 0): 3, (0, 1): 118},  # (uncorrected|corrected, volatile|aggregate)
        "retired": None,
        "remapped": (1, 2, False, False),
        "links": {0: {2: 5, 3: 1}, 1: {2: 0, 3: 2}},
        "throttle": 0x4,
        "name": "NVIDIA H100 80GB HBM3",
        "vbios": "96.00.99.00.01",
        "default_limit_mw": 700_000,
        "thresholds": {pynvml.NVML_TEMPERATURE_THRESHOLD_SHUTDOWN: 92, pynvml.NVML_TEMPERATURE_THRESHOLD_SLOWDOWN: 89},
        "replays": 7,
    }
    g.update(over)
    return g


def test_nvml_fields_map_to_gpu_metrics_columns_with_units() -> None:
    fake = FakeNvml([h100(), h100(links=None, ecc=None, remapped=None, throttle=None, bus=None, gen_max=None)])
    s = NvmlSampler(fake)
    assert s.open() == 2
    rows = s.sample(1_000)
    assert len(rows) == 2
    r0, r1 = rows
    assert r0["gpu"] == 0 and r0["ts"] == 1_000
    assert r0["power_w"] == pytest.approx(612.345) and r0["power_limit_w"] == 700.0
    assert r0["pci_bus_id"] == "00000000:18:00.0"
    assert (r0["sm_util_pct"], r0["mem_util_pct"], r0["temp_c"]) == (97.0, 41.0, 64.0)
    assert (r0["pcie_link_gen"], r0["pcie_link_gen_max"], r0["pcie_link_width"], r0["pcie_link_width_max"]) == (
        5,
        5,
        16,
        16,
    )
    assert (r0["ecc_sbe_volatile"], r0["ecc_dbe_volatile"], r0["ecc_sbe_total"], r0["ecc_dbe_total"]) == (3, 0, 118, 2)
    assert r0["retired_pages"] == 3  # retired pages unsupported (Ampere+): remapped rows 1 + 2
    assert r0["nvlink_crc_errors_total"] == 5 + 1 + 0 + 2  # CRC FLIT + CRC DATA over the two active links
    assert r0["throttle_reasons"] == 0x4 and r0["xid"] is None
    # Unsupported fields are nulls, not zeros.
    for col in (
        "nvlink_crc_errors_total",
        "ecc_dbe_total",
        "ecc_sbe_volatile",
        "retired_pages",
        "throttle_reasons",
        "pci_bus_id",
        "pcie_link_gen_max",
    ):
        assert r1[col] is None, col
    assert r1["power_w"] == pytest.approx(612.345)


def test_xid_events_are_recorded_on_their_gpu_and_stay() -> None:
    fake = FakeNvml([h100(), h100()])
    s = NvmlSampler(fake)
    s.open()
    fake.events.append(types.SimpleNamespace(device=1, eventType=pynvml.nvmlEventTypeXidCriticalError, eventData=48))
    first = s.sample(1)
    assert [r["xid"] for r in first] == [None, 48]
    assert [r["xid"] for r in s.sample(2)] == [None, 48]  # "last Xid seen on this GPU"


def test_lost_gpu_drops_out_and_gpu_count_falls(tmp_path: Path) -> None:
    fake = FakeNvml([h100(), h100()])
    proc = _proc(tmp_path)
    agent = MetricsAgent(
        AgentConfig(tmp_path / "out", "gpuhost"),
        nvml=fake,
        proc_root=proc,
        clock_ns=iter([10**18, 10**18 + 10**9]).__next__,
    )
    agent._open_nvml()
    agent.sample_once()
    fake.lost.add(1)  # the GPU falls off the bus: every call now answers GPU_IS_LOST
    agent.sample_once()
    agent.flush()
    g = read_table(tmp_path / "out", "gpu_metrics").to_pandas().sort_values(["ts", "gpu"])
    assert list(zip(g["gpu"], g["ts"].astype("int64"))) == [(0, 10**18), (1, 10**18), (0, 10**18 + 10**9)]
    h = read_table(tmp_path / "out", "host_metrics").to_pandas()
    assert h["gpu_count"].tolist() == [2, 1]
    assert set(g["host"]) == {"gpuhost"}


def test_without_nvml_one_line_and_host_metrics_only(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    fake = FakeNvml([], init_error=pynvml.NVML_ERROR_LIBRARY_NOT_FOUND)
    cfg = AgentConfig(tmp_path / "out", "cpuhost", interval_s=0.01, flush_s=0.02, duration_s=0.05)
    with caplog.at_level(logging.INFO, logger="trainctl.runtime.metrics_agent"):
        stats = MetricsAgent(cfg, nvml=fake).run()
    lines = [r for r in caplog.records if "no GPU metrics" in r.getMessage()]
    assert len(lines) == 1 and "Library Not Found" in lines[0].getMessage()
    assert not stats.nvml and stats.gpu_rows == 0 and stats.samples == 5
    h = read_table(tmp_path / "out", "host_metrics")
    assert h.num_rows == 5
    assert not (tmp_path / "out" / "gpu_metrics").exists()
    assert (
        len({p.name for p in (tmp_path / "out" / "host_metrics" / "host=cpuhost").iterdir()}) >= 2
    )  # flushed in parts


def _proc(root: Path, stat: str = PROC_STAT, net: str = NET_DEV) -> Path:
    (root / "proc" / "net").mkdir(parents=True, exist_ok=True)
    (root / "proc" / "stat").write_text(stat)
    (root / "proc" / "meminfo").write_text(MEMINFO)
    (root / "proc" / "net" / "dev").write_text(net)
    (root / "proc" / "loadavg").write_text("3.52 2.91 2.40 5/1234 56789\n")
    return root / "proc"


def test_proc_parsers_on_recorded_text() -> None:
    assert parse_proc_stat(PROC_STAT) == parse_proc_stat(PROC_STAT)
    c = parse_proc_stat(PROC_STAT)
    assert (c.busy, c.total) == (4705 + 150 + 1120 + 37, 4705 + 150 + 1120 + 16250 + 520 + 37)
    assert parse_meminfo(MEMINFO) == ((16303428 - 12165772) * 1024, 16303428 * 1024)
    assert parse_net_dev(NET_DEV) == (4_000_000, 3_000_000)  # loopback excluded
    assert parse_loadavg("3.52 2.91 2.40 5/1234 56789\n") == 3.52


def test_host_sampler_rates_from_two_samples(tmp_path: Path) -> None:
    proc = _proc(tmp_path)
    s = HostSampler(proc)
    first = s.sample(0, 8)
    assert first["cpu_util_pct"] is None and first["net_rx_bytes_per_s"] is None and first["gpu_count"] == 8
    _proc(tmp_path, PROC_STAT_2, NET_DEV_2)
    second = s.sample(2 * 10**9, 8)
    assert second["cpu_util_pct"] == pytest.approx(100.0 * 300 / 500)
    assert second["net_rx_bytes_per_s"] == pytest.approx(2_000_000 / 2)
    assert second["net_tx_bytes_per_s"] == pytest.approx(2_000_000 / 2)
    assert second["load1"] == 3.52


def test_cli_agent_writes_host_metrics(cli, tmp_path: Path) -> None:
    r = cli("agent", "--out", tmp_path, "--duration-s", "1", "--interval-s", "0.25", "--host", "h1", "--flush-s", "0.5")
    assert r.code == 0, r.stderr
    assert "h1: 4 samples, 4 host_metrics rows" in r.stdout
    t = read_table(tmp_path, "host_metrics")
    assert t.num_rows == 4 and set(t.column("host").to_pylist()) == {"h1"}
    if "no gpu_metrics" in r.stdout:  # a machine without NVML says why, once
        assert r.stderr.count("no GPU metrics") == 1


def test_start_background_beside_a_run(tmp_path: Path) -> None:
    from trainctl.runtime.metrics_agent import start_background

    fake = FakeNvml([h100(), h100(), h100()])
    bg = start_background(tmp_path, "node01", interval_s=0.02, flush_s=0.05, nvml=fake)
    import time as _t

    deadline = _t.monotonic() + 20
    while bg.agent.stats.samples < 6 and _t.monotonic() < deadline:
        _t.sleep(0.02)
    stats = bg.stop()
    assert not bg.thread.is_alive()
    assert stats.nvml and stats.samples >= 6
    g = read_table(tmp_path, "gpu_metrics")
    assert g.num_rows == 3 * stats.samples  # everything buffered was flushed on stop
    assert sorted(set(g.column("gpu").to_pylist())) == [0, 1, 2]
    assert read_table(tmp_path, "host_metrics").column("gpu_count").to_pylist() == [3] * stats.samples


def test_identity_limits_and_link_fields_for_peer_grouping(tmp_path: Path) -> None:
    """The columns the fault analyzer groups and judges by: SKU, VBIOS, enforced vs default power
    limit, slowdown temperature, PCIe replays. One GPU runs under a lowered limit (nvidia-smi -pl
    450), one lacks the optional fields (NOT_SUPPORTED): nulls, not zeros, not a crash."""
    fake = FakeNvml(
        [
            h100(),
            h100(limit_mw=450_000, vbios=b"96.00.74.00.1A"),  # bytes, as old nvidia-ml-py returns
            h100(name=None, vbios=None, default_limit_mw=None, thresholds=None, replays=None),
        ]
    )
    agent = MetricsAgent(AgentConfig(tmp_path / "out", "node07"), nvml=fake, proc_root=_proc(tmp_path))
    agent._open_nvml()
    agent.sample_once()
    agent.sample_once()
    agent.flush()
    g = read_table(tmp_path / "out", "gpu_metrics")
    assert g.schema.field("gpu_name").type == pa.dictionary(pa.int32(), pa.string())
    rows = sorted(g.to_pylist(), key=lambda r: (r["gpu"], r["ts"]))
    r0, r1, r2 = rows[0], rows[2], rows[4]
    assert (r0["gpu_name"], r0["vbios_version"]) == ("NVIDIA H100 80GB HBM3", "96.00.99.00.01")
    assert (r0["power_limit_w"], r0["power_limit_default_w"]) == (700.0, 700.0)
    assert (r1["power_limit_w"], r1["power_limit_default_w"], r1["vbios_version"]) == (450.0, 700.0, "96.00.74.00.1A")
    assert r0["temp_slowdown_c"] == 89.0 and r0["pcie_replay_errors_total"] == 7
    for col in ("gpu_name", "vbios_version", "power_limit_default_w", "temp_slowdown_c", "pcie_replay_errors_total"):
        assert r2[col] is None, col
    assert r2["power_limit_w"] == 700.0  # the fields it has are still recorded


def test_static_fields_asked_once_retried_after_transient_error_and_absent_bindings() -> None:
    calls = {"name": 0}

    class Flaky(FakeNvml):
        nvmlDeviceGetPcieReplayCounter = None  # an nvidia-ml-py release without the binding

        def nvmlDeviceGetName(self, h):
            calls["name"] += 1
            if calls["name"] == 1:
                raise pynvml.NVMLError(pynvml.NVML_ERROR_UNKNOWN)  # transient: ask again
            return super().nvmlDeviceGetName(h)

    s = NvmlSampler(Flaky([h100()]))
    s.open()
    first = s.sample(1)[0]
    assert first["gpu_name"] is None and first["pcie_replay_errors_total"] is None
    for t in range(2, 6):
        row = s.sample(t)[0]
    assert row["gpu_name"] == "NVIDIA H100 80GB HBM3" and row["power_limit_default_w"] == 700.0
    assert calls["name"] == 2  # answered on the second sample, then cached: not asked every second
    assert row["pcie_replay_errors_total"] is None


def test_a_gpu_lost_before_the_agent_starts_does_not_stop_it() -> None:
    """nvmlDeviceGetHandleByIndex itself answers GPU_IS_LOST (the GPU fell off the bus before the
    agent started): the agent samples the others and counts one GPU fewer."""

    class LostAtStart(FakeNvml):
        def nvmlDeviceGetHandleByIndex(self, i):
            if i == 1:
                raise pynvml.NVMLError(pynvml.NVML_ERROR_GPU_IS_LOST)
            return i

    s = NvmlSampler(LostAtStart([h100(), h100(), h100()]))
    assert s.open() == 3
    assert [r["gpu"] for r in s.sample(1)] == [0, 2] and s.gpu_count == 2


def test_a_simulated_host_reports_only_its_own_gpus() -> None:
    gpus = [h100(uuid=f"GPU-{i}") for i in range(4)]
    s = NvmlSampler(FakeNvml(gpus), only=("2", "GPU-3"))  # CUDA_VISIBLE_DEVICES of node02: an index and a UUID
    s.open()
    assert [r["gpu"] for r in s.sample(1)] == [2, 3] and s.gpu_count == 2
