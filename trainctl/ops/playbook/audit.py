"""The incident audit log: RUN/incidents/<incident>/audit.jsonl, one JSON record per line.

Records: `start` (or `resume`) with the playbook, run, inputs and --yes; one `step` record per step
(StepRecord: inputs after templating, outputs, decision, command, exit code, error, timestamps,
duration); `end` with whether the playbook completed. Every record has been through the run's
Redactor before it gets here. This module is the one writer and reader of the file, so its
crash-safety is made in one place.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any

from trainctl.jsonl import append_record, read_records

__all__ = ["AUDIT_FILE", "StepStatus", "StepRecord", "AuditLog", "read_audit", "plain"]

logger = logging.getLogger(__name__)

AUDIT_FILE = "audit.jsonl"


class StepStatus(str, Enum):
    OK = "ok"
    FAILED = "failed"
    SKIPPED = "skipped"
    REFUSED = "refused"
    PLANNED = "planned"  # --dry-run: would run
    ESCALATED = "escalated"  # below the confidence gate: handed to a person with the evidence, not acted on


def plain(value: Any) -> Any:
    """JSON-safe copy (paths, enums and tuples become strings and lists)."""
    return json.loads(json.dumps(value, default=str))


@dataclass(frozen=True)
class StepRecord:
    """One audit line: what a step was given, what it did and why."""

    step: str
    type: str
    destructive: bool
    status: StepStatus
    decision: str
    inputs: Mapping[str, Any] = field(default_factory=dict)
    outputs: Mapping[str, Any] = field(default_factory=dict)
    command: tuple[str, ...] = ()
    exit_code: int | None = None
    error: str | None = None
    started_ts: str = ""
    ended_ts: str = ""
    duration_s: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "event": "step",
            "step": self.step,
            "type": self.type,
            "destructive": self.destructive,
            "status": self.status.value,
            "decision": self.decision,
            "inputs": plain(self.inputs),
            "outputs": plain(self.outputs),
            "command": list(self.command),
            "exit_code": self.exit_code,
            "error": self.error,
            "started_ts": self.started_ts,
            "ended_ts": self.ended_ts,
            "duration_s": round(self.duration_s, 3),
        }


class AuditLog:
    """Appends records to one incident's audit.jsonl."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)

    def append(self, doc: Mapping[str, Any]) -> None:
        # One write per record, fsynced; a record torn by a kill -9 is set aside before the next
        # append, so nothing later is glued onto it (trainctl.jsonl).
        append_record(self.path, plain(doc))


def read_audit(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """Every record; a torn last one is skipped, a glued one recovered, with a warning (trainctl.jsonl)."""
    return [r for r in read_records(path) if isinstance(r, dict)]
