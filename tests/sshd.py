"""Real sshd test hosts on loopback (Debian's openssh-server), for tests and benchmarks.

Each host is its own `/usr/sbin/sshd -D -e -f <cfg>` running as root on its own 127.0.0.x address
and port, with its own host key and sshd_config. The client side is a generated ~/.ssh-like folder
(`client/`: id_ed25519, known_hosts, config with one `Host <name>` alias per host) that callers pass
via `--ssh-config`, so the user's real ~/.ssh is never read or written.

Per-host filesystems: every sshd is started in its own mount namespace (`unshare --mount`) where
the host's private folder `hosts/<name>/root` is bind-mounted over the one shared path
`cluster.remote_root`. So the same absolute run dir path (`cluster.remote_root / "run"`) names
different files on every host, exactly as on a real cluster, and nothing in trainctl knows it is
talking to a test host. Prepare a host's files under `cluster.host_root(name)`.

Broken hosts, for failure tests (`mode=`):
  ok           a normal host
  refuse_key   sshd whose authorized_keys holds a different key (auth refused)
  changed_key  known_hosts lists another key for this host (host key changed / MITM)
  unknown_key  known_hosts has no entry for this host
  unreachable  the alias points at a free port where nothing listens (connection refused)
  silent       a TCP listener that accepts connections but never speaks (banner timeout)

Teardown kills exactly the processes this module started (by pid) and waits for them.

    with SshdCluster(tmp_path, {"node01": "ok", "node02": "silent"}) as cluster:
        trainctl collect RUN --hosts node01,node02 --ssh-config cluster.ssh_config ...
"""

from __future__ import annotations

import json
import os
import random
import shutil
import socket
import subprocess
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import pytest

SSHD = "/usr/sbin/sshd"
MODES = ("ok", "refuse_key", "changed_key", "unknown_key", "unreachable", "silent")


def sshd_available() -> str | None:
    """None when sshd test hosts can run here, else the reason (used to skip tests)."""
    if not os.path.exists(SSHD):
        return f"{SSHD} missing: install Debian's openssh-server (scripts/test.sh does)"
    if not shutil.which("ssh-keygen"):
        return "ssh-keygen missing: install openssh-client"
    return root_and_mount_namespaces("sshd test hosts need root (sshd as root, unshare --mount)")


def root_and_mount_namespaces(why_root: str) -> str | None:
    """None when this process is root and may make mount namespaces (each test host's own view of
    the run dir), else the reason; `why_root` says what needs root."""
    if os.geteuid() != 0:
        return why_root
    probe = subprocess.run(["unshare", "--mount", "--propagation", "private", "true"], capture_output=True)
    if probe.returncode != 0:
        return f"unshare --mount not permitted here ({probe.stderr.decode().strip()})"
    return None


def _keygen(path: Path) -> str:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", path.name, "-f", str(path)], check=True)
    return " ".join(Path(f"{path}.pub").read_text().split()[:2])


_addr_lock = threading.Lock()


def _free_endpoint() -> tuple[str, int]:
    """A loopback address 127.0.0.x (x random in 2..250) and a port free on it right now.

    Other test runs may use the same addresses at the same time; the kernel picks a free port for
    us (bind port 0), so only the address is shared, never the endpoint.
    """
    with _addr_lock:
        for _ in range(200):
            addr = f"127.0.0.{random.randint(2, 250)}"
            s = socket.socket()
            try:
                s.bind((addr, 0))
                return addr, s.getsockname()[1]
            except OSError:
                continue
            finally:
                s.close()
    raise RuntimeError("no free loopback endpoint found")


@dataclass
class TestHost:
    name: str
    mode: str
    address: str
    port: int
    dir: Path  # hosts/<name>: config, keys, log
    proc: subprocess.Popen | None = None
    host_pub: str = ""
    listener: socket.socket | None = None

    @property
    def root(self) -> Path:
        """This host's private filesystem, visible to its sshd sessions at cluster.remote_root."""
        return self.dir / "root"


