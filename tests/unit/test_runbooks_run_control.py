"""run_control: the launch argv round-trips through launch's own parser; the relaunch keeps options, drops drills."""

from __future__ import annotations

from trainctl.cli.launch import request_from_argv
from trainctl.ops.launch import run_control
from trainctl.ops.launch.run_control import LaunchOptions, record_launch, relaunch_argv


def test_relaunch_argv_keeps_options_and_drops_drills(tmp_path) -> None:
    argv = [
        "--hosts",
        "node01,node02,node03",
        "--spares",
        "node04",
        "--nproc-per-node",
        "1",
        "--ssh-config",
        "cfg",
        "--run-dir",
        "run",
        "--remote-run-dir",
        "/r/run",
        "--env",
        "GLOO_SOCKET_IFNAME=lo",
        "--steps",
        "10",
        "--checkpoint-every",
        "2",
        "--checkpoint-dir",
        "/shared/ck",
        "--hang-timeout",
        "0",
        "--inject",
        "hang:rank=1,step=5",
        "--",
        "--log-every",
        "1",
        "--tp",
        "1",
    ]
    record_launch(tmp_path, request_from_argv(argv, cwd="/home/u"))
    lo = run_control.launch_options(tmp_path)
    assert lo.hosts == ["node01", "node02", "node03"] and lo.spares == ["node04"]
    assert lo.ssh_config == "/home/u/cfg" and lo.remote_run_dir == "/r/run"
    new = relaunch_argv(
        lo,
        hosts=["node01", "node04", "node03"],
        spares=[],
        run_dir="/x/run-relaunch1",
        remote_run_dir="/r/run-relaunch1",
    )
    assert new == [
        "launch",
        "--hosts",
        "node01,node04,node03",
        "--run-dir",
        "/x/run-relaunch1",
        "--remote-run-dir",
        "/r/run-relaunch1",
        "--nproc-per-node",
        "1",
        "--max-restarts",
        "0",
        "--hang-timeout",
        "0.0",
        "--checkpoint-every",
        "2",
        "--checkpoint-dir",
        "/shared/ck",
        "--steps",
        "10",
        "--ssh-config",
        "/home/u/cfg",
        "--env",
        "GLOO_SOCKET_IFNAME=lo",
        "--",
        "--log-every",
        "1",
        "--tp",
        "1",
    ]
    assert "--inject" not in new


def test_no_launch_record_and_no_supervisor_says_so(tmp_path) -> None:
    import pytest

    from trainctl.errors import InputError

    with pytest.raises(InputError, match="no launch.json and no live `trainctl launch --hosts` supervisor"):
        run_control.launch_options(tmp_path)
    assert isinstance(LaunchOptions({}, "/", "x").params, dict)
