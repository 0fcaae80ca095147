"""Async two-stage checkpoints: a short stall to snapshot, the slow write in the background.

Stage 1 (the snapshot): copy the model and optimizer state into host buffers that are allocated
once and reused (pinned when the source is on a GPU, so device-to-host copies are DMA), plus the
RNG states. With `overlap=True` (default) only buffers are copied inside `save()`; parameters and
optimizer state are copied by the background thread while the next forward/backward run (they only
read them), and an optimizer step pre-hook makes the next `optimizer.step()` wait until the copy is
done (CheckFreq's pipelined snapshot, FAST'21). The stall is what `save()` plus that wait block.

Stage 2 (a background thread): write every tensor's raw bytes to `tensors.bin` in 8 MiB chunks,
hashing as it goes (file writes and hashing release the GIL, unlike `torch.save` of big tensors,
so training keeps running), plus `skeleton.pt` (the state dicts' structure, tensors replaced by
index markers), fsync, checksums (xxh3-128 when `xxhash` is installed, else sha256) into
`manifest.json`, fsync, and rename the directory into place. A rename is atomic, so a crash at any
point leaves either the whole rank directory or none of it; the checksum also catches later
damage (truncation, bit rot).

Layout (INTERFACES.md: `checkpoints/step-N/`), one subdirectory per rank, because every rank
holds its own shard (tensor parallel) or replica (data parallel):

    checkpoints/step-120/rank-0/{tensors.bin, skeleton.pt, manifest.json}
    checkpoints/step-120/rank-1/...
    checkpoints/.tmp-step-140-rank-0-<pid>/       (being written; never read)

A step is complete when every rank 0..world_size-1 (from the manifests) has a committed directory
whose files match their checksums. `latest_complete()` returns the newest complete step and
never a half-written or damaged one. Resume restores model, optimizer, step and RNG states.

One write is in flight per rank: `save()` first waits for the previous write (backpressure),
which only stalls training if checkpoints are requested faster than the disk can take them.
"""

from __future__ import annotations

import json
import logging
import os
import random
import re
import shutil
import stat
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from trainctl.errors import CheckpointError

__all__ = [
    "CHECKPOINT_FORMAT_VERSION",
    "CheckpointInfo",
    "SaveHandle",
    "WriteResult",
    "AsyncCheckpointer",
    "latest_complete",
    "verify_rank_dir",
    "load_checkpoint",
    "resume",
    "read_rank_state",
]

logger = logging.getLogger(__name__)

CHECKPOINT_FORMAT_VERSION = 1
MANIFEST = "manifest.json"
_STEP_RE = re.compile(r"^step-(\d+)$")
_RANK_RE = re.compile(r"^rank-(\d+)$")
_CHUNK = 8 << 20


def _hasher():
    try:
        import xxhash  # optional: ~10x faster than sha256 on large files

        return "xxh3_128", xxhash.xxh3_128
    except ImportError:
        import hashlib

        return "sha256", hashlib.sha256


def _hash_file(path: Path, algo: str) -> str:
    if algo == "sha256":
        import hashlib

        h = hashlib.sha256()
    elif algo == "xxh3_128":
        try:
            import xxhash
        except ImportError as exc:
            raise CheckpointError(
                f"{path}: manifest uses xxh3_128 but xxhash is not installed; pip install xxhash"
            ) from exc
        h = xxhash.xxh3_128()
    else:
        raise CheckpointError(f"{path}: unknown checksum algorithm {algo!r} in the manifest")
    with open(path, "rb") as f:
        while chunk := f.read(_CHUNK):
            h.update(chunk)  # hashlib/xxhash release the GIL on large buffers
    return h.hexdigest()


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


# -- RNG ------------------------------------------------------------------------------------------


def _rng_state() -> dict[str, Any]:
    state: dict[str, Any] = {"torch": torch.get_rng_state(), "python": random.getstate()}
    if torch.cuda.is_available():
        state["cuda"] = [torch.cuda.get_rng_state(i) for i in range(torch.cuda.device_count())]
    try:
        import numpy as np

        name, keys, pos, has_gauss, cached = np.random.get_state()
        # Plain lists so the file loads with weights_only=True (no ndarray pickles).
        state["numpy"] = (name, [int(k) for k in keys], int(pos), int(has_gauss), float(cached))
    except ImportError:
        pass
    return state


