"""Shared fixtures. `cli` runs the real console-script entry point in-process."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass

import pytest

# The sshd_cluster fixture (real sshd test hosts on loopback) for every test that asks for it.
pytest_plugins = ["sshd"]


@pytest.fixture(autouse=True, scope="session")
def _no_user_config():
    """A developer's ~/.config/trainctl/config.toml (or TRAINCTL_* defaults) must not change what the
    tests see: point every trainctl, in-process or child, at an empty config directory."""
    saved = {k: os.environ.get(k) for k in ("XDG_CONFIG_HOME", "TRAINCTL_CONFIG")}
    with tempfile.TemporaryDirectory(prefix="trainctl-noconfig-") as d:
        os.environ["XDG_CONFIG_HOME"] = d
        os.environ.pop("TRAINCTL_CONFIG", None)
        yield
    for k, v in saved.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


@dataclass(frozen=True)
class CliResult:
    code: int
    stdout: str
    stderr: str

    def error_line(self, code: int = 1) -> str:
        """The one line a refusal prints on stderr (exit `code`: 1 an error, 2 a usage error), with no traceback."""
        assert self.code == code, self
        assert "Traceback" not in self.stderr
        lines = [line for line in self.stderr.splitlines() if line.strip()]
        assert len(lines) == 1, self.stderr
        return lines[0]


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


@pytest.fixture(scope="session")  # stateless: module-scoped fixtures (one launched run per module) use it too
def cli():
    return run_cli
