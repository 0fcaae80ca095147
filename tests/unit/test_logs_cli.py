"""`trainctl diagnose FILE.log --json` on one pasted log, through the real entry point."""

from __future__ import annotations

import json
import sys
from pathlib import Path


def test_diagnose_pasted_log_json(cli, tmp_path) -> None:
    log = tmp_path / "pasted.log"
    log.write_text(
        "(RayWorkerWrapper pid=1054, ip=10.96.62.52) ERROR 01-02 02:39:17 worker_base.py:467] torch.OutOfMemoryError: CUDA out of memory. "
        "Tried to allocate 380.00 MiB. GPU 0 has a total capacity of 23.64 GiB of which 14.81 MiB is free.\n"
        "[rank1]:[E424 01:17:25.031948957 ProcessGroupNCCL.cpp:1895] [PG ID 0 PG GUID 0(default_pg) Rank 1] Watchdog caught collective "
        "operation timeout: WorkNCCL(SeqNum=4, OpType=BROADCAST, NumelIn=112, NumelOut=112, Timeout(ms)=1800000) ran for 1800010 milliseconds before timing out.\n"
    )
    r = cli("diagnose", str(log), "--json", "--fail-on", "never")
    assert r.code == 0, r.stderr
    report = json.loads(r.stdout)
    assert report["source_kind"] == "log_file"
    got = {(f["kind"], f["category"], tuple(f["ranks"]), tuple(f["hosts"])) for f in report["findings"]}
    assert got == {("oom", None, (), ("10.96.62.52",)), ("hung_collective", "collective_timeout", (), ())}
    oom = next(f for f in report["findings"] if f["kind"] == "oom")
    assert oom["evidence"]["lines"][0].startswith(f"{log}:1: ")
    assert oom["playbook"] == "oom"


def test_diagnose_clean_log_has_no_findings(cli, tmp_path) -> None:
    log = tmp_path / "clean.log"
    log.write_text("config: run.yaml\nseed: 1234\n")
    r = cli("diagnose", str(log), "--json")
    assert r.code == 0, r.stderr
    report = json.loads(r.stdout)
    assert report["findings"] == []
    # never a bare "no findings": what was read, and where the log ends (as written)
    (note,) = report["notes"]
    assert "2 lines read" in note and "ends at line 2: 'seed: 1234'" in note
    r = cli("diagnose", str(log))
    assert r.code == 0 and "note: no failure line" in r.stdout, r.stdout
    # a run at work whose log ends with nothing said: the weakest reading, a warning that exits 0 by default
    log.write_text("step 1 loss 2.31\nstep 2 loss 2.29\n")
    r = cli("diagnose", str(log), "--json")
    assert r.code == 0, r.stderr
    (f,) = json.loads(r.stdout)["findings"]
    assert f["severity"] == "warning" and f["evidence"]["signatures"] == ["log_ends_mid_run"]
    assert f["ranks"] == [] and f["hosts"] == []
    log.write_text("step 1 loss 2.31\nstep 2 loss 2.29\nTraining completed.\n")
    assert json.loads(cli("diagnose", str(log), "--json").stdout)["findings"] == []  # a normal end


def test_a_quiet_logs_note_names_its_last_state_and_an_empty_log_says_so(cli, tmp_path) -> None:
    log = tmp_path / "bar.log"
    log.write_text("\x1b[32mpass 3\x1b[0m\rpass 4\n\n\n")  # a line redrawn with \r: its last state
    (note,) = json.loads(cli("diagnose", str(log), "--json").stdout)["notes"]
    assert "ends at line 1: 'pass 4'" in note
    (tmp_path / "empty.log").write_text("")
    r = cli("diagnose", str(tmp_path / "empty.log"), "--json")
    assert json.loads(r.stdout)["notes"] == [f"{tmp_path / 'empty.log'} holds no log lines"]
    # a log with a finding gets no such note
    (tmp_path / "oom.log").write_text("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.\n")
    report = json.loads(cli("diagnose", str(tmp_path / "oom.log"), "--json", "--fail-on", "never").stdout)
    assert report["findings"] and report["notes"] == []


def test_diagnose_of_a_log_on_its_own_reads_a_loop_that_stopped_short(cli, tmp_path) -> None:
    log = tmp_path / "train.log"
    log.write_text("".join(f" 96%|#########6| {n}/64146 [4:33:57<10:29,  4.31it/s]\n" for n in range(61430, 61440)))
    r = cli("diagnose", str(log), "--json")
    assert r.code == 0, r.stderr
    (f,) = json.loads(r.stdout)["findings"]
    assert f["kind"] == "hung_collective" and f["confidence"] < 0.5 and f["ranks"] == [] and f["hosts"] == []
    assert "61439/64146" in f["summary"] and f["evidence"]["read_from_absence"] is True


