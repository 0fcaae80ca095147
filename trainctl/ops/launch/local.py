"""`trainctl launch --local`: torchrun agents as simulated hosts, supervised for crashes and hangs.

Each simulated host is one real torchrun agent (`python -m torch.distributed.run`), all joined by
c10d rendezvous on 127.0.0.1 with a free port, so ranks, restarts and failure reports are torch's
own. trainctl adds what torchrun lacks on gloo: per-rank heartbeats, hang detection and, before
anything is killed, Flight Recorder + Python stack dumps of every rank (issue 3, item 1).

The supervision is split the torchelastic way: `decide()` is a pure function from what was
observed (agent exit codes, heartbeat progress, the time) to an Action; `supervise()` is the one
loop that observes and performs actions.
"""

from __future__ import annotations

import json
import logging
import os
import re
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import Enum
from pathlib import Path

from trainctl.errors import InputError, LaunchError
from trainctl.ops.launch.placement import gpu_placement, visible_gpus
from trainctl.ops.launch.request import (
    TRAINER_MODULE,
    LaunchRequest,
    check_drill_targets,
    reference_layout,
    simulated_hosts,
    torchrun_argv,
    trainer_tp,
)
from trainctl.rundir import (
    HostRanks,
    RunInfo,
    atomic_write_text,
    heartbeat_path,
    read_rank_files,
    write_run_info,
)
from trainctl.runtime import inject, nccl_env
from trainctl.runtime.hang_dump import dump_hung_ranks
from trainctl.runtime.heartbeat import read_heartbeat

__all__ = [
    "LaunchSpec",
    "AgentState",
    "RankProgress",
    "ActionKind",
    "Action",
    "decide",
    "LaunchResult",
    "RootCause",
    "launch_local",
    "root_cause",
    "format_root_cause",
    "simulated_hosts",
    "ProgressTracker",
]

log = logging.getLogger(__name__)

POLL_INTERVAL_S = 0.25
STOP_GRACE_S = 10.0


# --- the pure decision ----------------------------------------------------------------------------


@dataclass(frozen=True)
class AgentState:
    host: str
    returncode: int | None  # None: still running


@dataclass(frozen=True)
class RankProgress:
    """A rank's last heartbeat and when (launcher's monotonic clock) its (step, phase) last changed."""

    rank: int
    step: int
    phase: str
    last_change_s: float


class ActionKind(str, Enum):
    WAIT = "wait"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    HUNG = "hung"


@dataclass(frozen=True)
class Action:
    kind: ActionKind
    reason: str = ""
    hosts: tuple[str, ...] = ()
    ranks: tuple[int, ...] = ()  # for HUNG: every rank, most stale first


def decide(
    agents: Sequence[AgentState],
    progress: Mapping[int, RankProgress],
    *,
    now_s: float,
    started_s: float,
    hang_timeout_s: float | None,
    startup_timeout_s: float,
) -> Action:
    """What the supervisor should do now, from observations only (no I/O, no clocks read).

    - any agent exited non-zero -> FAILED (torchrun exhausted its restarts on that host);
    - every agent exited 0 -> SUCCEEDED;
    - no rank changed (step, phase) for hang_timeout_s -> HUNG (the job as a whole stopped: one
      slow rank while others progress is a straggler, not a hang). Before the first heartbeat
      the clock starts at launch and the limit is startup_timeout_s (rendezvous, imports); until
      some rank finished its first step (step >= 1) the limit is the larger of the two.
    """
    failed = [a for a in agents if a.returncode not in (None, 0)]
    if failed:
        return Action(
            ActionKind.FAILED,
            "; ".join(f"{a.host}: torchrun exited {a.returncode}" for a in failed),
            hosts=tuple(a.host for a in failed),
        )
    if agents and all(a.returncode == 0 for a in agents):
        return Action(ActionKind.SUCCEEDED, "all agents exited 0")
    if not hang_timeout_s:
        return Action(ActionKind.WAIT)
    live = [p for p in progress.values() if p.phase != "done"]
    if not progress:
        idle_s, limit_s, what = now_s - started_s, startup_timeout_s, "no heartbeat since launch"
    elif not live:
        return Action(ActionKind.WAIT)  # every rank finished; agents are exiting
    else:
        idle_s, limit_s = now_s - max(p.last_change_s for p in live), hang_timeout_s
        what = "no rank made progress"
        if all(p.step < 1 for p in live):
            # Nobody finished a first step yet: the first step carries one-off costs (DDP's
            # parameter broadcast, loader workers, allocator and autograd warm-up, torch.compile)
            # that take far longer than a steady step, the more so on a busy machine; measured
            # here: 4 ranks sat >8 s in step 0 on 2 shared cores. It gets the startup limit.
            limit_s, what = max(hang_timeout_s, startup_timeout_s), "no rank finished its first step"
    if idle_s < limit_s:
        return Action(ActionKind.WAIT)
    stale = sorted(progress.values(), key=lambda p: (p.last_change_s, p.rank))
    detail = ", ".join(f"rank {p.rank} step {p.step} {p.phase}" for p in stale[:8])
    return Action(
        ActionKind.HUNG,
        f"{what} for {idle_s:.1f}s (limit {limit_s:g}s){': ' + detail if detail else ''}",
        ranks=tuple(p.rank for p in stale),
    )


