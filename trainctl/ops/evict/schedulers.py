"""Scheduler adapters: tell Slurm or Kubernetes to stop placing work on a quarantined host.

Each adapter is a pure function from (host, reason) to the exact argv it would run, so
`--dry-run` can show precisely what would happen; `run_commands` is the one place that executes
them. Conventions (research/peers.md §5.5):

- Slurm: `scontrol update NodeName=H State=DRAIN Reason=...`. DRAIN stops new allocations only;
  running jobs continue. Slurm refuses a drain without a reason. Restore: `State=RESUME`.
- Kubernetes: `kubectl cordon -- H` (unschedulable), then `kubectl drain --ignore-daemonsets
  --delete-emptydir-data -- H` (evicts pods, honouring PodDisruptionBudgets). Restore: `kubectl uncordon -- H`. The `--` ends kubectl's options (cobra/pflag), so a host
  name can never be read as a flag, whatever passed validation.
"""

from __future__ import annotations

import logging
import shlex
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum

from trainctl.errors import SchedulerError

__all__ = [
    "SchedulerKind",
    "CommandResult",
    "drain_commands",
    "resume_commands",
    "run_commands",
    "format_argv",
]

logger = logging.getLogger(__name__)

# Prefix so `sinfo -R` shows who drained the node (the admin convention of tagged reasons).
REASON_PREFIX = "trainctl: "


class SchedulerKind(str, Enum):
    NONE = "none"
    SLURM = "slurm"
    K8S = "k8s"


@dataclass(frozen=True)
class CommandResult:
    argv: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str
    duration_s: float


def _slurm_reason(reason: str) -> str:
    # One line: scontrol stores the reason verbatim and sinfo prints one line per node.
    return REASON_PREFIX + " ".join(reason.split())


def drain_commands(kind: SchedulerKind, host: str, reason: str) -> list[tuple[str, ...]]:
    """The argv list that keeps new work off `host` (empty for `none`)."""
    kind = SchedulerKind(kind)
    if kind is SchedulerKind.SLURM:
        return [("scontrol", "update", f"NodeName={host}", "State=DRAIN", f"Reason={_slurm_reason(reason)}")]
    if kind is SchedulerKind.K8S:
        return [
            ("kubectl", "cordon", "--", host),
            ("kubectl", "drain", "--ignore-daemonsets", "--delete-emptydir-data", "--", host),
        ]
    return []


def resume_commands(kind: SchedulerKind, host: str) -> list[tuple[str, ...]]:
    """The argv list that returns `host` to service (empty for `none`)."""
    kind = SchedulerKind(kind)
    if kind is SchedulerKind.SLURM:
        return [("scontrol", "update", f"NodeName={host}", "State=RESUME")]
    if kind is SchedulerKind.K8S:
        return [("kubectl", "uncordon", "--", host)]
    return []


def format_argv(argv: Sequence[str]) -> str:
    """How a person would type it (shell quoting), for --dry-run and error messages."""
    return shlex.join(argv)


def run_commands(commands: Sequence[Sequence[str]], *, timeout_s: float = 600.0) -> list[CommandResult]:
    """Run each argv in order (no shell), stopping at the first failure with SchedulerError.

    Order matters for Kubernetes: a drain after a failed cordon could let pods reschedule back.
    """
    import time

    results: list[CommandResult] = []
    for argv in commands:
        argv = tuple(argv)
        if shutil.which(argv[0]) is None:
            raise SchedulerError(
                f"{argv[0]} not found on PATH, so `{format_argv(argv)}` cannot run; run trainctl where the "
                f"scheduler's client is installed, or pass --scheduler none (ledger only)"
            )
        t0 = time.monotonic()
        try:
            proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s, check=False)
        except subprocess.TimeoutExpired as exc:
            raise SchedulerError(
                f"`{format_argv(argv)}` did not finish within {timeout_s:.0f}s; check the scheduler"
            ) from exc
        except OSError as exc:
            raise SchedulerError(f"`{format_argv(argv)}` could not start ({exc.strerror})") from exc
        res = CommandResult(argv, proc.returncode, proc.stdout, proc.stderr, time.monotonic() - t0)
        logger.info("scheduler cmd=%r rc=%d duration_s=%.2f", format_argv(argv), res.returncode, res.duration_s)
        if res.returncode != 0:
            stderr = " ".join(res.stderr.split()) or "(no stderr)"
            raise SchedulerError(f"`{format_argv(argv)}` failed with exit {res.returncode}: {stderr}")
        results.append(res)
    return results
