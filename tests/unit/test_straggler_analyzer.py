"""The straggler analyzer on synthetic synchronous-training timelines (tests/unit/straggler_timelines.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import namedtuple
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as pads
import pyarrow.parquet as pq
import pytest
from straggler_timelines import host_of, make_timeline

from trainctl import dataset
from trainctl.analyzers import ANALYZERS
from trainctl.analyzers.stragglers import find_stragglers, window_stats
from trainctl.findings import Category, FindingKind, Severity
from trainctl.schemas import SignalKind
from trainctl.signals import Signals

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
TCase = namedtuple("TCase", "name kwargs rank host category severity phases steps")

CULPRITS = [
    TCase("forward 1.5x", dict(slow_rank=3), 3, "node02", Category.COMPUTE, Severity.WARNING, "forward", [0, 199]),
    TCase(
        "backward 1.3x on 2 ranks only",
        dict(ranks=2, per_host=1, slow_rank=1, factor=1.3, phase="backward"),
        1,
        "node02",
        Category.COMPUTE,
        Severity.WARNING,
        "backward",
        [0, 199],
    ),
    TCase(
        "forward+backward 2.5x from step 60",
        dict(slow_rank=4, factor=2.5, phase=["forward", "backward"], slow_steps=(60, 200)),
        4,
        "node03",
        Category.COMPUTE,
        Severity.CRITICAL,
        "forward+backward",
        [60, 199],
    ),
    TCase(
        "forward 1.5x during steps 100-159",
        dict(slow_rank=7, phase="forward", slow_steps=(100, 160)),
        7,
        "node04",
        Category.COMPUTE,
        Severity.WARNING,
        "forward",
        [100, 159],
    ),
    # 3x a 4 ms input phase is 8 ms, 6.5% of the 122 ms step: slow, but under the 10% a critical
    # finding needs (critical_step_share).
    TCase(
        "input pipeline 3x",
        dict(slow_rank=6, factor=3.0, phase="data"),
        6,
        "node04",
        Category.DATA,
        Severity.WARNING,
        "data",
        [0, 199],
    ),
    TCase(
        "optimizer 1.4x",
        dict(slow_rank=0, factor=1.4, phase="optimizer"),
        0,
        "node01",
        Category.COMPUTE,
        Severity.WARNING,
        "optimizer",
        [0, 199],
    ),
    TCase(
        "script: compute 1.5x",
        dict(shape="script", slow_rank=5, phase="compute"),
        5,
        "node03",
        Category.COMPUTE,
        Severity.WARNING,
        "compute",
        [0, 199],
    ),
    TCase(
        "script: compute 1.4x, 4 ranks, 30 steps",
        dict(shape="script", ranks=4, steps=30, slow_rank=2, factor=1.4, phase="compute"),
        2,
        "node02",
        Category.COMPUTE,
        Severity.WARNING,
        "compute",
        [0, 29],
    ),
    # `compute` contains the input time in user-script timelines: the data phase explains it.
    TCase(
        "script: data 3x",
        dict(shape="script", slow_rank=1, factor=3.0, phase="data"),
        1,
        "node01",
        Category.DATA,
        Severity.CRITICAL,
        "data",
        [0, 199],
    ),
    TCase(
        "script without step rows",
        dict(shape="script", slow_rank=3, phase="compute", with_step=False),
        3,
        "node02",
        Category.COMPUTE,
        Severity.WARNING,
        "compute",
        [0, 199],
    ),
    # Tokens differ per rank and step; this rank is slow per token, not because it got more tokens.
    TCase(
        "forward 1.5x with varying tokens",
        dict(slow_rank=2, tokens=lambda rng, r, s: rng.integers(1000, 8000, size=(r, s))),
        2,
        "node02",
        Category.COMPUTE,
        Severity.WARNING,
        "forward",
        [0, 199],
    ),
    # One rank's collective is slow while its work is normal and nobody waits for it.
    TCase(
        "communication +15 ms",
        dict(comm_extra_ms={5: 15.0}),
        5,
        "node03",
        Category.COMMUNICATION,
        Severity.WARNING,
        "communication",
        [0, 199],
    ),
]


@pytest.mark.parametrize("case", CULPRITS, ids=[c.name for c in CULPRITS])
def test_names_exactly_the_culprit(case: TCase) -> None:
    findings = find_stragglers(make_timeline(**case.kwargs))
    assert [(f.kind, f.ranks, f.hosts, f.category, f.severity) for f in findings] == [
        (FindingKind.STRAGGLER, (case.rank,), (case.host,), case.category, case.severity)
    ]
    f = findings[0]
    assert f.summary.startswith(f"rank {case.rank} on {case.host} spends ")
    assert f"the median {case.phases} time (steps {case.steps[0]}-{case.steps[1]})" in f.summary
    assert f.summary.endswith(f": {f.evidence['rank_ms']:.1f} ms vs {f.evidence['median_ms']:.1f} ms per step")
    assert f.evidence["steps"] == case.steps
    assert f.evidence["slowdown"] == pytest.approx(f.evidence["rank_ms"] / f.evidence["median_ms"], rel=1e-3)
    assert f.playbook == "straggler"
    json.dumps(f.to_dict())  # evidence is plain JSON


def test_evidence_numbers_match_the_injected_slowdown() -> None:
    f = find_stragglers(
        make_timeline(slow_rank=4, factor=2.5, phase=["forward", "backward"], slow_steps=(60, 200), jitter=0.02)
    )[0]
    assert f.evidence["slowdown"] == pytest.approx(2.5, rel=0.03)
    # forward 30 ms and backward 60 ms on a healthy rank (straggler_timelines.REFERENCE_MS)
    assert f.evidence["median_ms"] == pytest.approx(90.0, rel=0.03)
    assert f.evidence["rank_ms"] == pytest.approx(225.0, rel=0.03)
    assert set(f.evidence["phases"]) == {"forward", "backward"}
    assert f.evidence["phases"]["forward"]["median_ms"] == pytest.approx(30.0, rel=0.03)
    assert f.evidence["windows"] == {"slow": 7, "spanned": 7, "window_steps": 20, "step_stride": 1}
    assert f.confidence == 0.99


NO_FINDING = [
    ("clean run, 5% jitter", dict(jitter=0.05)),
    ("clean run, 15% jitter", dict(jitter=0.15)),
    ("clean run, 64 ranks", dict(ranks=64, per_host=8)),
    ("whole job 2x slower from step 100", dict(job_slowdown=(100, 2.0))),
    ("tokens vary per rank and step", dict(tokens=lambda rng, r, s: rng.integers(1000, 8000, size=(r, s)))),
    # Same sequence lengths on every rank within a step, very different across steps.
    ("tokens vary per step only", dict(tokens=lambda rng, r, s: np.tile(rng.integers(500, 16000, size=s), (r, 1)))),
    (
        "blip: 3x for 35 steps (< 3 windows of 20)",
        dict(slow_rank=2, factor=3.0, phase="backward", slow_steps=(90, 125)),
    ),
    ("blip: 5x for 10 steps", dict(slow_rank=2, factor=5.0, phase="forward", slow_steps=(50, 60))),
    ("10% slower: below the 1.2x line", dict(slow_rank=1, factor=1.1)),
    # Rank 1's work is 1.15x (under the line) but rank 0 waits 13 ms more than rank 1 in
    # communication (1.7x): rank 0 is waiting, not a communication straggler.
    (
        "2 ranks: peer waits for a sub-threshold straggler",
        dict(ranks=2, per_host=1, slow_rank=1, factor=1.15, phase=["forward", "backward"]),
    ),
    (
        "script, 2 ranks: peer waits for a sub-threshold straggler",
        dict(shape="script", ranks=2, per_host=1, slow_rank=1, factor=1.15),
    ),
    # 1.5x on the 4 ms data phase is 2 ms of a ~122 ms step: under the 2% floor (min_step_share).
    ("1.5x on a negligible phase", dict(slow_rank=1, factor=1.5, phase="data", jitter=0.02)),
    # A rank with less work waits longer in communication; it is not a straggler.
    ("fast rank waits longer", dict(rank_scale={2: 0.6})),
    ("script: fast rank waits longer", dict(shape="script", phase="compute", rank_scale={2: 0.6})),
    # 3 ranks, one of them fast (on a core of its own): the other two read 1.5x against a peer median that averages
    # the fast rank in. Two of three are not stragglers; the odd one out is the fast one.
    ("3 ranks: one fast, two alike", dict(ranks=3, per_host=1, rank_scale={2: 0.5})),
    # one rank has no peer to be slower than (a one-GPU run): nothing, and no error
    ("1 rank", dict(ranks=1, per_host=1)),
]


@pytest.mark.parametrize("kwargs", [k for _, k in NO_FINDING], ids=[n for n, _ in NO_FINDING])
def test_no_finding(kwargs: dict) -> None:
    assert find_stragglers(make_timeline(**kwargs)) == []


@pytest.mark.parametrize(
    "shape, phase, wait_phase", [("reference", "forward", "communication"), ("script", "compute", "wait")]
)
@pytest.mark.parametrize("ranks, slow", [(2, 0), (4, 3), (8, 5)])
def test_waiting_ranks_are_never_blamed(shape: str, phase: str, wait_phase: str, ranks: int, slow: int) -> None:
    t = make_timeline(shape=shape, ranks=ranks, slow_rank=slow, factor=2.0, phase=phase)
    # The peers' wait phase really is much longer than the straggler's...
    stats, _ = window_stats(t)
    waits = stats[stats["phase"] == wait_phase].groupby("rank")["v_ns"].median()
    assert all(waits[r] > 2 * waits[slow] for r in range(ranks) if r != slow)
    # ... and still only the straggler is named.
    assert [f.ranks for f in find_stragglers(t)] == [(slow,)]


def test_two_stragglers_two_findings() -> None:
    findings = find_stragglers(make_timeline(ranks=16, slow_rank=[3, 9], factor=1.6, phase="backward"))
    assert [(f.ranks, f.hosts) for f in findings] == [((3,), ("node02",)), ((9,), ("node05",))]


def test_rank_to_host_wins_over_host_column() -> None:
    t = make_timeline(slow_rank=3)
    assert find_stragglers(t, rank_to_host={3: "gpu-a17"})[0].hosts == ("gpu-a17",)
    assert find_stragglers(t.drop_columns(["host"]))[0].hosts == ()


@pytest.mark.parametrize(
    "kwargs, expected",
    [
        (dict(warn_factor=1.6), []),  # 1.5x is under a 1.6x warning line
        (dict(critical_factor=1.4), [Severity.CRITICAL]),
        (dict(min_windows=11), []),  # 200 steps / 20 = 10 windows
        (dict(window_steps=50, min_windows=4), [Severity.WARNING]),
        (dict(window_steps=50, min_windows=5), []),
        (dict(min_step_share=0.2), []),  # 15 ms extra forward is 12% of the step
        (dict(critical_factor=1.4, critical_step_share=0.13), [Severity.WARNING]),
    ],
)
def test_thresholds_are_keyword_arguments(kwargs: dict, expected: list) -> None:
    assert [f.severity for f in find_stragglers(make_timeline(slow_rank=3), **kwargs)] == expected


@pytest.mark.parametrize(
    "phase, factor, expected",
    [
        ("data", 6.0, Severity.CRITICAL),  # 20 ms extra: 16% of the step
        ("optimizer", 2.4, Severity.WARNING),  # 11.2 ms extra: 2.4x, but 9.2% of the step
        ("optimizer", 2.6, Severity.CRITICAL),  # 12.8 ms extra: 10.5%
    ],
)
def test_critical_needs_the_factor_and_a_tenth_of_a_step(phase: str, factor: float, expected: Severity) -> None:
    (f,) = find_stragglers(make_timeline(slow_rank=2, factor=factor, phase=phase, jitter=0.0))
    assert (f.ranks, f.severity) == ((2,), expected), f.evidence


def test_communication_suspect_needs_five_percent_of_a_step() -> None:
    # 4 ms more collective time (3.3% of a step) with nobody's work slow: a host starved of CPU
    # around a gloo collective shows this for a few windows; it passes the 2% floor of work phases.
    assert find_stragglers(make_timeline(ranks=8, sync=False, jitter=0.0, comm_extra_ms={2: 4.0})) == []
    (f,) = find_stragglers(
        make_timeline(ranks=8, sync=False, jitter=0.0, comm_extra_ms={2: 4.0}), comm_min_step_share=0.02
    )
    assert (f.ranks, f.category) == ((2,), Category.COMMUNICATION)


def test_persistence_tolerates_healthy_windows() -> None:
    # Alternating slow and healthy windows are 50% dense: not persistent at 0.75, persistent at 0.5.
    alt = _alternating(window=20)
    assert find_stragglers(alt) == []
    assert [f.ranks for f in find_stragglers(alt, persistence=0.5)] == [(3,)]


def _alternating(window: int):
    import pyarrow as pa

    slow = make_timeline(slow_rank=3, factor=1.6, seed=1)
    fast = make_timeline(seed=1)
    odd = pc.equal(pc.bit_wise_and(pc.divide(slow["step"], window), 1), 1)
    rows = pc.if_else(odd, slow["duration_ns"], fast["duration_ns"])
    return fast.set_column(fast.schema.get_field_index("duration_ns"), "duration_ns", rows.cast(pa.int64()))


def test_dataset_input_gives_the_same_findings_as_table(tmp_path) -> None:
    t = make_timeline(ranks=8, slow_rank=3, factor=1.7, phase="backward")
    for h in sorted(set(t["host"].to_pylist())):
        part = t.filter(pc.equal(t["host"], h))
        dataset.write_table(tmp_path, SignalKind.TIMELINE, h, part)
    ds = dataset.open_dataset(tmp_path, SignalKind.TIMELINE)
    assert isinstance(ds, pads.Dataset)
    from_ds = find_stragglers(ds)
    from_table = find_stragglers(dataset.read_table(tmp_path, SignalKind.TIMELINE))
    assert from_ds == from_table
    assert [(f.ranks, f.hosts) for f in from_ds] == [((3,), (host_of(3),))]


def test_lazy_table_gives_the_same_findings_and_opens_as_the_dataset(tmp_path) -> None:
    t = make_timeline(ranks=8, slow_rank=3, factor=1.7, phase="backward")
    for h in sorted(set(t["host"].to_pylist())):
        dataset.write_table(tmp_path, SignalKind.TIMELINE, h, t.filter(pc.equal(t["host"], h)))
    lazy = dataset.open_lazy(tmp_path, SignalKind.TIMELINE)
    assert (lazy.num_rows, len(lazy.files)) == (t.num_rows, 4)
    assert find_stragglers(lazy) == find_stragglers(t) != []
    signals = Signals(None, {SignalKind.TIMELINE: lazy})
    assert signals.source(SignalKind.TIMELINE) is lazy and signals.has(SignalKind.TIMELINE)
    # Every other reader of Signals.tables gets the pyarrow Dataset it always got.
    opened = signals.tables[SignalKind.TIMELINE]
    assert isinstance(opened, pads.FileSystemDataset) and opened.count_rows() == t.num_rows


def test_a_timeline_alone_is_diagnosed_without_pandas(tmp_path) -> None:
    # pandas (and pyarrow.dataset, which imports it) cost ~0.25 s of a 49M-row diagnosis: neither
    # the loader nor the straggler analysis may import them (fresh interpreter: this one has).
    t = make_timeline(ranks=8, slow_rank=3, factor=1.7, phase="backward")
    for h in sorted(set(t["host"].to_pylist())):
        dataset.write_table(tmp_path, SignalKind.TIMELINE, h, t.filter(pc.equal(t["host"], h)))
    code = f"""
