"""Reading and writing the hive-partitioned Parquet dataset (the layout in trainctl.schemas).

Writers conform a table to the contract (cast, fill omitted nullable columns) and write atomically
(temp file + rename), so a crash never leaves a half-written part that readers would trip over.
Readers validate every file's footer against the contract before reading any data, and fail with
the file, the column and the expected type.
"""

from __future__ import annotations

import functools
import os
import uuid
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import quote, unquote

import pyarrow as pa
import pyarrow.parquet as pq

from trainctl.errors import DatasetError, SchemaMismatch
from trainctl.schemas import META_KIND, META_VERSION, SCHEMA_VERSION, SignalKind, schema_for
from trainctl.signals import LazyTable

if TYPE_CHECKING:  # pyarrow.dataset imports pandas (~0.25 s): only open_dataset needs it, at call time
    import pyarrow.dataset as pads

__all__ = [
    "HOST_COLUMN",
    "PartFile",
    "conform",
    "write_table",
    "list_parts",
    "kinds_present",
    "hosts_present",
    "validate_part",
    "unreadable_data",
    "one_line",
    "check_data",
    "read_table",
    "open_dataset",
    "open_lazy",
    "dataset_rows",
]

HOST_COLUMN = "host"


@dataclass(frozen=True)
class PartFile:
    kind: SignalKind
    host: str
    path: Path


def _host_dir(root: Path, kind: SignalKind, host: str) -> Path:
    return root / kind.value / f"{HOST_COLUMN}={quote(host, safe='')}"


def _string_like(t: pa.DataType) -> bool:
    if pa.types.is_dictionary(t):
        t = t.value_type
    return pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t)


def _compatible(actual: pa.DataType, expected: pa.DataType) -> bool:
    if actual.equals(expected):
        return True
    # Other writers (Polars, DuckDB) emit large_string / string_view / dictionary strings.
    if _string_like(actual) and _string_like(expected):
        return True
    if pa.types.is_null(actual):  # an all-null column written without a type
        return True
    if pa.types.is_timestamp(actual) and pa.types.is_timestamp(expected):
        return actual.unit == expected.unit and (actual.tz or "UTC").upper() in ("UTC", "+00:00")
    return False


def conform(table: pa.Table, kind: SignalKind | str, *, where: str = "table") -> pa.Table:
    """Return `table` with exactly the contract's columns, in order, cast to the contract's types.

    Omitted nullable columns are filled with nulls; a missing required column or a column whose
    type cannot be cast raises SchemaMismatch naming `where`, the column and the expected type.
    Extra columns (including a stray `host`) are dropped: host lives in the path.
    """
    kind = SignalKind(kind)
    schema = schema_for(kind)
    cols = []
    for field in schema:
        if field.name in table.column_names:
            col = table.column(field.name)
            if not col.type.equals(field.type):
                try:
                    col = col.cast(field.type)
                except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
                    raise SchemaMismatch(
                        f"{where}: column {field.name!r} of {kind.value} has type {col.type}, "
                        f"expected {field.type} ({exc})"
                    ) from exc
            if not field.nullable and col.null_count:
                raise SchemaMismatch(
                    f"{where}: column {field.name!r} of {kind.value} holds nulls, expected {field.type} not null"
                )
            cols.append(col)
        elif field.nullable:
            cols.append(pa.nulls(table.num_rows, field.type))
        else:
            raise SchemaMismatch(f"{where}: required column {field.name!r} ({field.type}) of {kind.value} is missing")
    return pa.Table.from_arrays(cols, schema=schema)


def write_table(
    root: str | os.PathLike[str],
    kind: SignalKind | str,
    host: str,
    table: pa.Table,
    *,
    part: str | None = None,
    compression: str = "zstd",
) -> Path:
    """Write `table` as one part file under `root/<kind>/host=<host>/`; returns its path.

    `part` names the file (`part-<part>.parquet`), so a writer that re-writes the same part (a
    spool flushing rank 3's buffer) replaces it instead of duplicating rows. `compression`: "none"
    for a table of a few rows, where zstd saves nothing and costs ~0.4 ms per file.
    """
    kind = SignalKind(kind)
    if not host or "/" in host:
        raise DatasetError(f"host name {host!r} cannot be a partition; use a plain host name")
    table = conform(table, kind)
    out_dir = _host_dir(Path(root), kind, host)
    out_dir.mkdir(parents=True, exist_ok=True)
    name = f"part-{part or uuid.uuid4().hex[:12]}.parquet"
    final = out_dir / name
    tmp = out_dir / f".{name}.{os.getpid()}.tmp"
    pq.write_table(table, tmp, compression=compression)
    os.replace(tmp, final)
    return final


def list_parts(
    root: str | os.PathLike[str], kind: SignalKind | str, skip: Collection[Path] = frozenset()
) -> list[PartFile]:
    """The part files of a kind, but those in `skip` (files a reader found unreadable and said so)."""
    return [p for p in _iter_parts(root, SignalKind(kind)) if p.path not in skip]


