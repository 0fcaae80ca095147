"""Recovery time from fault to training resumed, by phase (issue 6 benchmark).

Real sshd test hosts on loopback (tests/sshd.py), 3 hosts + 1 spare, one rank per host, the
reference trainer with async checkpoints on a shared directory and an Xid 79 drill on node02 at
step --fault-step. `trainctl launch --hosts` supervises it; the phases come from the supervisor's
own journal (supervisor.jsonl timestamps) and the trainer's own records (torchelastic error file
timestamp of the failed rank, per-step timeline parquet of the relaunched ranks):

  detect    fault (the failed rank's error-file timestamp) -> supervisor's fault_detected
  diagnose  fault_detected -> incident recorded: banner grace + stopping the agents ("stop"),
            collect over SSH ("collect_s"), diagnose ("diagnose_s")
  evict     incident -> relaunch_plan: policy decision, ledger entry (scheduler: none)
  relaunch  relaunch_plan -> every rank of the next attempt has written ranks/rank-R.json (file
            mtime; the trainer writes it right after init_process_group): agents started on
            node01/node03/node04 ("agents_started"), c10d rendezvous, workers up, gloo group formed
  restore   -> the end of the first step after the resume on every rank (model built, newest
            complete checkpoint loaded, data stream replayed, one step done; timeline parquet)
  plus: fault -> training resumed (sum), and fault -> back to pre-crash progress (the relaunched
  run finishes the last step the failed attempt had finished).

    .venv/bin/python bench/recovery_time.py --repeat 3
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
from sshd import SshdCluster, sshd_available  # noqa: E402

PHASES = ("detect", "diagnose", "evict", "relaunch", "restore", "resumed_total", "pre_crash_progress")


def _events(run_dir: Path) -> list[dict]:
    return [json.loads(x) for x in (run_dir / "supervisor.jsonl").read_text().splitlines()]


def _one(ev: list[dict], event: str, **match) -> dict:
    return next(e for e in ev if e["event"] == event and all(e.get(k) == v for k, v in match.items()))


def _fault_ts_ns(dataset: Path) -> int:
    """The first failure's own timestamp: torchelastic error files (timestamp_ns when written, else seconds)."""
    best = None
    for f in dataset.glob("errors/**/*.json"):
        extra = json.loads(f.read_text()).get("message", {}).get("extraInfo", {})
        ts = int(extra.get("timestamp_ns") or int(extra["timestamp"]) * 10**9)
        best = ts if best is None else min(best, ts)
    if best is None:
        raise SystemExit(f"{dataset}: no error files; the drill did not fail a rank")
    return best


def _step_ends(cluster: SshdCluster, after_ns: int) -> dict[int, dict[int, tuple[int, int]]]:
    """{step: {rank: (start_ns, end_ns)}} of whole-step timeline rows that started after `after_ns`
    (the next attempt). The recorder labels the first step after a resume 0; later ones by index."""
    out: dict[int, dict[int, tuple[int, int]]] = {}
    for name in cluster.names:
        for part in (cluster.host_root(name) / "run" / "timeline").glob("host=*/*.parquet"):
            t = pq.read_table(part, columns=["rank", "step", "phase", "start_ts", "duration_ns"]).to_pylist()
            for r in t:
                if r["phase"] != "step" or r["start_ts"] is None:
                    continue
                start = (
                    int(r["start_ts"].timestamp() * 1e9) if hasattr(r["start_ts"], "timestamp") else int(r["start_ts"])
                )
                if start > after_ns:
                    out.setdefault(r["step"], {})[r["rank"]] = (start, start + r["duration_ns"])
    return out


