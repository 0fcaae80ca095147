"""`trainctl launch --hosts`: torchrun on every host over SSH, supervised; faults diagnosed and acted on.

One attempt = one torchrun agent per host (started detached through trainctl.ops.remote, c10d
rendezvous on the first host) plus one metrics agent per host. The loop observes, every
POLL_INTERVAL_S, over the one SSH connection per host it already holds:
  - each agent's state (alive / exit code), and
  - every rank's heartbeat (heartbeats/rank-R.json on its host; read with one `cat` per host per
    poll: no extra port, nothing for the ranks to reach, and it works wherever collect works),
and asks the local launcher's pure `decide()` (the same rules as `--local`) whether the attempt
succeeded, failed (first failure) or hung. A fault opens an incident: hang dumps first (on each
host, as the local launcher does), stop the agents, `collect` every host into
RUN_DIR/incidents/<n>/dataset, `diagnose_path` it, and hand the findings to the pure
`runtime.policy.decide()`. This loop then performs the Action:

  EVICT_AND_RELAUNCH  Ledger().evict(host, finding as evidence), plan_relaunch() on the remaining
                      hosts + spares, start the next attempt (it resumes from the newest complete
                      checkpoint in the shared --checkpoint-dir); with no spare left the run comes
                      back smaller (fewer hosts, smaller dp, same tp) when shrink_allowed(): the
                      reference trainer, or a user script launched with --allow-shrink
  RESTART_IN_PLACE    same hosts, next attempt (counts against --max-restarts)
  STOP_AND_REPORT     stop, report the evidence; no restart loop for user or config errors
  CONTINUE            keep running (fail-slow with nothing actionable)

Every decision goes to stderr as key=value and to RUN_DIR/supervisor.jsonl with its evidence.

A --remote-run-dir on a file system every host mounts works: each rank's heartbeat and rank file
name its host (TRAINCTL_HOST), so a rank counts for the host it names, not for the host whose
folder listing returned it; hang dumps and the sweep after a stop touch, on each host, only the
ranks that name it and, for the sweep, only processes carrying this run's TRAINCTL_RUN_ID
(trainctl.ops.launch.host_commands).

Checkpoints: ranks write to --checkpoint-dir, which must be storage every host shares (NFS,
Lustre, a bucket mount: what clusters have). We chose that over copying the newest complete
checkpoint to replacement hosts: a copy costs the full state size over SSH on the critical path
of recovery, and which step is complete is only known once every rank's manifest is in one place.
"""

from __future__ import annotations

import json
import logging
import os
import shlex
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from trainctl.collectors.ssh import SshClient
from trainctl.errors import InputError, LaunchError
from trainctl.findings import Category, Finding, FindingKind, Severity
from trainctl.inventory import host_key
from trainctl.ops.evict.operation import EvictRequest, SupervisedRelaunch, evict_node
from trainctl.ops.evict.quarantine import Ledger, refuse_quarantined
from trainctl.ops.evict.relaunch_plan import PlanKind
from trainctl.ops.launch import local
from trainctl.ops.launch.fail_slow import FailSlowDetector, FailSlowVerdict, job_progress
from trainctl.ops.launch.host_commands import hang_dump_command, rank_sweep_command
from trainctl.ops.launch.request import (
    LaunchRequest,
    check_drill_targets,
    host_plan,
    reference_layout,
    torchrun_argv,
    trainer_tp,
)
from trainctl.ops.remote import RemoteHosts, RemoteProcess
from trainctl.rundir import HostRanks, RunInfo, write_run_info
from trainctl.runtime import inject, nccl_env, policy

__all__ = ["HostsSpec", "SupervisorResult", "supervise_hosts"]

logger = logging.getLogger(__name__)

POLL_INTERVAL_S = 1.0
BANNER_GRACE_S = 2.0  # after the first failure: let the other agents write their error files
MAX_ATTEMPTS = 20  # a hard stop whatever the policy says (each eviction also consumes a host)


