"""The reference trainer's MFU counts the model once, whatever its tensor-parallel size (issue 16 item 7)."""

from __future__ import annotations

import pytest

from trainctl.runtime.trainer import GPT, matmul_params, model_params


@pytest.mark.parametrize("tp", [2, 4])
def test_a_tp_shard_counts_the_whole_model_once(tp) -> None:
    full = GPT(vocab=512, d=64, layers=2, heads=4, max_len=128, tp=1, group=None)
    shard = GPT(vocab=512, d=64, layers=2, heads=4, max_len=128, tp=tp, group=None)
    n = sum(p.numel() for p in full.parameters())
    assert model_params(full, 1) == n
    assert model_params(shard, tp) == n  # not sum(shard) x tp, which counts replicated tensors tp times
    assert sum(p.numel() for p in shard.parameters()) * tp > n
    emb = 512 * 64 + 128 * 64
    assert matmul_params(shard, tp) == n - emb  # 6N without the embedding lookups
