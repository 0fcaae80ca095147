"""Log signatures: classify lines of rank logs, kernel logs and pasted logs into log_events.

A pure parser: text in, a `log_events` table out (trainctl.schemas), plus a `host` column (the
host that printed the line, from the path or the text; trainctl.dataset readers add the same
column from the partition). Formats drift across PyTorch and NCCL versions (the table in
tests/fixtures/logs/README.md), so each signature matches the stable core of a message and
tolerates the era-specific parts around it.

Each line goes through three steps:

1. Noise removal: ANSI colours, tqdm bars glued with `\\r`, markdown quotes and auto-links,
   terminal wraps (continuation lines joined back), and line prefixes that carry who printed the
   line: `[rankN]:`, Ray `(Actor pid=N, ip=X)`, pdsh `host: `, NCCL `host:pid:tid [dev]`,
   syslog `Mon DD hh:mm:ss host kernel:`, dmesg `[ 12.3]` / `[Day Mon DD hh:mm:ss YYYY]`.
2. Signatures (SIGNATURES below, documented in docs/log-signatures.md): every signature is run
   on every line (a pasted log may have several messages collapsed into one line); a keyword
   prefilter keeps this one regex scan per ordinary line.
3. Blame: what the line alone proves. `self`: the failure happened in the process/host that
   printed it (its own OOM, CUDA error, Xid), so the culprit is that rank/host when the text or
   the path says who that is. `peer`: the line names a remote end as the failing side (a
   connection reset by a peer, an IB retry-exceeded completion, an unreachable rendezvous
   endpoint). `none`: the line only says who noticed (a watchdog timeout names its reporter; the
   rank that never arrived prints nothing).
"""

from __future__ import annotations

import html
import ipaddress
import json
import logging
import os
import re
import signal as _signal
import zlib
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa

from trainctl.collectors.log_coll_mismatch import read_coll_mismatch
from trainctl.collectors.log_identity import complete_culprits, read_identity
from trainctl.collectors.log_net_mismatch import read_net_mismatch
from trainctl.collectors.log_progress import INTERRUPTED, read_progress
from trainctl.collectors.log_vocabulary import kind_from_words
from trainctl.findings import Category, FindingKind, Severity
from trainctl.schemas import SignalKind, empty_table, schema_for

__all__ = [
    "Blame",
    "Signature",
    "SIGNATURES",
    "XID_MEANINGS",
    "clean_lines",
    "classify_line",
    "parse_log_text",
    "parse_log_file",
    "parse_run_logs",
    "attribute_to_host",
]

logger = logging.getLogger(__name__)

HOST_COLUMN = "host"


class Blame:
    SELF = "self"
    PEER = "peer"
    NONE = "none"


K, C, S = FindingKind, Category, Severity


@dataclass(frozen=True)
class Signature:
    """One classification rule. `keywords` (lower case) gate the regex: the pattern runs only on
    lines containing one of them. `generic` marks consequence/teardown lines that say something
    failed but not what (the analyzer uses them only when nothing more specific is there).
    `post` may refine kind/category/severity/blame from the extracted fields."""

    name: str
    pattern: re.Pattern[str]
    kind: FindingKind | None
    category: Category | None
    severity: Severity
    blame: str
    keywords: tuple[str, ...]
    doc: str
    generic: bool = False
    post: Callable[[Event], None] | None = None


@dataclass
class Event:
    """A classified line while it is built (mutable: `post` hooks refine it)."""

    line_no: int
    message: str
    signature: str
    kind: FindingKind | None
    category: Category | None
    severity: Severity
    blame: str
    generic: bool
    rank: int | None = None
    rank_basis: str | None = None
    host: str | None = None
    host_basis: str | None = None
    ts: datetime | None = None
    pg: str | None = None
    seq: int | None = None
    op: str | None = None
    xid: int | None = None
    gpu_pci: str | None = None
    exit_code: int | None = None
    peer: str | None = None
    culprit_rank: int | None = None
    culprit_host: str | None = None
    culprit_basis: str | None = None
    fields: dict[str, Any] = field(default_factory=dict)


# --------------------------------------------------------------------------------------------
# Xid meanings (NVIDIA "Xid catalog"; research/seeds.md §4). category + whether the Xid points at
# the hardware of the host that logged it (then the host is blamed) or is usually application-made.
# --------------------------------------------------------------------------------------------
_ECC_XIDS = {48, 63, 64, 92, 94, 95}
_NVLINK_XIDS = {74, 144, 145, 146, 147, 148, 149, 150}
XID_MEANINGS: Mapping[int, str] = {
    13: "graphics engine exception (usually an application bug)",
    31: "GPU memory page fault (usually an application bug)",
    32: "invalid or corrupted push buffer stream",
    38: "driver firmware error",
    43: "GPU stopped processing (usually an application fault)",
    45: "preemptive cleanup after a previous error (collateral)",
    48: "double-bit ECC error (DBE)",
    56: "display engine error",
    57: "error programming video memory interface",
    61: "internal micro-controller breakpoint/warning",
    62: "internal micro-controller halt",
    63: "ECC page retirement or row remapping recorded",
    64: "ECC page retirement or row remapping failure",
    68: "NVDEC0 exception",
    69: "graphics engine class error",
    74: "NVLink error",
    79: "GPU has fallen off the bus",
    92: "high single-bit ECC error rate",
    94: "contained ECC error",
    95: "uncontained ECC error",
    109: "context switch timeout",
    119: "GSP RPC timeout",
    120: "GSP error",
    121: "C2C link error",
    123: "SPI PMU RPC failure",
    136: "link training failure",
    140: "unrecovered ECC error",
    143: "GPU initialization failure",
    144: "NVLink SAW error",
    145: "NVLink RLW error",
    146: "NVLink TLW error",
    147: "NVLink TREX error",
    148: "NVLink NVLPW_CTRL error",
    149: "NVLink NETIR error",
    150: "NVLink MSE error",
    154: "GPU recovery action changed",
}
# Usually caused by the application (or collateral of another error): no host blame on their own.
_APP_XIDS = {13, 31, 43, 45, 68, 69, 109}
_INFO_XIDS = {45, 63}  # collateral / successful remap: worth a line, not an alarm by itself
_APP_FAULT_XIDS = {31, 43}  # the application's own fault on the GPU: a crash finding, not a host one


def _xid_post(ev: Event) -> None:
    root = ev.fields.get("root_xid")
    if root is not None:  # "45, ... caused by previous Xid 149": the earlier Xid is the cause
        ev.fields["reported_xid"] = ev.xid
        ev.xid = int(root)
    xid = ev.xid
    if xid is None:
        return
    ev.fields["xid_meaning"] = XID_MEANINGS.get(xid, "see NVIDIA's Xid catalog")
    if xid in _ECC_XIDS:
        ev.category = C.ECC
    elif xid in _NVLINK_XIDS:
        ev.category = C.NVLINK
    elif xid == 79:
        ev.category = C.GPU_LOST
    if xid == 154:
        m = re.search(r"to 0x[0-9a-f]+ \(([^)]+)\)", ev.message)
        if m:
            ev.fields["recovery_action"] = m.group(1)
            if m.group(1).strip().lower() == "none":
                ev.severity = S.INFO
    if xid in _APP_XIDS:
        ev.blame = Blame.NONE
        ev.severity = S.INFO if xid in _INFO_XIDS else S.WARNING
        if xid in _APP_FAULT_XIDS:
            # NVIDIA's Xid catalog: 31 (GPU memory page fault: an illegal address) and 43 (GPU stopped
            # processing: a user application fault) are the program's own fault on the GPU, i.e. a
            # crash of the process, not evidence about the host's hardware. 13 stays a (warning) Xid:
            # its causes include hardware, and the shared corpus labels it so (hw-02).
            ev.kind, ev.category = K.CRASH, C.CUDA_ERROR
    elif xid in _INFO_XIDS:
        ev.severity = S.WARNING


def _exit_post(ev: Event) -> None:
    code = ev.exit_code
    if code is None and ev.signature == "elastic_agent_failed":
        ev.generic = True  # "[ERROR] failed" with no exit code: the agent noticed, nothing more
    if ev.fields.get("signal"):  # spawn's "terminated with signal SIGKILL": named, no exit code
        ev.category = C.SIGNAL
    elif code is not None and code < 0:  # torchelastic reports death by signal N as exitcode -N
        ev.category = C.SIGNAL
        try:
            ev.fields["signal"] = _signal.Signals(-code).name
        except ValueError:
            pass


def _shell_status_post(ev: Event) -> None:
    """A shell's (and a container runtime's) exit status: 128 + N for a child killed by signal N."""
    code = ev.exit_code
    if code is not None and 128 < code < 160:
        try:
            ev.fields["signal"] = _signal.Signals(code - 128).name
            ev.category = C.SIGNAL
        except ValueError:
            pass


def _eviction_post(ev: Event) -> None:
    if (ev.fields.get("resource") or "").lower().startswith("memory"):
        ev.kind, ev.category = K.OOM, None  # the node ran out of memory: an out-of-memory, by kubelet


def _cuda_post(ev: Event) -> None:
    what = (ev.fields.get("cuda_error") or "").lower()
    if "ecc" in what:  # the app sees the DBE before dmesg is read: a hardware fault of this GPU
        ev.kind, ev.category, ev.severity = K.FAULTY_HOST, C.ECC, S.CRITICAL
    elif what.strip().startswith("out of memory"):  # cudaErrorMemoryAllocation (2): "out of memory"
        ev.kind, ev.category = K.OOM, None


# IB work-completion statuses that say the remote end failed (ibv_wc_status): 9 REM_INV_REQ,
# 10 REM_ACCESS, 11 REM_OP, 12 RETRY_EXC (the peer never acked), 13 RNR_RETRY_EXC. 5 (WR_FLUSH)
# and the rest are local consequences.
_IB_REMOTE_STATUS = {9, 10, 11, 12, 13}


def _ib_completion_post(ev: Event) -> None:
    status = ev.fields.get("ib_status")
    ev.blame = Blame.PEER if status is not None and int(status) in _IB_REMOTE_STATUS else Blame.NONE


def _reset_by_peer_post(ev: Event) -> None:
    # RST from the peer (its process died or its stack aborted) names the peer; "closed by peer"
    # (an orderly FIN, as at shutdown), "refused", "no route", "timed out" do not.
    ev.blame = Blame.PEER if "reset by peer" in ev.message.lower() else Blame.NONE


def _connect_warning_post(ev: Event) -> None:
    errno_ = ev.fields.get("errno")
    if errno_ is not None:
        ev.fields["errno"] = int(errno_)


def _oom_post(ev: Event) -> None:
    gpu = ev.fields.pop("gpu_legacy", None) or ev.fields.get("gpu")
    if gpu is not None:
        ev.fields["gpu"] = int(gpu)


def _aer_post(ev: Event) -> None:
    sev = ev.fields.get("aer_severity", "")
    if sev.endswith("(Fatal)"):
        ev.severity = S.CRITICAL
    elif sev in ("Corrected", "Correctable"):
        ev.severity = S.INFO


def _pcie_recovery_post(ev: Event) -> None:
    if ev.fields.get("pcie_recovery"):
        ev.severity = S.CRITICAL


def _mce_post(ev: Event) -> None:
    if ev.fields.get("mce_exception"):
        ev.severity = S.CRITICAL


def _death_signal_post(ev: Event) -> None:
    no = ev.fields.get("signal_no")
    if no is not None and not ev.fields.get("signal"):
        try:
            ev.fields["signal"] = _signal.Signals(int(no)).name
        except ValueError:
            pass


def _ibv_post(ev: Event) -> None:
    if ev.fields.get("ibv_call") == "modify_qp":  # may fail on what the remote side sent
        ev.blame = Blame.NONE


def _dataloader_post(ev: Event) -> None:
    sig = (ev.fields.get("signal_text") or "").strip().lower()
    if sig in ("killed", "bus error"):  # the OOM killer / a full /dev/shm: memory, not a bug
        ev.kind, ev.category = K.OOM, None


def _edac_post(ev: Event) -> None:
    if ev.fields.get("edac") == "UE":  # uncorrected: data was lost
        ev.severity = S.CRITICAL


def _named_self_post(ev: Event) -> None:
    """The line names the process that checked (a framework's own "Rank R ... node N"): take those."""
    rank = ev.fields.pop("self_rank", None)
    if rank is not None:
        ev.rank, ev.rank_basis = int(rank), "text"
    node = ev.fields.pop("self_node", None)
    if node and _plausible_host(node):
        ev.host, ev.host_basis = node, "text"


def _nvml_post(ev: Event) -> None:
    if ev.fields.get("nvml_error") == "GPU is lost":
        ev.category = C.GPU_LOST


def _barrier_post(ev: Event) -> None:
    """monitored_barrier: the rank named is the one that never arrived (rank 0 printed the line, on its host)."""
    if ev.fields.get("self_rank") is None:  # several ranks named: no single culprit
        ev.blame = Blame.NONE
        return
    ev.fields["reporter_host"] = ev.host
    ev.host = None
    _named_self_post(ev)


def _openmpi_signal_post(ev: Event) -> None:
    try:
        ev.fields["signal"] = _signal.Signals(int(ev.fields["signo"])).name
    except ValueError:
        pass
    _named_self_post(ev)


def _xla_barrier_post(ev: Event) -> None:
    if str(ev.fields.get("barrier_id", "")).startswith("PjRT_Client_Connect"):
        ev.kind, ev.category = K.RENDEZVOUS_ERROR, None


def _nccl_tests_post(ev: Event) -> None:
    text = str(ev.fields.get("nccl_text", ""))
    if ev.fields.get("tests_lib") == "CUDA" or text.startswith("unhandled cuda error"):
        ev.kind, ev.category = K.CRASH, C.CUDA_ERROR
        if ev.fields.get("tests_lib") == "CUDA":
            ev.blame = Blame.SELF


def _paddle_signal_post(ev: Event) -> None:
    if ev.fields.get("paddle_signal") == "Termination signal":
        # SIGTERM is sent from outside (a user, a scheduler, a launcher tearing down): what the process was doing
        # when it came (its C++ frames) is the story, not the signal
        ev.fields["signal"], ev.severity, ev.generic = "SIGTERM", S.WARNING, True


def _sxid_post(ev: Event) -> None:
    sev = ev.fields.get("sxid_severity")
    if sev == "Non-fatal":
        ev.severity = S.WARNING
    elif sev == "Correctable":
        ev.severity = S.INFO


def _nvml_error_post(ev: Event) -> None:
    if ev.fields.get("nvml_class") in ("GpuIsLost", "ResetRequired") or ev.message.startswith("No devices"):
        ev.category = C.GPU_LOST


def _launcher_exit_post(ev: Event) -> None:
    _exit_post(ev)
    if ev.signature == "launcher_child_exit" and "non-zero exit status" in ev.message:
        ev.severity, ev.generic = S.WARNING, True  # CalledProcessError re-raises the child's failure: a consequence


def _slurm_cancel_post(ev: Event) -> None:
    if ev.fields.get("cancel_reason") == "NODE FAILURE":  # a node of the job died; slurmctld's log names it
        ev.kind, ev.category = K.FAULTY_HOST, None


def _srun_node_failure_post(ev: Event) -> None:
    """One node named (not a hostlist range) is the failed node; a range stays in the fields."""
    node = ev.fields.get("failed_nodes", "")
    if node and "[" not in node and "," not in node:
        ev.host, ev.host_basis = node, "text"


def _pod_status_post(ev: Event) -> None:
    if "OOMKilled" in str(ev.fields.get("pod_status", "")):
        ev.kind, ev.category = K.OOM, None


def _srun_exit_post(ev: Event) -> None:
    if ev.exit_code is not None:
        ev.category = C.EXIT_CODE


def _ray_node_post(ev: Event) -> None:
    """The node Ray names (its IP) is the host that ran out of memory, whoever printed the line."""
    ip = ev.fields.pop("node_ip", None)
    if ip:
        ev.host, ev.host_basis = ip, "text"


def _overflow_post(ev: Event) -> None:
    low = ev.message.lower()
    if "minimum" in low or "cannot decrease" in low:
        ev.severity = S.CRITICAL  # loss scale bottomed out: training cannot recover by itself


def _sig(
    name: str,
    pattern: str,
    kind: FindingKind | None,
    category: Category | None,
    severity: Severity,
    blame: str,
    keywords: Iterable[str],
    doc: str,
    *,
    generic: bool = False,
    flags: int = 0,
    post: Callable[[Event], None] | None = None,
) -> Signature:
    return Signature(
        name,
        re.compile(pattern, flags),
        kind,
        category,
        severity,
        blame,
        tuple(k.lower() for k in keywords),
        doc,
        generic,
        post,
    )


_PCI = r"(?:PCI:)?(?P<gpu_pci>[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2})(?:\.[0-7])?"
_SIZE = r"[\d.]+ [KMGTP]i?B"
_ADDR = r"\[?(?P<peer>[^\s\[\]<>()]+?)\]?"

