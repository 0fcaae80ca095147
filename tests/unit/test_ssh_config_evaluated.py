"""An exact ssh config is evaluated in Python, no `ssh -G` per host, and says what `ssh -G` says.

The reference is OpenSSH itself: on generated configs (Host patterns, negations, the keywords
trainctl reads in every spelling the evaluator accepts, keywords it ignores, `-l`/`-p`), the
evaluation must equal, key by key, what the installed `ssh -G` prints for those keywords.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import trainctl.collectors.ssh as ssh
from trainctl.collectors import ssh_config_shape

pytestmark = pytest.mark.skipif(shutil.which("ssh") is None, reason="OpenSSH client (ssh -G) not installed")

VALUES = {
    "HostName": ["Gpu.Example.ORG", "10.0.0.7", "h1"],
    "Port": ["22", "2222", "0222"],
    "User": ["Bob", "trainer"],
    "IdentityFile": ["~/.ssh/k1", "/abs/K2", "k3"],
    "IdentitiesOnly": ["yes", "No", "TRUE", "false"],
    "UserKnownHostsFile": ["~/kh1 /x/kh2", "/etc/kh", "~/.ssh/known_hosts"],
    "StrictHostKeyChecking": ["yes", "no", "ask", "accept-new", "off", "True", "FALSE"],
    "HostKeyAlias": ["AliasUP", "k1"],
    "ConnectTimeout": ["7", "30", "05"],
    # read by ssh, not by trainctl: must change nothing
    "ServerAliveInterval": ["5"],
    "ForwardAgent": ["no"],
    "LogLevel": ["ERROR"],
}
# valid for ssh, not evaluated here: the config must then go to ssh -G
INEXACT = [("ConnectTimeout", "1m"), ("ProxyJump", "jump1"), ("UserKnownHostsFile", "none"), ("IdentityFile", "none")]
PATTERNS = ["a1", "a*", "!a2", "b?", "*", "bb", "c-3.x", "*.x", "!*.x"]
HOSTS = ["a1", "a2", "b1", "bb", "c-3.x", "zz"]


def _spelling(keyword: str) -> st.SearchStrategy[str]:
    return st.sampled_from([keyword, keyword.lower(), keyword.upper()])


_line = st.sampled_from(sorted(VALUES)).flatmap(
    lambda k: st.tuples(_spelling(k), st.sampled_from(VALUES[k])).map(" ".join)
)
_block = st.tuples(
    st.lists(st.sampled_from(PATTERNS), min_size=1, max_size=3, unique=True),
    st.lists(_line, max_size=5),
).map(lambda b: "Host " + " ".join(b[0]) + "\n" + "".join(f"  {line}\n" for line in b[1]))
CONFIGS = st.tuples(st.lists(_line, max_size=2), st.lists(_block, max_size=5)).map(
    lambda c: "".join(f"{line}\n" for line in c[0]) + "".join(c[1])
)


@pytest.fixture(scope="module")
def defaults() -> dict[str, list[str]]:
    g = ssh.ssh_G("x", Path(os.devnull))
    assert g is not None
    return g


def _said(g: dict[str, list[str]] | None) -> dict[str, list[str]]:
    assert g is not None
    return {k: v for k, v in g.items() if k in ssh._G_READ}


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    text=CONFIGS,
    asked=st.lists(
        st.tuples(st.sampled_from(HOSTS), st.sampled_from([None, "alice"]), st.sampled_from([None, "2200"])),
        min_size=1,
        max_size=3,
    ),
)
@example(  # a file named twice is tried once; the first block's values win over later ones
    text="IdentityFile k3\nHost a*\n  IdentityFile /abs/K2\n  identityfile k3\n  User Bob\nHost *\n  USER trainer\n",
    asked=[("a1", None, None), ("bb", None, "2200")],
)
def test_the_evaluation_of_a_generated_config_is_what_ssh_G_prints(tmp_path, defaults, text, asked) -> None:
    cfg = tmp_path / "config"
    cfg.write_text(text)
    shape = ssh_config_shape.parse(text)
    assert shape is not None and shape.exact, text
    for host, user, port in asked:
        assert shape.resolve(host, user, port, defaults) == _said(ssh.ssh_G(host, cfg, port=port, user=user)), (
            text,
            host,
            user,
            port,
        )


@pytest.mark.parametrize(("keyword", "value"), INEXACT)
def test_forms_not_evaluated_here_leave_the_config_to_ssh_G(keyword, value) -> None:
    shape = ssh_config_shape.parse(f"Host gpu-*\n  {keyword} {value}\n")
    assert shape is not None and not shape.exact
    assert shape.resolve("gpu-01", None, None, {"port": ["22"]}) is None


CONFIG = "".join(f"Host node{i:02d}\n  HostName 127.0.0.{i}\n  Port 22{i:02d}\n  User root\n" for i in range(1, 9))


def _counting(monkeypatch) -> list[str]:
    runs: list[str] = []
    real = ssh.ssh_G
    monkeypatch.setattr(ssh, "ssh_G", lambda host, *a, **kw: runs.append(host) or real(host, *a, **kw))
    return runs


def test_a_config_with_a_block_per_host_costs_two_ssh_G_runs_not_one_per_host(tmp_path, monkeypatch) -> None:
    cfg = tmp_path / "config"
    cfg.write_text(CONFIG)
    want = {f"node{i:02d}": _said(ssh.ssh_G(f"node{i:02d}", cfg)) for i in range(1, 9)}
    runs = _counting(monkeypatch)
    client = ssh.SshClient(ssh_config=cfg, use_agent=False)
    for host, g in want.items():
        assert _said(client._resolve_G(host, None, None)) == g, host
    assert runs == ["node01", "node01"]  # the witness: OpenSSH's defaults, then node01 itself
    t = client.target("node05")
    assert (t.hostname, t.port, t.user, t.resolved_by) == ("127.0.0.5", 2205, "root", "ssh -G")


def test_where_ssh_G_disagrees_with_the_evaluation_every_host_gets_ssh_G(tmp_path, monkeypatch) -> None:
    cfg = tmp_path / "config"
    cfg.write_text(CONFIG)
    real = ssh.ssh_G
    runs: list[str] = []

    def other_ssh(host, config, **kw):  # an OpenSSH that resolves the port differently
        runs.append(host)
        g = real(host, config, **kw)
        return g if config == Path(os.devnull) else {**g, "port": ["2999"]}

    monkeypatch.setattr(ssh, "ssh_G", other_ssh)
    client = ssh.SshClient(ssh_config=cfg, use_agent=False)
    assert [client.target(f"node0{i}").port for i in (1, 2, 3)] == [2999, 2999, 2999]
    assert runs == ["node01", "node01", "node02", "node03"]


def test_a_relative_include_is_read_under_HOME_as_ssh_reads_it(tmp_path, monkeypatch) -> None:
    # ssh globs Include with GLOB_TILDE (~ is $HOME) but expands UserKnownHostsFile's ~ from the
    # passwd entry: with $HOME elsewhere, both must still be what ssh -G says
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / ".ssh" / "conf.d").mkdir(parents=True)
    (tmp_path / ".ssh" / "conf.d" / "t.conf").write_text("Host node02\n  User impostor\n  UserKnownHostsFile ~/kh\n")
    cfg = tmp_path / "config"
    cfg.write_text("Include conf.d/t.conf\n" + CONFIG)
    client = ssh.SshClient(ssh_config=cfg, use_agent=False)
    for host in ("node01", "node02"):  # node01 is the witness; node02 is evaluated
        assert _said(client._resolve_G(host, None, None)) == _said(ssh.ssh_G(host, cfg)), host
    t = client.target("node02")
    assert (t.user, t.known_hosts_files) == ("impostor", (ssh_config_shape.passwd_home() + "/kh",))
