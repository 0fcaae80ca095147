"""The collective self-test with torchrun on 4 real sshd test hosts: a slowed host is named, a clean set names nobody."""

from __future__ import annotations

import json

import pytest

from trainctl.ops.playbook.executor import RunOptions, run_playbook
from trainctl.ops.playbook.probe_remote import run_remote_probe
from trainctl.ops.playbook.validation import parse_playbook

pytestmark = [pytest.mark.slow, pytest.mark.sshd]
HOSTS = ["node01", "node02", "node03", "node04"]
ENV = {"GLOO_SOCKET_IFNAME": "lo"}


@pytest.mark.timeout(300)
def test_probe_over_ssh_names_the_slow_host_and_no_one_when_clean(sshd_cluster, tmp_path):
    cluster = sshd_cluster(4)
    work = str(cluster.remote_root / "probe")  # the same path names each host's own files
    v = run_remote_probe(
        HOSTS,
        workdir=work,
        ssh_config=str(cluster.ssh_config),
        slow_host="node03",
        slow_delay_s=0.2,
        iters=5,
        env=ENV,
        timeout_s=200,
    )
    assert v.hosts == tuple(HOSTS) and v.failing_hosts == ()
    assert v.slow_hosts == ("node03",), v.to_dict()
    # every host ran its own torchrun agent: each log is on its own host only
    assert all((cluster.host_root(h) / "probe" / f"{h}.log").is_file() for h in HOSTS)
    assert not (cluster.host_root("node02") / "probe" / "node01.log").exists()
    clean = run_remote_probe(HOSTS, workdir=work, ssh_config=str(cluster.ssh_config), iters=5, env=ENV, timeout_s=200)
    assert clean.slow_hosts == () and clean.failing_hosts == (), clean.to_dict()


@pytest.mark.timeout(200)
def test_runbook_probe_step_with_local_false(sshd_cluster, tmp_path):
    cluster = sshd_cluster(4)
    book = parse_playbook(
        f"""
name: probe-ssh
description: probe real hosts
steps:
  - id: probe
    type: probe
    with:
      local: false
      hosts: {json.dumps(HOSTS)}
      ssh_config: {cluster.ssh_config}
      workdir: {cluster.remote_root / "probe"}
      slow_host: node02
      env: {{GLOO_SOCKET_IFNAME: lo}}
""",
        "probe-ssh.yaml",
    )
    run = tmp_path / "run"
    run.mkdir()
    res = run_playbook(book, run, RunOptions(yes=True, incident_id="inc-probe"))
    assert res.completed, [r.to_dict() for r in res.records]
    rec = res.records[0]
    assert rec.status.value == "ok" and rec.outputs["slow_hosts"] == ["node02"]
    audit = [json.loads(x) for x in (run / "incidents" / "inc-probe" / "audit.jsonl").read_text().splitlines()]
    assert audit[1]["step"] == "probe" and audit[1]["outputs"]["slow_hosts"] == ["node02"]
