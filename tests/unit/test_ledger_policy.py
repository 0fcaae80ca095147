"""runtime.policy.decide: every rule, table-driven, exact actions and hosts."""

from __future__ import annotations

import pytest

from trainctl.findings import Category as C
from trainctl.findings import Finding
from trainctl.findings import FindingKind as K
from trainctl.findings import Severity as S
from trainctl.runtime.policy import Action, decide
from trainctl.runtime.policy import ActionKind as A
from trainctl.runtime.policy import Trigger as T


def F(kind, cat=None, hosts=(), summary="s", conf=1.0, sev=S.CRITICAL, **evidence) -> Finding:
    return Finding(
        kind=kind, severity=sev, summary=summary, category=cat, hosts=tuple(hosts), confidence=conf, evidence=evidence
    )


XID79 = F(K.FAULTY_HOST, C.GPU_LOST, ["node02"], "node02: GPU fell off the bus (Xid 79)", xid=79)
ECC = F(K.FAULTY_HOST, C.ECC, ["node03"], "node03: uncorrectable ECC", dbe=2)
THERMAL = F(K.FAULTY_HOST, C.THERMAL, ["node04"], "node04 throttles", sev=S.WARNING, conf=0.9)
UNREACH = F(K.MISSING_DATA, C.UNREACHABLE, ["node05"], "node05 unreachable over ssh")
XID_CRASH = F(K.CRASH, C.XID, ["node06"], "xid 48 in dmesg")
WEAK_HW = F(K.FAULTY_HOST, C.METRIC_OUTLIER, ["node07"], "maybe slow", conf=0.4)
IMPORT = F(
    K.CRASH,
    C.EXIT_CODE,
    ["node01"],
    "rank 0 exited 1",
    exitcode=1,
    message="ModuleNotFoundError: No module named 'transformerz'",
)
SYNTAX = F(K.CRASH, None, ["node01"], "SyntaxError: invalid syntax (train.py, line 3)")
NAMEERR = F(
    K.CRASH,
    C.EXIT_CODE,
    ["node01"],
    "rank 1 exited 1",
    exitcode=1,
    evidence_lines=["Traceback (most recent call last):", "NameError: name 'modle' is not defined"],
)
BAD_EXIT = F(K.CRASH, C.EXIT_CODE, ["node01"], "rank 0 exited 2", exitcode=2)
CANT_OPEN = F(K.CRASH, C.EXIT_CODE, ["node01"], "python: can't open file '/x/trian.py'", exitcode=1)
MISMATCH = F(K.COLLECTIVE_MISMATCH, C.SIZE_MISMATCH, [], "rank 3 all_reduce 4096 vs 4100")
OOM = F(K.OOM, None, ["node01"], "CUDA out of memory on rank 2")
NAN = F(K.NUMERICAL, C.NAN_LOSS, [], "loss is NaN from step 120")
SEGV = F(K.CRASH, C.SIGNAL, ["node02"], "rank 4 killed by SIGSEGV", signal="SIGSEGV")
CUDA = F(K.CRASH, C.CUDA_ERROR, ["node02"], "CUDA error: an illegal memory access")
HANG = F(K.HUNG_COLLECTIVE, C.COLLECTIVE_TIMEOUT, ["node03"], "ranks 6,7 never joined all_reduce #812", conf=0.9)
HANG_LOW = F(K.HUNG_COLLECTIVE, C.COLLECTIVE_TIMEOUT, ["node03"], "maybe node03", conf=0.5)
NET = F(K.NETWORK_ERROR, C.GLOO, ["node01"], "gloo connection reset")
RDZV = F(K.RENDEZVOUS_ERROR, None, [], "rendezvous timed out")
STRAG = F(K.STRAGGLER, C.COMPUTE, ["node04"], "rank 5 1.5x slower", sev=S.WARNING)
MISSING = F(K.MISSING_DATA, None, ["node04"], "no gpu_metrics", sev=S.INFO)

