"""A GNU tar stream read straight off a channel: headers parsed by tarfile, data copied as it comes.

tarfile's stream mode (`mode="r|"`) costs about as much CPU as the SSH layer under it: every read of
a member goes through `_Stream.read`, which joins what it has with a new piece and slices the result
twice (three copies of every byte), then `_FileInFile.readinto` copies again. A 4 MiB host took
12.2 ms of client CPU through tarfile against 7.9 ms for the same bytes as a plain `cat` into a file
(one loopback connection, bench notes in BENCHMARKS.md). Here each piece the channel hands over is
written to the file as a memoryview slice: no copy in Python at all.

Only what GNU tar writes in its own `gnu` format (rundir_sync.tar_command asks for it) is read:
ustar-style headers, GNU long names (`L`) and long link names (`K`). Every other header type
(sparse `S`, pax `x`/`g`, volume labels...) is returned as it is, so the caller refuses it by type;
nothing is guessed. Headers themselves are tarfile's (`TarInfo.frombuf`: checksum, base-256 sizes).
"""

from __future__ import annotations

import tarfile
from collections.abc import Callable
from typing import BinaryIO, Protocol

__all__ = ["Reader", "TarStream", "TruncatedArchive", "BLOCK"]

BLOCK = tarfile.BLOCKSIZE
_ENCODING = "utf-8"
_ERRORS = "surrogateescape"  # as tarfile.open's default on Linux: any byte name survives
_LONG_NAME_MAX = 1 << 16  # GNU tar's names are PATH_MAX-bounded; a larger "name" is an attack


class Reader(Protocol):
    def read(self, n: int = -1, /) -> bytes: ...


class TruncatedArchive(tarfile.TarError):
    """The stream ended inside a header or a member's data (a host that died mid-transfer)."""


class TarStream:
    """Members of a stream-mode GNU tar archive, one at a time: `next()`, then `copy_to()` its data.

    The data of a member that is not copied is skipped by the next `next()`.
    """

    def __init__(self, reader: Reader, *, first: bytes = b"", read_bytes: int = 1 << 20) -> None:
        """`first`: the archive's opening bytes when the caller already read them from `reader`."""
        self._reader = reader
        self._read_bytes = read_bytes
        self._pending = memoryview(first)
        self._unread = 0  # bytes of the current member's data (and padding) not consumed yet

    def _piece(self, want: int) -> memoryview:
        """At most `want` bytes: what is left of the last read, else one new read; empty at EOF."""
        if not self._pending:
            data = self._reader.read(self._read_bytes)
            if not data:
                return memoryview(b"")
            self._pending = memoryview(data)
        piece, self._pending = self._pending[:want], self._pending[want:]
        return piece

    def _exact(self, n: int, what: str) -> bytes:
        parts: list[bytes] = []
        self._pump(n, parts.append, what)
        return b"".join(parts)

    def _pump(self, n: int, write: Callable[[bytes], object], what: str) -> None:
        """Hand the next `n` bytes of the stream to `write`, piece by piece as they came."""
        got = 0
        while got < n:
            piece = self._piece(n - got)
            if not piece:
                raise TruncatedArchive(f"tar stream ended inside {what} ({got} of {n} bytes)")
            write(piece)
            got += len(piece)

    def _skip(self, n: int, what: str) -> None:
        while n:
            piece = self._piece(n)
            if not piece:
                raise TruncatedArchive(f"tar stream ended inside {what}")
            n -= len(piece)

    def next(self) -> tarfile.TarInfo | None:
        """The next member's header (long names resolved), or None at the end of the archive."""
        if self._unread:
            self._skip(self._unread, "a member's data")
            self._unread = 0
        long_name: str | None = None
        while True:
            block = self._exact(BLOCK, "a header")
            try:
                info = tarfile.TarInfo.frombuf(block, _ENCODING, _ERRORS)
            except tarfile.EOFHeaderError:  # the zero block that ends the archive
                return None
            if info.type not in (tarfile.GNUTYPE_LONGNAME, tarfile.GNUTYPE_LONGLINK):
                break
            if info.size > _LONG_NAME_MAX:
                raise tarfile.HeaderError(f"GNU long name of {info.size} bytes; refused")
            raw = self._exact(_padded(info.size), "a long name")[: info.size]
            if info.type == tarfile.GNUTYPE_LONGNAME:
                long_name = raw.split(b"\0", 1)[0].decode(_ENCODING, _ERRORS)
        if long_name is not None:
            info.name = long_name.rstrip("/") if info.isdir() else long_name
        # A member's data is its size field, padded, for every type (links and directories have
        # size 0) but GNU sparse, whose map may continue in extra header blocks: the caller refuses
        # a sparse member and abandons the stream, so its layout is never needed.
        self._unread = 0 if info.type == tarfile.GNUTYPE_SPARSE else _padded(info.size)
        return info

    def copy_to(self, sink: BinaryIO, size: int) -> int:
        """Write the current member's first `size` bytes of data to `sink`; returns bytes written.

        `size` is the member's own size (or less: the caller's cap); the rest and the padding are
        skipped by the next `next()`.
        """
        if size > self._unread:
            raise ValueError(f"only {self._unread} bytes of data are left in this member, {size} asked")
        self._pump(size, sink.write, "a member's data")
        self._unread -= size
        return size


def _padded(size: int) -> int:
    return -(-size // BLOCK) * BLOCK