# The signature table. Order matters only for readability; every signature runs on every line.
SIGNATURES: tuple[Signature, ...] = (
    # ---- collective timeouts (NCCL watchdog, all eras) -------------------------------------
    _sig(
        "nccl_watchdog_timeout",
        # torch 1.8 ProcessGroupNCCL.cpp printed "Caught collective operation timeout: WorkNCCL(OpType=X,
        # TensorShape=[...], Timeout(ms)=N) ran for ...", 1.9-1.10 with "Watchdog caught" and TensorShape.
        r"(?:Watchdog c|\bC)aught collective operation timeout:\s*WorkNCCL\((?:SeqNum=(?P<seq>\d+),\s*)?OpType=(?P<op>\w+)"
        r"(?:,\s*TensorShape=\[[^\]\n]{0,200}\])?"
        r"(?:,\s*NumelIn=(?P<numel_in>-?\d+),\s*NumelOut=(?P<numel_out>-?\d+))?,\s*Timeout\(ms\)=(?P<timeout_ms>\d+)\)"
        # "ran for N milliseconds before timing out." ends it; a line cut there (a paste, a tqdm bar
        # glued in front that the excerpt ends on) still says which collective timed out
        r"(?:\s*ran for (?P<ran_ms>\d+) milliseconds)?",
        K.HUNG_COLLECTIVE,
        C.COLLECTIVE_TIMEOUT,
        S.CRITICAL,
        Blame.NONE,
        ["caught collective operation timeout"],
        "WorkNCCL(...) ran for N ms before timing out (<=1.10 without SeqNum, 2.1+ with NumelIn/Out). "
        "Names the reporting rank only: the culprit is whoever never arrived.",
    ),
    _sig(
        "nccl_timeout_at_work",
        # The counters are optional: a terminal or a log shipper that wraps the line keeps the SeqNum.
        r"Timeout at NCCL work: (?P<seq>\d+)(?:, last enqueued NCCL work: (?P<last_enqueued>-?\d+), "
        r"last completed NCCL work: (?P<last_completed>-?\d+))?",
        K.HUNG_COLLECTIVE,
        C.COLLECTIVE_TIMEOUT,
        S.CRITICAL,
        Blame.NONE,
        ["Timeout at NCCL work"],
        "torch 2.3 progress counters of a timed-out rank.",
    ),
    _sig(
        "nccl_watchdog_exception_at_work",
        r"Exception \(either an error or timeout\) detected by watchdog at work: (?P<seq>\d+), "
        r"last enqueued NCCL work: (?P<last_enqueued>-?\d+), last completed NCCL work: (?P<last_completed>-?\d+)",
        K.HUNG_COLLECTIVE,
        C.COLLECTIVE_TIMEOUT,
        S.WARNING,
        Blame.NONE,
        ["detected by watchdog at work"],
        "torch 2.4/2.5 progress counters; error or timeout, so generic.",
        generic=True,
    ),
    _sig(
        "nccl_watchdog_failure_seq",
        r"failure detected by watchdog at work sequence id: (?P<seq>\d+)\s*PG status: last enqueued work: "
        r"(?P<last_enqueued>-?\d+), last completed work: (?P<last_completed>-?\d+)",
        K.HUNG_COLLECTIVE,
        C.COLLECTIVE_TIMEOUT,
        S.WARNING,
        Blame.NONE,
        ["failure detected by watchdog"],
        "torch 2.6+ progress counters; error or timeout, so generic.",
        generic=True,
    ),
    _sig(
        "nccl_heartbeat_stuck",
        # torch ProcessGroupNCCL.cpp heartbeat monitor: LOG(ERROR) "Heartbeat monitor timed out! Process will be
        # terminated after dumping debug info. workMetaList_.size()=N", exit "ProcessGroupNCCL's watchdog got
        # stuck for N seconds without making progress in monitoring enqueued collectives."
        r"watchdog got stuck for (?P<stuck_s>\d+) seconds|Heartbeat monitor timed out! Process will be terminated",
        K.HUNG_COLLECTIVE,
        C.COLLECTIVE_TIMEOUT,
        S.CRITICAL,
        Blame.NONE,
        ["watchdog got stuck", "Heartbeat monitor timed out"],
        "Heartbeat monitor (TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC): the watchdog itself hung (a CUDA/NCCL call "
        "that never returns); followed by an F-level terminate.",
    ),
    _sig(
        "nccl_dump_signal",
        # (2.4+: "Observed flight recorder dump signal from another rank via TCPStore." from a rank that did not detect it)
        r"Received a (?:timeout signal from this local rank|dump signal due to a collective timeout from\s+"
        r"(?:this local rank|rank (?P<detector_rank>\d+)))|Observed flight recorder dump signal from another rank",
        K.HUNG_COLLECTIVE,
        C.COLLECTIVE_TIMEOUT,
        S.WARNING,
        Blame.NONE,
        ["Received a timeout signal", "Received a dump signal", "flight recorder dump signal"],
        "Cross-rank debug dump (2.3 dev wording, then 2.6+ with 'from  rank N'); N is the detector, not the culprit.",
        generic=True,
    ),
    _sig(
        "nccl_fr_disabled",
        r"Stack trace of the failed collective not found",
        K.HUNG_COLLECTIVE,
        C.COLLECTIVE_TIMEOUT,
        S.INFO,
        Blame.NONE,
        ["Stack trace of the failed collective"],
        "Teardown after a watchdog failure with Flight Recorder off.",
        generic=True,
    ),
    _sig(
        "nccl_dump_preparing",
        r"ProcessGroupNCCL preparing to dump debug info",
        K.HUNG_COLLECTIVE,
        C.COLLECTIVE_TIMEOUT,
        S.INFO,
        Blame.NONE,
        ["preparing to dump debug info"],
        "Teardown after a watchdog failure.",
        generic=True,
    ),
    _sig(
        "nccl_ops_failed_teardown",
        r"Some NCCL operations have failed or timed out",
        K.HUNG_COLLECTIVE,
        C.COLLECTIVE_TIMEOUT,
        S.INFO,
        Blame.NONE,
        ["Some NCCL operations have failed"],
        "Teardown banner printed after any NCCL failure (error or timeout).",
        generic=True,
    ),
    _sig(
        "nccl_taking_process_down",
        r"we are taking the entire process down",
        K.HUNG_COLLECTIVE,
        C.COLLECTIVE_TIMEOUT,
        S.INFO,
        Blame.NONE,
        ["taking the entire process down"],
        "Teardown banner.",
        generic=True,
    ),
    _sig(
        "watchdog_thread_terminated",
        r"(?:NCCL|Process group) watchdog thread terminated with exception",
        None,
        None,
        S.INFO,
        Blame.NONE,
        ["watchdog thread terminated"],
        "Context: the exception text after it (a timeout, a CUDA error, an NCCL error) is classified on its own.",
    ),
    _sig(
        "nccl_comm_aborted",
        # torch <= 2.0 ProcessGroupNCCL: "NCCL communicator was aborted on rank N. Original reason for
        # failure was: ..." (the reason is classified on its own). The watchdog aborts a communicator
        # after a collective timed out or an async NCCL error: alone, it says this rank's collectives
        # were torn down (a timeout's teardown), not who caused it; N is the reporter.
        r"NCCL communicator was aborted on rank (?P<aborted_rank>\d+)",
        K.HUNG_COLLECTIVE,
        C.COLLECTIVE_TIMEOUT,
        S.WARNING,
        Blame.NONE,
        ["communicator was aborted"],
        "<=2.0 teardown after a timeout or NCCL error; the 'Original reason for failure' after it is "
        "classified on its own and wins.",
        generic=True,
    ),
    _sig(
        "nccl_comm_abort_complete",
        # NVIDIA/nccl 2.12.7-2.21 src/init.cc ncclCommAbort: INFO(NCCL_INIT, "comm %p rank %d nranks %d cudaDev
        # %d busId %lx - Abort COMPLETE"): the communicator was torn down (after an error or a timeout,
        # which its own lines say); the rank is the communicator's, the reporter's.
        r"\bcomm 0x[0-9a-f]+ rank \d+ nranks \d+ cudaDev \d+ busId [0-9a-f]+ - Abort COMPLETE",
        K.HUNG_COLLECTIVE,
        C.COLLECTIVE_TIMEOUT,
        S.WARNING,
        Blame.NONE,
        ["Abort COMPLETE"],
        "NCCL 2.12-2.21 communicator abort finished: teardown after a failure named elsewhere.",
        generic=True,
    ),
    _sig(
        "gloo_timeout",
        r"Timed out waiting (?P<timeout_ms>\d+)ms for (?P<op>\w+) operation to complete",
        K.HUNG_COLLECTIVE,
        C.COLLECTIVE_TIMEOUT,
        S.CRITICAL,
        Blame.NONE,
        ["Timed out waiting"],
        "Gloo collective/p2p timeout; names only the waiting side.",
    ),
    _sig(
        "collective_fingerprint_mismatch",
        # torch/csrc/distributed/c10d/ProcessGroupWrapper.cpp (checkForMismatch): "Detected mismatch between
        # collectives on ranks. Rank R is running collective: <fingerprint>, but Rank S is running collective:
        # <fingerprint>." The fingerprint nests parentheses (TensorOptions(dtype=float (default), ...)).
        # A pasted line is often cut inside the first fingerprint: the first half alone says it.
        r"Detected mismatch between collectives on ranks\. Rank (?P<mismatch_rank_a>\d+) is running (?:inconsistent )?collective: "
        r"CollectiveFingerPrint\((?P<fp_a>[^\n]{0,4000}?)(?:\)+,? but Rank (?P<mismatch_rank_b>\d+) is running collective|$)"
        # cut before the fingerprint: the check's own words still say it
        r"|Detected mismatch between collectives on ranks\.(?! Rank \d+ is running (?:inconsistent )?collective: CollectiveFingerPrint)",
        K.COLLECTIVE_MISMATCH,
        C.TYPE_MISMATCH,
        S.CRITICAL,
        Blame.NONE,
        ["Detected mismatch between collectives"],
        "TORCH_DISTRIBUTED_DEBUG=DETAIL mismatch check; either side may be the one that diverged.",
    ),
    _sig(
        "fsdp_order_mismatch",
        # torch/distributed/fsdp/_exec_order_utils.py (torch 2.x): warnings.warn("Forward order differs from
        # that of the first iteration on rank {r}. Collectives are unchecked and may give incorrect results
        # or hang."), under TORCH_DISTRIBUTED_DEBUG=DETAIL RuntimeError("Forward order differs across ranks:
        # rank {r1} is all-gathering {n1} parameters while rank {r2} is all-gathering {n2} parameters");
        # torch 1.12-1.13 fully_sharded_data_parallel.py: "All-gather order differs from that of the first
        # iteration on rank {r} -- collectives are unchecked and may give incorrect results or hang".
        r"(?:Forward|All-gather) order differs from that of the first iteration on rank (?P<order_rank>\d+)"
        r"|Forward order differs across ranks: rank (?P<mismatch_rank_a>\d+) is all-gathering",
        K.COLLECTIVE_MISMATCH,
        None,
        S.WARNING,
        Blame.NONE,
        ["order differs from that of the first iteration", "Forward order differs across ranks"],
        "FSDP's execution-order check: ranks (or iterations) all-gather in different orders; collectives "
        "may mismatch and hang. Every rank warns the same: a code path, not a rank.",
    ),
    _sig(
        "collective_fingerprint_trace",
        r"Running collective: CollectiveFingerPrint\(SequenceNumber=(?P<seq>\d+),\s*OpType=(?P<op>\w+)",
        K.HUNG_COLLECTIVE,
        None,
        S.INFO,
        Blame.NONE,
        ["Running collective: CollectiveFingerPrint"],
        "DETAIL per-collective trace: shows where each rank last was.",
        generic=True,
    ),
    _sig(
        "stack_dump_thread",
        # py-spy (src/dump.rs print_trace + StackTrace::format_threadid): "Thread {tid} ({status}): \"{name}\""
        # where tid is the native thread id in decimal on Linux and "{:#X}" elsewhere; faulthandler
        # (Python/traceback.c) prints "Thread 0x..." / "Current thread 0x... (most recent call first)".
        # (py-spy before 0.3, as `ray stack` printed it, had no name: "Thread 0x7F4AA36D9700 (active)".)
        r"^(?:Thread (?:0x[0-9A-Fa-f]+|\d+) \((?P<thread_state>[\w ]+)\)(?:: \"(?P<thread>[^\"]*)\"|\s*$)"
        r"|Current thread 0x[0-9a-f]+ \(most recent call first\))",
        K.HUNG_COLLECTIVE,
        None,
        S.INFO,
        Blame.NONE,
        ["Thread ", "Current thread 0x"],
        "py-spy / faulthandler stack dump of a live (usually hung) rank; frames kept as evidence.",
        generic=True,
    ),
    _sig(
        "stack_frame_in_collective",
        # A live stack's frame inside a collective call of a communication module: py-spy (src/dump.rs:
        # "    {function} ({filename}:{line})") or faulthandler (Python/traceback.c dump_frame:
        # '  File "{filename}", line {line} in {function}', no comma: an exception's traceback has
        # ", in"). A rank whose stack sits there waits for its peers; a hang if it stays.
        r"^\s*(?:(?P<func>all_reduce\w*|all_gather\w*|reduce_scatter\w*|all_to_all\w*|broadcast\w*|barrier"
        r"|monitored_barrier|reduce|gather|scatter|send|recv|wait) \((?P<file>[^()\n]*(?:distributed|communicat|parallel_state"
        r"|nccl|c10d)[^()\n]*\.py):\d+\)"
        r'|File "(?P<file2>[^"\n]*(?:distributed|communicat|parallel_state|nccl|c10d)[^"\n]*\.py)", line \d+ in '
        r"(?P<func2>all_reduce\w*|all_gather\w*|reduce_scatter\w*|all_to_all\w*|broadcast\w*|barrier|monitored_barrier"
        r"|reduce|gather|scatter|send|recv|wait))\s*$",
        K.HUNG_COLLECTIVE,
        None,
        S.WARNING,
        Blame.NONE,
        [
            "all_reduce",
            "all_gather",
            "reduce_scatter",
            "all_to_all",
            "broadcast",
            "barrier",
            " in reduce",
            " in gather",
            " in scatter",
            " in send",
            " in recv",
            " in wait",
            "reduce (",
            "gather (",
            "scatter (",
            "send (",
            "recv (",
            "wait (",
        ],
        "A live stack (py-spy or faulthandler) inside a collective: the rank is waiting for its peers.",
        generic=True,
    ),
    _sig(
        "store_based_barrier_wait",
        r"Waiting in store based barrier to initialize process group for rank: (?P<barrier_rank>\d+), key: (?P<key>\S+) "
        r"\(world_size=(?P<world_size>\d+), worker_count=(?P<worker_count>\d+)",
        K.RENDEZVOUS_ERROR,
        None,
        S.WARNING,
        Blame.NONE,
        ["store based barrier"],
        "1.7-1.13 init barrier still waiting: some ranks never joined.",
        generic=True,
    ),
    # ---- NCCL / IB / socket / gloo network errors ------------------------------------------
    _sig(
        "nccl_error_unhandled_cuda",
        # torch c10d NCCLUtils (C10D_NCCL_CHECK) "NCCL error in: FILE:LINE, unhandled cuda error ..."; torch/csrc/cuda/
        # nccl.cpp throw_nccl_error "NCCL Error %d: %s" (torch.cuda.nccl, DataParallel); NCCLUtils.cpp
        # getNcclErrorDetailStr "ncclUnhandledCudaError: Call to CUDA function failed."
        r"NCCL [Ee]rror(?: in: \S+| \d+)?[,:]?\s*unhandled cuda error|ncclUnhandledCudaError: Call to CUDA function failed",
        K.CRASH,
        C.CUDA_ERROR,
        S.CRITICAL,
        Blame.SELF,
        ["unhandled cuda error", "ncclUnhandledCudaError"],
        "NCCL hit a CUDA error in this process.",
    ),
    _sig(
        "nccl_error",
        r"NCCL [Ee]rror(?: in: (?P<nccl_src>\S+?)| \d+)?[,:]\s*(?P<nccl_reason>remote process exited or there was a network error|"
        r"unhandled system error|internal error|invalid usage|invalid argument)[^,]*?(?:, NCCL version (?P<nccl_version>[\w.+-]+))?",
        K.NETWORK_ERROR,
        C.NCCL,
        S.CRITICAL,
        Blame.NONE,
        ["NCCL error"],
        "torch-level NCCL error (DistBackendError / RuntimeError); refined by the 'Last error' detail that follows.",
    ),
    _sig(
        "nccl_result_code",
        # torch NCCLUtils.cpp getNcclErrorDetailStr ("ncclInvalidUsage: This usually reflects invalid usage of NCCL
        # library.", "ncclInvalidArgument: Invalid value for an argument.", ...)
        r"\b(?P<nccl_result>ncclRemoteError|ncclSystemError|ncclInternalError|ncclInvalidUsage|ncclInvalidArgument):",
        K.NETWORK_ERROR,
        C.NCCL,
        S.CRITICAL,
        Blame.NONE,
        ["ncclRemoteError", "ncclSystemError", "ncclInternalError", "ncclInvalidUsage", "ncclInvalidArgument"],
        "NCCL result code explanation line.",
    ),
    _sig(
        "nccl_result_text",
        # NVIDIA/nccl src/init.cc ncclGetErrorString: "unhandled system error (run with NCCL_DEBUG=INFO for
        # details)", "remote process exited or there was a network error", as other frameworks print it
        # (TensorFlow/HybridBackend "NCCL communication aborted: unhandled system error", Horovod).
        r"NCCL[^\n]{0,160}?(?P<nccl_text>unhandled system error|remote process exited or there was a network error)"
        r"|unhandled system error \(run with NCCL_DEBUG"
        # a framework's check on the NCCL call itself (OneFlow's OF_NCCL_CHECK through glog: "Check failed:
        # ncclCommInitRank(...) : unhandled system error (2)")
        r"|\bnccl[A-Z]\w{2,40}\([^\n]{0,200}?(?P<nccl_text__2>unhandled system error|remote process exited)",
        K.NETWORK_ERROR,
        C.NCCL,
        S.CRITICAL,
        Blame.NONE,
        ["unhandled system error", "remote process exited or there was a network error"],
        "An NCCL call failed with a system (socket, network) or remote error; the line names no peer.",
        generic=True,
    ),
    _sig(
        "python_connection_error",
        # CPython's OSError subclasses for a connection that failed (Objects/exceptions.c:
        # ConnectionResetError, ConnectionRefusedError, ConnectionAbortedError, BrokenPipeError) and the
        # errno texts socket calls raise ("[Errno 113] No route to host", 101 network unreachable, 110
        # timed out): a peer, a store or a server went away; the line names none for certain.
        r"\b(?P<conn_error>ConnectionResetError|ConnectionRefusedError|ConnectionAbortedError|BrokenPipeError)\b"
        r"|\[Errno (?:101|110|113)\] (?:Network is unreachable|Connection timed out|No route to host)",
        K.NETWORK_ERROR,
        C.SOCKET,
        S.CRITICAL,
        Blame.NONE,
        ["connectionreseterror", "connectionrefusederror", "connectionabortederror", "brokenpipeerror", "[errno 1"],
        "A socket connection failed in this process (reset, refused, aborted, broken pipe, unreachable).",
        generic=True,
    ),
    _sig(
        "nccl_service_accept_failed",
        # NVIDIA/nccl src/proxy.cc (service thread): "[Service thread] Accept failed %s" (WARN up to 2.2x,
        # INFO since), src/os/linux.cc "ncclOsSocketTryAccept: Accept failed: %s": the proxy's listening
        # socket failed to accept a peer's connection (its strerror can read "Success" when a peer closed).
        r"\[Service thread\] Accept failed|ncclOsSocketTryAccept: Accept failed",
        K.NETWORK_ERROR,
        C.SOCKET,
        S.WARNING,
        Blame.NONE,
        ["Accept failed"],
        "NCCL's proxy could not accept a peer's socket connection (often teardown after another failure).",
    ),
    _sig(
        "nccl_socket_connect_failed",
        # misc/socket.cc socketStartConnect (2.12+); include/socket.h "Net : Connect to %s failed : %s" (2.10-2.11)
        # and "Connect to %s failed : %s" (2.4-2.9)
        rf"(?:socketStartConnect: |Net : )?Connect to {_ADDR}<(?P<peer_port>\d+)> failed\s*:\s*(?P<reason>[^\n]+)",
        K.NETWORK_ERROR,
        C.SOCKET,
        S.CRITICAL,
        Blame.NONE,
        ["socketStartConnect", "connect to"],
        "Bootstrap/socket connect failure. 'No route to host' is local routing (NCCL_SOCKET_IFNAME), so no blame.",
    ),
    _sig(
        "nccl_socket_io_failed",
        # (2.10-2.14: "Net : Call to recv from %s failed : %s")
        rf"(?:socketProgress(?:Opt)?:|Net :) Call to (?:recv|send) (?:from|to) {_ADDR}<(?P<peer_port>\d+)> failed\s*:\s*(?P<reason>[^\n]+)",
        K.NETWORK_ERROR,
        C.SOCKET,
        S.CRITICAL,
        Blame.NONE,
        ["socketProgress", "Net : Call to"],
        "Socket I/O failure; 'Connection reset by peer' names the peer.",
        post=_reset_by_peer_post,
    ),
    _sig(
        "nccl_socket_io_failed_legacy",
        # NCCL 2.0-2.3 include/socket.h (socketReceive/socketSend): WARN("Call to recv failed : %s",
        # strerror(errno)); those versions' WARN had no "NCCL" word ("host:pid:tid [dev] include/
        # socket.h:194 WARN Call to recv failed : Connection reset by peer"). No peer is named.
        r"\bWARN Call to (?:recv|send) failed\s*:\s*(?P<reason>[^\n]+)",
        K.NETWORK_ERROR,
        C.SOCKET,
        S.CRITICAL,
        Blame.NONE,
        ["call to recv failed", "call to send failed"],
        "NCCL 2.0-2.3 socket I/O failure (bootstrap or socket transport); names no peer.",
    ),
    _sig(
        "nccl_socket_poll_connect",
        r"socketPollConnect:? poll\(\) returned \d+, no POLLOUT events",
        K.NETWORK_ERROR,
        C.SOCKET,
        S.WARNING,
        Blame.NONE,
        ["socketPollConnect"],
        "NCCL 2.2x bootstrap connect never completed (SYN dropped); the destination is not named.",
    ),
    _sig(
        "nccl_socket_poll_connect_error",
        # NCCL src/misc/socket.cc socketPollConnect (2.19+): WARN("socketPollConnect: Connect to %s returned
        # %d(%s) errno %d(%s)", addr, ret, strerror(ret), errno, strerror(errno)): the connect itself failed
        # (refused, no route, timed out). Names the destination, not a culprit: the path or the listener.
        rf"socketPollConnect: Connect to {_ADDR}<(?P<peer_port>\d+)> returned (?P<errno>\d+)\((?P<reason>[^)\n]*)\)",
        K.NETWORK_ERROR,
        C.SOCKET,
        S.CRITICAL,
        Blame.NONE,
        ["socketPollConnect"],
        "NCCL bootstrap/socket connect failed with an errno (refused, no route to host, timed out).",
    ),
    _sig(
        "nccl_ib_completion_error",
        # (2.4-2.9 net_ib.cc: "NET/IB : Got completion with error %d, opcode %d, len %d, vendor err %d": no peer)
        rf"NET/IB\s*:\s*Got completion (?:from peer {_ADDR}<(?P<peer_port>\d+)> )?with "
        r"(?:error (?P<ib_status>\d+), opcode (?P<ib_opcode>\d+)|status=(?P<ib_status__2>\d+) opcode=(?P<ib_opcode__2>\d+))"
        r".*?vendor err (?P<vendor_err>\d+)",
        K.NETWORK_ERROR,
        C.IB,
        S.CRITICAL,
        Blame.NONE,
        ["Got completion"],
        "IB work completion error (<=2.18 'error 12, opcode 0', 2.19+ 'status=12 opcode=0'); "
        "remote statuses (9-13, e.g. 12 retry exceeded) name the peer.",
        post=_ib_completion_post,
    ),
    _sig(
        "nccl_ib_size_mismatch",
        # NCCL src/transport/net_ib.cc (ncclIbIsend's sanity check "to catch user collective call
        # count/size mismatches"): <= 2.18 WARN("NET/IB : collective mismatch error local size %d remote
        # %d addr %lx rkey %x seq %x/%x"); 2.19+ WARN("NET/IB : req %d/%d tag %x peer %s collective
        # mismatch error, local size %d remote size %d") and ncclInvalidUsage. The two ends of a
        # send/recv posted different sizes: ranks disagree on a collective's count or order.
        r"NET/IB\s*:\s*(?:req \d+/\d+ tag \w+ peer \S+ )?collective mismatch error,? local size (?P<local_size>-?\d+)"
        r" remote(?: size)? (?P<remote_size>-?\d+)",
        K.COLLECTIVE_MISMATCH,
        None,
        S.CRITICAL,
        Blame.NONE,
        ["collective mismatch error"],
        "NCCL IB transport: the two ends of a transfer disagree on its size (a collective called with "
        "different counts or in a different order); either side may be the one that diverged.",
    ),
    _sig(
        "nccl_ib_async_event",
        # net_ib.cc: WARN("NET/IB : %s:%d Got async event : %s", dev, port, ...); NCCL 2.4's net_ib.cu:80 had no
        # device: WARN("NET/IB : Got async event : %s", ...). 2.2x (NVIDIA/nccl 5067397c src/transport/net_ib/common.cc):
        # WARN("NET/IB : %s:%d async fatal event: %s"), "... async fatal event on CQ (%p) ...: %s", "... on QP (%p) ...".
        r"NET/IB\s*:\s*(?:(?P<nic>[\w-]+(?::\d+)?)\s+)?Got async event\s*:\s*(?P<ib_event>[^\n]+)"
        r"|NET/IB\s*:\s*(?P<nic__2>[\w-]+(?::\d+)?)\s+async fatal event(?: on (?:CQ|QP|SRQ)[^:\n]*)?:\s*(?P<ib_event__2>[^\n]+)",
        K.NETWORK_ERROR,
        C.IB,
        S.CRITICAL,
        Blame.SELF,
        ["Got async event", "async fatal event"],
        "The local HCA reported an async error: the host that logs it is at fault.",
    ),
    _sig(
        "nccl_ibv_call_failed",
        # NCCL src/misc/ibvwrap.cc: WARN("Call to ibv_%s failed ...") for a failed verbs call of this process
        # (older ibvwrap.cu: "Call to ibv_create_qp failed"). A local resource/HCA/config failure of the host
        # that logs it; ibv_modify_qp fails on what the peer sent too, so it names nobody.
        # include/ibvwrap.h wrap_ibv_post_send/recv: WARN("ibv_post_send() failed with error %s, Bad WR %p, ...").
        r"NCCL WARN (?:Call to ibv_(?P<ibv_call>\w+) failed|ibv_post_(?:send|recv)\(\) failed with error)",
        K.NETWORK_ERROR,
        C.IB,
        S.CRITICAL,
        Blame.SELF,
        ["call to ibv_", "ibv_post_"],
        "An InfiniBand verbs call of this process failed (queue pair, memory registration, device).",
        post=lambda ev: _ibv_post(ev),
    ),
    _sig(
        "nccl_ofi_warn",
        # aws-ofi-nccl (NCCL's libfabric net plugin, EFA): NCCL_OFI_WARN(...) logs through NCCL as
        # "NCCL WARN NET/OFI <message>", e.g. "NET/OFI Couldn't open AV. RC: -22, ERROR: Invalid argument".
        # Its own test programs (tests/functional/*.c logger) print the same warnings as "WARN: Function: %s
        # Line: %d: NET/OFI <message>" (e.g. find_ofi_provider's "Couldn't find any optimal provider").
        r"(?:NCCL WARN|\bWARN: Function: \S+ Line: \d+:) NET/OFI (?P<ofi_warn>[^\n]{1,200})",
        K.NETWORK_ERROR,
        C.NCCL,
        S.WARNING,
        Blame.NONE,
        ["NCCL WARN NET/OFI", ": NET/OFI"],
        "The libfabric (EFA) net plugin failed: the network transport of the job, not one host by itself.",
    ),
    _sig(
        "libfabric_completion_error",
        # libfabric src/log.c fi_log: "libfabric:PID:TIME:PREFIX:PROV:SUBSYS:FUNC():LINE<LEVEL> msg"; the EFA
        # provider (prov/efa/src/rdm/efa_rdm_txe.c / efa_rdm_rxe.c handle_error) warns "err: %d, message:
        # %s ..." for a failed send/receive completion (e.g. "Invalid address", a peer that went away).
        r"libfabric:\d+:\d+:[^:\s]*:(?P<fi_prov>[\w;]+):(?P<fi_subsys>\w+):(?P<fi_func>\w+)\(\):\d+<(?:warn|error)> "
        r"err: (?P<fi_err>\d+), message: (?P<reason>[^\n]{1,200}?)(?: My |$)",
        K.NETWORK_ERROR,
        C.NCCL,
        S.CRITICAL,
        Blame.NONE,
        ["libfabric:"],
        "A libfabric provider (EFA) reported a failed network completion: the job's transport, no one host by itself.",
    ),
    _sig(
        "libfabric_no_provider",
        # libfabric src/fabric.c fi_getinfo_: FI_WARN(..., "fi_getinfo: provider %s output empty list\n"): the
        # provider the job asked for (FI_PROVIDER=efa) found no usable device on this host, so aws-ofi-nccl
        # cannot use it (NCCL falls back to sockets, or fails).
        r"libfabric:\d+:\d+:[^\n]{0,80}<warn> fi_getinfo: provider (?P<fi_prov>\w+) output empty list",
        K.NETWORK_ERROR,
        C.NCCL,
        S.WARNING,
        Blame.SELF,
        ["output empty list"],
        "libfabric found no usable device for the requested provider (EFA) on the host that printed it.",
    ),
    _sig(
        "nccl_warn_ib",
        r"NCCL WARN NET/IB\s*:\s*(?P<ib_warn>[^\n]+)",
        K.NETWORK_ERROR,
        C.IB,
        S.WARNING,
        Blame.NONE,
        ["NCCL WARN NET/IB"],
        "Other NET/IB warnings.",
        generic=True,
    ),
    _sig(
        "rdma_port_not_active",
        # iproute2 rdma/link.c: "link %s/%u ... state %s physical_state %s"; infiniband-diags ibstat:
        # "State: Down" / "Physical state: Polling". A port not ACTIVE (DOWN, INIT, ARMED) carries no
        # traffic: the job's IB/RoCE link on this host is down or flapping.
        r"^link (?P<ib_dev>[\w-]+)/(?P<ib_port>\d+)\b.*?\bstate (?P<ib_state>DOWN|INIT|ARMED)\b"
        r"|^\s*State:\s*(?P<ib_state2>Down|Initializing|Armed)\s*$",
        K.NETWORK_ERROR,
        C.IB,
        S.WARNING,
        Blame.SELF,
        ["state DOWN", "state INIT", "state ARMED", "State: Down", "State: Initializing", "State: Armed"],
        "An InfiniBand/RoCE port on this host is not ACTIVE (down, initialising or flapping).",
    ),
    _sig(
        "gloo_connect_full_mesh",
        r"Gloo connectFullMesh failed with (?P<detail>[^\n]+)",
        K.NETWORK_ERROR,
        C.GLOO,
        S.CRITICAL,
        Blame.NONE,
        ["connectFullMesh"],
        "Gloo could not connect to its peers ('no error' suffix is normal): interface/address config, no blame.",
    ),
    _sig(
        "gloo_pair_error",
        r"gloo/transport/tcp/pair\.cc:\d+\]\s*(?P<gloo_what>[^\[\n]*?)\s*\[(?P<peer>[^\]]+)\]:(?P<peer_port>\d+)(?::\s*(?P<reason>[^\n]*))?",
        K.NETWORK_ERROR,
        C.GLOO,
        S.CRITICAL,
        Blame.NONE,
        ["pair.cc"],
        "Gloo TCP pair error with the peer address; 'reset by peer' names the peer, 'closed by peer' does not.",
        post=_reset_by_peer_post,
    ),
    _sig(
        "ib_link_down_kernel",
        r"(?P<nic>mlx\d_\w+|ib\w+)\b.*?(?:[Ll]ink (?:down|DOWN)|changed state to DOWN|port state changed to DOWN)"
        # mlx5_core events.c mlx5_port_module_event: "Port module event: module %u, %s" (the cable's status)
        r"|mlx5_core (?P<nic__2>[0-9a-f:.]+):? [^\n]*?Port module event(?:\[error\])?: module \d+, Cable (?:unplugged|error)",
        K.NETWORK_ERROR,
        C.IB,
        S.WARNING,
        Blame.SELF,
        ["link down", "to down", "port module event"],
        "Kernel: an IB/RoCE port of this host went down (or its cable was unplugged / failed).",
        flags=re.I,
    ),
    _sig(
        "ibstat_port_down",
        # infiniband-diags ibstatus ("Infiniband device '%s' port %s status:" then "\tstate:\t\t 1: DOWN", "\tphys
        # state:\t 3: Disabled") and ibstat ("State: Down", "Physical state: Disabled"): the verbs port is down, so
        # NCCL cannot use it (NET/IB finds no active port, or falls back). An unused port reads the same.
        r"^\s*state:\s+1: DOWN\b|^\s*State: Down\s*$",
        K.NETWORK_ERROR,
        C.IB,
        S.WARNING,
        Blame.NONE,
        ["down"],
        "An InfiniBand/RoCE port listing shows ports down.",
        generic=True,
    ),
    # ---- rendezvous / c10d store ------------------------------------------------------------
    _sig(
        "c10d_client_timeout",
        # The endpoint is optional: a terminal wrap often cuts the line inside "(host\n, port)", and the
        # timeout alone says the store was unreachable (it then blames nobody).
        r"The client socket has timed out after (?P<timeout>\d+)(?P<timeout_unit>ms|s) while trying to connect to"
        r"(?: \(?\[?(?P<peer>[^\s,()\[\]]+?)\]?(?:, |:)(?P<peer_port>\d+)\)?)?",
        K.RENDEZVOUS_ERROR,
        None,
        S.CRITICAL,
        Blame.PEER,
        ["client socket has timed out"],
        "c10d store connect gave up (60s in 1.x/2.0, 600000ms later): the store endpoint is unreachable.",
    ),
    _sig(
        "tcpstore_connect_timeout",
        r"TCP client failed to connect/validate to host (?P<peer>[^\s:]+):(?P<peer_port>\d+) - timed out "
        r"\(try=(?P<try>\d+), timeout=(?P<timeout_ms>\d+)ms\)",
        K.RENDEZVOUS_ERROR,
        None,
        S.CRITICAL,
        Blame.PEER,
        ["TCP client failed to connect"],
        "torch 2.4+ TCPStore connect timeout (DistNetworkError).",
    ),
    _sig(
        "tcpstore_connect_retrying",
        # torch/csrc/distributed/c10d/TCPStore.cpp (2.4+), TCPClient::connect: before its deadline each
        # failed attempt is C10D_WARNING("TCP client failed to connect/validate to host {}:{} - retrying
        # (try={}, timeout={}ms, delay={}ms): {}", ...); the store is not reachable yet (a rank started
        # before the master, a wrong MASTER_ADDR, a firewall). Past the deadline the timed-out form above.
        r"TCP client failed to connect/validate to host (?P<peer>[^\s:]+):(?P<peer_port>\d+) - retrying "
        r"\(try=(?P<try>\d+), timeout=(?P<timeout_ms>\d+)ms",
        K.RENDEZVOUS_ERROR,
        None,
        S.WARNING,
        Blame.PEER,
        ["TCP client failed to connect"],
        "torch 2.4+ TCPStore client still retrying to reach the store.",
    ),
    _sig(
        "ssh_launch_refused",
        # OpenSSH sshconnect2.c: "Permission denied (%s)." when no authentication method worked; pdsh
        # (its ssh module) then: "pdsh@<host>: <target>: ssh exited with exit code 255". The launcher (pdsh,
        # DeepSpeed's, gpt-neox's) could not start the job on a host: keys/users, not the host's hardware.
        r"Permission denied \((?P<ssh_methods>[\w,-]+)\)\.|ssh exited with exit code 255",
        K.RENDEZVOUS_ERROR,
        None,
        S.CRITICAL,
        Blame.NONE,
        ["permission denied (", "ssh exited with exit code 255"],
        "The multi-node launcher's ssh to a host was refused (key, user or host key): the job never started there.",
    ),
    _sig(
        "name_resolution_failed",
        # glibc gai_strerror (sysdeps/posix/gai_strerror-strs.h): EAI_NONAME "Name or service not known", EAI_AGAIN
        # "Temporary failure in name resolution", EAI_NODATA "No address associated with hostname" (BSD/macOS:
        # "nodename nor servname provided, or not known"); torch 2.x c10d socket.cpp wraps them as "The {}network
        # addresses of ({}, {}) cannot be retrieved (gai error: {} - {})." A rank could not resolve the store's or a
        # peer's host name: the name or DNS is wrong, not the host it names.
        r"(?P<gai>Name or service not known|Temporary failure in name resolution|No address associated with hostname"
        r"|nodename nor servname provided)",
        K.RENDEZVOUS_ERROR,
        None,
        S.CRITICAL,
        Blame.NONE,
        ["name or service not known", "failure in name resolution", "no address associated", "nodename nor servname"],
        "A host name (the rendezvous endpoint, MASTER_ADDR, a peer) could not be resolved: DNS or a typo.",
    ),
    _sig(
        "c10d_connect_any_failed",
        r"The client socket has failed to connect to any network address of \((?P<peer>[^,\s]+), (?P<peer_port>\d+)\)",
        K.RENDEZVOUS_ERROR,
        None,
        S.CRITICAL,
        Blame.PEER,
        ["any network address"],
        "Final c10d connect failure; blames the endpoint only when it is a plausible host (not 0.0.0.0/8, all-digit names).",
    ),
    _sig(
        "c10d_connect_attempt_failed",
        r"The client socket has failed to connect to \[?(?P<peer>[^\s\]]+?)\]?:(?P<peer_port>\d+) "
        # (on Windows: "(system error: 10049 - <the localized message>)")
        r"\((?:errno|system error): (?P<errno>\d+) - (?P<reason>[^)]*)\)",
        K.RENDEZVOUS_ERROR,
        None,
        S.INFO,
        Blame.NONE,
        ["client socket has failed to connect to"],
        "Per-attempt W-level connect failure, usually retried: low severity, no blame.",
        post=_connect_warning_post,
    ),
    _sig(
        "store_port_in_use",
        # torch/csrc/distributed/c10d/socket.cpp: "The server socket has failed to listen on any local
        # network address." then per address "The server socket has failed to bind to {addr} (errno: 98 -
        # Address already in use)." (a pasted message is often wrapped inside those sentences).
        r"(?:failed to bind to (?P<bind>\S+) \(errno: 98 - Address already in use\)|"
        r"port: (?P<port>\d+), useIpv6: \d+, code: -98, name: EADDRINUSE|"
        r"The server socket has failed to (?:listen on any local network|bind to (?P<bind2>\S+) \(errno: 98\b))",
        K.RENDEZVOUS_ERROR,
        None,
        S.CRITICAL,
        Blame.NONE,
        ["Address already in use", "EADDRINUSE", "The server socket has failed to"],
        "Store port taken (a leftover process or two jobs on one MASTER_PORT).",
    ),
    _sig(
        "store_socket_failed",
        # torch/csrc/distributed/c10d/TCPStore.cpp (2.4+): C10D_WARNING("{} failed on {}: {}", op, socket,
        # what) for the client's store traffic, e.g. "[c10d] recvValue failed on SocketImpl(fd=76,
        # addr=[localhost]:60950, remote=[localhost]:29500): Connection reset by peer": the store's host
        # (the rendezvous master, rank 0's agent) went away or dropped the connection.
        r"\[c10d\] (?P<store_op>\w+) failed on SocketImpl\(fd=\d+, addr=(?P<local>[^,\n]{1,120}), "
        r"remote=(?P<remote>[^)\n]{1,120})\): (?P<reason>[^\n]{1,200})",
        K.RENDEZVOUS_ERROR,
        None,
        S.WARNING,
        Blame.NONE,
        ["failed on SocketImpl"],
        "A rank lost its connection to the c10d store (the store's host died or restarted).",
    ),
    _sig(
        "rendezvous_env_missing",
        # torch/distributed/rendezvous.py _env_rendezvous_handler: _rendezvous_error("env:// rendezvous:
        # environment variable {var} expected, but not set") (MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE):
        # the launch did not tell the process where to rendezvous.
        r"env:// rendezvous: environment variable (?P<env_var>\w+) expected, but not set",
        K.RENDEZVOUS_ERROR,
        None,
        S.CRITICAL,
        Blame.NONE,
        ["expected, but not set"],
        "The env:// rendezvous found no MASTER_ADDR/PORT/RANK/WORLD_SIZE: a launch configuration error.",
    ),
    _sig(
        "rendezvous_timeout",
        r"RendezvousTimeoutError",
        K.RENDEZVOUS_ERROR,
        None,
        S.CRITICAL,
        Blame.NONE,
        ["RendezvousTimeoutError"],
        "Elastic rendezvous did not gather enough nodes (plain exception or 1.9-1.12 error_handler JSON).",
    ),
    _sig(
        "nccl_unique_id_store_error",
        # torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp broadcastUniqueNCCLID: "[R] is setting up NCCL
        # communicator and retrieving ncclUniqueId from [0] via c10d key-value store by key 'K', but
        # store->get('K') got error: <what>" (+ ". This may indicate a possible application crash on rank 0
        # or a network set up issue." in 2.2+). Rank 0 never published the id: it crashed, hung before its
        # first collective, or the store is unreachable; the text does not say which, so no blame.
        r"\[(?P<rank>\d+)\] is setting up NCCL communicator and retrieving ncclUniqueId from \[(?P<src>\d+)\] via c10d "
        r"key-value store by key '[^'\n]*', but store->get\('[^'\n]*'\) got error: (?P<reason>[^\n]{1,200})",
        K.RENDEZVOUS_ERROR,
        None,
        S.CRITICAL,
        Blame.NONE,
        ["retrieving ncclUniqueId"],
        "A rank waited in the c10d store for rank 0's NCCL id for its first collective and gave up.",
        flags=re.IGNORECASE,
    ),
    _sig(
        "horovod_gloo_store_timeout",
        # horovod/common/gloo/http_store.cc: GLOO_THROW_IO_EXCEPTION(GLOO_ERROR_MSG("Wait timeout after ", s,
        # " seconds for key(s): ", keys, ". You may want to increase the timeout via ",
        # HOROVOD_GLOO_TIMEOUT_SECONDS)): Horovod's gloo rendezvous store never got the key.
        r"Wait timeout after (?P<timeout_s>\d+) seconds for key\(s\): (?P<keys>[^\n]{0,100}?)\. You may want to increase "
        r"the timeout via HOROVOD_GLOO_TIMEOUT_SECONDS",
        K.RENDEZVOUS_ERROR,
        None,
        S.CRITICAL,
        Blame.NONE,
        ["HOROVOD_GLOO_TIMEOUT_SECONDS"],
        "Horovod's gloo rendezvous store timed out at start-up: a worker never registered.",
    ),
    _sig(
        "rendezvous_connection_error",
        # Not the agent's goodbye: DynamicRendezvousHandler.shutdown()
        # (torch/distributed/elastic/rendezvous/dynamic_rendezvous.py) logs "The node '...' has failed
        # to shutdown the rendezvous '...' due to an error of type RendezvousConnectionError." when the
        # store's host (the first agent) exited before it: the end of every run that finishes on
        # more than one agent, healthy or not, never a cause (seen in the nan drill on 2 cores).
        r"^(?!.*has failed to shutdown the rendezvous).*?RendezvousConnectionError",
        K.RENDEZVOUS_ERROR,
        None,
        S.CRITICAL,
        Blame.NONE,
        ["RendezvousConnectionError"],
        "Elastic agent could not reach the rendezvous backend.",
    ),
    _sig(
        "rendezvous_closed",
        r"RendezvousClosedError",
        K.RENDEZVOUS_ERROR,
        None,
        S.WARNING,
        Blame.NONE,
        ["RendezvousClosedError"],
        "Rendezvous closed (an agent exited): follows another failure.",
        generic=True,
    ),
    _sig(
        "store_wait_clients_timeout",
        r"Timed out after (?P<timeout_s>\d+) seconds waiting for clients\. (?P<joined>\d+)/(?P<world_size>\d+) clients joined",
        K.RENDEZVOUS_ERROR,
        None,
        S.CRITICAL,
        Blame.NONE,
        ["waiting for clients"],
        "TCPStore server: not all ranks connected.",
    ),
    # ---- torchelastic / process exits -------------------------------------------------------
    _sig(
        "elastic_agent_failed",
        r"(?:elastic[./]multiprocessing[./]api(?:\.py:\d+\])?:?\s*(?:\[ERROR\]\s*)?)failed"
        r"(?: \(exitcode: (?P<exit_code>-?\d+)\) local_rank: (?P<local_rank>\d+) \(pid: (?P<pid>\d+)\))?"
        # the message alone, where a test runner or a shipper dropped the logger's name (torch/distributed/elastic/
        # multiprocessing/api.py: log.error(f"failed (exitcode: {exitcode}) local_rank: {local_rank} (pid: {pid}) of
        # {fn}"); "of binary: ..." for a binary)
        r"|^failed \(exitcode: (?P<exit_code__2>-?\d+)\) local_rank: (?P<local_rank__2>\d+) \(pid: (?P<pid__2>\d+)\) of ",
        K.CRASH,
        C.EXIT_CODE,
        S.CRITICAL,
        Blame.NONE,
        ["multiprocessing.api", "multiprocessing/api.py", "failed (exitcode:"],
        "Agent saw a worker fail (1.9-2.0 python logging, 2.1/2.2 bracketed, 2.4+ glog). Names a local rank "
        "only, so no global-rank blame.",
        post=_exit_post,
    ),
    _sig(
        "elastic_worker_group_restart",
        r"Worker group FAILED\. (?P<attempts_left>\d+)/(?P<attempts>\d+) attempts left; will restart worker group",
        K.CRASH,
        C.EXIT_CODE,
        S.INFO,
        Blame.NONE,
        ["Worker group FAILED"],
        "Agent restarts the worker group: a recovery attempt, never the root cause.",
        generic=True,
    ),
    _sig(
        "elastic_agent_death_signal",
        # torch/distributed/elastic/agent/server/api.py: logger.warning("Received %s death signal, shutting down
        # workers", e.sigval) (an int, or "Signals.SIGTERM" on Pythons before 3.11); then per worker
        # multiprocessing/api.py: "Sending process %s closing signal %s".
        # The agent's own handler (multiprocessing/api.py _terminate_process_handler) raises it first:
        # SignalException(f"Process {os.getpid()} got signal: {sigval}") (sigval formats as its number).
        r"Received (?:(?P<signal_no>\d+)|Signals\.(?P<signal>SIG\w+)) death signal, shutting down workers"
        r"|SignalException: Process \d+ got signal: (?:(?P<signal_no__2>\d+)|(?:Signals\.)?(?P<signal__2>SIG\w+))",
        K.CRASH,
        C.SIGNAL,
        S.CRITICAL,
        Blame.NONE,
        ["signal"],  # also gates "closing signal", "is killed by signal", "received a dump signal", ...
        "The torchrun agent itself got a signal (SIGHUP from a closed terminal, SIGTERM from the scheduler or a "
        "user) and stopped its workers: the run was stopped from outside; no worker is to blame.",
        post=_death_signal_post,
    ),
    _sig(
        "elastic_closing_signal",
        r"Sending process (?P<pid>\d+) closing signal (?P<signal>SIG\w+)",
        K.CRASH,
        C.SIGNAL,
        S.INFO,
        Blame.NONE,
        ["closing signal"],
        "The agent stopping a worker: a consequence of what stopped the agent (a failure or a death signal).",
        generic=True,
    ),
    _sig(
        "signal_received",
        r"Signal (?P<signal_no>\d+) \((?P<signal>SIG\w+)\) received by PID (?P<pid>\d+)",
        K.CRASH,
        C.SIGNAL,
        S.CRITICAL,
        Blame.NONE,
        ["received by PID"],
        "A worker killed by a signal (SIGKILL: OOM killer or scheduler).",
    ),
    _sig(
        "mp_process_terminated",
        r"(?:exiting process (?P<local_rank>\d+) with exit code: (?P<exit_code>-?\d+)|"
        r"process (?P<proc>\d+) terminated with (?:exit code (?P<exit_code__2>-?\d+)|signal (?P<signal>SIG\w+)))",
        K.CRASH,
        C.EXIT_CODE,
        S.WARNING,
        Blame.NONE,
        ["terminated with", "exiting process"],
        "torch.multiprocessing spawn teardown: a consequence of the error above it.",
        generic=True,
        flags=re.I,
        post=_exit_post,
    ),
    _sig(
        "fatal_signal",
        # ... and the shell's report of a child killed by SIGBUS/SIGSEGV (bash's strsignal text, "(core dumped)").
        r"(?:Fatal Python error: (?P<fatal>Segmentation fault|Aborted|Bus error)|\*\*\* (?P<sig_name>SIG\w+) received at time"
        r"|^(?:(?:[\w/.-]+: )?line \d+: +\d+ )?(?P<fatal__2>Bus error|Segmentation fault) +\(core dumped\))",
        K.CRASH,
        C.SIGNAL,
        S.CRITICAL,
        Blame.SELF,
        ["Fatal Python error", "received at time", "(core dumped)"],
        "The process that printed it crashed on a signal.",
    ),
    _sig(
        "mpirun_process_signaled",
        # Open MPI orte/mca/errmgr/base/help-errmgr-base.txt [normal-termination-but] /
        # orterun's proc-aborted-strsignal and PRRTE's prun help: "%s noticed that process rank %lu with
        # PID %lu on node %s exited on signal %d (%s)." (", (core dumped)" may follow). The launcher
        # saw that rank die on a signal: the rank and node that crashed (9 is often the OOM killer).
        r"noticed that process rank (?P<self_rank>\d+) with PID \d+ on node (?P<self_node>[\w.-]+) exited on signal "
        r"(?P<signal>\d+)(?: \((?P<sig_name>[^)\n]+)\))?",
        K.CRASH,
        C.SIGNAL,
        S.CRITICAL,
        Blame.SELF,
        ["noticed that process rank"],
        "mpirun names the rank and node whose process died on a signal.",
        post=lambda ev: _named_self_post(ev),
    ),
    _sig(
        "mpirun_nonzero_exit",
        # Open MPI help-errmgr-base.txt [normal-termination-but]: "Primary job  terminated normally, but
        # %d process returned\na non-zero exit code. Per user-direction, the job has been aborted."
        r"Primary job\s+terminated normally, but (?P<n_failed>\d+) process(?:es)? returned",
        K.CRASH,
        C.SIGNAL,
        S.WARNING,
        Blame.NONE,
        ["terminated normally, but"],
        "mpirun aborted the job because a process exited non-zero; the process is named elsewhere.",
        generic=True,
    ),
    _sig(
        "nccl_tests_failure",
        # NVIDIA/nccl-tests src/common.h NCCLCHECK: printf("%s: Test NCCL failure %s:%d '%s'\n", hostname, __FILE__,
        # __LINE__, ncclGetErrorString(res)) (2.13+: "'%s / %s'" with ncclGetLastError); CUDACHECK: "%s: Test CUDA
        # failure %s:%d '%s'" (cudaGetErrorString). The test binary's NCCL call failed with NCCL's result string;
        # a CUDA call's failure is this host's own.
        # (2017's nccl-tests printed "NCCL failure all_reduce.cu:95 '...'" without "Test " and the host.)
        r"(?:Test |^)(?P<tests_lib>NCCL|CUDA) failure \S+\.(?:cu|cc|h):\d+ '(?P<nccl_text>[^'/\n]{1,120}?)\s*(?:/[^'\n]*)?'",
        K.NETWORK_ERROR,
        C.NCCL,
        S.CRITICAL,
        Blame.NONE,
        ["nccl failure", "cuda failure"],
        "nccl-tests: an NCCL (or CUDA) call of the test failed with the result string quoted.",
        post=lambda ev: _nccl_tests_post(ev),
    ),
    _sig(
        "nvml_init_unknown",
        # nvidia-smi / NVML nvmlInit: "Failed to initialize NVML: Unknown Error" (NVML_ERROR_UNKNOWN): inside a
        # container whose device cgroup was rewritten (systemd daemon-reload, NVIDIA/nvidia-container-toolkit#48)
        # the process can no longer open /dev/nvidia*, while the host still sees every GPU: the container lost its
        # GPUs, a runtime fault more often than a hardware one.
        r"Failed to initialize NVML: Unknown Error",
        K.CRASH,
        C.CUDA_ERROR,
        S.CRITICAL,
        Blame.NONE,
        ["Failed to initialize NVML: Unknown Error"],
        "NVML could not start in this process (a container that lost its GPU devices, or a driver fault).",
    ),
    _sig(
        "orte_lost_daemon",
        # Open MPI orte/mca/errmgr/base/help-errmgr-base.txt [node-died] (PRRTE's prte help-errmgr-base.txt the
        # same with "PRRTE"): "ORTE has lost communication with a remote daemon." then "  HNP daemon   : %s on node
        # %s", "  Remote daemon: %s on node %s", "This is usually due to either a failure of the TCP network
        # connection to the node, or possibly an internal failure of the daemon itself." mpirun aborts the job.
        # The remote daemon's node is the end that went away (its daemon died, or the network to it), as a peer.
        # Open MPI 1.x-3.x: "ORTE has lost communication with its daemon located on node:" then "  hostname:  %s"
        # (parse_records takes the hostname line after it as the peer).
        r"(?:ORTE|PRRTE) has lost communication with (?:a remote daemon|its daemon located on node)"
        r"|^\s*Remote daemon\s*: \S+ on node (?P<peer>[\w.-]{1,253})\s*$",
        K.CRASH,
        None,
        S.CRITICAL,
        Blame.PEER,
        ["lost communication with a remote daemon", "lost communication with its daemon", "remote daemon"],
        "mpirun lost its daemon on a node (the daemon died or the network to that node failed) and aborts the job.",
    ),
    _sig(
        "kubectl_exec_exit",
        # kubernetes staging/src/k8s.io/kubectl/pkg/cmd/exec/exec.go (client-go's exec error): "command terminated
        # with exit code %d" (an MPIJob's kubexec.sh runs mpirun's daemons through `kubectl exec`); 137 = 128 + 9:
        # the command was SIGKILLed (the container's OOM kill, an eviction).
        r"^command terminated with exit code (?P<exit_code>\d+)\s*$",
        K.CRASH,
        C.EXIT_CODE,
        S.CRITICAL,
        Blame.NONE,
        ["command terminated with exit code"],
        "A command run in a pod through kubectl exec exited non-zero (137: killed).",
        post=_shell_status_post,
    ),
    _sig(
        "mpi_errors_are_fatal",
        # Open MPI ompi/errhandler/errhandler_predefined.c (backend_fatal_aggregate): "*** An error occurred
        # in %s" then "*** MPI_ERRORS_ARE_FATAL (processes in this communicator will now abort,"; in
        # MPI_Init "*** on a NULL communicator". The process aborts; the MPI call is named, not a culprit.
        r"\*\*\* An error occurred in (?P<mpi_call>MPI_\w+)",
        K.CRASH,
        C.EXCEPTION,
        S.CRITICAL,
        Blame.NONE,
        ["An error occurred in MPI_"],
        "An MPI call failed and MPI_ERRORS_ARE_FATAL aborted the process (in MPI_Init: the MPI runtime "
        "could not start).",
    ),
    _sig(
        "mpi_abort_invoked",
        # Open MPI ompi/mpi/help-mpi-api.txt [mpi-abort]: "MPI_ABORT was invoked on rank %d in communicator %s
        # with errorcode %d." then "NOTE: invoking MPI_ABORT causes Open MPI to kill all MPI processes.": the
        # rank that called MPI_Abort (a framework's error handler, Horovod's) stopped the job; the rank is
        # where the error surfaced, not proven its cause.
        r"MPI_ABORT was invoked on rank (?P<abort_rank>\d+) in communicator",
        K.CRASH,
        C.EXIT_CODE,
        S.CRITICAL,
        Blame.NONE,
        ["MPI_ABORT was invoked"],
        "A rank called MPI_Abort and Open MPI killed every process of the job.",
    ),
    _sig(
        "kubectl_pod_status",
        # kubectl get pods (kubectl's pod printer: NAME READY STATUS RESTARTS AGE, STATUS the container's
        # waiting or terminated reason): CrashLoopBackOff / Error / Init:Error / Init:CrashLoopBackOff, a
        # container that keeps failing; OOMKilled, its memory limit.
        r"^(?P<pod>[a-z0-9][a-z0-9.-]{0,252})\s+\d+/\d+\s+(?P<pod_status>CrashLoopBackOff|Error|OOMKilled"
        r"|Init:Error|Init:CrashLoopBackOff|Init:OOMKilled)\s+\d+",
        K.CRASH,
        C.EXIT_CODE,
        S.WARNING,
        Blame.NONE,
        ["crashloopbackoff", "error", "oomkilled"],
        "A pod listing shows a container that keeps failing (or was OOM-killed); its own logs say why.",
        post=_pod_status_post,
    ),
    _sig(
        "kubectl_describe_reason",
        # kubectl describe pod (k8s.io/kubectl/pkg/describe/describe.go describeContainerState): a container's
        # "State: Waiting" / "Last State: Terminated" block prints "      Reason:       %s" with the kubelet's
        # reason: CrashLoopBackOff (restarts delayed: it keeps failing), Error, OOMKilled (its memory limit),
        # ContainerCannotRun; "Exit Code:" follows a terminated one. (OOMKilled there is k8s_oom_killed's.)
        r"^\s*Reason:\s+(?P<pod_status>CrashLoopBackOff|Error|ContainerCannotRun)\s*$",
        K.CRASH,
        C.EXIT_CODE,
        S.WARNING,
        Blame.NONE,
        ["reason:"],
        "kubectl describe shows a container that keeps failing; its own logs say why.",
    ),
    _sig(
        "slurm_node_drained",
        # scontrol show node (slurm src/scontrol/info_node.c): "State=IDLE+DRAIN ..." and "Reason=%s [%s@%s]", the
        # reason slurmctld or an admin set when the node was drained or downed (src/slurmctld/node_mgr.c, gres.c:
        # "gres/gpu count reported lower than configured (0 < 8)", "Not responding", "Kill task failed", a health
        # check's message). The node of the record (its NodeName= line, parse_records) is out of service.
        r"^\s*Reason=(?P<drain_reason>[^\[\n]{1,200}?)\s*\[(?P<drained_by>[\w.-]{1,64})@",
        K.FAULTY_HOST,
        None,
        S.WARNING,
        Blame.SELF,
        ["reason="],
        "Slurm drained or downed a node, with the reason it recorded.",
    ),
    _sig(
        "sinfo_node_state",
        # sinfo (slurm src/sinfo/print.c, the default "PARTITION AVAIL TIMELIMIT NODES STATE NODELIST"): a row whose
        # STATE is down, drain, drng (draining), fail, failg (failing) -- node_state_string_compact, with "*" for a
        # node not responding -- lists nodes Slurm took out of service.
        r"^\S+\s+(?:up|down|drain|inact)\s+\S+\s+\d+\s+(?P<slurm_state>down|drain|drng|fail|failg)[*~#!%$@^-]?\s+"
        r"(?P<nodelist>\S+)\s*$",
        K.FAULTY_HOST,
        None,
        S.WARNING,
        Blame.NONE,
        [" down", " drain", " drng", " fail"],
        "sinfo lists nodes down, draining or failed.",
    ),
    _sig(
        "determined_rendezvous_incomplete",
        # determined master/internal/trial.go pushRendezvous: ctx.Log().Info("found not all containers are
        # connected"): the trial's containers did not all start and connect, so the master cannot hand out
        # the rendezvous information.
        r"found not all containers are connected",
        K.RENDEZVOUS_ERROR,
        None,
        S.WARNING,
        Blame.NONE,
        ["found not all containers are connected"],
        "Determined's master is still waiting for a trial's containers to connect (rendezvous).",
    ),
    _sig(
        "jax_backend_init_slow",
        # jax/_src/xla_bridge.py: warnings.warn(f"TPU backend initialization is taking more than {timeout}
        # seconds. Did you run your code on all TPU hosts? ...") while the backend waits for every host.
        r"TPU backend initialization is taking more than [\d.]+ seconds",
        K.RENDEZVOUS_ERROR,
        None,
        S.WARNING,
        Blame.NONE,
        ["TPU backend initialization is taking"],
        "JAX's TPU backend is still initialising: the hosts have not all joined (or the runtime cannot start).",
    ),
    _sig(
        "xla_coordination_agent_error",
        # XLA/TSL xla/tsl/distributed_runtime/coordination/coordination_service_agent.cc (JAX's jax.distributed
        # client): "Failed to connect to coordination service", "Failed to disconnect from coordination service
        # with status: ...", heartbeat "Polled an error from coordination service", "... coordination service
        # has shut down"; the client lost the job's coordinator (its rendezvous and key-value store).
        r"Failed to (?:connect to|disconnect from) coordination service|Polled an error from coordination service"
        r"|coordination service has (?:stopped|shut down)",
        K.RENDEZVOUS_ERROR,
        None,
        S.CRITICAL,
        Blame.NONE,
        ["coordination service"],
        "A JAX/XLA process lost the coordination service (the job's rendezvous and store).",
    ),
    _sig(
        "xla_hbm_oom",
        # XLA's TPU compiler (libtpu; quoted by jax and TensorFlow): "Ran out of memory in memory space hbm. Used
        # 12.34G of 8.00G hbm. Exceeded hbm capacity by 4.34G." (also "vmem"): the program does not fit the device.
        r"Ran out of memory in memory space (?P<mem_space>hbm|vmem)",
        K.OOM,
        None,
        S.CRITICAL,
        Blame.NONE,
        ["ran out of memory in memory space"],
        "XLA could not fit the program in the TPU's memory (HBM).",
    ),
    _sig(
        "tf_tpu_lame_workers",
        # TensorFlow tensorflow/python/tpu/session_support.py ShutdownLameWorkers / GracefulShutdownHook:
        # logging.info("ShutdownHook: lame workers found: %s", ...) -- a TPU worker stopped heartbeating (preempted,
        # restarted): the session cannot go on.
        r"ShutdownHook: lame workers found",
        K.CRASH,
        None,
        S.WARNING,
        Blame.NONE,
        ["lame workers found"],
        "TensorFlow's TPU heartbeat found a worker gone (a preemption or restart); the session must restart.",
    ),
    _sig(
        "xla_barrier_timeout",
        # XLA/TSL xla/tsl/distributed_runtime/coordination/coordination_service.cc, the coordination service
        # JAX's multi-process runtime uses: DEADLINE_EXCEEDED "Barrier timed out. Barrier_id: %s" (older), "Barrier
        # timed out. Id: %s. This usually happens because a task triggered the barrier too early or too slowly
        # ... # of tasks that reached the barrier: %d/%d ... Some timed out task names:" then /job:.../task:N
        # lines. The barrier "PjRT_Client_Connect" (xla/pjrt/distributed/client.cc) is jax.distributed.initialize's
        # connect: processes that never joined (rendezvous); any other barrier is one some tasks did not reach.
        r"Barrier timed out\. (?:Barrier_id|Id): (?P<barrier_id>\S+?)\.?(?:\s|$)",
        K.HUNG_COLLECTIVE,
        C.COLLECTIVE_TIMEOUT,
        S.CRITICAL,
        Blame.NONE,
        ["Barrier timed out"],
        "The XLA coordination service (JAX multi-process): a barrier timed out; its connect barrier is the rendezvous.",
        post=lambda ev: _xla_barrier_post(ev),
    ),
    _sig(
        "deepspeed_empty_master_addr",
        # DeepSpeed deepspeed/launcher/runner.py main: logger.info(f"Using IP address of {master_addr} for
        # node {first_host}") after resolving the first host's IP with `hostname -I` over ssh/pdsh: an empty
        # address launches every node with --master_addr= and rendezvous cannot happen.
        r"Using IP address of\s+for node (?P<first_host>\S+)",
        K.RENDEZVOUS_ERROR,
        None,
        S.CRITICAL,
        Blame.NONE,
        ["Using IP address of"],
        "DeepSpeed's launcher resolved an empty master address for the first node: no rank can rendezvous.",
    ),
    # ---- CUDA errors, OOM ---------------------------------------------------------------------
    _sig(
        "cuda_oom",
        # ROCm builds print the same message hipified: "HIP out of memory. Tried to allocate ... GPU 0
        # has a total capacity of ..." (torch's hipify turns c10/cuda's CUDACachingAllocator.cpp into
        # c10/hip's, CUDA -> HIP in its strings; the advice names PYTORCH_HIP_ALLOC_CONF); Intel GPUs'
        # allocator the same words with XPU (c10/xpu/XPUCachingAllocator.cpp).
        rf"(?:CUDA|HIP|XPU) out of memory\. Tried to allocate (?P<tried>{_SIZE})(?:\s*\(GPU (?P<gpu_legacy>\d+); (?P<total>{_SIZE}) total capacity)?"
        rf"(?:\. GPU (?P<gpu>\d+) has a total capac(?:i)?ty of (?P<total__2>{_SIZE}))?",
        K.OOM,
        None,
        S.CRITICAL,
        Blame.SELF,
        ["CUDA out of memory", "HIP out of memory", "XPU out of memory"],
        "CUDA (or ROCm's HIP, Intel's XPU) caching allocator OOM, every era (1.x '(GPU 0; X total capacity; ...)', 2.1 'capacty' typo, "
        "2.2+ 'Including non-PyTorch memory', 2.4+ 'private pools'). The process that printed it is the culprit.",
        post=_oom_post,
    ),
    _sig(
        "allocator_limit_oom",
        # torch c10/cuda/CUDACachingAllocator.cpp: over the per-process memory fraction
        # (torch.cuda.set_per_process_memory_fraction), OutOfMemoryError "Allocation on device %d would
        # exceed allowed memory. (out of memory)\nCurrently allocated     : ..."; aten/src/ATen/mps/
        # MPSAllocator.mm: "MPS backend out of memory (MPS allocated: ..., max allowed: ...)".
        r"Allocation on device (?P<gpu>\d+) would exceed allowed memory|MPS backend out of memory",
        K.OOM,
        None,
        S.CRITICAL,
        Blame.SELF,
        ["would exceed allowed memory", "MPS backend out of memory"],
        "The allocator refused an allocation over the process's memory limit (a memory fraction, MPS's "
        "high watermark): an OOM of the process that printed it.",
    ),
    _sig(
        "cuda_error_oom",
        # torch's "CUDA error: out of memory" (c10/cuda/CUDAException), "CUDA driver error: out of memory"
        # (c10/cuda/driver_api.h C10_CUDA_DRIVER_CHECK); the error names as the APIs spell them
        # (cuda.h CUDA_ERROR_OUT_OF_MEMORY, driver_types.h cudaErrorMemoryAllocation, HIP's
        # hipErrorOutOfMemory); cuBLAS/cuDNN's allocation failures (cublas_api.h CUBLAS_STATUS_ALLOC_FAILED:
        # "usually caused by a cudaMalloc() failure", cudnn CUDNN_STATUS_ALLOC_FAILED).
        r"CUDA (?:driver )?error: out of memory|\b(?:CUDA_ERROR_OUT_OF_MEMORY|cudaErrorMemoryAllocation|hipErrorOutOfMemory"
        r"|CUBLAS_STATUS_ALLOC_FAILED|CUDNN_STATUS_ALLOC_FAILED)\b",
        K.OOM,
        None,
        S.CRITICAL,
        Blame.SELF,
        [
            "out of memory",
            "cuda_error_out_of_memory",
            "cudaerrormemoryallocation",
            "hiperroroutofmemory",
            "_status_alloc_failed",
        ],  # fmt: skip
        "OOM raised as a CUDA error (outside the caching allocator, e.g. NCCL or cuBLAS workspace).",
    ),
    _sig(
        "host_oom",
        # The process's host memory ran out: libstdc++'s terminate handler ("terminate called after throwing
        # an instance of 'std::bad_alloc'", what(): "std::bad_alloc"), Python's MemoryError (numpy
        # _ArrayMemoryError: "Unable to allocate %s for an array with shape %s and data type %s"), and
        # TensorFlow's ResourceExhaustedError "OOM when allocating tensor with shape[...]" (a GPU's BFC
        # allocator: device memory).
        r"\bstd::bad_alloc\b|^(?:[\w.]+\.)?MemoryError\b(?::|$)|Unable to allocate [\d.]+ [KMGTP]?i?B for an array"
        r"|OOM when allocating tensor",
        K.OOM,
        None,
        S.CRITICAL,
        Blame.SELF,
        ["bad_alloc", "memoryerror", "unable to allocate", "oom when allocating"],
        "The process could not allocate memory (C++ bad_alloc, Python MemoryError, TensorFlow's allocator).",
    ),
    _sig(
        "cpu_oom",
        # mm/oom_kill.c __oom_kill_process: "%s: Killed process %d (%s) ..." with "Out of memory" or, for a
        # cgroup's limit (Slurm, Kubernetes), "Memory cgroup out of memory".
        r"DefaultCPUAllocator: (?:can't|not enough memory)|[Oo]ut of memory: Killed process (?P<pid>\d+) \((?P<proc>[^)]+)\)|oom-kill:",
        K.OOM,
        None,
        S.CRITICAL,
        Blame.SELF,
        ["DefaultCPUAllocator", "Killed process", "oom-kill"],
        "Host memory exhausted (allocator or the kernel OOM killer on this host).",
    ),
    _sig(
        "accelerate_batch_size_exhausted",
        # huggingface/accelerate src/accelerate/utils/memory.py find_executable_batch_size: halves the batch size on
        # every out-of-memory error and raises "No executable batch size found, reached zero." at the end.
        r"No executable batch size found, reached zero",
        K.OOM,
        None,
        S.CRITICAL,
        Blame.SELF,
        ["No executable batch size found"],
        "accelerate halved the batch size after each OOM down to zero: the model does not fit at any batch size.",
    ),
    _sig(
        "ray_memory_monitor_kill",
        # ray src/ray/raylet/node_manager.cc (memory monitor): "N Workers (tasks / actors) killed due to
        # memory pressure (OOM), M Workers crashed due to other reasons at node (ID: ..., IP: a.b.c.d) ...".
        r"(?P<killed>\d+) Workers \(tasks / actors\) killed due to memory pressure \(OOM\)"
        r"(?:.{0,120}?IP: (?P<node_ip>[\d.]+))?",
        K.OOM,
        None,
        S.CRITICAL,
        Blame.NONE,
        ["killed due to memory pressure"],
        "Ray's memory monitor killed workers on a node that ran out of host memory.",
    ),
    _sig(
        "ray_node_low_memory",
        # ray src/ray/raylet/node_manager.cc (the memory monitor's worker exit detail), raised to the
        # caller as ray.exceptions.OutOfMemoryError: "Task was killed due to the node running low on
        # memory." (2.2-2.54), "N worker(s) were killed due to the node running low on memory." (2.55+),
        # followed by "Memory on the node (IP: a.b.c.d, ID: ...) ... was U / T (f), which exceeds the
        # memory usage threshold of x". The node it names is the one that ran out of host memory. The same
        # message ends "Refer to the documentation on how to address the out of memory issue:
        # https://docs.ray.io/en/latest/ray-core/scheduling/ray-oom-prevention.html. Consider provisioning more
        # memory on this node ..." (a paste often keeps only that tail, under the top-memory process table).
        r"(?:Task was|\d+ worker\(s\) were) killed due to the node running low on memory"
        r"|Memory on the node \(IP: (?P<node_ip>[\d.]+)[,)][^\n]*?exceeds the memory usage threshold"
        r"|Refer to the documentation on how to address the out of memory issue: \S*ray-oom-prevention",
        K.OOM,
        None,
        S.CRITICAL,
        Blame.SELF,
        ["running low on memory", "exceeds the memory usage threshold", "ray-oom-prevention"],
        "Ray's memory monitor killed a worker because its node's host memory crossed the threshold; "
        "names the node's IP.",
        post=lambda ev: _ray_node_post(ev),
    ),
    _sig(
        "ray_worker_died",
        # ray src/ray/raylet/node_manager.cc (a worker that exited with SYSTEM_ERROR while running a
        # task): "A worker died or was killed while executing a task by an unexpected system error. To
        # troubleshoot the problem, check the logs for the dead worker. RayTask ID: ... Worker ID: ...
        # Node ID: ... Worker IP address: a.b.c.d Worker port: N Worker PID: N Worker exit type: ...
        # Worker exit detail: ..." (newer: "Lease ID:" for "RayTask ID:"). The worker on that IP died.
        r"A worker died or was killed while executing a task by an unexpected system error"
        r"(?:[^\n]*?Worker IP address: (?P<node_ip>[\d.]+))?",
        K.CRASH,
        C.SIGNAL,
        S.CRITICAL,
        Blame.SELF,
        ["a worker died or was killed"],
        "Ray's raylet: a worker process died while running a task (SIGKILL by the OOM killer, a crash, "
        "ray stop); names the worker's node IP.",
        post=lambda ev: _ray_node_post(ev),
    ),
    _sig(
        "ray_actor_died",
        # ray python/ray/exceptions.py ActorDiedError.BASE_ERROR_MSG "The actor died unexpectedly before
        # finishing this task." (RayActorError before 2.x), followed by its context as tab-indented
        # "class_name:", "actor_id:", "pid:", "name:", "namespace:", "ip:" lines (parse_records takes
        # the ip: the node the dead actor ran on).
        r"(?:ActorDiedError|RayActorError): The actor died unexpectedly before finishing this task",
        K.CRASH,
        C.SIGNAL,
        S.CRITICAL,
        Blame.SELF,
        ["The actor died unexpectedly"],
        "A Ray actor's worker process died (OOM killer, a crash, ray stop); its context names the node IP.",
    ),
    _sig(
        "ray_node_dead",
        # ray src/ray/gcs/gcs_server/gcs_node_manager.cc (and the monitor before it) on a node whose raylet stopped
        # heartbeating: "The node with node id: %s and address: %s and node name: %s has been marked dead because
        # the detector has missed too many heartbeats from it. This can happen when a (1) raylet crashes
        # unexpectedly (OOM, preempted node, etc.) (2) raylet has lagging heartbeats ..." (1.x: "... node id: %s
        # and ip: %s ...", earlier "The node with node id %s has been marked dead ..."); drivers log it through
        # worker.py. The node named is gone or unreachable from the head (a crash, an OOM, a preemption, or lag).
        r"The node with node id:? [0-9a-f]{8,64}(?: and (?:ip|address): (?P<node_ip>[\w.:-]+))?(?: and node name: \S+)?"
        r" has been marked dead because the detector has missed too many heartbeats",
        K.CRASH,
        None,
        S.WARNING,
        Blame.SELF,
        ["has been marked dead"],
        "Ray's GCS: a node stopped heartbeating (its raylet crashed, was OOM-killed or preempted, or lags); names it.",
        post=lambda ev: _ray_node_post(ev),
    ),
    _sig(
        "kubelet_eviction",
        # kubernetes pkg/kubelet/eviction/helpers.go: nodeLowMessageFmt "The node was low on resource: %v.",
        # podEphemeralStorageMessageFmt "Pod ephemeral local storage usage exceeds the total limit of
        # containers %s.", containerEphemeralStorageMessageFmt "Container %s exceeded its local ephemeral
        # storage limit %q."; kubectl describe shows them as an `Evicted` event from kubelet.
        r"(?P<k8s_evicted>The node was low on resource: (?P<resource>[\w.-]+)|Pod ephemeral local storage usage "
        r"exceeds the total limit|Container \S+ exceeded its local ephemeral storage limit)",
        K.CRASH,
        C.EXIT_CODE,
        S.CRITICAL,
        Blame.NONE,
        ["The node was low on resource", "ephemeral local storage", "local ephemeral storage"],
        "kubelet evicted the pod (a node resource ran out: memory is an OOM, disk or ephemeral storage ends it).",
        post=_eviction_post,
    ),
    _sig(
        "oom_killer_invoked",
        # Linux mm/oom_kill.c dump_header: pr_warn("%s invoked oom-killer: gfp_mask=%#x(%pGg), order=%d,
        # oom_score_adj=%hd"), and the reaper's pr_info("oom_reaper: reaped process %d (%s), now anon-rss:...")
        # once the victim is gone: host memory ran out on this host.
        r"(?P<invoker>\S+) invoked oom-killer: gfp_mask=|oom_reaper: reaped process (?P<pid>\d+) \((?P<proc>[^)\n]+)\)",
        K.OOM,
        None,
        S.CRITICAL,
        Blame.SELF,
        ["invoked oom-killer", "oom_reaper"],
        "The kernel's OOM killer ran on this host (host memory exhausted); the reaped process is named.",
    ),
    _sig(
        "xla_resource_exhausted",
        # TensorFlow/XLA's allocator: "Resource exhausted: Out of memory while trying to allocate N bytes."
        # (ResourceExhaustedError; JAX: "RESOURCE_EXHAUSTED: Out of memory while trying to allocate ...").
        r"(?:Resource exhausted|RESOURCE_EXHAUSTED): Out of memory while trying to allocate (?P<alloc_bytes>\d+) bytes",
        K.OOM,
        None,
        S.CRITICAL,
        Blame.SELF,
        ["out of memory while trying to allocate"],
        "The accelerator's memory is exhausted in this process (TensorFlow/XLA/JAX allocators).",
    ),
    _sig(
        "dataloader_worker_killed",
        # torch/csrc/DataLoader.cpp SIGCHLD handler: "DataLoader worker (pid %d) is killed by signal: %s. " with
        # strsignal(): "Killed" (SIGKILL: the kernel's OOM killer, in practice), "Bus error" (SIGBUS: /dev/shm full,
        # the message then says so), "Segmentation fault", ...
        r"DataLoader worker \(pid (?P<pid>\d+)\) is killed by signal: (?P<signal_text>[A-Za-z ]+)",
        K.CRASH,
        C.SIGNAL,
        S.CRITICAL,
        Blame.SELF,
        ["is killed by signal"],
        "A DataLoader worker died on a signal: SIGKILL (host memory: the OOM killer) and SIGBUS (shared memory "
        "exhausted) are out-of-memory; other signals a crash.",
        post=lambda ev: _dataloader_post(ev),
    ),
    _sig(
        "cuda_check_return",
        # The CUDA_CHECK_RETURN idiom of CUDA extensions (bitsandbytes csrc/ops.cuh, many forks of the CUDA samples):
        # printf("Error %s at line %d in file %s\n", cudaGetErrorString(status), __LINE__, __FILE__).
        r"Error (?P<cuda_error>[^\n]{3,100}?) at line \d+ in file \S+\.(?:cu|cuh|cpp|cc)\b",
        K.CRASH,
        C.CUDA_ERROR,
        S.CRITICAL,
        Blame.SELF,
        ["at line"],
        "A CUDA call of a compiled extension failed in this process.",
    ),
    _sig(
        "nccl_cuda_alloc_failed",
        # NCCL src/include/alloc.h: WARN("Failed to CUDA calloc %ld bytes"), "Failed to CUDA calloc async %ld
        # bytes", "Failed to CUDA malloc %ld bytes", "Failed to CUDA host alloc %ld bytes" (ncclCuda*Debug);
        # surfaces in torch as ncclUnhandledCudaError with this as its "Last error".
        # (and ncclCalloc/ncclRealloc of host memory: "Failed to malloc %ld bytes")
        r"Failed to (?:CUDA (?P<alloc>calloc(?: async)?|malloc|host alloc)|malloc) (?P<alloc_bytes>\d+) bytes",
        K.OOM,
        None,
        S.CRITICAL,
        Blame.SELF,
        ["Failed to CUDA", "Failed to malloc"],
        "NCCL could not allocate its buffers: the GPU (or pinned host memory) is full in this process.",
    ),
    _sig(
        "slurm_oom_kill",
        # slurmstepd (task/cgroup memory plugin) after the step: "Detected N oom-kill event(s) in StepId=J.S.
        # Some of your processes may have been killed by the cgroup out-of-memory handler." (older: "in step
        # J.S cgroup"); srun per task: "srun: error: NODE: task N: Out Of Memory".
        r"Detected (?P<oom_events>\d+) oom[-_]kill event|srun: error: (?P<self_node>[\w.-]+): tasks? [\d,-]+: Out Of Memory",
        K.OOM,
        None,
        S.CRITICAL,
        Blame.SELF,
        ["oom-kill event", "oom_kill event", "Out Of Memory"],
        "Slurm's cgroup killed the step's processes for exceeding the job's memory limit (host RAM); srun "
        "names the node.",
        post=_named_self_post,
    ),
    _sig(
        "cuda_error",
        r"CUDA error: (?!out of memory)(?P<cuda_error>[^\n.]+)",
        K.CRASH,
        C.CUDA_ERROR,
        S.CRITICAL,
        Blame.SELF,
        ["CUDA error:"],
        "Sticky CUDA error in this process (illegal address, launch failure, ...); 'uncorrectable ECC' is a "
        "faulty GPU.",
        post=_cuda_post,
    ),
    _sig(
        "cuda_device_assert",
        # CUDA C++ Programming Guide, "Assertion": a failed device assert prints
        # "<file>:<line>: <function>: block: [x,y,z], thread: [x,y,z] Assertion `<cond>` failed." (backtick
        # both sides; glibc's host assert ends with an apostrophe), then the kernel's error is
        # "device-side assert triggered". ATen's kernels (Indexing.cu, ...) assert their index bounds.
        # (Backticks may be gone: markdown pastes lose them.) The kernel context (`thread: [..]` or the .cu
        # file) is required, so a host-side C assert is not taken for a GPU one.
        r"(?:thread: \[[\d,]+\]|\.cuh?:\d+\]?)[^\n]{0,200}?Assertion `?(?P<assert_cond>[^`'\n]{1,200}?)`? failed",
        K.CRASH,
        C.CUDA_ERROR,
        S.CRITICAL,
        Blame.SELF,
        ["assertion"],
        "A CUDA kernel's device-side assert failed in this process (an out-of-range index, a bad label).",
    ),
    _sig(
        "cuda_runtime_error_legacy",
        r"cuda runtime error \((?P<cuda_errno>\d+)\) : (?P<cuda_error>[^\n]+?)(?: at |$)",
        K.CRASH,
        C.CUDA_ERROR,
        S.CRITICAL,
        Blame.SELF,
        ["cuda runtime error"],
        "Legacy THC form, e.g. '(39) : uncorrectable ECC error encountered'.",
        post=_cuda_post,
    ),
    _sig(
        "thc_cuda_check_fail",
        # torch 0.x THC (THCGeneral.c __THCudaCheck): fprintf(stderr, "THCudaCheck FAIL file=%s line=%i
        # error=%i : %s\n", file, line, err, cudaGetErrorString(err)) before "cuda runtime error (%d) : %s".
        r"THCudaCheck FAIL file=\S+ line=\d+ error=(?P<cuda_errno>\d+) : (?P<cuda_error>[^\n]+)",
        K.CRASH,
        C.CUDA_ERROR,
        S.CRITICAL,
        Blame.SELF,
        ["THCudaCheck FAIL"],
        "Legacy THC CUDA check failure (torch 0.x); out of memory is an OOM.",
        post=_cuda_post,
    ),
    _sig(
        "cublas_cudnn_error",
        r"(?P<cuda_error>CUBLAS_STATUS_(?!SUCCESS|ALLOC_FAILED)\w+|CUDNN_STATUS_(?!SUCCESS|ALLOC_FAILED)\w+"
        r"|CUDA driver error: (?!out of memory)[^\n]+)",
        K.CRASH,
        C.CUDA_ERROR,
        S.CRITICAL,
        Blame.SELF,
        ["CUBLAS_STATUS_", "CUDNN_STATUS_", "CUDA driver error"],
        "cuBLAS/cuDNN/driver failure in this process.",
    ),
    # ---- numerical ------------------------------------------------------------------------------
    _sig(
        "loss_nan",
        # `loss: nan` / `loss=nan` / `'loss': nan` and the bare `loss nan` (trainctl's trainer, torchtitan's
        # "loss: nan" metric logger, fairseq-style "loss nan"): the separator may be a single space.
        # A named loss term counts too ("loss_mn: nan", "losses: nan", "val_loss=nan").
        r"\b(?P<metric>(?:lm |train[_ ]|total[_ ]|avg[_ ])?[a-z]{0,20}_?loss(?:es)?(?:_[a-z0-9]{1,20})?|grad[ _]norm)\b"
        r"['\"]?(?:\s*[:=]\s*| )(?P<value>[-+]?(?:nan|inf))\b",
        K.NUMERICAL,
        C.NAN_LOSS,
        S.WARNING,
        Blame.NONE,
        ["nan", "inf"],
        "A loss or gradient norm printed as nan/inf (Megatron '| grad norm: nan |', HF 'loss': nan, ...).",
        flags=re.I,
    ),
    _sig(
        "nan_detected",
        r"(?:Loss is (?:nan|inf)|returned nan values in its \d+th output|Detected (?:NaN|inf)|FloatingPointError|"
        r"number of nan iterations:\s*(?P<nan_iters>[1-9]\d*)"
        # torch/nn/utils/clip_grad.py (error_if_nonfinite=True): "The total norm of order {p} for gradients from
        # `parameters` is non-finite, so it cannot be clipped."
        r"|for gradients from `?parameters`? is non-finite"  # (markdown noise removal may drop the backticks)
        # volcengine/verl verl/workers/actor/dp_actor.py (and its critic, FSDP/Megatron engines) _optimizer_step:
        # print(f"WARN: rank {rank} grad_norm is not finite: {grad_norm}") and the update is skipped. The norm is the
        # global one after clipping's all-reduce: every rank prints it, so the rank is not a culprit.
        r"|grad_norm is not finite)",
        K.NUMERICAL,
        C.NAN_LOSS,
        S.WARNING,
        Blame.NONE,
        ["loss is", "nan values", "detected nan", "detected inf", "FloatingPointError", "nan iterations", "finite"],
        "Explicit NaN detection (anomaly mode, trainer guards, Megatron nan counter > 0).",
        flags=re.I,
    ),
    _sig(
        "tensorboard_nan_scalar",
        # lanpa/tensorboardX tensorboardX/x2num.py check_nan: logger.warning('NaN or Inf found in input tensor.') for
        # every value written to TensorBoard (older releases through the root logger). Some logged value (a loss, a
        # gradient norm, also an inf grad norm while fp16 loss scaling calibrates) was not finite: which, it does
        # not say, so generic.
        r"NaN or Inf found in input tensor",
        K.NUMERICAL,
        C.NAN_LOSS,
        S.WARNING,
        Blame.NONE,
        ["NaN or Inf found"],
        "TensorBoard (tensorboardX) was handed a NaN/Inf value to log.",
        generic=True,
    ),
    _sig(
        "fp16_overflow",
        r"\[(?:deepscale|deepspeed)\] OVERFLOW!(?: Rank (?P<ds_rank>\d+))?(?:.*?Attempted loss scale: (?P<loss_scale>[\d.]+))?"
        r"|Gradient overflow\.\s+Skipping step|Current loss scale already at minimum"
        # fairseq optim/fp16_optimizer.py: "NOTE: overflow detected, setting loss scale to: {scale}" (older
        # "| WARNING: overflow detected, ..."); its DynamicLossScaler raises FloatingPointError("Minimum loss
        # scale reached ({min}). Your loss is probably exploding. ...").
        r"|overflow detected, setting loss scale to: (?P<loss_scale__2>[\d.e-]+)|Minimum loss scale reached"
        # DeepSpeed runtime/fp16/fused_optimizer.py, unfused_optimizer.py step: "[deepspeed] fp16 dynamic loss scale
        # overflow! Skipping step. Attempted loss scale: {}, reducing to {}", _update_scale: "Grad overflow on
        # iteration: {}".
        r"|fp16 dynamic loss scale overflow!|Grad overflow on iteration:? \d+"
        # DeepSpeed 0.3 engine.py (log_dist, rank 0): "Overflow detected. Skipping step. Attempted loss scale: %s,
        # reducing to %s"
        r"|Overflow detected\. Skipping step\. Attempted loss scale: (?P<loss_scale__3>[\d.]+)",
        K.NUMERICAL,
        C.OVERFLOW,
        S.INFO,
        Blame.NONE,
        ["overflow", "already at minimum", "minimum loss scale"],
        "fp16 loss-scale overflow (DeepSpeed 0.3 '[deepscale]', later '[deepspeed]', apex, fairseq). Normal while "
        "the scale calibrates; critical once the scale is at its minimum.",
        post=_overflow_post,
    ),
    _sig(
        "megatron_skipped_iterations",
        # Megatron-LM megatron/training/training.py training_log: "number of skipped iterations: {:3d} |", above 0 in
        # fp16 when steps were skipped for an overflow. Its own small pattern: every iteration line carries the
        # counter, so the long overflow alternation above does not run on each of them.
        r"number of skipped iterations:\s*(?P<skipped_iters>[1-9]\d*)",
        K.NUMERICAL,
        C.OVERFLOW,
        S.INFO,
        Blame.NONE,
        ["skipped iterations"],
        "Megatron skipped iterations (fp16 overflows while the loss scale settles).",
    ),
    # ---- kernel: Xid, ECC, lost GPU, PCIe, thermal ----------------------------------------------
    _sig(
        "nvrm_xid",
        # The address may be redacted in a paste ("(PCI:...)"): the Xid code still stands.
        rf"NVRM: Xid \((?:{_PCI}|[^()\n]{{0,40}})\): (?P<xid>\d+)(?:,[^\n]*?caused by previous Xid (?P<root_xid>\d+))?",
        K.FAULTY_HOST,
        C.XID,
        S.CRITICAL,
        Blame.SELF,
        ["NVRM: Xid"],
        "Driver Xid with the GPU's PCI address; hardware Xids blame the host that logged them, application "
        "Xids (13, 31, 43, 45, 109) do not; 'caused by previous Xid N' takes N as the cause.",
        post=_xid_post,
    ),
    _sig(
        "nvrm_fallen_off_bus",
        # Also the driver's status NV_ERR_GPU_IS_LOST (open-gpu-kernel-modules nvstatuscodes.h:
        # NV_STATUS_CODE(NV_ERR_GPU_IS_LOST, 0x0000000F, "GPU lost from the bus")) as its assertions print
        # it: "NVRM: nvAssertOkFailedNoLog: Assertion failed: GPU lost from the bus [NV_ERR_GPU_IS_LOST]
        # (0x0000000F) returned from ..." / "nvCheckOkFailedNoLog: Check failed: ...".
        rf"(?:NVRM: (?:The NVIDIA GPU {_PCI}[^\n]*?)?)?fallen off the bus"
        r"|(?:Assertion|Check) failed: GPU lost from the bus \[NV_ERR_GPU_IS_LOST\]",
        K.FAULTY_HOST,
        C.GPU_LOST,
        S.CRITICAL,
        Blame.SELF,
        ["fallen off the bus", "nv_err_gpu_is_lost"],
        "GPU lost (Xid 79 text, or the r570 multi-line 'The NVIDIA GPU <pci> ... has fallen off the bus' "
        "without an Xid token; the PCI address is taken from the header line above).",
    ),
    _sig(
        "nvrm_reset_required",
        # NVIDIA/open-gpu-kernel-modules src/nvidia/src/libraries/utils/nvassert.c: "Check failed: %s
        # (0x%08X) returned from ..." (nvCheckOkFailedNoLog / nvAssertOkFailedNoLog), the status named
        # by nvstatuscodes.h: NV_ERR_RESET_REQUIRED (0x62, "Reset required"), NV_ERR_GPU_IN_FULLCHIP_RESET
        # (0x10, "GPU currently in full-chip reset"). The GPU answers nothing until it is reset.
        r"(?:Assertion|Check) failed: (?:Reset required \[NV_ERR_RESET_REQUIRED\]"
        r"|GPU currently in full-chip reset \[NV_ERR_GPU_IN_FULLCHIP_RESET\])",
        K.FAULTY_HOST,
        C.GPU_LOST,
        S.CRITICAL,
        Blame.SELF,
        ["nv_err_reset_required", "nv_err_gpu_in_fullchip_reset"],
        "The NVIDIA driver returned 'reset required' / 'in full-chip reset': the GPU is unusable until reset.",
    ),
    _sig(
        "ecc_uncorrectable",
        r"(?:uncorrectable ECC error|Double Bit ECC|DBE \(Double Bit Error\)|Row Remapping Failure|"
        r"uncorrectable (?:memory|DRAM) error)",
        K.FAULTY_HOST,
        C.ECC,
        S.CRITICAL,
        Blame.SELF,
        ["ECC", "Row Remapping Failure", "uncorrectable"],
        "Uncorrectable GPU memory error outside an Xid line.",
        flags=re.I,
    ),
    _sig(
        "pcie_link_limited",
        r"(?P<pci>[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.\d): (?P<bandwidth>[\d.]+ Gb/s) available PCIe bandwidth, "
        r"limited by (?P<limited_by>[\d.]+ GT/s PCIe x\d+) link",
        K.FAULTY_HOST,
        C.PCIE_DOWNGRADE,
        S.WARNING,
        Blame.SELF,
        ["available PCIe bandwidth"],
        "Kernel: a PCIe link trained below its capability.",
    ),
    _sig(
        "cpu_thermal_throttle",
        r"(?:Core|Package) temperature above threshold, cpu clock throttled",
        K.FAULTY_HOST,
        C.THERMAL,
        S.WARNING,
        Blame.SELF,
        ["temperature above threshold"],
        "Kernel: CPU thermal throttling on this host.",
    ),
    # ---- NCCL transports (src/transport/net_socket.cc, src/proxy.cc, src/init.cc; NCCL 2.2x) ----------
    _sig(
        "nccl_socket_truncated",
        # net_socket.cc: WARN("NET/Socket : peer %s message truncated : receiving %d bytes instead of %d. ...")
        # (2.4-2.9: "NET/Socket : message truncated : ..." without the peer)
        r"NET/Socket : (?:peer (?P<peer>\S+?) )?message truncated : receiving (?P<got>\d+) bytes instead of (?P<want>\d+)",
        K.NETWORK_ERROR,
        C.SOCKET,
        S.CRITICAL,
        Blame.NONE,
        ["message truncated"],
        "NCCL socket transport: a message of the wrong size; usually mismatched collectives or corrupted traffic, "
        "not a bad peer.",
    ),
    _sig(
        "nccl_proxy_failed",
        # proxy.cc: WARN("[Proxy Service %d] Failed to execute operation %s from rank %d, retcode %d"),
        # WARN("[Service thread] Error encountered progressing operation=%s, res=%d, closing connection") (2.19+),
        # WARN("Proxy Call to rank %d failed (%s)") (2.12-2.18, the client side)
        r"\[Proxy Service (?P<proxy_rank>\d+)\] Failed to execute operation (?P<proxy_op>\w+) from rank (?P<from_rank>\d+), "
        r"retcode (?P<retcode>\d+)|\[Service thread\] Error encountered progressing operation=(?P<proxy_op__2>\w+), "
        r"res=(?P<retcode__2>\d+)|Proxy Call to rank (?P<to_rank>\d+) failed \((?P<proxy_op__3>\w+)\)",
        K.NETWORK_ERROR,
        C.NCCL,
        S.CRITICAL,
        Blame.NONE,
        ["Failed to execute operation", "Error encountered progressing", "Proxy Call to rank"],
        "NCCL proxy thread could not set up or run a network operation (retcode is an ncclResult_t).",
    ),
    _sig(
        "nccl_remote_error",
        # init.cc ncclGetErrorString(ncclRemoteError): "remote process exited or there was a network error"
        r"remote process exited or there was a network error",
        K.NETWORK_ERROR,
        C.NCCL,
        S.CRITICAL,
        Blame.NONE,
        ["remote process exited"],
        "ncclRemoteError: a peer died or the network failed; names no side.",
        generic=True,
    ),
    _sig(
        "nccl_socket_closed_by_peer",
        # src/misc/socket.cc socketProgress: WARN("socketProgress: Connection closed by remote peer %s", ...)
        # when recv() returns 0 mid-operation. NCCL closes its sockets only in ncclCommDestroy/Abort,
        # never inside a collective, so an orderly close there is the peer's process exiting (the
        # kernel closes a dead process's sockets): the peer is where the failure started, as seen
        # from this rank. (Shutdown closes are not logged: the communicator is torn down first.)
        # (2.10-2.14 include/socket.h, misc/socket.cc: "Net : Connection closed by remote peer %s"; before 2.10
        # without the address: the peer is then not named; 2.0-2.2 include/socket.h without the "Net : ")
        rf"(?:(?:socketProgress:|Net :) |(?<=NCCL WARN ))Connection closed by remote peer(?: {_ADDR}<(?P<peer_port>\d+)>)?",
        K.NETWORK_ERROR,
        C.SOCKET,
        S.CRITICAL,
        Blame.PEER,
        ["Connection closed by remote peer"],
        "NCCL socket: the peer's process closed the connection mid-operation (it exited or aborted first).",
    ),
    # ---- NCCL set-up and transports, from the sources (src/misc/socket.cc, bootstrap.cc, shmutils.cc, ...) -----
    _sig(
        "nccl_socket_retries_exceeded",
        # src/misc/socket.cc (2.19+): WARN("socketStartConnect: exceeded retries (%d)") after NCCL_SOCKET_RETRY_CNT
        # refused connects, WARN("socketPollConnect: exceeded timeouts (%d)") after timed-out ones: the listener
        # never came up or the path drops SYNs; the destination is in the lines before.
        r"socket(?:StartConnect|PollConnect): exceeded (?:retries|timeouts) \((?P<retries>\d+)\)",
        K.NETWORK_ERROR,
        C.SOCKET,
        S.CRITICAL,
        Blame.NONE,
        ["socketStartConnect", "socketPollConnect"],
        "NCCL gave up connecting a socket after its retries (refused or timed out every time).",
    ),
    _sig(
        "nccl_socket_wrong_magic",
        # src/misc/socket.cc socketFinalizeAccept: WARN("socketFinalizeAccept: wrong magic %lx != %lx") (and "wrong
        # type"): something that is not this communicator's NCCL connected to its port (another job, a scanner).
        r"socketFinalizeAccept: wrong (?:magic|type)",
        K.NETWORK_ERROR,
        C.SOCKET,
        S.WARNING,
        Blame.NONE,
        ["socketFinalizeAccept"],
        "A connection that is not this communicator's reached an NCCL port (another job on the same ports, a scanner).",
    ),
    _sig(
        "nccl_no_interface",
        # bootstrap.cc: WARN("Bootstrap : no socket interface found"), WARN("NET/Socket : No usable listening interface
        # found"); transport/net_socket.cc: WARN("NET/Socket : no interface found"); misc/socket.cc (include/socket.h
        # before 2.12): WARN("Net : No interface found in the same subnet as remote address %s"). NCCL_SOCKET_IFNAME
        # (or the host's addressing) names no usable interface: configuration, no one host's fault.
        r"Bootstrap : no socket interface found|NET/Socket : (?:no interface found|No usable listening interface found)"
        r"|Net : No interface found in the same subnet as remote address",
        K.NETWORK_ERROR,
        C.SOCKET,
        S.CRITICAL,
        Blame.NONE,
        ["interface found"],
        "NCCL found no usable network interface (NCCL_SOCKET_IFNAME, or no interface in the peer's subnet).",
    ),
    _sig(
        "nccl_socket_progress_error",
        # transport/net_socket.cc persistentSocketThread: WARN("NET/Socket : socket progress error") when a socket
        # send/recv of the socket transport failed (the reason is the WARN before it).
        r"NET/Socket : socket progress error",
        K.NETWORK_ERROR,
        C.SOCKET,
        S.CRITICAL,
        Blame.NONE,
        ["socket progress error"],
        "NCCL's socket transport failed a send or receive.",
    ),
    _sig(
        "nccl_bootstrap_truncated",
        # bootstrap.cc bootstrapNetRecv: WARN("Message truncated : received %d bytes instead of %d"): two ranks'
        # bootstrap messages differ in size (mixed NCCL versions, or a connection from another job).
        r"\bMessage truncated : received (?P<got>\d+)(?:,\d+)? bytes instead of (?P<want>\d+)",
        K.NETWORK_ERROR,
        C.NCCL,
        S.CRITICAL,
        Blame.NONE,
        ["message truncated"],
        "NCCL's bootstrap got a message of the wrong size: ranks disagree (NCCL versions) or a stray peer connected.",
    ),
    _sig(
        "nccl_bootstrap_root_mismatch",
        # bootstrap.cc bootstrapRoot: WARN("Bootstrap Root : mismatch in rank count from procs %d : %d") (2.2x;
        # 2.2x+: "mismatch in info from procs, nranks %d vs %d, ..."): ranks were started with different world sizes
        # for one unique id.
        r"Bootstrap Root : mismatch in (?:rank count|info) from procs",
        K.RENDEZVOUS_ERROR,
        None,
        S.CRITICAL,
        Blame.NONE,
        ["Bootstrap Root : mismatch"],
        "Ranks joined one NCCL communicator with different world sizes (a launch configuration error).",
    ),
    _sig(
        "nccl_ib_open_device",
        # transport/net_ib.cc ncclIbInit: WARN("NET/IB : Unable to open device %s"), WARN("NET/IB : Unable to query
        # device %s"): an HCA of this host does not answer its verbs; NCCL goes on without it.
        r"NET/IB : Unable to (?:open|query) device (?P<nic>\S+)",
        K.NETWORK_ERROR,
        C.IB,
        S.WARNING,
        Blame.SELF,
        ["NET/IB : Unable to"],
        "An InfiniBand HCA of this host could not be opened or queried (driver, firmware or the card).",
    ),
    _sig(
        "nccl_cuda_failure",
        # src/include/checks.h CUDACHECK: WARN("Cuda failure '%s'", cudaGetErrorString(err)); cudawrap.h CUCHECK
        # (driver API, 2.19+): WARN("Cuda failure %d '%s'", err, errStr); transport/nvls.cc: "Failed to bind NVLink
        # SHARP (NVLS) Multicast memory of size %ld : CUDA error %d '%s'"; transport/p2p.cc: "failed to peer with
        # device %d(=%lx): %d %s", "cudaIpcGetMemHandle failed : %s". A CUDA call of this process failed.
        # (a line cut inside the quoted error still says it)
        r"(?:Cuda failure|CUDA error)(?: (?P<cuda_errno>\d+))? '(?P<cuda_error>[^'\n]{1,200})(?:'|$)"
        r"|failed to peer with device \d+\(=\w+\): (?P<cuda_errno__2>\d+) (?P<cuda_error__2>[^\n]{1,200})"
        r"|cudaIpcGetMemHandle failed : (?P<cuda_error__3>[^\n]{1,200})",
        K.CRASH,
        C.CUDA_ERROR,
        S.CRITICAL,
        Blame.SELF,
        ["Cuda failure", "CUDA error", "failed to peer with device", "cudaIpcGetMemHandle failed"],
        "A CUDA call inside NCCL failed in this process ('out of memory' is an OOM, ECC a faulty GPU).",
        post=_cuda_post,
    ),
    _sig(
        "nccl_shm_failed",
        # misc/shmutils.cc (2.12+): WARN("Error while %s shared memory segment %s (size %ld)"), WARN("Error: failed
        # to extend %s to %ld bytes") (ftruncate of /dev/shm/nccl-*); before 2.12 include/shm.h: SYSCHECK
        # "Call to posix_fallocate failed : %s". /dev/shm is too small for NCCL's buffers (a container's 64 MB
        # default) on this host: NCCL's SHM transport cannot start (an NCCL error, as the corpus labels it, x3a-002).
        r"Error while (?:creating|attaching to) shared memory segment (?P<shm>\S+)|Error: failed to extend (?P<shm__2>\S+)"
        r" to \d+ bytes|Call to posix_fallocate failed",
        K.NETWORK_ERROR,
        C.NCCL,
        S.CRITICAL,
        Blame.SELF,
        # "failed to" also gates the other "failed to ..." keywords (only lines holding it test them)
        ["shared memory segment", "failed to", "posix_fallocate"],
        "NCCL could not create its shared-memory segment: /dev/shm is full or too small on this host.",
    ),
    _sig(
        "nccl_duplicate_gpu",
        # init.cc: WARN("Duplicate GPU detected : rank %d and rank %d both on CUDA device %lx") then ncclInvalidUsage:
        # two ranks of one communicator picked the same GPU (LOCAL_RANK / CUDA_VISIBLE_DEVICES misconfigured).
        r"Duplicate GPU detected : rank (?P<dup_rank>\d+) and rank (?P<dup_rank_b>\d+) both on CUDA device",
        K.NETWORK_ERROR,
        C.NCCL,
        S.CRITICAL,
        Blame.NONE,
        ["Duplicate GPU detected"],
        "Two ranks of one NCCL communicator use the same GPU: a launch configuration error.",
    ),
    _sig(
        "nccl_no_transport",
        # transport.cc selectTransport: WARN("No transport found for rank %d[%lx] -> rank %d[%lx]"): no P2P, SHM or
        # network path between two ranks (no NIC usable, NCCL_*_DISABLE everywhere).
        r"No transport found for rank (?P<from_rank>\d+)\[\w+\] -> rank (?P<to_rank>\d+)",
        K.NETWORK_ERROR,
        C.NCCL,
        S.CRITICAL,
        Blame.NONE,
        ["No transport found"],
        "NCCL found no way to connect two ranks (network transport unavailable or disabled).",
    ),
    _sig(
        "nccl_p2p_disabled_nvlink",
        # graph/paths.cc (2.14+): WARN("P2P is disabled between NVLINK connected GPUs %d and %d. This should not be
        # the case given their connectivity, and is probably due to a hardware issue. ...").
        r"P2P is disabled between NVLINK connected GPUs (?P<gpu_a>\d+) and (?P<gpu_b>\d+)",
        K.FAULTY_HOST,
        C.NVLINK,
        S.CRITICAL,
        Blame.SELF,
        ["P2P is disabled between NVLINK"],
        "NCCL sees two NVLink-connected GPUs of this host without P2P access: NVLink or GPU trouble on this host.",
    ),
    _sig(
        "nccl_nvml_failed",
        # misc/nvmlwrap.cc: WARN("nvmlDeviceGetHandleByIndex(%d) failed: %s"), WARN("nvmlInit%s() failed: %s"), ...
        # with nvmlErrorString: "GPU is lost" (NVML_ERROR_GPU_IS_LOST), "Driver/library version mismatch" (the loaded
        # kernel module is not the installed driver's: an upgrade without a reboot).
        r"nvml\w+\([^()\n]{0,20}\) failed: (?P<nvml_error>GPU is lost|Driver/library version mismatch)",
        K.FAULTY_HOST,
        None,
        S.CRITICAL,
        Blame.SELF,
        ["nvml"],
        "NVML (through NCCL) reports a lost GPU or a driver/kernel-module mismatch on this host.",
        post=lambda ev: _nvml_post(ev),
    ),
    _sig(
        "paddle_fatal_signal",
        # PaddlePaddle paddle/fluid/platform/init.cc SignalHandle (its signal handler, after a "C++ Traceback (most
        # recent call last):" of the native frames): "FatalError: `%s` is detected by the operating system." with
        # the signal's description ("Termination signal" SIGTERM: killed from outside; "Segmentation fault").
        # (the backticks are dropped with a paste's markdown code marks)
        r"FatalError: `?(?P<paddle_signal>[^`\n]{1,40}?)`? is detected by the operating system",
        K.CRASH,
        C.SIGNAL,
        S.CRITICAL,
        Blame.NONE,
        ["is detected by the operating system"],
        "Paddle's signal handler: the process died of the signal named (its C++ frames say where it was).",
        post=lambda ev: _paddle_signal_post(ev),
    ),
    _sig(
        "native_frame_in_nccl_collective",
        # A numbered native frame list (Paddle's "C++ Traceback": "8   ncclAllReduce"; glog/absl "@ 0x... ncclX")
        # with an NCCL collective or its wait on the stack: the thread sat inside the collective.
        r"^\s*(?:\d{1,3}\s+|@\s+0x[0-9a-f]+\s+)(?P<func>nccl(?:AllReduce|AllGather|Broadcast|ReduceScatter|Reduce|Send"
        r"|Recv|GroupEnd|BarrierEnqueueWait|AllToAll)\w*)\b",
        K.HUNG_COLLECTIVE,
        C.COLLECTIVE_TIMEOUT,
        S.WARNING,
        Blame.NONE,
        ["nccl"],
        "A native stack with an NCCL collective on it: the thread was inside the collective.",
        generic=True,
    ),
    # ---- torch c10d and gloo, from the sources ------------------------------------------------------------------
    _sig(
        "monitored_barrier_failed",
        # torch/csrc/distributed/c10d/ProcessGroupGloo.cpp monitoredBarrier: rank 0 waits for every rank and throws
        # "[Rank 0]: Rank {r} failed to pass monitoredBarrier in {ms} ms" (wait_all_ranks: "[Rank 0]: Ranks {r1, r2}
        # failed to pass ..."). The rank named never reached the barrier: it is the one stuck or gone.
        r"\bRank (?P<self_rank>\d+) failed to pass monitoredBarrier in (?P<timeout_ms>\d+) ms"
        r"|\bRanks (?P<failed_ranks>\d+(?:, \d+){1,1000}) failed to pass monitoredBarrier",
        K.HUNG_COLLECTIVE,
        C.COLLECTIVE_TIMEOUT,
        S.CRITICAL,
        Blame.SELF,
        ["failed to pass monitoredBarrier"],
        "torch.distributed.monitored_barrier: rank 0 names the rank(s) that never reached the barrier.",
        post=lambda ev: _barrier_post(ev),
    ),
    _sig(
        "monitored_barrier_peer",
        # torch/csrc/distributed/c10d/ProcessGroupGloo.cpp monitoredBarrier, every rank but 0: "Rank {r} successfully
        # reached monitoredBarrier, but received errors while waiting for send/recv from rank 0. Please check rank 0
        # logs for faulty rank." The printer arrived; rank 0 (the coordinator) knows who did not, or is itself gone.
        r"\bRank \d+ successfully reached monitoredBarrier, but received errors while waiting",
        K.HUNG_COLLECTIVE,
        C.COLLECTIVE_TIMEOUT,
        S.WARNING,
        Blame.NONE,
        ["successfully reached monitoredBarrier"],
        "torch.distributed.monitored_barrier, a rank that arrived: the barrier failed; rank 0's log names who did not.",
        generic=True,
    ),
    _sig(
        "nccl_aborted_comm_key",
        # torch 1.9-1.13 ProcessGroupNCCL.cpp ncclCommWatchdog: LOG(WARNING) "[Rank R] Found key in store:
        # NCCLABORTEDCOMM:<id>, from rank: S. This means that rank has aborted its NCCL communicators previously ...":
        # rank S aborted first (it timed out or hit an error): who saw the failure first, not who caused it.
        r"Found key in store: NCCLABORTEDCOMM:\S+, from rank: (?P<aborted_rank>\d+)",
        K.HUNG_COLLECTIVE,
        C.COLLECTIVE_TIMEOUT,
        S.WARNING,
        Blame.NONE,
        ["NCCLABORTEDCOMM"],
        "torch <= 1.13: another rank aborted its NCCL communicators (a timeout or error seen there first).",
        generic=True,
    ),
    _sig(
        "gloo_enforce",
        # gloo/common/logging.h GLOO_ENFORCE*: EnforceNotMet's message "[enforce fail at <file>:<line>] <condition>.
        # <values>. <message>" for a check inside gloo (its transport, its rendezvous, its device lookup): the
        # collective failed in gloo; the specific gloo lines above say more where they match.
        r"\[enforce fail at [^\]\n]{0,300}?/gloo/[^\]\n]{0,200}?:\d+\]",
        K.NETWORK_ERROR,
        C.GLOO,
        S.CRITICAL,
        Blame.NONE,
        ["enforce fail at"],
        "A check inside gloo failed (its transport, device or rendezvous).",
        generic=True,
    ),
    _sig(
        "gloo_size_mismatch",
        # gloo/transport/tcp/pair.cc: GLOO_ENFORCE_LE(op.preamble.length, op.nbytes) -> "[enforce fail at
        # .../pair.cc:446] op.preamble.length <= op.nbytes. 6232 vs 4": a peer sent more than the buffer this rank
        # posted: the two ranks are in different collectives (or the same one with different sizes).
        r"op\.preamble\.length <= op\.nbytes\. (?P<sent_bytes>\d+) vs (?P<posted_bytes>\d+)",
        K.COLLECTIVE_MISMATCH,
        C.SIZE_MISMATCH,
        S.CRITICAL,
        Blame.NONE,
        ["op.preamble.length"],
        "Gloo received a larger message than the buffer posted: ranks called different collectives or sizes.",
    ),
    _sig(
        "gloo_device_config",
        # gloo/transport/tcp/device.cc (lookupAddrForIface): GLOO_ENFORCE(ifa != nullptr, "Unable to find address
        # for: ", iface): GLOO_SOCKET_IFNAME names an interface this host does not have (or has no address on).
        # torch/csrc/distributed/c10d/GlooDeviceFactory.cpp makeUVDevice (gloo over libuv, torch 2.x on Windows and
        # macOS): TORCH_CHECK(!interface.empty() || !hostname.empty(), "GlooDeviceFactory::makeUVDevice(): interface
        # or hostname can't be empty"): neither GLOO_SOCKET_IFNAME nor a resolvable hostname.
        r"Unable to find address for: (?P<iface>\S+)|makeUVDevice\(\): interface or hostname can't be empty",
        K.NETWORK_ERROR,
        C.GLOO,
        S.CRITICAL,
        Blame.NONE,
        ["Unable to find address for", "makeUVDevice"],
        "Gloo's network interface (GLOO_SOCKET_IFNAME) has no address: configuration.",
    ),
    # ---- launchers: an exit seen by the process that started the workers ----------------------------------------
    _sig(
        "elastic_exit_barrier",
        # torch/distributed/elastic/agent/server/api.py _exit_barrier: logger.exception("Error waiting on exit barrier.
        # Elapsed: %s seconds"): this node's workers finished, another node's agent never reached the barrier (it
        # hung, or died before the store saw it).
        r"Error waiting on exit barrier\. Elapsed: (?P<elapsed_s>[\d.]+) seconds",
        K.RENDEZVOUS_ERROR,
        None,
        S.WARNING,
        Blame.NONE,
        ["exit barrier"],
        "The torchrun agent finished but another node's agent never reached the exit barrier.",
    ),
    _sig(
        "deepspeed_sigkill_handler",
        # DeepSpeed deepspeed/launcher/launch.py sigkill_handler: logger.info(f"Killing subprocess {process.pid}") for
        # every worker once one of them exited non-zero (or the launcher got SIGINT/SIGTERM): the run is being torn
        # down; the worker that failed printed why (or its exit is the "exits with return code" line).
        r"\[launch\.py:\d+:sigkill_handler\] Killing subprocess \d+",
        K.CRASH,
        C.EXIT_CODE,
        S.WARNING,
        Blame.NONE,
        ["sigkill_handler"],
        "DeepSpeed's launcher is killing its workers after one of them failed (or it was signalled).",
        generic=True,
    ),
    _sig(
        "shell_job_killed",
        # bash jobs.c: a non-interactive shell reports a child killed by a signal with strsignal()'s text, after
        # "<script>: line N: " for a script: "line 6:  3305 Killed  cmd" (SIGKILL), or the bare "Killed" of an
        # interactive one. SIGKILL with no other error is most often the kernel's OOM killer (or a cgroup's limit:
        # Docker, Slurm, Kubernetes); dmesg on the host says for sure.
        r"\bline \d+:\s+\d+ Killed\b|^Killed\s*$",
        K.OOM,
        None,
        S.WARNING,
        Blame.NONE,
        ["killed"],
        "A shell reports its child SIGKILLed: most often the kernel's OOM killer or a memory cgroup (see dmesg).",
    ),
    _sig(
        "launcher_child_exit",
        # DeepSpeed deepspeed/launcher/launch.py sigkill_handler: logger.error(f"{cmd} exits with return code =
        # {last_return_code}") (negative: killed by that signal); CPython Lib/subprocess.py CalledProcessError.__str__
        # (raised by `accelerate launch`, the deepspeed runner): "Command '%s' died with %r." (a <Signals.SIGKILL: 9>)
        # and "Command '%s' returned non-zero exit status %d.". The launcher names its command, not a global rank.
        r"\] exits with return code = (?P<exit_code>-?\d+)"
        r"|Command '[^\n]{0,4000}?' (?:died with <Signals\.(?P<signal>SIG\w+): \d+>|returned non-zero exit status "
        r"(?P<exit_code__2>\d+))\.",
        K.CRASH,
        C.EXIT_CODE,
        S.CRITICAL,
        Blame.NONE,
        [
            "exit",
            "command '",
        ],  # "exit" also gates "exited unexpectedly", "exiting process", "remote process exited", ...
        "A launcher (DeepSpeed's, accelerate's subprocess) saw its worker exit non-zero or die on a signal.",
        post=lambda ev: _launcher_exit_post(ev),
    ),
    _sig(
        "nccl_net_not_found",
        # src/net.cc ncclNetInit: WARN("Error: network %s not found.", netName) when NCCL_NET names a network (a
        # plugin such as "AWS Libfabric", or "IB") that did not load: configuration, then ncclInvalidUsage.
        r"Error: network (?P<net_name>[^\n]{1,80}?) not found\.",
        K.NETWORK_ERROR,
        C.NCCL,
        S.CRITICAL,
        Blame.NONE,
        ["error: network"],
        "The network NCCL_NET asks for is not available (its plugin did not load).",
    ),
    _sig(
        "store_based_barrier_timeout",
        # torch/distributed/distributed_c10d.py _store_based_barrier: RuntimeError("Timed out initializing process
        # group in store based barrier on rank: {}, for key: {} (world_size={}, worker_count={}, timeout={})")
        # (1.7-1.13; one release lost the space: "store basedbarrier"), 2.x DistStoreError "... on rank {}, for key:
        # {} (world_size={}, num_workers_joined={}, timeout={} error={})". The rank that says it is one that arrived.
        r"Timed out initializing process group in store based ?barrier on rank:? (?P<barrier_rank>\d+), for key: "
        r"(?P<key>\S+) \(world_size=(?P<world_size>\d+), (?:worker_count|num_workers_joined)=(?P<worker_count>\d+)",
        K.RENDEZVOUS_ERROR,
        None,
        S.CRITICAL,
        Blame.NONE,
        ["timed out"],  # also gates "timed out waiting", "client socket has timed out", ...
        "torch's init barrier timed out: some ranks never joined the process group.",
    ),
    _sig(
        "ddp_unused_parameters",
        # torch/csrc/distributed/c10d/reducer.cpp (Reducer::prepare_for_backward / ensure_prior_reduction_finished):
        # "Expected to have finished reduction in the prior iteration before starting a new one. This error indicates
        # that your module has parameters that were not used in producing loss. ...": the model's code, on every rank.
        r"Expected to have finished reduction in the prior iteration before starting a new one",
        K.CRASH,
        C.EXCEPTION,
        S.CRITICAL,
        Blame.NONE,
        ["finished reduction in the prior iteration"],
        "DDP found parameters that took no part in the loss (find_unused_parameters): the training code, no rank's fault.",
    ),
    _sig(
        "ddp_model_mismatch",
        # torch c10d verify_params_across_processes (comm.cpp / reducer): "DDP expects same model across all ranks, but
        # Rank {} has {} params, while rank {} has inconsistent {} params." Ranks disagree on the model, or (often) a
        # straggling rank's allgather returned garbage after a timeout: no side is named.
        r"DDP expects same model across all ranks, but Rank (?P<rank_a>\d+) has (?P<params_a>\d+) params, while rank "
        r"(?P<rank_b>\d+) has inconsistent (?P<params_b>\d+) params",
        K.COLLECTIVE_MISMATCH,
        C.SIZE_MISMATCH,
        S.CRITICAL,
        Blame.NONE,
        ["DDP expects same model"],
        "DDP's start-up check found ranks with different parameter counts (a different model, or a rank that lagged).",
    ),
    _sig(
        "dataloader_worker_exited",
        # torch/utils/data/dataloader.py _try_get_data: RuntimeError(f"DataLoader worker (pid(s) {pids_str}) exited
        # unexpectedly"): the reason (a signal, a bus error) is on the worker's own line.
        r"DataLoader worker \(pid\(s\) (?P<pids>[\d, ]{1,200})\) exited unexpectedly",
        K.CRASH,
        C.EXIT_CODE,
        S.CRITICAL,
        Blame.NONE,
        ["exited unexpectedly"],
        "A DataLoader worker process died; its own line (killed by signal, bus error) says why.",
        generic=True,
    ),
    _sig(
        "dataloader_worker_signal",
        # torch/csrc/DataLoader.cpp SIGNAL_HANDLER: "ERROR: Unexpected bus error encountered in worker. This might be
        # caused by insufficient shared memory (shm).", "ERROR: Unexpected segmentation fault encountered in worker.",
        # "ERROR: Unexpected floating-point exception encountered in worker.": SIGBUS is /dev/shm running out.
        r"ERROR: Unexpected (?P<signal_text>bus error|segmentation fault|floating-point exception) encountered in worker",
        K.CRASH,
        C.SIGNAL,
        S.CRITICAL,
        Blame.SELF,
        ["encountered in worker"],
        "A DataLoader worker crashed on a signal (a bus error: shared memory exhausted, an out-of-memory).",
        post=lambda ev: _dataloader_post(ev),
    ),
    _sig(
        "lightning_sigterm",
        # Lightning src/lightning/pytorch/trainer/connectors/signal_connector.py _sigterm_notifier_fn:
        # log.info(rank_prefixed_message(f"Received SIGTERM: {signum}", local_rank)): stopped from outside.
        r"Received SIGTERM: (?P<signal_no>\d+)",
        K.CRASH,
        C.SIGNAL,
        S.CRITICAL,
        Blame.NONE,
        ["Received SIGTERM"],
        "Lightning's trainer got SIGTERM (the scheduler, a preemption or a user stopped the run).",
        post=_death_signal_post,
    ),
    _sig(
        "slurm_cancelled",
        # Slurm src/slurmd/slurmstepd (mgr.c / req.c): error("*** %s ON %s CANCELLED AT %s DUE TO TIME LIMIT ***"),
        # "... DUE TO PREEMPTION ***", "... DUE TO NODE FAILURE, SEE SLURMCTLD LOG FOR DETAILS ***", "*** %s ON %s
        # CANCELLED AT %s ***" (scancel); older releases without "ON %s". The node named is the one whose slurmstepd
        # printed it; for a node failure, the failed node is in slurmctld's log, not here.
        r"\*\*\* (?:JOB|STEP) [\w.+]{1,40} (?:ON \S{1,253} )?CANCELLED AT \S{1,40}"
        r"(?: DUE TO (?P<cancel_reason>TIME LIMIT|PREEMPTION|NODE FAILURE))?",
        K.CRASH,
        C.SIGNAL,
        S.CRITICAL,
        Blame.NONE,
        ["CANCELLED AT"],
        "Slurm cancelled the job or step (time limit, preemption, scancel; a node failure names no node here).",
        post=lambda ev: _slurm_cancel_post(ev),
    ),
    _sig(
        "srun_node_failure",
        # Slurm src/srun (launch plugin _node_fail_handler): error("Node failure on %s", msg->nodelist):
        # slurmctld told srun these nodes failed (down, not responding) while the step ran.
        r"srun: error: Node failure on (?P<failed_nodes>[\w.,\[\]-]{1,400})",
        K.FAULTY_HOST,
        C.UNREACHABLE,
        S.CRITICAL,
        Blame.SELF,
        ["Node failure on"],
        "Slurm's controller declared the named node(s) failed during the step.",
        post=_srun_node_failure_post,
    ),
    _sig(
        "k8s_backoff_restart",
        # kubernetes pkg/kubelet/kuberuntime (event reason BackOff): "Back-off restarting failed container
        # %s in pod %s" (older: "Back-off %s restarting failed container=%s pod=%s"): the container keeps
        # exiting with an error and the kubelet delays its restarts (CrashLoopBackOff).
        r"Back-off (?:\S+ )?restarting failed container",
        K.CRASH,
        C.EXIT_CODE,
        S.WARNING,
        Blame.NONE,
        ["restarting failed container"],
        "Kubernetes restarts a container that keeps failing (CrashLoopBackOff); its own logs say why.",
        generic=True,
    ),
    _sig(
        "srun_task_exit",
        # Slurm srun (its task-exit report): "srun: error: NODE: task N: Exited with exit code C", "srun: error: NODE:
        # tasks 4-7: Killed" (also Terminated, Segmentation fault, Aborted, Bus error): srun reports what it saw;
        # after one task fails it kills the rest, so these are consequences ("Out Of Memory" is slurm_oom_kill).
        r"srun: error: (?P<srun_node>[\w.-]{1,253}): tasks? [\d,-]{1,200}: (?:Exited with exit code (?P<exit_code>\d+)"
        r"|(?P<signal_text>Killed|Terminated|Segmentation fault|Aborted|Bus error))",
        K.CRASH,
        C.SIGNAL,
        S.WARNING,
        Blame.NONE,
        ["srun: error:"],
        "srun reports tasks that exited or were killed (a consequence of the failure that ended the step).",
        generic=True,
        post=lambda ev: _srun_exit_post(ev),
    ),
    _sig(
        "k8s_oom_killed",
        # Kubernetes: a container terminated by the kernel's OOM killer under its memory limit has reason "OOMKilled"
        # (kubectl describe pod "Reason: OOMKilled", kubectl get pods STATUS).
        r"\bOOMKilled\b",
        K.OOM,
        None,
        S.CRITICAL,
        Blame.SELF,
        ["OOMKilled"],
        "A Kubernetes container was killed at its memory limit (OOMKilled).",
    ),
    _sig(
        "store_wait_timeout",
        # torch/csrc/distributed/c10d/TCPStore.cpp doWait (2.x): DistStoreError "wait timeout after {}ms, keys: {}":
        # a rank waited in the c10d store for keys another rank or agent never set (it died, hung or never started).
        r"wait timeout after (?P<timeout_ms>\d+)ms, keys: (?P<keys>[^\n]{1,200})",
        K.RENDEZVOUS_ERROR,
        None,
        S.CRITICAL,
        Blame.NONE,
        ["wait timeout after"],
        "A c10d store wait timed out: the keys another rank should have set never came.",
    ),
    _sig(
        "cuda_unavailable",
        # torch/cuda/__init__.py _lazy_init: RuntimeError "No CUDA GPUs are available" (the runtime saw no
        # device: none visible to the process, CUDA_VISIBLE_DEVICES, or a GPU the driver lost), and
        # DeferredCudaCallError "CUDA call failed lazily at initialization with error: ...". The process
        # could not use CUDA; whether the host or the job's settings are at fault, the line does not say.
        r"(?P<cuda_error>No CUDA GPUs are available|CUDA call failed lazily at initialization)",
        K.CRASH,
        C.CUDA_ERROR,
        S.CRITICAL,
        Blame.SELF,
        ["No CUDA GPUs are available", "failed lazily at initialization"],
        "The process found no usable CUDA device at start (visibility settings, or a GPU the host lost).",
    ),
    _sig(
        "cuda_init_failed",
        # c10/cuda/CUDAFunctions.cpp device_count_impl: "Unexpected error from cudaGetDeviceCount(). Did you run some
        # cuda functions before calling NumCudaDevices() that might have already set an error? Error {}: {}" (a
        # UserWarning "CUDA initialization: ..." or a RuntimeError): 802 system not yet initialized (the NVSwitch
        # fabric manager), 803/804 driver and CUDA mismatch: the host's driver stack; "out of memory" an OOM.
        r"Unexpected error from cudaGetDeviceCount\(\)\.[^\n]{0,200}?Error (?P<cuda_errno>\d+): (?P<cuda_error>[^\n(]{1,120})",
        K.FAULTY_HOST,
        None,
        S.CRITICAL,
        Blame.SELF,
        ["cudaGetDeviceCount"],
        "CUDA could not start on this host (fabric manager down, driver/CUDA mismatch, a GPU in a bad state).",
        post=_cuda_post,
    ),
    _sig(
        "nvrm_init_adapter_failed",
        # NVIDIA open-gpu-kernel-modules src/nvidia/arch/nvalloc/unix/src/osinit.c RmInitAdapter:
        # NV_DEV_PRINTF(NV_DBG_ERRORS, nv, "RmInitAdapter failed! (0x%x:0x%x:%d)\n", ...), prefixed "NVRM: GPU <pci>: "
        # and kernel-open/nvidia/nv.c nv_start_device: "rm_init_adapter failed, device minor number %d" after it.
        # Older drivers print it without the "GPU <pci>: " prefix, and "rm_init_adapter failed for device bearing
        # minor number %d" (kernel/nvidia/nv.c before the open modules).
        rf"NVRM: (?:GPU {_PCI}: )?(?:RmInitAdapter failed! \((?P<init_status>0x[0-9a-fA-F]+):(?P<rm_status>0x[0-9a-fA-F]+):\d+\)"
        r"|rm_init_adapter failed(?:, device| for device bearing) minor number (?P<minor>\d+))",
        K.FAULTY_HOST,
        C.GPU_LOST,
        S.CRITICAL,
        Blame.SELF,
        ["RmInitAdapter failed", "rm_init_adapter failed"],
        "The driver could not initialize this GPU: the host cannot use it until it is reset or repaired.",
    ),
    # ---- nvidia-smi (the driver's CLI) ----------------------------------------------------------
    _sig(
        "nvidia_smi_no_driver",
        # nvidia-smi's message when NVML cannot reach the kernel driver (NVIDIA driver README, "nvidia-smi").
        r"NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver",
        K.FAULTY_HOST,
        C.GPU_LOST,
        S.CRITICAL,
        Blame.SELF,
        ["NVIDIA-SMI has failed"],
        "The driver does not answer on this host (crashed driver, GPU off the bus, module not loaded).",
    ),
    _sig(
        "nvidia_smi_err_field",
        # nvidia-smi's table prints "ERR!" in a field NVML could not read for that GPU (nvidia-smi(1)).
        r"^\|[^\n]*?\bERR!",
        K.FAULTY_HOST,
        None,
        S.WARNING,
        Blame.NONE,
        ["err!"],
        "nvidia-smi could not read a GPU field (ERR!): a GPU in trouble or a transient NVML failure; look again.",
    ),
    _sig(
        "nvidia_smi_uncorrectable_ecc",
        # nvidia-smi's default table: each GPU's first row is "| GPU  Name  Persistence-M | Bus-Id  Disp.A
        # | Volatile Uncorr. ECC |" (the header above it names the columns). A count above 0 in the third
        # field is uncorrectable ECC errors since the driver loaded on that GPU (nvidia-smi(1), ECC).
        r"^\|\s+(?P<gpu>\d+)\s+[^|\n]*?\s(?:On|Off)\s+\|\s+(?P<gpu_pci>[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.\d)"
        r"\s+(?:On|Off)\s+\|\s+(?P<uncorrected>[1-9]\d*)\s+\|\s*$",
        K.FAULTY_HOST,
        C.ECC,
        S.CRITICAL,
        Blame.SELF,
        ["off |", "on |"],  # the Disp.A field before it: the pattern runs on those rows only, not every "|"
        "nvidia-smi's table with a non-zero 'Volatile Uncorr. ECC' count for a GPU.",
    ),
    _sig(
        "nvidia_smi_remap_pending",
        # nvidia-smi -q: "Remapped Rows" (A100+) and "Retired Pages" (older) sections print
        # "Pending : Yes" when a row remap / page retirement waits for a GPU reset, and
        # "Remapping Failure Occurred : Yes" when the GPU ran out of spare rows (NVIDIA's memory error
        # management guide: reset the GPU; a remapping failure means replace it).
        r"^\s*(?P<smi_field>Pending|Remapping Failure Occurred)\s*:\s*Yes\s*$",
        K.FAULTY_HOST,
        C.ECC,
        S.CRITICAL,
        Blame.SELF,
        ["Pending", "Remapping Failure Occurred"],
        "nvidia-smi: a GPU memory row remap or page retirement is pending (reset the GPU) or failed (replace it).",
    ),
    _sig(
        "amdgpu_ras_error",
        # Linux drivers/gpu/drm/amd/amdgpu: amdgpu_ras.c "uncorrectable hardware error(%s) detected!" and amdgpu_aca.c
        # HW_ERR "Accelerator Check Architecture events logged", each prefixed by the device ("amdgpu 0000:1c:00.0:").
        rf"amdgpu {_PCI}: (?:\{{\d+\}})?(?:uncorrectable hardware error|\[Hardware Error\]: Accelerator Check Architecture "
        r"events logged)",
        K.FAULTY_HOST,
        C.ECC,
        S.CRITICAL,
        Blame.SELF,
        ["uncorrectable hardware error", "accelerator check architecture"],
        "An AMD GPU reported an uncorrectable RAS error on this host.",
    ),
    _sig(
        "nvidia_smi_device_handle",
        # nvidia-smi when nvmlDeviceGetHandleByIndex fails: "Unable to determine the device handle for GPU<bus id>:
        # <nvmlErrorString>", e.g. "Unknown Error" or "GPU is lost" (NVML_ERROR_GPU_IS_LOST).
        rf"Unable to determine the device handle for GPU\s?{_PCI}[^:]*:\s*(?P<nvml_error>[^\n]{{1,80}})",
        K.FAULTY_HOST,
        C.GPU_LOST,
        S.CRITICAL,
        Blame.SELF,
        ["device handle for GPU"],
        "nvidia-smi cannot reach one GPU: it fell off the bus or is otherwise lost.",
    ),
    # ---- the NVIDIA driver, NVML and DCGM beyond Xids (NVIDIA/open-gpu-kernel-modules 595.45.04 / 535.98,
    # NVIDIA/go-nvml gen/nvml/nvml.h, NVIDIA/DCGM dcgmi/Diag.cpp v3.3.9 / v4.6.0) ----------------------------
    _sig(
        "nvrm_gsp_banner",
        # src/nvidia/src/kernel/gpu/gsp/kernel_gsp.c: NV_PRINTF(LEVEL_ERROR, "**** GSP Timeout ****") before an
        # Xid 119 (595.x; 535.x "GSP Failure"), NV_PRINTF's prefix (diagnostics/nvlog_printf.c RmMsgPrefix: "NVRM: "
        # then, as configured, "GPU%u", file, line, function: "NVRM: GPU1 _kgspLogRpcDebugInfo: ").
        # The GPU System Processor of this host's GPU stopped answering the driver.
        r"NVRM: [\w. ]{1,80}?: \*{10,} GSP (?P<gsp_event>Timeout|Failure|Error) \*{10,}",
        K.FAULTY_HOST,
        C.XID,
        S.CRITICAL,
        Blame.SELF,
        ["GSP Timeout", "GSP Failure", "GSP Error"],
        "The GPU's GSP firmware stopped answering the driver (the banner before Xid 119/120) on this host.",
    ),
    _sig(
        "nvrm_crash_dump",
        # src/nvidia/arch/nvalloc/unix/src/osapi.c: "NVRM: A GPU crash dump has been created. If possible, please
        # run" after the driver saved a GPU's crash data; the Xid line before it says which fault.
        r"NVRM: A GPU crash dump has been created",
        K.FAULTY_HOST,
        C.XID,
        S.WARNING,
        Blame.SELF,
        ["GPU crash dump has been created"],
        "The driver saved crash data of a GPU of this host (which fault: the Xid line before it).",
        generic=True,
    ),
    _sig(
        "nvswitch_sxid",
        # src/common/nvswitch/kernel/inc/common_nvswitch.h NVSWITCH_PRINT_SXID: "nvidia-%s: SXid (PCI:%s): %05d, "
        # then error_nvswitch.h's "Fatal, Link %02d ...", "Non-fatal, Link %02d ...", "Correctable, Link %02d ...".
        # The NVSwitch sits on this host's baseboard.
        rf"nvidia-nvswitch\d+: SXid \({_PCI}\): (?P<sxid>\d+), (?P<sxid_severity>Fatal|Non-fatal|Correctable)",
        K.FAULTY_HOST,
        C.NVLINK,
        S.CRITICAL,
        Blame.SELF,
        ["SXid ("],
        "An NVSwitch of this host reported an error (SXid): Fatal critical, Non-fatal warning, Correctable information.",
        post=lambda ev: _sxid_post(ev),
    ),
    _sig(
        "nvidia_peermem_error",
        # kernel-open/nvidia-peermem/nvidia-peermem.c nv_mem_client_init, peer_err(): "nvidia-peermem %s:%d ERROR
        # nv_mem_client_init -- error while registering traditional client" (or "nc client"): the IB stack
        # refused the peer-memory client, so GPUDirect RDMA is off on this host and NCCL stages through host
        # memory. (Its other ERROR lines, e.g. the free callback's "detected invalid context, skipping further
        # processing" when a process exits with registered memory, say nothing failed: not taken.)
        r"nvidia-peermem \w+:\d+ ERROR nv_mem_client_init -- error while registering (?:traditional|nc) client",
        K.NETWORK_ERROR,
        C.IB,
        S.WARNING,
        Blame.NONE,
        ["error while registering"],
        "nvidia-peermem could not register with the IB stack: no GPUDirect RDMA on this host.",
    ),
    _sig(
        "nvml_error",
        # nvidia-smi "Failed to initialize NVML: Driver/library version mismatch" and nvidia-ml-py's NVMLError_<Name>
        # classes (str: nvmlErrorString): NVML_ERROR_LIB_RM_VERSION_MISMATCH (the loaded kernel module is not the
        # installed library's: an upgrade without a reboot), NVML_ERROR_GPU_IS_LOST (off the bus),
        # NVML_ERROR_RESET_REQUIRED ("GPU requires restart"); nvidia-smi's "No devices were found" (the driver
        # answers and sees no GPU). Each is this host's GPU or driver.
        # The kernel module's side of the mismatch (src/nvidia/arch/nvalloc/unix/src/osapi.c): "NVRM: API mismatch: the
        # client has the version %s, but" (535.x), "NVRM: API mismatch: the client '%s' (pid %u)" (595.x).
        r"Failed to initialize NVML: Driver/library version mismatch|NVRM: API mismatch: the client"
        r"|NVMLError_(?P<nvml_class>LibRmVersionMismatch|GpuIsLost|ResetRequired)\b|^No devices were found\s*$",
        K.FAULTY_HOST,
        None,
        S.CRITICAL,
        Blame.SELF,
        ["Driver/library version mismatch", "API mismatch", "NVMLError_", "No devices were found"],
        "NVML: the host's driver and library differ, a GPU is lost or needs a reset, or no GPU is visible.",
        post=lambda ev: _nvml_error_post(ev),
    ),
    _sig(
        "dcgmi_diag_fail",
        # dcgmi/Diag.cpp: the DIAG_DATA row "| <name 25> | <info 45> |"; v3 prints "Fail - GPU: 0" / "Fail - GPUs:
        # 0, 3" / "Fail - All" beside the test, v4 one row per entity "GPU0: Fail" under it. A failed
        # diagnostic is NVIDIA's own test failing this host's GPU.
        r"^\|[^|\n]{0,40}\|\s*(?:Fail - (?:All|GPUs?: (?P<dcgm_gpus>\d+(?:, \d+)*))|GPU(?P<dcgm_gpu>\d+): Fail)\s*\|\s*$",
        K.FAULTY_HOST,
        None,
        S.CRITICAL,
        Blame.SELF,
        ["Fail - ", ": Fail"],
        "dcgmi diag failed a test on a GPU of this host.",
    ),
    _sig(
        "habanalabs_device_unusable",
        # Linux drivers/accel/habanalabs/common/device.c hl_device_init: dev_err(..., "Failed to initialize hl%d.
        # Device%s is NOT usable !") (Intel Gaudi), after "Failed to communicate with Device CPU (CPU-CP timeout)":
        # an accelerator of this host failed to come up.
        r"Failed to initialize hl(?P<hl_dev>\d+)\. Device\b[^\n]{0,20}? is NOT usable",
        K.FAULTY_HOST,
        None,
        S.CRITICAL,
        Blame.SELF,
        ["is not usable"],
        "An Intel Gaudi device of this host failed to initialise (habanalabs driver).",
    ),
    _sig(
        "nvvs_test_fail",
        # NVIDIA/DCGM nvvs/src/Output.cpp (779120f, the NVIDIA Validation Suite's console output, `nvvs` and
        # `dcgmi diag` before its table): prep() prints "\t\t<test>" then dots to a fixed width, Result() the
        # outcome ("PASS", "WARN", "SKIP", "FAIL") and each error as "\t\t   *** (GPU %u) <msg>" (older without
        # the GPU). A FAIL row is NVIDIA's own test failing this host's GPU ("Memory GPU6 ....... FAIL").
        r"^\s*(?P<nvvs_test>[A-Za-z][\w /-]{1,40}?)(?: GPU ?(?P<nvvs_gpu>\d+))? ?\.{5,} ?FAIL\b",
        K.FAULTY_HOST,
        None,
        S.CRITICAL,
        Blame.SELF,
        ["... fail", "...fail"],
        "The NVIDIA Validation Suite (nvvs, dcgmi diag's text output) failed a test on a GPU of this host.",
    ),
    # ---- kernel: PCIe AER and machine checks (Linux drivers/pci/pcie/aer.c, arch/x86/kernel/cpu/mce) ----
    _sig(
        "pcie_aer_error",
        # aer.c aer_print_error: "PCIe Bus Error: severity=%s, type=%s, (%s)" with severity one of
        # "Uncorrected (Non-Fatal)", "Uncorrected (Fatal)", "Corrected" (aer_error_severity_string), spelled
        # "Uncorrectable (Non-Fatal)", "Uncorrectable (Fatal)", "Correctable" since Linux 6.x (the spec's terms).
        # The root port's own line: "AER: Uncorrected (Fatal) error received: <id>" (<= 5.x) and
        # "AER: Uncorrectable (Fatal) error message received from <id>" (aer_print_source, 6.x).
        r"(?:(?P<pci>[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.\d): )?PCIe Bus Error: severity=(?P<aer_severity>"
        r"Uncorrect(?:ed|able) \((?:Non-)?Fatal\)|Correct(?:ed|able))"
        r"|AER: (?:Multiple )?(?P<aer_severity__2>Uncorrect(?:ed|able) \((?:Non-)?Fatal\)|Correct(?:ed|able)) error "
        r"(?:message )?received",
        K.FAULTY_HOST,
        C.PCIE_DOWNGRADE,
        S.WARNING,
        Blame.SELF,
        ["PCIe Bus Error", "AER:"],
        "Kernel AER: a PCIe error on this host's bus; Fatal is critical, Corrected is information.",
        post=lambda ev: _aer_post(ev),
    ),
    _sig(
        "pcie_containment",
        # drivers/pci/pcie/dpc.c dpc_process_error (dev_fmt "DPC: "): "containment event, status:%#06x source:%#06x"
        # (<= 6.x; 4.x "DPC containment event"), 6.x "containment event, status:%#06x: unmasked uncorrectable error
        # detected": the port took its link down, cutting off the device below it (a GPU, a NIC). err.c
        # pcie_do_recovery (dev_fmt "AER: "): "device recovery failed", "subordinate device reset failed": the
        # device stays lost. ("device recovery successful" is the good end: not taken.)
        r"DPC:? containment event, status:0x[0-9a-fA-F]+"
        r"|AER: (?P<pcie_recovery>device recovery failed|subordinate device reset failed)",
        K.FAULTY_HOST,
        C.PCIE_DOWNGRADE,
        S.WARNING,
        Blame.SELF,
        ["containment event", "device recovery failed", "subordinate device reset failed"],
        "Kernel PCIe: a port contained an error by taking its link down (warning); recovery failed (critical).",
        post=lambda ev: _pcie_recovery_post(ev),
    ),
    _sig(
        "machine_check",
        # mce/core.c: pr_emerg(HW_ERR "CPU %d: Machine Check%s: %Lx Bank %d: %016Lx"), and mce_notify_irq's
        # pr_info(HW_ERR "Machine check events logged"); HW_ERR is "[Hardware Error]: ".
        r"\[Hardware Error\]: (?:CPU (?P<cpu>\d+): Machine Check(?P<mce_exception> Exception)?: [0-9a-fx]+ Bank (?P<bank>\d+)"
        r"|Machine check events logged)",
        K.FAULTY_HOST,
        C.MCE,
        S.WARNING,
        Blame.SELF,
        ["Hardware Error"],
        "Kernel machine check: the CPU or host memory reported a hardware error (a Machine Check Exception is fatal).",
        post=lambda ev: _mce_post(ev),
    ),
    _sig(
        "iommu_fault",
        # drivers/iommu/amd/iommu.c amd_iommu_report_page_fault: dev_err(dev, "Event logged [IO_PAGE_FAULT
        # domain=0x%04x address=0x%llx flags=0x%04x]") (older: "AMD-Vi: Event logged [IO_PAGE_FAULT
        # device=..."); drivers/iommu/intel/dmar.c dmar_fault_do_one: "[DMA Read|Write NO_PASID] Request
        # device [%02x:%02x.%d] fault addr 0x%llx [fault reason 0x%02x] %s". The IOMMU blocked a device's
        # DMA: with GPUs, usually peer-to-peer through an IOMMU/ACS (NVIDIA: disable it for P2P), or a
        # device fault.
        rf"(?:(?:nvidia|amdgpu|mlx5_core) {_PCI}: )?(?:AMD-Vi: )?Event logged \[IO_PAGE_FAULT|DMAR: \[DMA (?:Read|Write)"
        rf"[^\]\n]*\] Request device \[(?P<dmar_dev>[0-9a-f:.]+)\] fault addr",
        K.FAULTY_HOST,
        C.HOST_KERNEL,
        S.WARNING,
        Blame.SELF,
        ["IO_PAGE_FAULT", "DMAR: [DMA"],
        "The host's IOMMU blocked a device's DMA (GPU peer-to-peer through an IOMMU/ACS, or a device fault).",
    ),
    _sig(
        "kernel_lockup",
        # kernel/watchdog.c: pr_emerg("BUG: soft lockup - CPU#%d stuck for %us! [%s:%d]"), hard lockups
        # ("Watchdog detected hard LOCKUP on cpu %d"), and kernel/hung_task.c: pr_err("INFO: task %s:%d
        # blocked for more than %ld seconds."): the host's kernel is stuck (a driver spinning, storage
        # that does not answer); a training process named there is stuck with it.
        # (The "[comm:pid]" tail is optional: a pasted or wrapped line is often cut there.)
        r"BUG: soft lockup - CPU#(?P<cpu>\d+) stuck for (?P<stuck_s>\d+)s!(?: \[(?P<proc>[^:\]\n]+):(?P<pid>\d+)\])?"
        r"|Watchdog detected hard LOCKUP on cpu (?P<cpu2>\d+)"
        r"|INFO: task (?P<task>[^:\s]+):(?P<task_pid>\d+) blocked for more than (?P<blocked_s>\d+) seconds",
        K.FAULTY_HOST,
        C.HOST_KERNEL,
        S.WARNING,
        Blame.SELF,
        ["soft lockup", "hard LOCKUP", "blocked for more than"],
        "The host's kernel reported a CPU lockup or a task stuck in the kernel (driver or storage).",
    ),
    _sig(
        "kernel_stack_in_nvidia",
        # A kernel stack frame inside an NVIDIA kernel module: /proc/PID/stack and older oopses/hung-task
        # dumps "[<ffffffffc33d41c2>] uvm_spin_loop+0xb2/0xe0 [nvidia_uvm]" (fs/proc/base.c proc_pid_stack,
        # "[<%pK>] %pB"), newer "Call Trace:" frames " uvm_spin_loop+0xb2/0xe0 [nvidia_uvm]"
        # (lib/vsprintf.c %pB: symbol+off/size [module]). A process whose kernel stack sits in the
        # driver is stuck there (unkillable, D state): the host's driver, not the training code.
        r"^(?:\[<[0-9a-f]{1,16}>\]\s+)?(?:\? )?(?P<kfunc>\w+)\+0x[0-9a-f]+/0x[0-9a-f]+ "
        r"\[(?P<kmodule>nvidia(?:_uvm|_modeset|_drm|_peermem)?)\]",
        K.FAULTY_HOST,
        C.HOST_KERNEL,
        S.WARNING,
        Blame.SELF,
        ["[nvidia"],
        "A kernel stack frame inside the NVIDIA driver: a process stuck in the driver on this host.",
        generic=True,
    ),
    _sig(
        "kernel_rip_in_gpu_driver",
        # An oops or WARN whose faulting instruction is in a GPU kernel driver: arch/x86/kernel/dumpstack.c
        # show_ip prints "RIP: %04x:%pS" ("RIP: 0010:svm_range_evict_svm_bo_worker+0x313/0x330 [amdgpu]"), the
        # module in brackets (lib/vsprintf.c %pS). The host's driver hit a bug or a hardware fault there.
        r"\bRIP: [0-9a-f]{4}:(?P<kfunc>\w+)\+0x[0-9a-f]+/0x[0-9a-f]+ \[(?P<kmodule>nvidia(?:_uvm|_modeset|_drm|_peermem)?"
        r"|amdgpu|amdkfd|habanalabs)\]",
        K.FAULTY_HOST,
        C.HOST_KERNEL,
        S.CRITICAL,
        Blame.SELF,
        ["rip: "],
        "The kernel oopsed (or warned) inside a GPU driver on this host.",
    ),
    _sig(
        "kernel_segfault",
        # arch/x86/mm/fault.c show_signal_msg: "%s[%d]: segfault at %lx ip %px sp %px error %lx" then " in %s[...]"
        # (6.x adds " likely on CPU %d (core %d, socket %d)"); arch/x86/kernel/traps.c: "traps: %s[%d] general
        # protection fault ip:%lx sp:%lx error:%lx in %s". The kernel saw that process die of SIGSEGV on this host.
        r"(?P<proc>[^\s\[\]]{1,64})\[(?P<pid>\d+)\]: segfault at [0-9a-f]+ ip [0-9a-f]+ sp [0-9a-f]+ error \d+"
        r"|traps: (?P<proc__2>[^\s\[\]]{1,64})\[(?P<pid__2>\d+)\] general protection(?: fault)? ip:[0-9a-f]+",
        K.CRASH,
        C.SIGNAL,
        S.CRITICAL,
        Blame.SELF,
        ["segfault at", "general protection"],
        "The kernel's record of a process killed by SIGSEGV (segfault, general protection fault) on this host.",
        post=lambda ev: ev.fields.setdefault("signal", "SIGSEGV"),
    ),
    _sig(
        "openmpi_signal",
        # Open MPI opal/util/stacktrace.c show_stackframe, a process's own signal handler (mpirun, horovodrun,
        # SageMaker): HOSTFORMAT "[%s:%05d] " then "*** Process received signal ***", "Signal: %s (%d)" (strsignal,
        # signo), "Signal code: ...", "Failing at address: %p", the frames, "*** End of error message ***".
        # The process on that host died of the signal named.
        r"^\[(?P<self_node>[\w.-]{1,253}):(?P<pid>\d+)\] Signal: (?P<signame>[^()\n]{1,60}) \((?P<signo>\d{1,2})\)",
        K.CRASH,
        C.SIGNAL,
        S.CRITICAL,
        Blame.SELF,
        ["] signal: "],
        "Open MPI's signal handler: the process on the host in brackets died of the signal named.",
        post=lambda ev: _openmpi_signal_post(ev),
    ),
    _sig(
        "mce_amd_decoded",
        # Linux drivers/edac/mce_amd.c decode: pr_emerg(HW_ERR "MC%d Error: ...") / "MC4 Error (node %d): "
        # then the bank's description (mc4_mce_desc: "DRAM ECC error detected on the NB", ...), and
        # decode_error_status: "Error Status: Corrected error, no action required." / "Uncorrected ...".
        r"\[Hardware Error\]: MC(?P<bank>\d+) Error(?: \(node (?P<node>\d+)\))?: (?P<mce_what>[^\n]{1,120})",
        K.FAULTY_HOST,
        C.MCE,
        S.WARNING,
        Blame.SELF,
        ["Hardware Error"],
        "AMD machine check decoded by the kernel: a CPU, cache or host-memory (DRAM ECC) error on this host.",
    ),
    _sig(
        "edac_memory_error",
        # Linux drivers/edac/edac_mc.c edac_ce_error / edac_ue_error: edac_mc_printk(mci, KERN_WARNING,
        # "%d CE %s%son %s (...)") and "%d UE %s%son %s (...)", prefixed "EDAC MC%d: ".
        r"EDAC MC(?P<mc>\d+): (?P<edac_count>\d+) (?P<edac>CE|UE) (?P<edac_what>[^\n(]{0,80}?)on ",
        K.FAULTY_HOST,
        C.MCE,
        S.WARNING,
        Blame.SELF,
        ["EDAC MC"],
        "Host memory errors counted by EDAC: corrected (CE, a failing DIMM when they keep coming) or uncorrected "
        "(UE, critical).",
        post=_edac_post,
    ),
    # ---- process listings (procps `ps`: a zombie's command is shown as "<defunct>") -------------------
    _sig(
        "process_defunct",
        r"\bZ[sl+<N]*\s+.*?\[(?P<command>[^\]\n]{1,60})\] <defunct>|(?P<command2>\S{1,60}) <defunct>",
        K.CRASH,
        C.EXIT_CODE,
        S.WARNING,
        Blame.NONE,
        ["<defunct>"],
        "A process exited and was never reaped (a zombie): a worker died under a parent that is stuck.",
    ),
    _sig(
        "process_uninterruptible",
        # procps ps aux columns (USER PID %CPU %MEM VSZ RSS TTY STAT START TIME COMMAND); STAT D is
        # "uninterruptible sleep (usually IO)" (ps(1)): a python rank in D waits in the kernel (storage,
        # a driver) and cannot even be killed until it returns.
        r"^\S+\s+(?P<pid>\d+)\s+[\d.]+\s+[\d.]+\s+\d+\s+\d+\s+\S+\s+(?P<stat>D\S*)\s+\S+\s+\S+\s+"
        r"(?P<command>\S*python\S*[^\n]{0,200})",
        K.HUNG_COLLECTIVE,
        None,
        S.WARNING,
        Blame.NONE,
        ["python"],
        "ps shows a python process in uninterruptible sleep (D): stuck in the kernel, on I/O or a driver.",
        generic=True,
    ),
    _sig(
        "process_zombie_top",
        # procps top's default task columns (src/top/top.c, Fieldstab): PID USER PR NI VIRT RES SHR S %CPU
        # %MEM TIME+ COMMAND; S is the process state, Z a zombie.
        # Not anchored: a short listing pasted under its header may be joined to it as one wrapped line.
        r"(?<!\S)(?P<pid>\d+)\s+\S+\s+(?:-?\d+|rt)\s+-?\d+\s+\S+\s+\S+\s+\S+\s+Z\s+[\d.]+\s+[\d.]+\s+[\d:.]+\s+"
        r"(?P<command>\S{1,60})",
        K.CRASH,
        C.EXIT_CODE,
        S.WARNING,
        Blame.NONE,
        [" z "],
        "A zombie in a top listing (state Z): a worker died and its parent never reaped it.",
    ),
    # ---- training frameworks' own numerical checks ------------------------------------------------
    _sig(
        "megatron_nan_check",
        # Megatron-LM: megatron/core/distributed/param_and_grad_buffer.py (core 0.4-0.8) asserts
        # f"Rank {global_rank}: found NaN in local grad norm in backward pass before data-parallel
        # communication collective. Device: {device}, node: {os.uname()[1]}" (older trees: "backwards pass");
        # core 0.9+ routes it through megatron/core/rerun_state_machine.py validate_result, which raises
        # f"Rank {rank}, node {node}, device {device}, iteration {it}: Unexpected result {result}
        # (message='found NaN in local grad norm for bucket #{i} ...')"; the loss check says
        # "found NaN in local forward loss calculation". The rank and node are the checking process's own.
        # validate_result's first report (core 0.10+, logger.error) is f"Unexpected result {result} on
        # rank {rank} at iteration #{it} invocation #{n} (message='{message}')".
        r"(?:Rank (?P<self_rank>\d+)(?:, node (?P<self_node>[\w.-]+), device \d+, iteration #?\d+)?: )?"
        r"(?:Unexpected result (?:nan|inf)\b(?: on rank (?P<self_rank__c>\d+))?[^\n]*?)?"
        r"found (?:NaN|Inf) in local (?P<what>grad norm|forward loss)"
        r"(?:[^\n]*?node: (?P<self_node__b>[\w.-]+))?",
        K.NUMERICAL,
        C.NAN_LOSS,
        S.CRITICAL,
        Blame.SELF,
        ["found nan in local", "found inf in local"],
        "Megatron-LM's NaN check on the local gradient norm or loss; names the rank and node that found it.",
        post=lambda ev: _named_self_post(ev),
    ),
    # ---- NCCL's device-side collective check ----------------------------------------------------------
    _sig(
        "megatron_rerun_verdict",
        # Megatron-LM megatron/core/rerun_state_machine.py validate_result's log_failure: f"Rank {rank},
        # node {node}, device {device}, iteration #{it}: {message}!" with the reruns' verdicts ("First
        # rerun: unexpected result is [not ]reproducible ...", "Possible transient error",
        # "Possible persistent error", "Correct result (but possible Application error)"). It follows
        # the first report of an unexpected result (NaN, Inf, spiky loss) and names where it ran.
        r"Rank (?P<self_rank>\d+), node (?P<self_node>[\w.-]+), device \d+, iteration #\d+: "
        r"(?P<verdict>First rerun: unexpected result is (?:not )?reproducible|Possible (?:transient|persistent) error"
        r"|Correct result \(but possible Application error\))",
        K.NUMERICAL,
        C.NAN_LOSS,
        S.CRITICAL,
        Blame.SELF,
        ["first rerun:", "possible transient error", "possible persistent error", "possible application error"],
        "Megatron-LM's rerun state machine: its verdict on an unexpected result, with the rank and node.",
        post=lambda ev: _named_self_post(ev),
    ),
    _sig(
        "nccl_mismatched_collective",
        # NCCL src/init.cc ncclCommGetAsyncError (2.19+): WARN("Mismatched collective detected, please
        # check your collective calls at and around rank %d. ...", comm->rank) when a kernel asserted
        # that ranks issued different collectives. %d is the reporting rank, not the diverging one.
        r"Mismatched collective detected, please check your collective calls at and around rank (?P<reporter_rank>\d+)",
        K.COLLECTIVE_MISMATCH,
        C.TYPE_MISMATCH,
        S.CRITICAL,
        Blame.NONE,
        ["Mismatched collective detected"],
        "NCCL's device check: ranks called different collectives (ncclInvalidUsage follows).",
    ),
    # ---- what a CUDA error leaves when its own line is cut off ------------------------------------------
    _sig(
        "cuda_error_suffix",
        # c10/cuda/CUDAMiscFunctions.cpp get_cuda_check_suffix(), appended by c10_cuda_check_implementation
        # (c10/cuda/CUDAException.cpp) to every "CUDA error: ..." message: the note alone proves a CUDA error.
        r"CUDA kernel errors might be asynchronously reported at some other API call",
        K.CRASH,
        C.CUDA_ERROR,
        S.WARNING,
        Blame.NONE,
        ["CUDA kernel errors might be asynchronously"],
        "torch's note after any CUDA error; used when the error line itself is not in the excerpt.",
        generic=True,
    ),
    # ---- stacks of stuck processes ----------------------------------------------------------------------
    _sig(
        "gdb_frame_in_cuda",
        # gdb's backtrace (gdb/stack.c print_frame): "#N  0xADDR in FUNC (ARGS) from LIB". A thread whose
        # frames are in libcuda/libcudart/libnccl was caught inside a CUDA or NCCL call: a stuck rank.
        r"^#\d+\s+0x[0-9a-fA-F]+ in (?P<func>\S+) \([^)\n]*\) from (?P<lib>\S*lib(?:cuda|cudart|nccl)\S*)",
        K.HUNG_COLLECTIVE,
        None,
        S.INFO,
        Blame.NONE,
        ["libcuda", "libcudart", "libnccl"],
        "gdb backtrace of a thread inside a CUDA/NCCL library call (a rank stuck there).",
        generic=True,
    ),
    _sig(
        "gdb_frame_in_store",
        # gdb's backtrace (gdb/stack.c print_frame: "#N  0xADDR in FUNC (ARGS) from LIB", or without
        # the address for frame 0) of a thread inside c10d's TCPStore client (torch/csrc/distributed/
        # c10d/TCPStore.cpp doGet/doWait/get/wait/check): a rank blocked on the rendezvous store,
        # waiting for a key another rank never set.
        r"^#\d+\s+(?:0x[0-9a-fA-F]+ in )?(?P<func>(?:void |std::\S+ )?c10d::(?:TCPStore::(?:doGet|doWait|get|wait|check)"
        r"|tcputil::recv\w*)[^(\n]*)\(",
        K.RENDEZVOUS_ERROR,
        None,
        S.WARNING,
        Blame.NONE,
        ["c10d::tcpstore::", "c10d::tcputil::recv"],
        "gdb backtrace of a thread blocked in the c10d TCPStore client (a rank waiting on rendezvous).",
        generic=True,
    ),
    # ---- rendezvous failures seen only as a traceback ---------------------------------------------------
    _sig(
        "rendezvous_traceback_frame",
        # CPython traceback frame ('  File "{filename}", line {lineno}, in {name}') inside
        # torch/distributed/elastic/rendezvous/: the failure happened while (re)joining the rendezvous.
        # Also torch.distributed's own set-up: distributed_c10d.py's init_process_group / new_group and
        # rendezvous.py's handlers (an exception raised while the group was being formed).
        r"File \"[^\"]*torch/distributed/(?:elastic/rendezvous/(?P<rdzv_module>\w+)\.py\", line \d+, in (?P<func>\w+)"
        r"|(?:distributed_c10d|rendezvous)\.py\", line \d+, in (?P<init_func>init_process_group|_new_process_group_helper"
        r"|_store_based_barrier|_tcp_rendezvous_handler|_env_rendezvous_handler|_create_c10d_store)\b)",
        K.RENDEZVOUS_ERROR,
        None,
        S.WARNING,
        Blame.NONE,
        [
            "elastic/rendezvous/",
            "in init_process_group",
            "rendezvous_handler",
            "_create_c10d_store",
            "_store_based_barrier",
            "_new_process_group_helper",
        ],
        "A traceback through torchelastic's rendezvous code (store/backend calls) when its exception line is missing.",
        generic=True,
    ),
)

