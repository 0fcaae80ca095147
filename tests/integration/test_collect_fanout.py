"""collectors.ssh against real sshd hosts: command timeouts, ProxyJump, GroupResult, one connection per host."""

from __future__ import annotations

import paramiko
import pytest

from trainctl.collectors.ssh import CommandTimeout, SshClient, error_type_of, fan_out

pytestmark = [pytest.mark.slow, pytest.mark.sshd, pytest.mark.timeout(60)]


def test_slow_command_times_out_and_other_hosts_still_answer(sshd_cluster) -> None:
    cluster = sshd_cluster(3)
    client = SshClient(ssh_config=cluster.ssh_config, use_agent=False)
    peers = {}

    def job(host: str) -> bytes:
        with client.connect(host) as s:
            first = s.run("echo $SSH_CONNECTION", timeout_s=20)
            if host == "node02":
                s.run("sleep 30", timeout_s=1)
            second = s.run("echo $SSH_CONNECTION; echo oops >&2; exit 4", timeout_s=20)
            peers[host] = (first.stdout, second.stdout, second.stderr, second.exit_code)
            return second.stdout

    result = fan_out(cluster.names, job)
    assert sorted(result.succeeded) == ["node01", "node03"]
    err = result.failed["node02"].error
    assert isinstance(err, CommandTimeout) and error_type_of(err) == "timeout" and "within 1s" in str(err)
    for h in ("node01", "node03"):
        first, second, stderr, code = peers[h]
        assert first == second and (stderr, code) == (b"oops\n", 4)  # same TCP connection reused


def test_proxyjump_reaches_a_host_through_another(sshd_cluster) -> None:
    cluster = sshd_cluster(2)
    n2 = cluster.hosts["node02"]
    with open(cluster.ssh_config, "a") as f:
        f.write(
            f"Host behind\n  HostName {n2.address}\n  Port {n2.port}\n  User root\n  IdentityFile {cluster.client_key}\n"
            f"  UserKnownHostsFile {cluster.known_hosts}\n  ProxyJump node01\n"
        )
    (cluster.host_root("node02") / "who").write_text("node02")
    client = SshClient(ssh_config=cluster.ssh_config, use_agent=False)
    with client.connect("behind") as s:
        r = s.run(f"cat {cluster.remote_root}/who", timeout_s=20)
        # The session rides on a direct-tcpip channel of node01's connection, not on a socket.
        assert isinstance(s.transport.sock, paramiko.Channel)
        assert s._via is not None and s._via.target.alias == "node01"
    assert r.stdout == b"node02"


def test_collect_opens_one_exec_per_host_and_brings_every_file(sshd_cluster, tmp_path, monkeypatch) -> None:
    """The listing and the tar stream share one exec (one remote shell per host, not two)."""
    from trainctl.collectors.ssh import SshSession
    from trainctl.ops.collect.collection import CollectOptions, collect, parse_kinds

    cluster = sshd_cluster(2)
    for h in cluster.names:
        (cluster.host_root(h) / "run" / "logs" / h).mkdir(parents=True)
        (cluster.host_root(h) / "run" / "logs" / h / "rank-0.log").write_text(f"hello from {h}\n")
    execs: list[str] = []
    real_open = SshSession._open
    monkeypatch.setattr(
        SshSession, "_open", lambda self, *a, **kw: execs.append(self.target.alias) or real_open(self, *a, **kw)
    )
    opts = CollectOptions(
        run_dir=str(cluster.remote_root / "run"),
        out=tmp_path / "ds",
        hosts=tuple(cluster.names),
        kinds=parse_kinds(["rank_logs,host_facts"]),
        ssh_config=str(cluster.ssh_config),
    )
    result = collect(opts, client=SshClient(ssh_config=cluster.ssh_config, use_agent=False))
    assert not result.failed_hosts
    assert sorted(execs) == ["node01", "node02"]
    for h in cluster.names:
        assert (tmp_path / "ds" / "logs" / h / "rank-0.log").read_text() == f"hello from {h}\n"
    rows = {(r.host, r.kind): r.ok for rep in result.reports for r in rep.rows}
    assert all(rows[(h, k)] for h in cluster.names for k in ("rank_logs", "host_facts"))
    # The status part is a few rows: written uncompressed (zstd cost CPU per host for nothing).
    import pyarrow.parquet as pq

    from trainctl import dataset

    parts = dataset.list_parts(tmp_path / "ds", "collection_status")
    assert sorted(p.host for p in parts) == ["node01", "node02"]
    meta = pq.read_metadata(parts[0].path)
    assert meta.num_rows == 2 and meta.row_group(0).column(0).compression == "UNCOMPRESSED"
