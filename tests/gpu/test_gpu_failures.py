"""Real failures on one GPU over NCCL (world 1, which any lent machine has): the drills that need no
peer, the CUDA errors an unmodified script hits, NCCL refusing two ranks on one device, and NVML's
readings of a real GPU from idle to load and back. Each run dir (and the NVML trace) stays under
the test's tmp dir: scripts/gpu_session.sh brings them back as recorded data for the CPU suite."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from trainctl.exit_codes import ExitCode

_SCRIPT = str(Path(__file__).with_name("failing_script.py"))

# drill, launch exit code, (kind, category, rank, host): as tests/integration/test_drills_diagnosed.py
# on gloo, here on one GPU with NCCL (the hang drill's GPU form is the stuck-kernel test).
DRILLS = [
    ("crash:rank=0,step=5", ExitCode.RUN_FAILED, ("crash", "exception", 0, "node01")),
    ("nan:rank=0,step=5", ExitCode.OK, ("numerical", "nan_loss", 0, "node01")),
    ("xid:host=node01,code=79,step=5", ExitCode.RUN_FAILED, ("faulty_host", "gpu_lost", None, "node01")),
]


def _diagnose(cli, run: Path) -> list[dict]:
    d = cli("diagnose", run, "--json", "--fail-on", "never")
    (run / "diagnose.json").write_text(d.stdout)
    assert d.code == 0 and "Traceback" not in d.stderr, d.stderr
    return json.loads(d.stdout)["findings"]


def _one_critical(findings: list[dict], kind: str, rank: int | None, host: str) -> dict:
    assert findings, "no finding"
    top = findings[0]
    assert top["kind"] == kind and top["hosts"] == [host], findings
    if rank is not None:
        assert rank in top["ranks"], top
    assert [f for f in findings[1:] if f["severity"] == "critical"] == [], findings
    return top


@pytest.mark.timeout(300)
@pytest.mark.parametrize("drill, launch_rc, expected", DRILLS, ids=[d[0].split(":")[0] for d in DRILLS])
def test_drill_on_one_gpu_over_nccl(cli, tmp_path: Path, drill, launch_rc, expected) -> None:
    run = tmp_path / "run"
    r = cli("launch", "--local", "--hosts-local", "1", "--nproc-per-node", "1", "--run-dir", run,
            "--inject", drill, "--hang-timeout", "30", "--env", "NCCL_DEBUG=WARN", "--", "--steps", "15")  # fmt: skip
    assert r.code == launch_rc, r.stderr
    kind, category, rank, host = expected
    top = _one_critical(_diagnose(cli, run), kind, rank, host)
    assert top["category"] == category, top
    if kind == "crash":  # the drill's own exception, not another failure of the same rank
        assert "injected crash drill" in top["summary"], top


@pytest.mark.timeout(300)
@pytest.mark.parametrize("fail, category_words", [("assert", "device-side assert"), ("oom", "out of memory")])
def test_an_unmodified_script_hitting_a_cuda_error_is_a_crash_of_its_rank(
    cli, tmp_path: Path, fail, category_words
) -> None:
    run = tmp_path / "run"
    r = cli("launch", "--local", "--hosts-local", "1", "--nproc-per-node", "1", "--run-dir", run,
            "--hang-timeout", "60", "--env", f"FAIL={fail}", "--env", "NCCL_DEBUG=WARN", "--", _SCRIPT)  # fmt: skip
    assert r.code == ExitCode.RUN_FAILED, r.stderr
    findings = _diagnose(cli, run)
    top = _one_critical(findings, "oom" if fail == "oom" else "crash", 0, "node01")
    assert category_words in json.dumps(top).lower(), top


@pytest.mark.timeout(120)
def test_two_ranks_on_one_gpu_are_refused_by_nccl_and_the_log_says_so(cli, tmp_path: Path) -> None:
    """Plain torchrun (trainctl's launch refuses this set-up itself): NCCL's own words, diagnosed
    from the log file as a user would paste it."""
    log = tmp_path / "torchrun.log"
    env = {**os.environ, "FAIL": "dup", "NCCL_DEBUG": "WARN", "PYTHONUNBUFFERED": "1"}
    with log.open("w") as out:
        p = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2",
                            "--master-port", "29533", _SCRIPT], stdout=out, stderr=subprocess.STDOUT,
                           env=env, timeout=100, cwd=tmp_path)  # fmt: skip
    text = log.read_text(errors="replace")
    assert p.returncode != 0 and "Duplicate GPU detected" in text, text[-3000:]
    d = cli("diagnose", log, "--json", "--fail-on", "never")
    (tmp_path / "diagnose.json").write_text(d.stdout)
    assert d.code == 0 and "Traceback" not in d.stderr, d.stderr
    findings = json.loads(d.stdout)["findings"]
    top = findings[0]  # NCCL's own words first, torchrun's exit banner after them
    assert top["kind"] == "network_error" and "Duplicate GPU detected" in top["summary"], findings


@pytest.mark.timeout(120)
def test_nvml_trace_of_a_real_gpu_from_idle_to_load_and_back(tmp_path: Path) -> None:
    """Two samples a second: 8 s idle, 20 s of bf16 matmuls, 8 s idle. The trace is recorded data for
    the faulty-hosts detector (what a healthy GPU's power, clocks, temperature and PCIe link do)."""
    import threading

    import torch

    from trainctl.runtime.metrics_agent import NvmlSampler

    s = NvmlSampler()
    rows: list[dict] = []
    load = threading.Event()
    stop = threading.Event()

    def burn() -> None:
        a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
        while not stop.is_set():
            if load.is_set():
                for _ in range(20):
                    a = (a @ a).clamp_(-1, 1)
                torch.cuda.synchronize()
            else:
                time.sleep(0.05)

    t = threading.Thread(target=burn, daemon=True)
    s.open()
    t.start()
    try:
        t0 = time.monotonic()
        while (el := time.monotonic() - t0) < 36:
            if 8 <= el < 28:
                load.set()
            else:
                load.clear()
            for row in s.sample(time.time_ns()):
                rows.append({**row, "phase": "load" if load.is_set() else "idle"})
            time.sleep(0.5)
    finally:
        stop.set()
        t.join(timeout=30)
        s.close()
    (tmp_path / "nvml_trace.jsonl").write_text("".join(json.dumps(r, default=str) + "\n" for r in rows))
    idle = [r["power_w"] for r in rows if r["phase"] == "idle" and r["power_w"]]
    busy = [r["power_w"] for r in rows if r["phase"] == "load" and r["power_w"]]
    assert idle and busy and max(busy) > 1.5 * min(idle), (min(idle), max(busy))