@dataclass
class SshdCluster:
    base: Path
    hosts_modes: Mapping[str, str] | Iterable[str] | int = 3
    start_timeout_s: float = 20.0
    # Extra environment of every session (sshd SetEnv), e.g. PATH with a venv's bin for py-spy.
    env: Mapping[str, str] = field(default_factory=dict)
    hosts: dict[str, TestHost] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.base = Path(self.base)
        self.client_dir = self.base / "client"
        self.remote_root = self.base / "remote"
        if isinstance(self.hosts_modes, int):
            modes = {f"node{i:02d}": "ok" for i in range(1, self.hosts_modes + 1)}
        elif isinstance(self.hosts_modes, Mapping):
            modes = dict(self.hosts_modes)
        else:
            modes = {n: "ok" for n in self.hosts_modes}
        for m in modes.values():
            if m not in MODES:
                raise ValueError(f"unknown test host mode {m!r}; one of {MODES}")
        self._modes = modes
        self._stop = threading.Event()

    # -- paths the client uses ------------------------------------------------------------------
    @property
    def ssh_config(self) -> Path:
        return self.client_dir / "config"

    @property
    def known_hosts(self) -> Path:
        return self.client_dir / "known_hosts"

    @property
    def client_key(self) -> Path:
        return self.client_dir / "id_ed25519"

    @property
    def names(self) -> list[str]:
        return list(self.hosts)

    def host_root(self, name: str) -> Path:
        return self.hosts[name].root

    # -- a run dir at `remote_root / run` on every host: what each host's ranks wrote --------------
    def loss_rows(self, run: str = "run") -> list[dict]:
        """Rows of rank 0's loss.jsonl, from whichever hosts c10d placed rank 0 on (per attempt)."""
        rows = []
        for name in self.names:
            p = self.host_root(name) / run / "loss.jsonl"
            if p.is_file():
                rows += [json.loads(line) for line in p.read_text().splitlines()]
        return rows

    def rank_files(self, kind: str, run: str = "run") -> dict[int, dict]:
        """rank -> the JSON of every host's `run/<kind>/rank-R.json` (kind: ranks, heartbeats)."""
        out = {}
        for name in self.names:
            for p in (self.host_root(name) / run / kind).glob("rank-*.json"):
                try:
                    out[int(p.stem.split("-")[1])] = json.loads(p.read_text())
                except ValueError:  # a heartbeat caught between write and rename
                    pass
        return out

    # -- lifecycle -------------------------------------------------------------------------------
    def __enter__(self) -> SshdCluster:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        self.client_dir.mkdir(parents=True, exist_ok=True)
        self.remote_root.mkdir(parents=True, exist_ok=True)
        Path("/run/sshd").mkdir(parents=True, exist_ok=True)  # sshd's privilege separation dir
        client_pub = _keygen(self.client_key)
        other_pub = _keygen(self.client_dir / "not_the_client_key")
        known, conf = [], ["# generated by tests/sshd.py; never the user's ~/.ssh\n"]
        try:
            for name, mode in self._modes.items():
                addr, port = _free_endpoint()
                h = TestHost(name, mode, addr, port, self.base / "hosts" / name)
                h.root.mkdir(parents=True, exist_ok=True)
                self.hosts[name] = h
                if mode == "unreachable":
                    pass  # nothing listens on (addr, port)
                elif mode == "silent":
                    self._start_silent(h)
                else:
                    h.host_pub = _keygen(h.dir / "ssh_host_ed25519_key")
                    (h.dir / "authorized_keys").write_text((other_pub if mode == "refuse_key" else client_pub) + "\n")
                    self._start_sshd(h)
                if mode == "changed_key":
                    known.append(f"[{addr}]:{port} {_keygen(h.dir / 'impostor_key')}\n")
                elif h.host_pub and mode != "unknown_key":
                    known.append(f"[{addr}]:{port} {h.host_pub}\n")
                conf.append(
                    f"Host {name}\n  HostName {addr}\n  Port {port}\n  User root\n"
                    f"  IdentityFile {self.client_key}\n  IdentitiesOnly yes\n"
                    f"  UserKnownHostsFile {self.known_hosts}\n  StrictHostKeyChecking yes\n"
                    "  BatchMode yes\n  ConnectTimeout 5\n  LogLevel ERROR\n\n"
                )
            self.known_hosts.write_text("".join(known))
            self.ssh_config.write_text("".join(conf))
            self._wait_ready()
        except BaseException:
            self.stop()
            raise

    def _start_sshd(self, h: TestHost) -> None:
        cfg = h.dir / "sshd_config"
        cfg.write_text(
            f"ListenAddress {h.address}\nPort {h.port}\n"
            f"HostKey {h.dir / 'ssh_host_ed25519_key'}\n"
            f"AuthorizedKeysFile {h.dir / 'authorized_keys'}\n"
            f"PidFile {h.dir / 'sshd.pid'}\n"
            "PermitRootLogin prohibit-password\nPasswordAuthentication no\nKbdInteractiveAuthentication no\n"
            "StrictModes no\nUsePAM no\nPrintMotd no\nPrintLastLog no\n"
            "MaxStartups 200:30:400\nMaxSessions 50\n"
            "Subsystem sftp /usr/lib/openssh/sftp-server\n"
            # Debian's bash sources ~/.bashrc for sshd-started shells; SHLVL=1 skips that cost.
            # (sshd takes only the first SetEnv line, so everything goes on one.)
            "SetEnv SHLVL=1" + "".join(f" {k}={v}" for k, v in self.env.items()) + "\n"
        )
        log = open(h.dir / "sshd.log", "wb")
        # Own mount namespace: the host's private root appears at the shared remote_root path.
        script = 'mount --bind "$1" "$2" && exec "$3" -D -e -f "$4"'
        h.proc = subprocess.Popen(
            [
                "unshare",
                "--mount",
                "--propagation",
                "private",
                "sh",
                "-c",
                script,
                "sh",
                str(h.root),
                str(self.remote_root),
                SSHD,
                str(cfg),
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
        log.close()

    def _start_silent(self, h: TestHost) -> None:
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind((h.address, h.port))
        s.listen(16)
        s.settimeout(0.2)
        h.listener = s
        held: list[socket.socket] = []

        def serve() -> None:  # accept and hold connections open, never sending a banner
            while not self._stop.is_set():
                try:
                    c, _ = s.accept()
                    held.append(c)
                except OSError:
                    continue
            for c in held:
                c.close()

        threading.Thread(target=serve, daemon=True, name=f"silent-{h.name}").start()

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + self.start_timeout_s
        for h in self.hosts.values():
            if h.proc is None:
                continue
            while True:
                if h.proc.poll() is not None:
                    raise RuntimeError(
                        f"sshd for {h.name} exited {h.proc.returncode}: {(h.dir / 'sshd.log').read_text()[-2000:]}"
                    )
                try:
                    with socket.create_connection((h.address, h.port), timeout=1) as c:
                        if c.recv(64).startswith(b"SSH-"):
                            break
                except OSError:
                    pass
                if time.monotonic() > deadline:
                    raise RuntimeError(f"sshd for {h.name} did not answer on {h.address}:{h.port}")
                time.sleep(0.05)

    def stop(self) -> None:
        self._stop.set()
        for h in self.hosts.values():
            if h.proc is not None and h.proc.poll() is None:
                h.proc.terminate()  # exactly the sshd we started (unshare execs into it)
        for h in self.hosts.values():
            if h.proc is not None:
                try:
                    h.proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    h.proc.kill()
                    h.proc.wait()
            if h.listener is not None:
                h.listener.close()


@pytest.fixture
def sshd_cluster(tmp_path_factory):
    """Factory fixture: `cluster = sshd_cluster({"node01": "ok", ...})` or `sshd_cluster(3, env={...})`.

    Every cluster started through it is stopped at teardown. Skips when sshd cannot run here.
    """
    reason = sshd_available()
    if reason:
        pytest.skip(reason)
    started: list[SshdCluster] = []

    def make(hosts: Mapping[str, str] | Iterable[str] | int = 3, env: Mapping[str, str] | None = None) -> SshdCluster:
        c = SshdCluster(tmp_path_factory.mktemp("sshd"), hosts, env=dict(env or {}))
        started.append(c)
        c.start()
        return c

    yield make
    for c in started:
        c.stop()
