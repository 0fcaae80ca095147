"""SSH fan-out on paramiko: one verified connection per host, bounded parallelism, per-host outcomes.

What it honours, like `ssh` would: the OpenSSH client config (`~/.ssh/config` or an explicit file:
HostName, Port, User, IdentityFile, IdentitiesOnly, ProxyJump, UserKnownHostsFile,
StrictHostKeyChecking, HostKeyAlias, ConnectTimeout) and the ssh-agent (`SSH_AUTH_SOCK`).

Host keys are verified against known_hosts by default. An unknown key is refused unless the config
says `StrictHostKeyChecking accept-new`/`no` or the caller passes `accept_new_host_keys=True`; a
*changed* key is always refused (a reinstalled host, or someone in the middle), and the message says
how to check and accept it. Nothing here ever trusts a key silently.

Speed (shared/research/fanout-baseline.md, measured on this kind of box): TCP_NODELAY on the socket
(paramiko leaves Nagle on: +49 ms per handshake, stalls in bulk reads), keys loaded once per process
(an RSA key costs ~94 ms to load), at most 16 worker threads whatever the host count (more threads
thrash the GIL), aes128-gcm preferred (1.4-3x less CPU per MiB), files streamed over exec channels
(`tar`/`cat`) rather than SFTP, and one connection per host reused for every command. Per host
on top (bench/collect_cpu_ab.py): no `ssh -G` process where the config can be evaluated exactly
(ssh_config_shape), no per-packet handshake-timer cancel, no copies in the channel's buffer.

Fan-out returns a GroupResult (fabric's shape): every host maps to its value or the exception it
raised, so one bad host never hides the others' results.
"""

from __future__ import annotations

import atexit
import binascii
import collections
import contextlib
import logging
import os
import random
import re
import select
import shlex
import shutil
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import Generic, TypeVar

import paramiko

from trainctl.collectors import ssh_config_shape
from trainctl.errors import CollectError, HostKeyError, HostUnreachable
from trainctl.inventory import HostAddress

__all__ = [
    "MAX_WORKERS",
    "SshTarget",
    "CommandResult",
    "AuthRefused",
    "ConnectTimeout",
    "CommandTimeout",
    "CommandFailed",
    "error_type_of",
    "KeyRing",
    "SshSession",
    "SshClient",
    "HostOutcome",
    "GroupResult",
    "fan_out",
]

logger = logging.getLogger(__name__)

# More threads than this thrash the GIL (fanout-baseline: 64 threads spent 45 % of CPU in futexes).
MAX_WORKERS = 16
_WINDOW_BYTES = 4 << 20
_MAX_PACKET_BYTES = 256 << 10
_READ_BYTES = 1 << 20
_DEFAULT_IDENTITIES = ("id_ed25519", "id_ecdsa", "id_rsa")


class AuthRefused(HostUnreachable):
    """The host answered but accepted none of our keys (agent and identity files)."""

    error_type = "auth_refused"


class ConnectTimeout(HostUnreachable):
    """TCP connect, SSH banner or authentication took longer than the connect timeout."""

    error_type = "timeout"


class CommandTimeout(CollectError):
    """A remote command ran longer than its timeout; the channel was closed."""

    error_type = "timeout"


class OutputTooLarge(CollectError):
    """A remote command wrote more than the caller accepts (a broken or hostile host); channel closed."""

    error_type = "over_cap"


_MAX_STDERR_BYTES = 1 << 20  # stderr is for messages: its first MiB is kept


class CommandFailed(CollectError):
    """A remote command exited non-zero where the caller needed it to succeed."""

    error_type = "command_failed"


def error_type_of(exc: BaseException) -> str:
    """The short reason recorded in collection_status.error_type."""
    t = getattr(exc, "error_type", None)
    if t:
        return str(t)
    if isinstance(exc, HostKeyError):
        return "host_key"
    if isinstance(exc, HostUnreachable):
        return "unreachable"
    if isinstance(exc, (socket.timeout, TimeoutError)):
        return "timeout"
    if isinstance(exc, OSError):
        return "os_error"
    return type(exc).__name__


@dataclass(frozen=True)
class SshTarget:
    """Where and how to reach one host, resolved from the OpenSSH client config."""

    alias: str  # the name the user gave (inventory name; also the dataset's host partition)
    hostname: str
    port: int = 22
    user: str = "root"
    identity_files: tuple[str, ...] = ()
    identities_only: bool = False
    known_hosts_files: tuple[str, ...] = ()
    strict_host_key_checking: str = "yes"  # yes | accept-new | no
    host_key_alias: str | None = None
    proxy_jump: str | None = None
    connect_timeout_s: float | None = None
    proxy_command: str | None = None  # OpenSSH's ProxyCommand, tokens not yet expanded
    # ssh -G | paramiko: resolved as OpenSSH does (by ssh -G, or evaluated as it, ssh_config_shape) or by paramiko
    resolved_by: str = "paramiko"

    @property
    def known_hosts_name(self) -> str:
        """The key OpenSSH uses in known_hosts: `host` on port 22, else `[host]:port`."""
        name = self.host_key_alias or self.hostname
        return name if self.port == 22 or self.host_key_alias else f"[{name}]:{self.port}"

    def keyscan_hint(self) -> str:
        kh = self.known_hosts_files[0] if self.known_hosts_files else "~/.ssh/known_hosts"
        port = f"-p {self.port} " if self.port != 22 else ""
        return f"ssh-keyscan {port}{self.hostname} >> {kh}"