class ProgressTracker:
    """Heartbeats -> RankProgress: when each rank's (step, phase, pid) last changed, on the
    observer's monotonic clock. Shared by the local loop and the multi-host supervisor, which
    read heartbeats from different places but must judge progress the same way."""

    def __init__(self) -> None:
        self._seen: dict[int, tuple[int, str, int]] = {}
        self.progress: dict[int, RankProgress] = {}

    def update(self, rank: int, hb: Mapping | None, now_s: float) -> None:
        if hb is None:
            return
        key = (int(hb.get("step", -1)), str(hb.get("phase", "")), int(hb.get("pid", 0)))
        if self._seen.get(rank) != key:
            self._seen[rank] = key
            self.progress[rank] = RankProgress(rank, key[0], key[1], now_s)


# --- specs and results ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class LaunchSpec:
    run_dir: Path
    run_id: str
    nproc_per_node: int
    hosts: tuple[str, ...]
    script: str | None = None  # None: the reference trainer
    args: tuple[str, ...] = ()
    inject: tuple[str, ...] = ()
    max_restarts: int = 0
    hang_timeout_s: float | None = 300.0
    startup_timeout_s: float = 180.0
    keep_hung: bool = False

    env: Mapping[str, str] = field(default_factory=dict)  # --env NAME=VALUE for every rank
    metrics_agent: bool = True  # NVML + /proc sampling beside the ranks, one agent per simulated host

    @property
    def world_size(self) -> int:
        return self.nproc_per_node * len(self.hosts)

    @classmethod
    def from_request(cls, req: LaunchRequest, run_id: str) -> LaunchSpec:
        """The local launcher's view of a validated --local request (run_dir already decided)."""
        return cls(
            run_dir=Path(req.run_dir or Path("runs") / run_id),
            run_id=run_id,
            nproc_per_node=req.nproc_per_node,
            hosts=simulated_hosts(req.hosts_local),
            script=req.script,
            args=req.trainer_args(),
            inject=req.inject,
            max_restarts=req.max_restarts,
            hang_timeout_s=req.hang_timeout or None,
            keep_hung=req.keep_hung,
            env=req.env(),
        )


@dataclass(frozen=True)
class RootCause:
    time: str
    host: str
    rank: int
    local_rank: int | None
    exitcode: int | None
    pid: int | None
    error_file: str | None
    message: str
    traceback: str


@dataclass(frozen=True)
class LaunchResult:
    status: ActionKind
    run_dir: Path
    reason: str
    root_cause: RootCause | None = None
    dumps: Mapping[str, str] = field(default_factory=dict)  # artefact path -> "ok" | why not
    elapsed_s: float = 0.0

    @property
    def ok(self) -> bool:
        return self.status is ActionKind.SUCCEEDED


def default_run_id() -> str:
    return datetime.now(UTC).strftime("r-%Y%m%d-%H%M%S")


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def device_count() -> int:
    """GPUs this machine has (0 on a CPU build or without a driver); the one boundary placement reads."""
    try:
        import torch

        return int(torch.cuda.device_count()) if torch.cuda.is_available() else 0
    except Exception:  # a broken driver install: the ranks will say so themselves
        return 0


