"""How a log reaches the user: the launchers and shippers that rewrite every line (issue 13 item 3).

The same failure arrives through torchrun's tee, srun --label, pdsh, journald, a Kubernetes container
log file, docker compose or mpirun's tag, each of which puts its own text in front of every line; or
wrapped in a shipper's JSON (docker's json-file, `journalctl -o json`); with CRLF endings; wrapped
by the terminal it was copied from; or HTML-escaped from a rendered page. And an excerpt is a part
of a longer log: a healthy run's start-up lines in front of it change nothing either. A verdict must not depend on the carrier: bench/logs_accuracy.py
`--carriers` scores every split under each, tests/unit/test_log_carriers.py holds the dev rows to it.

CARRIERS: name -> (how the carrier rewrites a log, whether it names a host or a rank of its own).
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Callable
from pathlib import Path

from trainctl.collectors.log_records import join_wraps, wrap_width

# name -> (the text the printer puts in front of a line, whether it names a host or a rank of its own)
PREFIXES: dict[str, tuple[str, bool]] = {
    # torch/distributed/elastic/multiprocessing/api.py (--tee): "[{role}{local_rank}]:"
    "torchrun_tee": ("[default0]:", False),
    # moreutils ts(1) default format "%b %d %H:%M:%S "
    "ts": ("Nov 27 01:02:03 ", False),
    # GitHub Actions / Azure Pipelines runner logs: ISO time with 7 fractional digits
    "ci_runner": ("2026-11-27T01:02:03.1234567Z ", False),
    # horovodrun's gloo launcher (horovod/runner/common/util/safe_shell_exec.py): "[RANK]<stream>:"
    "horovod_gloo": ("[3]<stderr>:", True),
    # Determined's launchers (harness/determined/launch/wrap_rank.py): "[rank=RANK] "
    "determined": ("[rank=5] ", True),
    # Go's log.LstdFlags (src/log/log.go formatHeader): "2009/01/23 01:23:23 "
    "go_log": ("2026/11/27 01:02:03 ", False),
    # Slurm srun --label: the task id right-aligned to the widest ("%*d: ")
    "srun_label": ("  3: ", False),
    # kubernetes pkg/kubelet/kuberuntime/logs/logs.go parseCRILog: "TIMESTAMP STREAM TAG CONTENT"
    "cri_file": ("2026-11-27T01:02:03.123456789Z stderr F ", False),
    # the CloudWatch Logs console's table copied as text: "  | TIMESTAMP | message"
    "cloudwatch_console": ("  | 2026-11-27T01:02:03.208-07:00 | ", False),
    # docker/compose cmd/formatter/logs.go: the container name padded to the widest, then " | "
    "compose": ("trainer-1  | ", False),
    # a paste from a code block indented by four spaces
    "indent": ("    ", False),
    # systemd src/shared/logs-show.c output_short: "TIME HOST IDENT[PID]: "
    "journald": ("Nov 27 01:02:03 gpu-node-7 python3[4242]: ", True),
    # journalctl -o short-iso / rsyslog's RSYSLOG_FileFormat: "RFC3339-TIME HOST IDENT[PID]: "
    "journald_iso": ("2026-11-27T01:02:03.123456+00:00 gpu-node-7 python3[4242]: ", True),
    # pdsh(1): "HOST: "
    "pdsh": ("gpu-node-3: ", True),
    # Open MPI --tag-output as SageMaker's mpirun prints it: "[JOB,mpirank:RANK,HOST]<stream>:"
    "sagemaker_mpi": ("[1,mpirank:3,algo-2]<stderr>:", True),
}
_QUOTE = re.compile(r"^(?:> ?)+")  # a markdown quote is the paste's, put on after the launcher's prefix


def _lines(log: str) -> list[str]:
    """The log's whole lines: a launcher writes them before any terminal wraps them."""
    return [line for _, line in join_wraps(log.split("\n"))]


def prefixed(log: str, prefix: str) -> str:
    out = []
    for line in _lines(log):
        quote = _QUOTE.match(line)
        q = quote.group(0) if quote else ""
        out.append(q + prefix + line[len(q) :] if line[len(q) :].strip() else line)
    return "\n".join(out)


def docker_json_file(log: str) -> str:
    """moby daemon/logger/jsonfilelog: one JSON object per line, the line (with its newline) in "log"."""
    stamp = "2026-11-27T01:02:03.123456789Z"
    return "\n".join(json.dumps({"log": ln + "\n", "stream": "stderr", "time": stamp}) for ln in _lines(log))


