"""Hang analysis on dumps written in the format of torch 2.13's Flight Recorder source.

The dumps come from tests/fixtures/hangs/fr_job.py, a model of FlightRecorder + ProcessGroupNCCL
(and gloo) written from torch's source, not from the analyzer: ring buffers that roll over,
send/recv entries that carry both seq counters, pg_status that counts p2p works, JSON dumps with
string counters and no "entries" key when empty, the watchdog's own `nccl_trace_rank_<R>` file.
Each case names the culprit(s) and no healthy rank: `diagnose` of the run dir must give exactly one
critical finding, on the right rank and host.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest

from trainctl.findings import Finding, FindingKind, Severity
from trainctl.ops.diagnose.diagnosis import diagnose_path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fixtures" / "hangs"))
import fr_job as J  # noqa: E402

TP, PP, DP = 2, 4, 2
WORLD = TP * PP * DP
GROUPS, OF = J.megatron_groups(TP, PP, DP)
PROGRAMS = J.megatron_programs(TP, PP, DP)
BATCHED = J.megatron_programs(TP, PP, DP, batched=True)  # batch_isend_irecv
HOSTS = J.megatron_hosts(WORLD)
LAYOUT = {"tp": TP, "pp": PP, "dp": DP}


def _named_groups(groups: Sequence[J.Group]) -> dict[str, list[tuple[int, ...]]]:
    out: dict[str, list[tuple[int, ...]]] = {}
    for g in groups:
        if g.desc != "default_pg":
            out.setdefault(g.desc, []).append(g.ranks)
    return out


def _diagnose(job: J.Job, out: Path, hosts: Mapping[int, str], layout: Mapping[str, int], **write) -> list[Finding]:
    job.write(out, hosts=hosts, **write)
    J.run_json(out, hosts, _named_groups(job.groups), layout)
    return list(diagnose_path(out).findings)


def _critical(findings: list[Finding]) -> list[Finding]:
    return [f for f in findings if f.severity is Severity.CRITICAL]


def _only_culprit(findings: list[Finding], ranks: tuple[int, ...], hosts: Mapping[int, str]) -> Finding:
    crit = _critical(findings)
    assert len(crit) == 1, [(f.kind.value, f.ranks, f.summary) for f in findings]
    f = crit[0]
    assert f.kind is FindingKind.HUNG_COLLECTIVE and f.ranks == ranks, f.summary
    assert f.hosts == tuple(sorted({hosts[r] for r in ranks}))
    return f


# -- the 16-rank Megatron layout (pp x tp x ep/dp), culprit anywhere, small buffers ---------------


def _check_one_culprit(job: J.Job, out: Path, culprit: int, **write) -> Finding:
    f = _only_culprit(_diagnose(job, out, HOSTS, LAYOUT, **write), (culprit,), HOSTS)
    ev = f.evidence
    # The cascade is evidence: every other stuck rank is listed as blocked, none as a culprit.
    assert str(culprit) not in ev["blocked"]
    assert [r for r, s in ev["hang_map"]["states"].items() if s == "culprit"] == [str(culprit)]
    return f


@pytest.mark.parametrize("culprit", range(WORLD))
def test_megatron_hang_with_an_8_entry_buffer_names_the_culprit_and_no_healthy_rank(tmp_path, culprit) -> None:
    n = len(PROGRAMS[culprit])
    for k in (9, n // 2):  # mid first step, mid run (buffers rolled over many times)
        job = J.Job(WORLD, GROUPS, PROGRAMS, stop_at={culprit: k}, buffer_size=8).run()
        assert any(rec.id > rec.max_entries for rec in job.recorders.values())
        _check_one_culprit(job, tmp_path / f"k{k}", culprit)


@pytest.mark.parametrize(
    ("buffer_size", "fmt", "names"), [(40, "json", "rank-{rank}"), (2000, "raw", "nccl_trace_rank_{rank}")]
)
@pytest.mark.parametrize("culprit", [0, 7, 10, 15])
def test_megatron_hang_in_json_and_watchdog_dumps(tmp_path, culprit, buffer_size, fmt, names) -> None:
    n = len(PROGRAMS[culprit])
    job = J.Job(WORLD, GROUPS, PROGRAMS, stop_at={culprit: n - 1}, buffer_size=buffer_size).run()
    f = _check_one_culprit(job, tmp_path, culprit, fmt=fmt, names=names)
    assert f.confidence == 0.95  # every dump present and complete enough to prove it


def test_pipeline_culprit_is_found_through_send_recv_pairs(tmp_path) -> None:
    # Stage 0, rank 0, stops just before its first send: stage 1 (rank 4) waits in the matching
    # recv. Only the pair says who is missing: the entries' collective_seq_id would match anything.
    first_send = next(i for i, op in enumerate(PROGRAMS[0]) if op.kind == "send")
    job = J.Job(WORLD, GROUPS, PROGRAMS, stop_at={0: first_send}).run()
    f = _only_culprit(_diagnose(job, tmp_path, HOSTS, LAYOUT), (0,), HOSTS)
    assert f.confidence == 0.95
    p2p = [h for h in f.evidence.get("also_hung", []) if h["kind"] == "p2p"] + (
        [f.evidence] if f.evidence["kind"] == "p2p" else []
    )
    assert any(h.get("never_entered", [0]) == [0] for h in p2p), f.evidence
    assert f.evidence["blocked"]["4"].startswith("recv with rank 0 on gpu01"), f.evidence["blocked"]


def test_pg_status_of_a_pipeline_group_counts_p2p_works_and_is_not_a_collective_position(tmp_path) -> None:
    # A clean pipeline: the pp groups' pg_status last_enqueued_collective holds p2p seq numbers
    # (6, 12, ...) that differ between stages. Read as collective positions they would look like
    # a hang; read right, nothing is hung.
    job = J.Job(WORLD, GROUPS, PROGRAMS, buffer_size=16).run()
    pp0 = OF["pp"][0]
    enq = {r: job.recorders[r].pg[pp0].last_enqueued for r in (0, 4, 8, 12)}
    assert len(set(enq.values())) > 1, enq  # the trap is real: counters differ across the group
    assert _critical(_diagnose(job, tmp_path, HOSTS, LAYOUT)) == []


# -- the cases of the issue, one each --------------------------------------------------------------


def test_hang_in_a_subgroup(tmp_path) -> None:
    tp_op = next(i for i, op in enumerate(PROGRAMS[9]) if op.group == OF["tp"][9] and i > 20)
    job = J.Job(WORLD, GROUPS, PROGRAMS, stop_at={9: tp_op}).run()
    f = _only_culprit(_diagnose(job, tmp_path, HOSTS, LAYOUT), (9,), HOSTS)
    assert f.evidence["members"] == [8, 9] and f.evidence["membership"] == "pg_config"


def test_mismatched_collective_names_the_deviating_rank(tmp_path) -> None:
    progs = {r: list(p) for r, p in PROGRAMS.items()}
    i = next(i for i, op in enumerate(progs[6]) if op.group == "0")  # world loss all_reduce
    progs[6][i] = J.Op("0", "all_gather", progs[6][i].numel)
    job = J.Job(WORLD, GROUPS, progs).run()
    fs = _diagnose(job, tmp_path, HOSTS, LAYOUT)
    (f,) = _critical(fs)
    assert f.kind is FindingKind.COLLECTIVE_MISMATCH and f.ranks == (6,) and f.hosts == ("gpu01",)
    assert f.evidence["per_rank"]["6"] == "all_gather" and f.evidence["vote"] == f"{WORLD - 1} of {WORLD}"


def test_missing_dump_of_the_culprit_is_named_with_lower_confidence(tmp_path) -> None:
    n = len(PROGRAMS[11])
    job = J.Job(WORLD, GROUPS, PROGRAMS, stop_at={11: n // 2}).run()
    fs = _diagnose(job, tmp_path, HOSTS, LAYOUT, missing=[11])
    f = _only_culprit(fs, (11,), HOSTS)
    assert f.confidence <= 0.6 and "left no Flight Recorder dump" in f.summary
    assert f.evidence["missing_dumps"] == [11]


def test_missing_dump_of_a_healthy_rank_blames_nobody_else(tmp_path) -> None:
    n = len(PROGRAMS[11])
    job = J.Job(WORLD, GROUPS, PROGRAMS, stop_at={11: n // 2}).run()
    fs = _diagnose(job, tmp_path, HOSTS, LAYOUT, missing=[10])  # 11's tp partner left no dump
    f = _only_culprit(fs, (11,), HOSTS)
    assert f.evidence["hang_map"]["states"]["10"] == "no_data"
    assert f.confidence == 0.75 and "no dump from rank(s) 10" in f.summary


def test_rolled_over_buffers_are_unknown_not_absent(tmp_path) -> None:
    # Group W = pg "1" (all 4 ranks; async all_reduce seq 3): rank 3 never enters it. Ranks 0 and
    # 1 entered it, then ran 12 all_reduces of their own subgroup H, so their 6-entry buffers
    # rolled past every W entry; rank 2 waits on rank 3 in their subgroup K. W's pg_status cannot
    # be placed on ranks 0 and 1 any more (no entry left names its rank-local pg_id), so how far
    # they got in W is unknown. The default group's pg_status (pg 0 everywhere) would still say.
    groups = [
        J.Group("0", "default_pg", (0, 1, 2, 3)),
        J.Group("1", "w", (0, 1, 2, 3)),
        J.Group("2", "h", (0, 1)),
        J.Group("3", "k", (2, 3)),
    ]
    head = [
        J.Op("0", "barrier"),
        J.Op("1", "all_reduce"),
        J.Op("1", "all_reduce"),
        J.Op("1", "all_reduce", blocking=False),
    ]
    progs = {
        0: head + [J.Op("2", "all_reduce")] * 12 + [J.SYNC],
        1: head + [J.Op("2", "all_reduce")] * 12 + [J.SYNC],
        2: head + [J.Op("3", "all_reduce")] + [J.SYNC],
        3: head + [J.Op("3", "all_reduce")] + [J.SYNC],
    }
    hosts = {0: "n1", 1: "n1", 2: "n2", 3: "n2"}
    job = J.Job(4, groups, progs, buffer_size=6, stop_at={3: 3}).run()
    assert not any(e.group.name == "1" for r in (0, 1) for e in job.recorders[r].entries)
    fs = _diagnose(job, tmp_path, hosts, {"dp": 4})
    f = _only_culprit(fs, (3,), hosts)
    assert (f.evidence["pg_name"], f.evidence["seq"]) == ("1", 3)
    rolled = "ring buffer rolled past the hung op"
    assert f.evidence["unknown_ranks"] == {"0": rolled, "1": rolled}
    assert f.confidence == 0.8 and "unknown (not blamed)" in f.summary
    assert f.evidence["hang_map"]["states"]["0"] == "unknown"


def test_empty_buffer_of_a_healthy_rank_is_reported_not_blamed(tmp_path) -> None:
    n = len(PROGRAMS[13])
    job = J.Job(WORLD, GROUPS, PROGRAMS, stop_at={13: n // 2}, disabled=frozenset({12})).run()
    fs = _diagnose(job, tmp_path, HOSTS, LAYOUT, fmt="json")
    f = _only_culprit(fs, (13,), HOSTS)
    assert 12 in f.evidence["empty_buffer_ranks"]


def test_empty_buffer_of_the_only_silent_rank_is_the_evidence(tmp_path) -> None:
    groups = [J.Group("0", "default_pg", (0, 1, 2, 3))]
    progs = {r: [J.Op("0", "all_reduce")] * 3 for r in range(4)}
    hosts = {0: "n1", 1: "n1", 2: "n2", 3: "n2"}
    job = J.Job(4, groups, progs, disabled=frozenset({2}), stop_at={2: 1}).run()
    fs = _diagnose(job, tmp_path, hosts, {"dp": 4}, fmt="json")
    f = _only_culprit(fs, (2,), hosts)
    assert f.confidence == 0.5 and "recorded nothing" in f.summary and f.evidence["empty_buffer_ranks"] == [2]


def test_culprit_stuck_before_its_first_collective_has_an_empty_buffer_and_is_proven(tmp_path) -> None:
    # Recording on (its groups are in pg_config), no entry at all: it never issued a collective.
    groups = [J.Group("0", "default_pg", (0, 1, 2, 3))]
    progs = {r: [J.Op("0", "all_reduce")] * 3 for r in range(4)}
    hosts = {0: "n1", 1: "n1", 2: "n2", 3: "n2"}
    job = J.Job(4, groups, progs, stop_at={1: 0}).run()
    f = _only_culprit(_diagnose(job, tmp_path, hosts, {"dp": 4}, fmt="json"), (1,), hosts)
    assert f.confidence == 0.95 and f.evidence["empty_buffer_ranks"] == [1]
    assert "never entered all_reduce seq 1 of pg 0" in f.summary


@pytest.mark.parametrize("culprit", range(8))
@pytest.mark.parametrize("where", ["dp", "tp"])
def test_follow_on_hangs_in_any_group_give_one_finding(tmp_path, culprit, where) -> None:
    # The reference trainer's drill shape: 4 hosts x 2 ranks, tp 2 ({0,1},...), dp 4 ({0,2,4,6},
    # {1,3,5,7}). The culprit stops before its dp (or tp) all_reduce of step 3: its dp peers wait
    # there, their tp partners run on into step 4 and wait in the next tp all_reduce - follow-on
    # hangs in groups the culprit is not waited on first.
    groups = [J.Group("0", "default_pg", tuple(range(8)))]
    groups += [J.Group(str(1 + i), "tp", (2 * i, 2 * i + 1)) for i in range(4)]
    groups += [J.Group("5", "dp", (0, 2, 4, 6)), J.Group("6", "dp", (1, 3, 5, 7))]
    tp_of = {r: str(1 + r // 2) for r in range(8)}
    dp_of = {r: "5" if r % 2 == 0 else "6" for r in range(8)}
    step = [("tp", "all_reduce")] * 3 + [("dp", "all_reduce")]
    progs = {r: [J.Op(tp_of[r] if g == "tp" else dp_of[r], op) for _ in range(6) for g, op in step] for r in range(8)}
    hosts = {r: f"node{r // 2 + 1:02d}" for r in range(8)}
    k = 2 * len(step) + (3 if where == "dp" else 1)
    for backend in ("gloo", "nccl"):
        job = J.Job(8, groups, progs, backend=backend, stop_at={culprit: k}).run()
        fs = _diagnose(job, tmp_path / backend, hosts, {"tp": 2, "dp": 4})
        f = _only_culprit(fs, (culprit,), hosts)
        assert set(map(int, f.evidence["blocked"])) | {culprit} >= set(f.evidence["waiting_ranks"]) | {culprit}


def test_stuck_kernel_is_named_with_nccl_timing(tmp_path) -> None:
    # TORCH_NCCL_ENABLE_TIMING: rank 1 enqueued all_reduce seq 3 but its kernel never started;
    # rank 0's started and waits. Without timing the same dumps prove nothing (both "scheduled").
    groups = [J.Group("0", "default_pg", (0, 1))]
    progs = {r: [J.Op("0", "all_reduce")] * 3 for r in range(2)}
    hosts = {0: "n1", 1: "n2"}
    job = J.Job(2, groups, progs, timing=True, stuck_kernel_at={1: 2}).run()
    f = _only_culprit(_diagnose(job, tmp_path / "timing", hosts, {"dp": 2}), (1,), hosts)
    assert f.confidence == 0.7 and "kernel never started" in f.summary
    assert f.evidence["nccl_state"] == {"0": "started", "1": "scheduled"}
    plain = J.Job(2, groups, progs, timing=False, stuck_kernel_at={1: 2}).run()
    assert _critical(_diagnose(plain, tmp_path / "plain", hosts, {"dp": 2})) == []


def test_watchdog_file_and_cpu_recorder_of_the_same_rank_are_merged(tmp_path) -> None:
    # On a CUDA build each rank has two recorders: the CPU one (gloo; empty here) served as
    # fr_trace_json, and NCCL's, written by the watchdog to <TORCH_FR_DUMP_TEMP_FILE><rank>.
    # An empty CPU dump next to a full NCCL one is not an empty buffer.
    n = len(PROGRAMS[5])
    job = J.Job(WORLD, GROUPS, PROGRAMS, stop_at={5: n // 2}).run()
    job.write(tmp_path, hosts=HOSTS, fmt="raw", names="nccl_trace_rank_{rank}")
    cpu = J.Job(WORLD, [GROUPS[0]], {}, backend="gloo").run()
    fs = _diagnose(cpu, tmp_path, HOSTS, LAYOUT, fmt="json")  # rank-R.json, empty, next to the NCCL file
    f = _only_culprit(fs, (5,), HOSTS)
    assert "empty_buffer_ranks" not in f.evidence


def test_two_dumps_of_one_recorder_keep_the_newest(tmp_path) -> None:
    # The live hang dump (JSON) and an older watchdog pickle of the same rank's NCCL recorder.
    n = len(PROGRAMS[3])
    early = J.Job(WORLD, GROUPS, PROGRAMS, stop_at={3: 5}).run()
    late = J.Job(WORLD, GROUPS, PROGRAMS, stop_at={3: n // 2}).run()
    early.write(tmp_path, hosts=HOSTS, fmt="raw", names="nccl_trace_rank_{rank}")
    fs = _diagnose(late, tmp_path, HOSTS, LAYOUT, fmt="json", names="nccl-rank-{rank}")
    f = _only_culprit(fs, (3,), HOSTS)
    assert f.evidence["seq"] is not None and f.evidence["seq"] > 2


# -- torch's own test_fr_analysis cases, where they apply -------------------------------------------
# test/distributed/flight_recorder/test_fr_analysis.py (match_one_event): torch compares one entry
# with another; here the same entries sit at one seq of a 3-rank group (two ranks with e1, one
# with eX), so the vote names the deviating rank, or nobody where torch says they match.

_E1 = {"op": "all_reduce", "in": [[4, 4]], "out": [[4, 4]], "idt": ["Float"], "odt": ["Float"]}
_CASES = [
    ("same", _E1, None),
    ("all_gather_vs_all_reduce", {**_E1, "op": "all_gather"}, "type_mismatch"),  # COLLECTIVE_TYPE_MISMATCH
    ("input_size", {**_E1, "in": [[5, 4]]}, "size_mismatch"),  # SIZE_OR_SYNTAX_MISMATCH
    ("output_size", {**_E1, "out": [[5, 4]]}, "size_mismatch"),  # SIZE_OR_SYNTAX_MISMATCH
    ("output_dtype", {**_E1, "odt": ["Half"]}, "type_mismatch"),  # COLLECTIVE_DTYPE_MISMATCH
    # all_to_all splits legitimately differ (torch: UNDECIDED, then a total-numel check)
    ("all_to_all_sizes", None, None),
]


def _entry_rows(rank: int, spec: Mapping, seq: int = 1) -> dict:
    import pandas as pd

    return {
        "rank": rank,
        "pg_name": "0",
        "pg_desc": "default_pg",
        "pg_ranks": [0, 1, 2],
        "seq": seq,
        "record_id": seq - 1,
        "op": spec["op"],
        "input_sizes": spec["in"],
        "output_sizes": spec["out"],
        "input_dtypes": spec["idt"],
        "output_dtypes": spec["odt"],
        "enqueue_ts": pd.Timestamp(1_700_000_000_000_000_000 + rank, tz="UTC"),
        "state": "completed",
        "retired": True,
        "frames": None,
        "backend": "nccl",
    }


@pytest.mark.parametrize(("name", "other", "expected"), _CASES, ids=[c[0] for c in _CASES])
def test_torch_match_one_event_cases(name, other, expected) -> None:
    import pandas as pd

    from trainctl.analyzers.hangs import analyze_hangs

    base = _E1
    if name == "all_to_all_sizes":
        base = {**_E1, "op": "all_to_all"}
        other = {**base, "in": [[2, 4], [6, 4]], "out": [[3, 4], [5, 4]]}
    df = pd.DataFrame([_entry_rows(0, base), _entry_rows(1, base), _entry_rows(2, other)])
    fs = analyze_hangs(df)
    if expected is None:
        assert fs == []
    else:
        (f,) = fs
        assert f.kind is FindingKind.COLLECTIVE_MISMATCH and f.category.value == expected and f.ranks == (2,)


def test_torch_gather_root_outputs_match_non_root_outputs() -> None:
    # match_one_event(e11, e12/e13): a gather's root has outputs the others lack: FULLY_MATCHED.
    import pandas as pd

    from trainctl.analyzers.hangs import analyze_hangs

    root = {"op": "gather", "in": [[4, 4]], "out": [[4, 4], [4, 4]], "idt": ["Float"], "odt": ["Float"]}
    leaf = {"op": "gather", "in": [[4, 4]], "out": [[]], "idt": ["Float"], "odt": []}
    df = pd.DataFrame([_entry_rows(0, root), _entry_rows(1, leaf), _entry_rows(2, leaf)])
    assert analyze_hangs(df) == []


def test_torch_state_mismatch_is_progress_not_a_mismatch() -> None:
    # match_one_event(e1, e9): "scheduled" vs "completed" is COLLECTIVE_STATE_MISMATCH to torch.
    # A completed NCCL entry proves every member entered the seq, so it is no fault of anyone.
    import pandas as pd

    from trainctl.analyzers.hangs import analyze_hangs

    rows = [_entry_rows(r, _E1) for r in range(3)]
    rows[0]["state"], rows[0]["retired"] = "scheduled", False
    assert analyze_hangs(pd.DataFrame(rows)) == []


def test_rank_blocked_in_a_batched_send_recv_is_not_a_root() -> None:
    # batch_isend_irecv: ProcessGroupNCCL records the batch as one "nccl:coalesced" p2p entry that
    # names no peer. Rank 1 is stuck in one (pending); rank 0 waits on rank 1 in their tp
    # all_reduce. Rank 1 is blocked, so it is not the cause; who it waits on cannot be told, so
    # nobody is blamed (a warning says so) - never rank 1.
    import pandas as pd

    from trainctl.analyzers.hangs import analyze_hangs

    def row(rank, pg, desc, ranks, seq, op, *, p2p_seq=None, state="completed"):
        return {
            "rank": rank,
            "pg_name": pg,
            "pg_desc": desc,
            "pg_ranks": ranks,
            "seq": seq,
            "p2p_seq": p2p_seq,
            "record_id": (seq or 0) + (p2p_seq or 0),
            "op": op,
            "input_sizes": [[8]],
            "output_sizes": [[8]],
            "input_dtypes": ["Float"],
            "output_dtypes": ["Float"],
            "enqueue_ts": pd.Timestamp(1_700_000_000_000_000_000 + rank, tz="UTC"),
            "state": state,
            "retired": state == "completed",
            "frames": None,
            "backend": "nccl",
            "peer": None,
        }

    df = pd.DataFrame(
        [
            row(0, "1", "tp", [0, 1], 1, "all_reduce"),
            row(0, "1", "tp", [0, 1], 2, "all_reduce", state="scheduled"),
            row(1, "1", "tp", [0, 1], 1, "all_reduce"),
            row(1, "2", "pp", [1, 2], None, "coalesced", p2p_seq=1, state="scheduled"),
            row(2, "2", "pp", [1, 2], None, "coalesced", p2p_seq=1, state="completed"),
        ]
    )
    fs = analyze_hangs(df)
    assert [f.severity for f in fs] == [Severity.WARNING] and fs[0].ranks == ()
    assert fs[0].evidence["blocked"] == {
        "0": "all_reduce seq 2 of pg 1 (tp)",
        "1": "coalesced p2p seq 1 of pg 2 (pp), on a peer the dumps do not name",
    }
    assert "no rank is blamed" in fs[0].summary


def test_random_hangs_never_blame_a_healthy_rank_with_evidence_it_does_not_have(tmp_path) -> None:
    # Seeded mixes of everything at once: single or batched send/recv, culprit and stop point,
    # buffer size, NCCL timing on or
    # off, healthy ranks whose dump is missing or whose recording is off, a stuck kernel instead
    # of a CPU hang, pickle/JSON/watchdog files. A healthy rank may be named only by the silent-rank
    # rule (it left no dump or recorded nothing, confidence <= 0.6, said so); never with proof.
    import random

    rng = random.Random(20261124)
    exact = 0
    for i in range(40):
        programs = rng.choice([PROGRAMS, BATCHED])
        culprit = rng.randrange(WORLD)
        k = rng.randrange(len(programs[culprit]))
        healthy = [r for r in range(WORLD) if r != culprit]
        missing = rng.sample(healthy, rng.choice([0, 0, 1, 2]))
        disabled = frozenset(rng.sample(healthy, rng.choice([0, 0, 1])))
        stuck = rng.random() < 0.2
        job = J.Job(
            WORLD,
            GROUPS,
            programs,
            stop_at={} if stuck else {culprit: k},
            stuck_kernel_at={culprit: k} if stuck else {},
            buffer_size=rng.choice([4, 8, 16, 64, 2000]),
            timing=rng.random() < 0.5,
            disabled=disabled,
        ).run()
        fmt = rng.choice(["pickle", "json", "raw"])
        fs = _diagnose(job, tmp_path / str(i), HOSTS, LAYOUT, fmt=fmt, missing=missing)
        crit = _critical(fs)
        for f in crit:
            wrong = set(f.ranks) - {culprit}
            if wrong:
                assert wrong <= set(missing) | disabled, (i, f.summary)
                assert f.confidence <= 0.6 and f.evidence["basis"] == "absent", (i, f.summary)
        if [f.ranks for f in crit] == [(culprit,)]:
            exact += 1
        if not (missing or disabled or stuck):
            # nothing silent: the culprit alone, or - when tiny buffers rolled past every proof -
            # nobody (a warning that says the root cannot be told)
            assert [f.ranks for f in crit] in ([(culprit,)], []), (i, [f.summary for f in fs])
    assert exact >= 30, exact  # most of the time the one finding is the culprit


@pytest.mark.parametrize("culprit", range(0, WORLD, 3))
def test_megatron_with_batch_isend_irecv_names_the_culprit(tmp_path, culprit) -> None:
    # Megatron's default p2p path: batch_isend_irecv. ProcessGroupNCCL records each send/recv of a
    # batch with no events (they stay "scheduled" forever) and one "nccl:coalesced" entry that
    # carries the batch's state; read naively, every batched op ever sent would look hung.
    assert any(len(op.parts) == 2 for op in BATCHED[culprit] if op.kind == "batch") or culprit >= 12
    n = len(BATCHED[culprit])
    for k in (9, n // 2):
        job = J.Job(WORLD, GROUPS, BATCHED, stop_at={culprit: k}, buffer_size=16).run()
        f = _only_culprit(_diagnose(job, tmp_path / f"k{k}", HOSTS, LAYOUT), (culprit,), HOSTS)
        assert str(culprit) not in f.evidence["blocked"]
    clean = J.Job(WORLD, GROUPS, BATCHED, buffer_size=16).run()
    assert _critical(_diagnose(clean, tmp_path / "clean", HOSTS, LAYOUT)) == []
