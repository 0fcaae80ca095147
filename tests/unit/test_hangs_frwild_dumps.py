"""Real gloo Flight Recorder dumps written by a helper who never read the hang analyzer
(tests/fixtures/hangs/frwild/README.md), diagnosed as a user would: `trainctl diagnose DIR --json`."""

from __future__ import annotations

import json
from pathlib import Path

from trainctl.collectors.flight_recorder import load_dumps

FRWILD = Path(__file__).resolve().parents[1] / "fixtures" / "hangs" / "frwild"


def _findings(cli, scenario: str) -> list[dict]:
    r = cli("diagnose", FRWILD / scenario, "--json", "--fail-on", "never")
    assert r.code == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["source_kind"] == "flight_recorder" and doc["skipped"] == [], doc
    return doc["findings"]


def test_gloo_dumps_under_torchs_default_file_names_are_the_cpu_recorders_and_their_hang_is_named(cli) -> None:
    dumps = load_dumps(sorted((FRWILD / "ar_w4_r2").glob("nccl_trace_rank_*")))
    assert [(d.rank, d.recorder) for d in dumps] == [(0, "cpu"), (1, "cpu"), (2, "cpu"), (3, "cpu")]
    (f,) = _findings(cli, "ar_w4_r2")
    assert (f["kind"], f["ranks"], f["severity"]) == ("hung_collective", [2], "critical"), f


def test_gloo_pg_status_counting_send_recv_is_not_read_as_a_collective_position(cli) -> None:
    assert [f for f in _findings(cli, "healthy_w4_mix") if f["kind"] == "hung_collective"] == []
    (f,) = _findings(cli, "p2p_ok_ar_w4_r1")
    assert (f["kind"], f["ranks"]) == ("hung_collective", [1]), f
    assert "all_reduce" in f["summary"], f


def test_dumps_with_every_recorded_op_over_say_what_they_cannot_show(cli) -> None:
    """A p2p hang on gloo (rank 0 stalled before a send, rank 1 in the recv) leaves no pending entry: no finding,
    and a note that nothing is pending, that gloo records no send/recv, and how to see where the ranks wait."""
    r = cli("diagnose", FRWILD / "p2p_w2_r0", "--json", "--fail-on", "never")
    doc = json.loads(r.stdout)
    assert (r.code, doc["findings"]) == (0, []), r.stderr
    (note,) = doc["notes"]
    assert "2 rank(s) dumped" in note and "group 0 to seq 3" in note and "no collective is pending" in note
    assert "Gloo records no send/recv" in note and "py-spy dump" in note
    assert not [n for n in json.loads(cli("diagnose", FRWILD / "ar_w4_r2", "--json").stdout)["notes"] if "pending" in n]


def test_the_note_reads_dumps_whose_entries_carry_no_collective_seq() -> None:
    """NCCL numbers a send/recv by p2p_seq: completed entries with no collective seq still make the note (no group
    position to give), never a failed analyzer."""
    import pyarrow as pa

    from trainctl.analyzers.hangs import notes
    from trainctl.schemas import SignalKind
    from trainctl.signals import Signals

    t = pa.table(
        {
            "rank": pa.array([0, 1], pa.int64()),
            "pg_name": ["0", "0"],
            "seq": pa.array([None, None], pa.int64()),
            "state": ["completed", "completed"],
            "retired": [True, True],
            "backend": ["nccl", "nccl"],
        }
    )
    (note,) = notes(Signals(tables={SignalKind.COLLECTIVES: t}))
    assert "2 rank(s) dumped and every recorded op is over on each: no collective is pending" in note
    assert "A wait outside collectives" in note
