"""The quarantine ledger: round trips, audit trail, corruption, and many writer processes at once."""

from __future__ import annotations

import json
import multiprocessing as mp
import os
from pathlib import Path

import pytest

from trainctl.errors import LedgerError
from trainctl.ops.evict.quarantine import AuditAction, Ledger, trainctl_home


def test_home_resolution_order(tmp_path) -> None:
    assert trainctl_home({"TRAINCTL_HOME": str(tmp_path / "a"), "XDG_STATE_HOME": "/x"}) == tmp_path / "a"
    assert trainctl_home({"XDG_STATE_HOME": str(tmp_path)}) == tmp_path / "trainctl"
    assert trainctl_home({}) == Path.home() / ".local" / "state" / "trainctl"


def test_evict_restore_round_trip_and_audit(tmp_path) -> None:
    led = Ledger(tmp_path)
    finding = {"kind": "faulty_host", "category": "gpu_lost", "hosts": ["node02"], "evidence": {"xid": 79}}
    e = led.evict("node02", reason="xid 79", run="r-1", finding=finding)
    assert (e.host, e.reason, e.run, e.evictions, e.pid) == ("node02", "xid 79", "r-1", 1, os.getpid())
    assert led.quarantined_hosts() == {"node02"}
    again = led.evict("node02", reason="still broken", run="r-2")
    assert again.evictions == 2 and again.since_ts_ns == e.since_ts_ns and again.reason == "still broken"
    led.evict("node05", reason="ecc dbe")
    assert led.quarantined_hosts() == {"node02", "node05"}
    old = led.restore("node02", reason="gpu replaced")
    assert old.reason == "still broken"
    assert led.quarantined_hosts() == {"node05"}
    trail = led.audit()
    assert [(r.action, r.host, r.reason) for r in trail] == [
        (AuditAction.EVICT, "node02", "xid 79"),
        (AuditAction.EVICT, "node02", "still broken"),
        (AuditAction.EVICT, "node05", "ecc dbe"),
        (AuditAction.RESTORE, "node02", "gpu replaced"),
    ]
    assert trail[0].finding == finding and trail[0].run == "r-1" and trail[0].pid == os.getpid()
    state = json.loads((tmp_path / "quarantine.json").read_text())
    assert state["schema_version"] == 1 and list(state["hosts"]) == ["node05"]


def test_restore_unknown_host_names_it(tmp_path) -> None:
    led = Ledger(tmp_path)
    led.evict("node01", reason="r")
    with pytest.raises(
        LedgerError, match=r"^host 'node09' is not quarantined \(quarantined: node01\); see `trainctl nodes list`$"
    ):
        led.restore("node09")


def test_empty_reason_refused(tmp_path) -> None:
    with pytest.raises(LedgerError, match="--reason is empty"):
        Ledger(tmp_path).evict("node01", reason="  ")


def test_corrupt_state_names_file_and_fix_and_rebuild_recovers(tmp_path) -> None:
    led = Ledger(tmp_path)
    led.evict("node01", reason="a")
    led.evict("node02", reason="b")
    led.restore("node01")
    (tmp_path / "quarantine.json").write_text('{"schema_version": 1, "hosts": {"node02": ')  # torn
    with pytest.raises(LedgerError) as ei:
        led.quarantined_hosts()
    msg = str(ei.value)
    assert msg.startswith(f"{tmp_path / 'quarantine.json'}: quarantine ledger is not valid JSON")
    assert "trainctl nodes rebuild" in msg and str(tmp_path / "audit.jsonl") in msg
    with pytest.raises(LedgerError):  # a change must not silently overwrite a corrupt ledger
        led.evict("node03", reason="c")
    rebuilt = led.rebuild_from_audit()
    assert set(rebuilt) == {"node02"} and rebuilt["node02"].reason == "b"
    assert led.quarantined_hosts() == {"node02"}


def test_wrong_schema_version(tmp_path) -> None:
    (tmp_path / "quarantine.json").write_text('{"schema_version": 7, "hosts": {}}')
    with pytest.raises(LedgerError, match=r"not a trainctl quarantine ledger \(schema_version 7, expected 1\)"):
        Ledger(tmp_path).entries()


