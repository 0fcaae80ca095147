"""Bounded collection (issue 14 item 3): what a broken or hostile host's tar stream may not do.

The archives are made by GNU tar itself (the tool on the other end), not hand-built bytes: a sparse
member (`tar --sparse`: 2 GiB apparent, a few KB in the archive), a symlink, a member larger than the
host's manifest said, a name nobody asked for, and names with spaces and newlines.
"""

from __future__ import annotations

import io
import os
import subprocess
from pathlib import Path

import pytest

from trainctl.collectors.rundir_sync import FileStat, classify
from trainctl.ops.collect.collection import CollectOptions, TarMemberRefused, _extract, _within_caps


def _tar(src: Path, names: list[str], *extra: str) -> io.BytesIO:
    out = subprocess.run(
        ["tar", *extra, "--null", "--no-recursion", "-T", "-", "-cf", "-"],
        cwd=src,
        input=b"\0".join(n.encode() for n in names) + b"\0",
        capture_output=True,
        check=True,
    ).stdout
    return io.BytesIO(out)


def _stats(src: Path, names: list[str]) -> dict[str, FileStat]:
    return {n: FileStat((src / n).stat().st_size, 0) for n in names}


def _extract_all(stream, out: Path, names: list[str], stats) -> dict[str, int]:
    return _extract(stream, out, {n: "rank_logs" for n in names}, stats, lambda n: None)


def test_a_sparse_member_is_refused_before_it_unpacks(tmp_path) -> None:
    src = tmp_path / "src"
    (src / "logs" / "node01").mkdir(parents=True)
    big = src / "logs" / "node01" / "rank-0.log"
    with open(big, "wb") as f:
        f.truncate(2 << 30)  # 2 GiB apparent, no blocks
    names = ["logs/node01/rank-0.log"]
    stream = _tar(src, names, "--sparse")
    assert len(stream.getvalue()) < 64 << 10  # the attack: a few KB on the wire
    with pytest.raises(TarMemberRefused, match="sparse"):
        _extract_all(stream, tmp_path / "out", names, _stats(src, names))
    assert not list((tmp_path / "out").rglob("*.log"))


def test_a_member_larger_than_the_manifest_said_is_refused(tmp_path) -> None:
    src = tmp_path / "src"
    (src / "logs" / "node01").mkdir(parents=True)
    (src / "logs" / "node01" / "rank-0.log").write_bytes(b"x" * 10_000)
    names = ["logs/node01/rank-0.log"]
    lying = {names[0]: FileStat(100, 0)}  # the manifest declared 100 bytes
    with pytest.raises(TarMemberRefused, match="10000 bytes, the host's manifest declared 100"):
        _extract_all(_tar(src, names), tmp_path / "out", names, lying)
    assert not list((tmp_path / "out").rglob("*.log*"))  # no partial file left either


def test_links_and_unrequested_members_are_refused(tmp_path) -> None:
    src = tmp_path / "src"
    (src / "logs" / "node01").mkdir(parents=True)
    os.symlink("/etc/passwd", src / "logs" / "node01" / "rank-0.log")
    names = ["logs/node01/rank-0.log"]
    with pytest.raises(TarMemberRefused, match="link or special file"):
        _extract_all(_tar(src, names), tmp_path / "out", names, {names[0]: FileStat(11, 0)})
    (src / "logs" / "node01" / "rank-1.log").write_text("hi\n")
    with pytest.raises(TarMemberRefused, match="was not asked for"):
        _extract_all(_tar(src, ["logs/node01/rank-1.log"]), tmp_path / "out", names, {names[0]: FileStat(3, 0)})


def test_any_file_name_survives(tmp_path) -> None:
    src = tmp_path / "src"
    (src / "logs" / "node01").mkdir(parents=True)
    names = ["logs/node01/rank 0 (copy).log", "logs/node01/odd\nname.log", "logs/node01/ünï.log"]
    for n in names:
        (src / n).write_text(n)
        assert classify(n) == "rank_logs"
    got = _extract_all(_tar(src, names), tmp_path / "out", names, _stats(src, names))
    assert set(got) == set(names)
    assert all((tmp_path / "out" / n).read_text() == n for n in names)


def test_host_caps_keep_the_most_files_and_say_what_was_left(tmp_path) -> None:
    remote = {f"logs/n1/rank-{i}.log": FileStat(100 * (i + 1), 0) for i in range(10)}
    remote["logs/n1/huge.log"] = FileStat(10_000, 0)
    todo = {p: "rank_logs" for p in remote}
    o = CollectOptions(run_dir="/r", out=tmp_path, hosts=("n1",), max_host_files=5, max_file_bytes=5_000)
    kept, notes = _within_caps(todo, remote, o)
    assert sorted(kept) == [f"logs/n1/rank-{i}.log" for i in range(5)]  # the smallest first
    assert (
        "1 file(s) over the" in notes[0]
        and "--max-file-gib" in notes[0]
        and "5 file(s) past the host's caps" in notes[1]
    )
    o = CollectOptions(run_dir="/r", out=tmp_path, hosts=("n1",), max_host_bytes=1_000)
    kept, _ = _within_caps(todo, remote, o)
    assert sum(remote[p].size_bytes for p in kept) <= 1_000 and len(kept) == 4
