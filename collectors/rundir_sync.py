"""Bringing a host's run dir artefacts back: remote manifest, what to fetch, and the tar stream.

Command + pure parser (pyinfra's fact shape): `manifest_command(run_dir)` lists every file as
`path NUL size NUL mtime NUL` (GNU find), `parse_manifest` reads it, `classify` maps a run dir path
to the artefact kind recorded in collection_status, `changed` compares with what a previous
collect already fetched, and `tar_command` streams the chosen files (names on stdin, NUL separated,
so no file name ever reaches the shell).
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from trainctl.schemas import SignalKind

__all__ = [
    "NO_RUN_DIR_EXIT",
    "TABLE_KINDS",
    "FILE_KINDS",
    "ARTIFACT_KINDS",
    "FileStat",
    "manifest_command",
    "parse_manifest",
    "classify",
    "changed",
    "tar_command",
    "safe_relpath",
    "path_host",
    "FOREIGN_PATHS",
    "SHARED_RUN_DIR",
    "shared_view",
]

NO_RUN_DIR_EXIT = 3

# Tables a run dir holds (collection_status and host_facts are written by collect itself).
TABLE_KINDS = tuple(k.value for k in SignalKind if k not in (SignalKind.COLLECTION_STATUS, SignalKind.HOST_FACTS))
# Raw artefacts (INTERFACES.md "Run dir artefacts"), by the name collection_status records.
FILE_KINDS = ("run_info", "ranks", "heartbeats", "errors", "numerics", "rank_logs", "fr_dumps", "stack_dumps")
ARTIFACT_KINDS = TABLE_KINDS + FILE_KINDS

_RAW_DIRS = {"logs": "rank_logs", "fr": "fr_dumps", "stacks": "stack_dumps"}
_RANK_FILES = {"ranks", "heartbeats", "errors", "numerics"}
# checkpoints are big and not diagnostic; .trainctl-collect is collect's own bookkeeping.
_PRUNE = ("./checkpoints", "./.trainctl-collect")


@dataclass(frozen=True)
class FileStat:
    size_bytes: int
    mtime_ns: int


def manifest_command(run_dir: str) -> str:
    prune = " -o ".join(f"-path {shlex.quote(p)}" for p in _PRUNE)
    return (
        f"cd -- {shlex.quote(run_dir)} 2>/dev/null || exit {NO_RUN_DIR_EXIT}\n"
        f"find . -maxdepth 4 \\( {prune} \\) -prune -o -type f -printf '%P\\0%s\\0%T@\\0'"
    )


def parse_manifest(raw: bytes) -> dict[str, FileStat]:
    parts = raw.split(b"\0")
    out: dict[str, FileStat] = {}
    for i in range(0, len(parts) - 2, 3):
        path = parts[i].decode("utf-8", "surrogateescape")
        secs, _, frac = parts[i + 2].decode().partition(".")
        mtime_ns = int(secs) * 1_000_000_000 + int((frac + "000000000")[:9])
        out[path] = FileStat(int(parts[i + 1]), mtime_ns)
    return out


def safe_relpath(path: str) -> bool:
    """A relative path of plain components: no `..`, no absolute path, no hidden/temp files, no NUL.

    Any other character is fine (spaces, newlines, non-ASCII): names travel NUL-separated in both
    directions (find -printf '%P\\0', tar --null -T -), so no name is ever parsed by a shell.
    """
    comps = path.split("/")
    return bool(comps) and all(c and c not in (".", "..") and not c.startswith(".") and "\0" not in c for c in comps)


def classify(path: str) -> str | None:
    """The artefact kind of a run dir path, or None for files collect does not bring back."""
    if not safe_relpath(path) or path.endswith(".tmp"):
        return None
    comps = path.split("/")
    if comps == ["run.json"]:
        return "run_info"
    if len(comps) == 2 and comps[0] in _RANK_FILES and re.fullmatch(r"rank-\d+\.json", comps[1]):
        return comps[0]
    if len(comps) == 3 and comps[1].startswith("host=") and comps[2].endswith(".parquet"):
        return comps[0] if comps[0] in TABLE_KINDS else None
    if len(comps) == 3 and comps[0] in _RAW_DIRS and not comps[1].startswith("host="):
        return _RAW_DIRS[comps[0]]
    return None


FOREIGN_PATHS = "foreign_paths"  # collection_status error_type: a host sent files under another host's paths
SHARED_RUN_DIR = "shared_run_dir"  # ... and every one of them is its owner's too: one file system, seen twice


def path_host(path: str) -> str | None:
    """The host a run dir path is about (`timeline/host=H/...`, `logs/H/...`, `fr/H/...`, `stacks/H/...`),
    or None for paths that name no host (run.json, rank files).

    Collect takes such a path only from host H itself: otherwise one host's archive could carry
    files under another host's paths and have them analysed as the other host's (a host framing
    another, by accident or not).
    """
    from urllib.parse import unquote

    comps = path.split("/")
    if len(comps) == 3 and comps[1].startswith("host="):
        return unquote(comps[1][len("host=") :])
    if len(comps) == 3 and comps[0] in _RAW_DIRS:
        return comps[1]
    return None


def changed(remote: Mapping[str, FileStat], local: Mapping[str, FileStat], kinds: Iterable[str]) -> dict[str, str]:
    """Paths to fetch (path -> kind): selected kinds whose size or mtime differs from the last fetch."""
    wanted = set(kinds)
    out = {}
    for path, st in remote.items():
        kind = classify(path)
        if kind in wanted and local.get(path) != st:
            out[path] = kind
    return out


def tar_command(run_dir: str) -> str:
    # Names come on stdin (NUL separated): nothing from the remote file system is ever parsed by a
    # shell. --ignore-failed-read: a heartbeat replaced between manifest and tar is not an error.
    # --format=gnu whatever the distribution's default: the client's reader (TarStream) takes GNU
    # headers and long names only, never pax.
    return f"cd -- {shlex.quote(run_dir)} && tar --null --no-recursion --ignore-failed-read --format=gnu -T - -cf -"


def shared_view(foreign: Iterable[str], listings: Mapping[str, Mapping[str, FileStat]]) -> bool:
    """Whether the other hosts' paths a host listed are all listed by their owners too (pure).

    On a run dir that every host mounts, each host lists every host's files; their owners list
    the same paths. A path its owner does not list (or an owner that did not answer) is not
    explained that way. Sizes and times are not compared: on a live run a log grows between two
    listings. Either way the foreign paths are never fetched from the host that is not their owner.
    """
    paths = list(foreign)
    return bool(paths) and all(p in listings.get(str(path_host(p)), {}) for p in paths)