def write_hang_record(
    folder: Path, action: Action, hang_timeout_s: float | None, detected_ts_ns: int, **extra: object
) -> None:
    """folder/hang.json: a hang the launcher detected (why, the ranks that stopped, when), which
    diagnose reads as the hang of last resort (analyzers/launcher_hang.py); written before the
    stop, so the SIGTERM that follows reads as the launcher's, not as a crash."""
    body = {
        "reason": action.reason,
        "hang_timeout_s": hang_timeout_s,
        "stale_ranks": list(action.ranks),
        "detected_ts_ns": detected_ts_ns,
        **extra,
    }
    atomic_write_text(Path(folder) / "hang.json", json.dumps(body, indent=1))


def agent_envs(
    spec: LaunchSpec, run_dir: Path, base_env: Mapping[str, str], device_count: int
) -> dict[str, dict[str, str]]:
    """Each simulated host's torchrun agent environment (pure: tested with a machine's GPU count).

    Every rank gets --env, the run's TRAINCTL_* variables and NCCL's per-rank settings; on a GPU
    machine each simulated host gets its own GPUs (trainctl.ops.launch.placement).
    """
    base = {**base_env, **spec.env}  # --env NAME=VALUE reaches every rank
    placement = gpu_placement(
        spec.hosts, spec.nproc_per_node, visible_gpus(base, device_count), backend=base.get("TRAINCTL_BACKEND")
    )
    out: dict[str, dict[str, str]] = {}
    for host in spec.hosts:
        env = dict(base)
        env.update(
            {
                "TRAINCTL_RUN_DIR": str(run_dir),
                "TRAINCTL_RUN_ID": spec.run_id,
                "TRAINCTL_HOST": host,
                "TRAINCTL_INJECT": json.dumps(list(spec.inject)),
                "TRAINCTL_HANG_TIMEOUT_S": str(spec.hang_timeout_s or 0),
                "TRAINCTL_RANKS_ON_MACHINE": str(spec.world_size),  # simulated hosts share this machine's cores
                "PYTHONUNBUFFERED": "1",
            }
        )
        if host in placement:
            env["CUDA_VISIBLE_DEVICES"] = placement[host]  # local rank r -> this host's r-th GPU
            # CUDA numbers GPUs fastest-first by default, NVML by PCI bus: make them agree, so the
            # metrics agent reports exactly the GPUs this host's ranks run on.
            env.setdefault("CUDA_DEVICE_ORDER", "PCI_BUS_ID")
        env.update(nccl_env.rank_env(run_dir, host, env))  # FR watchdog dumps, NCCL_DEBUG and its per-rank log
        out[host] = env
    return out


def _start_metrics_agents(spec: LaunchSpec, run_dir: Path, envs: Mapping[str, Mapping[str, str]]) -> list:
    """One NVML/host metrics agent per simulated host, as the multi-host supervisor starts one per
    host: gpu_metrics and host_metrics land in the run dir, each host reporting only its own GPUs."""
    from trainctl.runtime.metrics_agent import start_background

    agents = []
    for host in spec.hosts:
        visible = envs[host].get("CUDA_VISIBLE_DEVICES")
        only = tuple(visible.split(",")) if visible else None
        agents.append(
            start_background(run_dir, host, interval_s=1.0, flush_s=5.0, only_gpus=only, expect_gpus=only is not None)
        )
    return agents


def validate(spec: LaunchSpec) -> None:
    if spec.nproc_per_node < 1:
        raise InputError(f"--nproc-per-node {spec.nproc_per_node}: must be >= 1")
    if not spec.hosts:
        raise InputError("--hosts-local must be >= 1")
    check_drill_targets(inject.parse_specs(spec.inject), world=spec.world_size, hosts=spec.hosts)
    if spec.script is not None and not Path(spec.script).is_file():
        raise InputError(
            f"{spec.script}: no such training script; pass a path to a .py file, or no SCRIPT for the reference trainer"
        )
    try:
        import importlib.util

        if importlib.util.find_spec("torch") is None:
            raise ImportError
    except ImportError:
        raise LaunchError(
            "torch is not installed in this Python; install trainctl[runtime] (scripts/setup.sh does)"
        ) from None
    if spec.script is None:
        tp = trainer_tp(spec.args, spec.world_size)
        if spec.world_size % tp:
            raise InputError(f"--tp {tp} does not divide the world size {spec.world_size}; pick a divisor")


