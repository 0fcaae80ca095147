"""Per-rank phase timelines, spooled to Parquet by a background thread.

    rec = Recorder(run_dir, rank=r, local_rank=lr, host=h)
    with rec.phase("forward"):
        ...
    rec.end_step(step, tokens=n)        # hands the step's rows to the writer thread
    rec.close()                         # final flush (also registered atexit)

On CPU a phase is timed with perf_counter_ns. On GPU it records a pair of CUDA events on the
stream the phase's work runs on (the current, compute stream); the writer thread reads their
elapsed time later with a non-blocking query, so the step never synchronizes the device and the
writer never blocks on it either: a row whose events have not completed yet (a hung kernel) waits
for the next flush while every other row is written. Collectives issued with async_op=True run on
their process group's NCCL stream: `move_work` takes their time from their Work objects, i.e. the
NCCL stream's own start/end events (ProcessGroupNCCL::WorkNCCL::getDuration, bound as
Work._get_duration; recorded when TORCH_NCCL_ENABLE_TIMING=1), and moves it from the phase the
call was made in to `communication`. Without timing (gloo, or NCCL without that variable) the rows
keep their stream-event times.
Rows follow trainctl.schemas timeline; the spool writes `timeline/host=H/part-rank<R>-<chunk>.parquet`
through trainctl.dataset.write_table (atomic rename, so readers never see half a file).
The queue between the step and the writer is bounded: when the writer falls behind, rows are
dropped and counted (logged at close) rather than ever blocking training.

A hung run keeps its timeline: every FLUSH_INTERVAL_S the writer thread takes the rows of the steps
the recorder has completed (under a lock the step takes once per step) and writes them, so a step
that ended more than ~2 s before a hang is on disk whatever the rank does next, even when it is
blocked inside a collective where no Python signal handler can run. On SIGTERM/SIGINT (torchrun's and the
launchers' way to stop a run) the recorder writes everything it holds, then hands the signal to the
handler that was there before (or to the default action): it never swallows the signal.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import queue
import signal
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pyarrow as pa

from trainctl import dataset
from trainctl.schemas import SignalKind

__all__ = ["Recorder", "TimelineSpool", "Row", "work_duration_ns", "WorkTimingUnavailable"]

log = logging.getLogger(__name__)

# (step, phase, start_ts_ns, duration_ns or a resolver returning it (None: not known yet), tokens, source)
Row = tuple[int, str, int, "int | Callable[[], int | None]", "int | None", str]

_TS = pa.timestamp("ns", tz="UTC")

# At most ~FLUSH_INTERVAL_S between a step's end and its rows on disk (issue 13: hung runs keep
# their timeline): the writer takes the completed steps' rows itself on every interval.
FLUSH_INTERVAL_S = 1.5
FLUSH_SIGNALS = (signal.SIGTERM, signal.SIGINT)
# At close, how long rows whose GPU events have not completed are waited for before they are
# dropped (and counted): a kernel that never finishes must not hold the process at exit.
CLOSE_WAIT_S = 5.0


class WorkTimingUnavailable(RuntimeError):
    """The Work keeps no timing: gloo, or NCCL without TORCH_NCCL_ENABLE_TIMING=1."""


def work_duration_ns(work: Any) -> int | None:
    """An async collective's time on its process group's NCCL stream; None while it runs.

    torch 2.13: Work.is_completed() queries the work's end event (no synchronization);
    Work._get_duration() is ProcessGroupNCCL::WorkNCCL::getDuration, the elapsed time in ms
    between the NCCL stream's start and end events, which exist only with timing enabled
    (TORCH_NCCL_ENABLE_TIMING=1); any other backend's Work raises ("doesn't support getDuration").
    """
    if not work.is_completed():
        return None
    try:
        return int(float(work._get_duration()) * 1e6)
    except (RuntimeError, AttributeError) as exc:
        raise WorkTimingUnavailable(str(exc)) from exc


class TimelineSpool:
    """Background writer of one rank's timeline rows into Parquet parts in the run dir."""

    def __init__(
        self,
        run_dir: str | os.PathLike[str],
        *,
        rank: int,
        local_rank: int | None,
        host: str,
        flush_rows: int = 16384,
        flush_interval_s: float = FLUSH_INTERVAL_S,
        max_queue_batches: int = 10_000,
    ) -> None:
        self.run_dir, self.rank, self.local_rank, self.host = run_dir, rank, local_rank, host
        self.flush_rows, self.flush_interval_s = flush_rows, flush_interval_s
        self._q: queue.Queue[list[Row] | threading.Event | None] = queue.Queue(maxsize=max_queue_batches)
        self._pending: list[Row] = []
        self._waiting: list[Row] = []  # rows whose GPU events had not completed at the last flush
        self.unresolved_rows = 0
        # Set by the Recorder: takes the rows of completed steps it still holds (a hung rank never
        # reaches its next hand-over, so the writer fetches them itself every flush interval).
        self.pull: Callable[[], list[Row]] | None = None
        self._chunk = 0
        self.dropped_rows = 0
        self.written_rows = 0
        self._closed = False
        self._thread = threading.Thread(target=self._run, name=f"trainctl-timeline-{rank}", daemon=True)
        self._thread.start()
        atexit.register(self.close)

    def put(self, rows: list[Row]) -> None:
        """Never blocks: a full queue drops the batch and counts it."""
        if self._closed:
            return
        try:
            self._q.put_nowait(rows)
        except queue.Full:
            self.dropped_rows += len(rows)

    def _run(self) -> None:
        last_flush = time.monotonic()
        while True:
            try:
                item = self._q.get(timeout=self.flush_interval_s)
            except queue.Empty:
                item = []
            if item is None:
                break
            if isinstance(item, threading.Event):  # sync(): write now, then say so
                self._flush()
                last_flush = time.monotonic()
                item.set()
                continue
            self._pending.extend(item)
            now = time.monotonic()
            due = now - last_flush >= self.flush_interval_s
            if due and self.pull is not None:
                self._pending.extend(self.pull())
            if self._pending and (len(self._pending) >= self.flush_rows or due):
                self._flush()
            if due:
                last_flush = now
        # drain what arrived before the sentinel
        while True:
            try:
                item = self._q.get_nowait()
            except queue.Empty:
                break
            if isinstance(item, threading.Event):
                item.set()
            elif item:
                self._pending.extend(item)
        self._flush()
        deadline = time.monotonic() + CLOSE_WAIT_S
        while self._waiting and time.monotonic() < deadline:
            time.sleep(0.05)
            self._flush()
        if self._waiting:  # kernels that never finished: their rows cannot be known
            self.unresolved_rows += len(self._waiting)
            self._waiting = []

    def _flush(self) -> None:
        if not self._pending and not self._waiting:
            return
        rows, self._pending, self._waiting = self._waiting + self._pending, [], []
        steps, phases, starts, durs, toks, srcs = [], [], [], [], [], []
        for row in rows:
            step, phase, start_ns, dur, tokens, source = row
            try:
                d = dur() if callable(dur) else dur
            except Exception as exc:  # a CUDA event of a crashed step: its time cannot be known
                log.debug("timeline row %s/%s dropped: %s", step, phase, exc)
                continue
            if d is None:  # its events have not completed: try again at the next flush
                self._waiting.append(row)
                continue
            steps.append(step)
            phases.append(phase)
            starts.append(start_ns)
            durs.append(int(d))
            toks.append(tokens)
            srcs.append(source)
        n = len(steps)
        if not n:
            return
        table = pa.table(
            {
                "rank": pa.array([self.rank] * n, pa.int32()),
                "local_rank": pa.array([self.local_rank] * n, pa.int16()),
                "step": pa.array(steps, pa.int64()),
                "phase": pa.array(phases, pa.string()),
                "start_ts": pa.array(starts, pa.int64()).cast(_TS),
                "duration_ns": pa.array(durs, pa.int64()),
                "tokens": pa.array(toks, pa.int64()),
                "source": pa.array(srcs, pa.string()),
            }
        )
        try:
            dataset.write_table(
                self.run_dir, SignalKind.TIMELINE, self.host, table, part=f"rank{self.rank}-{self._chunk:05d}"
            )
            self._chunk += 1
            self.written_rows += n
        except Exception as exc:  # never let the spool take training down
            log.warning("rank %d: timeline part not written: %s", self.rank, exc)

    def sync(self, timeout_s: float = 5.0) -> bool:
        """Write everything handed over so far; True when it is on disk within `timeout_s`."""
        if self._closed or not self._thread.is_alive():
            return False
        done = threading.Event()
        try:
            self._q.put(done, timeout=timeout_s)
        except queue.Full:
            return False
        return done.wait(timeout_s)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._q.put(None)  # blocking put is fine at close: the writer is draining
        self._thread.join(timeout=30)
        if self.dropped_rows:
            log.warning("rank %d: %d timeline rows dropped (writer fell behind)", self.rank, self.dropped_rows)
        if self.unresolved_rows:
            log.warning(
                "rank %d: %d timeline rows dropped (their GPU events never completed)", self.rank, self.unresolved_rows
            )


