"""`trainctl diagnose PATH`: detect what PATH is, load its signals, run the analyzers.

PATH may be a run dir (run.json + tables + raw artefacts), a collected dataset (tables only), a
directory of raw Flight Recorder dumps, the dump dir of torch's debug server, or one log file. The
kind is detected, never asked for.
"""

from __future__ import annotations

import errno
import logging
import os
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Generic, NoReturn, TypeVar

import duckdb
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

__all__ = ["InputKind", "detect_input", "load_signals", "read_path", "PathRead", "diagnose_path", "RAW_PARSERS"]

T = TypeVar("T")


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
    if not path.exists() and path.is_symlink():
        try:
            target = path.resolve(strict=True)
        except RuntimeError:  # Python 3.11: a loop of links
            what = "a symbolic link that leads to no file (a loop of links)"
        except OSError as exc:
            what = (
                "a symbolic link that leads to no file (a loop of links)"
                if exc.errno == errno.ELOOP
                else f"a symbolic link to {path.readlink()}, which does not exist"
            )
        else:  # pragma: no cover - exists() said no
            what = f"a symbolic link to {target}"
        raise InputError(f"{path}: {what}; fix or remove the link, or pass the file it should lead to")
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


def _load_tables(root: Path) -> tuple[dict[SignalKind, TableLike | LazyTable], dict[Path, DatasetError]]:
    """The tables of every kind present, and the part files left out as unreadable (each said on stderr)."""
    tables: dict[SignalKind, TableLike | LazyTable] = {}
    unreadable: dict[Path, DatasetError] = {}
    for kind in dataset.kinds_present(root):
        # A part whose footer reads but whose data does not (a corrupt page) is found by read_table as it reads
        # the kind, and left out in passing; a kind too big to load is read later, by the analyzers, and its
        # corrupt parts are found there (_without_unreadable_parts).
        bad: dict[Path, DatasetError] = {}
        try:
            table: TableLike | LazyTable | None = _load_kind(root, kind, unreadable=bad)
        except DatasetError:
            # A torn part (a host's collect cut off, a writer killed mid-file) or one of another shape: said and
            # skipped, and the kind read from the others (README "Hostile and broken input": exit 6, not no answer).
            bad = dataset.unreadable_parts(root, kind)
            if not bad:
                raise
            table = None
            if len(bad) < len(dataset.list_parts(root, kind)):
                table = _load_kind(root, kind, frozenset(bad), unreadable=bad)
        for exc in bad.values():
            logger.warning("%s", exc)
        unreadable.update(bad)
        if table is not None and not (bad and len(bad) >= len(dataset.list_parts(root, kind))):
            tables[kind] = table
    return tables, unreadable


def _all_unreadable(path: Path, unreadable: Mapping[Path, DatasetError]) -> DatasetError:
    """The error for a run dir or dataset whose every table file was unreadable (each said above it): not
    "did the run start?", which sends the user to look at the run instead of at the files. Said the same under
    every command that reads a run (diagnose, report, export, compare), so the fix names none of them."""
    names = [str(p.relative_to(path)) if p.is_relative_to(path) else str(p) for p in sorted(unreadable)]
    shown = ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
    files = "its only Parquet file" if len(names) == 1 else f"all {len(names)} of its Parquet files"
    return DatasetError(
        f"{path}: nothing left to read: {files} could not be read ({shown}; said above: torn or corrupt) and it holds "
        "no dumps or logs; re-run trainctl collect and run this command again on the new copy"
    )


def _load_kind(
    root: Path,
    kind: SignalKind,
    skip: frozenset[Path] = frozenset(),
    unreadable: dict[Path, DatasetError] | None = None,
) -> TableLike | LazyTable:
    """The kind's table, loaded (read_table records parts whose data it cannot read in `unreadable` and leaves
    them out) or, past LAZY_ROWS, lazy: footers read, data not."""
    # Every footer is read once: schema check + row count.
    if kind in _READ_BY_DUCKDB:
        lazy: TableLike | LazyTable = dataset.open_lazy(root, kind, skip)
        rows = lazy.num_rows
    else:
        lazy = dataset.open_dataset(root, kind, skip)
        rows = dataset.dataset_rows(lazy)
    if rows > LAZY_ROWS:
        return lazy
    return dataset.read_table(root, kind, validate=False, skip=skip, unreadable=unreadable)


