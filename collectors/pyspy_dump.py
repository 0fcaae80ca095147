"""Live Python stacks of running ranks: `py-spy dump --pid PID` for each rank's pid on this host.

The pids come from ranks/rank-R.json (written by each rank at start); `ranks_command` prints those
files and `parse_ranks` keeps the ranks that say they run on this host. `command` dumps the ranks
whose process still exists; `parse` splits the output per rank (the text goes to
stacks/<host>/rank-R.pyspy.txt unchanged; the stacks collector parses it).
"""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass

__all__ = ["NO_PYSPY_EXIT", "RankProc", "ranks_command", "parse_ranks", "command", "parse"]

NO_PYSPY_EXIT = 127


@dataclass(frozen=True)
class RankProc:
    rank: int
    pid: int
    host: str | None


def ranks_command(run_dir: str) -> str:
    return (
        f"cd -- {shlex.quote(run_dir)} 2>/dev/null || exit 3\n"
        'for f in ranks/rank-*.json; do [ -f "$f" ] && cat -- "$f" && echo; done; exit 0'
    )


def parse_ranks(output: str, host: str) -> list[RankProc]:
    procs = []
    for line in output.splitlines():
        line = line.strip()
        if not line:
            continue
        try:
            d = json.loads(line)
            rp = RankProc(int(d["rank"]), int(d["pid"]), d.get("host"))
        except (ValueError, KeyError, TypeError):
            continue  # a rank file being rewritten; skip it rather than guess
        if rp.host in (None, host):
            procs.append(rp)
    return sorted(procs, key=lambda p: p.rank)


def command(procs: list[RankProc], nonce: str) -> str:
    # Only ints reach the shell. The marker names the rank, then py-spy's own output follows.
    body = "".join(
        f"if [ -d /proc/{p.pid} ]; then echo '@@{nonce} rank {p.rank}'; py-spy dump --pid {p.pid} 2>&1; fi\n"
        for p in procs
    )
    return f"command -v py-spy >/dev/null 2>&1 || exit {NO_PYSPY_EXIT}\n{body}exit 0"


def parse(output: str, nonce: str) -> dict[int, str]:
    """rank -> py-spy text."""
    out: dict[int, str] = {}
    chunks = re.split(rf"^@@{re.escape(nonce)} rank (\d+)\n", output, flags=re.M)
    for i in range(1, len(chunks) - 1, 2):
        out[int(chunks[i])] = chunks[i + 1]
    return out