_BY_NAME = {s.name: s for s in SIGNATURES}
# Keyword gate: a signature's regex runs only on lines holding one of its keywords (lower case).
_KEYWORDS = tuple(sorted({k for s in SIGNATURES for k in s.keywords}))
# Every ordinary line is tested against each keyword, so only the keywords that contain no other one are
# tested first; a keyword containing another ("nan iterations" holds "nan") can only be on a line where that
# one is, so it is tested on those lines alone. The hits are the same; the per-line tests are fewer.
_FIRST_KEYWORDS = tuple(k for k in _KEYWORDS if not any(o != k and o in k for o in _KEYWORDS))
_KEYWORDS_WITHIN: dict[str, tuple[str, ...]] = {
    a: tuple(k for k in _KEYWORDS if k != a and a in k) for a in _FIRST_KEYWORDS
}
# keyword -> positions in SIGNATURES (ints: a Signature's dataclass __eq__ compares every field, which made
# the candidates' dedupe and SIGNATURES.index the costliest part of classifying an ordinary metric line)
_BY_KEYWORD: dict[str, list[int]] = {}
for _i, _s in enumerate(SIGNATURES):
    for _k in _s.keywords:
        _BY_KEYWORD.setdefault(_k, []).append(_i)

# ---------------------------------------------------------------------------------------------
# Noise removal and line prefixes
# ---------------------------------------------------------------------------------------------
_ANSI_RE = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07]*\x07")
_PROGRESS_RE = re.compile(r"[^\r\n|]{0,80}?\d{1,3}%\|[^|\n]{0,200}\|[^\[\n]{0,60}(?:\[(?P<r_bar>[^\]\n]{0,400})\])?")
# tqdm's r_bar is "[{elapsed}<{remaining}, {rate_fmt}{postfix}]" (tqdm/std.py format_meter): the
# postfix holds the metrics a trainer sets on its bar (Lightning's "loss=nan, v_num=3"), kept as text.
_TQDM_POSTFIX = re.compile(r"^[^,]*,\s*[^,]*?(?:it/s|s/it|/s)\s*,\s*(?P<postfix>.+)$")


