"""Long-running commands on remote hosts over the existing SSH layer: start, stream, poll, stop.

`trainctl launch --hosts` runs one torchrun agent (and one metrics agent) per host for as long as
the job lives. An SSH exec channel is the wrong owner for that: when the connection drops (a
laptop sleeps, the supervisor restarts) sshd would hang up the job. So each command starts
detached under `setsid` (its own session and process group, immune to the channel's SIGHUP) with
stdout+stderr appended to a log file on the host, and reports its pid, which is also its process
group id. Everything later is a short command on the same connection:

  poll   the exit file written by the wrapper shell when the command ends, else whether any
         non-zombie process is left in the group (`ps -g`), else "gone" (killed with SIGKILL)
  stop   SIGTERM to the whole group, SIGKILL to what is left after a grace period
  stream `tail -F --pid` of the remote log on its own channel, appended to a local file

Commands come from fixed templates; every value (argv, env, paths) is shlex-quoted, so a host
name or path can never become shell syntax. One SshSession per host is opened lazily and reused
for every command (the collect layer's rule: one connection per host).
"""

from __future__ import annotations

import logging
import shlex
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from trainctl.collectors.ssh import CommandFailed, GroupResult, SshClient, SshSession, fan_out
from trainctl.errors import LaunchError

__all__ = ["RemoteProcess", "RemoteStatus", "RemoteHosts", "start_command", "poll_command", "stop_command"]

logger = logging.getLogger(__name__)

T = TypeVar("T")

_EXIT_SUFFIX = ".exit"
# The wrapper shell: runs argv ("$0" "$@"), then records its exit status atomically. It is the
# process group leader, so killing the group kills it and the command; the exit file is then
# missing and poll reports the group "gone" (killed).
_WRAPPER = '"$0" "$@"; rc=$?; printf "%s\\n" "$rc" > "$TRAINCTL_EXIT_FILE.tmp" && mv "$TRAINCTL_EXIT_FILE.tmp" "$TRAINCTL_EXIT_FILE"'


@dataclass(frozen=True)
class RemoteProcess:
    """A detached command on `host`: its process group and where its output and exit status go."""

    host: str
    name: str
    pgid: int
    log_path: str  # on the host
    exit_path: str  # on the host; written by the wrapper when the command ends
    local_log: Path | None = None


@dataclass(frozen=True)
class RemoteStatus:
    host: str
    name: str
    alive: bool
    exit_code: int | None  # None while alive, or when the group was killed (no exit file)
    killed: bool = False  # the group disappeared without an exit status (SIGKILL, OOM killer, reboot)


def start_command(
    argv: Sequence[str], *, log_path: str, env: Mapping[str, str] | None = None, cwd: str | None = None
) -> str:
    """The shell command that starts `argv` detached under setsid and prints its pid (= pgid).

    In a non-interactive shell a background job is not a process group leader, so `setsid`
    execs in place (no fork): `$!` is the pid of the new session's leader, i.e. the pgid.
    """
    if not argv:
        raise LaunchError("remote command is empty; pass the program and its arguments")
    q = shlex.quote
    log_dir = str(Path(log_path).parent)
    exit_path = log_path + _EXIT_SUFFIX
    assigns = " ".join(q(f"{k}={v}") for k, v in sorted((env or {}).items()))
    parts = [f"mkdir -p {q(log_dir)}", f"rm -f {q(exit_path)}"]
    if cwd:
        parts.append(f"cd {q(cwd)}")
    launch = (
        f"env {assigns} TRAINCTL_EXIT_FILE={q(exit_path)} setsid sh -c {q(_WRAPPER)} "
        + " ".join(q(a) for a in argv)
        + f" >> {q(log_path)} 2>&1 < /dev/null & echo $!"
    )
    # `a && b & c` would background the whole list (and $! would be a subshell), hence `;`.
    return " && ".join(parts) + " || exit 1; " + launch


def poll_command(proc: RemoteProcess) -> str:
    q = shlex.quote
    # Liveness first: the wrapper writes the exit file before it exits, so a group found dead
    # afterwards has its exit file unless it was killed (checking the file first would race).
    return (
        f"if ps -o stat= -g {int(proc.pgid)} 2>/dev/null | grep -qv '^Z'; then echo alive; "
        f"elif [ -f {q(proc.exit_path)} ]; then echo exit $(cat {q(proc.exit_path)}); "
        "else echo gone; fi"
    )


def stop_command(proc: RemoteProcess, *, grace_s: float) -> str:
    """SIGTERM the group, wait up to grace_s for it to go, SIGKILL the rest; prints the poll line."""
    g = int(proc.pgid)
    alive = f"ps -o stat= -g {g} 2>/dev/null | grep -qv '^Z'"
    ticks = max(1, int(grace_s / 0.2))
    return (
        f"kill -s TERM -- -{g} 2>/dev/null; i=0; while {alive} && [ $i -lt {ticks} ]; do sleep 0.2; i=$((i+1)); done; "
        f"if {alive}; then kill -s KILL -- -{g} 2>/dev/null; sleep 0.2; fi; " + poll_command(proc)
    )


def parse_status(proc: RemoteProcess, line: str) -> RemoteStatus:
    words = line.strip().split()
    if words[:1] == ["alive"]:
        return RemoteStatus(proc.host, proc.name, True, None)
    if words[:1] == ["exit"] and len(words) == 2 and words[1].lstrip("-").isdigit():
        return RemoteStatus(proc.host, proc.name, False, int(words[1]))
    if words[:1] == ["gone"]:
        return RemoteStatus(proc.host, proc.name, False, None, killed=True)
    raise LaunchError(f"{proc.host}: unexpected status line {line.strip()!r} for {proc.name}; is `ps` installed there?")


