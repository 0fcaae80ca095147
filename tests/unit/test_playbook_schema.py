"""Playbook schema: every built-in validates; bad files name FILE:LINE, what is wrong and the fix."""

from __future__ import annotations

import pytest

from trainctl.errors import PlaybookInvalid
from trainctl.findings import PLAYBOOK_FOR_KIND
from trainctl.ops.playbook.expr import ExprError, evaluate, parse, render
from trainctl.ops.playbook.model import StepType
from trainctl.ops.playbook.validation import builtin_names, load_builtin, load_playbook, parse_playbook

GOOD = """\
name: demo
description: a demo
trigger:
  kinds: [hung_collective]
steps:
  - id: diagnose
    type: diagnose
  - id: evict
    type: evict-node
    when: diagnose.hosts
    with:
      hosts: ${diagnose.hosts}
      reason: hung
"""


def test_every_builtin_validates_and_matches_the_findings_table() -> None:
    names = builtin_names()
    assert set(names) == set(PLAYBOOK_FOR_KIND.values())
    for name in names:
        book = load_builtin(name)
        assert book.name == name
        assert book.steps


def test_destructive_flag_comes_from_the_type() -> None:
    book = parse_playbook(GOOD, "good.yaml")
    assert [(s.id, s.destructive) for s in book.steps] == [("diagnose", False), ("evict", True)]
    assert {t for t in StepType if t.destructive} == {StepType.EVICT_NODE, StepType.RELAUNCH}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # unknown step type, on line 7
        (
            GOOD.replace("type: diagnose", "type: diagnoze"),
            "bad.yaml:7: step 'diagnose' has unknown type 'diagnoze'; use one of collect, diagnose",
        ),
        # a condition that refers to a later step
        (
            GOOD.replace("when: diagnose.hosts", "when: evict.status == 'ok'"),
            "bad.yaml:10: step 'evict' refers to 'evict', which is not an earlier step; use an earlier step's id",
        ),
        # a condition that does not parse
        (
            GOOD.replace("when: diagnose.hosts", "when: diagnose.hosts =="),
            "bad.yaml:10: step 'evict': when does not parse: expected a value or a path at column 18",
        ),
        # missing required with-key
        (
            GOOD.replace("      reason: hung\n", ""),
            "bad.yaml:11: step 'evict' (evict-node) needs with.reason; add `reason:` under `with:`",
        ),
        # unknown key under with (typo), line of the key
        (
            GOOD.replace("      reason: hung", "      reason: hung\n      hots: [a]"),
            "bad.yaml:14: step 'evict' (evict-node) does not take 'hots'; use allow_shrink, finding, hosts, reason, relaunch, scheduler, spares",
        ),
        # unknown trigger kind
        (
            GOOD.replace("[hung_collective]", "[hung]"),
            "bad.yaml:4: unknown finding kind 'hung'; use one of straggler, hung_collective",
        ),
        # broken YAML
        (GOOD.replace("    type: diagnose", "   type: diagnose"), "bad.yaml:7: not valid YAML"),
        # goto to a missing step
        (
            GOOD.replace("    type: diagnose", "    type: diagnose\n    on_failure: goto nowhere"),
            "bad.yaml:8: step 'diagnose': on_failure goes to unknown step 'nowhere'; use one of diagnose, evict",
        ),
        # duplicate ids
        (
            GOOD.replace("id: evict", "id: diagnose"),
            "bad.yaml:8: step id 'diagnose' is used twice; give every step its own id",
        ),
        # unknown top-level key
        (
            "nmae: x\n" + GOOD,
            "bad.yaml:1: unknown key 'nmae'; use one of description, inputs, name, steps, timeout_s, trigger",
        ),
    ],
)
def test_bad_files_name_file_line_and_fix(text: str, expected: str, tmp_path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(PlaybookInvalid) as ei:
        load_playbook(path)
    msg = str(ei.value).replace(str(tmp_path) + "/", "")
    assert msg.startswith(expected), msg


def test_expressions_filter_project_and_compare() -> None:
    ctx = {
        "d": {
            "findings": [
                {"kind": "hung_collective", "hosts": ["node03"], "ranks": [5]},
                {"kind": "straggler", "hosts": ["node01", "node02"], "ranks": [1]},
            ]
        },
        "run": {"dir": "/r", "hosts": ["node01", "node02", "node03"]},
    }
    assert evaluate("d.findings[kind=hung_collective].hosts", ctx) == ["node03"]
    assert evaluate("d.findings.hosts", ctx) == ["node03", "node01", "node02"]
    assert evaluate("len(d.findings[kind=straggler].hosts) == 2 and 'node03' in run.hosts", ctx) is True
    assert evaluate("d.findings[0].ranks[0] >= 5", ctx) is True
    assert evaluate("not missing.step and missing.x > 3", ctx) is False  # null compares as "no"
    assert evaluate("collect.out or run.dir", ctx) == "/r"
    assert render({"hosts": "${d.findings[kind=straggler].hosts}", "msg": "on ${run.hosts}!"}, ctx) == {
        "hosts": ["node01", "node02"],
        "msg": "on node01,node02,node03!",
    }
    assert parse("a.b and not (c == 'x')").roots() == {"a", "c"}


@pytest.mark.parametrize("src", ["__import__('os')", "a.b(1)", "a +", "1 = 2", "a[b]"])
def test_expressions_reject_anything_outside_the_grammar(src: str) -> None:
    with pytest.raises(ExprError):
        parse(src)


def test_probe_decisions_localise_the_host_in_both_slow_pairs() -> None:
    from trainctl.runtime.probe import bisect_split, localize, pair_suspects, ring_pairs, slow_groups

    hosts = ["node01", "node02", "node03", "node04"]
    assert ring_pairs(hosts) == [
        [("node01", "node02"), ("node03", "node04")],
        [("node02", "node03"), ("node04", "node01")],
    ]
    assert ring_pairs(["a", "b", "c"]) == [[("a", "b")], [("b", "c")], [("c", "a")]]
    pairs = {
        ("node01", "node02"): 0.01,
        ("node03", "node04"): 1.0,
        ("node02", "node03"): 1.02,
        ("node04", "node01"): 0.012,
    }
    assert pair_suspects(pairs) == ({"node02", "node03", "node04"}, {"node03"})
    assert slow_groups({"a": 0.01, "b": 0.25}) == set()  # 25x slower but under the 0.3 s floor: noise
    assert bisect_split(["node02", "node03", "node04"]) == (["node02", "node03"], ["node04"])
    rounds = [{"slow": [["node02", "node03"]]}, {"slow": [["node03"]]}]
    assert localize({}, pairs, rounds, hosts) == (["node03"], ["node03"])
    assert localize({"node01": 0.01, "node02": 0.011}, {("node01", "node02"): 0.01}, [], hosts[:2]) == ([], [])


def test_evict_node_step_passes_allow_shrink_only_with_the_relaunch() -> None:
    from pathlib import Path

    from trainctl.ops.playbook.actions import _evict_args

    run = Path("/runs/r1")
    with_shrink = {"reason": "xid 79", "relaunch": True, "allow_shrink": True, "spares": ["node09"]}
    assert _evict_args("node02", with_shrink, run, wait_timeout_s=600) == [
        "evict-node",
        "node02",
        "--reason",
        "xid 79",
        "--run",
        "/runs/r1",
        "--json",
        "--relaunch",
        "--yes",
        "--wait-timeout",
        "600",
        "--allow-shrink",
        "--spares",
        "node09",
    ]
    # without the relaunch (e.g. every host but the last of a multi-host eviction) there is nothing to shrink
    assert "--allow-shrink" not in _evict_args("node02", with_shrink, run, relaunch=False)
    assert "--allow-shrink" not in _evict_args("node02", {"reason": "x", "relaunch": True}, run)
