"""Metrics a fleet already scrapes, read into gpu_metrics / host_metrics (issue 17 item 5).

Many fleets run NVIDIA's dcgm-exporter and Prometheus' node-exporter already; their text output
(one scrape from a URL or a saved file) becomes the same rows trainctl's own agent writes, so faulty-
host analysis works without the agent. Parsing is prometheus_client's own text parser
(`text_string_to_metric_families`); this module only maps names, labels and units:

- dcgm-exporter: metric names are DCGM field names (NVIDIA/dcgm-exporter etc/default-counters.csv:
  DCGM_FI_DEV_SM_CLOCK in MHz, DCGM_FI_DEV_POWER_USAGE in W, DCGM_FI_DEV_FB_USED/FREE in MiB,
  DCGM_FI_DEV_XID_ERRORS the last Xid...), labels `gpu`, `UUID`, `pci_bus_id`, `modelName`,
  `Hostname`. DCGM reports "no value" with blank sentinels (dcgm_structs.h: DCGM_INT32_BLANK
  0x7ffffff0, DCGM_INT64_BLANK 0x7ffffffffffffff0, DCGM_FP64_BLANK 140737488355328.0), e.g.
  `DCGM_FI_DEV_MEMORY_TEMP ... 9223372036854775794` on a GPU without the sensor: read as null.
- node-exporter: node_load1, node_memory_MemTotal_bytes / MemAvailable_bytes,
  node_network_{receive,transmit}_bytes_total{device} and node_cpu_seconds_total{cpu,mode}
  (node_exporter collector/{loadavg,meminfo,netdev,cpu}_linux.go). Counters become rates between
  two scrapes of the same host; the first scrape has none.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

__all__ = ["DCGM_COLUMNS", "parse_dcgm", "NodeScrape", "parse_node", "host_rows", "is_dcgm", "is_node"]

# dcgm-exporter metric -> (gpu_metrics column, multiplier to the column's unit)
DCGM_COLUMNS: Mapping[str, tuple[str, float]] = {
    "DCGM_FI_DEV_GPU_UTIL": ("sm_util_pct", 1.0),
    "DCGM_FI_DEV_MEM_COPY_UTIL": ("mem_util_pct", 1.0),
    "DCGM_FI_DEV_POWER_USAGE": ("power_w", 1.0),
    "DCGM_FI_DEV_ENFORCED_POWER_LIMIT": ("power_limit_w", 1.0),
    "DCGM_FI_DEV_POWER_MGMT_LIMIT_DEF": ("power_limit_default_w", 1.0),
    "DCGM_FI_DEV_GPU_TEMP": ("temp_c", 1.0),
    "DCGM_FI_DEV_SLOWDOWN_TEMP": ("temp_slowdown_c", 1.0),
    "DCGM_FI_DEV_SM_CLOCK": ("sm_clock_mhz", 1.0),
    "DCGM_FI_DEV_MAX_SM_CLOCK": ("sm_clock_max_mhz", 1.0),
    "DCGM_FI_DEV_FB_USED": ("mem_used_bytes", 2**20),  # MiB
    "DCGM_FI_DEV_PCIE_LINK_GEN": ("pcie_link_gen", 1.0),
    "DCGM_FI_DEV_PCIE_MAX_LINK_GEN": ("pcie_link_gen_max", 1.0),
    "DCGM_FI_DEV_PCIE_LINK_WIDTH": ("pcie_link_width", 1.0),
    "DCGM_FI_DEV_PCIE_MAX_LINK_WIDTH": ("pcie_link_width_max", 1.0),
    "DCGM_FI_DEV_PCIE_REPLAY_COUNTER": ("pcie_replay_errors_total", 1.0),
    "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL": ("ecc_sbe_volatile", 1.0),
    "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL": ("ecc_dbe_volatile", 1.0),
    "DCGM_FI_DEV_ECC_SBE_AGG_TOTAL": ("ecc_sbe_total", 1.0),
    "DCGM_FI_DEV_ECC_DBE_AGG_TOTAL": ("ecc_dbe_total", 1.0),
    "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS": ("throttle_reasons", 1.0),
    "DCGM_FI_DEV_CLOCKS_EVENT_REASONS": ("throttle_reasons", 1.0),  # the field's newer name
    "DCGM_FI_DEV_XID_ERRORS": ("xid", 1.0),
}
# Summed into one column (the agent's own definitions: retired/remapped, CRC over all links).
_SUMMED: Mapping[str, str] = {
    "DCGM_FI_DEV_RETIRED_SBE": "retired_pages",
    "DCGM_FI_DEV_RETIRED_DBE": "retired_pages",
    "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS": "retired_pages",
    "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS": "retired_pages",
    "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL": "nvlink_crc_errors_total",
    "DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL": "nvlink_crc_errors_total",
}
_INT_COLUMNS = frozenset(
    {"sm_clock_mhz", "sm_clock_max_mhz", "mem_used_bytes", "mem_total_bytes", "pcie_link_gen", "pcie_link_gen_max",
     "pcie_link_width", "pcie_link_width_max", "pcie_replay_errors_total", "ecc_sbe_volatile", "ecc_dbe_volatile",
     "ecc_sbe_total", "ecc_dbe_total", "retired_pages", "nvlink_crc_errors_total", "throttle_reasons", "xid"}
)  # fmt: skip
_INT8 = frozenset({"pcie_link_gen", "pcie_link_gen_max", "pcie_link_width", "pcie_link_width_max"})


def _blank(v: float) -> bool:
    """DCGM's "no value" sentinels (dcgm_structs.h), and anything not a finite number."""
    return not math.isfinite(v) or v >= 140737488355328.0 or 0x7FFFFFF0 <= v <= 0x7FFFFFFF or v < 0


