"""The quarantine ledger: which hosts trainctl must not schedule on, why, and who said so.

Kept under TRAINCTL_HOME (default `$XDG_STATE_HOME/trainctl`, else `~/.local/state/trainctl`):

    quarantine.json   current state: {"schema_version": 1, "hosts": {host_key: entry}}
    audit.jsonl       append-only trail, one JSON object per evict/restore, never rewritten
    quarantine.lock   flock(2) target serialising every read-modify-write

Several processes (a supervisor per run, an SRE at a shell, a playbook) may evict at once, so each
change takes an exclusive flock on the lock file, appends to the audit trail (fsync), then
rewrites quarantine.json through temp + fsync + rename. The audit line is written first, as a
write-ahead log: a crash between the two leaves an audit record that `rebuild_from_audit()` replays,
never a state change without a record. Readers take a shared lock so they never see a half-done
change.

An entry is a machine, keyed by trainctl.inventory.host_key: a name in any case (DNS names are
case-insensitive), with or without `user@` or an SSH port, an IP address in any of its spellings
(`2001:DB8:0:0::1`, `[2001:db8::1]:22`). So `NODE07`, `node07` and `node07:2222` are one entry:
evicting one and launching on, restoring or re-evicting another finds it. Quarantining
`node07:2222` quarantines the host node07 (every port of it): a port says where its sshd listens,
and what is broken is the machine's GPU, NIC or disk. An entry keeps the host as it was first
quarantined, without user or port (`node07`; the name a scheduler drains); the audit trail records
each action's spelling as given.
"""

from __future__ import annotations

import fcntl
import getpass
import json
import logging
import os
import socket
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any

from trainctl.errors import LaunchError, LedgerError
from trainctl.inventory import HostAddress, host_key
from trainctl.jsonl import CorruptRecord, append_record, read_records
from trainctl.rundir import atomic_write_text

__all__ = [
    "LEDGER_SCHEMA_VERSION",
    "AuditAction",
    "QuarantineEntry",
    "AuditRecord",
    "trainctl_home",
    "Ledger",
]

logger = logging.getLogger(__name__)

LEDGER_SCHEMA_VERSION = 1
STATE_FILE = "quarantine.json"
AUDIT_FILE = "audit.jsonl"
LOCK_FILE = "quarantine.lock"


class AuditAction(str, Enum):
    EVICT = "evict"
    RESTORE = "restore"


def trainctl_home(env: Mapping[str, str] | None = None) -> Path:
    """TRAINCTL_HOME, else $XDG_STATE_HOME/trainctl, else ~/.local/state/trainctl (XDG base dirs)."""
    env = os.environ if env is None else env
    if env.get("TRAINCTL_HOME"):
        return Path(env["TRAINCTL_HOME"]).expanduser()
    if env.get("XDG_STATE_HOME"):
        return Path(env["XDG_STATE_HOME"]).expanduser() / "trainctl"
    return Path.home() / ".local" / "state" / "trainctl"


def _who() -> str:
    try:
        user = getpass.getuser()
    except (KeyError, OSError):  # no passwd entry (containers)
        user = str(os.getuid())
    return f"{user}@{socket.gethostname()}"