def _set_rng_state(state: Mapping[str, Any]) -> None:
    torch.set_rng_state(state["torch"])
    random.setstate(tuple(state["python"]) if not isinstance(state["python"], tuple) else state["python"])
    if "cuda" in state and torch.cuda.is_available():
        for i, s in enumerate(state["cuda"][: torch.cuda.device_count()]):
            torch.cuda.set_rng_state(s, i)
    if "numpy" in state:
        try:
            import numpy as np

            name, keys, pos, has_gauss, cached = state["numpy"]
            np.random.set_state((name, np.array(keys, dtype=np.uint32), pos, has_gauss, cached))
        except ImportError:
            pass


# -- records --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CheckpointInfo:
    """A complete, verified checkpoint step."""

    step: int
    path: Path  # checkpoints/step-N
    world_size: int
    created_ts_ns: int
    # The dp x tp x pp grid that wrote it ({"dp": 4, "tp": 2, "pp": 1}); {} for checkpoints written
    # before trainctl recorded it. A resume at another dp maps ranks with trainctl.runtime.rank_map.
    layout: Mapping[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class WriteResult:
    step: int
    path: Path  # the committed rank directory
    size_bytes: int
    snapshot_s: float  # stage 1 part done in the background (overlap mode), else 0
    write_s: float  # stage 2: write + hash + fsync + rename (background)


class _SaveStats:
    """Mutable stall accounting for one save (the optimizer hook adds to it later)."""

    __slots__ = ("call_s", "wait_prev_s", "update_wait_s")

    def __init__(self) -> None:
        self.call_s = self.wait_prev_s = self.update_wait_s = 0.0


@dataclass(frozen=True)
class SaveHandle:
    """What `save()` returns: the stall it cost, and the background write to wait on if needed."""

    step: int
    future: Future = field(compare=False, repr=False)
    _stats: _SaveStats = field(compare=False, repr=False, default_factory=_SaveStats)

    @property
    def call_s(self) -> float:
        """Time inside save(): eager copies, RNG state, (backpressure wait included)."""
        return self._stats.call_s

    @property
    def wait_prev_s(self) -> float:
        """Part of call_s spent waiting for the previous write to finish (backpressure)."""
        return self._stats.wait_prev_s

    @property
    def update_wait_s(self) -> float:
        """Overlap mode: time the next optimizer.step() waited for the background snapshot."""
        return self._stats.update_wait_s

    @property
    def stall_s(self) -> float:
        """Everything this checkpoint blocked training for (final once the next step has run)."""
        return self._stats.call_s + self._stats.update_wait_s

    def result(self, timeout_s: float | None = None) -> WriteResult:
        return self.future.result(timeout_s)


_MARK = "__trainctl_tensor__"


def _byte_view(t: torch.Tensor):
    """A flat uint8 NumPy view of a contiguous CPU tensor (any dtype, bf16 included), no copy."""
    return t.reshape(-1).view(torch.uint8).numpy()


# -- writer ---------------------------------------------------------------------------------------


class AsyncCheckpointer:
    """Per-rank async checkpointer; one background writer thread, reusable host buffers.

    Args:
        directory: the checkpoints directory (a run dir's `checkpoints/`; shared storage when ranks
            must restore each other's shards after a host is lost).
        rank, world_size: this rank and the world it belongs to (recorded in the manifest).
        layout: the parallel grid, e.g. {"dp": 2, "tp": 2, "pp": 1} (recorded in the manifest), so a
            run relaunched at another data-parallel degree knows which rank holds which shard.
        keep_last: complete steps to keep; older ones (this rank's directories) are deleted.
        overlap: copy parameters and optimizer state in the background while the next forward
            and backward run (they only read them), and make the next `optimizer.step()` wait
            until the copy is done (a step pre-hook): CheckFreq's pipelined snapshot. Requires
            that parameters change only in `optimizer.step()`; buffers (e.g. BatchNorm running
            stats, which forward updates) are always copied inside save(). `overlap=False`
            copies everything inside save().
    """

    def __init__(
        self,
        directory: str | os.PathLike[str],
        *,
        rank: int = 0,
        world_size: int = 1,
        keep_last: int = 2,
        overlap: bool = True,
        layout: Mapping[str, int] | None = None,
    ) -> None:
        if keep_last < 1:
            raise CheckpointError(f"keep_last={keep_last}: keep at least 1 checkpoint")
        self.directory = Path(directory)
        self.rank, self.world_size, self.keep_last, self.overlap = rank, world_size, keep_last, overlap
        self.layout = {k: int(v) for k, v in (layout or {}).items()}
        self.directory.mkdir(parents=True, exist_ok=True)
        self._buffers: dict[str, torch.Tensor] = {}
        self._pending: Future | None = None
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"trainctl-ckpt-r{rank}")
        self._lock = threading.Lock()
        self._snapshot_done = threading.Event()
        self._snapshot_done.set()
        self._current: _SaveStats | None = None
        self._hooked: set[int] = set()
        self._algo, _ = _hasher()
        # A previous incarnation of this rank may have died mid-write; its temp dirs are garbage.
        for stale in self.directory.glob(f".tmp-step-*-rank-{rank}-*"):
            shutil.rmtree(stale, ignore_errors=True)

    # stage 1 ---------------------------------------------------------------------------------

    def _buffer(self, key: str, t: torch.Tensor) -> torch.Tensor:
        buf = self._buffers.get(key)
        if buf is None or buf.shape != t.shape or buf.dtype != t.dtype:
            buf = torch.empty(t.shape, dtype=t.dtype, device="cpu", pin_memory=t.is_cuda)
            self._buffers[key] = buf
        return buf

    def _skeleton(self, obj: Any, key: str, jobs: list, deferrable: set[int]) -> Any:
        """Replace every tensor by a marker; collect (buffer, source, deferred) copy jobs."""
        if isinstance(obj, torch.Tensor):
            t = obj.detach()
            buf = self._buffer(key, t)
            deferred = key.startswith("optimizer/state/") or (t.data_ptr() in deferrable and t.numel() > 0)
            jobs.append((buf, t, deferred))
            return {_MARK: len(jobs) - 1}
        if isinstance(obj, Mapping):
            return {k: self._skeleton(v, f"{key}/{k}", jobs, deferrable) for k, v in obj.items()}
        if isinstance(obj, (list, tuple)):
            seq = [self._skeleton(v, f"{key}/{i}", jobs, deferrable) for i, v in enumerate(obj)]
            return seq if isinstance(obj, list) else tuple(seq)
        return obj  # scalars, strings, None

    @staticmethod
    def _copy(jobs: list, *, stream: Any = None) -> None:
        cuda = any(src.is_cuda for _, src, _ in jobs)
        if cuda and stream is not None:
            with torch.cuda.stream(stream):
                for buf, src, _ in jobs:
                    buf.copy_(src, non_blocking=True)
            stream.synchronize()
        else:
            for buf, src, _ in jobs:
                buf.copy_(src, non_blocking=src.is_cuda)
            if cuda:
                torch.cuda.synchronize()

    def _before_step(self, optimizer: Any, args: Any, kwargs: Any) -> None:
        # Optimizer step pre-hook: the update must not run while the snapshot still reads params.
        if not self._snapshot_done.is_set():
            t0 = time.perf_counter()
            self._snapshot_done.wait()
            if self._current is not None:
                self._current.update_wait_s += time.perf_counter() - t0

    def save(
        self,
        step: int,
        model: torch.nn.Module | Mapping[str, Any],
        optimizer: torch.optim.Optimizer | None = None,
        *,
        extra: Mapping[str, Any] | None = None,
    ) -> SaveHandle:
        """Snapshot (or start the overlapped snapshot), write in the background; returns at once."""
        stats = _SaveStats()
        t0 = time.perf_counter()
        with self._lock:
            if self._pending is not None:
                try:
                    self._pending.result()  # one write in flight: its buffers are about to be reused
                except Exception:  # noqa: BLE001 - already logged by the writer; this save may still work
                    pass
            stats.wait_prev_s = time.perf_counter() - t0
            overlap = self.overlap and optimizer is not None
            deferrable: set[int] = set()
            if overlap:
                deferrable = {p.data_ptr() for g in optimizer.param_groups for p in g["params"]}
                if id(optimizer) not in self._hooked:
                    optimizer.register_step_pre_hook(self._before_step)
                    self._hooked.add(id(optimizer))
            jobs: list = []
            model_sd = model.state_dict() if isinstance(model, torch.nn.Module) else model
            skeleton: dict[str, Any] = {"model": self._skeleton(model_sd, "model", jobs, deferrable)}
            if optimizer is not None:
                skeleton["optimizer"] = self._skeleton(optimizer.state_dict(), "optimizer", jobs, deferrable)
            eager = [j for j in jobs if not (overlap and j[2])]
            deferred = [j for j in jobs if overlap and j[2]]
            self._copy(eager)
            skeleton["meta"] = {
                "step": int(step),
                "rng": _rng_state(),
                "extra": dict(extra or {}),
                "rank": self.rank,
                "world_size": self.world_size,
            }
            stream = None
            if deferred and any(src.is_cuda for _, src, _ in deferred):
                stream = torch.cuda.Stream()
                stream.wait_stream(torch.cuda.current_stream())  # copy what the last update wrote
            if deferred:
                self._snapshot_done.clear()
            self._current = stats
            buffers = [buf for buf, _, _ in jobs]
            fut = self._executor.submit(self._write, int(step), skeleton, buffers, deferred, stream)
            self._pending = fut
            stats.call_s = time.perf_counter() - t0
        return SaveHandle(step=int(step), future=fut, _stats=stats)

    def wait(self, timeout_s: float | None = None) -> WriteResult | None:
        """Block until the in-flight write is committed (before exit, or in tests)."""
        with self._lock:
            fut = self._pending
        return fut.result(timeout_s) if fut is not None else None

    def close(self) -> None:
        try:
            self.wait()
        finally:
            self._executor.shutdown(wait=True)

    def __enter__(self) -> AsyncCheckpointer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # stage 2 ---------------------------------------------------------------------------------

    def _write(self, step: int, skeleton: Mapping[str, Any], buffers: list, deferred: list, stream: Any) -> WriteResult:
        t0 = time.perf_counter()
        try:
            self._copy(deferred, stream=stream)
        finally:
            self._snapshot_done.set()  # never leave optimizer.step() waiting, even on failure
        snapshot_s = time.perf_counter() - t0 if deferred else 0.0
        tmp = self.directory / f".tmp-step-{step}-rank-{self.rank}-{os.getpid()}"
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        _, new_hash = _hasher()
        # Raw tensor bytes, written and hashed in chunks: file writes and hashing release the GIL,
        # so the training thread keeps running (torch.save of big tensors would hold it).
        index, offset, h = [], 0, new_hash()
        with open(tmp / "tensors.bin", "wb", buffering=0) as f:
            for buf in buffers:
                view = _byte_view(buf)
                index.append(
                    {
                        "offset": offset,
                        "nbytes": int(view.nbytes),
                        "dtype": str(buf.dtype).removeprefix("torch."),
                        "shape": list(buf.shape),
                    }
                )
                for i in range(0, view.nbytes, _CHUNK):
                    chunk = view[i : i + _CHUNK]
                    f.write(chunk)
                    h.update(chunk)
                offset += int(view.nbytes)
            os.fsync(f.fileno())
        files = {"tensors.bin": {"size_bytes": offset, "checksum": h.hexdigest()}}
        with open(tmp / "skeleton.pt", "wb") as f:
            torch.save({"skeleton": skeleton, "index": index}, f)
            f.flush()
            os.fsync(f.fileno())
        files["skeleton.pt"] = {
            "size_bytes": (tmp / "skeleton.pt").stat().st_size,
            "checksum": _hash_file(tmp / "skeleton.pt", self._algo),
        }
        manifest = {
            "format_version": CHECKPOINT_FORMAT_VERSION,
            "step": step,
            "rank": self.rank,
            "world_size": self.world_size,
            "created_ts_ns": time.time_ns(),
            "checksum_algo": self._algo,
            "files": files,
        }
        if self.layout:
            manifest["layout"] = self.layout
        with open(tmp / MANIFEST, "w") as f:
            json.dump(manifest, f, indent=2)
            f.flush()
            os.fsync(f.fileno())
        _fsync_dir(tmp)
        step_dir = self.directory / f"step-{step}"
        step_dir.mkdir(exist_ok=True)
        final = step_dir / f"rank-{self.rank}"
        if final.exists():  # the same step saved again after a restart: replace it whole
            old = self.directory / f".tmp-old-step-{step}-rank-{self.rank}-{os.getpid()}"
            os.replace(final, old)
            shutil.rmtree(old, ignore_errors=True)
        os.replace(tmp, final)  # the commit point
        if self.rank == 0:
            _drop_foreign_ranks(step_dir, self.world_size)
        _fsync_dir(step_dir)
        _fsync_dir(self.directory)
        size = sum(v["size_bytes"] for v in files.values())
        res = WriteResult(
            step=step, path=final, size_bytes=size, snapshot_s=snapshot_s, write_s=time.perf_counter() - t0 - snapshot_s
        )
        logger.info(
            "checkpoint committed step=%d rank=%d bytes=%d snapshot_s=%.2f write_s=%.2f",
            step,
            self.rank,
            size,
            snapshot_s,
            res.write_s,
        )
        try:
            self._prune()
        except OSError as exc:  # housekeeping: the step is committed, a failed prune must not fail the save
            logger.warning("checkpoint prune after step=%d rank=%d failed: %s", step, self.rank, exc)
        return res

    def _prune(self) -> None:
        """Drop this rank's directories older than the keep_last newest *complete* steps.

        Counting complete steps (not this rank's own) matters: a slower rank may not have
        committed the newest step yet, and the step before it must survive until it has.
        Every rank prunes the same shared directory at about the same time, so the directories
        it reads here may vanish under it (the readers below take that as "not complete").
        """
        complete = [s for s, d in _step_dirs(self.directory) if _is_complete(d, verify=False) is None]
        if len(complete) < self.keep_last:
            return
        oldest_kept = sorted(complete, reverse=True)[self.keep_last - 1]
        for s, d in _step_dirs(self.directory):
            if s < oldest_kept:
                shutil.rmtree(d / f"rank-{self.rank}", ignore_errors=True)
                if self.rank == 0:  # ranks a larger world wrote before a shrink have no owner left
                    _drop_foreign_ranks(d, self.world_size)
                try:
                    d.rmdir()  # last rank out removes the step dir
                except OSError:
                    pass


