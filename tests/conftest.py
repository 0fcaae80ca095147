"""Shared fixtures. `cli` runs the real console-script entry point in-process."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass

import pytest

# The sshd_cluster fixture (real sshd test hosts on loopback) for every test that asks for it.
pytest_plugins = ["sshd"]


@dataclass(frozen=True)
class CliResult:
    code: int
    stdout: str
    stderr: str


def run_cli(*args: str, timeout: float = 300, env: dict | None = None, cwd: str | None = None) -> CliResult:
    """Run `trainctl ARGS` as a user would: a separate process, real stdout/stderr and exit code."""
    proc = subprocess.run(
        [sys.executable, "-c", "from trainctl.cli.app import main; main()", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        cwd=cwd,
    )
    return CliResult(proc.returncode, proc.stdout, proc.stderr)


@pytest.fixture
def cli():
    return run_cli
