"""Collective self-test over a set of hosts, after MegaScale's self-checks (NSDI'24 §4.3).

Three tests, each timed per group, run by every rank under torchrun (gloo on CPU, NCCL on GPU):
1. intra-host all-to-all among the ranks of each host;
2. all-reduce with neighbours: hosts paired in a ring, two rounds ((0,1),(2,3)... then (1,2),(3,0)...),
   so every host meets two different neighbours and a bad host makes both of its pairs slow;
3. bisection of the slow set: the hosts of slow pairs are halved and each half all-reduces on its
   own; the slow half is halved again until single hosts remain.

The decisions (which groups are slow, how to split, who is to blame) are pure functions at the top
of this module, unit-tested on timings; the worker only measures and every rank applies the same
decision to the same all-gathered timings, so no rank has to broadcast a plan.

How torchrun is started on each host is the one thing that differs between simulated hosts on
this machine (`run_local_probe`: one torchrun agent per host with TRAINCTL_HOST set) and real
hosts (the same `torchrun_argv` run over SSH). A drill makes a host slow on purpose:
TRAINCTL_PROBE_SLOW_HOST=node03 (and TRAINCTL_PROBE_SLOW_DELAY_S) makes that host's ranks sleep
before every collective, a real slowdown every peer in its groups has to wait for.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trainctl.errors import PlaybookError

logger = logging.getLogger(__name__)

__all__ = [
    "ProbeError",
    "ProbeVerdict",
    "ring_pairs",
    "slow_groups",
    "pair_suspects",
    "bisect_split",
    "localize",
    "torchrun_argv",
    "run_local_probe",
]


class ProbeError(PlaybookError):
    """The self-test could not run (torchrun failed, a host never joined, timeout)."""


# ---------------------------------------------------------------- pure decisions


def ring_pairs(hosts: Sequence[str]) -> list[list[tuple[str, str]]]:
    """Two rounds of disjoint neighbour pairs covering a ring: every host meets both neighbours."""
    n = len(hosts)
    if n < 2:
        return []
    if n == 2:
        return [[(hosts[0], hosts[1])]]
    rounds: list[list[tuple[str, str]]] = [[], []]
    for i in range(n):
        pair = (hosts[i], hosts[(i + 1) % n])
        # even edges first round, odd edges second; with odd n the wrap-around edge gets its own round
        r = i % 2 if not (n % 2 == 1 and i == n - 1) else 2
        while len(rounds) <= r:
            rounds.append([])
        rounds[r].append(pair)
    return [r for r in rounds if r]


def slow_groups(times_s: Mapping[Any, float], *, slow_factor: float = 2.0, min_delta_s: float = 0.3) -> set[Any]:
    """Groups whose time exceeds `slow_factor` x the fastest group AND the fastest by `min_delta_s`.

    The fastest group is the baseline (a median would be dragged up when half the groups hold the
    bad host); the absolute floor keeps scheduler noise on tiny collectives from naming anyone.
    """
    if not times_s:
        return set()
    best = min(times_s.values())
    return {k for k, t in times_s.items() if t > best * slow_factor and t - best > min_delta_s}


def pair_suspects(pair_times_s: Mapping[tuple[str, str], float], **kw: float) -> tuple[set[str], set[str]]:
    """(hosts in any slow pair, hosts whose every pair is slow). The second set is the suspect."""
    slow = slow_groups(pair_times_s, **kw)
    involved = {h for p in slow for h in p}
    blamed = {h for h in involved if all(p in slow for p in pair_times_s if h in p)}
    return involved, blamed


def bisect_split(hosts: Sequence[str]) -> tuple[list[str], list[str]]:
    mid = (len(hosts) + 1) // 2
    return list(hosts[:mid]), list(hosts[mid:])


@dataclass(frozen=True)
class ProbeVerdict:
    hosts: tuple[str, ...]
    slow_hosts: tuple[str, ...]
    failing_hosts: tuple[str, ...]
    intra_host_s: Mapping[str, float] = field(default_factory=dict)
    pair_s: Mapping[str, float] = field(default_factory=dict)
    bisection: tuple[Mapping[str, Any], ...] = ()
    pair_blamed: tuple[str, ...] = ()
    backend: str = "gloo"

    def summary(self) -> str:
        if self.failing_hosts:
            return f"collective self-test: {','.join(self.failing_hosts)} failed to complete collectives"
        if self.slow_hosts:
            worst = max(self.intra_host_s.values(), default=0.0)
            return (
                f"collective self-test over {len(self.hosts)} hosts ({self.backend}): slow host(s) "
                f"{','.join(self.slow_hosts)} (bisection; neighbour pairs blamed {','.join(self.pair_blamed) or 'none'}; "
                f"slowest intra-host all-to-all {worst:.3f}s)"
            )
        return f"collective self-test over {len(self.hosts)} hosts ({self.backend}): no slow or failing host"

    def to_dict(self) -> dict[str, Any]:
        return {
            "hosts": list(self.hosts),
            "slow_hosts": list(self.slow_hosts),
            "failing_hosts": list(self.failing_hosts),
            "intra_host_s": dict(self.intra_host_s),
            "pair_s": dict(self.pair_s),
            "bisection": [dict(b) for b in self.bisection],
            "pair_blamed": list(self.pair_blamed),
            "backend": self.backend,
            "summary": self.summary(),
        }


def localize(
    intra_s: Mapping[str, float],
    pair_s: Mapping[tuple[str, str], float],
    bisection_rounds: Sequence[Mapping[str, Any]],
    hosts: Sequence[str],
    **kw: float,
) -> tuple[list[str], list[str]]:
    """(slow hosts, hosts blamed by the pair test). Bisection's final singletons win; with no
    bisection (nothing slow) the intra-host outliers are reported."""
    _, blamed = pair_suspects(pair_s, **kw)
    if bisection_rounds:
        final = bisection_rounds[-1].get("slow", [])
        slow = [h for grp in final for h in grp] if final and isinstance(final[0], list) else list(final)
        return sorted(slow), sorted(blamed)
    return sorted(slow_groups(intra_s, **kw)), sorted(blamed)


# ---------------------------------------------------------------- the worker (under torchrun)


def _worker(out_path: str, size_bytes: int, iters: int, slow_factor: float, min_delta_s: float) -> None:
    import torch
    import torch.distributed as dist

    backend = "nccl" if torch.cuda.is_available() else "gloo"
    if backend == "nccl":
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
    dist.init_process_group(backend)
    rank, world = dist.get_rank(), dist.get_world_size()
    me = os.environ.get("TRAINCTL_HOST") or socket.gethostname()
    slow_host = os.environ.get("TRAINCTL_PROBE_SLOW_HOST")
    delay_s = float(os.environ.get("TRAINCTL_PROBE_SLOW_DELAY_S", "0.2")) if slow_host == me else 0.0
    device = torch.device("cuda") if backend == "nccl" else torch.device("cpu")

    names: list[Any] = [None] * world
    dist.all_gather_object(names, me)
    hosts = list(dict.fromkeys(names))  # order of first rank: node01, node02, ...
    ranks_of = {h: [r for r, n in enumerate(names) if n == h] for h in hosts}
    groups: dict[tuple[str, ...], Any] = {}

    def group(members: Sequence[str]) -> Any:
        key = tuple(members)
        if key not in groups:
            # new_group is collective over the world: every rank creates every group, same order.
            groups[key] = dist.new_group(sorted(r for h in members for r in ranks_of[h]))
        return groups[key]

    def timed(members: Sequence[str], op: str) -> float | None:
        """Time `iters` collectives in the group of `members` (None if this rank is not in it)."""
        g = group(members)
        if me not in members:
            return None
        n = max(size_bytes // 4, 1)
        gsize = sum(len(ranks_of[h]) for h in members)
        n -= n % gsize
        t = torch.ones(max(n, gsize), device=device)
        t0 = time.perf_counter()
        for _ in range(iters):
            if delay_s:
                time.sleep(delay_s)  # drill: this host is slow on purpose
            if op == "all_to_all":
                outt = torch.empty_like(t)
                dist.all_to_all_single(outt, t, group=g)
            else:
                dist.all_reduce(t, group=g)
        if backend == "nccl":
            torch.cuda.synchronize()
        return time.perf_counter() - t0

    def gather_max(results: dict[str, float | None]) -> dict[str, float]:
        allr: list[Any] = [None] * world
        dist.all_gather_object(allr, results)
        merged: dict[str, float] = {}
        for d in allr:
            for k, v in d.items():
                if v is not None:
                    merged[k] = max(merged.get(k, 0.0), v)  # a group is as slow as its slowest member
        return merged

    # 1. intra-host all-to-all (all hosts at once: the groups are disjoint)
    for h in hosts:
        group([h])
    intra = gather_max({h: timed([h], "all_to_all") for h in hosts if me == h})
    # 2. neighbour all-reduce, round by round
    pair_s: dict[str, float] = {}
    for rnd in ring_pairs(hosts):
        for p in rnd:
            group(p)
        mine = {f"{a}|{b}": timed([a, b], "all_reduce") for a, b in rnd if me in (a, b)}
        pair_s.update(gather_max(mine))
    pairs = {tuple(k.split("|")): v for k, v in pair_s.items()}
    involved, _ = pair_suspects(pairs, slow_factor=slow_factor, min_delta_s=min_delta_s)
    # 3. bisection of the slow set (every rank computes the same split from the same timings)
    rounds: list[dict[str, Any]] = []
    frontier = [[h for h in hosts if h in involved]] if involved else []
    baseline = min(pairs.values()) if pairs else 0.0
    while frontier and any(len(s) > 1 for s in frontier):
        halves = [half for s in frontier for half in (bisect_split(s) if len(s) > 1 else (s, [])) if half]
        for hv in halves:
            group(hv)
        mine = {"|".join(hv): timed(hv, "all_reduce") for hv in halves if me in hv}
        times = gather_max(mine)
        # a half is slow against the clean baseline (the fastest pair), not against its sibling:
        # when both halves hold a bad host both stay in the frontier
        slow = [
            hv
            for hv in halves
            if times["|".join(hv)] > baseline * slow_factor and times["|".join(hv)] - baseline > min_delta_s
        ]
        rounds.append({"halves": halves, "times_s": times, "slow": slow})
        frontier = slow
    if rank == 0:
        slow_hosts, blamed = localize(intra, pairs, rounds, hosts, slow_factor=slow_factor, min_delta_s=min_delta_s)
        if not rounds and len(involved) == 1:
            slow_hosts = sorted(involved)
        verdict = ProbeVerdict(
            tuple(hosts), tuple(slow_hosts), (), intra, pair_s, tuple(rounds), tuple(blamed), backend
        )
        Path(out_path).write_text(json.dumps(verdict.to_dict(), indent=2))
    dist.barrier()
    dist.destroy_process_group()


# ---------------------------------------------------------------- starting torchrun per host


def torchrun_argv(
    *,
    nnodes: int,
    node_rank: int,
    nproc_per_host: int,
    master_addr: str,
    master_port: int,
    out_path: str,
    size_bytes: int,
    iters: int,
    python: str = sys.executable,
) -> list[str]:
    """The command each host runs; over SSH only the way it is started changes."""
    return [
        python,
        "-m",
        "torch.distributed.run",
        f"--nnodes={nnodes}",
        f"--node-rank={node_rank}",
        f"--nproc-per-node={nproc_per_host}",
        f"--master-addr={master_addr}",
        f"--master-port={master_port}",
        "-m",
        "trainctl.runtime.probe",
        "--out",
        out_path,
        "--size-bytes",
        str(size_bytes),
        "--iters",
        str(iters),
    ]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_local_probe(
    hosts: Sequence[str],
    *,
    nproc_per_host: int = 1,
    size_bytes: int = 1 << 20,
    iters: int = 5,
    slow_host: str | None = None,
    slow_delay_s: float = 0.2,
    workdir: str | os.PathLike[str] = "probe-out",
    timeout_s: float = 600,
) -> ProbeVerdict:
    """Run the self-test over simulated hosts: one torchrun agent per host on this machine."""
    work = Path(workdir).resolve()
    work.mkdir(parents=True, exist_ok=True)
    out_path = work / "probe-result.json"
    out_path.unlink(missing_ok=True)
    port = _free_port()
    procs: list[tuple[str, subprocess.Popen[bytes], Any]] = []
    try:
        for i, h in enumerate(hosts):
            env = {**os.environ, "TRAINCTL_HOST": h, "OMP_NUM_THREADS": "1", "PYTHONSAFEPATH": "1"}
            if slow_host is not None:
                env["TRAINCTL_PROBE_SLOW_HOST"] = slow_host
                env["TRAINCTL_PROBE_SLOW_DELAY_S"] = str(slow_delay_s)
            log = open(work / f"{h}.log", "wb")
            argv = torchrun_argv(
                nnodes=len(hosts),
                node_rank=i,
                nproc_per_host=nproc_per_host,
                master_addr="127.0.0.1",
                master_port=port,
                out_path=str(out_path),
                size_bytes=size_bytes,
                iters=iters,
            )
            procs.append(
                (
                    h,
                    subprocess.Popen(
                        argv, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=work, start_new_session=True
                    ),
                    log,
                )
            )
        deadline = time.monotonic() + timeout_s
        failed: list[str] = []
        for h, p, _ in procs:
            try:
                rc = p.wait(timeout=max(deadline - time.monotonic(), 0.1))
            except subprocess.TimeoutExpired:
                rc = None
            if rc != 0:
                failed.append(h)
    finally:
        for _, p, log in procs:
            if p.poll() is None:
                os.killpg(p.pid, 15)  # our own session: torchrun agent and its workers
                try:
                    p.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    os.killpg(p.pid, 9)
                    p.wait()
            log.close()
    if not out_path.is_file():
        raise ProbeError(
            f"collective self-test produced no result (hosts that failed or timed out: {','.join(failed) or 'none'}); "
            f"see the torchrun logs in {work}"
        )
    d = json.loads(out_path.read_text())
    return ProbeVerdict(
        tuple(d["hosts"]),
        tuple(d["slow_hosts"]),
        tuple(failed),
        d["intra_host_s"],
        d["pair_s"],
        tuple(d["bisection"]),
        tuple(d["pair_blamed"]),
        d["backend"],
    )


def _main(argv: Sequence[str] | None = None) -> None:
    import argparse

    ap = argparse.ArgumentParser(description="trainctl collective self-test worker (run under torchrun)")
    ap.add_argument("--out", required=True)
    ap.add_argument("--size-bytes", type=int, default=1 << 20)
    ap.add_argument("--iters", type=int, default=5)
    ap.add_argument("--slow-factor", type=float, default=2.0)
    ap.add_argument("--min-delta-s", type=float, default=0.3)
    a = ap.parse_args(argv)
    _worker(a.out, a.size_bytes, a.iters, a.slow_factor, a.min_delta_s)


if __name__ == "__main__":
    _main()