@dataclass(frozen=True)
class HostsSpec:
    run_dir: Path  # local: supervisor.jsonl, incidents/, logs/agent-H.log
    remote_run_dir: str  # the run dir on every host (same absolute path on each)
    run_id: str
    hosts: tuple[str, ...]
    nproc_per_node: int
    spares: tuple[str, ...] = ()
    script: str | None = None  # None: the reference trainer
    args: tuple[str, ...] = ()
    inject: tuple[str, ...] = ()
    max_restarts: int = 0  # in-place restarts (policy), not torchrun's
    hang_timeout_s: float | None = 300.0
    startup_timeout_s: float = 180.0
    checkpoint_every: int = 0
    checkpoint_dir: str | None = None
    steps: int | None = None
    ssh_config: str | None = None
    python: str = sys.executable  # the interpreter on the hosts (a shared venv, same path)
    env: Mapping[str, str] = field(default_factory=dict)  # extra env for every rank (GLOO_SOCKET_IFNAME, ...)
    allow_quarantined: bool = False
    ledger_home: str | None = None  # None: TRAINCTL_HOME / the user's state dir
    metrics_agent: bool = True
    collect_timeout_s: float = 120.0
    fail_slow: bool = True  # watch the job's step time against its own baseline (trainctl.ops.launch.fail_slow)
    fail_slow_ratio: float = 1.5
    allow_shrink: bool = False  # a user script may come back at a smaller world size (the reference trainer always may)

    @classmethod
    def from_request(cls, req: LaunchRequest, run_id: str) -> HostsSpec:
        """The supervisor's view of a validated --hosts request (run_dir already decided, absolute)."""
        run_dir = Path(req.run_dir or Path("runs") / run_id)
        ratio = req.fail_slow_ratio
        return cls(
            run_dir=run_dir,
            remote_run_dir=req.remote_run_dir or str(run_dir),
            run_id=run_id,
            hosts=req.host_names(),
            nproc_per_node=req.nproc_per_node,
            spares=req.spare_names(),
            script=req.script,
            args=req.script_args,
            inject=req.inject,
            max_restarts=req.max_restarts,
            hang_timeout_s=req.hang_timeout or None,
            checkpoint_every=req.checkpoint_every,
            checkpoint_dir=str(req.checkpoint_dir) if req.checkpoint_dir else None,
            steps=req.steps,
            ssh_config=str(req.ssh_config) if req.ssh_config else None,
            python=req.python or sys.executable,
            env=req.env(),
            allow_quarantined=req.allow_quarantined,
            ledger_home=os.environ.get("TRAINCTL_HOME") or None,
            allow_shrink=req.allow_shrink,
            **({} if ratio is None else {"fail_slow": ratio != 0, "fail_slow_ratio": ratio or cls.fail_slow_ratio}),
        )


@dataclass(frozen=True)
class SupervisorResult:
    ok: bool
    reason: str
    attempts: int
    hosts: tuple[str, ...]  # of the last attempt
    evicted: tuple[str, ...]
    root_cause: local.RootCause | None = None
    elapsed_s: float = 0.0


def _trainer_args(spec: HostsSpec, world: int) -> list[str]:
    args = list(spec.args)
    if spec.script is None:
        if not any(a == "--tp" or a.startswith("--tp=") for a in args):
            args += ["--tp", str(trainer_tp(args, world))]
        if spec.steps is not None:
            args += ["--steps", str(spec.steps)]
        if spec.checkpoint_every:
            args += ["--checkpoint-every", str(spec.checkpoint_every)]
            if spec.checkpoint_dir:
                args += ["--checkpoint-dir", spec.checkpoint_dir]
    return args


def _pin_tp(spec: HostsSpec, tp: int) -> HostsSpec:
    """`spec` with an explicit --tp for the reference trainer (a no-op when the args give one)."""
    if any(a == "--tp" or a.startswith("--tp=") for a in spec.args):
        return spec
    return replace(spec, args=(*spec.args, "--tp", str(tp)))