def _drop_foreign_ranks(step_dir: Path, world_size: int) -> None:
    """Remove rank-R directories with R >= world_size: left by a larger world before a shrink.

    Without this, a step the smaller world saves again (it resumed from an older step) would hold
    ranks that disagree on world_size and never count as complete. Only rank 0 calls it, after its
    own commit; the larger world's processes are gone by then (a relaunch stops the run first).
    """
    for r, d in _rank_dirs(step_dir).items():
        if r >= world_size:
            shutil.rmtree(d, ignore_errors=True)


def _rank_dirs(step_dir: Path) -> dict[int, Path]:
    """rank -> rank-R directory; empty when the step directory is gone, even mid-listing
    (another rank's prune removes it while this one reads)."""
    try:
        return {int(m.group(1)): d for d in step_dir.iterdir() if (m := _RANK_RE.match(d.name))}
    except (FileNotFoundError, NotADirectoryError):
        return {}


# -- reading --------------------------------------------------------------------------------------


def _step_dirs(directory: Path) -> list[tuple[int, Path]]:
    if not directory.is_dir():
        return []
    out = []
    for d in directory.iterdir():
        m = _STEP_RE.match(d.name)
        if m and d.is_dir():
            out.append((int(m.group(1)), d))
    return sorted(out, reverse=True)


