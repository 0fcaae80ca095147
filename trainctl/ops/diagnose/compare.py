"""`trainctl compare A B`: load and analyse both runs the way diagnose does, then compare them."""

from __future__ import annotations

import os
from pathlib import Path

from trainctl.analyzers import run_analysis
from trainctl.analyzers.compare import RunComparison, compare_runs
from trainctl.ops.diagnose.diagnosis import load_signals


def compare_paths(a: str | os.PathLike[str], b: str | os.PathLike[str]) -> RunComparison:
    sa, sb = load_signals(Path(a)), load_signals(Path(b))
    return compare_runs(sa, run_analysis(sa).findings, sb, run_analysis(sb).findings, a_name=str(a), b_name=str(b))
