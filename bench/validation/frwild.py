"""frwild: real torch hangs on gloo/CPU, each rank dumping its Flight Recorder trace, for `trainctl diagnose`.

How to run (from the repo root, after `bash scripts/setup.sh`):

    .venv/bin/python bench/validation/frwild.py /tmp/frwild            # every scenario (a few minutes)
    .venv/bin/python bench/validation/frwild.py /tmp/frwild ar_w4_r2   # only the named ones
    .venv/bin/python bench/validation/frwild_report.py /tmp/frwild     # score trainctl (and torchfrtrace)

Each scenario is a small real job under `torchrun --standalone` (gloo, CPU, 2-8 ranks, seconds). Every rank
runs a watchdog thread, as a user's hang tooling would: after HANG_S seconds without progress it dumps the
rank's Flight Recorder trace with torch's own API (`torch._C._distributed_c10d._dump_fr_trace()`: pickle, the
format `torchfrtrace` reads; `_dump_fr_trace_json()` for the JSON scenarios) into OUT/<scenario>/ as
`<prefix><rank>` (prefix `nccl_trace_rank_`, torch's default dump file name), then exits. The culprit is alive
but stuck outside the collective (sleeping), so its watchdog dumps too. A rank whose collective raised (gloo
notices some mismatches) dumps from its exception handler; when gloo aborts a rank outright (SIGABRT on a
size/dtype mismatch: that rank leaves no dump) torchrun SIGTERMs the rest, and they dump on SIGTERM (the
watchdog thread watches signal.set_wakeup_fd, since the main thread is blocked in gloo); a rank that
finishes dumps at the end. Rings are
kept small with TORCH_FR_BUFFER_SIZE. Nothing is frozen: the data comes from real runs; the scenario list
below is fixed (ranks, steps) so reruns are comparable. OUT/<scenario>/labels.json holds the expected verdict
(kind, culprit ranks) and what each rank did; torchrun's output lies in OUT/_logs/<scenario>.log.
"""

from __future__ import annotations

import argparse
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

HANG_S = 3.0  # seconds without progress before a rank's watchdog dumps
PEER_WAIT_S = 8.0  # after dumping, how long a rank waits for its peers' dumps before exiting
STALL_S = 120.0  # how long a culprit sleeps outside the collective (the watchdog ends it first)
PREFIX = "nccl_trace_rank_"


@dataclass(frozen=True)
class Scenario:
    name: str
    world: int
    program: str  # one of PROGRAMS below
    expect_kind: str | None  # hung_collective, collective_mismatch, or None (healthy)
    culprits: tuple[int, ...] = ()
    params: dict = field(default_factory=dict)
    buffer: int | None = None  # TORCH_FR_BUFFER_SIZE, None: torch's default (2000)
    fmt: str = "pickle"  # pickle (_dump_fr_trace) or json (_dump_fr_trace_json)
    note: str = ""


