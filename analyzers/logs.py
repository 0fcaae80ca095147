"""Log analyzer: classified log lines (log_events) -> findings.

Pure: a `log_events` table in (trainctl.collectors.logs builds it; any writer of the contract
works), `list[Finding]` out. What each line implicates is already in its row (`culprit_rank`,
`culprit_host`, with the reason in `fields.culprit_basis`); this module decides at the incident
level:

- Incidents: lines whose timestamps are more than `incident_gap_s` apart are separate incidents;
  lines without a timestamp belong to the incident of the line before them in the same file.
- Within an incident, specific lines outrank generic ones (teardown banners, agent restarts,
  "error or timeout" counters): generic lines only add evidence to a finding of their own kind, and
  make a finding of their own only when nothing specific is there.
- A torch-level NCCL error is refined by the transport detail after it (`Last error: socket...`,
  `NET/IB ...`): one network finding with the specific category, not two; an "unhandled cuda
  error" whose detail is a failed NCCL allocation is an out-of-memory.
- A host that reports its own fault (an HCA async error) outranks a peer address some other host
  implicated: the peer stays in the evidence, unblamed (the address cannot be mapped to a name).
- One finding per distinct (kind, category, culprit); lines that blame nobody join the blamed
  finding of the same kind and category, or form one finding with no culprit.
- Order: the first failure first (torchelastic's root cause when it settles the culprit, then by
  time/position; a network error that only names the peer its reporter lost goes after another
  process's own crash or OOM), each incident's first finding marked `first_failure`; a torchelastic banner for
  exit code 1 (an exception it quotes) goes after a specific non-crash finding of its incident (the
  exception's own line: an OOM, a mismatch, an NCCL error).
"""

from __future__ import annotations

import json
import logging
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import pyarrow as pa

from trainctl.analyzers.log_progress import progress_findings
from trainctl.findings import Category, Finding, FindingKind, Severity
from trainctl.schemas import PRINTER_RANK_BASES, SignalKind
from trainctl.signals import Signals

__all__ = ["BASIS_CONFIDENCE", "analyze_log_events", "analyze"]

logger = logging.getLogger(__name__)

# How directly the text names the culprit (fields.culprit_basis) -> finding confidence.
BASIS_CONFIDENCE: Mapping[str, float] = {
    "rank_prefix": 0.95,  # "[rank3]:" is torch's own prefix of the failing process' line
    "path": 0.95,  # logs/H/rank-R.log: the file is the rank's own stdout/stderr
    "elastic_sole_failure": 0.95,  # Root Cause with <NO_OTHER_FAILURES>
    "elastic_earliest_failure": 0.85,
    "pg_tag": 0.85,  # "[PG 0 (default_pg) Rank N]": global rank on the default group
    "rank_tag": 0.8,  # "[Rank N]" (old logs: group rank, usually the default group)
    "ray_prefix": 0.85,
    "pdsh_prefix": 0.85,
    "nccl_prefix": 0.85,
    "syslog": 0.85,
    "host_tag": 0.8,
    "rank_world": 0.8,
    "mpi_tag": 0.85,  # Open MPI --tag-output "[job,rank]<stdout>:": the MPI rank of the printing process
    "lightning_rank": 0.9,  # Lightning's "[rank: N] " prefix: the global rank of the process that logged
    "kubectl_prefix": 0.85,  # kubectl logs --prefix "[pod/NAME/CONTAINER] ": the pod that printed it
    "text": 0.9,  # the line itself names its own rank/node (Megatron's "Rank R ... node: N" checks)
    "elastic_single_host": 0.7,  # every failure of the banner on one host
    # the one classified exception of an excerpt whose torchelastic root cause exited with code 1 (an exception)
    "elastic_root_cause_exception": 0.7,
    "peer": 0.6,  # a remote end named by the side that saw the failure
    "absent_from_barrier": 0.7,  # the one rank of world_size that no waiting line names (complete roster)
    "desync_report": 0.85,  # torch's desync report: the rank it found behind in every rank's store trace
    "horovod_stall_report": 0.85,  # Horovod's stall inspector: the one rank missing from every stalled tensor
    "endpoint": 0.6,
    "sole_reporter": 0.6,  # the one process that printed every error line, unclassified ones of a crash or an OOM
    "fr_trace": 0.85,  # torch's Flight Recorder analyzer's "missing ranks" (global ranks of the group) pasted in a log
    "nccl_ras": 0.85,  # NCCL's RAS report names the node of a dead process or of a rank behind its communicator
    # Megatron-LM's StragglerDetector names the slowest rank, sustained over its reports: a framework's own timing,
    # below the runbooks' gate (a straggler is evicted on the timeline's evidence, not on a report's)
    "megatron_straggler_report": 0.7,
}
_NO_CULPRIT_SPECIFIC = 0.8  # classification confidence when nobody is blamed
_NO_CULPRIT_GENERIC = 0.5


@dataclass
class _Ev:
    order: int
    source: str
    line_no: int
    ts: datetime | None
    rank: int | None
    host: str | None
    kind: FindingKind
    category: Category | None
    severity: Severity
    signature: str
    message: str
    pg: str | None
    seq: int | None
    op: str | None
    xid: int | None
    gpu_pci: str | None
    exit_code: int | None
    culprit_rank: int | None
    culprit_host: str | None
    fields: dict[str, Any]
    incident: int = 0
    eff_ts: datetime | None = None

    @property
    def generic(self) -> bool:
        return bool(self.fields.get("generic"))

    @property
    def basis(self) -> str | None:
        return self.fields.get("culprit_basis")


@dataclass
class _Group:
    kind: FindingKind
    category: Category | None
    culprit_rank: int | None
    culprit_host: str | None
    events: list[_Ev] = field(default_factory=list)
    context: list[_Ev] = field(default_factory=list)  # generic lines attached as evidence
    demoted_peers: list[str] = field(default_factory=list)

    @property
    def severity_is_critical(self) -> bool:
        return any(e.severity is Severity.CRITICAL for e in self.events)


