"""What analyzers receive: the tables of one run or dataset, plus what the launcher knew.

Analyzers are pure: `Signals` in, `list[Finding]` out. A table may be a loaded `pa.Table` or a
lazy `pyarrow.dataset.Dataset` (the timeline of a 8,192-rank run is too big to load; analyzers
that accept a Dataset aggregate it with DuckDB before touching pandas).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.dataset as pads

from trainctl.rundir import RunInfo
from trainctl.schemas import SignalKind

__all__ = ["TableLike", "Signals", "to_table"]

TableLike = pa.Table | pads.Dataset


def to_table(t: TableLike) -> pa.Table:
    return t.to_table() if isinstance(t, pads.Dataset) else t


@dataclass(frozen=True)
class Signals:
    run: RunInfo | None = None
    tables: Mapping[SignalKind, TableLike] = field(default_factory=dict)
    # Where the signals came from, for messages only (analyzers never open it).
    origin: str = ""

    def has(self, kind: SignalKind) -> bool:
        t = self.tables.get(kind)
        if t is None:
            return False
        if isinstance(t, pads.FileSystemDataset):
            # Lazy datasets are the big ones (trainctl.ops.diagnose.diagnosis.LAZY_ROWS); counting their rows
            # would read every footer again just to learn they are not empty.
            return bool(t.files)
        return (t.count_rows() if isinstance(t, pads.Dataset) else t.num_rows) > 0

    def table(self, kind: SignalKind) -> pa.Table | None:
        t = self.tables.get(kind)
        return None if t is None else to_table(t)

    def rank_to_host(self) -> dict[int, str]:
        return self.run.rank_to_host() if self.run else {}
