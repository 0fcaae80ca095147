"""What an error line no signature knows says in its own words (issue 13: never silence, and say what kind).

A log in which no signature matched but some line looks like an error gets "unclassified error"
events (collectors/logs.py `_unclassified`). Which kind of failure such a line reports is often in its
words even when its printer is unknown: the failure classes have a shared vocabulary, because the
printers take their wording from a few common sources. Each rule below names the kind and where its
words come from. The rules are read in order on each error-looking line, lines in log order; the
first line with a match decides, and a log whose error lines have none of these words stays a crash
(something failed, the words do not say what).

This is a guess from words, not a signature: the finding stays category `unclassified`, a warning at
the generic confidence (runbooks act only at high), blames nobody, and says which words it read.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from trainctl.findings import FindingKind as K


@dataclass(frozen=True)
class WordsRule:
    kind: K
    pattern: re.Pattern[str]
    why: str  # where the wording comes from


def _rule(kind: K, pattern: str, why: str) -> WordsRule:
    return WordsRule(kind, re.compile(pattern, re.I), why)


# Order is priority within one line: the more specific failure first ("NCCL timeout while connecting
# the store" is a rendezvous failure; "out of memory ... timed out" an OOM).
RULES: tuple[WordsRule, ...] = (
    _rule(
        K.OOM,
        r"out of memory|\bOOM\b|OutOfMemory|memory exhausted|Cannot allocate memory|\bENOMEM\b|RESOURCE_EXHAUSTED"
        r"|oom[-_ ]?kill|\bfailed to allocate \d+ bytes|\bResourceExhaustedError\b",
        "CUDA's cudaErrorMemoryAllocation string 'out of memory' (and HIP's), errno ENOMEM's strerror 'Cannot "
        "allocate memory', the Linux OOM killer (mm/oom_kill.c), absl/XLA's RESOURCE_EXHAUSTED status code and "
        "its allocators' 'Failed to allocate N bytes', TensorFlow's Python class for it (tensorflow/python/framework/"
        "errors_impl.py ResourceExhaustedError, raised on 'OOM when allocating tensor')",
    ),
    _rule(
        K.NUMERICAL,
        r"\bnan\b|non-?finite|not finite|\binf\b",
        "printf/str of IEEE-754 NaN and inf ('nan', 'inf'), torch's 'non-finite' checks (clip_grad_norm_)",
    ),
    _rule(
        K.COLLECTIVE_MISMATCH,
        r"\bcollectives?\b.{0,40}\bmismatch|\bmismatch\w*\b.{0,40}\bcollective",
        "torch c10d's 'Detected mismatch between collectives', NCCL's 'Mismatched collective' and NET/IB's "
        "'collective mismatch error': ranks that disagree on a collective. Of NCCL's 601 WARN strings (v2.30.7) the "
        "other mismatches (versions, buffer registration, its topology XML, a proxy's response size) are not that",
    ),
    _rule(
        K.FAULTY_HOST,
        r"\bXid\b|\bECC\b|fallen off the bus|\bNVRM\b|\bPCIe\b|\bNVLink\b|uncorrectable|GPU is lost|hardware error"
        r"|retired pages?\b|page retirement|row remap",
        "the NVIDIA driver's NVRM/Xid lines, NVML's 'GPU is lost', ECC and PCIe/NVLink error counters, the "
        "kernel's MCE '[Hardware Error]', DCGM's retired pages and row remapping (dcgmlib/dcgm_errors.h "
        "DCGM_FR_PENDING_PAGE_RETIREMENTS_MSG, _RETIRED_PAGES_LIMIT_MSG, _ROW_REMAP_FAILURE_MSG): the machine, not the "
        "program",
    ),
    _rule(
        K.CRASH,
        r"CUDA error|cudaError\w+|CUBLAS_STATUS_\w+|CUDNN_STATUS_\w+|illegal memory access|device-side assert"
        r"|\bhipError\w+|HIP error",
        "the CUDA runtime's errors as torch's C10_CUDA_CHECK prints them ('CUDA error: %s', c10/cuda/CUDAException), "
        "the cudaError_t / cublasStatus_t / cudnnStatus_t names, HIP's: the process's own GPU call failed (before "
        "'watchdog' or 'timed out', which name the thread that noticed, not what failed)",
    ),
    _rule(
        K.RENDEZVOUS_ERROR,
        r"rendezvous|init_process_group|MASTER_(?:ADDR|PORT)|TCPStore|\bstore\b|address already in use|EADDRINUSE"
        r"|\[c10d(?: - \w+)?\]|trying to connect|failed to listen|(?:Etcd|File|Prefix|Hash)Store\b|\betcd\b"
        r"|\bcoordinat(?:or|ion service)\b|failed to connect to all addresses",
        "torchelastic's rendezvous, c10d's TCPStore and init_process_group, the env:// variables, errno "
        "EADDRINUSE's 'Address already in use' (a port the job's master could not bind); the '[c10d]' tag of "
        "c10d's own logging macros (torch/csrc/distributed/c10d/logging.h), which the store's sockets print "
        "(socket.cpp: 'trying to connect', 'failed to listen'), not the process groups; c10d's other stores "
        "(EtcdStore, FileStore, PrefixStore, HashStore) and torchelastic's etcd rendezvous backend; the other stacks'"
        " rendezvous: JAX's jax.distributed.initialize(coordinator_address=...) and XLA/TSL's coordination service"
        " (xla/tsl/distributed_runtime/coordination), whose gRPC channel fails with gRPC's 'failed to connect to all"
        " addresses' (grpc src/core/load_balancing pick_first/round_robin: no address of the target answered)",
    ),
    _rule(
        K.HUNG_COLLECTIVE,
        r"timed? ?out|timeout|deadlock|\bhang|\bhung\b|stuck|watchdog",
        "errno ETIMEDOUT's 'Connection timed out', the watchdogs' 'timeout'/'timed out', 'hang'/'stuck': work "
        "that did not finish in time",
    ),
    _rule(
        K.NETWORK_ERROR,
        r"connection (?:refused|reset|closed|aborted)|broken pipe|network|unreachable|socket|infiniband|\bRDMA\b"
        r"|ibv_|\bEFA\b|libfabric|ncclSystemError|ncclRemoteError|\bNET/|\bgloo\b|gloo::",
        "errno strings ECONNREFUSED/ECONNRESET/EPIPE/ENETUNREACH/EHOSTUNREACH ('Connection refused', 'Connection "
        "reset by peer', 'Broken pipe', 'Network is unreachable', 'No route to host'... 'unreachable'), the "
        "verbs and libfabric APIs, NCCL's ncclSystemError/ncclRemoteError and its NET/ transports, gloo's (its "
        "transport's pair errors and gloo::IoException are the connection's)",
    ),
)


@dataclass(frozen=True)
class WordsGuess:
    kind: K
    words: str  # the words matched, as printed
    line: str  # the line they were read on


def kind_from_words(lines: Iterable[str], max_chars: int = 4000) -> WordsGuess | None:
    """The kind the first line with failure words names (RULES in order on each line), else None."""
    for line in lines:
        text = line[:max_chars]
        for rule in RULES:
            if m := rule.pattern.search(text):
                return WordsGuess(rule.kind, m.group(0), line)
    return None