def unreadable_parts(root: str | os.PathLike[str], kind: SignalKind | str) -> dict[Path, DatasetError]:
    """The part files of a kind whose footer cannot be read or breaks the contract, with why (each footer read)."""
    bad: dict[Path, DatasetError] = {}
    for part in list_parts(root, kind):
        try:
            validate_part(part)
        except DatasetError as exc:
            bad[part.path] = exc
    return bad


def _iter_parts(root: str | os.PathLike[str], kind: SignalKind) -> Iterator[PartFile]:
    # os.scandir, not Path.glob: a dataset of 1,024 hosts is listed several times per diagnose.
    base = Path(root) / kind.value
    try:
        host_dirs = sorted(e.name for e in os.scandir(base) if e.name.startswith(f"{HOST_COLUMN}=") and e.is_dir())
    except (FileNotFoundError, NotADirectoryError):
        return
    for name in host_dirs:
        host = unquote(name.split("=", 1)[1])
        folder = os.path.join(base, name)  # strings, one Path per file: pathlib's `/` is 3x dearer
        for f in sorted(os.listdir(folder)):
            if f.endswith(".parquet") and not f.startswith("."):
                yield PartFile(kind, host, Path(folder, f))


def kinds_present(root: str | os.PathLike[str]) -> list[SignalKind]:
    """Kinds with at least one part file under `root` (a run dir or a collected dataset)."""
    return [k for k in SignalKind if next(_iter_parts(root, k), None) is not None]


def hosts_present(root: str | os.PathLike[str]) -> list[str]:
    return sorted({p.host for k in SignalKind for p in list_parts(root, k)})


def validate_part(part: PartFile) -> pa.Schema:
    """Check one file's footer against the contract without reading its data."""
    return _validate_footer(part)[0]


def _validate_footer(part: PartFile) -> tuple[pa.Schema, int]:
    """The file's schema, checked against the contract, and its row count: one footer read."""
    footer = _checked_footer(part)
    return footer.schema.to_arrow_schema(), footer.num_rows


def _checked_footer(part: PartFile) -> pq.FileMetaData:
    footer = _read_footer(part, lambda: pq.read_metadata(part.path))
    _check_schema(part, footer.schema.to_arrow_schema())
    return footer


def one_line(what: object) -> str:
    """`what` (a reader's exception) as one line of printable text: pyarrow's messages span lines ("Couldn't
    deserialize thrift: ...\nDeserializing page header failed.") and may quote the corrupt bytes themselves."""
    return " ".join("".join(c if c.isprintable() else " " for c in str(what)).split())


def _not_a_file(path: str | os.PathLike[str]) -> DatasetError:
    p = Path(path)
    return DatasetError(
        f"{p}: a directory named like a Parquet part; a part is one file (part-<name>.parquet) in {p.parent}: "
        "move the files it holds up into that folder, or delete it"
    )


def _read_footer(part: PartFile, read: Callable[[], pq.FileMetaData]) -> pq.FileMetaData:
    try:
        return read()
    except (pa.ArrowInvalid, OSError) as exc:
        if part.path.is_dir():  # not "truncated": nothing was cut, the name holds a folder
            raise _not_a_file(part.path) from exc
        raise DatasetError(
            f"{part.path}: not a readable Parquet file ({one_line(exc)}); it may be truncated: "
            "re-run collect for this host or delete the file"
        ) from exc


def unreadable_data(path: str | os.PathLike[str], exc: BaseException) -> DatasetError:
    """The error for a part whose footer reads but whose data does not (a corrupt page), as one line."""
    return DatasetError(
        f"{path}: cannot read Parquet data ({one_line(exc)}); its footer reads but its data is corrupt: "
        "re-run collect for this host or delete the file"
    )


def check_data(path: str | os.PathLike[str]) -> DatasetError | None:
    """Decode every page of one part (one row group at a time, so memory stays one row group), or say why it
    cannot be: the check a footer read cannot make. A full read of the file: only worth it once a read failed."""
    try:
        f = pq.ParquetFile(path)
        for i in range(f.metadata.num_row_groups):
            f.read_row_group(i)
    except (pa.ArrowException, OSError) as exc:
        return unreadable_data(path, exc)
    return None


def _check_schema(part: PartFile, actual: pa.Schema) -> pa.Schema:
    meta = actual.metadata or {}
    kind_meta = meta.get(META_KIND)
    if kind_meta is not None and kind_meta.decode() != part.kind.value:
        raise SchemaMismatch(
            f"{part.path}: holds kind {kind_meta.decode()!r} but sits in the {part.kind.value!r} folder"
        )
    version = meta.get(META_VERSION)
    if version is not None and version.decode() != str(SCHEMA_VERSION):
        raise SchemaMismatch(
            f"{part.path}: schema version {version.decode()}, this trainctl reads version {SCHEMA_VERSION}; "
            "re-collect with a matching trainctl"
        )
    for field in schema_for(part.kind):
        idx = actual.get_field_index(field.name)
        if idx < 0:
            if not field.nullable:
                raise SchemaMismatch(
                    f"{part.path}: required column {field.name!r} is missing, expected type {field.type}"
                )
            continue
        got = actual.field(idx).type
        if not _compatible(got, field.type):
            raise SchemaMismatch(f"{part.path}: column {field.name!r} has type {got}, expected {field.type}")
    return actual