def _rows(table: pa.Table) -> list[_Ev]:
    cols = set(table.column_names)
    out: list[_Ev] = []
    for i, r in enumerate(table.to_pylist()):
        if not r.get("kind"):
            continue
        try:
            kind = FindingKind(r["kind"])
            cat = Category(r["category"]) if r.get("category") else None
            sev = Severity(r.get("severity") or "warning")
        except ValueError:
            logger.debug("skipping log event with unknown kind/category: %s", r)
            continue
        try:
            fields = json.loads(r["fields"]) if r.get("fields") else {}
        except (TypeError, ValueError):
            fields = {}
        ts = r.get("ts")
        if ts is not None and ts.tzinfo is None:
            ts = ts.replace(tzinfo=UTC)
        out.append(
            _Ev(
                i,
                r.get("source") or "",
                int(r.get("line_no") or 0),
                ts,
                r.get("rank"),
                r.get("host") if "host" in cols else None,
                kind,
                cat,
                sev,
                r.get("signature") or "",
                r.get("message") or "",
                r.get("pg"),
                r.get("seq"),
                r.get("op"),
                r.get("xid"),
                r.get("gpu_pci"),
                r.get("exit_code"),
                r.get("culprit_rank") if "culprit_rank" in cols else None,
                r.get("culprit_host") if "culprit_host" in cols else None,
                fields,
            )
        )
    return out


def _span(e: _Ev, at: datetime) -> tuple[datetime, datetime]:
    """From when what a line reports began to when it was printed (`at`). A collective timeout is printed once the
    collective has waited out its timeout (torch ProcessGroupNCCL's watchdog: "WorkNCCL(..., Timeout(ms)=T) ran for N
    milliseconds before timing out", gloo's "Timed out waiting Tms for ..."): the rank it waited for failed up to that
    long before the line, so the wait belongs to that failure's incident however long the timeout (10 or 30 minutes by
    default) was."""
    waited = e.fields.get("ran_ms") or e.fields.get("timeout_ms")
    if e.kind is FindingKind.HUNG_COLLECTIVE and isinstance(waited, int):
        return at - timedelta(milliseconds=waited), at
    return at, at


def _assign_incidents(evs: list[_Ev], gap_s: float) -> None:
    # Effective time: a line's own timestamp, else the last one seen above it in the same file.
    evs.sort(key=lambda e: (e.source, e.line_no, e.order))
    last: dict[str, datetime] = {}
    for e in evs:
        if e.ts is not None:
            last[e.source] = e.ts
        e.eff_ts = e.ts or last.get(e.source)
    # Each line spans from when what it reports began to when it was printed (one moment, but for a timeout's wait):
    # a span that begins within gap_s of the latest end before it is the same incident. A wait thus joins both the
    # failure it waited for and the teardown printed after it.
    spans = {id(e): _span(e, e.eff_ts) for e in evs if e.eff_ts is not None}
    cluster: dict[tuple[datetime, datetime], int] = {}
    idx, end = 0, None
    for began, printed in sorted(set(spans.values())):
        if end is not None and (began - end).total_seconds() > gap_s:
            idx += 1
        end = printed if end is None else max(end, printed)
        cluster[(began, printed)] = idx
    for e in evs:
        e.incident = cluster[spans[id(e)]] if id(e) in spans else 0
    src_order = {s: k for k, s in enumerate(OrderedDict.fromkeys(e.source for e in evs))}
    lo = datetime.min.replace(tzinfo=UTC)
    evs.sort(key=lambda e: (e.incident, e.eff_ts or lo, src_order[e.source], e.line_no, e.order))


def _groups_for_incident(evs: list[_Ev]) -> list[_Group]:
    specific = [e for e in evs if not e.generic]
    if specific:
        kinds = {e.kind for e in specific}
        used = specific
        attach = [e for e in evs if e.generic and e.kind in kinds]
    else:
        used, attach = list(evs), []
    # A torch-level NCCL error takes the transport category its detail line names.
    net_specific = [
        e.category for e in used if e.kind is FindingKind.NETWORK_ERROR and e.category not in (None, Category.NCCL)
    ]
    if net_specific:
        for e in used:
            if e.kind is FindingKind.NETWORK_ERROR and e.category is Category.NCCL:
                e.fields["refined_from"] = "nccl"
                e.category = net_specific[0]
    # NCCL's "unhandled cuda error" whose detail is an allocation NCCL could not make ("Failed to CUDA
    # calloc N bytes", NCCL src/include/alloc.h) or a CUDA call that ran out of memory (src/include/checks.h
    # CUDACHECK's "Cuda failure 'out of memory'", torch quoting it as the "Last error") is an out-of-memory: one
    # OOM finding, not a crash too.
    if any(
        e.signature == "nccl_cuda_alloc_failed" or (e.signature == "nccl_cuda_failure" and e.kind is FindingKind.OOM)
        for e in used
    ):
        for e in used:
            if e.signature == "nccl_error_unhandled_cuda":
                e.fields["refined_from"] = "cuda_error"
                e.kind, e.category = FindingKind.OOM, None
    # Self-reported faults outrank peer/endpoint implications of the same kind and category.
    self_blamed = {
        (e.kind, e.category)
        for e in used
        if (e.culprit_rank is not None or e.culprit_host) and e.basis not in ("peer", "endpoint")
    }
    demoted: dict[tuple[FindingKind, Category | None], list[str]] = {}
    for e in used:
        if (e.kind, e.category) in self_blamed and e.basis in ("peer", "endpoint") and e.culprit_host:
            demoted.setdefault((e.kind, e.category), []).append(e.culprit_host)
            e.fields["demoted_culprit_host"] = e.culprit_host
            e.culprit_host = None
    _blame_rank_absent_from_store_barrier(used)
    # A line that names a culprit rank only ("Unexpected result nan on rank 3") and a line of the same
    # kind that pairs that rank with its host ("Rank 3, node n17, ...") are one culprit, not two.
    hosts_of_rank: dict[tuple, set[str]] = {}
    for e in used:
        if e.culprit_rank is not None and e.culprit_host:
            hosts_of_rank.setdefault((e.kind, e.category, e.culprit_rank), set()).add(e.culprit_host)
    for e in used:
        paired = hosts_of_rank.get((e.kind, e.category, e.culprit_rank), set())
        if e.culprit_rank is not None and not e.culprit_host and len(paired) == 1:
            e.culprit_host = next(iter(paired))
    groups: OrderedDict[tuple, _Group] = OrderedDict()
    unblamed: list[_Ev] = []
    for e in used:
        if e.culprit_rank is None and not e.culprit_host:
            unblamed.append(e)
            continue
        key = (e.kind, e.category, e.culprit_rank, e.culprit_host)
        groups.setdefault(key, _Group(*key)).events.append(e)
    for e in unblamed:
        home = next((g for g in groups.values() if (g.kind, g.category) == (e.kind, e.category)), None)
        if home is None:
            key = (e.kind, e.category, None, None)
            home = groups.setdefault(key, _Group(*key))
        home.events.append(e)
    for e in attach:
        home = next((g for g in groups.values() if g.kind is e.kind and g.category == e.category), None) or next(
            (g for g in groups.values() if g.kind is e.kind), None
        )
        if home is not None:
            home.context.append(e)
    for g in groups.values():
        g.events.sort(key=lambda e: e.order)
        g.demoted_peers = sorted(set(demoted.get((g.kind, g.category), [])))
    return list(groups.values())