def journal_json(log: str) -> str:
    """journalctl -o json (systemd man journalctl, systemd.journal-fields): MESSAGE and _HOSTNAME."""
    rows = ({"_HOSTNAME": "gpu-node-7", "SYSLOG_IDENTIFIER": "python3", "MESSAGE": ln} for ln in _lines(log))
    return "\n".join(json.dumps(r) for r in rows if r["MESSAGE"].strip())


_H100_RUN = Path(__file__).resolve().parents[1] / "tests/fixtures/gpu_h100/trainer_run/logs/node01/rank-0.log"
# What a healthy run prints before anything fails, each line from the code that prints it: torchrun's
# OMP banner (torch 2.13 torch/distributed/run.py), c10d's IPv6 socket warnings (torch
# csrc/distributed/c10d/socket.cpp, printed on hosts without IPv6), NCCL's init lines (2.30.7
# src/bootstrap.cc, src/plugin/net.cc, src/init.cc, src/transport/net_socket.cc; libibverbs missing is
# INFO since 2.5), then a healthy reference-trainer run recorded on an H100 (its warnings say "hang"
# and "deprecated"). On its own it gives no finding; in front of an excerpt it changes no verdict.
HEALTHY_PREAMBLE = (
    """WARNING:torch.distributed.run:
*****************************************
Setting OMP_NUM_THREADS environment variable for each process to be 1 in default, to avoid your system \
being overloaded, please further tune the variable for optimal performance in your application as needed.\x20
*****************************************
[W socket.cpp:464] [c10d] The server socket cannot be initialized on [::]:29500 (errno: 97 - Address family \
not supported by protocol).
[W socket.cpp:697] [c10d] The client socket cannot be initialized to connect to [localhost]:29500 (errno: 97 - \
Address family not supported by protocol).
node01:1234:1234 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>
node01:1234:1234 [0] NCCL INFO NET/Plugin : No plugin found (libnccl-net.so), using internal implementation
node01:1234:1234 [0] NCCL INFO cudaDriverVersion 12020
NCCL version 2.18.1+cuda12.1
node01:1234:1250 [0] NCCL INFO Failed to open libibverbs.so[.1]
node01:1234:1250 [0] NCCL INFO NET/Socket : Using [0]eth0:10.0.0.1<0>
node01:1234:1250 [0] NCCL INFO Using network Socket
node01:1234:1250 [0] NCCL INFO ncclCommInitRank comm 0x55d0c8a0 rank 0 nranks 2 cudaDev 0 nvmlDev 0 busId 1000 \
commId 0x1a2b3c4d - Init COMPLETE
"""
    + _H100_RUN.read_text().rstrip("\n")
    + "\n"
)


def with_preamble(log: str) -> str:
    """HEALTHY_PREAMBLE in front of the excerpt, wrapped as the excerpt is where a terminal wrapped it
    (one terminal prints both)."""
    width = wrap_width(log.split("\n"))
    return (terminal_wrap(HEALTHY_PREAMBLE, width) + "\n" if width else HEALTHY_PREAMBLE) + log


def terminal_wrap(log: str, width: int) -> str:
    """A paste copied off a terminal that wrapped long lines at `width` and padded each line's last
    row with spaces to the width (the shape of tests/fixtures/logs/real_logs_dev.jsonl wd-13)."""
    out = []
    for ln in _lines(log):
        rows = [ln[i : i + width] for i in range(0, len(ln), width)] or [ln]
        if len(rows) > 1:
            rows[-1] = rows[-1].ljust(width)
        out += rows
    return "\n".join(out)


CARRIERS: dict[str, tuple[Callable[[str], str], bool]] = {
    **{name: ((lambda log, p=prefix: prefixed(log, p)), own) for name, (prefix, own) in PREFIXES.items()},
    "docker_json_file": (docker_json_file, False),
    "journal_json": (journal_json, True),
    "crlf": (lambda log: log.replace("\n", "\r\n"), False),
    # nvidia-smi's 91-column table cut at 80 columns is not read back (its rows are no longer rows)
    "terminal_wrap_120": (lambda log: terminal_wrap(log, 120), False),
    "terminal_wrap_200": (lambda log: terminal_wrap(log, 200), False),
    "html_escaped": (lambda log: html.escape(log, quote=True), False),
    # its lines name node01 and rank 0, which may join an excerpt's culprit
    "healthy_preamble": (lambda log: with_preamble(log), True),
}
