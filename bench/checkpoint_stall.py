"""Training stall per checkpoint: trainctl's async two-stage checkpoint vs torch.save vs DCP async_save.

One process, one run, the same >= 1 GB state (an MLP's parameters + AdamW's two moments) for all
three methods, interleaved with real training steps:

- sync:      `torch.save({"model", "optimizer"}, path)` on the training thread (the baseline).
- dcp_async: `torch.distributed.checkpoint.async_save(get_state_dict(model, opt))` (gloo pg of 1);
             stall = until it returns; its future is awaited before the next checkpoint.
- trainctl_blocking: `AsyncCheckpointer(overlap=False).save()`; stall = until it returns (the
             whole stage-1 snapshot inside the call).
- trainctl:  `AsyncCheckpointer.save()` (overlap, default); stall = time in save() plus the time
             the next optimizer.step() waited for the background snapshot (its pre-hook).

"Stall" is the time the training thread is blocked by the checkpoint call. The first checkpoint
of each async method allocates its staging buffers and is reported separately (`first_stall_s`);
steady-state stall is the median of the rest. We also report each method's mean step time while its
background write runs, since a writer thread competes with training for CPU.

    .venv/bin/python bench/checkpoint_stall.py --out /tmp/ckbench --checkpoints 4
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import torch
import torch.distributed as dist

from trainctl.runtime.checkpoint import AsyncCheckpointer


def build(hidden: int, layers: int):
    torch.manual_seed(0)
    model = torch.nn.Sequential(*[torch.nn.Linear(hidden, hidden) for _ in range(layers)])
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    return model, opt


def step(model, opt, batch: int, hidden: int) -> float:
    t0 = time.perf_counter()
    x = torch.randn(batch, hidden)
    loss = model(x).pow(2).mean()
    opt.zero_grad(set_to_none=False)
    loss.backward()
    opt.step()
    return time.perf_counter() - t0


def state_bytes(model, opt) -> int:
    n = sum(t.numel() * t.element_size() for t in model.state_dict().values())
    for s in opt.state_dict()["state"].values():
        n += sum(v.numel() * v.element_size() for v in s.values() if torch.is_tensor(v))
    return n


def run_method(name: str, model, opt, args, out: Path) -> dict:
    d = out / name
    shutil.rmtree(d, ignore_errors=True)
    d.mkdir(parents=True)
    stalls, waits, bg_steps, quiet_steps = [], [], [], []
    ck = (
        AsyncCheckpointer(d / "ckpt", keep_last=1, overlap=(name == "trainctl"))
        if name.startswith("trainctl")
        else None
    )
    handles = []
    pending = None
    for i in range(args.checkpoints):
        for _ in range(args.steps_between):
            dt = step(model, opt, args.batch, args.hidden)
            if pending is not None and not _done(name, pending):
                bg_steps.append(dt)
            else:
                quiet_steps.append(dt)
        if pending is not None:  # backpressure: previous write must finish (counts as stall)
            t0 = time.perf_counter()
            _wait(name, pending)
            wait = time.perf_counter() - t0
        else:
            wait = 0.0
        t0 = time.perf_counter()
        if name == "sync":
            torch.save({"model": model.state_dict(), "optimizer": opt.state_dict()}, d / f"step-{i}.pt")
            pending = None
        elif name == "dcp_async":
            from torch.distributed.checkpoint import async_save
            from torch.distributed.checkpoint.state_dict import get_state_dict

            msd, osd = get_state_dict(model, opt)
            pending = (
                async_save({"model": msd, "optim": osd}, checkpoint_id=str(d / f"step-{i}")),
                time.perf_counter(),
            )
        else:
            pending = ck.save(i, model, opt)
            handles.append(pending)
        stalls.append(time.perf_counter() - t0 + wait)
        waits.append(wait)
        if name == "sync":
            (d / f"step-{i}.pt").unlink()  # keep disk use to one checkpoint per method
    if pending is not None:
        t0 = time.perf_counter()
        _wait(name, pending)
    if ck is not None:
        ck.close()
        # save() plus the time the next optimizer.step() waited for the overlapped snapshot.
        stalls = [h.stall_s + w for h, w in zip(handles, waits)]
    steady = stalls[1:] if name != "sync" else stalls
    res = {
        "method": name,
        "stalls_s": [round(s, 4) for s in stalls],
        "of_which_waiting_for_previous_write_s": [round(w, 4) for w in waits],
        "first_stall_s": round(stalls[0], 4),
        "median_stall_s": round(statistics.median(steady), 4),
        "mean_step_s_during_bg_write": round(statistics.mean(bg_steps), 4) if bg_steps else None,
        "mean_step_s_no_write": round(statistics.mean(quiet_steps), 4) if quiet_steps else None,
        "steps_during_bg_write": len(bg_steps),
    }
    shutil.rmtree(d, ignore_errors=True)
    return res


def _done(name, pending) -> bool:
    if name == "dcp_async":
        return pending[0].done()
    return pending.future.done()


def _wait(name, pending) -> None:
    if name == "dcp_async":
        pending[0].result()
    else:
        pending.result()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--hidden", type=int, default=4096)
    ap.add_argument("--layers", type=int, default=6)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--checkpoints", type=int, default=4)
    ap.add_argument("--steps-between", type=int, default=6)
    ap.add_argument("--out", type=Path, default=Path(tempfile.gettempdir()) / "trainctl-ckbench")
    ap.add_argument("--json", type=Path, help="Also write the results here.")
    args = ap.parse_args()

    store_dir = tempfile.mkdtemp()
    dist.init_process_group("gloo", store=dist.FileStore(os.path.join(store_dir, "store"), 1), rank=0, world_size=1)
    model, opt = build(args.hidden, args.layers)
    base = [step(model, opt, args.batch, args.hidden) for _ in range(3)]  # also creates AdamW state
    nbytes = state_bytes(model, opt)
    print(f"state: {nbytes / 1e9:.3f} GB (model + AdamW), torch {torch.__version__}, threads {torch.get_num_threads()}")
    print(f"baseline step: {statistics.median(base):.3f} s")
    results = {"state_bytes": nbytes, "baseline_step_s": round(statistics.median(base), 4), "methods": []}
    for name in ("sync", "dcp_async", "trainctl_blocking", "trainctl"):
        r = run_method(name, model, opt, args, args.out)
        results["methods"].append(r)
        print(json.dumps(r))
    by = {r["method"]: r for r in results["methods"]}
    for name in ("dcp_async", "trainctl_blocking", "trainctl"):
        ratio = by["sync"]["median_stall_s"] / by[name]["median_stall_s"]
        results[f"sync_over_{name}"] = round(ratio, 1)
        print(f"{name}: {ratio:.1f}x less stall than synchronous torch.save")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    dist.destroy_process_group()
    shutil.rmtree(store_dir, ignore_errors=True)


if __name__ == "__main__":
    main()