def _blame_rank_absent_from_store_barrier(evs: list[_Ev]) -> None:
    """torch's store-based barrier (c10d `_store_based_barrier`, 1.7-1.13) logs "Waiting in store based
    barrier to initialize process group for rank: R, key: K (world_size=W, worker_count=C, ...)" from
    every rank that arrived, C counting them. When the lines name exactly C distinct ranks and C = W - 1,
    they are the whole roster of arrivals: the one rank in range(W) they do not name never arrived.
    Anything less complete (other counts, several keys, missing lines) names nobody."""
    waits = [e for e in evs if e.signature == "store_based_barrier_wait"]
    try:
        worlds = {int(e.fields["world_size"]) for e in waits}
        counts = {int(e.fields["worker_count"]) for e in waits}
        keys = {e.fields.get("key") for e in waits}
        arrived = {int(e.fields["barrier_rank"]) for e in waits}
    except (KeyError, TypeError, ValueError):
        return
    if len(worlds) != 1 or len(counts) != 1 or len(keys) != 1:
        return
    (world,), (count,) = worlds, counts
    absent = set(range(world)) - arrived
    if count != world - 1 or len(arrived) != count or len(absent) != 1:
        return
    (rank,) = absent
    for e in waits:
        e.culprit_rank = rank
        e.fields["culprit_basis"] = "absent_from_barrier"
        e.fields["arrived_ranks"] = sorted(arrived)


def _sorted_unique(values: Any) -> list[Any]:
    return sorted({v for v in values if v is not None}, key=lambda v: (str(type(v)), v))


@dataclass(frozen=True)
class _Said:
    """What a signature's own summary reads: the group's speaking line and its fields, and whom the group names."""

    first: _Ev
    f: dict[str, Any]
    on: str  # " on rank R / host H", or ""
    names_someone: bool
    kind: FindingKind


def _stack_dump_summary(s: _Said) -> str:
    frames = s.f.get("frames") or []
    return f"stack dump of a live rank: thread {s.f.get('thread', '?')} ({s.f.get('thread_state', '?')})" + (
        f" in {frames[0]}" if frames else ""
    )


def _gdb_frame_summary(s: _Said) -> str:
    return f"stack of a live process: a thread inside {s.f.get('func', '?')} ({s.f.get('lib', '?')}){s.on}"


def _nccl_return_trace_summary(s: _Said) -> str:
    f = s.f
    return (
        f"an NCCL call failed with {f.get('nccl_result')} ({f.get('nccl_result_code')}){s.on}: only NCCL's return "
        f"trail says so ({f.get('trace_lines')} 'file:line -> N' lines, no WARN line)"
    )


def _coll_mismatch_summary(s: _Said) -> str:
    calls = s.f.get("calls_by_process") or {}
    odd = s.f.get("odd_processes") or []
    rest = sorted({c for p, c in calls.items() if p not in odd})
    return (
        f"processes called different collectives at NCCL opCount {s.f.get('op_count')}: "
        + "; ".join(f"{p} {calls[p]}" for p in odd[:4])
        + (f" while the other {len(calls) - len(odd)} called {rest[0]}" if rest else "")
        + " (the program's ranks disagree; the lines do not say which side is wrong)"
    )


def _loss_collapse_summary(s: _Said) -> str:
    f = s.f
    start = (
        f"loss fell from {f['loss_before']} to exactly 0 and stayed there"
        if f.get("loss_before") is not None
        else "loss is exactly 0 on every printed step"
    )
    grad = ", and so is the gradient norm" if f.get("grad_norm_zero") else ""
    return (
        f"{start} ({f.get('zero_lines')} lines to the end){grad}: the loss is no longer computed over anything "
        "(all labels masked, an underflow, a broken loss path)"
    )


def _loss_divergence_summary(s: _Said) -> str:
    f = s.f
    return (
        f"loss diverged: it ends at {f.get('loss_last')}, {f.get('loss_last', 0) / f.get('loss_low', 1):.1f}x its "
        f"earlier low of {f.get('loss_low')} ({f.get('loss_lines')} loss lines; a spike that did not come back)"
    )


def _ranked_exception_summary(s: _Said) -> str:
    raisers = s.f.get("raising_ranks") or []
    subject = s.on.removeprefix(" on ") if s.names_someone else f"ranks {', '.join(map(str, raisers))} (each)"
    words = f" (its words '{s.f['kind_from_words']}' say {s.kind.value})" if s.f.get("kind_from_words") else ""
    return f"{subject} raised {s.first.message[:200]}{words}"


def _command_not_found_summary(s: _Said) -> str:
    cmd = s.f.get("command") or "its command"
    return (
        f"the shell could not find {cmd!r} (exit 127){s.on}: the job never started (a PATH or an environment not"
        " activated, sudo's secure_path), not a machine's fault"
    )


# Signatures (and readings across lines) whose evidence says more than their kind's summary would: each speaks
# for its group in its own words. The rest are summarized by kind in _summary.
def _megatron_straggler_summary(s: _Said) -> str:
    f = s.f
    return (
        f"straggler{s.on}: Megatron's straggler reports name it the slowest rank in {f.get('reports_slowest')} of"
        f" {f.get('reports')} reports, {f.get('slowdown_ratio')}x the fastest rank's time per iteration in the traced"
        " operations (median); the report does not say its host"
    )


