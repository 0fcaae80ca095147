"""A real Slurm cluster on loopback (Debian's slurmctld, slurmd and munge), for tests and benchmarks.

One munged (its own key and socket), one slurmctld and one slurmd per node, all as root, all on
127.0.0.x addresses and free ports, configured by a generated slurm.conf that callers pass with
SLURM_CONF (`cluster.env()`), so the machine's own /etc/slurm is never read. Nothing is faked:
`srun`, `salloc` and `scancel` are Slurm's own, and every task is started by slurmstepd on its node.

Per-node filesystems, as tests/sshd.py does for sshd: every slurmd runs in its own mount namespace
where the node's private folder `nodes/<name>/root` is bind-mounted over the one shared path
`cluster.remote_root`; the tasks slurmstepd starts inherit it. So the same run dir path names
different files on every node, and everything else (the venv, the shared scratch) is one shared
file system, as on a cluster with a parallel file system.

A node goes away with `stop_node(name)` (its slurmd is killed; slurmctld still counts it in the
allocation, so srun's launch on it fails the way it does when a node dies under a job).

    with SlurmCluster(tmp_path, ["node01", "node02"]) as slurm:
        job = slurm.allocate()
        trainctl collect RUN --srun --srun-jobid JOB (env=slurm.env())
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from sshd import _free_endpoint, root_and_mount_namespaces

DAEMONS = ("/usr/sbin/slurmctld", "/usr/sbin/slurmd", "/usr/sbin/munged")
CLIENTS = ("srun", "salloc", "sinfo", "scancel")


def slurm_available() -> str | None:
    """None when a loopback Slurm cluster can run here, else the reason (used to skip tests)."""
    missing = [p for p in DAEMONS if not os.path.exists(p)] + [c for c in CLIENTS if not shutil.which(c)]
    if missing:
        return (
            f"{', '.join(missing)} missing: install Debian's slurmctld slurmd slurm-client munge (scripts/test.sh does)"
        )
    return root_and_mount_namespaces("a loopback Slurm cluster needs root (slurmd as root, unshare --mount)")


_CONF = """\
ClusterName=trainctltest
SlurmctldHost=localhost({ctld_addr})
SlurmctldPort={ctld_port}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket={munge_sock}
CredType=cred/munge
StateSaveLocation={state}/ctld
SlurmdSpoolDir={state}/spool/%n
SlurmctldPidFile={state}/ctld/slurmctld.pid
SlurmdPidFile={state}/spool/%n/slurmd.pid
SlurmctldLogFile={state}/ctld/slurmctld.log
SlurmdLogFile={state}/spool/%n/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SwitchType=switch/none
MpiDefault=none
SchedulerType=sched/builtin
SelectType=select/linear
ReturnToService=2
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
# srun gives up on a node that does not answer after this (default 10 s): keeps the lost-node test short
MessageTimeout=5
"""


@dataclass
class SlurmCluster:
    base: Path  # node roots and the shared remote path live here
    names: list[str]
    remote_root: Path = field(init=False)
    conf: Path = field(init=False)
    _state: Path = field(init=False)  # daemon state, sockets, logs: a short path (unix socket length limit)
    _procs: dict[str, subprocess.Popen] = field(default_factory=dict, init=False)
    _jobs: list[str] = field(default_factory=list, init=False)

    def __post_init__(self) -> None:
        self.base.mkdir(parents=True, exist_ok=True)
        self.remote_root = self.base / "remote"
        self._state = Path(tempfile.mkdtemp(prefix="tctl-slurm-"))
        self.conf = self._state / "slurm.conf"

    def host_root(self, name: str) -> Path:
        return self.base / "nodes" / name / "root"

    def env(self, **extra: str) -> dict[str, str]:
        return {**os.environ, "SLURM_CONF": str(self.conf), **extra}

    def __enter__(self) -> SlurmCluster:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        try:
            self._start()
        except BaseException:
            self.stop()
            raise

    def _start(self) -> None:
        s = self._state
        for d in ("ctld", "munge", *(f"spool/{n}" for n in self.names)):
            (s / d).mkdir(parents=True, exist_ok=True)
        self.remote_root.mkdir(parents=True, exist_ok=True)
        key = s / "munge" / "munge.key"
        key.write_bytes(os.urandom(1024))
        key.chmod(0o400)
        (s / "munge").chmod(0o700)
        sock = s / "munge" / "sock"
        self._spawn("munged", ["/usr/sbin/munged", "-F", "--force", f"--key-file={key}", f"--socket={sock}",
                               f"--pid-file={s}/munge/pid", f"--log-file={s}/munge/log", f"--seed-file={s}/munge/seed"])  # fmt: skip
        ctld_addr, ctld_port = _free_endpoint()
        conf = _CONF.format(ctld_addr=ctld_addr, ctld_port=ctld_port, munge_sock=sock, state=s)
        for n in self.names:
            addr, port = _free_endpoint()
            conf += f"NodeName={n} NodeHostname=localhost NodeAddr={addr} Port={port} CPUs=1 State=UNKNOWN\n"
        conf += f"PartitionName=test Nodes={','.join(self.names)} Default=YES MaxTime=INFINITE State=UP\n"
        self.conf.write_text(conf)
        self._wait(lambda: sock.exists(), "munged's socket", s / "munge" / "log")
        self._spawn("slurmctld", ["/usr/sbin/slurmctld", "-D", "-i", "-f", str(self.conf)])
        for n in self.names:
            root = self.host_root(n)
            root.mkdir(parents=True, exist_ok=True)
            inner = 'mount --bind "$1" "$2" && exec /usr/sbin/slurmd -D -f "$3" -N "$4"'
            self._spawn(n, ["unshare", "--mount", "--propagation", "private", "sh", "-c", inner, "sh", str(root),
                            str(self.remote_root), str(self.conf), n])  # fmt: skip
        self._wait(self._all_idle, "every node idle in sinfo", s / "ctld" / "slurmctld.log")

    def _spawn(self, name: str, argv: list[str]) -> None:
        log = open(self._state / f"{name}.out", "wb")  # noqa: SIM115 (closed when the process is reaped)
        self._procs[name] = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=self.env())
        log.close()

    def _all_idle(self) -> bool:
        r = subprocess.run(["sinfo", "-h", "-N", "-o", "%N %T"], capture_output=True, text=True, env=self.env())
        states = dict(line.split() for line in r.stdout.splitlines() if line.strip())
        return r.returncode == 0 and all(states.get(n) == "idle" for n in self.names)

    def _wait(self, ready, what: str, log: Path, timeout_s: float = 30.0) -> None:
        deadline = time.monotonic() + timeout_s
        while not ready():
            dead = [n for n, p in self._procs.items() if p.poll() is not None and n not in self._stopped_nodes()]
            if dead or time.monotonic() > deadline:
                tail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
                raise RuntimeError(f"loopback Slurm: waiting for {what} failed (exited: {dead}); {log}:\n{tail}")
            time.sleep(0.1)

    def _stopped_nodes(self) -> set[str]:
        return {n for n in self.names if n in self._procs and self._procs[n].returncode is not None}

    def allocate(self, nodes: list[str] | None = None) -> str:
        """An allocation of `nodes` (default all) with no shell, as `salloc --no-shell` makes one: its job id."""
        nodes = nodes or self.names
        r = subprocess.run(["salloc", "--no-shell", f"--nodes={len(nodes)}", f"--nodelist={','.join(nodes)}"],
                           capture_output=True, text=True, env=self.env(), timeout=60)  # fmt: skip
        m = re.search(r"Granted job allocation (\d+)", r.stderr + r.stdout)
        if not m:
            raise RuntimeError(f"salloc failed ({r.returncode}): {r.stderr[-2000:]}")
        self._jobs.append(m.group(1))
        return m.group(1)

    def stop_node(self, name: str) -> None:
        """The node goes away: its slurmd is killed (the tasks it started, if any, are left to die with it)."""
        p = self._procs[name]
        p.send_signal(signal.SIGKILL)
        p.wait(timeout=30)

    def stop(self) -> None:
        for job in self._jobs:
            subprocess.run(["scancel", job], capture_output=True, env=self.env(), timeout=30)
        for name in [*self.names, "slurmctld", "munged"]:  # nodes first: they report to slurmctld
            p = self._procs.get(name)
            if p is not None and p.poll() is None:
                p.terminate()
                try:
                    p.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait(timeout=15)
        shutil.rmtree(self._state, ignore_errors=True)
