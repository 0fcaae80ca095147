"""Network failures: NCCL's socket, IB verbs, proxy and plugin transports, its set-up, gloo's pairs, links."""

from __future__ import annotations

import re

from trainctl.collectors.log_signatures.cuda import cuda_post
from trainctl.collectors.log_signatures.rule import (
    ADDR,
    Blame,
    C,
    Event,
    K,
    S,
    Signature,
    sig,
)

# The async events of an HCA that are no fault (rdma-core libibverbs/enum_strs.c ibv_event_type_str's names): NCCL
# 2.2x (NVIDIA/nccl src/transport/net_ib/common.cc ncclIbAsyncThreadMain) prints them as "Got non-fatal async event:
# %s(%d)" or "GID table changed"; older releases printed every event as "Got async event : %s". A port coming up, a
# subnet manager or address change, a drained queue. (A port error or a failed path migration is still a failure.)
_BENIGN_IB_EVENT = (
    r"(?:communication established|send queue drained|path migrated|port active|LID change|P_Key change|SM change"
    r"|SRQ limit reached|last WQE reached|client reregistration|GID table change)\b"
)
# The whole warning of such an event (NCCL WARN's "NET/IB : <dev>:<port> ..."): no signature's, and no error-looking
# line for the unclassified fallback (collectors/logs.py _HARMLESS).
_BENIGN_IB_WARNING_TAIL = (
    r"(?:[\w-]+(?::\d+)?\s+)?(?:GID table changed|Got (?:non-fatal )?async event\s*:\s*" + _BENIGN_IB_EVENT + ")"
)
BENIGN_IB_WARNING = r"NCCL WARN NET/IB\s*:\s*" + _BENIGN_IB_WARNING_TAIL

# IB work-completion statuses that say the remote end failed (ibv_wc_status): 9 REM_INV_REQ,
# 10 REM_ACCESS, 11 REM_OP, 12 RETRY_EXC (the peer never acked), 13 RNR_RETRY_EXC. 5 (WR_FLUSH)
# and the rest are local consequences.
_IB_REMOTE_STATUS = {9, 10, 11, 12, 13}


def _ib_completion_post(ev: Event) -> None:
    status = ev.fields.get("ib_status")
    ev.blame = Blame.PEER if status is not None and int(status) in _IB_REMOTE_STATUS else Blame.NONE


def _nccl_call_post(ev: Event) -> None:
    if ev.fields.get("nccl_call_text") == "unhandled cuda error":  # ncclUnhandledCudaError: this process's CUDA
        ev.kind, ev.category, ev.blame = K.CRASH, C.CUDA_ERROR, Blame.SELF


def _reset_by_peer_post(ev: Event) -> None:
    # RST from the peer (its process died or its stack aborted) names the peer; "closed by peer"
    # (an orderly FIN, as at shutdown), "refused", "no route", "timed out" do not.
    ev.blame = Blame.PEER if "reset by peer" in ev.message.lower() else Blame.NONE


def _ibv_post(ev: Event) -> None:
    if ev.fields.get("ibv_call") == "modify_qp":  # may fail on what the remote side sent
        ev.blame = Blame.NONE


def _socket_truncated_post(ev: Event) -> None:
    """NCCL 2.12.10+ returns ncclInvalidUsage for a truncated socket message and says why in the same WARN: "If you
    believe your socket network is in a healthy state, there may be a mismatch in collective sizes or environment
    settings (e.g. NCCL_PROTO, NCCL_ALGO) between ranks". Its own verdict is a usage error, not the network's
    (before 2.12.10 the line had no such text and the error was ncclInternalError)."""
    if "mismatch in collective sizes" in ev.message:
        ev.kind, ev.category = K.COLLECTIVE_MISMATCH, C.TYPE_MISMATCH


def _nvml_post(ev: Event) -> None:
    if ev.fields.get("nvml_error") == "GPU is lost":
        ev.category = C.GPU_LOST