def _ras_behind_summary(s: _Said) -> str:
    f = s.f
    did = (
        f"launched {f.get('op')} operations up to {f.get('launched')}"
        if f.get("launched")
        else f"launched no {f.get('op')} operation"
    )
    return (
        f"hung collective{s.on}: NCCL's RAS report says rank {f.get('comm_rank')} of communicator {f.get('comm_hash')}"
        f" (process {f.get('pid')}) {did} while others reached {f.get('most_launched')}: the others wait in the"
        " collectives it never called"
    )


def _ras_error_summary(s: _Said) -> str:
    f = s.f
    where = f" on node {f['node']}" if f.get("node") and not s.on else s.on
    return (
        f"{s.kind.value.replace('_', ' ')}{where}: NCCL's RAS report says rank {f.get('comm_rank')} of communicator"
        f" {f.get('comm_hash')} (process {f.get('pid')}) reported '{f.get('error')}'"
        f" ({(f.get('error_phase') or '').lower() or 'an'} error)"
        + ("" if s.names_someone else ": what that rank saw, not necessarily where the fault is")
    )


def _ras_dead_summary(s: _Said) -> str:
    return (
        f"process {s.f.get('pid')}{s.on} is dead in NCCL's RAS report (unreachable via the RAS network): it exited"
        " or its host stopped answering, and its communicators' other ranks wait for it"
    )


def _fr_trace_summary(s: _Said) -> str:
    f = s.f
    missing = f.get("missing_ranks") or []
    who = f"rank {missing[0]}" if len(missing) == 1 else f"ranks {', '.join(map(str, missing))}"
    seq = f" (sequence number {f.get('seq')})" if f.get("seq") is not None else ""
    later = f.get("reports", 1) - 1
    return (
        f"hung collective: torch's Flight Recorder analyzer found {who} missing from {f.get('collective') or 'a'}"
        f" collective{seq}: never called it, the others wait there"
        + (f"; {later} later report{'s' if later != 1 else ''} queue behind it" if later > 0 else "")
    )


def _monitored_barrier_summary(s: _Said) -> str:
    # torch ProcessGroupGloo.cpp monitoredBarrier: rank 0 waits for every rank and names those that never came; the
    # line is rank 0's report about them, not theirs (so "reported by" would name the wrong side)
    if failed := s.f.get("failed_ranks"):
        return (
            f"ranks {failed} never reached the monitored barrier (rank 0, which waits for every rank, names them:"
            " stuck or gone; several ranks, so none is blamed alone)"
        )
    return (
        f"rank {s.first.culprit_rank} never reached the monitored barrier in {s.f.get('timeout_ms', '?')} ms"
        " (rank 0, which waits for every rank, names it: stuck or gone)"
    )


def _horovod_stall_summary(s: _Said) -> str:
    f = s.f
    missing = f.get("missing_ranks") or []
    who = (
        f"rank {missing[0]} missing (the rank behind)"
        if len(missing) == 1
        else f"ranks {', '.join(map(str, missing))} missing"
        if missing
        else "the missing ranks not in the excerpt"
    )
    shut = "; Horovod shuts the job down" if s.first.severity is Severity.CRITICAL else ""
    return (
        f"Horovod stall: tensors submitted by some ranks wait for the rest past {f.get('stall_s', '?')} s, {who}" + shut
    )


def _nvrx_monitor_summary(s: _Said) -> str:
    f = s.f
    if f.get("section"):
        what = f"its '{f['section']}' section stayed open {f.get('open_s')} s"
    elif f.get("out_s"):
        what = f"it stayed out of any section {f['out_s']} s"
    else:
        what = f"no heartbeat came for {f.get('waited_s')} s"
    return (
        f"hung: NVIDIA's resiliency extension's rank monitor stopped a rank ({what}, past its timeout); in a collective"
        " hang every rank's monitor says so: the lines name who noticed, not the rank at fault"
    )


def _slurm_cancel_summary(s: _Said) -> str:
    """slurmstepd's "*** JOB J ON N CANCELLED AT T [DUE TO R] ***" (process_exits.slurm_cancelled): the scheduler ended
    the job; what it says of the run depends on the reason."""
    reason = s.f.get("cancel_reason")
    if reason == "TIME LIMIT":
        return (
            f"Slurm cancelled the job at its time limit{s.on}: the scheduler ended it, no failure of its own is"
            " printed with it; a run still stepping until then needed more time, one that had stopped stepping"
            " before it hung"
        )
    if reason == "PREEMPTION":
        return (
            f"Slurm preempted the job{s.on}: a job of higher priority took its nodes (requeue it, resume from a"
            " checkpoint)"
        )
    if reason == "NODE FAILURE":
        return f"Slurm cancelled the job after a node failure{s.on}: slurmctld's log names the node"
    return f"Slurm cancelled the job{s.on} (scancel, or the scheduler): no failure of its own is printed with it"


def _fabric_status_summary(s: _Said) -> str:
    return (
        f"a GPU failed to register with its NVLink fabric{s.on} (nvidia-smi -q Fabric: state Completed, status"
        f" '{s.f.get('fabric_status', '?')}'): CUDA will not start on it until the fabric manager or NVSwitch is fixed"
    )


_SIGNATURE_SUMMARIES: Mapping[str, Callable[[_Said], str]] = {
    "slurm_cancelled": _slurm_cancel_summary,
    "nvidia_smi_fabric_status": _fabric_status_summary,
    "nvrx_rank_monitor_timeout": _nvrx_monitor_summary,
    "fr_trace_missing_ranks": _fr_trace_summary,
    "horovod_stall_warning": _horovod_stall_summary,
    "monitored_barrier_failed": _monitored_barrier_summary,
    "nccl_ras_rank_behind": _ras_behind_summary,
    "nccl_ras_dead_process": _ras_dead_summary,
    "nccl_ras_rank_error": _ras_error_summary,
    "megatron_straggler_report": _megatron_straggler_summary,
    "shell_command_not_found": _command_not_found_summary,
    "stack_dump_thread": _stack_dump_summary,
    "gdb_frame_in_cuda": _gdb_frame_summary,
    "nccl_return_trace": _nccl_return_trace_summary,
    "nccl_coll_mismatch": _coll_mismatch_summary,
    "loss_collapsed_to_zero": _loss_collapse_summary,
    "loss_diverged": _loss_divergence_summary,
    "ranked_exception": _ranked_exception_summary,
}


