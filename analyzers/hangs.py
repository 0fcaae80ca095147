"""Hung and mismatched collectives from Flight Recorder tables (pure: tables in, findings out).

What a dump proves, and what it does not (torch 2.13 sources: FlightRecorder.hpp,
FlightRecorderDetail.hpp, ProcessGroupNCCL.cpp; peers.md §1 for the stock analyzer):

1. Sequences. Each (backend, process group) counts collectives (`collective_seq_id`) and p2p ops
   (`p2p_seq_id`) separately; a group's gloo and NCCL halves count separately too. Collectives are
   matched by collective seq across the group's members; a send/recv only with its peer: the k-th
   send a->b pairs with the k-th recv b<-a (NCCL orders a pair's p2p ops), never by seq across
   the group. Membership: pg_config ranks (NCCL); the world for the default group; on gloo
   (pg_config empty) the run.json group holding every rank that reports the group; else the
   reporting ranks (said so in the evidence).
2. How far a rank got in a group. A ring buffer drops its OLDEST entries, so the newest entry of a
   group in a rank's buffer is its last op there: that is proof. pg_status.last_enqueued_collective
   counts too, except in a group that carries p2p: ProcessGroupNCCL stores the work's own seq there
   (`isP2P ? seqP2P_ : seqCollective_`), a p2p number after a send/recv. A rank with no entry of
   the group is "never entered" only if its buffer never rolled over (first record_id 0); if it
   rolled, the rank is UNKNOWN there (its entries are gone), never "did not enter". A completed
   NCCL entry (GPU event) proves every member entered that seq. Gloo's `retired` includes timed-out
   ops and its state is always "scheduled", so neither proves completion there.
3. Waits. A rank that entered seq N of a group waits on the members proven not to have entered it
   (or that are unknown there); a pending send/recv waits on the peer that never posted its side;
   with TORCH_NCCL_ENABLE_TIMING a member whose entry stayed "scheduled" while the others
   "started" has a stuck stream (the others wait on it). These waits form a graph.
4. Root causes. A rank blocked in ANY hung op (behind the culprit, in a follow-on group, in a p2p
   chain) is never a root cause: the roots of a hang are the ranks others provably wait on that
   wait on nobody. One finding per hang (connected part of the graph) names its root(s); every
   blocked rank is evidence (`blocked`: where it waits), never a culprit. Ranks without a dump, or
   whose buffer is empty, are named only when nothing is proven (MegaScale's silent-rank rule, lower
   confidence); a rolled-over rank is never named. A cycle with no root is a cross-order deadlock.
5. At every seq all members still hold, op/dtype/size signatures are compared (the op's own rules:
   shapes of symmetric ops, dtypes as torch's analyzer compares them); a minority signature is a
   `collective_mismatch` naming the deviating rank by majority vote (a tie names nobody).
6. Evidence: the root's stack (innermost frame of its main thread outside torch/stdlib, preferring
   py-spy, then dump_traceback, then the Flight Recorder call site), a rank grid (`hang_map`), the
   cascade, the unknowns and why, the NCCL state of the waiting entries and their timeout.

Confidence says what the evidence proves: every involved dump complete and a proven root, high;
some member without a dump, lower; rolled-over members in the hung group (unknown there), lower
and said; a stuck kernel, lower; a hang inferred only from missing or empty dumps, lowest.
"""

from __future__ import annotations

import json
import logging
import os
import sys
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from trainctl.findings import Category, Finding, FindingKind, Severity
from trainctl.rundir import RunInfo
from trainctl.schemas import SignalKind
from trainctl.signals import Signals

__all__ = ["NCCL_BACKENDS", "RankState", "analyze_hangs", "analyze", "rank_grid", "culprit_frame", "is_internal_frame"]

logger = logging.getLogger(__name__)


class RankState:
    WAITING = "waiting"
    CULPRIT = "culprit"
    FINISHED = "finished"
    NO_DATA = "no_data"
    UNKNOWN = "unknown"  # dumped, but its ring buffer rolled past the hung seq


# Ops whose input/output shapes must agree on every member (for gather/scatter/all_to_all the
# root or the split legitimately differs, so only op and dtype are compared there).
_SYMMETRIC_OPS = {
    "all_reduce",
    "allreduce",
    "allreduce_coalesced",
    "broadcast",
    "all_gather",
    "allgather",
    "_allgather_base",
    "all_gather_into_tensor",
    "allgather_into_tensor_coalesced",
    "reduce_scatter",
    "reduce_scatter_tensor",
    "_reduce_scatter_base",
    "reduce",
    "barrier",
}
# Backends whose entries ProcessGroupNCCL records (the CUDA recorder); the rest are the CPU one's.
NCCL_BACKENDS = frozenset({"nccl", "ncclx", "rccl", "rcclx"})
_STDLIB = set(getattr(sys, "stdlib_module_names", ()))

# Kinds of wait edges. PROOF kinds say the target provably did not arrive; the others do not.
_COLL, _P2P, _KERNEL = "collective", "p2p", "kernel"
_UNKNOWN, _ABSENT, _UNATTRIBUTED = "unknown", "absent", "unattributed"
_PROOF = (_COLL, _P2P)


def _recorder(backend: str) -> str:
    return "nccl" if backend in NCCL_BACKENDS else "cpu"


@dataclass
class _Hang:
    """One hung op: a collective seq of a group some members never entered, or a pending p2p."""

    key: tuple[str, str]  # (backend, pg_name)
    pg_desc: str | None
    members: tuple[int, ...]
    membership: str
    kind: str  # collective | p2p | kernel | absent
    seq: int | None
    op: str | None
    waiting: tuple[int, ...]
    missing: tuple[int, ...]  # proven not to have arrived
    unknown: tuple[int, ...] = ()  # cannot tell (rolled buffer, no dump, empty buffer)
    positions: dict[int, int] = field(default_factory=dict)
    entry: Mapping[str, Any] = field(default_factory=dict)
    wait_ts_ns: int | None = None
    still_waiting: bool = True
    wrapped: tuple[int, ...] = ()
    states: dict[int, str] = field(default_factory=dict)  # NCCL state of each waiting rank's entry
    peer: int | None = None  # p2p: the other side

    @property
    def pg_name(self) -> str:
        return self.key[1]

    @property
    def label(self) -> str:
        return f"pg {self.pg_name}" + (f" ({self.pg_desc})" if self.pg_desc else "")

    @property
    def where(self) -> str:
        if self.kind == _P2P:
            return f"{self.op} p2p seq {self.seq} of {self.label}"
        return f"{self.op or 'collective'} seq {self.seq} of {self.label}"


@dataclass(frozen=True)
class _Edge:
    src: int
    dst: int | None
    kind: str
    hang: _Hang


@dataclass(frozen=True)
class _Inventory:
    """Who dumped which recorder, whose buffer rolled over or is empty."""

    dumped: Mapping[int, frozenset[str] | None]  # None: dumped, recorders not known (all)
    rolled: frozenset[tuple[int, str]]
    empty_off: frozenset[int]  # recorded nothing and no group configured: recording off
    empty_ranks: frozenset[int]  # every recorder of the rank is empty
    versions: Mapping[str, tuple[int, ...]]

    def has(self, rank: int, recorder: str) -> bool:
        if rank not in self.dumped:
            return False
        recs = self.dumped[rank]
        return recs is None or recorder in recs


def is_internal_frame(filename: str | None, function: str) -> bool:
    if not filename:
        return True
    f = filename.replace("\\", "/")
    if f.startswith("<") or function.startswith("<"):
        return True
    parts = f.split("/")
    if "torch" in parts or "site-packages" in parts and "torch" in parts:
        return True
    if "/lib/python3" in f and "site-packages" not in f:
        return True  # absolute stdlib path (faulthandler, Flight Recorder frames)
    head = parts[0].removesuffix(".py") if not f.startswith("/") else ""
    return head in _STDLIB  # py-spy prints stdlib files relative ("multiprocessing/process.py")