@dataclass
class RemoteHosts:
    """One SSH session per host, opened on first use and reused; thread-safe per host."""

    client: SshClient
    sessions: dict[str, SshSession] = field(default_factory=dict)
    _locks: dict[str, threading.Lock] = field(default_factory=dict)
    _guard: threading.Lock = field(default_factory=threading.Lock)
    _tails: list[threading.Thread] = field(default_factory=list)

    def session(self, host: str) -> SshSession:
        with self._guard:
            lock = self._locks.setdefault(host, threading.Lock())
        with lock:
            sess = self.sessions.get(host)
            if sess is None or not sess.transport.is_active():
                sess = self.client.connect(host)
                self.sessions[host] = sess
            return sess

    def run(
        self, host: str, command: str, *, timeout_s: float = 30.0, stdin: bytes | None = None, check: bool = True
    ) -> str:
        res = self.session(host).run(command, timeout_s=timeout_s, stdin=stdin)
        if check and not res.ok:
            raise CommandFailed(
                f"{host}: command exited {res.exit_code}: "
                f"{res.stderr.decode(errors='replace').strip()[:400] or res.stdout.decode(errors='replace').strip()[:400]}"
            )
        return res.stdout.decode(errors="replace")

    def fan_out(self, hosts: Iterable[str], job: Callable[[str], T]) -> GroupResult[T]:
        return fan_out(hosts, job)

    def write_file(self, host: str, path: str, data: bytes, *, timeout_s: float = 30.0) -> None:
        """Write `data` to `path` on the host atomically (temp file + mv), creating parents."""
        q = shlex.quote
        tmp = f"{path}.tmp-trainctl"
        self.run(
            host,
            f"mkdir -p {q(str(Path(path).parent))} && cat > {q(tmp)} && mv {q(tmp)} {q(path)}",
            stdin=data,
            timeout_s=timeout_s,
        )

    def start(
        self,
        host: str,
        name: str,
        argv: Sequence[str],
        *,
        log_path: str,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        local_log: Path | None = None,
        timeout_s: float = 30.0,
    ) -> RemoteProcess:
        """Start `argv` detached on `host`; with `local_log`, its output is streamed there too."""
        out = self.run(host, start_command(argv, log_path=log_path, env=env, cwd=cwd), timeout_s=timeout_s).strip()
        if not out.isdigit():
            raise LaunchError(f"{host}: starting {name} printed {out!r}, not a pid")
        proc = RemoteProcess(host, name, int(out), log_path, log_path + _EXIT_SUFFIX, local_log)
        logger.info("started host=%s name=%s pgid=%d log=%s", host, name, proc.pgid, log_path)
        if local_log is not None:
            self._stream(proc, local_log)
        return proc

    def _stream(self, proc: RemoteProcess, local_log: Path) -> None:
        """Follow the remote log until the process group's leader exits, appending to local_log."""
        local_log.parent.mkdir(parents=True, exist_ok=True)
        q = shlex.quote
        # tail follows by name (-F: the file may appear a moment later) and exits once --pid is gone.
        cmd = f"tail -c +1 -F --pid={int(proc.pgid)} -s 0.2 {q(proc.log_path)} 2>/dev/null"

        def follow() -> None:
            try:
                with open(local_log, "ab") as fh:

                    def sink(chunk: bytes) -> None:
                        fh.write(chunk)
                        fh.flush()

                    self.session(proc.host).run(cmd, timeout_s=7 * 24 * 3600.0, on_stdout=sink)
            except Exception as exc:  # noqa: BLE001 - a lost stream must not stop the job; the remote log stays
                logger.warning(
                    "host=%s name=%s log stream ended: %s (the log is still at %s on the host)",
                    proc.host,
                    proc.name,
                    exc,
                    proc.log_path,
                )

        t = threading.Thread(target=follow, name=f"trainctl-tail-{proc.host}-{proc.name}", daemon=True)
        t.start()
        self._tails.append(t)

    def poll(self, proc: RemoteProcess, *, timeout_s: float = 20.0) -> RemoteStatus:
        return parse_status(proc, self.run(proc.host, poll_command(proc), timeout_s=timeout_s))

    def stop(self, proc: RemoteProcess, *, grace_s: float = 10.0) -> RemoteStatus:
        return parse_status(proc, self.run(proc.host, stop_command(proc, grace_s=grace_s), timeout_s=grace_s + 20.0))

    def poll_all(self, procs: Sequence[RemoteProcess]) -> GroupResult[RemoteStatus]:
        """Status of every process (one command per host, hosts in parallel); errors are outcomes."""
        by_host: dict[str, list[RemoteProcess]] = {}
        for p in procs:
            by_host.setdefault(p.host, []).append(p)
        res = fan_out(by_host, lambda h: [self.poll(p) for p in by_host[h]])  # type: ignore[arg-type]
        return res  # type: ignore[return-value]

    def stop_all(self, procs: Sequence[RemoteProcess], *, grace_s: float = 10.0) -> GroupResult[list[RemoteStatus]]:
        by_host: dict[str, list[RemoteProcess]] = {}
        for p in procs:
            by_host.setdefault(p.host, []).append(p)
        return fan_out(by_host, lambda h: [self.stop(p, grace_s=grace_s) for p in by_host[h]])

    def join_streams(self, timeout_s: float = 5.0) -> None:
        deadline = time.monotonic() + timeout_s
        for t in self._tails:
            t.join(max(0.0, deadline - time.monotonic()))

    def close(self) -> None:
        with self._guard:
            sessions, self.sessions = list(self.sessions.values()), {}
        for s in sessions:
            try:
                s.close()
            except Exception:  # noqa: BLE001
                pass
        self.join_streams(1.0)

    def __enter__(self) -> RemoteHosts:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