def read_table(
    root: str | os.PathLike[str],
    kind: SignalKind | str,
    *,
    hosts: Iterable[str] | None = None,
    columns: Sequence[str] | None = None,
    validate: bool = True,
    skip: Collection[Path] = frozenset(),
    unreadable: dict[Path, DatasetError] | None = None,
) -> pa.Table:
    """Read every part of a kind into one table, with the `host` column added from the paths.

    Every file is validated first (`validate=False` when the caller just did, with open_dataset);
    an unknown or mismatched schema raises SchemaMismatch. A part whose data cannot be read (its
    footer reads, a page is corrupt) raises DatasetError naming it, or, given an `unreadable` dict,
    is recorded there and left out, so one pass reads every other part.
    Returns an empty table of the contract's schema (plus host) when no part exists.
    """
    kind = SignalKind(kind)
    wanted = set(hosts) if hosts is not None else None
    tables = []
    for part in list_parts(root, kind, skip):
        if wanted is not None and part.host not in wanted:
            continue
        if validate:
            validate_part(part)
        try:
            t = pq.read_table(part.path)
        except (pa.ArrowException, OSError) as exc:
            if unreadable is None:
                raise unreadable_data(part.path, exc) from exc
            unreadable[part.path] = unreadable_data(part.path, exc)
            continue
        t = conform(t, kind, where=str(part.path))
        if columns is not None:
            t = t.select([c for c in columns if c != HOST_COLUMN])
        tables.append(t.append_column(HOST_COLUMN, pa.array([part.host] * t.num_rows, pa.string())))
    if not tables:
        empty = schema_for(kind).empty_table()
        if columns is not None:
            empty = empty.select([c for c in columns if c != HOST_COLUMN])
        return empty.append_column(HOST_COLUMN, pa.array([], pa.string()))
    return pa.concat_tables(tables)


def open_dataset(
    root: str | os.PathLike[str], kind: SignalKind | str, skip: Collection[Path] = frozenset()
) -> pads.FileSystemDataset:
    """A lazy, validated pyarrow Dataset over all parts of a kind (for tables too big to load).

    Every footer is read once and checked against the contract; pyarrow keeps the footers on the
    dataset's fragments, so `dataset_rows` and analyzers that want the footers' statistics (the
    straggler analyzer's step range) read no file again. Scanning then reads only the columns and
    rows a query needs (DuckDB and Polars can query the returned dataset directly).
    """
    import pyarrow.dataset as pads

    kind = SignalKind(kind)
    parts = list_parts(root, kind, skip)
    schema = schema_for(kind).append(pa.field(HOST_COLUMN, pa.string()))
    try:
        ds = pads.dataset(
            [str(p.path) for p in parts],
            schema=schema,
            format="parquet",
            partitioning=pads.partitioning(pa.schema([(HOST_COLUMN, pa.string())]), flavor="hive"),
            partition_base_dir=str(Path(root) / kind.value),
        )
    except IsADirectoryError as exc:  # the caller finds it among the unreadable parts (validate_part) and skips it
        raise _not_a_file(next(p.path for p in parts if p.path.is_dir())) from exc
    by_path = {str(p.path): p for p in parts}
    valid: set[tuple[pa.Schema, tuple[tuple[bytes, bytes], ...]]] = set()  # schemas already checked
    for frag in ds.get_fragments():
        part = by_path[frag.path]
        actual = _read_footer(part, lambda frag=frag: frag.metadata).schema.to_arrow_schema()
        key = (actual, tuple(sorted((actual.metadata or {}).items())))
        if key not in valid:  # the parts of one writer share a schema: check it once, not 1,024 times
            _check_schema(part, actual)
            valid.add(key)
    return ds


def open_lazy(root: str | os.PathLike[str], kind: SignalKind | str, skip: Collection[Path] = frozenset()) -> LazyTable:
    """The parts of a kind with every footer read once and checked against the contract, as
    `open_dataset` does, without importing pyarrow.dataset (which imports pandas, ~0.25 s) until
    something opens the result as a Dataset."""
    kind = SignalKind(kind)
    parts = list_parts(root, kind, skip)
    return LazyTable(
        files=tuple(str(p.path) for p in parts),
        hosts=tuple(p.host for p in parts),
        footers=tuple(_checked_footer(p) for p in parts),
        open=functools.partial(open_dataset, root, kind, skip),
    )


def dataset_rows(ds: pads.FileSystemDataset) -> int:
    """Rows of an `open_dataset` result, from the footers it already holds."""
    return sum(frag.metadata.num_rows for frag in ds.get_fragments())
