"""The OpenSSH client config resolved the way ssh resolves it (issue 17 item 3): `ssh -G` where ssh is
installed, paramiko's parser as the fallback. Real sshd hosts on loopback; the config uses Include, a
Match block and a ProxyCommand (a relay process between the client and the host's sshd)."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest

from trainctl.collectors.ssh import SshClient

pytestmark = [pytest.mark.slow, pytest.mark.sshd]

RELAY = textwrap.dedent(
    """
    # ProxyCommand: stdin/stdout <-> TCP to argv[1]:argv[2], like `nc %h %p`; records that it ran
    import os, selectors, socket, sys
    open(sys.argv[3], "a").write(sys.argv[1] + ":" + sys.argv[2] + "\\n")
    s = socket.create_connection((sys.argv[1], int(sys.argv[2])))
    sel = selectors.DefaultSelector()
    sel.register(0, selectors.EVENT_READ, "in")
    sel.register(s, selectors.EVENT_READ, "sock")
    while True:
        for key, _ in sel.select():
            if key.data == "in":
                data = os.read(0, 65536)
                if not data:
                    s.shutdown(socket.SHUT_WR); sel.unregister(0); continue
                s.sendall(data)
            else:
                data = s.recv(65536)
                if not data:
                    sys.exit(0)
                os.write(1, data)
    """
)


@pytest.mark.timeout(120)
def test_include_match_and_proxycommand(sshd_cluster, tmp_path: Path) -> None:
    cluster = sshd_cluster(3)
    h1, h2, h3 = (cluster.hosts[n] for n in ("node01", "node02", "node03"))
    common = (
        f"  User root\n  IdentityFile {cluster.client_key}\n  IdentitiesOnly yes\n"
        f"  UserKnownHostsFile {cluster.known_hosts}\n  StrictHostKeyChecking yes\n  BatchMode yes\n"
    )
    relay = tmp_path / "relay.py"
    relay.write_text(RELAY)
    used = tmp_path / "relay-used.txt"
    extra = tmp_path / "extra.conf"
    extra.write_text(f"Host node01\n  HostName {h1.address}\n  Port {h1.port}\n{common}")
    config = tmp_path / "config"
    config.write_text(
        f"Include {extra}\n\n"
        f"Match host node02\n  HostName {h2.address}\n  Port {h2.port}\n{common}\n"
        f"Host node03\n  HostName {h3.address}\n  Port {h3.port}\n{common}"
        f"  ProxyCommand {sys.executable} {relay} %h %p {used}\n"
    )
    client = SshClient(ssh_config=config, connect_timeout_s=10)
    for name, h in (("node01", h1), ("node02", h2), ("node03", h3)):
        t = client.target(name)
        assert t.resolved_by == "ssh -G" and (t.hostname, t.port) == (h.address, h.port), t
        sess = client.connect(name)
        try:
            assert sess.run("echo ok", timeout_s=20).stdout.strip() == b"ok"
        finally:
            sess.close()
    assert used.read_text().splitlines() == [f"{h3.address}:{h3.port}"]  # only node03 went through it
    # paramiko's parser, the fallback, reads the same simple config the same way
    fallback = SshClient(ssh_config=config, use_ssh_G=False).target("node03")
    assert (fallback.hostname, fallback.port, fallback.resolved_by) == (h3.address, h3.port, "paramiko")
    assert fallback.proxy_command and f"{h3.address} {h3.port}" in fallback.proxy_command  # paramiko expands tokens
