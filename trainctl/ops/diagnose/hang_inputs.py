"""The hang-related raw inputs of `trainctl diagnose` (called by trainctl.ops.diagnose.diagnosis).

- a directory of raw Flight Recorder dumps (any prefix, pickle or JSON, no run.json): detect_fr_dir, load_fr_dir;
- in a run dir or collected dataset: `fr/<host>/rank-R.pkl|.json` (Flight Recorder) and
  `stacks/<host>/rank-R.txt` (dump_traceback) / `stacks/<host>/rank-R.pyspy.txt` (py-spy): parse_run_dir_hang_artefacts.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path

import pyarrow as pa

from trainctl.collectors import flight_recorder as fr
from trainctl.collectors import stacks as stk
from trainctl.errors import FlightRecorderError
from trainctl.rundir import RunInfo
from trainctl.schemas import SignalKind

logger = logging.getLogger(__name__)

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
    dumps = fr.load_dumps(fr.find_dumps(path), root=path, skip_unreadable=True)
    return _with_text_stacks(fr.dumps_to_tables(dumps), path), None


def parse_run_dir_hang_artefacts(path: Path, run: RunInfo | None) -> Mapping[SignalKind, pa.Table]:
    fr_root = path / "fr"
    paths = fr.find_dumps(fr_root, max_depth=1) if fr_root.is_dir() else []
    try:
        dumps = fr.load_dumps(paths, root=fr_root, skip_unreadable=True)
    except FlightRecorderError as exc:  # no dump of this run dir could be read: the rest still is
        logger.warning("%s; no Flight Recorder dump of this run could be read, the rest is analysed", exc)
        dumps = []
    tables = fr.dumps_to_tables(dumps)
    return _with_text_stacks(tables, path)
