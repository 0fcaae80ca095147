"""Faulty hosts: hard evidence by meaning, and peer outliers that hold up under healthy variance.

Input: `gpu_metrics`, `host_metrics` (1 Hz samplers, trainctl.schemas), optionally `log_events`
(Xid lines). Hosts `collect` could not reach are analyzers/coverage.py's finding, merged with this
host's evidence by analyzers/consolidate.py. Output: one Finding per (host, category), naming only
that host and listing the evidence from it; analyzers.consolidate later merges a host's findings.

Hard evidence, categorised by what it means (each finding names the GPU, the values and when):
- ecc: uncorrectable (DBE) counts that *increase* inside the data, retired/remapped rows that grow,
  or correctable (SBE) errors arriving faster than `sbe_rate_per_min`; old, constant counts are
  history, not a fault.
- xid: codes by meaning (XID_TABLE); codes usually caused by the application (13, 31, 43, 45)
  never blame a host on their own.
- gpu_lost: a GPU whose samples stop while its host keeps reporting, `gpu_count` dropping, fewer
  GPUs than the fleet's usual count, or Xid 79.
- pcie_downgrade: link generation or width below the device's maximum *while the GPU is loaded*
  (idle links train down legitimately: nvidia-smi documents that current generation and width
  "may be reduced when the GPU is not in use"); where no maximum is reported, below what most GPUs
  of its SKU run at under load.
- power: an enforced power limit below the board's default or below the usual limit of the GPU's
  peers (same SKU), held for a persistence window; a lower limit shared by at least
  `power_policy_fraction` of the peers, on 2 hosts or more, is site policy, not a fault. The limit
  is named in W.
  Also the HW power brake bit (an external power brake, e.g. the PSU or BMC), persisting.
- thermal: HW/SW thermal slowdown bits (or HW slowdown alone), persisting.
- nvlink: CRC errors at or above `crc_rate_per_s` (NVIDIA's line: DCGM's health watch fails a link
  at 100 CRC errors/s, "RM has informed us that CRC errors only matter at rates of 100+ per
  second", DCGM DcgmGpuHardwareLimits.h), or Xid 74; below it, DCGM's per-minute warning held (a
  median of CRC_SUSTAINED_PER_MIN a minute over CRC_SUSTAINED_MINUTES minutes), a weaker warning.
- unreachable: a host whose samples stop while the fleet keeps reporting.

Peer outliers (Minder, NSDI'25, made robust): machines of one job behave alike, so a host that
departs from its peers by an amount that matters physically, for long enough, is suspect. Unlike
Minder's min-max normalised distances, every comparison here is in physical units and like with
like:
- peers: GPUs of the same SKU (gpu_name), default and enforced power limit (and, if given, the
  same role: `peer_groups`; `analyze` takes pipeline stages from the run's grid), in seconds
  where both the GPU and its group are working (group median utilisation >= `load_util_pct`;
  the GPU itself not idle). Idle phases, staggered starts and checkpoints are not compared, nor
  the first `late_start_warmup_s` of a machine that starts working well after most of its peers.
- deviation: a machine's mean over `outlier_window` samples (Minder's w = 8) minus the group's
  median of those means, in the metric's own unit; the machine's median over the window must
  clear the floor too (a few deep dips move a mean, not a median).
- both significance and effect: the deviation must exceed `outlier_z` robust standard deviations
  (1.4826 x MAD across the group's machines in that window) *and* a floor in physical units
  (`floor_clock_mhz`, `floor_power_w`, ...), in the direction that costs the job (a slower clock,
  less power drawn for the same work, a hotter GPU, more CPU taken, less network moved).
- peers and own history: a departure that starts inside the data needs one floor from the peers
  and one from the machine's own usual level; one that holds for the whole data (a role, a bin,
  a rack, or a fault older than the data: the data cannot tell them apart) needs
  `persistent_floor_factor` floors.
- not a crowd: windows where more than `max_outlier_fraction` of a group's hosts deviate are a
  fleet-wide event (checkpoint, data stall, a job-wide slowdown) and blame nobody.
- continuity (Minder's): the machine must be the outlier in >= `continuity_fraction` of its last
  `continuity_s` comparable seconds (Minder: 4 min; ours 120 s, see BENCHMARKS.md).
The fleet reference is a median over (a fixed sample of) the group's machines, not all pairwise
distances, and the denoiser is the window mean, not a per-metric LSTM-VAE: O(hosts x time).

Everything is vectorised on (host, gpu, second) numpy grids: no Python loop over rows or seconds.
"""

from __future__ import annotations

import logging
import warnings
from collections import Counter
from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as pads

from trainctl.findings import Category, Finding, FindingKind, Severity
from trainctl.footer_reads import read_columns
from trainctl.nvml_codes import (
    HW_POWER_BRAKE,
    HW_SLOWDOWN,
    HW_THERMAL,
    SW_POWER_CAP,
    SW_THERMAL,
    THROTTLE_BITS,
)
from trainctl.rundir import RunInfo
from trainctl.schemas import SignalKind
from trainctl.signals import Signals

__all__ = [
    "XidInfo",
    "XID_TABLE",
    "xid_info",
    "THROTTLE_BITS",
    "OutlierMetric",
    "DEFAULT_OUTLIER_METRICS",
    "TEMPERATURE_OUTLIER",
    "find_faulty_hosts",
    "pipeline_roles",
    "analyze",
]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class XidInfo:
    meaning: str
    category: Category
    severity: Severity
    blames_host: bool  # False: usually the application's doing (bad kernel, illegal address)


_C, _W, _I = Severity.CRITICAL, Severity.WARNING, Severity.INFO
# Xid codes by meaning. Code numbers and names: NVIDIA open-gpu-kernel-modules,
# src/common/sdk/nvidia/inc/nverror.h (ROBUST_CHANNEL_GPU_ECC_DBE 48, INFOROM_PAGE_RETIREMENT_EVENT
# 63 / _FAILURE 64, NVLINK_ERROR 74, ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS 79,
# EXCESSIVE_SBE_INTERRUPTS 92, ROBUST_CHANNEL_CONTAINED_ERROR 94 / _UNCONTAINED_ERROR 95,
# GSP_RPC_TIMEOUT 119, GSP_ERROR 120, C2C_ERROR 121); meanings and the codes above 125 from NVIDIA's
# Xid catalog (docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html) and the dynamic page
# retirement guide (docs.nvidia.com/deploy/dynamic-page-retirement: 48 DBE, 63 retired, 64 failed).
# See also the fault catalogue in /work/shared/research/seeds.md (section 4).
XID_TABLE: Mapping[int, XidInfo] = {
    8: XidInfo("GPU stopped processing (channel idle timeout)", Category.XID, _W, False),
    13: XidInfo("graphics engine exception (usually the application)", Category.XID, _I, False),
    31: XidInfo("GPU memory page fault (usually an illegal address in the application)", Category.XID, _I, False),
    32: XidInfo("invalid or corrupted push buffer stream (PCIe/DMA corruption or driver)", Category.XID, _W, True),
    38: XidInfo("driver firmware error", Category.XID, _C, True),
    43: XidInfo("GPU stopped processing: the application hit a fault and was reset", Category.XID, _I, False),
    45: XidInfo("preemptive cleanup after earlier errors (follows another Xid)", Category.XID, _I, False),
    48: XidInfo("double-bit (uncorrectable) ECC error", Category.ECC, _C, True),
    56: XidInfo("display engine error", Category.XID, _W, True),
    57: XidInfo("error programming video memory interface", Category.XID, _C, True),
    58: XidInfo("unstable video memory interface detected", Category.XID, _C, True),
    61: XidInfo("internal micro-controller breakpoint/warning", Category.XID, _W, True),
    62: XidInfo("internal micro-controller halt", Category.XID, _C, True),
    63: XidInfo("ECC page retirement or row remapping recorded (reset the GPU to apply)", Category.ECC, _W, True),
    64: XidInfo("ECC page retirement or row remapping FAILED (replace the GPU)", Category.ECC, _C, True),
    68: XidInfo("video processor (NVDEC) exception", Category.XID, _W, True),
    69: XidInfo("graphics engine class error", Category.XID, _W, True),
    74: XidInfo("NVLink error", Category.NVLINK, _C, True),
    79: XidInfo("GPU has fallen off the bus", Category.GPU_LOST, _C, True),
    92: XidInfo("excessive single-bit (correctable) ECC error interrupts", Category.ECC, _W, True),
    94: XidInfo("contained ECC error (affected application killed; reset the GPU)", Category.ECC, _C, True),
    95: XidInfo("uncontained ECC error (all applications on the GPU affected; reset)", Category.ECC, _C, True),
    109: XidInfo("context switch timeout", Category.XID, _W, True),
    119: XidInfo("GSP RPC timeout (GPU System Processor not responding)", Category.XID, _C, True),
    120: XidInfo("GSP error", Category.XID, _C, True),
    121: XidInfo("C2C link corrected error", Category.NVLINK, _W, True),
    140: XidInfo("unrecovered ECC error", Category.ECC, _C, True),
    143: XidInfo("GPU initialization failure", Category.XID, _C, True),
    **{c: XidInfo("NVLink5 / NVSwitch link error (Blackwell)", Category.NVLINK, _C, True) for c in range(144, 151)},
    154: XidInfo("GPU recovery action changed: the driver asks for a GPU reset or node reboot", Category.XID, _C, True),
}


def xid_info(code: int) -> XidInfo:
    return XID_TABLE.get(
        int(code),
        XidInfo(f"Xid {int(code)} (not in trainctl's table; see the NVIDIA Xid catalog)", Category.XID, _W, True),
    )


@dataclass(frozen=True)
class OutlierMetric:
    """A metric compared with peers: where it lives, which direction costs the job, its floor.

    `floor_kw` names the find_faulty_hosts keyword argument that holds the metric's noise floor,
    in `unit`; `scale` converts that unit to the column's (GB/s -> bytes/s).
    """

    table: str  # "gpu" (one series per GPU) or "host"
    column: str  # a gpu_metrics / host_metrics column, or "net_bytes_per_s" (rx + tx)
    direction: int  # -1: a fault shows below its peers; +1: above
    floor_kw: str
    unit: str
    scale: float = 1.0
    # Averaging window in seconds; None: `outlier_window` samples (Minder's 8). Bursty counters
    # (network bytes, sampled at 1 Hz against multi-second training steps) need several steps.
    window_s: float | None = None
    # A deviation must also be this share of the peers' median (None: no relative condition).
    # Network links degrade in steps of lanes (a 400G port training at 200G, one of two ports
    # down): a NIC that matters moves half of what its peers move, not a few percent less.
    min_relative: float | None = None
    category: Category = Category.METRIC_OUTLIER  # what the departure means


# A GPU heating away from its peers at equal work: a cooling problem before it throttles (a fan,
# a heatsink, a loop). Rack and chassis position spread healthy GPUs by up to ~20 C, steadily, so
# only a rise from the GPU's own level counts at one floor; a steady offset needs two.
TEMPERATURE_OUTLIER = OutlierMetric("gpu", "temp_c", +1, "floor_temp_c", "C", category=Category.THERMAL)

# The Minder metrics NVML and /proc give us, each in the direction that slows a synchronous job.
DEFAULT_OUTLIER_METRICS: tuple[OutlierMetric, ...] = (
    OutlierMetric("gpu", "sm_clock_mhz", -1, "floor_clock_mhz", "MHz"),
    OutlierMetric("gpu", "power_w", -1, "floor_power_w", "W"),
    OutlierMetric("gpu", "sm_util_pct", -1, "floor_util_pct", "%"),
    TEMPERATURE_OUTLIER,
    OutlierMetric("host", "cpu_util_pct", +1, "floor_cpu_pct", "%"),
    OutlierMetric("host", "net_bytes_per_s", -1, "floor_net_gb_per_s", "GB/s", 1e9, window_s=16.0, min_relative=0.4),
)

_GPU_COLS = (
    "ts",
    "gpu",
    "host",
    "gpu_name",
    "sm_util_pct",
    "power_w",
    "power_limit_w",
    "power_limit_default_w",
    "sm_clock_mhz",
    "pcie_link_gen",
    "pcie_link_gen_max",
    "pcie_link_width",
    "pcie_link_width_max",
    "ecc_sbe_volatile",
    "ecc_sbe_total",
    "ecc_dbe_total",
    "ecc_dbe_volatile",
    "retired_pages",
    "nvlink_crc_errors_total",
    "throttle_reasons",
    "xid",
    "temp_c",
    "mem_total_bytes",  # a SKU's fingerprint where gpu_name is not exported (_peer_link)
)
# Read only for a host that already has a finding (evidence, not judgement): a 7M-row scan of
# columns nobody judges by is the costliest part of a fleet-wide diagnosis.
_EVIDENCE_COLS = ("temp_slowdown_c", "pcie_replay_errors_total")
_HOST_COLS = ("ts", "host", "cpu_util_pct", "net_rx_bytes_per_s", "net_tx_bytes_per_s", "gpu_count")


# The scans allocate from the C library's malloc, not Arrow's default pool (mimalloc): mimalloc
# returns freed memory to the OS within milliseconds and takes fresh (huge) pages for the next
# buffers, and on the dev VM first-touching fresh memory costs ~2.6 ms per MB of system time.
# malloc keeps what a scan frees for the next file and for numpy's grids (BENCHMARKS.md).
_READ_POOL = pa.system_memory_pool()


