"""Hostile and broken playbook files are refused: quickly, in little memory, naming file, line and field.

The time and memory figures are bounds that the refusal must stay far below (the unbounded loader
took ~60 s and ~5 GB on a billion-laughs file), measured here with process CPU time and
tracemalloc as a check of the limits, not as a benchmark of normal loading."""

from __future__ import annotations

import time
import tracemalloc

import pytest

from trainctl.errors import PlaybookInvalid
from trainctl.ops.playbook.loader import MAX_ALIASES, MAX_BYTES, MAX_DEPTH, MAX_NODES
from trainctl.ops.playbook.validation import load_playbook, parse_playbook

HEAD = "name: evil\ndescription: x\ntrigger: {kinds: [crash]}\n"
STEPS = "steps:\n  - id: diagnose\n    type: diagnose\n"


def _laughs(levels: int, width: int) -> str:
    lines = [f"l0: &l0 [{', '.join(['lol'] * width)}]"]
    for i in range(1, levels + 1):
        lines.append(f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * width)}]")
    return "inputs:\n" + "".join(f"  {ln}\n" for ln in lines)


HOSTILE = {
    # the classic: 9 levels of 9 aliases (9**9 strings once expanded)
    "billion_laughs": (HEAD + _laughs(8, 9) + STEPS, f"more than {MAX_ALIASES} aliases"),
    # within the alias limit, still 8**7 values once expanded: stopped by the expansion budget
    "alias_bomb_few_aliases": (HEAD + _laughs(7, 8) + STEPS, f"expands to more than {MAX_NODES} values"),
    "recursive_alias": (HEAD + "inputs:\n  loop: &a [1, *a]\n" + STEPS, "a recursive alias"),
    "complex_key": (HEAD + "inputs:\n  ? [a, b]\n  : 1\n" + STEPS, "a complex key"),
    "complex_flow_key": (HEAD + "inputs: {{a: 1}: 2}\n" + STEPS, "a complex key"),
    "deep_flow_nesting": (HEAD + "inputs: {x: " + "[" * 5000 + "]" * 5000 + "}\n" + STEPS, "nested deeper than"),
    "deep_block_nesting": (
        HEAD + "inputs:\n" + "".join("  " * (i + 1) + f"k{i}:\n" for i in range(MAX_DEPTH + 5)) + STEPS,
        "nested deeper than",
    ),
    "nan_timeout": (HEAD + "timeout_s: .nan\n" + STEPS, "timeout_s nan is not a positive, finite number of seconds"),
    "infinite_step_timeout": (
        HEAD + STEPS + "    timeout_s: .inf\n",
        "step 'diagnose': timeout_s inf is not a positive, finite number of seconds",
    ),
    "negative_timeout": (HEAD + "timeout_s: -5\n" + STEPS, "timeout_s -5 is not a positive, finite number of seconds"),
    "huge_file": (HEAD + STEPS + "#" * (MAX_BYTES + 10) + "\n", f"larger than {MAX_BYTES // 1024} KiB"),
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_hostile_files_are_refused_within_bounds(name: str, tmp_path) -> None:
    text, expected = HOSTILE[name]
    path = tmp_path / f"{name}.yaml"
    path.write_text(text)

    cpu0 = time.process_time()
    with pytest.raises(PlaybookInvalid) as ei:
        load_playbook(path)
    cpu_s = time.process_time() - cpu0

    tracemalloc.start()
    try:
        with pytest.raises(PlaybookInvalid):
            load_playbook(path)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()

    msg = str(ei.value)
    assert msg.startswith(f"{path}:") and expected in msg, msg
    assert "\n" not in msg
    assert cpu_s < 1.0, f"{name}: {cpu_s:.2f} s of CPU to refuse"
    assert peak < 100 * 2**20, f"{name}: {peak / 2**20:.0f} MiB to refuse"


def test_the_line_and_field_of_the_problem_are_named() -> None:
    text = HEAD + STEPS + "  - id: evict\n    type: evict-node\n    with:\n      hosts: [node02]\n      reason: r\n"
    cases = [
        (text + "      relaunch: maybe\n", "b.yaml:12: step 'evict' (evict-node): with.relaunch 'maybe' is not yes/no"),
        (
            text + "      scheduler: pbs\n",
            "b.yaml:12: step 'evict' (evict-node): with.scheduler 'pbs' is not none, slurm or k8s",
        ),
        (
            text.replace("trigger: {kinds: [crash]}", "trigger: {kinds: [crash], confidence: sure}"),
            "b.yaml:3: trigger.confidence 'sure' is not high, medium or low, or a number in (0, 1]",
        ),
        (
            text.replace("trigger: {kinds: [crash]}", "trigger: {kinds: [crash], confidence: 1.5}"),
            "b.yaml:3: trigger.confidence 1.5 is not high, medium or low, or a number in (0, 1]",
        ),
        (
            HEAD
            + STEPS
            + "  - id: tell\n    type: notify\n    with:\n      message: m\n      command: logger ${diagnose.culprit.summary}\n",
            "b.yaml:11: step 'tell' (notify): with.command 'logger ${diagnose.culprit.summary}' is not a list: the program",
        ),
        (
            HEAD + STEPS + "    timeout_s: '300'\n",
            "b.yaml:7: step 'diagnose': timeout_s '300' is not a positive, finite number",
        ),
        (
            HEAD + STEPS + "    timeout_s: yes\n",
            "b.yaml:7: step 'diagnose': timeout_s True is not a positive, finite number",
        ),
    ]
    for text_, expected in cases:
        with pytest.raises(PlaybookInvalid) as ei:
            parse_playbook(text_, "b.yaml")
        assert str(ei.value).startswith(expected), str(ei.value)


def test_a_good_file_keeps_its_gate_and_secret_inputs() -> None:
    book = parse_playbook(
        HEAD.replace("{kinds: [crash]}", "{kinds: [crash], confidence: medium}")
        + "inputs:\n  hook: {default: '', secret: yes}\n  n: 3\n"
        + STEPS,
        "ok.yaml",
    )
    assert book.trigger.min_confidence == 0.7 and book.trigger.confidence_label == "medium (>= 0.7)"
    assert book.secret_inputs == frozenset({"hook"}) and dict(book.inputs) == {"hook": "", "n": 3}
    assert parse_playbook(HEAD + STEPS, "ok.yaml").trigger.min_confidence == 0.9  # default: high