def load_signals(path: Path, kind: InputKind | None = None, *, live: bool = False) -> Signals:
    """live: PATH is watched as it grows (diagnose --watch): a log file's end is not where its run stopped."""
    kind = kind or detect_input(path)
    if kind is InputKind.LOG_FILE:
        text = logs_input.read_log_file(path)  # once, for both parsers (a .gz decompressed once)
        tables: dict[SignalKind, TableLike] = {
            SignalKind.LOG_EVENTS: logs_input.parse_pasted_log(path, text, live=live)
        }
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
    tables, unreadable = _load_tables(path)
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
    if not tables and unreadable:
        raise _all_unreadable(path, unreadable)
    if not tables and (flat := sorted(f for k in SignalKind for f in (path / k.value).glob("*.parquet"))):
        # Parts written straight into <kind>/ (by another tool, or moved by hand): the dataset reader reads a kind by
        # its host=<host>/ folders (DESIGN.md), so these are not "no signals", they are in the wrong place.
        raise InputError(
            f"{flat[0].parent}: {len(flat)} Parquet part(s) not in host=<host>/ folders; a dataset holds each kind by "
            f"host, as `trainctl collect` writes it: move each host's parts to {flat[0].parent}/host=<host>/"
        )
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

    def skipped(self) -> tuple[str, ...]:
        return (*self.lines, *([f"... and {self.dropped} more"] if self.dropped else []))


class _Once(logging.Filter):
    """Lets each message of this thread through once, on every handler it is given to: a lazy table's corrupt part
    makes the work run twice (_without_unreadable_parts), and what the first run said (an analyzer's warning) would
    be said again. Other threads' records (a supervisor's own) pass as they are."""

    def __init__(self) -> None:
        super().__init__()
        self._thread = threading.get_ident()
        self._first: dict[tuple[int, str], logging.LogRecord] = {}

    def filter(self, record: logging.LogRecord) -> bool:
        if record.thread != self._thread:
            return True
        # The same record passes each handler: it goes on to all of them, a later one with its message to none.
        return self._first.setdefault((record.levelno, record.getMessage()), record) is record


@contextmanager
def _each_message_once(name: str = "trainctl") -> Iterator[None]:
    """Inside: each message logged under `name` reaches each handler it would reach (stderr, _SkipRecorder) once."""
    handlers: list[logging.Handler] = []
    log: logging.Logger | None = logging.getLogger(name)
    while log is not None:
        handlers += log.handlers
        log = log.parent if log.propagate else None
    if not handlers and logging.lastResort is not None:  # what logging prints to when nothing is configured
        handlers = [logging.lastResort]
    once = _Once()
    for h in handlers:
        h.addFilter(once)
    try:
        yield
    finally:
        for h in handlers:
            h.removeFilter(once)


@dataclass(frozen=True)
class PathRead(Generic[T]):
    """What `read_path` gives: the work's result, and the warnings said on stderr while the path was read (each an
    input skipped or only partly read: a torn or corrupt Parquet part, a rank report that does not parse, an analyzer
    that failed on its values)."""

    result: T
    skipped: tuple[str, ...]


def read_path(
    path: str | os.PathLike[str],
    work: Callable[[Signals], T],
    *,
    kind: InputKind | None = None,
    analysis: Callable[[T], Analysis] | None = None,
    failed: Callable[[T], bool] = lambda _: False,
    live: bool = False,
) -> PathRead[T]:
    """Load PATH's signals and run `work` over them, the one way every command that reads a run or dataset reads it
    (diagnose, report, export, compare): a torn or corrupt Parquet part is said on stderr and left out, and the rest
    is read; when nothing is left, one error says so (`_all_unreadable`).

    `work` makes every read of the data (analysis, heat-maps, the trace): a lazy table's corrupt part is met only
    there, and `work` is then run once more without it (_without_unreadable_parts). `analysis`: where its result
    holds run_analysis's Analysis. An analyzer that raised (caught by run_analysis) may have met such a part, so the
    work is retried too; one that still fails is said on stderr after PATH's name, once, and is among the skipped.
    `failed`: whether the result shows some other read that failed inside the work (diagnose's throughput summary),
    retried the same way. `live`: PATH is watched as it grows (load_signals).
    """
    p = Path(path)
    kind = kind or detect_input(p)
    recorder = _SkipRecorder()
    root = logging.getLogger("trainctl")
    root.addHandler(recorder)

    def failed_inside(done: T) -> bool:
        return bool(analysis is not None and analysis(done).failed) or failed(done)

    try:
        # ranks/ is read for the run events' hosts and again for the throughput summary: one read, one warning.
        with run_events.rank_reports_read_once(), _each_message_once():
            result = _without_unreadable_parts(p, load_signals(p, kind, live=live), work, failed_inside)
            for line in analysis(result).skipped if analysis is not None else ():
                logger.warning("%s: %s", p, line)
    finally:
        root.removeHandler(recorder)
    return PathRead(result, recorder.skipped())


