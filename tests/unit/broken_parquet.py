"""Parquet files broken the ways a disk or a cut-off copy breaks them, for the tests of what reads them."""

from __future__ import annotations

import os
import subprocess
import sys
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


WIDE = {**os.environ, "COLUMNS": "1000"}  # one warning, one stderr line: nothing wrapped mid-path


def trainctl(*args: object, lazy: bool = True) -> subprocess.CompletedProcess:
    """`trainctl ARGS` in a process of its own; `lazy`: every table stays lazy (diagnosis.LAZY_ROWS = 0), first read
    where an analyzer, a heat-map or a trace reads it, as a table too big to load is, so that a corrupt data page
    is met there and not as the table is loaded."""
    code = "from trainctl.cli.app import main; main()"
    if lazy:
        code = "from trainctl.ops.diagnose import diagnosis; diagnosis.LAZY_ROWS = 0; " + code
    proc = subprocess.run([sys.executable, "-c", code, *map(str, args)], capture_output=True, text=True, env=WIDE)
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc
