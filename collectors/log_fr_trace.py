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
from dataclasses import dataclass

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
    """The first "Not all ranks joining collective" report with its missing ranks, from (line_no, text) lines."""
    rows = list(lines)
    first: FrTraceMissing | None = None
    reports = 0
    for i, (n, text) in enumerate(rows):
        if "Not all ranks joining collective" not in text or not (h := _HEADER.search(text)):
            continue
        reports += 1
        if first is not None:
            continue
        coll, missing = h["coll"], None
        for _, t in rows[i : i + 1 + LOOKAHEAD]:
            if coll is None and (c := _COLLECTIVE.match(t)):
                coll = c["coll"]
            if (m := _MISSING.search(t)) is not None:
                missing = tuple(sorted({int(r) for r in re.findall(r"\d+", m["ranks"])}))[:MAX_RANKS]
                break
        if missing:
            seq = h["seq26"] or h["seq25"]
            first = FrTraceMissing(missing, coll, int(seq) if seq else None, n, text.strip(), 0)
    if first is None:
        return None
    return FrTraceMissing(first.missing_ranks, first.collective, first.seq, first.line_no, first.text, reports)
