"""Playbooks cannot be turned against the fleet: attacks at the level a user reaches them (`playbook run`).

- A rank log line crafted with `$(...)`, backticks, `;`, `|` and a leading `--` is diagnosed for real
  and flows through notify (webhook and command), evict-node's reason and the Slurm drain: nothing
  runs, every value arrives as one literal argument or JSON string.
- `ALL`, `node[01-99]` outside the run, `--selector=x` and `-x` as eviction targets are refused
  before any scheduler command.
- Secrets (URL passwords, path and query tokens, a declared secret input) reach their destination and
  appear in no record, log line, dry run or error message.
- Below the playbook's confidence gate nothing is evicted; the evidence goes to the notify target.

`scontrol` is a fake on PATH that records its argv (no Slurm cluster exists on the test machine: a
true boundary). The webhook is a real http.server on 127.0.0.1; apprise posts to it over json://.
"""

from __future__ import annotations

import base64
import json
import os
import sys
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import pytest

from trainctl.ops.evict.quarantine import Ledger
from trainctl.ops.playbook.audit import read_audit
from trainctl.rundir import HostRanks, RunInfo, write_run_info

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

FAKE = Path(__file__).resolve().parents[1] / "fixtures" / "ledger" / "fake_scheduler_cli.py"
RECORDER = "import json, sys; open(sys.argv[1], 'a').write(json.dumps(sys.argv[2:]) + '\\n')\n"