CASES = [
    # id, findings, restarts_used, max_restarts, kwargs, expected kind, expected hosts, rule
    ("xid79_evicts", [XID79], 0, 3, {}, A.EVICT_AND_RELAUNCH, ("node02",), "hardware_fault"),
    ("ecc_evicts", [ECC], 0, 3, {}, A.EVICT_AND_RELAUNCH, ("node03",), "hardware_fault"),
    ("thermal_faulty_host_evicts", [THERMAL], 0, 3, {}, A.EVICT_AND_RELAUNCH, ("node04",), "hardware_fault"),
    ("unreachable_evicts", [UNREACH], 0, 3, {}, A.EVICT_AND_RELAUNCH, ("node05",), "hardware_fault"),
    ("xid_category_on_crash_evicts", [XID_CRASH], 0, 3, {}, A.EVICT_AND_RELAUNCH, ("node06",), "hardware_fault"),
    (
        "two_hosts_evicted_in_order",
        [ECC, XID79],
        0,
        3,
        {},
        A.EVICT_AND_RELAUNCH,
        ("node03", "node02"),
        "hardware_fault",
    ),
    ("hw_evicts_even_with_budget_spent", [XID79, CUDA], 3, 3, {}, A.EVICT_AND_RELAUNCH, ("node02",), "hardware_fault"),
    (
        "low_confidence_hw_does_not_evict",
        [WEAK_HW],
        0,
        3,
        {"trigger": T.CRASH},
        A.RESTART_IN_PLACE,
        (),
        "software_fault",
    ),
    ("low_conf_hw_on_fail_slow_continues", [WEAK_HW], 0, 3, {"trigger": T.FAIL_SLOW}, A.CONTINUE, (), "continue"),
    ("import_error_stops", [IMPORT], 0, 3, {}, A.STOP_AND_REPORT, (), "user_code_error"),
    ("syntax_error_stops", [SYNTAX], 0, 3, {}, A.STOP_AND_REPORT, (), "user_code_error"),
    ("name_error_in_evidence_list_stops", [NAMEERR], 0, 3, {}, A.STOP_AND_REPORT, (), "user_code_error"),
    ("exit_2_stops", [BAD_EXIT], 0, 3, {}, A.STOP_AND_REPORT, (), "user_code_error"),
    ("cant_open_file_stops", [CANT_OPEN], 0, 3, {}, A.STOP_AND_REPORT, (), "user_code_error"),
    ("collective_mismatch_stops", [MISMATCH], 0, 3, {}, A.STOP_AND_REPORT, (), "user_code_error"),
    ("user_error_beats_hardware", [XID79, IMPORT], 0, 3, {}, A.STOP_AND_REPORT, (), "user_code_error"),
    ("oom_stops", [OOM], 0, 3, {}, A.STOP_AND_REPORT, (), "config_error"),
    ("nan_stops", [NAN, CUDA], 0, 3, {}, A.STOP_AND_REPORT, (), "config_error"),
    ("hardware_beats_nan", [NAN, XID79], 0, 3, {}, A.EVICT_AND_RELAUNCH, ("node02",), "hardware_fault"),
    ("segv_restarts", [SEGV], 0, 3, {}, A.RESTART_IN_PLACE, (), "software_fault"),
    ("cuda_error_restarts", [CUDA], 2, 3, {}, A.RESTART_IN_PLACE, (), "software_fault"),
    ("crash_budget_exhausted_stops", [CUDA], 3, 3, {}, A.STOP_AND_REPORT, (), "restarts_exhausted"),
    ("zero_budget_stops", [SEGV], 0, 0, {}, A.STOP_AND_REPORT, (), "restarts_exhausted"),
    ("network_restarts", [NET], 0, 1, {}, A.RESTART_IN_PLACE, (), "software_fault"),
    ("rendezvous_restarts", [RDZV], 0, 1, {}, A.RESTART_IN_PLACE, (), "software_fault"),
    ("first_hang_restarts", [HANG], 0, 3, {"trigger": T.HANG}, A.RESTART_IN_PLACE, (), "software_fault"),
    (
        "second_hang_same_host_evicts",
        [HANG],
        1,
        3,
        {"trigger": T.HANG, "host_fault_counts": {"node03": 1}},
        A.EVICT_AND_RELAUNCH,
        ("node03",),
        "repeat_offender",
    ),
    (
        "second_hang_other_host_restarts",
        [HANG],
        1,
        3,
        {"trigger": T.HANG, "host_fault_counts": {"node09": 1}},
        A.RESTART_IN_PLACE,
        (),
        "software_fault",
    ),
    (
        "low_conf_repeat_hang_restarts",
        [HANG_LOW],
        1,
        3,
        {"trigger": T.HANG, "host_fault_counts": {"node03": 1}},
        A.RESTART_IN_PLACE,
        (),
        "software_fault",
    ),
    (
        "repeat_crash_same_host_evicts",
        [SEGV],
        1,
        3,
        {"host_fault_counts": {"node02": 1}},
        A.EVICT_AND_RELAUNCH,
        ("node02",),
        "repeat_offender",
    ),
    (
        # The earlier fault's finding spelled the host otherwise (a banner's NODE03, a run's node03:2222): one machine.
        "second_hang_same_host_other_spelling_evicts",
        [HANG],
        1,
        3,
        {"trigger": T.HANG, "host_fault_counts": {"NODE03:2222": 1}},
        A.EVICT_AND_RELAUNCH,
        ("node03",),
        "repeat_offender",
    ),
    (
        "two_spellings_add_up_to_the_threshold",
        [SEGV],
        2,
        3,
        {"host_fault_counts": {"node02": 1, "NODE02": 1}, "repeat_evict_after": 3},
        A.EVICT_AND_RELAUNCH,
        ("node02",),
        "repeat_offender",
    ),
    (
        "repeat_threshold_3",
        [SEGV],
        1,
        3,
        {"host_fault_counts": {"node02": 1}, "repeat_evict_after": 3},
        A.RESTART_IN_PLACE,
        (),
        "software_fault",
    ),
    ("crash_without_diagnosis_restarts", [], 0, 3, {"trigger": T.CRASH}, A.RESTART_IN_PLACE, (), "software_fault"),
    ("hang_without_diagnosis_budget_spent", [], 2, 2, {"trigger": T.HANG}, A.STOP_AND_REPORT, (), "restarts_exhausted"),
    ("stragglers_on_fail_slow_continue", [STRAG, MISSING], 0, 3, {"trigger": T.FAIL_SLOW}, A.CONTINUE, (), "continue"),
    ("nothing_periodic_continue", [], 0, 3, {"trigger": T.PERIODIC}, A.CONTINUE, (), "continue"),
    ("straggler_after_crash_restarts", [STRAG], 0, 3, {"trigger": T.CRASH}, A.RESTART_IN_PLACE, (), "software_fault"),
]


