"""PyTorch Flight Recorder dumps -> `collectives`, `pg_status`, `fr_dumps` and `stacks` tables.

A dump is one file per rank and recorder. torch 2.13 keeps two recorders in a CUDA build: the CPU
one (`FlightRecorder<c10::Event>`, gloo; served as `fr_trace_json`, dumped by
`_dump_fr_trace[_json]()`) and ProcessGroupNCCL's (`FlightRecorder<at::cuda::CUDAEvent>`; served
as `dump_nccl_trace_json` / `dump_nccl_trace_pickle`, and written by the NCCL watchdog on a
timeout to `<TORCH_FR_DUMP_TEMP_FILE><rank>`). Both write the same format, version "2.10" in torch
2.13 (torch/csrc/distributed/c10d/FlightRecorder.hpp `version_val`; FlightRecorderDetail.hpp
`getCollectiveTrace` / `dump_json`): top-level `version`, `pg_config` ({pg name: {name, desc,
ranks: "[0, 1]"}}), `pg_status` ({rank-local pg_id: {last_enqueued_collective,
last_started_collective, last_completed_collective}}), `comm_lib_version` and `entries` (JSON:
absent when empty). A dump whose entries are `nccl:` ops is the NCCL recorder's, one whose entries
are another backend's the CPU recorder's, whatever its name; an empty one is the NCCL recorder's when
its name holds "nccl" (`nccl-rank-3.json` from the hang dump, `nccl_trace_rank_3` from the watchdog).
Any file name prefix is accepted; the rank comes from the dump's own `rank` key when present,
else from the digits the file name ends with (`rank-3.pkl`, `nccl_trace_rank_3`, `fr3.json`).

Per rank and recorder one dump is kept (the newest: its latest entry was created last; a pickle
over a JSON of the same moment, for the stacks); the two recorders of a rank are merged in the
tables, each row carrying its `backend` (profiling_name's prefix), because a group's gloo and
NCCL halves count their seq ids separately.

ProcessGroupNCCL records every op with BOTH counters (initWork: `record(..., seqCollective_,
seqP2P_, ...)`), so a send/recv entry carries the collective_seq_id of the last collective before
it: p2p rows get `seq` null and `p2p_seq` set, and their `peer` (the group rank after "->" or
"<-" in "nccl:send 1->2" / "nccl:recv 3<-0", ProcessGroupNCCL::send/recv's profilingTitle), so
nothing ever matches a send/recv as a collective.

Pickles are loaded with `PlainUnpickler`, which admits only what the pickle opcodes build by
themselves (dict, list, tuple, str, bytes, int, float, bool, None, set) and refuses every global
lookup, so a hostile file (`__reduce__` -> os.system) raises UnsafePickleError before anything runs.

Gloo quirks handled here (peers.md §0.7): `pg_config` is empty (pg_ranks stays null), `state` is
always "scheduled", start/complete times are 0 (stored as null), `retired` includes timed-out ops,
and JSON dumps give pg_status counters as strings.
"""

from __future__ import annotations

import io
import json
import logging
import os
import pickle
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa

from trainctl.errors import FlightRecorderError, UnsafePickleError
from trainctl.schemas import SignalKind, empty_table, schema_for

__all__ = [
    "FlightRecorderDump",
    "PlainUnpickler",
    "safe_loads",
    "rank_from_name",
    "looks_like_dump",
    "dump_format",
    "find_dumps",
    "load_dump",
    "load_dumps",
    "dumps_to_tables",
    "normalize_op",
    "backend_of",
    "p2p_peer",
    "recorder_of",
]

logger = logging.getLogger(__name__)

HOST_COLUMN = "host"
# Dump files a run dir holds: fr/<host>/rank-R.pkl|.json (INTERFACES.md).
_RANK_SUFFIX = re.compile(r"(\d+)(?:\.(?:pkl|pickle|json|bin))?$", re.IGNORECASE)
_PICKLE_MAGIC = b"\x80"
_SKIP_SUFFIXES = (".txt", ".log", ".parquet", ".tmp", ".py", ".md", ".sock")


