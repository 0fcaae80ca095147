"""rank_map: which checkpoint rank restores which rank after the data-parallel degree changed."""

from __future__ import annotations

import pytest

from trainctl.errors import CheckpointError
from trainctl.runtime.rank_map import GridLayout, checkpoint_source_rank, source_rank


def test_dp_shrink_reads_the_same_rank_number() -> None:
    # dp=4 x tp=2 -> dp=2 x tp=2: ranks 0..3 keep their (dp, tp) index, so each reads its own files.
    old, new = GridLayout(dp=4, tp=2), GridLayout(dp=2, tp=2)
    assert [source_rank(old, new, r) for r in range(4)] == [0, 1, 2, 3]


def test_dp_shrink_keeps_the_tp_index() -> None:
    old, new = GridLayout(dp=3, tp=2), GridLayout(dp=1, tp=2)
    for r in range(new.world_size):
        assert source_rank(old, new, r) % 2 == r % 2
    assert [source_rank(old, new, r) for r in range(2)] == [0, 1]


def test_dp_grow_wraps_around_the_old_replicas() -> None:
    old, new = GridLayout(dp=2, tp=2), GridLayout(dp=3, tp=2)
    assert [source_rank(old, new, r) for r in range(6)] == [0, 1, 2, 3, 0, 1]


def test_pp_stage_is_kept() -> None:
    # Megatron order: tp fastest, then dp, then pp. Rank 5 of dp=2 x tp=2 x pp=2 is pp 1, dp 0, tp 1.
    old, new = GridLayout(dp=3, tp=2, pp=2), GridLayout(dp=2, tp=2, pp=2)
    assert source_rank(old, new, 5) == 1 * 6 + 0 * 2 + 1
    assert source_rank(old, new, 7) == 1 * 6 + 1 * 2 + 1


def test_pure_dp_same_world_is_identity() -> None:
    g = GridLayout(dp=4)
    assert [source_rank(g, g, r) for r in range(4)] == [0, 1, 2, 3]


def test_tp_change_is_refused_naming_both_layouts() -> None:
    with pytest.raises(CheckpointError) as e:
        source_rank(GridLayout(dp=2, tp=2), GridLayout(dp=2, tp=1), 0)
    assert str(e.value).startswith(
        "checkpoint layout dp=2 x tp=2 x pp=1 (4 ranks) cannot be resumed as "
        "dp=2 x tp=1 x pp=1 (2 ranks): only the data-parallel degree may change"
    )


def test_pp_change_is_refused() -> None:
    with pytest.raises(CheckpointError, match="pp=2 .* cannot be resumed as .*pp=1"):
        source_rank(GridLayout(dp=1, tp=1, pp=2), GridLayout(dp=2, tp=1, pp=1), 0)


def test_rank_outside_the_new_grid_is_refused() -> None:
    with pytest.raises(CheckpointError, match="rank 4 is not in layout dp=2 x tp=2"):
        source_rank(GridLayout(dp=4, tp=2), GridLayout(dp=2, tp=2), 4)


def test_manifest_without_layout_maps_only_the_same_world() -> None:
    g = GridLayout(dp=2, tp=2)
    assert checkpoint_source_rank({}, 4, g, 3) == 3
    with pytest.raises(CheckpointError, match="written by 8 ranks with no layout in its manifest"):
        checkpoint_source_rank(None, 8, g, 0, where="checkpoint /c/step-4")


def test_manifest_layout_must_agree_with_its_world_size() -> None:
    with pytest.raises(CheckpointError, match="disagrees with its world_size 6"):
        checkpoint_source_rank({"dp": 2, "tp": 2, "pp": 1}, 6, GridLayout(dp=1, tp=2), 0)


def test_manifest_layout_maps_a_shrink() -> None:
    assert checkpoint_source_rank({"dp": 3, "tp": 2, "pp": 1}, 6, GridLayout(dp=2, tp=2), 3) == 3


def test_invalid_degree_is_refused() -> None:
    with pytest.raises(CheckpointError, match="every degree must be >= 1"):
        GridLayout(dp=0, tp=2)


def test_the_reference_trainers_default_tp_is_launchs_too() -> None:
    """One rule for the default --tp: launch passes what the trainer would pick (a one-GPU world gets 1)."""
    from trainctl.ops.launch.request import trainer_tp
    from trainctl.runtime.rank_map import default_tp

    assert [default_tp(w) for w in (1, 2, 3, 4, 8)] == [1, 2, 1, 2, 2]
    assert all(trainer_tp([], w) == default_tp(w) for w in range(1, 17))
    assert trainer_tp(["--tp", "4"], 8) == 4
