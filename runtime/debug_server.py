"""Each rank serves Flight Recorder and Python-stack dumps on a Unix socket, even while hung.

torch ships the server (`torch._C._distributed_c10d._WorkerServer`, the one behind
`torch.distributed.elastic.control_plane`); it answers from its own C++ thread, so a rank blocked
inside a gloo collective still answers (peers.md: ~5 ms). Gloo never dumps Flight Recorder by
itself, so this is how trainctl gets dumps out of a hung CPU run.

Handlers used: `fr_trace_json` (the CPU Flight Recorder - gloo - as JSON, no stacks), `fr_trace`
(its pickle with Python stacks; slower, needs the GIL), `dump_traceback` (all Python thread
stacks), `ping`. A CUDA build records NCCL's collectives in a second recorder, which its server
serves as `dump_nccl_trace_json` and `dump_nccl_trace_pickle` (torch 2.13 FlightRecorderCuda.cpp
registers both; torch/distributed/debug/_debug_handlers.py asks for `dump_nccl_trace_json`);
query parameters `includecollectives`, `onlyactive` (and `includestacktraces` for the pickle),
"true"/"false". The CPU wheel has neither.
"""

from __future__ import annotations

import logging
import os
import socket
from pathlib import Path
from typing import Any

from trainctl.rundir import worker_socket_path

__all__ = [
    "start",
    "request",
    "DebugServerError",
    "nccl_recorder_available",
    "CPU_FR_JSON",
    "CPU_FR_PICKLE",
    "NCCL_FR_JSON",
    "NCCL_FR_PICKLE",
    "STACKS",
]

CPU_FR_JSON = "fr_trace_json"  # torch's own handler
CPU_FR_PICKLE = "fr_trace"  # registered below (torch 2.13 has no CPU pickle handler)
NCCL_FR_JSON = "dump_nccl_trace_json"  # ProcessGroupNCCL's recorder (CUDA builds)
NCCL_FR_PICKLE = "dump_nccl_trace_pickle"
STACKS = "dump_traceback"

log = logging.getLogger(__name__)


class DebugServerError(OSError):
    """A rank's debug socket did not answer (dead rank, or no server started)."""


def start(run_dir: str | os.PathLike[str], rank: int) -> Any | None:
    """Start the rank's debug server at trainctl.rundir.worker_socket_path; returns the server.

    Returns None (and logs why) when this torch has no _WorkerServer: a missing debug endpoint
    must never stop training.
    """
    from trainctl.runtime import nccl_env

    nccl_env.point_debug_file(rank)  # before NCCL's first log line opens its debug file (see nccl_env)
    try:
        import torch._C._distributed_c10d as c10d

        server_cls = c10d._WorkerServer
    except (ImportError, AttributeError) as exc:
        log.warning("rank %d: torch has no _WorkerServer (%s); hang dumps will rely on py-spy", rank, exc)
        return None
    _register_fr_trace_pickle(c10d)
    if nccl_recorder_available() and _cuda_available():
        # The NCCL watchdog's dump folder (its writer creates none); only where NCCL can run, so
        # a CPU run dir holds no empty fr/ folder that reads as "a dump was taken".
        nccl_env.ensure_dump_dir()
    path = worker_socket_path(run_dir, rank)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.unlink(missing_ok=True)  # a stale socket from an earlier attempt would make bind fail
    return server_cls(str(path), -1)


def _fr_trace_pickle(req: Any, resp: Any) -> None:
    import torch._C._distributed_c10d as c10d

    resp.set_content(c10d._dump_fr_trace(), "application/octet-stream")
    resp.set_status(200)


def _register_fr_trace_pickle(c10d: Any) -> None:
    """torch 2.13's server has `fr_trace_json` but no pickle handler (it is NCCL-only upstream);
    register `fr_trace` (pickle with Python stacks, what torchfrtrace reads). Python handler:
    it needs the GIL, which a rank blocked in a gloo wait or a sleep does not hold."""
    try:
        if CPU_FR_PICKLE not in c10d._get_handler_names():
            c10d._register_handler(CPU_FR_PICKLE, _fr_trace_pickle)
    except (AttributeError, RuntimeError) as exc:
        log.warning("fr_trace pickle handler not registered: %s", exc)


def nccl_recorder_available() -> bool:
    """Is this a torch build with ProcessGroupNCCL (and so the NCCL recorder and its handlers)?

    The same Python that runs the ranks runs the hang dump on their host, so its build is theirs.
    This is the CUDA boundary tests fake on a CPU-only machine.
    """
    try:
        import torch.distributed as dist

        return bool(dist.is_available() and dist.is_nccl_available())
    except (ImportError, AttributeError, RuntimeError):
        return False


def _cuda_available() -> bool:
    try:
        import torch

        return bool(torch.cuda.is_available())
    except (ImportError, RuntimeError):
        return False


def request(sock_path: str | os.PathLike[str], handler: str, *, timeout_s: float = 10.0) -> bytes:
    """POST /handler/<handler> over the Unix socket (handlers' defaults: every entry, with stacks
    where the format has them); returns the response body."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(timeout_s)
    try:
        s.connect(str(sock_path))
        s.sendall(
            f"POST /handler/{handler} HTTP/1.1\r\nHost: localhost\r\nContent-Length: 0\r\n"
            "Connection: close\r\n\r\n".encode()
        )
        chunks = []
        while True:
            b = s.recv(1 << 16)
            if not b:
                break
            chunks.append(b)
    except OSError as exc:
        raise DebugServerError(f"{sock_path}: {handler} got no answer ({exc})") from exc
    finally:
        s.close()
    raw = b"".join(chunks)
    head, _, body = raw.partition(b"\r\n\r\n")
    status = head.split(b"\r\n", 1)[0]
    if b" 200 " not in status + b" ":
        raise DebugServerError(f"{sock_path}: {handler} answered {status.decode(errors='replace')!r}")
    return body


def socket_for(run_dir: str | os.PathLike[str], rank: int) -> Path:
    return worker_socket_path(run_dir, rank)
