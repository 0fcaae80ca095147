"""A plain NCCL training script (it never imports trainctl) whose GPU stops at step HANG_STEP.

Every step all-reduces each gradient over NCCL; at HANG_STEP a kernel spins for minutes before
that step's all_reduces, so they stay scheduled on the NCCL stream and never start (a stuck kernel
or a wedged GPU, as the NCCL Flight Recorder shows one), and the host blocks in synchronize with
the GIL released (torch's cudaSynchronize binding drops it), so the debug server and py-spy still
answer. Works with one GPU: a one-rank NCCL communicator still records every collective.

PG_TIMEOUT_S: the process group's collective timeout; set below the launcher's hang timeout, NCCL's
own watchdog times the stuck collective out first, dumps its Flight Recorder where
TORCH_FR_DUMP_TEMP_FILE points (the launcher points it into the run dir) and aborts the rank.
"""

from __future__ import annotations

import os
from datetime import timedelta

import torch
import torch.distributed as dist

HANG_STEP = int(os.environ.get("HANG_STEP", "5"))
SPIN_CYCLES = 1 << 40  # torch.cuda._sleep: about 9 minutes at the H100's 1.98 GHz; the test stops it first


def main() -> None:
    timeout = os.environ.get("PG_TIMEOUT_S")
    dist.init_process_group("nccl", timeout=timedelta(seconds=float(timeout)) if timeout else None)
    dev = torch.device("cuda", int(os.environ["LOCAL_RANK"]))
    torch.cuda.set_device(dev)
    model = torch.nn.Linear(256, 256, device=dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for step in range(1000):
        loss = model(torch.randn(64, 256, device=dev)).square().mean()
        opt.zero_grad()
        loss.backward()
        if step == HANG_STEP:
            torch.cuda._sleep(SPIN_CYCLES)
        for p in model.parameters():
            dist.all_reduce(p.grad)
        opt.step()
        torch.cuda.synchronize()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
