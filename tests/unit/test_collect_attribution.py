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