def _progress_postfix(m: re.Match[str]) -> str:
    """A tqdm bar removed, its postfix metrics kept."""
    r_bar = m.group("r_bar") or ""
    pm = _TQDM_POSTFIX.match(r_bar)
    return f" {pm.group('postfix')} " if pm else " "


_MD_QUOTE_RE = re.compile(r"^\s{0,3}(?:[+-]?\s?>\s?)+")
# Link text excludes "[" and is bounded: `[^\]\n]+` let every "[" of a long run of "[" scan to the end of
# the line (quadratic: a 100 KB line of "[" took 44 s).
_MD_LINK_RE = re.compile(r"\[([^\[\]\n]{1,500})\]\(https?://[^)\s]{0,2000}\)")
_RAY_RE = re.compile(r"\((?:(?P<actor>[\w.:-]+) )?pid=(?P<pid>\d+)(?:, ip=(?P<ip>[\w.:-]+))?\)\s?")

# Prefixes peeled off the start of a line, in any order; each may set rank/host/ts.
_PREFIXES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("grep_file", re.compile(r"^(?P<file>[\w./-]+\.(?:log|txt|out|err)):(?=\S)")),
    ("line_counter", re.compile(r"^\[\d+\]\s(?=\S)")),
    ("rank_world", re.compile(r"^\[(?P<rank>\d{1,6})/(?P<world>\d{1,6})\]")),
    # An ISO time, bracketed or not, maybe followed by ":" (log shippers: "2019-06-02T16:13:44.884Z: <line>"),
    # or Go's log.LstdFlags time ("2009/01/23 01:23:23 ", src/log/log.go formatHeader).
    (
        "iso_ts",
        re.compile(
            r"^\[?(?P<ts>\d{4}[-/]\d\d[-/]\d\d[ T_]\d\d:\d\d:\d\d(?:[.,]\d+)?)(?: ?(?:Z|[+-]\d\d:?\d\d))?\]?:?\s*"
        ),
    ),
    # A bare clock time, as Jenkins' Timestamper plugin (its default "HH:mm:ss" format) and `ts '%T'` prefix lines.
    ("clock_time", re.compile(r"^\[?\d\d:\d\d:\d\d(?:[.,]\d{1,9})?\]? (?=\S)")),
    ("dmesg_ctime", re.compile(r"^\[(?P<ctime>[A-Z][a-z]{2} [A-Z][a-z]{2}\s+\d{1,2} \d\d:\d\d:\d\d \d{4})\]\s*")),
    ("dmesg_uptime", re.compile(r"^\[\s*\d+\.\d+\]\s*")),
    (
        "syslog",
        re.compile(
            r"^[A-Z][a-z]{2}\s+\d{1,2} \d\d:\d\d:\d\d(?:\.\d+)?\s+(?:(?P<host>[\w.-]+)\s+(?=kernel:|[\w.@/-]+\[\d+\]:))?"
        ),
    ),
    # journalctl's short formats (systemd src/shared/logs-show.c output_short: "[time] HOST IDENT[PID]: MSG";
    # -o short-iso puts an ISO time first, peeled by iso_ts): the host and the printing program's tag.
    # Not a rank or device tag ("rank[3]: ", "GPU[0]: "), which frameworks print, nor the kernel's own
    # "COMM[PID]: segfault at ..." (arch/x86/mm/fault.c show_signal_msg), whose task is the message.
    (
        "journal_ident",
        re.compile(
            r"^(?:(?P<host>[\w.-]{1,253}) )?(?:(?!(?:rank|gpu|device|worker|node)\[)[\w.@/-]{1,64}\[\d{1,10}\]"
            # the kernel's own tag has no pid ("HOST kernel: ...", rsyslog's RFC 3339 file format after its time)
            r"|(?<= )kernel): (?!segfault at )",
            re.I,
        ),
    ),
    ("kernel_tag", re.compile(r"^kernel:\s*")),
    # A log copied from the CloudWatch console's table: "| TIMESTAMP | message", the time in its cell
    # (the copy sometimes glues the message to the time, without the second rule).
    (
        "console_cell",
        re.compile(r"^\|\s*\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:?\d\d)?(?:\s*\|)?\s*"),
    ),
    # A container log file as the kubelet writes it (kubernetes pkg/kubelet/kuberuntime/logs/logs.go
    # parseCRILog: "TIMESTAMP STREAM TAG CONTENT", TAG F for a full line, P for a partial one); the
    # time is peeled by iso_ts.
    ("cri_stream", re.compile(r"^(?:stdout|stderr) [FP] ")),
    # docker compose's log prefix (docker/compose cmd/formatter/logs.go: the container name padded
    # to the widest, then " | "; v1 names "svc_1", v2 "svc-1"): a container, not a host.
    # A line that ends on "|" is a table row, unless the container printed the table.
    ("compose", re.compile(r"^[A-Za-z0-9][\w.-]{0,120}?\s+\| (?:(?=[|+])|(?!.*\|\s*$))")),
    ("nccl_prefix", re.compile(r"^(?P<host>[\w.-]+):(?P<pid>\d+):(?P<tid>\d+) \[(?P<dev>\d+)\]\s*")),
    # torch's "[rank3]:" (also with its "[" lost where a paste's first character was cut: "rank3]:")
    ("rank_prefix", re.compile(r"^\[?rank(?P<rank>\d+)\]:\s?")),
    # Lightning (lightning_fabric/utilities/rank_zero.py rank_prefixed_message): "[rank: N] " with the global rank.
    ("lightning_rank", re.compile(r"^\[rank: (?P<rank>\d{1,6})\] ")),
    # kubectl logs --prefix: "[pod/NAME/CONTAINER] "; the pod is where the process ran.
    ("kubectl_prefix", re.compile(r"^\[pod/(?P<host>[\w.-]{1,253})/[\w.-]{1,63}\] ")),
    # Open MPI mpirun --tag-output (orte/mca/iof/base/iof_base_output.c): "[jobid,rank]<stdout>:".
    # SageMaker's mpirun names the rank and the host in the tag ("[1,mpirank:3,algo-2]<stderr>:", as
    # printed in huggingface/accelerate and sagemaker issue threads).
    (
        "mpi_tag",
        re.compile(r"^\[\d+,(?:mpirank:)?(?P<rank>\d+)(?:,(?P<host>[\w.-]{1,253}))?\]<(?:stdout|stderr|stddiag)>:\s?"),
    ),
    # horovodrun's gloo launcher (horovod/runner/common/util/safe_shell_exec.py prefix_connection:
    # "{time}[{index}]<{prefix}>:{line}", the index being the worker's rank in gloo_run).
    ("horovod_tag", re.compile(r"^\[(?P<rank>\d{1,6})\]<(?:stdout|stderr)>:\s?")),
    # Determined's launchers (harness determined/launch/wrap_rank.py, worker_process_wrapper.py):
    # "[rank={rank}] " in front of every line a worker prints.
    ("determined_rank", re.compile(r"^\[rank=(?P<rank>\d{1,6})\] ")),
    # A launcher's per-stream tag ("<name> [stderr] "): the name is a job/host label, not used as a host.
    ("stream_tag", re.compile(r"^[\w.-]{1,120} \[(?:stdout|stderr)\] ")),
    ("torchx", re.compile(r"^[\w-]+/\d+ \[(?P<local_rank>\d+)\]:")),
    ("elastic_tee", re.compile(r"^\[(?P<role>[a-z_]+)(?P<local_rank>\d+)\]:")),
    # Slurm's step daemon names itself after its node on stderr ("slurmstepd-<node>: error: ..."; a bare
    # "slurmstepd:" names none).
    ("slurmstepd", re.compile(r"^slurmstepd-(?P<host>[A-Za-z0-9](?:[\w.-]*[\w])?): (?=\S)")),
    # srun --label: "%*d: " (the task id, right-aligned). Kept as a field: a task index is neither a host nor,
    # under a per-node launcher (torchrun), a rank.
    # The printed line may itself start with spaces (a traceback's frames): "  3:   File ...".
    ("srun_label", re.compile(r"^(?P<task>\d{1,6}): (?=\s*\S)")),
    ("pdsh", re.compile(r"^(?P<host>[A-Za-z0-9](?:[\w.-]*[\w])?): (?=\s*\S)")),
)
_NOT_HOSTS = re.compile(
    r"(?:error|exception|warning|kernel|traceback|info|debug|nccl|nvrm|critical|fatal)$|^torch|^(?:file|line|note|hint)$"
    # the NVIDIA drivers' device prefixes ("nvidia-nvswitch3: SXid ...", common_nvswitch.h) and nvidia-ml-py's
    # exception classes ("pynvml.NVMLError_GpuIsLost: GPU is lost") are printers, not hosts
    r"|^nvidia-(?:nvswitch|peermem|modeset|uvm|drm)\d*$|\bNVMLError_"
    # a shell script's name in front of its error ("train.sh: line 12: ..."), not a host
    r"|\.(?:sh|bash|py)$"
    # Huawei CANN's error codes ("EH9999: ...", Ascend): a code, not a host (upper case only: "eb0001" may be a node)
    r"|(?-i:^E[A-Z]\d{4}$)",
    re.I,
)
_HOST_IN_LINE = re.compile(r"\[(?P<host>[A-Za-z][\w.-]*):pid=(?P<pid>\d+)\]")
_RANK_PREFIX_INNER = re.compile(r"\[rank(?P<rank>\d+)\]:")
_PG_TAG = re.compile(
    r"\[PG (?:ID )?(?P<pg>\d+)(?: PG GUID (?P<guid>\d+)(?:\((?P<guid_name>[^)]*)\))?)?(?: \((?P<desc>[^)]*)\))? Rank (?P<rank>\d+)\]"
)
_OLD_RANK_TAG = re.compile(r"\[Rank (?P<rank>\d+)\]")
# A line that starts a record (so it does not continue a wrapped one), after an optional per-task or per-host
# label (srun --label "  3: ", pdsh "node3: "): brackets, times (a bare clock time too), tracebacks, Python logging's default
# "LEVEL:logger:" format, NCCL's and the kernel's prefixes.
_RECORD_START = re.compile(
    r"^\s*(?:[\w.-]{1,64}: )?(?:\[|\(|>|\+|[IWEF](?:\d{4})?\d{4} |[A-Z][a-z]{2}\s+\d{1,2} \d\d:|\d{4}-\d\d-\d\d|\d\d:\d\d:\d\d |Traceback"
    r"|File \"|[\w.]+(?:Error|Exception|Warning):|(?:DEBUG|INFO|WARNING|ERROR|CRITICAL):[\w.]*:|"
    r"NCCL|NVRM|kernel:|[\w.-]+:\d+:\d+ \[|Exception raised|terminate called|CUDA kernel|For debugging|Compile with)"
)


