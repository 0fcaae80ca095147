"""Findings from the readings of absence (collectors/log_progress.py): a log with no error line whose
progress stopped. Pure: log_events rows in, findings out.

Low confidence always (runbooks act only at high): the reading rests on what is missing from an
excerpt that may simply be cut. The suspects (ranks that fell behind a per-rank lockstep message)
are named with the last line each rank printed; no reading blames a rank it did not see print.
docs/log-signatures.md "Progress stopped (reading absence)".
"""

from __future__ import annotations

import json
from typing import Any

import pyarrow as pa

from trainctl.findings import Finding, FindingKind, Severity

PROGRESS_CONFIDENCE = 0.3  # below every reading of a line that says what failed


def progress_findings(table: pa.Table) -> list[Finding]:
    """One low-confidence finding per progress reading in the table (at most one per log): hung_collective,
    or rendezvous_error for a run that stopped while joining its process group."""
    if "fields" not in table.column_names:
        return []
    out: list[Finding] = []
    for row in table.to_pylist():
        fields: dict[str, Any] = json.loads(row["fields"]) if row.get("fields") else {}
        if not fields.pop("progress_reading", False):
            continue
        suspects = tuple(int(r) for r in fields.pop("suspect_ranks", ()))
        fields.pop("generic", None)
        evidence = {
            "lines": [f"{row['source']}:{row['line_no']}: {row['message']}"],
            "signatures": [row["signature"]],
            "read_from_absence": True,
            **({"reporting_hosts": [row["host"]]} if row.get("host") else {}),
            **fields,
        }
        out.append(
            Finding(
                kind=FindingKind(row["kind"]) if row.get("kind") else FindingKind.HUNG_COLLECTIVE,
                severity=Severity.WARNING,
                summary=row["message"][:240],
                ranks=suspects,
                confidence=PROGRESS_CONFIDENCE,
                evidence=evidence,
            )
        )
    return out
