"""The reference trainer resumes a checkpoint written by a larger data-parallel world (real torchrun + gloo).

Run A: `launch --local --hosts-local 2 --nproc-per-node 2` (dp=2 x tp=2) to step 16, checkpoints
every 4. Run B: one host fewer (dp=1 x tp=2) from A's step-12 checkpoint (step-16 removed, as if
the fault hit between them). The first step after the resume must log exactly what A logged at
that step: same weights and optimizer state (read from the old ranks with the same tp index) and
the same data position of replica 0. A different tp is refused naming both layouts.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow


def _losses(run: Path) -> dict[int, float]:
    return {r["step"]: r["loss"] for r in map(json.loads, (run / "loss.jsonl").read_text().splitlines())}


def _launch(cli, run: Path, ckpt: Path, hosts: int, *extra: str):
    return cli(
        "launch",
        "--local",
        "--hosts-local",
        str(hosts),
        "--nproc-per-node",
        "2",
        "--run-dir",
        run,
        "--steps",
        "16",
        "--checkpoint-every",
        "4",
        "--checkpoint-dir",
        ckpt,
        "--",
        "--log-every",
        "1",
        *extra,
    )


@pytest.mark.timeout(150)
def test_dp_shrink_resumes_from_larger_world_with_loss_continuity(cli, tmp_path: Path) -> None:
    a, ckpt_a = tmp_path / "a", tmp_path / "ckpt-a"
    r = _launch(cli, a, ckpt_a, 2)
    assert r.code == 0, r.stderr[-3000:]
    full = _losses(a)
    assert sorted(full) == list(range(1, 17))
    m = json.loads((ckpt_a / "step-12" / "rank-3" / "manifest.json").read_text())
    assert (m["world_size"], m["layout"]) == (4, {"dp": 2, "tp": 2, "pp": 1})

    ckpt_b = tmp_path / "ckpt-b"
    shutil.copytree(ckpt_a, ckpt_b)
    shutil.rmtree(ckpt_b / "step-16")  # the larger world's newest complete checkpoint is now step 12
    b = tmp_path / "b"
    r = _launch(cli, b, ckpt_b, 1)
    assert r.code == 0, r.stderr[-3000:]
    log0 = next(b.glob("logs/*/rank-0.log")).read_text()
    assert (
        "resumed from checkpoint step 12: " in log0
        and "(written by dp=2 x tp=2 x pp=1 (4 ranks), resumed as dp=1 x tp=2 x pp=1 (2 ranks))" in log0
    ), log0
    shrunk = _losses(b)
    assert sorted(shrunk) == [13, 14, 15, 16]  # the step counter continues
    # Step 13's loss is computed before any update of the smaller world: identical weights and batch.
    assert shrunk[13] == pytest.approx(full[13], rel=1e-6, abs=1e-6)
    # After it the global batch is half (one replica): the curve follows A's within noise, not exactly.
    for step in (14, 15, 16):
        assert shrunk[step] == pytest.approx(full[step], rel=0.15), (step, shrunk, full)
    assert shrunk[16] < full[12] + 0.1  # still learning after the shrink
    # The smaller world's checkpoint records its own layout; the old world's ranks 2, 3 are cleaned
    # from every step rank 0 of the smaller world commits or prunes.
    m = json.loads((ckpt_b / "step-16" / "rank-0" / "manifest.json").read_text())
    assert (m["world_size"], m["layout"]) == (2, {"dp": 1, "tp": 2, "pp": 1})
    assert sorted(p.name for p in (ckpt_b / "step-16").iterdir()) == ["rank-0", "rank-1"]

    # tp cannot change: refused before training, naming both layouts.
    c = tmp_path / "c"
    r = _launch(cli, c, ckpt_a, 1, "--tp", "1")
    assert r.code != 0
    # every rank refuses; the first to exit may take the other down before it writes its error file
    errs = [json.loads(p.read_text())["message"]["message"] for p in sorted((c / "errors").glob("rank-*.json"))]
    assert errs and all(
        "checkpoint layout dp=2 x tp=2 x pp=1 (4 ranks) cannot be resumed as dp=2 x tp=1 x pp=1 (2 ranks)" in e
        for e in errs
    ), errs
    assert not (c / "loss.jsonl").exists() or not (c / "loss.jsonl").read_text().strip()
