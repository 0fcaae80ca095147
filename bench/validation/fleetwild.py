"""fleetwild: a third fleet generator for the faulty-host detector, written without reading the detector.

Writes `out_dir/gpu_metrics/host=<h>/part-0.parquet` and `out_dir/host_metrics/host=<h>/part-0.parquet`
(DESIGN.md "Parquet dataset"; column names and types as trainctl/schemas.py; `host` only in the path).
Everything is drawn from the scenario spec (a JSON-able dict) and its `seed`: the same spec gives the
same tables, byte for byte, and `generate` returns the sha256 of their content.

Healthy variance (the sources, short; see wild_report.py's module doc for the longer list):
- per-GPU performance/power spread of identical SKUs: Sinha et al., "Not all GPUs are created equal"
  (SC'22, arXiv 2208.11035): 8 % average (up to 22 %) variation, outliers up to 1.5x the median; so
  per-GPU power efficiency and clock-at-cap factors of a few percent, temperature offsets by slot,
  host inlet and rack (hot racks), air vs liquid cooling.
- NVML behaviour an operator sees on healthy GPUs: idle GPUs drop their PCIe link to Gen1 (power
  saving) and report GPU_IDLE 0x1; busy Hopper parts sit at their power limit with SW_POWER_CAP 0x4
  set much of the time; fleets pinned with application clocks report 0x2; sync boost 0x10; GPUs
  blocked in an NCCL collective show ~100 % "utilization" at low power (a spinning kernel).
- lifetime ECC SBE and NVLink CRC counters are non-zero but flat on some healthy GPUs; A100+ retire
  memory by row remapping, so retired_pages is null (NVML: not supported) on every SKU here.
- collection quirks: clock skew between hosts, sampling jitter and dropped samples, an agent restart
  (driver-volatile counters read from 0 again), a multi-minute gap, a late-joining host, nulls where a
  device or an exporter lacks a field, columns absent from some exporters.

Faults (seeds.md section 4 catalogue; Xid meanings from NVIDIA's Xid catalogue) and their labels, the
DESIGN.md `category` an SRE would file them under:
  ecc_dbe        Xid 48 (+63/64 row remap, or 94/95 contained/uncontained), DBE counters +1..4  -> ecc
  ecc_sbe_storm  SBE counters climbing fast, Xid 92 (high single-bit ECC rate) or none         -> ecc
  gpu_lost       Xid 79 fell off the bus: rows stop or go null, gpu_count drops                 -> gpu_lost
  nvlink         CRC counter growth on one GPU or a pair, Xid 74 (or no Xid: replays only)      -> nvlink
  pcie_downgrade link trained down (x16 -> x8/x4 or Gen5/4 -> Gen3) under load, replays grow    -> pcie_downgrade
  power_cap      enforced limit lowered (power_limit_w when exported), pinned at it, 0x4, slower -> power
  power_brake    HW_POWER_BRAKE 0x80 | HW_SLOWDOWN 0x8 on a host's GPUs, clocks and power collapse -> power
  thermal        temperature at/over the slowdown threshold, 0x20 / 0x40|0x8, clocks down      -> thermal
  gsp_xid        Xid 119/120 (GSP RPC timeout): the GPU wedges, the job hangs                   -> xid
  unreachable    every series of a host stops and never resumes                                 -> unreachable

Known limits, found after freezing (left as they are so the frozen hashes hold):
- staggered starts are per host: with the "wave" stagger a late host warms up while its peers already
  run at full load, which a synchronous job would not do (early hosts would wait idle or spinning at
  the first collective); a detector comparing power in those minutes sees a real but job-shaped gap.
- a fault's onset is drawn after warm-up, so in a 5-6 min run it can surface in the last one or two
  samples only (a thermal ramp that ends as the run ends).
- the "blips" quirk sets SW_THERMAL 0x20 for one sample on a hot-rack GPU that is ~10 C below its
  slowdown temperature; NVML can raise it off memory temperature, but it is a judgement call.
"""

from __future__ import annotations

import hashlib
import io
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

__all__ = ["SKUS", "FAULT_LABELS", "build_tables", "tables_sha256", "generate", "make_scenarios"]

GIB = 1024**3
MIB = 1024**2

# Public spec-sheet values (TDP, max boost clock, memory, PCIe); idle clock / slowdown temperatures
# approximate what `nvidia-smi -q` prints on these parts.
SKUS: dict[str, dict[str, Any]] = {
    "a100-40": dict(
        name="NVIDIA A100-SXM4-40GB", tdp=400.0, idle_w=52.0, clk=1410, idle_clk=210, mem=40960 * MIB,
        gen=4, width=16, nvlink=True, slowdown=90.0, vbios="92.00.45.00.05", ecc=True,
    ),
    "a100-80": dict(
        name="NVIDIA A100-SXM4-80GB", tdp=400.0, idle_w=60.0, clk=1410, idle_clk=210, mem=81920 * MIB,
        gen=4, width=16, nvlink=True, slowdown=90.0, vbios="92.00.36.00.10", ecc=True,
    ),
    "h100-sxm": dict(
        name="NVIDIA H100 80GB HBM3", tdp=700.0, idle_w=70.0, clk=1980, idle_clk=345, mem=81559 * MIB,
        gen=5, width=16, nvlink=True, slowdown=87.0, vbios="96.00.89.00.01", ecc=True,
    ),
    "h100-pcie": dict(
        name="NVIDIA H100 PCIe", tdp=350.0, idle_w=48.0, clk=1755, idle_clk=345, mem=81559 * MIB,
        gen=5, width=16, nvlink=False, slowdown=88.0, vbios="96.00.30.00.01", ecc=True,
    ),
    "h200": dict(
        name="NVIDIA H200", tdp=700.0, idle_w=76.0, clk=1980, idle_clk=345, mem=143771 * MIB,
        gen=5, width=16, nvlink=True, slowdown=87.0, vbios="96.00.A5.00.01", ecc=True,
    ),
    "l40s": dict(
        name="NVIDIA L40S", tdp=350.0, idle_w=35.0, clk=2520, idle_clk=210, mem=46068 * MIB,
        gen=4, width=16, nvlink=False, slowdown=88.0, vbios="95.02.66.00.02", ecc=True,
    ),
}  # fmt: skip

FAULT_LABELS = {
    "ecc_dbe": "ecc",
    "ecc_sbe_storm": "ecc",
    "gpu_lost": "gpu_lost",
    "nvlink": "nvlink",
    "pcie_downgrade": "pcie_downgrade",
    "power_cap": "power",
    "power_brake": "power",
    "thermal": "thermal",
    "gsp_xid": "xid",
    "unreachable": "unreachable",
}

