"""`trainctl compare A B`: load and analyse both runs the way diagnose does, then compare them."""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

from trainctl.analyzers import Analysis, run_analysis
from trainctl.analyzers.compare import RunComparison, RunProfile, compare_runs, run_profile
from trainctl.errors import InputError
from trainctl.findings import FindingKind
from trainctl.ops.diagnose.diagnosis import InputKind, detect_input, read_path
from trainctl.signals import Signals

# what compare compares: a run's step times, hosts and findings, which a log or a dump folder alone does not hold
_RUNS = (InputKind.RUN_DIR, InputKind.DATASET)


def compare_paths(a: str | os.PathLike[str], b: str | os.PathLike[str]) -> RunComparison:
    """The comparison of run A with run B, with the inputs of either that were skipped (each said on stderr) in its
    `skipped`, so that --json carries them as diagnose's JSON does."""
    paths = (Path(a), Path(b))
    kinds = [_run_kind(p) for p in paths]  # both checked before either is read
    # Each run read as diagnose reads it: a torn or corrupt part, or an analyzer that fails on its values, is said
    # on stderr and the rest compared.
    read_a, read_b = (
        read_path(p, _analysed, kind=k, analysis=lambda done: done[0]) for p, k in zip(paths, kinds, strict=True)
    )
    (analysis_a, profile_a), (analysis_b, profile_b) = read_a.result, read_b.result
    cmp = compare_runs(
        profile_a, list(analysis_a.findings), profile_b, list(analysis_b.findings), a_name=str(a), b_name=str(b),
        b_not_judged=_not_judged(analysis_b),
    )  # fmt: skip
    return replace(cmp, skipped=read_a.skipped + read_b.skipped)


def _analysed(signals: Signals) -> tuple[Analysis, RunProfile]:
    """Every read compare makes of one run: its analysis, its step times and hosts."""
    return run_analysis(signals), run_profile(signals)


def _run_kind(p: Path) -> InputKind:
    if not p.exists() and not p.is_symlink():  # detect_input's line offers a log or dump folder: not for compare
        raise InputError(f"{p}: no such file or directory; compare takes two runs (run dirs or collected datasets)")
    if (kind := detect_input(p)) not in _RUNS:
        raise InputError(
            f"{p}: {kind.value.replace('_', ' ')}, not a run; compare takes two runs (run dirs or collected "
            f"datasets): `trainctl diagnose {p}` reads it on its own"
        )
    return kind


def _not_judged(analysis: Analysis) -> frozenset[FindingKind]:
    """The kinds a run's analysis said it could not judge (analyzers/stragglers.py notes: too short, no timeline)."""
    from trainctl.analyzers.stragglers import NOT_JUDGED

    return frozenset({FindingKind.STRAGGLER} if any(n.startswith(NOT_JUDGED) for n in analysis.notes) else ())