def test_diagnose_run_dir_parses_rank_and_kernel_logs(cli, tmp_path) -> None:
    from trainctl.rundir import HostRanks, RunInfo, write_run_info

    write_run_info(
        tmp_path,
        RunInfo(
            run_id="r-1",
            world_size=4,
            nproc_per_node=2,
            hosts=(HostRanks("node01", (0, 1)), HostRanks("node02", (2, 3))),
        ),
    )
    (tmp_path / "logs" / "node02").mkdir(parents=True)
    (tmp_path / "logs" / "node02" / "rank-3.log").write_text(
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.00 GiB. GPU 1 has a total capacity of 79.15 GiB of which 10 MiB is free.\n"
    )
    (tmp_path / "kernel" / "node01").mkdir(parents=True)
    (tmp_path / "kernel" / "node01" / "dmesg.txt").write_text(
        "[ 99.1] NVRM: Xid (PCI:0000:18:00): 79, pid=1, name=python, GPU has fallen off the bus.\n"
    )
    r = cli("diagnose", str(tmp_path), "--json", "--fail-on", "never")
    assert r.code == 0, r.stderr
    report = json.loads(r.stdout)
    got = {(f["kind"], f["category"], tuple(f["ranks"]), tuple(f["hosts"])) for f in report["findings"]}
    assert got == {("oom", None, (3,), ("node02",)), ("faulty_host", "gpu_lost", (0, 1), ("node01",))}


def test_a_file_that_is_not_text_is_refused_with_what_it_is_and_what_to_pass(cli, tmp_path) -> None:
    import pickle

    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"step": [1, 2]}), tmp_path / "part-0.parquet")
    (tmp_path / "nccl_trace_rank_0").write_bytes(pickle.dumps({"version": "2.4", "entries": []}, protocol=2))
    (tmp_path / "core").write_bytes(Path(sys.executable).resolve().read_bytes())  # an executable (ELF)
    expected = {
        "part-0.parquet": "a Parquet file, not a log; pass the run dir",
        "nccl_trace_rank_0": "a pickle, not a log (torch's Flight Recorder",
        "core": "binary data, not a text log (",
    }
    for name, says in expected.items():
        r = cli("diagnose", str(tmp_path / name))
        assert r.code != 0 and f"{tmp_path / name}: {says}" in r.stderr and "Traceback" not in r.stderr, r.stderr
    # A log whose tail a crash left as NUL blocks is still a log: its failure line is read.
    (tmp_path / "crashed.log").write_bytes(b"torch.OutOfMemoryError: CUDA out of memory.\n" + bytes(65536))
    report = json.loads(cli("diagnose", str(tmp_path / "crashed.log"), "--json", "--fail-on", "never").stdout)
    assert [f["kind"] for f in report["findings"]] == ["oom"]


def test_a_utf16_log_as_powershell_writes_it_is_read(cli, tmp_path) -> None:
    log = tmp_path / "ps.log"
    log.write_bytes("step 1\r\ntorch.OutOfMemoryError: CUDA out of memory.\r\n".encode("utf-16"))  # with its BOM
    report = json.loads(cli("diagnose", str(log), "--json", "--fail-on", "never").stdout)
    assert [f["kind"] for f in report["findings"]] == ["oom"]


def test_a_json_flight_recorder_dump_is_refused_with_the_folder_to_pass(cli, tmp_path) -> None:
    dump = tmp_path / "rank_3.json"
    dump.write_text(json.dumps({"version": "2.4", "pg_config": {}, "entries": []}))
    r = cli("diagnose", str(dump))
    assert r.code == 1 and "Traceback" not in r.stderr
    assert f"{dump}: a JSON file, not a log (torch's Flight Recorder dump of one rank)" in r.stderr, r.stderr


def test_a_reading_of_where_a_fresh_log_stopped_carries_a_caveat(cli, tmp_path) -> None:
    """A log on its own written seconds ago may belong to a run still going: its end-of-log reading gets a note
    pointing at --watch; the same file written long ago, or a finding that says what failed, gets none."""
    import os

    log = tmp_path / "train.log"
    log.write_text("step 1 loss 2.31\nstep 2 loss 2.29\n")
    report = json.loads(cli("diagnose", str(log), "--json").stdout)
    assert report["findings"][0]["evidence"]["read_from_absence"] is True
    (note,) = report["notes"]
    assert note.startswith(f"{log} was last written ") and f"trainctl diagnose --watch {log}" in note
    old = log.stat().st_mtime - 3600
    os.utime(log, (old, old))
    assert json.loads(cli("diagnose", str(log), "--json").stdout)["notes"] == []
    log.write_text("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.\n")
    assert json.loads(cli("diagnose", str(log), "--json", "--fail-on", "never").stdout)["notes"] == []
