"""trainctl.footer_reads.read_columns: a dataset scan that fills from the footers what they prove."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from trainctl.analyzers.faulty_hosts import find_faulty_hosts
from trainctl.dataset import conform, open_dataset, write_table
from trainctl.footer_reads import _footer_fills, read_columns
from trainctl.schemas import SignalKind
from trainctl.simulation.fleet import FaultSpec, FleetScenario, QuirkSpec, simulate, write_fleet

COLS = ["ts", "gpu", "host", "gpu_name", "power_limit_w", "ecc_dbe_total", "throttle_reasons", "xid", "retired_pages"]


def _gpu_rows(n: int, **cols: list) -> pa.Table:
    base = {
        "ts": pa.array(range(n), pa.timestamp("ns", tz="UTC")),
        "gpu": pa.array([0] * n, pa.int16()),
        "gpu_name": ["NVIDIA H100 80GB HBM3"] * n,
        "power_limit_w": pa.array([700.0] * n, pa.float32()),
        "ecc_dbe_total": pa.array([0] * n, pa.int64()),
        "throttle_reasons": pa.array([1 << 63] * n, pa.uint64()),
    }
    base.update(cols)
    return conform(pa.table(base), SignalKind.GPU_METRICS)


def _write_raw(root, host: str, table: pa.Table, **kw) -> None:
    d = root / "gpu_metrics" / f"host={host}"
    d.mkdir(parents=True)
    pq.write_table(table, d / "part-x.parquet", **kw)


def test_same_table_as_the_scan_with_constant_moving_null_and_absent_columns(tmp_path) -> None:
    write_table(tmp_path, SignalKind.GPU_METRICS, "a", _gpu_rows(4))  # counters constant, xid null
    write_table(tmp_path, SignalKind.GPU_METRICS, "b", _gpu_rows(4, ecc_dbe_total=pa.array([0, 0, 3, 3], pa.int64())))
    # Two row groups, each constant by itself but with different values: must be read.
    _write_raw(tmp_path, "c", _gpu_rows(4, ecc_dbe_total=pa.array([1, 1, 2, 2], pa.int64())), row_group_size=2)
    # An older writer without retired_pages: the scan fills nulls.
    _write_raw(tmp_path, "d", _gpu_rows(3, xid=pa.array([None, 79, None], pa.int32())).drop_columns(["retired_pages"]))
    ds = open_dataset(tmp_path, SignalKind.GPU_METRICS)
    got, want = read_columns(ds, COLS), ds.to_table(columns=COLS)
    assert got.equals(want) and got.schema.equals(want.schema, check_metadata=True)
    assert got.column("ecc_dbe_total").to_pylist() == [0] * 4 + [0, 0, 3, 3] + [1, 1, 2, 2] + [0] * 3
    assert got.column("throttle_reasons").to_pylist()[0] == 1 << 63
    system, before = pa.system_memory_pool(), pa.system_memory_pool().bytes_allocated()
    in_system = read_columns(ds, COLS, memory_pool=system)  # the analyzer's pool: the same table
    assert in_system.equals(want) and system.bytes_allocated() > before

    provable = [("ecc_dbe_total", True), ("xid", True), ("gpu_name", True), ("power_limit_w", False), ("ts", True)]
    fills = {f.path.split("host=")[1][0]: _footer_fills(f.metadata, provable) for f in ds.get_fragments()}
    # A float's min == max does not exclude NaN (the statistics skip it): read.
    assert fills["a"] == {"ecc_dbe_total": 0, "xid": None, "gpu_name": "NVIDIA H100 80GB HBM3"}
    assert "ecc_dbe_total" not in fills["b"] and "ecc_dbe_total" not in fills["c"]
    assert "xid" not in fills["d"]


def test_float_constant_by_statistics_with_nan_is_read(tmp_path) -> None:
    _write_raw(tmp_path, "a", _gpu_rows(3, power_limit_w=pa.array([700.0, float("nan"), 700.0], pa.float32())))
    got = read_columns(open_dataset(tmp_path, SignalKind.GPU_METRICS), ["power_limit_w"]).column(0)
    assert pc.is_nan(got).to_pylist() == [False, True, False]


@pytest.mark.parametrize(("kind", "metric"), [("ecc_dbe", "ecc_dbe_total"), ("nvlink_crc", "nvlink_crc_errors_total")])
def test_counter_skipped_by_footers_elsewhere_still_alarms_where_it_moves(tmp_path, kind: str, metric: str) -> None:
    # Every other host's counters are constant (skipped by their footers), one host's grow; the
    # lazy dataset gives the findings the in-memory tables give.
    r = simulate(
        FleetScenario(8, 4, 360, faults=(FaultSpec(kind, "node03", 120),), quirks=(QuirkSpec("old_ecc", "node05"),))
    )
    write_fleet(r, tmp_path)
    lazy = find_faulty_hosts(open_dataset(tmp_path, "gpu_metrics"), open_dataset(tmp_path, "host_metrics"))
    loaded = find_faulty_hosts(r.gpu_metrics, r.host_metrics)
    assert [(f.hosts, f.category, f.summary) for f in lazy] == [(f.hosts, f.category, f.summary) for f in loaded]
    assert {f.hosts for f in lazy if any(e.get("metric") == metric for e in f.evidence["signals"])} == {("node03",)}
