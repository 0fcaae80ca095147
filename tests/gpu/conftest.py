"""The GPU suite: real CUDA, real NCCL. Skipped where torch sees no GPU (CI has none); run it with
`bash scripts/test.sh --gpu` on a GPU machine and record the result in BENCHMARKS.md."""

from __future__ import annotations

from pathlib import Path

import pytest

_HERE = Path(__file__).resolve().parent


def pytest_collection_modifyitems(config, items) -> None:
    # A conftest hook sees the whole session's items: touch only the tests in this folder.
    mine = [i for i in items if _HERE in Path(str(i.fspath)).resolve().parents]
    if not mine:
        return
    try:
        import torch

        ok = torch.cuda.is_available() and torch.distributed.is_nccl_available()
    except Exception:
        ok = False
    for item in mine:
        item.add_marker(pytest.mark.gpu)
        if not ok:
            item.add_marker(pytest.mark.skip(reason="no CUDA GPU with NCCL here (run on a GPU machine)"))
