"""The hang-related raw inputs of `trainctl diagnose` (called by trainctl.ops.diagnose.diagnosis).

- a directory of raw Flight Recorder dumps (any prefix, pickle or JSON, no run.json): detect_fr_dir, load_fr_dir;
- in a run dir or collected dataset: `fr/<host>/rank-R.pkl|.json` (Flight Recorder) and
  `stacks/<host>/rank-R.txt` (dump_traceback) / `stacks/<host>/rank-R.pyspy.txt` (py-spy): parse_run_dir_hang_artefacts.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import pyarrow as pa

from trainctl.collectors import flight_recorder as fr
from trainctl.collectors import stacks as stk
from trainctl.rundir import RunInfo
from trainctl.schemas import SignalKind

__all__ = ["detect_fr_dir", "load_fr_dir", "parse_run_dir_hang_artefacts"]


def detect_fr_dir(path: Path) -> bool:
    return bool(fr.find_dumps(path))


def _with_text_stacks(tables: dict[SignalKind, pa.Table], root: Path) -> dict[SignalKind, pa.Table]:
    text = stk.read_stack_files(root)
    if text.num_rows:
        # Live-process stacks first: they say where a rank is now; FR frames only where it last
        # called a collective.
        tables[SignalKind.STACKS] = pa.concat_tables([text, tables[SignalKind.STACKS]])
    return tables


def load_fr_dir(path: Path) -> tuple[Mapping[SignalKind, pa.Table], RunInfo | None]:
    dumps = fr.load_dumps(fr.find_dumps(path), root=path)
    return _with_text_stacks(fr.dumps_to_tables(dumps), path), None


def parse_run_dir_hang_artefacts(path: Path, run: RunInfo | None) -> Mapping[SignalKind, pa.Table]:
    fr_root = path / "fr"
    paths = fr.find_dumps(fr_root, max_depth=1) if fr_root.is_dir() else []
    tables = fr.dumps_to_tables(fr.load_dumps(paths, root=fr_root))
    return _with_text_stacks(tables, path)
