"""`trainctl collect`: every host's run dir artefacts and host signals into one dataset.

Per host, over one SSH connection (trainctl.collectors.ssh) and one exec:
  1. the probe script: the run dir manifest (path/size/mtime), host facts, the kernel log's
     NVRM/Xid lines and the ranks' pids (collectors/remote_script.py frames them), then a
     handoff line; the script waits for our answer on stdin;
  2. we answer with the files whose size or mtime changed since the last collect (the local
     manifest under DATASET/.trainctl-collect/), and they stream back in one `tar` on the same
     channel (no SFTP: the baseline measured it 18-57 % slower; read by TarStream) and land in
     the same relative layout as the run dir;
  3. `py-spy dump` of the ranks still running there (a second exec), when py-spy is installed.
Every host x kind outcome becomes a collection_status row (ok, rows, bytes, duration, or the
error), so missing data is never silent. A file several hosts see (a run dir on a shared file
system, run.json) is fetched once, from the first host that reports it.
"""

from __future__ import annotations

import json
import logging
import os
import tarfile
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO
from urllib.parse import quote

import pyarrow as pa
import pyarrow.parquet as pq

from trainctl import dataset
from trainctl.collectors import host_facts, kernel_log, pyspy_dump, rundir_sync
from trainctl.collectors.remote_script import GO, build_script, handoff_marker, new_nonce, split_sections
from trainctl.collectors.ssh import (
    MAX_WORKERS,
    ChannelReader,
    CommandResult,
    CommandTimeout,
    GroupResult,
    HostOutcome,
    OutputTooLarge,
    SshClient,
    SshSession,
    error_type_of,
    fan_out,
)
from trainctl.errors import CollectError, InputError, UsageError
from trainctl.ops.collect.tar_stream import TarStream
from trainctl.rundir import atomic_write_text
from trainctl.schemas import SignalKind

if TYPE_CHECKING:  # kubectl's transport loads only when a collect asks for pods
    from trainctl.collectors.kubectl import KubectlClient
    from trainctl.collectors.process_session import ProcessReader, ProcessSession

__all__ = [
    "write_status",
    "HOST_KINDS",
    "ALL_KINDS",
    "StatusRow",
    "HostReport",
    "CollectOptions",
    "CollectResult",
    "collect",
    "parse_kinds",
    "write_tar_member",
]

logger = logging.getLogger(__name__)

HOST_KINDS = ("host_facts", "kernel_log", "pyspy")
ALL_KINDS = rundir_sync.ARTIFACT_KINDS + HOST_KINDS
_STATE_DIR = ".trainctl-collect"


def parse_kinds(spec: Iterable[str] | None) -> tuple[str, ...]:
    """`--kinds a,b` (repeatable); `tables` and `files` name the groups. Default: everything."""
    if not spec:
        return ALL_KINDS
    out: list[str] = []
    for item in spec:
        for k in (s.strip() for s in item.split(",")):
            group = {"tables": rundir_sync.TABLE_KINDS, "files": rundir_sync.FILE_KINDS, "all": ALL_KINDS}.get(k)
            if group:
                out.extend(group)
            elif k in ALL_KINDS:
                out.append(k)
            elif k:
                raise InputError(f"--kinds: unknown kind {k!r}; choose from tables, files, {', '.join(ALL_KINDS)}")
    return tuple(dict.fromkeys(out))


@dataclass(frozen=True)
class StatusRow:
    host: str
    kind: str
    ok: bool
    rows: int | None = None
    bytes: int = 0  # bytes transferred by this collect (0 when nothing changed)
    duration_s: float = 0.0
    error_type: str | None = None
    error: str | None = None


@dataclass
class HostReport:
    host: str
    rows: list[StatusRow] = field(default_factory=list)
    bytes_fetched: int = 0
    files_fetched: int = 0
    failed: bool = False  # unreachable, or its run dir could not be read
    error: str | None = None


