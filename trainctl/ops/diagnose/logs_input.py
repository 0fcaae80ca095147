"""The log inputs of `trainctl diagnose` (called by trainctl.ops.diagnose.diagnosis).

- read_log_file, parse_pasted_log: `trainctl diagnose some.log` on one pasted log, rank log or kernel log
  (plain or .gz), read once (NCCL's init lines are parsed from the same text); rank and host come
  from the text itself ([rankN]:, Ray ip, pdsh/syslog/NCCL host prefixes).
- parse_run_dir_logs: a run dir's or dataset's logs/H/rank-R.log (rank R on host H from the path) and
  kernel/H/dmesg.txt (host H), parsed into log_events when no parsed table is there; a line there
  that names a host which is not one of run.json's hosts is attributed to H (original name kept
  in `fields` as host_as_logged / culprit_host_as_logged). A pasted single log keeps what the
  text says.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path

import pyarrow as pa

from trainctl.errors import InputError
from trainctl.findings import Finding
from trainctl.rundir import RunInfo
from trainctl.schemas import SignalKind

__all__ = ["read_log_file", "parse_pasted_log", "parse_run_dir_logs", "quiet_log_note", "fresh_log_note"]


def read_log_file(path: Path) -> str:
    """The log's text (a .gz decompressed), read once for every parser of a pasted log."""
    # The log parser is imported where logs are parsed: it compiles ~150 signatures (~40 ms), which
    # a diagnosis of tables alone (the 49M-row straggler benchmark) does not need.
    from trainctl.collectors import logs as _logs

    try:
        text = _logs.read_log_text(path)
    except OSError as exc:
        raise InputError(
            f"{path}: cannot read the log file ({exc.strerror or exc}); check the path and its permissions"
        ) from exc
    if (what := _not_a_log(text)) is not None:
        raise InputError(f"{path}: {what}")
    return text


# C0 control characters that no text log is made of (tab, newline, carriage return, escape, backspace and
# form feed are: terminals and progress bars print them). NUL is counted apart: a crash can leave a log's
# unwritten blocks as NULs (delayed allocation), so a short log followed by 64 KiB of them is still a log.
# Executables and libraries: 23-42% of their first 8 KiB's other characters are these (ls, bash, libc,
# python3); a log that is not UTF-8 (GBK, Latin-1) decodes to U+FFFD, not to these.
_BINARY = str.maketrans("", "", "".join(chr(c) for c in range(1, 32) if chr(c) not in "\t\n\r\x1b\b\f"))
_HEAD_CHARS = 8192
_BINARY_SHARE = 0.1


def _not_a_log(text: str) -> str | None:
    """What a file handed over as a log is instead, when its start is not text: a Parquet file has a folder to
    pass, anything else is said to be binary (a Flight Recorder dump is told apart before: detect_input). Only the
    start is read."""
    head = text[:_HEAD_CHARS]
    if head.startswith("PAR1"):
        return "a Parquet file, not a log; pass the run dir (run.json) or the dataset (collect's --out) that holds it"
    chars = head.replace("\x00", "")
    controls = len(chars) - len(chars.translate(_BINARY))
    if not head or (chars and controls <= _BINARY_SHARE * len(chars)):
        return None
    what = f"{controls} of its first {len(chars)} characters besides NUL are control bytes" if chars else "only NULs"
    return (
        f"binary data, not a text log ({what}); pass a log, a run dir, a collected dataset or a Flight Recorder "
        "dump folder"
    )


def parse_pasted_log(path: Path, text: str, *, live: bool = False) -> pa.Table:
    from trainctl.collectors import logs as _logs

    # one file on its own: its end is where the run stopped printing, so a stopped loop is read too; not a log that is
    # watched as it grows (diagnose --watch): its end is where its live run has got to
    return _logs.parse_log_text(text, str(path), ends_where_it_stopped=not live)


def quiet_log_note(path: Path, table: pa.Table) -> str:
    """What a log file gave no finding for says where it ends (parse_pasted_log's table): no
    failure line was in it, and a stop the log does not explain (a hang, a kill from outside) is for the run's own
    records to show."""
    from trainctl.collectors.logs import LOG_END_KEY

    n, last = json.loads((table.schema.metadata or {}).get(LOG_END_KEY, b'[0, ""]'))
    if not n:
        return f"{path} holds no log lines"
    shown = last if len(last) <= 160 else last[:157] + "..."
    return (
        f"no failure line and no sign of a stop among the {n} lines read; the log ends at line {n}: {shown!r}."
        " If the job stopped there, the log does not say why: diagnose its run dir (timeline, heartbeats) or a"
        " py-spy dump of its ranks"
    )


# A log file written this recently may belong to a run that is still going (a healthy run logs every few steps;
# a hung one stops writing): its end may be where the run has got to, not where it stopped.
FRESH_LOG_S = 120.0


def fresh_log_note(path: Path, findings: Sequence[Finding], now_s: float) -> str | None:
    """A caveat for the readings of where a log on its own stopped (evidence read_from_absence) when the file was
    written in the last FRESH_LOG_S seconds; None when no such finding or an older file (or no mtime to read)."""
    if not any(f.evidence.get("read_from_absence") for f in findings):
        return None
    try:
        age_s = max(0.0, now_s - path.stat().st_mtime)
    except OSError:
        return None
    if age_s >= FRESH_LOG_S:
        return None
    return (
        f"{path} was last written {age_s:.0f} s ago: if its run is still going, the log ends where the run has got"
        " to, not where it stopped, and the findings read from where it ends (evidence read_from_absence) may not"
        f" hold; follow it with `trainctl diagnose --watch {path}`"
    )


def parse_run_dir_logs(root: Path, run: RunInfo | None) -> Mapping[SignalKind, pa.Table]:
    if not any((root / d).is_dir() for d in ("logs", "kernel")):
        return {}  # no logs to parse, and no log parser to import
    from trainctl.collectors import logs as _logs

    # A line under logs/H/ naming a host outside run.json (torchrun's banner prints the machine's
    # own hostname) is H's: the policy must only ever blame hosts of the run.
    table = _logs.parse_run_logs(root, known_hosts=[h.host for h in run.hosts] if run is not None else None)
    return {SignalKind.LOG_EVENTS: table} if table.num_rows else {}