class _FileRecord(BaseModel):
    model_config = ConfigDict(strict=True, extra="allow")
    size_bytes: int = Field(ge=0)
    checksum: str


class _Manifest(BaseModel):
    """The shape every reader below relies on: a manifest of any other shape (a bit flip that still
    parses, a hand edit, another tool's file) is a damaged checkpoint, so resume falls back to the
    previous verified step exactly as for a truncated file, instead of crashing every rank."""

    model_config = ConfigDict(strict=True, extra="allow")
    format_version: int
    world_size: int = Field(ge=1)
    created_ts_ns: int
    checksum_algo: str
    files: dict[str, _FileRecord]
    layout: dict[str, int] | None = None


def _read_manifest(rank_dir: Path) -> dict[str, Any]:
    path = rank_dir / MANIFEST
    try:
        m = json.loads(path.read_text())
    except FileNotFoundError as exc:
        raise CheckpointError(f"{path}: missing; {rank_dir} is not a committed checkpoint") from exc
    except (OSError, ValueError) as exc:
        raise CheckpointError(f"{path}: unreadable manifest ({exc}); delete {rank_dir}") from exc
    if not isinstance(m, dict) or m.get("format_version") != CHECKPOINT_FORMAT_VERSION:
        got = m.get("format_version") if isinstance(m, dict) else type(m).__name__
        raise CheckpointError(f"{path}: format_version {got!r}, expected {CHECKPOINT_FORMAT_VERSION}")
    try:
        _Manifest.model_validate(m)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(x) for x in first["loc"])
        raise CheckpointError(f"{path}: manifest field {where!r}: {first['msg']}; the checkpoint is damaged") from None
    if any(Path(name).is_absolute() or ".." in Path(name).parts for name in m["files"]):
        raise CheckpointError(f"{path}: a file name leaves the checkpoint directory; the checkpoint is damaged")
    return m


