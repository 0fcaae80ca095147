"""Analyzers: pure functions from tables (trainctl.signals.Signals) to typed findings.

No SSH, no printing, no file paths. Each analyzer module exposes a pure function with its
thresholds as documented keyword arguments, plus an `analyze(signals)` adapter registered below.
`trainctl diagnose` runs every registered analyzer whose inputs are present.
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import duckdb
import pyarrow as pa

from trainctl.findings import Finding
from trainctl.schemas import SignalKind
from trainctl.signals import Signals

logger = logging.getLogger(__name__)

__all__ = ["Analyzer", "ANALYZERS", "Analysis", "run_analysis", "run_analyzers"]


@dataclass(frozen=True)
class Analyzer:
    name: str
    # The analyzer runs when at least one of these kinds holds rows.
    requires: tuple[SignalKind, ...]
    run: Callable[[Signals], list[Finding]]
    # Why it gave no verdict where one might be expected (Report.notes), e.g. a run too short.
    notes: Callable[[Signals], list[str]] | None = None
    # Used instead of `run` where given: the findings and, from the same pass, what it saw but did not name
    # (reported, before `notes`, only when there is no finding), so the notes cost no second pass over the input.
    run_noted: Callable[[Signals], tuple[list[Finding], list[str]]] | None = None


def _on_call(module: str, function: str) -> Callable[[Signals], Any]:
    """`trainctl.analyzers.<module>.<function>`, imported at its first call: importing one analyzer
    (the straggler analysis alone imports DuckDB and numpy) does not import them all (pandas)."""

    def call(signals: Signals) -> Any:
        return getattr(importlib.import_module(f"trainctl.analyzers.{module}"), function)(signals)

    call.__qualname__ = f"{module}.{function}"
    return call


ANALYZERS: list[Analyzer] = [
    Analyzer(
        "stragglers",
        (SignalKind.TIMELINE,),
        _on_call("stragglers", "analyze"),
        _on_call("stragglers", "notes"),
        _on_call("stragglers", "analyze_with_notes"),
    ),
    Analyzer("logs", (SignalKind.LOG_EVENTS,), _on_call("logs", "analyze")),
    Analyzer("hangs", (SignalKind.COLLECTIVES,), _on_call("hangs", "analyze"), _on_call("hangs", "notes")),
    Analyzer("stack_hangs", (SignalKind.STACKS,), _on_call("stack_hangs", "analyze")),
    Analyzer(
        "faulty_hosts",
        (SignalKind.GPU_METRICS, SignalKind.HOST_METRICS, SignalKind.LOG_EVENTS),
        _on_call("faulty_hosts", "analyze"),
    ),
    Analyzer("nccl", (SignalKind.NCCL_PROCS,), _on_call("nccl", "analyze")),
    Analyzer("coverage", (SignalKind.COLLECTION_STATUS,), _on_call("coverage", "analyze")),
]


@dataclass(frozen=True)
class Analysis:
    findings: tuple[Finding, ...]
    notes: tuple[str, ...] = ()
    skipped: tuple[str, ...] = ()
    # The analyzers that raised (their line is in `skipped`): a loader whose lazy tables may hold a corrupt part
    # (read first here) looks for it, and analyses again without it, only when this is not empty.
    failed: tuple[str, ...] = ()


def run_analysis(signals: Signals, analyzers: list[Analyzer] | None = None) -> Analysis:
    findings: list[Finding] = []
    notes: list[str] = []
    skipped: list[str] = []
    failed: list[str] = []
    for a in ANALYZERS if analyzers is None else analyzers:
        if any(signals.has(k) for k in a.requires):
            try:
                got, seen = a.run_noted(signals) if a.run_noted is not None else (a.run(signals), [])
                if not got:
                    notes.extend(seen)
                    if a.notes is not None:
                        notes.extend(a.notes(signals))
            except (RecursionError, MemoryError, ValueError, TypeError, KeyError, IndexError, ArithmeticError,
                    AttributeError, LookupError, UnicodeError, pa.ArrowException, duckdb.Error) as exc:  # fmt: skip
                # Input no analyzer was written for (values out of range, wrong types): the other
                # analyzers' verdicts stand and the report says which one is missing, never a traceback.
                logger.debug("analyzer %s failed", a.name, exc_info=True)
                skipped.append(
                    f"analyzer {a.name}: failed on this input ({type(exc).__name__}: {str(exc)[:200]}); its findings "
                    "are missing, the others stand (trainctl -vv diagnose shows where)"
                )
                failed.append(a.name)
                continue
            findings.extend(got)
        elif a.notes is not None and signals.run is not None:
            # A run dir missing the analyzer's input says so (a run with no timeline is not a run with no
            # straggler); other inputs are not expected to hold it, and asking would import the analyzer for nothing.
            notes.extend(a.notes(signals))
    # Then: one faulty_host finding per host, citing every analyzer's evidence on it; last, the
    # incident's root cause first, its consequences folded into it (a crash outranks a straggler).
    from trainctl.analyzers.consolidate import consolidate
    from trainctl.analyzers.root_cause import analyze_root_cause

    return Analysis(
        tuple(analyze_root_cause(consolidate(findings, signals), signals)), tuple(notes), tuple(skipped), tuple(failed)
    )


def run_analyzers(signals: Signals, analyzers: list[Analyzer] | None = None) -> list[Finding]:
    return list(run_analysis(signals, analyzers).findings)