# "=====" / "-----" banner rules, and table rows that end on their border ("| ... |", as nvidia-smi
# pads every row to one width), are never wrapped text.
# A per-host or per-task label in front (pdsh "node3: ", srun --label "  3: ") keeps a row a row:
# `pdsh -w ... nvidia-smi` is how a table of every host is usually fetched.
_RULE = re.compile(r"^\s*(?:[\w.-]{1,64}: )?(?:\W*|\|.*\|\s*)$")


@dataclass
class _Record:
    line_no: int
    text: str
    rank: int | None = None
    rank_basis: str | None = None
    host: str | None = None
    host_basis: str | None = None
    ts: datetime | None = None
    fields: dict[str, Any] = field(default_factory=dict)
    wrap_joined: bool = False  # several raw lines joined as one terminal-wrapped line (log_identity)


def _wrap_width(lines: list[str], padded: list[int] | None = None) -> int | None:
    """The terminal width a paste was wrapped at: a long length shared by several lines that each
    go on in a line that does not start a record, or one line's length when the line after it is
    its wrapped tail, padded with spaces to the same width (as a terminal's copy pads the last row
    of a wrapped line). Whole lines that happen to share a length (each followed by a blank line
    or a new record) set no width. `padded[i]` is _padded_run(lines, i) when the caller has them."""
    if padded is None:
        padded = [_padded_run(lines, i) for i in range(len(lines))]
    counts: dict[int, int] = {}
    for i, ln in enumerate(lines[:-1]):
        if len(ln) >= 60 and not ln.endswith("  ") and not _RULE.match(ln):
            if padded[i]:
                counts[len(ln)] = counts.get(len(ln), 0) + 2
            elif lines[i + 1].strip() and not _RECORD_START.match(lines[i + 1]):
                counts[len(ln)] = counts.get(len(ln), 0) + 1
    best = max(counts.items(), key=lambda kv: (kv[1], kv[0]), default=None)
    return best[0] if best and best[1] >= 2 else None


