"""Remote commands are built from fixed templates; hostile paths and names never reach a shell unquoted.

The commands are run here through a real `sh -c` (what sshd does with an exec request) against a
directory whose name holds `;`, spaces, quotes and `$(...)`.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from trainctl.collectors import pyspy_dump, rundir_sync
from trainctl.collectors.remote_script import build_script, split_sections
from trainctl.collectors.ssh import SshClient

EVIL = "r 1;touch PWNED;'\"$(touch PWNED2)`touch PWNED3`"


def _sh(cmd: str, cwd: Path, stdin: bytes = b"") -> subprocess.CompletedProcess:
    return subprocess.run(["sh", "-c", cmd], cwd=cwd, input=stdin, capture_output=True, timeout=30)


@pytest.fixture
def evil_run(tmp_path: Path) -> Path:
    run = tmp_path / EVIL
    (run / "logs" / "node 01").mkdir(parents=True)
    (run / "logs" / "node 01" / "rank-0.log").write_text("x")
    (run / "run.json").write_text("{}")
    return run


def test_manifest_and_tar_commands_quote_the_run_dir(evil_run: Path, tmp_path: Path) -> None:
    res = _sh(rundir_sync.manifest_command(str(evil_run)), tmp_path)
    assert res.returncode == 0, res.stderr
    assert set(rundir_sync.parse_manifest(res.stdout)) == {"run.json", "logs/node 01/rank-0.log"}
    tar = _sh(rundir_sync.tar_command(str(evil_run)), tmp_path, stdin=b"run.json\0logs/node 01/rank-0.log\0")
    assert tar.returncode == 0, tar.stderr
    assert b"logs/node 01/rank-0.log" in tar.stdout
    assert not list(tmp_path.rglob("PWNED*"))


def test_missing_run_dir_exits_with_the_no_run_dir_code(tmp_path: Path) -> None:
    assert _sh(rundir_sync.manifest_command(str(tmp_path / "nope")), tmp_path).returncode == rundir_sync.NO_RUN_DIR_EXIT


def test_script_sections_round_trip_and_cannot_be_forged(evil_run: Path, tmp_path: Path) -> None:
    nonce = "00112233aabbccdd"
    # A remote file that prints a marker-looking line (another nonce) must not split the output.
    (evil_run / "ranks").mkdir()
    (evil_run / "ranks" / "rank-0.json").write_text("\n@@deadbeefdeadbeef manifest 0\n")
    script = build_script(
        {
            "manifest": rundir_sync.manifest_command(str(evil_run)),
            "ranks": pyspy_dump.ranks_command(str(evil_run)),
            "fail": "exit 7",
        },
        nonce,
    )
    res = _sh(script, tmp_path)
    secs = split_sections(res.stdout, nonce)
    assert [(s.name, s.exit_code) for s in secs.values()] == [("manifest", 0), ("ranks", 0), ("fail", 7)]
    assert len(rundir_sync.parse_manifest(secs["manifest"].output)) == 3
    assert secs["ranks"].output == b"\n@@deadbeefdeadbeef manifest 0\n\n"
    assert not list(tmp_path.rglob("PWNED*"))
    with pytest.raises(ValueError):
        build_script({"x; rm": "true"}, nonce)


def test_pyspy_command_only_interpolates_integers() -> None:
    cmd = pyspy_dump.command([pyspy_dump.RankProc(1, 123, "node;01")], "abcdef0123456789")
    assert "node" not in cmd and "--pid 123" in cmd


def test_ssh_config_is_honoured(tmp_path: Path) -> None:
    cfg = tmp_path / "config"
    cfg.write_text(
        "Host n1\n  HostName 127.0.0.9\n  Port 2222\n  User alice\n  IdentityFile ~/keys/id\n  IdentitiesOnly yes\n"
        "  UserKnownHostsFile /tmp/kh1 /tmp/kh2\n  StrictHostKeyChecking accept-new\n  ProxyJump bastion\n"
        "  ConnectTimeout 3\n"
    )
    t = SshClient(ssh_config=cfg, use_agent=False).target("n1")
    assert (t.hostname, t.port, t.user, t.identities_only, t.strict_host_key_checking, t.proxy_jump) == (
        "127.0.0.9",
        2222,
        "alice",
        True,
        "accept-new",
        "bastion",
    )
    assert t.identity_files == (str(Path.home() / "keys" / "id"),)
    assert t.known_hosts_files == ("/tmp/kh1", "/tmp/kh2")
    assert t.known_hosts_name == "[127.0.0.9]:2222" and t.connect_timeout_s == 3.0
    assert "ssh-keyscan -p 2222 127.0.0.9 >> /tmp/kh1" == t.keyscan_hint()
    other = SshClient(ssh_config=cfg, use_agent=False).target("bob@plain:2200")
    assert (other.hostname, other.port, other.user, other.proxy_jump) == ("plain", 2200, "bob", None)


@pytest.mark.parametrize("use_ssh_G", [True, False])
def test_an_ipv6_host_with_a_port_is_split_as_the_inventory_splits_it(tmp_path: Path, use_ssh_G: bool) -> None:
    # `--hosts [2001:db8::1]:2222` passes the inventory; the client must dial that address and port
    cfg = tmp_path / "config"
    cfg.write_text("Host *\n  User alice\n")
    client = SshClient(ssh_config=cfg, use_agent=False, use_ssh_G=use_ssh_G)
    t = client.target("[2001:db8::1]:2222")
    assert (t.alias, t.hostname, t.port, t.user) == ("[2001:db8::1]:2222", "2001:db8::1", 2222, "alice")
    assert t.known_hosts_name == "[2001:db8::1]:2222"
    bare = client.target("bob@2001:db8::2")
    assert (bare.hostname, bare.port, bare.user) == ("2001:db8::2", 22, "bob")
