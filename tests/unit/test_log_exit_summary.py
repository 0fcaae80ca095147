"""A crash summary pairs a worker's exit code with its own signal, not with another agent's.

torchelastic's agent prints `failed (exitcode: -9) local_rank: 0 (pid: ...) of binary: ...` per failed worker
(torch/distributed/elastic/multiprocessing/api.py, PContext `_close`/`wait` logging); two agents of one job can
report different exits in one pasted log."""

from __future__ import annotations

from trainctl.analyzers.logs import analyze_log_events
from trainctl.collectors.logs import parse_log_text
from trainctl.findings import FindingKind

LINE = (
    "[2024-05-01 10:00:0{s},000] torch.distributed.elastic.multiprocessing.api: [ERROR] failed (exitcode: {code}) "
    "local_rank: {lr} (pid: 123{lr}) of binary: /usr/bin/python"
)


def _crash(text: str) -> str:
    (f,) = [f for f in analyze_log_events(parse_log_text(text, source="job.log")) if f.kind is FindingKind.CRASH]
    return f.summary


def test_two_workers_exits_keep_their_own_signals() -> None:
    text = LINE.format(s=0, code=-9, lr=0) + "\n" + LINE.format(s=1, code=-6, lr=1) + "\n"
    summary = _crash(text)
    assert "exit code -9 (SIGKILL)" in summary and "SIGABRT" not in summary, summary
    one = _crash(LINE.format(s=0, code=-6, lr=1) + "\n")
    assert "exit code -6 (SIGABRT)" in one, one
