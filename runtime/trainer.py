"""The reference trainer: a small GPT, data parallel x tensor parallel, instrumented, drillable.

Run under torchrun (trainctl launch does this when no SCRIPT is given):

    python -m torch.distributed.run --nproc-per-node 4 -m trainctl.runtime.trainer --tp 2

Parallelism (Megatron-style): ranks [0..tp) form the first tensor-parallel group ("tp"), ranks
{r, r+tp, ...} a data-parallel group ("dp"). Attention heads and the MLP hidden dimension are split
across a tp group (column-parallel in, row-parallel out with an all_reduce in the tp group);
gradients are averaged over the dp group in one flat all_reduce (the `communication` phase).
Batches are packed variable-length sequences with exactly `--tokens-per-step` tokens per step and
no padding: attention is causal within each segment only. Steps are timed per phase (data,
forward, backward, communication, optimizer, plus the whole step) into the run dir's timeline.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
import sys
import time
import traceback
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

from trainctl.errors import CheckpointError
from trainctl.rundir import atomic_write_text, drill_kernel_log_path, error_file_path, numerics_path
from trainctl.runtime import checkpoint, debug_server, inject, rank_map
from trainctl.runtime.heartbeat import Heartbeat
from trainctl.runtime.instrument import Recorder

log = logging.getLogger("trainctl.runtime.trainer")

# Peak-FLOPs assumptions for MFU. CPU: cores x 2.5 GHz x 32 fp32 FLOP/cycle (two AVX2 FMA units),
# shared by every rank on the machine. GPU: dense bf16 tensor-core peak of the named part.
CPU_HZ = 2.5e9
CPU_FLOP_PER_CYCLE = 32
GPU_PEAK_FLOPS = {"H100": 989e12, "H200": 989e12, "A100": 312e12, "B200": 2250e12}


@dataclass(frozen=True)
class Topology:
    world_size: int
    tp: int

    @property
    def dp(self) -> int:
        return self.world_size // self.tp

    def tp_groups(self) -> list[list[int]]:
        return [list(range(i * self.tp, (i + 1) * self.tp)) for i in range(self.dp)]

    def dp_groups(self) -> list[list[int]]:
        return [list(range(j, self.world_size, self.tp)) for j in range(self.tp)]


# --- tensor-parallel building blocks -----------------------------------------------------------


# Time this rank spent inside tensor-parallel collectives during the current phase. A rank waits
# there for its slower tp peer, so leaving it in forward/backward would make a healthy tp partner
# of a straggler look slow in its own work; the loop moves it to `communication`. On CPU that is
# the call's wall time; on GPU the call only queues work, so each collective's Work is kept and its
# time on the tp group's NCCL stream is moved (Recorder.move_work).
_TP_NS = [0]
_TP_WORKS: list[Any] = []


def _tp_all_reduce(x: torch.Tensor, group: Any) -> None:
    t0 = time.perf_counter_ns()
    work = dist.all_reduce(x, group=group, async_op=True)
    work.wait()  # as the synchronous call does: the CPU (gloo) or the current stream (NCCL) waits for it
    _TP_NS[0] += time.perf_counter_ns() - t0
    if x.is_cuda:
        _TP_WORKS.append(work)


def _take_tp_ns() -> int:
    ns, _TP_NS[0] = _TP_NS[0], 0
    return ns


def _take_tp_works() -> list[Any]:
    works = list(_TP_WORKS)
    _TP_WORKS.clear()
    return works


class _CopyToTP(torch.autograd.Function):
    """Identity forward; all_reduce of the input gradient in the tp group (Megatron's f)."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, group: Any) -> torch.Tensor:
        ctx.group = group
        return x

    @staticmethod
    def backward(ctx: Any, g: torch.Tensor) -> tuple[torch.Tensor, None]:
        g = g.contiguous()
        _tp_all_reduce(g, ctx.group)
        return g, None


class _ReduceFromTP(torch.autograd.Function):
    """all_reduce forward in the tp group; identity backward (Megatron's g)."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, group: Any) -> torch.Tensor:
        x = x.contiguous()
        _tp_all_reduce(x, group)
        return x

    @staticmethod
    def backward(ctx: Any, g: torch.Tensor) -> tuple[torch.Tensor, None]:
        return g, None


class ColumnParallelLinear(nn.Module):
    def __init__(self, d_in: int, d_out: int, tp: int, group: Any) -> None:
        super().__init__()
        assert d_out % tp == 0, f"{d_out} not divisible by tp={tp}"
        self.group, self.tp = group, tp
        self.weight = nn.Parameter(torch.randn(d_out // tp, d_in) * d_in**-0.5)
        self.bias = nn.Parameter(torch.zeros(d_out // tp))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.tp > 1:
            x = _CopyToTP.apply(x, self.group)
        return F.linear(x, self.weight, self.bias)


class RowParallelLinear(nn.Module):
    def __init__(self, d_in: int, d_out: int, tp: int, group: Any) -> None:
        super().__init__()
        self.group, self.tp = group, tp
        self.weight = nn.Parameter(torch.randn(d_out, d_in // tp) * d_in**-0.5)
        self.bias = nn.Parameter(torch.zeros(d_out))  # added once, after the reduction

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.linear(x, self.weight)
        if self.tp > 1:
            y = _ReduceFromTP.apply(y, self.group)
        return y + self.bias


def _sharded(model: nn.Module) -> set[int]:
    """ids of the parameters split across the tp group (each rank holds 1/tp of them)."""
    out: set[int] = set()
    for m in model.modules():
        if isinstance(m, ColumnParallelLinear):
            out |= {id(m.weight), id(m.bias)}
        elif isinstance(m, RowParallelLinear):
            out.add(id(m.weight))  # its bias is added after the reduction: replicated
    return out


def model_params(model: nn.Module, tp: int) -> int:
    """The whole model's parameter count from one tp rank: shards x tp, replicated ones once.
    (Counting everything x tp, as before, overstated it by the replicated embeddings and norms.)"""
    sharded = _sharded(model)
    return sum(p.numel() * (tp if id(p) in sharded else 1) for p in model.parameters())


def matmul_params(model: nn.Module, tp: int) -> int:
    """model_params without embedding tables (a lookup, no FLOPs): the N of the 6N FLOPs/token rule."""
    emb = {id(p) for m in model.modules() if isinstance(m, nn.Embedding) for p in m.parameters()}
    sharded = _sharded(model)
    return sum(p.numel() * (tp if id(p) in sharded else 1) for p in model.parameters() if id(p) not in emb)


class Block(nn.Module):
    def __init__(self, d: int, heads: int, tp: int, group: Any) -> None:
        super().__init__()
        assert heads % tp == 0, f"heads={heads} not divisible by tp={tp}"
        self.local_heads, self.head_dim = heads // tp, d // heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv = ColumnParallelLinear(d, 3 * d, tp, group)
        self.proj = RowParallelLinear(d, d, tp, group)
        self.fc = ColumnParallelLinear(d, 4 * d, tp, group)
        self.out = RowParallelLinear(4 * d, d, tp, group)

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        t = x.shape[0]
        q, k, v = self.qkv(self.ln1(x)).view(t, 3, self.local_heads, self.head_dim).permute(1, 2, 0, 3)
        a = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        x = x + self.proj(a.permute(1, 0, 2).reshape(t, self.local_heads * self.head_dim))
        return x + self.out(F.gelu(self.fc(self.ln2(x))))


class GPT(nn.Module):
    def __init__(self, vocab: int, d: int, layers: int, heads: int, max_len: int, tp: int, group: Any) -> None:
        super().__init__()
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Embedding(max_len, d)
        self.blocks = nn.ModuleList(Block(d, heads, tp, group) for _ in range(layers))
        self.ln = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)

    def forward(self, tokens: torch.Tensor, positions: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        x = self.tok(tokens) + self.pos(positions)
        for b in self.blocks:
            x = b(x, mask)
        return self.head(self.ln(x))


# --- packed variable-length batches --------------------------------------------------------------


def segment_lengths(gen: torch.Generator, total: int, min_len: int, max_len: int) -> list[int]:
    """Random segment lengths summing to exactly `total` (constant tokens per step, no padding)."""
    lens: list[int] = []
    left = total
    while left > 0:
        n = int(torch.randint(min_len, max_len + 1, (1,), generator=gen))
        n = min(n, left)
        if 0 < left - n < min_len:  # never leave a tail shorter than min_len
            n = left
        lens.append(n)
        left -= n
    return lens


def packed_batch(gen: torch.Generator, total: int, vocab: int, min_len: int, max_len: int) -> tuple[torch.Tensor, ...]:
    """tokens, targets, positions, block-diagonal causal mask (True = may attend)."""
    lens = segment_lengths(gen, total, min_len, max_len)
    # A learnable stream: each segment counts up from a random start modulo vocab.
    starts = torch.randint(0, vocab, (len(lens),), generator=gen)
    seg_id = torch.repeat_interleave(torch.arange(len(lens)), torch.tensor(lens))
    positions = torch.cat([torch.arange(n) for n in lens])
    tokens = (starts[seg_id] + positions * 7) % vocab
    targets = (tokens + 7) % vocab
    same = seg_id[:, None] == seg_id[None, :]
    causal = positions[:, None] >= positions[None, :]
    return tokens, targets, positions, same & causal


# --- CAME (Luo et al., ACL'23; seeds.md §5) -----------------------------------------------------


class CAME(torch.optim.Optimizer):
    """Confidence-guided adaptive memory-efficient optimizer.

    Matrices keep factored second moments (row/col means, as Adafactor) of G^2 and of the
    instability S = (U - m)^2; the update m / sqrt(S_hat) damps directions where the normalized
    update disagrees with its momentum. Vectors fall back to unfactored moments.
    """

    def __init__(
        self,
        params: Any,
        lr: float = 2e-4,
        betas: tuple[float, float, float] = (0.9, 0.999, 0.9999),
        eps: tuple[float, float] = (1e-30, 1e-16),
        clip_threshold: float = 1.0,
        weight_decay: float = 0.0,
    ) -> None:
        super().__init__(
            params, dict(lr=lr, betas=betas, eps=eps, clip_threshold=clip_threshold, weight_decay=weight_decay)
        )

    @staticmethod
    def _rms(x: torch.Tensor) -> torch.Tensor:
        return x.pow(2).mean().sqrt()

    @torch.no_grad()
    def step(self, closure: Any = None) -> Any:  # type: ignore[override]
        loss = closure() if closure is not None else None
        for group in self.param_groups:
            b1, b2, b3 = group["betas"]
            e1, e2 = group["eps"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                g = p.grad
                st = self.state[p]
                factored = g.dim() >= 2
                if not st:
                    st["m"] = torch.zeros_like(g)
                    if factored:
                        st["vr"] = torch.zeros(g.shape[:-1], dtype=g.dtype, device=g.device)
                        st["vc"] = torch.zeros(g.shape[:-2] + g.shape[-1:], dtype=g.dtype, device=g.device)
                        st["sr"] = torch.zeros_like(st["vr"])
                        st["sc"] = torch.zeros_like(st["vc"])
                    else:
                        st["v"] = torch.zeros_like(g)
                g2 = g * g + e1
                if factored:
                    st["vr"].mul_(b2).add_(g2.mean(dim=-1), alpha=1 - b2)
                    st["vc"].mul_(b2).add_(g2.mean(dim=-2), alpha=1 - b2)
                    v = (st["vr"] / st["vr"].mean(dim=-1, keepdim=True)).unsqueeze(-1) * st["vc"].unsqueeze(-2)
                else:
                    st["v"].mul_(b2).add_(g2, alpha=1 - b2)
                    v = st["v"]
                u = g / v.sqrt()
                u.div_((self._rms(u) / group["clip_threshold"]).clamp_(min=1.0))
                m = st["m"].mul_(b1).add_(u, alpha=1 - b1)
                if factored:
                    s = (u - m).pow(2) + e2
                    st["sr"].mul_(b3).add_(s.mean(dim=-1), alpha=1 - b3)
                    st["sc"].mul_(b3).add_(s.mean(dim=-2), alpha=1 - b3)
                    s_hat = (st["sr"] / st["sr"].mean(dim=-1, keepdim=True)).unsqueeze(-1) * st["sc"].unsqueeze(-2)
                    upd = m / s_hat.sqrt()
                else:
                    upd = m
                if group["weight_decay"]:
                    p.mul_(1 - group["lr"] * group["weight_decay"])
                p.add_(upd, alpha=-group["lr"])
        return loss


# --- the training loop ------------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="trainctl.runtime.trainer", description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=60)
    p.add_argument(
        "--tp",
        type=int,
        default=None,
        help="tensor-parallel size (must divide the world size; 1 = pure DP; default 2 for an even world, else 1)",
    )
    p.add_argument("--tokens-per-step", type=int, default=256, help="tokens per data-parallel replica per step")
    p.add_argument("--min-seq", type=int, default=16)
    p.add_argument("--max-seq", type=int, default=96)
    p.add_argument("--vocab", type=int, default=256)
    p.add_argument("--d-model", type=int, default=64)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--optimizer", choices=["adamw", "came"], default="adamw")
    p.add_argument("--lr", type=float, default=None, help="default 3e-3 (AdamW) / 1e-3 (CAME)")
    p.add_argument("--log-every", type=int, default=10)
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument(
        "--peak-tflops", type=float, default=None, help="per-rank peak for MFU (default: see CPU_HZ / GPU_PEAK_FLOPS)"
    )
    p.add_argument("--no-instrument", action="store_true", help="no timeline (for overhead A/B)")
    p.add_argument("--checkpoint-every", type=int, default=0, help="async checkpoint every N steps (0 = never)")
    p.add_argument(
        "--checkpoint-dir",
        default=None,
        help="where checkpoints go and resume reads from (default RUN_DIR/checkpoints); multi-host runs "
        "pass a directory on storage every host shares, so a replacement host can restore any rank",
    )
    p.add_argument(
        "--ab-block",
        type=int,
        default=0,
        help="overhead A/B: alternate instrumented / not every N steps; rank 0 writes ab_overhead.json",
    )
    return p.parse_args(argv)


def redirect_output_to_rank_log(run_dir: str, host: str, rank: int) -> None:
    """Send this process's stdout/stderr (fd level, so C++ and child output too) to logs/H/rank-R.log."""
    path = Path(run_dir) / "logs" / host / f"rank-{rank}.log"
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    sys.stdout.flush()
    sys.stderr.flush()
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    sys.stdout = os.fdopen(1, "w", buffering=1, closefd=False)
    sys.stderr = os.fdopen(2, "w", buffering=1, closefd=False)


def record_nonfinite_loss(run_dir: str, rank: int, step: int, loss: float) -> None:
    """numerics/rank-R.json, once: the first step whose *local* loss (before the gradient all-reduce
    spreads it to every rank) is NaN or inf, so diagnose names the rank where it started."""
    log.error("rank %d: non-finite loss %s at step %d (local, before the all-reduce)", rank, loss, step)
    body = {"rank": rank, "step": step, "loss": str(loss), "timestamp_ns": str(time.time_ns())}
    try:
        atomic_write_text(numerics_path(run_dir, rank), json.dumps(body))
    except OSError:
        pass


def write_error_file(run_dir: str, rank: int, exc: BaseException) -> None:
    """errors/rank-R.json in torchelastic's error-file format (torchrun also gets its own copy via @record)."""
    body = {
        "message": {
            "message": f"{type(exc).__name__}: {exc}",
            "extraInfo": {
                "py_callstack": "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)),
                # timestamp_ns (beyond torchelastic's seconds) orders failures within the same second
                "timestamp": str(int(time.time())),
                "timestamp_ns": str(time.time_ns()),
            },
        }
    }
    try:
        atomic_write_text(error_file_path(run_dir, rank), json.dumps(body))
    except OSError:
        pass


def rank_context() -> tuple[str, str, int, int, int]:
    """(run_dir, host, rank, local_rank, world_size) from torchrun's and trainctl's environment."""
    run_dir = os.environ.get("TRAINCTL_RUN_DIR") or os.path.abspath("runs/adhoc")
    host = os.environ.get("TRAINCTL_HOST") or os.uname().nodename.split(".")[0]
    return (
        run_dir,
        host,
        int(os.environ.get("RANK", 0)),
        int(os.environ.get("LOCAL_RANK", 0)),
        int(os.environ.get("WORLD_SIZE", 1)),
    )


def write_rank_file(
    run_dir: str, host: str, rank: int, local_rank: int, world: int, extra: dict[str, Any] | None = None
) -> None:
    """ranks/rank-R.json: who and where this rank is; `extra` adds what diagnose's throughput
    summary needs (tp, model FLOPs per token, the peak FLOP/s assumed for MFU)."""
    body = {"rank": rank, "local_rank": local_rank, "host": host, "pid": os.getpid(), "world_size": world}
    body.update(extra or {})
    atomic_write_text(Path(run_dir) / "ranks" / f"rank-{rank}.json", json.dumps(body))


def peak_flops_per_rank(device: torch.device, override_tflops: float | None) -> tuple[float, str]:
    if override_tflops:
        return override_tflops * 1e12, f"--peak-tflops {override_tflops}"
    if device.type == "cuda":
        name = torch.cuda.get_device_name(device)
        for key, peak in GPU_PEAK_FLOPS.items():
            if key in name:
                return peak, f"{name}: {peak / 1e12:.0f} TFLOP/s dense bf16"
        return 312e12, f"{name}: unknown part, assuming 312 TFLOP/s"
    cores = os.cpu_count() or 1
    sharing = int(os.environ.get("TRAINCTL_RANKS_ON_MACHINE") or os.environ.get("LOCAL_WORLD_SIZE") or 1)
    peak = cores * CPU_HZ * CPU_FLOP_PER_CYCLE / max(1, sharing)
    return (
        peak,
        f"CPU: {cores} cores x {CPU_HZ / 1e9:.1f} GHz x {CPU_FLOP_PER_CYCLE} FLOP/cycle shared by {sharing} ranks",
    )


def _drilled(drill: inject.Straggler | None, phase: str, step: int) -> bool:
    return drill is not None and drill.phase == phase and step >= drill.start_step


def phase_t0(drill: inject.Straggler | None, phase: str, step: int, device: torch.device) -> int:
    """The phase's start time. On a GPU, the drilled rank first waits for its queued work, so that
    `straggle` measures this phase's own GPU time (only the straggling rank ever synchronizes)."""
    if device.type == "cuda" and _drilled(drill, phase, step):
        torch.cuda.synchronize(device)
    return time.perf_counter_ns()


_GPU_CYCLES_PER_NS: list[float] = []


def _gpu_cycles_per_ns(device: torch.device) -> float:
    """torch.cuda._sleep spins for a number of GPU clock cycles: calibrate once against CUDA events."""
    if not _GPU_CYCLES_PER_NS:
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        cycles = 50_000_000
        start.record()
        torch.cuda._sleep(cycles)
        end.record()
        end.synchronize()
        _GPU_CYCLES_PER_NS.append(cycles / max(1.0, start.elapsed_time(end) * 1e6))
    return _GPU_CYCLES_PER_NS[0]


def straggle(
    drill: inject.Straggler | None, phase: str, step: int, t0_ns: int, device: torch.device | None = None
) -> None:
    """Make this phase take `factor` x its normal time (its measured time so far, less the time it
    spent waiting for tp peers, which is not this rank's work). On a GPU the GPU itself is slowed
    (a spin kernel on the compute stream, as a throttled or degraded GPU would be), so CUDA-event
    timelines and the peers see what a real slow GPU causes; on CPU the rank sleeps."""
    if not _drilled(drill, phase, step):
        return
    if device is not None and device.type == "cuda":
        torch.cuda.synchronize(device)
        own_ns = max(0, time.perf_counter_ns() - t0_ns - _TP_NS[0])
        torch.cuda._sleep(int((drill.factor - 1.0) * own_ns * _gpu_cycles_per_ns(device)))
        return
    own_ns = max(0, time.perf_counter_ns() - t0_ns - _TP_NS[0])
    time.sleep((drill.factor - 1.0) * own_ns / 1e9)


XID_MESSAGES = {
    79: "GPU has fallen off the bus.",
    48: "An uncorrectable double bit error (DBE) has been detected on GPU.",
    94: "Contained ECC error.",
    95: "Uncontained ECC error.",
}


def lose_gpu(run_dir: str, host: str, rank: int, local_rank: int, drill: inject.Xid, step: int) -> None:
    """The xid drill: this host's GPU is lost. There is no GPU or kernel to fault here, so the NVRM
    line the driver would print goes to the host's drill kernel log (once per host: local rank 0),
    then the rank fails the way CUDA fails a process whose device vanished."""
    if local_rank == 0:
        ts = time.strftime("%Y-%m-%dT%H:%M:%S,000000+00:00", time.gmtime())
        line = (
            f"{ts} NVRM: Xid (PCI:0000:18:00): {drill.code}, pid={os.getpid()}, name=python, "
            f"{XID_MESSAGES.get(drill.code, 'Graphics Exception.')}\n"
        )
        path = drill_kernel_log_path(run_dir, host)
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "a") as fh:
            fh.write(line)
    log.error("rank %d on %s: xid drill (code %d) at step %d", rank, host, drill.code, step)
    raise RuntimeError(
        "CUDA error: unspecified launch failure\nCUDA kernel errors might be asynchronously reported "
        "at some other API call, so the stacktrace below might be incorrect."
    )


