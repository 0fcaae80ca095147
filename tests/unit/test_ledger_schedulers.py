"""Scheduler adapters: exact argv, and execution against fake `scontrol`/`kubectl` on PATH.

There is no Slurm or Kubernetes cluster on the test machine, so the executables are fakes that
record their argv (tests/fixtures/ledger/fake_scheduler_cli.py): a true boundary."""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import pytest

from trainctl.errors import SchedulerError
from trainctl.ops.evict.schedulers import SchedulerKind, drain_commands, format_argv, resume_commands, run_commands

FAKE = Path(__file__).resolve().parents[1] / "fixtures" / "ledger" / "fake_scheduler_cli.py"


def install_fakes(bin_dir: Path, names=("scontrol", "kubectl")) -> None:
    bin_dir.mkdir(parents=True, exist_ok=True)
    for name in names:
        p = bin_dir / name
        p.write_text(f"#!{sys.executable}\n" + FAKE.read_text())
        p.chmod(0o755)


@pytest.fixture
def fake_path(tmp_path, monkeypatch):
    bin_dir = tmp_path / "bin"
    install_fakes(bin_dir)
    log = tmp_path / "argv.jsonl"
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_SCHED_LOG", str(log))
    return log


def recorded(log: Path) -> list[list[str]]:
    return [json.loads(l) for l in log.read_text().splitlines()] if log.exists() else []


@pytest.mark.parametrize(
    "kind, drain, resume",
    [
        (SchedulerKind.NONE, [], []),
        (
            SchedulerKind.SLURM,
            [("scontrol", "update", "NodeName=node02", "State=DRAIN", "Reason=trainctl: xid 79 gpu lost")],
            [("scontrol", "update", "NodeName=node02", "State=RESUME")],
        ),
        (
            SchedulerKind.K8S,
            [
                ("kubectl", "cordon", "--", "node02"),
                ("kubectl", "drain", "--ignore-daemonsets", "--delete-emptydir-data", "--", "node02"),
            ],
            [("kubectl", "uncordon", "--", "node02")],
        ),
    ],
)
def test_exact_argv(kind, drain, resume) -> None:
    assert drain_commands(kind, "node02", "xid 79\n gpu   lost") == drain
    assert resume_commands(kind, "node02") == resume


def test_format_argv_quotes_reason() -> None:
    argv = drain_commands(SchedulerKind.SLURM, "n1", "ecc dbe")[0]
    assert format_argv(argv) == "scontrol update NodeName=n1 State=DRAIN 'Reason=trainctl: ecc dbe'"


def test_run_k8s_in_order(fake_path) -> None:
    res = run_commands(drain_commands(SchedulerKind.K8S, "node02", "x"))
    assert [r.returncode for r in res] == [0, 0]
    assert recorded(fake_path) == [
        ["kubectl", "cordon", "--", "node02"],
        ["kubectl", "drain", "--ignore-daemonsets", "--delete-emptydir-data", "--", "node02"],
    ]


def test_failure_carries_stderr_and_stops(fake_path, monkeypatch) -> None:
    monkeypatch.setenv("FAKE_SCHED_RC", "1")
    monkeypatch.setenv("FAKE_SCHED_STDERR", 'Error from server (NotFound): nodes "node02" not found')
    with pytest.raises(SchedulerError) as ei:
        run_commands(drain_commands(SchedulerKind.K8S, "node02", "x"))
    assert str(ei.value) == (
        '`kubectl cordon -- node02` failed with exit 1: Error from server (NotFound): nodes "node02" not found'
    )
    assert recorded(fake_path) == [["kubectl", "cordon", "--", "node02"]]  # no drain after a failed cordon


def test_missing_executable(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    assert shutil.which("scontrol") is None
    with pytest.raises(
        SchedulerError, match=r"^scontrol not found on PATH, so `scontrol update NodeName=n1 State=RESUME` cannot run"
    ):
        run_commands(resume_commands(SchedulerKind.SLURM, "n1"))