def _samples(text: str) -> Iterable[Any]:
    for family in text_string_to_metric_families(text):
        yield from family.samples


def is_dcgm(text: str) -> bool:
    return "DCGM_FI_" in text


def is_node(text: str) -> bool:
    return "node_" in text


def parse_dcgm(text: str, *, ts_ns: int, host: str | None = None) -> dict[str, list[dict[str, Any]]]:
    """One dcgm-exporter scrape -> gpu_metrics rows by host (the `Hostname` label, else `host`)."""
    rows: dict[tuple[str, int], dict[str, Any]] = {}
    free: dict[tuple[str, int], float] = {}
    for s in _samples(text):
        name = s.name
        col = DCGM_COLUMNS.get(name)
        summed = _SUMMED.get(name)
        if col is None and summed is None and name != "DCGM_FI_DEV_FB_FREE":
            continue
        labels = s.labels
        try:
            gpu = int(labels.get("gpu", ""))
        except ValueError:
            continue
        h = labels.get("Hostname") or host
        if not h or not 0 <= gpu < 2**15:
            continue
        key = (h, gpu)
        row = rows.setdefault(
            key,
            {"ts": ts_ns, "gpu": gpu, "gpu_uuid": labels.get("UUID"), "pci_bus_id": labels.get("pci_bus_id"),
             "gpu_name": labels.get("modelName")},
        )  # fmt: skip
        v = float(s.value)
        if _blank(v):
            continue
        if name == "DCGM_FI_DEV_FB_FREE":
            free[key] = v * 2**20
        elif summed is not None:
            row[summed] = int(row.get(summed) or 0) + int(v)
        else:
            column, scale = col  # type: ignore[misc]
            value = v * scale
            if column == "xid":
                row[column] = int(value) if value else None  # 0: no Xid yet
            elif column in _INT_COLUMNS:
                row[column] = int(value) if column not in _INT8 or value < 128 else None
            else:
                row[column] = value
    for key, f in free.items():
        used = rows[key].get("mem_used_bytes")
        if used is not None:
            rows[key]["mem_total_bytes"] = int(used + f)
    out: dict[str, list[dict[str, Any]]] = {}
    for (h, _), row in sorted(rows.items()):
        out.setdefault(h, []).append(row)
    return out


@dataclass(frozen=True)
class NodeScrape:
    """One node-exporter scrape of one host: gauges as read, counters as cumulative totals."""

    ts_ns: int
    load1: float | None = None
    mem_total_bytes: int | None = None
    mem_available_bytes: int | None = None
    net_rx_bytes: float | None = None  # summed over devices other than loopback
    net_tx_bytes: float | None = None
    cpu_seconds: Mapping[str, float] = field(default_factory=dict)  # mode -> seconds over all CPUs


_SKIP_NICS = ("lo",)


def parse_node(text: str, *, ts_ns: int) -> NodeScrape:
    load1 = mem_total = mem_avail = None
    rx = tx = None
    cpu: dict[str, float] = {}
    for s in _samples(text):
        v = float(s.value)
        if not math.isfinite(v):
            continue
        if s.name == "node_load1":
            load1 = v
        elif s.name == "node_memory_MemTotal_bytes":
            mem_total = int(v)
        elif s.name == "node_memory_MemAvailable_bytes":
            mem_avail = int(v)
        elif s.name in ("node_network_receive_bytes_total", "node_network_transmit_bytes_total"):
            if s.labels.get("device", "") in _SKIP_NICS:
                continue
            if s.name.startswith("node_network_receive"):
                rx = (rx or 0.0) + v
            else:
                tx = (tx or 0.0) + v
        elif s.name == "node_cpu_seconds_total":
            mode = s.labels.get("mode", "")
            cpu[mode] = cpu.get(mode, 0.0) + v
    return NodeScrape(ts_ns, load1, mem_total, mem_avail, rx, tx, cpu)


def host_rows(scrapes: Sequence[NodeScrape]) -> list[dict[str, Any]]:
    """host_metrics rows of one host's scrapes (in time order); rates from consecutive pairs."""
    out: list[dict[str, Any]] = []
    prev: NodeScrape | None = None
    for s in sorted(scrapes, key=lambda x: x.ts_ns):
        row: dict[str, Any] = {
            "ts": s.ts_ns,
            "load1": s.load1,
            "mem_total_bytes": s.mem_total_bytes,
            "mem_used_bytes": None
            if s.mem_total_bytes is None or s.mem_available_bytes is None
            else s.mem_total_bytes - s.mem_available_bytes,
        }
        if prev is not None and s.ts_ns > prev.ts_ns:
            dt = (s.ts_ns - prev.ts_ns) / 1e9
            for col, now, before in (("net_rx_bytes_per_s", s.net_rx_bytes, prev.net_rx_bytes),
                                     ("net_tx_bytes_per_s", s.net_tx_bytes, prev.net_tx_bytes)):  # fmt: skip
                if now is not None and before is not None and now >= before:  # a reset is no rate
                    row[col] = (now - before) / dt
            total = sum(s.cpu_seconds.values()) - sum(prev.cpu_seconds.values())
            idle = sum(s.cpu_seconds.get(m, 0.0) - prev.cpu_seconds.get(m, 0.0) for m in ("idle", "iowait"))
            if total > 0:
                row["cpu_util_pct"] = max(0.0, min(100.0, 100.0 * (1.0 - idle / total)))
        out.append(row)
        prev = s
    return out
