"""Every drill of `trainctl launch --local --inject ...`, diagnosed from the local run dir (issue 13).

Done when: the right kind is the top finding, naming the right rank and host, and no other finding
is critical. Real torchrun + gloo, 2 simulated hosts x 2 ranks (rank r runs on node0{r // 2 + 1}),
the reference trainer, then `trainctl diagnose RUN --json` as a user would run it.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from trainctl import dataset
from trainctl.exit_codes import ExitCode
from trainctl.schemas import SignalKind

pytestmark = pytest.mark.slow

# drill, steps, launch exit code, (kind, category or None, rank or None, host). Xid 79 is "GPU has
# fallen off the bus": category gpu_lost (analyzers/faulty_hosts.py XID_TABLE).
DRILLS = [
    ("straggler:rank=2,factor=2.0", 60, ExitCode.OK, ("straggler", None, 2, "node02")),
    ("crash:rank=1,step=15", 40, ExitCode.RUN_FAILED, ("crash", "exception", 1, "node01")),
    ("nan:rank=0,step=10", 30, ExitCode.OK, ("numerical", "nan_loss", 0, "node01")),
    ("xid:host=node02,code=79,step=5", 40, ExitCode.RUN_FAILED, ("faulty_host", "gpu_lost", None, "node02")),
    ("hang:rank=3,step=10", 40, ExitCode.RUN_HUNG, ("hung_collective", None, 3, "node02")),
]


@pytest.mark.timeout(300)
@pytest.mark.parametrize("drill, steps, launch_rc, expected", DRILLS, ids=[d[0].split(":")[0] for d in DRILLS])
def test_drill_is_diagnosed_with_one_critical_finding(cli, tmp_path: Path, drill, steps, launch_rc, expected) -> None:
    run = tmp_path / "run"
    r = cli(
        "launch", "--local", "--hosts-local", "2", "--nproc-per-node", "2", "--run-dir", run,
        "--inject", drill, "--hang-timeout", "15", "--", "--steps", str(steps),
    )  # fmt: skip
    assert r.code == launch_rc, r.stderr
    d = cli("diagnose", run, "--json", "--fail-on", "never")
    assert d.code == 0, d.stderr
    report = json.loads(d.stdout)
    findings = report["findings"]
    assert findings, f"no finding for {drill}"
    top = findings[0]
    kind, category, rank, host = expected
    assert top["kind"] == kind, findings
    if category is not None:
        assert top["category"] == category, top
    assert top["hosts"] == [host], top
    if rank is not None:
        assert rank in top["ranks"], top
    others = [f for f in findings[1:] if f["severity"] == "critical"]
    assert others == [], others
    if drill.startswith("hang"):  # the hung run kept its timeline up to the hang (flushed <= 2 s, and on SIGTERM)
        t = dataset.read_table(run, SignalKind.TIMELINE).to_pandas()
        assert set(range(10)) <= set(t[t["rank"] == 3]["step"]), sorted(set(t[t["rank"] == 3]["step"]))
    # a host is blamed only with evidence, and every finding names a host of the run
    for f in findings:
        assert f["evidence"], f
        assert set(f["hosts"]) <= {"node01", "node02"}, f
