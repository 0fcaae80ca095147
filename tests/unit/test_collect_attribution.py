"""Which host a run dir path is about (collect takes it only from that host)."""

from __future__ import annotations

import pytest

from trainctl.collectors.rundir_sync import path_host


@pytest.mark.parametrize(
    "path, host",
    [
        ("timeline/host=node01/part-rank0-00000.parquet", "node01"),
        ("gpu_metrics/host=gpu%2Dbox/part-0.parquet", "gpu-box"),  # partition names are URL-quoted
        ("logs/node02/rank-3.log", "node02"),
        ("fr/node02/rank-3.pkl", "node02"),
        ("stacks/node05/rank-9.txt", "node05"),
        ("run.json", None),
        ("errors/rank-3.json", None),
        ("heartbeats/rank-3.json", None),
    ],
)
def test_path_host(path, host) -> None:
    assert path_host(path) == host


def test_ssh_target_without_any_config_file(tmp_path, monkeypatch) -> None:
    """No --ssh-config and no ~/.ssh/config: ssh -G (or paramiko) resolves the bare name."""
    from trainctl.collectors.ssh import SshClient

    monkeypatch.setenv("HOME", str(tmp_path))
    for use_ssh_G in (True, False):
        t = SshClient(use_ssh_G=use_ssh_G).target("node01")
        assert t.hostname == "node01" and t.port == 22
