"""Instrument an unmodified user training script (it never imports trainctl).

    python -m torch.distributed.run ... -m trainctl.runtime.shim train.py --its --args

What the shim adds around `runpy.run_path(train.py)`:
- `init_process_group` is wrapped: after it returns, the rank starts its debug server (Flight
  Recorder + stack dumps on request), writes ranks/rank-R.json and starts its heartbeat.
- A global optimizer step post hook marks step boundaries (`step` rows; heartbeat per step).
- DataLoader iteration is timed as the `data` phase (sum of `next()` time within the step).
- Flight Recorder (recorded on gloo since torch 2.8) gives the wall-clock time each collective
  was created on this rank. Every ~20 steps and at exit the shim reads its own buffer
  (`_dump_fr_trace_json`) and writes, per step, `compute` = step start -> first collective of the
  step (input + forward + backward up to the first gradient bucket, as this rank saw them) and
  `wait` = first collective -> step end. A rank that is slow before its collectives shows a long
  `compute`; its peers show the matching long `wait`. Both are intra-rank durations.
- At exit the full Flight Recorder JSON is saved to fr/H/rank-R.json.
"""

from __future__ import annotations

import atexit
import json
import logging
import os
import runpy
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from trainctl.rundir import atomic_write_text, fr_dump_dir

log = logging.getLogger("trainctl.runtime.shim")

FR_READ_EVERY_STEPS = 20


class ShimState:
    """Step boundaries and Flight Recorder-derived phases of this rank."""

    def __init__(self, run_dir: str, host: str, rank: int, local_rank: int, world: int) -> None:
        self.run_dir, self.host, self.rank, self.local_rank, self.world = run_dir, host, rank, local_rank, world
        self.step = 0
        self.boundaries_ns: list[int] = []  # wall-clock end of step i at index i
        self.step0_start_ns: int | None = None
        self.data_ns = 0  # DataLoader time within the current step
        self.emitted_upto = 0  # steps < this already have compute/wait rows
        self.lock = threading.Lock()
        self.rec: Any = None
        self.hb: Any = None
        self.server: Any = None
        self.finalized = False

    # --- set up once the process group exists ---------------------------------------------------
    def on_init(self) -> None:
        from trainctl.runtime import debug_server
        from trainctl.runtime.heartbeat import Heartbeat
        from trainctl.runtime.instrument import Recorder

        self.server = debug_server.start(self.run_dir, self.rank)
        body = {
            "rank": self.rank,
            "local_rank": self.local_rank,
            "host": self.host,
            "pid": os.getpid(),
            "world_size": self.world,
        }
        atomic_write_text(Path(self.run_dir) / "ranks" / f"rank-{self.rank}.json", json.dumps(body))
        self.hb = Heartbeat(self.run_dir, self.rank, self.host)
        self.hb.beat(0, "compute")
        self.rec = Recorder(self.run_dir, rank=self.rank, local_rank=self.local_rank, host=self.host, heartbeat=None)
        self.init_done_ns = time.time_ns()

    # --- hooks ----------------------------------------------------------------------------------
    def on_data(self, start_ns: int, dur_ns: int) -> None:
        if self.step0_start_ns is None:
            self.step0_start_ns = start_ns
        self.data_ns += dur_ns

    def on_step_end(self) -> None:
        now = time.time_ns()
        if self.rec is None:
            return
        with self.lock:
            start = self.boundaries_ns[-1] if self.boundaries_ns else (self.step0_start_ns or self.init_done_ns)
            self.rec.add(self.step, "step", start, now - start, None, "perf_counter")
            if self.data_ns:
                self.rec.add(self.step, "data", start, self.data_ns, None, "perf_counter")
            self.boundaries_ns.append(now)
            self.rec.flush()
            self.data_ns = 0
            self.step += 1
        if self.hb is not None:
            self.hb.beat(self.step, "compute")
        if self.step % FR_READ_EVERY_STEPS == 0:
            threading.Thread(target=self.read_fr, name="trainctl-fr-reader", daemon=True).start()

    # --- Flight Recorder -> compute/wait ------------------------------------------------------------
    def read_fr(self) -> bytes | None:
        try:
            import torch._C._distributed_c10d as c10d

            raw = c10d._dump_fr_trace_json()
        except Exception as exc:  # no FR in this build / no process group: timelines keep step and data
            log.debug("flight recorder unavailable: %s", exc)
            return None
        try:
            entries = json.loads(raw).get("entries", [])
        except ValueError:
            return raw
        created = sorted(int(e["time_created_ns"]) for e in entries if e.get("time_created_ns") and not e.get("is_p2p"))
        with self.lock:
            self._emit(created)
        return raw

    def _emit(self, created: Sequence[int]) -> None:
        import bisect

        bounds = self.boundaries_ns
        for s in range(self.emitted_upto, len(bounds)):
            start = bounds[s - 1] if s else (self.step0_start_ns or self.init_done_ns)
            end = bounds[s]
            i = bisect.bisect_right(created, start)
            if i >= len(created) or created[i] > end:
                if created and created[0] > start:  # the buffer holds later entries: this step had none
                    pass
                continue
            first = created[i]
            self.rec.add(s, "compute", start, first - start, None, "flight_recorder")
            self.rec.add(s, "wait", first, end - first, None, "flight_recorder")
        self.emitted_upto = len(bounds)
        self.rec.flush()

    def finalize(self) -> None:
        """Before the process group goes away: last FR read, FR dump to fr/H/, flush, stop threads."""
        if self.finalized or self.rec is None:
            return
        self.finalized = True
        raw = self.read_fr()
        if raw:
            out = fr_dump_dir(self.run_dir, self.host) / f"rank-{self.rank}.json"
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_bytes(raw)
        self.rec.close()
        if self.hb is not None:
            self.hb.close()
        if self.server is not None:
            try:
                self.server.shutdown()
            except Exception:
                pass