def verify_rank_dir(rank_dir: str | os.PathLike[str], *, verify_checksums: bool = True) -> dict[str, Any]:
    """The rank directory's manifest, after checking every file's size (and checksum)."""
    rank_dir = Path(rank_dir)
    m = _read_manifest(rank_dir)
    for name, rec in m["files"].items():
        p = rank_dir / name
        try:  # one stat, not is_file() then stat(): another rank's prune may remove it in between
            st = p.stat()
        except FileNotFoundError:
            st = None
        if st is None or not stat.S_ISREG(st.st_mode):
            raise CheckpointError(f"{p}: listed in the manifest but missing; the checkpoint is damaged")
        size = st.st_size
        if size != rec["size_bytes"]:
            raise CheckpointError(
                f"{p}: {size} bytes, manifest says {rec['size_bytes']}; the file is truncated or damaged"
            )
        if verify_checksums:
            try:
                got = _hash_file(p, m["checksum_algo"])
            except FileNotFoundError as exc:
                raise CheckpointError(f"{p}: removed while being verified; the checkpoint is gone") from exc
            if got != rec["checksum"]:
                raise CheckpointError(
                    f"{p}: {m['checksum_algo']} {got} does not match the manifest's {rec['checksum']}"
                )
    return m


def _is_complete(step_dir: Path, *, verify: bool) -> str | None:
    """None if complete, else why not (for the log)."""
    ranks = _rank_dirs(step_dir)
    if not ranks:
        return "no committed rank directories"
    world = None
    for _, d in sorted(ranks.items()):
        try:
            m = verify_rank_dir(d, verify_checksums=verify)
        except CheckpointError as exc:
            return str(exc)
        if world is None:
            world = int(m["world_size"])
        elif int(m["world_size"]) != world:
            return f"ranks disagree on world_size ({world} vs {m['world_size']})"
    missing = sorted(set(range(world or 0)) - set(ranks))
    if missing:
        return f"ranks {missing} of {world} have not committed"
    return None


