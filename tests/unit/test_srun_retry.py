"""collect --srun: which nodes get the step again after Slurm aborted it (trainctl.ops.collect.in_allocation).

Slurm's step_launch.c `_fail_step_tasks` aborts the whole step when one node's task launch fails, and srun prints
"Task launch for <step> failed on node <node>: <errno>"; the healthy nodes' collects are cancelled with it. The
stderr below is srun's, as Slurm 22-24 prints it for a node whose slurmd is gone."""

from __future__ import annotations

from trainctl.ops.collect.in_allocation import hosts_to_retry

ABORTED = """srun: error: Task launch for StepId=12.0 failed on node node03: Communication connection failure
srun: error: Application launch failed: Communication connection failure
srun: Job step aborted: Waiting up to 32 seconds for job step to finish.
slurmstepd-node01: error: *** STEP 12.0 ON node01 CANCELLED AT 2026-11-28T11:57:33 ***
srun: error: node01: task 0: Killed
"""
OLD_FORMAT = "srun: error: Task launch for 12.0 failed on node gpu-07: Socket timed out on send/recv operation\n"


def test_nodes_the_abort_took_down_are_retried_and_the_lost_node_is_not() -> None:
    todo = ["node01", "node02", "node03"]
    assert hosts_to_retry(todo, set(), ABORTED) == ["node01", "node02"]
    assert hosts_to_retry(todo, {"node02"}, ABORTED) == ["node01"]  # node02 finished before the abort
    assert hosts_to_retry(["gpu-06", "gpu-07"], set(), OLD_FORMAT) == ["gpu-06"]


def test_no_failed_launch_or_only_lost_nodes_missing_means_no_second_step() -> None:
    # a node whose own collect failed (its task exited non-zero) is its answer: the step was not aborted
    own_failure = "srun: error: node02: task 1: Exited with exit code 1\n"
    assert hosts_to_retry(["node01", "node02"], {"node01"}, own_failure) == []
    assert hosts_to_retry(["node01", "node03"], {"node01"}, ABORTED) == []  # only the lost node is missing
    assert hosts_to_retry(["node01"], {"node01"}, "") == []