_TS = pa.timestamp("ns", tz="UTC")
_DICT = pa.dictionary(pa.int32(), pa.string())
_META = {b"trainctl.kind": b"", b"trainctl.schema_version": b"1"}

GPU_COLS: list[tuple[str, pa.DataType]] = [
    ("ts", _TS), ("gpu", pa.int16()), ("gpu_uuid", pa.string()), ("pci_bus_id", pa.string()),
    ("gpu_name", _DICT), ("vbios_version", _DICT), ("sm_util_pct", pa.float32()), ("mem_util_pct", pa.float32()),
    ("power_w", pa.float32()), ("power_limit_w", pa.float32()), ("power_limit_default_w", pa.float32()),
    ("temp_c", pa.float32()), ("temp_slowdown_c", pa.float32()), ("sm_clock_mhz", pa.int32()),
    ("sm_clock_max_mhz", pa.int32()), ("mem_used_bytes", pa.int64()), ("mem_total_bytes", pa.int64()),
    ("pcie_link_gen", pa.int8()), ("pcie_link_gen_max", pa.int8()), ("pcie_link_width", pa.int8()),
    ("pcie_link_width_max", pa.int8()), ("pcie_replay_errors_total", pa.int64()), ("ecc_sbe_volatile", pa.int64()),
    ("ecc_dbe_volatile", pa.int64()), ("ecc_sbe_total", pa.int64()), ("ecc_dbe_total", pa.int64()),
    ("retired_pages", pa.int64()), ("nvlink_crc_errors_total", pa.int64()), ("throttle_reasons", pa.uint64()),
    ("xid", pa.int32()),
]  # fmt: skip
HOST_COLS: list[tuple[str, pa.DataType]] = [
    ("ts", _TS), ("cpu_util_pct", pa.float32()), ("mem_used_bytes", pa.int64()), ("mem_total_bytes", pa.int64()),
    ("net_rx_bytes_per_s", pa.float64()), ("net_tx_bytes_per_s", pa.float64()), ("load1", pa.float32()),
    ("gpu_count", pa.int16()), ("ib_ports", pa.int16()), ("ib_ports_active", pa.int16()),
    ("ib_rx_bytes_per_s", pa.float64()), ("ib_tx_bytes_per_s", pa.float64()), ("ib_link_downed", pa.int64()),
    ("ib_errors", pa.int64()),
]  # fmt: skip
# DESIGN.md's minimum columns: always written (values may be null).
REQUIRED_GPU = {
    "ts", "gpu", "sm_util_pct", "mem_util_pct", "power_w", "temp_c", "sm_clock_mhz", "mem_used_bytes",
    "pcie_link_gen", "pcie_link_width", "ecc_sbe_total", "ecc_dbe_total", "nvlink_crc_errors_total",
    "throttle_reasons", "xid",
}  # fmt: skip
REQUIRED_HOST = {"ts", "cpu_util_pct", "mem_used_bytes", "net_rx_bytes_per_s", "net_tx_bytes_per_s"}

# NVML clocks-event reasons
IDLE, APP_CLK, SW_POWER, HW_SLOW, SYNC_BOOST, SW_THERM, HW_THERM, HW_BRAKE = 0x1, 0x2, 0x4, 0x8, 0x10, 0x20, 0x40, 0x80

# per-(sample, host, gpu) job state
S_OFF, S_RUN, S_SPIN, S_DEAD = 0, 1, 2, 3


# --------------------------------------------------------------------------------------------- generation


def _rng(spec: dict, *salt: object) -> np.random.Generator:
    key = hashlib.sha256(repr((spec["seed"],) + salt).encode()).digest()
    return np.random.default_rng(int.from_bytes(key[:8], "little"))


def _smooth(x: np.ndarray, alpha: float, start: np.ndarray) -> np.ndarray:
    """First-order lag along axis 0 (thermal mass)."""
    out = np.empty_like(x)
    cur = start.astype(float).copy()
    for k in range(x.shape[0]):
        cur += alpha * (x[k] - cur)
        out[k] = cur
    return out