@dataclass(frozen=True)
class CommandResult:
    exit_code: int
    stdout: bytes
    stderr: bytes
    duration_s: float

    @property
    def ok(self) -> bool:
        return self.exit_code == 0


class KeyRing:
    """Private keys loaded once per process (thread-safe), plus the agent's keys when present."""

    def __init__(self, *, use_agent: bool = True) -> None:
        self._lock = threading.Lock()
        self._files: dict[str, paramiko.PKey | None] = {}
        self._agent_keys: list[paramiko.PKey] | None = None if use_agent else []
        self._agent: paramiko.Agent | None = None

    def file_key(self, path: str) -> paramiko.PKey | None:
        with self._lock:
            if path not in self._files:
                try:
                    self._files[path] = paramiko.PKey.from_path(path)
                except FileNotFoundError:
                    self._files[path] = None
                except (paramiko.PasswordRequiredException, paramiko.SSHException, ValueError, OSError) as exc:
                    # A passphrase-protected key is used through the agent instead.
                    logger.info("cannot load identity %s (%s); relying on the ssh-agent for it", path, exc)
                    self._files[path] = None
            return self._files[path]

    def agent_keys(self) -> list[paramiko.PKey]:
        with self._lock:
            if self._agent_keys is None:
                self._agent_keys = []
                if os.environ.get("SSH_AUTH_SOCK"):
                    try:
                        self._agent = paramiko.Agent()
                        self._agent_keys = list(self._agent.get_keys())
                    except paramiko.SSHException as exc:
                        logger.info("ssh-agent not usable (%s)", exc)
            return list(self._agent_keys)

    def keys_for(self, target: SshTarget) -> list[tuple[str, paramiko.PKey]]:
        """Keys in OpenSSH's order: agent keys, then identity files (only files with IdentitiesOnly)."""
        files = list(target.identity_files) or [str(Path.home() / ".ssh" / n) for n in _DEFAULT_IDENTITIES]
        keys: list[tuple[str, paramiko.PKey]] = []
        file_keys = [(f, self.file_key(f)) for f in files]
        if not target.identities_only:
            keys.extend(("agent", k) for k in self.agent_keys())
        keys.extend((f, k) for f, k in file_keys if k is not None)
        if target.identities_only:
            # IdentitiesOnly still lets the agent sign for a listed file whose private half it holds.
            listed = {k.get_base64() for _, k in file_keys if k is not None}
            pubs = {Path(f + ".pub").read_text().split()[1] for f in files if Path(f + ".pub").is_file()}
            keys.extend(("agent", k) for k in self.agent_keys() if k.get_base64() in pubs - listed)
        return keys


class _KnownHosts:
    """One known_hosts file, indexed: plain names in a dict, hashed (`|1|salt|hash`) entries in a list.

    paramiko.HostKeys.lookup scans every entry for every lookup, so a fan-out to N hosts with N
    entries costs N^2 (1.5 ms per lookup at 16 entries in bench/fanout.py's profile). Plain names
    are now one dict lookup; hashed names still need one HMAC per entry, as in OpenSSH. Matching is
    paramiko's: exact names (as `[host]:port` for other ports) or hashed ones, no patterns."""

    def __init__(self, path: str) -> None:
        self.plain: dict[str, list[paramiko.PKey]] = {}
        self.hashed: list[tuple[str, paramiko.PKey]] = []
        if not os.path.isfile(path):
            return
        with open(path, encoding="utf-8", errors="replace") as fh:
            for lineno, raw in enumerate(fh, 1):
                line = raw.strip()
                if not line or line.startswith("#"):
                    continue
                try:
                    entry = paramiko.hostkeys.HostKeyEntry.from_line(line, lineno)
                except (paramiko.hostkeys.InvalidHostKey, paramiko.SSHException, ValueError, binascii.Error) as exc:
                    logger.info("%s:%d: unreadable known_hosts line skipped (%s)", path, lineno, exc)
                    continue
                if entry is None or entry.key is None:
                    continue
                for name in entry.hostnames:
                    self.add(name, entry.key)

    def add(self, name: str, key: paramiko.PKey) -> None:
        if name.startswith("|1|"):
            self.hashed.append((name, key))
        else:
            self.plain.setdefault(name, []).append(key)

    def lookup(self, name: str) -> list[paramiko.PKey]:
        found = list(self.plain.get(name, ()))
        found += [k for h, k in self.hashed if paramiko.HostKeys.hash_host(name, h) == h]
        return found