@dataclass(frozen=True)
class CollectOptions:
    run_dir: str
    out: Path
    hosts: tuple[str, ...]
    kinds: tuple[str, ...] = ALL_KINDS
    ssh_config: str | None = None
    timeout_s: float = 60.0  # per remote command (the transfer included)
    connect_timeout_s: float | None = None  # None: the config's ConnectTimeout, else 10 s
    accept_new_host_keys: bool = False
    max_workers: int = MAX_WORKERS
    python: str = "python3"  # interpreter whose torch/NCCL versions go into host_facts
    # Bounds on what one host may send (a broken or hostile host must not fill the disk or the
    # memory): files past a cap are not fetched and the cap is recorded in collection_status.
    max_host_bytes: int = 64 << 30
    max_host_files: int = 200_000
    max_file_bytes: int = 8 << 30
    max_output_bytes: int = 256 << 20  # the metadata script's output (manifest, kernel log, facts)


@dataclass(frozen=True)
class CollectResult:
    out: Path
    reports: tuple[HostReport, ...]
    duration_s: float

    @property
    def failed_hosts(self) -> list[str]:
        return [r.host for r in self.reports if r.failed]

    @property
    def bytes_fetched(self) -> int:
        return sum(r.bytes_fetched for r in self.reports)

    @property
    def files_fetched(self) -> int:
        return sum(r.files_fetched for r in self.reports)

    def to_dict(self) -> dict:
        return {
            "out": str(self.out),
            "duration_s": round(self.duration_s, 3),
            "hosts": len(self.reports),
            "failed_hosts": self.failed_hosts,
            "bytes_fetched": self.bytes_fetched,
            "files_fetched": self.files_fetched,
            "status": [r.__dict__ for rep in self.reports for r in rep.rows],
        }


Progress = Callable[[str, int, "HostReport | None"], None]  # (host, bytes just fetched, report when done)


class _Claims:
    """Which host fetches a path several hosts report (shared file systems, run.json)."""

    def __init__(self, previous: dict[str, str]) -> None:
        self._lock = threading.Lock()
        self._owner = dict(previous)

    def claim(self, path: str, host: str) -> bool:
        with self._lock:
            return self._owner.setdefault(path, host) == host


def _state_path(out: Path, host: str) -> Path:
    return out / _STATE_DIR / f"{quote(host, safe='')}.json"


def _load_state(out: Path, host: str) -> dict[str, rundir_sync.FileStat]:
    p = _state_path(out, host)
    if not p.is_file():
        return {}
    try:
        return {k: rundir_sync.FileStat(*v) for k, v in json.loads(p.read_text()).items()}
    except (ValueError, TypeError):
        logger.warning("%s: unreadable collect manifest, fetching everything again", p)
        return {}


def _save_state(out: Path, host: str, state: dict[str, rundir_sync.FileStat]) -> None:
    atomic_write_text(
        _state_path(out, host), json.dumps({k: [v.size_bytes, v.mtime_ns] for k, v in sorted(state.items())})
    )


class TarMemberRefused(CollectError):
    """A member of a host's tar stream that is not what its manifest declared."""


# tarfile's stream mode reads its source in `bufsize` pieces (default 10 KiB): each piece is a
# paramiko Channel.recv with its locks and a bytes join, about half of the client's CPU per host in
# bench/fanout.py's profile. 64 KiB pieces take what the channel has buffered (32 KiB packets) in
# one call and stay under glibc's 128 KiB mmap threshold: 256 KiB pieces were faster in a warm
# process but slower in a fresh one (every buffer an mmap/munmap with its page faults).
# (Gateway archives still go through tarfile; a host's run dir files go through TarStream.)
TAR_BUFSIZE = 64 << 10


def _extract(
    reader,
    out: Path,
    wanted: dict[str, str],
    stats: dict[str, rundir_sync.FileStat],
    on_bytes: Callable[[int], None],
    *,
    first: bytes = b"",
) -> dict[str, int]:
    """Write the tar stream's regular files that we asked for; returns path -> bytes written.

    Only names we requested, as plain relative paths, are written (a hostile remote cannot place
    files elsewhere); each file is written to a temp name and renamed, so readers never see half.
    A member that is not a plain regular file (sparse, link, device, FIFO) or that is larger than
    the host's own manifest declared stops the transfer with TarMemberRefused: a 21 KB sparse
    member must not unpack to 2 GiB. Directories are skipped. `first`: the stream's opening bytes,
    already read from `reader` (what came with the listing's end).
    """
    written: dict[str, int] = {}
    ts = TarStream(reader, first=first)
    while (m := ts.next()) is not None:
        if m.isdir():
            continue
        if m.name not in wanted or not rundir_sync.safe_relpath(m.name):
            raise TarMemberRefused(f"tar member {m.name[:200]!r} was not asked for; transfer stopped")
        if m.type not in _PLAIN_FILE_TYPES:
            what = "sparse" if m.type == tarfile.GNUTYPE_SPARSE else "a link or special file"
            raise TarMemberRefused(f"tar member {m.name[:200]!r} is {what}; only regular files are taken")
        declared = stats[m.name].size_bytes
        if m.size > declared:
            raise TarMemberRefused(
                f"tar member {m.name[:200]!r} is {m.size} bytes, the host's manifest declared {declared}"
            )
        size = m.size
        n = _land(out / m.name, stats[m.name].mtime_ns, lambda fh, size=size: ts.copy_to(fh, size))
        written[m.name] = n
        on_bytes(n)
    return written


