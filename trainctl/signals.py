"""What analyzers receive: the tables of one run or dataset, plus what the launcher knew.

Analyzers are pure: `Signals` in, `list[Finding]` out. A table may be a loaded `pa.Table` or a
lazy `pyarrow.dataset.Dataset` (the timeline of a 8,192-rank run is too big to load; analyzers
that accept a Dataset aggregate it with DuckDB before touching pandas). A loader may hand over a
table too big to load as a `LazyTable` (its files and checked footers): `Signals.tables` opens it
as a Dataset when read, `Signals.source` hands it over unopened to the analyzers that need only
the files and footers (the straggler analysis gives them to DuckDB).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypeAlias

import pyarrow as pa
import pyarrow.parquet as pq

from trainctl.rundir import RunInfo
from trainctl.schemas import SignalKind

if TYPE_CHECKING:  # pyarrow.dataset imports pandas (~0.25 s): imported where a Dataset is opened
    import pyarrow.dataset as pads

__all__ = ["TableLike", "LazyTable", "Signals", "to_table"]

TableLike: TypeAlias = "pa.Table | pads.Dataset"


@dataclass(frozen=True)
class LazyTable:
    """A table too big to load: its local Parquet files, their footers (read and checked against
    the contract by the loader) and how to open them as a pyarrow Dataset. No data is read."""

    files: tuple[str, ...]
    hosts: tuple[str, ...]  # the host of each file (its hive folder: the `host` column of the Dataset)
    footers: tuple[pq.FileMetaData, ...]
    open: Callable[[], pads.FileSystemDataset] = field(repr=False, compare=False)

    @property
    def num_rows(self) -> int:
        return sum(f.num_rows for f in self.footers)


def to_table(t: TableLike) -> pa.Table:
    if isinstance(t, pa.Table):
        return t
    import pyarrow.dataset as pads  # already imported when t is a Dataset

    return t.to_table() if isinstance(t, pads.Dataset) else t


class _OpenOnRead(Mapping[SignalKind, "TableLike"]):
    """`Signals.tables` when a loader handed over LazyTables: each is opened as a Dataset the first
    time it is read, so that only the analyzers that scan it with pyarrow import pyarrow.dataset."""

    def __init__(self, tables: Mapping[SignalKind, TableLike | LazyTable]) -> None:
        self.raw = dict(tables)
        self._opened: dict[SignalKind, TableLike] = {}

    def __getitem__(self, kind: SignalKind) -> TableLike:
        t = self.raw[kind]
        if not isinstance(t, LazyTable):
            return t
        if kind not in self._opened:
            self._opened[kind] = t.open()
        return self._opened[kind]

    def __iter__(self) -> Iterator[SignalKind]:
        return iter(self.raw)

    def __len__(self) -> int:
        return len(self.raw)


@dataclass(frozen=True)
class Signals:
    run: RunInfo | None = None
    tables: Mapping[SignalKind, TableLike] = field(default_factory=dict)
    # Where the signals came from, for messages only (analyzers never open it).
    origin: str = ""

    def __post_init__(self) -> None:
        if not isinstance(self.tables, _OpenOnRead) and any(isinstance(t, LazyTable) for t in self.tables.values()):
            object.__setattr__(self, "tables", _OpenOnRead(self.tables))

    def source(self, kind: SignalKind) -> TableLike | LazyTable | None:
        """The table of `kind` as the loader handed it over: a LazyTable stays unopened."""
        return self.tables.raw.get(kind) if isinstance(self.tables, _OpenOnRead) else self.tables.get(kind)

    def has(self, kind: SignalKind) -> bool:
        t = self.source(kind)
        if t is None:
            return False
        if isinstance(t, pa.Table):
            return t.num_rows > 0
        # A lazy table is a big one (trainctl.ops.diagnose.diagnosis.LAZY_ROWS): counting its rows would read every
        # footer again just to learn it is not empty.
        files = self.files(kind)
        return bool(files) if files is not None else t.count_rows() > 0

    def files(self, kind: SignalKind) -> tuple[str, ...] | None:
        """The Parquet files a lazy table of `kind` reads (a LazyTable, a Dataset over files), unopened; None for a
        table in memory or no table."""
        t = self.source(kind)
        if t is None or isinstance(t, pa.Table):
            return None
        if isinstance(t, LazyTable):
            return t.files
        import pyarrow.dataset as pads  # already imported: t is a Dataset

        return tuple(t.files) if isinstance(t, pads.FileSystemDataset) else None

    def table(self, kind: SignalKind) -> pa.Table | None:
        t = self.tables.get(kind)
        return None if t is None else to_table(t)

    def rank_to_host(self) -> dict[int, str]:
        return self.run.rank_to_host() if self.run else {}