SCENARIOS: list[Scenario] = [
    # a rank never enters an all_reduce the others entered
    Scenario("ar_w2_r1", 2, "allreduce", "hung_collective", (1,), {"steps": 5}),
    Scenario("ar_w2_r0", 2, "allreduce", "hung_collective", (0,), {"steps": 5}),
    Scenario("ar_w4_r2", 4, "allreduce", "hung_collective", (2,), {"steps": 5}),
    Scenario("ar_w8_r5", 8, "allreduce", "hung_collective", (5,), {"steps": 4}),
    Scenario(
        "ar_w4_r2_json",
        4,
        "allreduce",
        "hung_collective",
        (2,),
        {"steps": 5},
        fmt="json",
        note="JSON dumps (_dump_fr_trace_json), named nccl_trace_rank_<R>.json",
    ),
    # the same inside subgroups
    Scenario(
        "tp_w4_r3",
        4,
        "tp_dp",
        "hung_collective",
        (3,),
        {"tp": 2, "steps": 4, "where": "tp"},
        note="tp pairs [0,1],[2,3], dp [0,2],[1,3]; rank 3 skips its tp all_reduce; 2 waits in tp, 0 and 1 in dp",
    ),
    Scenario(
        "tp_w8_r5",
        8,
        "tp_dp",
        "hung_collective",
        (5,),
        {"tp": 2, "steps": 3, "where": "tp"},
        note="tp pairs, dp groups of 4; rank 5 skips its tp all_reduce; other tp pairs keep completing",
    ),
    Scenario(
        "dp_w4_r1",
        4,
        "tp_dp",
        "hung_collective",
        (1,),
        {"tp": 2, "steps": 4, "where": "dp"},
        note="rank 1 finishes its tp all_reduce, then never enters dp [1,3]; 3 waits in dp, 0 and 2 in the next tp/dp",
    ),
    # point-to-point
    Scenario(
        "p2p_w2_r0",
        2,
        "pipeline",
        "hung_collective",
        (0,),
        {"steps": 4},
        note="rank 0 stuck before its send; rank 1 waits in recv (gloo FR records no send/recv)",
    ),
    Scenario(
        "p2p_w4_r1",
        4,
        "pipeline",
        "hung_collective",
        (1,),
        {"steps": 4},
        note="pipeline 0->1->2->3 + a loss all_reduce per step; rank 1 stuck before its send: 2, 3 in recv, 0 in all_reduce",
    ),
    Scenario(
        "p2p_ok_ar_w4_r3",
        4,
        "pipeline",
        "hung_collective",
        (3,),
        {"steps": 4, "stall_at": "allreduce"},
        note="p2p all fine; rank 3 then never enters the step's all_reduce",
    ),
    Scenario(
        "p2p_ok_ar_w4_r1",
        4,
        "pipeline",
        "hung_collective",
        (1,),
        {"steps": 4, "stall_at": "allreduce"},
        note="p2p all fine; rank 1 (mid-pipeline) then never enters the step's all_reduce",
    ),
    # ring buffer rolled over
    Scenario(
        "ring_w4_r2",
        4,
        "allreduce",
        "hung_collective",
        (2,),
        {"steps": 30},
        buffer=8,
        note="29 all_reduces done, buffer 8",
    ),
    Scenario(
        "ring_w8_r6",
        8,
        "tp_dp",
        "hung_collective",
        (6,),
        {"tp": 2, "steps": 12, "where": "tp"},
        buffer=6,
        note="tp/dp, 11 steps done (22 entries per rank), buffer 6",
    ),
    # empty buffer: the culprit never issued a collective
    Scenario("empty_w4_r3", 4, "allreduce", "hung_collective", (3,), {"steps": 1}),
    Scenario("empty_w2_r0", 2, "allreduce", "hung_collective", (0,), {"steps": 1}),
    # collective mismatch at the same sequence number
    Scenario(
        "mm_op_w4_r2",
        4,
        "mismatch",
        "collective_mismatch",
        (2,),
        {"steps": 3, "what": "op"},
        note="rank 2 calls broadcast where ranks 0, 1, 3 call all_reduce",
    ),
    Scenario(
        "mm_size_w4_r1",
        4,
        "mismatch",
        "collective_mismatch",
        (1,),
        {"steps": 3, "what": "size"},
        note="rank 1 all_reduces 2048 elements, ranks 0, 2, 3 1024; gloo aborts a receiver (SIGABRT, no dump), "
        "torchrun SIGTERMs the rest, which dump",
    ),
    Scenario(
        "mm_dtype_w4_r3",
        4,
        "mismatch",
        "collective_mismatch",
        (3,),
        {"steps": 3, "what": "dtype"},
        note="rank 3 all_reduces float64, ranks 0, 1, 2 float32 (same numel); gloo aborts a receiver as above",
    ),
    Scenario(
        "mm_op_w8_r0",
        8,
        "mismatch",
        "collective_mismatch",
        (0,),
        {"steps": 2, "what": "gather"},
        note="rank 0 calls all_gather where ranks 1-7 call all_reduce",
    ),
    # two culprits
    Scenario("two_w4_r1r3", 4, "allreduce", "hung_collective", (1, 3), {"steps": 4}),
    Scenario("two_w8_r2r5", 8, "allreduce", "hung_collective", (2, 5), {"steps": 3}),
    # culprit dumped nothing (host unreachable when the dumps were gathered)
    Scenario(
        "nodump_w4_r2",
        4,
        "allreduce",
        "hung_collective",
        (2,),
        {"steps": 4, "culprit_dumps": False},
        note="rank 2 stuck outside the all_reduce and its dump is missing (3 dumps of 4)",
    ),
    # healthy controls
    Scenario("healthy_w2", 2, "allreduce", None, (), {"steps": 6}),
    Scenario(
        "healthy_w4_mix",
        4,
        "pipeline",
        None,
        (),
        {"steps": 4, "groups": True},
        note="p2p pipeline, all_reduce, tp/dp subgroup all_reduces, all complete",
    ),
    Scenario(
        "healthy_w8_ring",
        8,
        "tp_dp",
        None,
        (),
        {"tp": 2, "steps": 10},
        buffer=6,
        note="tp/dp, 20 entries per rank, buffer 6, all complete",
    ),
]


