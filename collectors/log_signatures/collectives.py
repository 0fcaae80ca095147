"""Collective timeouts (the NCCL watchdog in every era) and NCCL's device-side collective check."""

from __future__ import annotations

from trainctl.collectors.log_signatures.rule import (
    Blame,
    C,
    Event,
    K,
    S,
    Signature,
    named_self_post,
    sig,
)


def _desync_post(ev: Event) -> None:
    """One lagging rank named: the culprit, read off torch's report (the printer stays the reporter); several:
    the report lists them, nobody is blamed."""
    ranks = str(ev.fields.get("lagging_ranks", "")).split(", ")
    if len(ranks) == 1 and ranks[0].isdigit():
        ev.culprit_rank, ev.culprit_basis = int(ranks[0]), "desync_report"


# collective timeouts (NCCL watchdog, all eras)
TIMEOUTS: tuple[Signature, ...] = (
    sig(
        "nccl_watchdog_timeout",
        # torch 1.8 ProcessGroupNCCL.cpp printed "Caught collective operation timeout: WorkNCCL(OpType=X,
        # TensorShape=[...], Timeout(ms)=N) ran for ...", 1.9-1.10 with "Watchdog caught" and TensorShape.
        r"(?:Watchdog c|\bC)aught collective operation timeout:\s*WorkNCCL\((?:SeqNum=(?P<seq>\d+),\s*)?OpType=(?P<op>\w+)"
        r"(?:,\s*TensorShape=\[[^\]\n]{0,200}\])?"
        r"(?:,\s*NumelIn=(?P<numel_in>-?\d+),\s*NumelOut=(?P<numel_out>-?\d+))?,\s*Timeout\(ms\)=(?P<timeout_ms>\d+)\)"
        # "ran for N milliseconds before timing out." ends it; a line cut there (a paste, a tqdm bar
        # glued in front that the excerpt ends on) still says which collective timed out
        r"(?:\s*ran for (?P<ran_ms>\d+) milliseconds)?"
        # a paste that broke the line after "timeout:" (the WorkNCCL(...) on the lines below), or cut it before the
        # colon: the timeout still
        r"|Watchdog caught collective operation timeout:?\s*$",
        K.HUNG_COLLECTIVE,
        C.COLLECTIVE_TIMEOUT,
        S.CRITICAL,
        Blame.NONE,
        ["caught collective operation timeout"],
        "WorkNCCL(...) ran for N ms before timing out (<=1.10 without SeqNum, 2.1+ with NumelIn/Out). "
        "Names the reporting rank only: the culprit is whoever never arrived.",
    ),
    sig(
        "nccl_desync_report",
        # torch/csrc/distributed/c10d/TraceUtils.h (torch 1.13-2.13; read in the 2.13 header), the report a timed-out
        # rank prints under TORCH_NCCL_DESYNC_DEBUG=1 (NCCL_DESYNC_DEBUG before 2.2) from every rank's last
        # started/finished collective in the store: analyzeLaggingRanks, "To our best knowledge, the lagging/dead/
        # mismatched ranks that caused the desync are:" then "- [R1, R2] joined but didn't finish collective #N
        # (count from 1)" and/or "[R3] finished collective #N, but didn't join collective #N+1 (count from 1)";
        # analyzeMissingRanks, "To our best knowledge, ranks [R] are the lagging ranks that caused this timeout.
        # They never joined any collectives". The ranks named (of the timed-out group) are the ones torch found
        # behind: the culprit, where it is one rank.
        r"^-?\s*\[(?P<lagging_ranks>\d+(?:, \d+){0,1000})\] (?:joined but didn't finish collective #(?P<lagging_seq>\d+)"
        r"|finished collective #(?P<lagging_seq__2>\d+), but didn't join collective #\d+)"
        r"|\branks \[(?P<lagging_ranks__2>\d+(?:, \d+){0,1000})\] are the lagging ranks that caused this timeout",
        K.HUNG_COLLECTIVE,
        C.COLLECTIVE_TIMEOUT,
        S.CRITICAL,
        Blame.NONE,
        ["didn't finish collective #", "didn't join collective #", "are the lagging ranks"],
        "torch's desync report names the rank(s) that never joined or never finished the collective others wait in.",
        post=_desync_post,
    ),
    sig(
        "horovod_stall_warning",
        # horovod/common/stall_inspector.cc StallInspector::CheckForStalledTensors (v0.16.2+; horovod 2026-06
        # 2626dc87 read), printed by the coordinator through Horovod's LOG(WARNING) (LOG(ERROR) where it shuts
        # down): "One or more tensors were submitted to be reduced, gathered or broadcasted by subset of ranks and
        # are waiting for remainder of ranks for more than N seconds. This may indicate ..." then "Missing ranks:"
        # ("Stalled ranks:" in v0.16.2-0.20.0) and one line per missing global rank, "R: [tensor, ...]" ("R!: [...]"
        # for one stalled past HOROVOD_STALL_SHUTDOWN_TIME_SECONDS, then "... Will shutdown."); v0.13.6-0.16.1
        # (common/operations.cc CheckForStalledTensors) printed "Stalled ops:" and "TENSOR [missing ranks: R, ...]"
        # per tensor. The lines after it are read by the log collector (its follower): one missing rank in every
        # stalled tensor is the rank behind; several name nobody. A stall may clear (a slow rank catches up), so a
        # warning until Horovod says it shuts down.
        r"One or more tensors were submitted to be reduced, gathered or broadcasted by subset of ranks and are "
        r"waiting for remainder of ranks for more than (?P<stall_s>\d+) seconds",
        K.HUNG_COLLECTIVE,
        C.COLLECTIVE_TIMEOUT,
        S.WARNING,
        Blame.NONE,
        ["submitted to be reduced, gathered or broadcasted by subset of ranks"],
        "Horovod's stall inspector: a collective some ranks submitted waits for the rest past the stall time; "
        "the missing ranks follow.",
    ),
    sig(
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
    sig(
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
    sig(
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
    sig(
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
    sig(
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
    sig(
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
    sig(
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
    sig(
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
    sig(
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
    sig(
        "watchdog_thread_terminated",
        r"(?:NCCL|Process group) watchdog thread terminated with exception",
        None,
        None,
        S.INFO,
        Blame.NONE,
        ["watchdog thread terminated"],
        "Context: the exception text after it (a timeout, a CUDA error, an NCCL error) is classified on its own.",
    ),
    sig(
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
    sig(
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
    sig(
        "gloo_timeout",
        r"Timed out waiting (?P<timeout_ms>\d+)ms for (?P<op>\w+) operation to complete",
        K.HUNG_COLLECTIVE,
        C.COLLECTIVE_TIMEOUT,
        S.CRITICAL,
        Blame.NONE,
        ["Timed out waiting"],
        "Gloo collective/p2p timeout; names only the waiting side.",
    ),
    sig(
        "gloo_pair_closed_by_timeout",
        # gloo/transport/tcp/unbound_buffer.cc waitRecv: on a recv timeout gloo calls
        # context_->signalException("Application timeout caused pair closure") on every pair of the context before it
        # throws "Timed out waiting ...": the other operations of that process see this line (the peers see
        # "Connection closed by peer"). A gloo collective of this process timed out; it names nobody.
        r"Application timeout caused pair closure",
        K.HUNG_COLLECTIVE,
        C.COLLECTIVE_TIMEOUT,
        S.CRITICAL,
        Blame.NONE,
        ["Application timeout caused pair closure"],
        "A gloo operation of this process timed out and gloo closed its pairs; names nobody.",
    ),
    sig(
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
    sig(
        "horovod_request_mismatch",
        # horovod/common/controller.cc Controller::ConstructResponse (horovod 2626dc87 read; the same texts in
        # common/operations.cc from v0.13, tensorflow/mpi_ops.cc in v0.9): the coordinator compares every rank's
        # request for one tensor and fails that collective on every rank with "Mismatched data types: One rank had
        # type T, but another rank had type U.", "Mismatched operations: One rank did an ALLREDUCE, but another rank
        # did an ALLGATHER." ("Mismatched MPI operations: ..." before v0.19), "Mismatched ALLREDUCE tensor shapes:
        # One rank sent a tensor of shape [..]" (or "of rank N", "with dimension D equal to N"), "Mismatched
        # BROADCAST root ranks: One rank specified root rank ...", "... CPU/GPU device selection: One rank specified
        # device ...", "Mismatched prescale and/or postscale factors: One rank sent factors ...", "Mismatched
        # reduction operation: One rank sent reduction op ...". Raised as HorovodInternalError (torch, mxnet) or
        # FailedPreconditionError (TensorFlow). "One rank ... another rank": no rank is named.
        r"Mismatched (?:(?:MPI )?operations: One rank did an? |data types: One rank had type "
        r"|[A-Z_]+ (?:tensor shapes: One rank sent a tensor |root ranks: One rank specified root rank "
        r"|CPU/GPU device selection: One rank specified device )"
        r"|prescale and/or postscale factors: One rank sent factors |reduction operation: One rank sent reduction op )",
        K.COLLECTIVE_MISMATCH,
        C.TYPE_MISMATCH,
        S.CRITICAL,
        Blame.NONE,
        ["one rank"],
        "Horovod's coordinator: the ranks submitted one tensor's collective with different shapes, types, "
        "operations or roots; either side may be the one that diverged.",
    ),
    sig(
        "horovod_shut_down",
        # horovod/common/common.h SHUT_DOWN_ERROR (v0.16+; v0.13-0.15 "This has been caused by an exception on one
        # of the ranks ..."): "Horovod has been shut down. This was caused by an exception on one of the ranks or an
        # attempt to allreduce, allgather or broadcast a tensor after one of the ranks finished execution. If the
        # shutdown was caused by an exception, you should see the exception in the log before the first shutdown
        # message." Every collective submitted after the shutdown fails with it, on every rank: the failure is the
        # one printed before it (a mismatch, a stall, a crash), or a rank that left the loop early.
        r"Horovod has been shut down\. This (?:was|has been) caused by",
        K.CRASH,
        None,
        S.WARNING,
        Blame.NONE,
        ["horovod has been shut down"],
        "Horovod's background loop stopped; every later collective fails with this. A follow-on of the error "
        "before it (or of a rank that finished early).",
        generic=True,
    ),
    sig(
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
    sig(
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
    sig(
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
    sig(
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
    sig(
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
    sig(
        "watchdog_check_timeout_frame",
        # torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp: WorkNCCL::checkTimeout() throws the watchdog's
        # DistBackendError "Watchdog caught collective operation timeout" when a collective outlives its timeout; a
        # c10::Error backtrace through "c10d::ProcessGroupNCCL::WorkNCCL::checkTimeout" is that exception with its
        # header line cut off the excerpt.
        r"c10d::ProcessGroupNCCL::WorkNCCL::checkTimeout\(",
        K.HUNG_COLLECTIVE,
        C.COLLECTIVE_TIMEOUT,
        S.WARNING,
        Blame.NONE,
        ["workncclcheck", "::checktimeout("],
        "A backtrace through the NCCL watchdog's timeout check: a collective timed out (its message cut off).",
        generic=True,
    ),
)


# NCCL's device-side collective check
DEVICE_CHECK: tuple[Signature, ...] = (
    sig(
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
        post=named_self_post,
    ),
    sig(
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
    sig(
        "nvrx_rank_monitor_timeout",
        # NVIDIA/nvidia-resiliency-ext (d8686d9) src/nvidia_resiliency_ext/fault_tolerance/rank_monitor_server.py:
        # RankMonitorLogger's format "[%(asctime)s] [%(levelname)s] [RankMonServer{pid}@{hostname}:{rank}] %(message)s";
        # _is_hb_timeout_elapsed warns "[Cycle N] Did not get initial heartbeat. Waited T seconds." (or "subsequent"),
        # _is_section_timeout_elapsed "[Cycle N] Section 'S' has been open for E seconds. Timeout is T seconds." and
        # "Was out of section for E seconds. Timeout is T seconds."; then _handle_timeout terminates that rank (the
        # "[Cycle N] " tag is absent in releases before the launcher counted cycles). The monitored rank made no
        # progress past its timeout: in a collective hang every rank's monitor says so, so these are the ranks that
        # noticed, as torch's watchdog lines are, not the one at fault.
        r"(?:\[RankMonServer\d+@(?P<self_node>[^\s:\]]+):(?P<self_rank>\d+)\]\s+)?(?:\[Cycle \d+\]\s+)?"
        r"(?:Did not get (?:initial|subsequent) heartbeat\. Waited (?P<waited_s>[\d.]+) seconds"
        r"|Section '(?P<section>[^'\n]{1,40})' has been open for (?P<open_s>[\d.]+) seconds\. Timeout is [\d.]+ seconds"
        r"|Was out of section for (?P<out_s>[\d.]+) seconds\. Timeout is [\d.]+ seconds)",
        K.HUNG_COLLECTIVE,
        C.COLLECTIVE_TIMEOUT,
        S.CRITICAL,
        Blame.NONE,
        ["did not get initial heartbeat", "did not get subsequent heartbeat", "has been open for", "out of section"],
        "NVRx's rank monitor got no heartbeat or progress from its rank past the timeout and stops it: who noticed.",
        post=named_self_post,
    ),
    sig(
        "hccl_notify_wait_timeout",
        # Huawei CANN's error code EI0002 (HCCL "Communication_Error_Timeout", CANN error-code reference):
        # "The wait execution of the Notify register times out. Reason: The Notify register has not received the
        # Notify record from remote rank: [%s]. ..." An HCCL collective on an Ascend NPU waited past
        # HCCL_EXEC_TIMEOUT for a peer: NCCL's watchdog timeout on Ascend. The remote rank named is a group rank
        # seen from the waiting side (it may itself wait on another): who noticed, not who is at fault.
        r"The wait execution of the Notify register times out\.?(?: Reason: .{0,120}?remote rank:? \[(?P<remote_rank>\w+)\])?",
        K.HUNG_COLLECTIVE,
        C.COLLECTIVE_TIMEOUT,
        S.CRITICAL,
        Blame.NONE,
        ["notify register times out"],
        "An HCCL collective on Ascend timed out waiting for a peer (CANN EI0002): the ranks that noticed.",
    ),
    # The rest of HCCL's own error codes, from the table HCCL registers its messages with (hicann/hcomm, the open
    # CANN HCCL communication library of 2025, hcomm_g_msg passed to REG_FORMAT_ERROR_MSG; the same texts as the
    # CANN error-code reference): printed "EI0006: [PID: N] <time> <message>" by the error manager, or
    # "<errTitle>(EI0006): <message>" by newer torch_npu/CANN. Matched on the message, which both forms keep.
    sig(
        "hccl_get_socket_timeout",
        # EI0006 Communication_Error_Get_Socket: "Getting socket times out. Reason: %s" (e.g. "Remote Rank did not
        # send the data in time. Please check the reason for the rank being stuck"): a link of the collective was
        # not set up within HCCL_CONNECT_TIMEOUT because the other end never came (stuck, late or dead) or the
        # link is cut. HCCL's connect-time collective timeout; names no one.
        r"Getting socket times out\.",
        K.HUNG_COLLECTIVE,
        C.COLLECTIVE_TIMEOUT,
        S.CRITICAL,
        Blame.NONE,
        ["getting socket times out"],
        "HCCL on Ascend could not set up a link of a collective in time (CANN EI0006): a peer never came.",
    ),
    sig(
        "hccl_args_inconsistent",
        # EI0005 Inconsistent_Collective_Communication_Arguments_Between_Ranks: "The arguments for collective
        # communication are inconsistent between ranks: tag [%s], parameter [%s], local [%s], remote [%s]"
        r"The arguments for collective communication are inconsistent between ranks"
        r"(?:: tag \[(?P<hccl_tag>[^\]\n]{0,200})\], parameter \[(?P<hccl_param>[^\]\n]{0,80})\])?",
        K.COLLECTIVE_MISMATCH,
        None,
        S.CRITICAL,
        Blame.NONE,
        ["arguments for collective communication are inconsistent"],
        "HCCL found the ranks calling a collective with different arguments (CANN EI0005); either side may differ.",
    ),
    sig(
        "hccl_error_cqe",
        # EI0013 Execution_Error_ROCE_CQE: "An error CQE occurred during operator execution. Local information:
        # server %s, device ID %s, device IP %s. Peer information: server %s, device ID %s, device IP %s." The
        # RoCE link between the two failed or the peer's process exited first (the table's causes): NCCL's IB
        # completion error on Ascend, without the status that would say which.
        r"An error CQE occurred during operator execution",
        K.NETWORK_ERROR,
        C.IB,
        S.CRITICAL,
        Blame.NONE,
        ["error cqe occurred"],
        "HCCL's RoCE transfer completed with an error (CANN EI0013): the link or the peer's process.",
    ),
)
