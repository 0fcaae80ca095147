"""One `ssh -G` per class of hosts the config cannot tell apart, and exactly ssh's answer for each.

The reference is OpenSSH itself: for every host, the shared resolution with the name put in must
equal what `ssh -G` prints for that host on its own, key by key.
"""

from __future__ import annotations

import shutil

import pytest

import trainctl.collectors.ssh as ssh
from trainctl.collectors import ssh_config_shape

pytestmark = pytest.mark.skipif(shutil.which("ssh") is None, reason="OpenSSH client (ssh -G) not installed")

CONFIG = """\
# settings before any Host line apply to every host
ConnectTimeout 7
StrictHostKeyChecking accept-new

Host gpu-07
  Port 2207
  IdentityFile ~/.ssh/gpu07

Host gpu-* !gpu-03
  User trainer
  IdentityFile ~/.ssh/gpu
  IdentitiesOnly yes

Host gpu-0?
  UserKnownHostsFile /etc/trainctl/known_hosts

Host login-*
  HostName bastion.example.org
  ProxyJump jump01

Host *
  User root
  Port 22
"""

HOSTS = [
    ("gpu-01", None, None),
    ("gpu-02", None, None),
    ("gpu-03", None, None),  # negated out of the gpu-* block: a class of its own
    ("gpu-07", None, None),  # its own block
    ("gpu-11", None, None),  # gpu-* but not gpu-0?
    ("gpu-12", None, None),
    ("gpu-01", None, "2200"),  # -p: another class
    ("gpu-02", "alice", None),  # -l: another class
    ("login-1", None, None),  # HostName from the config: the same for the class
    ("login-2", None, None),
    ("other", None, None),
    ("elsewhere", None, None),
]


def test_every_host_gets_exactly_what_ssh_G_prints_for_it_with_fewer_ssh_runs(tmp_path, monkeypatch) -> None:
    cfg = tmp_path / "config"
    cfg.write_text(CONFIG)
    want = {(h, u, p): ssh.ssh_G(h, cfg, port=p, user=u) for h, u, p in HOSTS}
    runs: list[str] = []
    real = ssh.ssh_G
    monkeypatch.setattr(ssh, "ssh_G", lambda host, *a, **kw: runs.append(host) or real(host, *a, **kw))
    client = ssh.SshClient(ssh_config=cfg, use_agent=False)
    for h, u, p in HOSTS:
        assert client._resolve_G(h, p, u) == want[(h, u, p)], (h, u, p)
    assert client.target("gpu-12").hostname == "gpu-12" and client.target("login-2").hostname == "bastion.example.org"
    # classes: gpu-0[12], gpu-03, gpu-07, gpu-1x, gpu-01 -p, gpu-02 -l, login-*, other/elsewhere
    assert len(runs) == 8, runs


@pytest.mark.parametrize(
    "text",
    [
        "Match host gpu-*\n  User x\n",
        "Include ~/.ssh/config.d/*\n",
        "Host gpu-*\n  HostName %h.example.org\n",
        "Host gpu-*\n  IdentityFile ${HOME}/.ssh/id\n",
        'Host "gpu 1"\n  User x\n',
        "Host=gpu-*\n  User x\n",
        "CanonicalizeHostname yes\nHost *\n  User x\n",
        "Host gpu-[0-9]\n  User x\n",  # not a pattern OpenSSH knows: refused, never guessed
        "Host gpu-* # trailing comment\n  User x\n",
    ],
)
def test_configs_that_could_tell_hosts_apart_otherwise_get_one_ssh_G_per_host(text) -> None:
    assert ssh_config_shape.parse(text) is None


def test_a_name_with_upper_case_or_odd_characters_is_resolved_on_its_own() -> None:
    shape = ssh_config_shape.parse(CONFIG)
    assert shape is not None
    assert shape.host_class("GPU-01", None, None) is None and shape.host_class("gpu_01;x", None, None) is None
    assert shape.host_class("gpu-01", None, None) == shape.host_class("gpu-02", None, None)
    assert shape.host_class("gpu-01", None, None) != shape.host_class("gpu-03", None, None)


