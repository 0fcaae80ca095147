"""`trainctl evict-node` and `trainctl nodes ...` as a user runs them (real entry point, subprocess).

scontrol/kubectl are fakes on PATH that record their argv: no cluster exists on the test machine."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from trainctl.rundir import HostRanks, RunInfo, write_run_info

FAKE = Path(__file__).resolve().parents[1] / "fixtures" / "ledger" / "fake_scheduler_cli.py"


def install_fakes(bin_dir: Path) -> None:
    bin_dir.mkdir(parents=True, exist_ok=True)
    for name in ("scontrol", "kubectl"):
        (bin_dir / name).write_text(f"#!{sys.executable}\n" + FAKE.read_text())
        (bin_dir / name).chmod(0o755)


def recorded(log: Path) -> list[list[str]]:
    return [json.loads(l) for l in log.read_text().splitlines()] if log.exists() else []


FINDING = {
    "kind": "faulty_host",
    "severity": "critical",
    "category": "gpu_lost",
    "hosts": ["node02"],
    "ranks": [2, 3],
    "confidence": 0.95,
    "summary": "node02: GPU lost (Xid 79)",
    "evidence": {"xid": 79, "line": "NVRM: Xid (PCI:0000:3b:00): 79"},
    "playbook": "faulty-host",
}


@pytest.fixture
def env(tmp_path):
    install_fakes(tmp_path / "bin")
    e = dict(os.environ)
    e.update(
        TRAINCTL_HOME=str(tmp_path / "home"),
        FAKE_SCHED_LOG=str(tmp_path / "argv.jsonl"),
        PATH=f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}",
    )
    return e


def _ledger(tmp_path) -> dict:
    p = tmp_path / "home" / "quarantine.json"
    return json.loads(p.read_text()) if p.exists() else {}


def test_evict_list_restore_slurm(cli, env, tmp_path) -> None:
    (tmp_path / "f.json").write_text(json.dumps(FINDING))
    r = cli(
        "evict-node",
        "node02",
        "--reason",
        "xid 79",
        "--run",
        "r-7",
        "--finding",
        f"@{tmp_path / 'f.json'}",
        "--scheduler",
        "slurm",
        "--json",
        env=env,
    )
    assert r.code == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["entry"]["host"] == "node02" and doc["entry"]["run"] == "r-7"
    assert doc["entry"]["finding"] == FINDING
    assert recorded(tmp_path / "argv.jsonl") == [
        ["scontrol", "update", "NodeName=node02", "State=DRAIN", "Reason=trainctl: xid 79"]
    ]

    r = cli("nodes", "list", "--json", env=env)
    assert r.code == 0, r.stderr
    hosts = json.loads(r.stdout)["hosts"]
    assert [(h["host"], h["reason"], h["run"], h["evictions"]) for h in hosts] == [("node02", "xid 79", "r-7", 1)]

    r = cli("nodes", "list", env=env)
    assert "node02" in r.stdout and "xid 79" in r.stdout

    r = cli("nodes", "restore", "node02", "--scheduler", "slurm", env=env)
    assert r.code == 0, r.stderr
    assert r.stdout.startswith("restored node02 (was quarantined since ")
    assert recorded(tmp_path / "argv.jsonl")[-1] == ["scontrol", "update", "NodeName=node02", "State=RESUME"]
    assert _ledger(tmp_path)["hosts"] == {}

    r = cli("nodes", "audit", "--json", env=env)
    trail = json.loads(r.stdout)
    assert [(t["action"], t["host"]) for t in trail] == [("evict", "node02"), ("restore", "node02")]
    assert trail[0]["finding"]["evidence"]["xid"] == 79


def test_dry_run_changes_nothing(cli, env, tmp_path) -> None:
    r = cli("evict-node", "node03", "--reason", "ecc", "--scheduler", "k8s", "--dry-run", env=env)
    assert r.code == 0, r.stderr
    assert r.stdout.splitlines()[1:] == [
        "dry run: would run: kubectl cordon -- node03",
        "dry run: would run: kubectl drain --ignore-daemonsets --delete-emptydir-data -- node03",
    ]
    assert not (tmp_path / "home" / "quarantine.json").exists()
    assert recorded(tmp_path / "argv.jsonl") == []
    cli("evict-node", "node03", "--reason", "ecc", env=env)
    before = (tmp_path / "home" / "quarantine.json").read_text()
    r = cli("nodes", "restore", "node03", "--scheduler", "k8s", "--dry-run", "--json", env=env)
    assert json.loads(r.stdout)["commands"] == [["kubectl", "uncordon", "--", "node03"]]
    assert (tmp_path / "home" / "quarantine.json").read_text() == before
    assert recorded(tmp_path / "argv.jsonl") == []


def test_scheduler_failure_keeps_host_quarantined(cli, env, tmp_path) -> None:
    env.update(FAKE_SCHED_RC="1", FAKE_SCHED_STDERR="slurm_update error: Invalid node name specified")
    r = cli("evict-node", "node09", "--reason", "x", "--scheduler", "slurm", env=env)
    assert r.code == 1 and "Traceback" not in r.stderr
    line = [l for l in r.stderr.splitlines() if l.startswith("error:")][0]
    assert "node09 is quarantined in the ledger, but the slurm drain failed" in line
    assert "Invalid node name specified" in line
    assert list(_ledger(tmp_path)["hosts"]) == ["node09"]
    # A failed resume keeps it quarantined too.
    r = cli("nodes", "restore", "node09", "--scheduler", "slurm", env=env)
    assert r.code == 1 and list(_ledger(tmp_path)["hosts"]) == ["node09"]


def test_restore_unknown_and_bad_finding(cli, env) -> None:
    r = cli("nodes", "restore", "nodeX", env=env)
    assert r.code == 1
    assert "error: host 'nodeX' is not quarantined (quarantined: none); see `trainctl nodes list`" in r.stderr
    r = cli("evict-node", "n1", "--reason", "x", "--finding", "{not json", env=env)
    assert r.code == 1 and "error: --finding: not JSON" in r.stderr


def test_relaunch_plan_from_run_dir(cli, env, tmp_path) -> None:
    run = tmp_path / "run"
    write_run_info(
        run,
        RunInfo(
            run_id="r-9",
            world_size=6,
            nproc_per_node=2,
            hosts=(HostRanks("node01", (0, 1)), HostRanks("node02", (2, 3)), HostRanks("node03", (4, 5))),
            layout={"dp": 3, "tp": 2, "pp": 1},
        ),
    )
    r = cli(
        "evict-node",
        "node02",
        "--reason",
        "xid 79",
        "--run",
        run,
        "--relaunch",
        "--spares",
        "node04",
        "--dry-run",
        "--json",
        env=env,
    )
    assert r.code == 0, r.stderr
    plan = json.loads(r.stdout)["relaunch"]
    assert plan["kind"] == "replace" and plan["hosts"] == ["node01", "node04", "node03"]
    # A real relaunch needs the run's launch options (launch.json or its live supervisor): this run
    # dir has neither, so nothing changes, not even the ledger.
    r = cli("evict-node", "node02", "--reason", "xid 79", "--run", run, "--relaunch", "--yes", env=env)
    assert r.code == 1 and "no launch.json and no live `trainctl launch --hosts` supervisor" in r.stderr
    assert json.loads(cli("nodes", "list", "--json", env=env).stdout)["hosts"] == []
    cli("evict-node", "node02", "--reason", "xid 79", "--run", run, env=env)
    assert json.loads(cli("nodes", "list", "--json", env=env).stdout)["hosts"][0]["run"] == "r-9"
    r = cli("evict-node", "node01", "--reason", "ecc", "--run", run, "--relaunch", "--dry-run", env=env)
    assert r.code == 0, r.stderr
    # node02 already quarantined, node04 not a spare this time: shrink to node03 (tp=2 fits on one host).
    assert r.stdout.splitlines()[1:] == [
        "relaunch plan: shrink: layout needs 3 hosts (6 ranks), only 1 healthy and 0 free spares; "
        "shrinking to 1 hosts (2 ranks, dp 3 -> 1)",
        "relaunch hosts: node03 (world size 2)",
    ]
    cli("evict-node", "node01", "--reason", "ecc", "--run", run, env=env)
    r = cli("evict-node", "node03", "--reason", "ecc", "--run", run, "--relaunch", "--dry-run", env=env)
    assert r.code == 0, r.stderr
    assert r.stdout.splitlines()[1].startswith("relaunch plan: stop: layout needs 3 hosts (6 ranks), only 0 healthy")


def test_relaunch_needs_run_dir(cli, env) -> None:
    r = cli("evict-node", "n1", "--reason", "x", "--relaunch", env=env)
    assert r.code == 1 and "--relaunch needs --run RUN_DIR holding run.json" in r.stderr


def test_one_host_is_one_entry_whatever_its_case(cli, env, tmp_path) -> None:
    # DNS names are case-insensitive: evicting NODE02 then node02 is one entry, evicted twice
    assert cli("evict-node", "NODE02", "--reason", "xid 79", env=env).code == 0
    r = cli("evict-node", "node02", "--reason", "still xid 79", "--scheduler", "slurm", "--json", env=env)
    assert r.code == 0, r.stderr
    assert json.loads(r.stdout)["entry"]["evictions"] == 2
    hosts = json.loads(cli("nodes", "list", "--json", env=env).stdout)["hosts"]
    assert [(h["host"], h["reason"], h["evictions"]) for h in hosts] == [("NODE02", "still xid 79", 2)]
    assert list(_ledger(tmp_path)["hosts"]) == ["node02"]

    # launch's check finds it in any case (the same call `launch --hosts` makes before any SSH)
    from trainctl.errors import LaunchError
    from trainctl.ops.launch.supervisor import HostsSpec, validate

    spec = HostsSpec(
        run_dir=tmp_path / "r",
        remote_run_dir="/tmp/r",
        run_id="r",
        hosts=("node01", "Node02"),
        nproc_per_node=1,
        ledger_home=env["TRAINCTL_HOME"],
    )
    with pytest.raises(LaunchError, match=r"quarantined host\(s\) in the host list \(Node02: still xid 79\)"):
        validate(spec)

    # a run's member named in another case is evicted as the run names it (no second entry)
    run = tmp_path / "run"
    write_run_info(run, RunInfo("r-3", 2, 1, (HostRanks("node01", (0,)), HostRanks("node03", (1,)))))
    r = cli("evict-node", "NODE03", "--reason", "ecc", "--run", run, "--dry-run", "--json", env=env)
    assert r.code == 0, r.stderr
    assert json.loads(r.stdout)["hosts"] == ["node03"]

    # restore and audit find it in any case; the scheduler resumes the name it was drained under
    r = cli("nodes", "audit", "--host", "nODE02", "--json", env=env)
    assert [(t["action"], t["host"]) for t in json.loads(r.stdout)] == [("evict", "NODE02"), ("evict", "node02")]
    r = cli("nodes", "restore", "node02", "--scheduler", "slurm", env=env)
    assert r.code == 0, r.stderr
    assert r.stdout.startswith("restored NODE02 (was quarantined since ")
    assert recorded(tmp_path / "argv.jsonl")[-1] == ["scontrol", "update", "NodeName=NODE02", "State=RESUME"]
    assert _ledger(tmp_path)["hosts"] == {}


def test_finding_must_be_about_the_host_and_a_report_gives_the_one_that_is(cli, env, tmp_path) -> None:
    from trainctl.findings import Category, Finding, FindingKind, Report, Severity

    oom = Finding(
        FindingKind.OOM, Severity.CRITICAL, "rank 0 on node01 ran out of memory", hosts=("node01",), ranks=(0,)
    )
    xid = Finding(
        FindingKind.FAULTY_HOST,
        Severity.CRITICAL,
        "node07: GPU lost (Xid 79)",
        Category.GPU_LOST,
        ("node07",),
        (6,),
        0.9,
    )
    slow = Finding(FindingKind.STRAGGLER, Severity.WARNING, "rank 6 on node07 is 1.4x slower", hosts=("node07",))
    report = tmp_path / "report.json"  # what `trainctl diagnose RUN --json > report.json` writes
    report.write_text(Report("r-7", (oom, slow, xid)).to_json())
    only_oom = tmp_path / "oom.json"
    only_oom.write_text(Report("r-7", (oom,)).to_json())
    (tmp_path / "one.json").write_text(json.dumps(oom.to_dict()))

    # the report's finding about node07 (the most severe of its two), never rank 0's OOM on node01
    r = cli("evict-node", "NODE07", "--reason", "test", "--finding", f"@{report}", "--json", env=env)
    assert r.code == 0, r.stderr
    assert json.loads(r.stdout)["entry"]["finding"] == xid.to_dict()

    # a finding (alone, or the only one of a report) about another host is refused: nothing changes
    for spec, message in [
        (f"@{only_oom}", f"error: {only_oom}: no finding of the report names node05 (its findings name node01); "),
        (f"@{tmp_path / 'one.json'}", f"error: {tmp_path / 'one.json'}: the finding names node01, not node05 "),
        (json.dumps(oom.to_dict()), "error: --finding: the finding names node01, not node05 "),
    ]:
        r = cli("evict-node", "node05", "--reason", "test", "--finding", spec, env=env)
        assert r.code == 1 and "Traceback" not in r.stderr, r.stderr
        (line,) = [x for x in r.stderr.splitlines() if x.startswith("error:")]
        assert line.startswith(message) and "pass the finding about node05" in line, line
    assert list(_ledger(tmp_path)["hosts"]) == ["node07"]


def test_launch_refuses_a_quarantined_host_named_with_its_ssh_port(cli, env, tmp_path) -> None:
    # `launch --hosts node07:2222` is node07: refused before any SSH, with the name to restore
    assert cli("evict-node", "node07", "--reason", "xid 79", env=env).code == 0
    for hosts in ("node01,node07:2222", "node01,NODE07:22"):
        line = cli(
            "launch", "--hosts", hosts, "--nproc-per-node", "1", "--run-dir", tmp_path / "r", env=env
        ).error_line()
        assert line == (
            f"error: quarantined host(s) in the host list ({hosts.split(',')[1]}: xid 79); drop them, restore with "
            "`trainctl nodes restore node07`, or pass --allow-quarantined"
        )
    # quarantining with a port quarantines the host: `nodes list` and the drain name the machine
    r = cli("evict-node", "[2001:DB8::7]:2222", "--reason", "ecc", "--scheduler", "slurm", "--json", env=env)
    assert r.code == 0, r.stderr
    assert json.loads(r.stdout)["hosts"] == ["2001:DB8::7"]
    assert recorded(tmp_path / "argv.jsonl")[-1][:3] == ["scontrol", "update", "NodeName=2001:DB8::7"]
    hosts = json.loads(cli("nodes", "list", "--json", env=env).stdout)["hosts"]
    assert [h["host"] for h in hosts] == ["2001:DB8::7", "node07"]
    line = cli(
        "launch", "--hosts", "2001:db8:0::7", "--nproc-per-node", "1", "--run-dir", tmp_path / "r", env=env
    ).error_line()
    assert "(2001:db8:0::7: ecc); drop them, restore with `trainctl nodes restore 2001:DB8::7`" in line


def test_rebuild_without_an_audit_trail_keeps_the_ledger(cli, env, tmp_path) -> None:
    """`nodes list` on a corrupt ledger says to run `nodes rebuild`; with no audit trail beside it, rebuild
    wrote an empty ledger over it and said 'rebuilt ... 0 quarantined host(s)': every quarantined host was
    released, and the torn file (whose text still named them) was gone."""
    home = tmp_path / "home"
    home.mkdir()
    torn = '{"schema_version": 1, "hosts": {"node07": {"host": "node07", "reason": "xid 79"'
    (home / "quarantine.json").write_text(torn)
    r = cli("nodes", "rebuild", env=env)
    line = r.error_line()
    assert str(home / "audit.jsonl") in line and str(home / "quarantine.json") in line, line
    assert (home / "quarantine.json").read_text() == torn


def test_reading_a_ledger_that_does_not_exist_creates_nothing(cli, env, tmp_path) -> None:
    """`nodes list` (and a dry run) under a TRAINCTL_HOME with a typo created that directory and a lock file."""
    r = cli("nodes", "list", "--json", env=env)
    assert r.code == 0 and json.loads(r.stdout)["hosts"] == [], r
    r = cli("evict-node", "node03", "--reason", "ecc", "--dry-run", env=env)
    assert r.code == 0, r
    assert not (tmp_path / "home").exists()


def test_a_finding_file_that_is_not_text_is_one_line(cli, env, tmp_path) -> None:
    """--finding @FILE on a binary file (a .pkl dump picked by mistake) was a UnicodeDecodeError traceback."""
    blob = tmp_path / "finding.json"
    blob.write_bytes(b"\x80\x04\x95\x90\xff\x00binary")
    line = cli("evict-node", "node01", "--reason", "r", "--finding", f"@{blob}", "--dry-run", env=env).error_line()
    assert line.startswith(f"error: {blob}: not JSON"), line
    assert not (tmp_path / "home").exists()
