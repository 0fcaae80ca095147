"""fleetwild (bench/validation/fleetwild.py): deterministic, readable as DESIGN.md's dataset, frozen lists intact."""

from __future__ import annotations

import copy
import json
import sys
from pathlib import Path

import pyarrow.dataset as ds

VALIDATION = Path(__file__).resolve().parents[2] / "bench" / "validation"
sys.path.insert(0, str(VALIDATION))
import fleetwild  # noqa: E402

DESIGN_GPU = [
    "ts", "host", "gpu", "sm_util_pct", "mem_util_pct", "power_w", "temp_c", "sm_clock_mhz", "mem_used_bytes",
    "pcie_link_gen", "pcie_link_width", "ecc_sbe_total", "ecc_dbe_total", "nvlink_crc_errors_total",
    "throttle_reasons", "xid",
]  # fmt: skip
DESIGN_HOST = ["ts", "host", "cpu_util_pct", "mem_used_bytes", "net_rx_bytes_per_s", "net_tx_bytes_per_s"]


def _cost(e: dict) -> float:
    s = e["spec"]
    return s["n_hosts"] * s["gpus_per_host"] * s["duration_s"] / s["interval_s"]


def _frozen(split: str) -> list[dict]:
    return json.loads((VALIDATION / "frozen" / f"wild_{split}.json").read_text())["scenarios"]


def _small_faulty() -> dict:
    return min((e for e in _frozen("dev") if e["spec"]["labels"]), key=_cost)["spec"]


def test_same_spec_same_hash_and_seed_matters(tmp_path: Path) -> None:
    spec = _small_faulty()
    a = fleetwild.generate(spec, tmp_path / "a")
    b = fleetwild.generate(copy.deepcopy(spec), tmp_path / "b")
    assert a == b
    other = dict(copy.deepcopy(spec), seed=spec["seed"] + 1)
    assert fleetwild.tables_sha256(fleetwild.build_tables(other)) != a


def test_dataset_is_hive_partitioned_with_design_columns(tmp_path: Path) -> None:
    spec = _small_faulty()
    fleetwild.generate(spec, tmp_path)
    for kind, cols in (("gpu_metrics", DESIGN_GPU), ("host_metrics", DESIGN_HOST)):
        files = sorted((tmp_path / kind).glob("host=*/part-0.parquet"))
        assert [f.parent.name for f in files] == sorted(f"host={h}" for h in spec["hosts"])
        t = ds.dataset(tmp_path / kind, format="parquet", partitioning="hive").to_table()
        assert set(cols) <= set(t.column_names)
        assert sorted(set(t["host"].to_pylist())) == sorted(spec["hosts"])
        assert str(t.schema.field("ts").type) == "timestamp[ns, tz=UTC]"
        for f in files:  # host only in the path
            assert "host" not in ds.dataset(f, format="parquet").schema.names


def test_frozen_heldout_entry_still_matches_its_hash() -> None:
    e = min(_frozen("heldout"), key=_cost)
    assert fleetwild.tables_sha256(fleetwild.build_tables(e["spec"])) == e["sha256"]


def test_frozen_lists_are_labelled_and_disjoint() -> None:
    dev, held = _frozen("dev"), _frozen("heldout")
    assert len(dev) == 40 and len(held) == 80
    assert {e["spec"]["seed"] for e in dev}.isdisjoint({e["spec"]["seed"] for e in held})
    for e in dev + held:
        s = e["spec"]
        assert {f["host"] for f in s["faults"]} == set(s["labels"])
        assert all(fleetwild.FAULT_LABELS[f["kind"]] == s["labels"][f["host"]] for f in s["faults"])
    assert sum(1 for e in held if not e["spec"]["labels"]) == 25