def initial_run_info(spec: LaunchSpec) -> RunInfo:
    groups: dict[str, tuple[tuple[int, ...], ...]] = {}
    layout: dict[str, int] = {}
    if spec.script is None:
        groups, layout = reference_layout(spec.world_size, trainer_tp(spec.args, spec.world_size))
    return RunInfo(
        run_id=spec.run_id,
        world_size=spec.world_size,
        nproc_per_node=spec.nproc_per_node,
        hosts=tuple(HostRanks(h, ()) for h in spec.hosts),
        groups=groups,
        layout=layout,
        script=spec.script,
        created_ts_ns=time.time_ns(),
        extra={
            "launcher": "torchrun",
            "mode": "local",
            "inject": list(spec.inject),
            "max_restarts": spec.max_restarts,
            "hang_timeout_s": spec.hang_timeout_s,
            "args": list(spec.args),
        },
    )


def _with_rank_map(info: RunInfo, ranks: Mapping[int, dict]) -> RunInfo:
    by_host: dict[str, list[int]] = {h.host: [] for h in info.hosts}
    for r, d in ranks.items():
        by_host.setdefault(str(d.get("host")), []).append(r)
    hosts = tuple(HostRanks(h, tuple(sorted(rs))) for h, rs in by_host.items())
    return RunInfo(**{**info.__dict__, "hosts": hosts})


# --- failures, the torchelastic way ---------------------------------------------------------------

_BANNER_RANK = re.compile(r"rank\s*:\s*(\d+)\s*\(local_rank:\s*(\d+)\)")
_BANNER_EXIT = re.compile(r"exitcode\s*:\s*(-?\d+)\s*\(pid:\s*(\d+)\)")
_BANNER_TIME = re.compile(r"time\s*:\s*(\S+)")


def _agent_failures(run_dir: Path, hosts: Iterable[str]) -> list[dict]:
    """Rank failures from torchrun's own 'Failures/Root Cause' banners in the agents' logs."""
    found = []
    for host in hosts:
        path = run_dir / "logs" / host / "agent.log"
        try:
            text = path.read_text(errors="replace")
        except OSError:
            continue
        for block in re.split(r"\n\s*\[\d+\]:\s*\n", text)[1:]:
            m_rank, m_exit, m_time = _BANNER_RANK.search(block), _BANNER_EXIT.search(block), _BANNER_TIME.search(block)
            if m_rank and m_exit:
                found.append(
                    {
                        "host": host,
                        "rank": int(m_rank.group(1)),
                        "local_rank": int(m_rank.group(2)),
                        "exitcode": int(m_exit.group(1)),
                        "pid": int(m_exit.group(2)),
                        "time": m_time.group(1) if m_time else "",
                    }
                )
    return found


def root_cause(run_dir: Path, hosts: Sequence[str]) -> RootCause | None:
    """The first failure: the error file with the smallest timestamp (torchelastic's rule), with
    exit code and pid from the agents' banners; a rank killed by a signal has no error file, so
    the banners alone name it then."""
    ranks = read_rank_files(run_dir)
    banners = {b["rank"]: b for b in _agent_failures(run_dir, hosts)}
    errors = []
    for p in (run_dir / "errors").glob("rank-*.json"):
        try:
            d = json.loads(p.read_text())
            msg = d["message"]
            rank = int(p.stem.split("-", 1)[1])
            extra = msg["extraInfo"]
            ts_ns = int(extra.get("timestamp_ns") or int(extra["timestamp"]) * 10**9)
            errors.append((ts_ns, rank, p, msg))
        except (OSError, ValueError, KeyError, TypeError):
            continue
    if errors:
        ts_ns, rank, path, msg = min(errors)
        b = banners.get(rank, {})
        return RootCause(
            time=datetime.fromtimestamp(ts_ns / 1e9).strftime("%Y-%m-%d_%H:%M:%S"),
            host=str(b.get("host") or ranks.get(rank, {}).get("host", "?")),
            rank=rank,
            local_rank=b.get("local_rank", ranks.get(rank, {}).get("local_rank")),
            exitcode=b.get("exitcode"),
            pid=b.get("pid", ranks.get(rank, {}).get("pid")),
            error_file=str(path),
            message=str(msg.get("message", "")),
            traceback=str(msg["extraInfo"].get("py_callstack", "")),
        )
    if banners:
        b = min(banners.values(), key=lambda x: (x["time"], x["rank"]))
        code = b["exitcode"]
        sig = f"Signal {-code} ({signal.Signals(-code).name})" if code < 0 and -code in signal.valid_signals() else ""
        return RootCause(
            time=b["time"],
            host=b["host"],
            rank=b["rank"],
            local_rank=b["local_rank"],
            exitcode=code,
            pid=b["pid"],
            error_file=None,
            message=sig or f"exit code {code}",
            traceback="To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html",
        )
    return None