def _shape(line: str) -> str:
    """The opening of a line with digits masked: repeated records (per-rank greps, iteration
    tables) share it, a wrapped continuation does not."""
    return re.sub(r"\d", "0", line[:12])


MAX_WRAP_ROWS = 16  # rows of one wrapped line looked through for its padded last row


def _padded_run(lines: list[str], i: int) -> int:
    """How many rows after lines[i] are its terminal-wrapped continuation, read from the wrap's own
    evidence: rows of exactly its length, the last one padded with spaces to that width (0 if none)."""
    width = len(lines[i])
    if width < 60 or lines[i].endswith(" ") or _RULE.match(lines[i]):
        return 0
    for j in range(i + 1, min(len(lines), i + 1 + MAX_WRAP_ROWS)):
        if len(lines[j]) != width:
            return 0
        if lines[j].endswith(" "):
            return j - i if lines[j].strip() else 0
    return 0


def _join_wraps(lines: list[str]) -> list[tuple[int, str]]:
    """Join terminal-wrapped continuation lines back onto the line they were cut from.

    A line is a wrap when it is exactly the paste's wrap width (and does not end padded with
    spaces: the last fragment of a wrapped line is padded to the width); the next line continues
    it unless it starts like a new record or repeats the previous line's opening (tables, progress).
    A next line padded with spaces to exactly this line's length is its wrapped tail whatever it
    starts with (a paste may mix widths, and a word cut in two can look like a record: "XidC" /
    "riticalError: ...").
    """
    padded = [_padded_run(lines, i) for i in range(len(lines))]
    width = _wrap_width(lines, padded)
    out: list[tuple[int, str]] = []
    i = 0
    while i < len(lines):
        start, text = i + 1, lines[i]
        head = _shape(text)
        while i + 1 < len(lines):
            rows = padded[i]
            if not rows and (
                width
                and len(lines[i]) == width
                and not lines[i].endswith("  ")
                and not _RULE.match(lines[i])
                and lines[i + 1].strip()
                and not _RECORD_START.match(lines[i + 1])
                and _shape(lines[i + 1]) != head
            ):
                rows = 1
            if not rows:
                break
            text += "".join(lines[i + 1 : i + 1 + rows])
            i += rows
        out.append((start, text.rstrip()))
        i += 1
    return out