def validate(spec: HostsSpec) -> None:
    if spec.nproc_per_node < 1:
        raise InputError(f"--nproc-per-node {spec.nproc_per_node}: must be >= 1")
    if not spec.hosts:
        raise InputError("--hosts is empty; pass a hostfile, a comma list or a Slurm nodelist")
    keys = [host_key(h) for h in spec.hosts]  # node01 and NODE01 are one machine
    if len(set(keys)) != len(keys) or set(keys) & {host_key(s) for s in spec.spares}:
        raise InputError(f"--hosts {','.join(spec.hosts)} / --spares {','.join(spec.spares)}: a host appears twice")
    if not spec.remote_run_dir.startswith("/"):
        raise InputError(f"run dir {spec.remote_run_dir!r} must be absolute (it is the same path on every host)")
    if spec.checkpoint_every and not spec.checkpoint_dir and len(spec.hosts) > 1:
        raise InputError(
            "--checkpoint-every with --hosts needs --checkpoint-dir on storage every host shares "
            "(a replacement host must read the evicted host's shards)"
        )
    if spec.script is not None and not Path(spec.script).is_absolute():
        raise InputError(f"{spec.script}: pass the training script as an absolute path that exists on every host")
    world = spec.nproc_per_node * len(spec.hosts)
    check_drill_targets(inject.parse_specs(spec.inject), world=world, hosts=(*spec.hosts, *spec.spares))
    if not spec.allow_quarantined:
        refuse_quarantined(list(spec.hosts), home=spec.ledger_home)


def first_failure_finding(rc: local.RootCause) -> Finding:
    """The first failure (torchelastic's rule: the earliest error file) as a crash finding.

    Torchrun's banners name the host by its own hostname and often carry no exception text, so
    the log analyzer's crash findings can miss *why* a rank died; the error file has the
    exception and traceback, which the policy needs to tell a user-code error from the rest.
    """
    return Finding(
        kind=FindingKind.CRASH,
        severity=Severity.CRITICAL,
        category=Category.EXIT_CODE,
        summary=f"first failure: rank {rc.rank} on {rc.host}: {rc.message}",
        hosts=(rc.host,),
        ranks=(rc.rank,),
        confidence=0.9,
        evidence={
            "exitcode": rc.exitcode,
            "error_file": rc.error_file,
            "message": rc.message,
            "traceback": rc.traceback[-4000:],
            "time": rc.time,
            "pid": rc.pid,
        },
    )


class _Journal:
    """supervisor.jsonl (one JSON object per event, with evidence) + key=value lines on stderr."""

    def __init__(self, run_dir: Path, notify: Callable[[str], None]) -> None:
        self.path = run_dir / "supervisor.jsonl"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.notify = notify

    def write(self, event: str, **fields: Any) -> None:
        rec = {"ts_ns": time.time_ns(), "event": event, **fields}
        with open(self.path, "a") as fh:
            fh.write(json.dumps(rec, default=str) + "\n")
        flat = " ".join(
            f"{k}={json.dumps(v, default=str) if not isinstance(v, (int, float)) else v}"
            for k, v in fields.items()
            if k not in ("evidence", "action", "plan")
        )
        if "action" in fields:
            a = fields["action"]
            flat += f" action={a['kind']} rule={a['rule']} hosts={','.join(a['hosts'])} evidence={len(a['evidence'])}"
        self.notify(f"supervisor event={event} {flat}")


@dataclass(frozen=True)
class _Decided:
    """A fail-slow incident whose policy decision was not CONTINUE: the loop performs it."""

    trigger: policy.Trigger
    reason: str
    findings: tuple[Finding, ...]
    rc: local.RootCause | None
    action: policy.Action


class _Attempt:
    def __init__(self, number: int, hosts: tuple[str, ...]) -> None:
        self.number, self.hosts = number, hosts
        self.agents: dict[str, RemoteProcess] = {}
        self.metrics: dict[str, RemoteProcess] = {}
        self.started_s = time.monotonic()
        self.mapped = False


def _q(s: str) -> str:
    return shlex.quote(s)