# Regular files only: tarfile.REGULAR_TYPES also counts GNU sparse members as regular.
_PLAIN_FILE_TYPES = (tarfile.REGTYPE, tarfile.AREGTYPE, tarfile.CONTTYPE)


def write_tar_member(tf: tarfile.TarFile, m: tarfile.TarInfo, dest: Path, mtime_ns: int) -> int:
    """Stream one regular member of a stream-mode archive to `dest` (temp name, then rename: readers
    never see half a file), at most its declared size; returns the bytes written."""
    src = tf.extractfile(m)

    def copy(fh: BinaryIO) -> int:
        n = 0
        while n < m.size and (chunk := src.read(min(TAR_BUFSIZE, m.size - n))):  # type: ignore[union-attr]
            fh.write(chunk)
            n += len(chunk)
        return n

    return _land(dest, mtime_ns, copy)


def _land(dest: Path, mtime_ns: int, copy: Callable[[BinaryIO], int]) -> int:
    """`copy` writes a file's bytes into a temp file that is then renamed to `dest` and given the
    host's mtime; returns what `copy` returned (the bytes written)."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    # A temp name of this thread's own: two gateways (or srun nodes) can bring the same host-less
    # file (run.json) at once, and a shared ".part" name let one rename the other's away (ENOENT).
    tmp = dest.with_name(f".{dest.name}.{os.getpid()}.{threading.get_ident()}.part")
    try:
        with open(tmp, "wb") as fh:
            n = copy(fh)
        os.replace(tmp, dest)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    try:
        os.utime(dest, ns=(mtime_ns, mtime_ns))
    except FileNotFoundError:
        pass  # replaced meanwhile by the same file from another sender: its own time stands
    return n


def _within_caps(
    todo: Mapping[str, str], remote: Mapping[str, rundir_sync.FileStat], o: CollectOptions
) -> tuple[dict[str, str], list[str]]:
    """The files to fetch within the host's byte/file caps (smallest first keeps the most files),
    and what was left out, in words."""
    kept: dict[str, str] = {}
    too_big = [p for p in todo if remote[p].size_bytes > o.max_file_bytes]
    total = 0
    over = 0
    for p in sorted((p for p in todo if p not in too_big), key=lambda p: (remote[p].size_bytes, p)):
        size = remote[p].size_bytes
        if len(kept) >= o.max_host_files or total + size > o.max_host_bytes:
            over += 1
            continue
        kept[p] = todo[p]
        total += size
    notes = []
    if too_big:
        notes.append(
            f"{len(too_big)} file(s) over the {o.max_file_bytes / 2**30:g} GiB per-file cap (--max-file-gib), "
            f"e.g. {too_big[0]}"
        )
    if over:
        notes.append(
            f"{over} file(s) past the host's caps ({o.max_host_files} files, {o.max_host_bytes / 2**30:g} GiB); "
            "raise --max-host-files / --max-host-gib"
        )
    return kept, notes


def _count_rows(out: Path, kind: str, paths: Iterable[str]) -> int:
    """Rows of the Parquet parts, plus one per raw file (a Flight Recorder dump under fr/ shares its
    kind's name with the fr_dumps table but is a pickle: counted, never opened as Parquet)."""
    total = 0
    for p in paths:
        if kind not in rundir_sync.TABLE_KINDS or not p.endswith(".parquet"):
            total += 1
            continue
        try:
            total += pq.read_metadata(out / p).num_rows
        except (OSError, pa.ArrowInvalid):
            logger.warning("%s: not a readable parquet file", out / p)
    return total


@dataclass(frozen=True)
class _Probe:
    """What the listing part of a host's one exec said."""

    nonce: str
    stdout: bytes  # the sections' output (remote_script framing)
    rest: bytes  # bytes after the handoff line: the start of the fetch's output (normally none yet)
    ended: CommandResult | None  # the script's end when it stopped before the handoff (died, killed)


def _read_probe(conv: ChannelReader | ProcessReader, nonce: str, max_bytes: int, host: str) -> _Probe:
    """Read the sections up to the handoff line (the script then waits for our answer), at most
    `max_bytes`; a script that ends before the handoff is finished here (its status and stderr)."""
    marker = handoff_marker(nonce)
    buf = bytearray()
    while chunk := conv.read(1 << 20):
        start = max(0, len(buf) - len(marker) + 1)
        buf += chunk
        i = buf.find(marker, start)
        if i >= 0:
            return _Probe(nonce, bytes(buf[:i]), bytes(buf[i + len(marker) :]), None)
        if len(buf) > max_bytes:
            raise OutputTooLarge(f"{host}: the command wrote over {max_bytes} bytes; stopped reading")
    conv.close_stdin()
    return _Probe(nonce, bytes(buf), b"", conv.finish())


def _end(conv: ChannelReader | ProcessReader, probe: _Probe) -> CommandResult:
    """The script's end: after the handoff, our EOF (no `go`) ends it with status 0."""
    if probe.ended is not None:
        return probe.ended
    conv.close_stdin()
    return conv.finish()


def _stderr_tail(res: CommandResult, n: int) -> str:
    return res.stderr.decode(errors="replace")[-n:]


class _HostJob:
    def __init__(
        self, opts: CollectOptions, client: SshClient | KubectlClient, claims: _Claims, progress: Progress | None
    ) -> None:
        self.opts = opts
        self.client = client
        self.claims = claims
        self.progress = progress
        # Each host's run dir listing and the other hosts' paths in it (host -> ...), to tell a
        # shared run dir from a host that offers what its owner does not have (finish_attribution).
        self.listings: dict[str, dict[str, rundir_sync.FileStat]] = {}
        self.foreign: dict[str, list[str]] = {}

    def __call__(self, host: str) -> HostReport:
        rep = HostReport(host)
        t0 = time.monotonic()
        with self.client.connect(host) as sess:
            self._collect(sess, host, rep, t0)
        return rep

    def _fail_all(self, rep: HostReport, kinds: Iterable[str], exc: BaseException | str, etype: str, t0: float) -> None:
        for k in kinds:
            rep.rows.append(StatusRow(rep.host, k, False, None, 0, time.monotonic() - t0, etype, str(exc)))

    def _collect(self, sess: SshSession | ProcessSession, host: str, rep: HostReport, t0: float) -> None:
        o = self.opts
        kinds = set(o.kinds)
        cmds = {"manifest": rundir_sync.manifest_command(o.run_dir)}
        if "host_facts" in kinds:
            cmds["facts"] = host_facts.command(o.python)
        if "kernel_log" in kinds:
            cmds["kernel"] = kernel_log.command(o.run_dir, host)  # + the run's drill kernel log (xid drills)
        if "pyspy" in kinds:
            cmds["ranks"] = pyspy_dump.ranks_command(o.run_dir)
        nonce = new_nonce()
        # One exec per host: the listing, then (once we answer with the names) the tar stream.
        script = build_script(cmds, nonce, then=rundir_sync.tar_command(o.run_dir))
        conv = None
        try:
            conv = sess.stream(script, timeout_s=o.timeout_s, keep_stdin_open=True)
            probe = _read_probe(conv, nonce, o.max_output_bytes, host)
        except (CommandTimeout, OutputTooLarge, OSError, EOFError) as exc:
            if conv is not None:
                conv.close()
            rep.failed, rep.error = True, str(exc)
            self._fail_all(rep, o.kinds, exc, error_type_of(exc), t0)
            return
        try:
            self._after_probe(sess, conv, probe, cmds, host, rep, t0)
        finally:
            conv.close()

    def _after_probe(
        self,
        sess: SshSession | ProcessSession,
        conv: ChannelReader | ProcessReader,
        probe: _Probe,
        cmds: dict[str, str],
        host: str,
        rep: HostReport,
        t0: float,
    ) -> None:
        o = self.opts
        kinds = set(o.kinds)
        art_kinds = [k for k in o.kinds if k in rundir_sync.ARTIFACT_KINDS]
        sections = split_sections(probe.stdout, probe.nonce)
        probe_s = time.monotonic() - t0

        # Host facts and kernel log do not depend on the run dir.
        if "facts" in sections:
            row = host_facts.parse(sections["facts"].output.decode("utf-8", "replace"))
            row["collected_ts"] = datetime.now(UTC)
            dataset.write_table(o.out, SignalKind.HOST_FACTS, host, pa.Table.from_pylist([row]), part="facts")
            rep.rows.append(StatusRow(host, "host_facts", True, 1, len(sections["facts"].output), probe_s))
        if "kernel" in sections:
            k = kernel_log.parse(sections["kernel"].output.decode("utf-8", "replace"), sections["kernel"].exit_code)
            if k.error:
                rep.rows.append(StatusRow(host, "kernel_log", False, None, 0, probe_s, k.error_type, k.error))
            else:
                text = "".join(f"{ln}\n" for ln in k.lines)
                atomic_write_text(o.out / "kernel" / host / "dmesg.txt", text)
                rep.rows.append(StatusRow(host, "kernel_log", True, len(k.lines), len(text.encode()), probe_s))
        for name in cmds:
            if name not in sections:  # the script died (killed, shell missing): say so
                kind = {"facts": "host_facts", "kernel": "kernel_log", "ranks": "pyspy"}.get(name)
                if kind:
                    self._fail_all(
                        rep,
                        [kind],
                        f"probe script ended early: {_stderr_tail(_end(conv, probe), 200)}",
                        "command_failed",
                        t0,
                    )

        man = sections.get("manifest")
        if man is None or man.exit_code != 0:
            no_dir = man is not None and man.exit_code == rundir_sync.NO_RUN_DIR_EXIT
            rep.failed = True
            rep.error = (
                f"{host}: run dir {o.run_dir} does not exist there (or is not readable)"
                if no_dir
                else f"{host}: listing {o.run_dir} failed (exit {man.exit_code if man else 'none'}): "
                f"{_stderr_tail(_end(conv, probe), 200)}"
            )
            self._fail_all(
                rep,
                art_kinds + (["pyspy"] if "pyspy" in kinds else []),
                rep.error,
                "no_run_dir" if no_dir else "command_failed",
                t0,
            )
            return
        remote = rundir_sync.parse_manifest(man.output)
        local = _load_state(o.out, host)
        wanted = rundir_sync.changed(remote, local, art_kinds)
        # A path about another host is that host's to send (rundir_sync.path_host): refused here and
        # recorded, so no host can have its files analysed as another's.
        foreign = sorted(p for p in wanted if rundir_sync.path_host(p) not in (None, host))
        self.listings[host] = remote
        if foreign:
            self.foreign[host] = foreign
            others = sorted({str(rundir_sync.path_host(p)) for p in foreign})
            rep.rows.append(
                StatusRow(
                    host,
                    "attribution",
                    False,
                    0,
                    0,
                    time.monotonic() - t0,
                    rundir_sync.FOREIGN_PATHS,
                    f"{host} offered {len(foreign)} file(s) under other hosts' paths ({', '.join(others[:5])}), "
                    f"e.g. {foreign[0]}; refused: a host's files come only from that host (a shared run dir "
                    "shows this too, harmlessly)",
                )
            )
        todo = {p: k for p, k in wanted.items() if p not in foreign and self.claims.claim(p, host)}
        todo, capped = _within_caps(todo, remote, o)
        if capped:
            rep.rows.append(StatusRow(host, "caps", False, 0, 0, time.monotonic() - t0, "over_cap", "; ".join(capped)))
        fetched: dict[str, int] = {}
        fetch_error: BaseException | None = None
        if todo:
            try:
                conv.send(GO + b"\0".join(p.encode("utf-8", "surrogateescape") for p in todo) + b"\0")
                conv.close_stdin()
                conv.restart_clock()  # the transfer has the whole timeout, as its own exec had
                fetched = _extract(
                    conv,
                    o.out,
                    todo,
                    remote,
                    lambda n: self.progress and self.progress(host, n, None),
                    first=probe.rest,
                )
                done = conv.finish()
                if done.exit_code != 0:
                    raise CollectError(
                        f"{host}: tar exited {done.exit_code}: {done.stderr.decode(errors='replace')[-300:]}"
                    )
            except TarMemberRefused as exc:
                fetch_error = exc
                rep.rows.append(
                    StatusRow(host, "tar", False, 0, 0, time.monotonic() - t0, "refused_member", f"{host}: {exc}")
                )
            except (CollectError, OSError, EOFError, tarfile.TarError) as exc:
                fetch_error = exc
        else:
            _end(conv, probe)  # nothing to fetch: the script ends on EOF
        new_state = {p: st for p, st in local.items() if p in remote and remote[p] == st and (o.out / p).exists()}
        new_state.update({p: remote[p] for p in fetched})
        _save_state(o.out, host, new_state)
        rep.files_fetched = len(fetched)
        rep.bytes_fetched += sum(fetched.values())
        dur = time.monotonic() - t0
        for kind in art_kinds:
            mine = [p for p in new_state if rundir_sync.classify(p) == kind]
            missing = [p for p, k in todo.items() if k == kind and p not in fetched]
            nbytes = sum(fetched.get(p, 0) for p in mine)
            if missing:
                err = fetch_error or f"{len(missing)} file(s) vanished during the transfer, e.g. {missing[0]}"
                rep.rows.append(
                    StatusRow(
                        host,
                        kind,
                        False,
                        _count_rows(o.out, kind, mine),
                        nbytes,
                        dur,
                        error_type_of(err) if isinstance(err, BaseException) else "vanished",
                        str(err),
                    )
                )
            else:
                rep.rows.append(StatusRow(host, kind, True, _count_rows(o.out, kind, mine), nbytes, dur))

        if "ranks" in sections:
            self._pyspy(sess, host, rep, sections["ranks"].output.decode("utf-8", "replace"), t0)

    def _pyspy(self, sess: SshSession | ProcessSession, host: str, rep: HostReport, ranks_out: str, t0: float) -> None:
        procs = pyspy_dump.parse_ranks(ranks_out, host)
        if not procs:
            rep.rows.append(StatusRow(host, "pyspy", True, 0, 0, time.monotonic() - t0))
            return
        nonce = new_nonce()
        try:
            res = sess.run(pyspy_dump.command(procs, nonce), timeout_s=self.opts.timeout_s)
        except (CommandTimeout, OSError, EOFError) as exc:
            rep.rows.append(
                StatusRow(host, "pyspy", False, None, 0, time.monotonic() - t0, error_type_of(exc), str(exc))
            )
            return
        if res.exit_code == pyspy_dump.NO_PYSPY_EXIT:
            rep.rows.append(
                StatusRow(
                    host,
                    "pyspy",
                    False,
                    None,
                    0,
                    time.monotonic() - t0,
                    "not_installed",
                    f"{host}: py-spy is not installed there; pip install py-spy for live stacks",
                )
            )
            return
        dumps = pyspy_dump.parse(res.stdout.decode("utf-8", "replace"), nonce)
        by_rank = {p.rank: p for p in procs}
        nbytes = 0
        for rank, text in dumps.items():
            h = by_rank[rank].host or host
            atomic_write_text(self.opts.out / "stacks" / h / f"rank-{rank}.pyspy.txt", text)
            nbytes += len(text.encode())
        rep.bytes_fetched += nbytes
        rep.rows.append(StatusRow(host, "pyspy", True, len(dumps), nbytes, time.monotonic() - t0))


def write_status(out: Path, host: str, rows: list[StatusRow], started: datetime, *, part: str) -> None:
    """A host's collection_status rows as a part of the dataset: a few rows per host, so uncompressed
    (zstd cost ~0.4 ms of CPU per host for nothing). Every collect mode writes its status here."""
    dataset.write_table(
        out, SignalKind.COLLECTION_STATUS, host, _status_table(rows, started), part=part, compression="none"
    )


def _status_table(rows: list[StatusRow], started: datetime) -> pa.Table:
    return pa.Table.from_pylist(
        [
            {
                "kind": r.kind,
                "ok": r.ok,
                "rows": r.rows,
                "bytes": r.bytes,
                "duration_s": round(r.duration_s, 4),
                "error_type": r.error_type,
                "error": r.error,
                "started_ts": started,
            }
            for r in rows
        ]
    )


def _previous_claims(out: Path) -> dict[str, str]:
    owners: dict[str, str] = {}
    d = out / _STATE_DIR
    if d.is_dir():
        from urllib.parse import unquote

        for f in sorted(d.glob("*.json")):
            try:
                for p in json.loads(f.read_text()):
                    owners.setdefault(p, unquote(f.stem))
            except ValueError:
                continue
    return owners


def collect(
    opts: CollectOptions, *, client: SshClient | KubectlClient | None = None, progress: Progress | None = None
) -> CollectResult:
    """Collect from every host; never raises for a bad host (see CollectResult.failed_hosts).

    `client`: how hosts are reached; SSH from opts by default, or a KubectlClient (pods of a
    Kubernetes job, `kubectl exec`), whose sessions run the same commands.
    """
    if not opts.hosts:
        raise InputError("no hosts to collect from; pass --hosts")
    if not opts.run_dir.startswith("/"):
        raise InputError(
            f"run dir {opts.run_dir!r} must be an absolute path (as on the hosts); "
            "pass the --run-dir given to `trainctl launch`"
        )
    if (opts.out / "run.json").is_file() and not any(
        (opts.out / d).exists() for d in ("collection_status", _STATE_DIR)
    ):
        # A run dir that `trainctl launch` writes (run.json, never collected into): collect's parts, state and status
        # would be mixed into the run's own files, and the run's tables read twice. A dataset collect wrote before
        # (its status or its sync state) is collected into again, incrementally.
        raise UsageError(
            f"--out {opts.out}: a run dir of `trainctl launch` (run.json); collect writes a dataset of its own: "
            f"pass another --out, e.g. --out {opts.out.with_name(opts.out.name + '-collected')}"
        )
    opts.out.mkdir(parents=True, exist_ok=True)
    client = client or SshClient(
        ssh_config=opts.ssh_config,
        connect_timeout_s=opts.connect_timeout_s,
        accept_new_host_keys=opts.accept_new_host_keys,
    )
    started = datetime.now(UTC)
    t0 = time.monotonic()
    job = _HostJob(opts, client, _Claims(_previous_claims(opts.out)), progress)

    def done(outcome: HostOutcome[HostReport]) -> None:
        if progress is not None:
            progress(outcome.host, 0, outcome.value or _unreachable_report(opts, outcome))

    group: GroupResult[HostReport] = fan_out(opts.hosts, job, max_workers=opts.max_workers, on_done=done)
    reports = []
    for host, outcome in group.outcomes.items():
        rep = outcome.value if outcome.ok else _unreachable_report(opts, outcome)
        if rundir_sync.shared_view(job.foreign.get(host, ()), job.listings):
            rep.rows = [_shared_row(r) if r.error_type == rundir_sync.FOREIGN_PATHS else r for r in rep.rows]
        write_status(opts.out, host, rep.rows, started, part="collect")
        reports.append(rep)
    return CollectResult(opts.out, tuple(reports), time.monotonic() - t0)


def _shared_row(row: StatusRow) -> StatusRow:
    """A foreign-paths row whose paths all their owners listed too: a shared run dir, not a fault."""
    why = (row.error or "").split("; refused:")[0]
    return replace(
        row,
        ok=True,
        error_type=rundir_sync.SHARED_RUN_DIR,
        error=f"{why}; their owners listed each of them too (a run dir every host mounts): taken from the owners only",
    )


def _unreachable_report(opts: CollectOptions, outcome: HostOutcome) -> HostReport:
    exc = outcome.error
    rep = HostReport(outcome.host, failed=True, error=str(exc))
    etype = error_type_of(exc)
    for k in opts.kinds:
        rep.rows.append(StatusRow(outcome.host, k, False, None, 0, outcome.duration_s, etype, str(exc)))
    return rep


def check_failed_hosts(result: CollectResult, max_failed_hosts: int) -> None:
    """Raise CollectError when more hosts failed than allowed (after everything was written)."""
    failed = result.failed_hosts
    if len(failed) > max_failed_hosts:
        first = next(r for r in result.reports if r.failed)
        raise CollectError(
            f"{len(failed)} of {len(result.reports)} hosts failed ({', '.join(failed[:8])}"
            f"{', ...' if len(failed) > 8 else ''}), more than --max-failed-hosts {max_failed_hosts}; "
            f"first error: {first.error}. The rest was written to {result.out} (see collection_status)"
        )
