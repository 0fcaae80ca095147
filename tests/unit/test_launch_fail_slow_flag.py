"""`launch --hosts --fail-slow-ratio R`: the supervisor's fail-slow threshold, or 0 for off; kept on relaunch."""

from __future__ import annotations

import pytest

from trainctl.cli.launch import build_spec, request_from_argv
from trainctl.errors import InputError
from trainctl.ops.launch import run_control
from trainctl.ops.launch.run_control import record_launch, relaunch_argv

BASE = dict(
    local=False,
    hosts="node01,node02",
    hosts_local=1,
    nproc_per_node=1,
    run_dir=None,
    inject=[],
    max_restarts=0,
    hang_timeout=0,
    keep_hung=False,
    script_and_args=[],
)


@pytest.mark.parametrize("ratio, on, used", [(None, True, 1.5), (2.0, True, 2.0), (0.0, False, 1.5)])
def test_ratio_reaches_the_supervisor_spec(ratio, on, used) -> None:
    spec = build_spec(**BASE, fail_slow_ratio=ratio)
    assert (spec.fail_slow, spec.fail_slow_ratio) == (on, used)


def test_bad_ratio_and_local_are_refused_with_the_fix() -> None:
    with pytest.raises(InputError, match=r"--fail-slow-ratio 0.9: must be > 1 .* or 0 to turn fail-slow detection off"):
        build_spec(**BASE, fail_slow_ratio=0.9)
    with pytest.raises(InputError, match="--fail-slow-ratio applies to --hosts"):
        build_spec(**{**BASE, "local": True, "hosts": None}, fail_slow_ratio=2.0)


def test_cli_error_is_one_line(cli) -> None:
    r = cli("launch", "--hosts", "node01", "--fail-slow-ratio", "1")
    assert r.code == 1 and "--fail-slow-ratio 1.0: must be > 1" in r.stderr and "Traceback" not in r.stderr


def test_relaunch_keeps_the_ratio(tmp_path) -> None:
    run = tmp_path / "run"
    argv = ["--hosts", "node01,node02", "--run-dir", str(run), "--fail-slow-ratio", "0"]
    record_launch(run, request_from_argv(argv, cwd=tmp_path))
    new = relaunch_argv(run_control.launch_options(run), hosts=["node01"], spares=[], run_dir="/x", remote_run_dir="/r")
    assert new[new.index("--fail-slow-ratio") + 1] == "0.0"
