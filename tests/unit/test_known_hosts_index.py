"""known_hosts indexed once (collectors/ssh.py _KnownHosts): the same answers as paramiko's HostKeys
on plain, `[host]:port` and hashed names, a bad line skipped instead of failing the whole file, and
a lookup that does not scan the plain entries (a fan-out to N hosts no longer costs N^2)."""

from __future__ import annotations

from pathlib import Path

import paramiko

from trainctl.collectors.ssh import _KnownHosts


def test_index_answers_like_paramiko_and_skips_bad_lines(tmp_path: Path) -> None:
    a, b = paramiko.RSAKey.generate(1024), paramiko.RSAKey.generate(1024)
    kh = tmp_path / "known_hosts"
    good = [
        f"[127.0.0.2]:2222 {a.get_name()} {a.get_base64()}",
        f"{paramiko.HostKeys.hash_host('secret-host')} {b.get_name()} {b.get_base64()}",
        f"h1,h2 {a.get_name()} {a.get_base64()}",
    ]
    kh.write_text("\n".join(good) + "\n")
    ref = paramiko.HostKeys(str(kh))
    idx = _KnownHosts(str(kh))
    for name in ("[127.0.0.2]:2222", "secret-host", "h1", "h2", "127.0.0.2", "nope"):
        want = list(ref.lookup(name).values()) if ref.lookup(name) is not None else []
        assert idx.lookup(name) == want, name
    # a truncated line (paramiko's HostKeys raises on it) is skipped; the rest still answers
    kh.write_text("\n".join([good[0], "@cert-authority *.x ssh-ed25519 AAAA", "# note", good[2]]) + "\n")
    idx = _KnownHosts(str(kh))
    assert idx.lookup("h2") == [a] and idx.lookup("[127.0.0.2]:2222") == [a]
    assert _KnownHosts(str(tmp_path / "missing")).lookup("h1") == []


def test_plain_lookups_do_not_scan_the_file(tmp_path: Path, monkeypatch) -> None:
    key = paramiko.RSAKey.generate(1024)
    kh = tmp_path / "known_hosts"
    hashed = paramiko.HostKeys.hash_host("hidden")
    kh.write_text(
        "".join(f"node{i:04d} {key.get_name()} {key.get_base64()}\n" for i in range(2000))
        + f"{hashed} {key.get_name()} {key.get_base64()}\n"
    )
    idx = _KnownHosts(str(kh))
    assert len(idx.plain) == 2000 and len(idx.hashed) == 1
    calls = []
    real = paramiko.HostKeys.hash_host
    monkeypatch.setattr(
        paramiko.HostKeys, "hash_host", staticmethod(lambda h, salt=None: calls.append(h) or real(h, salt))
    )
    assert idx.lookup("node1999") == [key]
    assert calls == ["node1999"]  # one HMAC for the one hashed entry, none for the 2,000 plain ones
    assert idx.lookup("hidden") == [key]
