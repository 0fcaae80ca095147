"""Shell commands the launcher runs on each host about that host's own ranks, and only those
(issue 17 item 8: a run dir on a file system every host mounts).

rank_sweep_command kills what a stopped run left on the host; hang_dump_command dumps the host's
live ranks (trainctl.runtime.hang_dump with the host's name).

torchrun starts each worker in its own session, so a SIGKILLed agent leaves its ranks behind; the
launcher kills each rank's process group from the pid in `ranks/rank-R.json`. A run dir on a file
system that every host mounts (NFS, Lustre) holds every host's rank files, and a pid is only
meaningful on the machine that wrote it: the same number on another machine is some other
process. So the sweep a host runs kills a rank's group only when

- the rank file names this host (the launcher's name for it, TRAINCTL_HOST, which the rank wrote), and
- the process with that pid here carries this run's TRAINCTL_RUN_ID in its environment
  (/proc/PID/environ; a pid the kernel reused since, or another machine's number, does not).

The hang dump is scoped the same way: on a shared run dir another host's rank file names a pid
that means nothing here (py-spy would dump some other process under that rank's name), and its
status file is per host.

`kill -s SIG -- -PGID` is the POSIX form: dash (Debian's /bin/sh, some users' login shell)
refuses bash's `kill -KILL -- -PGID` ("Illegal number: -") and would kill nothing.

Pure: they return text for `sh -c` on the host; callers run it through trainctl.ops.remote.
"""

from __future__ import annotations

import shlex

__all__ = ["rank_sweep_command", "hang_dump_command"]


def rank_sweep_command(run_dir: str, host: str, run_id: str | None, *, with_agents: bool = False) -> str:
    """`sh` text that SIGKILLs the process group of each of this run's ranks on `host`; prints the count.

    `with_agents`: also kill the group of each rank's parent (its torchrun agent), as `stop` does
    for a run whose supervisor is gone. `run_id` None (a run dir without run.json) skips the
    environment check, never the host check.
    """
    rd, me = shlex.quote(run_dir), shlex.quote(host)
    ours = (
        f"tr '\\0' '\\n' < /proc/$p/environ 2>/dev/null | grep -qxF {shlex.quote(f'TRAINCTL_RUN_ID={run_id}')} || continue; "
        if run_id
        else ""
    )
    agent = (
        "a=$(ps -o ppid= -p $p 2>/dev/null | tr -d ' '); "
        '[ -n "$a" ] && [ "$a" != 1 ] && g=$(ps -o pgid= -p $a 2>/dev/null | tr -d \' \') && [ -n "$g" ] '
        "&& kill -s KILL -- -$g 2>/dev/null; "
        if with_agents
        else ""
    )
    return (
        f'n=0; for f in {rd}/ranks/rank-*.json; do [ -f "$f" ] || continue; '
        # The rank's own word for its host (written from TRAINCTL_HOST), then its pid.
        'h=$(sed -n \'s/.*"host": *"\\([^"]*\\)".*/\\1/p\' "$f"); '
        f'[ "$h" = {me} ] || continue; '
        'p=$(sed -n \'s/.*"pid": *\\([0-9]*\\).*/\\1/p\' "$f"); [ -n "$p" ] || continue; '
        f"{ours}"
        f"{agent}"
        "kill -s KILL -- -$p 2>/dev/null && n=$((n+1)); "
        "done; echo $n"
    )


def hang_dump_command(python: str, run_dir: str, host: str) -> str:
    """`sh` text that dumps `host`'s live ranks of the run (Flight Recorder, stacks); prints "OK TOTAL"."""
    return f"{shlex.quote(python)} -m trainctl.runtime.hang_dump {shlex.quote(run_dir)} {shlex.quote(host)}"
