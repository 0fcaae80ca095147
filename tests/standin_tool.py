"""What the stand-in cluster tools share (tests/kube_pods.py's kubectl; srun is real: tests/slurm_cluster.py).

Each is a Python script on a private bin dir that logs its argv (the tests check the argv trainctl
sends, not just the result) and runs the commands it is given for real, each target in its own
mount namespace where the target's private folder appears at `remote_root`.
"""

from __future__ import annotations

import json
import os
import stat
import sys
from dataclasses import dataclass
from pathlib import Path


@dataclass
class StandInTool:
    base: Path
    remote_root: Path

    @property
    def bin_dir(self) -> Path:
        return self.base / "bin"

    def argv_log(self) -> list[list[str]]:
        path = self.base / "argv.log"
        return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []

    def env(self, **extra: str) -> dict[str, str]:
        return {**os.environ, "PATH": f"{self.bin_dir}{os.pathsep}{os.environ.get('PATH', '')}", **extra}

    def install(self, name: str, script: str) -> None:
        """Write `script` (a str.format template of {python}, {state}, {remote}) as bin_dir/name."""
        self.remote_root.mkdir(parents=True, exist_ok=True)
        self.bin_dir.mkdir(exist_ok=True)
        exe = self.bin_dir / name
        exe.write_text(script.format(python=sys.executable, state=str(self.base), remote=str(self.remote_root)))
        exe.chmod(exe.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
