"""NCCL's RAS report (`ncclras`), written in the formats of NVIDIA/nccl 2.30.7 src/ras/client_support.cc, read for
dead processes and ranks behind their communicator (collectors/log_nccl_ras.py)."""

from __future__ import annotations

from trainctl.analyzers.logs import analyze_log_events
from trainctl.collectors.logs import parse_log_text
from trainctl.findings import FindingKind

HEAD = """Errors
======

INCOMPLETE
  Missing communicator data from 1 job process
  Process 777 on node gpu-node-9 managing GPU 2

"""
DEAD = """DEAD
  1 job process is considered dead (unreachable via the RAS network)
  Process 52314 on node gpu-node-3 managing GPU 5

"""


def _findings(text: str):
    return analyze_log_events(parse_log_text(text, "ras.txt"))


def _warnings(*lines: str) -> str:
    body = "\n".join(f"  {ln}" for ln in lines)
    return (
        f"Warnings\n========\n\n#0-0 (27f9c1b3a8d54e21) MISMATCH\n  Communicator ranks have different AllReduce"
        f" operation counts\n{body}\n\n"
    )


def test_a_dead_process_and_the_rank_behind_name_their_node_not_a_job_rank() -> None:
    text = (
        HEAD
        + DEAD
        + _warnings(
            "31 ranks have launched up to operation 6650",
            "Rank 21 has launched up to operation 6649 -- GPU 5 managed by process 52314 on node gpu-node-3",
        )
    )
    found = _findings(text)
    dead = [f for f in found if f.kind is FindingKind.CRASH]
    hung = [f for f in found if f.kind is FindingKind.HUNG_COLLECTIVE]
    assert [f.hosts for f in dead] == [("gpu-node-3",)] and "process 52314" in dead[0].summary
    assert [f.hosts for f in hung] == [("gpu-node-3",)] and all(f.ranks == () for f in found)
    assert "rank 21 of communicator 27f9c1b3a8d54e21" in hung[0].summary and "reached 6650" in hung[0].summary
    # the INCOMPLETE section's process did not answer for its communicators: not dead, not blamed
    assert all("gpu-node-9" not in f.hosts for f in found)


def test_a_group_behind_under_its_count_line_names_each_node() -> None:
    text = _warnings(
        "30 ranks have launched up to operation 6650",
        "2 ranks have launched up to operation 6649",
        "Rank 3 -- GPU 3 managed by process 11 on node node-a",
        "Rank 9 -- GPU 1 (NVML 0) managed by process 12 on node node-b",
    )
    hosts = sorted(h for f in _findings(text) if f.kind is FindingKind.HUNG_COLLECTIVE for h in f.hosts)
    assert hosts == ["node-a", "node-b"]


def test_one_rank_ahead_of_the_rest_is_not_the_rest_behind_and_no_process_information_names_no_host() -> None:
    ahead = _warnings(
        "31 ranks have launched up to operation 6649",
        "Rank 0 has launched up to operation 6650 -- GPU 0 managed by process 10 on node node-a",
    )
    assert all(f.kind is not FindingKind.HUNG_COLLECTIVE or not f.hosts for f in _findings(ahead))
    unknown = _warnings(
        "31 ranks have launched up to operation 6650",
        "Rank 4 has not launched any operations -- [process information not found]",
    )
    (f,) = [f for f in _findings(unknown) if f.kind is FindingKind.HUNG_COLLECTIVE]
    assert f.hosts == () and "launched no AllReduce operation" in f.summary


def test_in_a_run_dir_the_report_never_moves_the_blame_onto_the_host_whose_log_holds_it(tmp_path) -> None:
    from trainctl.collectors.logs import parse_run_logs

    (tmp_path / "logs" / "node01").mkdir(parents=True)
    (tmp_path / "logs" / "node01" / "rank-0.log").write_text(
        HEAD
        + DEAD
        + _warnings(
            "31 ranks have launched up to operation 6650",
            "Rank 21 has launched up to operation 6649 -- GPU 5 managed by process 52314 on node gpu-node-3",
        )
    )
    found = analyze_log_events(parse_run_logs(tmp_path, known_hosts=["node01", "node02"]))
    assert found and all("node01" not in f.hosts for f in found)
