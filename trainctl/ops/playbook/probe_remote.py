"""The collective self-test (trainctl.runtime.probe) with torchrun started on real hosts over SSH.

Only how torchrun is started differs from `run_local_probe`: here each host runs the same
`torchrun_argv(...)` detached through trainctl.ops.remote (its own process group, log and exit
file on the host), static rendezvous on the first host (node rank 0, which writes the verdict).
A host made slow on purpose gets TRAINCTL_PROBE_SLOW_HOST in its env (the drill the worker reads).
"""

from __future__ import annotations

import json
import logging
import shlex
import sys
import time
from collections.abc import Mapping, Sequence

from trainctl.collectors.ssh import SshClient
from trainctl.ops.remote import RemoteHosts
from trainctl.runtime.probe import ProbeError, ProbeVerdict, torchrun_argv

logger = logging.getLogger(__name__)

__all__ = ["run_remote_probe"]


def run_remote_probe(
    hosts: Sequence[str],
    *,
    workdir: str,
    ssh_config: str | None = None,
    python: str | None = None,
    nproc_per_host: int = 1,
    size_bytes: int | None = None,
    iters: int = 5,
    slow_host: str | None = None,
    slow_delay_s: float = 0.2,
    env: Mapping[str, str] | None = None,
    timeout_s: float = 600,
    client: SshClient | None = None,
) -> ProbeVerdict:
    """Run the self-test on `hosts` over SSH; `workdir` is an absolute path on every host."""
    if len(hosts) < 2:
        raise ProbeError(f"probe needs at least 2 hosts, got {list(hosts)}")
    if not workdir.startswith("/"):
        raise ProbeError(f"probe workdir {workdir!r} must be an absolute path on the hosts")
    py = python or sys.executable
    remote = RemoteHosts(client or SshClient(ssh_config=ssh_config))
    out_path = f"{workdir}/probe-result.json"
    procs = {}
    try:
        master = remote.client.target(hosts[0]).hostname
        port = int(
            remote.run(
                hosts[0],
                f"{shlex.quote(py)} -c "
                + shlex.quote("import socket; s=socket.socket(); s.bind(('', 0)); print(s.getsockname()[1])"),
            ).strip()
        )
        remote.run(hosts[0], f"mkdir -p {shlex.quote(workdir)} && rm -f {shlex.quote(out_path)}")
        for i, h in enumerate(hosts):
            e = {
                **(env or {}),
                "TRAINCTL_HOST": h,
                "OMP_NUM_THREADS": "1",
                "PYTHONSAFEPATH": "1",
                "PYTHONUNBUFFERED": "1",
            }
            if slow_host is not None:
                e["TRAINCTL_PROBE_SLOW_HOST"] = slow_host
                e["TRAINCTL_PROBE_SLOW_DELAY_S"] = str(slow_delay_s)
            argv = torchrun_argv(
                nnodes=len(hosts),
                node_rank=i,
                nproc_per_host=nproc_per_host,
                master_addr=master,
                master_port=port,
                out_path=out_path,
                size_bytes=size_bytes,
                iters=iters,
                python=py,
            )
            procs[h] = remote.start(h, "probe", argv, log_path=f"{workdir}/{h}.log", env=e, cwd=workdir)
        deadline = time.monotonic() + timeout_s
        status: dict[str, int | None] = {}
        while time.monotonic() < deadline:
            polled = remote.poll_all(list(procs.values()))
            for h, o in polled.outcomes.items():
                if o.ok and not o.value[0].alive:
                    status[h] = o.value[0].exit_code if o.value[0].exit_code is not None else -9
            if len(status) == len(hosts) or any(c not in (0, None) for c in status.values()):
                break
            time.sleep(0.5)
        failed = sorted(h for h in hosts if status.get(h) != 0)
        text = remote.run(hosts[0], f"cat {shlex.quote(out_path)} 2>/dev/null; true").strip()
    finally:
        if procs:
            remote.stop_all(list(procs.values()), grace_s=5.0)  # no-op for groups that already exited
        remote.close()
    if not text:
        raise ProbeError(
            f"collective self-test produced no result (hosts that failed or timed out: {','.join(failed) or 'none'}); "
            f"see {workdir}/<host>.log on each host"
        )
    return ProbeVerdict.from_dict(json.loads(text), failed)