def format_root_cause(rc: RootCause, what: str) -> str:
    bar = "=" * 60
    tb = rc.traceback.rstrip().replace("\n", "\n    ") if rc.traceback else "<N/A>"
    return "\n".join(
        [
            bar,
            f"{what} FAILED",
            "-" * 60,
            "Root Cause (first observed failure):",
            "[0]:",
            f"  time      : {rc.time}",
            f"  host      : {rc.host}",
            f"  rank      : {rc.rank} (local_rank: {rc.local_rank if rc.local_rank is not None else '?'})",
            f"  exitcode  : {rc.exitcode if rc.exitcode is not None else '?'} (pid: {rc.pid if rc.pid is not None else '?'})",
            f"  error_file: {rc.error_file or '<N/A>'}",
            f"  message   : {rc.message}",
            f"  traceback : {tb}",
            bar,
        ]
    )


# --- the loop ----------------------------------------------------------------------------------------


def _agent_cmd(spec: LaunchSpec, port: int) -> list[str]:
    return torchrun_argv(
        nnodes=len(spec.hosts),
        nproc_per_node=spec.nproc_per_node,
        rdzv_endpoint=f"127.0.0.1:{port}",
        rdzv_id=spec.run_id,
        max_restarts=spec.max_restarts,
        script=str(Path(spec.script).resolve()) if spec.script is not None else None,
        args=spec.args,
    )