def _as_table(t: Any, columns: Iterable[str]) -> pa.Table | None:
    if t is None:
        return None
    if isinstance(t, pd.DataFrame):
        t = pa.Table.from_pandas(t, preserve_index=False)
    if isinstance(t, pads.Dataset):
        names = set(t.schema.names)
        # Columns a file's footer proves constant (counters that never moved) are not read.
        return read_columns(t, [c for c in columns if c in names], _READ_POOL)
    names = set(t.column_names)
    return t.select([c for c in columns if c in names])


def _np(t: pa.Table, name: str, dtype: Any = np.float64) -> np.ndarray:
    """Column as numpy; nulls (and an absent column) become NaN. Converted once, in `dtype`."""
    if name not in t.column_names:
        return np.full(t.num_rows, np.nan, dtype)
    col = t.column(name)
    if pa.types.is_timestamp(col.type):
        return col.cast(pa.int64()).to_numpy()
    if col.null_count:
        col = pc.fill_null(col.cast(pa.float32() if dtype == np.float32 else pa.float64()), np.nan)
    return col.to_numpy().astype(dtype, copy=False)


def _host_codes(t: pa.Table, index: dict[str, int]) -> np.ndarray:
    """Host name -> code per row. A dataset's host column comes from the partition path: each
    chunk is one file, so one host; reading its first value beats encoding 7M strings."""
    col = t.column("host")
    chunks = col.chunks if isinstance(col, pa.ChunkedArray) else [col]
    out = np.empty(len(col), np.int32)  # codes < hosts: half the fresh memory of int64
    pos = 0
    for ch, single in zip(chunks, _single_values(col, len(chunks))):
        n = len(ch)
        if n == 0:
            continue
        if single is not None:
            out[pos : pos + n] = index.setdefault(single, len(index))
            pos += n
            continue
        if not pa.types.is_dictionary(ch.type):
            ch = pc.dictionary_encode(ch)
        remap = np.array([index.setdefault(v, len(index)) for v in ch.dictionary.to_pylist()], np.int32)
        out[pos : pos + n] = remap[ch.indices.to_numpy(zero_copy_only=False)]
        pos += n
    return out


def _single_values(col: pa.Array | pa.ChunkedArray, n_chunks: int) -> list[Any]:
    """Per chunk of `col`: its value when every row holds that one non-null value, else None.

    One run-end encoding of the whole column (neighbours compared in C++) answers for every
    chunk at once; a compute call per chunk (min_max) cost 2-3x more on a 1,024-file dataset.
    """
    if pa.types.is_dictionary(col.type):
        return [None] * n_chunks
    encoded = pc.run_end_encode(col)
    runs = encoded.chunks if isinstance(encoded, pa.ChunkedArray) else [encoded]
    if len(runs) != n_chunks:  # chunks not aligned: decide per chunk the slow way
        return [None] * n_chunks
    return [r.values[0].as_py() if len(r.run_ends) == 1 and r.values.null_count == 0 else None for r in runs]


def _grid(
    flat_idx: np.ndarray, values: Any, shape: tuple[int, ...], fill: Any = np.nan, dtype: Any = np.float64
) -> np.ndarray:
    g = np.full(int(np.prod(shape)), fill, dtype)
    g[flat_idx] = values
    return g.reshape(shape)


def _window_sum(x: np.ndarray, w: int, dtype: Any = np.float64) -> np.ndarray:
    """Sum of the last `w` samples along the last axis (fewer at the start)."""
    c = np.cumsum(x, axis=-1, dtype=dtype)
    c[..., w:] -= c[..., :-w].copy()
    return c