import json, sys
from pathlib import Path
from trainctl.analyzers import stragglers
from trainctl.ops.diagnose import diagnosis
diagnosis.LAZY_ROWS = 0  # the timeline stays lazy, as a big one does
signals = diagnosis.load_signals(Path({str(tmp_path)!r}))
findings = stragglers.analyze(signals)
print(json.dumps([[f.ranks for f in findings], type(signals.source(stragglers.SignalKind.TIMELINE)).__name__,
                  [m for m in ("pandas", "pyarrow.dataset") if m in sys.modules]]))
"""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == [[[3]], "LazyTable", []]


def test_empty_and_unknown_phases() -> None:
    t = make_timeline(slow_rank=3)
    assert find_stragglers(t.slice(0, 0)) == []
    only_step = t.filter(pc.equal(t["phase"], "step"))
    assert find_stragglers(only_step) == []


def test_bad_thresholds_raise() -> None:
    with pytest.raises(ValueError, match="warn_factor"):
        find_stragglers(make_timeline(), warn_factor=2.5, critical_factor=2.0)
    with pytest.raises(ValueError, match="persistence"):
        find_stragglers(make_timeline(), persistence=0.0)


def test_registered_for_timeline() -> None:
    (a,) = [a for a in ANALYZERS if a.name == "stragglers"]
    assert a.requires == (SignalKind.TIMELINE,)


def test_long_runs_sample_steps_and_still_find_the_culprit() -> None:
    # 600 steps -> windows of 50 steps, every 4th step sampled (12 samples per window median).
    t = make_timeline(ranks=8, steps=600, slow_rank=6, factor=1.3, phase="backward", slow_steps=(300, 600))
    (f,) = find_stragglers(t)
    assert (f.ranks, f.evidence["steps"], f.evidence["windows"]) == (
        (6,),
        [300, 599],
        {"slow": 6, "spanned": 6, "window_steps": 50, "step_stride": 4},
    )
    assert find_stragglers(t, samples_per_window=None)[0].evidence["windows"]["step_stride"] == 1
    assert find_stragglers(make_timeline(ranks=8, steps=600)) == []


def test_dataset_with_varying_tokens_matches_table(tmp_path) -> None:
    t = make_timeline(slow_rank=1, tokens=lambda rng, r, s: rng.integers(1000, 8000, size=(r, s)))
    for h in sorted(set(t["host"].to_pylist())):
        dataset.write_table(tmp_path, SignalKind.TIMELINE, h, t.filter(pc.equal(t["host"], h)))
    from_ds = find_stragglers(dataset.open_dataset(tmp_path, SignalKind.TIMELINE))
    assert from_ds == find_stragglers(t)
    assert [f.ranks for f in from_ds] == [(1,)]


def test_min_step_share_floor() -> None:
    t = make_timeline(slow_rank=1, factor=1.5, phase="data", jitter=0.02)
    assert find_stragglers(t) == []
    assert [(f.ranks, f.category) for f in find_stragglers(t, min_step_share=0.01)] == [((1,), Category.DATA)]


def test_subgroup_waiting_for_a_sub_threshold_straggler_is_not_blamed() -> None:
    # Rank 3's work is 1.15x (13.5 ms, under the 1.2x line); only its partner rank 2 waits for it
    # (a tensor-parallel pair), so rank 2's collective is 1.7x the median while its work is normal.
    kwargs = dict(ranks=8, slow_rank=3, factor=1.15, phase=["forward", "backward"], sync=False, jitter=0.02)
    assert find_stragglers(make_timeline(**kwargs, comm_extra_ms={2: 13.5})) == []
    # The same collective time with nobody slow is claimed, as a capped-confidence communication finding.
    (f,) = find_stragglers(make_timeline(ranks=8, sync=False, jitter=0.02, comm_extra_ms={2: 13.5}))
    assert (f.ranks, f.category, f.confidence) == ((2,), Category.COMMUNICATION, 0.6)


def _expected_window_stats(t, window_steps: int, quantile: float = 0.25):
    """The per (rank, phase, window) statistic computed independently, with pandas."""
    from trainctl.analyzers.stragglers import PHASE_CATEGORY, WORK_PHASES

    df = t.select(["rank", "step", "phase", "duration_ns"]).to_pandas()
    df = df[df["phase"].isin(list(PHASE_CATEGORY))]
    df["win"] = (df["step"] - df["step"].min()) // window_steps
    out = {}
    for (rank, phase, win), g in df.groupby(["rank", "phase", "win"]):
        q = quantile if phase in WORK_PHASES else 0.5
        out[(int(rank), phase, int(win))] = (len(g), float(g["duration_ns"].quantile(q, interpolation="linear")))
    return out


def _as_dict(stats):
    return {
        (int(r), str(p), int(w)): (int(n), float(v))
        for r, p, w, n, v in zip(stats["rank"], stats["phase"], stats["win"], stats["n"], stats["v_ns"])
    }


@pytest.mark.parametrize("shape", ["reference", "script"])
def test_window_stats_are_the_pandas_quantiles(shape: str, monkeypatch) -> None:
    # The packed-key sort (durations that fit beside the group in one int64) against pandas.
    from trainctl.analyzers import stragglers

    def no_fallback(*a, **k):
        raise AssertionError("constant tokens and small durations must take the packed path")

    monkeypatch.setattr(stragglers, "_aggregated_stats", no_fallback)
    t = make_timeline(shape=shape, ranks=6, per_host=3, steps=90, slow_rank=2, jitter=0.2)
    stats, plan = window_stats(t, window_steps=20, samples_per_window=None)
    assert (plan.window_steps, plan.step_stride) == (20, 1)
    got, want = _as_dict(stats), _expected_window_stats(t, 20)
    assert got.keys() == want.keys()
    for k in want:
        assert got[k][0] == want[k][0] and got[k][1] == pytest.approx(want[k][1], rel=1e-12), k


def test_window_stats_fall_back_when_durations_do_not_fit_the_packed_key(monkeypatch) -> None:
    # One absurd duration (2^61 ns) leaves no room for the group bits: DuckDB's quantile_cont
    # path runs instead and must give the same statistic.
    from trainctl.analyzers import stragglers

    calls = []
    real = stragglers._aggregated_stats
    monkeypatch.setattr(stragglers, "_aggregated_stats", lambda *a, **k: calls.append(1) or real(*a, **k))
    t = make_timeline(ranks=4, per_host=2, steps=40, jitter=0.2)
    d = t["duration_ns"].to_numpy().copy()
    d[7] = 1 << 61
    t = t.set_column(t.schema.get_field_index("duration_ns"), "duration_ns", pa.array(d, pa.int64()))
    stats, _ = window_stats(t, window_steps=10, samples_per_window=None)
    assert calls == [1]
    got, want = _as_dict(stats), _expected_window_stats(t, 10)
    assert got.keys() == want.keys()
    for k in want:
        assert got[k][0] == want[k][0] and got[k][1] == pytest.approx(want[k][1], rel=1e-12), k


@pytest.mark.parametrize("tokens_in", ["all", "some", "none"])
def test_dataset_files_with_and_without_a_tokens_column(tmp_path, tokens_in: str) -> None:
    # Other writers (Polars, DuckDB) may omit the nullable tokens column; the footers say which
    # files have it, and the scan unions columns by name only when some do and some do not.
    import pyarrow.parquet as pq

    t = make_timeline(ranks=8, slow_rank=5, factor=1.6, phase="backward").drop_columns(["host"])
    for i, h in enumerate(sorted({host_of(r) for r in range(8)})):
        part = t.filter(pc.is_in(t["rank"], pa.array([2 * i, 2 * i + 1], pa.int32())))
        if tokens_in == "none" or (tokens_in == "some" and i % 2):
            part = part.drop_columns(["tokens"])
        out = tmp_path / "timeline" / f"host={h}"
        out.mkdir(parents=True)
        pq.write_table(part, out / "part-0.parquet")
    ds = dataset.open_dataset(tmp_path, SignalKind.TIMELINE)
    assert dataset.dataset_rows(ds) == t.num_rows
    (f,) = find_stragglers(ds)
    assert (f.ranks, f.hosts, f.evidence["steps"]) == ((5,), (host_of(5),), [0, 199])


def _uneven_files(root) -> pa.Table:
    """A timeline in files that hold uneven rank sets (b's ranks 1, 3 and 7 fall in all three chunks
    of three; rank 1's early steps sit in a, its late ones in b), only some with a tokens column."""
    import pyarrow.parquet as pq

    t = make_timeline(ranks=8, steps=120, slow_rank=5, factor=1.6, phase="backward").drop_columns(["host"])
    rank, step = t["rank"].to_numpy(), t["step"].to_numpy()
    late_1 = (rank == 1) & (step >= 60)
    layout = {
        "a": np.isin(rank, [0, 1, 2]) & ~late_1,
        "b": np.isin(rank, [3, 7]) | late_1,
        "c": np.isin(rank, [4, 5, 6]),
    }
    for i, (h, rows) in enumerate(layout.items()):
        part = t.filter(pa.array(rows))
        if i % 2:
            part = part.drop_columns(["tokens"])
        out = root / "timeline" / f"host={h}"
        out.mkdir(parents=True)
        pq.write_table(part, out / "part-0.parquet")
    return t


def test_chunks_of_ranks_give_the_one_query_windows(tmp_path, monkeypatch) -> None:
    # A big timeline is queried in chunks of ranks, each over the files whose footers hold its
    # ranks; the windows must equal one query's. Here file b is read by all three chunks and c by
    # two, more than _CHUNK_REREAD allows: one query, unless the limit is lifted.
    from trainctl.analyzers import stragglers

    t = _uneven_files(tmp_path)
    lazy = dataset.open_lazy(tmp_path, SignalKind.TIMELINE)
    assert lazy.num_rows == t.num_rows

    def windows(chunk_rows: int, reread: float = stragglers._CHUNK_REREAD) -> tuple:
        monkeypatch.setattr(stragglers, "_CHUNK_ROWS", chunk_rows)
        monkeypatch.setattr(stragglers, "_CHUNK_REREAD", reread)
        chunks = []
        real = stragglers._rank_chunks
        monkeypatch.setattr(stragglers, "_rank_chunks", lambda *a: chunks.append(real(*a)) or chunks[-1])
        stats, plan = window_stats(lazy, window_steps=10, samples_per_window=None)
        return stats, plan, find_stragglers(lazy), len(chunks[0])

    one, chunked = windows(t.num_rows), windows(t.num_rows // 3, reread=2.0)
    assert (one[3], chunked[3], windows(t.num_rows // 3)[3]) == (1, 3, 1)
    pd_testing = pytest.importorskip("pandas.testing")
    pd_testing.assert_frame_equal(chunked[0], one[0])
    assert chunked[1:3] == one[1:3]
    assert [(f.ranks, f.evidence["steps"]) for f in one[2]] == [((5,), [0, 119])]


def test_peer_median_is_the_median_of_the_other_ranks() -> None:
    # Per-group values repeated over the rows: checked against the definition on groups of 1 to
    # 11 ranks, with ties, exactly (the same two values are averaged the same way).
    from trainctl.analyzers import stragglers

    rng = np.random.default_rng(7)
    for trial in range(100):
        ranks, wins, phases = int(rng.integers(1, 12)), int(rng.integers(1, 5)), int(rng.integers(1, 4))
        cells = [(r, p, w) for r in range(ranks) for p in range(phases) for w in range(wins) if rng.random() < 0.8]
        if not cells:
            continue
        rank, phase, win = (np.array(c, dtype=np.int64) for c in zip(*cells))
        v = rng.choice([1.0, 2.0, 2.5, 3.0], len(rank)) if trial % 2 else rng.random(len(rank)) * 100
        w = stragglers._Windows(rank, phase, win, np.ones(len(rank), np.int64), v)
        got = stragglers._peer_median(w, *stragglers._phase_window_order(w))
        same = (phase[:, None] == phase[None, :]) & (win[:, None] == win[None, :])
        for i in range(len(v)):
            others = v[same[i] & (np.arange(len(v)) != i)]
            want = np.median(others) if len(others) else np.nan
            assert got[i] == want or (np.isnan(got[i]) and np.isnan(want)), (trial, i)


@pytest.mark.parametrize("phases", [("forward", "backward", "optimizer"), ("data", "compute", "wait")])
def test_typical_step_is_the_sum_of_the_phase_medians(phases: tuple[str, ...]) -> None:
    # Per window: the median rank's time of each phase, summed; `data` is inside the script's
    # `compute`, so it is left out when `compute` is timed.
    from trainctl.analyzers import stragglers

    rng = np.random.default_rng(3)
    codes = [stragglers._PHASE_NAMES.index(p) for p in phases]
    cells = [(r, c, w) for r in range(7) for c in codes for w in range(4) if rng.random() < 0.8]
    rank, phase, win = (np.array(c, dtype=np.int64) for c in zip(*cells))
    v = rng.random(len(rank)) * 1e8
    w = stragglers._Windows(rank, phase, win, np.ones(len(rank), np.int64), v)
    got = stragglers._typical_step_ms(w, *stragglers._phase_window_order(w))
    summed = [c for c, p in zip(codes, phases) if not ("compute" in phases and p == "data")]
    want = {
        x: sum(float(np.median(v[(phase == c) & (win == x)])) for c in summed if ((phase == c) & (win == x)).any())
        / 1e6
        for x in range(4)
    }
    assert got.keys() == want.keys()
    assert all(got[x] == pytest.approx(want[x], rel=1e-12) for x in want)


def test_an_error_in_a_chunk_is_raised_as_is(tmp_path, monkeypatch) -> None:
    from trainctl.analyzers import stragglers

    t = _uneven_files(tmp_path)
    monkeypatch.setattr(stragglers, "_CHUNK_ROWS", t.num_rows // 3)
    monkeypatch.setattr(stragglers, "_CHUNK_REREAD", 2.0)
    seen = []

    def fail_second(keys, *a):
        seen.append(len(keys))
        if len(seen) == 2:
            raise ValueError("chunk 2")
        return real(keys, *a)

    real = stragglers._group_quantiles
    monkeypatch.setattr(stragglers, "_group_quantiles", fail_second)
    with pytest.raises(ValueError, match="chunk 2"):
        find_stragglers(dataset.open_lazy(tmp_path, SignalKind.TIMELINE), window_steps=10)


def test_files_split_by_rank_are_read_in_chunks(tmp_path, monkeypatch) -> None:
    # One file per host of 2 ranks (as collect writes them): four chunks, each reading one file.
    from trainctl.analyzers import stragglers

    t = make_timeline(ranks=8, slow_rank=3, factor=1.7, phase="backward")
    for h in sorted(set(t["host"].to_pylist())):
        dataset.write_table(tmp_path, SignalKind.TIMELINE, h, t.filter(pc.equal(t["host"], h)))
    chunks = []
    real = stragglers._rank_chunks
    monkeypatch.setattr(stragglers, "_rank_chunks", lambda *a: chunks.append(real(*a)) or chunks[-1])
    monkeypatch.setattr(stragglers, "_CHUNK_ROWS", t.num_rows // 4)
    assert find_stragglers(dataset.open_lazy(tmp_path, SignalKind.TIMELINE)) == find_stragglers(t) != []
    assert [len(c) for c in chunks] == [4, 1]


def test_a_job_wide_stall_in_a_recorded_clean_run_is_not_a_communication_straggler() -> None:
    # A real clean run (tests/fixtures/timelines/README.md): its window medians put rank 0's wait
    # at 1.2x or more of its peers in three windows, an episode like a slow link's...
    t = pq.read_table(FIXTURES / "timelines" / "clean_gloo_stalls.parquet")
    stats, _ = window_stats(t)
    wait = stats[stats["phase"] == "wait"].pivot_table(index="win", columns="rank", values="v_ns")
    peers = wait.drop(columns=[0]).median(axis=1)
    assert int((wait[0] / peers >= 1.2).sum()) >= 3
    # ...but at the same steps it waits about as long as they do: no straggler.
    assert find_stragglers(t) == []


def test_a_brief_small_slowdown_in_a_recorded_clean_run_is_not_a_straggler() -> None:
    # A real clean run (tests/fixtures/timelines/README.md): rank 1's forward is 1.31x its peers' for
    # 24 of 80 steps, about 1 s and 3% of a step; with one floor for brief and sustained slowdowns
    # (and no floor on the steps it cost in all) it was named.
    t = pq.read_table(FIXTURES / "timelines" / "clean_ref_brief_forward.parquet")
    assert [f.ranks for f in find_stragglers(t, brief_min_step_share=0.02, brief_min_lost_steps=0)] == [(1,)]
    assert find_stragglers(t) == []


@pytest.mark.parametrize(
    ("steps", "slow_steps", "factor", "named"),
    [
        (200, (140, 200), 1.6, False),  # 60 steps (7 s), 4 ms more optimizer: 4% of a 122 ms step
        (200, (0, 200), 1.6, True),  # the same from end to end of the run: as sustained as it can show
        (1000, (400, 1000), 1.6, True),  # 600 steps, 73 s: past `sustained_s`
        (200, (140, 200), 3.0, True),  # brief, but 16 ms more: 13% of a step
        # brief, 13% of a step, but 12 steps x 16 ms = 1.6 steps lost in all: under brief_min_lost_steps; 5x: 3.1
        (40, (8, 20), 3.0, False),
        (40, (8, 20), 5.0, True),
    ],
)
def test_a_brief_slowdown_needs_a_tenth_of_a_step(steps: int, slow_steps: tuple[int, int], factor: float, named: bool):
    t = make_timeline(ranks=4, steps=steps, slow_rank=2, factor=factor, phase="optimizer", slow_steps=slow_steps)
    fs = find_stragglers(t)
    assert [(f.ranks, f.evidence["phase"]) for f in fs] == ([((2,), "optimizer")] if named else []), fs


def test_a_communication_straggler_reports_its_paired_per_step_excess(tmp_path) -> None:
    # 600 steps: windows of 50, every 4th step sampled; the paired check reads the same steps.
    t = make_timeline(ranks=8, steps=600, jitter=0.1, comm_extra_ms={2: 13.5})
    (f,) = find_stragglers(t)
    assert (f.ranks, f.category) == ((2,), Category.COMMUNICATION)
    assert 11.0 <= f.evidence["paired_excess_ms"] <= 16.0, f.evidence
    # The same from a dataset on disk (the paired check queries the files).
    for h in sorted(set(t["host"].to_pylist())):
        dataset.write_table(tmp_path, SignalKind.TIMELINE, h, t.filter(pc.equal(t["host"], h)))
    assert find_stragglers(dataset.open_dataset(tmp_path, SignalKind.TIMELINE)) == [f]


def test_several_communication_suspects_are_each_paired_with_their_own_peers() -> None:
    # One query reads the phase for all suspects; each is compared with the ranks other than itself.
    fs = find_stragglers(make_timeline(ranks=8, sync=False, jitter=0.05, comm_extra_ms={2: 13.5, 5: 20.0}))
    assert [(f.ranks, f.category) for f in fs] == [((2,), Category.COMMUNICATION), ((5,), Category.COMMUNICATION)]
    assert [round(f.evidence["paired_excess_ms"]) for f in fs] == [13, 20]