def test_ssh_G_failing_for_a_class_falls_back_for_its_hosts(tmp_path, monkeypatch) -> None:
    cfg = tmp_path / "config"
    cfg.write_text(CONFIG)
    monkeypatch.setattr(ssh, "ssh_G", lambda *a, **kw: None)  # ssh refused, or not installed
    client = ssh.SshClient(ssh_config=cfg, use_agent=False)
    t = client.target("gpu-11")
    assert (t.resolved_by, t.user) == ("paramiko", "trainer")


def test_the_test_config_of_the_sshd_hosts_gives_every_host_its_own_class() -> None:
    text = "".join(f"Host node{i:02d}\n  HostName 127.0.0.{i + 1}\n  Port 22{i:02d}\n" for i in range(1, 5))
    shape = ssh_config_shape.parse(text)
    assert shape is not None
    assert len({shape.host_class(f"node{i:02d}", None, None) for i in range(1, 5)}) == 4


SYSTEM = ssh._SYSTEM_SSH_CONFIG


@pytest.mark.skipif(
    not SYSTEM.is_file() or "GSSAPIAuthentication yes" not in SYSTEM.read_text(errors="replace"),
    reason="needs Debian's default /etc/ssh/ssh_config (Host * GSSAPIAuthentication yes)",
)
def test_without_ssh_config_ssh_G_reads_the_user_config_then_the_system_one(tmp_path, monkeypatch) -> None:
    # Plain ssh reads ~/.ssh/config, then /etc/ssh/ssh_config; `ssh -F ~/.ssh/config` would skip the
    # second. Debian's system config sets GSSAPIAuthentication yes (the built-in default is no).
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / ".ssh").mkdir()
    (tmp_path / ".ssh" / "config").write_text("Host gpu-*\n  User trainer\n")
    client = ssh.SshClient(use_agent=False)
    g = client._resolve_G("gpu-01", None, None)
    assert (g["user"], g["gssapiauthentication"]) == (["trainer"], ["yes"])
    # an explicit --ssh-config is `ssh -F FILE`: the system config is skipped, as ssh skips it
    explicit = ssh.SshClient(ssh_config=tmp_path / ".ssh" / "config", use_agent=False)
    assert explicit._resolve_G("gpu-01", None, None)["gssapiauthentication"] == ["no"]
    # and the evaluation spans both files: ssh -G only for the first host (OpenSSH's defaults and
    # the host itself, the witness), each host what ssh says for the keywords trainctl reads
    runs: list[str] = []
    real = ssh.ssh_G
    monkeypatch.setattr(ssh, "ssh_G", lambda host, *a, **kw: runs.append(host) or real(host, *a, **kw))
    fresh = ssh.SshClient(use_agent=False)
    for h in ("gpu-01", "gpu-02", "login"):
        said = real(h, fresh._G_config)
        assert fresh._resolve_G(h, None, None).items() >= {k: said[k] for k in said if k in ssh._G_READ}.items(), h
    assert runs == ["gpu-01", "gpu-01"]


def test_top_level_includes_are_spliced_and_conditional_ones_refused(tmp_path) -> None:
    (tmp_path / ".ssh" / "conf.d").mkdir(parents=True)
    (tmp_path / ".ssh" / "conf.d" / "b.conf").write_text("Host gpu-*\n  User b\n")
    (tmp_path / ".ssh" / "conf.d" / "a.conf").write_text("Host login-*\n  HostName bastion\n")
    main = tmp_path / "config"
    # a relative Include is under ~/.ssh; what follows it is global again (readconf.c restores the state)
    main.write_text("Include conf.d/*.conf\nUser everyone\nHost gpu-01\n  Port 2201\n")
    shape = ssh_config_shape.read_files([main], home=tmp_path)
    assert shape is not None
    assert shape.host_class("gpu-02", None, None) == shape.host_class("gpu-03", None, None)
    assert shape.host_class("gpu-01", None, None) != shape.host_class("gpu-02", None, None)
    assert shape.sets_hostname(shape.host_class("login-1", None, None))
    main.write_text("Host gpu-*\n  Include conf.d/*.conf\n")  # conditional: refused
    assert ssh_config_shape.read_files([main], home=tmp_path) is None
    # a comment may say anything: only live lines can make hosts differ
    main.write_text("# ProxyCommand ssh -W %h:%p jump\nHost gpu-*\n  User x\n")
    assert ssh_config_shape.read_files([main], home=tmp_path) is not None
