"""analyzers/coverage: collection_status rows -> missing_data / faulty_host findings."""

from __future__ import annotations

import pyarrow as pa

from trainctl.analyzers.coverage import coverage_findings


def _status(rows):
    return pa.Table.from_pylist([dict(zip(("host", "kind", "ok", "error_type", "error"), r)) for r in rows])


def test_unreachable_host_is_missing_data_and_a_faulty_host_signal() -> None:
    t = _status(
        [
            ("n1", "timeline", True, None, None),
            ("n1", "pyspy", False, "not_installed", "n1: no py-spy"),
            ("n2", "timeline", False, "unreachable", "n2: refused"),
            ("n2", "pyspy", False, "unreachable", "n2: refused"),
            ("n3", "timeline", False, "auth_refused", "n3: keys"),
            ("n3", "pyspy", False, "auth_refused", "n3: keys"),
            ("n4", "timeline", False, "no_run_dir", "n4: no dir"),
            ("n4", "fr_dumps", False, "no_run_dir", "n4: no dir"),
            ("n4", "kernel_log", True, None, None),
            ("n4", "pyspy", False, "not_installed", "n4: no py-spy"),
        ]
    )
    got = [
        (f.kind.value, f.severity.value, f.category.value if f.category else None, f.hosts, f.confidence)
        for f in coverage_findings(t)
    ]
    assert got == [
        ("missing_data", "warning", None, ("n2",), 1.0),
        ("faulty_host", "warning", "unreachable", ("n2",), 0.6),
        ("missing_data", "warning", None, ("n3",), 1.0),
        ("missing_data", "warning", None, ("n4",), 1.0),
        ("missing_data", "info", None, ("n1", "n4"), 1.0),
    ]
    n4 = coverage_findings(t)[3]
    assert n4.evidence["kinds"] == ["fr_dumps", "timeline"] and n4.evidence["error_type"] == "no_run_dir"


def test_complete_collection_gives_no_findings() -> None:
    assert coverage_findings(_status([("n1", "timeline", True, None, None)])) == []


def test_a_host_that_refused_our_key_is_not_called_unreachable() -> None:
    # A host that answers SSH but refuses the key (or has a changed host key) is a config problem on
    # our side: missing data, not a faulty host ("auth_refused ... refused every key" once matched
    # the analyzer's "refused" pattern). A host that never answered still is one. Checked through
    # every analyzer, since coverage decides this and consolidate merges it per host.
    from trainctl.analyzers import run_analyzers
    from trainctl.schemas import SignalKind
    from trainctl.signals import Signals

    t = _status(
        [
            ("n2", "timeline", False, "unreachable", "n2: cannot connect ([Errno 111] Connection refused)"),
            ("n3", "timeline", False, "auth_refused", "n3: root@127.0.0.3:22 refused every key"),
            ("n5", "timeline", False, "host_key", "n5: host key CHANGED"),
            ("n6", "timeline", False, "timeout", "n6: no SSH banner within 2 s (timed out)"),
        ]
    )
    findings = run_analyzers(Signals(None, {SignalKind.COLLECTION_STATUS: t}))
    got = sorted((f.hosts, f.category.value) for f in findings if f.kind.value == "faulty_host")
    assert got == [(("n2",), "unreachable"), (("n6",), "unreachable")]
