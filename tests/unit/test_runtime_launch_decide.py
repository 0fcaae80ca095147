"""The launch supervisor's pure decision: observations + now -> Action (no processes, no clocks)."""

from __future__ import annotations

from trainctl.ops.launch.local import Action, ActionKind, AgentState, RankProgress, decide

RUNNING = [AgentState("node01", None), AgentState("node02", None)]


def _decide(agents, progress, now_s, hang=5.0):
    return decide(agents, progress, now_s=now_s, started_s=0.0, hang_timeout_s=hang, startup_timeout_s=60.0)


def test_failed_agent_wins_and_names_host() -> None:
    a = _decide([AgentState("node01", None), AgentState("node02", 1)], {}, 1.0)
    assert a == Action(ActionKind.FAILED, "node02: torchrun exited 1", hosts=("node02",))


def test_all_agents_zero_is_success() -> None:
    assert _decide([AgentState("node01", 0), AgentState("node02", 0)], {}, 1.0).kind is ActionKind.SUCCEEDED


def test_one_agent_done_other_running_waits() -> None:
    assert _decide([AgentState("node01", 0), AgentState("node02", None)], {}, 1.0).kind is ActionKind.WAIT


def test_hang_when_no_rank_progressed_for_timeout() -> None:
    progress = {0: RankProgress(0, 20, "communication", 10.0), 1: RankProgress(1, 19, "data", 8.0)}
    assert _decide(RUNNING, progress, 14.9).kind is ActionKind.WAIT  # rank 0 moved 4.9 s ago
    a = _decide(RUNNING, progress, 15.0)
    assert a.kind is ActionKind.HUNG
    assert a.ranks == (1, 0)  # most stale first
    assert "no rank made progress for 5.0s (limit 5s)" in a.reason


def test_one_slow_rank_while_others_progress_is_not_a_hang() -> None:
    progress = {0: RankProgress(0, 3, "forward", 0.0), 1: RankProgress(1, 50, "forward", 99.0)}
    assert _decide(RUNNING, progress, 100.0).kind is ActionKind.WAIT


def test_startup_timeout_before_any_heartbeat() -> None:
    assert _decide(RUNNING, {}, 59.0).kind is ActionKind.WAIT
    a = _decide(RUNNING, {}, 60.0)
    assert a.kind is ActionKind.HUNG and "no heartbeat since launch" in a.reason


def test_finished_ranks_and_disabled_timeout_never_hang() -> None:
    done = {0: RankProgress(0, 9, "done", 0.0)}
    assert _decide(RUNNING, done, 1000.0).kind is ActionKind.WAIT
    assert _decide(RUNNING, {0: RankProgress(0, 1, "forward", 0.0)}, 1000.0, hang=None).kind is ActionKind.WAIT


def test_first_step_gets_the_startup_limit() -> None:
    # Every rank still in step 0 (DDP broadcast, loader start, warm-up): the startup limit applies.
    warming = {0: RankProgress(0, 0, "compute", 0.0), 1: RankProgress(1, 0, "data", 1.0)}
    assert _decide(RUNNING, warming, 30.0).kind is ActionKind.WAIT
    a = _decide(RUNNING, warming, 61.0)
    assert a.kind is ActionKind.HUNG and "no rank finished its first step for 60.0s (limit 60s)" in a.reason
    # Once a rank finished step 0, the hang timeout is back.
    assert _decide(RUNNING, {**warming, 1: RankProgress(1, 1, "data", 1.0)}, 6.0).kind is ActionKind.HUNG


def test_keep_hung_with_hosts_is_a_clear_error(cli) -> None:
    res = cli("launch", "--hosts", "node01,node02", "--keep-hung")
    assert res.code == 1 and "Traceback" not in res.stderr
    assert "--keep-hung applies to --local; with --hosts pass --hang-timeout 0" in res.stderr
