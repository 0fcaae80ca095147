"""Recorder.move_time: time measured inside one phase that belongs to another (tp waits)."""

from __future__ import annotations

from trainctl import dataset
from trainctl.runtime.instrument import Recorder
from trainctl.schemas import SignalKind


def test_move_time_shifts_between_rows_of_the_current_step_only(tmp_path) -> None:
    rec = Recorder(tmp_path, rank=0, local_rank=0, host="node01")
    for step in range(2):
        with rec.phase("forward"):
            pass
        with rec.phase("communication"):
            pass
        before = {p: d for s, p, _, d, _, _ in rec._rows if s == step}
        rec.move_time("forward", "communication", 10**12 if step == 1 else 1)  # more than forward took: keeps 1 ns
        after = {p: d for s, p, _, d, _, _ in rec._rows if s == step}
        if step == 0:
            assert after == {"forward": before["forward"] - 1, "communication": before["communication"] + 1}
        else:
            assert after["forward"] == 1 and after["communication"] == before["communication"] + before["forward"] - 1
        rec.end_step(step)
    rec.close()
    t = dataset.read_table(tmp_path, SignalKind.TIMELINE).to_pandas()
    assert sorted(zip(t["step"], t["phase"])) == [
        (0, "communication"),
        (0, "forward"),
        (1, "communication"),
        (1, "forward"),
    ]
    assert (t["duration_ns"] > 0).all()


def test_end_step_stamps_tokens_on_that_step_only(tmp_path) -> None:
    # Rows stay buffered across steps (handed to the writer every `handover_rows`): stamping
    # step 2's tokens must leave steps 0 and 1 as they were.
    rec = Recorder(tmp_path, rank=3, local_rank=1, host="node02")
    for step, tokens in enumerate([100, None, 300]):
        for phase in ("data", "forward"):
            with rec.phase(phase):
                pass
        rec.end_step(step, tokens=tokens)
    assert len(rec._rows) == 6  # nothing handed over yet
    rec.close()
    t = dataset.read_table(tmp_path, SignalKind.TIMELINE).to_pandas()
    got = {(int(s), p): (None if k != k else int(k)) for s, p, k in zip(t["step"], t["phase"], t["tokens"])}
    assert got == {
        (0, "data"): 100,
        (0, "forward"): 100,
        (1, "data"): None,
        (1, "forward"): None,
        (2, "data"): 300,
        (2, "forward"): 300,
    }
    assert set(t["rank"]) == {3} and set(t["host"]) == {"node02"}
