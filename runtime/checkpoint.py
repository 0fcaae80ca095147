"""Async two-stage checkpoints: a short stall to snapshot, the slow write in the background.

Stage 1 (`AsyncCheckpointer.save`, on the training thread): copy the model and optimizer state
into host buffers that are allocated once and reused (pinned when the source is on a GPU, so the
device-to-host copies are DMA and overlap; a plain memcpy on CPU), plus the RNG states. Training
resumes as soon as the copy is done: this is the whole stall (MegaScale §4.4, TRANSOM's TCE).

Stage 2 (a background thread): `torch.save` each part into a hidden temp directory, fsync, hash
every file (xxh3-128 when `xxhash` is installed, else sha256) into `manifest.json`, fsync, and
rename the directory into place. A rename is atomic, so a crash at any point leaves either the
whole rank directory or none of it; the checksum also catches later damage (truncation, bit rot).

Layout (INTERFACES.md: `checkpoints/step-N/`), one subdirectory per rank, because every rank
holds its own shard (tensor parallel) or replica (data parallel):

    checkpoints/step-120/rank-0/{model.pt, optimizer.pt, meta.pt, manifest.json}
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
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

import torch

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
            raise CheckpointError(f"{path}: manifest uses xxh3_128 but xxhash is not installed; pip install xxhash") from exc
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
    path: Path               # checkpoints/step-N
    world_size: int
    created_ts_ns: int


@dataclass(frozen=True)
class WriteResult:
    step: int
    path: Path               # the committed rank directory
    size_bytes: int
    write_s: float           # stage 2: serialize + fsync + hash + rename (background)


@dataclass(frozen=True)
class SaveHandle:
    """What `save()` returns: the stall it cost, and the background write to wait on if needed."""

    step: int
    stall_s: float           # time the training thread was blocked (wait_prev_s + snapshot_s)
    wait_prev_s: float       # part of the stall spent waiting for the previous write
    snapshot_s: float        # stage 1: copy to host buffers
    future: Future = field(compare=False, repr=False)

    def result(self, timeout_s: float | None = None) -> WriteResult:
        return self.future.result(timeout_s)


# -- writer ---------------------------------------------------------------------------------------

class AsyncCheckpointer:
    """Per-rank async checkpointer; one background writer thread, reusable host buffers.

    Args:
        directory: the checkpoints directory (a run dir's `checkpoints/`; shared storage when ranks
            must restore each other's shards after a host is lost).
        rank, world_size: this rank and the world it belongs to (recorded in the manifest).
        keep_last: complete steps to keep; older ones (this rank's directories) are deleted.
    """

    def __init__(self, directory: str | os.PathLike[str], *, rank: int = 0, world_size: int = 1, keep_last: int = 2) -> None:
        if keep_last < 1:
            raise CheckpointError(f"keep_last={keep_last}: keep at least 1 checkpoint")
        self.directory = Path(directory)
        self.rank, self.world_size, self.keep_last = rank, world_size, keep_last
        self.directory.mkdir(parents=True, exist_ok=True)
        self._buffers: dict[str, torch.Tensor] = {}
        self._pending: Future | None = None
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"trainctl-ckpt-r{rank}")
        self._lock = threading.Lock()
        self._algo, _ = _hasher()
        # A previous incarnation of this rank may have died mid-write; its temp dirs are garbage.
        for stale in self.directory.glob(f".tmp-step-*-rank-{rank}-*"):
            shutil.rmtree(stale, ignore_errors=True)

    # stage 1 ---------------------------------------------------------------------------------

    def _snap(self, obj: Any, key: str, cuda_used: list[bool]) -> Any:
        if isinstance(obj, torch.Tensor):
            buf = self._buffers.get(key)
            t = obj.detach()
            if buf is None or buf.shape != t.shape or buf.dtype != t.dtype:
                buf = torch.empty(t.shape, dtype=t.dtype, device="cpu", pin_memory=t.is_cuda)
                self._buffers[key] = buf
            buf.copy_(t, non_blocking=t.is_cuda)
            if t.is_cuda:
                cuda_used[0] = True
            return buf
        if isinstance(obj, Mapping):
            return {k: self._snap(v, f"{key}/{k}", cuda_used) for k, v in obj.items()}
        if isinstance(obj, (list, tuple)):
            seq = [self._snap(v, f"{key}/{i}", cuda_used) for i, v in enumerate(obj)]
            return seq if isinstance(obj, list) else tuple(seq)
        return obj  # scalars, strings, None: immutable or copied by pickling later

    def snapshot(self, model: torch.nn.Module | Mapping[str, Any], optimizer: torch.optim.Optimizer | None = None) -> dict[str, Any]:
        """Stage 1 alone: the state as host tensors that training may no longer change."""
        cuda_used = [False]
        model_sd = model.state_dict() if isinstance(model, torch.nn.Module) else model
        snap = {"model": self._snap(model_sd, "model", cuda_used)}
        if optimizer is not None:
            snap["optimizer"] = self._snap(optimizer.state_dict(), "optimizer", cuda_used)
        if cuda_used[0]:
            torch.cuda.synchronize()  # the non_blocking copies must land before training mutates
        return snap

    def save(self, step: int, model: torch.nn.Module | Mapping[str, Any], optimizer: torch.optim.Optimizer | None = None,
             *, extra: Mapping[str, Any] | None = None) -> SaveHandle:
        """Snapshot now (the stall), write in the background; returns at once after the copy."""
        t0 = time.perf_counter()
        with self._lock:
            if self._pending is not None:
                self._pending.result()  # one write in flight: the buffers are about to be reused
            t1 = time.perf_counter()
            snap = self.snapshot(model, optimizer)
            meta = {"step": int(step), "rng": _rng_state(), "extra": dict(extra or {}),
                    "rank": self.rank, "world_size": self.world_size}
            t2 = time.perf_counter()
            fut = self._executor.submit(self._write, int(step), snap, meta)
            self._pending = fut
        return SaveHandle(step=int(step), stall_s=t2 - t0, wait_prev_s=t1 - t0, snapshot_s=t2 - t1, future=fut)

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

    def __enter__(self) -> "AsyncCheckpointer":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # stage 2 ---------------------------------------------------------------------------------

    def _write(self, step: int, snap: Mapping[str, Any], meta: Mapping[str, Any]) -> WriteResult:
        t0 = time.perf_counter()
        tmp = self.directory / f".tmp-step-{step}-rank-{self.rank}-{os.getpid()}"
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        files: dict[str, dict[str, Any]] = {}
        parts = [(f"{name}.pt", obj) for name, obj in snap.items()] + [("meta.pt", meta)]
        for name, obj in parts:
            path = tmp / name
            with open(path, "wb") as f:
                torch.save(obj, f)
                f.flush()
                os.fsync(f.fileno())
            files[name] = {"size_bytes": path.stat().st_size, "checksum": _hash_file(path, self._algo)}
        manifest = {
            "format_version": CHECKPOINT_FORMAT_VERSION, "step": step, "rank": self.rank,
            "world_size": self.world_size, "created_ts_ns": time.time_ns(), "checksum_algo": self._algo,
            "files": files,
        }
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
        _fsync_dir(step_dir)
        _fsync_dir(self.directory)
        size = sum(v["size_bytes"] for v in files.values())
        res = WriteResult(step=step, path=final, size_bytes=size, write_s=time.perf_counter() - t0)
        logger.info("checkpoint committed step=%d rank=%d bytes=%d write_s=%.2f", step, self.rank, size, res.write_s)
        self._prune()
        return res

    def _prune(self) -> None:
        """Drop this rank's directories older than the keep_last newest *complete* steps.

        Counting complete steps (not this rank's own) matters: a slower rank may not have
        committed the newest step yet, and the step before it must survive until it has.
        """
        complete = [s for s, d in _step_dirs(self.directory) if _is_complete(d, verify=False) is None]
        if len(complete) < self.keep_last:
            return
        oldest_kept = sorted(complete, reverse=True)[self.keep_last - 1]
        for s, d in _step_dirs(self.directory):
            if s < oldest_kept:
                shutil.rmtree(d / f"rank-{self.rank}", ignore_errors=True)
                try:
                    d.rmdir()  # last rank out removes the step dir
                except OSError:
                    pass


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


def _read_manifest(rank_dir: Path) -> dict[str, Any]:
    path = rank_dir / MANIFEST
    try:
        m = json.loads(path.read_text())
    except FileNotFoundError as exc:
        raise CheckpointError(f"{path}: missing; {rank_dir} is not a committed checkpoint") from exc
    except (OSError, ValueError) as exc:
        raise CheckpointError(f"{path}: unreadable manifest ({exc}); delete {rank_dir}") from exc
    if m.get("format_version") != CHECKPOINT_FORMAT_VERSION:
        raise CheckpointError(f"{path}: format_version {m.get('format_version')!r}, expected {CHECKPOINT_FORMAT_VERSION}")
    return m


def verify_rank_dir(rank_dir: str | os.PathLike[str], *, verify_checksums: bool = True) -> dict[str, Any]:
    """The rank directory's manifest, after checking every file's size (and checksum)."""
    rank_dir = Path(rank_dir)
    m = _read_manifest(rank_dir)
    for name, rec in m["files"].items():
        p = rank_dir / name
        if not p.is_file():
            raise CheckpointError(f"{p}: listed in the manifest but missing; the checkpoint is damaged")
        size = p.stat().st_size
        if size != rec["size_bytes"]:
            raise CheckpointError(f"{p}: {size} bytes, manifest says {rec['size_bytes']}; the file is truncated or damaged")
        if verify_checksums:
            got = _hash_file(p, m["checksum_algo"])
            if got != rec["checksum"]:
                raise CheckpointError(f"{p}: {m['checksum_algo']} {got} does not match the manifest's {rec['checksum']}")
    return m


def _is_complete(step_dir: Path, *, verify: bool) -> str | None:
    """None if complete, else why not (for the log)."""
    ranks = {int(m.group(1)): d for d in step_dir.iterdir() if (m := _RANK_RE.match(d.name))} if step_dir.is_dir() else {}
    if not ranks:
        return "no committed rank directories"
    world = None
    for r, d in sorted(ranks.items()):
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
            return CheckpointInfo(step=step, path=d, world_size=int(m["world_size"]), created_ts_ns=int(m["created_ts_ns"]))
        logger.warning("checkpoint %s skipped: %s", d, why)
    return None


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
        model.load_state_dict(torch.load(rank_dir / "model.pt", map_location=map_location, weights_only=True))
        if optimizer is not None:
            if not (rank_dir / "optimizer.pt").is_file():
                raise CheckpointError(f"{rank_dir}: has no optimizer.pt; it was saved without an optimizer")
            optimizer.load_state_dict(torch.load(rank_dir / "optimizer.pt", map_location=map_location, weights_only=True))
        meta = torch.load(rank_dir / "meta.pt", weights_only=True)
    except (RuntimeError, OSError, KeyError, ValueError) as exc:
        raise CheckpointError(f"{rank_dir}: cannot restore ({exc}); does the model match the checkpoint?") from exc
    if restore_rng:
        _set_rng_state(meta["rng"])
    logger.info("checkpoint restored step=%d from=%s", meta["step"], rank_dir)
    return LoadedCheckpoint(step=int(meta["step"]), path=step_path, extra=dict(meta.get("extra", {})))


def resume(directory: str | os.PathLike[str], model: torch.nn.Module, optimizer: torch.optim.Optimizer | None = None,
           *, rank: int = 0, **kwargs: Any) -> LoadedCheckpoint | None:
    """Load the newest complete checkpoint into model/optimizer, or return None if there is none."""
    info = latest_complete(directory)
    if info is None:
        return None
    return load_checkpoint(info, model, optimizer, rank=rank, verify_checksums=False, **kwargs)


__all__ += ["LoadedCheckpoint"]