def _stop(procs: Sequence[subprocess.Popen], run_dir: Path, notify: Callable[[str], None]) -> None:
    """SIGTERM every agent (torchrun then stops its workers), SIGKILL what is left, including rank
    processes (they run in their own sessions) recorded in ranks/rank-R.json."""
    for p in procs:
        if p.poll() is None:
            try:
                os.killpg(p.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
    deadline = time.monotonic() + STOP_GRACE_S
    for p in procs:
        try:
            p.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            notify(f"agent pid {p.pid} ignored SIGTERM; killing")
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            p.wait(timeout=10)
    for info in read_rank_files(run_dir).values():
        pid = int(info.get("pid", 0))
        if pid and _alive(pid):
            try:
                os.killpg(pid, signal.SIGKILL)  # torchrun starts each worker in a new session: pgid == pid
            except (ProcessLookupError, PermissionError):
                pass


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # a zombie is not alive for our purposes
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except OSError:
        return False


def launch_local(
    spec: LaunchSpec, *, notify: Callable[[str], None] = lambda s: None, status: Callable[[str], None] = lambda s: None
) -> LaunchResult:
    """Start one torchrun agent per simulated host, supervise, dump on hang, report the first failure."""
    validate(spec)
    run_dir = spec.run_dir.resolve()
    run_dir.mkdir(parents=True, exist_ok=True)
    info = initial_run_info(spec)
    write_run_info(run_dir, info)
    port = _free_port()
    procs: list[subprocess.Popen] = []
    what = spec.script or TRAINER_MODULE
    t0 = time.monotonic()
    envs = agent_envs(spec, run_dir, os.environ, device_count())  # a LaunchError (too few GPUs) before any start
    agents = _start_metrics_agents(spec, run_dir, envs) if spec.metrics_agent else []
    try:
        for host in spec.hosts:
            env = envs[host]
            log_path = run_dir / "logs" / host / "agent.log"
            log_path.parent.mkdir(parents=True, exist_ok=True)
            with open(log_path, "ab") as agent_log:
                procs.append(
                    subprocess.Popen(
                        _agent_cmd(spec, port),
                        env=env,
                        stdout=agent_log,
                        stderr=subprocess.STDOUT,
                        stdin=subprocess.DEVNULL,
                        start_new_session=True,
                    )
                )
        notify(
            f"launched {len(spec.hosts)} torchrun agent(s) x {spec.nproc_per_node} ranks ({what}); rendezvous 127.0.0.1:{port}; run dir {run_dir}"
        )
        return _supervise(spec, run_dir, info, procs, t0, notify, status)
    finally:
        _stop(procs, run_dir, notify)
        for a in agents:
            a.stop()


def _supervise(
    spec: LaunchSpec,
    run_dir: Path,
    info: RunInfo,
    procs: list[subprocess.Popen],
    t0: float,
    notify: Callable[[str], None],
    status: Callable[[str], None],
) -> LaunchResult:
    tracker = ProgressTracker()
    progress = tracker.progress
    mapped_pids: dict[int, int] = {}
    dumps: dict[str, str] = {}
    while True:
        now = time.monotonic()
        ranks = read_rank_files(run_dir)
        pids = {r: int(d.get("pid", 0)) for r, d in ranks.items()}
        if len(ranks) == spec.world_size and pids != mapped_pids:  # all ranks up (again, after a restart)
            info = _with_rank_map(info, ranks)
            write_run_info(run_dir, info)
            mapped_pids = pids
        for r in range(spec.world_size):
            tracker.update(r, read_heartbeat(heartbeat_path(run_dir, r)), now)
        agents = [AgentState(h, p.poll()) for h, p in zip(spec.hosts, procs)]
        action = decide(
            agents,
            progress,
            now_s=now,
            started_s=t0,
            hang_timeout_s=spec.hang_timeout_s,
            startup_timeout_s=spec.startup_timeout_s,
        )
        if progress:
            steps = [p.step for p in progress.values()]
            status(f"{len(progress)}/{spec.world_size} ranks, step {min(steps)}..{max(steps)}, {now - t0:.0f}s")
        if action.kind is ActionKind.WAIT:
            time.sleep(POLL_INTERVAL_S)
            continue
        if action.kind is ActionKind.SUCCEEDED:
            return LaunchResult(action.kind, run_dir, action.reason, elapsed_s=now - t0)
        if action.kind is ActionKind.FAILED:
            time.sleep(0.5)  # let the other agents write their banners
            rc = root_cause(run_dir, spec.hosts)
            return LaunchResult(action.kind, run_dir, action.reason, root_cause=rc, elapsed_s=now - t0)
        # HUNG: dump first, kill later
        detected_ts_ns = time.time_ns()
        notify(f"hang detected: {action.reason}; dumping Flight Recorder and stacks of {len(ranks)} ranks")
        dumps = dump_hung_ranks(run_dir, ranks)
        # The launcher's own record of the hang (wall clock, comparable with heartbeats' ts_ns):
        # when it was detected, when the dumps were done, before anything was killed.
        write_hang_record(
            run_dir,
            action,
            spec.hang_timeout_s,
            detected_ts_ns,
            dumped_ts_ns=time.time_ns(),
            dumps_ok=sum(v == "ok" for v in dumps.values()),
            dumps_total=len(dumps),
        )
        ok = sum(v == "ok" for v in dumps.values())
        notify(f"saved {ok}/{len(dumps)} dumps under {run_dir}/fr and {run_dir}/stacks")
        for path, why in sorted(dumps.items()):
            if why != "ok":
                notify(f"  missing {path}: {why}")
        if spec.keep_hung:
            notify("--keep-hung: leaving the run up for inspection; Ctrl-C stops it")
            try:
                while any(p.poll() is None for p in procs):
                    time.sleep(1.0)
            except KeyboardInterrupt:
                pass
        return LaunchResult(ActionKind.HUNG, run_dir, action.reason, dumps=dumps, elapsed_s=now - t0)