class PlainUnpickler(pickle.Unpickler):
    """Unpickles plain containers and scalars only; any global (class, function) is refused.

    Dicts, lists, tuples, sets, strings, bytes and numbers are built by pickle opcodes directly
    and never reach find_class; everything that could run code (REDUCE, BUILD, INST, OBJ, EXT*)
    needs a callable that only find_class can supply, so refusing it there is sufficient.
    """

    def find_class(self, module: str, name: str) -> Any:  # noqa: D401 - pickle API
        raise UnsafePickleError(f"{module}.{name}")

    def persistent_load(self, pid: Any) -> Any:
        raise UnsafePickleError(f"persistent id {pid!r}")


def safe_loads(data: bytes, *, where: str = "<bytes>") -> Any:
    try:
        return PlainUnpickler(io.BytesIO(data)).load()
    except UnsafePickleError as exc:
        raise UnsafePickleError(
            f"{where}: refusing to unpickle: it asks for the global {exc.args[0]!r}, and a Flight Recorder "
            "dump holds only plain containers and scalars; nothing was executed. Do not load this file with "
            "pickle; re-dump the rank as JSON (fr_trace_json) if it is genuine"
        ) from None
    except (pickle.UnpicklingError, EOFError, ValueError, TypeError, IndexError, KeyError, MemoryError) as exc:
        raise FlightRecorderError(
            f"{where}: not a readable Flight Recorder pickle ({exc!r}); re-dump the rank"
        ) from exc


def rank_from_name(path: str | os.PathLike[str]) -> int | None:
    m = _RANK_SUFFIX.search(Path(path).name)
    return int(m.group(1)) if m else None


def looks_like_dump(path: Path) -> bool:
    """Cheap test used by input detection: a rank-numbered file that starts like a pickle or a JSON dump."""
    return dump_format(path) is not None


def dump_format(path: Path) -> str | None:
    """ "pickle" or "json" for a rank-numbered file that starts like a dump of that format, else None."""
    if not path.is_file() or path.name.startswith(".") or path.suffix.lower() in _SKIP_SUFFIXES:
        return None
    if rank_from_name(path) is None:
        return None
    try:
        with path.open("rb") as f:
            head = f.read(4096)
    except OSError:
        return None
    if head.startswith(_PICKLE_MAGIC):
        return "pickle"
    stripped = head.lstrip()
    if stripped.startswith(b"{") and (b'"entries"' in head or b'"pg_status"' in head or b'"version"' in head):
        return "json"
    return None


def find_dumps(root: str | os.PathLike[str], *, max_depth: int = 3) -> list[Path]:
    """Every dump file under root (at most max_depth folders deep), sorted by path."""
    root = Path(root)
    found: list[Path] = []

    def walk(d: Path, depth: int) -> None:
        try:
            children = sorted(d.iterdir())
        except OSError:
            return
        for c in children:
            if c.is_dir() and depth < max_depth and not c.name.startswith("."):
                walk(c, depth + 1)
            elif looks_like_dump(c):
                found.append(c)

    walk(root, 0)
    return found


@dataclass(frozen=True)
class FlightRecorderDump:
    rank: int
    host: str | None
    path: Path
    version: str
    entries: tuple[Mapping[str, Any], ...]
    pg_status: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    pg_config: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    fmt: str = "pickle"  # pickle | json
    recorder: str = "cpu"  # nccl | cpu
    comm_lib_version: str | None = None

    @property
    def latest_ns(self) -> int:
        """time_created_ns of the newest entry (0 for an empty buffer): which of two dumps is newer."""
        return max((_int(e.get("time_created_ns")) or 0 for e in self.entries), default=0)


# Backends whose ops ProcessGroupNCCL (or its ROCm build) records in the CUDA recorder.
_NCCL_BACKENDS = frozenset({"nccl", "ncclx", "rccl", "rcclx"})


def backend_of(profiling_name: str | None) -> str | None:
    """'nccl:all_reduce' -> 'nccl'; 'gloo:broadcast' -> 'gloo'; no prefix -> None."""
    name = (profiling_name if isinstance(profiling_name, str) else "").strip()
    return name.split(":", 1)[0].lower() or None if ":" in name else None


