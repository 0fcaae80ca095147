"""An exception no signature knows, printed under a rank's own prefix, is that rank's failure
(collectors/logs.py _ranked_exceptions): the other ranks' timeouts after it are its consequence; the same
exception from every rank is the program's; a rank that also printed a classified failure only wraps it."""

from __future__ import annotations

from trainctl.analyzers.logs import analyze_log_events
from trainctl.collectors.logs import parse_log_text
from trainctl.findings import Category, FindingKind, Severity, sort_findings

WATCHDOG = (
    "[rank0]:[E1101 10:00:00.000000 123 ProcessGroupNCCL.cpp:616] [Rank 0] Watchdog caught collective operation "
    "timeout: WorkNCCL(SeqNum=10, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600042 "
    "milliseconds before timing out.\n"
)
RANK5_KEYERROR = (
    "[rank5]: Traceback (most recent call last):\n"
    '[rank5]:   File "train.py", line 10, in <module>\n'
    "[rank5]:     batch = next(it)\n"
    "[rank5]: KeyError: 'input_ids'\n"
)


def _findings(text: str):
    return sort_findings(analyze_log_events(parse_log_text(text, "x.log")))


def test_one_ranks_unknown_exception_is_the_cause_of_the_others_timeout() -> None:
    first = _findings(RANK5_KEYERROR + WATCHDOG)[0]
    assert (first.kind, first.category, first.ranks) == (FindingKind.CRASH, Category.EXCEPTION, (5,))
    assert first.summary == "rank 5 raised KeyError: 'input_ids'" and first.severity is Severity.CRITICAL


def test_the_same_exception_from_every_rank_blames_none() -> None:
    text = "".join(f"[rank{r}]: ValueError: bad shard index 7\n" for r in range(4))
    (f,) = _findings(text)
    assert f.ranks == () and f.summary.startswith("ranks 0, 1, 2, 3 (each) raised ValueError")


def test_its_words_say_its_kind() -> None:
    (f,) = _findings("[rank2]: WidgetAllocError: arena: Cannot allocate memory (3 retries)\n")
    assert (f.kind, f.ranks) == (FindingKind.OOM, (2,)) and "its words 'Cannot allocate memory'" in f.summary


def test_a_rank_that_printed_a_classified_failure_only_wraps_it() -> None:
    text = (
        "[rank3]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 3 has a total capacity of"
        " 79.15 GiB of which 1.02 GiB is free.\n"
        "[rank3]: WrapperError: step failed\n"
    )
    fs = _findings(text)
    assert fs[0].kind is FindingKind.OOM and fs[0].ranks == (3,)
    assert all(f.severity is not Severity.CRITICAL for f in fs[1:])  # the wrapper is no second root cause


def test_without_a_rank_prefix_it_stays_an_unclassified_line() -> None:
    (f,) = _findings("KeyError: 'input_ids'\n")
    assert f.category is Category.UNCLASSIFIED and f.ranks == ()
