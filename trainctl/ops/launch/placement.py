"""Which GPUs each simulated host of `launch --local` may use (issue 16 item 3).

Simulated hosts are torchrun agents on one machine; each starts its ranks at LOCAL_RANK 0 and the
trainer puts rank r on cuda:LOCAL_RANK. Without a per-host CUDA_VISIBLE_DEVICES, node01's rank 0
and node02's rank 0 would both take GPU 0, and NCCL refuses two ranks of one communicator on one
GPU ("Duplicate GPU detected"). So each simulated host gets its own contiguous slice of the GPUs
this machine lets us see (CUDA_VISIBLE_DEVICES as set for trainctl, else all of them), and asking
for more ranks than GPUs is an error before anything starts.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from trainctl.errors import LaunchError

__all__ = ["visible_gpus", "gpu_placement"]


def visible_gpus(env: Mapping[str, str], device_count: int) -> tuple[str, ...]:
    """The GPU ids the ranks may use: CUDA_VISIBLE_DEVICES when set (ids or UUIDs, as CUDA reads
    them; an empty value means none), else 0..device_count-1."""
    raw = env.get("CUDA_VISIBLE_DEVICES")
    if raw is None:
        return tuple(str(i) for i in range(device_count))
    ids = [x.strip() for x in raw.split(",")]
    out: list[str] = []
    for x in ids:
        if not x or x == "-1":  # CUDA stops at the first invalid entry
            break
        out.append(x)
    return tuple(out)


def backend_that_fits(ranks: int, gpus: Sequence[str]) -> str | None:
    """ "gloo" when this machine has GPUs but fewer than `ranks` (NCCL cannot put two ranks on one
    GPU, so they run on CPU), else None: launch's own default (NCCL on GPUs, gloo without)."""
    return "gloo" if 0 < len(gpus) < ranks else None


def gpu_placement(
    hosts: Sequence[str], nproc_per_node: int, gpus: Sequence[str], *, backend: str | None = None
) -> dict[str, str]:
    """host -> its CUDA_VISIBLE_DEVICES ('0,1,2,3'); {} when the ranks run on CPU (no GPU, or gloo)."""
    if backend == "gloo" or not gpus:
        return {}
    need = len(hosts) * nproc_per_node
    if len(gpus) < need:
        raise LaunchError(
            f"--local with {len(hosts)} simulated host(s) x {nproc_per_node} ranks needs {need} GPUs, this machine "
            f"shows {len(gpus)} ({','.join(gpus)}); lower --hosts-local / --nproc-per-node, or run the ranks on CPU "
            "with --backend gloo"
        )
    return {h: ",".join(gpus[i * nproc_per_node : (i + 1) * nproc_per_node]) for i, h in enumerate(hosts)}