def recorder_of(path: Path, entries: Iterable[Mapping[str, Any]], comm_lib_version: str | None = None) -> str:
    """'nccl' for ProcessGroupNCCL's recorder, else 'cpu'. Said by the entries' backend, else the file
    name, else `comm_lib_version`: only accelerator backends call record_accelerator_version
    (ProcessGroupNCCL records the NCCL version; gloo leaves it ""). The entries come first because
    torch's default dump prefix names every recorder's file `nccl_trace_rank_<R>`
    (TORCH_FR_DUMP_TEMP_FILE): gloo dumps under that name were taken for the NCCL recorder's, and
    their entries, gloo's, were then nobody's (no finding on 4 ranks with one hung)."""
    for e in entries:
        b = backend_of(e.get("profiling_name"))
        if b is not None:
            return "nccl" if b in _NCCL_BACKENDS else "cpu"
    if "nccl" in path.name.lower():
        return "nccl"
    return "nccl" if comm_lib_version else "cpu"


_PEER = re.compile(r"^(?:send\s+\d+\s*->\s*(\d+)|recv\s+\d+\s*<-\s*(\d+))$")


def p2p_peer(profiling_name: str | None) -> int | None:
    """Group rank of the other side of a send/recv: 'nccl:send 1->2' -> 2, 'nccl:recv 3<-0' -> 0."""
    name = (profiling_name if isinstance(profiling_name, str) else "").strip()
    if ":" in name:
        name = name.split(":", 1)[1]
    m = _PEER.match(name.strip())
    if not m:
        return None
    return int(m.group(1) if m.group(1) is not None else m.group(2))


def _host_of(path: Path, root: Path | None) -> str | None:
    """fr/<host>/rank-R.* -> host; a dump in a per-host subfolder of a raw dir -> that folder."""
    parent = path.parent
    if parent.parent.name == "fr":
        return parent.name
    if root is not None and parent != root and parent.parent == root:
        return parent.name
    return None


def load_dump(path: str | os.PathLike[str], *, root: Path | None = None) -> FlightRecorderDump:
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise FlightRecorderError(f"{path}: cannot read Flight Recorder dump ({exc.strerror})") from exc
    if data.startswith(_PICKLE_MAGIC):
        obj, fmt = safe_loads(data, where=str(path)), "pickle"
    elif data.lstrip().startswith(b"{"):
        try:
            obj, fmt = json.loads(data), "json"
        except (ValueError, UnicodeDecodeError) as exc:
            raise FlightRecorderError(
                f"{path}: truncated or invalid JSON Flight Recorder dump ({exc}); re-dump the rank"
            ) from exc
    else:
        raise FlightRecorderError(
            f"{path}: neither a pickle nor a JSON Flight Recorder dump (first bytes {data[:8]!r})"
        )
    if not isinstance(obj, dict) or not isinstance(obj.get("entries", []), list):
        raise FlightRecorderError(
            f"{path}: not a Flight Recorder dump (expected a dict with 'entries', got {type(obj).__name__})"
        )
    rank = obj.get("rank")
    name_rank = rank_from_name(path)
    if name_rank is not None and not 0 <= name_rank < 2**31:
        name_rank = None
    if not isinstance(rank, int) or isinstance(rank, bool) or not 0 <= rank < 2**31:  # ranks are int32
        rank = name_rank
    elif name_rank is not None and name_rank != rank:
        logger.warning("%s: file name says rank %d, dump says rank %d; using the dump", path, name_rank, rank)
    if rank is None:
        raise FlightRecorderError(
            f"{path}: cannot tell which rank wrote this dump; name it <prefix><rank> (e.g. rank-3.pkl)"
        )
    # dump_json leaves "entries" out when the buffer is empty (FlightRecorderDetail.hpp).
    entries = tuple(e for e in obj.get("entries") or () if isinstance(e, dict))
    version = str(obj.get("version", ""))
    if version and not version.startswith("2."):
        logger.warning("%s: Flight Recorder format %s (read as 2.x; torch 2.13 writes 2.10)", path, version)
    lib = obj.get("comm_lib_version", obj.get("nccl_version"))  # older formats name it nccl_version
    # pg_config maps pg name -> {name, desc, ranks}; gloo leaves one {"": ...} placeholder (peers.md).
    raw_config, raw_status = obj.get("pg_config"), obj.get("pg_status")
    raw_config = raw_config if isinstance(raw_config, dict) else {}  # a hostile dump: another type is no config
    raw_status = raw_status if isinstance(raw_status, dict) else {}
    pg_config = {str(k): v for k, v in raw_config.items() if isinstance(v, dict) and str(k)}
    return FlightRecorderDump(
        rank=int(rank),
        host=_host_of(path, root),
        path=path,
        version=version,
        entries=entries,
        pg_status={str(k): v for k, v in raw_status.items() if isinstance(v, dict)},
        pg_config=pg_config,
        fmt=fmt,
        recorder=recorder_of(path, entries, None if lib in (None, "") else str(lib)),
        comm_lib_version=None if lib in (None, "") else str(lib),
    )