class Server:
    """A webhook receiver: every POST's path, headers and JSON body."""

    def __init__(self) -> None:
        self.posts: list[dict] = []
        srv = self

        class H(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802
                body = self.rfile.read(int(self.headers["Content-Length"]))
                srv.posts.append({"path": self.path, "headers": dict(self.headers), "body": json.loads(body)})
                self.send_response(200)
                self.end_headers()

            def log_message(self, *a: object) -> None:
                pass

        self.http = HTTPServer(("127.0.0.1", 0), H)
        self.port = self.http.server_address[1]
        threading.Thread(target=self.http.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.http.shutdown()
        self.http.server_close()


@pytest.fixture
def server():
    s = Server()
    yield s
    s.close()


def _dead_port() -> int:
    s = HTTPServer(("127.0.0.1", 0), BaseHTTPRequestHandler)
    port = s.server_address[1]
    s.server_close()
    return port


@pytest.fixture
def world(tmp_path: Path):
    """A run dir whose rank 1 (node02) printed a crafted CUDA error, a fake scontrol, a recorder."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "scontrol").write_text(f"#!{sys.executable}\n" + FAKE.read_text())
    (bin_dir / "scontrol").chmod(0o755)
    recorder = tmp_path / "recorder.py"
    recorder.write_text(RECORDER)
    pwned = [tmp_path / f"pwned{i}" for i in range(5)]
    line = (
        f"RuntimeError: CUDA error: an illegal memory access was encountered $(touch {pwned[0]}) "
        f"`touch {pwned[1]}` ; touch {pwned[2]} | touch {pwned[3]} && touch {pwned[4]} ${{run}}"
    )
    run = tmp_path / "run"
    write_run_info(
        run,
        RunInfo(
            run_id="r-crafted",
            world_size=2,
            nproc_per_node=1,
            hosts=(HostRanks("node01", (0,)), HostRanks("node02", (1,))),
        ),
    )
    for host, rank in (("node01", 0), ("node02", 1)):
        (run / "logs" / host).mkdir(parents=True)
        text = "step 1 loss 2.0\n"
        if host == "node02":
            text += 'Traceback (most recent call last):\n  File "train.py", line 3, in <module>\n' + line + "\n"
        (run / "logs" / host / f"rank-{rank}.log").write_text(text)
    env = {
        **os.environ,
        "TRAINCTL_HOME": str(tmp_path / "home"),
        "FAKE_SCHED_LOG": str(tmp_path / "scontrol.jsonl"),
        "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
    }
    return {"run": run, "env": env, "recorder": recorder, "pwned": pwned, "tmp": tmp_path}


def _scontrol_calls(world) -> list[list[str]]:
    log = world["tmp"] / "scontrol.jsonl"
    return [json.loads(x) for x in log.read_text().splitlines()] if log.exists() else []


def _steps(stdout: str) -> dict[str, dict]:
    return {s["step"]: s for s in json.loads(stdout)["steps"]}


def test_a_crafted_log_line_runs_nothing(cli, world, server) -> None:
    calls = world["tmp"] / "calls.jsonl"
    book = world["tmp"] / "crafted.yaml"
    book.write_text(
        f"""\
name: crafted
description: every place a finding's text can reach
trigger: {{kinds: [crash]}}
inputs: {{target: "node02"}}
steps:
  - id: diagnose
    type: diagnose
  - id: hook
    type: notify
    with:
      url: http://127.0.0.1:{server.port}/hook
      message: "${{diagnose.culprit.summary}}"
  - id: cmd
    type: notify
    with:
      message: "${{diagnose.culprit.summary}}"
      command: ["{sys.executable}", "{world["recorder"]}", "{calls}", "${{diagnose.culprit.summary}}", "x ${{diagnose.culprit.evidence.lines}}"]
  - id: evict
    type: evict-node
    when: diagnose.hosts
    with:
      hosts: ${{diagnose.hosts}}
      reason: "crash: ${{diagnose.culprit.summary}}"
      finding: ${{diagnose.finding_file}}
      scheduler: slurm
"""
    )
    r = cli("playbook", "run", book, "--run", world["run"], "--yes", "--json", env=world["env"])
    assert r.code == 0, r.stderr[-3000:]
    steps = _steps(r.stdout)
    assert {k: v["status"] for k, v in steps.items()} == {"diagnose": "ok", "hook": "ok", "cmd": "ok", "evict": "ok"}
    summary = steps["diagnose"]["outputs"]["culprit"]["summary"]
    assert "$(touch" in summary and "; touch" in summary and "${run}" in summary  # the data, quoted

    assert [p for p in world["pwned"] if p.exists()] == []  # nothing was executed
    # the command got each value as one argument, verbatim; the template inside the text was not rendered again
    (argv,) = [json.loads(x) for x in calls.read_text().splitlines()]
    assert argv[0] == summary and argv[1].startswith("x ") and "$(touch" in argv[1]
    assert [p["body"]["message"] for p in server.posts] == [summary]
    assert _scontrol_calls(world) == [
        ["scontrol", "update", "NodeName=node02", "State=DRAIN", "Reason=trainctl: crash: " + " ".join(summary.split())]
    ]
    entry = Ledger(world["tmp"] / "home").entries()["node02"]
    assert entry.reason == f"crash: {summary}" and entry.finding["kind"] == "crash"


def test_a_finding_value_that_starts_with_dashes_never_becomes_an_option(cli, world) -> None:
    # the CUDA error text itself is the option: `RuntimeError: CUDA error: --selector=all`
    (world["run"] / "logs" / "node02" / "rank-1.log").write_text("RuntimeError: CUDA error: --selector=all\n")
    calls = world["tmp"] / "calls.jsonl"
    book = world["tmp"] / "dash.yaml"
    book.write_text(
        f"""\
name: dash
description: a finding's text as an argument
trigger: {{kinds: [crash]}}
steps:
  - id: diagnose
    type: diagnose
  - id: cmd
    type: notify
    with:
      message: m
      command: ["{sys.executable}", "{world["recorder"]}", "{calls}", "${{diagnose.culprit.evidence.cuda_errors[0]}}"]
"""
    )
    r = cli("playbook", "run", book, "--run", world["run"], "--yes", "--json", env=world["env"])
    assert r.code == 1
    cmd = _steps(r.stdout)["cmd"]
    assert cmd["status"] == "failed"
    assert "'--selector=all' comes from diagnose and starts with '-'" in cmd["error"]
    assert not calls.exists()


@pytest.mark.parametrize("target", ["ALL", "node[01-99]", "--selector=x", "-x"])
def test_cluster_wide_targets_are_refused_before_any_scheduler_command(cli, world, target: str) -> None:
    book = world["tmp"] / "target.yaml"
    book.write_text(
        "name: target\ndescription: evict what the input says\ninputs: {target: ''}\nsteps:\n"
        "  - id: evict\n    type: evict-node\n"
        "    with: {hosts: '${inputs.target}', reason: drill, scheduler: slurm}\n"
    )
    r = cli(
        "playbook",
        "run",
        book,
        "--run",
        world["run"],
        "--yes",
        "--json",
        "--input",
        f"target={target}",
        env=world["env"],
    )
    assert r.code == 1
    ev = _steps(r.stdout)["evict"]
    assert ev["status"] == "failed" and ev["error"].startswith("step 'evict': "), ev
    assert any(why in ev["error"] for why in ("every node", "not among the hosts", "starts with '-'")), ev["error"]
    assert _scontrol_calls(world) == []
    assert not (world["tmp"] / "home" / "quarantine.json").exists()


def test_secrets_reach_their_service_and_nothing_else(cli, world, server) -> None:
    secrets = ["hunter2pass", "s3cr3tPathToken", "qu3ryTok3nValue", "apprisePass99", "inTok3nXYZ", "apiT0kenSecret"]
    hook = f"http://trainctl:hunter2pass@127.0.0.1:{server.port}/hook/s3cr3tPathToken?token=qu3ryTok3nValue"
    dead = f"http://trainctl:hunter2pass@127.0.0.1:{_dead_port()}/hook/s3cr3tPathToken?token=qu3ryTok3nValue"
    via_apprise = f"json://trainctl:apprisePass99@127.0.0.1:{server.port}/apprise/inTok3nXYZ"
    book = world["tmp"] / "secret.yaml"
    book.write_text(
        """\
name: secret
description: notifications with credentials
trigger: {kinds: [crash]}
inputs:
  hook: {default: "", secret: yes}
  dead: {default: ""}
  via_apprise: {default: ""}
  api_token: {default: "", secret: yes}
steps:
  - id: diagnose
    type: diagnose
  - id: hook
    type: notify
    with: {url: "${inputs.hook}", message: "crash on ${diagnose.hosts} (token ${inputs.api_token})"}
  - id: dead
    type: notify
    on_failure: continue
    with: {url: "${inputs.dead}", message: "crash"}
  - id: apprise
    type: notify
    with: {url: "${inputs.via_apprise}", message: "crash on ${diagnose.hosts}"}
"""
    )
    args = ["--input", f"hook={hook}", "--input", f"dead={dead}", "--input", f"via_apprise={via_apprise}"]
    args += ["--input", "api_token=apiT0kenSecret"]
    dry = cli("-v", "playbook", "run", book, "--run", world["run"], "--dry-run", "--json", *args, env=world["env"])
    assert dry.code == 0, dry.stderr[-2000:]
    assert server.posts == []
    real = cli("-v", "playbook", "run", book, "--run", world["run"], "--yes", "--json", *args, env=world["env"])
    assert real.code == 0, real.stderr[-2000:]
    steps = _steps(real.stdout)
    assert [steps[s]["status"] for s in ("hook", "dead", "apprise")] == ["ok", "failed", "ok"]
    dead_port = dead.rsplit(":", 1)[1].split("/")[0]
    assert steps["dead"]["error"].startswith(f"POST http://***@127.0.0.1:{dead_port}/hook/***?*** failed: "), steps[
        "dead"
    ]["error"]

    # the services got them: basic auth, the token path and query, apprise's JSON with its credentials
    webhook, posted = server.posts
    assert webhook["path"] == "/hook/s3cr3tPathToken?token=qu3ryTok3nValue"
    assert base64.b64decode(webhook["headers"]["Authorization"].split()[1]) == b"trainctl:hunter2pass"
    assert webhook["body"]["message"] == "crash on node02 (token apiT0kenSecret)"
    assert posted["path"] == "/apprise/inTok3nXYZ" and posted["body"]["message"] == "crash on node02"
    assert base64.b64decode(posted["headers"]["Authorization"].split()[1]) == b"trainctl:apprisePass99"

    audit = Path(json.loads(real.stdout)["audit"]).read_text()
    for where, text in {
        "dry-run stdout": dry.stdout,
        "dry-run stderr": dry.stderr,
        "stdout": real.stdout,
        "stderr (logs at -v)": real.stderr,
        "audit": audit,
    }.items():
        leaked = [s for s in secrets if s in text]
        assert leaked == [], f"{where} holds {leaked}"
    assert "http://***@127.0.0.1" in audit  # the endpoint is still named
    # the log line with the raw URL was written, and masked on its way out
    assert f"notify service=webhook url=http://***@127.0.0.1:{server.port}/hook/***?***" in real.stderr


def test_below_the_confidence_gate_nothing_is_evicted_and_the_evidence_goes_out(cli, world, server) -> None:
    # the crafted crash is diagnosed at 0.95 (its rank log names rank and host); this playbook wants 0.99
    book = world["tmp"] / "gate.yaml"
    book.write_text(
        f"""\
name: gate
description: evict only on near-certain crash findings
trigger: {{kinds: [crash], confidence: 0.99}}
steps:
  - id: diagnose
    type: diagnose
  - id: notify
    type: notify
    when: diagnose.hosts
    with: {{url: "http://127.0.0.1:{server.port}/hook", message: "evicting ${{diagnose.hosts}}"}}
  - id: evict
    type: evict-node
    when: diagnose.hosts
    with: {{hosts: "${{diagnose.hosts}}", reason: "crash", scheduler: slurm}}
"""
    )
    r = cli("playbook", "run", book, "--run", world["run"], "--yes", "--json", env=world["env"])
    assert r.code == 0, r.stderr[-2000:]
    steps = _steps(r.stdout)
    assert steps["diagnose"]["outputs"]["hosts"] == [] and len(steps["diagnose"]["outputs"]["below_gate"]) == 1
    assert steps["notify"]["status"] == "skipped"
    ev = steps["evict"]
    assert ev["status"] == "escalated" and "below the confidence gate >= 0.99" in ev["decision"]
    assert [f["hosts"] for f in ev["outputs"]["escalated"]] == [["node02"]]
    assert _scontrol_calls(world) == [] and not (world["tmp"] / "home" / "quarantine.json").exists()
    (post,) = server.posts
    assert post["body"]["runbook"] == "gate" and post["body"]["evidence"][0]["confidence"] == 0.95
    assert "not acting on 1 finding(s) below this playbook's confidence gate >= 0.99" in post["body"]["message"]
    records = read_audit(json.loads(r.stdout)["audit"])
    assert [(x["step"], x["status"]) for x in records if x["event"] == "step"][-1] == ("evict", "escalated")
