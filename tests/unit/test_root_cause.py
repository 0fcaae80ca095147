"""The root cause first, its consequences folded into it (analyzers/root_cause.py), on hand-built findings."""

from __future__ import annotations

from datetime import UTC, datetime

import pyarrow as pa

from trainctl.analyzers import run_analysis
from trainctl.analyzers.root_cause import findings_from_run_events, rank_root_cause
from trainctl.findings import Category, Finding, FindingKind, Report, Severity, sort_findings
from trainctl.rundir import HostRanks, RunInfo
from trainctl.schemas import SignalKind
from trainctl.signals import Signals

R2H = {0: "node01", 1: "node01", 2: "node02", 3: "node02"}


def _exc(rank: int, ts_ns: int | None, message: str = "RuntimeError: boom", kind=None, category=None) -> dict:
    """A run_events exception row; kind/category as the reader's log signatures give them (null:
    no signature knew the message)."""
    ts = None if ts_ns is None else datetime.fromtimestamp(ts_ns / 1e9, tz=UTC)
    return {"rank": rank, "host": None, "event": "exception", "message": message, "detail": "tb", "ts": ts,
            "source": f"errors/rank-{rank}.json", "step": None, "kind": kind, "category": category}  # fmt: skip


def _f(kind: FindingKind, severity=Severity.CRITICAL, *, ranks=(), hosts=(), category=None, **ev) -> Finding:
    return Finding(kind, severity, f"{kind.value} {ranks} {hosts}", category, tuple(hosts), tuple(ranks), 0.8, ev)


def test_the_first_error_file_names_the_culprit_not_the_peer_that_lost_its_connection() -> None:
    # rank 1 wrote its error file first; rank 2 (its connection closed) a second later; rank 3 gave no time
    rows = [_exc(2, 2_000_000_000, "RuntimeError: Connection closed by peer"), _exc(1, 1_000_000_000), _exc(3, None)]
    (crash,) = findings_from_run_events(rows, R2H)
    assert (crash.kind, crash.category, crash.ranks, crash.hosts) == (
        FindingKind.CRASH,
        Category.EXCEPTION,
        (1,),
        ("node01",),
    )
    later = crash.evidence["later_failures"]
    assert [x["rank"] for x in later] == [2, 3] and later[0]["after_s"] == 1.0 and later[1]["after_s"] is None


def test_consequences_are_folded_into_the_crash_and_nothing_is_lost() -> None:
    (root,) = findings_from_run_events([_exc(1, 10), _exc(2, 20)], R2H)
    peers = [
        _f(FindingKind.NETWORK_ERROR, category=Category.GLOO),
        _f(FindingKind.CRASH, hosts=("node02",), category=Category.EXIT_CODE),
        _f(FindingKind.RENDEZVOUS_ERROR),
        _f(FindingKind.HUNG_COLLECTIVE, ranks=(1,), hosts=("node01",)),
    ]
    slow_elsewhere = _f(FindingKind.STRAGGLER, ranks=(3,), hosts=("node02",), category=Category.COMPUTE)
    slow_culprit = _f(FindingKind.STRAGGLER, Severity.WARNING, ranks=(1,), hosts=("node01",))
    out = rank_root_cause([root, *peers, slow_elsewhere, slow_culprit])
    assert [f.kind for f in out] == [FindingKind.CRASH, FindingKind.STRAGGLER]
    assert out[1].severity is Severity.WARNING and out[1].ranks == (3,)  # capped: a crash outranks it
    folded = out[0].evidence["followed_by"]
    assert out[0].evidence["followed_by_total"] == 5 == len(folded)
    assert {x["kind"] for x in folded} == {"network_error", "crash", "rendezvous_error", "hung_collective", "straggler"}


def test_a_follow_on_hang_in_any_group_is_not_a_second_root() -> None:
    first = _f(FindingKind.HUNG_COLLECTIVE, ranks=(3,), hosts=("node02",))
    torn_down = [_f(FindingKind.CRASH, hosts=(h,), category=Category.SIGNAL) for h in ("node01", "node02")]
    out = rank_root_cause([first, *torn_down])
    assert out[0] is not first and out[0].ranks == (3,) and len(out) == 1
    assert out[0].evidence["followed_by_total"] == 2