_REDACTED_NAMES = frozenset({"localhost", "hostname", "host", "node", "nodename", "xxx", "xxxx", "redacted"})


def _plausible_host(h: str | None) -> bool:
    """Could this name a real remote machine? Rejects 0.0.0.0/8 (what '05' or an all-digit
    hostname resolves to), unspecified/loopback, redacted ('172....') and all-digit names."""
    if not h:
        return False
    h = h.strip("[]")
    if h.lower().startswith("::ffff:"):
        h = h[7:]
    try:
        ip = ipaddress.ip_address(h)
    except ValueError:
        # "HOSTNAME"/"hostname"/"node"/"xxx": what people paste in place of a real name
        if h.lower() in _REDACTED_NAMES or h.isdigit() or ".." in h or h.endswith("."):
            return False
        return bool(re.fullmatch(r"[A-Za-z0-9](?:[A-Za-z0-9.-]*[A-Za-z0-9])?", h)) and any(c.isalpha() for c in h)
    return not (
        ip.is_unspecified
        or ip.is_loopback
        or ip.is_multicast
        or (ip.version == 4 and ip in ipaddress.ip_network("0.0.0.0/8"))
    )


def _parse_ts(raw: str) -> datetime | None:
    for fmt in ("%Y-%m-%d %H:%M:%S.%f", "%Y-%m-%d %H:%M:%S", "%a %b %d %H:%M:%S %Y"):
        try:
            return datetime.strptime(raw, fmt).replace(tzinfo=UTC)
        except ValueError:
            continue
    return None


def _norm_ts(raw: str) -> str:
    return raw.replace("T", " ").replace("_", " ").replace(",", ".").replace("/", "-")


def _peel(text: str, rec: _Record) -> str:
    """Strip known prefixes from the start of `text`, recording what they say into `rec`."""
    for _ in range(8):
        for name, rx in _PREFIXES:
            m = rx.match(text)
            if not m or (m.end() == 0):
                continue
            g = m.groupdict()
            if name == "pdsh":
                h = g["host"]
                if _NOT_HOSTS.search(h) or not re.search(r"[\d.-]", h):
                    continue
                rec.host, rec.host_basis = h, "pdsh_prefix"
            elif name in ("syslog", "journal_ident", "nccl_prefix") and g.get("host"):
                rec.host, rec.host_basis = g["host"], f"{name}"
                if g.get("pid"):  # NCCL's printer pid: its init line says which rank it is (log_identity)
                    rec.fields["nccl_pid"] = int(g["pid"])
            elif name == "slurmstepd":
                rec.host, rec.host_basis = g["host"], "host_tag"
            elif name == "kubectl_prefix":
                rec.host, rec.host_basis = g["host"], name
            elif name == "srun_label":
                rec.fields["slurm_task"] = int(g["task"])
            elif name in ("rank_prefix", "rank_world", "mpi_tag", "lightning_rank", "horovod_tag", "determined_rank"):
                rec.rank, rec.rank_basis = int(g["rank"]), name
                if g.get("world"):
                    rec.fields["world_size"] = int(g["world"])
                if g.get("host"):  # SageMaker's mpirun tag
                    rec.host, rec.host_basis = g["host"], name
            elif name in ("torchx", "elastic_tee"):
                rec.fields["local_rank"] = int(g["local_rank"])
            elif name == "iso_ts":
                rec.ts = rec.ts or _parse_ts(_norm_ts(g["ts"]))
            elif name == "dmesg_ctime":
                rec.ts = rec.ts or _parse_ts(re.sub(r"\s+", " ", g["ctime"]))
            elif name == "grep_file":
                rec.fields["file"] = g["file"]
            text = text[m.end() :]
            if name == "nccl_prefix":
                text = _NCCL_UNTAGGED_LEVEL.sub(r"\g<site>NCCL \g<level> ", text, count=1)
            break
        else:
            return text
    return text


# NCCL before 2.3 (2.0-2.2, released as binaries only) printed its level without the "NCCL " tag that
# src/include/debug.h has carried since v2.3.5-5 ("%s:%d:%d [%d] %s:%d NCCL WARN ", "... NCCL INFO "):
# "host:pid:tid [dev] include/socket.h:196 WARN Connection closed by remote peer" (as pasted in
# horovod/horovod#234). After NCCL's own prefix, the level is given its tag so that one table reads both.
_NCCL_UNTAGGED_LEVEL = re.compile(r"^(?P<site>(?:[\w./-]+:\d+ )?)(?P<level>WARN|INFO|TRACE) (?!NCCL)")


# syslogd's broadcast of an emergency message to logged-in terminals (rsyslog omusrmsg, sysklogd's
# wallmsg): "Message from syslogd@HOST at Nov 10 08:58:06 ..." on its own line, then the message
# (" kernel:[Hardware Error]: ..."), which carries no host of its own.
_SYSLOGD_WALL = re.compile(r"^Message from syslogd@(?P<host>[\w.-]{1,253}) at .{0,60}\.\.\.$")


# A log line shipped as a JSON object: docker's json-file driver (moby daemon/logger/jsonfilelog:
# {"log": "...\n", "stream": ..., "time": ...}), `journalctl -o json` (systemd man journalctl:
# MESSAGE, _HOSTNAME), fluentd/fluent-bit and Cloud Logging exports ("log", "message", "msg",
# "textPayload"). The message is the line; the host field says where it ran.
_JSON_MESSAGE_KEYS = ("log", "MESSAGE", "message", "msg", "textPayload")
_JSON_HOST_KEYS = ("_HOSTNAME", "hostname", "host")
# HTML character references, as a log copied from a rendered page or an HTML export carries them.
_HTML_ENTITY = re.compile(r"&(?:lt|gt|amp|quot|apos|#39|#x27|#34);")


def _unwrap_json_line(line: str) -> tuple[str, str | None] | None:
    """(message, host) of a log line that is a shipper's JSON object, else None."""
    s = line.strip()
    if not (s.startswith("{") and s.endswith("}")):
        return None
    try:
        obj = json.loads(s)
    except ValueError:
        return None
    if not isinstance(obj, dict):
        return None
    msg = next((obj[k] for k in _JSON_MESSAGE_KEYS if isinstance(obj.get(k), str)), None)
    if msg is None:
        return None
    host = next((obj[k] for k in _JSON_HOST_KEYS if isinstance(obj.get(k), str) and obj[k]), None)
    return msg.rstrip("\r\n"), host


def _normalized_lines(text: str) -> tuple[list[str], dict[int, str]]:
    """The text's lines with colour codes, CRLF endings, HTML character references and shippers'
    JSON envelopes removed, and the host each JSON envelope named (by 1-based line number)."""
    text = _ANSI_RE.sub("", text).replace("\r\n", "\n")
    if _HTML_ENTITY.search(text):
        text = html.unescape(text)
    lines = text.split("\n")
    hosts: dict[int, str] = {}
    for i, line in enumerate(lines):
        if line.lstrip().startswith("{"):
            unwrapped = _unwrap_json_line(line)
            if unwrapped is not None:
                lines[i], host = unwrapped
                if host:
                    hosts[i + 1] = host
    return lines, hosts


def clean_lines(text: str) -> Iterator[_Record]:
    """Yield one record per logical message: noise removed, prefixes peeled, wraps joined."""
    raw, json_hosts = _normalized_lines(text)
    wall_host: str | None = None  # "Message from syslogd@HOST at ...": the host of the next message
    for line_no, joined in _join_wraps(raw):
        m = _SYSLOGD_WALL.match(joined.strip())
        if m:
            wall_host = m.group("host")
            continue
        # tqdm redraws with \r: every segment is a separate screen state; progress segments are noise.
        for seg in joined.split("\r"):
            seg = _PROGRESS_RE.sub(_progress_postfix, seg) if "%|" in seg else seg
            seg = _MD_QUOTE_RE.sub("", seg)
            seg = _MD_LINK_RE.sub(r"\1", seg).replace("`", "")
            if not seg.strip():
                continue
            # Ray prefixes may appear mid-line (two messages glued together): split at each.
            ray = list(_RAY_RE.finditer(seg))
            pieces: list[tuple[str, re.Match[str] | None]] = []
            if ray:
                if ray[0].start() > 0 and seg[: ray[0].start()].strip():
                    pieces.append((seg[: ray[0].start()], None))
                for j, m in enumerate(ray):
                    end = ray[j + 1].start() if j + 1 < len(ray) else len(seg)
                    pieces.append((seg[m.end() : end], m))
            else:
                pieces.append((seg, None))
            for piece, rm in pieces:
                rec = _Record(line_no, "", wrap_joined=len(joined) > len(raw[line_no - 1]))
                if rm is not None:
                    rec.fields["ray_pid"] = int(rm.group("pid"))
                    if rm.group("ip"):
                        rec.host, rec.host_basis = rm.group("ip"), "ray_prefix"
                body = _peel(piece.strip(), rec).strip()
                if not body:
                    continue
                if wall_host is not None and rec.host is None:
                    rec.host, rec.host_basis = wall_host, "syslogd_wall"
                if rec.host is None and line_no in json_hosts:
                    rec.host, rec.host_basis = json_hosts[line_no], "json_envelope"
                rec.text = body
                _line_tags(rec)
                yield rec
        wall_host = None


def _line_tags(rec: _Record) -> None:
    """Rank/host/PG tags found anywhere in the message (after the prefixes)."""
    t = rec.text
    if rec.rank is None:
        m = _RANK_PREFIX_INNER.search(t)  # "[E ...] [rank3]:" or a prefix after a vLLM/logging prefix
        if m:
            rec.rank, rec.rank_basis = int(m.group("rank")), "rank_prefix"
    m = _PG_TAG.search(t)
    if m:
        pg = m.group("pg")
        name = m.group("guid_name") or m.group("desc")
        rec.fields["pg"] = f"{m.group('guid') or pg}({name})" if name else pg
        rec.fields["pg_rank"] = int(m.group("rank"))
        default = pg == "0" or (name or "") == "default_pg"
        # The PG tag carries the rank *within that group*: it is the global rank only on the default PG.
        if rec.rank is None and default:
            rec.rank, rec.rank_basis = int(m.group("rank")), "pg_tag"
    elif rec.rank is None:
        m = _OLD_RANK_TAG.search(t)
        if m:
            rec.rank, rec.rank_basis = int(m.group("rank")), "rank_tag"
    if rec.host is None:
        m = _HOST_IN_LINE.search(t)
        if m:
            rec.host, rec.host_basis = m.group("host"), "host_tag"
    if rec.ts is None:
        m = re.search(r"(\d{4}-\d\d-\d\d[ T_]\d\d:\d\d:\d\d(?:[.,]\d+)?)", t[:80])
        if m:
            rec.ts = _parse_ts(_norm_ts(m.group(1)))


_INT_FIELDS = {
    "seq",
    "xid",
    "exit_code",
    "rank",
    "root_xid",
    "timeout_ms",
    "ran_ms",
    "last_enqueued",
    "last_completed",
    "numel_in",
    "numel_out",
    "detector_rank",
    "local_rank",
    "pid",
    "ib_status",
    "ib_opcode",
    "vendor_err",
    "peer_port",
    "errno",
    "signal_no",
    "stuck_s",
    "timeout",
    "try",
    "joined",
    "world_size",
    "worker_count",
    "attempts_left",
    "attempts",
    "nan_iters",
    "ds_rank",
    "barrier_rank",
    "aborted_rank",
    "cuda_errno",
    "mismatch_rank_a",
    "mismatch_rank_b",
    "port",
    "timeout_s",
    "proc",
    "gpu",
}
_COLUMN_FIELDS = ("seq", "op", "xid", "gpu_pci", "exit_code", "peer")


def _keyword_hits(low: str) -> list[str]:
    """The keywords (of _KEYWORDS) in a lower-cased line."""
    hits = [k for k in _FIRST_KEYWORDS if k in low]  # plain substring tests: far faster than one big alternation
    return hits + [k for h in hits for k in _KEYWORDS_WITHIN[h] if k in low] if hits else hits


def classify_line(rec: _Record, default_rank: int | None = None, default_host: str | None = None) -> list[Event]:
    """All signature matches in one cleaned record, as events (possibly none)."""
    hits = _keyword_hits(rec.text.lower())
    if not hits:
        return []
    cands = [SIGNATURES[i] for i in sorted({i for h in hits for i in _BY_KEYWORD[h]})]
    rank, rank_basis = (
        (rec.rank, rec.rank_basis)
        if rec.rank is not None
        else (default_rank, "path" if default_rank is not None else None)
    )
    host, host_basis = (rec.host, rec.host_basis) if rec.host else (default_host, "path" if default_host else None)
    events: list[Event] = []
    for sig in cands:
        for m in sig.pattern.finditer(rec.text):
            ev = Event(
                rec.line_no,
                rec.text,
                sig.name,
                sig.kind,
                sig.category,
                sig.severity,
                sig.blame,
                sig.generic,
                rank=rank,
                rank_basis=rank_basis,
                host=host,
                host_basis=host_basis,
                ts=rec.ts,
            )
            ev.fields.update(rec.fields)
            ev.pg = rec.fields.get("pg")
            for k, v in m.groupdict().items():
                if v is None:
                    continue
                k = k.split("__")[0]
                v = v.strip()
                if k in _INT_FIELDS:
                    try:
                        v = int(v)
                    except ValueError:
                        continue
                if k in _COLUMN_FIELDS:
                    setattr(ev, k, v)
                else:
                    ev.fields[k] = v
            if ev.gpu_pci:
                ev.gpu_pci = ev.gpu_pci.lower()
            if sig.post:
                sig.post(ev)
            events.append(ev)
            if sig.kind is None or sig.name in ("loss_nan",):
                continue
            break  # one event per signature per record, except repeated metrics
    return events


def _finish(ev: Event) -> None:
    """Turn blame into culprit columns: what this line alone implicates."""
    if ev.kind is None:
        return
    if ev.blame == Blame.SELF:
        # The rank of the process that printed the line; a group-local rank of a non-default
        # PG is not a global rank and was never put in ev.rank.
        if ev.rank is not None:
            ev.culprit_rank = ev.rank
        if ev.host:
            ev.culprit_host = ev.host
        if ev.culprit_rank is not None or ev.culprit_host:
            ev.culprit_basis = ev.rank_basis if ev.culprit_rank is not None else ev.host_basis
    elif ev.blame == Blame.PEER and _plausible_host(ev.peer):
        peer = ev.peer.strip("[]")
        ev.culprit_host = peer[7:] if peer.lower().startswith("::ffff:") else peer
        ev.culprit_basis = "peer" if ev.kind is not K.RENDEZVOUS_ERROR else "endpoint"


# ---------------------------------------------------------------------------------------------
# Multi-line blocks: torchelastic ChildFailedError banner, kernel GPU headers, stack frames
# ---------------------------------------------------------------------------------------------
_ELASTIC_FIELD = re.compile(r"^(?P<key>time|host|rank|exitcode|error_file|traceback)\s*:\s*(?P<value>.*)$")
_ELASTIC_ENTRY = re.compile(r"^\[(?P<idx>\d+)\]:$")
_FRAME = re.compile(r"^(?P<func>[\w<>.]+) \((?P<file>[^():]+):(?P<line>\d+)\)$")
# A frame of a dump inside a collective: the same test as the stand-alone frame signature.
_COLLECTIVE_FRAME = next(s.pattern for s in SIGNATURES if s.name == "stack_frame_in_collective")
_NVRM_GPU_HEADER = re.compile(rf"NVRM: (?:The NVIDIA GPU |GPU at |GPU ){_PCI}")


@dataclass
class _ElasticEntry:
    section: str
    line_no: int
    lines: list[str] = field(default_factory=list)
    values: dict[str, str] = field(default_factory=dict)


