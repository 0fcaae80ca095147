"""The run directory: what a launched run leaves on each host, and where.

A run dir is itself a dataset (trainctl.dataset layout: `<kind>/host=<host>/part-*.parquet`) plus
the raw artefacts the tables are parsed from. `collect` copies the same layout from every host, so
`diagnose RUN_DIR` and `diagnose DATASET` read the same tables.

    RUN_DIR/
      run.json                        RunInfo: run id, world, hosts -> ranks, named groups
      timeline/host=H/part-*.parquet  (and every other SignalKind table)
      logs/H/rank-R.log               each rank's stdout+stderr
      fr/H/rank-R.pkl|.json           Flight Recorder dumps (one per rank)
      stacks/H/rank-R.txt             raw Python stacks of live ranks
      heartbeats/rank-R.json          latest heartbeat (step, phase, time) of each rank
      errors/rank-R.json              torchelastic error files (first failure)
      checkpoints/                    async checkpoints (step-N/)
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from trainctl.errors import DatasetError

__all__ = [
    "RUN_INFO_FILE",
    "HostRanks",
    "RunInfo",
    "write_run_info",
    "read_run_info",
    "is_run_dir",
    "rank_log_path",
    "fr_dump_dir",
    "stacks_dir",
    "heartbeat_path",
    "error_file_path",
    "numerics_path",
    "drill_kernel_log_path",
    "checkpoint_dir",
    "worker_socket_path",
    "atomic_write_text",
]

RUN_INFO_FILE = "run.json"


@dataclass(frozen=True)
class HostRanks:
    host: str
    ranks: tuple[int, ...]


@dataclass(frozen=True)
class RunInfo:
    """What the launcher knew about the run; analyzers use it for rank->host and group membership.

    `groups` maps a group name to its member lists in global ranks, e.g. the reference trainer's
    {"tp": ((0, 1), (2, 3)), "dp": ((0, 2), (1, 3))}. `layout` gives the grid sizes
    ({"dp": 2, "tp": 2, "pp": 1}) for the hang map. Gloo leaves Flight Recorder's pg_config empty,
    so this is where membership comes from on CPU.
    """

    run_id: str
    world_size: int
    nproc_per_node: int
    hosts: tuple[HostRanks, ...]
    groups: Mapping[str, tuple[tuple[int, ...], ...]] = field(default_factory=dict)
    layout: Mapping[str, int] = field(default_factory=dict)
    script: str | None = None  # None: the runtime's reference trainer
    created_ts_ns: int = 0
    extra: Mapping[str, Any] = field(default_factory=dict)

    def host_of(self, rank: int) -> str | None:
        for h in self.hosts:
            if rank in h.ranks:
                return h.host
        return None

    def rank_to_host(self) -> dict[int, str]:
        return {r: h.host for h in self.hosts for r in h.ranks}

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["groups"] = {k: [list(m) for m in v] for k, v in self.groups.items()}
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> RunInfo:
        return cls(
            run_id=str(d["run_id"]),
            world_size=int(d["world_size"]),
            nproc_per_node=int(d.get("nproc_per_node", 1)),
            hosts=tuple(HostRanks(h["host"], tuple(int(r) for r in h["ranks"])) for h in d["hosts"]),
            groups={k: tuple(tuple(int(r) for r in m) for m in v) for k, v in d.get("groups", {}).items()},
            layout={k: int(v) for k, v in d.get("layout", {}).items()},
            script=d.get("script"),
            created_ts_ns=int(d.get("created_ts_ns", 0)),
            extra=dict(d.get("extra", {})),
        )


def atomic_write_text(path: str | os.PathLike[str], text: str) -> None:
    """Write via a temp file in the same directory and rename: readers never see half a file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_run_info(run_dir: str | os.PathLike[str], info: RunInfo) -> Path:
    path = Path(run_dir) / RUN_INFO_FILE
    atomic_write_text(path, json.dumps(info.to_dict(), indent=2))
    return path


def read_run_info(run_dir: str | os.PathLike[str]) -> RunInfo | None:
    """The run's RunInfo, or None when the directory has no run.json (a bare dataset)."""
    path = Path(run_dir) / RUN_INFO_FILE
    if not path.is_file():
        return None
    try:
        return RunInfo.from_dict(json.loads(path.read_text()))
    except (ValueError, KeyError, TypeError) as exc:
        raise DatasetError(
            f"{path}: not a valid trainctl run.json ({exc!r}); it is written by `trainctl launch`"
        ) from exc


def is_run_dir(path: str | os.PathLike[str]) -> bool:
    return (Path(path) / RUN_INFO_FILE).is_file()


def rank_log_path(run_dir: str | os.PathLike[str], host: str, rank: int) -> Path:
    return Path(run_dir) / "logs" / host / f"rank-{rank}.log"


def nccl_log_path(run_dir: str | os.PathLike[str], host: str, rank: int) -> Path:
    """NCCL's own debug output of one rank (NCCL_DEBUG_FILE, set by trainctl.runtime.nccl_env)."""
    return Path(run_dir) / "logs" / host / f"nccl-rank-{rank}.log"


def fr_dump_dir(run_dir: str | os.PathLike[str], host: str) -> Path:
    return Path(run_dir) / "fr" / host


def stacks_dir(run_dir: str | os.PathLike[str], host: str) -> Path:
    return Path(run_dir) / "stacks" / host


def heartbeat_path(run_dir: str | os.PathLike[str], rank: int) -> Path:
    return Path(run_dir) / "heartbeats" / f"rank-{rank}.json"


def error_file_path(run_dir: str | os.PathLike[str], rank: int) -> Path:
    return Path(run_dir) / "errors" / f"rank-{rank}.json"


def numerics_path(run_dir: str | os.PathLike[str], rank: int) -> Path:
    """The rank's first non-finite loss (the reference trainer writes it once: step, value, time)."""
    return Path(run_dir) / "numerics" / f"rank-{rank}.json"


def drill_kernel_log_path(run_dir: str | os.PathLike[str], host: str) -> Path:
    """The xid drill's stand-in for host H's kernel ring buffer (there is no GPU to fault). Per host,
    so simulated hosts sharing one --local run dir each keep their own; collect reads it as a second
    kernel-log source and diagnose reads it from a run dir, both as host H's kernel log."""
    return Path(run_dir) / "drills" / host / "kernel.log"


def checkpoint_dir(run_dir: str | os.PathLike[str]) -> Path:
    return Path(run_dir) / "checkpoints"


def worker_socket_path(run_dir: str | os.PathLike[str], rank: int) -> Path:
    """Unix socket where rank `rank` serves Flight Recorder and stack dumps (torch _WorkerServer).

    Unix socket paths are limited to ~107 bytes, so the socket lives under /tmp keyed by a hash
    of the run dir rather than inside a possibly deep run dir.
    """
    key = hashlib.sha1(str(Path(run_dir).resolve()).encode()).hexdigest()[:12]
    return Path(tempfile.gettempdir()) / f"trainctl-{key}" / f"rank-{rank}.sock"


def read_rank_files(run_dir: str | os.PathLike[str]) -> dict[int, dict]:
    """ranks/rank-R.json of every rank that started (pid, host, local rank), by rank; a file mid-write is skipped."""
    out: dict[int, dict] = {}
    for p in sorted((Path(run_dir) / "ranks").glob("rank-*.json")):
        try:
            d = json.loads(p.read_text())
            out[int(d["rank"])] = d
        except (OSError, ValueError, KeyError):
            continue  # mid-write: seen next poll
    return out
