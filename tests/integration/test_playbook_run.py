"""The playbook engine end to end through the real CLI: dry-run, audit, resume, destructive gating.

`diagnose` runs for real as a subprocess on a run dir built with trainctl.rundir; the webhook is a
real http.server on 127.0.0.1 (port 0).
"""

from __future__ import annotations

import json
import os
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import pyarrow as pa
import pytest

from trainctl.dataset import write_table
from trainctl.ops.playbook.audit import read_audit
from trainctl.rundir import HostRanks, RunInfo, write_run_info
from trainctl.schemas import SignalKind, schema_for

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    run = tmp_path / "run"
    write_run_info(
        run,
        RunInfo(
            run_id="r-test-0001",
            world_size=4,
            nproc_per_node=1,
            hosts=tuple(HostRanks(f"node0{i + 1}", (i,)) for i in range(4)),
        ),
    )
    # A real timeline table per host (identical ranks: nothing for an analyzer to flag).
    for i in range(4):
        cols = {
            "rank": [i] * 3,
            "local_rank": [0] * 3,
            "step": [1, 2, 3],
            "phase": ["step"] * 3,
            "start_ts": [1_000_000_000 * s for s in (1, 2, 3)],
            "duration_ns": [900_000_000] * 3,
            "tokens": [4096] * 3,
            "source": ["perf_counter"] * 3,
        }
        schema = schema_for(SignalKind.TIMELINE)
        write_table(
            run, SignalKind.TIMELINE, f"node0{i + 1}", pa.Table.from_pydict(cols, schema=schema), part=f"rank{i}-0"
        )
    return run


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    return {**os.environ, "TRAINCTL_HOME": str(tmp_path / "home")}


