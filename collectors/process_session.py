"""A command per child process, through the interface collect uses of an SSH session.

`kubectl exec` (trainctl.collectors.kubectl) and `sh -c` on this machine (collect --srun's node
side, trainctl.collectors.local_exec) both run each command as its own process and read its stdout
with the command's deadline; only the argv differs, and how a failure of the tool in between (not
of the command) reads. An SSH session (trainctl.collectors.ssh) keeps one connection instead.
"""

from __future__ import annotations

import os
import select
import subprocess
import threading
import time
from collections.abc import Callable

from trainctl.collectors.ssh import CommandResult, CommandTimeout, OutputTooLarge

__all__ = ["ProcessReader", "ProcessSession"]

_READ_BYTES = 1 << 20
_MAX_STDERR_BYTES = 1 << 20


class ProcessReader:
    """A command's stdout as a read-only file object, each read bounded by the command's deadline."""

    def __init__(self, name: str, proc: subprocess.Popen, timeout_s: float) -> None:
        self.name, self._proc, self._timeout_s = name, proc, timeout_s
        self._t0 = time.monotonic()
        self._deadline = self._t0 + timeout_s
        self.bytes_read = 0
        # stderr is drained as it comes (its first MiB kept): a command that writes much to stderr
        # must not block on a full pipe while we wait for its stdout.
        self._err: list[bytes] = []
        self._err_thread = threading.Thread(target=self._drain_stderr, daemon=True)
        self._err_thread.start()

    def _drain_stderr(self) -> None:
        assert self._proc.stderr is not None
        kept = 0
        while chunk := self._proc.stderr.read1(_READ_BYTES):  # type: ignore[attr-defined]
            if kept < _MAX_STDERR_BYTES:
                self._err.append(chunk[: _MAX_STDERR_BYTES - kept])
                kept += len(chunk)

    def read(self, n: int = -1) -> bytes:
        out = self._proc.stdout
        assert out is not None
        remaining = self._deadline - time.monotonic()
        if remaining <= 0 or not select.select([out], [], [], remaining)[0]:
            self.close()
            raise CommandTimeout(
                f"{self.name}: command did not finish within {self._timeout_s:g}s; raise --timeout-s if the host is just slow"
            )
        data = os.read(out.fileno(), _READ_BYTES if n is None or n < 0 else min(n, _READ_BYTES))
        self.bytes_read += len(data)
        return data

    def send(self, data: bytes) -> None:
        """More input for the command (a stream opened with keep_stdin_open)."""
        assert self._proc.stdin is not None
        try:
            self._proc.stdin.write(data)
            self._proc.stdin.flush()
        except BrokenPipeError:
            pass  # the command did not read its input; its exit status says what happened

    def close_stdin(self) -> None:
        assert self._proc.stdin is not None
        try:
            self._proc.stdin.close()
        except BrokenPipeError:
            pass

    def restart_clock(self) -> None:
        """A new `timeout_s` from now, for the next stage of a conversation (see ssh.ChannelReader)."""
        self._deadline = time.monotonic() + self._timeout_s

    def finish(self) -> CommandResult:
        while self.read(_READ_BYTES):
            pass
        try:
            code = self._proc.wait(timeout=max(0.1, self._deadline - time.monotonic()))
        except subprocess.TimeoutExpired as exc:
            self.close()
            raise CommandTimeout(f"{self.name}: command did not exit within {self._timeout_s:g}s") from exc
        self._err_thread.join(timeout=5)
        err = b"".join(self._err)
        self._proc.stdout.close()  # type: ignore[union-attr]
        self.check_tool(code, err)
        return CommandResult(code, b"", err, time.monotonic() - self._t0)

    def check_tool(self, code: int, stderr: bytes) -> None:
        """Raise when the tool between us and the command failed (not the command); see subclasses."""

    def close(self) -> None:
        if self._proc.poll() is None:
            self._proc.kill()
        self._proc.wait()
        self.close_stdin()


class ProcessSession:
    """Commands on one target, each its own process: subclasses say which argv (`_popen`)."""

    reader_class: type[ProcessReader] = ProcessReader

    def __init__(self, name: str) -> None:
        self.name = name

    def __enter__(self) -> ProcessSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        pass  # every command is its own process

    def _popen(self, command: str) -> subprocess.Popen:
        raise NotImplementedError

    def run(
        self,
        command: str,
        *,
        timeout_s: float,
        stdin: bytes | None = None,
        on_stdout: Callable[[bytes], None] | None = None,
        max_output_bytes: int | None = None,
    ) -> CommandResult:
        reader = self.stream(command, timeout_s=timeout_s, stdin=stdin)
        out: list[bytes] = []
        seen = 0
        try:
            while chunk := reader.read(_READ_BYTES):
                seen += len(chunk)
                if max_output_bytes is not None and seen > max_output_bytes:
                    raise OutputTooLarge(
                        f"{self.name}: the command wrote over {max_output_bytes} bytes; stopped reading"
                    )
                (on_stdout or out.append)(chunk)
            done = reader.finish()
        except BaseException:
            reader.close()
            raise
        return CommandResult(done.exit_code, b"".join(out), done.stderr, done.duration_s)

    def stream(
        self, command: str, *, timeout_s: float, stdin: bytes | None = None, keep_stdin_open: bool = False
    ) -> ProcessReader:
        """As SshSession.stream: stdout as a file object; `keep_stdin_open` to talk to the command."""
        reader = self.reader_class(self.name, self._popen(command), timeout_s)
        if stdin:
            reader.send(stdin)
        if not keep_stdin_open:
            reader.close_stdin()
        return reader