def load_dumps(
    paths: Iterable[Path], *, root: Path | None = None, skip_unreadable: bool = False
) -> list[FlightRecorderDump]:
    """Load dumps, one per rank and recorder, sorted by (rank, recorder).

    Several dumps of one recorder of one rank (the hang dump's JSON and pickle, the watchdog's own
    file, an earlier attempt's) are not an error: the newest is kept (its latest entry was created
    last), and of two equally new ones the pickle (it carries the stacks).

    skip_unreadable: a dump that cannot be read (torn, hostile, not a dump) is skipped with a
    warning naming it (diagnose lists it and exits "partial input"), as long as at least one dump
    was read; otherwise the first error is raised.
    """
    kept: dict[tuple[int, str], FlightRecorderDump] = {}
    unreadable: list[tuple[Path, FlightRecorderError]] = []
    for p in paths:
        try:
            d = load_dump(p, root=root)
        except UnsafePickleError as exc:
            if not skip_unreadable:
                raise  # a hostile file is reported, whatever else is there
            logger.error("%s; not loaded, the other dumps are analysed", exc)
            unreadable.append((p, exc))
            continue
        except FlightRecorderError as exc:
            unreadable.append((p, exc))
            continue
        key = (d.rank, d.recorder)
        prev = kept.get(key)
        if prev is None or _newer(d, prev):
            if prev is not None:
                logger.info("rank %d (%s recorder): using %s over %s", d.rank, d.recorder, d.path, prev.path)
            kept[key] = d
    # A torn file (the watchdog killed mid-write, a half-copied dump) is skipped when another dump
    # of the same rank and recorder was read; otherwise it fails clearly, naming the file.
    for p, exc in unreadable:
        rank = rank_from_name(p)
        if rank is not None and (rank, "nccl" if "nccl" in p.name.lower() else "cpu") in kept:
            logger.warning("%s; using the rank's other dump", exc)
            continue
        if skip_unreadable and kept:
            if not isinstance(exc, UnsafePickleError):  # (already said, louder)
                logger.warning("%s; skipped, the other ranks' dumps are analysed", exc)
            continue
        raise exc
    return [kept[k] for k in sorted(kept)]


def _newer(a: FlightRecorderDump, b: FlightRecorderDump) -> bool:
    ka = (a.latest_ns, len(a.entries), a.fmt == "pickle", str(a.path))
    kb = (b.latest_ns, len(b.entries), b.fmt == "pickle", str(b.path))
    return ka > kb


def normalize_op(profiling_name: str | None) -> str:
    """'gloo:all_reduce' -> 'all_reduce'; 'nccl:send 1->2' -> 'send'; 'c10d:barrier' -> 'barrier'."""
    name = (profiling_name if isinstance(profiling_name, str) else "").strip()
    if ":" in name:
        name = name.split(":", 1)[1]
    return name.split(" ", 1)[0] or "unknown"


_INT64 = 2**63


def _int(v: Any) -> int | None:
    """An int64, or None: a dump from a hostile or broken writer may hold any JSON/pickle value here
    (strings, floats, NaN, counters past int64), and one bad value must not fail the whole dump."""
    if v is None or isinstance(v, bool):
        return None
    try:
        n = int(v)
    except (TypeError, ValueError, OverflowError):
        return None
    return n if -_INT64 <= n < _INT64 else None