def hang_forever(rank: int, step: int) -> None:
    log.warning("rank %d: hang drill at step %d: blocking before the dp all_reduce", rank, step)
    while True:  # time.sleep keeps the GIL free: the debug server still answers dump_traceback
        time.sleep(1.0)


def resume_from(
    latest: checkpoint.CheckpointInfo,
    grid: rank_map.GridLayout,
    rank: int,
    model: nn.Module,
    opt: torch.optim.Optimizer,
) -> int:
    """Restore this rank from the newest complete checkpoint, also one written at another dp; the step.

    A checkpoint written by a larger (or smaller) data-parallel degree with the same tp is read
    from the old rank with the same tp index (rank_map.source_rank): dp replicas hold identical
    model and optimizer state. The step counter continues; --tokens-per-step stays per replica, so
    after a shrink from dp to dp' the global batch is dp'/dp of what it was (see
    docs/evict-and-checkpoints.md for why). RNG states come from the source rank (the loop draws
    only from its own seeded data generator, so they do not steer training).
    """
    try:
        src = rank_map.checkpoint_source_rank(
            latest.layout, latest.world_size, grid, rank, where=f"checkpoint {latest.path}"
        )
    except CheckpointError as exc:
        raise SystemExit(str(exc)) from exc
    loaded = checkpoint.load_checkpoint(latest, model, opt, rank=src, verify_checksums=False)
    if rank == 0:
        saved = (
            rank_map.GridLayout.from_mapping(latest.layout).describe()
            if latest.layout
            else f"{latest.world_size} ranks"
        )
        how = "" if latest.world_size == grid.world_size else f" (written by {saved}, resumed as {grid.describe()})"
        print(f"resumed from checkpoint step {loaded.step}: {latest.path}{how}", flush=True)
    return loaded.step


