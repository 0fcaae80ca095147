"""Naming the culprit across lines (collectors/log_identity.py): the multi-line cases of
tests/fixtures/logs/source_identity.jsonl (bench/logs_source_coverage.py --cases), and the pairing rules."""

from __future__ import annotations

import pytest
from bench_modules import load_bench  # tests/ is on sys.path

from trainctl.analyzers.logs import analyze_log_events
from trainctl.collectors.log_identity import Identity, read_identity, shortened
from trainctl.collectors.log_signatures.rule import plausible_host
from trainctl.collectors.logs import clean_lines, parse_log_text

coverage = load_bench("logs_source_coverage")
CASES = coverage.load(coverage.IDENTITY_CASES)

INIT = "{h}:{pid}:{pid}1 [0] NCCL INFO comm 0x55aa03c1f9e0 rank {r} nranks {n} cudaDev 0 nvmlDev 0 busId 1b000 - Init START"


def test_every_case_cites_its_source_and_spans_lines() -> None:
    assert len(CASES) >= 8 and len({c["id"] for c in CASES}) == len(CASES)
    for c in CASES:
        assert all(c["source"].get(k) for k in ("project", "file", "version")), c["id"]
    assert sum(len(c["lines"]) > 1 for c in CASES) >= 6


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_case(case: dict) -> None:
    assert coverage.mismatch(case) is None, coverage.mismatch(case)


def _identity(lines: list[str]) -> Identity:
    return read_identity(clean_lines("\n".join(lines)), plausible_host=plausible_host)


def test_pid_of_largest_communicator_is_the_rank() -> None:
    lines = [
        INIT.format(h="n1", pid=7, r=0, n=2),
        INIT.format(h="n1", pid=7, r=5, n=8),
        INIT.format(h="n2", pid=9, r=6, n=8),
    ]
    ident = _identity(lines)
    assert ident.rank_of("n1", 7) == 5
    assert ident.host_of(5) == "n1" and ident.host_of(6) == "n2"
    assert ident.host_of(0) is None  # the 2-rank communicator's rank 0 is no global rank


# NVIDIA/nccl src/transport/shm.cc, p2p.cc and net.cc sendSetup print "Channel %02d : %d[..] -> %d[..] via ..." with
# their own rank first; net.cc recvSetup prints "... [receive] via ..." with the peer's first.
CHANNEL = "{h}:{pid}:{pid}0 [0] NCCL INFO Channel 0{c} : {a}[1020] -> {b}[1040] {d}via {via}"


def test_channel_lines_name_a_process_rank_where_no_init_line_does() -> None:
    lines = [
        CHANNEL.format(h="n1", pid=51, c=0, a=0, b=2, d="", via="SHM/direct/direct"),
        CHANNEL.format(h="n1", pid=51, c=1, a=0, b=3, d="", via="SHM/direct/direct"),
        CHANNEL.format(h="n1", pid=53, c=0, a=0, b=2, d="[receive] ", via="NET/IB/0"),
        CHANNEL.format(h="n1", pid=54, c=0, a=1, b=3, d="[send] ", via="NET/IB/0"),
        CHANNEL.format(h="n1", pid=54, c=1, a=4, b=5, d="[send] ", via="NET/IB/0"),  # a second communicator
    ]
    ident = _identity(lines)
    assert ident.rank_of("n1", 51) == 0 and ident.rank_of("n1", 53) == 2
    assert ident.rank_of("n1", 54) is None  # two ranks in its channel lines: which is the world's is unknown
    # an init line anywhere in the excerpt is the better source: channel lines are not read then
    assert _identity([*lines, INIT.format(h="n1", pid=99, r=7, n=8)]).rank_of("n1", 51) is None


def test_an_nccl_warn_is_blamed_on_the_rank_its_pids_channel_lines_name() -> None:
    text = "\n".join(
        [
            CHANNEL.format(h="n1", pid=51, c=0, a=0, b=2, d="", via="SHM/direct/direct"),
            CHANNEL.format(h="n1", pid=52, c=0, a=1, b=0, d="", via="SHM/direct/direct"),
            "n1:51:51 [0] enqueue.cc:1085 NCCL WARN Cuda failure 'out of memory'",
        ]
    )
    (f,) = [f for f in analyze_log_events(parse_log_text(text, "x.log")) if f.ranks]
    assert f.ranks == (0,) and f.hosts == ("n1",)


def test_a_pairing_seen_twice_differently_settles_nothing() -> None:
    ident = _identity([INIT.format(h="n1", pid=7, r=3, n=8), INIT.format(h="n2", pid=70, r=3, n=8)])
    assert ident.host_of(3) is None
    assert ident.rank_of("n1", 7) == 3 and ident.rank_of("n2", 70) == 3


PDSH_RANK4 = "n1: [rank4]:[W1126 10:02:11.123456789 ProcessGroupNCCL.cpp:4115] [PG ID 0 PG GUID 0 Rank 4]  using GPU 0"


def test_pdsh_prefix_pairs_its_rank_tag() -> None:
    assert _identity([PDSH_RANK4, INIT.format(h="n2", pid=70, r=3, n=8)]).host_of(4) == "n1"


