"""A log handed over on its own that ends in NCCL's COLL trace (NCCL_DEBUG_SUBSYS=COLL) is read for where each process
stopped (collectors/log_coll_mismatch.read_coll_trace_end): all in one collective, or a minority behind the others.
The lines are in NCCL's own formats (NVIDIA/nccl 2.30.7 src/enqueue.cc INFO(NCCL_COLL, ...), src/init.cc's init line,
src/debug.cc's "host:pid:tid [cudaDev] NCCL INFO " prefix)."""

from __future__ import annotations

from trainctl.analyzers.logs import analyze_log_events
from trainctl.collectors.logs import parse_log_text
from trainctl.findings import FindingKind, Severity


def _coll(host: str, pid: int, dev: int, op_count: int, comm: str, op: str = "AllReduce", nranks: int = 4) -> str:
    return (
        f"{host}:{pid}:{pid + 300} [{dev}] NCCL INFO {op}: opCount {op_count:x} sendbuff 0x7f5e0eebec00 recvbuff "
        f"0x7f5e0eebec00 count 497280 datatype 7 op 0 root 0 comm {comm} [nranks={nranks}] stream 0x6e2ae1f0\n"
    )


def _init(host: str, pid: int, dev: int, comm: str, rank: int, nranks: int = 4) -> str:
    return (
        f"{host}:{pid}:{pid + 1} [{dev}] NCCL INFO ncclCommInitRank comm {comm} rank {rank} nranks {nranks} cudaDev "
        f"{dev} nvmlDev {dev} busId {dev + 1}000 commId 0x755f452018fb153e - Init COMPLETE\n"
    )


PROCS = [("gpu-a", 101, 0, "0x6e665910"), ("gpu-a", 102, 1, "0x70134010"), ("gpu-b", 201, 0, "0x6e33aa50"),
         ("gpu-b", 202, 1, "0x6de994f0")]  # fmt: skip


def _findings(text: str, *, on_its_own: bool = True):
    return analyze_log_events(parse_log_text(text, "x.log", ends_where_it_stopped=on_its_own))


def test_every_process_in_the_same_collective_at_the_end_is_a_collective_that_did_not_finish() -> None:
    text = "".join(_coll(h, p, d, n, c) for n in (0x386, 0x387, 0x388) for h, p, d, c in PROCS)
    (f,) = _findings(text)
    assert (f.kind, f.severity, f.confidence) == (FindingKind.HUNG_COLLECTIVE, Severity.WARNING, 0.3)
    assert "all 4 processes in AllReduce opCount 0x388" in f.summary and f.ranks == () and f.hosts == ()
    assert f.evidence["last_op_count_by_process"] == {f"{h}:{p}": "388" for h, p, _, _ in PROCS}
    assert f.evidence["read_from_absence"] is True


def test_a_process_behind_the_others_is_the_suspect_with_the_rank_its_init_line_gives() -> None:
    text = "".join(_init(h, p, d, c, r) for r, (h, p, d, c) in enumerate(PROCS))
    text += "".join(_coll(h, p, d, n, c) for n in (0x1E, 0x1F) for h, p, d, c in PROCS if n == 0x1E or p != 201)
    (f,) = _findings(text)
    assert f.kind is FindingKind.HUNG_COLLECTIVE and f.ranks == (2,) and f.confidence == 0.3
    assert "gpu-b:201 (rank 2) behind" in f.summary and "opCount 0x1f" in f.summary
    assert f.evidence["processes_behind"] == ["gpu-b:201"]


def test_a_redacted_host_left_on_the_line_still_splits_the_trace_by_process() -> None:
    # the printer's host as pasted ("<merlin-training>") is not a machine's name: no host is named, the pid splits
    text = "".join(_coll("<merlin-training>", p, d, n, c) for n in (7, 8) for _, p, d, c in PROCS if n == 7 or p != 102)
    (f,) = _findings(text)
    assert "<merlin-training>:102 behind" in f.summary and f.ranks == () and f.hosts == ()


def test_half_behind_a_trace_going_on_or_a_run_dirs_log_give_no_coll_reading() -> None:
    half = "".join(_coll(h, p, d, n, c) for n in (5, 6) for h, p, d, c in PROCS if n == 5 or h == "gpu-a")
    assert all("collective trace" not in f.summary for f in _findings(half))
    going_on = "".join(_coll(h, p, d, 5, c) for h, p, d, c in PROCS) + "step 12 loss 2.31\n"
    assert all("collective trace" not in f.summary for f in _findings(going_on))
    # a run dir's (or collected) rank log always ends mid-run: liveness is the heartbeats' to judge
    ended = "".join(_coll(h, p, d, 5, c) for h, p, d, c in PROCS)
    assert _findings(ended, on_its_own=False) == []


def test_processes_with_several_communicators_are_not_paired() -> None:
    # each process's own comm pointers cannot be matched across processes from the text
    text = "".join(_coll(h, p, d, 3, c) + _coll(h, p, d, 3, c[:-2] + "ff", op="AllGather") for h, p, d, c in PROCS)
    assert all("collective trace" not in f.summary for f in _findings(text))
