"""The sshd test-host fixture itself: per-host filesystems, failure modes, clean teardown."""

from __future__ import annotations

import subprocess

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.sshd, pytest.mark.timeout(60)]


def _ssh(cluster, host, *cmd):
    return subprocess.run(
        ["ssh", "-F", str(cluster.ssh_config), host, *cmd], capture_output=True, text=True, timeout=20
    )


def test_each_host_sees_its_own_files_at_the_same_path(sshd_cluster):
    cluster = sshd_cluster({"node01": "ok", "node02": "ok", "node03": "refuse_key", "node04": "unreachable"})
    for name in cluster.names:
        (cluster.host_root(name) / "who").write_text(name)
    assert _ssh(cluster, "node01", "cat", str(cluster.remote_root / "who")).stdout == "node01"
    assert _ssh(cluster, "node02", "cat", str(cluster.remote_root / "who")).stdout == "node02"
    refused = _ssh(cluster, "node03", "true")
    assert refused.returncode == 255 and "Permission denied (publickey)" in refused.stderr
    assert "Connection refused" in _ssh(cluster, "node04", "true").stderr
    pids = [h.proc.pid for h in cluster.hosts.values() if h.proc]
    cluster.stop()
    for pid in pids:
        assert subprocess.run(["kill", "-0", str(pid)], capture_output=True).returncode != 0