def _int32(v: Any) -> int | None:
    n = _int(v)
    return n if n is not None and -(2**31) <= n < 2**31 else None


def _str(v: Any) -> str | None:
    return v if isinstance(v, str) else None


def _list(v: Any) -> list[Any]:
    return list(v) if isinstance(v, (list, tuple)) else []


def _ts(v: Any) -> int | None:
    n = _int(v)
    return n if n else None  # gloo leaves 0 where it never observed the time


def _pg_ranks(cfg: Mapping[str, Mapping[str, Any]], pg_name: str) -> list[int] | None:
    c = cfg.get(pg_name)
    if not c:
        return None
    raw = c.get("ranks")
    if isinstance(raw, str):  # "[0, 1]": parsed as JSON, never eval'd
        try:
            raw = json.loads(raw)
        except ValueError:
            return None
    if isinstance(raw, list) and raw and all(isinstance(r, int) for r in raw):
        return [int(r) for r in raw]
    return None


def _pg_name(e: Mapping[str, Any]) -> str:
    pg = e.get("process_group") or ("", "")
    return str(pg[0]) if isinstance(pg, (list, tuple)) else str(pg)


def _sizes(v: Any) -> list[list[int]] | None:
    if not isinstance(v, (list, tuple)) or not all(isinstance(s, (list, tuple)) for s in v):
        return None
    out = [[_int(x) for x in s] for s in v]
    return None if any(x is None for s in out for x in s) else out  # type: ignore[misc]


def _frames(v: Any) -> list[dict[str, Any]]:
    if not isinstance(v, (list, tuple)):
        return []
    return [
        {
            "name": str(f.get("name", ""))[:1000],
            "filename": str(f.get("filename", ""))[:1000],
            "line": _int32(f.get("line")),
        }
        for f in v
        if isinstance(f, dict)
    ]


