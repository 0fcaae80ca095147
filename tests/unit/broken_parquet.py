"""Parquet files broken the ways a disk or a cut-off copy breaks them, for the tests of what reads them."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq


def corrupt_pages(part: Path) -> None:
    """Overwrite a Parquet file's data pages and keep its footer: every footer check passes, decoding fails
    (a torn file, by contrast, has no footer to read)."""
    data = bytearray(part.read_bytes())
    end = len(data) - 8 - int.from_bytes(data[-8:-4], "little")  # the footer, its 4-byte length, "PAR1"
    data[4:end] = b"\xff" * (end - 4)
    part.write_bytes(bytes(data))
    assert pq.read_metadata(part).num_rows > 0  # the footer still reads
