"""Megatron-LM's own straggler report, read for a rank that stays the slowest (issue 13 item 3).

With `--log-straggler`, Megatron-LM's StragglerDetector (NVIDIA/Megatron-LM d98e8a64dd, megatron/core/utils.py
`StragglerDetector.report`, printed by rank 0 every log interval) writes the minimum and maximum of each metric over
all ranks with the rank it was measured on:
    [2024-03-14 23:07:56] | MnRtt/Rnk: 3453.08ms/8 | MxRtt/Rnk: 3468.20ms/0 | MnPwr/Rnk: 601796W/8 | ...
Rtt is a rank's time per iteration in the traced operations (megatron/core/README_STRAGGLER.md). One report's
maximum is always some rank, healthy or not, so a rank is read as a straggler only as the straggler analyzer judges
a timeline (analyzers/stragglers.py): at least STRAGGLER_RATIO slower than the fastest rank, and sustained, the same
rank slowest in at least MIN_REPORTS reports and in most of the reports that show such a gap (Minder's continuity).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

_RTT = re.compile(
    r"\bMnRtt/Rnk: (?P<min_ms>[\d.]+)ms/(?P<min_rank>\d+) \| MxRtt/Rnk: (?P<max_ms>[\d.]+)ms/(?P<max_rank>\d+)"
)
STRAGGLER_RATIO = 1.2  # analyzers/stragglers.py warn_factor: slower than its peers by at least this factor
MIN_REPORTS = 2  # one report is a moment; a straggler is sustained


@dataclass(frozen=True)
class StragglerReport:
    """The rank Megatron's reports name slowest, sustained: how often and by how much."""

    rank: int
    reports_slowest: int  # reports where it was slowest by at least STRAGGLER_RATIO
    reports_with_gap: int  # reports with such a gap at all
    reports: int  # every report read
    median_ratio: float  # its max Rtt over the min Rtt, median over the reports where it was slowest
    line_no: int  # its last such report
    text: str


def read_megatron_straggler(lines: Iterable[tuple[int, str]]) -> StragglerReport | None:
    """The rank slowest by at least STRAGGLER_RATIO in at least MIN_REPORTS of Megatron's straggler reports and in
    most of those with such a gap, from (line_no, text) lines; None where the reports name none."""
    n = 0
    slow: list[tuple[int, float, int, str]] = []  # (rank, ratio, line_no, text) of reports with a gap
    for line_no, text in lines:
        if "MxRtt/Rnk" not in text or not (m := _RTT.search(text)):
            continue
        n += 1
        lo, hi = float(m["min_ms"]), float(m["max_ms"])
        if lo > 0 and hi / lo >= STRAGGLER_RATIO:
            slow.append((int(m["max_rank"]), hi / lo, line_no, text))
    if not slow:
        return None
    rank, count = Counter(r for r, _, _, _ in slow).most_common(1)[0]
    if count < MIN_REPORTS or 2 * count <= len(slow):
        return None
    mine = [(ratio, ln, t) for r, ratio, ln, t in slow if r == rank]
    ratios = sorted(ratio for ratio, _, _ in mine)
    _, line_no, text = mine[-1]
    return StragglerReport(rank, count, len(slow), n, ratios[len(ratios) // 2], line_no, text)