def _summary(g: _Group, ev: dict[str, Any]) -> str:
    # The most severe line speaks for the group (a final E-level error over W-level retries).
    first = max(g.events, key=lambda e: (e.severity.rank, "refined_from" not in e.fields))
    f = first.fields
    who = []
    if g.culprit_rank is not None:
        who.append(f"rank {g.culprit_rank}")
    if g.culprit_host:
        who.append(f"host {g.culprit_host}")
    on = f" on {' / '.join(who)}" if who else ""
    reporters = ev.get("reporting_ranks") or []
    rep = f" reported by rank{'s' if len(reporters) != 1 else ''} {', '.join(map(str, reporters))}" if reporters else ""
    k = g.kind
    if ev.get("arrived_ranks") is not None and g.culprit_rank is not None:
        arrived = ev["arrived_ranks"]
        return (
            f"rank {g.culprit_rank} never reached the store-based barrier of process-group init: "
            f"{len(arrived)} of {len(arrived) + 1} ranks wait there ({', '.join(map(str, arrived))}) and none names it"
        )
    if g.category is Category.UNCLASSIFIED:
        n = len(g.events) + int(first.fields.get("more_unclassified_lines") or 0)
        words = f.get("kind_from_words")
        what = (
            f"the log ends on {n} line{'s' if n != 1 else ''} saying something failed"
            if f.get("read_at_log_end")
            else f"{n} error-looking line{'s' if n != 1 else ''}"
        )
        return (
            f"unclassified error{on} (no known signature; {what}"
            + (f"; its words '{words}' say {k.value}" if words else "")
            + (
                f"; its traceback stops inside a collective call ('{f['cut_in_collective'][:80]}'): the collective"
                " failed, its exception line is not in the text"
                if f.get("cut_in_collective")
                else ""
            )
            + f"): {first.message[:200]}"
        )
    if (own := _SIGNATURE_SUMMARIES.get(first.signature)) is not None:
        return own(_Said(first, f, on, bool(who), k))
    if k is FindingKind.HUNG_COLLECTIVE:
        if f.get("interrupted_by_user"):
            return (
                "the run was stopped by hand (SIGINT, a terminal's Ctrl-C) with no failure line before it: "
                "most often a stall someone gave up on"
            )
        if g.category is Category.COLLECTIVE_TIMEOUT:
            ops = ", ".join(ev.get("ops", [])) or "a collective"
            seqs = ev.get("seqs", [])
            s = f"collective timeout: {ops}" + (f" SeqNum {', '.join(map(str, seqs))}" if seqs else "")
            if ev.get("timeout_ms"):
                s += f" after {ev['timeout_ms'][0]} ms"
            s += rep
            if ev.get("seq_by_rank") and len(set(ev["seq_by_rank"].values())) > 1:
                top = max(ev["seq_by_rank"].values())
                ahead = [r for r, v in ev["seq_by_rank"].items() if v == top]
                s += f"; rank {', '.join(ahead)} is at a later SeqNum ({top}) than the others (an outlier, not proven the cause)"
            elif not who:
                s += "; the lines name who noticed, not the rank that never arrived"
            if (lag := next((e for e in g.events if e.basis == "desync_report"), None)) is not None:
                s += f"; torch's desync report names rank {lag.culprit_rank} as the one behind: {lag.message[:160]}"
            return s
        last = ev.get("last_collective_by_rank") or {}
        if not last:  # no per-rank trace to list: the line says what stalled
            return f"stalled in a collective or a CUDA/NCCL call{on}: {first.message[:200]}"
        return "collective trace (DETAIL): last collective per rank: " + ", ".join(
            f"rank {r} {v}" for r, v in last.items()
        )
    if k is FindingKind.CRASH:
        if g.category is Category.CUDA_ERROR:
            if errs := ev.get("cuda_errors"):
                return f"CUDA error '{errs[0]}'{on}"
            return f"CUDA error{on}: {first.message[:200]}"  # the line names no error string: it says what failed
        codes = ev.get("exit_codes") or []
        sig = ev.get("signals") or []
        # The worker the summary speaks of gives its own code and signal: the group's lists are sorted, so where two
        # agents report different exits their first entries pair one line's code with another's signal (-9 read as
        # SIGABRT, the -6 of the line after it).
        own = first if first.exit_code is not None else next((e for e in g.events if e.exit_code is not None), None)
        code = own.exit_code if own is not None else None
        signal = own.fields.get("signal") if own is not None else None
        if signal is None and len(sig) == 1:
            signal = sig[0]
        what = f"exit code {code}" if code is not None else "a failure"
        # A signal names this exit only where the code says a signal ended it (torchelastic's -N, a shell's 128+N)
        # or there is no code: next to an exit code 1 it is torchelastic's closing signal to the other workers.
        if signal and (code is None or code < 0 or code > 128):
            what += f" ({signal})"
        lr = f.get("local_rank")
        subject = on.removeprefix(" on ") if who else (f"a worker (local_rank {lr})" if lr is not None else "a worker")
        if g.category is None and not codes and not sig:  # no exit to report: the line says what failed
            return f"{subject} failed: {first.message[:200]}"
        return f"{subject} exited with {what}" + ("" if who else "; the text does not name its global rank")
    if k is FindingKind.OOM:
        tried = f.get("tried")
        gpu = f.get("gpu")
        return (
            f"out of memory{on}"
            + (f": tried to allocate {tried}" if tried else "")
            + (f" on local GPU {gpu}" if gpu is not None else "")
        )
    if k is FindingKind.NETWORK_ERROR:
        cat = g.category.value if g.category else "network"
        detail = (
            f.get("reason") or f.get("ib_event") or f.get("nccl_reason") or f.get("gloo_what") or first.message[:120]
        )
        s = f"{cat} error{on}: {detail}"
        peers = ev.get("peers") or []
        if peers and not g.culprit_host:
            s += f" (peer {', '.join(peers)} named, not blamed)"
        return s
    if k is FindingKind.NUMERICAL:
        if g.category is Category.OVERFLOW:
            return f"fp16 loss-scale overflow on {len(g.events)} line(s)" + (
                f", loss scale {ev['loss_scales'][0]} and falling" if ev.get("loss_scales") else ""
            )
        return f"NaN/inf {', '.join(ev.get('metrics') or ['value'])} on {len(g.events)} line(s)"
    if k is FindingKind.RENDEZVOUS_ERROR:
        peers = ev.get("peers") or []
        s = f"rendezvous failed{on}: {first.message[:160]}"
        if peers and not g.culprit_host:
            s += (
                f" (endpoint {', '.join(peers)} is not a plausible host: check MASTER_ADDR/hostname)"
                if first.severity is not Severity.INFO or len(g.events) > 1
                else ""
            )
        return s
    if k is FindingKind.FAULTY_HOST:
        xids = ev.get("xids") or []
        pcis = ev.get("gpu_pcis") or []
        meaning = ev.get("xid_meanings") or []
        s = f"{g.category.value if g.category else 'GPU'} fault{on}"
        if xids:
            s += f": Xid {', '.join(map(str, xids))} ({'; '.join(meaning)})"
        if pcis:
            s += f" on GPU {', '.join(pcis)}"
        elif switches := ev.get("switch_pcis"):
            s += f" on NVSwitch {', '.join(switches)}"
        return s
    return f"{k.value}{on}: {first.message[:160]}"