# ----------------------------------------------------------------------------- the rank side


class Rank:
    """One rank's hang tooling: progress marks, a watchdog that dumps, dumps on exception and at the end."""

    def __init__(self, sc: Scenario, out: Path) -> None:
        self.sc = sc
        self.out = out
        self.rank = int(os.environ["RANK"])
        self.world = int(os.environ["WORLD_SIZE"])
        self.last = time.monotonic()
        self.lock = threading.Lock()
        self.done = False
        self.events: list[str] = []
        self.is_culprit = self.rank in sc.culprits

    def progress(self, what: str) -> None:
        self.last = time.monotonic()
        self.events.append(what)

    def stall(self, where: str) -> None:
        self.events.append(f"STALL {where}")
        time.sleep(STALL_S)

    def dump_path(self) -> Path:
        suffix = ".json" if self.sc.fmt == "json" else ""
        return self.out / f"{PREFIX}{self.rank}{suffix}"

    def dump(self, reason: str, wait_peers: bool = True) -> None:
        from torch._C._distributed_c10d import _dump_fr_trace, _dump_fr_trace_json

        with self.lock:
            if self.done:
                return
            self.done = True
            wrote = False
            if not (self.is_culprit and self.sc.params.get("culprit_dumps", True) is False):
                data = _dump_fr_trace_json() if self.sc.fmt == "json" else _dump_fr_trace()
                path = self.dump_path()
                tmp = path.with_name(path.name + ".tmp")
                tmp.write_bytes(data)
                tmp.rename(path)
                wrote = True
            meta = {
                "rank": self.rank,
                "reason": reason,
                "wrote_dump": wrote,
                "last_events": self.events[-4:],
                "n_events": len(self.events),
            }
            side = self.out.parent / "_logs" / self.sc.name
            side.mkdir(parents=True, exist_ok=True)
            (side / f"rank-{self.rank}.json").write_text(json.dumps(meta))
            # wait for the peers' dumps (a shared folder), then leave: torchrun then ends the job
            deadline = time.monotonic() + (PEER_WAIT_S if wait_peers else 0)
            while time.monotonic() < deadline:
                if len(list(side.glob("rank-*.json"))) >= self.world:
                    break
                time.sleep(0.1)
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(0)

    def watchdog(self, wake_fd: int) -> None:
        while True:
            ready, _, _ = select.select([wake_fd], [], [], 0.1)
            if ready:  # SIGTERM: torchrun stops us because a peer died (gloo aborts on some mismatches)
                self.dump("SIGTERM from torchrun (a peer exited)", wait_peers=False)
            if time.monotonic() - self.last > HANG_S:
                self.dump(f"watchdog: no progress for {HANG_S:.0f} s")


def _groups(dist, world: int, tp: int):
    """tp groups of consecutive ranks, dp groups strided; every rank creates every group in the same order."""
    tps = [dist.new_group(list(range(s, s + tp)), group_desc=f"tp{s // tp}") for s in range(0, world, tp)]
    dps = [dist.new_group(list(range(o, world, tp)), group_desc=f"dp{o}") for o in range(tp)]
    return tps, dps


