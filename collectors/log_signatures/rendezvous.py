"""Rendezvous and the c10d store; torch c10d's and gloo's own checks; rendezvous seen only as a traceback."""

from __future__ import annotations

import re

from trainctl.collectors.log_signatures.rule import (
    ADDR,
    Blame,
    C,
    Event,
    K,
    S,
    Signature,
    named_self_post,
    sig,
)


def _connect_warning_post(ev: Event) -> None:
    errno_ = ev.fields.get("errno")
    if errno_ is not None:
        ev.fields["errno"] = int(errno_)


def _barrier_post(ev: Event) -> None:
    """monitored_barrier: the rank named is the one that never arrived (rank 0 printed the line, on its host)."""
    if ev.fields.get("self_rank") is None:  # several ranks named: no single culprit
        ev.blame = Blame.NONE
        return
    ev.fields["reporter_host"] = ev.host
    ev.host = None
    named_self_post(ev)


# rendezvous / c10d store
STORE: tuple[Signature, ...] = (
    sig(
        "c10d_store_socket_timeout",
        # torch/csrc/distributed/c10d/Utils.hpp SYSCHECK (the TCPStore client's sendBytes/recvBytes, tcputil):
        # C10_THROW_ERROR(DistNetworkError, "Socket Timeout") when a read or write on the store's socket hits its
        # SO_RCVTIMEO/SO_SNDTIMEO (EAGAIN): the store did not answer within the timeout (a get/wait for a key some
        # rank never set, a store server gone). Python shows it as RuntimeError (<2.2), DistNetworkError or, from
        # the store's own calls, DistStoreError. Read where the line is the exception's own (nothing after it).
        # The file store's and gloo's hash store's wait (torch/csrc/distributed/c10d/FileStore.cpp wait,
        # gloo/rendezvous/hash_store.cc wait: std::runtime_error("Wait timeout")) say the same of their keys.
        r"\b(?:torch\.distributed\.)?(?:DistStoreError|DistNetworkError|RuntimeError): (?:Socket|Wait) [Tt]imeout\s*$",
        K.RENDEZVOUS_ERROR,
        None,
        S.CRITICAL,
        Blame.NONE,
        ["socket timeout", "wait timeout"],
        "The c10d store's socket timed out: the store did not answer (a key never set, its server gone).",
    ),
    sig(
        "c10d_store_connection_closed",
        # The c10d store's connection went away under a client (torch 2.13 libtorch_cpu strings):
        # torch/csrc/distributed/c10d/Utils.hpp recvBytes / sendBytes (2.3+): C10D_THROW_ERROR(DistNetworkError,
        # "Failed to recv, got 0 bytes. Connection was likely closed. Did the remote server shutdown or crash?")
        # ("Failed to send, sent 0 bytes. ..."); before 2.3 the same calls threw DistNetworkError(strerror(errno))
        # ("Connection reset by peer", "Broken pipe", "Connection timed out"); TCPStore.cpp TCPStore::waitHelper_
        # TORCH_CHECK(response == STOP_WAITING, "Stop_waiting response is expected") when the store answers a wait
        # with anything else. The store's host (rank 0's process, or the first agent) died or closed the
        # connection: a consequence, so a warning that names nobody. (TCPStore.cpp's own warning of the same failure,
        # "[c10d] <op> failed on SocketImpl(...): Failed to recv, ...", is store_socket_failed's, which names the
        # socket and which torchrun's goodbye silences: collectors/logs.py _store_goodbyes.)
        r"^(?!.*failed on SocketImpl\().*?(?:Failed to (?:recv, got|send, sent) 0 bytes\. Connection was likely closed|Stop_waiting response is expected"
        r"|\bDistNetworkError: (?:Connection reset by peer|Broken pipe|Connection timed out|Connection refused)\s*$)",
        K.RENDEZVOUS_ERROR,
        None,
        S.WARNING,
        Blame.NONE,
        ["Connection was likely closed", "Stop_waiting response", "DistNetworkError"],
        "A c10d store client lost its connection to the store (the store's host died or closed it).",
    ),
    sig(
        "c10d_connect_timeout_legacy",
        # torch 1.x torch/lib/c10d/Utils.cpp tcputil::connect: throw std::runtime_error("connect() timed out.")
        # (1.8+: "connect() timed out. Original timeout was {} ms."): the TCPStore client never reached the
        # store's host:port (MASTER_ADDR/MASTER_PORT unreachable, or its server not up). The endpoint is not printed.
        r"\bconnect\(\) timed out\.(?: Original timeout was (?P<timeout_ms>\d+) ms\.)?",
        K.RENDEZVOUS_ERROR,
        None,
        S.CRITICAL,
        Blame.NONE,
        ["connect() timed out"],
        "torch 1.x TCPStore connect timeout: the store's endpoint was unreachable.",
    ),
    sig(
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
    sig(
        "coordination_service_join_failed",
        # The XLA/TSL coordination service (JAX's jax.distributed, TF's multi-worker): a task joins the cluster
        # with RegisterTask and waits for the rest with WaitForAllTasks (tsl/distributed_runtime/rpc/coordination/
        # grpc_coordination_client.cc: RPCState on "/tensorflow.CoordinationService/RegisterTask", ...), and a
        # failed call's status ends "RPC: /tensorflow.CoordinationService/RegisterTask" (after the absl code:
        # DEADLINE_EXCEEDED, UNAVAILABLE, ALREADY_EXISTS for a restarted task's new incarnation). Joining the
        # cluster failed: the rendezvous, whatever the code.
        r"RPC: /?(?:\w+\.)?CoordinationService/(?P<coordination_call>RegisterTask|WaitForAllTasks)\b",
        K.RENDEZVOUS_ERROR,
        None,
        S.CRITICAL,
        Blame.NONE,
        ["coordinationservice/registertask", "coordinationservice/waitforalltasks"],
        "A JAX/TF task could not join the coordination service (RegisterTask / WaitForAllTasks failed).",
    ),
    sig(
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
    sig(
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
    sig(
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
    sig(
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
    sig(
        "c10d_connect_any_failed",
        r"The client socket has failed to connect to any network address of \((?P<peer>[^,\s]+), (?P<peer_port>\d+)\)",
        K.RENDEZVOUS_ERROR,
        None,
        S.CRITICAL,
        Blame.PEER,
        ["any network address"],
        "Final c10d connect failure; blames the endpoint only when it is a plausible host (not 0.0.0.0/8, all-digit names).",
    ),
    sig(
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
    sig(
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
    sig(
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
    sig(
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
    sig(
        "rendezvous_timeout",
        # (not the tail of dynamic_rendezvous.py's keep-alive warning, "... due to an error of type
        # RendezvousTimeoutError.", cut onto a line of its own: elastic_keepalive_failed's)
        r"(?<!error of type )RendezvousTimeoutError",
        K.RENDEZVOUS_ERROR,
        None,
        S.CRITICAL,
        Blame.NONE,
        ["RendezvousTimeoutError"],
        "Elastic rendezvous did not gather enough nodes (plain exception or 1.9-1.12 error_handler JSON).",
    ),
    sig(
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
    sig(
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
    sig(
        "horovod_start_timeout",
        # horovod/runner/common/util/timeout.py Timeout.check_time_out_for raises TimeoutException('{message}
        # Timeout after {s} seconds.') with the message horovodrun gives it (runner/launch.py: "Timed out waiting for
        # {activity}. Please check connectivity between servers. You may need to increase the --start-timeout
        # parameter if you have too many servers."; elastic/driver.py: "... Please check that you have enough
        # resources to run at least N Horovod processes."), activity "tasks to start", "the hosts to acknowledge"...
        # A traceback cut before its last line still shows the raising frame (horovod/run/ before 0.20).
        r"Timed out waiting for (?P<activity>[^.\n]{1,80})\. Please check (?:connectivity between servers"
        r"|that you have enough resources)"
        r"|horovod/run(?:ner)?/common/util/timeout\.py\", line \d+, in check_time_out_for",
        K.RENDEZVOUS_ERROR,
        None,
        S.CRITICAL,
        Blame.NONE,
        ["Timed out waiting for", "check_time_out_for"],
        "horovodrun's start-up timed out: its task servers (one per host) did not all register in --start-timeout.",
    ),
    sig(
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
    sig(
        "rendezvous_state_error",
        # torch/distributed/elastic/rendezvous/api.py RendezvousError and its RendezvousStateError, raised by
        # dynamic_rendezvous.py ("The node '...' has failed to ... the state of the rendezvous"), the c10d and etcd
        # backends (c10d_rendezvous_backend.py, etcd_rendezvous_backend.py: a state that cannot be read, written
        # or decoded) and etcd_rendezvous.py: the elastic rendezvous itself failed. Not "error of type ..." (the
        # keep-alive's and shutdown's warnings: elastic_keepalive_failed, rendezvous_connection_error).
        r"(?<!error of type )\bRendezvous(?:State)?Error\b(?!.*has failed to shutdown the rendezvous)",
        K.RENDEZVOUS_ERROR,
        None,
        S.CRITICAL,
        Blame.NONE,
        ["RendezvousError", "RendezvousStateError"],
        "The elastic rendezvous failed: its state could not be read or written, or a node could not join.",
    ),
    sig(
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
    sig(
        "store_wait_clients_timeout",
        r"Timed out after (?P<timeout_s>\d+) seconds waiting for clients\. (?P<joined>\d+)/(?P<world_size>\d+) clients joined",
        K.RENDEZVOUS_ERROR,
        None,
        S.CRITICAL,
        Blame.NONE,
        ["waiting for clients"],
        "TCPStore server: not all ranks connected.",
    ),
    sig(
        "c10d_socket_wait_timeout",
        # torch/csrc/distributed/c10d/socket.cpp SocketImpl::waitForInput (2.2+): C10D_WARNING("waitForInput: socket
        # {} timed out after {}ms", ...) and, each time its poll() ends empty, C10D_WARNING("waitForInput: poll for
        # socket {} returned 0, likely a timeout", *this): a c10d store client waited that long for the store's
        # answer (a store that died or hung, or a peer that never set the key); the store's address is no culprit
        # (often localhost). The socket prints as `SocketImpl(fd=.., addr=.., remote=..)`, bare `addr=.., remote=..`
        # in some builds, or nothing.
        r"waitForInput: (?:poll for )?socket ?(?P<socket>SocketImpl\([^)]{0,200}\)|addr=\S{0,200}(?:, remote=\S{0,200})?)? ?"
        r"(?:timed out after (?P<timeout_ms>\d+)ms|returned 0, likely a timeout)",
        K.RENDEZVOUS_ERROR,
        None,
        S.WARNING,
        Blame.NONE,
        ["waitforinput: socket", "waitforinput: poll for socket"],
        "A c10d store client timed out waiting for the store's reply.",
    ),
    sig(
        "xla_mesh_config_failed",
        # pytorch/xla third_party/xla_client/mesh_service.cc MeshClient::GetConfig (torch_xla 1.x, XRT):
        # XLA_ERROR() << "Failed to retrieve mesh configuration: " << status: a TPU worker could not get the
        # replication mesh from the mesh master (xla_dist's / xmp.spawn's rendezvous), so it never joined. The
        # gRPC status (`Connection reset by peer (14)`, `ordinal (13)`) says why; the worker that printed it is
        # only the one left out. (Istio prints `failed to retrieve mesh configuration.`, lower case, with a period.)
        r"Failed to retrieve mesh configuration: (?P<status>[^\n]{0,200})",
        K.RENDEZVOUS_ERROR,
        None,
        S.CRITICAL,
        Blame.NONE,
        ["Failed to retrieve mesh configuration"],
        "torch_xla: a TPU worker could not fetch the mesh configuration from the mesh master (rendezvous).",
    ),
    sig(
        "elastic_keepalive_failed",
        # torch/distributed/elastic/rendezvous/dynamic_rendezvous.py DynamicRendezvousHandler._keep_alive (v2.13):
        # logger.warning("The node '%s' has failed to send a keep-alive heartbeat to the rendezvous '%s' due to an
        # error of type %s."): the agent could not reach the rendezvous store this once; it tries again. Often the
        # echo of a failure that took the store or the node down first.
        r"has failed to send a keep-alive heartbeat to the rendezvous '(?P<run_id>[^']{0,200})'",
        K.RENDEZVOUS_ERROR,
        None,
        S.WARNING,
        Blame.NONE,
        ["failed to send a keep-alive heartbeat"],
        "torchelastic's agent missed a rendezvous keep-alive (a warning; it retries).",
        generic=True,
    ),
    sig(
        "ssh_connect_failed",
        # OpenSSH sshconnect.c ssh_connect_direct: error("ssh: connect to host %s port %s: %s", host, port,
        # strerror(errno)): the launcher (mpirun's plm_rsh, pdsh, DeepSpeed's runner) could not reach a node's sshd
        # (a wrong port, a firewall, a container without sshd). The node is named, not blamed: the path or config.
        rf"ssh: connect to host {ADDR} port (?P<peer_port>\d+): (?P<reason>Connection refused|Connection timed out"
        r"|No route to host|Network is unreachable|Connection reset by peer)",
        K.RENDEZVOUS_ERROR,
        None,
        S.CRITICAL,
        Blame.NONE,
        ["ssh: connect to host"],
        "The multi-node launcher's ssh could not connect to a node (refused, timed out, no route).",
    ),
    sig(
        "deepspeed_host_unreachable",
        # deepspeed/launcher/runner.py main() (0.5 to 0.16): before launching on a hostfile it runs
        # "ssh -o PasswordAuthentication=no HOST hostname" on the first host and, when that fails, raises
        # RuntimeError(f"Using hostfile at {args.hostfile} but host={first_host} was not reachable via ssh. ...").
        # The line names the one host the launcher could not reach: that host is where to look (down, no sshd,
        # no key), named with the endpoint's confidence (below the runbooks' gate: it informs, never evicts).
        r"Using hostfile at \S+ but host=(?P<peer>[^\s]+?) was not reachable via ssh",
        K.RENDEZVOUS_ERROR,
        None,
        S.CRITICAL,
        Blame.PEER,
        ["was not reachable via ssh"],
        "DeepSpeed's launcher could not ssh to the first host of its hostfile: the job never started.",
    ),
    sig(
        "paddle_endpoints_not_ready",
        # PaddlePaddle wait_server_ready (python/paddle/distributed/utils/launch_utils.py, fluid/transpiler/
        # collective.py, 1.x to 2.6): every 3 s while a peer's port refuses a connection it writes "server not
        # ready, wait 3 sec to retry..." then "not ready endpoints:" + str(list). A retry (the peer may still be
        # starting); where the log ends in it, the named endpoints never came up.
        r"not ready endpoints:\s*\[(?P<endpoints>[^\]]{0,2000})\]",
        K.RENDEZVOUS_ERROR,
        None,
        S.WARNING,
        Blame.NONE,
        ["not ready endpoints"],
        "PaddlePaddle's launcher is still waiting for peers' endpoints to accept connections (a retry).",
        generic=True,
    ),
    sig(
        "trl_vllm_server_wait",
        # huggingface/trl trl/extras/vllm_client.py VLLMClient.check_server: logger.info(f"Server is not up yet.
        # Retrying in {retry_interval} seconds...") until its total timeout: the trainer waits for the generation
        # server (GRPO's vllm-serve) that has not come up.
        r"Server is not up yet\. Retrying in (?P<retry_s>[\d.]+) seconds",
        K.HUNG_COLLECTIVE,
        None,
        S.WARNING,
        Blame.NONE,
        ["server is not up yet"],
        "TRL's trainer is still waiting for its vLLM generation server to come up.",
        generic=True,
    ),
)


# torch c10d and gloo, from the sources
C10D_GLOO: tuple[Signature, ...] = (
    sig(
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
        post=_barrier_post,
    ),
    sig(
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
    sig(
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
    sig(
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
    sig(
        "gloo_uv_assert",
        # gloo's libuv transport (gloo/transport/uv/libuv.h, uv/common.h UV_ASSERT: fprintf(stderr, "[%s:%d] %s: %s\n",
        # __FILE__, __LINE__, prefix, uv_strerror(rv)) then abort()): "[.../gloo/transport/uv/libuv.h:596] uv_accept:
        # invalid argument". The transport torch >= 2.4 uses for TCPStore's server and gloo on macOS/Windows; the
        # process aborts right after (the SIGABRT that follows is this line's consequence).
        r"\[[^\]\n]{0,300}?/gloo/transport/uv/[\w.]{1,40}:\d+\] (?P<uv_call>uv_\w{1,40}): (?P<uv_error>[^\n]{1,120})",
        K.NETWORK_ERROR,
        C.GLOO,
        S.CRITICAL,
        Blame.NONE,
        ["gloo/transport/uv/"],
        "A libuv call in gloo's transport failed and gloo aborted the process.",
    ),
    sig(
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
    sig(
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
)


# rendezvous failures seen only as a traceback
TRACEBACKS: tuple[Signature, ...] = (
    sig(
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
