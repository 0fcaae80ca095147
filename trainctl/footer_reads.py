"""Reading Parquet columns without what the files' footers already prove (faulty hosts' reads).

Kept apart from trainctl.signals, which the straggler path imports: this module needs
pyarrow.dataset (and with it pandas), the straggler path does not.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pyarrow as pa
import pyarrow.dataset as pads

__all__ = ["read_columns"]


def read_columns(ds: pads.Dataset, columns: Sequence[str], memory_pool: pa.MemoryPool | None = None) -> pa.Table:
    """`ds.to_table(columns=columns)`, without reading from a file what its footer already proves.

    A column that is constant in a file by its statistics (an integer or string column with min ==
    max and no null: an error counter that never moved, a link width, the GPU model) or null
    throughout is filled in from the footer instead of read: the same values and types as the
    scan's, one chunk per file.
    Reading a column costs the Parquet reader about the same per file whatever its content (set-up,
    not decoding): ~0.15 CPU s per column at 1,024 hosts. Floating-point columns are read unless
    null: Parquet's min and max skip NaN, so min == max does not prove a single value. Files that
    need the same columns are read in one scan, so a usual fleet (a few hosts whose counters moved)
    costs a few scans. `memory_pool`: where the scans allocate (None: Arrow's default pool).
    """
    frags = list(ds.get_fragments()) if isinstance(ds, pads.FileSystemDataset) else []
    if not frags or not all(isinstance(f, pads.ParquetFileFragment) for f in frags):
        return ds.to_table(columns=list(columns), memory_pool=memory_pool)
    schema = ds.schema
    fields = [schema.field(c) for c in columns]
    provable = [(f.name, _one_value_by_min_max(f.type)) for f in fields]
    fills = [_footer_fills(f.metadata, provable) for f in frags]
    groups: dict[tuple[str, ...], list[int]] = {}
    for i, fill in enumerate(fills):
        groups.setdefault(tuple(c for c in columns if c not in fill), []).append(i)
    pieces: list[pa.Table | None] = [None] * len(frags)
    for names, idx in groups.items():
        if not names:
            continue
        t = pads.FileSystemDataset([frags[i] for i in idx], schema, ds.format, ds.filesystem).to_table(
            columns=list(names), memory_pool=memory_pool
        )
        pos = 0
        for i in idx:
            n = frags[i].metadata.num_rows
            pieces[i], pos = t.slice(pos, n), pos + n
    longest = max(f.metadata.num_rows for f in frags)
    out = []
    for f in fields:
        chunks, filled = [], {}  # value -> one array of it, sliced for every file (no copies)
        for fill, piece, frag in zip(fills, pieces, frags):
            if f.name not in fill:
                chunks.extend(piece.column(f.name).chunks)
                continue
            v = fill[f.name]
            if v not in filled:
                filled[v] = _repeat(v, f.type, longest)
            chunks.append(filled[v].slice(0, frag.metadata.num_rows))
        out.append(pa.chunked_array(chunks, f.type))
    return pa.Table.from_arrays(out, schema=pa.schema(fields, metadata=schema.metadata))


def _repeat(value: Any, typ: pa.DataType, n: int) -> pa.Array:
    if value is None:
        return pa.nulls(n, typ)
    if pa.types.is_dictionary(typ):
        return pa.DictionaryArray.from_arrays(
            pa.repeat(pa.scalar(0, typ.index_type), n), pa.array([value], typ.value_type)
        )
    return pa.repeat(pa.scalar(value, typ), n)


def _one_value_by_min_max(typ: pa.DataType) -> bool:
    """Whether min == max in a footer proves one value: the statistics bound every value from both
    sides (even when a writer truncated them), except NaN, which they skip (so not for floats)."""
    if pa.types.is_dictionary(typ):
        typ = typ.value_type
    return pa.types.is_integer(typ) or pa.types.is_string(typ) or pa.types.is_large_string(typ)


def _footer_fills(md: Any, columns: list[tuple[str, bool]]) -> dict[str, Any]:
    """Column -> its one value in the file whose footer is `md` (None: null throughout), for the
    columns whose statistics prove it in every row group; the others are read. `columns`: (name,
    whether min == max proves one value). A column the file lacks (a partition column, an older
    writer) is the scan's to fill."""
    where = {name: j for j, name in enumerate(md.schema.names)}
    rgs = [md.row_group(r) for r in range(md.num_row_groups)]
    out: dict[str, Any] = {}
    for name, by_min_max in columns:
        j = where.get(name)
        if j is None:
            continue
        values = set()
        for rg in rgs:
            c = rg.column(j)
            s = c.statistics
            if c.path_in_schema != name or s is None or not s.has_null_count:
                break
            if s.null_count == rg.num_rows:
                values.add(None)
            elif s.null_count == 0 and by_min_max and s.has_min_max and s.min == s.max:
                values.add(s.min)
            else:
                break
        else:
            if len(values) <= 1:
                out[name] = values.pop() if values else None
    return out
