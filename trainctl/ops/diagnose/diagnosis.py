"""`trainctl diagnose PATH`: detect what PATH is, load its signals, run the analyzers.

PATH may be a run dir (run.json + tables + raw artefacts), a collected dataset (tables only), a
directory of raw Flight Recorder dumps, the dump dir of torch's debug server, or one log file. The
kind is detected, never asked for.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Mapping
from enum import Enum
from pathlib import Path

import pyarrow as pa

from trainctl import dataset
from trainctl.analyzers import Analysis, run_analysis
from trainctl.errors import DatasetError, InputError, TrainctlError
from trainctl.findings import Report
from trainctl.ops.diagnose import hang_inputs, logs_input, nccl_inputs, run_events
from trainctl.ops.diagnose.window import TimeWindow, apply_window, timed_rows_kept, window_note
from trainctl.rundir import RunInfo, read_run_info
from trainctl.schemas import SignalKind
from trainctl.signals import LazyTable, Signals, TableLike

logger = logging.getLogger(__name__)

__all__ = ["InputKind", "detect_input", "load_signals", "diagnose_path", "RAW_PARSERS"]


class InputKind(str, Enum):
    RUN_DIR = "run_dir"
    DATASET = "dataset"
    FLIGHT_RECORDER = "flight_recorder"
    TORCH_DEBUG_DUMPS = "torch_debug_dumps"
    LOG_FILE = "log_file"


# Tables larger than this stay lazy so analyzers can aggregate out of core.
LAZY_ROWS = 5_000_000
# Kinds whose analyzers hand the files to DuckDB (the straggler analysis, the throughput summary):
# loaded as a LazyTable (files + footers, no pyarrow.dataset, which imports pandas). The other kinds'
# analyzers scan a pyarrow Dataset, which keeps the footers open_dataset read; a LazyTable opened
# for them would read every footer a second time (0.1 s per 1,024 files).
_READ_BY_DUCKDB = frozenset({SignalKind.TIMELINE})

# Parsers of raw artefacts in a run dir (or dataset) that are not tables yet: Flight Recorder
# dumps, raw stacks, rank and kernel logs, error files. Each takes the directory and its RunInfo
# (or None) and returns tables by kind; a kind is taken from them only when the directory holds no
# parsed table of that kind, and what several parsers return for one kind is concatenated (rank
# logs and a drill's kernel log are both log_events).
RawParser = Callable[[Path, "RunInfo | None"], Mapping[SignalKind, pa.Table]]
RAW_PARSERS: tuple[RawParser, ...] = (
    logs_input.parse_run_dir_logs,
    run_events.parse_run_dir_events,
    hang_inputs.parse_run_dir_hang_artefacts,
    nccl_inputs.parse_run_dir_nccl,
)


def detect_input(path: Path) -> InputKind:
    if not path.exists():
        raise InputError(
            f"{path}: no such file or directory; pass a run dir, a collected dataset, a Flight Recorder dump dir or a log file"
        )
    if path.is_file():
        if (fmt := hang_inputs.fr_dump_format(path)) is not None:
            what = "a pickle" if fmt == "pickle" else "a JSON file"
            raise InputError(
                f"{path}: {what}, not a log (torch's Flight Recorder dump of one rank); pass the folder that holds "
                "the dumps"
            )
        return InputKind.LOG_FILE
    if not path.is_dir():  # a FIFO, a socket or a device: reading it could block forever
        raise InputError(
            f"{path}: not a regular file or a directory; pass a run dir, a collected dataset, a Flight Recorder "
            "dump dir or a log file"
        )
    if not any(path.iterdir()):
        raise InputError(
            f"{path}: directory is empty; expected a run dir (run.json), a dataset (<kind>/host=<host>/), Flight Recorder dumps or a log file"
        )
    if read_run_info(path) is not None:
        return InputKind.RUN_DIR
    if any((path / k.value).is_dir() for k in SignalKind):
        return InputKind.DATASET
    if hang_inputs.detect_fr_dir(path):
        return InputKind.FLIGHT_RECORDER
    if hang_inputs.detect_debug_dump_dir(path):
        return InputKind.TORCH_DEBUG_DUMPS
    raise InputError(
        f"{path}: not a trainctl run dir (no run.json), not a dataset (no <kind>/host=<host>/ folders) "
        "and holds no Flight Recorder or torch debug server dumps; pass the --run-dir of `trainctl launch` or the --out of `trainctl collect`"
    )


def _load_tables(root: Path) -> dict[SignalKind, TableLike | LazyTable]:
    tables: dict[SignalKind, TableLike | LazyTable] = {}
    for kind in dataset.kinds_present(root):
        try:
            tables[kind] = _load_kind(root, kind)
        except DatasetError:
            # A torn part (a host's collect cut off, a writer killed mid-file) or one of another shape: said and
            # skipped, and the kind read from the others (README "Hostile and broken input": exit 6, not no answer).
            bad = dataset.unreadable_parts(root, kind)
            if not bad:
                raise
            for exc in bad.values():
                logger.warning("%s", exc)
            if len(bad) < len(dataset.list_parts(root, kind)):
                tables[kind] = _load_kind(root, kind, frozenset(bad))
    return tables


def _load_kind(root: Path, kind: SignalKind, skip: frozenset[Path] = frozenset()) -> TableLike | LazyTable:
    # Every footer is read once: schema check + row count.
    if kind in _READ_BY_DUCKDB:
        lazy: TableLike | LazyTable = dataset.open_lazy(root, kind, skip)
        rows = lazy.num_rows
    else:
        lazy = dataset.open_dataset(root, kind, skip)
        rows = dataset.dataset_rows(lazy)
    return lazy if rows > LAZY_ROWS else dataset.read_table(root, kind, validate=False, skip=skip)


def load_signals(path: Path, kind: InputKind | None = None) -> Signals:
    kind = kind or detect_input(path)
    if kind is InputKind.LOG_FILE:
        text = logs_input.read_log_file(path)  # once, for both parsers (a .gz decompressed once)
        tables: dict[SignalKind, TableLike] = {SignalKind.LOG_EVENTS: logs_input.parse_pasted_log(path, text)}
        # A pasted log may hold NCCL's INFO init lines (which network, which transport per peer).
        nccl = nccl_inputs.parse_nccl_text(text, str(path))
        tables.update({k: t for k, t in nccl.items() if t.num_rows})
        return Signals(None, tables, str(path))
    if kind is InputKind.FLIGHT_RECORDER:
        tables, run = hang_inputs.load_fr_dir(path)
        return Signals(run, dict(tables), str(path))
    if kind is InputKind.TORCH_DEBUG_DUMPS:
        tables, run = hang_inputs.load_debug_dump_dir(path)
        return Signals(run, dict(tables), str(path))
    run = read_run_info(path)
    tables = _load_tables(path)
    raw: dict[SignalKind, list[pa.Table]] = {}
    for parse in RAW_PARSERS:
        try:
            parsed = parse(path, run)
        except TrainctlError:
            raise
        except (OSError, RecursionError, MemoryError, ValueError, TypeError, KeyError, IndexError, ArithmeticError,
                AttributeError, UnicodeError, pa.ArrowException) as exc:  # fmt: skip
            # One family of raw artefacts that no parser was written for must not take the others
            # (or the tables) down: skip it, say which, analyse the rest.
            logger.warning(
                "%s: %s could not parse its files (%s: %s); skipped, the rest is analysed",
                path, parse.__module__.rsplit(".", 1)[-1], type(exc).__name__, str(exc)[:200],
            )  # fmt: skip
            continue
        for k, t in parsed.items():
            if k not in tables and t.num_rows:
                raw.setdefault(k, []).append(t)
    for k, ts in raw.items():
        tables[k] = ts[0] if len(ts) == 1 else pa.concat_tables(ts, promote_options="default")
    if not tables:
        raise InputError(f"{path}: holds no signals yet (no tables, dumps or logs); did the run start? see {path}/logs")
    return Signals(run, tables, str(path))


class _SkipRecorder(logging.Handler):
    """Collects the warnings trainctl's loaders and analyzers log while one diagnosis runs: each is
    an input (file, table, dump) that was skipped or only partly read, listed in Report.skipped."""

    def __init__(self, limit: int = 200) -> None:
        super().__init__(logging.WARNING)
        self.lines: list[str] = []
        self.dropped = 0
        self.limit = limit

    def emit(self, record: logging.LogRecord) -> None:
        if len(self.lines) < self.limit:
            self.lines.append(record.getMessage()[:500])
        else:
            self.dropped += 1


def diagnose_path(path: str | os.PathLike[str], window: TimeWindow | None = None) -> Report:
    """Diagnose PATH; `window` keeps only the rows of a time range (diagnose --since/--until)."""
    p = Path(path)
    kind = detect_input(p)
    recorder = _SkipRecorder()
    root = logging.getLogger("trainctl")
    root.addHandler(recorder)
    try:
        # ranks/ is read for the run events' hosts and again for the throughput summary: one read, one warning.
        with run_events.rank_reports_read_once():
            signals = load_signals(p, kind)
            kept = None
            kept_rows = timed_rows = 0
            if window:
                whole = dict(signals.tables)
                signals = Signals(signals.run, apply_window(whole, window), signals.origin)
                kept_rows, timed_rows = timed_rows_kept(whole, signals.tables)
                kept = window_note(kept_rows, timed_rows, window)
            # None of the run's records lies in the window: what is left is rows without a time, which cannot be
            # placed in it either; read alone they make other verdicts than the run's (an exit without the error file
            # that explains it), so nothing is analysed and the window's note says why.
            missed = timed_rows > 0 and kept_rows == 0  # both 0 without a window
            analysis = Analysis(()) if missed else run_analysis(signals)
            summary = _throughput(p, signals)  # inside: a rank report it cannot read is said and listed too
    finally:
        root.removeHandler(recorder)
    skipped = (
        recorder.lines + ([f"... and {recorder.dropped} more"] if recorder.dropped else []) + list(analysis.skipped)
    )
    notes = analysis.notes if kept is None else (*analysis.notes, kept)
    if kind is InputKind.LOG_FILE and not analysis.findings and not window:  # never a bare "no findings"
        notes = (*notes, logs_input.quiet_log_note(p, signals.tables[SignalKind.LOG_EVENTS]))
    return Report(
        run_id=signals.run.run_id if signals.run else None,
        findings=analysis.findings,
        source=str(p),
        source_kind=kind.value,
        notes=notes,
        skipped=tuple(dict.fromkeys(skipped)),
        summary=summary,
    )


def _throughput(p: Path, signals: Signals) -> dict:
    """Step time, tokens/s and MFU (analyzers/throughput.py) from the timeline (DuckDB over its
    files, as the straggler analysis reads it) and the ranks' own reports (ranks/rank-R.json: tp,
    model FLOPs per token, peak FLOP/s, where the trainer wrote them)."""
    from trainctl.analyzers.throughput import summarize

    t = signals.source(SignalKind.TIMELINE)  # a LazyTable stays unopened: DuckDB reads its files
    if t is None:
        return {}
    return summarize(t, run_events.read_rank_reports(p) if p.is_dir() else {}) or {}
