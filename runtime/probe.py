"""Collective self-test over a set of hosts, after MegaScale's self-checks (NSDI'24 §4.3).

Three tests, each timed per group, run by every rank under torchrun (gloo on CPU, NCCL on GPU):
1. intra-host all-to-all among the ranks of each host;
2. all-reduce with neighbours: hosts paired in a ring, two rounds ((0,1),(2,3)... then (1,2),(3,0)...),
   so every host meets two different neighbours and a bad host makes both of its pairs slow;
3. bisection of the slow set: the hosts of slow pairs are halved and each half all-reduces on its
   own; the slow half is halved again until single hosts remain.

What makes a slow link visible (issue 16 item 6):
- Every group runs `warmup` untimed collectives first. On NCCL the first collective of a group
  creates its communicator (ncclCommInitRank: bootstrap, topology, connection set-up), which takes
  far longer than a collective; timed, it would hide any link's real speed.
- Sizes sweep from 1 MiB up to `size_bytes` (default 64 MiB on NCCL: small messages measure
  latency, only large ones reach a link's bandwidth). The judgement uses the largest size.
- Times become algbw and busbw as nccl-tests defines them (NVIDIA/nccl-tests doc/PERFORMANCE.md:
  algbw = S / t; busbw = algbw x 2(n-1)/n for all-reduce, x (n-1)/n for all-to-all), so groups of
  different sizes compare on one scale.
- A group is judged against the fleet's median, not the fastest group: per host, the best of its
  neighbour pairs (a bad host has no fast pair; a good one has at least one unless both neighbours
  are bad), and the median of that over hosts. A pair slow against that median whose hosts are both
  fast elsewhere is a slow link, reported as such.

The decisions (which groups are slow, how to split, who is to blame) are pure functions at the top
of this module, unit-tested on timings; the worker only measures and every rank applies the same
decision to the same all-gathered timings, so no rank has to broadcast a plan.

How torchrun is started on each host is the one thing that differs between simulated hosts on
this machine (`run_local_probe`: one torchrun agent per host with TRAINCTL_HOST set) and real
hosts (the same `torchrun_argv` run over SSH). A drill makes a host slow on purpose:
TRAINCTL_PROBE_SLOW_HOST=node03 (and TRAINCTL_PROBE_SLOW_DELAY_S) makes that host's ranks sleep
before every collective, a real slowdown every peer in its groups has to wait for;
TRAINCTL_PROBE_SLOW_LINK=node01|node02 does the same only in the group of exactly those two hosts
(a slow link: each host is fast with anyone else).
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
    "bandwidth_gbps",
    "size_sweep",
    "ring_pairs",
    "slow_groups",
    "pair_suspects",
    "slow_links",
    "bisect_split",
    "localize",
    "torchrun_argv",
    "run_local_probe",
]


class ProbeError(PlaybookError):
    """The self-test could not run (torchrun failed, a host never joined, timeout)."""


# ---------------------------------------------------------------- pure decisions

MIB = 1 << 20
DEFAULT_SIZE_BYTES_NCCL = 64 * MIB  # reaches NVLink/IB bandwidth (nccl-tests sweeps to GBs; 64 MiB is past the knee)
DEFAULT_SIZE_BYTES_GLOO = 1 * MIB  # gloo on CPU is a functional check; raise it with size_bytes


def size_sweep(size_bytes: int) -> list[int]:
    """1 MiB, 8 MiB, 64 MiB, ... up to and including `size_bytes` (just `size_bytes` below 1 MiB)."""
    sizes, s = [], MIB
    while s < size_bytes:
        sizes.append(s)
        s *= 8
    return [*sizes, size_bytes]


def bandwidth_gbps(op: str, size_bytes: int, time_s: float, nranks: int) -> tuple[float, float]:
    """(algbw, busbw) in GB/s for one collective of `size_bytes` per rank taking `time_s`.

    nccl-tests (doc/PERFORMANCE.md): algbw = S / t; busbw = algbw x 2(n-1)/n for all-reduce and
    x (n-1)/n for all-to-all, all-gather and reduce-scatter, so busbw is comparable across group
    sizes and with the hardware's peak. One rank moves nothing: busbw 0.
    """
    algbw = size_bytes / max(time_s, 1e-12) / 1e9
    factor = {"all_reduce": 2.0 * (nranks - 1) / nranks}.get(op, (nranks - 1) / nranks) if nranks > 0 else 0.0
    return algbw, algbw * factor


def median(values: Sequence[float]) -> float:
    v = sorted(values)
    if not v:
        return 0.0
    mid = len(v) // 2
    return v[mid] if len(v) % 2 else (v[mid - 1] + v[mid]) / 2


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


def slower(t: float, baseline_s: float, *, slow_factor: float = 2.0, min_delta_s: float = 0.3) -> bool:
    """`t` exceeds `slow_factor` x the baseline AND the baseline by `min_delta_s` (the absolute floor
    keeps scheduler noise on small collectives from naming anyone)."""
    return t > baseline_s * slow_factor and t - baseline_s > min_delta_s


def slow_groups(times_s: Mapping[Any, float], *, slow_factor: float = 2.0, min_delta_s: float = 0.3) -> set[Any]:
    """Groups slower than the median group (use where a minority of groups can hold a bad host:
    intra-host tests, one group per host)."""
    if not times_s:
        return set()
    base = median(list(times_s.values()))
    return {k for k, t in times_s.items() if slower(t, base, slow_factor=slow_factor, min_delta_s=min_delta_s)}


def pair_baseline_s(pair_times_s: Mapping[tuple[str, str], float]) -> float:
    """The fleet's median over hosts of each host's best neighbour pair.

    Half the ring pairs hold a bad host when there are 4 hosts (each host is in two pairs), so the
    median pair would be slow; a host's best pair is slow only when the host itself is bad (or both
    of its neighbours are), so the median over hosts stays the healthy time.
    """
    best: dict[str, float] = {}
    for (a, b), t in pair_times_s.items():
        for h in (a, b):
            best[h] = min(best.get(h, t), t)
    return median(list(best.values()))


def slow_pairs(pair_times_s: Mapping[tuple[str, str], float], **kw: float) -> set[tuple[str, str]]:
    """Pairs slower than the fleet's median (pair_baseline_s)."""
    base = pair_baseline_s(pair_times_s)
    return {p for p, t in pair_times_s.items() if slower(t, base, **kw)}


