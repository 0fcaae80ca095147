"""Faulty hosts: hard evidence from GPU counters and logs, plus Minder-style outliers for quiet cases.

Input: `gpu_metrics`, `host_metrics` (1 Hz samplers, trainctl.schemas), optionally `log_events`
(Xid lines). Hosts `collect` could not reach are analyzers/coverage.py's finding, merged with this
host's evidence by analyzers/consolidate.py. Output: one Finding per
(host, category); analyzers.consolidate later merges a host's findings into one.

Hard evidence (each names the GPU, the values and when it started):
- ecc: uncorrectable (DBE) counts that *increase* inside the data, or retired pages that grow;
  old, constant counts are history, not a fault.
- xid: codes by meaning (XID_TABLE); codes usually caused by the application (13, 31, 43, 45)
  never blame a host on their own.
- gpu_lost: a GPU whose samples stop while its host keeps reporting, `gpu_count` dropping, fewer
  GPUs than the fleet's usual count, or Xid 79.
- pcie_downgrade: link generation or width below the device maximum *while the GPU is loaded*
  (a link that drops to gen 1 at idle is ASPM power saving, not a fault).
- nvlink: NVLink CRC errors growing faster than `crc_rate_per_s` over `crc_window_s`.
- thermal / power: HW thermal slowdown or HW power brake bits set in at least
  `persist_fraction` of a `persist_window_s` window (the SW power-cap bit at peak load is normal).
- unreachable: a host whose samples stop while the fleet keeps reporting.

Quiet cases (Minder, NSDI'25): machines of one job behave alike, so per metric (min-max normalised
over the data) each machine's window of `outlier_window` samples is compared with the fleet, and a
host alarms only when it stays the outlier for `continuity_s`. Minder's defaults are window 8
samples, continuity 4 min; two deliberate departures keep this O(hosts x time) at 1,024 hosts:
the fleet reference is the per-second median over machines (not all pairwise distances), and the
denoiser is the window mean of the deviation (not a per-metric LSTM-VAE). GPU metrics are compared
per GPU (a host is as bad as its worst GPU); windows where more than `max_outlier_fraction` of the
fleet deviates are a fleet-wide event (checkpoint, restart) and blame nobody.

Everything is vectorised on (host, gpu, second) numpy grids: no Python loop over rows.
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as pads

from trainctl.findings import Category, Finding, FindingKind, Severity
from trainctl.schemas import SignalKind
from trainctl.signals import Signals

__all__ = [
    "XidInfo",
    "XID_TABLE",
    "xid_info",
    "THROTTLE_BITS",
    "find_faulty_hosts",
    "analyze",
    "DEFAULT_OUTLIER_METRICS",
]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class XidInfo:
    meaning: str
    category: Category
    severity: Severity
    blames_host: bool  # False: usually the application's doing (bad kernel, illegal address)


_C, _W, _I = Severity.CRITICAL, Severity.WARNING, Severity.INFO
# NVIDIA Xid catalog (docs.nvidia.com/deploy/xid-errors), the codes that matter for training fleets.
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
    92: XidInfo("high single-bit ECC error rate", Category.ECC, _W, True),
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


from trainctl.nvml_codes import (  # noqa: E402
    HW_POWER_BRAKE,
    HW_SLOWDOWN,
    HW_THERMAL,
    SW_THERMAL,
    THROTTLE_BITS,
)

# Minder's detection metrics that NVML and /proc give us: (table, column, how a fault shows).
DEFAULT_OUTLIER_METRICS: tuple[tuple[str, str], ...] = (
    ("gpu", "sm_util_pct"),
    ("gpu", "power_w"),
    ("gpu", "sm_clock_mhz"),
    ("host", "cpu_util_pct"),
    ("host", "net_bytes_per_s"),  # rx + tx
)

_GPU_COLS = (
    "ts",
    "gpu",
    "host",
    "sm_util_pct",
    "power_w",
    "sm_clock_mhz",
    "pcie_link_gen",
    "pcie_link_gen_max",
    "pcie_link_width",
    "pcie_link_width_max",
    "ecc_dbe_total",
    "ecc_dbe_volatile",
    "retired_pages",
    "nvlink_crc_errors_total",
    "throttle_reasons",
    "xid",
    "temp_c",
)
_HOST_COLS = ("ts", "host", "cpu_util_pct", "net_rx_bytes_per_s", "net_tx_bytes_per_s", "gpu_count")


def _as_table(t: Any, columns: Iterable[str]) -> pa.Table | None:
    if t is None:
        return None
    if isinstance(t, pd.DataFrame):
        t = pa.Table.from_pandas(t, preserve_index=False)
    if isinstance(t, pads.Dataset):
        names = set(t.schema.names)
        return t.to_table(columns=[c for c in columns if c in names])
    names = set(t.column_names)
    return t.select([c for c in columns if c in names])


def _np(t: pa.Table, name: str, dtype: Any = np.float64) -> np.ndarray:
    """Column as numpy; nulls (and an absent column) become NaN."""
    if name not in t.column_names:
        return np.full(t.num_rows, np.nan, dtype)
    col = t.column(name)
    if pa.types.is_timestamp(col.type):
        return col.cast(pa.int64()).to_numpy()
    if col.null_count == 0:
        return col.to_numpy().astype(dtype, copy=False)
    return pc.fill_null(col.cast(pa.float64()), np.nan).to_numpy().astype(dtype, copy=False)


def _host_codes(t: pa.Table, index: dict[str, int]) -> np.ndarray:
    col = t.column("host")
    col = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
    if not pa.types.is_dictionary(col.type):
        col = pc.dictionary_encode(col)
    names = col.dictionary.to_pylist()
    remap = np.array([index.setdefault(n, len(index)) for n in names], np.int64)
    return remap[col.indices.to_numpy(zero_copy_only=False)]


def _grid(
    flat_idx: np.ndarray, values: np.ndarray, shape: tuple[int, ...], fill: Any = np.nan, dtype: Any = np.float64
) -> np.ndarray:
    g = np.full(int(np.prod(shape)), fill, dtype)
    g[flat_idx] = values
    return g.reshape(shape)


def _window_sum(x: np.ndarray, w: int, dtype: Any = np.float64) -> np.ndarray:
    """Sum of the last `w` samples along the last axis (fewer at the start)."""
    c = np.cumsum(x, axis=-1, dtype=dtype)
    c[..., w:] -= c[..., :-w].copy()
    return c


def _run_length(b: np.ndarray) -> np.ndarray:
    """Length of the run of True ending at each position along the last axis."""
    n = b.shape[-1]
    idx = np.broadcast_to(np.arange(1, n + 1), b.shape)
    last_false = np.maximum.accumulate(np.where(b, 0, idx), axis=-1)
    return np.where(b, idx - last_false, 0)


def _first_true(b: np.ndarray) -> np.ndarray:
    """Index of the first True along the last axis, -1 if none."""
    any_ = b.any(axis=-1)
    return np.where(any_, b.argmax(axis=-1), -1)


def _ffill(x: np.ndarray) -> np.ndarray:
    valid = ~np.isnan(x)
    idx = np.where(valid, np.arange(x.shape[-1]), 0)
    np.maximum.accumulate(idx, axis=-1, out=idx)
    return np.take_along_axis(x, idx, axis=-1)


def _iso(ts_ns: float | int) -> str:
    return pd.Timestamp(int(ts_ns), unit="ns", tz="UTC").isoformat(timespec="milliseconds")


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
        ev = dict(evidence)
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


def find_faulty_hosts(
    gpu_metrics: Any = None,
    host_metrics: Any = None,
    log_events: Any = None,
    *,
    interval_s: float | None = None,
    load_util_pct: float = 50.0,
    persist_window_s: float = 60.0,
    persist_fraction: float = 0.5,
    crc_rate_per_s: float = 1.0,
    crc_window_s: float = 60.0,
    lost_grace_s: float = 10.0,
    stale_s: float = 60.0,
    outlier_window: int = 8,
    outlier_threshold: float = 0.06,
    outlier_z: float = 3.0,
    continuity_s: float = 60.0,
    continuity_fraction: float = 0.8,
    max_outlier_fraction: float = 0.1,
    min_fleet_hosts: int = 4,
    outlier_metrics: tuple[tuple[str, str], ...] = DEFAULT_OUTLIER_METRICS,
) -> list[Finding]:
    """Name the faulty hosts in a fleet's metrics and logs; one Finding per (host, category).

    Thresholds (all keyword arguments):
      interval_s: sampling period; estimated from the data when None.
      load_util_pct: SM utilisation at which a GPU counts as loaded (PCIe downgrade rule).
      persist_window_s, persist_fraction: a throttle bit or a loaded PCIe downgrade must hold in
        this fraction of a window of this length (short blips do not alarm).
      crc_rate_per_s, crc_window_s: NVLink CRC errors per second, averaged over the window.
      lost_grace_s: a GPU silent this long while its host reports is lost.
      stale_s: a host silent this long while the fleet reports is unreachable.
      outlier_window (Minder: 8 samples), outlier_threshold (window-mean deviation from the fleet
        median in min-max-normalised units), outlier_z (and that many robust standard deviations
        from the other machines' window deviations), continuity_s (Minder: 240 s; ours 60 s, picked by
        bench/faulty_hosts.py), continuity_fraction (share of those windows in which the host
        must be the outlier), max_outlier_fraction, min_fleet_hosts (below it, no comparison).
    """
    col = _Collector()
    gt = _as_table(gpu_metrics, _GPU_COLS)
    ht = _as_table(host_metrics, _HOST_COLS)
    gt = gt if gt is not None and gt.num_rows else None
    ht = ht if ht is not None and ht.num_rows else None
    if gt is not None or ht is not None:
        _metrics(
            col,
            gt,
            ht,
            interval_s=interval_s,
            load_util_pct=load_util_pct,
            persist_window_s=persist_window_s,
            persist_fraction=persist_fraction,
            crc_rate_per_s=crc_rate_per_s,
            crc_window_s=crc_window_s,
            lost_grace_s=lost_grace_s,
            stale_s=stale_s,
            outlier_window=outlier_window,
            outlier_threshold=outlier_threshold,
            outlier_z=outlier_z,
            continuity_s=continuity_s,
            continuity_fraction=continuity_fraction,
            max_outlier_fraction=max_outlier_fraction,
            min_fleet_hosts=min_fleet_hosts,
            outlier_metrics=outlier_metrics,
        )
    if log_events is not None:
        _log_xids(col, _as_table(log_events, ("ts", "host", "xid", "source", "line_no", "message", "gpu_pci")))
    return col.findings()


def _metrics(
    col: _Collector,
    gt: pa.Table | None,
    ht: pa.Table | None,
    *,
    interval_s: float | None,
    load_util_pct: float,
    persist_window_s: float,
    persist_fraction: float,
    crc_rate_per_s: float,
    crc_window_s: float,
    lost_grace_s: float,
    stale_s: float,
    outlier_window: int,
    outlier_threshold: float,
    outlier_z: float,
    continuity_s: float,
    continuity_fraction: float,
    max_outlier_fraction: float,
    min_fleet_hosts: int,
    outlier_metrics: tuple[tuple[str, str], ...],
) -> None:
    index: dict[str, int] = {}
    g_host = _host_codes(gt, index) if gt is not None else None
    h_host = _host_codes(ht, index) if ht is not None else None
    names = list(index)
    H = len(names)
    g_ts = _np(gt, "ts") if gt is not None else None
    h_ts = _np(ht, "ts") if ht is not None else None
    t0 = min(x.min() for x in (g_ts, h_ts) if x is not None)
    if interval_s is None:
        interval_s = _estimate_interval(g_ts, g_host, h_ts, h_host)
    step_ns = interval_s * 1e9
    T = 1 + int(max(round((x.max() - t0) / step_ns) for x in (g_ts, h_ts) if x is not None))

    def tbin(ts: np.ndarray) -> np.ndarray:
        return np.rint((ts - t0) / step_ns).astype(np.int64)

    def ts_of(i: np.ndarray | int) -> np.ndarray | int:
        return t0 + np.asarray(i, np.int64) * int(step_ns)

    host_last = np.full(H, -1, np.int64)
    gpu_present_count = None
    pw = max(1, int(round(persist_window_s / interval_s)))

    if gt is not None:
        gpu = _np(gt, "gpu", np.float64).astype(np.int64)
        G = int(gpu.max()) + 1
        tb = tbin(g_ts)
        flat = (g_host * G + gpu) * T + tb
        shape = (H, G, T)
        gpu_flat, gpu_grid_g = flat, G
        present = _grid(flat, True, shape, False, bool)
        last_g = np.where(present.any(-1), T - 1 - present[..., ::-1].argmax(-1), -1)  # (H, G)
        host_last = np.maximum(host_last, last_g.max(axis=1))
        gpu_present_count = present.any(-1).sum(axis=1)  # distinct GPUs seen per host
        util = _np(gt, "sm_util_pct", np.float32)

        # --- throttle bits: thermal and power brake, persisting.
        thr = gt.column("throttle_reasons") if "throttle_reasons" in gt.column_names else None
        gt_temp = None
        if thr is not None and thr.null_count < len(thr):
            bits = pc.fill_null(thr.cast(pa.uint64()), 0).to_numpy().astype(np.uint64)
            for cat, mask, what in (
                (Category.THERMAL, HW_THERMAL | SW_THERMAL, "thermal slowdown"),
                (Category.POWER, HW_POWER_BRAKE, "HW power brake slowdown"),
            ):
                on = (bits & np.uint64(mask)) != 0
                if not on.any():
                    continue
                if cat is Category.THERMAL and gt_temp is None:
                    gt_temp = _grid(flat, _np(gt, "temp_c", np.float32), shape, np.nan, np.float32)
                _persist_rule(
                    col,
                    names,
                    _grid(flat, on, shape, False, bool),
                    pw,
                    persist_fraction,
                    ts_of,
                    cat,
                    Severity.WARNING,
                    0.95,
                    what,
                    {"throttle_mask": hex(mask)},
                    extra=lambda h, g, gt_temp=gt_temp: {"temp_c_max": _nanmax_at(gt_temp, h, g)},
                )
            # HW slowdown alone (no thermal / brake bit): external or unspecified HW slowdown.
            alone = ((bits & np.uint64(HW_SLOWDOWN)) != 0) & (
                (bits & np.uint64(HW_THERMAL | SW_THERMAL | HW_POWER_BRAKE)) == 0
            )
            if alone.any():
                _persist_rule(
                    col,
                    names,
                    _grid(flat, alone, shape, False, bool),
                    pw,
                    persist_fraction,
                    ts_of,
                    Category.THERMAL,
                    Severity.WARNING,
                    0.8,
                    "HW slowdown (clocks halved by hardware)",
                    {"throttle_mask": hex(HW_SLOWDOWN)},
                )

        del gt_temp

        # --- PCIe downgraded while loaded.
        gen, genmax = _np(gt, "pcie_link_gen", np.float32), _np(gt, "pcie_link_gen_max", np.float32)
        wid, widmax = _np(gt, "pcie_link_width", np.float32), _np(gt, "pcie_link_width_max", np.float32)
        down = ((gen < genmax) | (wid < widmax)) & (util >= load_util_pct)
        if down.any():
            dg = _grid(flat, down, shape, False, bool)
            gen_g = _grid(flat[down], gen[down], shape, np.nan, np.float32)
            wid_g = _grid(flat[down], wid[down], shape, np.nan, np.float32)
            _persist_rule(
                col,
                names,
                dg,
                pw,
                persist_fraction,
                ts_of,
                Category.PCIE_DOWNGRADE,
                Severity.WARNING,
                0.95,
                "PCIe link below its maximum under load",
                {"load_util_pct": load_util_pct},
                extra=lambda h, g: {
                    "pcie_link_gen_min": _nanmin_at(gen_g, h, g),
                    "pcie_link_gen_max": float(np.nanmax(genmax)),
                    "pcie_link_width_min": _nanmin_at(wid_g, h, g),
                    "pcie_link_width_max": float(np.nanmax(widmax)),
                },
            )
        del down

        # --- ECC: uncorrectable counts / retired pages that grow within the data.
        for name, cat, sev, what in (
            ("ecc_dbe_total", Category.ECC, Severity.CRITICAL, "uncorrectable (DBE) ECC errors increasing"),
            ("ecc_dbe_volatile", Category.ECC, Severity.CRITICAL, "uncorrectable (DBE) ECC errors increasing"),
            ("retired_pages", Category.ECC, Severity.WARNING, "retired/remapped pages increasing"),
        ):
            v = _np(gt, name)
            if np.isnan(v).all() or np.nanmin(v) == np.nanmax(v):
                continue  # no counter moved anywhere: nothing can have grown
            _counter_growth(col, names, _grid(flat, v, shape), ts_of, name, cat, sev, what)

        # --- NVLink CRC rate.
        crc = _np(gt, "nvlink_crc_errors_total")
        if not np.isnan(crc).all():
            cw = max(1, int(round(crc_window_s / interval_s)))
            c = _ffill(_grid(flat, crc, shape))
            inc = np.full(c.shape, np.nan)
            inc[..., cw:] = c[..., cw:] - c[..., :-cw]
            rate = np.clip(inc, 0, None) / (cw * interval_s)
            hit = np.nan_to_num(rate) >= crc_rate_per_s
            hh, gg = np.nonzero(hit.any(-1))
            if len(hh):
                first = hit[hh, gg].argmax(-1)
                peak = np.nanmax(rate[hh, gg], axis=-1)
                for h, g, f, p in zip(hh, gg, first, peak):
                    col.add(
                        names[h],
                        Category.NVLINK,
                        Severity.WARNING,
                        0.9,
                        f"GPU {g} on {names[h]}: NVLink CRC errors at {p:.0f}/s (threshold {crc_rate_per_s:g}/s)",
                        int(ts_of(f)),
                        int(ts_of(max(0, f - cw))),
                        {
                            "gpu": int(g),
                            "metric": "nvlink_crc_errors_total",
                            "peak_rate_per_s": round(float(p), 2),
                            "window_s": crc_window_s,
                        },
                    )

        # --- Xid from NVML events (column holds the last Xid seen).
        xid = gt.column("xid") if "xid" in gt.column_names else None
        if xid is not None and xid.null_count < len(xid):
            sel = np.flatnonzero(~np.isnan(_np(gt, "xid")))
            df = pd.DataFrame(
                {"h": g_host[sel], "g": gpu[sel], "xid": _np(gt, "xid")[sel].astype(np.int64), "ts": g_ts[sel]}
            )
            first = df.groupby(["h", "g", "xid"], sort=True)["ts"].min().reset_index()
            for r in first.itertuples(index=False):
                _xid_evidence(col, names[r.h], int(r.xid), int(r.ts), {"gpu": int(r.g), "source": "nvml"})

        # --- lost GPUs: samples stop while the host keeps reporting.
        grace = int(round(lost_grace_s / interval_s))
        if ht is not None:
            hb = tbin(h_ts)
            np.maximum.at(host_last, h_host, hb)
        lost = (last_g >= 0) & (last_g < host_last[:, None] - grace)
        for h, g in zip(*np.nonzero(lost)):
            col.add(
                names[h],
                Category.GPU_LOST,
                Severity.CRITICAL,
                0.95,
                f"GPU {g} on {names[h]} stopped reporting at {_iso(ts_of(last_g[h, g]))} while the host kept reporting",
                int(ts_of(last_g[h, g] + grace)),
                int(ts_of(last_g[h, g] + 1)),
                {"gpu": int(g), "last_sample_ts": _iso(ts_of(last_g[h, g]))},
            )
        if H >= 2:
            usual = int(np.bincount(gpu_present_count).argmax())
            for h in np.flatnonzero(gpu_present_count < usual):
                if lost[h].any():
                    continue
                col.add(
                    names[h],
                    Category.GPU_LOST,
                    Severity.WARNING,
                    0.8,
                    f"{names[h]} reports {gpu_present_count[h]} GPUs, the fleet usually {usual}",
                    None,
                    None,
                    {"gpus_seen": int(gpu_present_count[h]), "fleet_usual_gpus": usual},
                )
        del present

    if ht is not None:
        hb = tbin(h_ts)
        h_flat = h_host * T + hb
        np.maximum.at(host_last, h_host, hb)
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
                    int(ts_of(f)),
                    int(ts_of(f)),
                    {"metric": "gpu_count", "from": int(top[h]), "to": int(np.nanmin(gcg[h]))},
                )

    # --- unreachable: the whole host went silent while the fleet kept reporting.
    stale = int(round(stale_s / interval_s))
    fleet_last = int(host_last.max())
    for h in np.flatnonzero((host_last >= 0) & (host_last < fleet_last - stale)):
        col.add(
            names[h],
            Category.UNREACHABLE,
            Severity.CRITICAL,
            0.85,
            f"{names[h]} stopped reporting metrics at {_iso(ts_of(host_last[h]))}; the fleet reported "
            f"{(fleet_last - host_last[h]) * interval_s:.0f} s longer",
            int(ts_of(host_last[h] + stale)),
            int(ts_of(host_last[h] + 1)),
            {"last_sample_ts": _iso(ts_of(host_last[h])), "silent_s": float((fleet_last - host_last[h]) * interval_s)},
        )

    # --- Minder-style outliers for the quiet cases.
    if H >= min_fleet_hosts:
        w = max(1, int(outlier_window))
        cont = max(1, int(round(continuity_s / interval_s)))
        for table, metric in outlier_metrics:
            if table == "gpu" and gt is not None and metric in gt.column_names:
                G = gpu_grid_g
                x = _grid(gpu_flat, _np(gt, metric, np.float32), (H * G, T), np.nan, np.float32)
                owner = np.repeat(np.arange(H), G)
                sub = np.tile(np.arange(G), H)
            elif table == "host" and ht is not None:
                if metric == "net_bytes_per_s":
                    vals = _np(ht, "net_rx_bytes_per_s") + _np(ht, "net_tx_bytes_per_s")
                elif metric in ht.column_names:
                    vals = _np(ht, metric)
                else:
                    continue
                x = _grid(h_flat, vals.astype(np.float32), (H, T), np.nan, np.float32)
                owner, sub = np.arange(H), None
            else:
                continue
            _outliers(
                col,
                names,
                x,
                owner,
                sub,
                metric,
                w,
                outlier_threshold,
                outlier_z,
                cont,
                continuity_fraction,
                max_outlier_fraction,
                ts_of,
                interval_s,
            )


def _estimate_interval(
    g_ts: np.ndarray | None, g_host: np.ndarray | None, h_ts: np.ndarray | None, h_host: np.ndarray | None
) -> float:
    ts, host = (h_ts, h_host) if h_ts is not None else (g_ts, g_host)
    one = np.unique(ts[host == host[0]])
    if len(one) < 2:
        return 1.0
    return max(0.001, float(np.median(np.diff(one))) / 1e9)


def _nanmax_at(g: np.ndarray | None, h: int, gi: int) -> float | None:
    if g is None:
        return None
    v = g[h, gi]
    return None if np.isnan(v).all() else round(float(np.nanmax(v)), 1)


def _nanmin_at(g: np.ndarray, h: int, gi: int) -> float | None:
    v = g[h, gi]
    return None if np.isnan(v).all() else float(np.nanmin(v))


def _persist_rule(
    col: _Collector,
    names: list[str],
    on: np.ndarray,
    pw: int,
    frac: float,
    ts_of: Any,
    cat: Category,
    sev: Severity,
    conf: float,
    what: str,
    base: dict[str, Any],
    extra: Any = None,
) -> None:
    """Alarm (host, gpu) where `on` holds in >= frac of a window of pw samples."""
    share = _window_sum(on, pw, np.float32) / pw
    hit = share >= frac
    hh, gg = np.nonzero(hit.any(-1))
    if not len(hh):
        return
    det = hit[hh, gg].argmax(-1)
    first = on[hh, gg].argmax(-1)
    n_on = on[hh, gg].sum(-1)
    for h, g, d, f, n in zip(hh, gg, det, first, n_on):
        ev = {"gpu": int(g), **base, "samples_with_condition": int(n), "window_s": pw, "min_fraction": frac}
        if extra is not None:
            ev.update({k: v for k, v in extra(h, g).items() if v is not None})
        col.add(
            names[h],
            cat,
            sev,
            conf,
            f"GPU {g} on {names[h]}: {what} in {int(n)} samples from {_iso(ts_of(f))}",
            int(ts_of(d)),
            int(ts_of(f)),
            ev,
        )


def _counter_growth(
    col: _Collector, names: list[str], v: np.ndarray, ts_of: Any, metric: str, cat: Category, sev: Severity, what: str
) -> None:
    valid = ~np.isnan(v)
    has = valid.any(-1)
    first_i = valid.argmax(-1)
    base = np.take_along_axis(v, first_i[..., None], -1)[..., 0]
    grew = np.nan_to_num(v - base[..., None], nan=0.0) > 0
    hh, gg = np.nonzero(grew.any(-1) & has)
    for h, g in zip(hh, gg):
        f = int(grew[h, g].argmax())
        end = float(np.nanmax(v[h, g]))
        col.add(
            names[h],
            cat,
            sev,
            0.97,
            f"GPU {g} on {names[h]}: {what} ({metric} {base[h, g]:.0f} -> {end:.0f})",
            int(ts_of(f)),
            int(ts_of(f)),
            {"gpu": int(g), "metric": metric, "from": float(base[h, g]), "to": end},
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


def _outliers(
    col: _Collector,
    names: list[str],
    x: np.ndarray,
    owner: np.ndarray,
    sub: np.ndarray | None,
    metric: str,
    w: int,
    thr: float,
    z_thr: float,
    cont: int,
    cont_frac: float,
    max_frac: float,
    ts_of: Any,
    interval_s: float,
) -> None:
    """Minder: min-max normalise, compare each machine's window with the fleet, demand continuity."""
    valid = ~np.isnan(x)
    if valid.sum() == 0:
        return
    lo, hi = float(np.nanmin(x)), float(np.nanmax(x))
    if hi - lo <= 0:
        return
    z = (x - lo) / (hi - lo)
    # Fleet reference: per-second median over (a deterministic sample of) machines.
    pick = _sample_rows(z.shape[0])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN seconds (nobody reported) stay NaN
        ref = np.nanmedian(z[pick], axis=0)
    ok = valid & ~np.isnan(ref)[None, :]
    dev = np.where(ok, z - ref[None, :], np.float32(0.0)).astype(np.float32, copy=False)
    n = _window_sum(ok, w, np.float32)
    mean_dev = _window_sum(dev, w, np.float32) / np.maximum(n, 1)
    score = np.abs(mean_dev) * (n >= max(1, w // 2))
    # Outlier relative to the fleet's own spread too (robust z over machines, per window): a noisy
    # metric (bursty network counters) needs a larger deviation than a smooth one.
    sample = mean_dev[pick]
    centre = np.median(sample, axis=0)
    spread = 1.4826 * np.median(np.abs(sample - centre[None, :]), axis=0)
    z = np.abs(mean_dev - centre[None, :]) / np.maximum(spread, 0.01)[None, :]
    cand_row = (score > thr) & (z > z_thr)
    H = len(names)
    if sub is None:
        cand = cand_row
    else:
        cand = cand_row.reshape(H, -1, x.shape[1]).any(axis=1)
    # A window where much of the fleet deviates is a fleet-wide event, not one bad machine.
    crowd = cand.sum(axis=0) > max(2, max_frac * H)
    cand &= ~crowd[None, :]
    # Continuity: the same machine is the outlier in >= cont_frac of the windows of the last
    # `cont` samples (a strict unbroken run lets one noisy window reset a real fault's clock).
    share = _window_sum(cand, cont, np.float32)
    alarm = (share >= cont_frac * cont) & cand
    for h in np.flatnonzero(alarm.any(-1)):
        d = int(alarm[h].argmax())
        start = d - cont + 1
        seg = slice(start, d + 1)
        if sub is None:
            md = float(np.mean(mean_dev[h, seg]))
            gpu = None
            raw_dev = md * (np.nanmax(x) - np.nanmin(x))
        else:
            G = x.shape[0] // H
            per = np.abs(mean_dev[h * G : (h + 1) * G, seg]).mean(axis=1)
            gi = int(per.argmax())
            md = float(np.mean(mean_dev[h * G + gi, seg]))
            gpu = gi
            raw_dev = md * (hi - lo)
        ev = {
            "metric": metric,
            "direction": "below fleet" if md < 0 else "above fleet",
            "normalised_deviation": round(md, 3),
            "deviation": round(float(raw_dev), 2),
            "outlier_for_s": float(int(cand[h].sum()) * interval_s),
            "window_samples": w,
            "continuity_s": float(cont * interval_s),
            "threshold": thr,
        }
        if gpu is not None:
            ev["gpu"] = gpu
        col.add(
            names[h],
            Category.METRIC_OUTLIER,
            Severity.WARNING,
            0.8,
            f"{names[h]}{' GPU ' + str(gpu) if gpu is not None else ''}: {metric} {abs(raw_dev):.3g} "
            f"{'below' if md < 0 else 'above'} the fleet median in {int(cand[h].sum()) * interval_s:.0f} s of windows",
            int(ts_of(d)),
            int(ts_of(max(0, start - w + 1))),
            ev,
        )


def _sample_rows(n: int, k: int = 512) -> np.ndarray:
    """A fixed random sample of machines for the fleet reference (a strided one would pick the
    same GPU index on every host)."""
    if n <= k:
        return np.arange(n)
    return np.sort(np.random.default_rng(0).choice(n, k, replace=False))


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


def analyze(signals: Signals) -> list[Finding]:
    return find_faulty_hosts(
        signals.tables.get(SignalKind.GPU_METRICS),
        signals.tables.get(SignalKind.HOST_METRICS),
        signals.tables.get(SignalKind.LOG_EVENTS),
    )