class Supervisor:
    def __init__(
        self,
        spec: HostsSpec,
        *,
        notify: Callable[[str], None] = lambda s: None,
        status: Callable[[str], None] = lambda s: None,
        client: SshClient | None = None,
    ) -> None:
        self.spec = spec
        self.notify, self.status = notify, status
        self.run_dir = spec.run_dir.resolve()
        self.client = client or SshClient(ssh_config=spec.ssh_config)
        self.remote = RemoteHosts(self.client)
        self.journal = _Journal(self.run_dir, notify)
        self.ledger = Ledger(spec.ledger_home)
        self.incidents = 0
        self._restarts_used = 0  # the loop's counters, read by a fail-slow incident's decision
        self._fault_counts: dict[str, int] = {}

    # -- one attempt -----------------------------------------------------------------------------
    def _rank_env(self, host: str, attempt: int) -> dict[str, str]:
        s = self.spec
        return {
            **s.env,
            **nccl_env.rank_env(s.remote_run_dir, host, s.env),  # FR watchdog dumps, NCCL_DEBUG and its per-rank log
            "TRAINCTL_RUN_DIR": s.remote_run_dir,
            "TRAINCTL_RUN_ID": s.run_id,
            "TRAINCTL_HOST": host,
            "TRAINCTL_INJECT": json.dumps(list(s.inject if attempt == 1 else ())),  # a drill fires once
            "TRAINCTL_HANG_TIMEOUT_S": str(s.hang_timeout_s or 0),
            "TRAINCTL_ATTEMPT": str(attempt),
            "PYTHONUNBUFFERED": "1",
        }

    def _start(self, number: int, hosts: tuple[str, ...]) -> _Attempt:
        s, rd = self.spec, self.spec.remote_run_dir
        att = _Attempt(number, hosts)
        world = s.nproc_per_node * len(hosts)
        rdzv_host = self.client.target(hosts[0]).hostname  # the first host's address as the others see it
        port = int(
            self.remote.run(
                hosts[0],
                f"{_q(s.python)} -c "
                + _q("import socket; s=socket.socket(); s.bind(('', 0)); print(s.getsockname()[1])"),
            ).strip()
        )
        info = RunInfo(
            run_id=s.run_id,
            world_size=world,
            nproc_per_node=s.nproc_per_node,
            hosts=host_plan(hosts, s.nproc_per_node),
            script=s.script,
            created_ts_ns=time.time_ns(),
            extra={
                "launcher": "torchrun",
                "mode": "ssh",
                "attempt": number,
                "inject": list(s.inject),
                "allow_shrink": s.allow_shrink,
            },
        )
        if s.script is None:
            groups, layout = reference_layout(world, trainer_tp(_trainer_args(s, world), world))
            info = RunInfo(**{**info.__dict__, "groups": groups, "layout": layout})
        self.layout = dict(info.layout)
        self.info = info
        write_run_info(self.run_dir, info)
        run_json = json.dumps(info.to_dict(), indent=2).encode()
        args = _trainer_args(s, world)

        def train(first: bool) -> list[str]:
            return torchrun_argv(
                python=s.python,
                nnodes=len(hosts),
                nproc_per_node=s.nproc_per_node,
                rdzv_endpoint=f"{rdzv_host}:{port}",
                rdzv_id=f"{s.run_id}-a{number}",
                max_restarts=0,
                script=s.script,
                args=args,
                rdzv_conf=f"is_host={'1' if first else '0'}",  # explicit: every loopback host "matches"
            )

        def start_host(host: str) -> None:
            # This attempt's rank files, heartbeats and error files only (earlier ones were collected).
            self.remote.run(host, f"mkdir -p {_q(rd)} && cd {_q(rd)} && rm -rf ranks heartbeats errors sockets drills")
            self.remote.write_file(host, f"{rd}/run.json", run_json)
            cmd = train(host == hosts[0])
            att.agents[host] = self.remote.start(
                host,
                "torchrun",
                cmd,
                log_path=f"{rd}/logs/{host}/agent.log",
                env=self._rank_env(host, number),
                cwd=rd,
                local_log=self.run_dir / "logs" / f"agent-{host}.a{number}.log",
            )
            if s.metrics_agent:
                att.metrics[host] = self.remote.start(
                    host,
                    "metrics",
                    [
                        s.python,
                        "-c",
                        "from trainctl.cli.app import main; main()",
                        "agent",
                        "--out",
                        rd,
                        "--host",
                        host,
                        "--interval-s",
                        "1",
                        "--flush-s",
                        "5",
                    ],
                    log_path=f"{rd}/logs/{host}/metrics-agent.log",
                    cwd=rd,
                )

        res = self.remote.fan_out(hosts, start_host)
        if res.failed:
            self._stop(att)
            why = "; ".join(f"{h}: {o.error}" for h, o in res.failed.items())
            raise LaunchError(f"attempt {number}: could not start on every host ({why})")
        self.journal.write(
            "attempt_started", attempt=number, hosts=list(hosts), world_size=world, rendezvous=f"{rdzv_host}:{port}"
        )
        return att

    def _heartbeats(self, host: str) -> list[dict]:
        hb = _q(f"{self.spec.remote_run_dir}/heartbeats")
        out = self.remote.run(
            host, f'cd {hb} 2>/dev/null && for f in rank-*.json; do [ -f "$f" ] && cat "$f" && echo; done; true'
        )
        beats = []
        for line in out.splitlines():
            try:
                hb = json.loads(line)
            except ValueError:
                continue  # mid-rewrite; next poll
            # A rank names its host in its heartbeat (TRAINCTL_HOST). On a run dir that every host
            # mounts, each host sees every rank's file: a rank belongs to the host it names, never
            # to the host whose `cat` happened to return it.
            if isinstance(hb, dict) and hb.get("host", host) == host:
                beats.append(hb)
        return beats

    def _stop(self, att: _Attempt, grace_s: float = 10.0) -> None:
        procs = list(att.agents.values()) + list(att.metrics.values())
        self.remote.stop_all(procs, grace_s=grace_s)
        # torchrun starts each worker in its own session: kill what a SIGKILLed agent left behind,
        # on each host only its own ranks (a shared run dir holds every host's rank files).
        rd, run_id = self.spec.remote_run_dir, self.spec.run_id
        self.remote.fan_out(att.hosts, lambda h: self.remote.run(h, rank_sweep_command(rd, h, run_id), check=False))

    def _observe(self, att: _Attempt) -> local.Action | _Decided:
        s = self.spec
        tracker = local.ProgressTracker()
        slow = FailSlowDetector(ratio=s.fail_slow_ratio) if s.fail_slow else None  # per attempt: a resume re-baselines
        resumed = False
        while True:
            now = time.monotonic()
            polled = self.remote.poll_all(list(att.agents.values()))
            agents = []
            for h in att.hosts:
                o = polled.outcomes.get(h)
                if o is None or not o.ok:
                    # The host stopped answering SSH: for decide() its agent is gone.
                    agents.append(local.AgentState(h, 255))
                    continue
                st = o.value[0]
                agents.append(
                    local.AgentState(h, None if st.alive else (st.exit_code if st.exit_code is not None else -9))
                )
            beats = self.remote.fan_out(att.hosts, self._heartbeats)
            where: dict[int, str] = {}
            for h, o in beats.outcomes.items():
                for hb in o.value or []:
                    tracker.update(int(hb.get("rank", -1)), hb, now)
                    where[int(hb.get("rank", -1))] = h
            if not att.mapped and len(where) == s.nproc_per_node * len(att.hosts):
                self._write_rank_map(att, where)  # c10d assigns node ranks in join order, not host order
            action = local.decide(
                agents,
                tracker.progress,
                now_s=now,
                started_s=att.started_s,
                hang_timeout_s=s.hang_timeout_s,
                startup_timeout_s=s.startup_timeout_s,
            )
            if tracker.progress:
                steps = [p.step for p in tracker.progress.values()]
                self.status(f"attempt {att.number}: {len(tracker.progress)} ranks, step {min(steps)}..{max(steps)}")
            if action.kind is not local.ActionKind.WAIT:
                return action
            every = [hb for o in beats.outcomes.values() for hb in (o.value or [])]
            prog = job_progress(every) if len(every) == s.nproc_per_node * len(att.hosts) else None
            if prog is not None and not resumed:
                resumed = True  # every rank is stepping (for recovery timing: restore is done by here)
                self.journal.write("training_started", attempt=att.number, step=prog[0])
            if slow is not None and prog is not None:
                verdict = slow.observe(*prog)
                if verdict is not None:
                    decided = self._fail_slow(att, verdict, fault_counts=self._fault_counts)
                    if decided is not None:
                        return decided
            time.sleep(POLL_INTERVAL_S)

    def _fail_slow(
        self, att: _Attempt, verdict: FailSlowVerdict, *, fault_counts: Mapping[str, int]
    ) -> _Decided | None:
        """Collect + diagnose the live run (nothing is stopped) and ask the policy with FAIL_SLOW.

        The policy continues on stragglers and missing data: the incident stays on record with its
        findings and the run goes on. A hardware finding (or a user error) is acted on like any
        other fault: the caller stops the attempt and performs the action.
        """
        self.journal.write(
            "fault_detected",
            attempt=att.number,
            trigger=policy.Trigger.FAIL_SLOW.value,
            reason=verdict.summary(),
            hosts=[],
            evidence=verdict.to_dict(),
        )
        findings, rc, _ = self._incident(att, policy.Trigger.FAIL_SLOW)
        action = policy.decide(
            findings,
            self._restarts_used,
            self.spec.max_restarts,
            trigger=policy.Trigger.FAIL_SLOW,
            host_fault_counts=fault_counts,
        )
        if action.kind is policy.ActionKind.CONTINUE:
            self.journal.write(
                "decision",
                attempt=att.number,
                trigger=policy.Trigger.FAIL_SLOW.value,
                action=action.to_dict(),
                reason=action.reason,
                evidence=[f.to_dict() for f in action.evidence],
            )
            return None
        return _Decided(policy.Trigger.FAIL_SLOW, verdict.summary(), tuple(findings), rc, action)

    def _write_rank_map(self, att: _Attempt, where: Mapping[int, str]) -> None:
        att.mapped = True
        info = RunInfo(
            **{
                **self.info.__dict__,
                "hosts": tuple(HostRanks(h, tuple(sorted(r for r, x in where.items() if x == h))) for h in att.hosts),
            }
        )
        self.info = info
        write_run_info(self.run_dir, info)
        body = json.dumps(info.to_dict(), indent=2).encode()
        self.remote.fan_out(
            att.hosts, lambda h: self.remote.write_file(h, f"{self.spec.remote_run_dir}/run.json", body)
        )
        self.journal.write("rank_map", attempt=att.number, hosts={h.host: list(h.ranks) for h in info.hosts})

    def _dump_hung(self, att: _Attempt) -> None:
        """trainctl.runtime.hang_dump on each host (its ranks' sockets are local there)."""
        res = self.remote.fan_out(
            att.hosts,
            lambda h: self.remote.run(
                h, hang_dump_command(self.spec.python, self.spec.remote_run_dir, h), timeout_s=60
            ),
        )
        self.journal.write(
            "hang_dumps",
            attempt=att.number,
            hosts={h: (o.value.strip() if o.ok else f"error: {o.error}") for h, o in res.outcomes.items()},
        )

    def _incident(
        self, att: _Attempt, trigger: policy.Trigger, hang_seen: tuple[local.Action, int] | None = None
    ) -> tuple[list[Finding], local.RootCause | None, Path]:
        from trainctl.ops.collect.collection import CollectOptions, collect
        from trainctl.ops.diagnose.diagnosis import diagnose_path

        self.incidents += 1
        out = self.run_dir / "incidents" / str(self.incidents) / "dataset"
        t0 = time.monotonic()
        started_ts_ns = time.time_ns()
        res = collect(
            CollectOptions(
                run_dir=self.spec.remote_run_dir,
                out=out,
                hosts=att.hosts,
                ssh_config=self.spec.ssh_config,
                timeout_s=self.spec.collect_timeout_s,
                python=self.spec.python,
            ),
            client=self.client,
        )
        t1 = time.monotonic()
        if hang_seen is not None:  # as `launch --local` leaves it in the run dir: the stop that followed was ours
            local.write_hang_record(out, hang_seen[0], self.spec.hang_timeout_s, hang_seen[1])
        report = diagnose_path(out)
        t2 = time.monotonic()
        rc = local.root_cause(out, att.hosts)
        findings = list(report.findings)
        if rc is not None and trigger is policy.Trigger.CRASH:
            findings.append(first_failure_finding(rc))
        self.journal.write(
            "incident",
            attempt=att.number,
            incident=self.incidents,
            trigger=trigger.value,
            dataset=str(out),
            started_ts_ns=started_ts_ns,
            collect_s=round(t1 - t0, 3),
            diagnose_s=round(t2 - t1, 3),
            failed_hosts=[r.host for r in res.reports if r.failed],
            findings=[
                f"{f.kind.value}/{f.category.value if f.category else '-'} hosts={','.join(f.hosts)}: {f.summary}"
                for f in findings
            ],
            root_cause=rc.__dict__ if rc else None,
        )
        return findings, rc, out

    # -- the loop --------------------------------------------------------------------------------
    def run(self) -> SupervisorResult:
        s = self.spec
        validate(s)
        t0 = time.monotonic()
        hosts, spares = tuple(s.hosts), list(s.spares)
        restarts_used, evicted = 0, []
        fault_counts = self._fault_counts
        rc: local.RootCause | None = None
        self.journal.write(
            "run_started",
            run_id=s.run_id,
            hosts=list(hosts),
            spares=spares,
            max_restarts=s.max_restarts,
            remote_run_dir=s.remote_run_dir,
        )
        try:
            for number in range(1, MAX_ATTEMPTS + 1):
                att = self._start(number, hosts)
                self._restarts_used = restarts_used
                decided: _Decided | None = None
                hang_seen: tuple[local.Action, int] | None = None
                try:
                    obs = self._observe(att)
                    if isinstance(obs, _Decided):
                        decided = obs  # a fail-slow incident the policy acts on: already collected + diagnosed
                    elif obs.kind is local.ActionKind.SUCCEEDED:
                        self.journal.write(
                            "decision",
                            attempt=number,
                            observed=obs.kind.value,
                            reason=obs.reason,
                            action={"kind": "finish", "rule": "succeeded", "hosts": [], "evidence": []},
                        )
                        return SupervisorResult(
                            True, obs.reason, number, hosts, tuple(evicted), None, time.monotonic() - t0
                        )
                    else:
                        trigger = policy.Trigger.HANG if obs.kind is local.ActionKind.HUNG else policy.Trigger.CRASH
                        self.journal.write(
                            "fault_detected",
                            attempt=number,
                            trigger=trigger.value,
                            reason=obs.reason,
                            hosts=list(obs.hosts),
                        )
                        if trigger is policy.Trigger.HANG:
                            hang_seen = (obs, time.time_ns())  # the incident's dataset gets the record
                            self._dump_hung(att)
                        else:
                            time.sleep(BANNER_GRACE_S)
                finally:
                    self._stop(att, grace_s=5.0)
                if decided is not None:
                    trigger, findings, rc, action = decided.trigger, list(decided.findings), decided.rc, decided.action
                else:
                    findings, rc, _ = self._incident(att, trigger, hang_seen)
                    action = policy.decide(
                        findings, restarts_used, s.max_restarts, trigger=trigger, host_fault_counts=fault_counts
                    )
                for f in action.evidence:
                    for h in f.hosts:
                        fault_counts[h] = fault_counts.get(h, 0) + 1
                self.journal.write(
                    "decision",
                    attempt=number,
                    trigger=trigger.value,
                    action=action.to_dict(),
                    reason=action.reason,
                    evidence=[f.to_dict() for f in action.evidence],
                )
                if action.kind is policy.ActionKind.STOP_AND_REPORT or action.kind is policy.ActionKind.CONTINUE:
                    # CONTINUE after a crash/hang cannot happen (policy rule 5); stopping is the safe reading.
                    return SupervisorResult(
                        False, action.reason, number, hosts, tuple(evicted), rc, time.monotonic() - t0
                    )
                if action.kind is policy.ActionKind.RESTART_IN_PLACE:
                    restarts_used += 1
                    continue
                # EVICT_AND_RELAUNCH, of hosts that are in this run (a banner may name a host by
                # its own hostname, e.g. "localhost", which trainctl cannot evict or replace), in any
                # spelling and named as the run names them (host_key: NODE02 and node02:2222 are node02)
                in_run = {host_key(h): h for h in hosts}
                targets = list(dict.fromkeys(in_run[host_key(h)] for h in action.hosts if host_key(h) in in_run))
                if not targets:
                    if restarts_used < s.max_restarts:
                        restarts_used += 1
                        self.journal.write(
                            "note",
                            attempt=number,
                            reason=f"policy blamed {', '.join(action.hosts)}, "
                            "not hosts of this run: restarting in place instead",
                        )
                        continue
                    return SupervisorResult(
                        False,
                        f"{action.reason} (not a host of this run; restart budget exhausted)",
                        number,
                        hosts,
                        tuple(evicted),
                        rc,
                        time.monotonic() - t0,
                    )
                # the one eviction operation (trainctl.ops.evict.operation), as the CLI and playbooks use it
                eviction = evict_node(
                    EvictRequest(
                        targets=tuple(targets),
                        reason=action.reason,
                        run=s.run_id,
                        findings=tuple(f.to_dict() for f in action.evidence),
                        members=frozenset(hosts) | frozenset(spares),
                        ledger_extra={"attempt": number, "rule": action.rule},
                        relaunch=SupervisedRelaunch(
                            hosts=tuple(hosts),
                            spares=tuple(spares),
                            nproc_per_node=s.nproc_per_node,
                            layout=dict(self.layout),
                            script=s.script,
                            allow_shrink=s.allow_shrink,
                        ),
                    ),
                    ledger=self.ledger,
                )
                evicted.extend(eviction.hosts)
                plan = eviction.relaunch_plan
                assert plan is not None  # a SupervisedRelaunch always plans
                self.journal.write(
                    "relaunch_plan",
                    attempt=number,
                    plan=plan.to_dict(),
                    reason=plan.reason,
                    kind=plan.kind.value,
                    hosts=list(plan.hosts),
                )
                if plan.kind is PlanKind.STOP:
                    return SupervisorResult(
                        False,
                        f"{action.reason}; cannot relaunch: {plan.reason}",
                        number,
                        hosts,
                        tuple(evicted),
                        rc,
                        time.monotonic() - t0,
                    )
                if plan.kind is PlanKind.SHRINK and s.script is None:
                    # tp is fixed by the checkpoint's shards; without an explicit --tp the trainer
                    # args would pick it from the new world size's parity (local._trainer_tp).
                    self.spec = s = _pin_tp(s, int(self.layout.get("tp", 1)))
                spares = [x for x in spares if x not in plan.hosts]
                hosts = plan.hosts
            return SupervisorResult(
                False,
                f"stopped after {MAX_ATTEMPTS} attempts",
                MAX_ATTEMPTS,
                hosts,
                tuple(evicted),
                rc,
                time.monotonic() - t0,
            )
        finally:
            self.remote.close()


def supervise_hosts(
    spec: HostsSpec,
    *,
    notify: Callable[[str], None] = lambda s: None,
    status: Callable[[str], None] = lambda s: None,
    client: SshClient | None = None,
) -> SupervisorResult:
    """Run `spec` on its hosts until it finishes or the policy stops it (see the module docstring)."""
    return Supervisor(spec, notify=notify, status=status, client=client).run()
