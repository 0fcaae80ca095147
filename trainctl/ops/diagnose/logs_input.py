"""The log inputs of `trainctl diagnose` (called by trainctl.ops.diagnose.diagnosis).

- load_log_file: `trainctl diagnose some.log` on one pasted log, rank log or kernel log; rank and
  host come from the text itself ([rankN]:, Ray ip, pdsh/syslog/NCCL host prefixes).
- parse_run_dir_logs: a run dir's or dataset's logs/H/rank-R.log (rank R on host H from the path) and
  kernel/H/dmesg.txt (host H), parsed into log_events when no parsed table is there; a line there
  that names a host which is not one of run.json's hosts is attributed to H (original name kept
  in `fields` as host_as_logged / culprit_host_as_logged). A pasted single log keeps what the
  text says.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

import pyarrow as pa

from trainctl.errors import InputError
from trainctl.rundir import RunInfo
from trainctl.schemas import SignalKind

__all__ = ["load_log_file", "parse_run_dir_logs", "quiet_log_note"]


def load_log_file(path: Path) -> pa.Table:
    # The log parser is imported where logs are parsed: it compiles ~150 signatures (~40 ms), which
    # a diagnosis of tables alone (the 49M-row straggler benchmark) does not need.
    from trainctl.collectors import logs as _logs

    try:
        # one file on its own: its end is where the run stopped printing, so a stopped loop is read too
        return _logs.parse_log_file(path, ends_where_it_stopped=True)
    except OSError as exc:
        raise InputError(
            f"{path}: cannot read the log file ({exc.strerror or exc}); check the path and its permissions"
        ) from exc


def quiet_log_note(path: Path, table: pa.Table) -> str:
    """What a log file gave no finding for says where it ends (read with the file, load_log_file's table): no
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


def parse_run_dir_logs(root: Path, run: RunInfo | None) -> Mapping[SignalKind, pa.Table]:
    if not any((root / d).is_dir() for d in ("logs", "kernel")):
        return {}  # no logs to parse, and no log parser to import
    from trainctl.collectors import logs as _logs

    # A line under logs/H/ naming a host outside run.json (torchrun's banner prints the machine's
    # own hostname) is H's: the policy must only ever blame hosts of the run.
    table = _logs.parse_run_logs(root, known_hosts=[h.host for h in run.hosts] if run is not None else None)
    return {SignalKind.LOG_EVENTS: table} if table.num_rows else {}