_EXIT_REPORT = frozenset({Category.EXIT_CODE, Category.SIGNAL})


def _fold_exit_reports(groups: list[_Group]) -> list[_Group]:
    """A process's exit seen from outside (torchrun's banner, the agent's "failed (exitcode: -6)",
    "Fatal Python error: Aborted") names the same rank and host as the error that rank printed
    itself (a CUDA error, an OOM, an NCCL error): one failure, so the exit lines become evidence of
    the error's finding. Seen on an H100: a device-side assert, then the NCCL watchdog's abort
    (SIGABRT), gave two critical crash findings for rank 0. Only an exact (rank, host) match folds;
    an exit whose rank printed nothing classified stays a finding of its own."""
    causes = {
        (g.culprit_rank, g.culprit_host): g
        for g in reversed(groups)
        if g.category not in _EXIT_REPORT and g.severity_is_critical and (g.culprit_rank is not None or g.culprit_host)
    }
    out = []
    for g in groups:
        home = causes.get((g.culprit_rank, g.culprit_host))
        if g.kind is FindingKind.CRASH and g.category in _EXIT_REPORT and home is not None:
            home.context.extend(g.events + g.context)
            continue
        out.append(g)
    return out


def _adopt_root_cause(groups: list[_Group]) -> list[_Group]:
    """torchelastic's root cause that exited with code 1 (a Python exception: a signal or a kill is another
    exit code) names the rank that raised first; where the excerpt holds exactly one classified exception
    that names no culprit of its own (an OOM, a NaN check, an NCCL error printed without a rank prefix) and
    no other rank printed it, that exception is the root cause's: it takes the rank and host, and the
    banner becomes its evidence (one failure, not an exit plus an anonymous error)."""
    roots = [
        g for g in groups
        if any(e.signature == "elastic_root_cause" and e.culprit_rank is not None and e.exit_code == 1
               and e.category is Category.EXIT_CODE for e in g.events)
    ]  # fmt: skip
    if len(roots) != 1:
        return groups
    root = roots[0]
    orphans = [
        g for g in groups
        if g is not root and g.kind is not FindingKind.CRASH and g.culprit_rank is None and not g.culprit_host
        and not all(e.generic for e in g.events) and all(e.rank in (None, root.culprit_rank) for e in g.events)
    ]  # fmt: skip
    if len(orphans) != 1:
        return groups
    cause = orphans[0]
    cause.culprit_rank, cause.culprit_host = root.culprit_rank, root.culprit_host
    for e in cause.events:
        e.fields.setdefault("culprit_basis", "elastic_root_cause_exception")
        e.culprit_rank, e.culprit_host = root.culprit_rank, root.culprit_host
    cause.context.extend(root.events + root.context)
    return [g for g in groups if g is not root]


# Prefixes that say which process printed a line (collectors/log_records.py): torch's "[rank3]:", Lightning's
# "[rank: 3]", Open MPI's "[1,3]<stderr>:", ProcessGroupNCCL's "[PG 0 (default_pg) Rank 3]" (put in the rank only
# for the default group); NCCL's "host:pid:tid [dev]", kubectl's "[pod/NAME/C]", syslog's host field, Ray's
# "(pid=..., ip=...)". Not a bare "[Rank 0]" (DeepSpeed's log_dist prints it from the one rank that logs for all)
# nor pdsh's "word: " (a program's "nvidia-container-cli: error" reads the same).
_REPORTER_RANK_BASES = PRINTER_RANK_BASES | {"pg_tag"}
_REPORTER_HOST_BASES = frozenset({"nccl_prefix", "kubectl_prefix", "syslog", "ray_prefix", "host_tag"})
# Failures that happen in the process that prints them (its exception, its allocation). Not a hang, a timeout, a
# network error or a mismatch (there the printer is often the rank left waiting on the culprit), nor a NaN loss
# (the loss is reduced over every rank and printed by the one that logs).
_FAILS_WHERE_PRINTED = frozenset({FindingKind.CRASH, FindingKind.OOM})


def _name_sole_reporter(incident: list[_Ev], groups: list[_Group]) -> list[_Group]:
    """Error-looking lines no signature knows (a crash or an OOM by their words) in an incident whose every error
    line one process printed (one rank by its prefix, or one host): that process is where it failed, named with
    the reporter's confidence (basis "sole_reporter", below the runbooks' default gate: it informs, it does not
    evict). Two reporters or more name nobody: which one failed first is not in the lines. A signature that
    blames nobody keeps it so: it says so on purpose (a signal sent from outside, a program bug every rank hits)."""
    ranks = {e.rank for e in incident if e.rank is not None and e.fields.get("rank_basis") in _REPORTER_RANK_BASES}
    ranks.update(r for e in incident for r in e.fields.get("raising_ranks") or ())  # the same exception, each rank
    hosts = {e.host for e in incident if e.host and e.fields.get("host_basis") in _REPORTER_HOST_BASES}
    for g in groups:
        if g.culprit_rank is not None or g.culprit_host or g.kind not in _FAILS_WHERE_PRINTED:
            continue
        if not all(e.fields.get("unclassified") for e in g.events):
            continue
        if len(ranks) == 1 and any(e.rank in ranks for e in g.events):
            g.culprit_rank = next(iter(ranks))
        if len(hosts) == 1 and any(e.host in hosts for e in g.events):
            g.culprit_host = next(iter(hosts))
        if g.culprit_rank is None and not g.culprit_host:
            continue
        for e in g.events:
            e.culprit_rank, e.culprit_host = g.culprit_rank, g.culprit_host
            e.fields["culprit_basis"] = "sole_reporter"
    return groups