def pair_suspects(pair_times_s: Mapping[tuple[str, str], float], **kw: float) -> tuple[set[str], set[str]]:
    """(hosts in any slow pair, hosts whose every pair is slow). The second set is the suspect."""
    slow = slow_pairs(pair_times_s, **kw)
    involved = {h for p in slow for h in p}
    return involved, {h for h in involved if all(p in slow for p in pair_times_s if h in p)}


def slow_links(pair_times_s: Mapping[tuple[str, str], float], **kw: float) -> set[tuple[str, str]]:
    """Slow pairs whose two hosts are both fast in another pair: the link between them is slow,
    neither host alone is to blame."""
    _, blamed = pair_suspects(pair_times_s, **kw)
    return {p for p in slow_pairs(pair_times_s, **kw) if not (set(p) & blamed)}


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
    slow_links: tuple[str, ...] = ()  # "a|b": slow between two hosts that are fast elsewhere
    sizes_bytes: tuple[int, ...] = ()
    iters: int = 0
    # group -> {size_bytes: busbw GB/s} (nccl-tests' definition; see bandwidth_gbps)
    busbw_gbps: Mapping[str, Mapping[str, float]] = field(default_factory=dict)
    baseline_busbw_gbps: float | None = None  # the fleet's median neighbour-pair busbw at the largest size

    def summary(self) -> str:
        if self.failing_hosts:
            return f"collective self-test: {','.join(self.failing_hosts)} failed to complete collectives"
        base = f"; fleet median busbw {self.baseline_busbw_gbps:.2f} GB/s" if self.baseline_busbw_gbps else ""
        if self.slow_hosts:
            worst = max(self.intra_host_s.values(), default=0.0)
            return (
                f"collective self-test over {len(self.hosts)} hosts ({self.backend}): slow host(s) "
                f"{','.join(self.slow_hosts)} (bisection; neighbour pairs blamed {','.join(self.pair_blamed) or 'none'}; "
                f"slowest intra-host all-to-all {worst:.3f}s{base})"
            )
        if self.slow_links:
            return (
                f"collective self-test over {len(self.hosts)} hosts ({self.backend}): slow link(s) "
                f"{', '.join(x.replace('|', '<->') for x in self.slow_links)} (both hosts fast with their other "
                f"neighbour{base})"
            )
        return f"collective self-test over {len(self.hosts)} hosts ({self.backend}): no slow or failing host{base}"

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
            "slow_links": list(self.slow_links),
            "sizes_bytes": list(self.sizes_bytes),
            "iters": self.iters,
            "busbw_gbps": {k: dict(v) for k, v in self.busbw_gbps.items()},
            "baseline_busbw_gbps": self.baseline_busbw_gbps,
            "summary": self.summary(),
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], failing_hosts: Sequence[str] = ()) -> ProbeVerdict:
        return cls(
            tuple(d["hosts"]),
            tuple(d["slow_hosts"]),
            tuple(failing_hosts),
            d["intra_host_s"],
            d["pair_s"],
            tuple(d["bisection"]),
            tuple(d["pair_blamed"]),
            d["backend"],
            tuple(d.get("slow_links", ())),
            tuple(d.get("sizes_bytes", ())),
            int(d.get("iters", 0)),
            d.get("busbw_gbps", {}),
            d.get("baseline_busbw_gbps"),
        )


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