def test_hardware_explains_the_crash_on_its_host() -> None:
    cuda = _exc(3, 5, "RuntimeError: CUDA error: unspecified launch failure", "crash", "cuda_error")
    (crash,) = findings_from_run_events([cuda], R2H)
    assert crash.category is Category.CUDA_ERROR
    xid = _f(FindingKind.FAULTY_HOST, hosts=("node02",), category=Category.GPU_LOST)
    other = _f(FindingKind.FAULTY_HOST, Severity.WARNING, hosts=("node01",), category=Category.THERMAL)
    out = rank_root_cause([crash, xid, other])
    assert [(f.kind, f.hosts) for f in out] == [
        (FindingKind.FAULTY_HOST, ("node02",)),
        (FindingKind.FAULTY_HOST, ("node01",)),  # another host's warning is independent: kept
    ]
    assert out[0].evidence["followed_by"][0]["category"] == "cuda_error"


def test_a_nan_explains_no_crash_and_its_duplicates_fold() -> None:
    rows = [
        {"rank": 0, "host": None, "event": "nonfinite_loss", "step": 10, "message": "nan", "ts": None, "source": "n0"},
        {"rank": 2, "host": None, "event": "nonfinite_loss", "step": 11, "message": "nan", "ts": None, "source": "n2"},
    ]
    (nan,) = findings_from_run_events(rows, R2H)
    assert (nan.kind, nan.category, nan.ranks, nan.hosts, nan.evidence["step"]) == (
        FindingKind.NUMERICAL,
        Category.NAN_LOSS,
        (0,),
        ("node01",),
        10,
    )
    assert nan.evidence["followed_by_ranks"] == [2]
    from_logs = _f(FindingKind.NUMERICAL, ranks=(0,), category=Category.NAN_LOSS)
    crash = _f(FindingKind.CRASH, ranks=(2,), hosts=("node02",), category=Category.EXIT_CODE)
    out = rank_root_cause([nan, from_logs, crash])
    assert [f.kind for f in out] == [FindingKind.NUMERICAL, FindingKind.CRASH]


def test_no_root_leaves_findings_untouched() -> None:
    fs = [_f(FindingKind.STRAGGLER, ranks=(1,)), _f(FindingKind.NETWORK_ERROR, Severity.WARNING)]
    assert rank_root_cause(fs) == fs


def test_a_crash_outranks_a_straggler_of_equal_severity_in_the_report() -> None:
    s = Finding(FindingKind.STRAGGLER, Severity.CRITICAL, "slow", confidence=0.99)
    c = Finding(FindingKind.CRASH, Severity.CRITICAL, "died", confidence=0.5)
    assert sort_findings([s, c])[0] is c
    assert Report(None, (s, c)).to_dict()["findings"][0]["kind"] == "crash"


def test_a_short_run_gets_no_straggler_and_a_note_saying_why() -> None:
    rows = [
        {"rank": r, "step": s, "phase": "forward", "duration_ns": 9_000_000 if r == 2 else 1_000_000}
        for r in range(4)
        for s in range(6)
    ]
    t = pa.Table.from_pylist(rows)
    t = t.append_column("start_ts", pa.array([0] * len(rows), pa.int64()).cast(pa.timestamp("ns", tz="UTC")))
    run = RunInfo("r", 4, 2, (HostRanks("node01", (0, 1)), HostRanks("node02", (2, 3))))
    analysis = run_analysis(Signals(run, {SignalKind.TIMELINE: t}))
    assert analysis.findings == ()
    assert len(analysis.notes) == 1 and "covers 6 step(s), fewer than the 20" in analysis.notes[0]
    assert Report(None, analysis.findings, notes=analysis.notes).to_dict()["notes"] == list(analysis.notes)


def test_hardware_on_another_host_does_not_swallow_the_crash() -> None:
    (crash,) = findings_from_run_events([_exc(1, 5)], R2H)  # rank 1 on node01 failed first
    hot = _f(FindingKind.FAULTY_HOST, hosts=("node02",), category=Category.THERMAL)
    out = rank_root_cause([hot, crash])
    assert {(f.kind, f.hosts) for f in out} == {
        (FindingKind.FAULTY_HOST, ("node02",)),
        (FindingKind.CRASH, ("node01",)),
    }