def _window_median(x: np.ndarray, valid: np.ndarray, w: int) -> np.ndarray:
    """Median of the valid samples among the last `w` along the last axis (NaN where none), for a few rows: the
    machines that reached a floor somewhere, not the fleet."""
    v = np.where(valid, x, np.nan).astype(np.float32)
    padded = np.concatenate([np.full((v.shape[0], w - 1), np.nan, np.float32), v], axis=1)
    win = np.sort(np.lib.stride_tricks.sliding_window_view(padded, w, axis=1), axis=-1)  # NaN sort last
    n = (~np.isnan(win)).sum(-1)
    lo = np.clip((n - 1) // 2, 0, None)[..., None]
    hi = np.clip(n // 2, 0, w - 1)[..., None]
    m = 0.5 * (np.take_along_axis(win, lo, -1)[..., 0] + np.take_along_axis(win, hi, -1)[..., 0])
    return np.where(n > 0, m, np.nan)


def _ffill(x: np.ndarray) -> np.ndarray:
    valid = ~np.isnan(x)
    idx = np.where(valid, np.arange(x.shape[-1]), 0)
    np.maximum.accumulate(idx, axis=-1, out=idx)
    return np.take_along_axis(x, idx, axis=-1)


def _nanmedian0(x: np.ndarray) -> np.ndarray:
    """Median over axis 0 ignoring NaN (NaN where a column has none): one sort, no Python loop."""
    if x.shape[0] == 0:
        return np.full(x.shape[1:], np.nan, np.float32)
    s = np.sort(x, axis=0)  # NaN sort last
    n = (~np.isnan(x)).sum(axis=0)
    lo = np.clip((n - 1) // 2, 0, None)
    hi = np.clip(n // 2, 0, x.shape[0] - 1)
    m = 0.5 * (np.take_along_axis(s, lo[None], 0)[0] + np.take_along_axis(s, hi[None], 0)[0])
    return np.where(n > 0, m, np.nan)


def _iso(ts_ns: float | int) -> str:
    return pd.Timestamp(int(ts_ns), unit="ns", tz="UTC").isoformat(timespec="milliseconds")


def _r(v: Any, nd: int = 1) -> float | None:
    if v is None:
        return None
    v = float(v)
    return None if np.isnan(v) else round(v, nd)


class _Collector:
    """Accumulates evidence per (host, category) and turns it into Findings."""

    def __init__(self) -> None:
        self.items: dict[tuple[str, Category], dict[str, Any]] = {}

    def add(
        self,
        host: str,
        cat: Category,
        severity: Severity,
        confidence: float,
        summary: str,
        detected_ns: int | None,
        first_ns: int | None,
        evidence: dict[str, Any],
    ) -> None:
        key = (host, cat)
        cur = self.items.get(key)
        ev = {k: v for k, v in evidence.items() if v is not None}
        if detected_ns is not None:
            ev["detected_ts"] = _iso(detected_ns)
        if first_ns is not None:
            ev["first_evidence_ts"] = _iso(first_ns)
        entry = {
            "severity": severity,
            "confidence": confidence,
            "summary": summary,
            "evidence": [ev],
            "detected_ns": detected_ns,
        }
        if cur is None:
            self.items[key] = entry
            return
        cur["evidence"].append(ev)
        if severity.rank > cur["severity"].rank:
            cur["severity"], cur["summary"] = severity, summary
        cur["confidence"] = max(cur["confidence"], confidence)
        if detected_ns is not None and (cur["detected_ns"] is None or detected_ns < cur["detected_ns"]):
            cur["detected_ns"] = detected_ns

    def findings(self) -> list[Finding]:
        out = []
        for (host, cat), e in sorted(self.items.items(), key=lambda kv: (kv[0][0], kv[0][1].value)):
            ev: dict[str, Any] = {"signals": e["evidence"]}
            if e["detected_ns"] is not None:
                ev["detected_ts"] = _iso(e["detected_ns"])
            extra = f" (+{len(e['evidence']) - 1} more)" if len(e["evidence"]) > 1 else ""
            out.append(
                Finding(
                    FindingKind.FAULTY_HOST,
                    e["severity"],
                    e["summary"] + extra,
                    cat,
                    (host,),
                    (),
                    round(float(e["confidence"]), 3),
                    ev,
                )
            )
        return out


@dataclass(frozen=True)
class _Thresholds:
    load_util_pct: float
    idle_util_pct: float
    persist_window_s: float
    persist_fraction: float
    crc_rate_per_s: float
    crc_window_s: float
    sbe_rate_per_min: float
    sbe_window_s: float
    power_limit_margin_w: float
    power_policy_fraction: float
    lost_grace_s: float
    stale_s: float
    outlier_window: int
    outlier_z: float
    floors: Mapping[str, float]
    continuity_s: float
    continuity_fraction: float
    persistent_floor_factor: float
    max_outlier_fraction: float
    min_fleet_hosts: int
    late_start_warmup_s: float
    outlier_metrics: tuple[OutlierMetric, ...]
    peer_groups: Mapping[str, str] | None


def find_faulty_hosts(
    gpu_metrics: Any = None,
    host_metrics: Any = None,
    log_events: Any = None,
    *,
    interval_s: float | None = None,
    load_util_pct: float = 50.0,
    idle_util_pct: float = 5.0,
    persist_window_s: float = 60.0,
    persist_fraction: float = 0.5,
    crc_rate_per_s: float = 100.0,
    crc_window_s: float = 60.0,
    sbe_rate_per_min: float = 10.0,
    sbe_window_s: float = 60.0,
    power_limit_margin_w: float = 20.0,
    power_policy_fraction: float = 0.2,
    lost_grace_s: float = 10.0,
    stale_s: float = 60.0,
    outlier_window: int = 8,
    outlier_z: float = 3.5,
    floor_clock_mhz: float = 200.0,
    floor_power_w: float = 100.0,
    floor_util_pct: float = 20.0,
    floor_cpu_pct: float = 25.0,
    floor_net_gb_per_s: float = 4.0,
    floor_temp_c: float = 15.0,
    continuity_s: float = 120.0,
    continuity_fraction: float = 0.8,
    persistent_floor_factor: float = 1.5,
    max_outlier_fraction: float = 0.1,
    min_fleet_hosts: int = 4,
    late_start_warmup_s: float = 300.0,
    outlier_metrics: tuple[OutlierMetric, ...] = DEFAULT_OUTLIER_METRICS,
    peer_groups: Mapping[str, str] | None = None,
    ib_error_rate_per_min: float = 10.0,
) -> list[Finding]:
    """Name the faulty hosts in a fleet's metrics and logs; one Finding per (host, category).

    Thresholds (all keyword arguments; physical units in the names):
      interval_s: sampling period; estimated from the data when None.
      load_util_pct: SM utilisation at which a GPU counts as loaded (PCIe rule) and at which a
        group's median makes a second comparable (peer outliers). idle_util_pct: below it a GPU
        is idle and not compared with working peers.
      persist_window_s, persist_fraction: a throttle bit, a loaded PCIe downgrade or a lowered
        power limit must hold in this fraction of a window of this length (blips do not alarm).
      crc_rate_per_s, crc_window_s: NVLink CRC errors per second over the window; 100/s is the
        rate NVIDIA's DCGM health check fails a link at (DcgmGpuHardwareLimits.h).
      sbe_rate_per_min, sbe_window_s: correctable ECC errors per minute over the window
        (DCGM_LIMIT_MAX_SBE_RATE is 10, which NVIDIA marks as a placeholder).
      power_limit_margin_w: how far below the default (or the peers' usual) limit an enforced
        limit must be to count as lowered. power_policy_fraction: a lower limit shared by at
        least this share of a SKU's GPUs is site policy (a capped pod or fleet), not a fault.
      lost_grace_s: a GPU silent this long while its host reports is lost.
      stale_s: a host silent this long while the fleet reports is unreachable.
      outlier_window (Minder: 8 samples); outlier_z: robust z (1.4826 x MAD across the group's
        machines, per window) a deviation must exceed; floor_clock_mhz, floor_power_w,
        floor_util_pct, floor_cpu_pct, floor_net_gb_per_s, floor_temp_c: the smallest deviation
        from the group's median, in physical units, that counts (healthy spread stays below:
        BENCHMARKS.md, "Faulty hosts"); continuity_s (Minder: 240 s; ours 60 s) and
        continuity_fraction: share of the comparable windows of the last continuity_s in which
        the machine must be the outlier; persistent_floor_factor: a departure that holds for the
        whole data (no onset to see: as persistent as a role or a silicon bin) must reach this
        many floors, while one that starts inside the data needs one floor from its peers and
        one from its own usual level; max_outlier_fraction: above this share of a group's
        hosts deviating at once it is a fleet-wide event; min_fleet_hosts: fewer hosts in a peer
        group, no comparison. late_start_warmup_s: a GPU (host) that starts working more than
        persist_window_s after its peer group's median start is not compared for this long (it
        warms up while they run).
      outlier_metrics: which metrics to compare (DEFAULT_OUTLIER_METRICS; TEMPERATURE_OUTLIER
        is available). peer_groups: host -> role (pipeline stage, data-loader host, ...) so
        machines are compared only with machines of the same role.
      ib_error_rate_per_min: growth of a host's summed IB port error counters (symbol, link
        recovery, receive, integrity, overrun: host_metrics.ib_errors) per minute, over the data,
        past which its links are degrading (_ib_rules).
    """
    col = _Collector()
    th = _Thresholds(
        load_util_pct,
        idle_util_pct,
        persist_window_s,
        persist_fraction,
        crc_rate_per_s,
        crc_window_s,
        sbe_rate_per_min,
        sbe_window_s,
        power_limit_margin_w,
        power_policy_fraction,
        lost_grace_s,
        stale_s,
        outlier_window,
        outlier_z,
        {
            "floor_clock_mhz": floor_clock_mhz,
            "floor_power_w": floor_power_w,
            "floor_util_pct": floor_util_pct,
            "floor_cpu_pct": floor_cpu_pct,
            "floor_net_gb_per_s": floor_net_gb_per_s,
            "floor_temp_c": floor_temp_c,
        },
        continuity_s,
        continuity_fraction,
        persistent_floor_factor,
        max_outlier_fraction,
        min_fleet_hosts,
        late_start_warmup_s,
        tuple(outlier_metrics),
        peer_groups,
    )
    gt = _as_table(gpu_metrics, _GPU_COLS)
    # One scan of host_metrics for both uses: a second scan of a 1,024-file dataset costs its
    # per-file overhead again (0.4-0.5 CPU s of the scale benchmark for two shared columns).
    h_all = _as_table(host_metrics, dict.fromkeys(_HOST_COLS + _IB_COLS))
    ht = _as_table(h_all, _HOST_COLS)
    gt = gt if gt is not None and gt.num_rows else None
    ht = ht if ht is not None and ht.num_rows else None
    if gt is not None or ht is not None:
        _metrics(col, gt, ht, th, interval_s, _HostRows(gpu_metrics))
    if host_metrics is not None:
        _ib_rules(col, _as_table(h_all, _IB_COLS), ib_error_rate_per_min)
    if log_events is not None:
        _log_xids(col, _as_table(log_events, ("ts", "host", "xid", "source", "line_no", "message", "gpu_pci")))
    return col.findings()


_IB_COLS = ("ts", "host", "ib_ports", "ib_ports_active", "ib_link_downed", "ib_errors")


def _ib_rules(col: _Collector, t: pa.Table | None, error_rate_per_min: float) -> None:
    """InfiniBand/RoCE ports of each host (host_metrics' ib_* columns, from /sys/class/infiniband).

    What the kernel's counters prove about this host's own HCA ports (Documentation/ABI/stable/
    sysfs-class-infiniband): a port that was ACTIVE earlier in the data and is not now went down
    (critical: its traffic is gone or rerouted); a growing `link_downed` (the port's link went down
    and came back, i.e. flapped) and error counters growing past `error_rate_per_min` are a
    degrading link (warning, below a runbook's eviction gate: the cable or the switch port on the
    other end may be the fault as well). A port that never was active in the data (an uncabled
    second port) says nothing. Hosts without the columns (no HCA, older agents) are skipped.
    """
    if t is None or not t.num_rows or "ib_ports" not in t.column_names:
        return
    df = t.to_pandas().dropna(subset=["ib_ports"]).sort_values(["host", "ts"])
    for host, d in df.groupby("host", sort=True):
        ts = d["ts"].astype("int64").to_numpy() if str(d["ts"].dtype).startswith("datetime") else d["ts"].to_numpy()
        active = d["ib_ports_active"].to_numpy(dtype=float)
        peak_i = int(np.nanargmax(active)) if np.isfinite(active).any() else None
        if peak_i is not None and np.isfinite(active[-1]) and active[-1] < active[peak_i]:
            down_i = peak_i + int(np.argmax(active[peak_i:] < active[peak_i]))
            col.add(
                str(host), Category.IB, Severity.CRITICAL, 0.9,
                f"{host}: InfiniBand/RoCE port down ({int(active[peak_i])} -> {int(active[-1])} of "
                f"{int(d['ib_ports'].iloc[-1])} ports active)",
                int(ts[down_i]), int(ts[down_i]),
                {"metric": "ib_ports_active", "from": int(active[peak_i]), "to": int(active[-1])},
            )  # fmt: skip
        for metric, what in (("ib_link_downed", "link went down and came back (flapping)"), ("ib_errors", "")):
            v = d[metric].to_numpy(dtype=float)
            ok = np.isfinite(v)
            if ok.sum() < 2:
                continue
            vs, tss = v[ok], ts[ok]
            grew = vs[-1] - vs[0]
            span_min = max((tss[-1] - tss[0]) / 60e9, 1e-9)
            if metric == "ib_link_downed":
                hit = grew > 0
                summary = f"{host}: IB port {what}: link_downed {vs[0]:.0f} -> {vs[-1]:.0f}"
            else:
                hit = grew / span_min >= error_rate_per_min
                summary = f"{host}: IB port errors growing at {grew / span_min:.0f}/min ({vs[0]:.0f} -> {vs[-1]:.0f})"
            if hit:
                first = int(np.argmax(vs > vs[0]))
                col.add(
                    str(host), Category.IB, Severity.WARNING, 0.85, summary, int(tss[first]), int(tss[first]),
                    {"metric": metric, "from": float(vs[0]), "to": float(vs[-1]), "span_min": round(span_min, 2)},
                )  # fmt: skip


class _HostRows:
    """One host's rows of evidence-only columns, read on demand (cached per host)."""

    def __init__(self, source: Any) -> None:
        self.source = source
        self.cache: dict[str, pd.DataFrame | None] = {}

    def get(self, host: str) -> pd.DataFrame | None:
        if host in self.cache:
            return self.cache[host]
        src, df = self.source, None
        try:
            if isinstance(src, pads.Dataset):
                cols = [c for c in ("gpu", "ts", *_EVIDENCE_COLS) if c in src.schema.names]
                df = src.to_table(columns=cols, filter=pc.field("host") == host).to_pandas()
            elif src is not None:
                t = src if isinstance(src, pa.Table) else pa.Table.from_pandas(src, preserve_index=False)
                hosts = t.column("host")
                if pa.types.is_dictionary(hosts.type):
                    hosts = hosts.cast(pa.string())
                cols = [c for c in ("gpu", "ts", *_EVIDENCE_COLS) if c in t.column_names]
                df = t.filter(pc.equal(hosts, host)).select(cols).to_pandas()
        except (pa.ArrowInvalid, pa.ArrowTypeError, KeyError) as exc:  # evidence only: never fail the diagnosis
            logger.debug("evidence columns for %s unavailable: %s", host, exc)
        self.cache[host] = df
        return df

    def per_gpu(self, host: str, gpu: int, column: str, between_ns: tuple[int, int] | None = None) -> pd.Series | None:
        """One GPU's values of `column`, in time order (optionally only between two timestamps)."""
        df = self.get(host)
        if df is None or column not in df.columns:
            return None
        d = df.loc[df["gpu"] == gpu]
        ts = d["ts"].astype("int64") if len(d) else d["ts"]
        if between_ns is not None:
            d = d.loc[(ts >= between_ns[0]) & (ts <= between_ns[1])]
        v = d.sort_values("ts")[column].dropna()
        return v if len(v) else None


_BLOCK_ROWS = 1 << 16  # rows per block where a row-sized temporary is avoided
MAX_GRID_CELLS = 200_000_000  # (host x 1 s bins): 1,024 hosts x 2 days; ~1.6 GB per float64 grid


class _Frame:
    """The (host, gpu, second) coordinates shared by every rule."""

    def __init__(self, gt: pa.Table | None, ht: pa.Table | None, interval_s: float | None) -> None:
        index: dict[str, int] = {}
        self.g_host = _host_codes(gt, index) if gt is not None else None
        self.h_host = _host_codes(ht, index) if ht is not None else None
        self.names = list(index)
        self.H = len(self.names)
        self.g_ts = _np(gt, "ts") if gt is not None else None
        self.h_ts = _np(ht, "ts") if ht is not None else None
        self.t0 = int(min(x.min() for x in (self.g_ts, self.h_ts) if x is not None))
        if interval_s is None:
            interval_s = _estimate_interval(self.g_ts, self.g_host, self.h_ts, self.h_host)
        self.interval_s = float(interval_s)
        self.step_ns = self.interval_s * 1e9
        self._step = max(1, int(round(self.step_ns)))
        self.T = 1 + int(
            max(round((x.max() - self.t0) / self.step_ns) for x in (self.g_ts, self.h_ts) if x is not None)
        )
        if self.T * max(1, self.H) > MAX_GRID_CELLS:
            # A stray timestamp (a clock years off, a file's mtime) would make every (host, time)
            # grid below enormous: refuse with the numbers; diagnose reports the analyzer skipped.
            raise ValueError(
                f"metrics span {self.T * self.interval_s / 86400:.1f} days at {self.interval_s:g} s for {self.H} host(s): "
                f"over {MAX_GRID_CELLS:,} (host, time) cells; diagnose a shorter time range"
            )
        self.g_tb = self.tbin(self.g_ts) if self.g_ts is not None else None
        self.h_tb = self.tbin(self.h_ts) if self.h_ts is not None else None

    def tbin(self, ts: np.ndarray) -> np.ndarray:
        """Time bin of each timestamp (< T, so int32), computed in blocks: no row-sized int64
        temporaries (fresh memory costs more to touch than the arithmetic on it)."""
        out = np.empty(len(ts), np.int32)
        for s in range(0, len(ts), _BLOCK_ROWS):
            b = ts[s : s + _BLOCK_ROWS] - self.t0
            b += self._step // 2
            np.floor_divide(b, self._step, out=out[s : s + _BLOCK_ROWS])
        return out

    def ts_of(self, i: Any) -> Any:
        return self.t0 + np.asarray(i, np.int64) * int(self.step_ns)

    def samples(self, seconds: float) -> int:
        return max(1, int(round(seconds / self.interval_s)))


def _metrics(
    col: _Collector,
    gt: pa.Table | None,
    ht: pa.Table | None,
    th: _Thresholds,
    interval_s: float | None,
    rows: _HostRows,
) -> None:
    fr = _Frame(gt, ht, interval_s)
    names, H, T = fr.names, fr.H, fr.T
    host_last = np.full(H, -1, np.int64)
    # At least 2 samples: one sample cannot show a condition held (at 30 s sampling a 60 s window is 2 samples, and
    # "half of it" was a single sample of a thermal bit on a hot-aisle GPU 10 C below its slowdown temperature).
    pw = max(2, fr.samples(th.persist_window_s))
    gpu_ctx: _GpuContext | None = None

    if gt is not None:
        gpu_ctx = _GpuContext(gt, fr, th)
        g = gpu_ctx
        host_last = np.maximum(host_last, g.last_g.max(axis=1))
        _throttle_rules(col, gt, g, fr, th, pw, rows)
        _power_limit_rule(col, gt, g, fr, th, pw)
        _capped_below_peers(col, gt, g, fr, th, pw)
        _pcie_rule(col, gt, g, fr, th, pw, rows)
        _ecc_rules(col, gt, g, fr, th)
        _nvlink_rule(col, gt, g, fr, th)
        _nvml_xids(col, gt, g, fr)
        if ht is not None:
            np.maximum.at(host_last, fr.h_host, fr.h_tb)
        _lost_gpus(col, g, fr, th, host_last)

    if ht is not None:
        h_flat = fr.h_host * T + fr.h_tb
        np.maximum.at(host_last, fr.h_host, fr.h_tb)
        gc = _np(ht, "gpu_count")
        if not np.isnan(gc).all():
            gcg = _grid(h_flat, gc, (H, T))
            top = np.nanmax(np.where(np.isnan(gcg), -np.inf, gcg), axis=1)
            drop = gcg < top[:, None]
            for h in np.flatnonzero(drop.any(-1)):
                f = int(drop[h].argmax())
                col.add(
                    names[h],
                    Category.GPU_LOST,
                    Severity.CRITICAL,
                    0.9,
                    f"{names[h]}: NVML GPU count fell from {int(top[h])} to {int(np.nanmin(gcg[h]))}",
                    int(fr.ts_of(f)),
                    int(fr.ts_of(f)),
                    {"metric": "gpu_count", "from": int(top[h]), "to": int(np.nanmin(gcg[h]))},
                )

    # --- unreachable: the whole host went silent while the fleet kept reporting.
    stale = fr.samples(th.stale_s)
    fleet_last = int(host_last.max())
    for h in np.flatnonzero((host_last >= 0) & (host_last < fleet_last - stale)):
        col.add(
            names[h],
            Category.UNREACHABLE,
            Severity.CRITICAL,
            0.85,
            f"{names[h]} stopped reporting metrics at {_iso(fr.ts_of(host_last[h]))}; the fleet reported "
            f"{(fleet_last - host_last[h]) * fr.interval_s:.0f} s longer",
            int(fr.ts_of(host_last[h] + stale)),
            int(fr.ts_of(host_last[h] + 1)),
            {
                "last_sample_ts": _iso(fr.ts_of(host_last[h])),
                "silent_s": float((fleet_last - host_last[h]) * fr.interval_s),
            },
        )

    _peer_outliers(col, gt, ht, gpu_ctx, fr, th)


class _GpuContext:
    """Per-GPU grids and identities used by several rules (built once)."""

    def __init__(self, gt: pa.Table, fr: _Frame, th: _Thresholds) -> None:
        H, T = fr.H, fr.T
        gpu = gt.column("gpu").to_numpy()
        self.G = G = int(gpu.max()) + 1
        self.gpu = gpu
        # Row indices in int32 where the grid allows: every row-sized array is fresh memory.
        idx = np.int32 if H * G * T < 2**31 else np.int64
        self.unit = unit = fr.g_host.astype(idx)
        unit *= G
        unit += gpu
        self.flat = unit * T
        self.flat += fr.g_tb
        self.shape = (H, G, T)
        present = _grid(self.flat, True, self.shape, False, bool)
        self.present_any = present.any(-1)  # (H, G)
        self.last_g = np.where(self.present_any, T - 1 - present[..., ::-1].argmax(-1), -1)
        self.gpu_present_count = self.present_any.sum(axis=1)
        del present
        util = _np(gt, "sm_util_pct", np.float32)
        self.util = _grid(self.flat, util, self.shape, np.nan, np.float32)
        if np.isnan(util).all():  # no utilisation reported: every sample counts as loaded
            self.loaded = _grid(self.flat, True, self.shape, False, bool)
            self.working = self.loaded
        else:
            self.loaded = self.util >= th.load_util_pct
            self.working = self.util >= th.idle_util_pct
        # One row per GPU (any of its rows: they agree) for what is fixed per GPU: SKU, default limit.
        self.row_of_unit = np.full(H * G, -1, np.int64)
        for s in range(0, len(unit), _BLOCK_ROWS):  # the last row wins, as one assignment would
            self.row_of_unit[unit[s : s + _BLOCK_ROWS]] = np.arange(s, min(s + _BLOCK_ROWS, len(unit)))
        self.sku = self._unit_strings(gt, "gpu_name")
        have = self.row_of_unit >= 0
        self.default_w = np.full(H * G, np.nan)
        if "power_limit_default_w" in gt.column_names:
            d = gt.column("power_limit_default_w").take(pa.array(self.row_of_unit[have]))
            self.default_w[have] = pc.fill_null(d.cast(pa.float64()), np.nan).to_numpy()
        lim = _np(gt, "power_limit_w", np.float32)
        self.limit_grid: np.ndarray | None = None
        if not np.isnan(lim).all():
            lo, hi = float(np.nanmin(lim)), float(np.nanmax(lim))
            if lo == hi:
                self.unit_limit = np.where(self.row_of_unit >= 0, lo, np.nan)
            else:
                self.limit_grid = _grid(self.flat, lim, self.shape, np.nan, np.float32)
                filled = _ffill(self.limit_grid.reshape(H * G, T))
                filled = _ffill(filled[:, ::-1])[:, ::-1]  # leading gaps take the first value
                self.unit_limit = np.partition(filled, T // 2, axis=1)[:, T // 2]
        else:
            self.unit_limit = np.full(H * G, np.nan)

    def moving(self, gt: pa.Table, name: str) -> tuple[np.ndarray, np.ndarray] | None:
        """The GPUs (units: host * G + gpu) whose `name` holds more than one value, and their
        (unit, time) grid of it; None when there are none. A counter rule only looks at these:
        a grid of every GPU costs ~0.15 CPU s per counter at 1,024 hosts, for one GPU that moved."""
        col = gt.column(name) if name in gt.column_names else None
        if col is None or col.null_count == len(col):
            return None
        mm = pc.min_max(col)
        if mm["min"].as_py() == mm["max"].as_py():
            return None  # one value everywhere: nothing can have grown
        # A GPU that varies holds a value other than the fleet's minimum (nulls kept as well); the
        # comparison stays in Arrow: converting the whole column to float costs 5x more.
        other = pc.fill_null(pc.not_equal(col, mm["min"]), True).to_numpy(zero_copy_only=False)
        units = np.unique(self.unit[other])
        pos = np.full(len(self.row_of_unit), -1, np.int64)
        pos[units] = np.arange(len(units))
        rows = np.flatnonzero((pos >= 0)[self.unit])  # a bool per row, not an int64 per row
        v = _np(pa.table({name: col.take(rows)}), name)
        T = self.shape[2]
        return units, _grid(pos[self.unit[rows]] * T + self.flat[rows] % T, v, (len(units), T))

    def _unit_strings(self, gt: pa.Table, name: str) -> list[str | None]:
        n = len(self.row_of_unit)
        if name not in gt.column_names:
            return [None] * n
        have = np.flatnonzero(self.row_of_unit >= 0)
        vals = gt.column(name).take(pa.array(self.row_of_unit[have])).to_pylist()
        out: list[str | None] = [None] * n
        for u, v in zip(have, vals):
            out[int(u)] = v
        return out

    def sku_key(self, u: int) -> tuple[Any, ...]:
        return (self.sku[u], _r(self.default_w[u], 0))


def _estimate_interval(
    g_ts: np.ndarray | None, g_host: np.ndarray | None, h_ts: np.ndarray | None, h_host: np.ndarray | None
) -> float:
    ts, host = (h_ts, h_host) if h_ts is not None else (g_ts, g_host)
    one = np.unique(ts[host == host[0]])
    if len(one) < 2:
        return 1.0
    return max(0.001, float(np.median(np.diff(one))) / 1e9)


def _persist_rule(
    col: _Collector,
    names: list[str],
    on: np.ndarray,
    pw: int,
    frac: float,
    fr: _Frame,
    cat: Category,
    sev: Severity,
    conf: float,
    what: Any,
    base: dict[str, Any],
    extra: Any = None,
    also: np.ndarray | None = None,
) -> None:
    """Alarm (host, gpu) where `on` holds in >= frac of a window of pw samples, and in 2 samples at least, or where
    `also` is True (a rule's other way of showing the condition held).

    `what` is the summary's description, or a callable (h, g, evidence) -> description.
    """
    held = _window_sum(on, pw, np.float32)
    hit = (held >= frac * pw) & (held >= 2)
    if also is not None:
        hit |= also
    hh, gg = np.nonzero(hit.any(-1))
    if not len(hh):
        return
    det = hit[hh, gg].argmax(-1)
    first = on[hh, gg].argmax(-1)
    n_on = on[hh, gg].sum(-1)
    for h, g, d, f, n in zip(hh, gg, det, first, n_on):
        ev = {
            "gpu": int(g),
            **base,
            "samples_with_condition": int(n),
            "window_s": pw * fr.interval_s,
            "min_fraction": frac,
        }
        if extra is not None:
            ev.update({k: v for k, v in extra(h, g).items() if v is not None})
        desc = what(h, g, ev) if callable(what) else what
        col.add(
            names[h],
            cat,
            sev,
            conf,
            f"GPU {g} on {names[h]}: {desc} in {int(n)} samples from {_iso(fr.ts_of(f))}",
            int(fr.ts_of(d)),
            int(fr.ts_of(f)),
            ev,
        )


def _held_to_the_end(on: np.ndarray, last: np.ndarray) -> np.ndarray:
    """(H, G, T): True at a GPU's last sample where `on` holds in its last 2 samples (a condition its data ends in);
    `last` (H, G) is each GPU's last sample index (-1: none)."""
    out = np.zeros_like(on)
    hh, gg = np.nonzero(last >= 1)
    k = last[hh, gg]
    end = on[hh, gg, k] & on[hh, gg, k - 1]
    out[hh[end], gg[end], k[end]] = True
    return out


def _throttle_rules(
    col: _Collector, gt: pa.Table, g: _GpuContext, fr: _Frame, th: _Thresholds, pw: int, rows: _HostRows
) -> None:
    """Clock-event reasons by meaning (nvml.h, nvmlClocksEventReasons): thermal, power brake."""
    thr = gt.column("throttle_reasons") if "throttle_reasons" in gt.column_names else None
    if thr is None or thr.null_count == len(thr):
        return
    bits = _reason_bits(thr)
    # One pass tells which bits occur at all: a fleet without slowdowns skips each rule's passes.
    seen = int(np.bitwise_or.reduce(bits))
    temp_g = None

    def temps(h: int, gi: int) -> dict[str, Any]:
        nonlocal temp_g
        if temp_g is None:
            temp_g = _grid(g.flat, _np(gt, "temp_c", np.float32), g.shape, np.nan, np.float32)
        t = temp_g[h, gi]
        sd = rows.per_gpu(fr.names[h], int(gi), "temp_slowdown_c")
        return {
            "temp_c_max": None if np.isnan(t).all() else _r(np.nanmax(t)),
            "temp_slowdown_c": None if sd is None else _r(sd.max()),
        }

    # HW thermal slowdown and the HW power brake are the hardware protecting itself (nvml.h), and DCGM's health watch
    # warns on any thermal violation time in its minute (DcgmHealthWatch.cpp, MonitorThermal). One that the data
    # ends in (its GPU's last 2 samples) has no window left to fill and was not seen to pass, so it counts as held;
    # one that comes and goes inside the data still needs the window. The SW thermal bit is the driver's (a hot GPU
    # raises it for a sample now and then), so it never counts this way.
    for cat, mask, what, extra in (
        (Category.THERMAL, HW_THERMAL | SW_THERMAL, "thermal slowdown (clocks cut to hold the temperature)", temps),
        (Category.POWER, HW_POWER_BRAKE, "HW power brake slowdown (an external power brake: PSU or BMC)", None),
    ):
        if not seen & mask:
            continue
        on = (bits & np.uint64(mask)) != 0
        hard = (bits & np.uint64(mask & (HW_THERMAL | HW_POWER_BRAKE))) != 0
        _persist_rule(
            col,
            fr.names,
            _grid(g.flat, on, g.shape, False, bool),
            pw,
            th.persist_fraction,
            fr,
            cat,
            Severity.WARNING,
            0.95,
            what,
            {"throttle_mask": hex(mask)},
            extra=extra,
            also=_held_to_the_end(_grid(g.flat, hard, g.shape, False, bool), g.last_g),
        )
    # HW slowdown alone (no thermal / brake bit): NVML says it means temperature too high, an
    # external power brake, or power above the fast-trigger limit; the temperature decides.
    if not seen & HW_SLOWDOWN:
        return
    alone = ((bits & np.uint64(HW_SLOWDOWN)) != 0) & ((bits & np.uint64(HW_THERMAL | SW_THERMAL | HW_POWER_BRAKE)) == 0)
    if alone.any():
        _persist_rule(
            col,
            fr.names,
            _grid(g.flat, alone, g.shape, False, bool),
            pw,
            th.persist_fraction,
            fr,
            Category.THERMAL,
            Severity.WARNING,
            0.8,
            "HW slowdown (clocks halved by hardware; cause not reported)",
            {"throttle_mask": hex(HW_SLOWDOWN)},
            extra=temps,
        )


def _peers_name(sku_key: tuple[Any, ...]) -> str:
    """A SKU group as the power findings name it: "NVIDIA H100 80GB HBM3 (default 700 W)"."""
    return f"{sku_key[0] or 'GPUs'}" + (f" (default {sku_key[1]:g} W)" if sku_key[1] is not None else "")


def _power_limit_rule(col: _Collector, gt: pa.Table, g: _GpuContext, fr: _Frame, th: _Thresholds, pw: int) -> None:
    """An enforced power limit below the board's default or below what its peers run at.

    Peers are GPUs of the same SKU and default limit; their usual limit is the one most run at.
    A lower limit is site policy, not a fault, when at least `power_policy_fraction` of the GPUs
    share it: of the GPU's peers, or of the whole fleet (in watts, or as a share of the default:
    a capped pod of racks holds several SKUs).
    """
    if np.isnan(g.unit_limit).all():
        return
    H, G = fr.H, g.G
    units = np.flatnonzero(~np.isnan(g.unit_limit))
    lim_u = np.round(g.unit_limit)
    with np.errstate(invalid="ignore", divide="ignore"):
        ratio_u = np.round(g.unit_limit / g.default_w, 2)

    def frequent(values: np.ndarray, us: np.ndarray) -> np.ndarray:
        """Values of `values[us]` that at least power_policy_fraction of those GPUs share, on 2 hosts or more: a
        site's policy caps a pod or a fleet, while one host alone under a lower limit is that host's (in a small
        or mixed fleet one host can be a fifth of its SKU: 8 capped H100s of 16 were read as policy)."""
        ok = ~np.isnan(values[us])
        v, hosts = values[us][ok], np.asarray(us)[ok] // G
        if not len(v):
            return v
        vals, counts = np.unique(v, return_counts=True)
        return np.array(
            [
                x
                for x, c in zip(vals, counts, strict=True)
                if c / len(v) >= th.power_policy_fraction and len(np.unique(hosts[v == x])) >= 2
            ]
        )

    fleet_w, fleet_ratio = frequent(lim_u, units), frequent(ratio_u, units)
    by_sku: dict[tuple[Any, ...], list[int]] = {}
    for u in units:
        by_sku.setdefault(g.sku_key(int(u)), []).append(int(u))
    usual = np.full(H * G, np.nan)
    sku_of = np.full(H * G, -1, np.int64)
    sku_policy: list[np.ndarray] = []
    group_info: dict[int, dict[str, Any]] = {}
    for k, (key, us) in enumerate(by_sku.items()):
        vals, counts = np.unique(lim_u[us], return_counts=True)
        mode = float(vals[counts == counts.max()].max())  # a tie goes to the higher limit: faults lower a limit
        usual[us] = mode
        sku_of[us] = k
        sku_policy.append(frequent(lim_u, np.asarray(us)))
        info = {
            "peers": _peers_name(key),
            "peer_gpus": len(us),
            "peer_usual_limit_w": mode,
            "peer_limits_w": {f"{v:g}": int(c) for v, c in zip(vals, counts)},
        }
        for u in us:
            group_info[u] = info
    dflt = g.default_w.reshape(H, G)
    usual_hg = usual.reshape(H, G)
    if g.limit_grid is None:  # one limit everywhere: nothing can be below its peers
        lim_grid = np.broadcast_to(g.unit_limit.reshape(H, G)[:, :, None], g.shape)
        if not (g.unit_limit < g.default_w - th.power_limit_margin_w).any():
            return
    else:
        lim_grid = g.limit_grid
    with np.errstate(invalid="ignore"):
        low = (lim_grid < dflt[:, :, None] - th.power_limit_margin_w) | (
            lim_grid < usual_hg[:, :, None] - th.power_limit_margin_w
        )
    if g.limit_grid is None:
        low = low & _grid(g.flat, True, g.shape, False, bool)
    if not low.any():
        return
    hh, gg, tt = np.nonzero(low)
    lv = np.round(lim_grid[hh, gg, tt])
    with np.errstate(invalid="ignore", divide="ignore"):
        rv = np.round(lim_grid[hh, gg, tt] / dflt[hh, gg], 2)
    policy = np.isin(lv, fleet_w) | np.isin(rv, fleet_ratio)
    sk = sku_of[hh * G + gg]
    for k, vals in enumerate(sku_policy):
        if len(vals):
            at = sk == k
            policy[at] |= np.isin(lv[at], vals)
    low[hh[policy], gg[policy], tt[policy]] = False
    if not low.any():
        return
    fleet_policy = sorted(float(v) for v in fleet_w if v < np.nanmax(g.default_w) - th.power_limit_margin_w)

    def extra(h: int, gi: int) -> dict[str, Any]:
        sel = low[h, gi]
        lim_v = float(np.nanmin(np.where(sel, lim_grid[h, gi], np.nan)))
        info = group_info.get(h * G + gi, {})
        return {
            "enforced_limit_w": lim_v,
            "default_limit_w": _r(dflt[h, gi], 0),
            **info,
            "site_policy_limits_w": fleet_policy or None,
        }

    def what(h: int, gi: int, ev: dict[str, Any]) -> str:
        below = []
        if (
            ev.get("default_limit_w") is not None
            and ev["enforced_limit_w"] < ev["default_limit_w"] - th.power_limit_margin_w
        ):
            below.append(f"the default {ev['default_limit_w']:g} W")
        if (
            ev.get("peer_usual_limit_w") is not None
            and ev["enforced_limit_w"] < ev["peer_usual_limit_w"] - th.power_limit_margin_w
        ):
            below.append(f"the {ev['peer_usual_limit_w']:g} W its peers run at")
        return f"enforced power limit {ev['enforced_limit_w']:g} W, below {' and '.join(below)}"

    _persist_rule(
        col,
        fr.names,
        low,
        pw,
        th.persist_fraction,
        fr,
        Category.POWER,
        Severity.WARNING,
        0.95,
        what,
        {"metric": "power_limit_w", "margin_w": th.power_limit_margin_w},
        extra=extra,
    )


# A link's usual value among its SKU's GPUs is a reference only when this share of them run at it under load: a
# downgrade is a few GPUs (the catalogue's 1-4), while two platforms of one SKU (gen 4 and gen 5 hosts) are two
# populations, neither below "the" usual link. The SKU is `gpu_name`, else the board's memory and default power limit
# (an exporter without the name: L40S 48 GB and H100 PCIe 80 GB, both 350 W, read as one SKU named a third of a
# clean fleet's hosts downgraded); with none of them no peer reference is taken.
_LINK_MAJORITY = 0.75


def _peer_link(gt: pa.Table, g: _GpuContext, cur: str) -> np.ndarray | None:
    """Per row, the link value (`cur`: gen or width) most GPUs of its SKU run at under load: the reference where the
    exporter reports no maximum (DESIGN.md's minimum columns have none, nor does dcgm-exporter's default set). Each
    GPU counts once, by its median under load; a value held by at least _LINK_MAJORITY of the SKU's GPUs, of a known
    SKU. None where no GPU is loaded."""
    vals = _np(gt, cur, np.float32)
    use = g.loaded.reshape(-1)[g.flat] & ~np.isnan(vals)
    if not use.any():
        return None
    units = g.unit[use]
    order = np.argsort(units, kind="stable")
    units, v = units[order], vals[use][order]
    cut = np.flatnonzero(np.diff(units)) + 1
    per_unit = {int(us[0]): float(np.median(vs)) for us, vs in zip(np.split(units, cut), np.split(v, cut), strict=True)}
    mem = np.full(len(g.sku), np.nan)
    if "mem_total_bytes" in gt.column_names:
        have = g.row_of_unit >= 0
        col = gt.column("mem_total_bytes").take(pa.array(g.row_of_unit[have]))
        mem[have] = pc.fill_null(col.cast(pa.float64()), np.nan).to_numpy()

    def sku_of(u: int) -> tuple[Any, ...] | None:
        parts = (g.sku[u], _r(mem[u] / 2**30, 0), _r(g.default_w[u], 0))
        return parts if any(p is not None for p in parts) else None

    skus = [sku_of(u) for u in range(len(g.sku))]
    by_sku: dict[tuple[Any, ...], list[float]] = {}
    for u, m in per_unit.items():
        if (k := skus[u]) is not None:
            by_sku.setdefault(k, []).append(m)
    usual = {}
    for sku, ms in by_sku.items():
        x, c = np.unique(np.asarray(ms), return_counts=True)
        if c.max() >= _LINK_MAJORITY * len(ms):
            usual[sku] = float(x[c.argmax()])
    if not usual:
        return None
    ref_u = np.array([usual.get(k, np.nan) if k is not None else np.nan for k in skus], np.float32)
    return ref_u[g.unit]


# What a link can be found below, stored per row as an index (a row below on gen and width keeps the first).
_LINK_BASES = ("device_max", "peers_under_load", "own_history_under_load", "host_siblings_under_load")


_LINK_VALUES = 33  # gen 1-6, width 1-32: one count per (GPU, value), no sort


def _link_counts(gt: pa.Table, g: _GpuContext, cur: str) -> np.ndarray | None:
    """(GPU unit, link value) -> samples under load at that value (`cur`: gen or width); None where none is loaded."""
    vals = _np(gt, cur, np.float32)
    use = g.loaded.reshape(-1)[g.flat] & ~np.isnan(vals)
    if not use.any():
        return None
    n_units, top = len(g.row_of_unit), _LINK_VALUES
    v = np.clip(vals[use], 0, top - 1).astype(np.int64)
    return np.bincount(g.unit[use].astype(np.int64) * top + v, minlength=n_units * top).reshape(n_units, top)


def _sibling_link(counts: np.ndarray, g: _GpuContext) -> np.ndarray:
    """Per row, the link value the GPUs of its host run at under load, where at least 4 of its GPUs are loaded and
    _LINK_MAJORITY of them hold that value (each GPU by the value it holds most under load): a host's GPUs sit on one
    baseboard (HGX, DGX, OAM), one SKU on one PCIe topology, so the odd one out trained down, even from its first
    sample. NaN where the host has too few loaded GPUs or no majority."""
    H, G, top = g.shape[0], g.G, _LINK_VALUES
    has = counts.any(1)
    mode = counts.argmax(1)  # each GPU's usual value under load
    per_host = np.bincount((np.arange(H * G) // G * top + mode)[has], minlength=H * top).reshape(H, top)
    n = per_host.sum(1)
    ok = (n >= 4) & (per_host.max(1) >= _LINK_MAJORITY * n)
    ref_h = np.where(ok, per_host.argmax(1), np.nan).astype(np.float32)
    return np.repeat(ref_h, G)[g.unit]


def _own_link(counts: np.ndarray, g: _GpuContext, pw: int) -> np.ndarray:
    """Per row, the highest link value its own GPU held under load for a persistence window (pw samples) or more:
    where neither a maximum nor a known SKU's peers give a reference (no `_max`, no `gpu_name`, memory or default
    limit). A link that ran at x16 under load and now runs at x4 under load has trained down, whatever the SKU; one
    that ran at x4 from its first loaded sample has no history to depart from."""
    held = counts >= pw
    ref_u = np.where(held.any(1), _LINK_VALUES - 1 - held[:, ::-1].argmax(1), np.nan).astype(np.float32)
    return ref_u[g.unit]


def _capped_below_peers(col: _Collector, gt: pa.Table, g: _GpuContext, fr: _Frame, th: _Thresholds, pw: int) -> None:
    """A GPU whose enforced limit is not reported, held at its power cap while it draws `floor_power_w` less than
    the loaded GPUs of its SKU at the same moment: it runs under a lower limit than they do.

    NVML's SW power cap reason (nvml.h nvmlClocksEventReasonSwPowerCap: "the SW Power Scaling algorithm is reducing
    the clocks below requested clocks because the GPU is consuming too much power") says the limit binds, so the
    power it draws is its limit; healthy GPUs of one SKU under one limit draw within tens of watts of each other at
    equal load. (Where power_limit_w is reported, _power_limit_rule reads the limit itself.) A lower draw shared by
    `power_policy_fraction` of the SKU on 2 hosts or more is a site's policy, as there.

    At a moment when most of those GPUs are not at their cap, `power_limit_margin_w` below them is enough: under one
    limit a capped GPU draws that limit, at or above what uncapped peers draw, so a capped GPU drawing less than
    they do has a lower limit (silicon that wants more power reaches the cap first, and draws more, not less)."""
    if "throttle_reasons" not in gt.column_names or "power_w" not in gt.column_names:
        return
    unknown = np.isnan(g.unit_limit)
    if not unknown.any():
        return
    bits = _reason_bits(gt.column("throttle_reasons"))
    capped = (bits & np.uint64(SW_POWER_CAP)) != 0
    if not capped.any():
        return
    H, G, T = g.shape
    power = _grid(g.flat, _np(gt, "power_w", np.float32), (H * G, T), np.nan, np.float32)
    loaded = g.loaded.reshape(H * G, T)
    on_cap = _grid(g.flat, capped, (H * G, T), False, bool)
    floor = th.floors["floor_power_w"]
    on = np.zeros((H * G, T), bool)
    groups: dict[tuple[Any, ...], list[int]] = {}
    for u in np.flatnonzero(g.row_of_unit >= 0):
        groups.setdefault(g.sku_key(int(u)), []).append(int(u))
    refs: dict[tuple[Any, ...], np.ndarray] = {}  # per SKU, the loaded GPUs' median draw at each moment
    for key, us in groups.items():
        us_a = np.asarray(us)
        if len(np.unique(us_a // G)) < 2 or not (unknown[us_a] & on_cap[us_a].any(1)).any():
            continue
        sampled = us_a[_sample_rows(len(us_a))]
        ref = refs[key] = _nanmedian0(np.where(loaded[sampled], power[sampled], np.nan))
        n_loaded = loaded[sampled].sum(0)
        peers_capped = (loaded[sampled] & on_cap[sampled]).sum(0) * 2 > n_loaded
        need = np.where(peers_capped, floor, th.power_limit_margin_w)
        cand = us_a[unknown[us_a]]
        with np.errstate(invalid="ignore"):
            on[cand] = loaded[cand] & on_cap[cand] & (ref[None, :] - power[cand] >= need[None, :])
        held = _window_sum(on[cand], pw, np.float32)
        hit = cand[((held >= th.persist_fraction * pw) & (held >= 2)).any(1)]
        if len(hit) and _shared_low_cap(hit, us_a, on, power, loaded, G, th):
            on[cand] = False  # a capped pod or fleet (or an unnamed second SKU): policy, not one host's fault
    if not on.any():
        return

    def extra(h: int, gi: int) -> dict[str, Any]:
        u = h * G + gi
        sel = on[u]
        key = g.sku_key(u)
        return {
            "power_w_median": _r(np.nanmedian(power[u][sel])),
            "peer_power_w_median": _r(np.nanmedian(refs[key][sel])),
            "peers": _peers_name(key),
            "enforced_limit_w": None,
        }

    _persist_rule(
        col,
        fr.names,
        on.reshape(H, G, T),
        pw,
        th.persist_fraction,
        fr,
        Category.POWER,
        Severity.WARNING,
        0.85,
        lambda h, gi, ev: (
            f"held at its power cap at {ev['power_w_median']:g} W while its peers draw {ev['peer_power_w_median']:g} W"
            " at the same load (a lower enforced power limit than theirs; the limit itself is not reported)"
        ),
        {"metric": "power_w", "throttle_mask": hex(SW_POWER_CAP)},
        extra=extra,
    )


def _shared_low_cap(
    hit: np.ndarray, us: np.ndarray, on: np.ndarray, power: np.ndarray, loaded: np.ndarray, G: int, th: _Thresholds
) -> bool:
    """Whether the lower cap the `hit` GPUs are held at is a site's (or a second SKU's), not a fault: the hits are
    `power_policy_fraction` of the SKU's GPUs `us` on 2 hosts or more; or 2 hosts or more run most of their GPUs at
    or below that cap (median draw under load), together that share of the SKU. The second reads a population the
    data does not name: H100 PCIe (350 W) beside H100 SXM (700 W) with no gpu_name or default limit, where only
    the PCIe GPUs whose silicon wants more than 350 W sit at the cap (the others draw just under it, uncapped), so
    the hits alone were a few GPUs on each of two hosts. One host under a lower limit is never policy."""
    if len(hit) >= th.power_policy_fraction * len(us) and len(np.unique(hit // G)) >= 2:
        return True
    with np.errstate(invalid="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # a GPU never loaded: an all-NaN median
        cap_w = max(float(np.nanmedian(power[u][on[u]])) for u in hit)
        median_w = np.nanmedian(np.where(loaded[us], power[us], np.nan), axis=1)
    low = np.union1d(hit, us[median_w <= cap_w + th.power_limit_margin_w])
    hosts, n_low = np.unique(low // G, return_counts=True)
    n_all_of = dict(zip(*(a.tolist() for a in np.unique(us // G, return_counts=True)), strict=True))
    mostly = [h for h, n in zip(hosts.tolist(), n_low.tolist(), strict=True) if 2 * n > n_all_of[h]]
    on_mostly = int(np.isin(low // G, mostly).sum())
    return len(mostly) >= 2 and on_mostly >= th.power_policy_fraction * len(us)


def _pcie_rule(
    col: _Collector, gt: pa.Table, g: _GpuContext, fr: _Frame, th: _Thresholds, pw: int, rows: _HostRows
) -> None:
    """A link below its maximum under load; where the maximum is not reported (a row's `_max` is null or the column
    is absent), below what most GPUs of its SKU run at under load; where no SKU is known either, below what it ran
    at itself under load (_own_link) or what the other GPUs of its host run at (_sibling_link: one baseboard, one
    SKU). Idle links train down (gen 1) and are not read."""
    below = np.zeros(gt.num_rows, bool)
    refs: dict[str, np.ndarray] = {}
    basis = np.zeros(gt.num_rows, np.int8)  # index into _LINK_BASES of the reference a row was found below
    for cur, top in (("pcie_link_gen", "pcie_link_gen_max"), ("pcie_link_width", "pcie_link_width_max")):
        if cur not in gt.column_names or gt.column(cur).null_count == gt.num_rows:
            continue
        if top in gt.column_names and gt.column(top).null_count == 0:
            # Every row has its maximum: compared in Arrow (null current: not below), so a fleet whose links all
            # run at their maximum converts no column to numpy.
            below |= pc.fill_null(pc.less(gt.column(cur), gt.column(top)), False).to_numpy(zero_copy_only=False)
            continue
        ref = _np(gt, top, np.float32)
        src = np.where(np.isnan(ref), 1, 0).astype(np.int8)
        if (peer := _peer_link(gt, g, cur)) is not None:
            ref = np.where(src == 1, peer, ref)
        if (unknown := np.isnan(ref)).any() and (counts := _link_counts(gt, g, cur)) is not None:
            own, sib = _own_link(counts, g, pw), _sibling_link(counts, g)
            with np.errstate(invalid="ignore"):
                use_sib = unknown & (np.nan_to_num(sib, nan=-1) > np.nan_to_num(own, nan=-1))
            ref = np.where(unknown, np.where(use_sib, sib, own), ref)
            src = np.where(unknown, np.where(use_sib, 3, 2), src).astype(np.int8)
        refs[cur] = ref
        with np.errstate(invalid="ignore"):
            low = _np(gt, cur, np.float32) < ref  # NaN (no value, no reference): not below
        below |= low
        basis = np.where(low & (basis == 0), src, basis).astype(np.int8)
    if not below.any():
        return
    down = below & g.loaded.reshape(-1)[g.flat]
    if not down.any():
        return
    gen, wid = _np(gt, "pcie_link_gen", np.float32), _np(gt, "pcie_link_width", np.float32)
    genref = refs.get("pcie_link_gen")
    genref = _np(gt, "pcie_link_gen_max", np.float32) if genref is None else genref
    widref = refs.get("pcie_link_width")
    widref = _np(gt, "pcie_link_width_max", np.float32) if widref is None else widref
    dg = _grid(g.flat, down, g.shape, False, bool)
    gen_g = _grid(g.flat[down], gen[down], g.shape, np.nan, np.float32)
    wid_g = _grid(g.flat[down], wid[down], g.shape, np.nan, np.float32)
    gmax_g = _grid(g.flat[down], genref[down], g.shape, np.nan, np.float32)
    wmax_g = _grid(g.flat[down], widref[down], g.shape, np.nan, np.float32)
    basis_g = _grid(g.flat[down], basis[down], g.shape, 0, np.int8)

    def nan_or(f: Any, a: np.ndarray) -> float | None:
        return None if np.isnan(a).all() else _r(f(a), 0)

    def extra(h: int, gi: int) -> dict[str, Any]:
        ev: dict[str, Any] = {
            "pcie_link_gen_min": nan_or(np.nanmin, gen_g[h, gi]),
            "pcie_link_gen_max": nan_or(np.nanmax, gmax_g[h, gi]),
            "pcie_link_width_min": nan_or(np.nanmin, wid_g[h, gi]),
            "pcie_link_width_max": nan_or(np.nanmax, wmax_g[h, gi]),
            "reference": _LINK_BASES[int(basis_g[h, gi].max())],
        }
        # Replays while the link was down, per minute (NVIDIA recommends at most 8:
        # DCGM_LIMIT_MAX_PCIREPLAY_RATE); read only now, for this GPU.
        on = np.flatnonzero(dg[h, gi])
        span = (int(fr.ts_of(on[0])) - fr._step, int(fr.ts_of(on[-1])) + fr._step)
        r = rows.per_gpu(fr.names[h], int(gi), "pcie_replay_errors_total", span)
        if r is not None and len(r) > 1:
            minutes = max(1.0 / 60, (on[-1] - on[0] + 1) * fr.interval_s / 60)
            ev["pcie_replays_per_min"] = round(float(r.iloc[-1] - r.iloc[0]) / minutes, 2)
        return ev

    def link(gen_v: Any, wid_v: Any) -> str:
        return " ".join(
            x for x in (f"gen {gen_v:g}" if gen_v is not None else "", f"x{wid_v:g}" if wid_v is not None else "") if x
        )

    def what(h: int, gi: int, ev: dict[str, Any]) -> str:
        ref = link(ev.get("pcie_link_gen_max"), ev.get("pcie_link_width_max"))
        basis = {
            "peers_under_load": f"its SKU's GPUs run at {ref} under load",
            "own_history_under_load": f"it ran at {ref} under load before; no maximum or SKU reported",
            "host_siblings_under_load": f"its host's other GPUs run at {ref} under load; no maximum or SKU reported",
        }.get(ev["reference"], f"max {ref}")
        return f"PCIe link at {link(ev.get('pcie_link_gen_min'), ev.get('pcie_link_width_min'))} under load ({basis})"

    _persist_rule(
        col,
        fr.names,
        dg,
        pw,
        th.persist_fraction,
        fr,
        Category.PCIE_DOWNGRADE,
        Severity.WARNING,
        0.95,
        what,
        {"load_util_pct": th.load_util_pct},
        extra=extra,
    )


def _ecc_rules(col: _Collector, gt: pa.Table, g: _GpuContext, fr: _Frame, th: _Thresholds) -> None:
    """ECC by counter: uncorrectable counts and remapped rows that grow; correctable storms."""
    for name, sev, what in (
        ("ecc_dbe_total", Severity.CRITICAL, "uncorrectable (DBE) ECC errors increasing"),
        ("ecc_dbe_volatile", Severity.CRITICAL, "uncorrectable (DBE) ECC errors increasing"),
        ("retired_pages", Severity.WARNING, "retired/remapped pages increasing"),
    ):
        moved = g.moving(gt, name)
        if moved is not None:  # a counter that never moved cannot have grown
            _counter_growth(col, fr, g.G, *moved, name, Category.ECC, sev, what)
    # Correctable errors: a rate, not a count (old SBE totals are history; a trickle is normal). The volatile
    # counter where the exporter has it; else the lifetime total (DESIGN.md's column, dcgm-exporter's
    # DCGM_FI_DEV_ECC_SBE_AGG_TOTAL), whose history is a constant that a rate over a window does not see: a storm of
    # 2,362 errors/min on a GPU that reported only the total was missed.
    metric = "ecc_sbe_volatile"
    moved = g.moving(gt, metric)
    if moved is None:
        metric = "ecc_sbe_total"
        moved = g.moving(gt, metric)
    if moved is None:
        return
    units, sbe = moved
    w = fr.samples(th.sbe_window_s)
    c = _ffill(sbe)
    inc = np.full(c.shape, np.nan)
    inc[..., w:] = c[..., w:] - c[..., :-w]
    rate = np.clip(inc, 0, None) / (w * fr.interval_s / 60.0)
    hit = np.nan_to_num(rate) >= th.sbe_rate_per_min
    for i in np.flatnonzero(hit.any(-1)):
        h, gi = divmod(int(units[i]), g.G)
        f = int(hit[i].argmax())
        peak = float(np.nanmax(rate[i]))
        col.add(
            fr.names[h],
            Category.ECC,
            Severity.WARNING,
            0.9,
            f"GPU {gi} on {fr.names[h]}: correctable (SBE) ECC errors at {peak:.0f}/min "
            f"(threshold {th.sbe_rate_per_min:g}/min)",
            int(fr.ts_of(f)),
            int(fr.ts_of(max(0, f - w))),
            {
                "gpu": int(gi),
                "metric": metric,
                "peak_rate_per_min": round(peak, 1),
                "window_s": th.sbe_window_s,
                "from": _r(np.nanmin(c[i]), 0),
                "to": _r(np.nanmax(c[i]), 0),
            },
        )


def _counter_growth(
    col: _Collector,
    fr: _Frame,
    G: int,
    units: np.ndarray,
    v: np.ndarray,
    metric: str,
    cat: Category,
    sev: Severity,
    what: str,
) -> None:
    """Alarm the GPUs (`units`, rows of the (unit, time) grid `v`) whose counter rose above its first value."""
    valid = ~np.isnan(v)
    has = valid.any(-1)
    first_i = valid.argmax(-1)
    base = np.take_along_axis(v, first_i[..., None], -1)[..., 0]
    grew = np.nan_to_num(v - base[..., None], nan=0.0) > 0
    for i in np.flatnonzero(grew.any(-1) & has):
        h, g = divmod(int(units[i]), G)
        f = int(grew[i].argmax())
        end = float(np.nanmax(v[i]))
        col.add(
            fr.names[h],
            cat,
            sev,
            0.97,
            f"GPU {g} on {fr.names[h]}: {what} ({metric} {base[i]:.0f} -> {end:.0f})",
            int(fr.ts_of(f)),
            int(fr.ts_of(f)),
            {"gpu": g, "metric": metric, "from": float(base[i]), "to": end},
        )


# DCGM's health watch (NVIDIA/DCGM modules/health/DcgmHealthWatch.cpp MonitorNVLink4Fields) warns on a link with any
# CRC error in its minute (nvLinkError >= DCGM_LIMIT_MAX_NVLINK_ERROR, 1: DCGM_FR_NVLINK_ERROR_THRESHOLD, "Detected %ld
# %s NvLink errors ... which exceeds threshold of %u") and fails it at 100/s (DCGM_LIMIT_MAX_NVLINK_CRC_ERROR). Below
# the failing rate trainctl names a link whose warning holds: CRC errors in its minute-by-minute count at this median
# over this many minutes. Healthy links stay well below it: at most a few a minute (the first generator's trickle
# reaches ~2/min; the median of ten minutes of a 3/min trickle touches 5-6 by chance, never 10), and a retrain's
# one-second burst is one minute of the ten, which the median passes over.
CRC_SUSTAINED_PER_MIN = 10.0
CRC_SUSTAINED_MINUTES = 10


def _nvlink_rule(col: _Collector, gt: pa.Table, g: _GpuContext, fr: _Frame, th: _Thresholds) -> None:
    """NVLink CRC errors at DCGM's failing rate (critical evidence of a bad link: a warning at 0.9), or DCGM's
    warning held for `CRC_SUSTAINED_MINUTES` (a marginal link: a warning at 0.7, below the runbooks' gate)."""
    moved = g.moving(gt, "nvlink_crc_errors_total")
    if moved is None:
        return
    units, crc = moved
    cw = fr.samples(th.crc_window_s)
    c = _ffill(crc)
    inc = np.full(c.shape, np.nan)
    inc[..., cw:] = c[..., cw:] - c[..., :-cw]
    rate = np.clip(inc, 0, None) / (cw * fr.interval_s)
    hit = np.nan_to_num(rate) >= th.crc_rate_per_s
    _crc_sustained(col, c, units, ~hit.any(-1), g, fr)
    rows = np.flatnonzero(hit.any(-1))
    if not len(rows):
        return
    first = hit[rows].argmax(-1)
    peak = np.nanmax(rate[rows], axis=-1)
    for u, f, p in zip(units[rows], first, peak):
        h, gi = divmod(int(u), g.G)
        col.add(
            fr.names[h],
            Category.NVLINK,
            Severity.WARNING,
            0.9,
            f"GPU {gi} on {fr.names[h]}: NVLink CRC errors at {p:.0f}/s (threshold {th.crc_rate_per_s:g}/s)",
            int(fr.ts_of(f)),
            int(fr.ts_of(max(0, f - cw))),
            {
                "gpu": int(gi),
                "metric": "nvlink_crc_errors_total",
                "peak_rate_per_s": round(float(p), 2),
                "window_s": th.crc_window_s,
            },
        )


def _crc_sustained(
    col: _Collector, c: np.ndarray, units: np.ndarray, below_fail: np.ndarray, g: _GpuContext, fr: _Frame
) -> None:
    """The links (of `c`, forward-filled CRC totals per unit and sample) whose per-minute CRC count had a median of
    `CRC_SUSTAINED_PER_MIN` or more over `CRC_SUSTAINED_MINUTES` minutes, among those `below_fail` (not already
    read at the failing rate)."""
    m, k = fr.samples(60.0), CRC_SUSTAINED_MINUTES
    T = c.shape[-1]
    if T <= k * m:
        return
    with np.errstate(invalid="ignore"):
        grew = np.nan_to_num(c[:, k * m :] - c[:, : -k * m]).max(-1) >= CRC_SUSTAINED_PER_MIN * k
    for i in np.flatnonzero(below_fail & grew):  # few links move this much: a per-link loop
        per_min = np.full(T, np.nan)
        per_min[m:] = np.clip(c[i, m:] - c[i, :-m], 0, None)
        # each sample's last k minutes, one minute apart; a sample with a minute missing has a NaN median
        minutes = np.stack([per_min[(k - 1 - j) * m : T - j * m] for j in range(k)])
        med = np.median(minutes, axis=0)
        with np.errstate(invalid="ignore"):
            held = np.nan_to_num(med, nan=-1.0) >= CRC_SUSTAINED_PER_MIN
        if not held.any():
            continue
        first = int(held.argmax()) + (k - 1) * m  # the sample at which the k-th minute ended
        h, gi = divmod(int(units[i]), g.G)
        peak = float(np.nanmax(np.where(held, med, np.nan)))
        col.add(
            fr.names[h],
            Category.NVLINK,
            Severity.WARNING,
            0.7,
            f"GPU {gi} on {fr.names[h]}: NVLink CRC errors held at a median of {peak:.0f}/min over"
            f" {k} minutes (DCGM's health watch warns on any in its minute and fails a link at 100/s)",
            int(fr.ts_of(first)),
            int(fr.ts_of(max(0, first - k * m))),
            {
                "gpu": int(gi),
                "metric": "nvlink_crc_errors_total",
                "median_per_min": round(peak, 1),
                "minutes": k,
                "threshold_per_min": CRC_SUSTAINED_PER_MIN,
            },
        )


def _nvml_xids(col: _Collector, gt: pa.Table, g: _GpuContext, fr: _Frame) -> None:
    """Xid from NVML events (the column holds the last Xid seen on that GPU)."""
    xid = gt.column("xid") if "xid" in gt.column_names else None
    if xid is None or xid.null_count == len(xid):
        return
    xv = _np(gt, "xid")
    sel = np.flatnonzero(~np.isnan(xv))
    df = pd.DataFrame({"h": g.flat[sel] // (g.G * g.shape[2]), "g": g.gpu[sel], "xid": xv[sel].astype(np.int64)})
    df["ts"] = fr.g_ts[sel]
    first = df.groupby(["h", "g", "xid"], sort=True)["ts"].min().reset_index()
    for r in first.itertuples(index=False):
        _xid_evidence(col, fr.names[r.h], int(r.xid), int(r.ts), {"gpu": int(r.g), "source": "nvml"})


def _lost_gpus(col: _Collector, g: _GpuContext, fr: _Frame, th: _Thresholds, host_last: np.ndarray) -> None:
    grace = fr.samples(th.lost_grace_s)
    names = fr.names
    lost = (g.last_g >= 0) & (g.last_g < host_last[:, None] - grace)
    for h, gi in zip(*np.nonzero(lost)):
        col.add(
            names[h],
            Category.GPU_LOST,
            Severity.CRITICAL,
            0.95,
            f"GPU {gi} on {names[h]} stopped reporting at {_iso(fr.ts_of(g.last_g[h, gi]))} while the host kept "
            "reporting",
            int(fr.ts_of(g.last_g[h, gi] + grace)),
            int(fr.ts_of(g.last_g[h, gi] + 1)),
            {"gpu": int(gi), "last_sample_ts": _iso(fr.ts_of(g.last_g[h, gi]))},
        )
    if fr.H >= 2:
        usual = int(np.bincount(g.gpu_present_count).argmax())
        for h in np.flatnonzero(g.gpu_present_count < usual):
            if lost[h].any():
                continue
            col.add(
                names[h],
                Category.GPU_LOST,
                Severity.WARNING,
                0.8,
                f"{names[h]} reports {g.gpu_present_count[h]} GPUs, the fleet usually {usual}",
                None,
                None,
                {"gpus_seen": int(g.gpu_present_count[h]), "fleet_usual_gpus": usual},
            )


def _xid_evidence(col: _Collector, host: str, code: int, ts_ns: int | None, ev: dict[str, Any]) -> None:
    info = xid_info(code)
    if not info.blames_host:
        return
    col.add(
        host,
        info.category,
        info.severity,
        0.97 if info.severity is Severity.CRITICAL else 0.85,
        f"Xid {code} on {host}{' GPU ' + str(ev['gpu']) if 'gpu' in ev else ''}: {info.meaning}",
        ts_ns,
        ts_ns,
        {"xid": code, "meaning": info.meaning, **ev},
    )


# ------------------------------------------------------------------------------------------ peer outliers


def _sample_rows(n: int, k: int = 512) -> np.ndarray:
    """A fixed random sample of machines for a group's reference (a strided one would pick the
    same GPU index on every host)."""
    if n <= k:
        return np.arange(n)
    return np.sort(np.random.default_rng(0).choice(n, k, replace=False))


def _peer_outliers(
    col: _Collector, gt: pa.Table | None, ht: pa.Table | None, g: _GpuContext | None, fr: _Frame, th: _Thresholds
) -> None:
    H, T = fr.H, fr.T
    # A role splits the peers only when it has enough hosts to compare with (min_fleet_hosts): the
    # hosts of smaller roles (16 hosts in 8 pipeline stages) are pooled together, as without roles,
    # instead of each pair being skipped.
    named = th.peer_groups or {}
    per_role = Counter(named.get(n) for n in fr.names)
    roles = {n: r for n, r in named.items() if per_role[r] >= th.min_fleet_hosts}
    # A late starter (more than a persistence window after its group's median start) warms up unseen.
    late_warmup, late_margin = fr.samples(th.late_start_warmup_s), fr.samples(th.persist_window_s)
    # Peer groups: same SKU, same default and enforced power limit, same role.
    if g is not None:
        G = g.G
        unit_keys: list[tuple[Any, ...] | None] = []
        for u in range(H * G):
            if g.row_of_unit[u] < 0:
                unit_keys.append(None)
                continue
            unit_keys.append((*g.sku_key(u), _r(g.unit_limit[u], 0), roles.get(fr.names[u // G])))
        gpu_group, gpu_group_keys = _group_ids(unit_keys)
        # A second is comparable for a group when its median GPU is loaded.
        group_loaded = np.zeros((len(gpu_group_keys), T), bool)
        util2 = g.util.reshape(H * G, T)
        no_util = bool(np.isnan(util2).all())  # no utilisation anywhere: every reported second counts
        for k in range(len(gpu_group_keys)):
            rows = np.flatnonzero(gpu_group == k)
            group_loaded[k] = True if no_util else _nanmedian0(util2[rows[_sample_rows(len(rows))]]) >= th.load_util_pct
        gpu_active = g.working.reshape(H * G, T) & group_loaded[np.maximum(gpu_group, 0)] & (gpu_group >= 0)[:, None]
        _skip_late_starts(gpu_active, g.working.reshape(H * G, T), gpu_group, late_warmup, late_margin)
        # Hosts: grouped by their GPUs' most common peer group (and role); active when their GPUs work.
        host_keys: list[tuple[Any, ...] | None] = []
        for h in range(H):
            ks = [unit_keys[h * G + gi] for gi in range(G) if unit_keys[h * G + gi] is not None]
            host_keys.append(max(set(ks), key=ks.count) if ks else ("no-gpu", roles.get(fr.names[h])))
        n_gpus = np.maximum(g.present_any.sum(1), 1)[:, None]
        host_active_self = g.working.sum(1) * 2 >= n_gpus  # most of its GPUs not idle
        host_loaded = g.loaded.sum(1) * 2 >= n_gpus  # most of its GPUs loaded
    else:
        host_keys = [("no-gpu", roles.get(n)) for n in fr.names]
        host_active_self = np.ones((H, T), bool)
    host_group, host_group_keys = _group_ids(host_keys)
    if g is not None:
        hg_loaded = np.zeros((len(host_group_keys), T), bool)
        for k in range(len(host_group_keys)):
            hs = np.flatnonzero(host_group == k)
            hg_loaded[k] = host_loaded[hs].mean(0) >= 0.5
        host_active = host_active_self & hg_loaded[host_group]
        _skip_late_starts(host_active, host_active_self, host_group, late_warmup, late_margin)
    else:
        host_active = host_active_self

    w = max(1, int(th.outlier_window))
    cont = fr.samples(th.continuity_s)
    h_flat = fr.h_host * T + fr.h_tb if ht is not None else None
    for m in th.outlier_metrics:
        if m.floor_kw not in th.floors:
            raise ValueError(f"outlier metric {m.column}: no keyword argument {m.floor_kw!r} holds its floor")

    def one(m: OutlierMetric) -> list[tuple[Any, ...]]:
        """One metric's findings, as the arguments of `_Collector.add`."""
        if m.table == "gpu":
            if gt is None or g is None or m.column not in gt.column_names:
                return []
            if m.column == "sm_util_pct":  # the same grid as the context's (read-only here)
                x = g.util.reshape(H * g.G, T)
            else:
                x = _grid(g.flat, _np(gt, m.column, np.float32), (H * g.G, T), np.nan, np.float32)
            owner, sub, group, active, keys = (
                np.arange(H * g.G) // g.G,
                np.arange(H * g.G) % g.G,
                gpu_group,
                gpu_active,
                gpu_group_keys,
            )
        else:
            if ht is None:
                return []
            if m.column == "net_bytes_per_s":
                vals = _np(ht, "net_rx_bytes_per_s") + _np(ht, "net_tx_bytes_per_s")
            elif m.column in ht.column_names:
                vals = _np(ht, m.column)
            else:
                return []
            x = _grid(h_flat, vals.astype(np.float32), (H, T), np.nan, np.float32)
            owner, sub, group, active, keys = np.arange(H), None, host_group, host_active, host_group_keys
        if np.isnan(x).all():
            return []
        mw = fr.samples(m.window_s) if m.window_s else w
        out = _Deferred()
        _outliers_one(out, fr, th, m, th.floors[m.floor_kw] * m.scale, x, owner, sub, group, keys, active, mw, cont)
        if m.column == "power_w" and m.direction < 0 and gt is not None and g is not None:
            return [c for c in out.calls if not _power_below_without_reason(gt, g, fr, th, c)]
        return out.calls

    # Two metrics at a time (numpy's passes release the GIL; the scan's second core is idle by
    # now); their findings are added in metric order, as one metric after another would add them.
    with ThreadPoolExecutor(max_workers=2) as pool:
        for calls in pool.map(one, th.outlier_metrics):
            for args in calls:
                col.add(*args)


def _reason_bits(col: pa.ChunkedArray | pa.Array) -> np.ndarray:
    """A throttle_reasons column as uint64 bits, a null as no reason."""
    return pc.fill_null(col.cast(pa.uint64()), 0).to_numpy().astype(np.uint64, copy=False)


# The clock-event reasons that hold a GPU's clocks (so its power) down (nvml.h nvmlClocksEventReasons).
_HELD_DOWN = SW_POWER_CAP | HW_SLOWDOWN | SW_THERMAL | HW_THERMAL | HW_POWER_BRAKE
HELD_DOWN_FRACTION = 0.05  # under this share of its loaded samples, a GPU was not held down


def _power_below_without_reason(
    gt: pa.Table, g: _GpuContext, fr: _Frame, th: _Thresholds, call: tuple[Any, ...]
) -> bool:
    """A power-below-peers signal from GPUs that no reason held down: their clock-event reasons are reported and show
    no power cap, slowdown or thermal event in their loaded samples. Such a GPU draws less for the work it is given: a
    lower-power SKU or board that the data does not name (an H100 PCIe among SXM boards, with no name reported),
    better silicon. Less work shows in utilisation, a metric of its own; a power cap, a brake or heat shows in the
    reasons. Where utilisation or the reasons are not reported, power is the only witness, and the signal stays."""
    ev = call[-1]
    if "gpu" not in ev or "throttle_reasons" not in gt.column_names or np.isnan(g.util).all():
        return False
    h = fr.names.index(call[0])
    units = [h * g.G + int(gi) for gi in ev.get("gpus_deviating", [ev["gpu"]])]
    rows = np.flatnonzero(np.isin(g.unit, units))
    rows = rows[g.loaded.reshape(-1)[g.flat[rows]]]  # the context's loaded samples (row -> unit * T + second)
    if not len(rows):
        return False
    bits = gt.column("throttle_reasons").take(pa.array(rows))
    if bits.null_count > 0.1 * len(bits):
        return False
    held = (_reason_bits(bits) & np.uint64(_HELD_DOWN)) != 0
    return bool(held.mean() < HELD_DOWN_FRACTION)


def _skip_late_starts(active: np.ndarray, working: np.ndarray, group: np.ndarray, warmup: int, margin: int) -> None:
    """Clear `active` (unit, time) over the first `warmup` samples of work of each unit that starts working more than
    `margin` samples after the peers it is compared with then: a late-joining host (a staggered start, a replacement)
    warms up its allocator, autotuning and first collectives while they run steady, which is not a departure from
    them. Units that start with their group (within the margin) warm up with it and are compared from their first
    sample: a fault present from the start of a short run stays seen.

    The peers a unit meets at its start are those of its group that started by then (itself included), so the
    reference is their median start, not the whole group's: hosts that join even later (two replacements half an
    hour in) would pull the whole group's median past a host that started 2 minutes after the rest, and its warm-up
    would be compared with their steady work."""
    T = working.shape[1]
    starts = np.where(working.any(1), working.argmax(1), T)
    for k in np.unique(group[group >= 0]):
        rows = np.flatnonzero((group == k) & (starts < T))
        if len(rows) < 2:
            continue
        s = np.sort(starts[rows])
        n_by = np.searchsorted(s, starts[rows], side="right")  # units started by each one's start, itself included
        ref = (s[(n_by - 1) // 2] + s[n_by // 2]) / 2  # the median of those starts
        for r in rows[starts[rows] > ref + margin]:
            active[r, starts[r] : starts[r] + warmup] = False


class _Deferred:
    """Stands in for a _Collector: records the `add` calls, to be replayed in order."""

    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []

    def add(self, *args: Any) -> None:
        self.calls.append(args)


def _group_ids(keys: list[Any]) -> tuple[np.ndarray, list[Any]]:
    ids = np.full(len(keys), -1, np.int64)
    seen: dict[Any, int] = {}
    for i, k in enumerate(keys):
        if k is not None:
            ids[i] = seen.setdefault(k, len(seen))
    return ids, list(seen)


_HISTORY_QUANTILE = 0.1  # a machine's own usual level: this quantile of its deviation, in the good direction
_HISTORY_STRIDE = 4  # every 4th window is enough to place that quantile (and 4x cheaper)


def _low_quantile_rows(x: np.ndarray, q: float) -> np.ndarray:
    """Per-row quantile ignoring NaN (NaN for an all-NaN row): one sort, no Python loop."""
    s = np.sort(x, axis=1)  # NaN sort last
    n = (~np.isnan(x)).sum(axis=1)
    idx = np.clip(np.floor(q * (n - 1)).astype(np.int64), 0, max(0, x.shape[1] - 1))
    out = np.take_along_axis(s, idx[:, None], 1)[:, 0] if x.shape[1] else np.full(x.shape[0], np.nan)
    return np.where(n > 0, out, np.nan)


def _centre_spread(v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per-window median and robust standard deviation (1.4826 x MAD) over machines (axis 0)."""
    centre = _nanmedian0(v)
    mad = _nanmedian0(np.abs(v - centre[None, :]))
    return np.nan_to_num(centre), np.maximum(np.nan_to_num(1.4826 * mad, nan=np.inf), 1e-6)


def _history(d: np.ndarray, ok: np.ndarray) -> np.ndarray:
    """Each machine's deviation minus its own usual level (a low quantile over its comparable windows)."""
    v = np.where(ok, d, np.nan)
    return v - np.nan_to_num(_low_quantile_rows(v[:, ::_HISTORY_STRIDE], _HISTORY_QUANTILE))[:, None]


def _outliers_one(
    col: _Collector | _Deferred,
    fr: _Frame,
    th: _Thresholds,
    m: OutlierMetric,
    floor: float,
    x: np.ndarray,
    owner: np.ndarray,
    sub: np.ndarray | None,
    group: np.ndarray,
    keys: list[Any],
    active: np.ndarray,
    w: int,
    cont: int,
) -> None:
    """Window deviations from the group's median; significant, large, not a crowd, sustained.

    Full (machines x seconds) passes only where every machine is needed (window means, the
    group's reference); the tests run on the machines that reach the floor at some point and on
    the fixed sample that gives the group's spread.
    """
    U, T = x.shape
    valid = active & ~np.isnan(x)
    per_unit: dict[int, tuple[np.ndarray, ...]] = {}  # u -> (cand, D, z, ok, ref)
    zt = th.outlier_z
    for k in range(len(keys)):
        rows = np.flatnonzero(group == k)
        hosts_in = np.unique(owner[rows])
        if len(hosts_in) < th.min_fleet_hosts:
            continue
        # Each machine's window mean first, then the group's median of those means: the median
        # of per-second values is biased for bursty counters whose peaks fall in different
        # seconds on different hosts (each agent samples at its own offset).
        vr = valid[rows]
        n = _window_sum(vr, w, np.float32)
        xr = x[rows]  # a copy: zeroed where not valid in place (no second grid)
        np.copyto(xr, np.float32(0.0), where=~vr)
        mean_w = _window_sum(xr, w, np.float32)
        del xr, vr
        ok = n >= max(1, w // 2)
        mean_w /= np.maximum(n, 1, out=n)
        del n
        pick = _sample_rows(len(rows))
        ref = _nanmedian0(np.where(ok[pick], mean_w[pick], np.nan)).astype(np.float32)
        ok &= ~np.isnan(ref)[None, :]
        dD = mean_w
        dD -= ref[None, :]
        if m.direction < 0:
            np.negative(dD, out=dD)
        maybe = np.flatnonzero((ok & (dD >= floor)).any(-1))
        if not len(maybe):
            continue

        # Peers *and* own history. A machine's own usual level is a low quantile of its deviation
        # over the comparable windows (so a fault covering most of the data still leaves the
        # healthy level visible); the change from it removes what is steady about the machine (a
        # role, a silicon bin, its rack), and its significance is judged against the peers'
        # changes in the same window. A departure that starts inside the data needs one floor
        # from the peers and one from its own level; one that holds for the whole data (a role,
        # a bin, or a fault older than the data: the data cannot tell them apart) needs
        # `persistent_floor_factor` floors from the peers.
        centre, spread = _centre_spread(np.where(ok[pick], dD[pick], np.nan))
        c_centre, c_spread = _centre_spread(_history(dD[pick], ok[pick]))
        dm, okm = dD[maybe], ok[maybe]
        chg = np.nan_to_num(_history(dm, okm), nan=-np.inf)
        with np.errstate(invalid="ignore"):
            z = (dm - centre) / spread
            z_chg = (chg - c_centre) / c_spread
        started = (dm >= floor) & (chg >= floor) & (z_chg >= zt)
        steady = (dm >= th.persistent_floor_factor * floor) & (z >= zt)
        c = okm & (started | steady)
        # ...and in most of the window's samples, not from a few: the window's median departs by the floor too. A
        # mean moves with a few deep dips (a host's data stalls: 3 of 8 samples at 40% power moved an 8-sample mean
        # 102 W below its peers), the median only with a departure that holds.
        med = _window_median(x[rows[maybe]], valid[rows[maybe]], w)
        with np.errstate(invalid="ignore"):
            c &= m.direction * (med - ref[None, :]) >= floor
        if m.min_relative is not None:
            c &= dm >= m.min_relative * np.abs(ref)[None, :]
        z = np.where(started, z_chg, z)
        # Not a crowd: more than max_outlier_fraction of the group's hosts (not GPUs) at once.
        own = owner[rows[maybe]]
        seg = np.flatnonzero(np.r_[True, own[1:] != own[:-1]])
        crowd = np.logical_or.reduceat(c, seg, axis=0).sum(0) > max(2, th.max_outlier_fraction * len(hosts_in))
        c &= ~crowd[None, :]
        for i, r in enumerate(maybe):
            if c[i].any():
                per_unit[int(rows[r])] = (c[i], m.direction * dm[i], z[i], okm[i] & ~crowd, ref)
    if not per_unit:
        return
    # Continuity (Minder's): the machine is the outlier in >= continuity_fraction of its last
    # `cont` comparable windows. Seconds that were not comparable (the group idle: a checkpoint,
    # a stall, a restart; or a crowd) neither count for nor against, so a checkpoint does not
    # reset a sustained fault; seconds where the machine was comparable and not an outlier count
    # against, so separate bursts do not add up to a sustained departure.
    alarm: dict[int, np.ndarray] = {}
    for u, (cu, _d, _z, oku, _r) in per_unit.items():
        k_ok = np.cumsum(oku)
        k_c = np.cumsum(cu)
        start = np.searchsorted(k_ok, k_ok - cont + 1)  # first second of the last `cont` comparable ones
        before = np.where(start > 0, k_c[np.maximum(start - 1, 0)], 0)
        a = cu & (k_ok >= cont) & (k_c - before >= th.continuity_fraction * cont)
        if a.any():
            alarm[u] = a
    if not alarm:
        return
    by_host: dict[int, list[int]] = {}
    for u in sorted(alarm):
        by_host.setdefault(int(owner[u]), []).append(u)
    for h, us in by_host.items():
        # The unit that alarmed first names the evidence; others are counted.
        firsts = [int(alarm[u].argmax()) for u in us]
        u = us[int(np.argmin(firsts))]
        d_i = min(firsts)
        cu, du, zu, _oku, ref = per_unit[u]
        sel = cu
        dev = float(np.median(du[sel]))
        val = float(np.nanmedian(np.where(sel, x[u], np.nan)))
        peer = float(np.nanmedian(np.where(sel, ref, np.nan)))
        key = keys[group[u]]
        first_i = int(sel.argmax())
        scale = m.scale
        ev: dict[str, Any] = {
            "metric": m.column,
            "direction": "below peers" if m.direction < 0 else "above peers",
            "deviation": round(dev / scale, 2),
            "unit": m.unit,
            "value": round(val / scale, 2),
            "peer_median": round(peer / scale, 2),
            "robust_z_median": round(float(np.median(zu[sel])), 1),
            "floor": round(floor / scale, 2),
            "outlier_for_s": float(int(sel.sum()) * fr.interval_s),
            "window_samples": w,
            "continuity_s": float(cont * fr.interval_s),
            "peer_group": _describe_key(key),
            "peer_hosts": int(len(np.unique(owner[group == group[u]]))),
        }
        if sub is not None:
            ev["gpu"] = int(sub[u])
            if len(us) > 1:
                ev["gpus_deviating"] = sorted(int(sub[v]) for v in us)
        where = f" GPU {int(sub[u])}" if sub is not None else ""
        col.add(
            fr.names[h],
            m.category,
            Severity.WARNING,
            0.8,
            f"{fr.names[h]}{where}: {m.column} {abs(dev) / scale:.3g} {m.unit} {'below' if m.direction < 0 else 'above'} "
            f"its peers' median ({peer / scale:.4g} {m.unit}) in {sel.sum() * fr.interval_s:.0f} s of windows",
            int(fr.ts_of(d_i)),
            int(fr.ts_of(max(0, first_i - w + 1))),
            ev,
        )


def _describe_key(key: Any) -> str:
    if not isinstance(key, tuple):
        return str(key)
    if key and key[0] == "no-gpu":
        return "hosts without GPU metrics" + (f", role {key[1]}" if len(key) > 1 and key[1] else "")
    name, default_w, limit_w, role = (list(key) + [None] * 4)[:4]
    parts = [name or "unnamed GPUs"]
    if default_w is not None:
        parts.append(f"default limit {default_w:g} W")
    if limit_w is not None:
        parts.append(f"enforced {limit_w:g} W")
    if role:
        parts.append(f"role {role}")
    return ", ".join(parts)


def _log_xids(col: _Collector, t: pa.Table | None) -> None:
    if t is None or not t.num_rows or "xid" not in t.column_names or "host" not in t.column_names:
        return
    df = t.to_pandas()
    df = df[df["xid"].notna() & df["host"].notna()]
    if df.empty:
        return
    df = df.sort_values(["host", "xid"]).drop_duplicates(["host", "xid"])
    for r in df.itertuples(index=False):
        ts = getattr(r, "ts", None)
        ts_ns = None if ts is None or pd.isna(ts) else int(pd.Timestamp(ts).value)
        ev = {
            "source": "log",
            "log": f"{getattr(r, 'source', '')}:{getattr(r, 'line_no', '')}",
            "line": str(getattr(r, "message", ""))[:300],
        }
        if isinstance(getattr(r, "gpu_pci", None), str):
            ev["gpu_pci"] = r.gpu_pci
        _xid_evidence(col, str(r.host), int(r.xid), ts_ns, ev)


def pipeline_roles(run: RunInfo | None) -> dict[str, str] | None:
    """Host -> pipeline stage from the run's grid, when it has more than one stage.

    Stages do different work (the first runs the data loader, the last the LM head and loss), so
    their hosts are compared only with hosts of the same stage. Rank order is Megatron's, as the
    runtime's (runtime/rank_map.py): rank = pp_index * (dp * tp) + dp_index * tp + tp_index.
    """
    if run is None or not run.layout or int(run.layout.get("pp", 1)) <= 1:
        return None
    per_stage = int(run.layout.get("dp", 1)) * int(run.layout.get("tp", 1))
    roles = {}
    for hr in run.hosts:
        stages = sorted({r // per_stage for r in hr.ranks})
        if stages:
            roles[hr.host] = f"pp stage {stages[0]}" if len(stages) == 1 else f"pp stages {stages[0]}-{stages[-1]}"
    return roles or None


def analyze(signals: Signals) -> list[Finding]:
    return find_faulty_hosts(
        signals.tables.get(SignalKind.GPU_METRICS),
        signals.tables.get(SignalKind.HOST_METRICS),
        signals.tables.get(SignalKind.LOG_EVENTS),
        peer_groups=pipeline_roles(signals.run),
    )
