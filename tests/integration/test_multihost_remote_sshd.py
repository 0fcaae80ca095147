"""trainctl.ops.remote against real sshd test hosts: detached start, streamed log, exit status, stop."""

from __future__ import annotations

import time

import pytest

from trainctl.collectors.ssh import SshClient
from trainctl.ops.remote import RemoteHosts

pytestmark = [pytest.mark.slow, pytest.mark.sshd, pytest.mark.timeout(90)]


def _wait(hosts: RemoteHosts, proc, timeout_s: float = 20.0):
    deadline = time.monotonic() + timeout_s
    while True:
        st = hosts.poll(proc)
        if not st.alive or time.monotonic() > deadline:
            return st
        time.sleep(0.1)


def test_start_stream_poll_and_stop_per_host(sshd_cluster, tmp_path):
    cluster = sshd_cluster(2)
    log = str(cluster.remote_root / "logs" / "job.log")
    with RemoteHosts(SshClient(ssh_config=cluster.ssh_config)) as hosts:
        # node01: prints its host's private file, then exits 7; node02: runs until stopped, with a child.
        (cluster.host_root("node01") / "who").write_text("node01\n")
        done = hosts.start(
            "node01",
            "job",
            ["sh", "-c", 'cat "$1"; echo "$X"; exit 7', "sh", str(cluster.remote_root / "who")],
            log_path=log,
            env={"X": "quoted $(x) ;|"},
            local_log=tmp_path / "agent-node01.log",
        )
        forever = hosts.start(
            "node02",
            "job",
            ["sh", "-c", "sleep 300 & echo started; wait"],
            log_path=log,
            local_log=tmp_path / "agent-node02.log",
        )
        st = _wait(hosts, done)
        assert (st.alive, st.exit_code, st.killed) == (False, 7, False)
        assert hosts.poll(forever).alive
        stopped = hosts.stop(forever, grace_s=2)
        # sh exits on SIGTERM without writing its exit file; the whole group (sleep too) is gone.
        assert not stopped.alive and stopped.killed
        # (zombies may linger where PID 1 does not reap orphans; they hold no resources)
        assert hosts.run("node02", f"ps -o stat= -g {forever.pgid} | grep -vc '^Z'", check=False).strip() == "0"
        hosts.join_streams(5)
        assert (tmp_path / "agent-node01.log").read_text() == "node01\nquoted $(x) ;|\n"
        assert (tmp_path / "agent-node02.log").read_text() == "started\n"
        # each host wrote its own log at the same path
        assert (cluster.host_root("node01") / "logs" / "job.log").read_text() == "node01\nquoted $(x) ;|\n"
        assert len(hosts.sessions) == 2  # one connection per host, reused for every command