@dataclass(frozen=True)
class QuarantineEntry:
    """One quarantined host. `since_ts_ns` is the first eviction; the rest follow the latest one."""

    host: str
    reason: str
    since_ts_ns: int
    updated_ts_ns: int
    by: str
    pid: int
    run: str | None = None
    finding: Mapping[str, Any] | None = None
    evictions: int = 1

    def to_dict(self) -> dict[str, Any]:
        return {
            "host": self.host,
            "reason": self.reason,
            "since_ts_ns": self.since_ts_ns,
            "updated_ts_ns": self.updated_ts_ns,
            "by": self.by,
            "pid": self.pid,
            "run": self.run,
            "finding": dict(self.finding) if self.finding is not None else None,
            "evictions": self.evictions,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> QuarantineEntry:
        return cls(
            host=str(d["host"]),
            reason=str(d["reason"]),
            since_ts_ns=int(d["since_ts_ns"]),
            updated_ts_ns=int(d.get("updated_ts_ns", d["since_ts_ns"])),
            by=str(d.get("by", "")),
            pid=int(d.get("pid", 0)),
            run=d.get("run"),
            finding=d.get("finding"),
            evictions=int(d.get("evictions", 1)),
        )


@dataclass(frozen=True)
class AuditRecord:
    """One line of audit.jsonl: when, who (user@host, pid), what, to which host, why, with which evidence."""

    ts_ns: int
    by: str
    pid: int
    action: AuditAction
    host: str
    reason: str
    run: str | None = None
    finding: Mapping[str, Any] | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "ts_ns": self.ts_ns,
            "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self.ts_ns / 1e9)),
            "by": self.by,
            "pid": self.pid,
            "action": self.action.value,
            "host": self.host,
            "reason": self.reason,
            "run": self.run,
            "finding": dict(self.finding) if self.finding is not None else None,
            "extra": dict(self.extra),
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> AuditRecord:
        return cls(
            ts_ns=int(d["ts_ns"]),
            by=str(d.get("by", "")),
            pid=int(d.get("pid", 0)),
            action=AuditAction(d["action"]),
            host=str(d["host"]),
            reason=str(d.get("reason", "")),
            run=d.get("run"),
            finding=d.get("finding"),
            extra=dict(d.get("extra") or {}),
        )


class Ledger:
    """The quarantine ledger in one directory (`Ledger()` uses trainctl_home())."""

    def __init__(self, home: str | os.PathLike[str] | None = None) -> None:
        self.home = Path(home) if home is not None else trainctl_home()
        self.state_path = self.home / STATE_FILE
        self.audit_path = self.home / AUDIT_FILE
        self.lock_path = self.home / LOCK_FILE

    # -- locking -------------------------------------------------------------------------------

    @contextmanager
    def _locked(self, *, exclusive: bool) -> Iterator[None]:
        if not exclusive and not self.home.is_dir():
            # Nothing to read, and a reader creates nothing (a mistyped TRAINCTL_HOME stayed behind as a folder).
            yield
            return
        try:
            self.home.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.lock_path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise LedgerError(
                f"{self.lock_path}: cannot open the ledger lock ({exc.strerror}); "
                "set TRAINCTL_HOME to a writable directory"
            ) from exc
        try:
            # flock, not lockf: the lock belongs to this open file description, so threads and
            # forked children that open their own fd serialise too.
            fcntl.flock(fd, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
            yield
        finally:
            os.close(fd)  # closing releases the lock

    # -- reading -------------------------------------------------------------------------------

    def _read_state(self) -> dict[str, QuarantineEntry]:
        if not self.state_path.exists():
            return {}
        fix = (
            f"fix: run `trainctl nodes rebuild` to rebuild it from the audit trail {self.audit_path}, "
            "or move the file away to start an empty ledger"
        )
        try:
            raw = json.loads(self.state_path.read_text())
        except OSError as exc:
            raise LedgerError(f"{self.state_path}: cannot read the quarantine ledger ({exc.strerror})") from exc
        except ValueError as exc:
            raise LedgerError(f"{self.state_path}: quarantine ledger is not valid JSON ({exc}); {fix}") from exc
        if (
            not isinstance(raw, dict)
            or raw.get("schema_version") != LEDGER_SCHEMA_VERSION
            or not isinstance(raw.get("hosts"), dict)
        ):
            raise LedgerError(
                f"{self.state_path}: not a trainctl quarantine ledger (schema_version "
                f"{raw.get('schema_version') if isinstance(raw, dict) else None!r}, expected {LEDGER_SCHEMA_VERSION}); {fix}"
            )
        try:
            loaded = [QuarantineEntry.from_dict(e) for e in raw["hosts"].values()]
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise LedgerError(f"{self.state_path}: malformed ledger entry ({exc!r}); {fix}") from exc
        entries: dict[str, QuarantineEntry] = {}
        for e in loaded:
            key = host_key(e.host)
            # A ledger written before hosts were keyed as machines may hold one host twice (NODE02
            # and node02, node07 and node07:2222, 2001:DB8::1 and 2001:db8::1): one entry again,
            # collapsed on the next write.
            entries[key] = _merged(entries[key], e) if key in entries else e
        return entries

    def _write_state(self, entries: Mapping[str, QuarantineEntry]) -> None:
        doc = {"schema_version": LEDGER_SCHEMA_VERSION, "hosts": {h: entries[h].to_dict() for h in sorted(entries)}}
        # Under the exclusive lock any temp file of ours is a writer's that was killed mid-write.
        for stale in self.state_path.parent.glob(f".{self.state_path.name}.*.tmp"):
            stale.unlink(missing_ok=True)
        try:
            atomic_write_text(self.state_path, json.dumps(doc, indent=2) + "\n")
        except OSError as exc:
            raise LedgerError(f"{self.state_path}: cannot write the quarantine ledger ({exc.strerror})") from exc

    def _append_audit(self, record: AuditRecord) -> None:
        try:
            # One write of one line under O_APPEND and the lock; a line torn by a kill -9 of an earlier
            # writer is set aside first, so this record is never glued onto it (trainctl.jsonl).
            append_record(self.audit_path, record.to_dict())
        except OSError as exc:
            raise LedgerError(f"{self.audit_path}: cannot append to the audit trail ({exc.strerror})") from exc

    def entries(self) -> dict[str, QuarantineEntry]:
        """Every quarantined host's entry by host_key(host) (a consistent snapshot); `entry.host` is
        the name as it was quarantined."""
        with self._locked(exclusive=False):
            return self._read_state()

    def quarantined_hosts(self) -> frozenset[str]:
        """The quarantined hosts as they were written; compare with host_key(), not `in`."""
        return frozenset(e.host for e in self.entries().values())

    def entry(self, host: str) -> QuarantineEntry | None:
        """`host`'s entry, whatever its case; None when it is not quarantined."""
        return self.entries().get(host_key(host))

    def audit(self) -> list[AuditRecord]:
        """The whole audit trail, oldest first. A torn last line (crash mid-append) is skipped."""
        with self._locked(exclusive=False):
            return self._read_audit()

    def _read_audit(self) -> list[AuditRecord]:
        # A torn last line (kill -9 mid-append) is skipped with a warning, a record glued onto a torn
        # one by an older writer is recovered; a middle line that holds no record is an edit: an error.
        try:
            docs = read_records(self.audit_path, strict=True)
        except CorruptRecord as exc:
            raise LedgerError(
                f"{exc.path}:{exc.line_no}: not a valid audit record; the trail is append-only, "
                "so fix or delete that one line by hand"
            ) from exc
        except OSError as exc:
            raise LedgerError(f"{self.audit_path}: cannot read the audit trail ({exc.strerror})") from exc
        records = []
        for n, doc in enumerate(docs, 1):
            try:
                records.append(AuditRecord.from_dict(doc))
            except (ValueError, KeyError, TypeError, AttributeError) as exc:
                raise LedgerError(
                    f"{self.audit_path}: record {n} is not a valid audit record ({exc!r}); the trail is "
                    "append-only, so fix or delete that one line by hand"
                ) from exc
        return records

    # -- changing ------------------------------------------------------------------------------

    def evict(
        self,
        host: str,
        *,
        reason: str,
        run: str | None = None,
        finding: Mapping[str, Any] | None = None,
        extra: Mapping[str, Any] | None = None,
    ) -> QuarantineEntry:
        """Quarantine `host` (idempotent: evicting it again updates reason/run/finding, keeps `since`)."""
        if not host or not host.strip():
            raise LedgerError("empty host name; pass the host as the scheduler names it, e.g. node03")
        if not reason or not reason.strip():
            raise LedgerError(
                f"evicting {host}: --reason is empty; say why (it goes to the audit trail and the scheduler)"
            )
        now, by, pid = time.time_ns(), _who(), os.getpid()
        key = host_key(host)
        with self._locked(exclusive=True):
            entries = self._read_state()
            old = entries.get(key)
            entry = QuarantineEntry(
                host=old.host if old else HostAddress.split(host).host,  # the machine, under its first spelling
                reason=reason,
                since_ts_ns=old.since_ts_ns if old else now,
                updated_ts_ns=now,
                by=by,
                pid=pid,
                run=run,
                finding=finding,
                evictions=(old.evictions + 1) if old else 1,
            )
            self._append_audit(AuditRecord(now, by, pid, AuditAction.EVICT, host, reason, run, finding, extra or {}))
            entries[key] = entry
            self._write_state(entries)
        logger.info("ledger evict host=%s run=%s reason=%r evictions=%d", host, run, reason, entry.evictions)
        return entry

    def restore(
        self, host: str, *, reason: str = "restored by operator", extra: Mapping[str, Any] | None = None
    ) -> QuarantineEntry:
        """Take `host` out of quarantine; returns the entry it had. LedgerError if it was not quarantined."""
        now, by, pid = time.time_ns(), _who(), os.getpid()
        with self._locked(exclusive=True):
            entries = self._read_state()
            if host_key(host) not in entries:
                known = ", ".join(sorted(e.host for e in entries.values())) or "none"
                raise LedgerError(f"host {host!r} is not quarantined (quarantined: {known}); see `trainctl nodes list`")
            old = entries.pop(host_key(host))
            self._append_audit(AuditRecord(now, by, pid, AuditAction.RESTORE, host, reason, old.run, None, extra or {}))
            self._write_state(entries)
        logger.info("ledger restore host=%s reason=%r", host, reason)
        return old

    def rebuild_from_audit(self) -> dict[str, QuarantineEntry]:
        """Replay audit.jsonl into a fresh quarantine.json (the fix for a corrupt state file)."""
        with self._locked(exclusive=True):
            if self.state_path.exists() and not self.audit_path.exists():
                # An empty ledger written over this one would release every host it holds.
                raise LedgerError(
                    f"{self.audit_path}: no audit trail to rebuild {self.state_path} from; it was left as it is: "
                    "fix it by hand (its text names the hosts), or move it away to start an empty ledger"
                )
            entries: dict[str, QuarantineEntry] = {}
            for r in self._read_audit():
                key = host_key(r.host)
                if r.action is AuditAction.EVICT:
                    old = entries.get(key)
                    entries[key] = QuarantineEntry(
                        host=old.host if old else HostAddress.split(r.host).host,
                        reason=r.reason,
                        since_ts_ns=old.since_ts_ns if old else r.ts_ns,
                        updated_ts_ns=r.ts_ns,
                        by=r.by,
                        pid=r.pid,
                        run=r.run,
                        finding=r.finding,
                        evictions=(old.evictions + 1) if old else 1,
                    )
                else:
                    entries.pop(key, None)
            self._write_state(entries)
        return entries


def _merged(a: QuarantineEntry, b: QuarantineEntry) -> QuarantineEntry:
    """Two entries for one host (an old ledger's NODE02 and node02): the first `since` and spelling,
    the latest eviction's reason, run and finding, both counts."""
    first = min((a, b), key=lambda e: (e.since_ts_ns, e.updated_ts_ns))
    latest = max((a, b), key=lambda e: e.updated_ts_ns)
    return QuarantineEntry(
        host=first.host,
        reason=latest.reason,
        since_ts_ns=first.since_ts_ns,
        updated_ts_ns=latest.updated_ts_ns,
        by=latest.by,
        pid=latest.pid,
        run=latest.run,
        finding=latest.finding,
        evictions=a.evictions + b.evictions,
    )


def quarantined_hosts(home: str | os.PathLike[str] | None = None) -> frozenset[str]:
    """Hosts launch must refuse (unless told otherwise); reads TRAINCTL_HOME by default."""
    return Ledger(home).quarantined_hosts()


def evict(
    host: str,
    *,
    reason: str,
    run: str | None = None,
    finding: Mapping[str, Any] | None = None,
    home: str | os.PathLike[str] | None = None,
) -> QuarantineEntry:
    return Ledger(home).evict(host, reason=reason, run=run, finding=finding)


def restore(
    host: str, *, reason: str = "restored by operator", home: str | os.PathLike[str] | None = None
) -> QuarantineEntry:
    return Ledger(home).restore(host, reason=reason)


def refuse_quarantined(hosts: list[str] | tuple[str, ...], *, home: str | os.PathLike[str] | None = None) -> None:
    """For `launch`: raise LaunchError naming every quarantined host in `hosts` however it is spelled
    (any case, with a port: host_key), with the fix."""
    entries = Ledger(home).entries()
    bad = [h for h in hosts if host_key(h) in entries]
    if bad:
        why = "; ".join(f"{h}: {entries[host_key(h)].reason}" for h in bad)
        raise LaunchError(
            f"quarantined host(s) in the host list ({why}); drop them, restore with "
            f"`trainctl nodes restore {entries[host_key(bad[0])].host}`, or pass --allow-quarantined"
        )


__all__ += ["quarantined_hosts", "evict", "restore", "refuse_quarantined"]
