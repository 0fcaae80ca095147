"""Each rank serves Flight Recorder and Python-stack dumps on a Unix socket, even while hung.

torch ships the server (`torch._C._distributed_c10d._WorkerServer`, the one behind
`torch.distributed.elastic.control_plane`); it answers from its own C++ thread, so a rank blocked
inside a gloo collective still answers (peers.md: ~5 ms). Gloo never dumps Flight Recorder by
itself, so this is how trainctl gets dumps out of a hung CPU run.

Handlers used: `fr_trace_json` (Flight Recorder, JSON, no stacks), `fr_trace` (pickle with Python
stacks; slower, needs the GIL), `dump_traceback` (all Python thread stacks), `ping`.
"""

from __future__ import annotations

import logging
import os
import socket
from pathlib import Path
from typing import Any

from trainctl.rundir import worker_socket_path

__all__ = ["start", "request", "DebugServerError"]

log = logging.getLogger(__name__)


class DebugServerError(OSError):
    """A rank's debug socket did not answer (dead rank, or no server started)."""


def start(run_dir: str | os.PathLike[str], rank: int) -> Any | None:
    """Start the rank's debug server at trainctl.rundir.worker_socket_path; returns the server.

    Returns None (and logs why) when this torch has no _WorkerServer: a missing debug endpoint
    must never stop training.
    """
    try:
        import torch._C._distributed_c10d as c10d

        server_cls = c10d._WorkerServer
    except (ImportError, AttributeError) as exc:
        log.warning("rank %d: torch has no _WorkerServer (%s); hang dumps will rely on py-spy", rank, exc)
        return None
    _register_fr_trace_pickle(c10d)
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
        if "fr_trace" not in c10d._get_handler_names():
            c10d._register_handler("fr_trace", _fr_trace_pickle)
    except (AttributeError, RuntimeError) as exc:
        log.warning("fr_trace pickle handler not registered: %s", exc)


def request(sock_path: str | os.PathLike[str], handler: str, *, timeout_s: float = 10.0) -> bytes:
    """POST /handler/<handler> over the Unix socket; returns the response body."""
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
