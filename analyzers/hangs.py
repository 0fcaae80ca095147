"""Hung and mismatched collectives from Flight Recorder tables (pure: tables in, findings out).

The algorithm (peers.md §1.5 for the stock analyzer it improves on; seeds.md §2 for MegaScale):

1. Membership of each process group: Flight Recorder's pg_config where it names ranks (NCCL);
   the whole world for the default group; on gloo (pg_config empty) the RunInfo group list that
   contains every rank reporting the group; else the reporting ranks themselves (said so in the
   evidence).
2. How far each member got: `last_enqueued` from pg_status (survives ring-buffer wrap) or the
   highest seq among its entries. The first seq not entered by every member is the hang point;
   the culprits are the members that never enqueued it - never the ones waiting in it.
3. At every seq all members hold (entries aligned per group by seq, after dropping what a wrapped
   ring buffer lost on any rank), op/dtype/size signatures are compared; a minority signature
   is a `collective_mismatch` naming the deviating rank by majority vote.
4. Ranks without a dump are "no data": if every rank that did dump entered the last collective,
   the missing ranks are the likely culprits (absence is evidence, MegaScale's silent-rank rule),
   at lower confidence.
5. Several groups hung at once: a culprit that is itself waiting in another hung group is
   blocked, not a root cause; hangs with the same root culprits are merged into one finding.
6. Evidence: the culprit's stack (innermost frame of its main thread outside torch/stdlib,
   preferring py-spy, then dump_traceback, then the Flight Recorder call site), and a rank grid
   (`hang_map`) for the terminal hang map.
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

__all__ = ["RankState", "analyze_hangs", "analyze", "rank_grid", "culprit_frame"]

logger = logging.getLogger(__name__)


class RankState:
    WAITING = "waiting"
    CULPRIT = "culprit"
    FINISHED = "finished"
    NO_DATA = "no_data"


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
_STDLIB = set(getattr(sys, "stdlib_module_names", ()))


@dataclass
class _PgHang:
    pg_name: str
    pg_desc: str | None
    members: tuple[int, ...]
    membership: str
    seq: int | None  # the first seq not entered by all dumped members; None: absence-only
    culprits: tuple[int, ...]  # members that never enqueued `seq` (or left no dump)
    waiting: tuple[int, ...]
    positions: dict[int, int]
    missing_dumps: tuple[int, ...]
    op: str | None = None
    entry: Mapping[str, Any] = field(default_factory=dict)
    wait_ts_ns: int | None = None
    absence_only: bool = False
    still_waiting: bool = True
    wrapped: tuple[int, ...] = ()


def _is_internal(filename: str | None, function: str) -> bool:
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
        threads = list(dict.fromkeys(s["thread"].tolist()))
        thread = "MainThread" if "MainThread" in threads else threads[0]
        frames = s[s["thread"] == thread].sort_values("depth") if thread is not None else s.sort_values("depth")
        for fr in frames.itertuples(index=False):
            if not _is_internal(fr.filename, fr.function):
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


def _int_or_none(v: Any) -> int | None:
    return None if v is None or (isinstance(v, float) and pd.isna(v)) or v is pd.NA else int(v)


def _signature(row: Mapping[str, Any]) -> tuple:
    def norm(v: Any) -> Any:
        if v is None or (isinstance(v, float) and pd.isna(v)):
            return None
        return json.dumps([list(map(int, x)) if hasattr(x, "__iter__") and not isinstance(x, str) else x for x in v])

    op = row["op"]
    dtypes = (norm(row.get("input_dtypes")), norm(row.get("output_dtypes")))
    sizes = (norm(row.get("input_sizes")), norm(row.get("output_sizes"))) if op in _SYMMETRIC_OPS else None
    return (op, dtypes, sizes)


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


def analyze_hangs(
    collectives: pd.DataFrame,
    pg_status: pd.DataFrame | None = None,
    stacks: pd.DataFrame | None = None,
    run: RunInfo | None = None,
    *,
    confidence_all_dumps: float = 0.95,
    confidence_missing_dumps: float = 0.75,
    confidence_absence_waiting: float = 0.6,
    confidence_absence_retired: float = 0.45,
    confidence_mismatch: float = 0.9,
    confidence_tie: float = 0.4,
) -> list[Finding]:
    """Findings for hung collectives (`hung_collective`) and mismatched ones (`collective_mismatch`).

    collectives: the `collectives` table (one row per Flight Recorder entry, `host` column optional).
    pg_status: the `pg_status` table (per rank and group: last enqueued/completed seq); optional.
    stacks: the `stacks` table, for the culprit's frame; optional.
    run: RunInfo for world size, rank->host, group membership and the grid; optional.
    confidence_*: the confidence given to a hang seen with every member's dump, with some dumps
    missing, a hang inferred only from missing dumps while the others still wait / have retired
    their last collective, a majority-vote mismatch and a mismatch with a tied vote.
    """
    coll = collectives[collectives["seq"].notna()].copy() if not collectives.empty else collectives
    coll["seq"] = coll["seq"].astype("int64")
    hosts: dict[int, str] = run.rank_to_host() if run else {}
    if "host" in collectives.columns:
        for r, h in collectives[["rank", "host"]].drop_duplicates().itertuples(index=False):
            if h is not None and not pd.isna(h):
                hosts.setdefault(int(r), str(h))
    status = pg_status if pg_status is not None else pd.DataFrame(columns=["rank", "pg_name", "last_enqueued_seq"])
    if "host" in status.columns:
        for r, h in status[["rank", "host"]].drop_duplicates().itertuples(index=False):
            if h is not None and not pd.isna(h):
                hosts.setdefault(int(r), str(h))
    dumped = set(map(int, collectives["rank"])) | set(map(int, status["rank"]))
    if not dumped:
        return []
    world = set(range(run.world_size)) if run else set(range(max(dumped) + 1))
    missing_dumps = world - dumped

    pgs: dict[str, str | None] = {}
    for name, desc in coll[["pg_name", "pg_desc"]].drop_duplicates().itertuples(index=False):
        pgs.setdefault(str(name), None if desc is None or pd.isna(desc) else str(desc))
    for name in status["pg_name"].unique():
        pgs.setdefault(str(name), None)

    hangs: list[_PgHang] = []
    findings: list[Finding] = []
    for pg_name, pg_desc in sorted(pgs.items(), key=lambda kv: (len(kv[0]), kv[0])):
        pc = coll[coll["pg_name"] == pg_name]
        ps = status[status["pg_name"] == pg_name]
        reporters = set(map(int, pc["rank"])) | set(map(int, ps["rank"]))
        members, membership = _membership(pg_name, pg_desc, pc, reporters, world, run)
        dumped_members = sorted(set(members) & dumped)
        if not dumped_members:
            continue
        positions: dict[int, int] = {}
        for r in dumped_members:
            enq = [int(v) for v in ps.loc[ps["rank"] == r, "last_enqueued_seq"].dropna()]
            seqs = pc.loc[pc["rank"] == r, "seq"]
            positions[r] = max(enq + ([int(seqs.max())] if len(seqs) else []) + [0])
        head = max(positions.values())
        low = min(positions.values())
        # Ring-buffer wrap: only seqs every dumped member still holds can be compared.
        firsts = [int(pc.loc[pc["rank"] == r, "seq"].min()) for r in dumped_members if (pc["rank"] == r).any()]
        start = max(firsts) if firsts else head + 1
        # A rank whose oldest kept entry is not its first record and not this group's first seq
        # lost entries to the ring buffer (record_id counts from 0 on every rank).
        per_rank = pc.groupby("rank").agg(first_record=("record_id", "min"), first_seq=("seq", "min"))
        wrapped = tuple(
            int(r) for r, row in per_rank.iterrows() if (row["first_record"] or 0) > 0 and row["first_seq"] > 1
        )
        mismatch = _first_mismatch(pc, dumped_members, start, min(head, low + 1))
        if mismatch is not None:
            findings.append(
                _mismatch_finding(
                    pg_name,
                    pg_desc,
                    members,
                    membership,
                    mismatch,
                    hosts,
                    stacks,
                    run,
                    confidence_mismatch,
                    confidence_tie,
                )
            )
            continue
        missing_members = tuple(sorted(set(members) - dumped))
        if low < head:
            seq = low + 1
            culprits = tuple(r for r in dumped_members if positions[r] < seq)
            waiting = tuple(r for r in dumped_members if positions[r] >= seq)
            at = pc[(pc["seq"] == seq) & pc["rank"].isin(waiting)]
            entry = at.iloc[0].to_dict() if len(at) else {}
            hangs.append(
                _PgHang(
                    pg_name,
                    pg_desc,
                    tuple(members),
                    membership,
                    seq,
                    culprits,
                    waiting,
                    positions,
                    missing_members,
                    op=entry.get("op"),
                    entry=entry,
                    wait_ts_ns=_ts_ns(at["enqueue_ts"].min()) if len(at) else None,
                    wrapped=wrapped,
                )
            )
        elif missing_members:
            at = pc[(pc["seq"] == head) & pc["rank"].isin(dumped_members)]
            entry = at.iloc[0].to_dict() if len(at) else {}
            still = bool(len(at)) and not bool(at["retired"].fillna(False).astype(bool).all())
            hangs.append(
                _PgHang(
                    pg_name,
                    pg_desc,
                    tuple(members),
                    membership,
                    head if head else None,
                    missing_members,
                    tuple(dumped_members),
                    positions,
                    missing_members,
                    op=entry.get("op"),
                    entry=entry,
                    wait_ts_ns=_ts_ns(at["enqueue_ts"].min()) if len(at) else None,
                    absence_only=True,
                    still_waiting=still,
                    wrapped=wrapped,
                )
            )

    findings.extend(
        _hang_findings(
            hangs,
            hosts,
            stacks,
            run,
            world,
            missing_dumps,
            confidence_all_dumps,
            confidence_missing_dumps,
            confidence_absence_waiting,
            confidence_absence_retired,
        )
    )
    return findings


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
            return sorted(int(x) for x in v), "pg_config"
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


def _first_mismatch(pc: pd.DataFrame, members: list[int], start: int, end: int) -> dict[str, Any] | None:
    if len(members) < 2:
        return None
    window = pc[(pc["seq"] >= start) & (pc["seq"] <= end) & pc["rank"].isin(members)]
    for seq, at in window.groupby("seq", sort=True):
        if at["rank"].nunique() < 2:
            continue
        rows = {int(r["rank"]): r for r in at.to_dict("records")}
        sigs = {r: _signature(row) for r, row in rows.items()}
        counts = Counter(sigs.values())
        if len(counts) == 1:
            continue
        (top, n_top), *rest = counts.most_common()
        tie = bool(rest) and rest[0][1] == n_top
        deviating = sorted(r for r, s in sigs.items() if s != top) if not tie else sorted(rows)
        ref = rows[next(r for r, s in sigs.items() if s == top)]
        dev = rows[deviating[0]] if not tie else rows[sorted(rows)[-1]]
        if dev["op"] != ref["op"]:
            what, category = "op", Category.TYPE_MISMATCH
        elif _signature(dev)[1] != _signature(ref)[1]:
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
        if not _is_internal(f.get("filename"), f.get("name", "")):
            return f"{f.get('name')}(), {os.path.basename(f.get('filename') or '?')}:{f.get('line')}"
    return None


def _hang_findings(
    hangs: list[_PgHang],
    hosts: Mapping[int, str],
    stacks: pd.DataFrame | None,
    run: RunInfo | None,
    world: set[int],
    missing_dumps: set[int],
    conf_all: float,
    conf_missing: float,
    conf_abs_wait: float,
    conf_abs_retired: float,
) -> list[Finding]:
    if not hangs:
        return []
    # A rank waiting inside some hung group is blocked there, not a root cause elsewhere.
    blocked_in: dict[int, tuple[str, int | None]] = {}
    for h in hangs:
        if not h.absence_only:
            for r in h.waiting:
                blocked_in.setdefault(r, (h.pg_name, h.seq))
    roots: dict[tuple[int, ...], list[_PgHang]] = {}
    consequences: list[_PgHang] = []
    for h in hangs:
        free = tuple(r for r in h.culprits if r not in blocked_in)
        if free:
            roots.setdefault(free, []).append(h)
        else:
            consequences.append(h)
    all_waiting = set(blocked_in)
    findings: list[Finding] = []
    covered: set[str] = set()
    for culprits, hs in roots.items():
        hs.sort(
            key=lambda h: (
                h.absence_only,
                sum(r in blocked_in for r in h.culprits),
                len(h.members),
                h.wait_ts_ns if h.wait_ts_ns is not None else 1 << 62,
            )
        )
        primary = hs[0]
        others = hs[1:] + [
            c for c in consequences if any(blocked_in.get(r, ("",))[0] == primary.pg_name for r in c.culprits)
        ]
        covered.update(h.pg_name for h in [primary, *others])
        findings.append(
            _one_hang(
                primary,
                others,
                culprits,
                blocked_in,
                all_waiting,
                hosts,
                stacks,
                run,
                world,
                missing_dumps,
                conf_all,
                conf_missing,
                conf_abs_wait,
                conf_abs_retired,
            )
        )
    for c in consequences:
        if c.pg_name in covered:
            continue
        # Every missing rank waits in another group and nobody is free: collectives issued in a
        # different order on different ranks (a deadlock), or a cycle whose root left no trace.
        findings.append(
            _one_hang(
                c,
                [],
                c.culprits,
                blocked_in,
                all_waiting,
                hosts,
                stacks,
                run,
                world,
                missing_dumps,
                conf_all * 0.6,
                conf_missing * 0.6,
                conf_abs_wait,
                conf_abs_retired,
                deadlock=True,
            )
        )
    return findings


def _one_hang(
    h: _PgHang,
    others: list[_PgHang],
    culprits: tuple[int, ...],
    blocked_in: Mapping[int, tuple[str, int | None]],
    all_waiting: set[int],
    hosts: Mapping[int, str],
    stacks: pd.DataFrame | None,
    run: RunInfo | None,
    world: set[int],
    missing_dumps: set[int],
    conf_all: float,
    conf_missing: float,
    conf_abs_wait: float,
    conf_abs_retired: float,
    deadlock: bool = False,
) -> Finding:
    pg_label = f"pg {h.pg_name}" + (f" ({h.pg_desc})" if h.pg_desc else "")
    op = h.op or "collective"
    frames = {r: culprit_frame(stacks, r) for r in culprits}
    where = "; ".join(
        f"{_fmt_ranks([r], hosts)} is in {f['text']}"
        if f["source"] != "flight_recorder"
        else f"{_fmt_ranks([r], hosts)} last called a collective from {f['text']}"
        for r, f in frames.items()
        if f
    )
    no_dump = [r for r in culprits if r in missing_dumps]
    if h.absence_only:
        conf = conf_abs_wait if h.still_waiting else conf_abs_retired
        state = (
            "still wait in" if h.still_waiting else "all entered (and retired, which on gloo includes timed-out ops)"
        )
        summary = (
            f"{_fmt_ranks(culprits, hosts)} left no Flight Recorder dump (dead process or host?); "
            f"ranks {','.join(map(str, h.waiting))} {state} {op} seq {h.seq} of {pg_label} and none got further: "
            f"absence is the evidence, so confidence is lower"
        )
    elif deadlock:
        conf = conf_missing
        blocked = "; ".join(
            f"rank {r} waits in pg {blocked_in[r][0]} seq {blocked_in[r][1]}" for r in culprits if r in blocked_in
        )
        summary = (
            f"{op} seq {h.seq} of {pg_label} never got {_fmt_ranks(culprits, hosts)}, which are blocked in other "
            f"collectives ({blocked}): collectives issued in a different order on different ranks"
        )
    else:
        conf = conf_missing if h.missing_dumps or missing_dumps & set(h.members) else conf_all
        waiting_txt = _fmt_ranks(h.waiting, hosts) if len(h.waiting) <= 8 else f"{len(h.waiting)} ranks"
        summary = (
            f"{_fmt_ranks(culprits, hosts)} never entered {op} seq {h.seq} of {pg_label}; "
            f"{waiting_txt} {'is' if len(h.waiting) == 1 else 'are'} waiting in it"
        )
        if h.missing_dumps:
            summary += f"; no dump from rank(s) {','.join(map(str, h.missing_dumps))} (they may be behind too)"
    if where:
        summary += f"; {where}"
    states: dict[str, str] = {}
    for r in sorted(world):
        if r in culprits:
            states[str(r)] = RankState.CULPRIT
        elif r in missing_dumps:
            states[str(r)] = RankState.NO_DATA
        elif r in all_waiting or r in h.waiting:
            states[str(r)] = RankState.WAITING
        else:
            states[str(r)] = RankState.FINISHED
    ev: dict[str, Any] = {
        "pg_name": h.pg_name,
        "pg_desc": h.pg_desc,
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
    }
    if h.entry.get("frames"):
        ev["waiting_call_site"] = _call_site(h.entry["frames"])
    if h.wrapped:
        ev["buffer_wrapped_ranks"] = list(h.wrapped)
    if frames and any(frames.values()):
        ev["stack"] = {str(r): f["text"] for r, f in frames.items() if f}
        ev["stack_frames"] = {str(r): f for r, f in frames.items() if f}
    if others:
        ev["also_hung"] = [
            {
                "pg_name": o.pg_name,
                "pg_desc": o.pg_desc,
                "seq": o.seq,
                "op": o.op,
                "never_entered": list(o.culprits),
                "blocked_elsewhere": {
                    str(r): f"pg {blocked_in[r][0]} seq {blocked_in[r][1]}" for r in o.culprits if r in blocked_in
                },
            }
            for o in others
        ]
        summary += f" (also hung: {', '.join(f'pg {o.pg_name} seq {o.seq}' for o in others)})"
    if no_dump and not h.absence_only:
        ev["no_dump_culprits"] = no_dump
    return Finding(
        kind=FindingKind.HUNG_COLLECTIVE,
        severity=Severity.CRITICAL,
        summary=summary,
        category=Category.COLLECTIVE_TIMEOUT,
        hosts=tuple(sorted({hosts[r] for r in culprits if r in hosts})),
        ranks=tuple(sorted(culprits)),
        confidence=conf,
        evidence=ev,
    )


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
    stacks = signals.table(SignalKind.STACKS)
    return analyze_hangs(
        coll.to_pandas(),
        status.to_pandas() if status is not None else None,
        stacks.to_pandas() if stacks is not None and stacks.num_rows else None,
        signals.run,
    )
