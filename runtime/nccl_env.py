"""The environment that makes torch's NCCL Flight Recorder record, and dump into the run dir.

Every name below is read by torch 2.13 (torch/include/torch/csrc/distributed/c10d/ in the wheel,
and libtorch_cpu's strings):

- `TORCH_FR_BUFFER_SIZE` (alias `TORCH_NCCL_TRACE_BUFFER_SIZE`): ring-buffer entries per recorder
  (FlightRecorder.hpp: `getCvarInt({"TORCH_FR_BUFFER_SIZE", "TORCH_NCCL_TRACE_BUFFER_SIZE"},
  2000)`); 0 turns recording off.
- `TORCH_NCCL_DUMP_ON_TIMEOUT=1` with `TORCH_NCCL_ENABLE_MONITORING=1`: ProcessGroupNCCL's
  watchdog dumps the recorder when a collective times out or fails (ProcessGroupNCCL.hpp: "must be
  set together with TORCH_NCCL_ENABLE_MONITORING=1 and TORCH_NCCL_TRACE_BUFFER_SIZE > 0").
- `TORCH_FR_DUMP_TEMP_FILE` (alias `TORCH_NCCL_DEBUG_INFO_TEMP_FILE`): the dump's file prefix; the
  writer appends the global rank (`DebugInfoWriter::getWriter`: `<prefix><rank>`, default
  `~/.cache/torch/comm_lib_trace_rank_`) and opens it with std::ofstream, which does not create
  folders - `ensure_dump_dir` makes it on the rank's host.

NCCL's own log (issue 16 item 2): `NCCL_DEBUG=WARN` unless the user chose a level (INFO, with
NCCL_DEBUG_SUBSYS=INIT,NET, prints the init lines trainctl.collectors.nccl_topology reads: which
network, which transport to each peer, the net plugin, GPU Direct RDMA), and each rank's output in
its own file, logs/<host>/nccl-rank-<R>.log (rundir.nccl_log_path). NCCL_DEBUG_FILE only expands %h
(hostname) and %p (pid) (NCCL src/debug.cc), so the launcher passes the folder in
TRAINCTL_NCCL_DEBUG_DIR and each rank names its file itself (`point_debug_file`, from
trainctl.runtime.debug_server.start, right after init_process_group). NCCL opens the file on its
first log line (ncclDebugInit), which comes with the first communicator; torch creates NCCL
communicators lazily, after that point, unless init_process_group got a device_id (eager init):
then NCCL's lines go to the rank's stdout, i.e. its rank log, as without trainctl.

So the watchdog's own dump lands at `RUN/fr/<host>/nccl_trace_rank_<R>`, next to the dumps
trainctl takes from live ranks, and `diagnose` reads both (one per recorder and rank, the newest).
Values a user already set are left alone. Not set: `TORCH_NCCL_DEBUG_INFO_PIPE_FILE` (it mkfifo()s
at group creation and a failure there aborts the job; the live dump goes through the worker
server instead) and `TORCH_NCCL_ENABLE_TIMING` (start events give the "started" state the
analyzer uses, but ProcessGroupNCCL.hpp warns the extra event queries raise the chance of a
watchdog hang; set it yourself to get them).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, MutableMapping
from pathlib import Path

from trainctl.rundir import fr_dump_dir, nccl_log_path, stacks_dir

__all__ = [
    "DUMP_FILE_PREFIX",
    "NCCL_DEBUG_DIR_ENV",
    "TORCH_DEBUG_DIR_ENV",
    "flight_recorder_env",
    "nccl_debug_env",
    "rank_env",
    "ensure_dump_dir",
    "point_debug_file",
]

log = logging.getLogger(__name__)

# <prefix><rank>: a name the Flight Recorder loader reads as the NCCL recorder of rank <rank>.
DUMP_FILE_PREFIX = "nccl_trace_rank_"
DEFAULT_BUFFER_SIZE = 2000  # torch 2.13's own default, stated so a dump's size is never a guess
NCCL_DEBUG_DIR_ENV = "TRAINCTL_NCCL_DEBUG_DIR"
TORCH_DEBUG_DIR_ENV = "TRAINCTL_TORCH_DEBUG_DIR"
NCCL_LEVELS = ("VERSION", "WARN", "INFO", "TRACE")

# Each setting with the aliases torch reads for it; one already set (under any alias) is kept.
_ALIASES: tuple[tuple[str, ...], ...] = (
    ("TORCH_FR_BUFFER_SIZE", "TORCH_NCCL_TRACE_BUFFER_SIZE"),
    ("TORCH_NCCL_DUMP_ON_TIMEOUT",),
    ("TORCH_NCCL_ENABLE_MONITORING",),
    ("TORCH_FR_DUMP_TEMP_FILE", "TORCH_NCCL_DEBUG_INFO_TEMP_FILE"),
)


def flight_recorder_env(
    run_dir: str | os.PathLike[str], host: str, already: Mapping[str, str] | None = None
) -> dict[str, str]:
    """Variables to add to a rank's environment on `host` (run dir as that host sees it).

    `already`: the environment the ranks get otherwise (os.environ, --env); a setting present
    there under any of its names is not returned, so the user's choice wins.
    """
    already = already or {}
    prefix = str(fr_dump_dir(run_dir, host) / DUMP_FILE_PREFIX)
    values = {
        "TORCH_FR_BUFFER_SIZE": str(DEFAULT_BUFFER_SIZE),
        "TORCH_NCCL_DUMP_ON_TIMEOUT": "1",
        "TORCH_NCCL_ENABLE_MONITORING": "1",
        "TORCH_FR_DUMP_TEMP_FILE": prefix,
    }
    out: dict[str, str] = {}
    for names in _ALIASES:
        if any(n in already for n in names):
            continue
        for n in names:  # every alias, so torch builds that read only the old name agree
            out[n] = values[names[0]]
    return out


def ensure_dump_dir(environ: Mapping[str, str] | None = None) -> Path | None:
    """Create the folder of the watchdog's dump prefix (the writer will not); returns it.

    Runs in each rank at start-up (trainctl.runtime.debug_server.start), on the rank's own host.
    """
    environ = os.environ if environ is None else environ
    prefix = environ.get("TORCH_FR_DUMP_TEMP_FILE") or environ.get("TORCH_NCCL_DEBUG_INFO_TEMP_FILE")
    if not prefix:
        return None
    folder = Path(prefix).parent
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        log.warning("cannot create %s for the NCCL watchdog's Flight Recorder dump: %s", folder, exc)
        return None
    return folder


def nccl_debug_env(
    run_dir: str | os.PathLike[str], host: str, already: Mapping[str, str] | None = None, *, level: str = "WARN"
) -> dict[str, str]:
    """NCCL_DEBUG (WARN by default; INFO adds the init lines) and where each rank's NCCL log goes.

    A level, subsystem list or file the user set is kept (their NCCL_DEBUG_FILE wins over ours).
    """
    already = already or {}
    level = level.upper()
    if level not in NCCL_LEVELS:
        raise ValueError(f"NCCL debug level {level!r}: use one of {', '.join(NCCL_LEVELS)}")
    out: dict[str, str] = {}
    if "NCCL_DEBUG" not in already:
        out["NCCL_DEBUG"] = level
    if level in ("INFO", "TRACE") and "NCCL_DEBUG_SUBSYS" not in already:
        # NCCL's default mask is INIT,BOOTSTRAP,ENV; GPU Direct RDMA per HCA is logged under NET.
        out["NCCL_DEBUG_SUBSYS"] = "INIT,NET"
    if "NCCL_DEBUG_FILE" not in already:
        out[NCCL_DEBUG_DIR_ENV] = str(nccl_log_path(run_dir, host, 0).parent)
    return out


def rank_env(
    run_dir: str | os.PathLike[str], host: str, already: Mapping[str, str] | None = None, *, nccl_debug: str = "WARN"
) -> dict[str, str]:
    """Everything debug-related a rank on `host` gets: Flight Recorder dumps, NCCL's own log, and
    TRAINCTL_TORCH_DEBUG_DIR, the folder to give torch's debug server for its periodic dumps
    (`start_debug_server(dump_dir=os.environ["TRAINCTL_TORCH_DEBUG_DIR"])`): the host's stacks
    folder, which collect brings back as that host's and diagnose reads."""
    return {
        **flight_recorder_env(run_dir, host, already),
        **nccl_debug_env(run_dir, host, already, level=nccl_debug),
        TORCH_DEBUG_DIR_ENV: str(stacks_dir(run_dir, host)),
    }


def point_debug_file(rank: int, environ: MutableMapping[str, str] | None = None) -> Path | None:
    """In the rank: NCCL_DEBUG_FILE=<TRAINCTL_NCCL_DEBUG_DIR>/nccl-rank-<rank>.log (folder created).

    Nothing happens when the launcher set no folder or the user set NCCL_DEBUG_FILE themselves.
    """
    environ = os.environ if environ is None else environ
    folder = environ.get(NCCL_DEBUG_DIR_ENV)
    if not folder or environ.get("NCCL_DEBUG_FILE"):
        return None
    path = Path(folder) / f"nccl-rank-{rank}.log"
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        log.warning("cannot create %s for NCCL's log (it stays on stdout): %s", path.parent, exc)
        return None
    environ["NCCL_DEBUG_FILE"] = str(path)
    return path