def train(args: argparse.Namespace) -> int:
    run_dir, host, rank, local_rank, world = rank_context()
    drills = inject.for_rank(inject.from_env(), rank)
    straggler = next((d for d in drills if isinstance(d, inject.Straggler)), None)
    hang = next((d for d in drills if isinstance(d, inject.Hang)), None)
    crash = next((d for d in drills if isinstance(d, inject.Crash)), None)
    nan = next((d for d in drills if isinstance(d, inject.NanLoss)), None)
    xid = next((d for d in inject.from_env() if isinstance(d, inject.Xid) and d.host == host), None)

    # TRAINCTL_BACKEND (launch --backend): gloo runs the ranks on CPU even where GPUs are visible.
    use_cuda = torch.cuda.is_available() and os.environ.get("TRAINCTL_BACKEND", "") != "gloo"
    device = torch.device("cuda", local_rank) if use_cuda else torch.device("cpu")
    if use_cuda:
        torch.cuda.set_device(device)
    if not use_cuda:
        torch.set_num_threads(1)  # ranks share few cores; oversubscription makes timings noise
    dist.init_process_group("nccl" if use_cuda else "gloo")
    server = debug_server.start(run_dir, rank)  # kept alive for the run
    write_rank_file(run_dir, host, rank, local_rank, world)

    if args.tp is None:
        args.tp = rank_map.default_tp(world)
    if world % args.tp:
        raise SystemExit(f"--tp {args.tp} does not divide world size {world}; pick a divisor")
    topo = Topology(world, args.tp)
    tp_group = dp_group = None
    for members in topo.tp_groups():  # every rank creates every group, in the same order
        g = dist.new_group(members, group_desc="tp")
        if rank in members:
            tp_group = g
    for members in topo.dp_groups():
        g = dist.new_group(members, group_desc="dp")
        if rank in members:
            dp_group = g
    dp_index = rank // args.tp

    torch.manual_seed(args.seed)  # same init on every rank; tp shards are then made distinct
    model = GPT(args.vocab, args.d_model, args.layers, args.heads, args.max_seq + args.min_seq, args.tp, tp_group).to(
        device
    )
    with torch.no_grad():
        gen = torch.Generator().manual_seed(args.seed + 1 + rank % args.tp)
        for name, p in model.named_parameters():
            if ".qkv." in name or ".fc." in name or (".proj.weight" in name or ".out.weight" in name):
                p.copy_(torch.randn(p.shape, generator=gen) * p.shape[-1] ** -0.5)
    params = list(model.parameters())
    if args.optimizer == "came":
        opt: torch.optim.Optimizer = CAME(params, lr=args.lr or 1e-3)
    else:
        opt = torch.optim.AdamW(params, lr=args.lr or 3e-3)

    hb = Heartbeat(run_dir, rank, host)
    rec = Recorder(
        run_dir,
        rank=rank,
        local_rank=local_rank,
        host=host,
        device=device,
        heartbeat=hb,
        enabled=not args.no_instrument,
    )
    n_params = model_params(model, args.tp)
    peak, peak_note = peak_flops_per_rank(device, args.peak_tflops)
    flops_per_token = 6 * matmul_params(model, args.tp)  # dense-model approximation (6N, N without embeddings)
    write_rank_file(  # again, with what diagnose needs for MFU (analyzers/throughput.py)
        run_dir, host, rank, local_rank, world,
        {"tp": args.tp, "model_flops_per_token": flops_per_token, "peak_flops_per_s": peak, "peak_basis": peak_note},
    )  # fmt: skip
    if rank == 0:
        print(
            f"trainctl trainer: world={world} tp={args.tp} dp={topo.dp} params={n_params} optimizer={args.optimizer} "
            f"tokens/step/replica={args.tokens_per_step} device={device.type}; MFU peak assumption: {peak_note}",
            flush=True,
        )

    data_gen = torch.Generator().manual_seed(args.seed * 1000 + dp_index)  # tp peers see the same batch
    start_step = 0
    ckpt_dir = args.checkpoint_dir or str(Path(run_dir) / "checkpoints")
    grid = rank_map.GridLayout(dp=topo.dp, tp=args.tp, pp=1)
    ckpt = (
        checkpoint.AsyncCheckpointer(ckpt_dir, rank=rank, world_size=world, layout=grid.to_dict())
        if args.checkpoint_every
        else None
    )
    if ckpt is not None:
        latest = checkpoint.latest_complete(ckpt_dir)
        if latest is not None:
            start_step = resume_from(latest, grid, rank, model, opt)
            # The data stream resumes where it was: replay this replica's draws (dp index j continues
            # stream j; after a dp shrink the streams of the dropped replicas are not consumed).
            for _ in range(start_step):
                packed_batch(data_gen, args.tokens_per_step, args.vocab, args.min_seq, args.max_seq)
    loss_log = open(Path(run_dir) / "loss.jsonl", "a") if rank == 0 else None  # per-step loss table
    nonfinite_seen = False  # numerics/rank-R.json is written once, at the first non-finite local loss
    window_t0, window_tokens = time.perf_counter(), 0
    ab_times: dict[str, list[int]] = {"on": [], "off": []}
    try:
        for step in range(start_step, args.steps):
            if xid is not None and step == xid.step:
                lose_gpu(run_dir, host, rank, local_rank, xid, step)
            if args.ab_block:
                rec.enabled = (step // args.ab_block) % 2 == 0
            if crash is not None and step == crash.step:
                raise RuntimeError(f"injected crash drill (crash:rank={rank},step={step})")
            step_t0 = time.perf_counter_ns()
            with rec.phase("step"):
                with rec.phase("data"):
                    t0 = phase_t0(straggler, "data", step, device)
                    tokens, targets, positions, mask = (
                        t.to(device, non_blocking=True)
                        for t in packed_batch(data_gen, args.tokens_per_step, args.vocab, args.min_seq, args.max_seq)
                    )
                    straggle(straggler, "data", step, t0, device)
                _take_tp_ns()
                _take_tp_works()
                with rec.phase("forward"):
                    t0 = phase_t0(straggler, "forward", step, device)
                    logits = model(tokens, positions, mask)
                    loss = F.cross_entropy(logits, targets)
                    if nan is not None and step >= nan.step:
                        loss = loss * float("nan")
                    straggle(straggler, "forward", step, t0, device)
                tp_forward_ns, tp_forward_works = _take_tp_ns(), _take_tp_works()
                with rec.phase("backward"):
                    t0 = phase_t0(straggler, "backward", step, device)
                    opt.zero_grad(set_to_none=True)
                    loss.backward()
                    straggle(straggler, "backward", step, t0, device)
                tp_backward_ns, tp_backward_works = _take_tp_ns(), _take_tp_works()
                with rec.phase("communication"):
                    if hang is not None and step == hang.step:
                        hang_forever(rank, step)
                    if topo.dp > 1:
                        flat = torch.cat([p.grad.reshape(-1) for p in params])
                        dist.all_reduce(flat, group=dp_group)
                        flat.div_(topo.dp)
                        off = 0
                        for p in params:
                            n = p.numel()
                            p.grad.copy_(flat[off : off + n].view_as(p.grad))
                            off += n
                with rec.phase("optimizer"):
                    t0 = phase_t0(straggler, "optimizer", step, device)
                    opt.step()
                    straggle(straggler, "optimizer", step, t0, device)
            if use_cuda:  # the tp group's NCCL-stream time, read later from its Work objects
                rec.move_work("forward", "communication", tp_forward_works)
                rec.move_work("backward", "communication", tp_backward_works)
            else:
                rec.move_time("forward", "communication", tp_forward_ns)
                rec.move_time("backward", "communication", tp_backward_ns)
            rec.end_step(step, tokens=args.tokens_per_step)
            loss_value = loss.item()  # one scalar sync per step (rank 0 always paid it for loss.jsonl)
            if not nonfinite_seen and not math.isfinite(loss_value):
                nonfinite_seen = True
                record_nonfinite_loss(run_dir, rank, step, loss_value)  # the timeline's 0-based step
            if loss_log is not None:
                loss_log.write(
                    json.dumps(
                        {"step": step + 1, "loss": loss_value, "attempt": os.environ.get("TRAINCTL_ATTEMPT", "1")}
                    )
                    + "\n"
                )
                loss_log.flush()
            if ckpt is not None and (step + 1) % args.checkpoint_every == 0:
                ckpt.save(step + 1, model, opt)  # step + 1 steps are done: resume starts at that index
            if args.ab_block and step >= args.ab_block * 2:  # first on/off pair is warm-up
                ab_times["on" if rec.enabled else "off"].append(time.perf_counter_ns() - step_t0)
            window_tokens += args.tokens_per_step
            if rank == 0 and ((step + 1) % args.log_every == 0 or step + 1 == args.steps):
                dt = time.perf_counter() - window_t0
                tps = window_tokens / dt  # this replica's tokens/s (tp peers share the batch)
                job_tps = tps * topo.dp
                mfu = tps * flops_per_token / (peak * args.tp)
                print(
                    f"step {step + 1}/{args.steps} loss {loss.item():.4f} step_ms {(time.perf_counter_ns() - step_t0) / 1e6:.1f} "
                    f"tokens/s {job_tps:.0f} mfu {100 * mfu:.2f}%",
                    flush=True,
                )
                window_t0, window_tokens = time.perf_counter(), 0
        dist.barrier()
        if ckpt is not None:
            ckpt.wait()
        if args.ab_block and rank == 0:
            atomic_write_text(Path(run_dir) / "ab_overhead.json", json.dumps(ab_times))
    finally:
        if ckpt is not None:
            ckpt.close()
        if loss_log is not None:
            loss_log.close()
        rec.close()
        hb.close()
        if server is not None:
            server.shutdown()  # a live _WorkerServer thread at interpreter exit aborts the process (SIGABRT)
    dist.destroy_process_group()
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    run_dir, host, rank, _, _ = rank_context()
    if os.environ.get("TRAINCTL_RUN_DIR"):
        redirect_output_to_rank_log(run_dir, host, rank)
    logging.basicConfig(level=logging.INFO, format=f"[rank{rank}] %(levelname)s %(name)s: %(message)s")
    try:
        return train(args)
    except BaseException as exc:
        if (
            not isinstance(exc, (KeyboardInterrupt, SystemExit))
            or isinstance(exc, SystemExit)
            and exc.code not in (0, None)
        ):
            write_error_file(run_dir, rank, exc)
        raise


def run_and_exit(fn: Any) -> None:
    """Run `fn` under torchelastic's @record (error file for the agent), then leave with os._exit.

    The debug server's Python handler (fr_trace) lives in a C++ static registry; letting the
    interpreter finalize normally destroys it without the GIL and turns every exit into SIGABRT,
    which would hide the real exit code from torchrun. So: report, run atexit hooks, flush, _exit.
    """
    import atexit

    from torch.distributed.elastic.multiprocessing.errors import record

    try:
        rv = record(fn)()
        code = rv if isinstance(rv, int) else 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        if isinstance(exc.code, str):
            print(exc.code, file=sys.stderr)
    except BaseException:
        traceback.print_exc()
        code = 1
    try:
        atexit._run_exitfuncs()
    finally:
        logging.shutdown()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


if __name__ == "__main__":
    run_and_exit(main)
