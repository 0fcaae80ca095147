"""Hangs seen in Python stacks alone (pure: the `stacks` table in, findings out).

For runs where the Flight Recorder is not there (a user script with no trainctl dump, the periodic
dumps of torch's debug server, a py-spy sweep), the ranks' live stacks still say where each rank
is: inside a torch.distributed collective (`distributed_c10d.py`, the function the user called) or
somewhere else. Where some ranks wait in a collective and others are outside any, the ones outside
are the ranks the others wait for, as in MegaScale's hang reading of stacks.

A single snapshot can catch a healthy run in passing (a rank a few milliseconds behind its peers),
so it is a warning with low confidence. Successive snapshots (torch's periodic dumper every
`dump_interval` seconds, or repeated hang dumps) in which every involved rank stays at the same
place for at least `min_stuck_s` make it critical; successive snapshots in which one of them moved
are a run making progress, and give nothing (the periodic dumper runs on healthy runs too). It is
never high confidence: stacks show where a rank is, not which collective of which group it waits
in - that proof is the Flight Recorder's, and where its tables are present the Flight Recorder
analyzer (trainctl.analyzers.hangs) speaks and this one stays silent. On NCCL the Python stack of
a rank that waits on a hung collective is usually at a CUDA synchronisation (`.item()`,
`synchronize()`), not inside the collective call, so there the stacks alone rarely see a waiter.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

import pandas as pd

from trainctl.analyzers.hangs import is_internal_frame
from trainctl.findings import Category, Finding, FindingKind, Severity
from trainctl.schemas import SignalKind
from trainctl.signals import Signals

__all__ = ["Position", "positions", "analyze_stack_hangs", "analyze", "COLLECTIVE_FUNCTIONS"]

LIVE_SOURCES = ("py-spy", "dump_traceback")  # the Flight Recorder's frames are where a rank WAS
C10D_FILE = "torch/distributed/distributed_c10d.py"
# torch 2.13 torch/distributed/distributed_c10d.py: the public calls that block until peers join
# (send/recv and the object collectives included; isend/irecv return at once and block in wait()).
COLLECTIVE_FUNCTIONS = frozenset(
    {
        "all_reduce", "all_reduce_coalesced", "all_gather", "all_gather_into_tensor", "all_gather_object",
        "all_gather_coalesced", "all_to_all", "all_to_all_single", "barrier", "monitored_barrier", "broadcast",
        "broadcast_object_list", "gather", "gather_object", "scatter", "scatter_object_list", "reduce",
        "reduce_scatter", "reduce_scatter_tensor", "send", "recv", "send_object_list", "recv_object_list",
        "_all_gather_base", "_reduce_scatter_base",
    }
)  # fmt: skip

# Snapshots of every involved rank, unchanged over at least this long, make the hang critical.
MIN_STUCK_S = 5.0
CONFIDENCE_ONE_SNAPSHOT = 0.5
_SAME_SNAPSHOT_NS = 1_000_000_000  # ranks' files of one dump are written within this of each other
CONFIDENCE_STUCK = 0.8  # below the runbooks' default gate (0.9): stacks alone never evict


@dataclass(frozen=True)
class Position:
    """Where a rank's main thread is in one snapshot."""

    rank: int
    ts_ns: int
    collective: str | None  # the c10d call it is blocked in, None when outside any
    site: str  # innermost frame outside torch/stdlib ("train_step(), train.py:88"), or the innermost frame
    host: str | None


def _main_thread(frames: pd.DataFrame) -> pd.DataFrame:
    threads = list(dict.fromkeys(frames["thread"].tolist()))
    thread = "MainThread" if "MainThread" in threads else threads[0]
    return frames[frames["thread"] == thread].sort_values("depth")


def positions(stacks: pd.DataFrame) -> dict[int, list[Position]]:
    """Each rank's positions, oldest snapshot first (one snapshot = one `ts` of one live source)."""
    live = stacks[stacks["source"].isin(LIVE_SOURCES) & stacks["ts"].notna()]
    out: dict[int, list[Position]] = {}
    for (rank, ts), snap in live.groupby(["rank", "ts"], sort=True):
        main = _main_thread(snap)
        collective = None
        for fr in main.itertuples(index=False):
            fname = str(fr.filename or "").replace("\\", "/")
            if fname.endswith(C10D_FILE) and fr.function in COLLECTIVE_FUNCTIONS:
                collective = fr.function  # innermost c10d call: the one the rank is blocked in
                break
        # The innermost frame in the user's own files (a script's top level, `<module>`, counts),
        # else the innermost frame.
        own = [fr for fr in main.itertuples(index=False) if not is_internal_frame(fr.filename, "f")]
        top = own[0] if own else next(main.itertuples(index=False))
        line = None if pd.isna(top.line) else int(top.line)
        site = f"{top.function}(), {os.path.basename(str(top.filename or '?'))}:{line}"
        host = snap["host"].dropna().iloc[0] if "host" in snap and snap["host"].notna().any() else None
        ts_ns = int(pd.Timestamp(ts).value)
        out.setdefault(int(rank), []).append(Position(int(rank), ts_ns, collective, site, host))
    return out


