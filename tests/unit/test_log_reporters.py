"""Who a log names when its lines name nobody by themselves (analyzers/logs.py _name_sole_reporter), and the
rank torch's own desync report finds behind (collectors/log_signatures/collectives.py nccl_desync_report)."""

from __future__ import annotations

import pytest

from trainctl.analyzers.logs import analyze_log_events
from trainctl.collectors.logs import parse_log_text
from trainctl.findings import FindingKind, sort_findings

# A traceback cut before its exception line (the paste ended there), printed by one rank under torch's prefix.
RANK15_CUT_TRACEBACK = (
    "[rank15]: Traceback (most recent call last):\n"
    '[rank15]:   File "/opt/train/pretrain.py", line 876, in <module>\n'
    "[rank15]:     main()\n"
    '[rank15]:   File "/usr/lib/python3.11/site-packages/torch/distributed/fsdp/_init_utils.py", line 127, in _init\n'
)


def _findings(text: str):
    return sort_findings(analyze_log_events(parse_log_text(text, "x.log")))


def test_one_ranks_crash_names_that_rank_below_the_runbook_gate() -> None:
    (f,) = _findings(RANK15_CUT_TRACEBACK)
    assert (f.kind, f.ranks) == (FindingKind.CRASH, (15,))
    assert f.evidence["culprit_basis"] == ["sole_reporter"] and f.confidence < 0.7  # informs, never evicts


def test_two_ranks_printing_errors_name_nobody() -> None:
    text = RANK15_CUT_TRACEBACK + RANK15_CUT_TRACEBACK.replace("rank15", "rank3")
    assert all(f.ranks == () for f in _findings(text))


def test_nccls_host_prefix_names_the_one_host_that_printed_the_error() -> None:
    line = "gpu-a17:104934:104934 [1] misc/cudawrap.cc:179 NCCL WARN Failed to find CUDA library libcuda.so\n"
    (f,) = _findings(line)
    assert f.hosts == ("gpu-a17",) and f.ranks == ()


@pytest.mark.parametrize(
    "text",
    [
        # a hang: the rank that prints a timeout is the one left waiting
        "[rank2]:[E1101 10:00:00.000000 1 ProcessGroupNCCL.cpp:616] [Rank 2] Watchdog caught collective operation "
        "timeout: WorkNCCL(SeqNum=10, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600042 "
        "milliseconds before timing out.\n",
        # a NaN loss is reduced over every rank and printed by the one that logs (DeepSpeed's log_dist "[Rank 0]")
        "[2026-07-30 09:16:32,952] [INFO] [logging.py:123:log_dist] [Rank 0] step=18, skipped=0, lr=[1e-06]\n"
        "steps: 18 loss: nan iter time (s): 3.235 samples/sec: 0.309\n",
        # "program: message" is no host ("nvidia-container-cli: ..." reads like pdsh's "host: ...")
        "nvidia-container-cli: detection error: cuda error: invalid device ordinal: unknown\n",
    ],
    ids=["timeout", "nan_logged_by_rank0", "program_name_prefix"],
)
def test_a_printer_that_is_not_where_it_failed_is_not_named(text: str) -> None:
    fs = _findings(text)
    assert fs and all(f.ranks == () and f.hosts == () for f in fs)


# torch/csrc/distributed/c10d/TraceUtils.h analyzeLaggingRanks / dumpSnapshot, as ProcessGroupNCCL prints it
# after a timeout under TORCH_NCCL_DESYNC_DEBUG=1 (each "\n\t" a line of its own).
DESYNC = (
    "[rank0]:[E515 18:36:47.341808597 ProcessGroupNCCL.cpp:632] [Rank 0] Watchdog caught collective operation "
    "timeout: WorkNCCL(SeqNum=241, OpType=ALLREDUCE, NumelIn=6, NumelOut=6, Timeout(ms)=600000) ran for 600086 "
    "milliseconds before timing out.\n"
    "[rank0]:[E515 18:36:47.343377708 ProcessGroupNCCL.cpp:1937] Rank 0\n"
    "\t - [0] Timeout at collective: ALLREDUCE, #315\n"
    "\t - To our best knowledge, the lagging/dead/mismatched ranks that caused the desync are:\n"
    "{lagging}"
    "\t - Snapshot of ranks' latest states:\n"
    "\t   #315 started ranks:\n"
    "\t     [0, 1, 2] started ALLREDUCE\n"
)


def test_the_desync_reports_one_lagging_rank_is_the_culprit_not_the_reporter() -> None:
    text = DESYNC.format(
        lagging="\t     [7] finished collective #182, but didn't join collective #183 (count from 1)\n"
    )
    first = _findings(text)[0]
    assert (first.kind, first.ranks) == (FindingKind.HUNG_COLLECTIVE, (7,))
    assert first.evidence["culprit_basis"] == ["desync_report"] and first.confidence == 0.85
    assert "reported by rank 0" in first.summary and "names rank 7 as the one behind" in first.summary


def test_a_rank_that_joined_but_never_finished_is_the_culprit() -> None:
    text = DESYNC.format(lagging="\t   - [3] joined but didn't finish collective #315 (count from 1)\n")
    assert _findings(text)[0].ranks == (3,)


def test_ranks_that_never_joined_any_collective() -> None:
    line = "\t - To our best knowledge, ranks [5] are the lagging ranks that caused this timeout. They never joined any collectives\n"
    assert _findings(DESYNC.format(lagging="") + line)[0].ranks == (5,)


def test_several_lagging_ranks_blame_none() -> None:
    text = DESYNC.format(lagging="\t   - [3, 6] joined but didn't finish collective #315 (count from 1)\n")
    assert all(f.ranks == () for f in _findings(text))
