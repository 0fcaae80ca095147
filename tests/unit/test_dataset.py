from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from broken_parquet import corrupt_pages

from trainctl import dataset
from trainctl.errors import DatasetError, SchemaMismatch
from trainctl.schemas import SCHEMA_VERSION, SignalKind, schema_for


def _timeline(n: int = 4) -> pa.Table:
    return pa.table(
        {
            "rank": pa.array(range(n), pa.int32()),
            "step": pa.array([1] * n, pa.int64()),
            "phase": ["forward"] * n,
            "duration_ns": pa.array([100 * (i + 1) for i in range(n)], pa.int64()),
        }
    )


def test_every_kind_has_versioned_schema_with_units() -> None:
    for kind in SignalKind:
        s = schema_for(kind)
        assert s.metadata[b"trainctl.schema_version"] == str(SCHEMA_VERSION).encode()
        assert "host" not in s.names  # host comes from the partition path


def test_roundtrip_adds_host_from_path_and_fills_nullable(tmp_path) -> None:
    p = dataset.write_table(tmp_path, "timeline", "node01", _timeline())
    assert p.parent.name == "host=node01" and p.parent.parent.name == "timeline"
    dataset.write_table(tmp_path, "timeline", "node02", _timeline(2))
    t = dataset.read_table(tmp_path, "timeline")
    assert t.num_rows == 6
    assert sorted(set(t.column("host").to_pylist())) == ["node01", "node02"]
    assert t.column("tokens").null_count == 6
    assert "host" not in pq.read_schema(p).names
    assert dataset.kinds_present(tmp_path) == [SignalKind.TIMELINE]


def test_dataset_is_readable_by_plain_pyarrow_and_duckdb(tmp_path) -> None:
    dataset.write_table(tmp_path, "timeline", "node01", _timeline())
    t = pq.read_table(tmp_path / "timeline")  # hive partitioning discovered by pyarrow itself
    assert t.num_rows == 4 and "host" in t.column_names
    duckdb = pytest.importorskip("duckdb")
    rows = duckdb.sql(
        f"select host, sum(duration_ns) from read_parquet('{tmp_path}/timeline/*/*.parquet', hive_partitioning=true) group by host"
    ).fetchall()
    assert rows == [("node01", 1000)]


def test_missing_required_column_is_refused_on_write(tmp_path) -> None:
    with pytest.raises(SchemaMismatch, match=r"required column 'duration_ns' \(int64\) of timeline is missing"):
        dataset.write_table(tmp_path, "timeline", "n1", _timeline().drop(["duration_ns"]))


def test_wrong_type_names_file_column_and_expected_type(tmp_path) -> None:
    d = tmp_path / "timeline" / "host=n1"
    d.mkdir(parents=True)
    bad = _timeline().set_column(3, "duration_ns", pa.array(["x"] * 4))
    pq.write_table(bad, d / "part-0.parquet")
    with pytest.raises(SchemaMismatch, match=r"part-0\.parquet: column 'duration_ns' has type string, expected int64"):
        dataset.read_table(tmp_path, "timeline")


def test_unknown_schema_version_is_refused(tmp_path) -> None:
    d = tmp_path / "timeline" / "host=n1"
    d.mkdir(parents=True)
    t = dataset.conform(_timeline(), "timeline")
    t = t.replace_schema_metadata({b"trainctl.kind": b"timeline", b"trainctl.schema_version": b"99"})
    pq.write_table(t, d / "part-0.parquet")
    with pytest.raises(SchemaMismatch, match="schema version 99, this trainctl reads version 1"):
        dataset.read_table(tmp_path, "timeline")


def test_truncated_file_is_a_dataset_error_naming_the_path(tmp_path) -> None:
    p = dataset.write_table(tmp_path, "timeline", "n1", _timeline())
    p.write_bytes(p.read_bytes()[:40])
    with pytest.raises(DatasetError, match=rf"{p}: not a readable Parquet file"):
        dataset.read_table(tmp_path, "timeline")


def test_a_part_with_corrupt_pages_is_one_error_line_or_left_out_and_recorded(tmp_path) -> None:
    good = dataset.write_table(tmp_path, "timeline", "n1", _timeline())
    bad = dataset.write_table(tmp_path, "timeline", "n2", _timeline(2))
    corrupt_pages(bad)
    dataset.validate_part(dataset.PartFile(SignalKind.TIMELINE, "n2", bad))  # the footer check cannot see it
    with pytest.raises(
        DatasetError, match=rf"^{bad}: cannot read Parquet data \(Couldn't deserialize thrift: [^\n]*\)"
    ):
        dataset.read_table(tmp_path, "timeline")
    unreadable: dict = {}
    t = dataset.read_table(tmp_path, "timeline", unreadable=unreadable)
    assert t.column("host").to_pylist() == ["n1"] * 4 and list(unreadable) == [bad]
    assert str(unreadable[bad]) == str(dataset.check_data(bad))
    assert dataset.check_data(good) is None


def test_open_dataset_is_lazy_and_carries_host(tmp_path) -> None:
    dataset.write_table(tmp_path, "timeline", "node-a", _timeline())
    ds = dataset.open_dataset(tmp_path, "timeline")
    t = ds.to_table(columns=["rank", "host"])
    assert t.column("host").to_pylist() == ["node-a"] * 4


def test_rewriting_a_named_part_replaces_it(tmp_path) -> None:
    dataset.write_table(tmp_path, "timeline", "n1", _timeline(), part="rank0")
    dataset.write_table(tmp_path, "timeline", "n1", _timeline(2), part="rank0")
    assert dataset.read_table(tmp_path, "timeline").num_rows == 2


def test_open_dataset_checks_each_distinct_schema_even_after_a_valid_one(tmp_path) -> None:
    # Footers whose schema was already checked are not checked again; a part that differs from
    # them only in its kind metadata, or only in a column's type, is still refused by name.
    dataset.write_table(tmp_path, "timeline", "node01", _timeline())
    good = dataset.conform(_timeline(), "timeline")
    wrong_kind = good.replace_schema_metadata({**good.schema.metadata, b"trainctl.kind": b"gpu_metrics"})
    (tmp_path / "timeline" / "host=node02").mkdir()
    pq.write_table(wrong_kind, tmp_path / "timeline" / "host=node02" / "part-x.parquet")
    with pytest.raises(SchemaMismatch, match="node02.*holds kind 'gpu_metrics'"):
        dataset.open_dataset(tmp_path, "timeline")
    (tmp_path / "timeline" / "host=node02" / "part-x.parquet").unlink()
    wrong_type = good.set_column(good.schema.get_field_index("step"), "step", good.column("step").cast(pa.float64()))
    pq.write_table(wrong_type, tmp_path / "timeline" / "host=node02" / "part-x.parquet")
    with pytest.raises(SchemaMismatch, match="node02.*'step' has type double"):
        dataset.open_dataset(tmp_path, "timeline")