class _Hook:
    def __init__(self) -> None:
        self.bodies: list[dict] = []
        hook = self

        class H(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802
                hook.bodies.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
                self.send_response(204)
                self.end_headers()

            def log_message(self, *a: object) -> None:
                pass

        self.server = HTTPServer(("127.0.0.1", 0), H)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def hook():
    h = _Hook()
    yield h
    h.close()


RUNBOOK = """\
name: notify-test
description: diagnose, tell a webhook, ask
trigger: {{kinds: [hung_collective]}}
steps:
  - id: diagnose
    type: diagnose
  - id: notify
    type: notify
    with:
      url: {url}
      message: "run ${{run.id}}: ${{len(diagnose.findings)}} findings"
  - id: confirm
    type: ask
    with: {{prompt: "go on?", default: no}}
  - id: evict
    type: evict-node
    when: confirm.answer
    with: {{hosts: [node02], reason: test}}
"""


def _tree(root: Path) -> dict[str, float]:
    return {str(p.relative_to(root)): p.stat().st_mtime_ns for p in root.rglob("*")}


def test_dry_run_of_hung_collective_changes_nothing(cli, run_dir: Path, env, tmp_path: Path) -> None:
    before = _tree(run_dir)
    r = cli("playbook", "run", "hung-collective", "--run", run_dir, "--dry-run", "--json", env=env)
    assert r.code == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["dry_run"] is True and doc["audit"] is None and doc["incident"] is None
    steps = {s["step"]: s for s in doc["steps"]}
    assert [s["step"] for s in doc["steps"]] == ["collect", "diagnose", "notify", "confirm", "evict"]
    assert steps["collect"]["status"] == "planned"
    assert steps["collect"]["command"][:3] == ["trainctl", "collect", str(run_dir.resolve())]
    assert steps["diagnose"]["status"] == "ok"  # read-only: really ran, on the run dir (collect did not)
    assert steps["diagnose"]["inputs"]["path"] == str(run_dir.resolve())
    assert steps["evict"]["status"] == "skipped"  # diagnose named no culprit here
    assert _tree(run_dir) == before  # no incidents/, no audit, nothing touched
    assert not (tmp_path / "home").exists()  # no ledger


def test_dry_run_plans_destructive_steps_without_running_them(cli, run_dir: Path, env, tmp_path: Path, hook) -> None:
    book = tmp_path / "book.yaml"
    book.write_text(RUNBOOK.format(url=hook.url))
    before = _tree(run_dir)
    r = cli("playbook", "run", book, "--run", run_dir, "--dry-run", "--json", env=env)
    assert r.code == 0, r.stderr
    steps = {s["step"]: s for s in json.loads(r.stdout)["steps"]}
    assert steps["notify"]["status"] == "planned" and hook.bodies == []
    assert steps["evict"]["status"] == "planned"
    assert steps["evict"]["decision"] == "would run if confirm.answer (depends on confirm); destructive: needs --yes"
    assert steps["evict"]["command"] == [
        "trainctl",
        "evict-node",
        "node02",
        "--reason",
        "test",
        "--run",
        str(run_dir.resolve()),
        "--json",
    ]
    assert _tree(run_dir) == before


def test_real_run_writes_every_step_to_the_audit_and_resume_skips_completed(
    cli, run_dir: Path, env, tmp_path: Path, hook
) -> None:
    book = tmp_path / "book.yaml"
    # First attempt: the webhook is down (closed port) so notify fails and the playbook stops.
    dead = _Hook()
    dead_url = dead.url
    dead.close()
    book.write_text(RUNBOOK.format(url=dead_url))
    r1 = cli("playbook", "run", book, "--run", run_dir, "--json", env=env)
    assert r1.code == 1
    doc1 = json.loads(r1.stdout)
    assert [(s["step"], s["status"]) for s in doc1["steps"]] == [("diagnose", "ok"), ("notify", "failed")]
    incident = doc1["incident"]
    audit = run_dir / "incidents" / incident / "audit.jsonl"
    assert Path(doc1["audit"]) == audit.resolve()

    # Resume with the webhook back: diagnose is reused, notify posts, ask takes its default (no),
    # so the destructive evict is skipped by its condition.
    book.write_text(RUNBOOK.format(url=hook.url))
    r2 = cli("playbook", "run", book, "--run", run_dir, "--resume", incident, "--json", env=env)
    assert r2.code == 0, r2.stderr
    steps = json.loads(r2.stdout)["steps"]
    assert [(s["step"], s["status"]) for s in steps] == [
        ("diagnose", "ok"),
        ("notify", "ok"),
        ("confirm", "ok"),
        ("evict", "skipped"),
    ]
    assert steps[0]["decision"].startswith(f"completed earlier in {incident}")
    assert steps[2]["outputs"] == {"answer": False} and steps[2]["decision"] == "unattended: took the default (no)"
    assert hook.bodies == [
        {
            "runbook": "notify-test",
            "incident": incident,
            "run": str(run_dir.resolve()),
            "message": "run r-test-0001: 0 findings",
        }
    ]

    records = read_audit(audit)
    assert [r["event"] for r in records] == [
        "start",
        "step",
        "step",
        "end",
        "resume",
        "step",
        "step",
        "step",
        "step",
        "end",
    ]
    steps_rec = [r for r in records if r["event"] == "step"]
    assert [(r["step"], r["status"]) for r in steps_rec] == [
        ("diagnose", "ok"),
        ("notify", "failed"),
        ("diagnose", "ok"),
        ("notify", "ok"),
        ("confirm", "ok"),
        ("evict", "skipped"),
    ]
    diag = steps_rec[0]
    assert diag["command"] == ["trainctl", "diagnose", str(run_dir.resolve()), "--json", "--fail-on", "never"]
    assert diag["exit_code"] == 0 and diag["outputs"]["findings"] == [] and diag["duration_s"] > 0
    assert diag["started_ts"] <= diag["ended_ts"]
    assert steps_rec[1]["error"].startswith(f"POST {dead_url} failed")
    assert steps_rec[3]["outputs"]["http_status"] == 204
    assert not (tmp_path / "home").exists()


def test_destructive_step_without_yes_refuses_in_a_non_interactive_run(cli, run_dir: Path, env, tmp_path: Path) -> None:
    book = tmp_path / "evict.yaml"
    book.write_text(
        "name: evict-test\ndescription: x\nsteps:\n  - id: diagnose\n    type: diagnose\n"
        "  - id: evict\n    type: evict-node\n    with: {hosts: [node02], reason: drill}\n"
    )
    r = cli("playbook", "run", book, "--run", run_dir, env=env)
    assert r.code == 1
    assert (
        "step 'evict' would evict node02, which is destructive, and this run is not interactive; rerun with --yes"
        in r.stderr
    )
    (incident,) = [p.name for p in (run_dir / "incidents").iterdir()]
    records = read_audit(run_dir / "incidents" / incident / "audit.jsonl")
    assert [(r.get("step"), r.get("status")) for r in records if r["event"] == "step"] == [
        ("diagnose", "ok"),
        ("evict", "refused"),
    ]
    assert not (tmp_path / "home").exists()  # evict-node never ran: no ledger


def test_list_and_show(cli) -> None:
    r = cli("playbook", "list", "--json")
    assert r.code == 0, r.stderr
    names = [b["name"] for b in json.loads(r.stdout)]
    assert names == [
        "crash-loop",
        "faulty-host",
        "hung-collective",
        "missing-data",
        "nan-loss",
        "network-error",
        "oom",
        "straggler",
    ]
    show = cli("playbook", "show", "hung-collective")
    assert show.code == 0 and show.stdout.startswith("name: hung-collective\n")
    bad = cli("playbook", "show", "nope")
    assert bad.code == 1 and "no built-in runbook 'nope'" in bad.stderr
