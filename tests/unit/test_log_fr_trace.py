"""torch's Flight Recorder analyzer's report pasted in a log (collectors/log_fr_trace.py), in the three spellings of
torch's tools/flight_recorder (2.4 print, 2.5 logger lines, 2.6+ "sequence number" with EntryState.log)."""

from __future__ import annotations

import pytest

from trainctl.analyzers.logs import analyze_log_events
from trainctl.collectors.logs import parse_log_text
from trainctl.findings import FindingKind

V25 = """Not all ranks joining collective 5 at entry 4
group info: 0:default_pg
collective: nccl:all_reduce
missing ranks: {1}
input sizes: [[3, 4]]
expected ranks: 2
collective state: scheduled
"""
V26 = """Not all ranks joining collective, sequence number: 4
collective: nccl:all_reduce
missing ranks: {1}
collective state: scheduled
Not all ranks joining collective, sequence number: 5
collective: nccl:broadcast
missing ranks: {1}
"""


def _hangs(text: str):
    return [f for f in analyze_log_events(parse_log_text(text, "fr.txt")) if f.kind is FindingKind.HUNG_COLLECTIVE]


@pytest.mark.parametrize("text, seq", [(V25, 5), (V26, 4)], ids=["2.5", "2.6"])
def test_the_one_missing_rank_is_the_culprit(text: str, seq: int) -> None:
    (f,) = _hangs(text)
    assert f.ranks == (1,) and f.confidence < 0.9  # torch's verdict, below the runbooks' gate
    assert f"rank 1 missing from nccl:all_reduce collective (sequence number {seq})" in f.summary


def test_the_later_reports_queue_behind_the_first() -> None:
    (f,) = _hangs(V26)
    assert "1 later report queue" in f.summary and f.evidence["lines"][0].endswith("sequence number: 4")


def test_several_missing_ranks_are_named_not_blamed_alone_and_a_report_without_them_is_not_read() -> None:
    (f,) = _hangs("Not all ranks joining collective for group 0:default_pg collective nccl:all_reduce "
                  "Missing ranks are {2, 5}\n")  # fmt: skip
    assert f.ranks == () and "ranks 2, 5 missing" in f.summary
    assert all("Flight Recorder" not in f.summary for f in _hangs("Not all ranks joining collective 5 at entry 4\n"))