def test_a_wrap_glued_onto_another_hosts_line_pairs_nothing() -> None:
    """A line followed by one padded with spaces to its width reads as a terminal wrap: the pdsh line
    is glued onto node02's NCCL line, whose host must not be paired with the rank tag of the glued text."""
    second = INIT.format(h="node02", pid=71, r=2, n=8)  # longer than the pdsh line
    lines = [INIT.format(h="node02", pid=70, r=3, n=8), second, PDSH_RANK4.ljust(len(second))]
    assert _identity(lines).host_of(4) is None
    # unpadded, the same lines are three records and the pdsh prefix pairs its rank tag
    assert _identity(lines[:2] + [PDSH_RANK4]).host_of(4) == "n1"


def test_an_init_line_a_wrap_cut_at_its_end_still_pairs_its_own_rank() -> None:
    """A terminal 120 wide cuts NCCL's init line after its rank ("... busId 200000 - Init COMPLE" / "TE"): the
    prefix and the rank are both on the first physical line, so the glued tail cannot have brought them."""
    init = "ccab4f7a6a8b:22851:22981 [1] NCCL INFO comm 0x7f72fc002f70 rank 1 nranks 2 cudaDev 1 busId 200000 - Init COMPLETE"
    cut = 100  # lines cut at one width (the other two full ones show the terminal's width)
    wrapped = [init[:cut], init[cut:], "step 1 " + "x" * 40, "y" * cut, "z" * cut]
    assert next(iter(clean_lines("\n".join(wrapped)))).wrap_joined
    assert _identity(wrapped).host_of(1) == "ccab4f7a6a8b"


def test_completed_culprit_cites_the_pairing_line() -> None:
    oom = "[rank6]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.10 GiB"
    text = "\n".join([INIT.format(h="n2", pid=9, r=6, n=8), oom])
    first = analyze_log_events(parse_log_text(text))[0]
    assert (first.ranks, first.hosts) == ((6,), ("n2",))
    assert first.evidence["identity_lines"] == [1]


def test_reporter_host_is_kept_as_reporter_only() -> None:
    text = "\n".join(
        [
            INIT.format(h="n2", pid=9, r=6, n=8),
            "[rank6]:[E1126 10:32:11.715298746 ProcessGroupNCCL.cpp:632] [Rank 6] Watchdog caught collective "
            "operation timeout: WorkNCCL(SeqNum=4, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) "
            "ran for 600081 milliseconds before timing out.",
        ]
    )
    findings = analyze_log_events(parse_log_text(text))
    assert [(f.ranks, f.hosts) for f in findings] == [((), ())]


@pytest.mark.parametrize(
    ("host", "cut"), [("...-48", True), ("node…", True), ("gpu-...-7", True), ("node48", False), ("10.0.0.5", False)]
)
def test_shortened(host: str, cut: bool) -> None:
    assert shortened(host) is cut


ELASTIC_BANNER = """E1126 10:40:02.101000 2190 torch/distributed/elastic/multiprocessing/api.py:869] failed (exitcode: -6) local_rank: 1 (pid: 2202) of binary: /usr/bin/python3
torch.distributed.elastic.multiprocessing.errors.ChildFailedError:
============================================================
train.py FAILED
------------------------------------------------------------
Failures:
  <NO_OTHER_FAILURES>
------------------------------------------------------------
Root Cause (first observed failure):
[0]:
  time      : 2024-11-26_10:40:02
  host      : node-b.cluster.local
  rank      : 3 (local_rank: 1)
  exitcode  : -6 (pid: 2202)
  error_file: <N/A>
  traceback : Signal 6 (SIGABRT) received by PID 2202
============================================================"""


def test_elastic_banner_pid_names_the_rank_of_an_nccl_printer() -> None:
    """The banner's worker pid (getfqdn host) is the pid of NCCL's prefix (gethostname cut at '.')."""
    text = "node-b:2202:2350 [1] NCCL WARN NET/IB : mlx5_1:1 Got async event : port error\n" + ELASTIC_BANNER
    by_kind = {f.kind.value: f for f in analyze_log_events(parse_log_text(text))}
    assert (by_kind["crash"].ranks, by_kind["crash"].hosts) == ((3,), ("node-b.cluster.local",))
    assert (by_kind["network_error"].ranks, by_kind["network_error"].hosts) == ((3,), ("node-b",))
    other_pid = text.replace("node-b:2202:2350", "node-b:2203:2350")
    ib = next(f for f in analyze_log_events(parse_log_text(other_pid)) if f.kind.value == "network_error")
    assert ib.ranks == ()  # another worker's pid: nothing pairs it


def test_a_name_that_is_no_machine_pairs_nothing() -> None:
    ident = _identity([INIT.format(h="localhost", pid=7, r=3, n=8), INIT.format(h="...-48", pid=70, r=2, n=8)])
    assert ident.host_of(3) is None and ident.host_of(2) is None
    banner = ELASTIC_BANNER.replace("node-b.cluster.local", "localhost")
    oom = "[rank3]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.10 GiB"
    findings = analyze_log_events(parse_log_text(oom + "\n" + banner))
    assert next(f for f in findings if f.kind.value == "oom").hosts == ()
