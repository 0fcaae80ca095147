"""`trainctl evict-node` as a user runs it: targets that would drain a cluster are refused first.

`scontrol` and `kubectl` are fakes on PATH that record every call (there is no Slurm or Kubernetes
cluster on the test machine, so the scheduler client is a true boundary). "Refused before any
scheduler command" is checked as: the fake's log does not exist, and the ledger was not written."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from trainctl.ops.evict.operation import EvictRequest, SupervisedRelaunch, evict_node
from trainctl.ops.evict.quarantine import Ledger
from trainctl.ops.evict.relaunch_plan import plan_relaunch
from trainctl.ops.evict.schedulers import SchedulerKind
from trainctl.rundir import HostRanks, RunInfo, write_run_info

FAKE = Path(__file__).resolve().parents[1] / "fixtures" / "ledger" / "fake_scheduler_cli.py"


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name in ("scontrol", "kubectl"):
        (bin_dir / name).write_text(f"#!{sys.executable}\n" + FAKE.read_text())
        (bin_dir / name).chmod(0o755)
    return {
        **os.environ,
        "TRAINCTL_HOME": str(tmp_path / "home"),
        "FAKE_SCHED_LOG": str(tmp_path / "argv.jsonl"),
        "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
    }


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    run = tmp_path / "run"
    write_run_info(
        run,
        RunInfo(
            run_id="r-4",
            world_size=4,
            nproc_per_node=1,
            hosts=tuple(HostRanks(f"node0{i + 1}", (i,)) for i in range(4)),
        ),
    )
    return run


def _calls(tmp_path: Path) -> list[list[str]]:
    log = tmp_path / "argv.jsonl"
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["ALL"], "'ALL' is not a host: a scheduler reads it as every node"),
        (["node[01-99]", "--run", "{run}"], "'node[01-99]' names node05, node06, node07, node08, node09 and 90 more"),
        (["node[01-02]"], "'node[01-02]' names several hosts, and no run is known"),
        (["--", "--selector=x"], "host '--selector=x' starts with '-', so a scheduler would read it as an option"),
        (["--", "-x"], "host '-x' starts with '-', so a scheduler would read it as an option"),
        (["app=web"], "'app=web' is a selector (key=value), not a host"),
        (["node*"], "'node*' is a glob pattern"),
        (["node09", "--run", "{run}"], "'node09' names node09, not among the hosts or spares of run r-4"),
    ],
)
def test_cluster_wide_targets_are_refused_before_any_scheduler_command(
    cli, env, tmp_path: Path, run_dir: Path, argv: list[str], message: str
) -> None:
    args = [a.replace("{run}", str(run_dir)) for a in argv]
    # options first: after `--` everything is the HOST argument
    r = cli("evict-node", "--reason", "drill", "--scheduler", "slurm", *args, env=env)
    assert r.code == 1, (r.stdout, r.stderr)
    errors = [line for line in r.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and message in errors[0], r.stderr
    assert "Traceback" not in r.stderr
    assert _calls(tmp_path) == []  # the fake scontrol was never run
    assert not (tmp_path / "home" / "quarantine.json").exists()


def test_an_option_where_the_host_goes_is_a_usage_error(cli, env, tmp_path: Path) -> None:
    for opt in ("--selector=x", "-x", "-l"):
        r = cli("evict-node", opt, "--reason", "drill", "--scheduler", "k8s", env=env)
        assert r.code == 2 and "No such option" in r.stderr, r.stderr
    assert _calls(tmp_path) == [] and not (tmp_path / "home").exists()


def test_a_hostlist_of_the_run_drains_each_member(cli, env, tmp_path: Path, run_dir: Path) -> None:
    r = cli(
        "evict-node", "node[02-03]", "--reason", "bad rack", "--run", run_dir, "--scheduler", "slurm", "--json", env=env
    )
    assert r.code == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["hosts"] == ["node02", "node03"] and doc["host"] == "node02,node03"
    assert [e["host"] for e in doc["entries"]] == ["node02", "node03"]
    assert _calls(tmp_path) == [
        ["scontrol", "update", "NodeName=node02", "State=DRAIN", "Reason=trainctl: bad rack"],
        ["scontrol", "update", "NodeName=node03", "State=DRAIN", "Reason=trainctl: bad rack"],
    ]
    assert sorted(Ledger(tmp_path / "home").entries()) == ["node02", "node03"]


def test_dry_run_prints_shell_quoted_commands(cli, env, tmp_path: Path) -> None:
    r = cli("evict-node", "node03", "--reason", "ecc; rm -rf / $(id)", "--scheduler", "slurm", "--dry-run", env=env)
    assert r.code == 0, r.stderr
    assert r.stdout.splitlines()[1] == (
        "dry run: would run: scontrol update NodeName=node03 State=DRAIN 'Reason=trainctl: ecc; rm -rf / $(id)'"
    )
    assert _calls(tmp_path) == []


def test_dry_run_plans_exactly_what_the_real_run_does(env, tmp_path: Path, run_dir: Path, monkeypatch) -> None:
    for k in ("PATH", "FAKE_SCHED_LOG"):
        monkeypatch.setenv(k, env[k])
    ledger = Ledger(tmp_path / "home")
    req = EvictRequest(
        targets=("node[02-03]",),
        reason="xid 79",
        run=str(run_dir),
        scheduler=SchedulerKind.K8S,
        findings=(
            {"kind": "faulty_host", "severity": "critical", "summary": "xid on node03", "hosts": ["node03"]},
            {"kind": "straggler", "severity": "warning", "summary": "slow node01", "hosts": ["node01"]},
        ),
        relaunch=SupervisedRelaunch(
            hosts=("node01", "node02", "node03", "node04"), spares=("node05",), nproc_per_node=1
        ),
        dry_run=True,
    )
    dry = evict_node(req, ledger=ledger)
    assert dry.entries == () and ledger.entries() == {} and _calls(tmp_path) == []
    real = evict_node(EvictRequest(**{**req.__dict__, "dry_run": False}), ledger=ledger)
    assert [tuple(c) for c in _calls(tmp_path)] == list(real.commands) == list(dry.commands)
    assert (
        real.relaunch_plan
        == dry.relaunch_plan
        == plan_relaunch(
            ["node01", "node02", "node03", "node04"],
            quarantined={"node02", "node03"},
            spares=["node05"],
            nproc_per_node=1,
        )
    )
    assert dry.relaunch_plan is not None and dry.relaunch_plan.kind.value == "shrink"
    # each host's ledger entry holds the finding that names it (node03), or none (node02)
    entries = ledger.entries()
    assert entries["node03"].finding["summary"] == "xid on node03" and entries["node02"].finding is None
    assert entries["node02"].run == "r-4"


def test_a_host_never_gets_evidence_about_another_host(tmp_path: Path) -> None:
    # the supervisor and playbooks hand findings straight to the operation: node03's entry must not
    # record node01's fault, whatever the list holds; a finding that names no host stays usable
    ledger = Ledger(tmp_path / "home")
    about_node01 = {
        "kind": "oom",
        "severity": "critical",
        "summary": "rank 0 on node01 ran out of memory",
        "hosts": ["node01"],
    }
    hostless = {"kind": "crash", "severity": "critical", "summary": "the job crashed", "hosts": []}
    for findings, expected in [((about_node01,), None), ((hostless,), hostless), ((about_node01, hostless), None)]:
        res = evict_node(EvictRequest(targets=("NODE03",), reason="r", findings=findings), ledger=ledger)
        assert res.entries[0].finding == expected
