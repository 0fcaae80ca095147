"""Process exits: torchelastic, signals, MPI, the launchers (torchrun, DeepSpeed, srun, kubectl) and schedulers."""

from __future__ import annotations

import re
import signal as _signal

from trainctl.collectors.log_signatures.cuda import cuda_post, dataloader_post
from trainctl.collectors.log_signatures.rule import (
    PCI,
    Blame,
    C,
    Event,
    K,
    S,
    Signature,
    named_self_post,
    sig,
)


def exit_post(ev: Event) -> None:
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


def _glibc_abort_post(ev: Event) -> None:
    ev.fields["signal"] = "SIGABRT"  # glibc's abort() follows each of these messages


def _nccl_not_built_post(ev: Event) -> None:
    if ev.fields.pop("nccl_warning", None):
        ev.severity = S.WARNING


def _pals_post(ev: Event) -> None:
    named_self_post(ev)
    _death_signal_post(ev)
    if ev.fields.get("signal") in ("SIGKILL", "SIGTERM"):  # what the launcher sends the rest once one rank died
        ev.severity = S.WARNING


def _death_signal_post(ev: Event) -> None:
    no = ev.fields.get("signal_no")
    if no is not None and not ev.fields.get("signal"):
        try:
            ev.fields["signal"] = _signal.Signals(int(no)).name
        except ValueError:
            pass
    _user_interrupt_post(ev)


def _job_signal_post(ev: Event) -> None:
    """An end on a signal is a signal's (the name read off its number); a non-zero status an exit code's."""
    if ev.fields.get("signal_no") is not None:
        ev.category = C.SIGNAL
    _death_signal_post(ev)


def _user_interrupt_post(ev: Event) -> None:
    """SIGINT is the terminal's Ctrl-C: a person stopped the run, not a failure. With no failure line before
    it, what it says is that someone judged the run stuck: a low hang, generic (any failure line outranks it)."""
    if ev.fields.get("signal") == "SIGINT":
        ev.kind, ev.category, ev.severity, ev.generic = K.HUNG_COLLECTIVE, None, S.WARNING, True
        ev.fields["interrupted_by_user"] = True


def _echoed_interrupt_post(ev: Event) -> None:
    """A line that starts with the terminal's echo of Ctrl-C ("^C") follows the user's SIGINT (a Ctrl-C
    traceback that ends in KeyboardInterrupt is read apart, as a process found waiting: log_progress)."""
    if ev.fields.get("echoed_interrupt"):
        ev.fields["signal"] = "SIGINT"
        _user_interrupt_post(ev)


def _xla_barrier_post(ev: Event) -> None:
    if str(ev.fields.get("barrier_id", "")).startswith("PjRT_Client_Connect"):
        ev.kind, ev.category = K.RENDEZVOUS_ERROR, None


def _nccl_tests_post(ev: Event) -> None:
    text = str(ev.fields.get("nccl_text", ""))
    if ev.fields.get("tests_lib") == "CUDA" or text.startswith("unhandled cuda error"):
        ev.kind, ev.category = K.CRASH, C.CUDA_ERROR
        if ev.fields.get("tests_lib") == "CUDA":
            ev.blame = Blame.SELF


def _launcher_exit_post(ev: Event) -> None:
    exit_post(ev)
    if ev.signature == "launcher_child_exit" and "non-zero exit status" in ev.message:
        ev.severity, ev.generic = S.WARNING, True  # CalledProcessError re-raises the child's failure: a consequence


def _slurm_cancel_post(ev: Event) -> None:
    if ev.fields.get("cancel_reason") == "NODE FAILURE":  # a node of the job died; slurmctld's log names it
        ev.kind, ev.category = K.FAULTY_HOST, None