def prog_allreduce(rk: Rank, dist, torch) -> None:
    steps = rk.sc.params["steps"]
    t = torch.ones(1024)
    for i in range(steps):
        if rk.is_culprit and i == steps - 1:
            rk.stall(f"before all_reduce step {i}")
        dist.all_reduce(t)
        rk.progress(f"all_reduce {i}")


def prog_tp_dp(rk: Rank, dist, torch) -> None:
    p = rk.sc.params
    tp, steps, where = p["tp"], p["steps"], p.get("where", "tp")
    tps, dps = _groups(dist, rk.world, tp)
    my_tp, my_dp = tps[rk.rank // tp], dps[rk.rank % tp]
    t = torch.ones(256)
    for i in range(steps):
        last = i == steps - 1
        if rk.is_culprit and last and where == "tp":
            rk.stall(f"before tp all_reduce step {i}")
        dist.all_reduce(t, group=my_tp)
        rk.progress(f"tp all_reduce {i}")
        if rk.is_culprit and last and where == "dp":
            rk.stall(f"before dp all_reduce step {i}")
        dist.all_reduce(t, group=my_dp)
        rk.progress(f"dp all_reduce {i}")
    if where == "dp" and rk.sc.culprits:
        # the ranks not blocked by the culprit go on to a next step's tp all_reduce
        dist.all_reduce(t, group=my_tp)
        rk.progress("tp all_reduce after")


def prog_pipeline(rk: Rank, dist, torch) -> None:
    p = rk.sc.params
    steps, stall_at = p["steps"], p.get("stall_at", "send")
    groups = _groups(dist, rk.world, 2) if p.get("groups") else None
    r, w = rk.rank, rk.world
    act = torch.ones(512)
    loss = torch.ones(1)
    for i in range(steps):
        last = i == steps - 1
        if r > 0:
            dist.recv(act, r - 1)
            rk.progress(f"recv {i}")
        if r < w - 1:
            if rk.is_culprit and last and stall_at == "send":
                rk.stall(f"before send step {i}")
            dist.send(act, r + 1)
            rk.progress(f"send {i}")
        if rk.is_culprit and last and stall_at == "allreduce":
            rk.stall(f"before all_reduce step {i}")
        dist.all_reduce(loss)
        rk.progress(f"all_reduce {i}")
        if groups:
            tps, dps = groups
            dist.all_reduce(act, group=tps[r // 2])
            dist.all_reduce(act, group=dps[r % 2])
            rk.progress(f"tp/dp all_reduce {i}")


def prog_mismatch(rk: Rank, dist, torch) -> None:
    p = rk.sc.params
    steps, what = p["steps"], p["what"]
    for i in range(steps):
        t = torch.ones(1024)
        if rk.is_culprit and i == steps - 1:
            if what == "op":
                dist.broadcast(t, src=0)
            elif what == "size":
                dist.all_reduce(torch.ones(2048))
            elif what == "dtype":
                dist.all_reduce(torch.ones(1024, dtype=torch.float64))
            elif what == "gather":
                outs = [torch.empty(1024) for _ in range(rk.world)]
                dist.all_gather(outs, t)
        else:
            dist.all_reduce(t)
        rk.progress(f"step {i}")


PROGRAMS = {
    "allreduce": prog_allreduce,
    "tp_dp": prog_tp_dp,
    "pipeline": prog_pipeline,
    "mismatch": prog_mismatch,
}


def worker(name: str, out: Path) -> None:
    import torch
    import torch.distributed as dist

    sc = next(s for s in SCENARIOS if s.name == name)
    from datetime import timedelta

    # gloo's own timeout well past the watchdog's, so the dumps see the hang, not gloo's error
    dist.init_process_group("gloo", timeout=timedelta(seconds=60))
    rk = Rank(sc, out)
    try:
        rk.progress("init")
        # dump on SIGTERM too: the main thread may be blocked in gloo, so the Python handler would never run;
        # the C-level handler writes to the wakeup fd, which the watchdog thread watches
        rfd, wfd = os.pipe()
        os.set_blocking(wfd, False)
        signal.signal(signal.SIGTERM, lambda *_: None)
        signal.set_wakeup_fd(wfd)
        threading.Thread(target=rk.watchdog, args=(rfd,), daemon=True).start()
        PROGRAMS[sc.program](rk, dist, torch)
        rk.dump("finished")
    except Exception as e:  # gloo noticed something (a size mismatch, a peer gone): dump what we saw
        rk.events.append(f"EXC {type(e).__name__}: {str(e)[:200]}")
        rk.dump(f"exception: {type(e).__name__}: {str(e).splitlines()[0][:160] if str(e) else ''}")


# ----------------------------------------------------------------------------- the driver


def _group_ranks(sc: Scenario) -> dict[str, list[int]]:
    """pg name -> ranks, as torch names them (a global counter in creation order: default pg '0', then
    new_group's). Gloo's dumps leave pg_config empty, so this is the topology a user knows from the job."""
    groups = {"0": list(range(sc.world))}
    tp = sc.params.get("tp") or (2 if sc.params.get("groups") else None)
    if tp:
        subs = [list(range(s, s + tp)) for s in range(0, sc.world, tp)]
        subs += [list(range(o, sc.world, tp)) for o in range(tp)]
        for i, ranks in enumerate(subs, start=1):
            groups[str(i)] = ranks
    return groups


def run_scenario(sc: Scenario, out: Path) -> dict:
    d = out / sc.name
    logs = out / "_logs"
    shutil.rmtree(d, ignore_errors=True)
    shutil.rmtree(logs / sc.name, ignore_errors=True)
    d.mkdir(parents=True)
    logs.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, OMP_NUM_THREADS="1")
    env.pop("TORCH_FR_BUFFER_SIZE", None)
    env.pop("TORCH_NCCL_TRACE_BUFFER_SIZE", None)
    if sc.buffer is not None:
        env["TORCH_FR_BUFFER_SIZE"] = str(sc.buffer)
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc-per-node",
        str(sc.world),
        __file__,
        "--worker",
        sc.name,
        str(d),
    ]
    t0 = time.monotonic()
    with open(logs / f"{sc.name}.log", "w") as log:
        rc = subprocess.run(cmd, env=env, stdout=log, stderr=subprocess.STDOUT, timeout=180).returncode
    took = time.monotonic() - t0
    ranks = {}
    for f in sorted((logs / sc.name).glob("rank-*.json")):
        m = json.loads(f.read_text())
        ranks[m["rank"]] = m
    labels = {
        "scenario": sc.name,
        "expect_kind": sc.expect_kind,
        "expect_ranks": list(sc.culprits),
        "world": sc.world,
        "program": sc.program,
        "params": sc.params,
        "buffer": sc.buffer,
        "format": sc.fmt,
        "note": sc.note,
        "groups": _group_ranks(sc),
        "torchrun_rc": rc,
        "seconds": round(took, 1),
        "ranks": [ranks.get(r, {"rank": r, "reason": "no record"}) for r in range(sc.world)],
    }
    (d / "labels.json").write_text(json.dumps(labels, indent=1))
    return labels


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("names", nargs="*", help="scenarios to run (default: all)")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--list", action="store_true", help="list the scenarios and exit")
    a = ap.parse_args()
    if a.worker:
        worker(a.worker, a.out)
        return
    if a.list:
        for s in SCENARIOS:
            print(s.name, s.world, s.expect_kind, list(s.culprits), s.note)
        return
    known = {s.name for s in SCENARIOS}
    unknown = [n for n in a.names if n not in known]
    if unknown:
        sys.exit(f"unknown scenario(s) {unknown}; --list shows them")
    todo = [s for s in SCENARIOS if not a.names or s.name in a.names]
    a.out.mkdir(parents=True, exist_ok=True)
    for sc in todo:
        lab = run_scenario(sc, a.out)
        reasons = "; ".join(f"{m['rank']}:{m['reason'].split(':')[0]}" for m in lab["ranks"])
        dumps = sorted(p.name for p in (a.out / sc.name).iterdir() if p.name.startswith(PREFIX))
        print(
            f"{sc.name:18s} rc={lab['torchrun_rc']} {lab['seconds']:5.1f}s dumps={len(dumps)} [{reasons}]", flush=True
        )
    (a.out / "scenarios.json").write_text(json.dumps([asdict(s) for s in todo], indent=1))


if __name__ == "__main__":
    main()