def _worker(
    out_path: str, size_bytes: int | None, iters: int, slow_factor: float, min_delta_s: float, warmup: int = 2
) -> None:
    import torch
    import torch.distributed as dist

    backend = "nccl" if torch.cuda.is_available() else "gloo"
    if backend == "nccl":
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
    dist.init_process_group(backend)
    rank, world = dist.get_rank(), dist.get_world_size()
    me = os.environ.get("TRAINCTL_HOST") or socket.gethostname()
    slow_host = os.environ.get("TRAINCTL_PROBE_SLOW_HOST")
    drill_delay_s = float(os.environ.get("TRAINCTL_PROBE_SLOW_DELAY_S", "0.2"))
    delay_s = drill_delay_s if slow_host == me else 0.0
    slow_link = set(filter(None, os.environ.get("TRAINCTL_PROBE_SLOW_LINK", "").split("|")))
    device = torch.device("cuda") if backend == "nccl" else torch.device("cpu")
    largest = size_bytes or (DEFAULT_SIZE_BYTES_NCCL if backend == "nccl" else DEFAULT_SIZE_BYTES_GLOO)
    sizes = size_sweep(largest)

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

    def sync() -> None:
        if backend == "nccl":
            torch.cuda.synchronize()

    def timed(members: Sequence[str], op: str) -> dict[int, float] | None:
        """Seconds for `iters` collectives of each size in the group of `members` (None: not a member).

        `warmup` untimed collectives first: on NCCL the group's communicator is created by its first
        collective, which must not count as the link's speed.
        """
        g = group(members)
        if me not in members:
            return None
        sleep_s = drill_delay_s if slow_link and set(members) == slow_link else delay_s
        gsize = sum(len(ranks_of[h]) for h in members)
        out: dict[int, float] = {}
        for size in sizes:
            n = max(size // 4, gsize)
            n -= n % gsize
            t = torch.ones(n, device=device)
            outt = torch.empty_like(t) if op == "all_to_all" else None

            def once(t: torch.Tensor = t, outt: torch.Tensor | None = outt) -> None:
                if outt is not None:
                    dist.all_to_all_single(outt, t, group=g)
                else:
                    dist.all_reduce(t, group=g)

            for _ in range(warmup if size == sizes[0] else 1):
                once()
            sync()
            t0 = time.perf_counter()
            for _ in range(iters):
                if sleep_s:
                    time.sleep(sleep_s)  # drill: this host (or link) is slow on purpose
                once()
            sync()
            out[size] = time.perf_counter() - t0
        return out

    def gather_max(results: dict[str, dict[int, float] | None]) -> dict[str, dict[int, float]]:
        allr: list[Any] = [None] * world
        dist.all_gather_object(allr, results)
        merged: dict[str, dict[int, float]] = {}
        for d in allr:
            for k, per_size in d.items():
                if per_size is None:
                    continue
                m = merged.setdefault(k, {})
                for size, v in per_size.items():
                    m[size] = max(m.get(size, 0.0), v)  # a group is as slow as its slowest member
        return merged

    def nranks(key: str) -> int:
        return sum(len(ranks_of[h]) for h in key.split("|"))

    def busbw(op: str, times: Mapping[str, Mapping[int, float]]) -> dict[str, dict[str, float]]:
        return {
            k: {str(sz): round(bandwidth_gbps(op, sz, t / max(iters, 1), nranks(k))[1], 4) for sz, t in v.items()}
            for k, v in times.items()
        }

    # 1. intra-host all-to-all (all hosts at once: the groups are disjoint)
    for h in hosts:
        group([h])
    intra_all = gather_max({h: timed([h], "all_to_all") for h in hosts if me == h})
    intra = {h: v[largest] for h, v in intra_all.items()}
    # 2. neighbour all-reduce, round by round
    pair_all: dict[str, dict[int, float]] = {}
    for rnd in ring_pairs(hosts):
        for p in rnd:
            group(p)
        mine = {f"{a}|{b}": timed([a, b], "all_reduce") for a, b in rnd if me in (a, b)}
        pair_all.update(gather_max(mine))
    pair_s = {k: v[largest] for k, v in pair_all.items()}
    pairs = {tuple(k.split("|")): v for k, v in pair_s.items()}
    links = slow_links(pairs, slow_factor=slow_factor, min_delta_s=min_delta_s)
    baseline = pair_baseline_s(pairs) if pairs else 0.0
    # 3. bisection of the slow set (every rank computes the same split from the same timings)
    rounds: list[dict[str, Any]] = []
    # bisection looks for slow hosts: pairs that are slow links (both hosts fast elsewhere) are left out
    suspects = {
        h
        for p, t in pairs.items()
        if p not in links and slower(t, baseline, slow_factor=slow_factor, min_delta_s=min_delta_s)
        for h in p
    }
    frontier = [[h for h in hosts if h in suspects]] if suspects else []
    bis_all: dict[str, dict[int, float]] = {}
    while frontier and any(len(s) > 1 for s in frontier):
        halves = [half for s in frontier for half in (bisect_split(s) if len(s) > 1 else (s, [])) if half]
        for hv in halves:
            group(hv)
        mine = {"|".join(hv): timed(hv, "all_reduce") for hv in halves if me in hv}
        per = gather_max(mine)
        bis_all.update(per)
        times = {k: v[largest] for k, v in per.items()}
        # a half is slow against the fleet's median pair time (see pair_baseline_s), not against its
        # sibling: when both halves hold a bad host both stay in the frontier
        slow = [
            hv
            for hv in halves
            if slower(times["|".join(hv)], baseline, slow_factor=slow_factor, min_delta_s=min_delta_s)
        ]
        rounds.append({"halves": halves, "times_s": times, "slow": slow})
        frontier = slow
    if rank == 0:
        slow_hosts, blamed = localize(intra, pairs, rounds, hosts, slow_factor=slow_factor, min_delta_s=min_delta_s)
        if not rounds and len(suspects) == 1:
            slow_hosts = sorted(suspects)
        pair_bw = busbw("all_reduce", pair_all)
        best_bw: dict[str, float] = {}  # per host, its best neighbour pair (as pair_baseline_s, in GB/s)
        for k, v in pair_bw.items():
            for h in k.split("|"):
                best_bw[h] = max(best_bw.get(h, 0.0), v[str(largest)])
        base_bw = median(list(best_bw.values())) if best_bw else None
        verdict = ProbeVerdict(
            tuple(hosts),
            tuple(slow_hosts),
            (),
            intra,
            pair_s,
            tuple(rounds),
            tuple(blamed),
            backend,
            tuple(sorted("|".join(p) for p in links)),
            tuple(sizes),
            iters,
            {**busbw("all_to_all", intra_all), **pair_bw, **busbw("all_reduce", bis_all)},
            round(base_bw, 4) if base_bw is not None else None,
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
    size_bytes: int | None,
    iters: int,
    python: str = sys.executable,
    warmup: int = 2,
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
        *(["--size-bytes", str(size_bytes)] if size_bytes else []),
        "--iters",
        str(iters),
        "--warmup",
        str(warmup),
    ]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_local_probe(
    hosts: Sequence[str],
    *,
    nproc_per_host: int = 1,
    size_bytes: int | None = None,
    iters: int = 5,
    slow_host: str | None = None,
    slow_delay_s: float = 0.2,
    slow_link: tuple[str, str] | None = None,
    workdir: str | os.PathLike[str] = "probe-out",
    timeout_s: float = 600,
) -> ProbeVerdict:
    """Run the self-test over simulated hosts: one torchrun agent per host on this machine.

    size_bytes: the largest message (the sweep starts at 1 MiB); None: 64 MiB on NCCL, 1 MiB on gloo.
    """
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
            if slow_link is not None:
                env["TRAINCTL_PROBE_SLOW_LINK"] = "|".join(slow_link)
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
    return ProbeVerdict.from_dict(json.loads(out_path.read_text()), failed)


def _main(argv: Sequence[str] | None = None) -> None:
    import argparse

    ap = argparse.ArgumentParser(description="trainctl collective self-test worker (run under torchrun)")
    ap.add_argument("--out", required=True)
    ap.add_argument("--size-bytes", type=int, default=None, help="largest message (default: 64 MiB NCCL, 1 MiB gloo)")
    ap.add_argument("--iters", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=2, help="untimed collectives per group before timing")
    ap.add_argument("--slow-factor", type=float, default=2.0)
    ap.add_argument("--min-delta-s", type=float, default=0.3)
    a = ap.parse_args(argv)
    _worker(a.out, a.size_bytes, a.iters, a.slow_factor, a.min_delta_s, a.warmup)


if __name__ == "__main__":
    _main()