def culprit_frame(stacks: pd.DataFrame | None, rank: int) -> dict[str, Any] | None:
    """Where `rank` is: innermost frame of its main thread outside torch/stdlib internals.

    Prefers a live stack (py-spy, then dump_traceback) over Flight Recorder frames, which only
    show where the rank last called a collective.
    """
    if stacks is None or stacks.empty:
        return None
    mine = stacks[stacks["rank"] == rank]
    for source in ("py-spy", "dump_traceback", "flight_recorder"):
        s = mine[mine["source"] == source]
        if s.empty:
            continue
        if "ts" in s and s["ts"].notna().any():  # successive snapshots (periodic dumps): the newest
            s = s[s["ts"] == s["ts"].max()]
        threads = list(dict.fromkeys(s["thread"].tolist()))
        thread = "MainThread" if "MainThread" in threads else threads[0]
        frames = s[s["thread"] == thread].sort_values("depth") if thread is not None else s.sort_values("depth")
        for fr in frames.itertuples(index=False):
            if not is_internal_frame(fr.filename, fr.function):
                line = None if pd.isna(fr.line) else int(fr.line)
                return {
                    "function": fr.function,
                    "filename": fr.filename,
                    "line": line,
                    "source": source,
                    "thread": thread,
                    "text": f"{fr.function}(), {os.path.basename(fr.filename or '?')}:{line}",
                }
    return None


