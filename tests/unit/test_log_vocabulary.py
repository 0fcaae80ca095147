"""An error line no signature knows takes the kind its own words say (collectors/log_vocabulary.py), stays
`unclassified`, blames nobody and says which words it read; without such words it stays a crash."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from trainctl.analyzers.logs import analyze_log_events
from trainctl.collectors.log_vocabulary import RULES, kind_from_words
from trainctl.collectors.logs import parse_log_text
from trainctl.findings import Category, FindingKind
from trainctl.ops.playbook.model import ConfidenceLevel, Trigger


def _findings(text: str):
    return analyze_log_events(parse_log_text(text, "x.log"))


# Printers no signature knows (invented programs), each using a failure class's shared wording.
@pytest.mark.parametrize(
    "line, kind, words",
    [
        ("WidgetAllocError: arena: Cannot allocate memory (3 retries)", FindingKind.OOM,
         "Cannot allocate memory"),
        ("ERROR trainer.py:88 halting: grad_scale became inf at step 1200", FindingKind.NUMERICAL, "inf"),
        ("FATAL allgather_guard: collective mismatch between ranks 3 and 5", FindingKind.COLLECTIVE_MISMATCH,
         "collective mismatch"),
        ("ERROR gpu_probe: NVLink 2 of device 3 went down", FindingKind.FAULTY_HOST, "NVLink"),
        ("launcher error: could not reach MASTER_ADDR gpu-master-0 after 10 tries", FindingKind.RENDEZVOUS_ERROR,
         "MASTER_ADDR"),
        ("CRITICAL allreduce_guard: operation stuck for 1800 s, aborting", FindingKind.HUNG_COLLECTIVE, "stuck"),
        ("ShardServerError: Connection refused (111) talking to 10.0.0.7:5000", FindingKind.NETWORK_ERROR,
         "Connection refused"),
    ],
)  # fmt: skip
def test_an_unknown_printers_words_say_the_kind(line: str, kind: FindingKind, words: str) -> None:
    (f,) = _findings(f"step 10 loss 2.1\n{line}\n")
    assert (f.kind, f.category) == (kind, Category.UNCLASSIFIED)
    assert f"its words '{words}' say {kind.value}" in f.summary and line[:60] in f.summary
    assert f.ranks == () and f.hosts == ()  # words say what failed, not who
    # a guess from words is below a runbook's default gate: a person reads it, nothing acts on it
    assert not Trigger(kinds=(kind,)).acts_on(f) and f.confidence < ConfidenceLevel.MEDIUM.min_confidence


def test_a_cpp_exceptions_what_line_is_read_for_its_words() -> None:
    # libstdc++'s verbose terminate handler (libsupc++/vterminate.cc) prints the exception's message on its own
    # "  what():  " line: that line, not the "terminate called" one, says what failed
    (f,) = _findings(
        "terminate called after throwing an instance of 'dlib::cuda_error'\n"
        "  what():  Error while calling cudaMalloc(&data, n) in file gpu_data.cpp:190. code: 2, reason: out of memory\n"
    )
    assert (f.kind, f.category) == (FindingKind.OOM, Category.UNCLASSIFIED) and "out of memory" in f.summary


def test_without_failure_words_it_stays_a_crash() -> None:
    (f,) = _findings("FrobnicatorError: the widget refused to spin\n")
    assert (f.kind, f.category) == (FindingKind.CRASH, Category.UNCLASSIFIED) and "its words" not in f.summary


def test_the_first_line_with_words_decides_and_the_log_is_one_finding() -> None:
    text = (
        "FrobnicatorError: the widget refused to spin\n"  # no words: passed over
        "ERROR shard 3: request timed out after 600 s\n"  # first words: a hang
        "ERROR shard 3: Connection reset by peer\n"
    )
    (f,) = _findings(text)
    assert f.kind is FindingKind.HUNG_COLLECTIVE and "'timed out'" in f.summary
    assert "3 error-looking lines" in f.summary


def test_within_one_line_the_rules_order_decides() -> None:
    g = kind_from_words(["ERROR: allocation timed out: out of memory on device 0"])
    assert g is not None and g.kind is FindingKind.OOM  # OOM is read before a timeout


def test_a_known_signature_is_not_overridden_by_words() -> None:
    (f,) = _findings("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n")
    assert f.kind is FindingKind.OOM and f.category is not Category.UNCLASSIFIED and "its words" not in f.summary


def test_every_rule_documents_where_its_words_come_from() -> None:
    assert len({r.kind for r in RULES}) == len(RULES) and all(len(r.why) > 40 for r in RULES)


_ALPHABET = st.characters(whitelist_categories=("L", "N", "Zs"), whitelist_characters=":._-")


@given(st.text(_ALPHABET, max_size=120))
def test_any_line_gives_at_most_one_unclassified_finding_that_blames_nobody(body: str) -> None:
    for f in _findings(f"WidgetError: {body}\n"):
        if f.category is Category.UNCLASSIFIED:
            assert f.ranks == () and f.hosts == ()
            want = kind_from_words([f"WidgetError: {body}"])
            assert f.kind is (want.kind if want else FindingKind.CRASH)


@pytest.mark.parametrize(
    "line, kind",
    [
        # a watchdog that reports a CUDA error: the error is what failed, the watchdog only noticed it
        ("[E1 ProcessGroupX.cpp:9] [Rank 7] watchdog thread terminated with exception: CUDA error: unknown error",
         FindingKind.CRASH),
        # c10d's logging macros tag the store's sockets "[c10d]" (torch/csrc/distributed/c10d/logging.h)
        ("[E socket.cpp:1] [c10d] The client socket has timed out after 60s while trying to connect to (h, 2222).",
         FindingKind.RENDEZVOUS_ERROR),
        # torchelastic's etcd rendezvous backend (torch/distributed/elastic/rendezvous/etcd_store.py, etcd_server.py)
        ("LookupError: Timeout while waiting for keys in EtcdStore", FindingKind.RENDEZVOUS_ERROR),
        ("TimeoutError: Timed out waiting for etcd server to be ready!", FindingKind.RENDEZVOUS_ERROR),
        # the other stacks' rendezvous: JAX's coordinator, XLA/TSL's coordination service over gRPC
        ("RuntimeError: UNAVAILABLE: failed to connect to all addresses; last error: UNKNOWN: ipv4:10.0.0.1:1234",
         FindingKind.RENDEZVOUS_ERROR),
        ("ERROR: Barrier timed out in the coordination service after 300 s", FindingKind.RENDEZVOUS_ERROR),
        # gloo's transport errors are the connection's
        ("[E ProcessGroupX.cpp:3] Gloo connectFullMesh failed with [gloo/transport/tcp/pair.cc:144] no error",
         FindingKind.NETWORK_ERROR),
    ],
)  # fmt: skip
def test_words_that_name_what_failed_come_before_words_that_name_who_noticed(line: str, kind: FindingKind) -> None:
    from trainctl.collectors.log_vocabulary import kind_from_words

    guess = kind_from_words([line])
    assert guess is not None and guess.kind is kind


def test_a_mismatch_that_is_not_about_collectives_is_not_a_collective_mismatch() -> None:
    from trainctl.collectors.log_vocabulary import kind_from_words

    # NVIDIA/nccl src/init.cc and src/graph/xml.cc (v2.30.7): a version and a topology mismatch, not collectives
    for line in ("NCCL WARN Mismatched NCCL version detected : rank 3 version 22703 rank 0 version 22105",
                 "NCCL WARN XML Mismatch : gpu / nic"):  # fmt: skip
        guess = kind_from_words([line])
        assert guess is None or guess.kind is not FindingKind.COLLECTIVE_MISMATCH, line


@pytest.mark.parametrize(
    "line",
    [
        # open-gpu-kernel-modules 595.45.04 NV_PRINTF(LEVEL_ERROR, ...) lines as dmesg shows them ("NVRM: <func>: ...")
        "[  194.004435] NVRM: kgspBootstrap_GH100: GSP-FMC reported an error while attempting to boot GSP: 0x5",
        "[  194.004435] NVRM: kgmmuServicePriFaults_GV100: Physical MMU fault",  # kern_gmmu_gv100.c
    ],
)
def test_a_driver_failure_line_no_signature_knows_is_read_by_its_words(line: str) -> None:
    (f,) = _findings(line + "\n")
    assert (f.kind, f.category) == (FindingKind.FAULTY_HOST, Category.UNCLASSIFIED) and "'NVRM' say" in f.summary
    assert f.ranks == () and f.hosts == ()


def test_a_driver_line_that_reports_no_failure_stays_silent() -> None:
    # kern_gsp_*.c's boot dump (NV_PRINTF of the GSP firmware's layout): values, no failure words
    assert _findings("[  194.004435] NVRM: kgspDumpGspLogs: bootCount:              0x3\n") == []


_CUT = (
    "Traceback (most recent call last):\n"
    '  File "tools/train_net.py", line 132, in train\n'
    "    all_metrics_dict = comm.gather(metrics_dict)\n"
    '  File "/opt/venv/lib/python3.11/site-packages/torch/distributed/c10d_logger.py", line 81, in wrapper\n'
    "    return func(*args, **kwargs)\n"
)


def test_a_traceback_cut_off_inside_a_collective_says_the_collective_failed() -> None:
    """A paste that stops inside a traceback through a collective call (its exception line not in the text): the
    collective raised, a network error at the unclassified level, blaming nobody. With its exception line there, the
    line says why: a known signature, its words, or an unknown exception (a crash)."""
    (f,) = _findings(_CUT)
    assert (f.kind, f.category) == (FindingKind.NETWORK_ERROR, Category.UNCLASSIFIED)
    assert "stops inside a collective call ('all_metrics_dict = comm.gather(metrics_dict)')" in f.summary
    assert f.ranks == () and f.hosts == ()
    (f,) = _findings(_CUT + "ValueError: the dict holds a tensor\n")
    assert (f.kind, f.category) == (FindingKind.CRASH, Category.UNCLASSIFIED) and "collective" not in f.summary
    # a logger's prefix on every line (vLLM's workers) does not hide the exception line
    prefixed = "".join(f"(Worker pid=7) ERROR 06-04 12:45:50 [executor.py:932] {line}\n" for line in _CUT.splitlines())
    assert _findings(prefixed)[0].kind is FindingKind.NETWORK_ERROR
    prefixed += "(Worker pid=7) ERROR 06-04 12:45:50 [executor.py:932] ValueError: the dict holds a tensor\n"
    assert _findings(prefixed)[0].kind is FindingKind.CRASH
    (f,) = _findings(_CUT + "RuntimeError: CUDA error: an illegal memory access was encountered\n")
    assert f.kind is FindingKind.CRASH and f.category is not Category.UNCLASSIFIED