def _paddle_signal_post(ev: Event) -> None:
    if ev.fields.get("paddle_signal") == "Termination signal":
        # SIGTERM is sent from outside (a user, a scheduler, a launcher tearing down): what the process was doing
        # when it came (its C++ frames) is the story, not the signal
        ev.fields["signal"], ev.severity, ev.generic = "SIGTERM", S.WARNING, True


# NCCL / IB / socket / gloo network errors
ERRORS: tuple[Signature, ...] = (
    sig(
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
    sig(
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
    sig(
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
    sig(
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
    sig(
        "nccl_call_failed",
        # A framework's check of an NCCL call, with NCCL's own text for the result (NVIDIA/nccl src/init.cc
        # ncclGetErrorString, v2.4 "unhandled system error" ... to 2.30 "... (run with NCCL_DEBUG=INFO for details)"):
        # Horovod horovod/common/ops/nccl_operations.cc NCCLContext::ErrorCheck throws std::logic_error(op_name +
        # " failed: " + ncclGetErrorString(r)) ("ncclAllReduce failed: unhandled system error", raised as
        # HorovodInternalError); XLA xla/service/gpu (nccl_utils.cc ToStatus, XLA_NCCL_STATUS) and TensorFlow's
        # nccl_manager "%s:%d: NCCL operation %s failed: %s" ("NCCL operation ncclCommInitRank(&comm, nranks, id,
        # rank) failed: unhandled cuda error"). An unhandled CUDA error is this process's CUDA failure; the others
        # an NCCL failure, as torch's "NCCL error in: ..." of the same result reads.
        r"(?:\bNCCL operation \S[^\n]{0,300}?|\bnccl[A-Z]\w{2,40}(?:\([^\n]{0,200}?\))?) failed: "
        r"(?P<nccl_call_text>unhandled system error|remote process exited or there was a network error|internal error"
        r"|invalid usage|invalid argument|unhandled cuda error)",
        K.NETWORK_ERROR,
        C.NCCL,
        S.CRITICAL,
        Blame.NONE,
        [" failed: "],
        "A framework's NCCL call failed with NCCL's result text (Horovod, XLA/JAX, TensorFlow).",
        post=_nccl_call_post,
    ),
    sig(
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
    sig(
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
    sig(
        "nccl_socket_connect_failed",
        # misc/socket.cc socketStartConnect (2.12+); include/socket.h "Net : Connect to %s failed : %s" (2.10-2.11)
        # and "Connect to %s failed : %s" (2.4-2.9)
        rf"(?:socketStartConnect: |Net : )?Connect to {ADDR}<(?P<peer_port>\d+)> failed\s*:\s*(?P<reason>[^\n]+)",
        K.NETWORK_ERROR,
        C.SOCKET,
        S.CRITICAL,
        Blame.NONE,
        ["socketStartConnect", "connect to"],
        "Bootstrap/socket connect failure. 'No route to host' is local routing (NCCL_SOCKET_IFNAME), so no blame.",
    ),
    sig(
        "nccl_socket_io_failed",
        # (2.10-2.14: "Net : Call to recv from %s failed : %s")
        rf"(?:socketProgress(?:Opt)?:|Net :) Call to (?:recv|send) (?:from|to) {ADDR}<(?P<peer_port>\d+)> failed\s*:\s*(?P<reason>[^\n]+)",
        K.NETWORK_ERROR,
        C.SOCKET,
        S.CRITICAL,
        Blame.NONE,
        ["socketProgress", "Net : Call to"],
        "Socket I/O failure; 'Connection reset by peer' names the peer.",
        post=_reset_by_peer_post,
    ),
    sig(
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
    sig(
        "nccl_socket_poll_connect",
        r"socketPollConnect:? poll\(\) returned \d+, no POLLOUT events",
        K.NETWORK_ERROR,
        C.SOCKET,
        S.WARNING,
        Blame.NONE,
        ["socketPollConnect"],
        "NCCL 2.2x bootstrap connect never completed (SYN dropped); the destination is not named.",
    ),
    sig(
        "nccl_socket_poll_connect_error",
        # NCCL src/misc/socket.cc socketPollConnect (2.19+): WARN("socketPollConnect: Connect to %s returned
        # %d(%s) errno %d(%s)", addr, ret, strerror(ret), errno, strerror(errno)): the connect itself failed
        # (refused, no route, timed out). Names the destination, not a culprit: the path or the listener.
        rf"socketPollConnect: Connect to {ADDR}<(?P<peer_port>\d+)> returned (?P<errno>\d+)\((?P<reason>[^)\n]*)\)",
        K.NETWORK_ERROR,
        C.SOCKET,
        S.CRITICAL,
        Blame.NONE,
        ["socketPollConnect"],
        "NCCL bootstrap/socket connect failed with an errno (refused, no route to host, timed out).",
    ),
    sig(
        "nccl_ib_completion_error",
        # (2.4-2.9 net_ib.cc: "NET/IB : Got completion with error %d, opcode %d, len %d, vendor err %d": no peer)
        # NCCL 2.28.7+ (v2.28.9-1 src/transport/net_ib.cc; v2.29.2-1/v2.30 src/transport/net_ib/p2p.cc
        # ncclIbLogCompletionWithError) names the status and opcode: WARN("NET/IB: Got completion from peer %s with
        # status=%s(%d) opcode=%s(%d) vendor_err=%u ...", ibvWcStatusStr(..) e.g. "IBV_WC_RETRY_EXC_ERR(12)"), and
        # its GIN transport (v2.28.9-1 net_ib.cc, v2.29+ net_ib/gin.cc) prints WARN("NET/IB/GIN: Got completion from
        # peer %s with status=%d opcode=%d len=%u vendor err %u ..."). The status and opcode lead the line, so a
        # line cut before its "vendor err" (a paste, a wrapped terminal, a shipper's length limit) still says what
        # failed and with whom.
        rf"NET/IB(?:/GIN)?\s*:\s*Got completion (?:from peer {ADDR}<(?P<peer_port>\d+)> )?with "
        r"(?:error (?P<ib_status>\d+), opcode (?P<ib_opcode>\d+)"
        r"|status=(?:IBV_WC_\w+\()?(?P<ib_status__2>\d+)\)? opcode=(?:IBV_WC_\w+\()?(?P<ib_opcode__2>\d+)\)?)"
        r"(?:.*?vendor[ _]err[ =](?P<vendor_err>\d+))?",
        K.NETWORK_ERROR,
        C.IB,
        S.CRITICAL,
        Blame.NONE,
        ["Got completion"],
        "IB work completion error (<=2.18 'error 12, opcode 0', 2.19+ 'status=12 opcode=0', "
        "2.28.7+ 'status=IBV_WC_RETRY_EXC_ERR(12)'); "
        "remote statuses (9-13, e.g. 12 retry exceeded) name the peer.",
        post=_ib_completion_post,
    ),
    sig(
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
    sig(
        "nccl_ib_async_event",
        # net_ib.cc: WARN("NET/IB : %s:%d Got async event : %s", dev, port, ...); NCCL 2.4's net_ib.cu:80 had no
        # device: WARN("NET/IB : Got async event : %s", ...). 2.2x (NVIDIA/nccl 5067397c src/transport/net_ib/common.cc):
        # WARN("NET/IB : %s:%d async fatal event: %s"), "... async fatal event on CQ (%p) ...: %s", "... on QP (%p) ...".
        r"NET/IB\s*:\s*(?:(?P<nic>[\w-]+(?::\d+)?)\s+)?Got async event\s*:(?!\s*"
        + _BENIGN_IB_EVENT
        + r")(?P<ib_event>[^\n]+)"
        r"|NET/IB\s*:\s*(?P<nic__2>[\w-]+(?::\d+)?)\s+async fatal event(?: on (?:CQ|QP|SRQ)[^:\n]*)?:\s*(?P<ib_event__2>[^\n]+)",
        K.NETWORK_ERROR,
        C.IB,
        S.CRITICAL,
        Blame.SELF,
        ["Got async event", "async fatal event"],
        "The local HCA reported an async error: the host that logs it is at fault.",
    ),
    sig(
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
        post=_ibv_post,
    ),
    sig(
        "nccl_ofi_completion_error",
        # aws-ofi-nccl src/nccl_ofi_sendrecv.cpp / nccl_ofi_rdma.cpp (the *_handle_error_entry of a completion queue):
        # NCCL_OFI_WARN("Request %p [seq %d ]completed with error. RC: %d. Error: %d (%s). Completed length: %ld[,
        # Request: %s]") with libfabric's err, the provider's errno and fi_cq_strerror's text. A send or receive on
        # the network failed (EFA's "Unknown error 4097", a remote endpoint gone): the job's transport failed,
        # which the collective timeouts after it follow from. No end is named, so no host is blamed.
        r"NET/OFI Request (?:\S+ )?(?:seq \d+ )?completed with error\. RC: (?P<fi_err>-?\d+)\. Error: (?P<prov_errno>-?\d+)"
        r"(?: \((?P<reason>[^)\n]{0,160})\))?",
        K.NETWORK_ERROR,
        C.NCCL,
        S.CRITICAL,
        Blame.NONE,
        ["completed with error"],
        "aws-ofi-nccl: a network send/receive completed with an error (EFA/libfabric): the transport failed.",
    ),
    sig(
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
    sig(
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
    sig(
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
    sig(
        "nccl_ib_benign_async_event",
        # The harmless HCA events of the NCCL WARN (BENIGN_IB_WARNING, above): no fault of the host that logs them, so
        # no blame and no more than information (a GID change mid-run is a RoCE address change, which can break its
        # connections: worth showing beside a failure, never a failure alone).
        BENIGN_IB_WARNING,
        K.NETWORK_ERROR,
        C.IB,
        S.INFO,
        Blame.NONE,
        ["async event", "GID table changed"],
        "An HCA's harmless async event (a port up, an address or subnet-manager change): information, no blame.",
        generic=True,
    ),
    sig(
        "nccl_warn_ib",
        # (not a benign async event, as NCCL itself classes them: above)
        r"NCCL WARN NET/IB\s*:(?!\s*" + _BENIGN_IB_WARNING_TAIL + r")(?P<ib_warn>[^\n]+)",
        K.NETWORK_ERROR,
        C.IB,
        S.WARNING,
        Blame.NONE,
        ["NCCL WARN NET/IB"],
        "Other NET/IB warnings.",
        generic=True,
    ),
    sig(
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
    sig(
        "ipoib_transmit_timeout",
        # drivers/infiniband/ulp/ipoib/ipoib_main.c ipoib_timeout (the netdev watchdog's tx timeout): ipoib_warn(priv,
        # "transmit timeout: latency %d msecs"), prefixed with the interface ("ib0: "): packets queued on this host's
        # IPoIB interface left no more; its IB port or HCA stopped sending.
        r"\b(?P<ib_if>ib[\w.]*): transmit timeout: latency (?P<latency_ms>\d+) msecs",
        K.NETWORK_ERROR,
        C.IB,
        S.WARNING,
        Blame.SELF,
        ["transmit timeout"],
        "This host's IPoIB interface stopped transmitting (its IB port or HCA).",
    ),
    sig(
        "gloo_connect_full_mesh",
        r"Gloo connectFullMesh failed with (?P<detail>[^\n]+)",
        K.NETWORK_ERROR,
        C.GLOO,
        S.CRITICAL,
        Blame.NONE,
        ["connectFullMesh"],
        "Gloo could not connect to its peers ('no error' suffix is normal): interface/address config, no blame.",
    ),
    sig(
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
    sig(
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
    sig(
        "mlx5_reg_mr_failed",
        # Linux drivers/infiniband/hw/mlx5/mr.c create_mkey_callback: mlx5_ib_warn(dev, "async reg mr failed. status
        # %d\n", status) (the device's prefix "infiniband mlx5_0: create_mkey_callback:131:(pid N): " before it): the
        # HCA could not create a memory key for a registration (-12: ENOMEM), so RDMA buffers (NCCL's, UCX's) cannot
        # be registered on this host.
        r"\b(?P<nic>mlx5_\d+):? [^\n]{0,80}?async reg mr failed\. status (?P<status>-?\d+)",
        K.NETWORK_ERROR,
        C.IB,
        S.WARNING,
        Blame.SELF,
        ["async reg mr failed"],
        "Kernel: this host's mlx5 HCA failed to register memory for RDMA (status -12: out of memory keys/memory).",
    ),
    sig(
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
    sig(
        "ucx_ib_retry_exceeded",
        # openucx/ucx src/uct/ib/mlx5/ib_mlx5_log.c uct_ib_mlx5_completion_with_err: for the CQE syndromes
        # TRANSPORT_RETRY_EXC_ERR and RNR_RETRY_EXC_ERR, "Transport retry count exceeded" / "Receive-no-ready retry
        # count exceeded", logged as "%s on <dev>:<port>/<IB|RoCE> (synd ...)": the remote side never acknowledged
        # (a dead peer or a lossy path); UCX names only its own port, so no peer and no blame.
        r"(?P<reason>(?:Transport|Receive-no-ready) retry count exceeded) on (?P<ib_dev>[\w.-]+:\d+)/(?P<link>IB|RoCE)",
        K.NETWORK_ERROR,
        C.IB,
        S.CRITICAL,
        Blame.NONE,
        ["retry count exceeded on"],
        "UCX (Open MPI, Horovod over UCX): an RDMA send exhausted its retries; the peer or the path, not named.",
    ),
    sig(
        "gloo_connect_frames",
        # gloo/rendezvous/context.cc Context::connectFullMesh and gloo/transport/tcp/context.cc
        # Context::createAndConnectAllPairs (the frames of torch's ProcessGroupGloo construction): a c10::Error
        # backtrace through them is gloo failing to connect its pairs (its "connectFullMesh failed" line cut off).
        r"gloo::(?:rendezvous::Context::connectFullMesh|transport::tcp::Context::createAndConnectAllPairs)\(",
        K.NETWORK_ERROR,
        C.GLOO,
        S.WARNING,
        Blame.NONE,
        ["connectfullmesh(", "createandconnectallpairs("],
        "A backtrace through gloo's full-mesh connect: gloo could not connect its pairs.",
        generic=True,
    ),
    sig(
        "openmpi_tcp_connect_failed",
        # Open MPI opal/mca/btl/tcp/btl_tcp_endpoint.c mca_btl_tcp_endpoint_complete_connect: BTL_ERROR(("connect()
        # to %s failed: %s (%d)", address, strerror(so_error), so_error)); and its help text (help-mpi-btl-tcp.txt)
        # "A process or daemon was unable to complete a TCP connection to another process:" with "Local host:" /
        # "Remote host:" lines ("usually caused by a firewall on the remote host"): the path or an interface
        # choice (btl_tcp_if_include), not a culprit.
        r"\bconnect\(\) to (?P<peer>[\w.:-]+) failed: (?P<reason>[^(\n]{1,80}) \((?P<errno>\d+)\)"
        r"|(?P<reason__2>unable to complete a TCP connection)(?: to another process)?",  # the help text wraps there
        K.NETWORK_ERROR,
        C.SOCKET,
        S.CRITICAL,
        Blame.NONE,
        ["connect() to", "unable to complete a tcp connection"],
        "Open MPI could not open a TCP connection between its processes or daemons.",
    ),
)


# NCCL transports (src/transport/net_socket.cc, src/proxy.cc, src/init.cc; NCCL 2.2x)
NCCL_TRANSPORTS: tuple[Signature, ...] = (
    sig(
        "nccl_socket_truncated",
        # net_socket.cc: WARN("NET/Socket : peer %s message truncated : receiving %d bytes instead of %d. ...")
        # (2.4-2.9: "NET/Socket : message truncated : ..." without the peer; the "... there may be a mismatch in
        # collective sizes ..." hint and ncclInvalidUsage from 2.12.10-1, NVIDIA/nccl 353e8ba4)
        r"NET/Socket : (?:peer (?P<peer>\S+?) )?message truncated : receiving (?P<got>\d+) bytes instead of (?P<want>\d+)",
        K.NETWORK_ERROR,
        C.SOCKET,
        S.CRITICAL,
        Blame.NONE,
        ["message truncated"],
        "NCCL socket transport: a message of the wrong size; usually mismatched collectives or corrupted traffic, "
        "not a bad peer (a collective mismatch where NCCL 2.12.10+ says so in the line).",
        post=_socket_truncated_post,
    ),
    sig(
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
    sig(
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
    sig(
        "nccl_socket_closed_by_peer",
        # src/misc/socket.cc socketProgress: WARN("socketProgress: Connection closed by remote peer %s", ...)
        # when recv() returns 0 mid-operation. NCCL closes its sockets only in ncclCommDestroy/Abort,
        # never inside a collective, so an orderly close there is the peer's process exiting (the
        # kernel closes a dead process's sockets): the peer is where the failure started, as seen
        # from this rank. (Shutdown closes are not logged: the communicator is torn down first.)
        # (2.10-2.14 include/socket.h, misc/socket.cc: "Net : Connection closed by remote peer %s"; before 2.10
        # without the address: the peer is then not named; 2.0-2.2 include/socket.h without the "Net : ")
        rf"(?:(?:socketProgress:|Net :) |(?<=NCCL WARN ))Connection closed by remote peer(?: {ADDR}<(?P<peer_port>\d+)>)?",
        K.NETWORK_ERROR,
        C.SOCKET,
        S.CRITICAL,
        Blame.PEER,
        ["Connection closed by remote peer"],
        "NCCL socket: the peer's process closed the connection mid-operation (it exited or aborted first).",
    ),
)


# NCCL set-up and transports, from the sources (src/misc/socket.cc, bootstrap.cc, shmutils.cc, ...)
NCCL_SETUP: tuple[Signature, ...] = (
    sig(
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
    sig(
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
    sig(
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
    sig(
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
    sig(
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
    sig(
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
    sig(
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
    sig(
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
        post=cuda_post,
    ),
    sig(
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
    sig(
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
    sig(
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
    sig(
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
    sig(
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
        post=_nvml_post,
    ),
    sig(
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
        post=_paddle_signal_post,
    ),
    sig(
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
    sig(
        "nccl_socket_connect_retry",
        # NCCL src/misc/socket.cc (2.7-2.18 connectAddress; 2.19+ socketStartConnect): on ECONNREFUSED or
        # ETIMEDOUT, INFO(NCCL_ALL, "Call to connect returned %s, retrying", strerror(errno)) before it sleeps
        # and tries again (2.19+ prints every 1000th retry; WARN "exceeded retries" when it gives up). The peer's
        # listener is not there or the path drops the SYN: the address NCCL chose (NCCL_SOCKET_IFNAME) or the
        # fabric, not a culprit.
        r"Call to connect returned (?P<reason>[^,\n]{1,80}), retrying",
        K.NETWORK_ERROR,
        C.SOCKET,
        S.WARNING,
        Blame.NONE,
        ["Call to connect returned"],
        "NCCL keeps retrying a socket connect (refused or timed out): the peer's address or the path.",
    ),
)