def rank_grid(run: RunInfo | None, ranks: Iterable[int]) -> dict[str, Any]:
    """Lay ranks out as pipeline stages x data-parallel rows x tensor-parallel columns.

    Positions come from the run's named groups (a rank's index inside its "tp"/"dp"/"pp" group),
    else from the layout sizes with tp varying fastest (Megatron order), else one row of ranks.
    """
    ranks = sorted(set(ranks))
    groups = dict(run.groups) if run else {}
    layout = dict(run.layout) if run else {}

    def index_in(name: str, r: int) -> int | None:
        for members in groups.get(name, ()):
            if r in members:
                return list(members).index(r)
        return None

    tp, dp, pp = layout.get("tp", 1), layout.get("dp", 1), layout.get("pp", 1)
    if run and (groups.get("tp") or groups.get("dp") or tp * dp * pp == run.world_size > 1 and layout):
        cells: dict[tuple[int, int, int], int] = {}
        for r in range(run.world_size):
            t = index_in("tp", r)
            d = index_in("dp", r)
            p = index_in("pp", r)
            t = r % tp if t is None else t
            d = (r // tp) % dp if d is None else d
            p = r // (tp * dp) if p is None else p
            cells[(p, d, t)] = r
        n_p = max(k[0] for k in cells) + 1
        n_d = max(k[1] for k in cells) + 1
        n_t = max(k[2] for k in cells) + 1
        stages = [[[cells.get((p, d, t)) for t in range(n_t)] for d in range(n_d)] for p in range(n_p)]
        return {"axes": {"stage": "pp" if n_p > 1 else None, "row": "dp", "col": "tp"}, "stages": stages}
    world = list(range(run.world_size)) if run else ranks
    return {"axes": {"stage": None, "row": None, "col": "rank"}, "stages": [[world]]}


def _fmt_ranks(ranks: Iterable[int], hosts: Mapping[int, str]) -> str:
    ranks = sorted(ranks)
    by_host: dict[str, list[int]] = {}
    for r in ranks:
        by_host.setdefault(hosts.get(r, "?"), []).append(r)
    if list(by_host) == ["?"]:
        return ("rank " if len(ranks) == 1 else "ranks ") + ",".join(map(str, ranks))
    return "; ".join(
        ("rank " if len(rs) == 1 else "ranks ") + ",".join(map(str, rs)) + f" on {h}" for h, rs in by_host.items()
    )


def _int_or_none(v: Any) -> int | None:
    return None if v is None or (isinstance(v, float) and pd.isna(v)) or v is pd.NA else int(v)


def _str_or_none(v: Any) -> str | None:
    return None if v is None or (isinstance(v, float) and pd.isna(v)) or v is pd.NA else str(v)


def _inventory(coll: pd.DataFrame, status: pd.DataFrame, fr_dumps: pd.DataFrame | None) -> _Inventory:
    dumped: dict[int, frozenset[str] | None] = {}
    rolled: set[tuple[int, str]] = set()
    empty_off: set[int] = set()
    versions: dict[str, set[int]] = {}
    if fr_dumps is not None and not fr_dumps.empty:
        per_rank: dict[int, list[Mapping[str, Any]]] = {}
        for row in fr_dumps.to_dict("records"):
            per_rank.setdefault(int(row["rank"]), []).append(row)
        for r, rows in per_rank.items():
            dumped[r] = frozenset(str(x["recorder"]) for x in rows)
            for x in rows:
                first = _int_or_none(x.get("first_record_id"))
                if first is not None and first > 0:
                    rolled.add((r, str(x["recorder"])))
                v = _str_or_none(x.get("fr_version"))
                if v:
                    versions.setdefault(v, set()).add(r)
            if all(not _int_or_none(x.get("entries")) for x in rows) and all(
                not _int_or_none(x.get("groups_configured")) for x in rows
            ):
                empty_off.add(r)
        empty = {r for r, rows in per_rank.items() if all(not _int_or_none(x.get("entries")) for x in rows)}
    else:
        empty = set()
    # Tables without an fr_dumps inventory (older datasets, hand-built tables): every rank with
    # a row dumped; its buffer rolled if its oldest record id is not 0 (ids count from 0).
    for r in set(map(int, coll["rank"])) | set(map(int, status["rank"])):
        dumped.setdefault(r, None)
    if fr_dumps is None or fr_dumps.empty:
        if not coll.empty and coll["record_id"].notna().any():
            for (r, bk), first in coll.groupby(["rank", "bk"])["record_id"].min().items():
                if not pd.isna(first) and int(first) > 0:
                    rolled.add((int(r), _recorder(str(bk))))
    return _Inventory(
        dumped=dumped,
        rolled=frozenset(rolled),
        empty_off=frozenset(empty_off),
        empty_ranks=frozenset(empty),
        versions={v: tuple(sorted(rs)) for v, rs in versions.items()},
    )


def _coalesced_by_proxy(coll: pd.DataFrame) -> pd.DataFrame:
    """Ops recorded inside a coalesced group take the state of the group's "coalesced" entry.

    ProcessGroupNCCL::pointToPoint, when coalescing (batch_isend_irecv), records each send/recv
    with no events ("per op that lack timing/state information"), so they stay "scheduled"
    forever; endCoalescing records a `nccl:coalesced` entry with the same p2p (or collective) seq
    whose events the watchdog updates. Each op of the group is as finished as that entry."""
    if coll.empty or "state" not in coll.columns:
        return coll
    is_co = coll["op"].astype(str).str.endswith("coalesced")
    if not is_co.any():
        return coll
    coll = coll.copy()
    kind = coll["seq"].isna()  # p2p rows carry p2p_seq, collectives seq
    num = coll["p2p_seq"].where(kind, coll["seq"])
    keys = list(zip(coll["rank"], coll["bk"], coll["pg_name"], kind, num))
    proxy: dict[tuple, tuple[Any, Any]] = {}
    for k, co, state, retired in zip(keys, is_co, coll["state"], coll["retired"]):
        if co:
            proxy[k] = (state, retired)
    states, retireds = list(coll["state"]), list(coll["retired"])
    for i, (k, co) in enumerate(zip(keys, is_co)):
        if not co and k in proxy:
            states[i], retireds[i] = proxy[k]
    coll["state"], coll["retired"] = states, retireds
    return coll


def _pending(row: Mapping[str, Any], backend: str) -> bool:
    """Not finished: on NCCL the end event was not seen; on gloo (no events) not retired."""
    if backend in NCCL_BACKENDS:
        return row.get("state") != "completed"
    return not bool(row.get("retired")) if row.get("retired") is not None else True


def analyze_hangs(
    collectives: pd.DataFrame,
    pg_status: pd.DataFrame | None = None,
    stacks: pd.DataFrame | None = None,
    run: RunInfo | None = None,
    fr_dumps: pd.DataFrame | None = None,
    *,
    confidence_all_dumps: float = 0.95,
    confidence_missing_dumps: float = 0.75,
    confidence_unknown: float = 0.8,
    confidence_stuck_kernel: float = 0.7,
    confidence_absence_waiting: float = 0.6,
    confidence_absence_retired: float = 0.45,
    confidence_empty: float = 0.5,
    confidence_mismatch: float = 0.9,
    confidence_tie: float = 0.4,
    confidence_no_culprit: float = 0.3,
) -> list[Finding]:
    """Findings for hung collectives (`hung_collective`) and mismatched ones (`collective_mismatch`).

    collectives: the `collectives` table (one row per Flight Recorder entry, `host` column optional).
    pg_status: the `pg_status` table (per rank and group: last enqueued/started/completed seq).
    stacks: the `stacks` table, for the culprit's frame.
    run: RunInfo for world size, rank->host, group membership and the grid.
    fr_dumps: the `fr_dumps` table (who dumped, whose buffer rolled or is empty); without it every
    rank with a row counts as dumped and a buffer as rolled when its oldest record_id is not 0.
    confidence_*: a hang whose root is proven with every involved dump present; with a member of
    the hung group missing its dump; with members unknown there (rolled buffers); a stuck kernel
    (NCCL timing); a hang inferred only from missing dumps while the others still wait / have
    retired their last op; from an empty buffer; a majority-vote mismatch; a tied vote; a hang
    whose non-arriving ranks cannot be told at all (no rank is named).
    """
    coll = collectives.copy()
    for col, default in (("backend", None), ("peer", None), ("p2p_seq", None), ("state", None), ("start_ts", None)):
        if col not in coll.columns:
            coll[col] = default
    coll["bk"] = [b if isinstance(b, str) and b else "" for b in coll["backend"]]
    coll = _coalesced_by_proxy(coll)
    status = (
        pg_status.copy()
        if pg_status is not None
        else pd.DataFrame(columns=["rank", "pg_name", "last_enqueued_seq", "last_completed_seq"])
    )
    if "backend" not in status.columns:
        status["backend"] = None
    status["bk"] = [b if isinstance(b, str) and b else "" for b in status["backend"]]
    if "last_completed_seq" not in status.columns:
        status["last_completed_seq"] = None
    hosts: dict[int, str] = run.rank_to_host() if run else {}
    for t in (coll, status, fr_dumps if fr_dumps is not None else pd.DataFrame()):
        if "host" in t.columns:
            for r, h in t[["rank", "host"]].drop_duplicates().itertuples(index=False):
                if h is not None and not pd.isna(h):
                    hosts.setdefault(int(r), str(h))
    inv = _inventory(coll, status, fr_dumps)
    if not inv.dumped:
        return []
    world = set(range(run.world_size)) if run else set(range(max(inv.dumped) + 1))
    missing_dumps = world - set(inv.dumped)
    starts_tracked = (
        set(map(int, coll.loc[coll["start_ts"].notna(), "rank"])) if coll["start_ts"].notna().any() else set()
    )

    keys: dict[tuple[str, str], str | None] = {}
    for bk, name, desc in coll[["bk", "pg_name", "pg_desc"]].drop_duplicates().itertuples(index=False):
        keys.setdefault((str(bk), str(name)), None if desc is None or pd.isna(desc) else str(desc))
    for bk, name in status[["bk", "pg_name"]].drop_duplicates().itertuples(index=False):
        keys.setdefault((str(bk), str(name)), None)

    findings: list[Finding] = []
    hangs: list[_Hang] = []
    edges: list[_Edge] = []
    by_key = {k: g for k, g in coll.groupby(["bk", "pg_name"], sort=False)} if len(coll) else {}
    status_by_key = {k: g for k, g in status.groupby(["bk", "pg_name"], sort=False)} if len(status) else {}
    for key, pg_desc in sorted(keys.items(), key=lambda kv: (kv[0][0], len(kv[0][1]), kv[0][1])):
        bk, pg_name = key
        rows = by_key.get(key, coll.iloc[0:0])
        pc = rows[rows["seq"].notna()].copy()
        pc["seq"] = pc["seq"].astype("int64")
        pp = rows[rows["seq"].isna() & rows["p2p_seq"].notna()]
        ps = status_by_key.get(key, status.iloc[0:0])
        reporters = set(map(int, rows["rank"])) | set(map(int, ps["rank"]))
        members, membership = _membership(pg_name, pg_desc, rows, reporters, world, run)
        rec = _recorder(bk)
        dumped_members = [r for r in members if inv.has(r, rec)]
        if not dumped_members:
            continue
        wrapped = tuple(sorted(r for r in members if (r, rec) in inv.rolled))
        mm = _collective_hangs(
            key, pg_desc, members, membership, pc, pp, ps, rec, inv, wrapped, starts_tracked, hangs, edges
        )
        if mm is not None:
            findings.append(
                _mismatch_finding(
                    pg_name, pg_desc, members, membership, mm, hosts, stacks, run, confidence_mismatch, confidence_tie
                )
            )
        if not pp.empty:
            _p2p_hangs(key, pg_desc, members, membership, pp, rec, inv, wrapped, hangs, edges)

    findings.extend(
        _hang_findings(
            hangs,
            edges,
            inv,
            hosts,
            stacks,
            run,
            world,
            missing_dumps,
            {
                "all": confidence_all_dumps,
                "missing": confidence_missing_dumps,
                "unknown": confidence_unknown,
                "kernel": confidence_stuck_kernel,
                "abs_wait": confidence_absence_waiting,
                "abs_retired": confidence_absence_retired,
                "empty": confidence_empty,
                "none": confidence_no_culprit,
            },
        )
    )
    return findings


def _collective_hangs(
    key: tuple[str, str],
    pg_desc: str | None,
    members: list[int],
    membership: str,
    pc: pd.DataFrame,
    pp: pd.DataFrame,
    ps: pd.DataFrame,
    rec: str,
    inv: _Inventory,
    wrapped: tuple[int, ...],
    starts_tracked: set[int],
    hangs: list[_Hang],
    edges: list[_Edge],
) -> dict[str, Any] | None:
    """Where each member got in the group's collectives; the hung seq and who waits on whom.

    Returns a mismatch (then the group gets no hang: the mismatch finding covers it)."""
    bk = key[0]
    # pg_status counts p2p works in a group that carries p2p (ProcessGroupNCCL::workEnqueue), so it is a collective
    # position only where the group shows no p2p. Gloo counts its send/recv there too but records no p2p entry: a
    # gloo group's p2p cannot be seen, and its counter is never a collective position (a healthy 4-rank pipeline's
    # counters read 8/12/12/8, the first and last stages doing half the send/recv, and named 2 ranks hung).
    status_usable = pp.empty and bk in NCCL_BACKENDS
    exact: dict[int, int] = {}  # proven position (last collective seq entered)
    floor: dict[int, int] = {}  # entered at least (unknown beyond)
    done_all = 0  # a seq some member completed (NCCL): every member entered it
    if bk in NCCL_BACKENDS:
        comp = pc.loc[pc["state"] == "completed", "seq"]
        done_all = int(comp.max()) if len(comp) else 0
        if status_usable and len(ps):
            lc = [int(v) for v in ps["last_completed_seq"].dropna() if int(v) > 0]
            done_all = max([done_all, *lc])
    seq_max = pc.groupby("rank")["seq"].max().to_dict() if len(pc) else {}
    seq_min = pc.groupby("rank")["seq"].min().to_dict() if len(pc) else {}
    enq_max: dict[int, int] = {}
    if status_usable and len(ps):
        for r, v in ps[["rank", "last_enqueued_seq"]].dropna().itertuples(index=False):
            if int(v) >= 0:
                enq_max[int(r)] = max(enq_max.get(int(r), -1), int(v))
    for r in members:
        if not inv.has(r, rec):
            floor[r] = done_all
            continue
        cands = ([int(seq_max[r])] if r in seq_max else []) + ([enq_max[r]] if r in enq_max else [])
        if cands:
            exact[r] = max(cands)
        elif (r, rec) not in inv.rolled and r not in inv.empty_off:
            exact[r] = 0  # its whole history is in the buffer and holds no collective of this group
        else:
            floor[r] = done_all  # rolled over (or recording off): unknown here
    for r in list(floor):
        floor[r] = max(floor[r], 0)
    known = {**exact, **floor}
    if not known:
        return None
    head = max(known.values())

    # Mismatch check over the seqs every member still holds.
    holders = [r for r in exact if r in seq_min]
    # a rolled buffer may have lost part of its oldest seq (coalesced ops share one seq)
    firsts = [int(seq_min[r]) + (1 if r in wrapped else 0) for r in holders]
    start = max(firsts) if firsts else head + 1
    low_exact = min(exact.values()) if exact else head
    mm = _first_mismatch(pc, holders, start, min(head, low_exact + 1))
    if mm is not None:
        return mm

    positions = {r: p for r, p in exact.items()}
    _in_flight(key, pg_desc, members, membership, pc, min(known.values()), starts_tracked, positions, hangs, edges)
    behind = {r: p for r, p in exact.items() if p < head}
    if behind:
        seq = min(behind.values()) + 1
        missing = tuple(sorted(r for r, p in behind.items() if p < seq))
        waiting = tuple(sorted(r for r, p in known.items() if p >= seq))
        unknown = tuple(sorted(r for r, p in floor.items() if p < seq))
        kind = _COLL
    elif any(p < head for p in floor.values()):
        seq = head
        missing = ()
        waiting = tuple(sorted(r for r, p in exact.items() if p >= seq))
        unknown = tuple(sorted(r for r, p in floor.items() if p < seq))
        kind = _ABSENT
    else:
        return None  # every member entered every seq: nothing missing (_in_flight saw the rest)
    if not waiting:
        return None
    at = pc[(pc["seq"] == seq) & pc["rank"].isin(waiting)]
    entry = at.iloc[0].to_dict() if len(at) else {}
    pend = [_pending(row, bk) for row in at.to_dict("records")]
    h = _Hang(
        key,
        pg_desc,
        tuple(members),
        membership,
        kind,
        seq,
        entry.get("op"),
        waiting,
        missing,
        unknown,
        positions,
        entry,
        _ts_ns(at["enqueue_ts"].min()) if len(at) else None,
        still_waiting=bool(pend) and any(pend),
        wrapped=wrapped,
        states={int(row["rank"]): str(row["state"]) for row in at.to_dict("records") if row.get("state")},
    )
    if kind == _ABSENT and not h.still_waiting and bk in NCCL_BACKENDS:
        return None  # every dumped member finished it: nothing is hung here
    hangs.append(h)
    for w in waiting:
        for m in missing:
            edges.append(_Edge(w, m, _COLL, h))
        for u in unknown:
            edges.append(_Edge(w, u, _UNKNOWN if inv.has(u, rec) and u not in inv.empty_off else _ABSENT, h))
    return None


def _in_flight(
    key: tuple[str, str],
    pg_desc: str | None,
    members: list[int],
    membership: str,
    pc: pd.DataFrame,
    all_entered: int,
    starts_tracked: set[int],
    positions: dict[int, int],
    hangs: list[_Hang],
    edges: list[_Edge],
) -> None:
    """Ops every member entered that did not finish (NCCL only: gloo has no completion events).

    With TORCH_NCCL_ENABLE_TIMING (ProcessGroupNCCL records the start event only then, so without
    it "scheduled" means no more than "not finished"), a member whose entry stayed "scheduled"
    while another's "started" has a stuck stream: the others wait on it. Any other rank still
    inside such an op is blocked in it too - in a hung run an op everyone entered that did not
    finish is stuck below Flight Recorder (a kernel, a stream behind one, the network) - so it is
    never a root, though on whom it waits is unknown."""
    if all_entered <= 0 or pc.empty or key[0] not in NCCL_BACKENDS:
        return
    cand = pc[pc["seq"] <= all_entered]
    cand = cand[cand["state"] != "completed"]
    for seq, at in cand.groupby("seq", sort=True):
        every = pc[pc["seq"] == seq]
        by_rank = {int(r["rank"]): r for r in every.to_dict("records")}
        stuck: tuple[int, ...] = ()
        if set(by_rank) >= set(members) and not any(r.get("state") == "completed" for r in by_rank.values()):
            started = tuple(sorted(r for r, row in by_rank.items() if row.get("state") == "started"))
            stuck = tuple(
                sorted(r for r, row in by_rank.items() if row.get("state") == "scheduled" and r in starts_tracked)
            )
            if started and stuck:
                entry = by_rank[started[0]]
                h = _Hang(
                    key, pg_desc, tuple(members), membership, _KERNEL, int(seq), entry.get("op"), started, stuck,
                    (), positions, entry, _ts_ns(min(by_rank[r]["enqueue_ts"] for r in started)),
                    states={r: str(row.get("state")) for r, row in by_rank.items()},
                )  # fmt: skip
                hangs.append(h)
                edges.extend(_Edge(w, s, _KERNEL, h) for w in started for s in stuck)
            else:
                stuck = ()
        for row in at.to_dict("records"):
            if int(row["rank"]) in stuck:
                continue  # waits on its own GPU: the root candidate, not blocked
            h = _Hang(
                key, pg_desc, tuple(members), membership, _COLL, int(seq), row.get("op"), (int(row["rank"]),),
                (), (), {}, row, _ts_ns(row.get("enqueue_ts")),
            )  # fmt: skip
            edges.append(_Edge(int(row["rank"]), None, _UNATTRIBUTED, h))


def _p2p_hangs(
    key: tuple[str, str],
    pg_desc: str | None,
    members: list[int],
    membership: str,
    pp: pd.DataFrame,
    rec: str,
    inv: _Inventory,
    wrapped: tuple[int, ...],
    hangs: list[_Hang],
    edges: list[_Edge],
) -> None:
    """Pending sends/recvs and the peers that never posted their side (pairs only, never seqs).

    With both sides' histories complete (buffers never rolled), the k-th send a->b matches the
    k-th recv b<-a, so a surplus op is proof. With a rolled side only pending ops are compared: a
    pending op whose peer holds no pending counterpart waits on that peer; a pending recv whose
    sender's last send to it completed may have been matched by it (NCCL can finish a small send
    before the recv runs), so that recv waits on nobody we can name."""
    bk = key[0]
    ops: dict[tuple[int, int, str], list[Mapping[str, Any]]] = {}
    for row in pp.sort_values(["rank", "p2p_seq", "record_id"]).to_dict("records"):
        peer = _int_or_none(row.get("peer"))
        if peer is None or row.get("op") not in ("send", "recv") or not 0 <= peer < len(members):
            continue  # a coalesced batch entry names no peer; its ops are recorded one by one
        ops.setdefault((int(row["rank"]), members[peer], str(row["op"])), []).append(row)

    covered: set[tuple[int, Any, Any]] = set()

    def ident(row: Mapping[str, Any]) -> tuple[int, Any, Any]:
        return (int(row["rank"]), _int_or_none(row.get("record_id")), _int_or_none(row.get("p2p_seq")))

    def blocked_on_nobody(rank: int, row: Mapping[str, Any], peer: int | None) -> None:
        covered.add(ident(row))
        h = _Hang(
            key, pg_desc, tuple(members), membership, _P2P, _int_or_none(row.get("p2p_seq")), str(row.get("op")),
            (rank,), (), (), {}, row, _ts_ns(row.get("enqueue_ts")), wrapped=wrapped, peer=peer,
        )  # fmt: skip
        edges.append(_Edge(rank, None, _UNATTRIBUTED, h))

    def hang(waiter: int, target: int, row: Mapping[str, Any], kind: str) -> None:
        covered.add(ident(row))
        h = _Hang(
            key,
            pg_desc,
            tuple(members),
            membership,
            _P2P,
            _int_or_none(row.get("p2p_seq")),
            str(row.get("op")),
            (waiter,),
            (target,) if kind == _P2P else (),
            (target,) if kind in (_UNKNOWN, _ABSENT) else (),
            {},
            row,
            _ts_ns(row.get("enqueue_ts")),
            wrapped=wrapped,
            states={waiter: str(row["state"])} if row.get("state") else {},
            peer=target,
        )
        hangs.append(h)
        edges.append(_Edge(waiter, target, kind, h))

    def full(r: int) -> bool:  # its whole p2p history of this group is in its dump
        return inv.has(r, rec) and (r, rec) not in inv.rolled and r not in inv.empty_off

    def silent(r: int) -> str:  # no dump, or recording off: absence; a rolled buffer: unknown
        return _ABSENT if not inv.has(r, rec) or r in inv.empty_off else _UNKNOWN

    pairs = {(a, b) for (a, b, op) in ops if op == "send"} | {(b, a) for (a, b, op) in ops if op == "recv"}
    for s, d in sorted(pairs):
        sends = ops.get((s, d, "send"), [])
        recvs = ops.get((d, s, "recv"), [])
        s_full, d_full = full(s), full(d)
        if s_full and d_full:
            if len(sends) > len(recvs) and _pending(sends[len(recvs)], bk):
                hang(s, d, sends[len(recvs)], _P2P)
            elif len(recvs) > len(sends) and _pending(recvs[len(sends)], bk):
                hang(d, s, recvs[len(sends)], _P2P)
            continue
        p_sends = [x for x in sends if _pending(x, bk)]
        p_recvs = [x for x in recvs if _pending(x, bk)]
        if p_sends and not p_recvs:
            # d's pending recv would be among its newest entries; "unknown" only if d left no
            # trace of this pair at all (rolled past it) or no dump.
            seen_pair = bool(recvs) or bool(ops.get((d, s, "send")))
            if d_full or (seen_pair and silent(d) == _UNKNOWN):
                hang(s, d, p_sends[0], _P2P)
            else:
                hang(s, d, p_sends[0], silent(d))
        elif p_recvs and not p_sends:
            if s_full and not sends:
                hang(d, s, p_recvs[0], _P2P)
            elif not s_full and not sends:
                hang(d, s, p_recvs[0], silent(s))
            else:
                blocked_on_nobody(d, p_recvs[0], s)  # its sender's last send may have matched it
    # Any other pending send/recv (both sides posted and stuck in transfer, a coalesced batch entry
    # that names no peer): its rank is blocked in it, so it is no root, though on whom is unknown.
    for row in pp.to_dict("records"):
        if _pending(row, bk) and ident(row) not in covered:
            peer = _int_or_none(row.get("peer"))
            blocked_on_nobody(
                int(row["rank"]), row, members[peer] if peer is not None and 0 <= peer < len(members) else None
            )


def _ts_ns(v: Any) -> int | None:
    if v is None or v is pd.NaT or (isinstance(v, float) and pd.isna(v)):
        return None
    return int(pd.Timestamp(v).value)


def _membership(
    pg_name: str, pg_desc: str | None, pc: pd.DataFrame, reporters: set[int], world: set[int], run: RunInfo | None
) -> tuple[list[int], str]:
    cfg = pc["pg_ranks"].dropna() if "pg_ranks" in pc.columns else pd.Series([], dtype=object)
    for v in cfg:
        if v is not None and len(v):
            # pg_config lists the global ranks in group-rank order (ranks_str of the group's ranks).
            return [int(x) for x in v], "pg_config"
    if pg_desc == "default_pg" or pg_name == "0":
        return sorted(world), "world"
    if run and run.groups:
        candidates: list[tuple[int, int, tuple[int, ...], str]] = []
        for gname, lists in run.groups.items():
            for m in lists:
                if reporters <= set(m):
                    candidates.append((0 if gname == pg_desc else 1, len(m), tuple(m), gname))
        if candidates:
            _, _, m, gname = min(candidates)
            return sorted(m), f"run.json group {gname!r}"
    return sorted(reporters), "inferred from the ranks reporting this group"


def _dtype_sig(row: Mapping[str, Any]) -> tuple:
    """Dtypes compared as torch's analyzer does (types.py Op.dtype_mismatch): inputs except for
    scatter/broadcast, outputs except for gather, as sets, and only where the tensors exist."""
    op = row["op"]

    def dt(name: str, sizes: str) -> frozenset | None:
        v = row.get(name)
        s = row.get(sizes)
        if v is None or (isinstance(v, float) and pd.isna(v)) or s is None or (isinstance(s, float) and pd.isna(s)):
            return None
        if not len(s) or not len(s[0]):
            return None
        return frozenset(str(x) for x in v)

    inp = None if op in ("scatter", "broadcast") else dt("input_dtypes", "input_sizes")
    out = None if op == "gather" else dt("output_dtypes", "output_sizes")
    return (inp, out)


def _signature(rows: list[Mapping[str, Any]]) -> tuple:
    """Signature of what one rank called at one seq (several entries: a coalesced group)."""

    def norm(v: Any) -> Any:
        if v is None or (isinstance(v, float) and pd.isna(v)):
            return None
        return json.dumps([list(map(int, x)) if hasattr(x, "__iter__") and not isinstance(x, str) else x for x in v])

    out = []
    for row in rows:
        op = row["op"]
        sizes = (norm(row.get("input_sizes")), norm(row.get("output_sizes"))) if op in _SYMMETRIC_OPS else None
        out.append((op, _dtype_sig(row), sizes))
    return tuple(out)


def _first_mismatch(pc: pd.DataFrame, members: list[int], start: int, end: int) -> dict[str, Any] | None:
    if len(members) < 2:
        return None
    window = pc[(pc["seq"] >= start) & (pc["seq"] <= end) & pc["rank"].isin(members)]
    if window.empty:
        return None
    # Cheap pass first: only seqs where some entry differs in any compared field, or where the
    # ranks recorded different numbers of entries, can hold a mismatch.
    key = [
        f"{op}|{_plain(i)}|{_plain(o)}|{_plain(idt)}|{_plain(odt)}"
        for op, i, o, idt, odt in zip(
            window["op"], window["input_sizes"], window["output_sizes"], window["input_dtypes"], window["output_dtypes"]
        )
    ]
    w = window.assign(_key=key)
    distinct = w.groupby("seq")["_key"].nunique()
    counts = w.groupby(["seq", "rank"]).size().groupby("seq").nunique()
    suspect = set(distinct[distinct > 1].index) | set(counts[counts > 1].index)
    if not suspect:
        return None
    window = window[window["seq"].isin(suspect)]
    for seq, at in window.groupby("seq", sort=True):
        if at["rank"].nunique() < 2:
            continue
        per_rank: dict[int, list[Mapping[str, Any]]] = {}
        for row in at.sort_values("record_id").to_dict("records"):
            per_rank.setdefault(int(row["rank"]), []).append(row)
        sigs = {r: _signature(rs) for r, rs in per_rank.items()}
        counts = Counter(sigs.values())
        if len(counts) == 1:
            continue
        (top, n_top), *rest = counts.most_common()
        tie = bool(rest) and rest[0][1] == n_top
        rows = {r: rs[-1] for r, rs in per_rank.items()}
        deviating = sorted(r for r, s in sigs.items() if s != top) if not tie else sorted(rows)
        ref_rank = next(r for r, s in sigs.items() if s == top)
        dev_rank = deviating[0] if not tie else sorted(rows)[-1]
        ref, dev = sigs[ref_rank], sigs[dev_rank]
        # the first entry of the two ranks' calls that differs says what differs
        pair = next(((a, b) for a, b in zip(ref, dev) if a != b), (ref[-1], dev[-1]))
        i = ref.index(pair[0]) if pair[0] in ref else len(ref) - 1
        rows = {r: rs[min(i, len(rs) - 1)] for r, rs in per_rank.items()}
        if pair[0][0] != pair[1][0] or len(ref) != len(dev):
            what, category = "op", Category.TYPE_MISMATCH
        elif pair[0][1] != pair[1][1]:
            what, category = "dtype", Category.TYPE_MISMATCH
        else:
            what, category = "size", Category.SIZE_MISMATCH
        return {
            "seq": int(seq),
            "rows": rows,
            "deviating": deviating,
            "tie": tie,
            "what": what,
            "category": category,
            "majority": sorted(r for r, s in sigs.items() if s == top),
        }
    return None


def _describe(row: Mapping[str, Any], what: str) -> str:
    if what == "op":
        return str(row["op"])
    if what == "dtype":
        return f"{row['op']} of {list(row.get('input_dtypes') or [])}"
    sizes = row.get("input_sizes")
    return f"{row['op']} of sizes {[list(map(int, s)) for s in sizes] if sizes is not None else '?'}"


def _mismatch_finding(
    pg_name: str,
    pg_desc: str | None,
    members: list[int],
    membership: str,
    mm: dict[str, Any],
    hosts: Mapping[int, str],
    stacks: pd.DataFrame | None,
    run: RunInfo | None,
    conf: float,
    conf_tie: float,
) -> Finding:
    rows, dev, maj = mm["rows"], mm["deviating"], mm["majority"]
    pg_label = f"pg {pg_name}" + (f" ({pg_desc})" if pg_desc else "")
    per_rank = {str(r): _describe(row, mm["what"]) for r, row in sorted(rows.items())}
    if mm["tie"]:
        summary = (
            f"collective mismatch at seq {mm['seq']} of {pg_label}: the ranks disagree "
            f"({', '.join(f'rank {r}: {d}' for r, d in per_rank.items())}) and the vote is tied, so the deviating side is unknown"
        )
    else:
        summary = (
            f"{_fmt_ranks(dev, hosts)} called {_describe(rows[dev[0]], mm['what'])} at seq {mm['seq']} of {pg_label} "
            f"where {_fmt_ranks(maj, hosts)} called {_describe(rows[maj[0]], mm['what'])}"
        )
    frame = culprit_frame(stacks, dev[0]) if not mm["tie"] else None
    ev: dict[str, Any] = {
        "pg_name": pg_name,
        "pg_desc": pg_desc,
        "seq": mm["seq"],
        "mismatch": mm["what"],
        "per_rank": per_rank,
        "majority_ranks": maj,
        "members": members,
        "membership": membership,
        "vote": "tied" if mm["tie"] else f"{len(maj)} of {len(rows)}",
    }
    call_frames = rows[dev[0]].get("frames")
    if call_frames:
        ev["call_site"] = _call_site(call_frames)
    if frame:
        ev["stack"] = {str(dev[0]): frame["text"]}
    return Finding(
        kind=FindingKind.COLLECTIVE_MISMATCH,
        severity=Severity.CRITICAL,
        summary=summary,
        category=mm["category"],
        hosts=tuple(sorted({hosts[r] for r in dev if r in hosts})),
        ranks=tuple(dev),
        confidence=conf_tie if mm["tie"] else conf,
        evidence=ev,
    )


def _call_site(frames_json: str) -> str | None:
    """The user call site of a collective from FR frames (stored innermost last)."""
    try:
        frames = json.loads(frames_json)
    except (TypeError, ValueError):
        return None
    for f in reversed(frames):
        if not is_internal_frame(f.get("filename"), f.get("name", "")):
            return f"{f.get('name')}(), {os.path.basename(f.get('filename') or '?')}:{f.get('line')}"
    return None


def _components(edges: list[_Edge]) -> list[list[_Edge]]:
    parent: dict[int, int] = {}

    def find(x: int) -> int:
        parent.setdefault(x, x)
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for e in edges:
        find(e.src)
        if e.dst is not None:
            parent[find(e.src)] = find(e.dst)
    groups: dict[int, list[_Edge]] = {}
    for e in edges:
        groups.setdefault(find(e.src), []).append(e)
    return sorted(groups.values(), key=lambda es: min(x.src for x in es))


def _waits_text(e: _Edge, hosts: Mapping[int, str]) -> str:
    h = e.hang
    if e.dst is None:
        return f"{h.where}, on a peer the dumps do not name"
    if h.kind == _P2P:
        return f"{h.op} with {_fmt_ranks([e.dst], hosts)} ({h.where})"
    return f"{h.where}"


def _hang_findings(
    hangs: list[_Hang],
    edges: list[_Edge],
    inv: _Inventory,
    hosts: Mapping[int, str],
    stacks: pd.DataFrame | None,
    run: RunInfo | None,
    world: set[int],
    missing_dumps: set[int],
    conf: Mapping[str, float],
) -> list[Finding]:
    if not edges:
        return []
    blocked: dict[int, _Edge] = {}
    for e in sorted(edges, key=lambda e: (e.kind not in _PROOF, e.hang.wait_ts_ns or 1 << 62)):
        blocked.setdefault(e.src, e)
    parts: list[tuple[list[_Edge], str, list[int]]] = []
    findings: list[Finding] = []
    for comp in _components(edges):
        proof_roots = sorted({e.dst for e in comp if e.kind in _PROOF and e.dst not in blocked and e.dst is not None})
        kernel_roots = sorted({e.dst for e in comp if e.kind == _KERNEL and e.dst not in blocked and e.dst is not None})
        # MegaScale's silent-rank rule holds only where every other member is known to be past the
        # hung op: with a rolled-over member there, the silent rank is no likelier than it.
        rolled_in = {id(e.hang) for e in comp if e.kind == _UNKNOWN}
        absent_roots = sorted(
            {
                e.dst
                for e in comp
                if e.kind == _ABSENT and e.dst not in blocked and e.dst is not None and id(e.hang) not in rolled_in
            }
        )
        if proof_roots or kernel_roots:
            parts.append((comp, "proof" if proof_roots else _KERNEL, proof_roots or kernel_roots))
        elif absent_roots:
            parts.append((comp, _ABSENT, absent_roots))
        elif _cycle(comp):
            findings.extend(_deadlock_findings(comp, blocked, inv, hosts, stacks, run, world, missing_dumps, conf))
        elif any(e.kind != _UNATTRIBUTED for e in comp):
            parts.append((comp, "none", []))
        # else: only ops every member entered are pending - nothing proves a hang here
    # A silent rank (no dump, empty buffer) or a rolled-over one cuts the wait graph: the ranks
    # waiting on it look like a hang of their own. With a root proven elsewhere they are most
    # likely behind it, so they join that finding as evidence instead of naming a second culprit.
    proven = [i for i, (_, basis, _) in enumerate(parts) if basis in ("proof", _KERNEL)]
    if proven:
        head = parts[proven[0]]
        extra = [e for comp, basis, _ in parts if basis in (_ABSENT, "none") for e in comp]
        parts = [p for p in parts if p[1] in ("proof", _KERNEL)]
        parts[0] = (head[0] + extra, head[1], head[2])
    for comp, basis, roots in parts:
        findings.append(_one_hang(comp, basis, roots, blocked, inv, hosts, stacks, run, world, missing_dumps, conf))
    return findings


def _short(h: _Hang) -> str:
    if h.kind == _P2P and h.waiting and h.peer is not None:
        arrow = "->" if h.op == "send" else "<-"
        return f"pg {h.pg_name} {h.op} {h.waiting[0]}{arrow}{h.peer}"
    return f"pg {h.pg_name} seq {h.seq}"


def _cycle(comp: list[_Edge]) -> bool:
    """Every rank others provably wait on provably waits on someone: a wait cycle (deadlock).
    A rank blocked only on someone unknown closes no cycle."""
    targets = {e.dst for e in comp if e.kind in _PROOF}
    attributed = {e.src for e in comp if e.kind in (*_PROOF, _KERNEL)}
    return bool(targets) and targets <= attributed


def _primary(comp: list[_Edge], roots: list[int], basis: str, blocked: Mapping[int, _Edge]) -> _Hang:
    kinds = {
        "proof": _PROOF,
        _KERNEL: (_KERNEL,),
        _ABSENT: (_ABSENT,),
        "none": (*_PROOF, _UNKNOWN, _UNATTRIBUTED, _ABSENT),
    }[basis]
    cands: dict[int, _Hang] = {}
    for e in comp:
        if e.kind in kinds and (e.dst in roots or basis == "none"):
            cands[id(e.hang)] = e.hang

    def key(h: _Hang) -> tuple:
        named = set(h.missing) | set(h.unknown)
        return (
            h.kind == _P2P,  # a collective names more of the picture than one send/recv
            sum(r in blocked for r in named),
            h.wait_ts_ns if h.wait_ts_ns is not None else 1 << 62,
            len(h.members),
        )

    return min(cands.values(), key=key)


def _one_hang(
    comp: list[_Edge],
    basis: str,
    roots: list[int],
    blocked: Mapping[int, _Edge],
    inv: _Inventory,
    hosts: Mapping[int, str],
    stacks: pd.DataFrame | None,
    run: RunInfo | None,
    world: set[int],
    missing_dumps: set[int],
    conf: Mapping[str, float],
) -> Finding:
    h = _primary(comp, roots, basis, blocked)
    rec = _recorder(h.key[0])
    culprits = tuple(roots)
    frames = {r: culprit_frame(stacks, r) for r in culprits}
    where = "; ".join(
        f"{_fmt_ranks([r], hosts)} is in {f['text']}"
        if f["source"] != "flight_recorder"
        else f"{_fmt_ranks([r], hosts)} last called a collective from {f['text']}"
        for r, f in frames.items()
        if f
    )
    comp_ranks = {e.src for e in comp} | {e.dst for e in comp if e.dst is not None}
    rolled_unknown = sorted(
        {e.dst for e in comp if e.kind == _UNKNOWN and e.dst is not None and e.dst not in blocked} - set(culprits)
    )
    # Missing dumps of the hung group's members or of ranks caught in the hang: they may be behind
    # too (never the root while a proven one exists), and they make the picture less complete.
    primary_no_dump = sorted(
        {r for r in h.members if not inv.has(r, rec)} | {r for r in comp_ranks if r in missing_dumps}
    )
    primary_rolled = sorted(r for r in h.unknown if inv.has(r, rec) and r not in inv.empty_off)
    empty = sorted(r for r in comp_ranks | set(h.members) if r in inv.empty_ranks)
    waiting_txt = _fmt_ranks(h.waiting, hosts) if len(h.waiting) <= 8 else f"{len(h.waiting)} ranks"
    verb = "is" if len(h.waiting) == 1 else "are"
    severity = Severity.CRITICAL
    if basis == "proof":
        if h.kind == _P2P:
            other = "send" if h.op == "recv" else "recv"
            summary = (
                f"{_fmt_ranks(culprits, hosts)} never posted the {other} matching {waiting_txt}'s {h.op} "
                f"(p2p seq {h.seq} of {h.label}); {waiting_txt} {verb} waiting in it"
            )
        else:
            summary = (
                f"{_fmt_ranks(culprits, hosts)} never entered {h.op or 'collective'} seq {h.seq} of {h.label}; "
                f"{waiting_txt} {verb} waiting in it"
            )
        confidence = conf["all"]
        if primary_no_dump or any(not inv.has(r, rec) for r in culprits):
            confidence = conf["missing"]
            if primary_no_dump:
                summary += f"; no dump from rank(s) {','.join(map(str, primary_no_dump))} (they may be behind too)"
        elif primary_rolled:
            confidence = min(confidence, conf["unknown"])
        silent_off = sorted({e.dst for e in comp if e.kind == _ABSENT and e.dst in inv.empty_off} - set(culprits))
        if silent_off:
            confidence = min(confidence, conf["missing"])
            summary += (
                f"; rank(s) {','.join(map(str, silent_off))} recorded nothing (Flight Recorder off there?) and "
                "others wait on them (behind this hang, or a second cause)"
            )
        if primary_rolled:
            summary += (
                f"; rank(s) {','.join(map(str, primary_rolled))} rolled their Flight Recorder buffer past this "
                "seq, so whether they entered it is unknown (not blamed)"
            )
    elif basis == _KERNEL:
        confidence = conf["kernel"]
        summary = (
            f"{_fmt_ranks(culprits, hosts)} enqueued {h.op or 'collective'} seq {h.seq} of {h.label} but its kernel "
            f"never started (the GPU stream is stuck before it); {waiting_txt} started it and {verb} waiting"
        )
    elif basis == _ABSENT:
        off = [r for r in culprits if r in inv.empty_off]
        state = (
            "still wait in" if h.still_waiting else "all entered (and retired, which on gloo includes timed-out ops)"
        )
        if off and len(off) == len(culprits):
            confidence = conf["empty"]
            summary = (
                f"{_fmt_ranks(culprits, hosts)} recorded nothing: Flight Recorder buffer empty and no process group "
                f"in it (recording off there, TORCH_FR_BUFFER_SIZE=0, or it never got to create its groups); "
                f"ranks {','.join(map(str, h.waiting))} {state} {h.op or 'collective'} seq {h.seq} of {h.label}: "
                "the empty buffer is the evidence, so confidence is lower"
            )
        else:
            confidence = conf["abs_wait"] if h.still_waiting else conf["abs_retired"]
            summary = (
                f"{_fmt_ranks(culprits, hosts)} left no Flight Recorder dump (dead process or host?); "
                f"ranks {','.join(map(str, h.waiting))} {state} {h.op or 'collective'} seq {h.seq} of {h.label} and "
                "none got further: absence is the evidence, so confidence is lower"
            )
    else:
        severity = Severity.WARNING
        confidence = conf["none"]
        unknown_all = sorted({e.dst for e in comp if e.dst is not None and e.kind == _UNKNOWN})
        summary = (
            f"{waiting_txt} {verb} waiting in {h.where}, but the root of the hang cannot be told"
            + (
                f": rank(s) {','.join(map(str, unknown_all))} rolled their Flight Recorder buffer past it "
                "(raise TORCH_FR_BUFFER_SIZE)"
                if unknown_all
                else ": the wait chain ends in ops every side entered, or in a send/recv whose other side "
                "the dumps do not show - a stall below Flight Recorder (a kernel, a stream, the network)"
            )
            + "; no rank is blamed"
        )
    if where:
        summary += f"; {where}"

    others = []
    seen = {id(h)}
    for e in sorted(comp, key=lambda e: (e.hang.wait_ts_ns or 1 << 62, e.hang.pg_name)):
        if id(e.hang) not in seen and e.kind != _UNATTRIBUTED:
            seen.add(id(e.hang))
            others.append(e.hang)
    states: dict[str, str] = {}
    in_comp_unknown = {e.dst for e in comp if e.kind == _UNKNOWN}
    for r in sorted(world):
        if r in culprits:
            states[str(r)] = RankState.CULPRIT
        elif r in missing_dumps:
            states[str(r)] = RankState.NO_DATA
        elif r in blocked:
            states[str(r)] = RankState.WAITING
        elif r in in_comp_unknown:
            states[str(r)] = RankState.UNKNOWN
        else:
            states[str(r)] = RankState.FINISHED
    ev: dict[str, Any] = {
        "basis": basis,
        "kind": h.kind,
        "pg_name": h.pg_name,
        "pg_desc": h.pg_desc,
        "backend": h.key[0] or None,
        "seq": h.seq,
        "op": h.op,
        "input_sizes": _plain(h.entry.get("input_sizes")),
        "input_dtypes": _plain(h.entry.get("input_dtypes")),
        "waiting_ranks": list(h.waiting),
        "members": list(h.members),
        "membership": h.membership,
        "last_enqueued_seq": {str(r): p for r, p in sorted(h.positions.items())},
        "missing_dumps": sorted(missing_dumps),
        "hang_map": {**rank_grid(run, world), "states": states, "hosts": {str(r): hosts.get(r) for r in sorted(world)}},
        # the cascade: every rank blocked behind the root(s), and where it waits
        "blocked": {
            str(r): _waits_text(blocked[r], hosts) for r in sorted(comp_ranks) if r in blocked and r not in culprits
        },
    }
    if h.kind == _P2P:
        ev["peer"] = h.peer
    if h.states:
        ev["nccl_state"] = {str(r): s for r, s in sorted(h.states.items())}
    timeout = _int_or_none(h.entry.get("timeout_ms"))
    if timeout:
        ev["timeout_ms"] = timeout
    if h.entry.get("frames"):
        ev["waiting_call_site"] = _call_site(h.entry["frames"])
    if h.wrapped:
        ev["buffer_wrapped_ranks"] = list(h.wrapped)
    unknown_why = {str(r): "ring buffer rolled past the hung op" for r in primary_rolled + rolled_unknown}
    if unknown_why:
        ev["unknown_ranks"] = dict(sorted(unknown_why.items(), key=lambda kv: int(kv[0])))
    if empty:
        ev["empty_buffer_ranks"] = empty
    if len(inv.versions) > 1:
        ev["fr_versions"] = {v: list(rs) for v, rs in inv.versions.items()}
    if frames and any(frames.values()):
        ev["stack"] = {str(r): f["text"] for r, f in frames.items() if f}
        ev["stack_frames"] = {str(r): f for r, f in frames.items() if f}
    if others:
        ev["also_hung"] = [
            {
                "pg_name": o.pg_name,
                "pg_desc": o.pg_desc,
                "kind": o.kind,
                "seq": o.seq,
                "op": o.op,
                "waiting": list(o.waiting),
                "never_entered": list(o.missing),
                "unknown": list(o.unknown),
                "blocked_elsewhere": {
                    str(r): _waits_text(blocked[r], hosts) for r in (*o.missing, *o.unknown) if r in blocked
                },
            }
            for o in others
        ]
        shown = ", ".join(_short(o) for o in others[:6])
        more = f" and {len(others) - 6} more" if len(others) > 6 else ""
        summary += f" (also hung: {shown}{more})"
    no_dump = [r for r in culprits if r in missing_dumps]
    if no_dump and basis != _ABSENT:
        ev["no_dump_culprits"] = no_dump
    return Finding(
        kind=FindingKind.HUNG_COLLECTIVE,
        severity=severity,
        summary=summary,
        category=Category.COLLECTIVE_TIMEOUT,
        hosts=tuple(sorted({hosts[r] for r in culprits if r in hosts})),
        ranks=tuple(sorted(culprits)),
        confidence=confidence,
        evidence=ev,
    )


def _deadlock_findings(
    comp: list[_Edge],
    blocked: Mapping[int, _Edge],
    inv: _Inventory,
    hosts: Mapping[int, str],
    stacks: pd.DataFrame | None,
    run: RunInfo | None,
    world: set[int],
    missing_dumps: set[int],
    conf: Mapping[str, float],
) -> list[Finding]:
    """Everyone waited on waits on someone: ops issued in a different order on different ranks.
    One finding per hung op of the cycle, naming the ranks missing there (each is also blocked)."""
    out = []
    seen: set[int] = set()
    for e in comp:
        h = e.hang
        if e.kind not in _PROOF or id(h) in seen:
            continue
        seen.add(id(h))
        culprits = h.missing
        waits = "; ".join(f"rank {r} waits in {_waits_text(blocked[r], hosts)}" for r in culprits if r in blocked)
        summary = (
            f"{h.where} never got {_fmt_ranks(culprits, hosts)}, which {'is' if len(culprits) == 1 else 'are'} "
            f"blocked in other ops ({waits}): collectives issued in a different order on different ranks"
        )
        frames = {r: culprit_frame(stacks, r) for r in culprits}
        where = "; ".join(f"{_fmt_ranks([r], hosts)} is in {f['text']}" for r, f in frames.items() if f)
        if where:
            summary += f"; {where}"
        rec = _recorder(h.key[0])
        base = conf["missing"] if any(not inv.has(r, rec) for r in h.members) else conf["all"]
        states = {
            str(r): RankState.CULPRIT
            if r in culprits
            else RankState.NO_DATA
            if r in missing_dumps
            else RankState.WAITING
            if r in blocked
            else RankState.FINISHED
            for r in sorted(world)
        }
        out.append(
            Finding(
                kind=FindingKind.HUNG_COLLECTIVE,
                severity=Severity.CRITICAL,
                summary=summary,
                category=Category.COLLECTIVE_TIMEOUT,
                hosts=tuple(sorted({hosts[r] for r in culprits if r in hosts})),
                ranks=tuple(sorted(culprits)),
                confidence=round(base * 0.6, 4),
                evidence={
                    "basis": "deadlock",
                    "kind": h.kind,
                    "pg_name": h.pg_name,
                    "pg_desc": h.pg_desc,
                    "seq": h.seq,
                    "op": h.op,
                    "waiting_ranks": list(h.waiting),
                    "members": list(h.members),
                    "membership": h.membership,
                    "missing_dumps": sorted(missing_dumps),
                    "blocked": {str(r): _waits_text(x, hosts) for r, x in sorted(blocked.items())},
                    "hang_map": {
                        **rank_grid(run, world),
                        "states": states,
                        "hosts": {str(r): hosts.get(r) for r in sorted(world)},
                    },
                },
            )
        )
    return out


def _plain(v: Any) -> Any:
    if v is None or (isinstance(v, float) and pd.isna(v)):
        return None
    if hasattr(v, "tolist"):
        v = v.tolist()
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v]
    return v


