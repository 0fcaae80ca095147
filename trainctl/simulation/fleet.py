"""Fleet simulator: realistic `gpu_metrics` / `host_metrics` for hosts x GPUs x time, with faults.

What it models (and why):
- A synchronous data-parallel job: every host runs the same forward/backward/allreduce cycle
  (step period ~1.7 s), so all machines look alike second by second (Minder's premise). Each
  host's agent samples at its own sub-second offset and NVML utilisation is an average over the
  last second, so hosts differ by phase-aliasing noise, as real fleets do.
- A 20 s idle warm-up (init, data loading) at the start, where GPUs idle and clocks drop.
- Injected faults (FAULT_KINDS): hard-counter faults (ECC/Xid, lost GPU, PCIe downgrade, NVLink
  CRC storm, HW thermal slowdown, power brake), quiet ones seen only as a metric outlier (compute
  slowdown, NIC degradation, CPU contention) and a host that stops reporting.
- Healthy quirks (QUIRK_KINDS) that a detector must *not* alarm on.

Everything is generated with numpy on (host, gpu, time) arrays so 1,024 hosts x 8 GPUs x 15 min
takes seconds. Ground truth goes to `fleet_labels.json` beside the tables.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from trainctl.dataset import write_table
from trainctl.errors import InputError
from trainctl.schemas import SignalKind

__all__ = [
    "FAULT_KINDS",
    "QUIRK_KINDS",
    "FaultSpec",
    "QuirkSpec",
    "FleetScenario",
    "SimResult",
    "parse_fault",
    "parse_quirk",
    "host_names",
    "simulate",
    "write_fleet",
    "LABELS_FILE",
]

logger = logging.getLogger(__name__)

LABELS_FILE = "fleet_labels.json"
START_NS = 1_795_305_600 * 10**9  # 2026-11-22T00:00:00Z
WARMUP_S = 20
STEP_PERIOD_S = 1.7
COMPUTE_FRACTION = 0.75
GIB = 1 << 30
NET_PEAK_BYTES_PER_S = 40e9  # allreduce traffic per host while communicating (~320 Gb/s)
POWER_LIMIT_W = 700.0
SM_CLOCK_MAX_MHZ = 1980
# One SKU, one VBIOS and the board's default limit everywhere: this simulator's fleet is uniform
# (bench/validation/fleetgen.py is the one with mixed SKUs, VBIOS versions and power policies).
GPU_NAME = "NVIDIA H100 80GB HBM3"
VBIOS_VERSION = "96.00.99.00.01"
TEMP_SLOWDOWN_C = 87.0

# NVML clocks-event-reason bits: the same definitions the analyzer reads.
from trainctl.nvml_codes import (  # noqa: E402
    GPU_IDLE,
    HW_POWER_BRAKE,
    HW_SLOWDOWN,
    HW_THERMAL,
    SW_POWER_CAP,
)

# fault kind -> the faulty_host category a detector should name.
FAULT_KINDS: dict[str, str] = {
    "ecc_dbe": "ecc",  # DBE count grows; Xid 48 then 63 (row remap recorded)
    "xid64": "ecc",  # DBE, Xid 48 then 64 (row remap failed)
    "xid94": "ecc",  # contained ECC error
    "xid95": "ecc",  # uncontained ECC error
    "gpu_lost": "gpu_lost",  # Xid 79: one GPU's rows stop, gpu_count drops
    "pcie_downgrade": "pcie_downgrade",  # x16 -> x8 and gen5 -> gen4, also under load
    "nvlink_crc": "nvlink",  # CRC error storm on one GPU
    "thermal": "thermal",  # HW thermal slowdown bits, hot, clocks down
    "power_brake": "power",  # HW power brake, power and clocks collapse
    "quiet_slowdown": "metric_outlier",  # lower SM util/power/clock, no counter moves
    "nic_degraded": "metric_outlier",  # network throughput drops
    "cpu_contention": "metric_outlier",  # CPU pegged by a noisy neighbour
    "unreachable": "unreachable",  # the whole host stops reporting
}

QUIRK_KINDS: tuple[str, ...] = (
    "pcie_idle",  # PCIe generation drops to 1 while the GPU idles (ASPM): healthy
    "sw_power_cap",  # SW power-cap bit at peak load: healthy
    "old_ecc",  # non-zero but constant ECC/retired-page counts from an earlier boot
    "low_crc",  # a slow trickle of NVLink CRC errors
    "warm_host",  # 14 C warmer, never throttled
    "fleet_pause",  # every host idles ~40 s (checkpoint), start jittered by up to 2 s
    "blips",  # a few 2-4 s drops with a thermal bit and a small CRC jump
)


@dataclass(frozen=True)
class FaultSpec:
    kind: str
    host: str
    onset_s: float | None = None  # default: 40% into the scenario
    gpu: int | None = None  # default: chosen by the seed
    # Strength of the quiet faults (quiet_slowdown, nic_degraded, cpu_contention): 1.0 is the
    # default effect (-30% power, -65% network, CPU pegged at 96%), 0.5 half of it.
    magnitude: float = 1.0


@dataclass(frozen=True)
class QuirkSpec:
    kind: str
    host: str | None = None  # None for fleet-wide quirks (fleet_pause)
    at_s: float | None = None


@dataclass(frozen=True)
class FleetScenario:
    hosts: int
    gpus: int = 8
    seconds: int = 600
    faults: tuple[FaultSpec, ...] = ()
    quirks: tuple[QuirkSpec, ...] = ()
    seed: int = 0
    interval_s: float = 1.0
    name: str = ""


@dataclass
class SimResult:
    gpu_metrics: pa.Table  # includes a `host` column (dropped into the partition path on write)
    host_metrics: pa.Table
    labels: dict[str, Any] = field(default_factory=dict)


def host_names(n: int) -> list[str]:
    width = max(2, len(str(n)))
    return [f"node{i:0{width}d}" for i in range(1, n + 1)]


def _resolve_host(token: str, names: Sequence[str]) -> str:
    if token in names:
        return token
    if token.isdigit() and 1 <= int(token) <= len(names):
        return names[int(token) - 1]
    raise InputError(
        f"host {token!r} is not in the simulated fleet ({names[0]}..{names[-1]}); use a name or a 1-based index"
    )


def parse_fault(spec: str) -> FaultSpec:
    """`KIND@HOST[:onset_s[:magnitude]]`, e.g. `thermal@node03:120` or `nic_degraded@4:300:0.5`.

    HOST may be a 1-based index; magnitude scales the quiet faults (1.0 = default effect).
    """
    kind, sep, rest = spec.partition("@")
    if not sep or kind not in FAULT_KINDS:
        raise InputError(
            f"--fault {spec!r}: expected KIND@HOST[:onset_s[:magnitude]] with KIND one of {', '.join(FAULT_KINDS)}"
        )
    host, _, tail = rest.partition(":")
    onset, _, mag = tail.partition(":")
    try:
        onset_s = float(onset) if onset else None
        magnitude = float(mag) if mag else 1.0
    except ValueError:
        raise InputError(f"--fault {spec!r}: onset {onset!r} / magnitude {mag!r} must be numbers") from None
    if not 0.0 < magnitude <= 1.0:  # 1.0 is the full effect: a CPU pegged at 96%; more would pass 100%
        raise InputError(f"--fault {spec!r}: magnitude {magnitude:g} must be > 0 and <= 1 (1.0 = the full effect)")
    return FaultSpec(kind, host, onset_s, magnitude=magnitude)


def parse_quirk(spec: str) -> QuirkSpec:
    """`KIND@HOST[:at_s]`, or `fleet_pause[:at_s]` (fleet-wide)."""
    kind, sep, rest = spec.partition("@")
    if ":" in kind and not sep:
        kind, _, rest = kind.partition(":")
        rest = ":" + rest
    if kind not in QUIRK_KINDS:
        raise InputError(f"--quirk {spec!r}: KIND must be one of {', '.join(QUIRK_KINDS)}")
    host, _, at = rest.partition(":")
    if kind != "fleet_pause" and not host:
        raise InputError(f"--quirk {spec!r}: {kind} needs a host, e.g. {kind}@node02")
    try:
        at_s = float(at) if at else None
    except ValueError:
        raise InputError(f"--quirk {spec!r}: {at!r} is not a number of seconds") from None
    return QuirkSpec(kind, host or None, at_s)


def _running_avg_compute(t: np.ndarray, offset: np.ndarray, period: float) -> np.ndarray:
    """Fraction of the last second each host spent in compute (NVML util averages a window)."""
    sub = np.linspace(0.0, 1.0, 20, endpoint=False)
    phase = ((t[None, :, None] + offset[:, None, None] - sub[None, None, :]) / period) % 1.0
    return (phase < COMPUTE_FRACTION).mean(axis=-1)


def simulate(sc: FleetScenario) -> SimResult:
    """Generate one scenario's tables and labels (deterministic for a given seed)."""
    rng = np.random.default_rng(sc.seed)
    H, G, T = sc.hosts, sc.gpus, int(sc.seconds / sc.interval_s)
    if H < 1 or G < 1 or T < 1:
        raise InputError(f"fleet-sim needs at least 1 host, 1 GPU and 1 sample (got {H}, {G}, {T})")
    names = host_names(H)
    hidx = {n: i for i, n in enumerate(names)}
    t = np.arange(T, dtype=np.float64) * sc.interval_s
    offset = rng.uniform(0.0, 1.0, H)  # each agent's sampling offset within the second

    # --- load: warm-up idle, then the synchronous step cycle; optional fleet-wide pause.
    compute = _running_avg_compute(t, offset, STEP_PERIOD_S).astype(np.float32)  # (H, T)
    start_jitter = rng.uniform(0.0, 2.0, H)
    busy = (t[None, :] >= WARMUP_S + start_jitter[:, None]).astype(np.float32)  # 1 = training
    for q in sc.quirks:
        if q.kind == "fleet_pause":
            at = q.at_s if q.at_s is not None else 0.6 * sc.seconds
            j = rng.uniform(0.0, 2.0, H)
            busy[(t[None, :] >= at + j[:, None]) & (t[None, :] < at + 40 + j[:, None])] = 0.0
    util_h = busy * (35.0 + 63.0 * compute)  # 98% in fwd/bwd, ~35% during allreduce
    sm_util = util_h[:, None, :] + rng.normal(0.0, 2.0, (H, G, T)).astype(np.float32)
    power = 70.0 + 580.0 * (np.clip(sm_util, 0, 100) / 100.0) ** 1.2 + rng.normal(0, 12.0, (H, G, T)).astype(np.float32)
    sm_clock = np.where(busy[:, None, :] > 0, SM_CLOCK_MAX_MHZ - np.abs(rng.normal(0, 15, (H, G, T))), 345.0)
    temp_base = rng.normal(0, 1.5, (H, G, 1)).astype(np.float32)
    mem_used = np.where(busy[:, None, :] > 0, 62 * GIB, 2 * GIB) + rng.integers(0, 64 << 20, (H, G, T))
    pcie_gen = np.full((H, G, T), 5, np.int8)
    pcie_width = np.full((H, G, T), 16, np.int8)
    ecc_sbe = np.zeros((H, G, T), np.int64)
    ecc_dbe = np.zeros((H, G, T), np.int64)
    retired = np.zeros((H, G, T), np.int64)
    crc = np.zeros((H, G, T), np.int64)
    replays = np.zeros((H, G, T), np.int64)
    throttle = np.where(busy[:, None, :] > 0, 0, GPU_IDLE).astype(np.uint64) * np.ones((1, G, 1), np.uint64)
    xid = np.full((H, G, T), -1, np.int32)  # -1 = null
    present = np.ones((H, G, T), bool)  # a lost GPU's rows are dropped
    host_present = np.ones((H, T), bool)
    cpu = busy * 30.0 + 6.0 + rng.normal(0, 2.0, (H, T))
    net = busy * (1.0 - compute) * NET_PEAK_BYTES_PER_S * rng.uniform(0.93, 1.0, (H, T))
    load1 = busy * 14.0 + 1.0 + rng.normal(0, 0.5, (H, T))
    temp_extra = np.zeros((H, G, 1), np.float32)

    labels_faults, labels_quirks = [], []

    for q in sc.quirks:
        if q.kind == "fleet_pause":
            labels_quirks.append({"kind": q.kind, "host": None})
            continue
        h = hidx[_resolve_host(q.host or "", names)]
        g = int(rng.integers(0, G))
        if q.kind == "pcie_idle":
            idle = sm_util[h] < 10.0
            pcie_gen[h][idle] = 1
        elif q.kind == "sw_power_cap":
            peak = sm_util[h] > 80.0
            throttle[h][peak] |= np.uint64(SW_POWER_CAP)
            power[h] = np.minimum(power[h], 600.0)
        elif q.kind == "old_ecc":
            ecc_sbe[h] = 1234
            ecc_dbe[h, g] = 2
            retired[h, g] = 2
        elif q.kind == "low_crc":
            crc[h, g] = 1200 + np.cumsum(rng.poisson(1 / 30, T))
        elif q.kind == "warm_host":
            temp_extra[h] = 14.0
        elif q.kind == "blips":
            for at in rng.uniform(WARMUP_S + 10, sc.seconds - 10, 3):
                s = slice(int(at), int(at) + int(rng.integers(2, 5)))
                sm_util[h, :, s] = 5.0
                power[h, :, s] = 100.0
                throttle[h, g, s] |= np.uint64(HW_THERMAL | HW_SLOWDOWN)
            crc[h, g, int(sc.seconds * 0.5) :] += 15
        labels_quirks.append({"kind": q.kind, "host": names[h], "gpu": g})

    for f in sc.faults:
        h = hidx[_resolve_host(f.host, names)]
        g = f.gpu if f.gpu is not None else int(rng.integers(0, G))
        onset = f.onset_s if f.onset_s is not None else 0.4 * sc.seconds
        if not 0.0 <= onset < sc.seconds:  # the labels would name a fault the data never shows
            raise InputError(
                f"--fault {f.kind}@{f.host}: onset {onset:g} s is outside the simulated {sc.seconds:g} s; "
                f"pick 0 <= onset < {sc.seconds:g}"
            )
        o = int(onset / sc.interval_s)
        after = slice(o, T)
        k = f.kind
        if k in ("ecc_dbe", "xid64", "xid94", "xid95"):
            steps = np.zeros(T, np.int64)
            steps[o::60] = 1  # one more DBE a minute while the cell keeps failing
            ecc_dbe[h, g] += np.cumsum(steps)
            retired[h, g] += np.cumsum(steps)
            first, then = {"ecc_dbe": (48, 63), "xid64": (48, 64), "xid94": (94, 63), "xid95": (95, 95)}[k]
            xid[h, g, o : o + 2] = first
            xid[h, g, o + 2 :] = then
        elif k == "gpu_lost":
            present[h, g, after] = False
        elif k == "pcie_downgrade":
            pcie_width[h, :, after] = 8
            pcie_gen[h, :, after] = 4
            replays[h, :, after] += np.arange(T - o) // 10  # the retrained link keeps replaying
            # A narrower link starves the NIC and the GPUs a little (Minder's case study).
            net[h, after] *= 0.8
        elif k == "nvlink_crc":
            crc[h, g, after] += np.cumsum(rng.poisson(800, T - o))
        elif k == "thermal":
            hot = rng.random((G, T - o)) < 0.85
            throttle[h, :, after][hot] |= np.uint64(HW_THERMAL | HW_SLOWDOWN)
            temp_extra[h] = 0
            sm_clock[h, :, after] = np.where(hot, 1250.0, sm_clock[h, :, after])
            power[h, :, after] *= 0.75
        elif k == "power_brake":
            throttle[h, :, after] |= np.uint64(HW_POWER_BRAKE | HW_SLOWDOWN)
            power[h, :, after] = np.minimum(power[h, :, after], 150.0)
            sm_clock[h, :, after] = 800.0
        elif k == "quiet_slowdown":
            m = f.magnitude
            sm_util[h, :, after] -= 12.0 * m
            power[h, :, after] *= 1.0 - 0.3 * m
            sm_clock[h, :, after] *= 1.0 - 0.2 * m
        elif k == "nic_degraded":
            net[h, after] *= 1.0 - 0.65 * f.magnitude
        elif k == "cpu_contention":
            cpu[h, after] += (96.0 - cpu[h, after]) * f.magnitude + rng.normal(0, 1.5, T - o)
            load1[h, after] += (80.0 - load1[h, after]) * f.magnitude
        elif k == "unreachable":
            present[h, :, after] = False
            host_present[h, after] = False
        else:  # parse_fault already refuses unknown kinds
            raise InputError(f"unknown fault kind {k!r}")
        labels_faults.append(
            {
                "kind": k,
                "category": FAULT_KINDS[k],
                "host": names[h],
                "gpu": g,
                "onset_s": float(onset),
                "magnitude": f.magnitude,
            }
        )

    # Temperature follows power with a lag (heat capacity), plus the host's own offset.
    temp = 30.0 + temp_base + temp_extra + 0.06 * power
    for f in sc.faults:
        if f.kind == "thermal":
            h = hidx[_resolve_host(f.host, names)]
            o = int((f.onset_s if f.onset_s is not None else 0.4 * sc.seconds) / sc.interval_s)
            temp[h, :, o:] = 91.0 + rng.normal(0, 1.0, (G, T - o))

    sm_util = np.clip(sm_util, 0, 100)
    power = np.clip(power, 50, POWER_LIMIT_W)
    gpu_count = present.sum(axis=1).astype(np.int16)  # (H, T)

    # --- tables (one row per present sample), rows ordered by host then gpu then time.
    hh, gg, tt = np.nonzero(present)
    ts = START_NS + (tt * sc.interval_s * 1e9).astype(np.int64) + (offset[hh] * 1e9).astype(np.int64)
    xv = xid[hh, gg, tt]
    n_rows = len(hh)
    gpu_tbl = pa.table(
        {
            "ts": pa.array(ts, pa.timestamp("ns", tz="UTC")),
            "gpu": pa.array(gg.astype(np.int16)),
            "gpu_name": _constant_dict(GPU_NAME, n_rows),
            "vbios_version": _constant_dict(VBIOS_VERSION, n_rows),
            "sm_util_pct": pa.array(sm_util[hh, gg, tt].astype(np.float32)),
            "mem_util_pct": pa.array((sm_util[hh, gg, tt] * 0.55).astype(np.float32)),
            "power_w": pa.array(power[hh, gg, tt].astype(np.float32)),
            "power_limit_w": pa.array(np.full(len(hh), POWER_LIMIT_W, np.float32)),
            "power_limit_default_w": pa.array(np.full(len(hh), POWER_LIMIT_W, np.float32)),
            "temp_c": pa.array(temp[hh, gg, tt].astype(np.float32)),
            "temp_slowdown_c": pa.array(np.full(len(hh), TEMP_SLOWDOWN_C, np.float32)),
            "sm_clock_mhz": pa.array(sm_clock[hh, gg, tt].astype(np.int32)),
            "sm_clock_max_mhz": pa.array(np.full(len(hh), SM_CLOCK_MAX_MHZ, np.int32)),
            "mem_used_bytes": pa.array(mem_used[hh, gg, tt].astype(np.int64)),
            "mem_total_bytes": pa.array(np.full(len(hh), 80 * GIB, np.int64)),
            "pcie_link_gen": pa.array(pcie_gen[hh, gg, tt]),
            "pcie_link_gen_max": pa.array(np.full(len(hh), 5, np.int8)),
            "pcie_link_width": pa.array(pcie_width[hh, gg, tt]),
            "pcie_link_width_max": pa.array(np.full(len(hh), 16, np.int8)),
            "pcie_replay_errors_total": pa.array(replays[hh, gg, tt]),
            "ecc_sbe_volatile": pa.array(ecc_sbe[hh, gg, tt] - ecc_sbe[hh, gg, 0]),
            "ecc_dbe_volatile": pa.array(ecc_dbe[hh, gg, tt] - ecc_dbe[hh, gg, 0]),
            "ecc_sbe_total": pa.array(ecc_sbe[hh, gg, tt]),
            "ecc_dbe_total": pa.array(ecc_dbe[hh, gg, tt]),
            "retired_pages": pa.array(retired[hh, gg, tt]),
            "nvlink_crc_errors_total": pa.array(crc[hh, gg, tt]),
            "throttle_reasons": pa.array(throttle[hh, gg, tt], pa.uint64()),
            "xid": pa.array(xv, pa.int32(), mask=xv < 0),
            "host": pa.DictionaryArray.from_arrays(pa.array(hh.astype(np.int32)), pa.array(names)),
        }
    )
    hh2, tt2 = np.nonzero(host_present)
    ts2 = START_NS + (tt2 * sc.interval_s * 1e9).astype(np.int64) + (offset[hh2] * 1e9).astype(np.int64)
    host_tbl = pa.table(
        {
            "ts": pa.array(ts2, pa.timestamp("ns", tz="UTC")),
            "cpu_util_pct": pa.array(np.clip(cpu[hh2, tt2], 0, 100).astype(np.float32)),
            "mem_used_bytes": pa.array(np.full(len(hh2), 400 * GIB, np.int64)),
            "mem_total_bytes": pa.array(np.full(len(hh2), 2048 * GIB, np.int64)),
            "net_rx_bytes_per_s": pa.array(np.maximum(net[hh2, tt2], 0.0)),
            "net_tx_bytes_per_s": pa.array(np.maximum(net[hh2, tt2] * 0.98, 0.0)),
            "load1": pa.array(np.maximum(load1[hh2, tt2], 0).astype(np.float32)),
            "gpu_count": pa.array(gpu_count[hh2, tt2]),
            "host": pa.DictionaryArray.from_arrays(pa.array(hh2.astype(np.int32)), pa.array(names)),
        }
    )
    labels = {
        "scenario": sc.name,
        "seed": sc.seed,
        "hosts": names,
        "gpus": G,
        "seconds": sc.seconds,
        "interval_s": sc.interval_s,
        "start_ts_ns": START_NS,
        "faulty_hosts": sorted({f["host"] for f in labels_faults}),
        "faults": labels_faults,
        "quirks": labels_quirks,
    }
    return SimResult(gpu_tbl, host_tbl, labels)


