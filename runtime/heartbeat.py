"""Per-rank heartbeats: heartbeats/rank-R.json = {"rank","host","pid","step","phase","ts_ns"}.

`beat()` only stores the latest (step, phase) in memory (a few hundred ns); a daemon thread
rewrites the file atomically (temp file + rename) when the value changed, at most every
`interval_s`. So a step never waits on the file system, and a rank that stops making progress
stops changing its file: the launcher reads "no progress" from the file's content, with its own
clock, so host clock offsets do not matter.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from pathlib import Path

from trainctl.rundir import heartbeat_path

__all__ = ["Heartbeat", "read_heartbeat"]

log = logging.getLogger(__name__)


def _write_atomic(path: Path, text: str) -> None:
    # No fsync: readers need atomicity (rename), not durability across power loss, and an fsync
    # per phase would cost more than the whole instrumentation budget.
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


class Heartbeat:
    def __init__(self, run_dir: str | os.PathLike[str], rank: int, host: str, *, interval_s: float = 0.5) -> None:
        self.path = heartbeat_path(run_dir, rank)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.rank, self.host, self.pid = rank, host, os.getpid()
        self.interval_s = interval_s
        self._state: tuple[int, str, int] = (-1, "start", time.time_ns())
        self._written: tuple[int, str, int] | None = None
        self._stop = threading.Event()
        self._write()
        self._thread = threading.Thread(target=self._run, name=f"trainctl-heartbeat-{rank}", daemon=True)
        self._thread.start()

    def beat(self, step: int, phase: str) -> None:
        self._state = (step, phase, time.time_ns())  # one tuple store: atomic under the GIL

    def _write(self) -> None:
        state = self._state
        if state == self._written:
            return
        step, phase, ts_ns = state
        body = {"rank": self.rank, "host": self.host, "pid": self.pid, "step": step, "phase": phase, "ts_ns": ts_ns}
        try:
            _write_atomic(self.path, json.dumps(body))
            self._written = state
        except OSError as exc:  # a full disk must not kill training; the launcher will see no progress
            log.warning("heartbeat %s not written: %s", self.path, exc)

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            self._write()

    def close(self, *, final_phase: str | None = "done") -> None:
        if final_phase is not None:
            self.beat(self._state[0], final_phase)
        self._stop.set()
        self._thread.join(timeout=2)
        self._write()


def read_heartbeat(path: str | os.PathLike[str]) -> dict | None:
    """The heartbeat's content, or None when absent or caught mid-replace (readers retry next poll)."""
    try:
        return json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return None
