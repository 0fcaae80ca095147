"""A second fleet generator, for validating the faulty-host analyzer on data it was not tuned on.

Written apart from trainctl/simulation/fleet.py (the first simulator, by the detector's author) and
from analyzers/faulty_hosts.py: it imports neither, nor any detector threshold. Its faults come from
the fault catalogue (/work/shared/research/seeds.md, section 4) and its healthy behaviour from
published fleet measurements, with more variance than the first simulator's defaults. Where a
number is a guess it says so.

Published behaviour it models (sources):
- Per-GPU variation at equal work: identical-SKU GPUs differ by 8% on average (max 22%) in
  performance under power management, outliers 1.5x slower (Sinha et al., "Not All GPUs Are
  Created Equal", SC'22, arXiv 2208.11035). Here: a per-GPU efficiency factor (power drawn for the
  same work) with sigma 4-7% and heavy (Student-t) tails; under the power cap it becomes a clock
  spread (clock ~ (limit / demand)^(1/2.5), the usual f.V^2 scaling), so binned clocks differ by
  100-250 MHz under load and by nothing when not capped.
- Power levels: A100 fleet (Acme, Shanghai AI Lab, NSDI'24, github InternLM/AcmeTrace
  data/utilization/util_pkl/gpu_power_*.pkl, read here): idle 60-66 W, loaded median ~370-400 W,
  p99 442 W on a 400 W part; GPU temperature p1-p99 22-66 C, memory 30-67 C. An 8x H100 node
  training Llama2-13b peaked at 8.4 kW, 18% under its 10.2 kW rating (Latif et al., arXiv
  2412.08602): jobs push GPUs to 75-110% of TDP, some to the cap and some not.
- Temperatures: inlet differs by rack (hot-aisle leakage, row position: a few racks 4-9 C warmer)
  and by position in the chassis (GPUs downstream in the tray's airflow run warmer); a slow thermal
  lag (tens of seconds). Llama 3 saw a 1-2% diurnal throughput swing from temperature.
- PCIe: nvidia-smi documents that current link generation and width "may be reduced when the GPU
  is not in use" (nvidia-smi --help-query-gpu, pcie.link.gen.gpucurrent / pcie.link.width.current):
  idle links train down (ASPM) on most platforms, some also narrow, and come back within a second
  of load. Healthy links replay a little; NVIDIA recommends at most 8 replays per minute (DCGM,
  DcgmGpuHardwareLimits.h: DCGM_LIMIT_MAX_PCIREPLAY_RATE).
- NVLink CRC: "RM has informed us that CRC errors only matter at rates of 100+ per second"
  (DCGM DcgmGpuHardwareLimits.h, DCGM_LIMIT_MAX_NVLINK_CRC_ERROR 100.0); healthy links see a
  trickle and short bursts (link retraining).
- Utilisation: NVML's utilization.gpu is the share of time any kernel ran, and NCCL's kernels run
  while a rank waits in a collective, so a synchronous job reads 90-100% whether computing or
  waiting; power and clocks, not utilisation, show the work. Pipeline stages differ (the last
  stage carries the LM head and loss; others wait in the 1F1B bubble); the first stage's hosts run
  the data loader (more CPU).
- Fleet-wide events: staggered starts (hosts load the checkpoint at different speeds, then wait in
  the rendezvous), periodic checkpoints (GPUs idle while state is written, per-host duration
  jitter), data stalls (every rank waits in NCCL: utilisation stays high, power drops), eval phases,
  a job that ends or crashes before the data ends (every host idles at slightly different times).
- Mixed fleets: a second SKU on part of the hosts (same job: the faster SKU waits more), several
  VBIOS versions, a site power policy (a pod, or the whole fleet, capped below the default limit).
- Per-rail NICs: a host's bytes are the sum over its rails; traffic depends on the pipeline role
  (stage boundaries carry activations), on storage traffic (frontend NIC) and on checkpoint
  writes; 1 Hz counters alias against the step period.

Faults (FAULTS below, with the category a correct detector names) follow the catalogue's metric
and log symptoms; magnitudes are drawn from ranges stated per fault. Faults whose metric symptom
in the catalogue is "none" (silent compute stragglers, #12) or invisible in host counters (NIC
flaps without port counters, switch/optics, #5-#6) are not generated: they belong to the timeline
straggler analyzer and to network counters this schema does not have.

Known quirks, found after the splits were frozen and left as they are (changing the code would
change the frozen data): every host counts as a pipeline-stage boundary when there is more than
one stage, so stages do not shift network bytes as intended; and the per-second network rate is
integrated from 10 sub-samples, so short communication bursts are quantised and some hosts read
up to ~30% more or fewer bytes than their peers, persistently (a harsher healthy variance than
intended, which the detector must and does tolerate).

Everything is numpy on (host, gpu, second) arrays; a 64-host fleet of 8 GPUs for 15 min takes about
a second. `generate(spec)` returns the two tables (with a `host` column) and the labels.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa

__all__ = [
    "SKUS",
    "FAULTS",
    "FaultDraw",
    "FleetSpec",
    "Generated",
    "generate",
    "table_sha256",
    "spec_from_dict",
    "draw_fleet",
]

START_NS = 1_797_552_000 * 10**9  # 2026-12-18T00:00:00Z, an arbitrary origin
GIB = 1 << 30

# NVML clocks-event-reason bits, from nvml.h (nvmlClocksEventReasons): defined here, not imported
# from trainctl, so this generator shares no code with the analyzer.
_IDLE, _APP_CLOCKS, _SW_POWER, _HW_SLOW, _SW_THERMAL, _HW_THERMAL, _HW_BRAKE = 0x1, 0x2, 0x4, 0x8, 0x20, 0x40, 0x80


@dataclass(frozen=True)
class Sku:
    name: str  # nvmlDeviceGetName
    tdp_w: float  # default power-management limit
    max_clock_mhz: float
    idle_clock_mhz: float
    idle_w: float
    mem_total_bytes: int
    pcie_gen_max: int
    pcie_width_max: int
    slowdown_c: float  # [U] typical nvidia-smi "GPU Slowdown Temp" for the part
    c_per_w: float  # steady-state temperature rise per watt (air-cooled HGX, [U] from 65-75 C at TDP)
    vbios: tuple[str, ...]


SKUS: dict[str, Sku] = {
    "h100": Sku(
        "NVIDIA H100 80GB HBM3",
        700.0,
        1980,
        345,
        70,
        80 * GIB,
        5,
        16,
        87.0,
        0.060,
        ("96.00.74.00.1A", "96.00.99.00.01", "96.00.A5.00.01"),
    ),
    "h200": Sku(
        "NVIDIA H200", 700.0, 1980, 345, 78, 141 * 10**9, 5, 16, 87.0, 0.058, ("96.00.A0.00.02", "96.00.C1.00.03")
    ),
    "a100": Sku(
        "NVIDIA A100-SXM4-80GB",
        400.0,
        1410,
        210,
        60,
        80 * GIB,
        4,
        16,
        89.0,
        0.085,
        ("92.00.45.00.03", "92.00.36.00.02"),
    ),
}

# fault kind -> the faulty_host category a correct detector names (DESIGN.md's catalog).
FAULTS: dict[str, str] = {
    "ecc_dbe": "ecc",  # catalogue #1: DBE, Xid 48 then 63 (or 64: remap failed); the job usually dies
    "ecc_contained": "ecc",  # #1: Xid 94, contained uncorrectable error (A100+)
    "ecc_uncontained": "ecc",  # #1: Xid 95
    "sbe_storm": "ecc",  # #1: correctable errors at a high rate, often Xid 92 (excessive SBE interrupts)
    "gpu_lost": "gpu_lost",  # #2: Xid 79, the GPU answers no more, GPU count drops; peers hang
    "nvlink": "nvlink",  # #3: CRC errors >= 100/s (NVIDIA's line), sometimes Xid 74 and a hang
    "pcie_downgrade": "pcie_downgrade",  # #4: link width/generation below max under load, replays
    "power_limit": "power",  # #11: enforced power limit lowered on a GPU or a host (nvidia-smi -pl)
    "power_brake": "power",  # #11: HW power brake asserted by the platform (PSU / BMC)
    "thermal": "thermal",  # #11: failed cooling: temperature to the slowdown point, thermal bits
    "gsp": "xid",  # #8: Xid 119/120 (GSP RPC timeout / error); the GPU stalls, peers hang
    "unreachable": "unreachable",  # #10: every series of the host stops
    "clock_locked": "metric_outlier",  # #11/#12: SM clock held low (a leftover nvidia-smi -lgc)
    "cpu_contention": "metric_outlier",  # #13: a runaway process takes the host's CPUs
}


@dataclass(frozen=True)
class FaultDraw:
    kind: str
    host: int  # index into the fleet's hosts
    gpus: tuple[int, ...]
    onset_s: float  # < 0: present before the data starts
    params: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class FleetSpec:
    name: str
    seed: int
    hosts: int
    seconds: int
    gpus: int = 8
    faults: tuple[FaultDraw, ...] = ()
    # Healthy fleet shape, all drawn by draw_fleet (kept explicit so a frozen list pins them).
    skus: tuple[tuple[str, float], ...] = (("h100", 1.0),)
    power_policy: str = "default"  # default | pod (a block of racks capped) | fleet (all capped)
    policy_fraction: float = 0.0  # share of the default limit the policy sets (0: none)
    pp_stages: int = 1
    app_xid_at_s: float | None = None  # an application-caused Xid (13/31/43) on one GPU; the job dies
    job_end_s: float | None = None  # the job ends (every host idles) before the data does


@dataclass
class Generated:
    gpu_metrics: pa.Table  # with a `host` column
    host_metrics: pa.Table
    labels: dict[str, Any]


def host_names(n: int) -> list[str]:
    # Not trainctl's naming: gpu nodes named by rack and slot, as many sites do.
    return [f"gpu-r{i // 4 + 1:02d}-s{i % 4 + 1}" for i in range(n)]


def _t_noise(rng: np.random.Generator, df: float, size: Any) -> np.ndarray:
    """Heavy-tailed unit-scale noise (Student t scaled to unit variance)."""
    return rng.standard_t(df, size) / np.sqrt(df / (df - 2.0))


def _ema(x: np.ndarray, tau_s: np.ndarray | float, axis: int = -1) -> np.ndarray:
    """First-order lag (thermal mass) along the time axis: y += (x - y) / tau."""
    a = 1.0 / np.maximum(1.0, np.asarray(tau_s, np.float64))
    y = np.empty_like(x)
    y[..., 0] = x[..., 0]
    for t in range(1, x.shape[-1]):  # T steps of vector ops over all GPUs
        y[..., t] = y[..., t - 1] + (x[..., t] - y[..., t - 1]) * a
    return y


def generate(spec: FleetSpec) -> Generated:
    rng = np.random.default_rng(spec.seed)
    H, G, T = spec.hosts, spec.gpus, spec.seconds
    names = host_names(H)
    t = np.arange(T, dtype=np.float64)

    # ---------------------------------------------------------------- fleet shape
    sku_keys = [k for k, _ in spec.skus]
    weights = np.array([w for _, w in spec.skus], np.float64)
    counts = np.floor(weights / weights.sum() * H).astype(int)
    counts[0] += H - counts.sum()
    # Second SKUs occupy whole racks at the end of the fleet (bought later, installed together).
    host_sku = np.concatenate([np.full(c, i) for i, c in enumerate(counts)])
    sku = [SKUS[sku_keys[i]] for i in host_sku]
    tdp = np.array([s.tdp_w for s in sku])
    max_clk = np.array([s.max_clock_mhz for s in sku])
    idle_clk = np.array([s.idle_clock_mhz for s in sku])
    idle_w = np.array([s.idle_w for s in sku])
    c_per_w = np.array([s.c_per_w for s in sku])
    vbios = [s.vbios[int(rng.integers(0, len(s.vbios)))] for s in sku]

    limit = np.repeat(tdp[:, None], G, 1).astype(np.float64)  # enforced limit per GPU
    if spec.power_policy == "fleet":
        limit *= spec.policy_fraction
    elif spec.power_policy == "pod":
        racks = (H + 3) // 4
        n_pod = max(1, int(round(racks * float(rng.uniform(0.25, 0.5)))))
        first = int(rng.integers(0, racks - n_pod + 1))
        pod = (np.arange(H) // 4 >= first) & (np.arange(H) // 4 < first + n_pod)
        limit[pod] *= spec.policy_fraction
    limit = np.round(limit)

    # Per-GPU silicon: power for the same work (Sinha et al.: 8% average, 22% max spread).
    sigma_e = float(rng.uniform(0.04, 0.07))
    eff = np.clip(1.0 + sigma_e * _t_noise(rng, 5.0, (H, G)), 0.8, 1.3)
    # Thermal: rack inlet, chassis position, per-GPU heatsink/TIM quality.
    racks_n = (H + 3) // 4
    rack_inlet = 24.0 + rng.normal(0, 1.8, racks_n) + (rng.random(racks_n) < 0.15) * rng.uniform(3, 7, racks_n)
    inlet = rack_inlet[np.arange(H) // 4] + rng.normal(0, 0.8, H)
    pos = np.tile(np.array([0, 0, 2, 2, 4, 4, 6, 6], float)[:G], (H, 1)) * float(rng.uniform(0.5, 1.3))
    pos += rng.normal(0, 1.0, (H, G))
    r_th = c_per_w[:, None] * np.clip(rng.normal(1.0, 0.06, (H, G)), 0.85, 1.2)
    tau = rng.uniform(15, 45, (H, G))

    # ---------------------------------------------------------------- the job's phases (per host x second)
    # Loading (per-host duration), rendezvous wait, training; checkpoints, stalls, evals.
    stagger_max = float(rng.uniform(10, 150))
    load_end = rng.uniform(5, stagger_max, H)
    train_start = float(load_end.max() + rng.uniform(2, 10))
    train_end = float(T + 10) if spec.job_end_s is None else float(spec.job_end_s)
    phase_load = t[None, :] < load_end[:, None]
    end_jit = rng.uniform(0, 5, H)
    training = (t[None, :] >= train_start + rng.uniform(0, 1.0, H)[:, None]) & (
        t[None, :] < train_end + end_jit[:, None]
    )

    # Checkpoints: every K minutes, duration D with per-host jitter; GPUs mostly idle meanwhile.
    ckpt = np.zeros((H, T), bool)
    period = float(rng.uniform(240, 720))
    dur = float(rng.uniform(8, 45))
    at = train_start + period
    while at < T:
        s = at + rng.uniform(0, 2.0, H)
        e = s + dur * rng.uniform(0.8, 1.25, H)
        ckpt |= (t[None, :] >= s[:, None]) & (t[None, :] < e[:, None])
        at += period
    # Data stalls: every rank waits in NCCL (util stays high, power falls).
    stall = np.zeros(T, bool)
    for _ in range(int(rng.poisson(T / 600 * rng.uniform(0, 3)))):
        s0 = rng.uniform(train_start, T)
        stall[int(s0) : int(s0 + rng.uniform(2, 20))] = True
    evalp = np.zeros(T, bool)
    if rng.random() < 0.4:
        e0 = rng.uniform(train_start + 60, T)
        evalp[int(e0) : int(e0 + rng.uniform(20, 60))] = True

    # Pipeline roles: the last stage carries the LM head and loss, the others wait in the bubble.
    S = max(1, int(spec.pp_stages))
    stage = (np.arange(H) * S) // H
    stage_f = np.ones(S)
    if S > 1:
        stage_f[-1] += rng.uniform(0.05, 0.15)
        stage_f[0] -= rng.uniform(0.0, 0.08)
    micro = float(rng.integers(8, 65))
    bubble = (S - 1) / (micro + S - 1)
    k_job = float(rng.uniform(0.8, 1.1))  # how hard the job pushes the GPU (share of TDP at full clock)
    period_s = float(rng.uniform(1.5, 12))
    c0 = float(rng.uniform(0.55, 0.85))
    gap = float(rng.uniform(0.01, 0.08))
    # A second SKU in the same job finishes its work sooner and waits longer.
    sku_speed = np.array([1.0 if k == sku_keys[0] else float(rng.uniform(0.6, 0.9)) for k in sku_keys])
    comp_frac = c0 * stage_f[stage] / stage_f.max() * (1 - bubble) * sku_speed[host_sku]
    comp_frac = comp_frac[:, None] * np.clip(rng.normal(1.0, 0.01, (H, G)), 0.95, 1.05)

    # Faults that slow the job slow every host (synchronous training): a job-wide slowdown factor.
    job_slow = np.ones(T)
    hang_from = np.inf
    crash_at = np.inf
    for f in spec.faults:
        o = max(0.0, f.onset_s)
        if f.kind in ("clock_locked", "power_limit", "thermal", "power_brake", "cpu_contention", "nvlink"):
            job_slow[int(o) :] = np.minimum(job_slow[int(o) :], float(f.params.get("job_slow", 1.0)))
        if f.kind in ("gpu_lost", "unreachable", "gsp") or (f.kind == "nvlink" and f.params.get("link_down")):
            hang_from = min(hang_from, o + 1)
        if f.kind in ("ecc_dbe", "ecc_contained", "ecc_uncontained") and f.params.get("job_crashes"):
            crash_at = min(crash_at, o + float(f.params["crash_after_s"]))
    if spec.app_xid_at_s is not None:
        crash_at = min(crash_at, float(spec.app_xid_at_s))
    watchdog = float(rng.uniform(120, 600))  # NCCL timeout: a hung job dies this long after the hang
    crash_at = min(crash_at, hang_from + watchdog)
    job_alive = t < crash_at
    hung = (t >= hang_from) & job_alive
    training &= job_alive[None, :]

    # Per-second compute intensity from the step cycle, sampled at each agent's own offset.
    offset = rng.uniform(0, 1, H)
    sub = np.linspace(0, 1, 10, endpoint=False)
    ph = ((t[None, :, None] - sub[None, None, :] + offset[:, None, None]) / (period_s / job_slow[None, :, None])) % 1.0
    cf = comp_frac.mean(1)[:, None, None]
    inten_h = np.where(ph < cf, 1.0, np.where(ph < 1 - gap, 0.3, 0.05)).mean(-1)  # (H, T)
    inst_compute = (((t[None, :] + offset[:, None]) / period_s * job_slow[None, :]) % 1.0) < cf[..., 0]
    inten = inten_h[:, None, :] * np.clip(1 + rng.normal(0, 0.03, (H, G, T)), 0.8, 1.2)
    inten *= job_slow[None, None, :] ** 0.5  # a slowed job waits more
    inten = np.where(stall[None, None, :], 0.18, inten)
    inten = np.where(evalp[None, None, :], inten * 0.6, inten)
    inten = np.where(hung[None, None, :], 0.2, inten)  # ranks spin in NCCL kernels
    busy = training[:, None, :] & ~ckpt[:, None, :]
    util = np.where(busy, 100.0 * (1 - gap) + rng.normal(0, 1.5, (H, G, T)), 0.0)
    util = np.where(phase_load[:, None, :], rng.uniform(0, 25, (H, G, T)), util)
    util = np.where(ckpt[:, None, :] & training[:, None, :], rng.uniform(0, 15, (H, G, T)), util)
    inten = np.where(busy, inten, np.where(phase_load[:, None, :], 0.04, 0.0))

    # Fault-specific edits on the intensity/clock side happen below with the physics.
    clock_cap = np.full((H, G, T), np.inf)
    thr_extra = np.zeros((H, G, T), np.uint64)
    limit_t = np.repeat(limit[:, :, None], T, 2)
    brake = np.zeros((H, G, T), bool)

    notes: list[dict[str, Any]] = [{} for _ in spec.faults]
    thermal_faults: list[tuple[int, list[int], int, float, float]] = []
    full = (tdp * k_job)[:, None] * eff  # demand at full clock in the compute phase
    for i, f in enumerate(spec.faults):
        h, gs, o = f.host, list(f.gpus), int(max(0.0, f.onset_s))
        p = f.params
        if f.kind == "power_limit":  # relative to the limit in force (a pod policy may already cap it)
            new = np.round(limit[h, gs] * float(p["limit_share"]))
            limit_t[h, gs, o:] = new[:, None]
            notes[i]["limit_w"] = sorted({float(x) for x in new})
        elif f.kind == "clock_locked":
            cap = round(float(max_clk[h]) * float(p["clock_share"]))
            clock_cap[h, gs, o:] = cap
            notes[i]["clock_mhz"] = cap
            if p.get("app_clock_bit"):
                thr_extra[h, gs, o:] |= np.uint64(_APP_CLOCKS)
        elif f.kind == "power_brake":
            brake[h, gs, o:] = rng.random((len(gs), T - o)) < float(p["duty"])
        elif f.kind == "thermal":
            thermal_faults.append((h, gs, o, float(p["excess_c"]), float(p["ramp_s"])))

    # ---------------------------------------------------------------- power, clocks, temperature
    demand = idle_w[:, None, None] + (full[:, :, None] - idle_w[:, None, None]) * inten
    capped_c = np.minimum(full[:, :, None], limit_t)  # compute-phase power under the cap
    over = full[:, :, None] > limit_t
    power = np.where(over, idle_w[:, None, None] + (capped_c - idle_w[:, None, None]) * inten, demand)
    clk_busy = max_clk[:, None, None] * np.where(over, (limit_t / full[:, :, None]) ** (1 / 2.5), 1.0)
    # The sampled clock is the one at the sampling instant: compute phase (capped) or comm (boost).
    clk = np.where(inst_compute[:, None, :], clk_busy, max_clk[:, None, None])
    clk = np.where(
        busy | hung[None, None, :],
        clk,
        np.where(phase_load[:, None, :], max_clk[:, None, None] * 0.6, idle_clk[:, None, None]),
    )
    clk = np.minimum(clk, clock_cap)
    # A clock held low draws less power (P ~ f^2.5 at the compute phase).
    held = np.isfinite(clock_cap) & (busy | hung[None, None, :])
    ratio = np.clip(clock_cap / np.maximum(clk_busy, 1), 0, 1)
    power = np.where(held, idle_w[:, None, None] + (power - idle_w[:, None, None]) * ratio**2.5, power)
    power = np.where(brake, np.minimum(power, tdp[:, None, None] * rng.uniform(0.2, 0.45)), power)
    clk = np.where(brake, np.minimum(clk, max_clk[:, None, None] * rng.uniform(0.3, 0.55)), clk)
    power = power * (1 + rng.normal(0, 0.015, (H, G, T))) + rng.normal(0, 3, (H, G, T))

    temp_ss = inlet[:, None, None] + pos[:, :, None] + r_th[:, :, None] * power
    for h, gs, o, excess, ramp_s in thermal_faults:
        # Failed cooling (fan, heatsink, loop): at this job's load the GPU would settle `excess`
        # degrees above its slowdown point; it ramps there with the new thermal time constant.
        loaded = busy[h, 0]
        typical = temp_ss[h, gs][:, loaded].mean(-1) if loaded.any() else temp_ss[h, gs].mean(-1)
        rise = np.clip(sku[h].slowdown_c + excess - typical, 5, None)
        ramp = 1 - np.exp(-np.clip(t - o, 0, None) / ramp_s) * (t >= o)
        temp_ss[h, gs] += rise[:, None] * np.where(t >= o, ramp, 0.0)[None, :] * np.where(busy[h, 0], 1.0, 0.3)[None, :]
    temp = _ema(temp_ss, tau)
    slowdown = np.array([s.slowdown_c for s in sku])[:, None, None]
    # Thermal slowdown: above the slowdown point the GPU sheds clocks (and power) to hold it.
    hot = temp >= slowdown
    over_c = np.clip(temp - slowdown, 0, None)
    clk = np.where(hot & busy, clk * np.clip(1 - 0.08 * (1 + over_c), 0.45, 1), clk)
    power = np.where(hot & busy, power * np.clip(1 - 0.06 * (1 + over_c), 0.5, 1), power)
    temp = np.where(hot, slowdown + np.minimum(over_c, 6) + rng.normal(0, 0.4, (H, G, T)), temp)
    # GPU Boost drops a bin (~15 MHz) every few degrees above ~55 C.
    clk = np.where(busy, clk - 15.0 * np.floor(np.clip(temp - 55, 0, None) / 6), clk)
    clk = clk + rng.normal(0, 4, (H, G, T)) * busy

    throttle = np.zeros((H, G, T), np.uint64)
    throttle |= np.where(~busy & ~hung[None, None, :], np.uint64(_IDLE), np.uint64(0))
    capped_now = over & inst_compute[:, None, :] & busy
    throttle |= np.where(capped_now, np.uint64(_SW_POWER), np.uint64(0))
    throttle |= np.where(hot, np.uint64(_SW_THERMAL), np.uint64(0))
    throttle |= np.where(temp >= slowdown + 3, np.uint64(_HW_THERMAL | _HW_SLOW), np.uint64(0))
    throttle |= np.where(brake, np.uint64(_HW_BRAKE | _HW_SLOW), np.uint64(0))
    throttle |= thr_extra
    # "HW slowdown ... may be also reported during PState or clock change" (nvml.h): 1 s blips
    # at load transitions on some GPUs.
    edges = np.diff(busy.astype(np.int8), axis=-1, prepend=0) != 0
    throttle |= np.where(edges & (rng.random((H, G, T)) < 0.3), np.uint64(_HW_SLOW), np.uint64(0))

    # ---------------------------------------------------------------- PCIe
    gen_max = np.array([s.pcie_gen_max for s in sku])
    wid_max = np.array([s.pcie_width_max for s in sku])
    gen = np.repeat(np.repeat(gen_max[:, None, None], G, 1), T, 2).astype(np.int8)
    wid = np.repeat(np.repeat(wid_max[:, None, None], G, 1), T, 2).astype(np.int8)
    aspm = rng.random(H) < 0.85  # platforms with ASPM / dynamic link speed enabled
    narrow_idle = rng.random(H) < 0.2  # some also narrow the link at idle
    lowpower = util < 5
    lowpower_lag = lowpower | np.roll(lowpower, 1, axis=-1)  # retrains back within ~1 s of load
    gen = np.where(aspm[:, None, None] & lowpower_lag, np.int8(1), gen)
    wid = np.where(narrow_idle[:, None, None] & lowpower_lag, np.int8(8), wid).astype(np.int8)
    replay = np.cumsum(rng.poisson(np.where(rng.random((H, G, 1)) < 0.1, 1 / 120, 0.0), (H, G, T)), -1)
    replay += rng.integers(0, 50, (H, G, 1))

    # ---------------------------------------------------------------- ECC, NVLink, Xid
    sbe_hist = np.floor(10 ** rng.uniform(0, 3.7, (H, G))).astype(np.int64) * (rng.random((H, G)) < 0.6)
    dbe_hist = (rng.random((H, G)) < 0.03) * rng.integers(1, 3, (H, G))
    rows_hist = (rng.random((H, G)) < 0.08) * rng.integers(1, 5, (H, G))
    sbe_vol = np.cumsum(rng.poisson(np.where(rng.random((H, G, 1)) < 0.05, 1 / 900, 0.0), (H, G, T)), -1)
    dbe_vol = np.zeros((H, G, T), np.int64)
    rows = np.repeat(rows_hist[:, :, None], T, 2).astype(np.int64)
    crc_rate = np.where(rng.random((H, G, 1)) < 0.3, 10 ** rng.uniform(-4, -1.5, (H, G, 1)), 0.0)
    crc_inc = rng.poisson(np.broadcast_to(crc_rate, (H, G, T)))
    bursts = rng.random((H, G, T)) < 1 / 3600  # a link retrain now and then: a one-second burst
    crc_inc += bursts * rng.integers(10, 200, (H, G, T))
    xid = np.full((H, G, T), -1, np.int32)
    present = np.ones((H, G, T), bool)
    host_present = np.ones((H, T), bool)

    for f in spec.faults:
        h, gs, o = f.host, list(f.gpus), int(max(0.0, f.onset_s))
        p = f.params
        k = f.kind
        if k in ("ecc_dbe", "ecc_contained", "ecc_uncontained"):
            g = gs[0]
            extra = np.zeros(T, np.int64)
            extra[o] = 1
            for _ in range(int(p.get("more_dbe", 0))):
                extra[min(T - 1, o + int(rng.uniform(20, 400)))] += 1
            dbe_vol[h, g] += np.cumsum(extra)
            rows[h, g, o + int(p.get("remap_after_s", 2)) :] += 1
            if p.get("xid_seen", True):
                first = {"ecc_dbe": 48, "ecc_contained": 94, "ecc_uncontained": 95}[k]
                xid[h, g, o:] = first
                if k == "ecc_dbe":
                    xid[h, g, o + 2 :] = 64 if p.get("remap_failed") else 63
        elif k == "sbe_storm":
            g = gs[0]
            sbe_vol[h, g, o:] += np.cumsum(rng.poisson(float(p["rate_per_s"]), T - o))
            if p.get("xid92"):
                xid[h, g, o + int(p.get("xid_after_s", 30)) :] = 92
        elif k == "gpu_lost":
            g = gs[0]
            present[h, g, o:] = False
            if p.get("xid_seen"):
                xid[h, g, max(0, o - 1)] = 79
        elif k == "nvlink":
            g = gs[0]
            crc_inc[h, g, o:] += rng.poisson(float(p["crc_per_s"]), T - o)
            if p.get("xid74"):
                xid[h, g, o + int(p.get("xid_after_s", 5)) :] = 74
        elif k == "pcie_downgrade":
            gen[h, gs, o:] = np.minimum(gen[h, gs, o:], int(p["gen"]))
            wid[h, gs, o:] = np.minimum(wid[h, gs, o:], int(p["width"]))
            replay[h, gs, o:] += np.cumsum(rng.poisson(float(p["replay_per_s"]), (len(gs), T - o)), -1)
        elif k == "gsp":
            g = gs[0]
            xid[h, g, o:] = int(p["code"])
            util[h, g, o:] = 100.0  # the GPU stops answering its channel: util pegged, work stops
            power[h, g, o:] = idle_w[h] * 1.6 + rng.normal(0, 3, T - o)
        elif k == "unreachable":
            present[h, :, o:] = False
            host_present[h, o:] = False
        elif k == "cpu_contention":
            pass  # host side, below

    if spec.app_xid_at_s is not None:
        h, g = int(rng.integers(0, H)), int(rng.integers(0, G))
        c_at = int(min(crash_at, T - 1))
        xid[h, g, max(0, c_at - 2) :] = int(rng.choice([13, 31, 43]))

    crc = np.cumsum(crc_inc, -1) + np.where(rng.random((H, G, 1)) < 0.4, rng.integers(0, 5000, (H, G, 1)), 0)

    # ---------------------------------------------------------------- host metrics
    dataloader = stage == 0
    cpu = 22.0 + rng.normal(0, 5, H)[:, None] + dataloader[:, None] * rng.uniform(10, 25) + rng.normal(0, 3, (H, T))
    cpu = np.where(phase_load, rng.uniform(50, 90, (H, T)), np.where(training, cpu, cpu * 0.4))
    for _ in range(int(rng.poisson(H * T / 3600 * 1.5))):  # noisy neighbours: short CPU bursts
        h, s0 = int(rng.integers(0, H)), int(rng.integers(0, T))
        cpu[h, s0 : s0 + int(rng.uniform(10, 45))] += rng.uniform(15, 40)
    load1 = cpu / 100 * 96 * rng.uniform(0.3, 0.6) + rng.normal(0, 1, (H, T))
    for f in spec.faults:
        if f.kind == "cpu_contention":
            o = int(max(0.0, f.onset_s))
            cpu[f.host, o:] += float(f.params["extra_pct"])
            load1[f.host, o:] += float(f.params["extra_pct"]) * 0.96
    boundary = (stage < S - 1) | (stage > 0)
    bytes_step = float(rng.uniform(10, 60)) * 1e9 * (1 + 0.15 * boundary * (S > 1)) * rng.uniform(0.97, 1.03, H)
    comm_share = np.where(ph < cf, 0.0, np.where(ph < 1 - gap, 1.0, 0.0)).mean(-1)  # (H, T)
    comm_len = np.maximum(1e-3, (1 - cf[:, 0, 0] - gap) * period_s)
    net = np.where(training & ~ckpt & ~hung[None, :], bytes_step[:, None] * comm_share / comm_len[:, None], 0.0)
    net *= job_slow[None, :]
    storage = rng.uniform(0.05, 1.5, H)[:, None] * 1e9 * np.abs(1 + rng.normal(0, 0.5, (H, T)))
    net_rx = net + storage
    net_tx = net * rng.uniform(0.97, 1.0, (H, 1)) + np.where(ckpt, rng.uniform(1, 5, (H, 1)) * 1e9, 0.0)

    mem_used = np.where(
        training[:, None, :] | hung[None, None, :],
        rng.uniform(0.65, 0.95) * np.array([s.mem_total_bytes for s in sku])[:, None, None],
        np.where(phase_load[:, None, :], 0.3 * np.array([s.mem_total_bytes for s in sku])[:, None, None], 0.6 * GIB),
    ) + rng.integers(0, 256 << 20, (H, G, T))

    util = np.clip(util, 0, 100)
    power = np.clip(power, idle_w[:, None, None] * 0.8, None)
    gpu_count = present.sum(1).astype(np.int16)

    # ---------------------------------------------------------------- tables
    hh, gg, tt = np.nonzero(present)
    ts = START_NS + (tt * 10**9) + (offset[hh] * 1e9).astype(np.int64)
    hd = pa.DictionaryArray.from_arrays(pa.array(hh.astype(np.int32)), pa.array(names))
    sku_names = [s.name for s in SKUS.values()]
    sku_index = np.array([sku_names.index(s.name) for s in sku], np.int32)
    vb_names = sorted(set(vbios))
    vb_index = np.array([vb_names.index(v) for v in vbios], np.int32)
    xv = xid[hh, gg, tt]
    gpu_tbl = pa.table(
        {
            "ts": pa.array(ts, pa.timestamp("ns", tz="UTC")),
            "gpu": pa.array(gg.astype(np.int16)),
            "gpu_name": pa.DictionaryArray.from_arrays(pa.array(sku_index[hh]), pa.array(sku_names)),
            "vbios_version": pa.DictionaryArray.from_arrays(pa.array(vb_index[hh]), pa.array(vb_names)),
            "sm_util_pct": pa.array(util[hh, gg, tt].astype(np.float32)),
            "mem_util_pct": pa.array((util[hh, gg, tt] * inten[hh, gg, tt] * 0.6).astype(np.float32)),
            "power_w": pa.array(power[hh, gg, tt].astype(np.float32)),
            "power_limit_w": pa.array(limit_t[hh, gg, tt].astype(np.float32)),
            "power_limit_default_w": pa.array(tdp[hh].astype(np.float32)),
            "temp_c": pa.array(np.round(temp[hh, gg, tt]).astype(np.float32)),
            "temp_slowdown_c": pa.array(slowdown[hh, 0, 0].astype(np.float32)),
            "sm_clock_mhz": pa.array(np.maximum(clk[hh, gg, tt], 0).astype(np.int32)),
            "sm_clock_max_mhz": pa.array(max_clk[hh].astype(np.int32)),
            "mem_used_bytes": pa.array(mem_used[hh, gg, tt].astype(np.int64)),
            "mem_total_bytes": pa.array(np.array([s.mem_total_bytes for s in sku], np.int64)[hh]),
            "pcie_link_gen": pa.array(gen[hh, gg, tt]),
            "pcie_link_gen_max": pa.array(gen_max[hh].astype(np.int8)),
            "pcie_link_width": pa.array(wid[hh, gg, tt]),
            "pcie_link_width_max": pa.array(wid_max[hh].astype(np.int8)),
            "pcie_replay_errors_total": pa.array(replay[hh, gg, tt].astype(np.int64)),
            "ecc_sbe_volatile": pa.array(sbe_vol[hh, gg, tt].astype(np.int64)),
            "ecc_dbe_volatile": pa.array(dbe_vol[hh, gg, tt].astype(np.int64)),
            "ecc_sbe_total": pa.array((sbe_hist[hh, gg] + sbe_vol[hh, gg, tt]).astype(np.int64)),
            "ecc_dbe_total": pa.array((dbe_hist[hh, gg] + dbe_vol[hh, gg, tt]).astype(np.int64)),
            "retired_pages": pa.array(rows[hh, gg, tt]),
            "nvlink_crc_errors_total": pa.array(crc[hh, gg, tt].astype(np.int64)),
            "throttle_reasons": pa.array(throttle[hh, gg, tt], pa.uint64()),
            "xid": pa.array(xv, pa.int32(), mask=xv < 0),
            "host": hd,
        }
    )
    h2, t2 = np.nonzero(host_present)
    ts2 = START_NS + t2 * 10**9 + (offset[h2] * 1e9).astype(np.int64)
    host_tbl = pa.table(
        {
            "ts": pa.array(ts2, pa.timestamp("ns", tz="UTC")),
            "cpu_util_pct": pa.array(np.clip(cpu[h2, t2], 0, 100).astype(np.float32)),
            "mem_used_bytes": pa.array(np.full(len(h2), 600 * GIB, np.int64)),
            "mem_total_bytes": pa.array(np.full(len(h2), 2048 * GIB, np.int64)),
            "net_rx_bytes_per_s": pa.array(np.maximum(net_rx[h2, t2], 0.0)),
            "net_tx_bytes_per_s": pa.array(np.maximum(net_tx[h2, t2], 0.0)),
            "load1": pa.array(np.maximum(load1[h2, t2], 0).astype(np.float32)),
            "gpu_count": pa.array(gpu_count[h2, t2]),
            "host": pa.DictionaryArray.from_arrays(pa.array(h2.astype(np.int32)), pa.array(names)),
        }
    )
    labels = {
        "name": spec.name,
        "seed": spec.seed,
        "hosts": names,
        "start_ts_ns": START_NS,
        "faults": [
            {
                "kind": f.kind,
                "category": FAULTS[f.kind],
                "host": names[f.host],
                "gpus": list(f.gpus),
                "onset_s": f.onset_s,
                "params": f.params,
                **notes[i],
            }
            for i, f in enumerate(spec.faults)
        ],
        "faulty_hosts": sorted({names[f.host] for f in spec.faults}),
        "fleet": {
            "skus": {SKUS[k].name: int(c) for k, c in zip(sku_keys, counts)},
            "vbios_versions": vb_names,
            "power_policy": spec.power_policy,
            "policy_limit_share": spec.policy_fraction,
            "pp_stages": S,
            "efficiency_sigma": round(sigma_e, 4),
            "stagger_max_s": round(stagger_max, 1),
            "train_start_s": round(train_start, 1),
            "checkpoint_every_s": round(period, 1),
            "checkpoint_s": round(dur, 1),
            "app_xid_at_s": spec.app_xid_at_s,
            "job_end_s": spec.job_end_s,
            "job_crash_s": None if not np.isfinite(crash_at) else round(float(crash_at), 1),
            "hang_from_s": None if not np.isfinite(hang_from) else round(float(hang_from), 1),
        },
    }
    return Generated(gpu_tbl, host_tbl, labels)


# -------------------------------------------------------------------------------- drawing scenarios


_HANGS = ("gpu_lost", "unreachable", "gsp")
_CRASHES = ("ecc_dbe", "ecc_contained", "ecc_uncontained")
_NEEDS_LOAD = ("clock_locked", "thermal", "pcie_downgrade", "nvlink", "power_brake")
_SHOW_S = 240.0  # minutes of symptom after the onset of a load-dependent fault


def _draw_fault(rng: np.random.Generator, kind: str, host: int, G: int, T: int) -> FaultDraw:
    """One fault with its magnitudes drawn from the catalogue's ranges (not from any detector)."""
    onset = -1.0 if rng.random() < 0.25 else float(rng.uniform(0.15, 0.65) * T)
    onset = min(onset, T - 240.0)
    g = int(rng.integers(0, G))
    p: dict[str, Any] = {}
    gpus: tuple[int, ...] = (g,)
    if kind in ("ecc_dbe", "ecc_contained", "ecc_uncontained"):
        onset = max(onset, float(rng.uniform(0.1, 0.6) * T))  # an event: it happens inside the data
        p = {
            "xid_seen": bool(rng.random() < 0.8),  # NVML event sets may not deliver it
            "remap_failed": bool(rng.random() < 0.2),
            "more_dbe": int(rng.integers(0, 3)),
            "job_crashes": bool(rng.random() < 0.6),
            "crash_after_s": float(rng.uniform(2, 60)),
        }
    elif kind == "sbe_storm":
        p = {
            "rate_per_s": float(10 ** rng.uniform(-0.5, 1.0)),
            "xid92": bool(rng.random() < 0.6),
            "xid_after_s": float(rng.uniform(5, 120)),
        }
    elif kind == "gpu_lost":
        onset = max(onset, float(rng.uniform(0.1, 0.6) * T))
        p = {"xid_seen": bool(rng.random() < 0.3)}
    elif kind == "nvlink":
        p = {
            "crc_per_s": float(10 ** rng.uniform(2.0, 3.7)),
            "xid74": bool(rng.random() < 0.4),
            "xid_after_s": float(rng.uniform(1, 60)),
            "job_slow": float(rng.uniform(0.85, 1.0)),
        }
        p["link_down"] = bool(p["xid74"] and rng.random() < 0.5)
    elif kind == "pcie_downgrade":
        n = int(rng.choice([1, 1, 1, 2, 4]))
        start = (g // n) * n
        gpus = tuple(range(start, min(G, start + n)))
        gen, width = (int(rng.integers(1, 5)), 16) if rng.random() < 0.5 else (5, int(rng.choice([1, 2, 4, 8])))
        if rng.random() < 0.3:
            gen, width = int(rng.integers(1, 5)), int(rng.choice([4, 8]))
        p = {"gen": gen, "width": width, "replay_per_s": float(rng.uniform(0, 3))}
    elif kind == "power_limit":
        if rng.random() < 0.5:
            gpus = tuple(range(G))
        p = {"limit_share": float(rng.uniform(0.45, 0.9)), "job_slow": float(rng.uniform(0.8, 0.97))}
    elif kind == "power_brake":
        gpus = tuple(range(G))
        p = {"duty": float(rng.uniform(0.6, 1.0)), "job_slow": float(rng.uniform(0.5, 0.8))}
    elif kind == "thermal":
        if rng.random() < 0.5:
            gpus = tuple(range(G))  # fan failure: the whole tray
        p = {"excess_c": float(rng.uniform(3, 20)), "ramp_s": float(rng.uniform(30, 180)), "job_slow": 0.9}
    elif kind == "gsp":
        onset = max(onset, float(rng.uniform(0.1, 0.6) * T))
        p = {"code": int(rng.choice([119, 120]))}
    elif kind == "unreachable":
        onset = max(onset, float(rng.uniform(0.1, 0.6) * T))
    elif kind == "clock_locked":
        if rng.random() < 0.4:
            gpus = tuple(range(G))
        p = {"clock_share": float(rng.uniform(0.35, 0.75)), "app_clock_bit": bool(rng.random() < 0.5)}
        p["job_slow"] = float(min(1.0, p["clock_share"] + 0.2))
    elif kind == "cpu_contention":
        p = {"extra_pct": float(rng.uniform(35, 70)), "job_slow": float(rng.uniform(0.85, 1.0))}
    return FaultDraw(kind, host, gpus, round(onset, 1), p)


def draw_fleet(rng: np.random.Generator, name: str, kinds: list[str], *, hosts: int | None = None) -> FleetSpec:
    """A fleet with the given faults (kinds; [] for a clean fleet) and randomly drawn healthy shape."""
    H = hosts or int(rng.choice([16, 24, 32, 48, 64]))
    T = int(rng.choice([600, 900, 1200]))
    G = 8
    r = rng.random()
    skus: tuple[tuple[str, float], ...] = (("h100", 1.0),)
    if r < 0.2:
        skus = (("h100", 0.6), ("h200", 0.4))
    elif r < 0.3:
        skus = (("h100", 0.5), ("a100", 0.5))
    elif r < 0.45:
        skus = (("a100", 1.0),)
    q = rng.random()
    policy, share = ("default", 0.0)
    if q < 0.15:
        policy, share = "pod", float(rng.uniform(0.75, 0.9))
    elif q < 0.25:
        policy, share = "fleet", float(rng.uniform(0.75, 0.9))
    hosts_ = rng.choice(H, len(kinds), replace=False) if kinds else []
    faults = [_draw_fault(rng, kind, int(h), G, T) for kind, h in zip(kinds, hosts_)]
    app_xid_at = float(rng.uniform(0.4, 0.8) * T) if rng.random() < 0.12 else None
    job_end = float(rng.uniform(0.6, 0.9) * T) if rng.random() < 0.15 else None
    # A fault seen only under load (clocks, heat, a link in use) must start while the job runs and
    # leave it minutes to show; otherwise the data cannot hold it and the label would be a lie.
    alive = min(x for x in (T, app_xid_at, job_end) if x is not None)
    for f in faults:
        if f.kind in _HANGS or (f.kind == "nvlink" and f.params.get("link_down")):
            alive = min(alive, f.onset_s + 1)
        if f.kind in _CRASHES and f.params.get("job_crashes"):
            alive = min(alive, f.onset_s + f.params["crash_after_s"])
    for i, f in enumerate(faults):
        if f.kind in _NEEDS_LOAD and f.onset_s > alive - _SHOW_S:
            late = alive - _SHOW_S
            onset = float(rng.uniform(0.1 * T, late)) if late > 0.1 * T else -1.0
            faults[i] = FaultDraw(f.kind, f.host, f.gpus, round(onset, 1), f.params)
    return FleetSpec(
        name=name,
        seed=int(rng.integers(0, 2**31 - 1)),
        hosts=H,
        seconds=T,
        gpus=G,
        faults=tuple(faults),
        skus=skus,
        power_policy=policy,
        policy_fraction=share,
        pp_stages=int(rng.choice([1, 1, 2, 4, 8])),
        app_xid_at_s=None if app_xid_at is None else round(app_xid_at, 1),
        job_end_s=None if job_end is None else round(job_end, 1),
    )


def spec_to_dict(spec: FleetSpec) -> dict[str, Any]:
    return asdict(spec)


def spec_from_dict(d: dict[str, Any]) -> FleetSpec:
    d = dict(d)
    d["faults"] = tuple(
        FaultDraw(f["kind"], f["host"], tuple(f["gpus"]), f["onset_s"], f["params"]) for f in d["faults"]
    )
    d["skus"] = tuple((k, w) for k, w in d["skus"])
    return FleetSpec(**d)


def table_sha256(*tables: pa.Table) -> str:
    """A digest of the generated data (Arrow IPC stream of each table, chunks combined)."""
    h = hashlib.sha256()
    for tbl in tables:
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, tbl.schema) as w:
            w.write_table(tbl.combine_chunks())
        h.update(sink.getvalue().to_pybytes())
    return h.hexdigest()


def describe(spec: FleetSpec) -> str:
    return json.dumps(spec_to_dict(spec), sort_keys=True)
