"""Audit trails survive kill -9 at any byte of an append (issue 14 item 4).

A process killed inside its one write leaves a prefix of the record and no newline: the files below
are built exactly that way, at every byte offset of a real ledger record, and then the next command
runs as a user would. One test also kills real appending processes with SIGKILL.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time

from trainctl.jsonl import append_record, read_records
from trainctl.ops.evict.quarantine import Ledger
from trainctl.ops.playbook.audit import AuditLog, read_audit


def _torn_line(tmp_path) -> bytes:
    """The bytes a third eviction would have appended (a real record of this ledger)."""
    probe = Ledger(tmp_path / "probe")
    probe.evict("node03", reason="xid 79", run="r-1")
    return (tmp_path / "probe" / "audit.jsonl").read_bytes()


def test_kill_at_every_byte_of_an_audit_append_loses_nothing_before_it(tmp_path, cli) -> None:
    line = _torn_line(tmp_path)
    for cut in range(len(line)):  # 0 .. len-1: every prefix a killed write can leave
        home = tmp_path / f"h{cut}"
        led = Ledger(home)
        led.evict("node01", reason="a")
        led.evict("node02", reason="b")
        with open(home / "audit.jsonl", "ab") as f:
            f.write(line[:cut])
        whole = cut == len(line) - 1  # only the newline was lost: the record itself arrived
        before = ["node01", "node02"] + (["node03"] if whole else [])
        assert [r.host for r in led.audit()] == before  # a torn record is not one
        led.evict("node04", reason="after the crash")
        assert [r.host for r in led.audit()] == [*before, "node04"]
        assert set(led.rebuild_from_audit()) == {*before, "node04"}
        if cut and not whole:  # the torn bytes were set aside for a person, not deleted
            (aside,) = home.glob("audit.jsonl.torn-*")
            assert aside.read_bytes() == line[:cut]
    # the CLI on one of them, as a user runs it: no traceback, every record listed
    env = {**os.environ, "TRAINCTL_HOME": str(tmp_path / f"h{len(line) // 2}")}
    r = cli("nodes", "audit", "--json", env=env)
    assert r.code == 0 and "Traceback" not in r.stderr, r.stderr
    assert [x["host"] for x in json.loads(r.stdout)] == ["node01", "node02", "node04"]
    assert cli("nodes", "rebuild", env=env).code == 0


def test_a_record_glued_onto_a_torn_one_by_an_older_writer_is_recovered(tmp_path) -> None:
    p = tmp_path / "audit.jsonl"
    p.write_text('{"n": 1}\n{"n": 2, "ha{"n": 3}\n{"n": 4}\n')
    assert read_records(p) == [{"n": 1}, {"n": 3}, {"n": 4}]


def test_incident_audit_log_heals_too(tmp_path) -> None:
    log = AuditLog(tmp_path / "incidents" / "i1" / "audit.jsonl")
    log.append({"step": "collect", "decision": "run"})
    with open(log.path, "a") as f:
        f.write('{"step": "evict", "deci')
    log.append({"step": "notify", "decision": "run"})
    assert [r["step"] for r in read_audit(log.path)] == ["collect", "notify"]


def test_stale_temp_files_of_a_killed_ledger_write_are_removed(tmp_path) -> None:
    led = Ledger(tmp_path)
    led.evict("node01", reason="a")
    stale = tmp_path / ".quarantine.json.abc123.tmp"
    stale.write_text('{"schema_version": 1, "ho')
    led.evict("node02", reason="b")
    assert not stale.exists() and led.quarantined_hosts() == {"node01", "node02"}


APPENDER = textwrap.dedent(
    """
    import sys
    from trainctl.jsonl import append_record
    path, who = sys.argv[1], sys.argv[2]
    n = 0
    while True:
        append_record(path, {"who": who, "n": n, "pad": "x" * 2000})
        n += 1
    """
)


def test_real_sigkill_mid_append(tmp_path) -> None:
    script = tmp_path / "appender.py"
    script.write_text(APPENDER)
    path = tmp_path / "trail.jsonl"
    append_record(path, {"who": "before", "n": 0})
    for i in range(5):
        p = subprocess.Popen([sys.executable, str(script), str(path), f"p{i}"])
        time.sleep(0.3 + 0.07 * i)
        p.send_signal(signal.SIGKILL)
        p.wait()
        records = read_records(path)  # never raises, whatever byte the kill hit
        assert records[0] == {"who": "before", "n": 0}
        mine = [r["n"] for r in records if r["who"] == f"p{i}"]
        assert mine == list(range(len(mine)))  # no record lost or glued in the middle
    append_record(path, {"who": "after", "n": 0})
    assert read_records(path)[-1] == {"who": "after", "n": 0}