def _elastic_events(entries: list[_ElasticEntry], no_other: bool, default_host: str | None) -> list[Event]:
    """Events for one ChildFailedError banner.

    The 'Root Cause' entry is only the first failure torchelastic *observed* (smallest error-file
    timestamp, or the first entry when no error file exists). It settles the culprit rank when it is
    the only failure (<NO_OTHER_FAILURES>) or strictly earlier than every other one; all failures on
    one host settle the host.
    """
    if not entries:
        return []
    roots = [e for e in entries if e.section == "root"]
    others = [e for e in entries if e.section != "root"]
    root_time = roots[0].values.get("time") if roots else None
    other_times = [e.values.get("time") for e in others]
    sole = bool(roots) and (no_other or not others)
    earliest = (
        bool(roots)
        and bool(others)
        and root_time is not None
        and all(t is not None and t > root_time for t in other_times)
    )
    hosts = {e.values.get("host") for e in entries if e.values.get("host")}
    single_host = next(iter(hosts)) if len(hosts) == 1 else None
    out = []
    for e in entries:
        v = e.values
        rank_m = re.match(r"(\d+)(?: \(local_rank: (\d+)\))?", v.get("rank", ""))
        exit_m = re.match(r"(-?\d+)(?: \(pid: (\d+)\))?", v.get("exitcode", ""))
        is_root = e.section == "root"
        ev = Event(
            e.line_no,
            " | ".join(e.lines),
            "elastic_root_cause" if is_root else "elastic_failure",
            K.CRASH,
            C.EXIT_CODE,
            S.CRITICAL,
            Blame.NONE,
            False,
            rank=int(rank_m.group(1)) if rank_m else None,
            rank_basis="elastic_entry",
            host=v.get("host") or default_host,
            host_basis="elastic_entry" if v.get("host") else "path",
        )
        if exit_m:
            ev.exit_code = int(exit_m.group(1))
            if exit_m.group(2):
                ev.fields["pid"] = int(exit_m.group(2))
        if rank_m and rank_m.group(2) is not None:
            ev.fields["local_rank"] = int(rank_m.group(2))
        for k in ("time", "error_file", "traceback"):
            if v.get(k):
                ev.fields[k] = v[k]
        if v.get("time"):
            ev.ts = _parse_ts(_norm_ts(v["time"]))
        sm = re.search(r"Signal (\d+) \((SIG\w+)\)", v.get("traceback", ""))
        if sm:
            ev.category = C.SIGNAL
            ev.fields["signal"] = sm.group(2)
        _exit_post(ev)
        if is_root and (sole or earliest):
            ev.culprit_rank = ev.rank
            ev.culprit_basis = "elastic_sole_failure" if sole else "elastic_earliest_failure"
        if single_host:
            ev.culprit_host = single_host
            ev.culprit_basis = ev.culprit_basis or "elastic_single_host"
        ev.fields["root_cause"] = is_root
        ev.fields["failures_in_banner"] = len(entries)
        out.append(ev)
    return out


# ray python/ray/exceptions.py ActorDiedError: "\tclass_name: ...", "\tactor_id:", "\tpid:", "\tname:",
# "\tnamespace:", "\tip: a.b.c.d" after its message.
_RAY_ACTOR_FIELD = re.compile(r"^(?P<key>class_name|actor_id|pid|name|namespace|ip): (?P<value>\S.*)$")


def parse_records(
    records: Iterable[_Record], *, default_rank: int | None = None, default_host: str | None = None
) -> list[Event]:
    events: list[Event] = []
    # ChildFailedError banner state
    section: str | None = None
    entries: list[_ElasticEntry] = []
    no_other = False
    current: _ElasticEntry | None = None
    # kernel: last "NVRM: The NVIDIA GPU <pci>" header, for the r570 multi-line lost-GPU message
    gpu_header: tuple[int, str] | None = None
    # stack dumps: frames following a thread header
    stack_ev: Event | None = None
    # Ray's ActorDiedError: its context lines follow it ("ip: a.b.c.d" names the dead actor's node)
    actor_ev: Event | None = None
    # Open MPI 1.x-3.x's lost-daemon message: its "hostname:  X" line names the node
    orte_ev: Event | None = None
    # scontrol show node: the record's NodeName, for its Reason= line
    slurm_node: str | None = None

    def flush_banner() -> None:
        nonlocal entries, no_other, current, section
        events.extend(_elastic_events(entries, no_other, default_host))
        entries, no_other, current, section = [], False, None, None

    recs = list(records)  # read again below, for the readings across lines
    for rec in recs:
        t = rec.text
        # ---- torchelastic banner -------------------------------------------------------
        if t.startswith("Root Cause (first observed failure)"):
            section, current = "root", None
            continue
        if t.startswith("Failures:"):
            section, current = "failures", None
            continue
        if "<NO_OTHER_FAILURES>" in t:
            no_other = True
            continue
        me = _ELASTIC_ENTRY.match(t)
        if me and section:
            current = _ElasticEntry(section, rec.line_no)
            entries.append(current)
            continue
        mf = _ELASTIC_FIELD.match(t)
        if mf:
            if current is None:  # an excerpt that starts inside an entry (its header was cut)
                current = _ElasticEntry(section or "failures", rec.line_no)
                entries.append(current)
                section = section or "failures"
            if mf.group("key") in current.values and current.section != "root":
                current = _ElasticEntry(current.section, rec.line_no)
                entries.append(current)
            current.values[mf.group("key")] = mf.group("value").strip()
            current.lines.append(t)
            continue
        if entries and (set(t) <= set("=-") and len(t) >= 10):
            if section == "root" and any(e.section == "root" for e in entries):
                flush_banner()
            continue
        if entries and not t.startswith(("[", " ")):
            flush_banner()
        # ---- stack dump frames ---------------------------------------------------------
        if stack_ev is not None:
            fm = _FRAME.match(t)
            if fm:
                frames = stack_ev.fields.setdefault("frames", [])
                if len(frames) < 12:
                    frames.append(t)
                if _COLLECTIVE_FRAME.search(t):  # py-spy's thread waits in a collective: as the frame alone says
                    stack_ev.severity = S.WARNING
                continue
            stack_ev = None
        # ---- Open MPI's lost-daemon message: its "hostname:" line names the node ---------------------
        if orte_ev is not None:
            mo = _ORTE_HOSTNAME.match(t)
            lost, orte_ev = orte_ev, None
            if mo and _plausible_host(mo.group(1)):
                lost.peer, lost.fields["peer_from_line"] = mo.group(1), rec.line_no
                continue
        # ---- Ray actor context ------------------------------------------------------------
        if actor_ev is not None:
            mc = _RAY_ACTOR_FIELD.match(t)
            if mc:
                if mc.group("key") == "ip" and _plausible_host(mc.group("value")):
                    actor_ev.host, actor_ev.host_basis = mc.group("value"), "text"
                continue
            actor_ev = None
        # ---- ordinary lines --------------------------------------------------------------
        mh = _NVRM_GPU_HEADER.search(t)
        if mh:
            gpu_header = (rec.line_no, mh.group("gpu_pci").lower())
        mn = _SCONTROL_NODE.match(t)
        if mn:
            slurm_node = mn.group(1)
        for ev in classify_line(rec, default_rank, default_host):
            if (
                ev.signature == "nvrm_fallen_off_bus"
                and not ev.gpu_pci
                and gpu_header
                and rec.line_no - gpu_header[0] <= 4
            ):
                ev.gpu_pci = gpu_header[1]
                ev.fields["gpu_pci_from_line"] = gpu_header[0]
            if ev.signature == "nvrm_xid" and ev.xid == 79:
                ev.category = C.GPU_LOST
            if ev.signature == "stack_dump_thread":
                stack_ev = ev
            if ev.signature == "ray_actor_died":
                actor_ev = ev
            if ev.signature == "orte_lost_daemon" and ev.peer is None:
                orte_ev = ev
            if ev.signature == "slurm_node_drained":  # the record's own node, not whoever printed it
                ev.host, ev.host_basis = slurm_node, "text" if slurm_node else None
            events.append(ev)
    if entries:
        flush_banner()
    events.extend(_ranked_exceptions(recs, events))
    events.extend(_loss_collapse(recs, events))
    for ev in events:
        _finish(ev)
    # Xid 79 text also matches the lost-GPU signature: keep the Xid event only. A generic match on
    # a line that also has a specific one of the same kind adds nothing.
    xid_lines = {e.line_no for e in events if e.signature == "nvrm_xid"}
    specific = {(e.line_no, e.kind) for e in events if not e.generic and e.kind is not None}
    out, seen = [], set()
    for e in events:
        if (e.signature == "nvrm_fallen_off_bus" and e.line_no in xid_lines) or (
            e.generic and (e.line_no, e.kind) in specific
        ):
            continue
        key = (e.line_no, e.kind, e.category, e.generic, e.message)
        if e.kind is not None and key in seen:  # two rules saying the same of one line: keep the first
            continue
        seen.add(key)
        out.append(e)
    return out


_ORTE_HOSTNAME = re.compile(r"^\s*hostname:\s+(\S+)\s*$")
_SCONTROL_NODE = re.compile(r"^NodeName=([\w.-]{1,253})\s")


# An exception's own line, the last line of CPython's traceback (Python/pythonrun.c print_exception:
# "module.Class: message", or the bare class name when raised without one).
_EXCEPTION_LINE = re.compile(r"^(?:[A-Za-z_]\w*\.){0,8}(?P<exc>[A-Z]\w{0,80}(?:Error|Exception|Failure))(?::\s|\s*$)")
# Prefixes a launcher or framework puts on a process's every line, naming its global rank.
_RANK_PREFIXES = frozenset({"rank_prefix", "lightning_rank", "determined_rank", "horovod_tag", "mpi_tag"})


def _ranked_exceptions(records: list[_Record], events: list[Event]) -> list[Event]:
    """An exception no signature knows, raised by a rank its line's prefix names ("[rank5]: KeyError: ..."):
    that rank's process failed on it, and the other ranks' timeouts that follow are the consequence. Raised
    by one rank only, it blames that rank; the same exception from several ranks is the program's (every
    rank ran the same code) and blames none. Its kind is what its words say (collectors/log_vocabulary.py),
    else a crash (category exception). Where its rank printed a classified failure too, it is that
    failure's consequence: generic, a warning."""
    classified = {e.line_no for e in events if e.kind is not None}
    # a rank that printed a classified failure of its own: its unknown exception is that failure's wrapper or
    # consequence (a re-raise, the error's Python face), so it is generic there
    ranks_explained = {e.rank for e in events if e.kind is not None and e.rank is not None}
    by_text: dict[str, list[_Record]] = {}
    for rec in records:
        if rec.rank is None or rec.rank_basis not in _RANK_PREFIXES or rec.line_no in classified:
            continue
        if _EXCEPTION_LINE.match(rec.text):  # (a KeyboardInterrupt is no Error/Exception/Failure: not read)
            by_text.setdefault(re.sub(r"\d+", "N", rec.text[:300]), []).append(rec)
    out: list[Event] = []
    for recs in by_text.values():
        ranks = sorted({r.rank for r in recs if r.rank is not None})
        rec = recs[0]
        guess = kind_from_words([rec.text])
        kind = guess.kind if guess else K.CRASH
        consequence = bool(ranks_explained.intersection(ranks))
        ev = Event(
            rec.line_no, rec.text, "ranked_exception", kind, C.EXCEPTION if kind is K.CRASH else None,
            S.WARNING if consequence else S.CRITICAL, Blame.SELF if len(ranks) == 1 else Blame.NONE, consequence,
            rank=rec.rank, rank_basis=rec.rank_basis, host=rec.host, host_basis=rec.host_basis, ts=rec.ts,
        )  # fmt: skip
        ev.fields.update(rec.fields, raising_ranks=ranks)
        if guess:
            ev.fields["kind_from_words"] = guess.words
        out.append(ev)
    return out


# A training loss as the trainers print it (HF Trainer's "{'loss': 1.7172, ...}", Megatron's "lm loss: 1.234E+00",
# Lightning's "loss=1.72", torchtitan's "loss:  1.7234", "loss 1.72"): the first loss value of a line.
_LOSS_VALUE = re.compile(
    r"\b(?:lm |train[_ ])?loss['\"]?(?:\s*[:=]\s*| )(?P<value>[-+]?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?)(?![\d.])"
)
LOSS_COLLAPSE_MIN_ZEROS = 2  # consecutive exact zeros that end the log
LOSS_COLLAPSE_MIN_BEFORE = 0.05  # the loss just before them: a real one (a model that still learns)


def _loss_collapse(records: list[_Record], events: list[Event]) -> list[Event]:
    """A loss that was a real value and then prints as exactly 0 to the end of the log: a cross-entropy is
    never exactly 0 while a model learns, so the loss stopped being computed over anything (every label
    masked, a bf16/fp16 underflow, a broken loss path). Numerical, a warning, no blame."""
    if any(e.kind is K.NUMERICAL for e in events):
        return []
    values = [(rec, float(m.group("value"))) for rec in records if (m := _LOSS_VALUE.search(rec.text))]
    zeros = 0
    for _, v in reversed(values):
        if v != 0.0:
            break
        zeros += 1
    before = [v for _, v in values[: len(values) - zeros]]
    # straight from a real loss to 0: a loss that converges passes through 0.01, 0.001 on its way (printed rounded)
    if zeros < LOSS_COLLAPSE_MIN_ZEROS or not before or before[-1] < LOSS_COLLAPSE_MIN_BEFORE:
        return []
    rec = values[len(values) - zeros][0]
    ev = Event(rec.line_no, rec.text, "loss_collapsed_to_zero", K.NUMERICAL, None, S.WARNING, Blame.NONE, False,
               rank=rec.rank, rank_basis=rec.rank_basis, host=rec.host, host_basis=rec.host_basis, ts=rec.ts)  # fmt: skip
    ev.fields.update(loss_before=before[-1], zero_lines=zeros)
    return [ev]


# ---------------------------------------------------------------------------------------------
# Tables
# ---------------------------------------------------------------------------------------------


MAX_MESSAGE_CHARS = 2000  # a line quoted in log_events (and so in findings' evidence)


def _to_table(events: list[Event], source: str) -> pa.Table:
    schema = schema_for(SignalKind.LOG_EVENTS)
    if not events:
        return empty_table(schema, host_column=HOST_COLUMN)
    cols: dict[str, list[Any]] = {f.name: [] for f in schema}
    hosts: list[str | None] = []
    for ev in events:
        extra = dict(ev.fields)
        extra.pop("pg", None)
        if ev.peer:
            extra["peer"] = ev.peer
        if ev.culprit_basis:
            extra["culprit_basis"] = ev.culprit_basis
        if ev.rank_basis and ev.rank is not None:
            extra["rank_basis"] = ev.rank_basis
        if ev.generic:
            extra["generic"] = True
        if len(ev.message) > MAX_MESSAGE_CHARS:
            extra["message_chars"] = len(ev.message)  # quoted cut: the original size is stated
        row = {
            "ts": ev.ts,
            "source": source,
            "line_no": ev.line_no,
            "rank": ev.rank,
            "kind": ev.kind.value if ev.kind else None,
            "category": ev.category.value if ev.category else None,
            "severity": ev.severity.value,
            "signature": ev.signature,
            "pg": ev.pg,
            "seq": ev.seq,
            "op": ev.op,
            "xid": ev.xid,
            "gpu_pci": ev.gpu_pci,
            "exit_code": ev.exit_code,
            "message": ev.message[:MAX_MESSAGE_CHARS],
            "culprit_rank": ev.culprit_rank,
            "culprit_host": ev.culprit_host,
            "fields": json.dumps(extra, sort_keys=True, default=str) if extra else None,
        }
        for k in cols:
            cols[k].append(row[k])
        hosts.append(ev.host)
    table = pa.Table.from_pydict(cols, schema=schema)
    return table.append_column(HOST_COLUMN, pa.array(hosts, pa.string()))


# An error-looking line (what people grep for): the levels the logging libraries print (Python
# logging's ERROR/CRITICAL, glog's E/F prefixes as c10 prints them, `[ERROR]`), a Python traceback
# or exception, NCCL's `NCCL WARN`, C++ `terminate called`, a signal's death. Linear: anchored
# alternatives of literals and bounded character classes only.
_ERRORISH = re.compile(
    # glog's "E1031 10:52:42" ("E20221031 ..." with --log_year_in_prefix, google/glog src/logging.cc LogMessage::Init)
    r"\b(?:ERROR|FATAL|CRITICAL)\b|\[(?:E|F)\d{0,4}[ \]]|^[EF](?:\d{4})?\d{4} \d\d:\d\d|Traceback \(most recent call last\)"
    r"|\b[A-Z]\w{0,60}(?:Error|Exception|Failure)\b\s*:|\berror:|NCCL WARN|terminate called"
    r"|Segmentation fault|core dumped|\bAborted\b|\bKilled\b|\bpanic\b|\bAn error occurred\b"
    r"|\[[A-Z]\w{0,60}(?:Error|Exception)\]"  # an exception's class in brackets ("[AssertionError] ...")
    # TensorFlow/absl's "E file.cc:123] msg" (tsl/platform/default/logging.cc; its time is peeled by iso_ts)
    r"|^[EF] [\w./-]{1,200}:\d+\] "
    # Huawei CANN's error codes (Ascend NPUs, torch_npu): "EH9999: <time> <message>", "EE9999: ...", "EZ9999: ..."
    r"|^E[A-Z]\d{4}: "
    r"|^(?:\w{1,40}\.){0,6}[A-Z]\w{0,60}(?:Error|Exception)$"  # raised without a message: `EOFError`
    # a C/C++/CUDA library's own error print at its source location ("mem_heap.cpp:1519: non-zero status: 1
    # cuMemMap failed": NVSHMEM, UCX, libfabric and most C libraries print __FILE__:__LINE__ before the failure)
    r"|^[\w./-]{1,200}\.(?:c|cc|cpp|cxx|cu|h|hpp):\d+:?\s[^\n]{0,300}?\b(?:failed|failure)\b"
)
MAX_UNCLASSIFIED_LINES = 20  # quoted per log; the rest are counted
# Error-looking lines their own printer treats as harmless: NCCL <= 2.4 printed
# WARN("Failed to open libibverbs.so[.1]") when the host has no IB verbs library and went on over its
# socket transport (src/misc/ibvwrap.cu); later releases print the same text as INFO(NCCL_INIT, ...)
# (src/misc/ibvwrap.cc). Quoting it as the failure hides what the log does show (a stalled init).
_HARMLESS = re.compile(r"NCCL WARN Failed to open libibverbs\.so")
_TRACEBACK = re.compile(r"Traceback \(most recent call last\)")


def _interrupted_tracebacks(records: list[_Record]) -> set[int]:
    """Line numbers of the tracebacks (header to exception line) that end in KeyboardInterrupt: the
    user's Ctrl-C, not a failure (log_progress.INTERRUPTED); their frames are read as a stack dump."""
    out: set[int] = set()
    start: int | None = None
    for rec in records:
        if _TRACEBACK.search(rec.text):
            start = rec.line_no
        elif start is not None and INTERRUPTED.match(rec.text):
            out.update(range(start, rec.line_no + 1))
            start = None
    return out


def _unclassified(records: list[_Record], default_rank: int | None, default_host: str | None) -> list[Event]:
    """Error-looking lines of a log in which no signature matched anything: one warning event each
    (at most MAX_UNCLASSIFIED_LINES), quoting the line. They blame no rank or host: the line says
    something failed, not who; the rank/host that printed it is kept as the reporter."""
    out: list[Event] = []
    more = 0
    interrupted = _interrupted_tracebacks(records)
    for rec in records:
        if not _ERRORISH.search(rec.text[:4000]) or _HARMLESS.search(rec.text[:4000]) or rec.line_no in interrupted:
            continue
        if len(out) >= MAX_UNCLASSIFIED_LINES:
            more += 1
            continue
        ev = Event(
            rec.line_no, rec.text, "unclassified_error", K.CRASH, C.UNCLASSIFIED, S.WARNING, Blame.NONE, True,
            rank=rec.rank if rec.rank is not None else default_rank,
            host=rec.host or default_host, ts=rec.ts,
        )  # fmt: skip
        ev.fields["unclassified"] = True
        out.append(ev)
    if out and more:
        out[-1].fields["more_unclassified_lines"] = more
    # what kind the lines' own words say (collectors/log_vocabulary.py): one kind for all, one finding
    if out and (guess := kind_from_words(e.message for e in out)):
        for ev in out:
            ev.kind = guess.kind
            ev.fields.update(kind_from_words=guess.words)
    return out


def parse_log_text(text: str, source: str = "<text>", *, rank: int | None = None, host: str | None = None) -> pa.Table:
    """Classify every line of `text` into a log_events table (plus a `host` column).

    `rank`/`host` are what the caller knows from where the text came from (a run dir's
    logs/H/rank-R.log); the text's own prefixes ([rankN]:, Ray ip, pdsh host) take precedence.
    A log in which no signature matched but some line looks like an error gets "unclassified
    error" events for those lines (never silence on a log that says something failed).
    """
    records = list(clean_lines(text))
    events = parse_records(records, default_rank=rank, default_host=host)
    # a blamed printer's other half (its host, its rank) from other lines of the text
    complete_culprits(events, read_identity(records, events, plausible_host=_plausible_host))
    if not any(e.kind is not None for e in events):
        events = events + _unclassified(records, rank, host)
    if not any(e.kind is not None for e in events):
        events = events + _nccl_return_trace(records)
    # hosts that chose disjoint NCCL networks (collectors/log_net_mismatch.py): what a stalled set-up
    # after them means, so it comes before (and instead of) the reading of absence
    if mm := read_net_mismatch((r.line_no, r.host, r.text) for r in records):
        for n, h, t in mm.lines:
            ev = Event(n, t, "nccl_network_mismatch", K.NETWORK_ERROR, C.NCCL, S.WARNING, Blame.NONE, False, host=h)
            ev.fields.update(reason=mm.reason, networks_by_host=mm.networks_by_host)
            events.append(ev)
    # processes whose NCCL COLL trace shows different collectives at one opCount (collectors/log_coll_mismatch.py)
    if cm := read_coll_mismatch((r.line_no, r.host, r.fields.get("nccl_pid"), r.text) for r in records):
        n, _, t = cm.lines[0]  # an odd process's call
        ev = Event(n, t, "nccl_coll_mismatch", K.COLLECTIVE_MISMATCH, None, S.CRITICAL, Blame.NONE, False)
        ev.fields.update(
            op_count=cm.op_count, calls_by_process=cm.calls_by_process, odd_processes=list(cm.odd_processes)
        )
        events.append(ev)
    if not any(e.kind is not None for e in events):
        events = events + _progress_stopped(records, rank, host, text)
    return _to_table(events, source)


# NCCL's NCCLCHECK trail (src/include/checks.h: INFO(NCCL_ALL, "%s:%d -> %d", __FILE__, __LINE__, res), 2.19+
# INFO_LOC "-> %d (%s)"): each function a failed call returns through prints its file:line and the
# ncclResult_t (src/nccl.h.in: 1 unhandled cuda error, 2 system error, 3 internal error, 4 invalid argument,
# 5 invalid usage, 6 remote error). Read only where no line says more (no WARN printed): the trail is the
# failure's only trace then. Its other use, a teardown after an abort, comes with lines that say more.
_NCCL_RETURN = re.compile(r"\bNCCL INFO [\w./-]+:\d+ -> (?P<code>[1-6])\b")
_NCCL_RESULT = {
    1: (K.CRASH, C.CUDA_ERROR, "ncclUnhandledCudaError"),
    2: (K.NETWORK_ERROR, C.NCCL, "ncclSystemError"),
    3: (K.NETWORK_ERROR, C.NCCL, "ncclInternalError"),
    4: (K.CRASH, None, "ncclInvalidArgument"),
    5: (K.CRASH, None, "ncclInvalidUsage"),
    6: (K.NETWORK_ERROR, C.NCCL, "ncclRemoteError"),
}
MIN_NCCL_RETURN_LINES = 2  # one trace line alone may be a retried call


def _nccl_return_trace(records: list[_Record]) -> list[Event]:
    """A log whose only failure trace is NCCL's "file:line -> N" return trail: one warning event naming the
    ncclResult_t it carries (the first line's), blaming nobody."""
    trail = [(rec, int(m.group("code"))) for rec in records if (m := _NCCL_RETURN.search(rec.text))]
    if len(trail) < MIN_NCCL_RETURN_LINES:
        return []
    rec, code = trail[0]
    kind, category, name = _NCCL_RESULT[code]
    ev = Event(rec.line_no, rec.text, "nccl_return_trace", kind, category, S.WARNING, Blame.NONE, True,
               host=rec.host, host_basis=rec.host_basis, ts=rec.ts)  # fmt: skip
    ev.fields.update(nccl_result=name, nccl_result_code=code, trace_lines=len(trail))
    return [ev]


RAW_TAIL_LINES = 8  # the log's last lines, unwrapped but not cleaned, for readings of what cleaning drops (bars)


def _progress_stopped(
    records: list[_Record], default_rank: int | None, default_host: str | None, text: str
) -> list[Event]:
    """A log with no error line at all: the reading of absence (collectors/log_progress.py), if one holds,
    as one event that analyzers/log_progress.py makes a low-confidence finding of."""
    cut = max(0, len(text) - RAW_TAIL_LINES * 400)
    first_line = text.count("\n", 0, cut) + 1
    tail = [(n, ln) for n, ln in enumerate(_normalized_lines(text[cut:])[0], first_line) if ln.strip()]
    r = read_progress(
        ((rec.line_no, rec.text) for rec in records),
        {rec.line_no: rec.rank for rec in records if rec.rank is not None},
        raw_tail=tail[-RAW_TAIL_LINES:],
    )
    if r is None:
        return []
    ev = Event(r.line_no, r.summary, r.signature, K.HUNG_COLLECTIVE, None, S.WARNING, Blame.NONE, True,
               rank=default_rank, host=default_host)  # fmt: skip
    ev.fields.update(r.evidence, progress_reading=True, suspect_ranks=list(r.suspect_ranks))
    return [ev]


MAX_LOG_BYTES = 1 << 30  # read (after decompression) at most this much of one log; the rest is cut, said


def _read_text(path: Path, *, max_bytes: int = MAX_LOG_BYTES) -> str:
    """The file as text (any bytes decoded with replacement), at most `max_bytes` of it: a gzip bomb is
    cut off and a truncated .gz keeps every byte that was decompressible, each with a warning."""
    chunks: list[bytes] = []
    total = 0
    with open(path, "rb") as f:
        if path.suffix != ".gz":
            data = f.read(max_bytes + 1)
            if len(data) > max_bytes:
                logger.warning("%s: over %d bytes; the rest is not read", path, max_bytes)
            return data[:max_bytes].decode("utf-8", errors="replace")
        # zlib directly (wbits 47: gzip or zlib header, auto): gzip.GzipFile drops the last chunk when
        # the trailer is missing, and would decompress a bomb whole before we could stop it.
        d = zlib.decompressobj(wbits=47)
        try:
            while total < max_bytes and (raw := f.read(1 << 16)):
                out = d.decompress(raw, max_bytes - total)
                chunks.append(out)
                total += len(out)
                while d.unconsumed_tail and total < max_bytes:  # a bomb expands: drain within the cap
                    out = d.decompress(d.unconsumed_tail, max_bytes - total)
                    chunks.append(out)
                    total += len(out)
                if d.eof and d.unused_data:  # a second gzip member (concatenated .gz)
                    rest = d.unused_data
                    d = zlib.decompressobj(wbits=47)
                    out = d.decompress(rest, max_bytes - total)
                    chunks.append(out)
                    total += len(out)
            if total >= max_bytes:
                logger.warning("%s: over %d bytes decompressed; the rest is not read", path, max_bytes)
            elif not d.eof:
                logger.warning("%s: truncated gzip; the %d readable bytes are analysed", path, total)
        except zlib.error as exc:
            logger.warning("%s: damaged gzip (%s); the %d readable bytes are analysed", path, exc, total)
    return b"".join(chunks).decode("utf-8", errors="replace")


def parse_log_file(path: str | os.PathLike[str], *, rank: int | None = None, host: str | None = None) -> pa.Table:
    """Parse one log file (plain or .gz): a pasted log, a rank log, or a kernel log (dmesg/journalctl -k)."""
    p = Path(path)
    return parse_log_text(_read_text(p), str(p), rank=rank, host=host)


_RANK_LOG = re.compile(r"^rank-(\d+)\.log(?:\.gz)?$")


def attribute_to_host(table: pa.Table, host: str, known_hosts: Collection[str]) -> pa.Table:
    """Rows of a file that came from host `host` (logs/H/, kernel/H/) that name a host which is not
    one of the run's hosts are attributed to `host`; the original name is kept in `fields`.

    torchelastic's ChildFailedError banner and agent lines carry the machine's own hostname
    (`localhost` on a test host, a short hostname where the inventory uses an alias or an IP),
    so a crash finding could otherwise name a host trainctl cannot evict, and a repeat-offender
    rule would blame it. The file's folder is where the line was written, which settles it. A
    culprit that is a *peer* of the line (a connect failure to another machine) is not the
    writer, so it is only rewritten when it is the line's own host or the banner's host.
    """
    if not table.num_rows:
        return table
    known = set(known_hosts)
    hosts = table.column(HOST_COLUMN).to_pylist()
    culprits = table.column("culprit_host").to_pylist()
    fields = table.column("fields").to_pylist()
    changed = False
    for i, (h, c, fj) in enumerate(zip(hosts, culprits, fields)):
        extra = json.loads(fj) if fj else {}
        touched = False
        if h is not None and h not in known:
            extra["host_as_logged"] = h
            hosts[i], touched = host, True
        if c is not None and c not in known and (c == h or str(extra.get("culprit_basis", "")).startswith("elastic")):
            extra["culprit_host_as_logged"] = c
            culprits[i], touched = host, True
        if touched:
            fields[i] = json.dumps(extra, sort_keys=True, default=str)
            changed = True
    if not changed:
        return table
    for name, values in ((HOST_COLUMN, hosts), ("culprit_host", culprits), ("fields", fields)):
        idx = table.schema.get_field_index(name)
        table = table.set_column(idx, table.schema.field(idx), pa.array(values, pa.string()))
    return table


def parse_run_logs(root: str | os.PathLike[str], known_hosts: Collection[str] | None = None) -> pa.Table:
    """log_events of a run dir or collected dataset: logs/H/rank-R.log (rank R on host H, known from
    the path), other logs/H/*.log (host only) and kernel/H/dmesg.txt (host H).

    `known_hosts` (run.json's hosts; default: the host folders found under logs/ and kernel/):
    a line in a file under logs/H/ or kernel/H/ that names any other host is attributed to H
    (see attribute_to_host).
    """
    root = Path(root)
    files: list[tuple[Path, int | None, str]] = []
    logs = root / "logs"
    if logs.is_dir():
        for host_dir in sorted(p for p in logs.iterdir() if p.is_dir()):
            for f in sorted(host_dir.iterdir()):
                if not f.is_file() or not (f.name.endswith((".log", ".log.gz", ".txt"))):
                    continue
                m = _RANK_LOG.match(f.name)
                files.append((f, int(m.group(1)) if m else None, host_dir.name))
    kernel = root / "kernel"
    if kernel.is_dir():
        for host_dir in sorted(p for p in kernel.iterdir() if p.is_dir()):
            for f in sorted(host_dir.glob("*.txt")):
                files.append((f, None, host_dir.name))
    if not files:
        return _to_table([], "")
    known = set(known_hosts) if known_hosts else {h for _, _, h in files}
    return pa.concat_tables([attribute_to_host(parse_log_file(f, rank=r, host=h), h, known) for f, r, h in files])
