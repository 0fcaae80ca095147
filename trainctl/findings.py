"""The Finding record every analyzer returns, and its JSON form (DESIGN.md, "Findings JSON").

Analyzers return `list[Finding]`, never dicts. The CLI renders them as a table or, with `--json`,
as `Report.to_json()`, which automation and playbooks depend on: keep `schema_version` in step with
any change to the JSON shape.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

__all__ = [
    "FINDINGS_SCHEMA_VERSION",
    "Severity",
    "FindingKind",
    "Category",
    "Finding",
    "Report",
    "PLAYBOOK_FOR_KIND",
    "sort_findings",
]

FINDINGS_SCHEMA_VERSION = 1


class Severity(str, Enum):
    INFO = "info"
    WARNING = "warning"
    CRITICAL = "critical"

    @property
    def rank(self) -> int:
        """Orders severities: info < warning < critical (for sorting and --fail-on)."""
        return {"info": 0, "warning": 1, "critical": 2}[self.value]


class FindingKind(str, Enum):
    STRAGGLER = "straggler"
    HUNG_COLLECTIVE = "hung_collective"
    COLLECTIVE_MISMATCH = "collective_mismatch"
    FAULTY_HOST = "faulty_host"
    CRASH = "crash"
    NETWORK_ERROR = "network_error"
    NUMERICAL = "numerical"
    OOM = "oom"
    RENDEZVOUS_ERROR = "rendezvous_error"
    MISSING_DATA = "missing_data"


class Category(str, Enum):
    """Refines a FindingKind (DESIGN.md's catalog); the comment names the kinds it goes with."""

    # straggler
    COMPUTE = "compute"
    DATA = "data"
    COMMUNICATION = "communication"
    # hung_collective / collective_mismatch
    COLLECTIVE_TIMEOUT = "collective_timeout"
    TYPE_MISMATCH = "type_mismatch"
    SIZE_MISMATCH = "size_mismatch"
    # faulty_host
    XID = "xid"
    ECC = "ecc"
    GPU_LOST = "gpu_lost"
    NVLINK = "nvlink"
    PCIE_DOWNGRADE = "pcie_downgrade"
    THERMAL = "thermal"
    POWER = "power"
    METRIC_OUTLIER = "metric_outlier"
    UNREACHABLE = "unreachable"
    MCE = "mce"  # a machine check: the host's CPU or memory reported a hardware error
    # the host's kernel reported a fault of its own: an IOMMU that blocked a device's DMA (AMD-Vi,
    # DMAR), a CPU soft lockup, a task stuck in the kernel (hung_task)
    HOST_KERNEL = "host_kernel"
    # crash
    CUDA_ERROR = "cuda_error"
    SIGNAL = "signal"
    EXIT_CODE = "exit_code"
    EXCEPTION = "exception"  # an exception in the training code (torchelastic error file or traceback)
    UNCLASSIFIED = "unclassified"  # an error-looking log line no signature knows: quoted, never silence
    # network_error
    NCCL = "nccl"
    GLOO = "gloo"
    SOCKET = "socket"
    IB = "ib"  # also faulty_host: the host's own IB/RoCE ports (host_metrics counters)
    # numerical
    NAN_LOSS = "nan_loss"
    OVERFLOW = "overflow"


# The built-in playbook (playbooks/<name>.yaml) an SRE should follow for each kind of finding.
PLAYBOOK_FOR_KIND: Mapping[FindingKind, str] = {
    FindingKind.STRAGGLER: "straggler",
    FindingKind.HUNG_COLLECTIVE: "hung-collective",
    FindingKind.COLLECTIVE_MISMATCH: "hung-collective",
    FindingKind.FAULTY_HOST: "faulty-host",
    FindingKind.CRASH: "crash-loop",
    FindingKind.NETWORK_ERROR: "network-error",
    FindingKind.NUMERICAL: "nan-loss",
    FindingKind.OOM: "oom",
    FindingKind.RENDEZVOUS_ERROR: "network-error",
    FindingKind.MISSING_DATA: "missing-data",
}


@dataclass(frozen=True)
class Finding:
    """One diagnosis: who (hosts/ranks), what (kind/category), how sure, and the evidence.

    `ranks`/`hosts` name the culprits (for a hang: the ranks that never arrived, not the ones
    waiting). `confidence` is in [0, 1]. `evidence` holds JSON-serializable values a person can
    check (numbers, step ranges, file:line, log lines); treat it as read-only.
    """

    kind: FindingKind
    severity: Severity
    summary: str
    category: Category | None = None
    hosts: tuple[str, ...] = ()
    ranks: tuple[int, ...] = ()
    confidence: float = 1.0
    evidence: Mapping[str, Any] = field(default_factory=dict)
    playbook: str | None = None

    def __post_init__(self) -> None:
        if not 0.0 <= self.confidence <= 1.0:
            raise ValueError(f"confidence must be in [0, 1], got {self.confidence}")
        if self.playbook is None:
            object.__setattr__(self, "playbook", PLAYBOOK_FOR_KIND.get(self.kind))

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind.value,
            "severity": self.severity.value,
            "category": self.category.value if self.category else None,
            "hosts": list(self.hosts),
            "ranks": [int(r) for r in self.ranks],
            "confidence": round(float(self.confidence), 3),
            "summary": self.summary,
            "evidence": _jsonable(self.evidence),
            "playbook": self.playbook,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Finding:
        return cls(
            kind=FindingKind(d["kind"]),
            severity=Severity(d["severity"]),
            summary=d["summary"],
            category=Category(d["category"]) if d.get("category") else None,
            hosts=tuple(d.get("hosts", ())),
            ranks=tuple(int(r) for r in d.get("ranks", ())),
            confidence=float(d.get("confidence", 1.0)),
            evidence=dict(d.get("evidence", {})),
            playbook=d.get("playbook"),
        )


# At equal severity, what explains an incident comes before what it causes or what merely costs
# time: a crash, a hang or a faulty host outranks a straggler (issue 13).
KIND_ORDER: Mapping[FindingKind, int] = {
    FindingKind.FAULTY_HOST: 0,
    FindingKind.CRASH: 0,
    FindingKind.HUNG_COLLECTIVE: 0,
    FindingKind.COLLECTIVE_MISMATCH: 0,
    FindingKind.NUMERICAL: 1,
    FindingKind.OOM: 1,
    FindingKind.NETWORK_ERROR: 2,
    FindingKind.RENDEZVOUS_ERROR: 2,
    FindingKind.STRAGGLER: 3,
    FindingKind.MISSING_DATA: 4,
}


def _follows(f: Finding) -> bool:
    # The log analyzer orders each incident's findings by time and marks the first failure
    # (evidence first_failure); the others are what it led to (a torchelastic banner quoting the
    # exception, the agent's SIGTERM to the survivors). Those must not be printed above it: KIND_ORDER
    # alone put "exited with exit code 1" over the NCCL error that caused it.
    return f.evidence.get("first_failure") is False


def sort_findings(findings: Iterable[Finding]) -> list[Finding]:
    """Most severe first; at equal severity an incident's first failure before what followed it
    (the log analyzer's order), root causes before stragglers (KIND_ORDER), then most confident,
    then by kind for a stable order."""
    return sorted(
        findings,
        key=lambda f: (
            -f.severity.rank,
            _follows(f),
            KIND_ORDER.get(f.kind, 5),
            -f.confidence,
            f.kind.value,
            f.ranks,
            f.hosts,
        ),
    )


@dataclass(frozen=True)
class Report:
    """What `trainctl diagnose` produces for one input."""

    run_id: str | None
    findings: tuple[Finding, ...]
    source: str = ""
    source_kind: str = ""
    # Why an analysis gave no verdict where one might be expected (e.g. a run too short for the
    # straggler windows). Additive in the JSON ("notes", a list of strings).
    notes: tuple[str, ...] = ()
    # Inputs that could not be read or analysed, one line each (file or analyzer, what, the fix):
    # the verdict covers the rest. Additive in the JSON ("skipped").
    skipped: tuple[str, ...] = ()
    # What the run achieved (analyzers/throughput.py: step time, tokens/s, MFU); {} when the input
    # has no timeline long enough. Additive in the JSON ("summary").
    summary: Mapping[str, Any] = field(default_factory=dict)

    def max_severity(self) -> Severity | None:
        return max((f.severity for f in self.findings), key=lambda s: s.rank, default=None)

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema_version": FINDINGS_SCHEMA_VERSION,
            "run_id": self.run_id,
            "source": self.source,
            "source_kind": self.source_kind,
            "findings": [f.to_dict() for f in sort_findings(self.findings)],
            "notes": list(self.notes),
            "skipped": list(self.skipped),
            "summary": _jsonable(dict(self.summary)),
        }

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent)

    @classmethod
    def from_json(cls, text: str) -> Report:
        d = json.loads(text)
        if d.get("schema_version") != FINDINGS_SCHEMA_VERSION:
            raise ValueError(f"findings schema_version {d.get('schema_version')!r}, expected {FINDINGS_SCHEMA_VERSION}")
        return cls(
            run_id=d.get("run_id"),
            findings=tuple(Finding.from_dict(f) for f in d["findings"]),
            source=d.get("source", ""),
            source_kind=d.get("source_kind", ""),
            notes=tuple(str(n) for n in d.get("notes", ())),
            skipped=tuple(str(n) for n in d.get("skipped", ())),
            summary=dict(d.get("summary") or {}),
        )


def _jsonable(value: Any) -> Any:
    """Evidence often carries numpy scalars and tuples; make it plain JSON."""
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [_jsonable(v) for v in value]
    if hasattr(value, "item") and callable(value.item):  # numpy scalar
        return value.item()
    if isinstance(value, float) and value != value:  # NaN is not JSON
        return None
    return value
