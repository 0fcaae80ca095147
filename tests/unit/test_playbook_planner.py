"""The pure planner: playbook + typed findings + state -> each step's decision, with the confidence gate."""

from __future__ import annotations

import pytest

from trainctl.findings import Category, Finding, FindingKind, Severity
from trainctl.ops.playbook.actions import EvictAction
from trainctl.ops.playbook.model import StepType
from trainctl.ops.playbook.planner import Decision, PlanState, diagnose_outputs, plan_playbook, plan_step
from trainctl.ops.playbook.validation import load_builtin, parse_playbook

HOSTS = ["node01", "node02", "node03", "node04"]


def _ctx(book, **inputs) -> dict:
    return {
        "run": {"dir": "/runs/r1", "id": "r1", "hosts": HOSTS},
        "incident": {"id": "inc-1", "dir": "/runs/r1/incidents/inc-1"},
        "inputs": {**book.inputs, **inputs},
        "trigger": book.trigger.to_dict(),
    }


def _hang(confidence: float, host: str = "node03", rank: int = 5) -> Finding:
    return Finding(
        kind=FindingKind.HUNG_COLLECTIVE,
        severity=Severity.CRITICAL,
        category=Category.COLLECTIVE_TIMEOUT,
        summary=f"rank {rank} on {host} never entered allreduce seq 41",
        hosts=(host,),
        ranks=(rank,),
        confidence=confidence,
    )


def _by_step(planned) -> dict:
    return {p.step.id: p for p in planned}


def test_hung_collective_with_a_low_confidence_culprit_plans_no_eviction() -> None:
    book = load_builtin("hung-collective")
    assert book.trigger.min_confidence == 0.9
    plan = _by_step(plan_playbook(book, {"diagnose": [_hang(0.6)]}, _ctx(book, webhook="https://hooks.example/x")))
    ev = plan["evict"]
    assert ev.decision is Decision.ESCALATE and ev.action is None
    assert not any(isinstance(p.action, EvictAction) for p in plan.values())
    assert [f.ranks for f in ev.evidence] == [(5,)]
    assert "below the confidence gate high (>= 0.9)" in ev.reason and "node03" in ev.reason
    # the escalation goes to the playbook's own notify target, with the evidence
    (note,) = ev.escalation
    assert note.url == "https://hooks.example/x" and note.severity == "critical"
    assert note.evidence[0]["confidence"] == 0.6 and "never entered allreduce" in note.message
    # the culprit question is not even asked: below the gate there is no culprit to act on
    assert plan["confirm"].decision is Decision.SKIP and plan["notify"].decision is Decision.SKIP


def test_hung_collective_at_high_confidence_plans_the_eviction() -> None:
    book = load_builtin("hung-collective")
    plan = _by_step(plan_playbook(book, {"diagnose": [_hang(0.95)]}, _ctx(book)))
    ev = plan["evict"]
    assert ev.decision is Decision.PLAN and isinstance(ev.action, EvictAction)
    assert ev.action.targets == ("node03",) and ev.action.relaunch is True
    assert ev.reason == "would run if diagnose.hosts and confirm.answer (depends on confirm); destructive: needs --yes"
    assert ev.command[:3] == ("trainctl", "evict-node", "node03")


def test_diagnose_outputs_keep_below_gate_findings_apart() -> None:
    book = load_builtin("hung-collective")
    out = diagnose_outputs([_hang(0.95, "node02", 3), _hang(0.5, "node04", 7)], book.trigger, path="/d")
    assert out["hosts"] == ["node02"] and out["ranks"] == [3]
    assert out["culprit"]["hosts"] == ["node02"]
    assert [f["hosts"] for f in out["below_gate"]] == [["node04"]]
    assert len(out["findings"]) == 2


