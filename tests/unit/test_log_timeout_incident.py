"""A collective timeout belongs to the incident of what it waited for: torch's NCCL watchdog prints "WorkNCCL(...,
Timeout(ms)=T) ran for N milliseconds before timing out" once the collective has waited N ms (10 or 30 minutes by
default), so a rank that failed up to N ms before the line is its cause, not a separate incident. Where every line
carries a time (a CI runner's, `ts`, a shipper's) the gap between the two used to split them, and diagnose printed the
timeout above the out-of-memory that caused it."""

from __future__ import annotations

from trainctl.analyzers.logs import analyze_log_events
from trainctl.collectors.logs import parse_log_text
from trainctl.findings import FindingKind, sort_findings

OOM = (
    "{t} [rank3]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 3 has a total capacity "
    "of 79.15 GiB of which 1.20 GiB is free. Including non-PyTorch memory, this process has 77.9 GiB memory in use.\n"
)
TIMEOUT = (
    "{t} [rank0]:[E1206 {clock}.715298746 ProcessGroupNCCL.cpp:607] [PG ID 0 PG GUID 0(default_pg) Rank 0] Watchdog "
    "caught collective operation timeout: WorkNCCL(SeqNum=1234, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, "
    "Timeout(ms)=600000) ran for 600026 milliseconds before timing out.\n"
)


def printed(text: str):
    return sort_findings(analyze_log_events(parse_log_text(text, source="t.log")))


def test_the_failure_a_timeout_waited_for_is_printed_first() -> None:
    # a shipper's ISO time in front of every line; the watchdog fires 611 s after the OOM
    found = printed(
        OOM.format(t="2024-12-06T18:34:01.000Z") + TIMEOUT.format(t="2024-12-06T18:44:12.000Z", clock="18:44:12")
    )
    assert (found[0].kind, found[0].ranks) == (FindingKind.OOM, (3,))
    hung = next(f for f in found if f.kind is FindingKind.HUNG_COLLECTIVE)
    assert hung.evidence.get("first_failure") is False  # what the OOM led to


def test_a_timeout_long_after_its_own_wait_is_another_incident() -> None:
    # two hours later: the collective began 1 h 50 min after the OOM, another incident (a restarted run)
    found = printed(
        OOM.format(t="2024-12-06T10:00:00.000Z") + TIMEOUT.format(t="2024-12-06T12:00:00.000Z", clock="12:00:00")
    )
    assert all(f.evidence.get("first_failure") is not False for f in found)


def test_a_timeout_stays_with_the_teardown_printed_after_it() -> None:
    # every line at one time (a launcher that stamps its own clock): the wait began 10 min before, but what follows
    # the timeout (torchelastic's banner for the rank it aborted) is still its incident
    t = "2024-12-06T18:44:12.000Z"
    found = printed(
        TIMEOUT.format(t=t, clock="18:44:12")
        + f"{t} [2024-12-06 18:44:12,208] torch.distributed.elastic.multiprocessing.api: [ERROR] failed "
        "(exitcode: -6) local_rank: 0 (pid: 4242) of binary: /usr/bin/python3\n"
    )
    assert [f.evidence.get("first_failure") for f in found].count(True) == 1