class _HostKeyBook:
    """known_hosts files, loaded once per file; appends for accept-new are serialised."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._books: dict[str, _KnownHosts] = {}

    def _book(self, path: str) -> _KnownHosts:
        if path not in self._books:
            self._books[path] = _KnownHosts(path)
        return self._books[path]

    def verify(self, target: SshTarget, key: paramiko.PKey, *, accept_new: bool) -> None:
        name = target.known_hosts_name
        files = list(target.known_hosts_files) or [str(Path.home() / ".ssh" / "known_hosts")]
        with self._lock:
            known: list[paramiko.PKey] = []
            for f in files:
                known.extend(self._book(f).lookup(name))
            same_type = [k for k in known if k.get_name() == key.get_name()]
            if any(k == key for k in known):
                return
            if same_type or (known and target.strict_host_key_checking == "yes"):
                raise HostKeyError(
                    f"{target.alias}: host key for {name} CHANGED ({key.get_name()} {key.fingerprint}) "
                    f"and does not match {files[0]}; someone may be intercepting, or the host was reinstalled. "
                    f"If you trust the new key: ssh-keygen -R '{name}' -f {files[0]}; {target.keyscan_hint()}"
                )
            mode = "accept-new" if accept_new else target.strict_host_key_checking
            if mode == "yes":
                raise HostKeyError(
                    f"{target.alias}: host key for {name} is unknown ({key.get_name()} {key.fingerprint}); "
                    f"verify it, then add it with `{target.keyscan_hint()}`, or pass --accept-new-host-keys"
                )
            if mode == "accept-new":
                self._book(files[0]).add(name, key)
                Path(files[0]).parent.mkdir(parents=True, exist_ok=True)
                with open(files[0], "a") as fh:
                    fh.write(f"{name} {key.get_name()} {key.get_base64()}\n")
                logger.warning(
                    "%s: added new host key %s %s to %s", target.alias, key.get_name(), key.fingerprint, files[0]
                )
            else:  # StrictHostKeyChecking no: accepted for this connection only, never saved
                logger.warning(
                    "%s: unknown host key %s accepted (StrictHostKeyChecking no)", target.alias, key.fingerprint
                )


def _prefer_gcm(t: paramiko.Transport) -> None:
    opts = t.get_security_options()
    gcm = [c for c in opts.ciphers if c == "aes128-gcm@openssh.com"]
    opts.ciphers = tuple(gcm + [c for c in opts.ciphers if c not in gcm])


def _handshake_done(t: paramiko.Transport) -> None:
    """paramiko's transport thread calls Packetizer.complete_handshake after every packet it
    reads, and each call cancels the long finished handshake timer again (an Event.set: lock,
    notify_all), ~0.5 ms of CPU per host of 4 MiB (bench/collect_cpu_ab.py). Called once here,
    after the handshake and authentication, its work is done; later calls would only repeat it."""
    t.packetizer.complete_handshake()
    t.packetizer.complete_handshake = _nothing  # type: ignore[method-assign]


def _nothing() -> None:
    pass


class _Pieces:
    """The bytes a channel received, as the pieces they came in (BufferedPipe's buffer for _PiecesPipe):
    `len`, and `del buf[:n]` / `del buf[:]`, the only edits BufferedPipe makes to its buffer."""

    def __init__(self) -> None:
        self.parts: collections.deque[bytes] = collections.deque()
        self.size = 0

    def __len__(self) -> int:
        return self.size

    def __delitem__(self, span: slice) -> None:
        n = self.size if span.stop is None else min(span.stop, self.size)
        self.size -= n
        while n:
            head = self.parts.popleft()
            if len(head) > n:
                self.parts.appendleft(head[n:])
                return
            n -= len(head)

    def prefix(self, n: int | None) -> bytes:
        """The first `n` bytes (all: None), copied once at most (a join of one piece is that piece)."""
        n = self.size if n is None else min(n, self.size)
        taken: list[bytes] = []
        for part in self.parts:
            if n <= len(part):
                taken.append(part if n == len(part) else part[:n])
                break
            taken.append(part)
            n -= len(part)
        return b"".join(taken)


class _PiecesPipe(paramiko.buffered_pipe.BufferedPipe):
    """paramiko's channel buffer, its locking and wake-ups unchanged, keeping each packet's bytes as
    they arrive: BufferedPipe copies every byte three times (into an array.array, a slice of it,
    `tobytes`); here a read of what one packet brought returns that packet's bytes object."""

    def __init__(self) -> None:
        super().__init__()
        self._buffer = _Pieces()

    def _buffer_frombytes(self, data: bytes) -> None:
        self._buffer.parts.append(data)
        self._buffer.size += len(data)

    def _buffer_tobytes(self, limit: int | None = None) -> bytes:
        return self._buffer.prefix(limit)


# _PiecesPipe overrides the two hooks paramiko 3.x-5.x's BufferedPipe routes its buffer writes and
# reads through (tests/unit/test_ssh_pieces_pipe.py checks it against the installed one); a paramiko
# without them keeps its own buffer rather than a half-replaced one.
_PIECES_FIT = all(
    callable(getattr(paramiko.buffered_pipe.BufferedPipe, m, None)) for m in ("_buffer_frombytes", "_buffer_tobytes")
)


class SshSession:
    """One authenticated connection to one host, reused for all its commands and transfers."""

    def __init__(self, target: SshTarget, transport: paramiko.Transport, via: SshSession | None = None) -> None:
        self.target = target
        self.transport = transport
        self._via = via

    def close(self) -> None:
        self.transport.close()
        if self._via is not None:
            self._via.close()

    def __enter__(self) -> SshSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _open(self, command: str, stdin: bytes | None, *, keep_stdin_open: bool = False) -> paramiko.Channel:
        chan = self.transport.open_session(timeout=self.target.connect_timeout_s or 10)
        if _PIECES_FIT:
            chan.in_buffer = _PiecesPipe()  # before the exec: nothing can have arrived yet
        chan.exec_command(command)
        if stdin is not None:
            chan.sendall(stdin)
        if not keep_stdin_open:
            chan.shutdown_write()
        return chan

    def stream(
        self, command: str, *, timeout_s: float, stdin: bytes | None = None, keep_stdin_open: bool = False
    ) -> ChannelReader:
        """Start `command` and return its stdout as a file object (big transfers: tar, cat).

        `keep_stdin_open`: the caller talks to the command while it runs (`send`, `close_stdin`),
        e.g. answers a listing with the names to fetch over the same exec (one remote shell, not two).
        """
        return ChannelReader(self, self._open(command, stdin, keep_stdin_open=keep_stdin_open), timeout_s)

    def run(
        self,
        command: str,
        *,
        timeout_s: float,
        stdin: bytes | None = None,
        on_stdout: Callable[[bytes], None] | None = None,
        max_output_bytes: int | None = None,
    ) -> CommandResult:
        """Run `command` (already quoted by its template) and wait for it, at most `timeout_s`.

        stdout is returned, or handed chunk by chunk to `on_stdout` (then `stdout` is empty).
        Raises CommandTimeout (and closes the channel) past the deadline, and OutputTooLarge past
        `max_output_bytes` of stdout (memory stays bounded whatever the host sends).
        """
        t0 = time.monotonic()
        deadline = t0 + timeout_s
        chan = self._open(command, stdin)
        out: list[bytes] = []
        errb: list[bytes] = []
        seen = [0, 0]  # stdout, stderr bytes

        def sink(chunk: bytes) -> None:
            seen[0] += len(chunk)
            if max_output_bytes is not None and seen[0] > max_output_bytes:
                raise OutputTooLarge(
                    f"{self.target.alias}: the command wrote over {max_output_bytes} bytes; stopped reading"
                )
            (on_stdout or out.append)(chunk)

        def err_sink(chunk: bytes) -> None:
            if seen[1] < _MAX_STDERR_BYTES:
                errb.append(chunk[: _MAX_STDERR_BYTES - seen[1]])
            seen[1] += len(chunk)

        try:
            while True:
                got = False
                while chan.recv_ready():
                    sink(chan.recv(_READ_BYTES))
                    got = True
                while chan.recv_stderr_ready():
                    err_sink(chan.recv_stderr(_READ_BYTES))
                    got = True
                if chan.exit_status_ready() and not chan.recv_ready() and not chan.recv_stderr_ready():
                    # Drain what arrived with the EOF (bounded: a daemonised child may hold stdout).
                    chan.settimeout(max(0.1, deadline - time.monotonic()))
                    while chunk := chan.recv(_READ_BYTES):
                        sink(chunk)
                    while chunk := chan.recv_stderr(_READ_BYTES):
                        err_sink(chunk)
                    break
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise CommandTimeout(
                        f"{self.target.alias}: command did not finish within {timeout_s:g}s; "
                        "raise --timeout-s if the host is just slow"
                    )
                if not got:
                    select.select([chan], [], [], min(remaining, 1.0))
            code = chan.recv_exit_status()
        finally:
            chan.close()
        return CommandResult(code, b"".join(out), b"".join(errb), time.monotonic() - t0)


class ChannelReader:
    """A remote command's stdout as a read-only file object (for tarfile's stream mode).

    Every read waits at most until the command's deadline; `finish()` returns the exit code and
    stderr once stdout is drained. stderr is taken as it comes (its first MiB kept): unread, it
    would hold the channel's window and stall stdout.
    """

    def __init__(self, session: SshSession, chan: paramiko.Channel, timeout_s: float) -> None:
        self._session = session
        self._chan = chan
        self._timeout_s = timeout_s
        self._t0 = time.monotonic()
        self._deadline = self._t0 + timeout_s
        self._err: list[bytes] = []
        self._err_bytes = 0
        self.bytes_read = 0

    def read(self, n: int = -1) -> bytes:
        remaining = self._deadline - time.monotonic()
        if remaining <= 0:
            raise CommandTimeout(
                f"{self._session.target.alias}: transfer did not finish within {self._timeout_s:g}s; "
                "raise --timeout-s for big run dirs or slow links"
            )
        if self._chan.recv_stderr_ready():
            self._keep_stderr(self._chan.recv_stderr(_READ_BYTES))
        self._chan.settimeout(remaining)
        try:
            data = self._chan.recv(_READ_BYTES if n is None or n < 0 else min(n, _READ_BYTES))
        except TimeoutError as exc:
            raise CommandTimeout(f"{self._session.target.alias}: transfer stalled past {self._timeout_s:g}s") from exc
        self.bytes_read += len(data)
        return data

    def _keep_stderr(self, chunk: bytes) -> None:
        if self._err_bytes < _MAX_STDERR_BYTES:
            self._err.append(chunk[: _MAX_STDERR_BYTES - self._err_bytes])
        self._err_bytes += len(chunk)

    def send(self, data: bytes) -> None:
        """More input for the command (a stream opened with keep_stdin_open)."""
        self._chan.settimeout(max(0.1, self._deadline - time.monotonic()))
        self._chan.sendall(data)

    def close_stdin(self) -> None:
        self._chan.shutdown_write()

    def restart_clock(self) -> None:
        """A new `timeout_s` from now: the next stage of a conversation (the transfer after the
        listing) gets the whole timeout, as its own command would."""
        self._deadline = time.monotonic() + self._timeout_s

    def finish(self) -> CommandResult:
        while self.read(_READ_BYTES):
            pass
        self._chan.settimeout(max(0.1, self._deadline - time.monotonic()))
        try:
            while chunk := self._chan.recv_stderr(_READ_BYTES):
                self._keep_stderr(chunk)
            code = self._chan.recv_exit_status()
        finally:
            self._chan.close()
        return CommandResult(code, b"", b"".join(self._err), time.monotonic() - self._t0)

    def close(self) -> None:
        self._chan.close()


def ssh_G(
    host: str, config: Path | None, *, port: str | None = None, user: str | None = None
) -> dict[str, list[str]] | None:
    """`ssh -G HOST`: the client config exactly as OpenSSH resolves it (Include, Match, canonical
    names, CertificateFile...), key -> values; None where ssh is not installed or refuses.

    OpenSSH prints every option after evaluation, one `keyword value` per line, keywords lower
    case (ssh.c, `-G`: "Causes ssh to print its configuration after evaluating Host and Match
    blocks and exit")."""
    exe = shutil.which("ssh")
    if exe is None:
        return None
    argv = [exe, "-G"]
    if config is not None:
        argv += ["-F", str(config)]
    if port:
        argv += ["-p", port]
    if user:
        argv += ["-l", user]
    argv += ["--", host]  # inventory names never start with "-" (trainctl.inventory.check_host)
    try:
        res = subprocess.run(argv, capture_output=True, text=True, timeout=10, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as exc:
        logger.info("ssh -G %s failed (%s); reading the config with paramiko", host, exc)
        return None
    if res.returncode != 0:
        logger.info("ssh -G %s: %s; reading the config with paramiko", host, res.stderr.strip()[:200])
        return None
    out: dict[str, list[str]] = {}
    for line in res.stdout.splitlines():
        key, _, value = line.partition(" ")
        if key:
            out.setdefault(key.lower(), []).append(value.strip())
    return out


_SYSTEM_SSH_CONFIG = Path("/etc/ssh/ssh_config")


_include_files: dict[tuple[Path, ...], Path] = {}
_include_lock = threading.Lock()


def _include_file(files: list[Path]) -> Path:
    """A config that is `Include`s of `files`, in order: `ssh -G -F` on it reads what plain ssh reads.
    One per process and list of files (removed at exit)."""
    key = tuple(p.resolve() for p in files)
    with _include_lock:
        if key not in _include_files:
            fd, name = tempfile.mkstemp(prefix="trainctl-ssh-", suffix=".config")
            with os.fdopen(fd, "w") as f:
                f.write("".join(f"Include {p}\n" for p in key))
            atexit.register(_unlink_quietly, name)
            _include_files[key] = Path(name)
        return _include_files[key]


def _unlink_quietly(name: str) -> None:
    with contextlib.suppress(OSError):
        os.unlink(name)


_STRICT = {"ask": "yes", "off": "no", "false": "no", "true": "yes", "on": "yes"}
# What _target_from_G reads.
_G_READ = frozenset(ssh_config_shape.EVALUATED) | {"proxyjump", "proxycommand"}


def _target_from_G(alias: str, g: dict[str, list[str]]) -> SshTarget:
    def one(key: str, default: str | None = None) -> str | None:
        v = g.get(key)
        return v[0] if v else default

    def unset(v: str | None) -> str | None:
        return None if v is None or v.lower() == "none" else v

    ct = unset(one("connecttimeout"))
    strict = (one("stricthostkeychecking", "yes") or "yes").lower()
    return SshTarget(
        alias=alias,
        hostname=one("hostname") or alias,
        port=int(one("port", "22") or 22),
        user=one("user") or "root",
        identity_files=tuple(os.path.expanduser(p) for p in g.get("identityfile", [])),
        identities_only=(one("identitiesonly", "no") or "no").lower() == "yes",
        known_hosts_files=tuple(os.path.expanduser(p) for v in g.get("userknownhostsfile", []) for p in v.split()),
        strict_host_key_checking=_STRICT.get(strict, strict),
        host_key_alias=unset(one("hostkeyalias")),
        proxy_jump=unset(one("proxyjump")),
        connect_timeout_s=float(ct) if ct else None,
        proxy_command=unset(one("proxycommand")),
        resolved_by="ssh -G",
    )


def _proxy_command(target: SshTarget) -> paramiko.ProxyCommand:
    """OpenSSH runs ProxyCommand with the user's shell after expanding %h %p %r %n %% (ssh_config(5));
    it is the user's own configuration, so it runs as ssh would run it."""
    tokens = {"%h": target.hostname, "%p": str(target.port), "%r": target.user, "%n": target.alias, "%%": "%"}
    cmd = re.sub(r"%[hprn%]", lambda m: tokens[m.group(0)], target.proxy_command or "")
    return paramiko.ProxyCommand(shlex.join([os.environ.get("SHELL") or "/bin/sh", "-c", f"exec {cmd}"]))


class SshClient:
    """Resolves hosts from the OpenSSH config and opens verified, authenticated sessions.

    One instance is shared by all fan-out workers: keys and known_hosts are loaded once.
    """

    def __init__(
        self,
        *,
        ssh_config: str | os.PathLike[str] | None = None,
        connect_timeout_s: float | None = None,
        accept_new_host_keys: bool = False,
        retries: int = 2,
        backoff_s: float = 0.5,
        use_agent: bool = True,
        default_user: str | None = None,
        use_ssh_G: bool = True,
    ) -> None:
        path = Path(ssh_config) if ssh_config else Path.home() / ".ssh" / "config"
        if ssh_config and not path.is_file():
            raise CollectError(f"--ssh-config {path}: no such file; pass an OpenSSH client config")
        self.config = paramiko.SSHConfig.from_path(str(path)) if path.is_file() else paramiko.SSHConfig()
        self.config_path = path if path.is_file() else None
        # What `ssh -G` reads. An explicit --ssh-config is `ssh -F FILE` (the system config is
        # skipped, as ssh -F skips it). Without one, plain ssh reads ~/.ssh/config and then
        # /etc/ssh/ssh_config; `-F ~/.ssh/config` would drop the second, so ssh -G reads a file
        # that includes both, in that order (ssh takes ~ from the passwd entry, we from $HOME).
        if ssh_config:
            self._G_files: list[Path] = [path]
            self._G_config: Path | None = path
        else:
            self._G_files = [p for p in (path, _SYSTEM_SSH_CONFIG) if p.is_file()]
            self._G_config = _include_file(self._G_files) if use_ssh_G else None
        self.connect_timeout_s = connect_timeout_s
        self.accept_new_host_keys = accept_new_host_keys
        self.retries = retries
        self.backoff_s = backoff_s
        self.keys = KeyRing(use_agent=use_agent)
        self._host_keys = _HostKeyBook()
        self._default_user = default_user or os.environ.get("USER") or "root"
        # OpenSSH resolves the config where it is installed (paramiko's parser lacks Match exec,
        # canonical names, CertificateFile, ...); paramiko only as the fallback. Resolved once per alias.
        self.use_ssh_G = use_ssh_G
        self._targets: dict[str, SshTarget] = {}
        # Hosts the configs provably cannot tell apart share one `ssh -G` (ssh_config_shape); they
        # are read once, here, as `ssh -G` reads them.
        self._shape = (
            ssh_config_shape.read_files(self._G_files, home=Path.home()) if use_ssh_G and self._G_files else None
        )
        self._class_G: dict[tuple, dict[str, list[str]] | None] = {}
        self._class_locks: dict[tuple, threading.Lock] = {}
        # An exact config (ssh_config_shape.resolve) is evaluated here, no process per host, once
        # the first host's real `ssh -G` agrees (_evaluated); None until then, {} when it did not.
        self._G_defaults: dict[str, list[str]] | None = None if self._shape is not None and self._shape.exact else {}
        self._witness_lock = threading.Lock()

    def target(self, alias: str) -> SshTarget:
        cached = self._targets.get(alias)
        if cached is not None:
            return cached
        # user@host:port, [v6]:port: split as inventories and the ledger split them (one parser)
        addr = HostAddress.split(alias)
        host, port, user = addr.host, addr.port, addr.user or ""
        g = self._resolve_G(host, port, user or None) if self.use_ssh_G else None
        if g is not None:
            t = _target_from_G(alias, g)
            self._targets[alias] = t
            return t
        c = self.config.lookup(host)
        kh = tuple(os.path.expanduser(p) for p in c.get("userknownhostsfile", "").split())
        ct = c.get("connecttimeout")
        return SshTarget(
            alias=alias,
            hostname=c.get("hostname", host),
            port=int(port or c.get("port", 22)),
            user=user or c.get("user") or self._default_user,
            identity_files=tuple(os.path.expanduser(p) for p in c.get("identityfile", [])),
            identities_only=c.get("identitiesonly", "no").lower() == "yes",
            known_hosts_files=kh,
            strict_host_key_checking={"ask": "yes", "off": "no", "false": "no", "true": "yes", "on": "yes"}.get(
                c.get("stricthostkeychecking", "yes").lower(), c.get("stricthostkeychecking", "yes").lower()
            ),
            host_key_alias=c.get("hostkeyalias"),
            proxy_jump=None if c.get("proxyjump", "none").lower() == "none" else c.get("proxyjump"),
            connect_timeout_s=float(ct) if ct else None,
            proxy_command=None if c.get("proxycommand", "none").lower() == "none" else c.get("proxycommand"),
        )

    def _resolve_G(self, host: str, port: str | None, user: str | None) -> dict[str, list[str]] | None:
        """`ssh -G` for `host`: evaluated from the config where it is exact, else its class's answer
        with the name put in, else its own (see ssh_config_shape)."""
        evaluated = self._evaluated(host, port, user)
        if evaluated is not None:
            return evaluated
        cls = self._shape.host_class(host, user, port) if self._shape is not None else None
        if cls is None:
            return ssh_G(host, self._G_config, port=port, user=user)
        with self._class_locks.setdefault(cls, threading.Lock()):  # one ssh -G per class, not one per worker
            if cls not in self._class_G:
                g = ssh_G(host, self._G_config, port=port, user=user)
                self._class_G[cls] = None if g is None else {**g, "host": [host]}
            shared = self._class_G[cls]
        if shared is None:
            return None
        named = {**shared, "host": [host]}
        if not self._shape.sets_hostname(cls):  # type: ignore[union-attr]
            named["hostname"] = [host]
        return named

    def _evaluated(self, host: str, port: str | None, user: str | None) -> dict[str, list[str]] | None:
        """What ssh -G prints for `host` (the keywords trainctl reads), from the config; None where
        it cannot be evaluated. The first host is also resolved by the real `ssh -G`, with OpenSSH's
        defaults from `ssh -G` of an empty config: where the two differ (another OpenSSH, a config
        ssh refuses), every host of this client goes to ssh -G."""
        if self._shape is None or self._G_defaults == {}:
            return None
        if self._G_defaults is None:
            with self._witness_lock:
                if self._G_defaults is None:
                    if self._shape.resolve(host, user, port, {}) is None:
                        return None  # no witness: this host is not evaluated anyway
                    return self._witness(host, port, user)
        return self._shape.resolve(host, user, port, self._G_defaults) if self._G_defaults else None

    def _witness(self, host: str, port: str | None, user: str | None) -> dict[str, list[str]] | None:
        defaults = ssh_G(host, Path(os.devnull)) or {}
        theirs = ssh_G(host, self._G_config, port=port, user=user)
        ours = self._shape.resolve(host, user, port, defaults) if self._shape is not None else None
        said = {k: v for k, v in (theirs or {}).items() if k in _G_READ}
        self._G_defaults = defaults if theirs is not None and defaults and said == ours else {}
        if not self._G_defaults:
            logger.info("ssh -G %s: %s, the config evaluated: %s; every host gets ssh -G", host, said, ours)
        return theirs

    def connect(self, alias: str) -> SshSession:
        """A verified, authenticated session; transient failures are retried with jittered backoff."""
        target = self.target(alias)
        attempt = 0
        while True:
            try:
                return self._connect_once(target)
            except _Transient as exc:
                if attempt >= self.retries:
                    raise HostUnreachable(
                        f"{alias}: cannot connect to {target.hostname}:{target.port} ({exc.cause}); "
                        f"tried {attempt + 1} times; check the host is up and sshd runs"
                    ) from exc.cause
                delay = self.backoff_s * (2**attempt) * random.uniform(0.5, 1.5)
                logger.info("%s: %s, retrying in %.2fs", alias, exc.cause, delay)
                time.sleep(delay)
                attempt += 1

    def _sock(self, target: SshTarget, via: SshSession | None, timeout_s: float):
        if target.proxy_command and via is None:
            try:
                return _proxy_command(target)
            except (OSError, paramiko.SSHException) as exc:
                raise HostUnreachable(f"{target.alias}: ProxyCommand failed to start ({exc})") from exc
        if via is not None:
            try:
                return via.transport.open_channel(
                    "direct-tcpip", (target.hostname, target.port), ("127.0.0.1", 0), timeout=timeout_s
                )
            except paramiko.ChannelException as exc:
                raise HostUnreachable(
                    f"{target.alias}: jump host {via.target.alias} cannot reach {target.hostname}:{target.port} ({exc})"
                ) from exc
        try:
            s = socket.create_connection((target.hostname, target.port), timeout=timeout_s)
        except socket.gaierror as exc:
            raise HostUnreachable(
                f"{target.alias}: cannot resolve {target.hostname!r} ({exc.strerror}); "
                "check the name or its HostName in the ssh config"
            ) from exc
        except TimeoutError as exc:
            raise ConnectTimeout(
                f"{target.alias}: TCP connect to {target.hostname}:{target.port} timed out after {timeout_s:g}s"
            ) from exc
        except (ConnectionRefusedError, ConnectionResetError, OSError) as exc:
            if isinstance(exc, (ConnectionRefusedError, ConnectionResetError)) or exc.errno in (113, 101, 111):
                raise _Transient(exc) from exc
            raise HostUnreachable(f"{target.alias}: cannot connect to {target.hostname}:{target.port} ({exc})") from exc
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return s

    def _connect_once(self, target: SshTarget) -> SshSession:
        # An explicit --connect-timeout-s wins over the config's ConnectTimeout; 10 s otherwise.
        timeout_s = self.connect_timeout_s or target.connect_timeout_s or 10.0
        via = None
        if target.proxy_jump:
            # A chain `a,b` reaches b through a; each hop is resolved from the config too.
            hops = [h.strip() for h in target.proxy_jump.split(",") if h.strip()]
            for hop in hops:
                hop_target = self.target(hop)
                via = self._open_session(hop_target, via, timeout_s)
        return self._open_session(target, via, timeout_s)

    def _open_session(self, target: SshTarget, via: SshSession | None, timeout_s: float) -> SshSession:
        sock = self._sock(target, via, timeout_s)
        t = paramiko.Transport(sock, default_window_size=_WINDOW_BYTES, default_max_packet_size=_MAX_PACKET_BYTES)
        t.banner_timeout = timeout_s
        t.auth_timeout = timeout_s
        _prefer_gcm(t)
        try:
            negotiated = threading.Event()
            t.start_client(event=negotiated)  # returns at once; the transport thread negotiates
            if not negotiated.wait(timeout_s):
                raise ConnectTimeout(
                    f"{target.alias}: {target.hostname}:{target.port} accepted TCP but finished no "
                    f"SSH handshake within {timeout_s:g}s (hung sshd or host?)"
                )
            if not t.is_active():
                exc = t.get_exception() or EOFError("connection closed during the handshake")
                if isinstance(exc, (EOFError, ConnectionResetError)) or "banner" in str(exc).lower():
                    raise _Transient(exc)  # e.g. sshd's MaxStartups dropping us under load
                raise HostUnreachable(f"{target.alias}: SSH handshake failed ({exc})") from exc
            self._host_keys.verify(target, t.get_remote_server_key(), accept_new=self.accept_new_host_keys)
            self._auth(t, target)
            _handshake_done(t)
            return SshSession(target, t, via)
        except BaseException:
            t.close()
            if via is not None:
                via.close()
            raise

    def _auth(self, t: paramiko.Transport, target: SshTarget) -> None:
        tried = []
        for source, key in self.keys.keys_for(target):
            try:
                t.auth_publickey(target.user, key)
                if t.is_authenticated():
                    return
            except paramiko.AuthenticationException:
                tried.append(f"{source} ({key.get_name()})")
            except paramiko.SSHException as exc:
                raise HostUnreachable(f"{target.alias}: authentication failed ({exc})") from exc
        raise AuthRefused(
            f"{target.alias}: {target.user}@{target.hostname}:{target.port} refused every key "
            f"({', '.join(tried) or 'no keys found: no agent and no IdentityFile'}); "
            "add your public key to the host's authorized_keys or set IdentityFile in the ssh config"
        )


class _Transient(Exception):
    """Internal: a failure worth retrying (refused, reset, dropped during the banner)."""

    def __init__(self, cause: BaseException) -> None:
        super().__init__(str(cause))
        self.cause = cause


T = TypeVar("T")


@dataclass(frozen=True)
class HostOutcome(Generic[T]):
    host: str
    value: T | None = None
    error: BaseException | None = None
    duration_s: float = 0.0

    @property
    def ok(self) -> bool:
        return self.error is None


@dataclass
class GroupResult(Generic[T]):
    """host -> outcome for every host, in inventory order (fabric's GroupResult, never partial)."""

    outcomes: dict[str, HostOutcome[T]] = field(default_factory=dict)

    @property
    def succeeded(self) -> dict[str, HostOutcome[T]]:
        return {h: o for h, o in self.outcomes.items() if o.ok}

    @property
    def failed(self) -> dict[str, HostOutcome[T]]:
        return {h: o for h, o in self.outcomes.items() if not o.ok}


def fan_out(
    hosts: Iterable[str],
    job: Callable[[str], T],
    *,
    max_workers: int = MAX_WORKERS,
    on_done: Callable[[HostOutcome[T]], None] | None = None,
) -> GroupResult[T]:
    """Run `job(host)` for every host on a bounded thread pool; exceptions become outcomes."""
    hosts = list(hosts)
    workers = max(1, min(max_workers, MAX_WORKERS, len(hosts) or 1))

    def wrapped(h: str) -> HostOutcome[T]:
        t0 = time.monotonic()
        try:
            return HostOutcome(h, value=job(h), duration_s=time.monotonic() - t0)
        except Exception as exc:  # noqa: BLE001 - every failure is an outcome, never a crash
            logger.debug("%s failed", h, exc_info=True)
            return HostOutcome(h, error=exc, duration_s=time.monotonic() - t0)

    done: dict[str, HostOutcome[T]] = {}
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="trainctl-ssh") as pool:
        futures = {pool.submit(wrapped, h): h for h in hosts}
        for fut in as_completed(futures):
            outcome = fut.result()
            done[outcome.host] = outcome
            if on_done is not None:
                on_done(outcome)
    return GroupResult({h: done[h] for h in hosts})
