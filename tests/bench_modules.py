"""The bench/ scripts the tests score with, loaded as modules (bench/ is not a package)."""

from __future__ import annotations

import importlib.util
import sys
from functools import cache
from pathlib import Path
from types import ModuleType

BENCH = Path(__file__).resolve().parents[1] / "bench"


@cache
def load_bench(name: str) -> ModuleType:
    """bench/<name>.py as a module, once per test session; registered under its name so that one bench
    script can import another (logs_accuracy imports log_carriers)."""
    spec = importlib.util.spec_from_file_location(name, BENCH / f"{name}.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules.setdefault(name, mod)
    spec.loader.exec_module(mod)
    return mod