def _install(state: ShimState) -> None:
    import torch.distributed as dist
    import torch.optim.optimizer as optim_mod
    import torch.utils.data as tud

    orig_init = dist.init_process_group

    def init_process_group(*args: Any, **kwargs: Any) -> Any:
        result = orig_init(*args, **kwargs)
        if state.rec is None:
            state.on_init()
        return result

    dist.init_process_group = init_process_group
    dist.distributed_c10d.init_process_group = init_process_group

    orig_destroy = dist.destroy_process_group

    def destroy_process_group(*args: Any, **kwargs: Any) -> Any:
        if not args and not kwargs.get("group"):
            state.finalize()  # read Flight Recorder while the default group still exists
        return orig_destroy(*args, **kwargs)

    dist.destroy_process_group = destroy_process_group
    dist.distributed_c10d.destroy_process_group = destroy_process_group

    optim_mod.register_optimizer_step_post_hook(lambda opt, args, kwargs: state.on_step_end())

    orig_iter = tud.DataLoader.__iter__

    def timed_iter(self: Any) -> Any:
        it = orig_iter(self)
        return _TimedIterator(it, state)

    tud.DataLoader.__iter__ = timed_iter  # type: ignore[method-assign]
    atexit.register(state.finalize)


class _TimedIterator:
    """Wraps a DataLoader iterator: each next() is `data` time of the current step."""

    def __init__(self, it: Any, state: ShimState) -> None:
        self._it, self._state = it, state

    def __iter__(self) -> _TimedIterator:
        return self

    def __len__(self) -> int:
        return len(self._it)

    def __next__(self) -> Any:
        st = self._state
        if st.hb is not None:
            st.hb.beat(st.step, "data")
        start_ns, t0 = time.time_ns(), time.perf_counter_ns()
        try:
            return next(self._it)
        finally:
            st.on_data(start_ns, time.perf_counter_ns() - t0)
            if st.hb is not None:
                st.hb.beat(st.step, "compute")

    def __getattr__(self, name: str) -> Any:
        return getattr(self._it, name)


def main(argv: Sequence[str] | None = None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv:
        raise SystemExit("usage: python -m trainctl.runtime.shim SCRIPT.py [ARGS...]")
    script = argv[0]
    run_dir = os.environ.get("TRAINCTL_RUN_DIR") or os.path.abspath("runs/adhoc")
    host = os.environ.get("TRAINCTL_HOST") or os.uname().nodename.split(".")[0]
    rank, local_rank = int(os.environ.get("RANK", 0)), int(os.environ.get("LOCAL_RANK", 0))
    world = int(os.environ.get("WORLD_SIZE", 1))
    if os.environ.get("TRAINCTL_RUN_DIR"):
        from trainctl.runtime.trainer import redirect_output_to_rank_log

        redirect_output_to_rank_log(run_dir, host, rank)
    state = ShimState(run_dir, host, rank, local_rank, world)
    _install(state)
    sys.argv = [script, *argv[1:]]
    sys.path.insert(0, str(Path(script).resolve().parent))
    try:
        runpy.run_path(script, run_name="__main__")
    except SystemExit as exc:
        if exc.code not in (0, None):
            _write_error(run_dir, rank, exc)
        raise
    except BaseException as exc:
        _write_error(run_dir, rank, exc)
        raise
    finally:
        state.finalize()


def _write_error(run_dir: str, rank: int, exc: BaseException) -> None:
    from trainctl.runtime.trainer import write_error_file

    write_error_file(run_dir, rank, exc)


if __name__ == "__main__":
    from trainctl.runtime.trainer import run_and_exit

    run_and_exit(main)