def _late_banner(g: _Group, groups: list[_Group], pos: Mapping[int, int]) -> bool:
    """Whether torchelastic's banner in `g` (its "Root Cause (first observed failure)", naming a rank) goes below
    another failure of its incident instead of first; two cases, both from what the banner can and cannot see.

    Another rank's failure came first: the banner names the first failure its own agent observed (torch/distributed/
    elastic/multiprocessing/errors/__init__.py ChildFailedError.get_first_failure, v2.13: the earliest failure among
    that agent's own workers), and on a run of several agents a rank on another node (or one whose own line came
    first) may have failed before it. Where the root cause exited 1 (a Python exception) or -6 (SIGABRT: torch's NCCL
    watchdog aborts its process after a collective timed out or an NCCL error it noticed) and an earlier line of the
    incident blames another rank for its own failure (an OOM, a CUDA error printed under that rank's prefix), that
    failure came first: the banner says where its consequence surfaced.

    Its own rank's exception is classified: exit 1 is the interpreter's for an uncaught exception, and -6 is the
    abort torch's NCCL watchdog raises after it reports a timeout or an NCCL error (ProcessGroupNCCL.cpp, v2.13:
    "To avoid data inconsistency, we are taking the entire process down." then std::abort / an uncaught exception in
    the watchdog thread). Where the excerpt printed a classified exception or watchdog report before the banner (a
    rendezvous or network error, a timeout, a mismatch, a NaN check) from that rank or with no rank prefix, that is
    what the banner reports: the cause goes first, with its own blame (a rank that could not reach the store is not
    the store's fault), and the banner is its evidence of where it surfaced."""
    roots = [e for e in g.events if e.signature == "elastic_root_cause" and e.culprit_rank is not None]
    codes = {e.exit_code for e in roots}
    if not roots or not codes <= {1, -6}:
        return False
    first = min(pos[id(e)] for e in g.events)
    ranks = {e.culprit_rank for e in roots}
    others = [o for o in groups if o is not g and not all(e.generic for e in o.events)]
    another_rank_first = any(
        e.culprit_rank is not None and e.culprit_rank not in ranks and e.basis not in ("peer", "endpoint")
        for o in others
        for e in o.events
        if pos[id(e)] < first
    )
    own_exception_first = any(
        o.kind is not FindingKind.CRASH
        and o.severity_is_critical
        and all(e.rank is None or e.rank in ranks for e in o.events)
        and min(pos[id(e)] for e in o.events) < first
        for o in others
    )
    return another_rank_first or own_exception_first


def _printer_of(e: _Ev) -> tuple[str | None, int | None, int | None]:
    """The process that printed a line, as far as the line says: its host, NCCL's pid on it, its rank."""
    return e.host, e.fields.get("nccl_pid"), e.rank


def _finding(g: _Group, incident: int, first_failure: bool, rank_to_host: Mapping[int, str], max_lines: int) -> Finding:
    evs = g.events
    allv = evs + g.context
    severity = max((e.severity for e in evs), key=lambda s: s.rank)
    bases = [e.basis for e in evs if e.basis and (e.culprit_rank is not None or e.culprit_host)]
    if g.culprit_rank is not None or g.culprit_host:
        confidence = max(BASIS_CONFIDENCE.get(b, 0.6) for b in bases) if bases else 0.6
    else:
        confidence = _NO_CULPRIT_GENERIC if all(e.generic for e in evs) else _NO_CULPRIT_SPECIFIC
    hosts: list[str] = []
    if g.culprit_host:
        hosts.append(g.culprit_host)
    elif g.culprit_rank is not None and g.culprit_rank in rank_to_host:
        hosts.append(rank_to_host[g.culprit_rank])
    evidence: dict[str, Any] = {
        "lines": [f"{e.source}:{e.line_no}: {e.message[:400]}" for e in allv[:max_lines]],
        "line_count": len(allv),
        "signatures": _sorted_unique(e.signature for e in allv),
        "incident": incident,
        "first_failure": first_failure,
    }
    if bases:
        evidence["culprit_basis"] = _sorted_unique(bases)
    ranks_seen = _sorted_unique(e.rank for e in allv)
    if ranks_seen:
        evidence["reporting_ranks"] = ranks_seen
    hosts_seen = _sorted_unique(e.host for e in allv)
    if hosts_seen:
        evidence["reporting_hosts"] = hosts_seen
    for name, attr in (
        ("seqs", "seq"),
        ("ops", "op"),
        ("pgs", "pg"),
        ("xids", "xid"),
        ("gpu_pcis", "gpu_pci"),
        ("exit_codes", "exit_code"),
    ):
        vals = _sorted_unique(getattr(e, attr) for e in evs)
        if vals:
            evidence[name] = vals
    for name, key in (
        ("peers", "peer"),
        ("signals", "signal"),
        ("cuda_errors", "cuda_error"),
        ("timeout_ms", "timeout_ms"),
        ("metrics", "metric"),
        ("nccl_versions", "nccl_version"),
        ("ib_statuses", "ib_status"),
        ("recovery_actions", "recovery_action"),
        ("detector_ranks", "detector_rank"),
        ("errnos", "errno"),
        ("reported_xids", "reported_xid"),
        ("switch_pcis", "switch_pci"),  # an NVSwitch's address (an SXid's), not a GPU's
        ("local_ranks", "local_rank"),
        ("identity_lines", "identity_line"),  # the line that paired the culprit's rank with its host/pid
        ("raised_in", "raised_in"),  # the rendezvous frame an unknown exception was raised in
    ):
        vals = _sorted_unique(e.fields.get(key) for e in allv)
        if vals:
            evidence[name] = vals
    if g.kind is FindingKind.FAULTY_HOST:
        evidence["xid_meanings"] = _sorted_unique(e.fields.get("xid_meaning") for e in evs)
    if g.kind is FindingKind.NUMERICAL:
        scales = [e.fields.get("loss_scale") for e in evs if e.fields.get("loss_scale")]
        if scales:
            evidence["loss_scales"] = scales[:1]
    if g.demoted_peers:
        evidence["implicated_peers_not_blamed"] = g.demoted_peers
    progress = {
        str(e.rank): {"last_enqueued": e.fields["last_enqueued"], "last_completed": e.fields["last_completed"]}
        for e in allv
        if e.rank is not None and "last_enqueued" in e.fields
    }
    if progress:
        evidence["progress_by_rank"] = progress
    timeouts = [e for e in evs if e.signature == "nccl_watchdog_timeout" and e.rank is not None and e.seq is not None]
    if timeouts:
        evidence["seq_by_rank"] = {str(e.rank): e.seq for e in sorted(timeouts, key=lambda e: e.rank)}
    traces = [e for e in evs if e.signature == "collective_fingerprint_trace" and e.rank is not None]
    if traces:
        last: dict[str, str] = {}
        for e in traces:
            last[str(e.rank)] = f"seq {e.seq} {e.op}"
        evidence["last_collective_by_rank"] = dict(sorted(last.items()))
    arrived = next((e.fields["arrived_ranks"] for e in evs if e.fields.get("arrived_ranks")), None)
    if arrived is not None:
        evidence["arrived_ranks"] = arrived  # the roster the absent culprit is read from
    frames = next((e.fields.get("frames") for e in evs if e.fields.get("frames")), None)
    if frames:
        evidence["frames"] = frames
    return Finding(
        kind=g.kind,
        severity=severity,
        summary=_summary(g, evidence),
        category=g.category,
        hosts=tuple(hosts),
        ranks=(g.culprit_rank,) if g.culprit_rank is not None else (),
        confidence=confidence,
        evidence=evidence,
    )


