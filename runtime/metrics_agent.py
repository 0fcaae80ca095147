"""The metrics agent: NVML per GPU and /proc per host at 1 Hz, written as Parquet parts.

One agent per host, beside a run (`start_background(run_dir, host)`, what the launcher calls) or
standalone (`trainctl agent`). Every `flush_s` it writes what it sampled as one part per kind under
`<out>/gpu_metrics/host=H/` and `<out>/host_metrics/host=H/` (trainctl.dataset.write_table writes
to a temp file and renames, so a reader never sees half a part).

NVML is reached only through the `nvml` object handed to NvmlSampler (the `pynvml` module of
nvidia-ml-py by default), so tests replace that one boundary with a recorded fake and the
parsing/recording code below is the code that runs on a GPU host. A field the device does not
support (NVMLError NOT_SUPPORTED and friends) becomes null in that column; a GPU that answers
GPU_IS_LOST drops out of the sample (no row; `host_metrics.gpu_count` falls), which is how the
analyzer sees a GPU fall off the bus. Xid events come from an NVML event set
(nvmlEventTypeXidCriticalError) where the driver delivers them; the `xid` column holds the last
Xid seen on that GPU since the agent started.

What does not change while the driver is loaded (product name, VBIOS, default power limit,
slowdown temperature) is asked once per GPU, on its first sample, and repeated in every row so each
row says what it was measured on; the analyzer compares a GPU only with peers of the same name and
power limits.

Without NVML (no driver, no GPU, no nvidia-ml-py) the agent records host metrics only and logs one
line saying why.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa

from trainctl.dataset import write_table
from trainctl.schemas import SignalKind, schema_for

__all__ = [
    "NvmlUnavailable",
    "NvmlSampler",
    "HostSampler",
    "CpuTimes",
    "parse_proc_stat",
    "parse_meminfo",
    "parse_net_dev",
    "parse_loadavg",
    "AgentConfig",
    "AgentStats",
    "MetricsAgent",
    "BackgroundAgent",
    "start_background",
]

logger = logging.getLogger(__name__)


class NvmlUnavailable(Exception):
    """NVML cannot be used on this machine (no library, no driver, no GPU); carries the reason."""


# --------------------------------------------------------------------------------------------- NVML


def _load_pynvml() -> Any:
    try:
        import pynvml  # nvidia-ml-py
    except ImportError as exc:  # pragma: no cover - nvidia-ml-py is a dependency
        raise NvmlUnavailable(f"nvidia-ml-py is not installed ({exc}); pip install nvidia-ml-py") from exc
    return pynvml


class NvmlSampler:
    """Reads every gpu_metrics column for every GPU through an NVML module (pynvml or a fake)."""

    def __init__(self, nvml: Any = None, *, only: tuple[str, ...] | None = None) -> None:
        self.nvml = nvml if nvml is not None else _load_pynvml()
        # CUDA_VISIBLE_DEVICES entries (indices in PCI bus order, or UUIDs) of the GPUs this agent
        # reports: a simulated host of `launch --local` reports only its own GPUs. None: all.
        self.only = only
        self._handles: list[Any] = []
        self._links: dict[int, list[int]] = {}
        self._last_xid: dict[int, int] = {}
        self._events: Any = None
        self._unsupported: set[tuple[int, str]] = set()
        self._lost: set[int] = set()
        self._static: dict[int, dict[str, Any]] = {}

    # -- lifecycle
    def open(self) -> int:
        n = self.nvml
        try:
            n.nvmlInit()
            count = int(n.nvmlDeviceGetCount())
        except n.NVMLError as exc:
            raise NvmlUnavailable(f"NVML init failed: {exc}") from exc
        if count == 0:
            raise NvmlUnavailable("NVML sees no GPU on this host")
        self._handles = []
        for i in range(count):
            # Every per-device call is guarded: a GPU that fell off the bus must not take the agent
            # down, it must become a lost GPU (no rows; the analyzer sees it silent).
            try:
                h = n.nvmlDeviceGetHandleByIndex(i)
            except n.NVMLError as exc:
                logger.error("GPU %d: NVML gives no handle (%s); counted as lost", i, exc)
                self._lost.add(i)
                h = None
            if h is not None and self.only is not None and not self._selected(i, h):
                self._lost.add(i)  # not ours: never sampled, not counted
            self._handles.append(h)
        for i, h in enumerate(self._handles):
            if h is None or i in self._lost:
                continue
            try:
                self._links[i] = self._active_links(h)
            except n.NVMLError as exc:
                logger.debug("GPU %d: NVLink state unreadable (%s)", i, exc)
                self._links[i] = []
        try:
            self._events = n.nvmlEventSetCreate()
            for i, h in enumerate(self._handles):
                if h is None or i in self._lost:
                    continue
                try:
                    n.nvmlDeviceRegisterEvents(h, n.nvmlEventTypeXidCriticalError, self._events)
                except n.NVMLError as exc:
                    logger.debug("GPU %d: Xid events not delivered by NVML (%s)", i, exc)
        except n.NVMLError as exc:
            logger.info(
                "NVML event sets unavailable (%s): the xid column stays null; Xids still reach the kernel log", exc
            )
            self._events = None
        return count

    def _selected(self, i: int, h: Any) -> bool:
        if str(i) in self.only:
            return True
        try:
            return _text(self.nvml.nvmlDeviceGetUUID(h)) in self.only
        except self.nvml.NVMLError:
            return False

    def close(self) -> None:
        n = self.nvml
        try:
            if self._events is not None:
                n.nvmlEventSetFree(self._events)
            n.nvmlShutdown()
        except n.NVMLError:
            pass

    # -- helpers
    def _get(self, gpu: int, name: str, fn: Callable[[], Any]) -> Any:
        """Call one NVML query; None (null column) when the device lacks it."""
        if (gpu, name) in self._unsupported:
            return None
        n = self.nvml
        try:
            return fn()
        except n.NVMLError as exc:
            code = getattr(exc, "value", None)
            if code == getattr(n, "NVML_ERROR_GPU_IS_LOST", 15):
                raise
            if code in (getattr(n, "NVML_ERROR_NOT_SUPPORTED", 3), getattr(n, "NVML_ERROR_FUNCTION_NOT_FOUND", 13)):
                self._unsupported.add((gpu, name))  # never ask again
            logger.debug("GPU %d: %s unavailable (%s)", gpu, name, exc)
            return None

    def _active_links(self, h: Any) -> list[int]:
        n = self.nvml
        links = []
        for link in range(int(getattr(n, "NVML_NVLINK_MAX_LINKS", 18))):
            try:
                if n.nvmlDeviceGetNvLinkState(h, link) == getattr(n, "NVML_FEATURE_ENABLED", 1):
                    links.append(link)
            except n.NVMLError:
                continue
        return links

    def _drain_xids(self) -> None:
        n = self.nvml
        if self._events is None:
            return
        wait = getattr(n, "nvmlEventSetWait_v2", None) or n.nvmlEventSetWait
        for _ in range(1000):  # bounded: a storm of events must not stall sampling
            try:
                data = wait(self._events, 0)
            except n.NVMLError:
                return  # NVML_ERROR_TIMEOUT: nothing pending
            try:
                idx = int(n.nvmlDeviceGetIndex(data.device))
            except n.NVMLError:
                continue
            if int(data.eventType) & int(n.nvmlEventTypeXidCriticalError):
                self._last_xid[idx] = int(data.eventData)
                logger.warning("GPU %d: Xid %d delivered by NVML", idx, int(data.eventData))

    def _retired(self, i: int, h: Any) -> int | None:
        n = self.nvml

        def pages() -> int:
            return sum(
                len(n.nvmlDeviceGetRetiredPages(h, c))
                for c in (
                    n.NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS,
                    n.NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR,
                )
            )

        def rows() -> int:  # Ampere and later remap rows instead of retiring pages
            corr, unc, _pending, _failed = n.nvmlDeviceGetRemappedRows(h)
            return int(corr) + int(unc)

        v = self._get(i, "retired_pages", pages)
        return v if v is not None else self._get(i, "remapped_rows", rows)

    def _crc(self, i: int, h: Any) -> int | None:
        n = self.nvml
        if not self._links.get(i):
            return None
        total, seen = 0, False
        for link in self._links[i]:
            for counter in (n.NVML_NVLINK_ERROR_DL_CRC_FLIT, n.NVML_NVLINK_ERROR_DL_CRC_DATA):
                v = self._get(
                    i,
                    f"nvlink_crc_{link}_{counter}",
                    lambda link=link, counter=counter: n.nvmlDeviceGetNvLinkErrorCounter(h, link, counter),
                )
                if v is not None:
                    total, seen = total + int(v), True
        return total if seen else None

    def _optional(self, gpu: int, name: str, fn_name: str, *args: Any) -> Any:
        """An NVML query that an older nvidia-ml-py may not have at all: absent means null, like a
        device that answers NOT_SUPPORTED."""
        fn = getattr(self.nvml, fn_name, None)
        if fn is None:
            self._unsupported.add((gpu, name))
            return None
        return self._get(gpu, name, lambda: fn(*args))

    def _static_fields(self, i: int, h: Any) -> dict[str, Any]:
        """Fields fixed while the driver is loaded, asked until each answered or proved unsupported."""
        if i in self._static:
            return self._static[i]
        n, opt = self.nvml, self._optional
        name = opt(i, "name", "nvmlDeviceGetName", h)
        vbios = opt(i, "vbios", "nvmlDeviceGetVbiosVersion", h)
        default_mw = opt(i, "power_limit_default", "nvmlDeviceGetPowerManagementDefaultLimit", h)
        slowdown = opt(
            i,
            "temp_slowdown",
            "nvmlDeviceGetTemperatureThreshold",
            h,
            getattr(n, "NVML_TEMPERATURE_THRESHOLD_SLOWDOWN", 1),
        )
        fields = {
            "gpu_name": _text(name),
            "vbios_version": _text(vbios),
            "power_limit_default_w": None if default_mw is None else default_mw / 1000.0,
            "temp_slowdown_c": None if slowdown is None else float(slowdown),
        }
        keys = ("name", "vbios", "power_limit_default", "temp_slowdown")
        # A transient NVML error leaves a field null for this sample only: ask again next time.
        if all(v is not None or (i, k) in self._unsupported for v, k in zip(fields.values(), keys)):
            self._static[i] = fields
        return fields

    def _throttle(self, i: int, h: Any) -> int | None:
        n = self.nvml
        fn = getattr(n, "nvmlDeviceGetCurrentClocksEventReasons", None) or n.nvmlDeviceGetCurrentClocksThrottleReasons
        return self._get(i, "throttle_reasons", lambda: int(fn(h)))

    # -- one sample
    def sample(self, ts_ns: int) -> list[dict[str, Any]]:
        """One row per GPU that answered; a lost GPU (GPU_IS_LOST) has no row from then on."""
        n = self.nvml
        self._drain_xids()
        rows = []
        for i, h in enumerate(self._handles):
            if i in self._lost:
                continue
            try:
                rows.append(self._sample_one(i, h, ts_ns))
            except n.NVMLError as exc:  # only GPU_IS_LOST escapes _get
                self._lost.add(i)
                logger.error("GPU %d is lost (%s): no more samples from it", i, exc)
        return rows

    def _sample_one(self, i: int, h: Any, ts_ns: int) -> dict[str, Any]:
        n, g = self.nvml, self._get
        util = g(i, "utilization", lambda: n.nvmlDeviceGetUtilizationRates(h))
        mem = g(i, "memory", lambda: n.nvmlDeviceGetMemoryInfo(h))
        power = g(i, "power", lambda: n.nvmlDeviceGetPowerUsage(h))
        limit = g(i, "power_limit", lambda: n.nvmlDeviceGetEnforcedPowerLimit(h))
        pci = g(i, "pci", lambda: n.nvmlDeviceGetPciInfo(h))
        uuid = g(i, "uuid", lambda: n.nvmlDeviceGetUUID(h))
        bus = getattr(pci, "busId", None) if pci is not None else None
        ecc = {}
        for col, err_type, counter in (
            ("ecc_sbe_volatile", n.NVML_MEMORY_ERROR_TYPE_CORRECTED, n.NVML_VOLATILE_ECC),
            ("ecc_dbe_volatile", n.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, n.NVML_VOLATILE_ECC),
            ("ecc_sbe_total", n.NVML_MEMORY_ERROR_TYPE_CORRECTED, n.NVML_AGGREGATE_ECC),
            ("ecc_dbe_total", n.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, n.NVML_AGGREGATE_ECC),
        ):
            ecc[col] = g(i, col, lambda e=err_type, c=counter: int(n.nvmlDeviceGetTotalEccErrors(h, e, c)))
        static = self._static_fields(i, h)
        return {
            "ts": ts_ns,
            "gpu": i,
            "gpu_uuid": _text(uuid),
            "pci_bus_id": _text(bus),
            **static,
            "sm_util_pct": None if util is None else float(util.gpu),
            "mem_util_pct": None if util is None else float(util.memory),
            "power_w": None if power is None else power / 1000.0,
            "power_limit_w": None if limit is None else limit / 1000.0,
            "temp_c": g(i, "temp", lambda: float(n.nvmlDeviceGetTemperature(h, n.NVML_TEMPERATURE_GPU))),
            "sm_clock_mhz": g(i, "sm_clock", lambda: int(n.nvmlDeviceGetClockInfo(h, n.NVML_CLOCK_SM))),
            "sm_clock_max_mhz": g(i, "sm_clock_max", lambda: int(n.nvmlDeviceGetMaxClockInfo(h, n.NVML_CLOCK_SM))),
            "mem_used_bytes": None if mem is None else int(mem.used),
            "mem_total_bytes": None if mem is None else int(mem.total),
            "pcie_link_gen": g(i, "pcie_gen", lambda: int(n.nvmlDeviceGetCurrPcieLinkGeneration(h))),
            "pcie_link_gen_max": g(i, "pcie_gen_max", lambda: int(n.nvmlDeviceGetMaxPcieLinkGeneration(h))),
            "pcie_link_width": g(i, "pcie_width", lambda: int(n.nvmlDeviceGetCurrPcieLinkWidth(h))),
            "pcie_link_width_max": g(i, "pcie_width_max", lambda: int(n.nvmlDeviceGetMaxPcieLinkWidth(h))),
            "pcie_replay_errors_total": self._optional(i, "pcie_replay", "nvmlDeviceGetPcieReplayCounter", h),
            **ecc,
            "retired_pages": self._retired(i, h),
            "nvlink_crc_errors_total": self._crc(i, h),
            "throttle_reasons": self._throttle(i, h),
            "xid": self._last_xid.get(i),
        }

    @property
    def gpu_count(self) -> int:
        return len(self._handles) - len(self._lost)


def _text(v: Any) -> str | None:
    """NVML strings: bytes from old nvidia-ml-py releases, str from current ones."""
    return v.decode(errors="replace") if isinstance(v, bytes) else v


# --------------------------------------------------------------------------------------------- /proc


@dataclass(frozen=True)
class CpuTimes:
    busy: int
    total: int


def parse_proc_stat(text: str) -> CpuTimes:
    """The aggregate `cpu` line of /proc/stat: busy and total jiffies (idle + iowait are idle)."""
    for line in text.splitlines():
        if line.startswith("cpu "):
            v = [int(x) for x in line.split()[1:9]]
            v += [0] * (8 - len(v))
            total = sum(v)
            return CpuTimes(busy=total - v[3] - v[4], total=total)
    raise ValueError("no aggregate 'cpu' line in /proc/stat")


def parse_meminfo(text: str) -> tuple[int, int]:
    """(used_bytes, total_bytes) from /proc/meminfo: used = MemTotal - MemAvailable."""
    kv = {}
    for line in text.splitlines():
        k, _, rest = line.partition(":")
        parts = rest.split()
        if parts:
            kv[k.strip()] = int(parts[0]) * 1024
    total = kv["MemTotal"]
    avail = kv.get("MemAvailable", kv.get("MemFree", 0) + kv.get("Cached", 0) + kv.get("Buffers", 0))
    return total - avail, total


def parse_net_dev(text: str, skip: tuple[str, ...] = ("lo",)) -> tuple[int, int]:
    """Summed (rx_bytes, tx_bytes) over interfaces in /proc/net/dev, loopback excluded."""
    rx = tx = 0
    for line in text.splitlines()[2:]:
        name, sep, rest = line.partition(":")
        if not sep or name.strip() in skip:
            continue
        f = rest.split()
        rx += int(f[0])
        tx += int(f[8])
    return rx, tx


def parse_loadavg(text: str) -> float:
    return float(text.split()[0])


# InfiniBand / RoCE port counters (Linux Documentation/ABI/stable/sysfs-class-infiniband):
# /sys/class/infiniband/<dev>/ports/<port>/counters/port_{rcv,xmit}_data count data octets divided
# by 4; the error counters below are cumulative; ports/<port>/state reads "4: ACTIVE" when up.
_IB_ERROR_COUNTERS = (
    "symbol_error",
    "link_error_recovery",
    "port_rcv_errors",
    "local_link_integrity_errors",
    "excessive_buffer_overrun_errors",
)


@dataclass(frozen=True)
class IbCounters:
    ports: int
    ports_active: int
    rx_bytes: int
    tx_bytes: int
    link_downed: int  # cumulative, summed over ports
    errors: int  # cumulative, the _IB_ERROR_COUNTERS summed over ports


def _int_file(path: Path) -> int:
    try:
        return int(path.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 0


def read_ib_counters(ib_root: str | os.PathLike[str]) -> IbCounters | None:
    """All IB/RoCE ports under `ib_root` (/sys/class/infiniband) summed; None when there are none."""
    root = Path(ib_root)
    try:
        ports = sorted(p for dev in root.iterdir() for p in (dev / "ports").iterdir())
    except OSError:
        return None
    if not ports:
        return None
    active = rx = tx = downed = errors = 0
    for port in ports:
        try:
            active += "ACTIVE" in (port / "state").read_text()
        except OSError:
            pass
        c = port / "counters"
        rx += 4 * _int_file(c / "port_rcv_data")
        tx += 4 * _int_file(c / "port_xmit_data")
        downed += _int_file(c / "link_downed")
        errors += sum(_int_file(c / name) for name in _IB_ERROR_COUNTERS)
    return IbCounters(len(ports), active, rx, tx, downed, errors)


class HostSampler:
    """CPU, memory, network rates and load from /proc, IB/RoCE port counters from /sys (rates need
    two samples: the first is null)."""

    def __init__(
        self, proc_root: str | os.PathLike[str] = "/proc", ib_root: str | os.PathLike[str] = "/sys/class/infiniband"
    ) -> None:
        self.root = Path(proc_root)
        self.ib_root = Path(ib_root)
        self._prev: tuple[int, CpuTimes, int, int] | None = None
        self._prev_ib: tuple[int, IbCounters] | None = None

    def _read(self, rel: str) -> str:
        return (self.root / rel).read_text()

    def sample(self, ts_ns: int, gpu_count: int | None) -> dict[str, Any]:
        cpu = parse_proc_stat(self._read("stat"))
        used, total = parse_meminfo(self._read("meminfo"))
        rx, tx = parse_net_dev(self._read("net/dev"))
        row: dict[str, Any] = {
            "ts": ts_ns,
            "mem_used_bytes": used,
            "mem_total_bytes": total,
            "load1": parse_loadavg(self._read("loadavg")),
            "gpu_count": gpu_count,
            "cpu_util_pct": None,
            "net_rx_bytes_per_s": None,
            "net_tx_bytes_per_s": None,
        }
        if self._prev is not None:
            pts, pcpu, prx, ptx = self._prev
            dt = (ts_ns - pts) / 1e9
            dtot = cpu.total - pcpu.total
            if dtot > 0:
                row["cpu_util_pct"] = 100.0 * (cpu.busy - pcpu.busy) / dtot
            if dt > 0:
                row["net_rx_bytes_per_s"] = max(0, rx - prx) / dt
                row["net_tx_bytes_per_s"] = max(0, tx - ptx) / dt
        self._prev = (ts_ns, cpu, rx, tx)
        self._ib(ts_ns, row)
        return row

    def _ib(self, ts_ns: int, row: dict[str, Any]) -> None:
        ib = read_ib_counters(self.ib_root)
        if ib is None:
            return
        row.update(
            ib_ports=ib.ports,
            ib_ports_active=ib.ports_active,
            ib_link_downed=ib.link_downed,
            ib_errors=ib.errors,
            ib_rx_bytes_per_s=None,
            ib_tx_bytes_per_s=None,
        )
        if self._prev_ib is not None:
            pts, prev = self._prev_ib
            dt = (ts_ns - pts) / 1e9
            if dt > 0:
                row["ib_rx_bytes_per_s"] = max(0, ib.rx_bytes - prev.rx_bytes) / dt
                row["ib_tx_bytes_per_s"] = max(0, ib.tx_bytes - prev.tx_bytes) / dt
        self._prev_ib = (ts_ns, ib)


# --------------------------------------------------------------------------------------------- agent


@dataclass(frozen=True)
class AgentConfig:
    out_dir: Path
    host: str
    interval_s: float = 1.0
    flush_s: float = 10.0
    duration_s: float | None = None  # None: until stopped
    only_gpus: tuple[str, ...] | None = None  # report only these GPUs (CUDA_VISIBLE_DEVICES entries)
    expect_gpus: bool = True  # False (launch --local on a machine without GPUs): no NVML is no news


@dataclass
class AgentStats:
    samples: int = 0
    gpu_rows: int = 0
    host_rows: int = 0
    parts: list[Path] = field(default_factory=list)
    nvml: bool = False
    nvml_reason: str = ""


class MetricsAgent:
    """Samples every `interval_s`, flushes parts every `flush_s`; `run()` blocks until stopped."""

    def __init__(
        self,
        config: AgentConfig,
        *,
        nvml: Any = None,
        proc_root: str | os.PathLike[str] = "/proc",
        clock_ns: Callable[[], int] = time.time_ns,
    ) -> None:
        self.config = config
        self._nvml_module = nvml
        self.host_sampler = HostSampler(proc_root)
        self.clock_ns = clock_ns
        self.stats = AgentStats()
        self._gpu_rows: list[dict[str, Any]] = []
        self._host_rows: list[dict[str, Any]] = []
        self._seq = 0
        self.gpu: NvmlSampler | None = None

    def _open_nvml(self) -> None:
        try:
            sampler = NvmlSampler(self._nvml_module, only=self.config.only_gpus)
            count = sampler.open()
        except NvmlUnavailable as exc:
            self.stats.nvml_reason = str(exc)
            # The one line that says why there will be no gpu_metrics from this host.
            (logger.warning if self.config.expect_gpus else logger.info)(
                "%s: no GPU metrics (%s); recording host metrics only", self.config.host, exc
            )
            return
        self.gpu = sampler
        self.stats.nvml = True
        logger.info("%s: sampling %d GPUs through NVML every %.3g s", self.config.host, count, self.config.interval_s)

    def sample_once(self) -> None:
        ts = self.clock_ns()
        gpu_count = None
        if self.gpu is not None:
            rows = self.gpu.sample(ts)
            self._gpu_rows.extend(rows)
            gpu_count = self.gpu.gpu_count
        try:
            self._host_rows.append(self.host_sampler.sample(ts, gpu_count))
        except (OSError, ValueError, KeyError) as exc:
            logger.debug("host sample failed: %s", exc)
        self.stats.samples += 1

    def flush(self) -> None:
        cfg = self.config
        stamp = f"{os.getpid()}-{self._seq:06d}"
        for kind, rows, attr in (
            (SignalKind.GPU_METRICS, self._gpu_rows, "gpu_rows"),
            (SignalKind.HOST_METRICS, self._host_rows, "host_rows"),
        ):
            if not rows:
                continue
            table = pa.Table.from_pylist(rows, schema=schema_for(kind))
            self.stats.parts.append(write_table(cfg.out_dir, kind, cfg.host, table, part=f"agent-{stamp}"))
            setattr(self.stats, attr, getattr(self.stats, attr) + len(rows))
            rows.clear()
        self._seq += 1

    def run(self, stop: threading.Event | None = None) -> AgentStats:
        cfg = self.config
        stop = stop or threading.Event()
        self._open_nvml()
        start = time.monotonic()
        next_flush = start + cfg.flush_s
        k = 0
        try:
            while not stop.is_set():
                self.sample_once()
                k += 1
                now = time.monotonic()
                if now >= next_flush:
                    self.flush()
                    next_flush = now + cfg.flush_s
                if cfg.duration_s is not None and k * cfg.interval_s >= cfg.duration_s - 1e-9:
                    break
                # Fixed-rate schedule: a slow sample does not shift every later one.
                stop.wait(max(0.0, start + k * cfg.interval_s - time.monotonic()))
        finally:
            self.flush()
            if self.gpu is not None:
                self.gpu.close()
        return self.stats


@dataclass
class BackgroundAgent:
    agent: MetricsAgent
    thread: threading.Thread
    stop_event: threading.Event

    def stop(self, timeout_s: float = 10.0) -> AgentStats:
        """Stop sampling, flush what is buffered, and return the stats."""
        self.stop_event.set()
        self.thread.join(timeout_s)
        return self.agent.stats


def start_background(
    out_dir: str | os.PathLike[str],
    host: str,
    *,
    interval_s: float = 1.0,
    flush_s: float = 10.0,
    nvml: Any = None,
    only_gpus: tuple[str, ...] | None = None,
    expect_gpus: bool = True,
) -> BackgroundAgent:
    """Start one agent in a daemon thread beside a run (the launcher calls this once per host);
    `only_gpus`: the host's CUDA_VISIBLE_DEVICES entries (a simulated host of launch --local)."""
    agent = MetricsAgent(
        AgentConfig(Path(out_dir), host, interval_s, flush_s, only_gpus=only_gpus, expect_gpus=expect_gpus), nvml=nvml
    )
    stop = threading.Event()
    t = threading.Thread(target=agent.run, args=(stop,), name=f"trainctl-metrics-{host}", daemon=True)
    t.start()
    return BackgroundAgent(agent, t, stop)