def _stuck_s(history: list[Position]) -> float:
    """How long the rank has stayed where its newest snapshot shows it (0 with one snapshot)."""
    last = history[-1]
    first = last
    for p in reversed(history[:-1]):
        if (p.collective, p.site) != (last.collective, last.site):
            break
        first = p
    return (last.ts_ns - first.ts_ns) / 1e9


def analyze_stack_hangs(
    stacks: pd.DataFrame,
    *,
    world: int | None = None,
    hosts: Mapping[int, str] | None = None,
    min_stuck_s: float = MIN_STUCK_S,
) -> list[Finding]:
    """One finding when some ranks wait in a collective: the ranks outside any collective are its
    culprits; with none outside, the ranks with no stack at all are named (a rank that did not
    answer) at lower confidence, and with neither, nobody is named."""
    hist = positions(stacks)
    if not hist:
        return []
    # A rank absent from later snapshots that others are in stopped answering: its old position
    # is not where it is now. (One-shot dumps, a file per rank, are one snapshot each: none is later.)
    later = [p.ts_ns for h in hist.values() if len(h) > 1 for p in h]
    gone = {r for r, h in hist.items() if later and max(later) > h[-1].ts_ns + _SAME_SNAPSHOT_NS}
    now = {r: h[-1] for r, h in hist.items() if r not in gone}
    waiting = sorted(r for r, p in now.items() if p.collective is not None)
    if not waiting:
        return []
    outside = sorted(r for r, p in now.items() if p.collective is None)
    expected = set(range(world)) if world else set(hist)
    silent = sorted(expected - set(now))
    stuck = {r: _stuck_s(h) for r, h in hist.items()}
    involved = waiting + outside
    held = min(stuck[r] for r in involved)
    is_stuck = held >= min_stuck_s
    snapshots = max(len(h) for h in hist.values())
    if snapshots > 1 and not is_stuck:
        return []  # successive dumps and a rank moved between them: the run is progressing
    host_of = {r: (hosts or {}).get(r) or (now[r].host if r in now else None) for r in expected | set(now)}
    ops = sorted({now[r].collective for r in waiting})  # type: ignore[misc]
    op = "/".join(ops)
    evidence: dict[str, object] = {
        "basis": "python stacks (no Flight Recorder)",
        "waiting": {str(r): f"in {now[r].collective}() from {now[r].site}" for r in waiting},
        "outside_collectives": {str(r): now[r].site for r in outside},
        "snapshots": snapshots,
        "unchanged_for_s": round(held, 1),
    }
    if silent:
        evidence["no_stack"] = silent
    if outside:
        culprits, confidence = outside, (CONFIDENCE_STUCK if is_stuck else CONFIDENCE_ONE_SNAPSHOT)
        where = "; ".join(f"rank {r} at {now[r].site}" for r in outside[:4])
        summary = f"{_ranks(waiting)} {_verb(waiting)} in {op}() while {where} never joined it"
    elif silent:
        culprits, confidence = silent, (CONFIDENCE_STUCK if is_stuck else CONFIDENCE_ONE_SNAPSHOT) - 0.1
        summary = f"{_ranks(waiting)} {_verb(waiting)} in {op}(); {_ranks(silent)} gave no stack (dead or wedged?)"
    else:
        if not is_stuck:
            return []
        culprits, confidence = [], CONFIDENCE_ONE_SNAPSHOT
        summary = (
            f"every rank waits in {op}() and none is outside a collective: the stacks cannot name a culprit "
            "(the wait is in the network or in another group; dump the Flight Recorder)"
        )
    if is_stuck:
        summary += f" (unchanged over {snapshots} snapshots, {held:.0f} s)"
    else:
        summary += " (seen in the newest snapshot only: a later dump confirms or clears it)"
    return [
        Finding(
            kind=FindingKind.HUNG_COLLECTIVE,
            severity=Severity.CRITICAL if is_stuck and culprits else Severity.WARNING,
            summary=summary,
            category=Category.COLLECTIVE_TIMEOUT,
            hosts=tuple(sorted({host_of[r] for r in culprits if host_of.get(r)})),
            ranks=tuple(culprits),
            confidence=round(confidence, 3),
            evidence=evidence,
        )
    ]


def _ranks(ranks: list[int]) -> str:
    shown = ", ".join(map(str, ranks[:8]))
    return (
        ("rank " if len(ranks) == 1 else "ranks ") + shown + (f" and {len(ranks) - 8} more" if len(ranks) > 8 else "")
    )


def _verb(ranks: list[int]) -> str:
    return "waits" if len(ranks) == 1 else "wait"


def analyze(signals: Signals) -> list[Finding]:
    if signals.has(SignalKind.COLLECTIVES):
        return []  # the Flight Recorder's proof speaks (trainctl.analyzers.hangs)
    t = signals.table(SignalKind.STACKS)
    if t is None or not t.num_rows:
        return []
    run = signals.run
    return analyze_stack_hangs(
        t.to_pandas(), world=run.world_size if run else None, hosts=signals.rank_to_host() or None
    )
