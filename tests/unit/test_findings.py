from __future__ import annotations

import json

import numpy as np
import pytest

from trainctl.findings import Category, Finding, FindingKind, Report, Severity, sort_findings


def test_json_matches_design_shape() -> None:
    f = Finding(
        FindingKind.STRAGGLER,
        Severity.WARNING,
        "rank 5 on node03 is slow",
        Category.COMPUTE,
        hosts=("node03",),
        ranks=(5,),
        confidence=0.93,
        evidence={"slowdown": np.float64(1.48), "phase": "forward", "steps": (120, 400)},
    )
    d = json.loads(Report("r-1", (f,)).to_json())
    assert d["schema_version"] == 1 and d["run_id"] == "r-1"
    assert d["findings"][0] == {
        "kind": "straggler",
        "severity": "warning",
        "category": "compute",
        "hosts": ["node03"],
        "ranks": [5],
        "confidence": 0.93,
        "summary": "rank 5 on node03 is slow",
        "evidence": {"slowdown": 1.48, "phase": "forward", "steps": [120, 400]},
        "playbook": "straggler",
    }
    assert Report.from_json(Report("r-1", (f,)).to_json()).findings[0].ranks == (5,)


def test_sorted_by_severity_then_confidence() -> None:
    a = Finding(FindingKind.STRAGGLER, Severity.WARNING, "a", confidence=0.9)
    b = Finding(FindingKind.FAULTY_HOST, Severity.CRITICAL, "b", confidence=0.5)
    c = Finding(FindingKind.OOM, Severity.WARNING, "c", confidence=0.95)
    assert [f.summary for f in sort_findings([a, b, c])] == ["b", "c", "a"]
    assert Report(None, (a, b)).max_severity() is Severity.CRITICAL


def test_confidence_out_of_range_is_a_bug() -> None:
    with pytest.raises(ValueError):
        Finding(FindingKind.OOM, Severity.INFO, "x", confidence=1.5)
