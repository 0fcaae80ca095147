"""TarStream (collect's reader of a host's tar stream) against archives GNU tar itself wrote.

The reference is tarfile: every member TarStream yields must have tarfile's name, type and size,
and the bytes it copies must be the file's, whatever piece sizes the channel hands over.
"""

from __future__ import annotations

import io
import random
import subprocess
import tarfile
from pathlib import Path

import pytest

from trainctl.ops.collect.tar_stream import TarStream, TruncatedArchive


def _gnu_tar(src: Path, names: list[str], *extra: str) -> bytes:
    return subprocess.run(
        ["tar", "--format=gnu", *extra, "--null", "-T", "-", "-cf", "-"],
        cwd=src,
        input=b"\0".join(n.encode() for n in names) + b"\0",
        capture_output=True,
        check=True,
    ).stdout


class _Dribble:
    """A reader that hands over pieces of random sizes (1 byte to 3 blocks), as a channel does."""

    def __init__(self, data: bytes, seed: int) -> None:
        self._buf = io.BytesIO(data)
        self._rng = random.Random(seed)

    def read(self, n: int = -1) -> bytes:
        return self._buf.read(min(n, self._rng.randint(1, 1536)))


def _tree(tmp_path: Path) -> tuple[Path, dict[str, bytes]]:
    src = tmp_path / "src"
    files = {
        "run.json": b'{"run_id": "r"}',
        "logs/node01/empty.log": b"",
        "logs/node01/one-block.log": b"a" * 512,
        "logs/node01/one-block-and-a-byte.log": b"b" * 513,
        "logs/node01/odd\nname (copy).log": b"newline in the name",
        "fr/node01/" + "long-" * 40 + "name.pkl": bytes(range(256)) * 300,  # > 100 chars: a GNU `L` header
    }
    for name, data in files.items():
        (src / name).parent.mkdir(parents=True, exist_ok=True)
        (src / name).write_bytes(data)
    return src, files


@pytest.mark.parametrize("seed", range(5))
def test_members_and_bytes_match_tarfile_whatever_the_piece_sizes(tmp_path, seed) -> None:
    src, files = _tree(tmp_path)
    archive = _gnu_tar(src, ["logs", "fr", "run.json"])  # with recursion: directory members too
    with tarfile.open(fileobj=io.BytesIO(archive), mode="r:") as tf:
        want = [(m.name, m.type, m.size) for m in tf.getmembers()]
    assert any(len(n) > 100 for n, _, _ in want) and any(t == tarfile.DIRTYPE for _, t, _ in want)

    ts = TarStream(_Dribble(archive, seed), read_bytes=4096)
    got, data = [], {}
    while (m := ts.next()) is not None:
        got.append((m.name, m.type, m.size))
        if m.isreg():
            sink = io.BytesIO()
            assert ts.copy_to(sink, m.size) == m.size
            data[m.name] = sink.getvalue()
    assert got == want
    assert data == files


def test_data_not_copied_is_skipped_and_a_capped_copy_stops_at_its_size(tmp_path) -> None:
    src, files = _tree(tmp_path)
    names = ["logs/node01/one-block-and-a-byte.log", "run.json"]
    ts = TarStream(io.BytesIO(_gnu_tar(src, names)))
    first = ts.next()
    sink = io.BytesIO()
    assert ts.copy_to(sink, 100) == 100 and sink.getvalue() == b"b" * 100
    with pytest.raises(ValueError):
        ts.copy_to(io.BytesIO(), 10_000)  # more than the member holds
    second = ts.next()  # the rest of the first member and its padding skipped
    assert (first.name, second.name) == tuple(names)
    sink = io.BytesIO()
    ts.copy_to(sink, second.size)
    assert sink.getvalue() == files["run.json"]
    assert ts.next() is None


def test_a_stream_cut_short_is_an_error_not_an_end(tmp_path) -> None:
    src, _ = _tree(tmp_path)
    archive = _gnu_tar(src, ["logs/node01/one-block-and-a-byte.log"])
    for cut in (100, 512 + 300, 512 + 1024 + 10):  # inside the header, the data, the end blocks
        ts = TarStream(io.BytesIO(archive[:cut]))
        with pytest.raises(TruncatedArchive):
            while (m := ts.next()) is not None:
                ts.copy_to(io.BytesIO(), m.size)


def test_sparse_and_link_members_come_back_with_their_type(tmp_path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    with open(src / "sparse.log", "wb") as f:
        f.truncate(1 << 30)
    (src / "link.log").symlink_to("/etc/passwd")
    ts = TarStream(io.BytesIO(_gnu_tar(src, ["sparse.log"], "--sparse")))
    assert ts.next().type == tarfile.GNUTYPE_SPARSE
    ts = TarStream(io.BytesIO(_gnu_tar(src, ["link.log"])))
    m = ts.next()
    assert m.type == tarfile.SYMTYPE and m.linkname == "/etc/passwd"


def test_a_corrupt_header_is_a_tar_error(tmp_path) -> None:
    src, _ = _tree(tmp_path)
    archive = bytearray(_gnu_tar(src, ["run.json"]))
    archive[0] ^= 0xFF  # the checksum no longer matches
    with pytest.raises(tarfile.TarError):
        TarStream(io.BytesIO(bytes(archive))).next()