def analyze_log_events(
    table: pa.Table,
    *,
    rank_to_host: Mapping[int, str] | None = None,
    incident_gap_s: float = 600.0,
    max_evidence_lines: int = 20,
) -> list[Finding]:
    """Findings from classified log lines, first failure first.

    incident_gap_s: lines whose (effective) timestamps are further apart than this belong to
        separate incidents (a crash loop's restarts are separate incidents).
    max_evidence_lines: how many matching lines each finding quotes (all are counted).
    rank_to_host: from the run's RunInfo, to name the host of a blamed rank.
    """
    evs = [e for e in _rows(table) if not e.fields.get("progress_reading")]
    if not evs:  # no line says what failed: at most a reading of absence (analyzers/log_progress.py)
        return progress_findings(table)
    _assign_incidents(evs, incident_gap_s)
    pos = {id(e): i for i, e in enumerate(evs)}  # time/position order after _assign_incidents
    findings: list[Finding] = []
    for incident in sorted({e.incident for e in evs}):
        in_incident = [e for e in evs if e.incident == incident]
        groups = _adopt_root_cause(_fold_exit_reports(_groups_for_incident(in_incident)))

        # (read before the sort below: a list being sorted reads as empty)
        late_banners = {id(g) for g in groups if _late_banner(g, groups, pos)}

        def settled_root(g: _Group, late_banners: set[int] = late_banners) -> bool:
            return id(g) not in late_banners and any(
                e.signature == "elastic_root_cause" and e.culprit_rank is not None for e in g.events
            )

        def wrapper(g: _Group, late_banners: set[int] = late_banners) -> bool:
            # torchelastic's failure banner (or its agent's "failed (exitcode: N)") for exit code 1: the worker
            # raised an exception, which the banner quotes; for -6 (SIGABRT) it aborted itself, as torch's NCCL
            # watchdog does after a timeout or an NCCL error (c10d ProcessGroupNCCL: the watchdog's exception
            # terminates the process). Where that exception or timeout is classified (an OOM, a collective
            # mismatch, an NCCL error or timeout), it is the cause and the banner only says where it surfaced.
            # (the banner's exit 1 wraps even where it names the rank; the others only where they name none)
            return id(g) in late_banners or all(
                (e.signature == "elastic_failure" and e.exit_code == 1)
                or (
                    e.signature in ("elastic_failure", "elastic_agent_failed")
                    and e.exit_code in (1, -6)
                    and e.culprit_rank is None
                )
                for e in g.events
            )

        specific = any(
            not wrapper(g) and not all(e.generic for e in g.events) and g.kind is not FindingKind.CRASH for g in groups
        )
        # A process's own crash or out-of-memory, blamed on its printer (not on a peer it named): who printed it.
        failed_printers = {
            _printer_of(e)
            for g in groups
            if g.kind in _FAILS_WHERE_PRINTED
            for e in g.events
            if (e.culprit_rank is not None or e.culprit_host) and e.basis not in ("peer", "endpoint")
        }

        def peer_went_away(g: _Group, failed_printers: set = failed_printers) -> bool:
            # a network error whose only culprit is the remote end its reporter named ("Connection reset by peer",
            # an IB completion error from a peer): what a process that died looks like from its peers. Where another
            # process of the same incident reports its own failure, that failure is the cause, whatever order the
            # hosts' interleaved output put them in (the peer's address cannot be mapped to that process's host
            # name). A failure of the reporter itself after it lost its peer may be the loss's consequence: not moved.
            blamed = [e for e in g.events if e.culprit_rank is not None or e.culprit_host]
            return (
                g.kind is FindingKind.NETWORK_ERROR
                and bool(blamed)
                and all(e.basis == "peer" for e in blamed)
                and bool(failed_printers - {_printer_of(e) for e in g.events})
            )

        groups.sort(
            key=lambda g: (
                not settled_root(g),
                specific and wrapper(g),
                peer_went_away(g),
                min(pos[id(e)] for e in g.events),
            )
        )
        # after the order is settled: naming the one reporter changes whom a finding names, not which comes first
        for j, g in enumerate(_name_sole_reporter(in_incident, groups)):
            findings.append(_finding(g, incident, j == 0, rank_to_host or {}, max_evidence_lines))
    return findings


def analyze(signals: Signals) -> list[Finding]:
    table = signals.table(SignalKind.LOG_EVENTS)
    if table is None or table.num_rows == 0:
        return []
    return analyze_log_events(table, rank_to_host=signals.rank_to_host())
