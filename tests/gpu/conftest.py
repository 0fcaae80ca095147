"""The GPU suite: real CUDA, real NCCL. Skipped where torch sees no GPU (CI has none); run it with
`bash scripts/test.sh --gpu` on a GPU machine and record the result in BENCHMARKS.md."""

from __future__ import annotations

import pytest


def pytest_collection_modifyitems(config, items) -> None:
    try:
        import torch

        ok = torch.cuda.is_available() and torch.distributed.is_nccl_available()
    except Exception:
        ok = False
    for item in items:
        item.add_marker(pytest.mark.gpu)
        if not ok:
            item.add_marker(pytest.mark.skip(reason="no CUDA GPU with NCCL here (run on a GPU machine)"))