def build_tables(spec: dict) -> dict[tuple[str, str], pa.Table]:
    """{(kind, host): table} for a scenario spec; no files touched."""
    hosts: list[str] = spec["hosts"]
    H, G = len(hosts), int(spec["gpus_per_host"])
    dt = float(spec["interval_s"])
    T = int(spec["duration_s"] // dt) + 1
    t = np.arange(T) * dt
    rng = _rng(spec, "base")
    sku = [SKUS[spec["sku_by_host"][h]] for h in hosts]
    tdp = np.array([s["tdp"] for s in sku])[None, :, None]
    idle_w = np.array([s["idle_w"] for s in sku])[None, :, None]
    clk_max = np.array([s["clk"] for s in sku], float)[None, :, None]
    idle_clk = np.array([s["idle_clk"] for s in sku], float)[None, :, None]
    slowdown = np.array([s["slowdown"] for s in sku])[None, :, None]
    mem_total = np.array([s["mem"] for s in sku], float)[None, :, None]
    shape = (T, H, G)

    # ---- job state and workload intensity w in [0, 1]
    start = np.array([spec["stagger_s"][h] for h in hosts])[None, :, None]
    state = np.where(t[:, None, None] >= start, S_RUN, S_OFF) * np.ones(shape, int)
    w = np.ones(shape)
    warm = np.clip((t[:, None, None] - start) / max(spec["warmup_s"], 1.0), 0, 1)
    w = np.where(warm < 1, 0.15 + 0.5 * warm, w)
    ck_every, ck_len = spec["checkpoint_every_s"], spec["checkpoint_len_s"]
    if ck_every:
        ph = (t - spec["warmup_s"] - 60) % ck_every
        ck = (ph < ck_len) & (t > spec["warmup_s"] + 60)
        w = np.where(ck[:, None, None], 0.1, w)
    ev_every, ev_len = spec["eval_every_s"], spec["eval_len_s"]
    if ev_every:
        ph = (t - spec["warmup_s"] - ev_every / 2) % ev_every
        ev = (ph < ev_len) & (t > spec["warmup_s"] + ev_every / 2)
        w = np.where(ev[:, None, None], 0.55, w)
    # pipeline stages: hosts of one stage carry a different share of the model
    stage_off = np.array([spec["stage_load"][h] for h in hosts])[None, :, None]
    w = np.clip(w * stage_off, 0, 1.0)
    # data-loader stalls: short, random, on random hosts
    stall = rng.random((T, H, 1)) < spec["stall_rate"]
    w = np.where(stall, w * 0.35, w)
    if spec.get("pause"):
        p0, pl = spec["pause"]
        pz = (t >= p0) & (t < p0 + pl)
        w = np.where(pz[:, None, None], 0.0, w)
    w = np.where(state == S_RUN, w, 0.0)

    # ---- faults that change the job's state (fail-stop, then spin in collectives, then dead)
    lost = np.zeros(shape, bool)  # GPU gone: metrics null
    gone_rows = np.zeros((T, H), bool)  # host reports nothing
    for f in spec["faults"]:
        hi = hosts.index(f["host"])
        k0 = int(f["onset_s"] // dt)
        after = spec["aftermath"]
        if f["kind"] in ("ecc_dbe", "gpu_lost", "gsp_xid", "unreachable") and f.get("fail_stop", True):
            hang0 = k0 + 1
            if after == "hang":  # every rank blocks in its next collective until the watchdog
                wd = int(spec["watchdog_s"] // dt)
                state[hang0 : hang0 + wd] = np.where(
                    state[hang0 : hang0 + wd] == S_RUN, S_SPIN, state[hang0 : hang0 + wd]
                )
                state[hang0 + wd :] = np.where(state[hang0 + wd :] != S_OFF, S_DEAD, S_OFF)
            else:  # elastic restart without the host after a short stop
                gap = int(spec["restart_gap_s"] // dt)
                state[hang0 : hang0 + gap] = np.where(state[hang0 : hang0 + gap] != S_OFF, S_DEAD, S_OFF)
                state[hang0 + gap :, hi] = S_DEAD
            for g in f["gpus"]:
                state[k0 + 1 :, hi, g] = S_DEAD
        if f["kind"] == "gpu_lost":
            for g in f["gpus"]:
                lost[k0 + 1 :, hi, g] = True
        if f["kind"] == "unreachable":
            gone_rows[k0:, hi] = True
    w = np.where(state == S_RUN, w, 0.0)

    # ---- utilisation
    util_h = np.array([spec["util_target"] * spec["stage_load"][h] for h in hosts])[None, :, None]
    util = np.where(w >= 0.9, util_h + rng.normal(0, 2.5, shape), 100 * w * rng.uniform(0.8, 1.1, shape))
    util = np.where(state == S_SPIN, 100.0 - rng.exponential(0.3, shape), util)
    util = np.where(state == S_RUN, util, np.where(state == S_SPIN, util, rng.choice([0.0, 0.0, 0.0, 1.0], shape)))
    util = np.clip(np.round(util), 0, 100)
    mem_util = np.where(state == S_RUN, w * spec["mem_util_target"] + rng.normal(0, 3, shape), 0.0)
    mem_util = np.clip(np.round(mem_util), 0, 100)

    # ---- power and clocks (per-GPU silicon spread: Sinha et al. SC'22)
    eff = rng.normal(1.0, spec["gpu_spread"], (1, H, G))
    limit = np.broadcast_to(tdp, (1, H, G)).astype(float).copy()
    limit_t = np.broadcast_to(limit, shape).copy()
    want = idle_w + (tdp * spec["load_frac"] * eff - idle_w) * w
    spin_w = idle_w + 0.28 * (tdp - idle_w) * eff
    want = np.where(state == S_SPIN, spin_w, want)
    clk_fac = np.clip(rng.normal(0.985, spec["gpu_spread"] / 2, (1, H, G)), 0.9, 1.0)
    # faults that lower the enforced limit
    for f in spec["faults"]:
        if f["kind"] == "power_cap":
            hi, k0 = hosts.index(f["host"]), int(f["onset_s"] // dt)
            for g in f["gpus"]:
                limit_t[k0:, hi, g] = f["limit_w"]
    capped = want > limit_t * 0.985
    power = np.minimum(want, limit_t * rng.uniform(0.975, 1.0, shape)) + rng.normal(0, 0.006, shape) * tdp
    ratio = np.clip(limit_t / np.maximum(want, 1.0), 0.3, 1.0)
    clock = np.where(capped, clk_max * clk_fac * ratio**0.6, clk_max * clk_fac)
    if spec["app_clocks"]:
        clock = np.minimum(clock, clk_max * 0.9)
    busy = (state == S_RUN) & (util > 0) | (state == S_SPIN)
    clock = np.where(busy, clock, idle_clk)
    clock = np.where(busy & (w < 0.5) & (state == S_RUN), clk_max * clk_fac, clock)
    power = np.where(busy, power, idle_w * rng.uniform(0.95, 1.08, shape))
    thr = np.zeros(shape, np.uint64)
    thr |= np.where(~busy, IDLE, 0).astype(np.uint64)
    thr |= np.where(busy & capped & (rng.random(shape) < 0.9), SW_POWER, 0).astype(np.uint64)
    if spec["app_clocks"]:
        thr |= np.uint64(APP_CLK)
    if spec["sync_boost"]:
        thr |= np.where(busy & (rng.random(shape) < 0.3), SYNC_BOOST, 0).astype(np.uint64)

    # ---- temperature: inlet + rack + slot + per-GPU + R * power, first-order lag
    inlet = np.array([spec["inlet_c"][h] for h in hosts])[None, :, None]
    slot = np.linspace(0, spec["slot_gradient_c"], G)[None, None, :]
    gpu_off = rng.normal(0, 1.8, (1, H, G))
    r_th = spec["thermal_r"] / tdp  # degC per W scaled so R*tdp = thermal_r
    temp_eq = inlet + slot + gpu_off + r_th * power
    alpha = 1 - np.exp(-dt / spec["thermal_tau_s"])
    temp = _smooth(temp_eq, alpha, temp_eq[0]) + rng.normal(0, 0.4, shape)

    # ---- memory, PCIe, counters
    mem_frac = np.clip(
        rng.normal(spec["mem_frac"], 0.01, (1, H, G))
        * np.array([spec["stage_load"][h] for h in hosts])[None, :, None] ** 0.5,
        0.05,
        0.97,
    )
    mem_used = np.where((state == S_RUN) | (state == S_SPIN), mem_total * mem_frac, 0.0)
    mem_used += np.where(state == S_RUN, mem_total * 0.01 * np.sin(t / 97.0)[:, None, None], 0)
    mem_used = np.where(mem_used > 0, mem_used, 512 * MIB + rng.integers(0, 64, shape) * MIB)
    gen_max = np.array([s["gen"] for s in sku])[None, :, None] * np.ones((1, 1, G), int)
    width_max = np.array([s["width"] for s in sku])[None, :, None] * np.ones((1, 1, G), int)
    gen = np.broadcast_to(gen_max, shape).copy()
    if spec["aspm_idle_gen1"]:
        gen = np.where(busy, gen, 1)
    width = np.broadcast_to(width_max, shape).copy()
    replay = (
        np.broadcast_to(rng.integers(0, 3, (1, H, G)) * (rng.random((1, H, G)) < 0.2), shape).astype(np.int64).copy()
    )
    sbe_base = (rng.random((1, H, G)) < 0.06) * rng.integers(1, 300, (1, H, G))
    sbe_total = np.broadcast_to(sbe_base, shape).astype(np.int64).copy()
    sbe_vol = np.zeros(shape, np.int64)
    dbe_total = np.zeros(shape, np.int64)
    dbe_vol = np.zeros(shape, np.int64)
    crc_base = (rng.random((1, H, G)) < 0.12) * rng.integers(1, 60, (1, H, G))
    crc = np.broadcast_to(crc_base, shape).astype(np.int64).copy()
    # the odd healthy CRC replay / corrected bit now and then
    crc += np.cumsum(rng.random(shape) < 2e-4 * dt, axis=0)
    sbe_tick = np.cumsum(rng.random(shape) < 3e-5 * dt, axis=0)
    sbe_total += sbe_tick
    sbe_vol += sbe_tick
    xid = np.full(shape, -1, np.int64)
    # brief thermal blips in hot racks: SW thermal for a sample or two, healthy
    for b in spec.get("blips", []):
        hi, k = hosts.index(b["host"]), int(b["at_s"] // dt)
        thr[k : k + b["n"], hi, b["gpu"]] |= np.uint64(SW_THERM)

    # ---- fault overlays
    for f in spec["faults"]:
        hi, k0, kind = hosts.index(f["host"]), int(f["onset_s"] // dt), f["kind"]
        fr = _rng(spec, "fault", f["host"], kind)
        gs = f["gpus"]
        if kind == "ecc_dbe":
            for g in gs:
                n = int(f["dbe"])
                dbe_total[k0:, hi, g] += n
                dbe_vol[k0:, hi, g] += n
                sbe_total[k0:, hi, g] += int(f.get("sbe_jump", 0))
                sbe_vol[k0:, hi, g] += int(f.get("sbe_jump", 0))
                for j, code in enumerate(f["xids"]):
                    xid[k0 + j :, hi, g] = code
        elif kind == "ecc_sbe_storm":
            rate = f["per_min"] * dt / 60.0
            for g in gs:
                inc = np.cumsum(fr.poisson(rate, T - k0))
                sbe_total[k0:, hi, g] += inc
                sbe_vol[k0:, hi, g] += inc
                if f.get("xid"):
                    xid[k0 + int(60 // dt) + 1 :, hi, g] = f["xid"]
        elif kind == "gpu_lost":
            for g in gs:
                xid[k0:, hi, g] = 79
        elif kind == "gsp_xid":
            for g in gs:
                xid[k0:, hi, g] = f["xid"]
                # wedged: kernel never retires, clocks low, power near idle
                util[k0 + 1 :, hi, g] = 100.0 if f.get("pegged", True) else 0.0
                power[k0 + 1 :, hi, g] = idle_w[0, hi, 0] * 1.3
                clock[k0 + 1 :, hi, g] = idle_clk[0, hi, 0]
        elif kind == "nvlink":
            rate = f["per_min"] * dt / 60.0
            for g in gs:
                crc[k0:, hi, g] += np.cumsum(fr.poisson(rate, T - k0))
                if f.get("xid"):
                    xid[k0:, hi, g] = 74
            # replays slow the tensor-parallel group: the host's GPUs lose a little util
            util[k0:, hi, :] = np.where(
                busy[k0:, hi, :], np.clip(util[k0:, hi, :] - f["slow_pct"], 0, 100), util[k0:, hi, :]
            )
        elif kind == "pcie_downgrade":
            for g in gs:
                if f["what"] == "width":
                    width[k0:, hi, g] = f["to"]
                else:
                    gen[k0:, hi, g] = np.where(busy[k0:, hi, g], f["to"], gen[k0:, hi, g])
                replay[k0:, hi, g] += np.cumsum(fr.poisson(f["replays_per_min"] * dt / 60.0, T - k0))
                util[k0:, hi, g] = np.where(
                    busy[k0:, hi, g], np.clip(util[k0:, hi, g] - f["slow_pct"], 0, 100), util[k0:, hi, g]
                )
                power[k0:, hi, g] = np.where(
                    busy[k0:, hi, g], power[k0:, hi, g] * (1 - f["slow_pct"] / 150), power[k0:, hi, g]
                )
        elif kind == "power_cap":
            pass  # applied through limit_t above
        elif kind == "power_brake":
            for g in gs:
                b = busy[k0:, hi, g]
                power[k0:, hi, g] = np.where(b, power[k0:, hi, g] * f["power_frac"], power[k0:, hi, g])
                clock[k0:, hi, g] = np.where(
                    b, clk_max[0, hi, 0] * f["clock_frac"] * fr.uniform(0.95, 1.05, T - k0), clock[k0:, hi, g]
                )
                thr[k0:, hi, g] |= np.where(b, HW_BRAKE | HW_SLOW, 0).astype(np.uint64)
        elif kind == "thermal":
            ramp = np.clip((np.arange(T - k0) * dt) / f["ramp_s"], 0, 1)
            for g in gs:
                b = busy[k0:, hi, g]
                target = slowdown[0, hi, 0] + f["over_c"] + fr.normal(0, 0.7, T - k0)
                cur = temp[k0:, hi, g]
                temp[k0:, hi, g] = np.where(b, cur + (target - cur) * ramp, cur)
                hot = b & (ramp >= 0.8)
                clock[k0:, hi, g] = np.where(
                    hot, clock[k0:, hi, g] * (1 - f["clock_drop"]) * fr.uniform(0.97, 1.03, T - k0), clock[k0:, hi, g]
                )
                power[k0:, hi, g] = np.where(hot, power[k0:, hi, g] * (1 - f["clock_drop"] * 0.8), power[k0:, hi, g])
                thr[k0:, hi, g] |= np.where(hot, f["bits"], 0).astype(np.uint64)
    if any(f["kind"] == "power_cap" for f in spec["faults"]):
        pass

    # ---- quirks: agent restarts (driver-volatile counters read from 0), gaps, late join
    drop = rng.random((T, H)) < spec["drop_rate"]
    drop |= gone_rows
    xid_latch = spec["xid_latch"]
    if not xid_latch:  # event-style exporters: the Xid only on the sample it was logged
        first = np.concatenate([np.ones((1, H, G), bool), xid[1:] != xid[:-1]], axis=0)
        xid = np.where(first, xid, -1)
    for q in spec["quirks"]:
        hi = hosts.index(q["host"])
        k = int(q["at_s"] // dt)
        if q["kind"] == "agent_restart":
            kg = max(1, int(q["gap_s"] // dt))
            drop[k : k + kg, hi] = True
            for arr in (crc, replay, sbe_vol, dbe_vol):
                arr[k + kg :, hi] -= arr[k + kg, hi][None, :]
            xid[k + kg :, hi] = np.where(xid[k + kg :, hi] == xid[k, hi][None, :], -1, xid[k + kg :, hi])
        elif q["kind"] == "gap":
            drop[k : k + max(1, int(q["len_s"] // dt)), hi] = True
        elif q["kind"] == "late_join":
            drop[:k, hi] = True

    # ---- host metrics
    hr = _rng(spec, "host")
    act = (w.mean(axis=2) > 0.05).astype(float)
    spin_h = (state == S_SPIN).any(axis=2)
    ckf = np.zeros(T, bool)
    if ck_every:
        ph = (t - spec["warmup_s"] - 60) % ck_every
        ckf = (ph < ck_len + 20) & (t > spec["warmup_s"] + 60)
    cpu = np.array([spec["cpu_base"][h] for h in hosts])[None, :] + 22 * act + hr.normal(0, 2.5, (T, H))
    cpu += np.where(ckf[:, None] & (state[:, :, 0] == S_RUN), 25, 0)
    cpu = np.clip(cpu, 0, 100)
    host_mem_total = np.array([spec["host_mem_gib"][h] for h in hosts], float)[None, :] * GIB
    host_mem = host_mem_total * (0.08 + 0.3 * act + 0.1 * ckf[:, None]) * hr.uniform(0.98, 1.02, (T, H))
    net = np.array([spec["net_bw"][h] for h in hosts])[None, :] * act * hr.uniform(0.7, 1.1, (T, H))
    ib_bw = np.array([spec["ib_bw"][h] for h in hosts])[None, :] * act * hr.uniform(0.8, 1.05, (T, H))
    ib_bw = np.where(spin_h, ib_bw * 0.0, ib_bw)
    load1 = cpu / 100 * spec["ncpu"] * hr.uniform(0.9, 1.1, (T, H))
    gpu_count = G - lost.sum(axis=2)
    # gpu_lost variant: NVML hangs for the whole host after Xid 79 -> the host's GPU rows stop
    gpu_rows_gone = np.zeros((T, H), bool)
    for f in spec["faults"]:
        if f["kind"] == "gpu_lost" and f.get("nvml_hangs"):
            gpu_rows_gone[int(f["onset_s"] // dt) + 1 :, hosts.index(f["host"])] = True

    # ---- tables, one per host, with clock skew and sampling jitter
    cols = spec["columns"]
    t0 = int(spec["start_ns"])
    tables: dict[tuple[str, str], pa.Table] = {}
    for hi, h in enumerate(hosts):
        s = sku[hi]
        jr = _rng(spec, "jitter", h)
        ts_s = t + spec["skew_s"][h] + jr.normal(0, 0.02 * dt, T)
        ts_ns = (t0 + np.round(ts_s * 1e9)).astype(np.int64)
        if spec["ts_ms"]:
            ts_ns = ts_ns // 1_000_000 * 1_000_000
        keep = ~drop[:, hi]
        gkeep = keep & ~gpu_rows_gone[:, hi]
        # gpu table: rows (k, g), dropping lost-and-stopped GPUs
        kk, gg = np.nonzero(gkeep[:, None] & np.ones((1, G), bool))
        lost_stops = [f for f in spec["faults"] if f["kind"] == "gpu_lost" and f["host"] == h and f.get("rows_stop")]
        if lost_stops:
            ok = ~lost[kk, hi, gg]
            kk, gg = kk[ok], gg[ok]
        nullm = lost[kk, hi, gg]
        nr = _rng(spec, "nulls", h)
        rnd_null = nr.random(len(kk)) < spec["null_rate"]

        def col(a: np.ndarray, typ: pa.DataType, *, extra: np.ndarray | None = None, kk=kk, gg=gg, hi=hi, nullm=nullm):
            v = a[kk, hi, gg] if a.ndim == 3 else a
            m = nullm.copy()
            if extra is not None:
                m |= extra
            if pa.types.is_integer(typ):
                v = np.round(v).astype(np.int64) if v.dtype.kind == "f" else v
            return pa.array(v, mask=m).cast(typ)

        seed = spec["seed"]
        g_uuid = [f"GPU-{hashlib.md5(f'{seed}{h}{g}'.encode()).hexdigest()[:8]}-{g:04x}" for g in range(G)]
        busids = [f"00000000:{b:02X}:00.0" for b in (0x18, 0x2A, 0x3A, 0x5D, 0x9A, 0xAB, 0xBA, 0xDB)[:G]]
        nvl = s["nvlink"]
        ecc_on = s["ecc"] and not (spec["sku_by_host"][h] == "l40s" and not spec["l40s_ecc"])
        n = len(kk)
        no = np.zeros(n, bool)
        allnull = np.ones(n, bool)
        data: dict[str, pa.Array] = {
            "ts": pa.array(ts_ns[kk], type=pa.int64()).cast(_TS),
            "gpu": pa.array(gg.astype(np.int16)),
            "gpu_uuid": pa.array([g_uuid[g] for g in gg], type=pa.string()),
            "pci_bus_id": pa.array([busids[g] for g in gg], type=pa.string()),
            "gpu_name": pa.array([s["name"]] * n, type=pa.string()).dictionary_encode().cast(_DICT),
            "vbios_version": pa.array([s["vbios"]] * n, type=pa.string()).dictionary_encode().cast(_DICT),
            "sm_util_pct": col(util, pa.float32(), extra=rnd_null),
            "mem_util_pct": col(mem_util, pa.float32(), extra=rnd_null if cols["mem_util"] else allnull),
            "power_w": col(power, pa.float32(), extra=nr.random(n) < spec["null_rate"]),
            "power_limit_w": col(limit_t, pa.float32()),
            "power_limit_default_w": col(np.broadcast_to(tdp, shape), pa.float32()),
            "temp_c": col(np.round(temp), pa.float32(), extra=nr.random(n) < spec["null_rate"]),
            "temp_slowdown_c": col(np.broadcast_to(slowdown, shape), pa.float32()),
            "sm_clock_mhz": col(np.round(clock / 15) * 15, pa.int32()),
            "sm_clock_max_mhz": col(np.broadcast_to(clk_max, shape), pa.int32()),
            "mem_used_bytes": col(mem_used, pa.int64()),
            "mem_total_bytes": col(np.broadcast_to(mem_total, shape), pa.int64()),
            "pcie_link_gen": col(gen, pa.int8()),
            "pcie_link_gen_max": col(np.broadcast_to(gen_max, shape), pa.int8()),
            "pcie_link_width": col(width, pa.int8()),
            "pcie_link_width_max": col(np.broadcast_to(width_max, shape), pa.int8()),
            "pcie_replay_errors_total": col(replay, pa.int64()),
            "ecc_sbe_volatile": col(sbe_vol, pa.int64(), extra=no if ecc_on else allnull),
            "ecc_dbe_volatile": col(dbe_vol, pa.int64(), extra=no if ecc_on else allnull),
            "ecc_sbe_total": col(sbe_total, pa.int64(), extra=no if ecc_on else allnull),
            "ecc_dbe_total": col(dbe_total, pa.int64(), extra=no if ecc_on else allnull),
            "retired_pages": pa.nulls(n, pa.int64()),
            "nvlink_crc_errors_total": col(crc, pa.int64(), extra=no if nvl else allnull),
            "throttle_reasons": col(thr, pa.uint64()),
            "xid": col(xid, pa.int32(), extra=xid[kk, hi, gg] < 0),
        }
        # xid survives a lost GPU's null row (the driver logged it)
        data["xid"] = pa.array(xid[kk, hi, gg], mask=xid[kk, hi, gg] < 0).cast(pa.int32())
        names = [c for c, _ in GPU_COLS if c in REQUIRED_GPU or cols.get(c, True)]
        schema = pa.schema(
            [pa.field(c, typ) for c, typ in GPU_COLS if c in names],
            metadata={**_META, b"trainctl.kind": b"gpu_metrics"},
        )
        tables[("gpu_metrics", h)] = pa.table([data[c] for c in names], schema=schema)

        hk = np.nonzero(keep)[0]
        ib = spec["ib_ports"]
        hnull = np.zeros(len(hk), bool)
        ibnull = np.full(len(hk), ib == 0)
        hdata = {
            "ts": pa.array(ts_ns[hk] + int(jr.integers(0, 200) * 1e6), type=pa.int64()).cast(_TS),
            "cpu_util_pct": pa.array(cpu[hk, hi]).cast(pa.float32()),
            "mem_used_bytes": pa.array(host_mem[hk, hi].astype(np.int64)),
            "mem_total_bytes": pa.array(np.full(len(hk), host_mem_total[0, hi], np.int64)),
            "net_rx_bytes_per_s": pa.array(net[hk, hi] * 1.05),
            "net_tx_bytes_per_s": pa.array(net[hk, hi]),
            "load1": pa.array(load1[hk, hi]).cast(pa.float32()),
            "gpu_count": pa.array(
                gpu_count[hk, hi].astype(np.int16), mask=gpu_rows_gone[hk, hi] & spec["gpu_count_null_on_hang"]
            ),
            "ib_ports": pa.array(np.full(len(hk), ib, np.int16), mask=ibnull),
            "ib_ports_active": pa.array(np.full(len(hk), ib, np.int16), mask=ibnull),
            "ib_rx_bytes_per_s": pa.array(ib_bw[hk, hi], mask=ibnull),
            "ib_tx_bytes_per_s": pa.array(ib_bw[hk, hi] * 0.99, mask=ibnull),
            "ib_link_downed": pa.array(np.zeros(len(hk), np.int64), mask=ibnull),
            "ib_errors": pa.array(np.full(len(hk), spec["ib_err_base"][h], np.int64), mask=ibnull | hnull),
        }
        hnames = [c for c, _ in HOST_COLS if c in REQUIRED_HOST or cols.get(c, True)]
        hschema = pa.schema(
            [pa.field(c, typ) for c, typ in HOST_COLS if c in hnames],
            metadata={**_META, b"trainctl.kind": b"host_metrics"},
        )
        tables[("host_metrics", h)] = pa.table([hdata[c] for c in hnames], schema=hschema)
    return tables


def tables_sha256(tables: dict[tuple[str, str], pa.Table]) -> str:
    """sha256 over every table's content (Arrow IPC stream), in (kind, host) order."""
    hsh = hashlib.sha256()
    for key in sorted(tables):
        hsh.update(f"{key[0]}/{key[1]}\n".encode())
        buf = io.BytesIO()
        with pa.ipc.new_stream(buf, tables[key].schema) as wr:
            wr.write_table(tables[key])
        hsh.update(buf.getvalue())
    return hsh.hexdigest()


def generate(spec: dict, out_dir: Path) -> str:
    """Write the scenario's dataset under out_dir; returns the sha256 of its tables' content."""
    tables = build_tables(spec)
    for (kind, host), tbl in tables.items():
        d = Path(out_dir) / kind / f"host={host}"
        d.mkdir(parents=True, exist_ok=True)
        pq.write_table(tbl, d / "part-0.parquet")
    return tables_sha256(tables)


# --------------------------------------------------------------------------------------------- scenarios

FAULT_KINDS = list(FAULT_LABELS)
_NAMING = [
    lambda i: f"node{i + 1:02d}",
    lambda i: f"gpu-a3-{17 + 3 * i:03d}",
    lambda i: f"dgx{i + 1}",
    lambda i: f"ip-10-4-{i // 16}-{20 + i % 16 * 7}",
    lambda i: f"worker-{i}",
    lambda i: f"r{i // 4 + 2}n{i % 4 + 1}.pod-b",
]
_SKU_PAIRS = [
    ("h100-sxm", "h200"),
    ("a100-40", "a100-80"),
    ("h100-sxm", "h100-pcie"),
    ("h100-pcie", "l40s"),
    ("a100-80", "h100-sxm"),
]


def _pick(r: np.random.Generator, seq: list) -> Any:
    return seq[int(r.integers(0, len(seq)))]


def _fleet(r: np.random.Generator, sid: str, seed: int, faulty: bool) -> dict:
    u = r.random()
    H = int(
        r.integers(2, 5)
        if u < 0.3
        else r.integers(5, 13)
        if u < 0.75
        else r.integers(13, 33)
        if u < 0.93
        else r.integers(40, 97)
    )
    G = 8 if r.random() < 0.7 else 4
    names = _pick(r, _NAMING)
    hosts = [names(i) for i in range(H)]
    mixed = H >= 4 and r.random() < 0.25
    if mixed:
        a, b = _pick(r, _SKU_PAIRS)
        nb = int(r.integers(max(1, H // 4), H // 2 + 1))
        sku_by = {h: (b if i >= H - nb else a) for i, h in enumerate(hosts)}
    else:
        one = _pick(r, list(SKUS))
        sku_by = dict.fromkeys(hosts, one)
    dur = float(r.integers(5, 91) * 60)
    dt = float(_pick(r, [1, 1, 2, 5, 5, 10, 15, 30]))
    budget = 900_000 if H >= 40 else 240_000
    while H * G * (dur / dt) > budget:
        dt = float({1: 2, 2: 5, 5: 10, 10: 15, 15: 30, 30: 60}[int(dt)])
    liquid = r.random() < 0.3
    inlet_base = r.uniform(15, 20) if liquid else r.uniform(18, 27)
    rack_size = int(r.integers(2, 9))
    racks = {h: i // rack_size for i, h in enumerate(hosts)}
    n_racks = max(racks.values()) + 1
    hot = [int(r.integers(0, n_racks))] if r.random() < 0.5 else []
    hot_add = float(r.uniform(5, 11))
    inlet = {h: float(inlet_base + r.normal(0, 1.5) + (hot_add if racks[h] in hot else 0)) for h in hosts}
    slot_grad = float(r.uniform(0, 8))
    load_frac = float(r.uniform(0.75, 1.08))
    # healthy temperatures stay a few degrees below the slowdown threshold even in the hot rack
    slow_min = min(SKUS[s]["slowdown"] for s in sku_by.values())
    thermal_r = float(r.uniform(22, 32) if liquid else r.uniform(32, 50))
    thermal_r = min(thermal_r, slow_min - 10 - max(inlet.values()) - slot_grad)
    pp = int(_pick(r, [1, 1, 1, 2, 4]))
    stage_f = [float(r.uniform(0.86, 1.0)) for _ in range(pp)]
    stage = {h: stage_f[i * pp // H] for i, h in enumerate(hosts)}
    wave = r.random() < 0.2
    stagger = {h: float(r.uniform(0, 90) + (i * r.uniform(5, 25) if wave else 0)) for i, h in enumerate(hosts)}
    ck = float(_pick(r, [0, 300, 600, 900, 1800]))
    ev = float(_pick(r, [0, 0, 600, 1200]))
    pause = None
    if r.random() < 0.3 and dur >= 15 * 60:
        pause = [float(r.uniform(0.3, 0.6) * dur), float(r.uniform(120, 480))]
    skew_scale = float(r.uniform(0, 3))
    ib = int(_pick(r, [0, 4, 8]))
    spec: dict[str, Any] = dict(
        id=sid, seed=int(seed), n_hosts=H, gpus_per_host=G, hosts=hosts, sku_by_host=sku_by,
        interval_s=dt, duration_s=dur, start_ns=int(1_790_000_000e9 + r.integers(0, 10_000_000) * 1e9),
        skew_s={h: float(np.clip(r.normal(0, skew_scale), -5, 5)) for h in hosts}, ts_ms=bool(r.random() < 0.5),
        racks=racks, hot_racks=hot, cooling="liquid" if liquid else "air", inlet_c=inlet, slot_gradient_c=slot_grad,
        thermal_r=thermal_r, thermal_tau_s=float(r.uniform(30, 120)),
        util_target=float(r.uniform(86, 99)), mem_util_target=float(r.uniform(20, 60)), load_frac=load_frac,
        gpu_spread=float(r.uniform(0.015, 0.05)), mem_frac=float(r.uniform(0.5, 0.9)), stage_load=stage,
        stagger_s=stagger, warmup_s=float(r.uniform(30, 240)), checkpoint_every_s=ck,
        checkpoint_len_s=float(r.uniform(5, 60)), eval_every_s=ev, eval_len_s=float(r.uniform(30, 120)),
        pause=pause, stall_rate=float(r.uniform(0, 0.01)), aspm_idle_gen1=bool(r.random() < 0.6),
        app_clocks=bool(r.random() < 0.15), sync_boost=bool(r.random() < 0.2),
        drop_rate=float(r.uniform(0, 0.005)), null_rate=float(r.uniform(0, 0.002)),
        xid_latch=bool(r.random() < 0.7), aftermath="hang" if r.random() < 0.6 else "restart",
        watchdog_s=float(_pick(r, [600, 1800])), restart_gap_s=float(r.uniform(60, 240)),
        l40s_ecc=bool(r.random() < 0.5), gpu_count_null_on_hang=bool(r.random() < 0.5),
        cpu_base={h: float(r.uniform(5, 15)) for h in hosts},
        host_mem_gib={h: int(_pick(r, [1024, 2048])) for h in hosts},
        net_bw={h: float(r.uniform(0.2e9, 2e9)) for h in hosts},
        ib_bw={h: float(r.uniform(10e9, 40e9)) for h in hosts}, ib_ports=ib,
        ib_err_base={h: int(r.integers(0, 3) * (r.random() < 0.2)) for h in hosts}, ncpu=int(_pick(r, [96, 128, 224])),
        columns=dict(
            power_limit_w=bool(r.random() < 0.7), temp_slowdown_c=bool(r.random() < 0.5),
            pcie_replay_errors_total=bool(r.random() < 0.5), retired_pages=bool(r.random() < 0.3),
            gpu_uuid=bool(r.random() < 0.6), pci_bus_id=bool(r.random() < 0.6), vbios_version=bool(r.random() < 0.5),
            gpu_name=bool(r.random() < 0.85), sm_clock_max_mhz=bool(r.random() < 0.6),
            mem_total_bytes=bool(r.random() < 0.7), pcie_link_gen_max=bool(r.random() < 0.6),
            pcie_link_width_max=bool(r.random() < 0.6), ecc_sbe_volatile=bool(r.random() < 0.6),
            ecc_dbe_volatile=bool(r.random() < 0.6), mem_util=bool(r.random() < 0.9), load1=bool(r.random() < 0.7),
            gpu_count=bool(r.random() < 0.7), ib=bool(ib > 0),
        ),
        faults=[], labels={}, quirks=[], blips=[],
    )  # fmt: skip
    c = spec["columns"]
    c["power_limit_default_w"] = c["power_limit_w"] and bool(r.random() < 0.8)
    for k in ("ib_ports", "ib_ports_active", "ib_rx_bytes_per_s", "ib_tx_bytes_per_s", "ib_link_downed", "ib_errors"):
        c[k] = c["ib"]
    if hot:
        for h in [h for h in hosts if racks[h] in hot][:2]:
            if r.random() < 0.5:
                spec["blips"].append(
                    dict(host=h, gpu=int(r.integers(0, G)), at_s=float(r.uniform(0.2, 0.9) * dur), n=1)
                )
    return spec


def _add_quirks(r: np.random.Generator, spec: dict, n: int, avoid: set[str]) -> None:
    free = [h for h in spec["hosts"] if h not in avoid]
    dur = spec["duration_s"]
    for _ in range(n):
        if not free:
            return
        h = _pick(r, free)
        free.remove(h)
        kind = _pick(r, ["agent_restart", "gap", "late_join"])
        if kind == "agent_restart":
            spec["quirks"].append(
                dict(kind=kind, host=h, at_s=float(r.uniform(0.2, 0.8) * dur), gap_s=float(r.uniform(10, 60)))
            )
        elif kind == "gap" and dur >= 15 * 60:
            ln = float(r.uniform(120, min(480, dur * 0.25)))
            spec["quirks"].append(
                dict(
                    kind=kind,
                    host=h,
                    at_s=float(
                        r.uniform(0.15, 0.95 * dur - ln - 180) if dur * 0.8 - ln - 180 > 0.15 * dur else 0.15 * dur
                    ),
                    len_s=ln,
                )
            )
        else:
            spec["quirks"].append(dict(kind="late_join", host=h, at_s=float(r.uniform(120, min(900, dur * 0.4)))))


def _fault(r: np.random.Generator, spec: dict, kind: str, host: str) -> dict:
    G, dur, dt = spec["gpus_per_host"], spec["duration_s"], spec["interval_s"]
    s = SKUS[spec["sku_by_host"][host]]
    g = int(r.integers(0, G))
    lo = min(dur * 0.6, spec["warmup_s"] + max(spec["stagger_s"].values()) + 60)
    hi = max(lo, dur - max(240.0, 10 * dt))
    onset = float(r.uniform(lo, hi))
    f: dict[str, Any] = dict(kind=kind, host=host, gpus=[g], onset_s=onset)
    if kind == "ecc_dbe":
        xids = (
            [[48], [48, 63], [48, 64], [94], [95], [48, 94]]
            if spec["sku_by_host"][host] != "l40s"
            else [[48], [48, 63]]
        )
        f.update(
            dbe=int(r.integers(1, 5)),
            xids=_pick(r, xids),
            sbe_jump=int(r.integers(0, 20)),
            fail_stop=bool(r.random() < 0.7),
        )
    elif kind == "ecc_sbe_storm":
        f.update(per_min=float(10 ** r.uniform(1.5, 3.5)), xid=92 if r.random() < 0.5 else None)
    elif kind == "gpu_lost":
        f.update(rows_stop=bool(r.random() < 0.5), nvml_hangs=bool(r.random() < 0.25))
    elif kind == "nvlink":
        if r.random() < 0.5:
            f["gpus"] = sorted({g, g ^ 1})
        f.update(per_min=float(10 ** r.uniform(0.7, 3.3)), xid=bool(r.random() < 0.7), slow_pct=float(r.uniform(0, 8)))
    elif kind == "pcie_downgrade":
        if r.random() < 0.25:
            f["gpus"] = sorted({g, g ^ 1})
        what = "width" if r.random() < 0.5 else "gen"
        to = int(_pick(r, [8, 4])) if what == "width" else int(s["gen"] - int(r.integers(1, 3)))
        if r.random() < 0.4:
            f["onset_s"] = 0.0
        f.update(
            what=what,
            to=to,
            replays_per_min=float(r.uniform(1, 50)) if r.random() < 0.5 else 0.0,
            slow_pct=float(r.uniform(0, 10)),
        )
    elif kind == "power_cap":
        f["gpus"] = list(range(G)) if r.random() < 0.4 else [g]
        if r.random() < 0.3:
            f["onset_s"] = 0.0
        f.update(limit_w=float(round(s["tdp"] * r.uniform(0.45, 0.75) / 5) * 5))
    elif kind == "power_brake":
        f["gpus"] = list(range(G)) if r.random() < 0.6 else list(range(G // 2))
        f.update(power_frac=float(r.uniform(0.35, 0.6)), clock_frac=float(r.uniform(0.3, 0.55)))
    elif kind == "thermal":
        f["gpus"] = list(range(G)) if r.random() < 0.35 else [g]
        bits = _pick(r, [SW_THERM, SW_THERM | HW_THERM | HW_SLOW, HW_THERM | HW_SLOW, SW_THERM | HW_SLOW])
        f.update(
            over_c=float(r.uniform(0, 6)),
            ramp_s=float(r.uniform(60, 300)),
            bits=int(bits),
            clock_drop=float(r.uniform(0.1, 0.4)),
        )
    elif kind == "gsp_xid":
        f.update(xid=int(_pick(r, [119, 120])), pegged=bool(r.random() < 0.6))
    elif kind == "unreachable":
        f["gpus"] = []
    return f


def make_scenarios(master_seed: int, n_faulty: int, n_clean: int, prefix: str) -> list[dict]:
    """Scenario specs drawn from one master seed: n_faulty with one or two faulty hosts, n_clean with none."""
    r = np.random.default_rng(master_seed)
    kinds: list[str] = []
    while len(kinds) < 2 * n_faulty:
        kinds += list(r.permutation(FAULT_KINDS))
    out: list[dict] = []
    order = ["f"] * n_faulty + ["c"] * n_clean
    order = [order[i] for i in r.permutation(len(order))]
    ki = 0
    for i, what in enumerate(order):
        sid = f"{prefix}-{i:03d}"
        spec = _fleet(r, sid, int(r.integers(0, 2**31)), what == "f")
        if what == "c":
            _add_quirks(r, spec, int(r.integers(1, 4)), set())
        else:
            n = 2 if (spec["n_hosts"] >= 3 and r.random() < 0.3) else 1
            hosts = [spec["hosts"][j] for j in r.permutation(spec["n_hosts"])[:n]]
            for h in hosts:
                kind = str(kinds[ki])
                ki += 1
                if kind == "nvlink" and not SKUS[spec["sku_by_host"][h]]["nvlink"]:
                    kind = "pcie_downgrade"
                f = _fault(r, spec, kind, h)
                spec["faults"].append(f)
                spec["labels"][h] = FAULT_LABELS[kind]
            _add_quirks(r, spec, int(r.integers(0, 3)), set(hosts))
        out.append(spec)
    return out