def diagnose_path(path: str | os.PathLike[str], window: TimeWindow | None = None, *, live: bool = False) -> Report:
    """Diagnose PATH; `window` keeps only the rows of a time range (diagnose --since/--until); `live`: PATH is
    watched as it grows (diagnose --watch), so a log file's end is where its run has got to, not where it stopped
    (the readings of a log on its own, such as a loop that stopped, are not made)."""
    p = Path(path)
    kind = detect_input(p)
    read = read_path(
        p,
        lambda signals: _analysed(p, signals, window),
        kind=kind,
        analysis=lambda done: done.analysis,
        failed=lambda done: bool(done.skipped),
        live=live,
    )
    done = read.result
    _say_skipped(done.skipped)
    signals, analysis = done.signals, done.analysis
    skipped = read.skipped + done.skipped
    notes = analysis.notes if done.kept is None else (*analysis.notes, done.kept)
    if kind is InputKind.LOG_FILE and not analysis.findings and not window and not live:  # never a bare "no findings"
        notes = (*notes, logs_input.quiet_log_note(p, signals.tables[SignalKind.LOG_EVENTS]))
    if (
        kind is InputKind.LOG_FILE
        and not live
        and (fresh := logs_input.fresh_log_note(p, analysis.findings, time.time()))
    ):
        notes = (*notes, fresh)
    return Report(
        run_id=signals.run.run_id if signals.run else None,
        findings=analysis.findings,
        source=str(p),
        source_kind=kind.value,
        notes=notes,
        # Not de-duplicated here: read_path's once-only filter (_each_message_once) lists a warning said in both
        # passes of a retried read once, and the throughput summary's line is never among read_path's.
        skipped=skipped,
        summary=done.summary,
    )


def _say_skipped(lines: tuple[str, ...]) -> None:
    """Say on stderr what `_analysed` skipped outside the analyzers (the throughput summary), as read_path says every
    other skip: only once the read is done, since a retry without a corrupt part (_without_unreadable_parts) may
    have made the summary after all."""
    for line in lines:
        logger.warning("%s", line)


# What a Parquet reader raises on a file whose footer reads but whose data pages do not (pyarrow: OSError,
# ArrowInvalid; DuckDB: duckdb.Error), wherever a lazy table is first read.
_READ_ERRORS = (OSError, pa.ArrowException, duckdb.Error)


@dataclass(frozen=True)
class _Analysed:
    signals: Signals  # as analysed: windowed where a window was given
    analysis: Analysis
    summary: dict
    kept: str | None  # the window's note (None: no window)
    skipped: tuple[str, ...] = ()  # what failed outside the analyzers (the throughput summary)


def _analysed(p: Path, signals: Signals, window: TimeWindow | None) -> _Analysed:
    """Window, analysers and throughput summary over `signals`: where a lazy table's data is first read."""
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
    try:
        summary = _throughput(p, signals)  # inside: a rank report it cannot read is said and listed too
    except _READ_ERRORS as exc:  # a summary it cannot read costs the summary, never the findings
        logger.debug("throughput summary failed", exc_info=True)
        why = _why(exc)[:200]
        return _Analysed(
            signals, analysis, {}, kept, (f"throughput summary: failed on this input ({why}); the findings stand",)
        )
    return _Analysed(signals, analysis, summary, kept)


