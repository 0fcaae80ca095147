"""The hang-related raw inputs of `trainctl diagnose` (called by trainctl.ops.diagnose.diagnosis).

- a directory of raw Flight Recorder dumps (any prefix, pickle or JSON, no run.json): detect_fr_dir, load_fr_dir;
- a dump dir of torch's debug server (`start_debug_server(dump_dir=...)`: stacks_<stamp>.txt, ...):
  detect_debug_dump_dir, load_debug_dump_dir;
- in a run dir or collected dataset: `fr/<host>/rank-R.pkl|.json` (Flight Recorder) and
  `stacks/<host>/rank-R.txt` (dump_traceback) / `stacks/<host>/rank-R.pyspy.txt` (py-spy), and torch's
  debug server's periodic dumps where the run pointed it (`stacks/<host>/stacks_<stamp>.txt`, the
  TRAINCTL_TORCH_DEBUG_DIR the ranks get): parse_run_dir_hang_artefacts.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path

import pyarrow as pa

from trainctl.collectors import flight_recorder as fr
from trainctl.collectors import stacks as stk
from trainctl.collectors import torch_debug_dumps as tdd
from trainctl.errors import FlightRecorderError
from trainctl.rundir import RunInfo
from trainctl.schemas import SignalKind

logger = logging.getLogger(__name__)

__all__ = [
    "detect_fr_dir",
    "fr_dump_format",
    "load_fr_dir",
    "detect_debug_dump_dir",
    "load_debug_dump_dir",
    "parse_run_dir_hang_artefacts",
]


def detect_fr_dir(path: Path) -> bool:
    return bool(fr.find_dumps(path))


def fr_dump_format(path: Path) -> str | None:
    """ "pickle" or "json" when the file is one rank's Flight Recorder dump (diagnose reads a folder of them)."""
    return fr.dump_format(path)


def detect_debug_dump_dir(path: Path) -> bool:
    return tdd.detect_debug_dump_dir(path)


def load_debug_dump_dir(path: Path) -> tuple[Mapping[SignalKind, pa.Table], RunInfo | None]:
    table, _ = tdd.read_debug_dumps(path)
    return {SignalKind.STACKS: table}, None


def _debug_dump_stacks(root: Path, run: RunInfo | None) -> list[pa.Table]:
    base = root / "stacks"
    if not base.is_dir():
        return []
    hosts = run.rank_to_host() if run is not None else None
    found = [tdd.read_debug_dumps(d, rank_hosts=hosts)[0] for d in sorted(base.iterdir()) if d.is_dir()]
    return [t for t in found if t.num_rows]


def _with_text_stacks(
    tables: dict[SignalKind, pa.Table], root: Path, run: RunInfo | None = None
) -> dict[SignalKind, pa.Table]:
    text = pa.concat_tables([stk.read_stack_files(root), *_debug_dump_stacks(root, run)])
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
    return _with_text_stacks(tables, path, run)