def _sacct_state_post(ev: Event) -> None:
    state = str(ev.fields.get("sacct_state", ""))
    if state.startswith("OUT_OF_ME"):
        ev.kind, ev.category, ev.severity = K.OOM, None, S.CRITICAL
    elif state in ("NODE_FAIL", "BOOT_FAIL"):  # as srun's "Node failure on"; `sacct -o NodeList` names the node
        ev.kind, ev.category = K.FAULTY_HOST, C.UNREACHABLE
    elif state in ("TIMEOUT", "DEADLINE", "PREEMPTED"):
        ev.category = C.SIGNAL  # the scheduler ended it
    else:
        ev.generic = True  # FAILED: the job's non-zero exit, whatever made it fail is said elsewhere


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


def _coordination_task_post(ev: Event) -> None:
    """The coordinator printed the line about another task: that task is the rank; the printer's host is not its."""
    ev.fields["reporter_host"] = ev.host
    ev.host, ev.host_basis = None, None
    named_self_post(ev)


# torchelastic / process exits
EXITS: tuple[Signature, ...] = (
    sig(
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
        post=exit_post,
    ),
    sig(
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
    sig(
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
    sig(
        "elastic_closing_signal",
        r"Sending process (?P<pid>\d+) closing signal (?P<signal>SIG\w+)",
        K.CRASH,
        C.SIGNAL,
        S.INFO,
        Blame.NONE,
        ["closing signal"],
        "The agent stopping a worker: a consequence of what stopped the agent (a failure or a death signal).",
        generic=True,
        post=_user_interrupt_post,
    ),
    sig(
        "signal_received",
        r"Signal (?P<signal_no>\d+) \((?P<signal>SIG\w+)\) received by PID (?P<pid>\d+)",
        K.CRASH,
        C.SIGNAL,
        S.CRITICAL,
        Blame.NONE,
        ["received by PID"],
        "A worker killed by a signal (SIGKILL: OOM killer or scheduler).",
    ),
    sig(
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
        post=exit_post,
    ),
    sig(
        "fatal_signal",
        # CPython's faulthandler ("Fatal Python error: Segmentation fault"), Abseil's failure signal handler
        # (absl/debugging/failure_signal_handler.cc WriteSignalMessage: "*** %s received at time=%ld on cpu %d ***"),
        # glog's (src/signalhandler.cc DumpSignalInfo: "*** SIGSEGV (@0x0) received by PID 1234 (TID 0x7f..) from
        # PID 0; stack trace: ***", the handler MXNet, Paddle and Caffe install; copies of it such as apache/doris's
        # be/src/common/signal_handler.h write the si_code's reason between the name and the address), and the shell's
        # report of a child killed by SIGBUS/SIGSEGV (bash's strsignal text, "(core dumped)").
        r"(?:Fatal Python error: (?P<fatal>Segmentation fault|Aborted|Bus error)|\*\*\* (?P<sig_name>SIG\w+) received at time"
        r"|\*\*\* (?P<sig_name__2>SIG\w+) (?:[\w ]{1,60} )?\(@0x[0-9a-f]+\) received by PID"
        r"|^(?:(?:[\w/.-]+: )?line \d+: +\d+ )?(?P<fatal__2>Bus error|Segmentation fault) +\(core dumped\))",
        K.CRASH,
        C.SIGNAL,
        S.CRITICAL,
        Blame.SELF,
        ["Fatal Python error", "received at time", "received by PID", "(core dumped)"],
        "The process that printed it crashed on a signal.",
    ),
    sig(
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
        post=named_self_post,
    ),
    sig(
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
    sig(
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
        post=_nccl_tests_post,
    ),
    sig(
        "nvml_init_unknown",
        # nvidia-smi / NVML nvmlInit: "Failed to initialize NVML: Unknown Error" (NVML_ERROR_UNKNOWN): inside a
        # container whose device cgroup was rewritten (systemd daemon-reload, NVIDIA/nvidia-container-toolkit#48)
        # the process can no longer open /dev/nvidia*, while the host still sees every GPU: the container lost its
        # GPUs, a runtime fault more often than a hardware one. NVML_ERROR_OPERATING_SYSTEM (nvml.h: "The GPU control
        # device has been blocked by the operating system/cgroups", nvmlErrorString "GPU access blocked by the operating
        # system") says the same outright.
        r"Failed to initialize NVML: (?:Unknown Error|GPU access blocked by the operating system)",
        K.CRASH,
        C.CUDA_ERROR,
        S.CRITICAL,
        Blame.NONE,
        ["Failed to initialize NVML: Unknown Error", "Failed to initialize NVML: GPU access blocked"],
        "NVML could not start in this process (a container that lost its GPU devices, or a driver fault).",
    ),
    sig(
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
    sig(
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
    sig(
        "kubeflow_replica_exit",
        # kubeflow/training-operator pkg/controller.v1/common/pod.go ReconcilePods: logger.Infof("Pod: %v.%v exited
        # with code %v", namespace, name, exitCode) (also its Normal event ExitedWithCode), and the job's Warning
        # event "%s %s is restarting because %d %s replica(s) failed." (PyTorchJob, TFJob, XGBoostJob, ...; older
        # per-kind controllers the same words) or, with no restart left, "... is failed because ...". Exit code 0 is
        # a replica that succeeded. 137 = 128 + 9: SIGKILLed (the container's OOM kill, an eviction).
        r"Pod: (?P<pod>[\w.-]{1,253}) exited with code (?P<exit_code>[1-9]\d*)\b"
        r"|(?P<job>\w*Job) \S+ is (?:restarting|failed) because (?P<failed_replicas>\d+) (?P<replica_type>\w+)"
        r" replica\(s\) failed",
        K.CRASH,
        C.EXIT_CODE,
        S.CRITICAL,
        Blame.NONE,
        ["exited with code", "replica(s) failed"],
        "A Kubeflow training job's replica (pod) exited non-zero; the operator restarts the job or fails it.",
        post=_shell_status_post,
    ),
    sig(
        "pals_rank_signal",
        # HPE Cray PALS mpiexec (Polaris, Aurora, Sunspot; closed source: the format of dev row e23c-021 and of
        # public ALCF threads): "[host: ]rank N died from signal S[ and dumped core]" for each rank a signal
        # killed. The first is the one that crashed; the launcher then signals the rest (9, 15).
        r"\brank (?P<self_rank>\d+) died from signal (?P<signal_no>\d+)(?P<core> and dumped core)?",
        K.CRASH,
        C.SIGNAL,
        S.CRITICAL,
        Blame.SELF,
        ["died from signal"],
        "mpiexec (PALS) reports a rank killed by a signal (11 SIGSEGV, 7 SIGBUS, 9 SIGKILL ...).",
        post=_pals_post,
    ),
    sig(
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
    sig(
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
    sig(
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
    sig(
        "kubectl_describe_reason",
        # kubectl describe pod (k8s.io/kubectl/pkg/describe/describe.go describeContainerState): a container's
        # "State: Waiting" / "Last State: Terminated" block prints "      Reason:       %s" with the kubelet's
        # reason: CrashLoopBackOff (restarts delayed: it keeps failing), Error, OOMKilled (its memory limit),
        # ContainerCannotRun; "Exit Code:" follows a terminated one. (OOMKilled there is k8s_oom_killed's.)
        # UnexpectedAdmissionError: the kubelet admitted the pod and then could not allocate its devices
        # (pkg/kubelet/cm/devicemanager: "requested number of devices unavailable for %s. Requested: %d, Available:
        # %d, which is unexpected"): the node's GPU accounting, not the container.
        r"^\s*Reason:\s+(?P<pod_status>CrashLoopBackOff|Error|ContainerCannotRun|UnexpectedAdmissionError)\s*$",
        K.CRASH,
        C.EXIT_CODE,
        S.WARNING,
        Blame.NONE,
        ["reason:"],
        "kubectl describe shows a container that keeps failing; its own logs say why.",
    ),
    sig(
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
    sig(
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
    sig(
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
    sig(
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
    sig(
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
    sig(
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
    sig(
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
    sig(
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
        post=_xla_barrier_post,
    ),
    sig(
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
    sig(
        "xla_coordination_task_error",
        # XLA/TSL coordination_service.cc SetTaskError: LOG(ERROR) << task_name << " has been set to ERROR in
        # coordination service: " << error; printed by the coordinator (task 0) about the task that failed: a
        # heartbeat timeout ("the remote task has failed, got preempted, or crashed unexpectedly") or the error
        # the task reported. The task index is the JAX process index: that process is the one that failed.
        r"/job:[\w-]+/replica:\d+/task:(?P<self_rank>\d+) has been set to ERROR in coordination service:?"
        r"(?: (?P<status>[A-Z_]+):)?",
        K.CRASH,
        None,
        S.CRITICAL,
        Blame.SELF,
        ["set to error in coordination service"],
        "The JAX/XLA coordination service marked one task (process) as failed: it names that process.",
        post=_coordination_task_post,
    ),
    sig(
        "elasticdl_pod_failed",
        # ElasticDL's master (elasticdl/python/master/k8s_worker_manager.py _event_cb): logger.info("Got event
        # %s, phase %s for pod: %s", evt_type, phase, pod_name); phase Failed is Kubernetes' pod phase for a pod
        # whose containers terminated in failure: that worker pod failed.
        r"Got event \w+, phase Failed for pod: (?P<self_node>[\w.-]{1,253})",
        K.CRASH,
        C.EXIT_CODE,
        S.WARNING,
        Blame.SELF,
        ["phase failed for pod"],
        "The ElasticDL master saw a worker pod reach phase Failed: that pod's container failed.",
        post=named_self_post,
    ),
    sig(
        "elastic_child_no_error_file",
        # torch/distributed/elastic/multiprocessing/errors/__init__.py (1.9-1.10) _no_error_file_warning_msg:
        # "CHILD PROCESS FAILED WITH NO ERROR_FILE", "Child process {pid} (local_rank {rank}) FAILED (exitcode {n})":
        # a worker exited with that code without @record; its own lines say why. local_rank is not a global rank.
        r"Child process (?P<pid>\d+) \(local_rank (?P<local_rank>\d+)\) FAILED \(exitcode (?P<exit_code>-?\d+)\)",
        K.CRASH,
        C.EXIT_CODE,
        S.CRITICAL,
        Blame.NONE,
        ["(local_rank"],
        "torchelastic (1.9): a worker exited with a failure and wrote no error file.",
        post=exit_post,
    ),
)


# launchers: an exit seen by the process that started the workers
LAUNCHERS: tuple[Signature, ...] = (
    sig(
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
    sig(
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
        # "^C[...] [launch.py:315:sigkill_handler] Killing subprocess": the terminal's echo of Ctrl-C before it
        # (log_records.clean_lines peels it: field echoed_interrupt) says the launcher is handling the user's SIGINT:
        # stopped by hand.
        post=_echoed_interrupt_post,
    ),
    sig(
        "slurmctld_job_complete_failed",
        # Slurm src/slurmctld/job_mgr.c _job_complete: info("%s: %pJ WTERMSIG %d", ...) for a batch job killed by a
        # signal, info("%s: %pJ WEXITSTATUS %d", ...) for its exit status ("_job_complete: JobId=127441 WTERMSIG 9"):
        # the controller's view of how the job ended (9: SIGKILL, a memory cgroup's or a site tool's kill, or the
        # time limit's after SIGTERM). Exit status 0 is success.
        r"\b_job_complete: JobId=(?P<slurm_job>\d+)(?:_\d+)? (?:WTERMSIG (?P<signal_no>\d+)|WEXITSTATUS (?P<exit_code>[1-9]\d*))",
        K.CRASH,
        C.EXIT_CODE,
        S.CRITICAL,
        Blame.NONE,
        ["_job_complete:"],
        "slurmctld: a job ended on a signal or a non-zero exit status.",
        post=_job_signal_post,
    ),
    sig(
        "shell_command_not_found",
        # The shell could not find the program it was told to run (exit status 127): dash src/exec.c
        # "%s: %d: %s: not found" ("/bin/sh: 1: torchrun: not found"), bash execute_cmd.c "%s: command not found"
        # ("bash: deepspeed: command not found", a script's "train.sh: line 3: torchrun: command not found"), zsh's
        # "zsh: command not found: %s". The launcher (or the job's own command) never started: a PATH or an
        # environment (a venv not activated, sudo's secure_path), not a machine.
        r"^(?:/bin/)?(?:sh|dash|bash|[\w./-]+\.sh): (?:\d+: |line \d+: )?(?P<command>[\w./+-]{1,200}): (?:command )?not found\s*$"
        r"|^(?:bash|zsh): (?:command not found: (?P<command__2>[\w./+-]{1,200})|(?P<command__3>[\w./+-]{1,200}): command not "
        r"found)\s*$"
        # coreutils src/env.c: error (EXIT_ENOENT, errno, "%s", quote (argv[optind])), a script's "#!/usr/bin/env python"
        r"|^(?:/usr)?/bin/env: ['\u2018]?(?P<command__4>[\w./+-]{1,200})['\u2019]?: No such file or directory\s*$",
        K.CRASH,
        C.EXIT_CODE,
        S.CRITICAL,
        Blame.NONE,
        ["not found", "no such file or directory"],
        "The shell could not find the command it was to run (exit 127): the job never started.",
        # generic: a side tool a training script shells out to (gpustat, nvidia-smi in a container) may be the one
        # missing while the job runs on; where another failure is there, that one speaks
        generic=True,
    ),
    sig(
        "shell_job_killed",
        # bash jobs.c: a non-interactive shell reports a child killed by a signal with strsignal()'s text, after
        # "<script>: line N: " for a script: "line 6:  3305 Killed  cmd" (SIGKILL), or the bare "Killed" of an
        # interactive one. SIGKILL with no other error is most often the kernel's OOM killer (or a cgroup's limit:
        # Docker, Slurm, Kubernetes); dmesg on the host says for sure. A program that redraws its progress line
        # with "\r" leaves the cursor at column 0, so on the terminal the shell's "Killed" overwrites that line's
        # first letters and a copy of the screen reads "Killed" glued to the rest ("Killedg in train batch: ...").
        r"\bline \d+:\s+\d+ Killed\b|^Killed\s*$|^Killed(?=[a-z0-9])",
        K.OOM,
        None,
        S.WARNING,
        Blame.NONE,
        ["killed"],
        "A shell reports its child SIGKILLed: most often the kernel's OOM killer or a memory cgroup (see dmesg).",
    ),
    sig(
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
        post=_launcher_exit_post,
    ),
    sig(
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
    sig(
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
    sig(
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
    sig(
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
    sig(
        "deepspeed_zero_rank_disagreement",
        # deepspeed/runtime/zero/utils.py assert_lst_len_same_as_other_ranks / assert_ints_same_as_other_ranks
        # (master, 1a11c18): RuntimeError(f"disagreement between rank0 and rank{r}: rank0: {a}, rank{r}: {b}");
        # before, f"Detected a disagreement on list length between rank0 and rank{r}: \n rank0: {a} \n rank{r}:
        # {b}" (the line quoted in LlamaFactory#10224's traceback). ZeRO-3 broadcasts rank 0's count of the
        # submodules it traced and each rank compares its own: ranks took different code paths (MoE routing,
        # data-dependent branches), so their parameter gathers no longer match. Rank 0 is the reference, not
        # the fault: nobody is blamed.
        r"(?:Detected a )?disagreement (?:on list length )?between rank0 and rank(?P<rank_b>\d+)",
        K.COLLECTIVE_MISMATCH,
        C.SIZE_MISMATCH,
        S.CRITICAL,
        Blame.NONE,
        ["disagreement between rank0", "disagreement on list length"],
        "DeepSpeed ZeRO: ranks disagree with rank 0 on the submodules traced or ids gathered; their collectives "
        "would not match.",
    ),
    sig(
        "accelerate_shape_mismatch",
        # huggingface/accelerate src/accelerate/utils/operations.py verify_operation (its debug mode,
        # ACCELERATE_DEBUG_MODE / `accelerate launch --debug`): each process gathers the shapes it is about to pass to
        # gather/broadcast/reduce, and where they differ raises DistributedOperationException("Cannot apply desired
        # operation due to shape mismatches. All shapes across devices must be valid.\n\nOperation: `{op}`\nInput
        # shapes:\n  - Process 0: [...]\n  - Process 1: [...]"): the collective would not match (without the debug mode
        # it hangs). Each process prints the shapes; which one is wrong, the shapes alone do not say: nobody is blamed.
        r"Cannot apply desired operation due to shape mismatches\. All shapes across devices must be valid",
        K.COLLECTIVE_MISMATCH,
        C.SIZE_MISMATCH,
        S.CRITICAL,
        Blame.NONE,
        ["due to shape mismatches"],
        "Accelerate's debug mode: processes passed tensors of different shapes to one collective.",
    ),
    sig(
        "fairseq_all_gather_out_of_sync",
        # fairseq/distributed/utils.py all_gather_list (and distributed_utils.py before 0.10; ParlAI's copy):
        # on pickle.UnpicklingError, Exception("Unable to unpickle data from other workers. all_gather_list
        # requires all workers to enter the function together, so this error usually indicates that the workers
        # have fallen out of sync somehow. ..."). The receiving rank noticed; which one left the lock-step, the
        # line does not say.
        r"Unable to unpickle data from other workers\. all_gather_list requires all workers to enter",
        K.COLLECTIVE_MISMATCH,
        C.SIZE_MISMATCH,
        S.CRITICAL,
        Blame.NONE,
        ["Unable to unpickle data from other workers"],
        "fairseq/ParlAI: ranks entered all_gather_list out of step (one ran out of data or memory).",
    ),
    sig(
        "mmdet_loss_keys_differ",
        # open-mmlab mmdetection mmdet/models/detectors/base.py BaseDetector._parse_losses (mmdet 2.x; mmdet3d,
        # mmrotate and their forks copy it): the loss dict's length is all-reduced and asserted equal on every rank,
        # "loss log variables are different across GPUs!\n" + f"rank {rank} len(log_vars): {n} keys: ...". Ranks
        # computed different loss terms (one skipped a branch), so the all-reduces after it would not match: each rank
        # prints its own count; which one deviates, the counts say, not one line.
        r"loss log variables are different across GPUs",
        K.COLLECTIVE_MISMATCH,
        C.SIZE_MISMATCH,
        S.CRITICAL,
        Blame.NONE,
        ["loss log variables are different"],
        "mmdet: ranks computed different loss terms, so their reductions would not match.",
    ),
    sig(
        "dataloader_worker_exited",
        # torch/utils/data/dataloader.py _try_get_data: RuntimeError(f"DataLoader worker (pid(s) {pids_str}) exited
        # unexpectedly"): the reason (a signal, a bus error) is on the worker's own line.
        r"DataLoader worker \(pid\(s\) (?P<pids>[\d, ]{1,200})\) exited unexpectedly",
        K.CRASH,
        C.EXIT_CODE,
        S.CRITICAL,
        Blame.SELF,  # raised in the rank whose worker (its own child process) died
        ["exited unexpectedly"],
        "A DataLoader worker process died; its own line (killed by signal, bus error) says why.",
        generic=True,
    ),
    sig(
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
        post=dataloader_post,
    ),
    sig(
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
    sig(
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
        post=_slurm_cancel_post,
    ),
    sig(
        "sacct_job_state",
        # sacct's rows (slurm src/sacct/print.c; the default format "JobID JobName Partition Account AllocCPUS State
        # ExitCode"): the State is slurm_protocol_defs.c job_state_string's word, cut by print_fields.c to the
        # column's width with a '+' at its end (10 wide: "OUT_OF_ME+", "CANCELLED+" for "CANCELLED by UID"), and
        # the ExitCode "%d:%d" (the exit code, the signal). A job that ended in a failure state: OUT_OF_MEMORY (its
        # cgroup's limit), NODE_FAIL / BOOT_FAIL (a node of the job failed), FAILED (a non-zero exit), TIMEOUT /
        # DEADLINE (its time limit), PREEMPTED. The accounting says how it ended, not why: a warning but for the
        # out-of-memory, which is the cause.
        r"^\s*(?P<slurm_job>\d+(?:_\d+)?(?:\.\w+)?)\s+.{0,200}?(?<!\S)(?P<sacct_state>OUT_OF_ME(?:MORY|\+)|NODE_FAIL"
        r"|BOOT_FAIL|FAILED|TIMEOUT|DEADLINE|PREEMPTED)\s+(?P<exit_code>\d+):(?P<signal_no>\d+)(?!\S)",
        K.CRASH,
        C.EXIT_CODE,
        S.WARNING,
        Blame.NONE,
        ["OUT_OF_ME", "NODE_FAIL", "BOOT_FAIL", "FAILED", "TIMEOUT", "DEADLINE", "PREEMPTED"],
        "Slurm's accounting (sacct) shows the job ended in a failure state (out of memory, node failure, ...).",
        post=_sacct_state_post,
    ),
    sig(
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
    sig(
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
    sig(
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
        post=_srun_exit_post,
    ),
    sig(
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
    sig(
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
    sig(
        "cuda_unavailable",
        # torch/cuda/__init__.py _lazy_init: RuntimeError "No CUDA GPUs are available" (the runtime saw no
        # device: none visible to the process, CUDA_VISIBLE_DEVICES, or a GPU the driver lost), and
        # DeferredCudaCallError "CUDA call failed lazily at initialization with error: ...". The process
        # could not use CUDA; whether the host or the job's settings are at fault, the line does not say.
        # ProcessGroupNCCL's constructor: TORCH_CHECK(..., "ProcessGroupNCCL is only supported with GPUs, no GPUs
        # found!"): the same, seen by init_process_group(backend="nccl").
        r"(?P<cuda_error>No CUDA GPUs are available|CUDA call failed lazily at initialization"
        r"|ProcessGroupNCCL is only supported with GPUs, no GPUs found)",
        K.CRASH,
        C.CUDA_ERROR,
        S.CRITICAL,
        Blame.SELF,
        ["No CUDA GPUs are available", "failed lazily at initialization", "no GPUs found"],
        "The process found no usable CUDA device at start (visibility settings, or a GPU the host lost).",
    ),
    sig(
        "glibc_abort",
        # glibc's own aborts, each followed by SIGABRT ("Aborted (core dumped)"): malloc/malloc.c malloc_printerr's
        # heap-corruption messages ("free(): invalid pointer", "double free or corruption (!prev)", "corrupted size
        # vs. prev_size", "malloc(): unaligned tcache chunk detected", "munmap_chunk(): invalid pointer", ...; before
        # 2.26 inside "*** Error in `%s': %s: 0x%s ***"), and assert/assert.c __assert_fail_base's "%s%s%s:%u:
        # %s%sAssertion `%s' failed." (a backtick, then an apostrophe: a CUDA device assert has backticks both
        # sides). Memory corrupted or a C/C++ invariant broken in this process.
        r"\*\*\* Error in `?[^'\n]{1,200}': (?P<glibc_error>[^\n]{3,80}?)(?=: 0x|\s*\*\*\*|$)"
        r"|(?P<glibc_error__2>double free or corruption \([\w!]+\)|free\(\): (?:invalid (?:pointer|size|next size \(\w+\))"
        r"|double free detected in tcache \d|corrupted unsorted chunks)|corrupted size vs\. prev_size"
        r"|corrupted double-linked list|malloc\(\): (?:memory corruption|unaligned tcache chunk detected|corrupted top size"
        r"|unsorted double linked list corrupted|invalid size \(unsorted\))|munmap_chunk\(\): invalid pointer"
        r"|realloc\(\): invalid (?:pointer|next size|old size)|malloc_consolidate\(\): invalid chunk size)"
        r"|: Assertion `?(?P<assertion>[^`\n]{1,300})' failed\.",  # (clean_lines drops backticks as markdown)
        K.CRASH,
        C.SIGNAL,
        S.CRITICAL,
        Blame.SELF,
        [
            "*** error in ",
            "double free",
            "free():",
            "corrupted",
            "malloc():",
            "munmap_chunk",
            "realloc():",
            "malloc_consolidate",
            "' failed.",
        ],
        "glibc aborted this process: heap corruption (malloc's checks) or a failed C assert (SIGABRT).",
        post=_glibc_abort_post,
    ),
    sig(
        "ide_process_exit",
        # JetBrains IDEs' run console (intellij-community ProcessTerminatedListener: "Process finished with exit code
        # %d", and for a signal " (interrupted by signal %d: %s)"): what PyCharm prints under a run's output.
        r"^Process finished with exit code (?P<exit_code>[1-9]\d*)(?: \(interrupted by signal (?P<signal_no>\d+): "
        r"(?P<signal>SIG\w+)\))?",
        K.CRASH,
        C.EXIT_CODE,
        S.CRITICAL,
        Blame.SELF,
        ["Process finished with exit code"],
        "The run ended non-zero in an IDE's console (137 with SIGKILL: killed, often by the OOM killer).",
        post=_shell_status_post,
    ),
    sig(
        "nccl_not_built",
        # torch/distributed/distributed_c10d.py _new_process_group_helper: RuntimeError("Distributed package doesn't
        # have NCCL built in") for backend="nccl" on a build without it (a CPU, macOS or Windows wheel); and
        # torch/cuda/nccl.py is_available: warnings.warn("PyTorch is not compiled with NCCL support") (a warning:
        # a job may go on over gloo). This process's torch cannot run NCCL.
        r"Distributed package doesn't have NCCL built in|(?P<nccl_warning>PyTorch is not compiled with NCCL support)",
        K.CRASH,
        C.NCCL,
        S.CRITICAL,
        Blame.SELF,
        ["have NCCL built in", "not compiled with NCCL"],
        "This process's torch build has no NCCL (a CPU, macOS or Windows wheel): the nccl backend cannot start.",
        post=_nccl_not_built_post,
    ),
    sig(
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
        post=cuda_post,
    ),
    sig(
        "nvrm_init_adapter_failed",
        # NVIDIA open-gpu-kernel-modules src/nvidia/arch/nvalloc/unix/src/osinit.c RmInitAdapter:
        # NV_DEV_PRINTF(NV_DBG_ERRORS, nv, "RmInitAdapter failed! (0x%x:0x%x:%d)\n", ...), prefixed "NVRM: GPU <pci>: "
        # and kernel-open/nvidia/nv.c nv_start_device: "rm_init_adapter failed, device minor number %d" after it.
        # Older drivers print it without the "GPU <pci>: " prefix, and "rm_init_adapter failed for device bearing
        # minor number %d" (kernel/nvidia/nv.c before the open modules).
        rf"NVRM: (?:GPU {PCI}: )?(?:RmInitAdapter failed! \((?P<init_status>0x[0-9a-fA-F]+):(?P<rm_status>0x[0-9a-fA-F]+):\d+\)"
        r"|rm_init_adapter failed(?:, device| for device bearing) minor number (?P<minor>\d+))",
        K.FAULTY_HOST,
        C.GPU_LOST,
        S.CRITICAL,
        Blame.SELF,
        ["RmInitAdapter failed", "rm_init_adapter failed"],
        "The driver could not initialize this GPU: the host cannot use it until it is reset or repaired.",
    ),
)