def latest_complete(directory: str | os.PathLike[str], *, verify: bool = True) -> CheckpointInfo | None:
    """The newest step every rank committed and whose files match their checksums, or None."""
    for step, d in _step_dirs(Path(directory)):
        why = _is_complete(d, verify=verify)
        if why is None:
            m = _read_manifest(d / "rank-0")
            return CheckpointInfo(
                step=step,
                path=d,
                world_size=int(m["world_size"]),
                created_ts_ns=int(m["created_ts_ns"]),
                layout={k: int(v) for k, v in (m.get("layout") or {}).items()},
            )
        logger.warning("checkpoint %s skipped: %s", d, why)
    return None


def read_rank_state(rank_dir: str | os.PathLike[str]) -> dict[str, Any]:
    """{"model": state_dict, "optimizer": state_dict, "meta": {...}} of one rank, as CPU tensors.

    The skeleton loads with `weights_only=True` (a checkpoint cannot run code); tensors are read
    straight into freshly allocated tensors from tensors.bin.
    """
    rank_dir = Path(rank_dir)
    doc = torch.load(rank_dir / "skeleton.pt", weights_only=True)
    index = doc["index"]
    tensors: list[torch.Tensor] = []
    with open(rank_dir / "tensors.bin", "rb", buffering=0) as f:
        for rec in index:
            t = torch.empty(rec["shape"], dtype=getattr(torch, rec["dtype"]))
            view = _byte_view(t)
            f.seek(rec["offset"])
            got = f.readinto(view) if view.nbytes else 0
            if got != rec["nbytes"]:
                raise CheckpointError(
                    f"{rank_dir / 'tensors.bin'}: short read at offset {rec['offset']}; the file is truncated"
                )
            tensors.append(t)

    def fill(obj: Any) -> Any:
        if isinstance(obj, dict):
            if len(obj) == 1 and _MARK in obj:
                return tensors[obj[_MARK]]
            return {k: fill(v) for k, v in obj.items()}
        if isinstance(obj, list):
            return [fill(v) for v in obj]
        if isinstance(obj, tuple):
            return tuple(fill(v) for v in obj)
        return obj

    return fill(doc["skeleton"])