class Recorder:
    """Times named phases of each step; hands rows to a TimelineSpool at step end."""

    def __init__(
        self,
        run_dir: str | os.PathLike[str],
        *,
        rank: int,
        local_rank: int | None,
        host: str,
        device: Any = None,
        heartbeat: Any = None,
        enabled: bool = True,
    ) -> None:
        self.enabled = enabled
        self.heartbeat = heartbeat
        self.handover_rows = 512
        self.step = 0
        self._rows: list[Row] = []
        self._completed = 0  # _rows[:_completed] belong to ended steps (the writer may take them)
        # Re-entrant: the signal handler runs on the main thread, possibly while it holds the lock.
        self._lock = threading.RLock()
        self._cuda = None
        if device is not None and getattr(device, "type", str(device)) == "cuda":
            import torch

            self._cuda = torch.cuda
        self.source = "cuda_event" if self._cuda is not None else "perf_counter"
        self.spool = TimelineSpool(run_dir, rank=rank, local_rank=local_rank, host=host) if enabled else None
        self._previous_handlers: dict[int, Any] = {}
        if self.spool is not None:
            self.spool.pull = self._take_completed
            self._install_signal_handlers()

    def _take_completed(self) -> list[Row]:
        """The ended steps' rows, removed from the buffer (the writer thread calls this)."""
        with self._lock:
            k, self._completed = self._completed, 0
            if not k:
                return []
            rows = self._rows[:k]
            del self._rows[:k]
            return rows

    def _install_signal_handlers(self) -> None:
        """Flush on SIGTERM/SIGINT, then chain to what was there (only the main thread may set them)."""
        if threading.current_thread() is not threading.main_thread():
            return
        for sig in FLUSH_SIGNALS:
            try:
                previous = signal.getsignal(sig)
                signal.signal(sig, self._on_signal)
            except (ValueError, OSError):  # not settable here (embedded interpreter): keep the interval flush
                continue
            self._previous_handlers[sig] = previous

    def _on_signal(self, signum: int, frame: Any) -> None:
        try:
            self.flush()
            if self.spool is not None:
                self.spool.sync(timeout_s=5.0)
        except Exception as exc:  # the signal must reach its handler whatever happened here
            log.warning("timeline flush on signal %d failed: %s", signum, exc)
        previous = self._previous_handlers.get(signum, signal.SIG_DFL)
        if callable(previous):
            previous(signum, frame)
        elif previous in (signal.SIG_DFL, None):  # None: set outside Python; take the default
            signal.signal(signum, signal.SIG_DFL)  # the default action: re-raise it (terminate)
            os.kill(os.getpid(), signum)
        # SIG_IGN: the process chose to ignore it before we came; keep ignoring

    @contextlib.contextmanager
    def phase(self, name: str) -> Iterator[None]:
        if not self.enabled:  # off means off, heartbeats included (the A/B baseline)
            yield
            return
        if self.heartbeat is not None:
            self.heartbeat.beat(self.step, name)
        start_ns = time.time_ns()
        if self._cuda is not None:
            # On the stream the phase's kernels are queued on (the current one when it starts);
            # collectives' own NCCL streams are read from their Work objects (move_work).
            stream = self._cuda.current_stream()
            start_evt = self._cuda.Event(enable_timing=True)
            end_evt = self._cuda.Event(enable_timing=True)
            start_evt.record(stream)
            try:
                yield
            finally:
                end_evt.record(stream)

                def resolve(s: Any = start_evt, e: Any = end_evt) -> int | None:
                    # In the writer thread, and non-blocking: a kernel that never ends (a hang)
                    # leaves this row for the next flush instead of stopping the writer.
                    return int(s.elapsed_time(e) * 1e6) if e.query() else None

                self._rows.append((self.step, name, start_ns, resolve, None, self.source))
        else:
            t0 = time.perf_counter_ns()
            try:
                yield
            finally:
                self._rows.append((self.step, name, start_ns, time.perf_counter_ns() - t0, None, self.source))

    def add(self, step: int, phase: str, start_ns: int, duration_ns: int, tokens: int | None, source: str) -> None:
        """Record a row measured elsewhere (the shim's Flight Recorder-derived compute/wait)."""
        if self.enabled:
            self._rows.append((step, phase, start_ns, duration_ns, tokens, source))

    def move_time(self, src: str, dst: str, duration_ns: int) -> None:
        """Move `duration_ns` from phase `src` to phase `dst` of the current step (measured rows only).

        For time measured inside a phase that belongs to another, e.g. tensor-parallel collectives
        inside forward/backward, which are communication (waiting for a tp peer), not this rank's work.
        """
        if not self.enabled or duration_ns <= 0:
            return
        with self._lock:  # indices into _rows: the writer must not take rows meanwhile
            idx = {p: i for i, (_, p, _, d, _, _) in self._current_step_rows() if isinstance(d, int)}
            if src not in idx or dst not in idx:
                return
            i, j = idx[src], idx[dst]
            moved = min(duration_ns, int(self._rows[i][3]) - 1)  # a phase that ran keeps a positive duration
            si, pi, ti, di, ki, ri = self._rows[i]
            self._rows[i] = (si, pi, ti, di - moved, ki, ri)
            sj, pj, tj, dj, kj, rj = self._rows[j]
            self._rows[j] = (sj, pj, tj, dj + moved, kj, rj)

    def move_work(self, src: str, dst: str, works: list[Any]) -> None:
        """Move the NCCL-stream time of `works` (async collectives issued during phase `src` of the
        current step) from `src` to `dst`: GPU rows, whose durations are resolved later.

        Each work's time is its own stream's (work_duration_ns). Where the backend keeps none
        (WorkTimingUnavailable) nothing moves and the rows keep their stream-event times.
        """
        if not self.enabled or not works:
            return
        works = list(works)

        def total() -> int | None:
            try:
                got = [work_duration_ns(w) for w in works]
            except WorkTimingUnavailable:
                return 0
            return None if any(d is None for d in got) else sum(got)  # type: ignore[misc]

        def less(base: Any) -> Any:
            def resolve() -> int | None:
                b, t = (base() if callable(base) else base), total()
                return None if b is None or t is None else max(1, b - t)  # a phase that ran stays positive

            return resolve

        def more(base: Any) -> Any:
            def resolve() -> int | None:
                b, t = (base() if callable(base) else base), total()
                return None if b is None or t is None else b + t

            return resolve

        with self._lock:
            for i, (st, p, t0, d, k, r) in self._current_step_rows():
                if p == src:
                    self._rows[i] = (st, p, t0, less(d), k, r)
                elif p == dst:
                    self._rows[i] = (st, p, t0, more(d), k, r)

    def _current_step_rows(self, step: int | None = None) -> list[tuple[int, Row]]:
        """(index, row) of the step's rows: the tail of the buffer, found without walking the
        whole buffer (it holds up to `handover_rows` rows, and this runs twice per step)."""
        step = self.step if step is None else step
        out = []
        for i in range(len(self._rows) - 1, -1, -1):
            if self._rows[i][0] != step:
                break
            out.append((i, self._rows[i]))
        return out

    def end_step(self, step: int | None = None, *, tokens: int | None = None, flush: bool = True) -> None:
        """Close step `step` (default: the current one): stamp tokens on its rows and hand them over."""
        step = self.step if step is None else step
        with self._lock:
            if tokens is not None:
                for i, (s, p, t, d, _, src) in self._current_step_rows(step):
                    self._rows[i] = (s, p, t, d, tokens, src)
            # Hand over in batches: waking the writer thread every step costs GIL hand-offs that
            # show up as step time on a CPU-bound rank (measured in bench/instrumentation_overhead.py).
            # Between batches the writer takes the ended steps' rows itself (_take_completed).
            if flush and len(self._rows) >= self.handover_rows and self.spool is not None:
                rows, self._rows = self._rows, []
                self.spool.put(rows)
            self._completed = len(self._rows)
        self.step = step + 1

    def flush(self) -> None:
        with self._lock:
            if self._rows and self.spool is not None:
                rows, self._rows = self._rows, []
                self._completed = 0
                self.spool.put(rows)

    def close(self) -> None:
        self.flush()
        if self.spool is not None:
            self.spool.close()
        for sig, previous in self._previous_handlers.items():
            with contextlib.suppress(ValueError, OSError, TypeError):
                if signal.getsignal(sig) == self._on_signal:
                    signal.signal(sig, previous)
        self._previous_handlers = {}
