"""collection_status rows: Parquet parts count their rows; raw files (a Flight Recorder pickle under
fr/, whose kind shares the fr_dumps table's name) count one each and are never opened as Parquet."""

from __future__ import annotations

import logging
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from trainctl.ops.collect.collection import _count_rows


def test_raw_dumps_count_as_files_and_parquet_parts_by_rows(tmp_path: Path, caplog) -> None:
    (tmp_path / "fr" / "node01").mkdir(parents=True)
    (tmp_path / "fr" / "node01" / "rank-0.pkl").write_bytes(b"\x80\x04not parquet")
    part = tmp_path / "fr_dumps" / "host=node01"
    part.mkdir(parents=True)
    pq.write_table(pa.table({"rank": [0, 1, 2]}), part / "part-0.parquet")
    (part / "part-1.parquet").write_bytes(b"torn")
    with caplog.at_level(logging.WARNING):
        assert _count_rows(tmp_path, "fr_dumps", ["fr/node01/rank-0.pkl"]) == 1
        assert not caplog.records  # the pickle was not opened as Parquet
        assert _count_rows(tmp_path, "fr_dumps", ["fr_dumps/host=node01/part-0.parquet"]) == 3
        assert _count_rows(tmp_path, "fr_dumps", ["fr_dumps/host=node01/part-1.parquet"]) == 0
    assert "not a readable parquet file" in caplog.text  # a torn part is still reported