@pytest.mark.parametrize(
    "hosts",
    [
        "'${diagnose.findings.hosts}'",  # the step targets every host the findings name, the doubtful one too
        "NODE04",  # the node04 only a doubtful finding names, whatever its case
    ],
)
def test_an_eviction_of_a_host_named_only_below_the_gate_escalates(hosts: str) -> None:
    # a confident finding on node02, and a doubtful one on node04 that the step targets anyway
    book = parse_playbook(
        "name: t\ndescription: t\ntrigger: {kinds: [hung_collective]}\nsteps:\n"
        "  - id: diagnose\n    type: diagnose\n"
        f"  - id: evict\n    type: evict-node\n    with: {{hosts: {hosts}, reason: r}}\n",
        "t.yaml",
    )
    plan = _by_step(plan_playbook(book, {"diagnose": [_hang(0.95, "node02"), _hang(0.5, "node04")]}, _ctx(book)))
    assert plan["evict"].decision is Decision.ESCALATE
    assert plan["evict"].reason.startswith("node04 is named only below the gate; 1 finding(s) below")


def test_a_step_that_does_not_act_on_the_diagnosis_is_not_gated() -> None:
    # oom: the relaunch runs on the operator's own arguments, not on the finding
    book = load_builtin("oom")
    oom = Finding(kind=FindingKind.OOM, severity=Severity.CRITICAL, summary="oom", hosts=("node01",), confidence=0.5)
    plan = _by_step(plan_playbook(book, {"diagnose": [oom]}, _ctx(book, relaunch_args=["--local"])))
    assert plan["relaunch"].decision is Decision.PLAN
    assert plan["relaunch"].command == ("trainctl", "launch", "--local")


def test_destructive_steps_need_yes_or_a_person() -> None:
    book = parse_playbook(
        "name: t\ndescription: t\nsteps:\n  - id: evict\n    type: evict-node\n    with: {hosts: [node02], reason: r}\n",
        "t.yaml",
    )
    ctx = _ctx(book)
    assert plan_step(book, 0, PlanState(ctx)).decision is Decision.REFUSE
    assert plan_step(book, 0, PlanState(ctx, interactive=True)).decision is Decision.CONFIRM
    run = plan_step(book, 0, PlanState(ctx, yes=True))
    assert run.decision is Decision.RUN and run.action == EvictAction(("node02",), "r", "/runs/r1")


def test_refused_targets_are_invalid_before_anything_runs() -> None:
    for target, why in [
        ("ALL", "a scheduler reads it as every node"),
        ("node[01-99]", "names node05, node06, node07, node08, node09 and 90 more"),
        ("--selector=x", "starts with '-'"),
        ("-x", "starts with '-'"),
    ]:
        book = parse_playbook(
            "name: t\ndescription: t\ninputs: {target: ''}\nsteps:\n"
            "  - id: evict\n    type: evict-node\n    with: {hosts: '${inputs.target}', reason: r}\n",
            "t.yaml",
        )
        p = plan_step(book, 0, PlanState(_ctx(book, target=target), yes=True))
        assert p.decision is Decision.INVALID and p.action is None and why in p.reason, p.reason


def test_an_option_from_a_finding_never_reaches_an_argv() -> None:
    book = parse_playbook(
        "name: t\ndescription: t\nsteps:\n  - id: diagnose\n    type: diagnose\n"
        "  - id: tell\n    type: notify\n    with: {message: m, command: [logger, '${diagnose.culprit.summary}']}\n",
        "t.yaml",
    )
    ctx = {**_ctx(book), "diagnose": {"culprit": {"summary": "--rm-rf-everything"}}}
    p = plan_step(book, 1, PlanState(ctx, yes=True))
    assert p.decision is Decision.INVALID
    assert (
        "comes from diagnose and starts with '-'; a value from a finding or log can never become an option" in p.reason
    )
    ctx["diagnose"]["culprit"]["summary"] = "rank 3: $(touch /tmp/x); rm -rf /"
    ok = plan_step(book, 1, PlanState(ctx, yes=True))
    assert ok.decision is Decision.RUN and ok.action.command() == ("logger", "rank 3: $(touch /tmp/x); rm -rf /")
    # a notify command runs a program here: destructive, needs --yes
    assert plan_step(book, 1, PlanState(ctx)).decision is Decision.REFUSE


def test_every_step_type_maps_to_one_action_kind() -> None:
    from trainctl.ops.playbook import actions

    kinds = {
        cls.kind
        for cls in (
            actions.CollectAction,
            actions.DiagnoseAction,
            actions.ProbeAction,
            actions.EvictAction,
            actions.RelaunchAction,
            actions.NotifyAction,
            actions.AskAction,
        )
    }
    assert kinds == set(StepType)