def test_a_log_hang_that_followed_an_earlier_rendezvous_failure_is_not_the_root() -> None:
    """The log analyzer's incident order: a store the ranks could not reach (first_failure) came
    before a peer's collective timed out; the timeout stays a finding of its own, not the root."""
    store = _f(FindingKind.RENDEZVOUS_ERROR, first_failure=True, incident=0)
    hang = _f(FindingKind.HUNG_COLLECTIVE, ranks=(3,), first_failure=False, incident=0)
    out = sort_findings(rank_root_cause([hang, store]))
    assert [f.kind for f in out] == [FindingKind.RENDEZVOUS_ERROR, FindingKind.HUNG_COLLECTIVE]


def test_a_hang_from_a_recorder_stays_the_root_over_a_log_line() -> None:
    """A hang that is not a log analyzer's (the Flight Recorder's: no first_failure) folds the
    network error its peers printed, as before."""
    net = _f(FindingKind.NETWORK_ERROR, first_failure=True, incident=0)
    hang = _f(FindingKind.HUNG_COLLECTIVE, ranks=(3,), hosts=("node02",))
    out = rank_root_cause([net, hang])
    assert [f.kind for f in out] == [FindingKind.HUNG_COLLECTIVE]
    assert out[0].evidence["followed_by"][0]["kind"] == "network_error"


def test_the_first_failure_takes_its_exceptions_classification_and_keeps_its_rank() -> None:
    """The reader's kind/category decide the finding (what a log line saying it gets); the rank is
    still the smallest timestamp's, whatever the later ranks' exceptions say."""
    nccl = _exc(1, 10, "DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1970", "network_error", "nccl")
    oom_later = _exc(2, 20, "torch.OutOfMemoryError: CUDA out of memory.", "oom", None)
    (f,) = findings_from_run_events([oom_later, nccl], R2H)
    assert (f.kind, f.category, f.ranks, f.hosts) == (FindingKind.NETWORK_ERROR, Category.NCCL, (1,), ("node01",))
    assert f.severity is Severity.CRITICAL and f.evidence["error_file"] == "errors/rank-1.json"
    # the root of its incident, as a crash was: its peers' consequences fold into it
    peer = _f(FindingKind.CRASH, hosts=("node02",), category=Category.SIGNAL)
    (root,) = rank_root_cause([f, peer])
    assert root.ranks == (1,) and root.evidence["followed_by_total"] == 1


def test_a_classification_that_would_name_another_rank_or_a_value_not_known_stays_a_crash() -> None:
    """A hang names the ranks that never arrived and a NaN the first non-finite rank: an exception saying
    either is still the raising rank's crash. A value this trainctl does not know (a newer writer), or a
    row from before the columns, is read as no classification."""
    old = {k: v for k, v in _exc(0, 1).items() if k not in ("kind", "category")}
    for row in (
        _exc(0, 1, "RuntimeError: Loss is NaN at step 5", "numerical", "nan_loss"),
        _exc(0, 1, "DistBackendError: Watchdog caught collective operation timeout", "hung_collective", None),
        _exc(0, 1, "RuntimeError: boom", "kind_of_tomorrow", "crash"),
        old,
    ):
        (f,) = findings_from_run_events([row], R2H)
        assert (f.kind, f.category, f.ranks) == (FindingKind.CRASH, Category.EXCEPTION, (0,)), row


def test_a_hardware_fault_in_the_first_exception_is_one_root_with_its_hosts_kernel_record() -> None:
    ecc = _exc(3, 5, "RuntimeError: CUDA error: uncorrectable ECC error encountered", "faulty_host", "ecc")
    (f,) = findings_from_run_events([ecc], R2H)
    assert (f.kind, f.category, f.ranks, f.hosts) == (FindingKind.FAULTY_HOST, Category.ECC, (3,), ("node02",))
    assert "failed on its hardware first" in f.summary
    # alone, it is the root (the first failure); beside its host's kernel Xid, that record is the
    # root and the exception its evidence: one critical finding either way
    hang = _f(FindingKind.HUNG_COLLECTIVE, ranks=(1,), hosts=("node01",))
    assert [x.kind for x in rank_root_cause([f, hang])] == [FindingKind.FAULTY_HOST]
    xid = _f(FindingKind.FAULTY_HOST, hosts=("node02",), category=Category.XID)
    (root,) = rank_root_cause([f, xid])
    assert root is not f and root.category is Category.XID
    assert [x["category"] for x in root.evidence["followed_by"]] == ["ecc"]