def _constant_dict(value: str, n: int) -> pa.DictionaryArray:
    return pa.DictionaryArray.from_arrays(pa.array(np.zeros(n, np.int32)), pa.array([value]))


def _split_by_host(table: pa.Table) -> list[tuple[str, pa.Table]]:
    """Rows are grouped by host already (np.nonzero order), so slicing is zero-copy."""
    codes = table.column("host").combine_chunks()
    idx = codes.indices.to_numpy()
    names = codes.dictionary.to_pylist()
    body = table.drop_columns(["host"])
    if len(idx) == 0:
        return []
    cut = np.flatnonzero(np.diff(idx)) + 1
    starts = np.concatenate([[0], cut])
    ends = np.concatenate([cut, [len(idx)]])
    return [(names[idx[s]], body.slice(s, e - s)) for s, e in zip(starts, ends)]


def write_fleet(result: SimResult, out: str | Path) -> Path:
    """Write the tables as a dataset (`<out>/<kind>/host=H/part-sim.parquet`) and the labels."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    for kind, table in ((SignalKind.GPU_METRICS, result.gpu_metrics), (SignalKind.HOST_METRICS, result.host_metrics)):
        for host, part in _split_by_host(table):
            write_table(out, kind, host, part, part="sim")
    (out / LABELS_FILE).write_text(json.dumps(result.labels, indent=2))
    return out


def scenario_to_dict(sc: FleetScenario) -> dict[str, Any]:
    return asdict(sc)
