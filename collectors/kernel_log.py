"""Kernel log NVRM/Xid lines: `dmesg`, falling back to `journalctl -k`; raw lines kept.

The lines are saved as kernel/<host>/dmesg.txt; the log collector parses them into log_events.
A permission error (dmesg_restrict, no journal access) is recorded in collection_status, never fatal.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["COMMAND", "KernelLog", "parse", "command"]

# The whole buffer is read into a shell variable so a failure of dmesg can fall back to journalctl;
# only NVRM/Xid lines travel back.
# Bounded on the host: journalctl reads at most MAX_JOURNAL_LINES (dmesg's ring buffer is bounded by
# the kernel), and at most MAX_LINES matching lines come back, the newest.
MAX_JOURNAL_LINES = 500_000
MAX_LINES = 20_000
COMMAND = (
    "if k=$(dmesg --time-format iso 2>&1); then s=dmesg; "
    f"elif k=$(journalctl -k --no-pager -q -o short-iso -n {MAX_JOURNAL_LINES} 2>&1); then s=journalctl; "
    "else printf '%s\\n' \"$k\" | head -n 3; exit 1; fi\n"
    f"echo \"#source $s\"; printf '%s\\n' \"$k\" | grep -E 'NVRM|Xid' | tail -n {MAX_LINES}; exit 0"
)

# Fault drills (`trainctl launch --inject xid:host=H,...`) cannot make a real GPU fall off the bus,
# so the trainer writes the NVRM line the driver would print to drills/H/kernel.log under the run
# dir on host H (trainctl.rundir.drill_kernel_log_path). It exists only for drills: collect reads it
# as a second kernel-log source so that the rest of the path (log analyzer, policy, eviction) is
# exercised exactly as for a real Xid.


def command(run_dir: str | None = None, host: str | None = None) -> str:
    """COMMAND, plus host H's drill kernel log under `run_dir` when both are given (its lines are
    appended, and it alone suffices when dmesg/journalctl are not readable, as in containers)."""
    if not run_dir or not host:
        return COMMAND
    import shlex

    from trainctl.rundir import drill_kernel_log_path

    drill = shlex.quote(str(drill_kernel_log_path(run_dir, host)))
    return (
        f'd={drill}; dl=; if [ -s "$d" ]; then dl=$(grep -E \'NVRM|Xid\' "$d" | tail -n {MAX_LINES}); fi\n'
        "if k=$(dmesg --time-format iso 2>&1); then s=dmesg; "
        f"elif k=$(journalctl -k --no-pager -q -o short-iso -n {MAX_JOURNAL_LINES} 2>&1); then s=journalctl; "
        'elif [ -n "$dl" ]; then k=; s=drill; '
        "else printf '%s\\n' \"$k\" | head -n 3; exit 1; fi\n"
        f"echo \"#source $s\"; printf '%s\\n' \"$k\" | grep -E 'NVRM|Xid' | tail -n {MAX_LINES}; "
        'if [ -n "$dl" ]; then printf \'%s\\n\' "$dl"; fi; exit 0'
    )


_PERMISSION = re.compile(r"not permitted|permission denied|insufficient permissions|not seeing messages", re.I)


@dataclass(frozen=True)
class KernelLog:
    source: str | None  # dmesg | journalctl, None when neither could be read
    lines: tuple[str, ...]
    error: str | None = None
    error_type: str | None = None  # permission | command_failed


def parse(output: str, exit_code: int) -> KernelLog:
    text = output.strip("\n")
    if exit_code != 0:
        first = text.splitlines()[0] if text else f"exit {exit_code}"
        etype = "permission" if _PERMISSION.search(text) else "command_failed"
        return KernelLog(None, (), f"cannot read the kernel log: {first}", etype)
    lines = text.splitlines()
    source = None
    if lines and lines[0].startswith("#source "):
        source = lines.pop(0)[len("#source ") :].strip()
    return KernelLog(source, tuple(lines))
