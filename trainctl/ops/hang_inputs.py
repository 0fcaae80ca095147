"""Registers the hang-related raw inputs with `trainctl diagnose` (trainctl.ops.diagnosis).

- a directory of raw Flight Recorder dumps (any prefix, pickle or JSON, no run.json): FR_DIR_*;
- in a run dir or collected dataset: `fr/<host>/rank-R.pkl|.json` (Flight Recorder) and
  `stacks/<host>/rank-R.txt` (dump_traceback) / `stacks/<host>/rank-R.pyspy.txt` (py-spy): RAW_PARSERS.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import pyarrow as pa

from trainctl.collectors import flight_recorder as fr
from trainctl.collectors import stacks as stk
from trainctl.rundir import RunInfo
from trainctl.schemas import SignalKind

__all__ = ["detect_fr_dir", "load_fr_dir", "parse_run_dir_hang_artefacts", "register"]


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


def register() -> None:
    # Imported by trainctl.ops.diagnosis at its end, so the registries exist by now.
    from trainctl.ops import diagnosis

    if detect_fr_dir not in diagnosis.FR_DIR_DETECT:
        diagnosis.FR_DIR_DETECT.append(detect_fr_dir)
        diagnosis.FR_DIR_LOAD.append(load_fr_dir)
        diagnosis.RAW_PARSERS.append(parse_run_dir_hang_artefacts)


register()