def analyze(signals: Signals) -> list[Finding]:
    coll = signals.table(SignalKind.COLLECTIVES)
    if coll is None or coll.num_rows == 0:
        return []
    status = signals.table(SignalKind.PG_STATUS) if SignalKind.PG_STATUS in signals.tables else None
    dumps = signals.table(SignalKind.FR_DUMPS) if SignalKind.FR_DUMPS in signals.tables else None
    stacks = signals.table(SignalKind.STACKS)
    return analyze_hangs(
        coll.to_pandas(),
        status.to_pandas() if status is not None else None,
        stacks.to_pandas() if stacks is not None and stacks.num_rows else None,
        signals.run,
        dumps.to_pandas() if dumps is not None and dumps.num_rows else None,
    )


def notes(signals: Signals) -> list[str]:
    """Why Flight Recorder dumps named no hang, where every recorded op is over on every rank that dumped.

    Dumps are taken when a job looks stuck, so "no finding" must say what was and was not seen: gloo records
    collectives only (no send/recv entry: ProcessGroupGloo records no p2p in torch 2.13's Flight Recorder), and no
    backend records compute, I/O or a data loader, so such a wait leaves every recorded op complete."""
    coll = signals.table(SignalKind.COLLECTIVES)
    if coll is None or coll.num_rows == 0:
        return []
    c = coll.select([n for n in ("rank", "pg_name", "seq", "state", "retired", "backend") if n in coll.column_names])
    df = c.to_pandas()
    over = df["retired"].fillna(False).astype(bool) if "retired" in df else pd.Series(False, index=df.index)
    if "state" in df:
        over |= df["state"].eq("completed")
    if not over.all():
        return []  # something was pending and still no hang was proven: the findings' absence is the analyzer's call
    # A p2p entry may carry no collective seq (NCCL numbers it by p2p_seq): only numbered entries place a group.
    df["seq"] = pd.to_numeric(df["seq"], errors="coerce") if "seq" in df else float("nan")
    last = df.dropna(subset=["seq"]).groupby("pg_name")["seq"].max().sort_index()
    groups = ", ".join(f"group {g} to seq {int(q)}" for g, q in list(last.items())[:4])
    more = f" and {len(last) - 4} more groups" if len(last) > 4 else ""
    where = f" ({groups}{more})" if groups else ""
    gloo = "backend" in df and df["backend"].eq("gloo").any()
    hidden = (
        "Gloo records no send/recv, so a point-to-point hang does not show in these dumps"
        if gloo
        else "A wait outside collectives (compute, I/O, a data loader) does not show in these dumps"
    )
    return [
        f"Flight Recorder: {df['rank'].nunique()} rank(s) dumped and every recorded op is over on each{where}:"
        f" no collective is pending. {hidden}; take each rank's stack (py-spy dump --pid PID) to see where it waits."
    ]
