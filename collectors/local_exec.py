"""Commands on this machine, through the interface collect uses of an SSH session.

What a Slurm task runs when `trainctl collect --srun` has every node collect itself
(trainctl.ops.collect.in_allocation): the same manifest, fetch and py-spy commands as over SSH or
`kubectl exec`, run with `sh -c` here, so a node's own collect is the direct path's, no SSH in it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from trainctl.collectors.process_session import ProcessSession

__all__ = ["LocalClient", "LocalSession"]


class LocalSession(ProcessSession):
    """One command per `sh -c` process on this machine (stdout read with the command's deadline)."""

    def _popen(self, command: str) -> subprocess.Popen:
        # The tools of this interpreter's environment first: py-spy comes with trainctl's runtime
        # extra into the same venv, which a batch job's PATH often lacks.
        env = {**os.environ, "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])}
        return subprocess.Popen(
            ["sh", "-c", command], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env
        )


class LocalClient:
    """`connect(name)`: a session on this machine, whatever the name (the one host it collects)."""

    def connect(self, name: str) -> LocalSession:
        return LocalSession(name)
