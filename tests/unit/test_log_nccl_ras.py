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


def _errors(*blocks: str) -> str:
    return "Errors\n======\n\n" + "".join(blocks)


CUDA_ERROR = """#0-0 (27f9c1b3a8d54e21) ERROR
  Asynchronous error on 1 rank
  Rank 3 reported Unhandled CUDA error -- GPU 3 managed by process 1234 on node gpu-node-7

"""
REMOTE_ERRORS = """#1-0 (81f9c1b3a8d54e22) ERROR
  Asynchronous errors on 3 ranks
  3 ranks reported Remote process error
  Rank 0 -- GPU 0 managed by process 1200 on node gpu-node-1
  Rank 1 -- GPU 1 (NVML 1) managed by process 1201 on node gpu-node-1
  Rank 2 -- [process information not found]

"""


def test_a_rank_that_reported_a_cuda_error_names_its_node_and_its_peers_remote_errors_name_nobody() -> None:
    found = _findings(_errors(CUDA_ERROR, REMOTE_ERRORS))
    crit = [f for f in found if f.severity.value == "critical"]
    assert [(f.kind, f.category.value, f.hosts, f.ranks) for f in crit] == [
        (FindingKind.CRASH, "cuda_error", ("gpu-node-7",), ())
    ]
    assert "'Unhandled CUDA error'" in crit[0].summary and "process 1234" in crit[0].summary
    assert all("gpu-node-1" not in f.hosts for f in found)


def test_remote_and_system_errors_on_their_own_are_an_nccl_network_error_that_blames_no_node() -> None:
    init = """#0-0 (0123456789abcdef) ERROR
  Initialization errors on 2 ranks
  2 ranks reported System error
  Rank 4 -- GPU 4 managed by process 90 on node node-x
  Rank 5 -- GPU 5 managed by process 91 on node node-x

"""
    for text in (_errors(REMOTE_ERRORS), _errors(init)):
        (f,) = _findings(text)
        assert (f.kind, f.category.value, f.hosts, f.ranks) == (FindingKind.NETWORK_ERROR, "nccl", (), ())
        assert f.severity.value == "warning" and "not necessarily where the fault is" in f.summary
    assert "'System error' (initialization error)" in _findings(_errors(init))[0].summary


def test_a_dead_process_outranks_the_remote_errors_its_peers_reported() -> None:
    (f,) = [f for f in _findings(HEAD + DEAD + REMOTE_ERRORS) if f.severity.value == "critical"]
    assert f.kind is FindingKind.CRASH and f.hosts == ("gpu-node-3",)


def test_error_lines_outside_an_error_block_are_not_the_reports() -> None:
    text = (
        "Asynchronous error on 1 rank\nRank 3 reported Unhandled CUDA error -- GPU 3 managed by process 1 on node n9\n"
    )
    assert all("n9" not in f.hosts for f in _findings(text))