def _without_unreadable_parts(
    p: Path, signals: Signals, work: Callable[[Signals], T], failed: Callable[[T], bool]
) -> T:
    """`work(signals)`, and again without the parts of a lazy table whose data turned out unreadable, if any did.

    A part whose footer reads but whose data pages are corrupt passes every footer check. A loaded table met it
    as read_table read it (_load_tables left it out); a lazy one (past LAZY_ROWS: the straggler analysis gives its
    files to DuckDB, 49M rows in the benchmarks) is first read here, by the window, an analyzer, the heat-maps or
    the trace. Decoding every page up front to rule corruption out would read the whole table twice on every
    read, and nothing cheaper (footers, page headers) can see a corrupt compressed page. So the read is attempted
    where it is made; only when something failed are the lazy tables' files decoded one by one (in threads) to
    find which parts are unreadable, and, if some are, they are said, left out, and the work is done once more
    (the decode found them all, so once is enough). A failure that no part explains stands as it failed.
    """
    error: BaseException | None = None
    try:
        done = work(signals)
    except _READ_ERRORS as exc:  # the work read a lazy table outside an analyzer
        error = exc
    if error is None and not failed(done):
        return done
    bad = _unreadable_lazy_parts(signals)
    if not bad:
        if error is None:
            return done
        _read_failed(p, error)
    for exc in bad.values():
        logger.warning("%s", exc)
    try:
        return work(_without_parts(p, signals, bad))
    except _READ_ERRORS as exc:
        _read_failed(p, exc)


def _why(exc: BaseException) -> str:
    return dataset.one_line(f"{type(exc).__name__}: {exc}")


def _read_failed(p: Path, exc: BaseException) -> NoReturn:
    """Raise what `exc` means, met by a read that no unreadable part explains."""
    if isinstance(exc, OSError) and exc.errno is not None:
        raise exc  # the system refused a file (a full disk, an output folder missing): trainctl.cli.app names it
    why = _why(exc)[:300]
    raise DatasetError(
        f"{p}: its tables could not be read ({why}) and no single part was found unreadable; "
        "re-collect the run's data (-vv shows where)"
    ) from exc


def _unreadable_lazy_parts(signals: Signals) -> dict[Path, DatasetError]:
    """Every part of the lazy tables whose data cannot be decoded (a full read of each: only after a failure)."""
    files = [f for k in signals.tables for f in signals.files(k) or ()]
    if not files:
        return {}
    with ThreadPoolExecutor(max_workers=min(8, os.cpu_count() or 1)) as pool:  # pyarrow decodes without the GIL
        found = list(pool.map(dataset.check_data, files))
    return {Path(f): e for f, e in zip(files, found, strict=True) if e is not None}


def _without_parts(root: Path, signals: Signals, bad: Mapping[Path, DatasetError]) -> Signals:
    """`signals` with the lazy tables that held a part in `bad` opened again without it (a kind left with no
    part is left out, as one whose every part is torn)."""
    tables: dict[SignalKind, TableLike | LazyTable] = {}
    for kind in signals.tables:
        t = signals.source(kind)
        assert t is not None
        files = {Path(f) for f in signals.files(kind) or ()}
        if files.isdisjoint(bad):
            tables[kind] = t
        elif kept := files - bad.keys():
            # The parts open before, less the bad ones: the torn ones _load_tables left out stay out.
            skip = frozenset(part.path for part in dataset.list_parts(root, kind) if part.path not in kept)
            tables[kind] = _load_kind(root, kind, skip)
    if not tables:  # as load_signals says it when the loaded tables were all unreadable (their footers read again)
        torn = {p: e for k in dataset.kinds_present(root) for p, e in dataset.unreadable_parts(root, k).items()}
        raise _all_unreadable(root, {**torn, **bad})
    return Signals(signals.run, tables, signals.origin)


def _throughput(p: Path, signals: Signals) -> dict:
    """Step time, tokens/s and MFU (analyzers/throughput.py) from the timeline (DuckDB over its
    files, as the straggler analysis reads it) and the ranks' own reports (ranks/rank-R.json: tp,
    model FLOPs per token, peak FLOP/s, where the trainer wrote them)."""
    from trainctl.analyzers.throughput import summarize

    t = signals.source(SignalKind.TIMELINE)  # a LazyTable stays unopened: DuckDB reads its files
    if t is None:
        return {}
    return summarize(t, run_events.read_rank_reports(p) if p.is_dir() else {}) or {}