def test_torn_last_audit_line_is_skipped_but_torn_middle_line_is_an_error(tmp_path) -> None:
    led = Ledger(tmp_path)
    led.evict("node01", reason="a")
    with open(tmp_path / "audit.jsonl", "a") as f:
        f.write('{"ts_ns": 1, "act')
    assert [r.host for r in led.audit()] == ["node01"]
    with open(tmp_path / "audit.jsonl", "a") as f:
        f.write("\n" + json.dumps({"ts_ns": 2, "action": "evict", "host": "node02"}) + "\n")
    with pytest.raises(LedgerError, match=r"audit.jsonl:2: not a valid audit record"):
        led.audit()


def _evict_many(home: str, proc: int, n: int, barrier) -> None:
    barrier.wait()  # all writers start together, to contend for the lock
    led = Ledger(home)
    for i in range(n):
        led.evict(f"p{proc}-h{i:02d}", reason=f"writer {proc} eviction {i}", run=f"run-{proc}")


def test_concurrent_evictions_from_processes_lose_nothing(tmp_path) -> None:
    # Real processes (spawn, not threads): flock must serialise separate interpreters.
    procs, per_proc = 8, 25
    ctx = mp.get_context("spawn")
    barrier = ctx.Barrier(procs)
    workers = [ctx.Process(target=_evict_many, args=(str(tmp_path), p, per_proc, barrier)) for p in range(procs)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(120)
    assert [w.exitcode for w in workers] == [0] * procs
    expected = {f"p{p}-h{i:02d}" for p in range(procs) for i in range(per_proc)}
    state = json.loads((tmp_path / "quarantine.json").read_text())  # valid JSON, not torn
    assert set(state["hosts"]) == expected
    lines = (tmp_path / "audit.jsonl").read_text().splitlines()
    assert len(lines) == procs * per_proc
    assert {json.loads(l)["host"] for l in lines} == expected
    assert not list(tmp_path.glob(".quarantine.json.*"))  # no temp files left behind


def test_refuse_quarantined_for_launch(tmp_path) -> None:
    from trainctl.errors import LaunchError
    from trainctl.ops.evict.quarantine import refuse_quarantined

    Ledger(tmp_path).evict("node02", reason="xid 79")
    refuse_quarantined(["node01", "node03"], home=tmp_path)
    with pytest.raises(
        LaunchError,
        match=r"^quarantined host\(s\) in the host list \(node02: xid 79\); drop them, "
        r"restore with `trainctl nodes restore node02`, or pass --allow-quarantined$",
    ):
        refuse_quarantined(["node01", "node02"], home=tmp_path)


def test_host_names_are_one_entry_whatever_their_case(tmp_path) -> None:
    # DNS names are case-insensitive: NODE07 and node07 are one machine, so one ledger entry
    from trainctl.errors import LaunchError
    from trainctl.ops.evict.quarantine import refuse_quarantined

    led = Ledger(tmp_path)
    led.evict("node07", reason="test")
    with pytest.raises(LaunchError, match=r"^quarantined host\(s\) in the host list \(NODE07: test\)"):
        refuse_quarantined(["NODE07"], home=tmp_path)
    again = led.evict("NODE07", reason="still broken")
    assert (again.host, again.evictions, again.reason) == ("node07", 2, "still broken")  # its first spelling
    assert led.quarantined_hosts() == {"node07"} and led.entry("Node07") == again
    assert list(json.loads((tmp_path / "quarantine.json").read_text())["hosts"]) == ["node07"]
    assert led.restore("NODE07").evictions == 2
    assert led.entries() == {}
    assert [(r.action, r.host) for r in led.audit()] == [
        (AuditAction.EVICT, "node07"),
        (AuditAction.EVICT, "NODE07"),
        (AuditAction.RESTORE, "NODE07"),
    ]
    # the audit trail replays to the same single entry
    led.evict("NODE02", reason="a")
    led.evict("node02", reason="b")
    rebuilt = led.rebuild_from_audit()
    assert [(e.host, e.reason, e.evictions) for e in rebuilt.values()] == [("NODE02", "b", 2)]


def test_a_ledger_holding_one_host_in_two_cases_reads_as_one_entry(tmp_path) -> None:
    # written before hosts were compared case-insensitively: NODE02 and node02 side by side
    def entry(host: str, reason: str, ts: int) -> dict:
        return {"host": host, "reason": reason, "since_ts_ns": ts, "updated_ts_ns": ts, "by": "u@h", "pid": 1}

    (tmp_path / "quarantine.json").write_text(
        json.dumps(
            {"schema_version": 1, "hosts": {"NODE02": entry("NODE02", "a", 1), "node02": entry("node02", "b", 2)}}
        )
    )
    led = Ledger(tmp_path)
    (e,) = led.entries().values()
    assert (e.host, e.reason, e.since_ts_ns, e.updated_ts_ns, e.evictions) == ("NODE02", "b", 1, 2, 2)
    led.evict("node05", reason="c")  # the next write collapses them
    assert list(json.loads((tmp_path / "quarantine.json").read_text())["hosts"]) == ["node02", "node05"]


@pytest.mark.parametrize("spelling", ["node07", "NODE07", "node07:2222", "Node07:22", "root@node07"])
def test_launch_refuses_a_quarantined_host_however_it_is_spelled(tmp_path, spelling) -> None:
    # the run's spelling in the message, the ledger's in the fix (what `nodes list` shows)
    from trainctl.errors import LaunchError
    from trainctl.ops.evict.quarantine import refuse_quarantined

    Ledger(tmp_path).evict("node07", reason="xid 79")
    with pytest.raises(LaunchError) as ei:
        refuse_quarantined(["node01", spelling], home=tmp_path)
    assert str(ei.value) == (
        f"quarantined host(s) in the host list ({spelling}: xid 79); drop them, restore with "
        "`trainctl nodes restore node07`, or pass --allow-quarantined"
    )


def test_quarantining_a_host_with_its_ssh_port_quarantines_the_host(tmp_path) -> None:
    # the port says where sshd listens; the machine is what is broken, on every port and spelling
    from trainctl.errors import LaunchError
    from trainctl.ops.evict.quarantine import refuse_quarantined

    led = Ledger(tmp_path)
    e = led.evict("node07:2222", reason="ecc")
    assert e.host == "node07" and led.quarantined_hosts() == {"node07"}
    assert list(json.loads((tmp_path / "quarantine.json").read_text())["hosts"]) == ["node07"]
    for other in ("node07", "NODE07:22", "node07:2200"):
        with pytest.raises(LaunchError, match=rf"^quarantined host\(s\) in the host list \({other}: ecc\)"):
            refuse_quarantined([other], home=tmp_path)
    assert led.evict("NODE07", reason="still").evictions == 2
    assert led.audit()[0].host == "node07:2222"  # the trail keeps each action's spelling as given
    assert led.rebuild_from_audit()["node07"].host == "node07"
    assert led.restore("node07:22").reason == "still" and led.entries() == {}


def test_ipv6_addresses_are_one_entry_in_any_spelling(tmp_path) -> None:
    from trainctl.errors import LaunchError
    from trainctl.ops.evict.quarantine import refuse_quarantined

    led = Ledger(tmp_path)
    led.evict("2001:DB8:0:0::1", reason="nvlink")
    assert list(json.loads((tmp_path / "quarantine.json").read_text())["hosts"]) == ["2001:db8::1"]
    for spelling in ("2001:db8::1", "[2001:db8::1]", "[2001:0DB8::0001]:22"):
        assert led.entry(spelling) is not None
        with pytest.raises(LaunchError, match=r"restore with `trainctl nodes restore 2001:DB8:0:0::1`"):
            refuse_quarantined([spelling], home=tmp_path)
    refuse_quarantined(["2001:db8::1:22", "[2001:db8::2]:22"], home=tmp_path)  # other addresses
    assert led.evict("[2001:db8::1]:2222", reason="again").evictions == 2
