"""Shrink decisions in the executors: the reference trainer may shrink, a user script only with --allow-shrink;
`evict-node --relaunch --dry-run` prints the plan the relaunch would execute; the relaunch pins tp."""

from __future__ import annotations

import json
import os
from pathlib import Path

from trainctl.cli.launch import request_from_argv
from trainctl.ops.evict.relaunch_plan import PlanKind
from trainctl.ops.launch import run_control
from trainctl.ops.launch.run_control import record_launch, relaunch_argv, relaunch_plan_for
from trainctl.rundir import HostRanks, RunInfo, write_run_info

HOSTS = (HostRanks("node01", (0, 1)), HostRanks("node02", (2, 3)), HostRanks("node03", (4, 5)))


def _run(tmp_path: Path, *, script: str | None, launch_args: list[str] = (), extra: dict | None = None) -> Path:
    run = tmp_path / "run"
    layout = {"dp": 3, "tp": 2, "pp": 1} if script is None else {}
    write_run_info(
        run,
        RunInfo(
            run_id="r-1", world_size=6, nproc_per_node=2, hosts=HOSTS, layout=layout, script=script, extra=extra or {}
        ),
    )
    tail = ["--", script] if script else []
    argv = [
        "--hosts",
        "node01,node02,node03",
        "--nproc-per-node",
        "2",
        "--run-dir",
        str(run),
        "--checkpoint-every",
        "4",
        "--checkpoint-dir",
        "/shared/ck",
        *launch_args,
        *tail,
    ]
    record_launch(run, request_from_argv(argv, cwd=tmp_path))
    return run


def test_reference_trainer_shrinks_without_a_flag(tmp_path) -> None:
    plan, opts = relaunch_plan_for(_run(tmp_path, script=None), ["node02"])
    assert opts is not None and opts.source.endswith("launch.json")
    assert (plan.kind, plan.hosts, plan.world_size, dict(plan.layout)) == (
        PlanKind.SHRINK,
        ("node01", "node03"),
        4,
        {"dp": 2, "tp": 2, "pp": 1},
    )


def test_user_script_stops_naming_the_flag(tmp_path) -> None:
    run = _run(tmp_path, script="/w/train.py")
    plan, _ = relaunch_plan_for(run, ["node02"])
    assert plan.kind is PlanKind.STOP and plan.hosts == ()
    assert plan.reason == (
        "layout needs 3 hosts (6 ranks), only 2 healthy and 0 free spares; add spares with --spares, "
        "or pass --allow-shrink if /w/train.py can resume at a smaller world size "
        "(trainctl cannot tell for a user script)"
    )
    # evict-node's own flag, or the launch's, allows it
    assert relaunch_plan_for(run, ["node02"], allow_shrink=True)[0].kind is PlanKind.SHRINK


def test_user_script_launched_with_allow_shrink_shrinks(tmp_path) -> None:
    run = _run(tmp_path, script="/w/train.py", launch_args=["--allow-shrink"])
    plan, _ = relaunch_plan_for(run, ["node02"])
    assert (plan.kind, plan.hosts, plan.world_size) == (PlanKind.SHRINK, ("node01", "node03"), 4)


def test_spare_still_preferred_over_shrink(tmp_path) -> None:
    plan, _ = relaunch_plan_for(_run(tmp_path, script=None, launch_args=["--spares", "node09"]), ["node02"])
    assert (plan.kind, plan.hosts) == (PlanKind.REPLACE, ("node01", "node09", "node03"))


def test_relaunch_argv_pins_tp_and_keeps_allow_shrink(tmp_path) -> None:
    run = _run(tmp_path, script=None, launch_args=["--allow-shrink"])
    lo = run_control.launch_options(run)
    new = relaunch_argv(lo, hosts=["node01", "node03"], spares=[], run_dir="/x/r1", remote_run_dir="/r/r1", tp=2)
    assert "--allow-shrink" in new
    assert new[new.index("--") :] == ["--", "--tp", "2"]  # 2 hosts x 2 = 4 ranks would default to tp 2 anyway; explicit
    # an explicit --tp is never overridden, and a user script gets none
    run2 = _run(tmp_path / "b", script="/w/train.py")
    new = relaunch_argv(
        run_control.launch_options(run2), hosts=["node01"], spares=[], run_dir="/x", remote_run_dir="/r", tp=2
    )
    assert new[new.index("--") :] == ["--", "/w/train.py"] and "--allow-shrink" not in new


def test_allow_shrink_is_refused_with_local(cli) -> None:
    r = cli("launch", "--local", "--allow-shrink")
    assert r.code == 1 and "--allow-shrink applies to --hosts" in r.stderr


def test_evict_dry_run_prints_the_executed_plan(cli, tmp_path) -> None:
    env = {**os.environ, "TRAINCTL_HOME": str(tmp_path / "home")}
    run = _run(tmp_path, script="/w/train.py")
    r = cli("evict-node", "node02", "--reason", "xid 79", "--run", run, "--relaunch", "--dry-run", "--json", env=env)
    assert r.code == 0, r.stderr
    assert json.loads(r.stdout)["relaunch"]["kind"] == "stop"
    r = cli(
        "evict-node",
        "node02",
        "--reason",
        "xid 79",
        "--run",
        run,
        "--relaunch",
        "--allow-shrink",
        "--dry-run",
        "--json",
        env=env,
    )
    assert r.code == 0, r.stderr
    plan = json.loads(r.stdout)["relaunch"]
    assert (plan["kind"], plan["hosts"], plan["world_size"]) == ("shrink", ["node01", "node03"], 4)
    # a real relaunch of the STOP plan fails before anything changes (the ledger stays empty)
    r = cli("evict-node", "node02", "--reason", "xid 79", "--run", run, "--relaunch", "--yes", env=env)
    assert r.code == 1 and "pass --allow-shrink if /w/train.py" in r.stderr
    assert json.loads(cli("nodes", "list", "--json", env=env).stdout)["hosts"] == []