def dumps_to_tables(dumps: Iterable[FlightRecorderDump]) -> dict[SignalKind, pa.Table]:
    """`collectives`, `pg_status`, `fr_dumps` and `stacks` (frames of each rank's newest entry that
    has them), each with a host column. The dumps of a rank's two recorders are concatenated."""
    coll: list[dict[str, Any]] = []
    coll_hosts: list[str | None] = []
    status: list[dict[str, Any]] = []
    status_hosts: list[str | None] = []
    inventory: list[dict[str, Any]] = []
    inventory_hosts: list[str | None] = []
    latest: dict[int, tuple[Mapping[str, Any], FlightRecorderDump]] = {}
    for d in dumps:
        record_ids = [r for r in (_int(e.get("record_id")) for e in d.entries) if r is not None]
        inventory.append(
            {
                "rank": d.rank,
                "recorder": d.recorder,
                "fr_version": d.version or None,
                "comm_lib_version": d.comm_lib_version,
                "entries": len(d.entries),
                "first_record_id": min(record_ids, default=None),
                "last_record_id": max(record_ids, default=None),
                "groups_configured": len(d.pg_config),
                "source": str(d.path),
            }
        )
        inventory_hosts.append(d.host)
        for e in d.entries:
            pg = e.get("process_group") or ("", "")
            pg_name, pg_desc = (
                (str(pg[0]), str(pg[1]) if len(pg) > 1 else None)
                if isinstance(pg, (list, tuple)) and pg
                else (str(pg), None)
            )
            is_p2p = bool(e.get("is_p2p"))
            frames = _frames(e.get("frames"))
            coll.append(
                {
                    "rank": d.rank,
                    "pg_name": pg_name,
                    "pg_desc": pg_desc,
                    "pg_ranks": _pg_ranks(d.pg_config, pg_name),
                    "seq": None if is_p2p else _int(e.get("collective_seq_id")),
                    "p2p_seq": _int(e.get("p2p_seq_id")) if is_p2p else None,
                    "record_id": _int(e.get("record_id")),
                    "op": normalize_op(e.get("profiling_name")),
                    "input_sizes": _sizes(e.get("input_sizes")),
                    "output_sizes": _sizes(e.get("output_sizes")),
                    "input_dtypes": [str(x) for x in _list(e.get("input_dtypes"))],
                    "output_dtypes": [str(x) for x in _list(e.get("output_dtypes"))],
                    "enqueue_ts": _ts(e.get("time_created_ns")),
                    # JSON writes 0 and the pickle None for "never discovered" (FlightRecorderDetail.hpp).
                    "start_ts": _ts(e.get("time_discovered_started_ns")),
                    "end_ts": _ts(e.get("time_discovered_completed_ns")),
                    "state": _str(e.get("state")),
                    "retired": e.get("retired") if isinstance(e.get("retired"), bool) else None,
                    "timeout_ms": _int(e.get("timeout_ms")),
                    # The schema stores frames innermost last; Flight Recorder lists them innermost first.
                    "frames": json.dumps(frames[::-1]) if frames else None,
                    "backend": backend_of(e.get("profiling_name")),
                    "peer": p2p_peer(e.get("profiling_name")) if is_p2p else None,
                }
            )
            coll_hosts.append(d.host)
            if frames:
                ts = _int(e.get("time_created_ns")) or 0
                prev = latest.get(d.rank)
                if prev is None or ts >= (_int(prev[0].get("time_created_ns")) or 0):
                    latest[d.rank] = (e, d)
        # pg_status is keyed by the rank-local pg_id (the index among the groups this rank is a
        # member of), not by pg_name: rank 2's "1" may be the group rank 0 calls "1" or "2".
        # Map through the entries; a key with no entry left (ring-buffer wrap) cannot be placed
        # safely and is dropped, except the default group, which is pg 0 everywhere.
        id_to_name: dict[str, tuple[str, str | None]] = {}
        for e in d.entries:
            if e.get("pg_id") is not None:
                id_to_name[str(e.get("pg_id"))] = (_pg_name(e), backend_of(e.get("profiling_name")))
        default_backend = next((b for _, b in id_to_name.values() if b), None)
        id_to_name.setdefault("0", ("0", default_backend))
        for pg_id, st in d.pg_status.items():
            placed = id_to_name.get(pg_id)
            if placed is None:
                logger.info("%s: pg_status key %s matches no entry; skipped", d.path, pg_id)
                continue
            if not isinstance(st, Mapping):
                continue
            status.append(
                {
                    "rank": d.rank,
                    "pg_name": placed[0],
                    "last_enqueued_seq": _int(st.get("last_enqueued_collective")),
                    "last_started_seq": _int(st.get("last_started_collective")),
                    "last_completed_seq": _int(st.get("last_completed_collective")),
                    "fr_version": d.version,
                    "source": str(d.path),
                    "backend": placed[1],
                }
            )
            status_hosts.append(d.host)
    stacks: list[dict[str, Any]] = []
    stack_hosts: list[str | None] = []
    for rank, (e, d) in sorted(latest.items()):
        for depth, f in enumerate(_frames(e.get("frames"))):
            stacks.append(
                {
                    "ts": _ts(e.get("time_created_ns")),
                    "rank": rank,
                    "pid": None,
                    "thread": str(e.get("thread_name") or "") or None,
                    "depth": depth,
                    "function": f["name"] or "?",
                    "filename": f["filename"] or None,
                    "line": f["line"],
                    "source": "flight_recorder",
                }
            )
            stack_hosts.append(d.host)
    return {
        SignalKind.COLLECTIVES: _table(SignalKind.COLLECTIVES, coll, coll_hosts),
        SignalKind.PG_STATUS: _table(SignalKind.PG_STATUS, status, status_hosts),
        SignalKind.FR_DUMPS: _table(SignalKind.FR_DUMPS, inventory, inventory_hosts),
        SignalKind.STACKS: _table(SignalKind.STACKS, stacks, stack_hosts),
    }


def _table(kind: SignalKind, rows: list[dict[str, Any]], hosts: list[str | None]) -> pa.Table:
    if not rows:
        return empty_table(kind, host_column=HOST_COLUMN)
    t = pa.Table.from_pylist(rows, schema=schema_for(kind))
    return t.append_column(HOST_COLUMN, pa.array(hosts, pa.string()))
