"""torch's own Flight Recorder analyzer (`torchfrtrace` / tools/flight_recorder/fr_trace.py) pasted in a log: the
ranks it found missing from a collective (issue 13 item 3).

Its report of the first kind of mismatch, in the three spellings torch has printed (pytorch/pytorch
tools/flight_recorder/components/builder.py; torch/distributed/flight_recorder/components/builder.py and utils.py):
- 2.4: print(f"Not all ranks joining collective for group {pg_name}:{desc} collective {profiling_name}",
  f"Missing ranks are {expected_ranks - (candidate_ranks | found_ranks)}"): one line;
- 2.5: logger.info("Not all ranks joining collective %s at entry %s", ...), then "group info: %s", "collective: %s",
  "missing ranks: %s" on lines of their own;
- 2.6+: "Not all ranks joining collective, sequence number: %s", then EntryState.log's "collective: ..." and
  "missing ranks: {1}".
The missing ranks are the group's members (pg_config's global ranks) that the analyzer found in no dump's entry for
that collective: the ranks that never called it, which the others wait for. The first report is the root; the later
ones are collectives queued behind it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, replace

_HEADER = re.compile(
    r"Not all ranks joining collective(?:, sequence number: (?P<seq26>\d+)| (?P<seq25>\d+) at entry \d+"
    r"| for group (?P<group>\S+) collective (?P<coll>\S+))"
)
_MISSING = re.compile(r"\b[Mm]issing ranks(?: are|:) \{(?P<ranks>[\d,\s]*)\}")
_COLLECTIVE = re.compile(r"^\s*collective: (?P<coll>\S+)\s*$")
LOOKAHEAD = 8  # lines after the header its "missing ranks:" line may be on (group info, collective, ...)
MAX_RANKS = 4096


@dataclass(frozen=True)
class FrTraceMissing:
    missing_ranks: tuple[int, ...]
    collective: str | None
    seq: int | None
    line_no: int  # the header's
    text: str
    reports: int  # how many such reports the log holds (the later ones queue behind the first)


def read_fr_trace_missing(lines: Iterable[tuple[int, str]]) -> FrTraceMissing | None:
    """The first "Not all ranks joining collective" report with its missing ranks, from (line_no, text) lines: one
    pass, a report's own lines looked at only within LOOKAHEAD of its header."""
    first: FrTraceMissing | None = None
    reports = 0
    open_: tuple[int, str, re.Match[str], int] | None = None  # (line_no, text, header match, lines left)
    coll: str | None = None
    for n, text in lines:
        if "Not all ranks joining collective" in text and (h := _HEADER.search(text)):
            reports += 1
            if first is None:
                open_, coll = (n, text, h, LOOKAHEAD + 1), h["coll"]
        if open_ is None:
            continue
        if coll is None and (c := _COLLECTIVE.match(text)):
            coll = c["coll"]
        if (m := _MISSING.search(text)) is not None:
            ranks = tuple(sorted({int(r) for r in re.findall(r"\d+", m["ranks"])}))[:MAX_RANKS]
            if ranks:
                line_no, header, h, _ = open_
                seq = h["seq26"] or h["seq25"]
                first = FrTraceMissing(ranks, coll, int(seq) if seq else None, line_no, header.strip(), 0)
            open_ = None
        elif open_[3] <= 1:
            open_ = None
        else:
            open_ = (*open_[:3], open_[3] - 1)
    return None if first is None else replace(first, reports=reports)
