"""Where a run goes after an eviction: same size on spares, smaller if the layout allows, or stop.

Pure: hosts, quarantine and layout in, a RelaunchPlan out. `trainctl evict-node --relaunch` prints
it; the launcher (`launch --hosts`) and the supervisor execute it.

Layout rule: the model-parallel product (tp x pp, from RunInfo.layout) is fixed by the model's
sharding; only the data-parallel degree may shrink. So a smaller world is allowed when
`healthy_hosts * nproc_per_node` is a positive multiple of tp x pp (and at least `min_hosts`).
A run without a layout is treated as pure data parallel (tp x pp = 1).

Whether a run *may* shrink is a property of its training script, not of the layout: the
reference trainer resumes a checkpoint written at a larger dp (trainctl.runtime.rank_map), an
arbitrary user script may not (its checkpoint may be one file per rank with no way to map it).
`shrink_allowed` is that rule: the reference trainer always, a user script only with the
operator's `--allow-shrink` (on `launch --hosts` or on `evict-node --relaunch`).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from trainctl.inventory import host_key

__all__ = ["PlanKind", "RelaunchPlan", "plan_relaunch", "shrink_allowed", "ALLOW_SHRINK_FLAG"]

ALLOW_SHRINK_FLAG = "--allow-shrink"


class PlanKind(str, Enum):
    UNCHANGED = "unchanged"  # nothing to evict in the current host list
    REPLACE = "replace"  # same world size: every evicted host replaced by a spare
    SHRINK = "shrink"  # fewer hosts, smaller data-parallel degree
    STOP = "stop"  # cannot relaunch: `reason` says why and what would help


@dataclass(frozen=True)
class RelaunchPlan:
    kind: PlanKind
    hosts: tuple[str, ...]  # the new host list, rendezvous host first; () on STOP
    removed: tuple[str, ...]  # current hosts left out (quarantined)
    replacements: Mapping[str, str]  # evicted host -> spare taking its place (its ranks)
    world_size: int  # of the new run; 0 on STOP
    layout: Mapping[str, int] = field(default_factory=dict)  # new layout (dp recomputed)
    reason: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind.value,
            "hosts": list(self.hosts),
            "removed": list(self.removed),
            "replacements": dict(self.replacements),
            "world_size": self.world_size,
            "layout": dict(self.layout),
            "reason": self.reason,
        }


def _model_parallel(layout: Mapping[str, int]) -> int:
    mp = 1
    for key, size in layout.items():
        if key != "dp":
            mp *= max(1, int(size))
    return mp


def shrink_allowed(*, script: str | None, opt_in: bool) -> tuple[bool, str]:
    """(may the run come back smaller, why / what would allow it) for plan_relaunch.

    `script` is RunInfo.script (None: the reference trainer); `opt_in` the operator's --allow-shrink.
    """
    if script is None:
        return True, "the reference trainer resumes a checkpoint at a smaller data-parallel degree"
    if opt_in:
        return True, f"{ALLOW_SHRINK_FLAG} given for {script}"
    return False, (
        f"pass {ALLOW_SHRINK_FLAG} if {script} can resume at a smaller world size "
        "(trainctl cannot tell for a user script)"
    )


def plan_relaunch(
    hosts: Sequence[str],
    *,
    quarantined: Collection[str],
    spares: Sequence[str] = (),
    nproc_per_node: int,
    layout: Mapping[str, int] | None = None,
    allow_shrink: bool = True,
    min_hosts: int = 1,
    no_shrink_hint: str = f"pass {ALLOW_SHRINK_FLAG} if the training script can resume at a smaller world size",
) -> RelaunchPlan:
    """Plan the next launch without the quarantined hosts.

    Args:
        hosts: the current run's hosts in rank order (the first hosts the rendezvous).
        quarantined: hosts that must not be used (the ledger plus the new eviction).
        spares: standby hosts in preference order; quarantined or already-used spares are skipped.
        nproc_per_node: ranks per host (unchanged by a relaunch).
        layout: the run's grid, e.g. {"dp": 4, "tp": 2, "pp": 1}; dp is recomputed.
        allow_shrink: when spares run out, may the run continue with fewer hosts?
        min_hosts: never shrink below this many hosts.
        no_shrink_hint: with allow_shrink=False, what would allow a smaller run (ends the STOP reason;
            shrink_allowed() gives it).

    Evicted hosts are replaced in place (the spare takes the evicted host's position, so its
    ranks keep their numbers and their checkpoint shards); surviving hosts keep their order.
    """
    layout = dict(layout or {})
    # by host_key: the ledger's NODE02 is the run's node02 or node02:2222 (one machine)
    quarantined = {host_key(h) for h in quarantined}
    used = {host_key(h) for h in hosts}
    removed = tuple(h for h in hosts if host_key(h) in quarantined)
    mp = _model_parallel(layout)
    if not removed:
        return RelaunchPlan(
            PlanKind.UNCHANGED,
            tuple(hosts),
            (),
            {},
            len(hosts) * nproc_per_node,
            layout,
            "no current host is quarantined; relaunch on the same hosts",
        )
    free: list[str] = []  # usable spares in order: not quarantined, not in the run, each once
    taken = quarantined | used
    for s in spares:
        if host_key(s) not in taken:
            free.append(s)
            taken.add(host_key(s))
    if len(free) >= len(removed):
        repl = dict(zip(removed, free))
        new = tuple(repl.get(h, h) for h in hosts)
        return RelaunchPlan(
            PlanKind.REPLACE,
            new,
            removed,
            repl,
            len(new) * nproc_per_node,
            layout,
            "replaced " + ", ".join(f"{a} -> {b}" for a, b in repl.items()) + " from the spares",
        )
    # Spares first, then shrink: keep the order of survivors, append the spares we have.
    survivors = [h for h in hosts if host_key(h) not in quarantined]
    repl = dict(zip(removed, free))
    new = tuple(repl.get(h, h) for h in hosts if host_key(h) not in quarantined or h in repl)
    need = len(hosts)
    short = (
        f"layout needs {need} hosts ({len(hosts) * nproc_per_node} ranks), only {len(survivors)} healthy "
        f"and {len(free)} free spare{'s' if len(free) != 1 else ''}"
    )
    if not allow_shrink:
        return RelaunchPlan(
            PlanKind.STOP, (), removed, {}, 0, layout, f"{short}; add spares with --spares, or {no_shrink_hint}"
        )
    world = len(new) * nproc_per_node
    if len(new) < max(1, min_hosts) or world % mp != 0 or world == 0:
        why = (
            f"a smaller run needs a multiple of tp x pp = {mp} ranks and at least {max(1, min_hosts)} host(s), "
            f"but {len(new)} host(s) x {nproc_per_node} = {world} ranks"
        )
        return RelaunchPlan(PlanKind.STOP, (), removed, {}, 0, layout, f"{short}; {why}; add spares with --spares")
    new_layout = dict(layout)
    if layout:
        new_layout["dp"] = world // mp
    return RelaunchPlan(
        PlanKind.SHRINK,
        new,
        removed,
        repl,
        world,
        new_layout,
        f"{short}; shrinking to {len(new)} hosts ({world} ranks"
        + (f", dp {layout.get('dp', '?')} -> {new_layout['dp']}" if layout else "")
        + ")",
    )
