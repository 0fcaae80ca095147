"""Packed variable-length batches: constant tokens per step, no padding, and attention that never
crosses a segment boundary (the block-diagonal causal mask gives what each segment alone gives)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from trainctl.runtime.trainer import Block, packed_batch, segment_lengths  # noqa: E402


@pytest.mark.parametrize("seed", range(5))
def test_segments_fill_the_step_exactly_and_respect_the_minimum(seed: int) -> None:
    gen = torch.Generator().manual_seed(seed)
    lens = segment_lengths(gen, 256, 16, 96)
    assert sum(lens) == 256 and all(16 <= n <= 96 for n in lens)


def test_positions_restart_per_segment_and_the_mask_is_block_diagonal_causal() -> None:
    gen = torch.Generator().manual_seed(3)
    tokens, targets, positions, mask = packed_batch(gen, 128, 256, 8, 40)
    assert tokens.shape == targets.shape == positions.shape == (128,) and mask.shape == (128, 128)
    starts = (positions == 0).nonzero().flatten().tolist()
    bounds = [*starts, 128]
    for a, b in zip(bounds, bounds[1:]):
        assert positions[a:b].tolist() == list(range(b - a))
        # inside a segment: causal; never across segments
        assert torch.equal(mask[a:b, a:b], torch.ones(b - a, b - a, dtype=torch.bool).tril())
        assert not mask[a:b, :a].any() and not mask[a:b, b:].any()


def test_packed_attention_equals_each_segment_on_its_own() -> None:
    torch.manual_seed(0)
    block = Block(d=32, heads=4, tp=1, group=None).double().eval()
    gen = torch.Generator().manual_seed(11)
    _, _, positions, mask = packed_batch(gen, 96, 256, 8, 40)
    x = torch.randn(96, 32, dtype=torch.float64)
    packed = block(x, mask)
    starts = [*(positions == 0).nonzero().flatten().tolist(), 96]
    alone = torch.cat(
        [block(x[a:b], torch.ones(b - a, b - a, dtype=torch.bool).tril()) for a, b in zip(starts, starts[1:])]
    )
    torch.testing.assert_close(packed, alone, rtol=1e-10, atol=1e-10)
