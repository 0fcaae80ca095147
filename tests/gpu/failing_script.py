"""A plain NCCL training script (it never imports trainctl) that fails the way real jobs do on a GPU,
so that the lines torch, CUDA and NCCL print for it are recorded from the printing code itself.

FAIL (environment):
- ``assert``: at step FAIL_STEP an out-of-range index on the GPU: ATen's indexing kernel asserts
  its bounds (aten/src/ATen/native/cuda/IndexKernel.cu), the kernel prints "Assertion ... failed"
  and the next sync raises "CUDA error: device-side assert triggered".
- ``oom``: at step FAIL_STEP an allocation larger than the GPU (cudaMalloc through torch's caching
  allocator, never managed memory): torch.OutOfMemoryError "CUDA out of memory. Tried to allocate".
- ``dup``: every local rank uses cuda:0; NCCL's init refuses two ranks of one communicator on one
  device (init.cc: "Duplicate GPU detected : rank %d and rank %d both on CUDA device %lx").
"""

from __future__ import annotations

import os

import torch
import torch.distributed as dist

FAIL = os.environ.get("FAIL", "assert")
FAIL_STEP = int(os.environ.get("FAIL_STEP", "3"))


def main() -> None:
    local = 0 if FAIL == "dup" else int(os.environ["LOCAL_RANK"])
    dev = torch.device("cuda", local)
    torch.cuda.set_device(dev)
    dist.init_process_group("nccl", device_id=dev if FAIL == "dup" else None)
    model = torch.nn.Linear(256, 256, device=dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for step in range(20):
        x = torch.randn(64, 256, device=dev)
        if step == FAIL_STEP and FAIL == "assert":
            x = x[torch.tensor([10_000], device=dev)]  # 64 rows: index 10000 is out of range
        if step == FAIL_STEP and FAIL == "oom":
            total = torch.cuda.get_device_properties(dev).total_memory
            torch.empty(2 * total, dtype=torch.uint8, device=dev)
        loss = model(x).square().mean()
        opt.zero_grad()
        loss.backward()
        for p in model.parameters():
            dist.all_reduce(p.grad)
        opt.step()
        torch.cuda.synchronize()
        print(f"step {step} loss {loss.item():.4f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