def run_once(work: Path, args: argparse.Namespace) -> dict[str, float]:
    with SshdCluster(work / "sshd", 4) as cluster:
        run_dir, shared = work / "sup", work / "shared-ckpt"
        env = {**os.environ, "TRAINCTL_HOME": str(work / "home")}
        cmd = [
            str(ROOT / ".venv/bin/trainctl"),
            "launch",
            "--hosts",
            "node01,node02,node03",
            "--spares",
            "node04",
            "--nproc-per-node",
            "1",
            "--ssh-config",
            str(cluster.ssh_config),
            "--run-dir",
            str(run_dir),
            "--remote-run-dir",
            str(cluster.remote_root / "run"),
            "--env",
            "GLOO_SOCKET_IFNAME=lo",
            "--steps",
            str(args.steps),
            "--checkpoint-every",
            str(args.checkpoint_every),
            "--checkpoint-dir",
            str(shared),
            "--hang-timeout",
            "120",
            "--inject",
            f"xid:host=node02,code=79,step={args.fault_step}",
            "--",
            "--log-every",
            "10",
            "--tp",
            "1",
        ]
        p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
        if p.returncode != 0:
            raise SystemExit(f"launch failed ({p.returncode}):\n{p.stderr[-3000:]}")
        ev = _events(run_dir)
        detected = _one(ev, "fault_detected", attempt=1)
        incident = _one(ev, "incident", attempt=1)
        plan = _one(ev, "relaunch_plan", attempt=1)
        started2 = _one(ev, "attempt_started", attempt=2)
        fault = _fault_ts_ns(Path(incident["dataset"]))
        ends = _step_ends(cluster, started2["ts_ns"])
        # attempt-2 ranks' rank files (earlier attempts' were removed when attempt 2 started)
        up_ns = max(
            f.stat().st_mtime_ns
            for n in cluster.names
            for f in (cluster.host_root(n) / "run" / "ranks").glob("rank-*.json")
        )
        losses = [
            json.loads(x)
            for n in cluster.names
            if (cluster.host_root(n) / "run" / "loss.jsonl").is_file()
            for x in (cluster.host_root(n) / "run" / "loss.jsonl").read_text().splitlines()
        ]
        resume_step = min(x["step"] for x in losses if x["attempt"] == "2") - 1  # loss.jsonl logs step index + 1
        first: dict[int, tuple[int, int]] = {}  # rank -> its earliest step row in attempt 2
        for per_rank in ends.values():
            for rank, se in per_rank.items():
                if rank not in first or se[0] < first[rank][0]:
                    first[rank] = se
        resumed = max(e for _, e in first.values())
        pre_crash = max(e for _, e in ends[args.fault_step - 1].values())  # the last step attempt 1 finished
        s = 1e-9
        return {
            "detect": (detected["ts_ns"] - fault) * s,
            "diagnose": (incident["ts_ns"] - detected["ts_ns"]) * s,
            "stop": (incident["started_ts_ns"] - detected["ts_ns"]) * s,
            "collect": incident["collect_s"],
            "diagnose_only": incident["diagnose_s"],
            "evict": (plan["ts_ns"] - incident["ts_ns"]) * s,
            "relaunch": (up_ns - plan["ts_ns"]) * s,
            "agents_started": (started2["ts_ns"] - plan["ts_ns"]) * s,
            "restore": (resumed - up_ns) * s,
            "resumed_total": (resumed - fault) * s,
            "pre_crash_progress": (pre_crash - fault) * s,
            "resume_step": resume_step,
        }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--checkpoint-every", type=int, default=10)
    ap.add_argument("--fault-step", type=int, default=25)
    ap.add_argument("--json", type=Path, help="also write every run's phases here")
    args = ap.parse_args()
    reason = sshd_available()
    if reason:
        raise SystemExit(f"sshd test hosts cannot run here: {reason}")
    runs = []
    for i in range(args.repeat):
        with tempfile.TemporaryDirectory(prefix="trainctl-recovery-") as d:
            r = run_once(Path(d), args)
        runs.append(r)
        print(f"run {i + 1}: " + " ".join(f"{k}={v:.2f}" for k, v in r.items()), file=sys.stderr, flush=True)
    keys = list(runs[0])
    print("| phase | " + " | ".join(f"run {i + 1}" for i in range(len(runs))) + " | median |")
    print("|---|" + "---|" * (len(runs) + 1))
    for k in keys:
        vals = [r[k] for r in runs]
        print(f"| {k} | " + " | ".join(f"{v:.2f}" for v in vals) + f" | {statistics.median(vals):.2f} |")
    if args.json:
        args.json.write_text(json.dumps(runs, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
