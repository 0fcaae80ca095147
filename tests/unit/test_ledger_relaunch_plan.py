"""plan_relaunch: replace from spares, shrink when tp x pp allows, else a clear stop."""

from __future__ import annotations

from trainctl.ops.evict.relaunch_plan import PlanKind, plan_relaunch, shrink_allowed

H = ["node01", "node02", "node03"]


def test_replace_in_place_keeps_rank_positions() -> None:
    p = plan_relaunch(H, quarantined={"node02"}, spares=["spare1"], nproc_per_node=2, layout={"dp": 3, "tp": 2})
    assert (p.kind, p.hosts, p.removed, dict(p.replacements), p.world_size) == (
        PlanKind.REPLACE,
        ("node01", "spare1", "node03"),
        ("node02",),
        {"node02": "spare1"},
        6,
    )
    assert p.layout == {"dp": 3, "tp": 2}


def test_quarantined_and_used_spares_are_skipped() -> None:
    p = plan_relaunch(H, quarantined={"node02", "spare1"}, spares=["spare1", "node03", "spare2"], nproc_per_node=1)
    assert p.hosts == ("node01", "spare2", "node03")


def test_shrink_when_layout_allows() -> None:
    p = plan_relaunch(H + ["node04"], quarantined={"node02"}, spares=[], nproc_per_node=2, layout={"dp": 4, "tp": 2})
    assert (p.kind, p.hosts, p.world_size, p.layout) == (
        PlanKind.SHRINK,
        ("node01", "node03", "node04"),
        6,
        {"dp": 3, "tp": 2},
    )
    assert p.reason == (
        "layout needs 4 hosts (8 ranks), only 3 healthy and 0 free spares; shrinking to 3 hosts (6 ranks, dp 4 -> 3)"
    )


def test_partial_spares_then_shrink() -> None:
    p = plan_relaunch(H + ["node04"], quarantined={"node02", "node03"}, spares=["s1"], nproc_per_node=1)
    assert (p.kind, p.hosts, dict(p.replacements)) == (PlanKind.SHRINK, ("node01", "s1", "node04"), {"node02": "s1"})


def test_stop_when_tp_does_not_divide() -> None:
    p = plan_relaunch(H, quarantined={"node02"}, spares=[], nproc_per_node=1, layout={"dp": 1, "tp": 3})
    assert p.kind is PlanKind.STOP and p.hosts == ()
    assert p.reason == (
        "layout needs 3 hosts (3 ranks), only 2 healthy and 0 free spares; a smaller run needs a "
        "multiple of tp x pp = 3 ranks and at least 1 host(s), but 2 host(s) x 1 = 2 ranks; "
        "add spares with --spares"
    )


def test_stop_when_shrink_not_allowed() -> None:
    p = plan_relaunch(H, quarantined={"node01"}, nproc_per_node=1, allow_shrink=False)
    assert p.kind is PlanKind.STOP
    assert p.reason == (
        "layout needs 3 hosts (3 ranks), only 2 healthy and 0 free spares; add spares with --spares, "
        "or pass --allow-shrink if the training script can resume at a smaller world size"
    )


def test_shrink_allowed_for_the_reference_trainer_or_with_the_opt_in() -> None:
    assert shrink_allowed(script=None, opt_in=False)[0] is True
    assert shrink_allowed(script="/w/train.py", opt_in=True) == (True, "--allow-shrink given for /w/train.py")
    ok, hint = shrink_allowed(script="/w/train.py", opt_in=False)
    assert ok is False
    p = plan_relaunch(H, quarantined={"node02"}, nproc_per_node=1, allow_shrink=ok, no_shrink_hint=hint)
    assert p.kind is PlanKind.STOP
    assert p.reason.endswith(
        "add spares with --spares, or pass --allow-shrink if /w/train.py can resume at a "
        "smaller world size (trainctl cannot tell for a user script)"
    )


def test_stop_below_min_hosts_and_all_gone() -> None:
    assert plan_relaunch(H, quarantined={"node01", "node02"}, nproc_per_node=1, min_hosts=2).kind is PlanKind.STOP
    assert plan_relaunch(["a"], quarantined={"a"}, nproc_per_node=1).kind is PlanKind.STOP


def test_unchanged_when_nothing_quarantined_in_run() -> None:
    p = plan_relaunch(H, quarantined={"other"}, nproc_per_node=1)
    assert (p.kind, p.hosts) == (PlanKind.UNCHANGED, tuple(H))


def test_hosts_match_the_quarantine_whatever_their_case() -> None:
    # the ledger's NODE02 is the run's node02; a spare spelled SPARE1 twice or NODE01 is no new host
    p = plan_relaunch(H, quarantined={"NODE02"}, spares=["NODE01", "Spare1", "spare1"], nproc_per_node=1)
    assert (p.kind, p.removed, p.hosts) == (PlanKind.REPLACE, ("node02",), ("node01", "Spare1", "node03"))
    p = plan_relaunch(H, quarantined={"Node02", "SPARE1"}, spares=["spare1"], nproc_per_node=1)
    assert (p.kind, p.hosts) == (PlanKind.SHRINK, ("node01", "node03"))
