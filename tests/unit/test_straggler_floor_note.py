"""The note on a slowdown the straggler analyzer saw but did not name: under its floor (min_step_share, or
brief_min_step_share when brief). Synthetic timelines from tests/unit/straggler_timelines.py."""

from __future__ import annotations

import re

import pyarrow.compute as pc
import pytest
from straggler_timelines import make_timeline

from trainctl import dataset
from trainctl.analyzers import run_analysis, stragglers
from trainctl.analyzers.stragglers import BELOW_FLOOR, NOT_JUDGED, find_stragglers
from trainctl.schemas import SignalKind
from trainctl.signals import Signals

# 1.5x on the 4 ms data phase is 2 ms of a ~122 ms step: 1.6%, under the 2% floor (min_step_share).
SUB_FLOOR = dict(slow_rank=1, factor=1.5, phase="data", jitter=0.02)


def _analysis(**kwargs):
    return run_analysis(Signals(None, {SignalKind.TIMELINE: make_timeline(**kwargs)}))


def _below_floor(notes) -> list[str]:
    return [n for n in notes if n.startswith(BELOW_FLOOR)]


def test_a_sub_floor_slowdown_is_one_note_and_no_finding() -> None:
    a = _analysis(**SUB_FLOOR)
    assert a.findings == ()
    (note,) = a.notes
    assert note.startswith(BELOW_FLOOR) and not note.startswith(NOT_JUDGED)
    assert "rank 1 on node01, data " in note, note
    ratio = float(re.search(r"data (\d+\.\d+)x its peers", note).group(1))
    assert ratio == pytest.approx(1.5, rel=0.05), note
    extra_ms, share = re.search(r"(\d+\.\d+) ms more per step, (\d+\.\d+)% of a typical", note).groups()
    assert float(extra_ms) == pytest.approx(2.0, rel=0.1) and 1.0 < float(share) < 2.0, note
    assert "(steps 0-199)" in note and note.endswith("under the 2% floor (min_step_share)"), note


def test_a_brief_slowdown_says_it_is_brief() -> None:
    # 60 steps (7 s), 4.9 ms more optimizer: 4% of a step, over the 2% floor but under the 10% a brief one needs.
    notes: list[str] = []
    t = make_timeline(ranks=4, slow_rank=2, factor=1.6, phase="optimizer", slow_steps=(140, 200))
    assert find_stragglers(t, notes=notes) == []
    (note,) = notes
    assert note.startswith(f"{BELOW_FLOOR}: rank 2 on node02, optimizer 1.") and "(steps 140-199)" in note, note
    assert "brief (about 7" in note and "a brief slowdown needs 10% (brief_min_step_share)" in note, note
    assert note.endswith("and 2 steps lost in all (brief_min_lost_steps; this one: 2.4)"), note


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(jitter=0.05),
        # rank 1's work is 1.15x (under the 1.2x line) and rank 0 waits 1.7x longer in communication: naming
        # rank 0 would blame the waiting rank, so collective episodes are never the note's subject.
        dict(ranks=2, per_host=1, slow_rank=1, factor=1.15, phase=["forward", "backward"]),
    ],
    ids=["clean run", "a rank waiting for a sub-threshold one"],
)
def test_no_note_without_a_work_slowdown(kwargs: dict) -> None:
    notes: list[str] = []
    assert find_stragglers(make_timeline(**kwargs), notes=notes) == [] and notes == []
    assert _analysis(**kwargs).notes == ()
    # the same call on a sub-floor slowdown does note it
    assert len(_below_floor(_analysis(**SUB_FLOOR).notes)) == 1


def test_a_named_straggler_gets_no_note_and_the_note_changes_no_finding() -> None:
    # The same 1.5x data slowdown is named under a 1% floor: then there is a finding and no note.
    t = make_timeline(**SUB_FLOOR)
    notes: list[str] = []
    (f,) = find_stragglers(t, min_step_share=0.01, notes=notes)
    assert f.ranks == (1,) and notes == []
    assert find_stragglers(t, min_step_share=0.01) == [f]
    assert find_stragglers(t, notes=notes) == [] and len(notes) == 1
    a = _analysis(slow_rank=3)
    assert [f.ranks for f in a.findings] == [(3,)] and _below_floor(a.notes) == []


def test_a_short_run_keeps_its_not_judged_note() -> None:
    a = _analysis(**SUB_FLOOR, steps=10)
    assert a.findings == ()
    (note,) = a.notes
    assert note.startswith(f"{NOT_JUDGED}, the timeline covers 10 step(s)"), note
    assert _below_floor(a.notes) == []
    assert len(_below_floor(_analysis(**SUB_FLOOR).notes)) == 1  # 200 steps: judged, and the note is there


def test_a_lazy_timeline_gets_the_same_note_from_one_pass(tmp_path, monkeypatch) -> None:
    # A timeline too big to load: the note comes from the episodes of the one scan, its host from the files'
    # folders and footers (no query for hosts, no second window pass).
    t = make_timeline(**SUB_FLOOR)
    for h in sorted(set(t["host"].to_pylist())):
        dataset.write_table(tmp_path, SignalKind.TIMELINE, h, t.filter(pc.equal(t["host"], h)))
    lazy = dataset.open_lazy(tmp_path, SignalKind.TIMELINE)
    passes = []
    real = stragglers._window_values
    monkeypatch.setattr(stragglers, "_window_values", lambda *a: passes.append(1) or real(*a))

    def no_scan(*a):
        raise AssertionError("the note's host must come without a scan")

    monkeypatch.setattr(stragglers, "_hosts_of_files", no_scan)
    monkeypatch.setattr(stragglers, "_phase_steps", no_scan)
    found, notes = stragglers.analyze_with_notes(Signals(None, {SignalKind.TIMELINE: lazy}))
    assert found == [] and len(passes) == 1
    in_memory: list[str] = []
    find_stragglers(t, notes=in_memory)
    assert notes == in_memory and "rank 1 on node01, data " in notes[0], notes
