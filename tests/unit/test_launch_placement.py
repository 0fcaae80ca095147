"""launch --local on a multi-GPU machine: each simulated host gets its own GPUs (issue 16 item 3).

The GPU count is the one fake here, at the true boundary (this machine has no GPU): the planning
that turns it into every agent's environment is the launcher's own code.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from trainctl.cli.launch import request_from_argv
from trainctl.errors import LaunchError
from trainctl.ops.launch.local import LaunchSpec, agent_envs
from trainctl.ops.launch.placement import backend_that_fits, gpu_placement, visible_gpus


def _spec(tmp_path: Path, *argv: str) -> LaunchSpec:
    req = request_from_argv(["--local", *argv], cwd=tmp_path).validate()
    return LaunchSpec.from_request(req, "r-1")


def test_two_simulated_hosts_of_four_ranks_on_eight_gpus(tmp_path) -> None:
    spec = _spec(tmp_path, "--hosts-local", "2", "--nproc-per-node", "4")
    envs = agent_envs(spec, tmp_path, {"PATH": "/usr/bin"}, device_count=8)
    assert {h: e["CUDA_VISIBLE_DEVICES"] for h, e in envs.items()} == {"node01": "0,1,2,3", "node02": "4,5,6,7"}
    # each rank sees cuda:LOCAL_RANK of its host's slice: 8 distinct physical GPUs for 8 ranks
    physical = [envs[h]["CUDA_VISIBLE_DEVICES"].split(",")[lr] for h in ("node01", "node02") for lr in range(4)]
    assert sorted(physical) == [str(i) for i in range(8)]
    assert envs["node02"]["TRAINCTL_HOST"] == "node02" and envs["node01"]["PATH"] == "/usr/bin"


def test_the_users_visible_devices_are_respected(tmp_path) -> None:
    spec = _spec(tmp_path, "--hosts-local", "2", "--nproc-per-node", "2")
    envs = agent_envs(spec, tmp_path, {"CUDA_VISIBLE_DEVICES": "7,5,3,1"}, device_count=8)
    assert [envs[h]["CUDA_VISIBLE_DEVICES"] for h in ("node01", "node02")] == ["7,5", "3,1"]


def test_too_few_gpus_is_a_clear_error_that_names_gloo(tmp_path) -> None:
    spec = _spec(tmp_path, "--hosts-local", "2", "--nproc-per-node", "4")
    with pytest.raises(LaunchError, match=r"needs 8 GPUs, this machine shows 4 .*--backend gloo"):
        agent_envs(spec, tmp_path, {}, device_count=4)
    gloo = _spec(tmp_path, "--hosts-local", "2", "--nproc-per-node", "4", "--backend", "gloo")
    envs = agent_envs(gloo, tmp_path, {}, device_count=4)
    assert all("CUDA_VISIBLE_DEVICES" not in e and e["TRAINCTL_BACKEND"] == "gloo" for e in envs.values())


def test_cpu_machines_get_no_placement(tmp_path) -> None:
    spec = _spec(tmp_path, "--hosts-local", "3", "--nproc-per-node", "2")
    assert all("CUDA_VISIBLE_DEVICES" not in e for e in agent_envs(spec, tmp_path, {}, device_count=0).values())


@pytest.mark.parametrize(
    "raw, want", [("", ()), ("0,1", ("0", "1")), ("2,-1,3", ("2",)), ("GPU-aa,GPU-bb", ("GPU-aa", "GPU-bb"))]
)
def test_visible_gpus_reads_cuda_visible_devices_as_cuda_does(raw, want) -> None:
    assert visible_gpus({"CUDA_VISIBLE_DEVICES": raw}, 8) == want
    assert gpu_placement(["n1"], 1, want) == ({"n1": want[0]} if want else {})


def test_bad_backend_is_one_line(cli) -> None:
    r = cli("launch", "--local", "--backend", "mpi")
    assert r.code == 1 and "--backend 'mpi': must be nccl or gloo" in r.stderr and "Traceback" not in r.stderr


def test_the_demo_runs_on_cpu_where_the_machine_has_fewer_gpus_than_ranks() -> None:
    assert backend_that_fits(4, ("0",)) == "gloo"  # one GPU, 4 ranks: NCCL would refuse
    assert backend_that_fits(4, ("0", "1", "2", "3")) is None  # NCCL, one GPU each
    assert backend_that_fits(4, ()) is None  # no GPU: launch's default is gloo already
