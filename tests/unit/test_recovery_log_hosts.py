"""Host names from torchrun banners: a line under logs/H/ naming a host outside run.json is H's."""

from __future__ import annotations

import json
from pathlib import Path

from trainctl.collectors.logs import parse_log_text, parse_run_logs
from trainctl.ops.diagnose.logs_input import parse_run_dir_logs
from trainctl.rundir import HostRanks, RunInfo, write_run_info
from trainctl.schemas import SignalKind

# What torchrun's agent on sshd test host node02 prints: the machine's own hostname, `localhost`.
BANNER = """\
[rank1]: RuntimeError: CUDA error: unspecified launch failure
E1122 10:00:03.120000 4242 torch/distributed/elastic/multiprocessing/api.py:874] failed (exitcode: 1) local_rank: 0 (pid: 4243) of binary: /venv/bin/python
Traceback (most recent call last):
torch.distributed.elastic.multiprocessing.errors.ChildFailedError:
============================================================
trainctl.runtime.trainer FAILED
------------------------------------------------------------
Failures:
  <NO_OTHER_FAILURES>
------------------------------------------------------------
Root Cause (first observed failure):
[0]:
  time      : 2026-11-22_10:00:03
  host      : localhost
  rank      : 1 (local_rank: 0)
  exitcode  : 1 (pid: 4243)
  error_file: /runs/r1/errors/rank-1.json
  traceback : RuntimeError: CUDA error: unspecified launch failure
============================================================
"""
# A peer named in a connect failure is not the writer: it must keep its name.
PEER_LINE = (
    "[W1122 10:00:04.000000 4242 TCPStore.cpp:358] [c10d] TCP client failed to connect/validate to host "
    "node09:29500 - timed out (try=1, timeout=600000ms): Connection reset by peer\n"
)


def _run(tmp_path: Path) -> Path:
    root = tmp_path / "run"
    (root / "logs" / "node02").mkdir(parents=True)
    (root / "logs" / "node02" / "agent.log").write_text(BANNER + PEER_LINE)
    write_run_info(
        root,
        RunInfo(
            run_id="r1",
            world_size=3,
            nproc_per_node=1,
            hosts=(HostRanks("node01", (0,)), HostRanks("node02", (1,)), HostRanks("node03", (2,))),
        ),
    )
    return root


def _root_cause_rows(table) -> list[dict]:
    return [r for r in table.to_pylist() if r["signature"] == "elastic_root_cause"]


def test_banner_host_outside_the_run_is_attributed_to_the_log_folder(tmp_path):
    root = _run(tmp_path)
    table = parse_run_dir_logs(root, None)[SignalKind.LOG_EVENTS]  # no RunInfo: known = the host folders
    rows = _root_cause_rows(table)
    assert len(rows) == 1
    row = rows[0]
    assert row["host"] == "node02" and row["culprit_host"] == "node02" and row["rank"] == 1
    fields = json.loads(row["fields"])
    assert fields["host_as_logged"] == "localhost" and fields["culprit_host_as_logged"] == "localhost"
    assert "localhost" not in {r["host"] for r in table.to_pylist()} | {r["culprit_host"] for r in table.to_pylist()}


def test_known_hosts_come_from_run_json_and_peers_keep_their_names(tmp_path):
    root = _run(tmp_path)
    table = parse_run_logs(root, known_hosts=["node01", "node02", "node03"])
    peer = [r for r in table.to_pylist() if r["culprit_host"] == "node09"]
    # node09 is not a host of this run, but it is the peer the line accuses, not the line's writer
    assert len(peer) == 1 and peer[0]["host"] == "node02"
    assert "culprit_host_as_logged" not in json.loads(peer[0]["fields"] or "{}")
    assert _root_cause_rows(table)[0]["culprit_host"] == "node02"


def test_a_run_host_named_by_the_banner_is_kept(tmp_path):
    # the banner names node03 (a host of the run) while sitting in node02's folder: not rewritten
    root = _run(tmp_path)
    (root / "logs" / "node02" / "agent.log").write_text(BANNER.replace("localhost", "node03"))
    table = parse_run_logs(root, known_hosts=["node01", "node02", "node03"])
    row = _root_cause_rows(table)[0]
    assert row["host"] == "node03" and row["culprit_host"] == "node03"
    assert "host_as_logged" not in json.loads(row["fields"])


def test_a_pasted_log_keeps_what_the_text_says():
    row = _root_cause_rows(parse_log_text(BANNER, "pasted.log"))[0]
    assert row["host"] == "localhost" and row["culprit_host"] == "localhost"
    assert "host_as_logged" not in json.loads(row["fields"])
