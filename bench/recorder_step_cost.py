"""Python cost per step of the runtime's Recorder, without training (benchmark a, its floor).

A step as the reference trainer records it: `step` around data/forward/backward/communication/
optimizer, two `move_time` calls (tensor-parallel waits) and `end_step(tokens=...)`, with the
heartbeat and the spool thread running. The rows stay buffered up to `handover_rows` (512), so a
per-step cost that grows with the buffer shows here.

    .venv/bin/python bench/recorder_step_cost.py [--steps 20000]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time

from trainctl.runtime.heartbeat import Heartbeat
from trainctl.runtime.instrument import Recorder

PHASES = ("data", "forward", "backward", "communication", "optimizer")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=20000)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        hb = Heartbeat(d, 0, "node01")
        rec = Recorder(d, rank=0, local_rank=0, host="node01", heartbeat=hb)
        t0 = time.perf_counter_ns()
        for step in range(args.steps):
            with rec.phase("step"):
                for p in PHASES:
                    with rec.phase(p):
                        pass
            rec.move_time("forward", "communication", 1000)
            rec.move_time("backward", "communication", 1000)
            rec.end_step(step, tokens=4096)
        per_step_us = (time.perf_counter_ns() - t0) / args.steps / 1e3
        rec.close()
        hb.close()
        print(
            json.dumps(
                {"steps": args.steps, "rows_written": rec.spool.written_rows, "per_step_us": round(per_step_us, 1)}
            )
        )


if __name__ == "__main__":
    main()