@dataclass(frozen=True)
class LoadedCheckpoint:
    step: int
    path: Path
    extra: Mapping[str, Any]


def load_checkpoint(
    step_dir: str | os.PathLike[str] | CheckpointInfo,
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer | None = None,
    *,
    rank: int = 0,
    map_location: str | torch.device | Callable | None = "cpu",
    restore_rng: bool = True,
    verify_checksums: bool = True,
) -> LoadedCheckpoint:
    """Restore model (+ optimizer, RNG) from `step_dir/rank-<rank>`; returns the step to resume after.

    `map_location="cpu"` then `load_state_dict` copies into the model's own device tensors.
    Files load with `weights_only=True`: a checkpoint cannot run code.
    """
    step_path = step_dir.path if isinstance(step_dir, CheckpointInfo) else Path(step_dir)
    rank_dir = step_path / f"rank-{rank}"
    verify_rank_dir(rank_dir, verify_checksums=verify_checksums)
    try:
        state = read_rank_state(rank_dir)
        model.load_state_dict(state["model"])
        if optimizer is not None:
            if "optimizer" not in state:
                raise CheckpointError(f"{rank_dir}: was saved without an optimizer; cannot restore one")
            optimizer.load_state_dict(state["optimizer"])
        meta = state["meta"]
    except (RuntimeError, OSError, KeyError, ValueError) as exc:
        raise CheckpointError(f"{rank_dir}: cannot restore ({exc}); does the model match the checkpoint?") from exc
    if restore_rng:
        _set_rng_state(meta["rng"])
    logger.info("checkpoint restored step=%d from=%s", meta["step"], rank_dir)
    return LoadedCheckpoint(step=int(meta["step"]), path=step_path, extra=dict(meta.get("extra", {})))


def resume(
    directory: str | os.PathLike[str],
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer | None = None,
    *,
    rank: int = 0,
    **kwargs: Any,
) -> LoadedCheckpoint | None:
    """Load the newest complete checkpoint into model/optimizer, or return None if there is none."""
    info = latest_complete(directory)
    if info is None:
        return None
    return load_checkpoint(info, model, optimizer, rank=rank, verify_checksums=False, **kwargs)


__all__ += ["LoadedCheckpoint"]