@pytest.mark.parametrize(
    "findings, used, budget, kwargs, kind, hosts, rule", [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_decide(findings, used, budget, kwargs, kind, hosts, rule) -> None:
    action = decide(findings, used, budget, **kwargs)
    assert isinstance(action, Action)
    assert (action.kind, action.hosts, action.rule) == (kind, hosts, rule)
    assert (action.restarts_used, action.max_restarts) == (used, budget)


def test_action_carries_evidence_and_reason() -> None:
    a = decide([STRAG, XID79, CUDA], 0, 3)
    assert a.evidence == (XID79,)
    assert a.reason == "hardware fault on node02: node02: GPU fell off the bus (Xid 79)"
    d = a.to_dict()
    assert d["kind"] == "evict_and_relaunch" and d["hosts"] == ["node02"]
    assert d["evidence"][0]["evidence"] == {"xid": 79}


def test_reasons_name_budget_and_error() -> None:
    assert decide([CUDA], 1, 3).reason == "software fault, restart 2/3: CUDA error: an illegal memory access"
    assert decide([CUDA], 3, 3).reason == "restart budget exhausted (3/3 used): CUDA error: an illegal memory access"
    assert decide([IMPORT], 0, 3).reason == "user code error, a restart would fail the same way: rank 0 exited 1"
    assert decide([], 0, 1, trigger=T.HANG).reason == "software fault, restart 1/1: hang with no diagnosis"


def test_action_is_frozen() -> None:
    a = decide([], 0, 1)
    with pytest.raises(Exception):
        a.kind = A.CONTINUE  # type: ignore[misc]
