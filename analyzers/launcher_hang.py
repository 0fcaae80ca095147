"""The launcher's own hang record as a finding, where the hang analyzers localised nothing.

`trainctl launch` watches every rank's heartbeat; when no rank made progress for --hang-timeout it
dumps the ranks (Flight Recorder, stacks), writes hang.json (why, when, the ranks that stopped)
and then stops the run with SIGTERM. The collective analyzers (analyzers/hangs.py) name a culprit
only when ranks disagree: one missing from a collective the others entered, one stream behind the
others. A hang where every rank is in the same place (all ranks entered the collective and none
left it, or a one-rank run whose GPU stopped) gives them nothing to compare, and what was left
was the torchrun agent's "Received 15 death signal" / "closing signal SIGTERM" lines: trainctl's
own stop, read as a crash. Found on a real H100 (tests/gpu: an NCCL all_reduce queued behind a
kernel that never ends). This module turns the record into the incident's hang finding:

- the ranks that stopped, named only when that is one rank (a run of one, or the only rank still
  working): with several, stopping together is what a hang is, not who caused it;
- per rank (up to MAX_RANKS_SHOWN), the oldest collective still pending in its Flight Recorder at
  the dump (NCCL: not seen completed; gloo: not retired), how long before detection it was
  queued, and where the rank's main thread was (its live stack);
- what it means: a collective pending on every rank that entered it, on one rank or all, is the
  GPU stream or the transport under it (a stuck kernel, NVLink, the network), not host code; no
  collective pending means the ranks stopped in host code (data loading, a lock, I/O).

analyzers/root_cause.py folds it under a localised hang (or a crash, or a hardware fault) when
one exists and folds trainctl's own SIGTERM under it otherwise. Pure: rows and tables in.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from trainctl.analyzers.hangs import NCCL_BACKENDS, culprit_frame
from trainctl.findings import Category, Finding, FindingKind, Severity

__all__ = ["BASIS", "EVENT", "MAX_RANKS_SHOWN", "launcher_hang_finding"]

EVENT = "hang_detected"  # run_events.event for hang.json's rows (one per stopped rank)
BASIS = "the launcher's hang record (hang.json): no rank made progress for the hang timeout"
MAX_RANKS_SHOWN = 8


def _oldest_pending(coll: pd.DataFrame | None) -> dict[int, dict[str, Any]]:
    """rank -> its oldest entry still pending at the dump (hangs._pending's rule, vectorised: a run
    of thousands of ranks has millions of entries)."""
    if coll is None or coll.empty:
        return {}
    n = len(coll)
    backend = coll["backend"].fillna("") if "backend" in coll.columns else pd.Series([""] * n, index=coll.index)
    state = coll["state"] if "state" in coll.columns else pd.Series([None] * n, index=coll.index)
    retired = coll["retired"] if "retired" in coll.columns else pd.Series([None] * n, index=coll.index)
    nccl = backend.isin(NCCL_BACKENDS)
    not_retired = retired.isna() | ~retired.fillna(False).astype(bool)
    pend = coll[(nccl & (state != "completed")) | (~nccl & not_retired)]
    if pend.empty:
        return {}
    order = [c for c in ("rank", "enqueue_ts", "record_id") if c in pend.columns]
    first = pend.sort_values(order, na_position="last").drop_duplicates("rank")
    return {int(r["rank"]): r for r in first.to_dict("records")}


def _ns(v: Any) -> int | None:
    if v is None or (not isinstance(v, int) and pd.isna(v)):
        return None
    return int(v.value) if isinstance(v, pd.Timestamp) else int(v)


def _where(rank: int, hosts: Mapping[int, str]) -> str:
    h = hosts.get(rank)
    return f"rank {rank} on {h}" if h else f"rank {rank}"


def launcher_hang_finding(
    rows: Sequence[Mapping[str, Any]],
    collectives: pd.DataFrame | None,
    stacks: pd.DataFrame | None,
    rank_to_host: Mapping[int, str],
) -> Finding | None:
    """run_events rows of EVENT (one per stopped rank, ts = detection) -> one hang finding, or None."""
    rows = [r for r in rows if r.get("event") == EVENT]
    if not rows:
        return None
    stopped = sorted({int(r["rank"]) for r in rows})
    first = rows[0]
    detected_ns = _ns(first.get("ts"))
    reason = str(first.get("message") or "no rank made progress")
    per_rank: list[dict[str, Any]] = []
    pending_ranks: list[int] = []
    oldest = _oldest_pending(collectives)
    recorded = set() if collectives is None or collectives.empty else {int(r) for r in collectives["rank"].unique()}
    for rank in stopped:
        p = oldest.get(rank)
        shown = len(per_rank) < MAX_RANKS_SHOWN
        frame = culprit_frame(stacks, rank) if shown else None
        item: dict[str, Any] = {"rank": rank, "host": rank_to_host.get(rank)}
        if p is not None:
            pending_ranks.append(rank)
            enq = _ns(p.get("enqueue_ts"))
            item["pending_collective"] = {
                "op": p.get("op"),
                "process_group": p.get("pg_desc") or p.get("pg_name"),
                "seq": None if pd.isna(p.get("seq")) else int(p["seq"]),
                "state": p.get("state"),
                "queued_s_before_detection": round((detected_ns - enq) / 1e9, 1) if enq and detected_ns else None,
            }
        if frame is not None:
            item["stack"] = frame["text"]
        if shown:
            per_rank.append(item)

    one = stopped[0] if len(stopped) == 1 else None
    shown = per_rank[0] if per_rank else {}
    pc = shown.get("pending_collective")
    if one is not None:
        what = f"{_where(one, rank_to_host)} stopped ({reason})"
        if pc:
            age = pc.get("queued_s_before_detection")
            what += (
                f"; its {pc['op']} #{pc['seq']} of {pc['process_group']} was queued"
                + (f" {age:g} s before and" if age is not None else "")
                + " never completed: the GPU stream or the transport under it is stuck (a kernel that does not"
                " end, NVLink, the network), not host code"
            )
        elif one in recorded:
            what += "; no collective was pending in its Flight Recorder: it stopped in host code"
        else:
            what += "; its Flight Recorder holds nothing (not recorded or not dumped): where it stopped is not known"
        if shown.get("stack"):
            what += f"; it was in {shown['stack']}"
    elif pending_ranks and len(pending_ranks) == len(stopped):
        first_pc = next(x["pending_collective"] for x in per_rank if "pending_collective" in x)
        what = (
            f"the run hung ({reason}); all {len(stopped)} stopped ranks have a collective pending (e.g. "
            f"{_where(pending_ranks[0], {})}: {first_pc['op']} #{first_pc['seq']} of {first_pc['process_group']}) and "
            "no analyzer found one that a rank never entered: a GPU, NVLink or network fault under the collective, "
            "not localised by the recorders; see the NCCL logs and faulty hosts"
        )
    else:
        what = (
            f"the run hung ({reason}); {len(pending_ranks)} of {len(stopped)} stopped ranks have a collective pending in "
            "what the recorders hold: not localised"
        )
    return Finding(
        kind=FindingKind.HUNG_COLLECTIVE,
        severity=Severity.CRITICAL,
        category=Category.COLLECTIVE_TIMEOUT,
        summary=what,
        ranks=(one,) if one is not None else (),
        hosts=(rank_to_host[one],) if one is not None and rank_to_host.get(one) else (),
        confidence=0.8 if one is not None else 0.5,
        evidence={
            "basis": BASIS,
            "reason": reason,
            "detected_at_ns": detected_ns,
            "stopped_ranks": stopped[:1000],
            "stopped_ranks_total": len(stopped),
            "ranks": per_rank,
            "source": first.get("source"),
            "stopped_by": "trainctl sent SIGTERM after the dumps: torchrun's death-signal lines are that stop",
        },
    )
