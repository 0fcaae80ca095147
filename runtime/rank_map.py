"""Which checkpoint rank restores which rank when a run resumes at another data-parallel degree.

A relaunch without a lost host may come back smaller (trainctl.ops.evict.relaunch_plan: SHRINK keeps
tp x pp and recomputes dp). The reference trainer's grid is Megatron's rank order, tp fastest,
then dp, then pp:

    rank = pp_index * (dp * tp) + dp_index * tp + tp_index

Every data-parallel replica holds the same tensor-parallel shard: parameters and optimizer state
are identical across a dp group after each step's gradient all_reduce. So a rank of the new grid
can restore from *any* rank of the old grid with the same tp (and pp) index. We pick the old rank
with the same dp index when it exists (dp shrunk: that is the rank's own number, so each rank reads
its own files and the read load stays spread), else dp index modulo the old dp (dp grew).

tp and pp cannot change: their shards would have to be split or merged, which needs the model's
sharding rules; `source_rank` refuses with both layouts in the message. Pure: no files, no torch.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from trainctl.errors import CheckpointError

__all__ = ["GridLayout", "default_tp", "source_rank"]


def default_tp(world_size: int) -> int:
    """The reference trainer's tensor-parallel size when `--tp` is not given: 2 for an even world,
    else 1 (a one-GPU box runs at world 1). Launch (trainctl.ops.launch.request.trainer_tp) and the
    trainer both take it from here, so a relaunch passes the tp the run actually had."""
    return 2 if world_size % 2 == 0 else 1


@dataclass(frozen=True)
class GridLayout:
    """A dp x tp x pp grid (RunInfo.layout and the checkpoint manifest's `layout` use these keys)."""

    dp: int
    tp: int = 1
    pp: int = 1

    def __post_init__(self) -> None:
        if min(self.dp, self.tp, self.pp) < 1:
            raise CheckpointError(f"layout {self.describe()}: every degree must be >= 1")

    @property
    def world_size(self) -> int:
        return self.dp * self.tp * self.pp

    @classmethod
    def from_mapping(cls, m: Mapping[str, int]) -> GridLayout:
        return cls(dp=int(m["dp"]), tp=int(m.get("tp", 1)), pp=int(m.get("pp", 1)))

    def to_dict(self) -> dict[str, int]:
        return {"dp": self.dp, "tp": self.tp, "pp": self.pp}

    def describe(self) -> str:
        return f"dp={self.dp} x tp={self.tp} x pp={self.pp} ({self.dp * self.tp * self.pp} ranks)"


def source_rank(saved: GridLayout, current: GridLayout, rank: int) -> int:
    """The rank of a checkpoint written by `saved` whose files restore `rank` of `current`.

    Raises CheckpointError (naming both layouts) when tp or pp differ or `rank` is not in `current`.
    """
    if saved.tp != current.tp or saved.pp != current.pp:
        raise CheckpointError(
            f"checkpoint layout {saved.describe()} cannot be resumed as {current.describe()}: only the data-parallel "
            f"degree may change (tp and pp shards would need resharding); relaunch with tp={saved.tp} pp={saved.pp} "
            "or start from a fresh --checkpoint-dir"
        )
    if not 0 <= rank < current.world_size:
        raise CheckpointError(f"rank {rank} is not in layout {current.describe()}")
    pp_index, rest = divmod(rank, current.dp * current.tp)
    dp_index, tp_index = divmod(rest, current.tp)
    return pp_index * (saved.dp * saved.tp) + (dp_index % saved.dp) * saved.tp + tp_index


def checkpoint_source_rank(
    saved_layout: Mapping[str, int] | None,
    saved_world_size: int,
    current: GridLayout,
    rank: int,
    *,
    where: str = "checkpoint",
) -> int:
    """`source_rank` for a checkpoint's manifest (its `layout`, absent before trainctl recorded it).

    A manifest without a layout can only be resumed by the same world size (rank r reads rank r):
    without tp there is no telling which ranks hold the same shard.
    """
    if saved_layout:
        saved = GridLayout.from_mapping(saved_layout)
        if saved.world_size != saved_world_size:
            raise CheckpointError(
                f"{where}: manifest layout {saved.describe()} disagrees with its world_size "
                f"{saved_world_size}; the checkpoint is damaged"
            )
        return source_rank(saved, current, rank)
    if saved_world_size == current.world_size:
        return rank
    raise CheckpointError(
        f"{where} was written by {saved_world_size} ranks with no layout in its manifest (an older trainctl), this run "
        f"is {current.describe()}: cannot map ranks; relaunch with {saved_world_size} ranks or a fresh --checkpoint-dir"
    )
