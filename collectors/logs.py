"""Log signatures: classify lines of rank logs, kernel logs and pasted logs into log_events.

A pure parser: text in, a `log_events` table out (trainctl.schemas), plus a `host` column (the
host that printed the line, from the path or the text; trainctl.dataset readers add the same
column from the partition). Formats drift across PyTorch and NCCL versions (the table in
tests/fixtures/logs/README.md), so each signature matches the stable core of a message and
tolerates the era-specific parts around it.

Each line goes through three steps:

1. Noise removal: ANSI colours, tqdm bars glued with `\\r`, markdown quotes and auto-links,
   terminal wraps (continuation lines joined back), and line prefixes that carry who printed the
   line: `[rankN]:`, Ray `(Actor pid=N, ip=X)`, pdsh `host: `, NCCL `host:pid:tid [dev]`,
   syslog `Mon DD hh:mm:ss host kernel:`, dmesg `[ 12.3]` / `[Day Mon DD hh:mm:ss YYYY]`.
2. Signatures (`SIGNATURES`, the table in trainctl.collectors.log_signatures, one module per family of
   printers; documented in docs/log-signatures.md): every signature is run
   on every line (a pasted log may have several messages collapsed into one line); a keyword
   prefilter keeps this one regex scan per ordinary line.
3. Blame: what the line alone proves. `self`: the failure happened in the process/host that
   printed it (its own OOM, CUDA error, Xid), so the culprit is that rank/host when the text or
   the path says who that is. `peer`: the line names a remote end as the failing side (a
   connection reset by a peer, an IB retry-exceeded completion, an unreachable rendezvous
   endpoint). `none`: the line only says who noticed (a watchdog timeout names its reporter; the
   rank that never arrived prints nothing).
"""

from __future__ import annotations

import html
import json
import logging
import os
import re
import zlib
from collections.abc import Collection, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa

from trainctl.collectors.log_coll_mismatch import read_coll_mismatch
from trainctl.collectors.log_identity import complete_culprits, read_identity
from trainctl.collectors.log_net_mismatch import read_net_mismatch
from trainctl.collectors.log_progress import INTERRUPTED, read_progress
from trainctl.collectors.log_signatures import SIGNATURES, XID_MEANINGS
from trainctl.collectors.log_signatures.process_exits import exit_post
from trainctl.collectors.log_signatures.rule import PCI, Blame, C, Event, K, S, Signature, plausible_host
from trainctl.collectors.log_vocabulary import kind_from_words
from trainctl.schemas import SignalKind, empty_table, schema_for

__all__ = [
    "Blame",
    "Signature",
    "SIGNATURES",
    "XID_MEANINGS",
    "clean_lines",
    "classify_line",
    "parse_log_text",
    "parse_log_file",
    "parse_run_logs",
    "attribute_to_host",
]

logger = logging.getLogger(__name__)

HOST_COLUMN = "host"

_BY_NAME = {s.name: s for s in SIGNATURES}
# Keyword gate: a signature's regex runs only on lines holding one of its keywords (lower case).
_KEYWORDS = tuple(sorted({k for s in SIGNATURES for k in s.keywords}))
# Every ordinary line is tested against each keyword, so only the keywords that contain no other one are
# tested first; a keyword containing another ("nan iterations" holds "nan") can only be on a line where that
# one is, so it is tested on those lines alone. The hits are the same; the per-line tests are fewer.
_FIRST_KEYWORDS = tuple(k for k in _KEYWORDS if not any(o != k and o in k for o in _KEYWORDS))
_KEYWORDS_WITHIN: dict[str, tuple[str, ...]] = {
    a: tuple(k for k in _KEYWORDS if k != a and a in k) for a in _FIRST_KEYWORDS
}
# keyword -> positions in SIGNATURES (ints: a Signature's dataclass __eq__ compares every field, which made
# the candidates' dedupe and SIGNATURES.index the costliest part of classifying an ordinary metric line)
_BY_KEYWORD: dict[str, list[int]] = {}
for _i, _s in enumerate(SIGNATURES):
    for _k in _s.keywords:
        _BY_KEYWORD.setdefault(_k, []).append(_i)

# ---------------------------------------------------------------------------------------------
# Noise removal and line prefixes
# ---------------------------------------------------------------------------------------------
_ANSI_RE = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07]*\x07")
_PROGRESS_RE = re.compile(r"[^\r\n|]{0,80}?\d{1,3}%\|[^|\n]{0,200}\|[^\[\n]{0,60}(?:\[(?P<r_bar>[^\]\n]{0,400})\])?")
# tqdm's r_bar is "[{elapsed}<{remaining}, {rate_fmt}{postfix}]" (tqdm/std.py format_meter): the
# postfix holds the metrics a trainer sets on its bar (Lightning's "loss=nan, v_num=3"), kept as text.
_TQDM_POSTFIX = re.compile(r"^[^,]*,\s*[^,]*?(?:it/s|s/it|/s)\s*,\s*(?P<postfix>.+)$")


def _progress_postfix(m: re.Match[str]) -> str:
    """A tqdm bar removed, its postfix metrics kept."""
    r_bar = m.group("r_bar") or ""
    pm = _TQDM_POSTFIX.match(r_bar)
    return f" {pm.group('postfix')} " if pm else " "


_MD_QUOTE_RE = re.compile(r"^\s{0,3}(?:[+-]?\s?>\s?)+")
# Link text excludes "[" and is bounded: `[^\]\n]+` let every "[" of a long run of "[" scan to the end of
# the line (quadratic: a 100 KB line of "[" took 44 s).
_MD_LINK_RE = re.compile(r"\[([^\[\]\n]{1,500})\]\(https?://[^)\s]{0,2000}\)")
_RAY_RE = re.compile(r"\((?:(?P<actor>[\w.:-]+) )?pid=(?P<pid>\d+)(?:, ip=(?P<ip>[\w.:-]+))?\)\s?")

# Prefixes peeled off the start of a line, in any order; each may set rank/host/ts.
_PREFIXES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("grep_file", re.compile(r"^(?P<file>[\w./-]+\.(?:log|txt|out|err)):(?=\S)")),
    ("line_counter", re.compile(r"^\[\d+\]\s(?=\S)")),
    ("rank_world", re.compile(r"^\[(?P<rank>\d{1,6})/(?P<world>\d{1,6})\]")),
    # An ISO time, bracketed or not, maybe followed by ":" (log shippers: "2019-06-02T16:13:44.884Z: <line>"),
    # or Go's log.LstdFlags time ("2009/01/23 01:23:23 ", src/log/log.go formatHeader).
    (
        "iso_ts",
        re.compile(
            r"^\[?(?P<ts>\d{4}[-/]\d\d[-/]\d\d[ T_]\d\d:\d\d:\d\d(?:[.,]\d+)?)(?: ?(?:Z|[+-]\d\d:?\d\d))?\]?:?\s*"
        ),
    ),
    # A bare clock time, as Jenkins' Timestamper plugin (its default "HH:mm:ss" format) and `ts '%T'` prefix lines.
    ("clock_time", re.compile(r"^\[?\d\d:\d\d:\d\d(?:[.,]\d{1,9})?\]? (?=\S)")),
    ("dmesg_ctime", re.compile(r"^\[(?P<ctime>[A-Z][a-z]{2} [A-Z][a-z]{2}\s+\d{1,2} \d\d:\d\d:\d\d \d{4})\]\s*")),
    ("dmesg_uptime", re.compile(r"^\[\s*\d+\.\d+\]\s*")),
    (
        "syslog",
        re.compile(
            r"^[A-Z][a-z]{2}\s+\d{1,2} \d\d:\d\d:\d\d(?:\.\d+)?\s+(?:(?P<host>[\w.-]+)\s+(?=kernel:|[\w.@/-]+\[\d+\]:))?"
        ),
    ),
    # journalctl's short formats (systemd src/shared/logs-show.c output_short: "[time] HOST IDENT[PID]: MSG";
    # -o short-iso puts an ISO time first, peeled by iso_ts): the host and the printing program's tag.
    # Not a rank or device tag ("rank[3]: ", "GPU[0]: "), which frameworks print, nor the kernel's own
    # "COMM[PID]: segfault at ..." (arch/x86/mm/fault.c show_signal_msg), whose task is the message.
    (
        "journal_ident",
        re.compile(
            r"^(?:(?P<host>[\w.-]{1,253}) )?(?:(?!(?:rank|gpu|device|worker|node)\[)[\w.@/-]{1,64}\[\d{1,10}\]"
            # the kernel's own tag has no pid ("HOST kernel: ...", rsyslog's RFC 3339 file format after its time)
            r"|(?<= )kernel): (?!segfault at )",
            re.I,
        ),
    ),
    ("kernel_tag", re.compile(r"^kernel:\s*")),
    # A log copied from the CloudWatch console's table: "| TIMESTAMP | message", the time in its cell
    # (the copy sometimes glues the message to the time, without the second rule).
    (
        "console_cell",
        re.compile(r"^\|\s*\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:?\d\d)?(?:\s*\|)?\s*"),
    ),
    # A container log file as the kubelet writes it (kubernetes pkg/kubelet/kuberuntime/logs/logs.go
    # parseCRILog: "TIMESTAMP STREAM TAG CONTENT", TAG F for a full line, P for a partial one); the
    # time is peeled by iso_ts.
    ("cri_stream", re.compile(r"^(?:stdout|stderr) [FP] ")),
    # docker compose's log prefix (docker/compose cmd/formatter/logs.go: the container name padded
    # to the widest, then " | "; v1 names "svc_1", v2 "svc-1"): a container, not a host.
    # A line that ends on "|" is a table row, unless the container printed the table.
    ("compose", re.compile(r"^[A-Za-z0-9][\w.-]{0,120}?\s+\| (?:(?=[|+])|(?!.*\|\s*$))")),
    ("nccl_prefix", re.compile(r"^(?P<host>[\w.-]+):(?P<pid>\d+):(?P<tid>\d+) \[(?P<dev>\d+)\]\s*")),
    # torch's "[rank3]:" (also with its "[" lost where a paste's first character was cut: "rank3]:")
    ("rank_prefix", re.compile(r"^\[?rank(?P<rank>\d+)\]:\s?")),
    # Lightning (lightning_fabric/utilities/rank_zero.py rank_prefixed_message): "[rank: N] " with the global rank.
    ("lightning_rank", re.compile(r"^\[rank: (?P<rank>\d{1,6})\] ")),
    # kubectl logs --prefix: "[pod/NAME/CONTAINER] "; the pod is where the process ran.
    ("kubectl_prefix", re.compile(r"^\[pod/(?P<host>[\w.-]{1,253})/[\w.-]{1,63}\] ")),
    # Open MPI mpirun --tag-output (orte/mca/iof/base/iof_base_output.c): "[jobid,rank]<stdout>:".
    # SageMaker's mpirun names the rank and the host in the tag ("[1,mpirank:3,algo-2]<stderr>:", as
    # printed in huggingface/accelerate and sagemaker issue threads).
    (
        "mpi_tag",
        re.compile(r"^\[\d+,(?:mpirank:)?(?P<rank>\d+)(?:,(?P<host>[\w.-]{1,253}))?\]<(?:stdout|stderr|stddiag)>:\s?"),
    ),
    # horovodrun's gloo launcher (horovod/runner/common/util/safe_shell_exec.py prefix_connection:
    # "{time}[{index}]<{prefix}>:{line}", the index being the worker's rank in gloo_run).
    ("horovod_tag", re.compile(r"^\[(?P<rank>\d{1,6})\]<(?:stdout|stderr)>:\s?")),
    # Determined's launchers (harness determined/launch/wrap_rank.py, worker_process_wrapper.py):
    # "[rank={rank}] " in front of every line a worker prints.
    ("determined_rank", re.compile(r"^\[rank=(?P<rank>\d{1,6})\] ")),
    # A launcher's per-stream tag ("<name> [stderr] "): the name is a job/host label, not used as a host.
    ("stream_tag", re.compile(r"^[\w.-]{1,120} \[(?:stdout|stderr)\] ")),
    ("torchx", re.compile(r"^[\w-]+/\d+ \[(?P<local_rank>\d+)\]:")),
    ("elastic_tee", re.compile(r"^\[(?P<role>[a-z_]+)(?P<local_rank>\d+)\]:")),
    # Slurm's step daemon names itself after its node on stderr ("slurmstepd-<node>: error: ..."; a bare
    # "slurmstepd:" names none).
    ("slurmstepd", re.compile(r"^slurmstepd-(?P<host>[A-Za-z0-9](?:[\w.-]*[\w])?): (?=\S)")),
    # srun --label: "%*d: " (the task id, right-aligned). Kept as a field: a task index is neither a host nor,
    # under a per-node launcher (torchrun), a rank.
    # The printed line may itself start with spaces (a traceback's frames): "  3:   File ...".
    ("srun_label", re.compile(r"^(?P<task>\d{1,6}): (?=\s*\S)")),
    ("pdsh", re.compile(r"^(?P<host>[A-Za-z0-9](?:[\w.-]*[\w])?): (?=\s*\S)")),
)
_NOT_HOSTS = re.compile(
    r"(?:error|exception|warning|kernel|traceback|info|debug|nccl|nvrm|critical|fatal)$|^torch|^(?:file|line|note|hint)$"
    # the NVIDIA drivers' device prefixes ("nvidia-nvswitch3: SXid ...", common_nvswitch.h) and nvidia-ml-py's
    # exception classes ("pynvml.NVMLError_GpuIsLost: GPU is lost") are printers, not hosts
    r"|^nvidia-(?:nvswitch|peermem|modeset|uvm|drm)\d*$|\bNVMLError_"
    # a shell script's name in front of its error ("train.sh: line 12: ..."), not a host
    r"|\.(?:sh|bash|py)$"
    # Huawei CANN's error codes ("EH9999: ...", Ascend): a code, not a host (upper case only: "eb0001" may be a node)
    r"|(?-i:^E[A-Z]\d{4}$)",
    re.I,
)
_HOST_IN_LINE = re.compile(r"\[(?P<host>[A-Za-z][\w.-]*):pid=(?P<pid>\d+)\]")
_RANK_PREFIX_INNER = re.compile(r"\[rank(?P<rank>\d+)\]:")
_PG_TAG = re.compile(
    r"\[PG (?:ID )?(?P<pg>\d+)(?: PG GUID (?P<guid>\d+)(?:\((?P<guid_name>[^)]*)\))?)?(?: \((?P<desc>[^)]*)\))? Rank (?P<rank>\d+)\]"
)
_OLD_RANK_TAG = re.compile(r"\[Rank (?P<rank>\d+)\]")
# A line that starts a record (so it does not continue a wrapped one), after an optional per-task or per-host
# label (srun --label "  3: ", pdsh "node3: "): brackets, times (a bare clock time too), tracebacks, Python logging's default
# "LEVEL:logger:" format, NCCL's and the kernel's prefixes.
_RECORD_START = re.compile(
    r"^\s*(?:[\w.-]{1,64}: )?(?:\[|\(|>|\+|[IWEF](?:\d{4})?\d{4} |[A-Z][a-z]{2}\s+\d{1,2} \d\d:|\d{4}-\d\d-\d\d|\d\d:\d\d:\d\d |Traceback"
    r"|File \"|[\w.]+(?:Error|Exception|Warning):|(?:DEBUG|INFO|WARNING|ERROR|CRITICAL):[\w.]*:|"
    r"NCCL|NVRM|kernel:|[\w.-]+:\d+:\d+ \[|Exception raised|terminate called|CUDA kernel|For debugging|Compile with)"
)


# "=====" / "-----" banner rules, and table rows that end on their border ("| ... |", as nvidia-smi
# pads every row to one width), are never wrapped text.
# A per-host or per-task label in front (pdsh "node3: ", srun --label "  3: ") keeps a row a row:
# `pdsh -w ... nvidia-smi` is how a table of every host is usually fetched.
_RULE = re.compile(r"^\s*(?:[\w.-]{1,64}: )?(?:\W*|\|.*\|\s*)$")


@dataclass
class _Record:
    line_no: int
    text: str
    rank: int | None = None
    rank_basis: str | None = None
    host: str | None = None
    host_basis: str | None = None
    ts: datetime | None = None
    fields: dict[str, Any] = field(default_factory=dict)
    wrap_joined: bool = False  # several raw lines joined as one terminal-wrapped line (log_identity)


def _wrap_width(lines: list[str], padded: list[int] | None = None) -> int | None:
    """The terminal width a paste was wrapped at: a long length shared by several lines that each
    go on in a line that does not start a record, or one line's length when the line after it is
    its wrapped tail, padded with spaces to the same width (as a terminal's copy pads the last row
    of a wrapped line). Whole lines that happen to share a length (each followed by a blank line
    or a new record) set no width. `padded[i]` is _padded_run(lines, i) when the caller has them."""
    if padded is None:
        padded = [_padded_run(lines, i) for i in range(len(lines))]
    counts: dict[int, int] = {}
    for i, ln in enumerate(lines[:-1]):
        if len(ln) >= 60 and not ln.endswith("  ") and not _RULE.match(ln):
            if padded[i]:
                counts[len(ln)] = counts.get(len(ln), 0) + 2
            elif lines[i + 1].strip() and not _RECORD_START.match(lines[i + 1]):
                counts[len(ln)] = counts.get(len(ln), 0) + 1
    best = max(counts.items(), key=lambda kv: (kv[1], kv[0]), default=None)
    return best[0] if best and best[1] >= 2 else None


def _shape(line: str) -> str:
    """The opening of a line with digits masked: repeated records (per-rank greps, iteration
    tables) share it, a wrapped continuation does not."""
    return re.sub(r"\d", "0", line[:12])


MAX_WRAP_ROWS = 16  # rows of one wrapped line looked through for its padded last row


def _padded_run(lines: list[str], i: int) -> int:
    """How many rows after lines[i] are its terminal-wrapped continuation, read from the wrap's own
    evidence: rows of exactly its length, the last one padded with spaces to that width (0 if none)."""
    width = len(lines[i])
    if width < 60 or lines[i].endswith(" ") or _RULE.match(lines[i]):
        return 0
    for j in range(i + 1, min(len(lines), i + 1 + MAX_WRAP_ROWS)):
        if len(lines[j]) != width:
            return 0
        if lines[j].endswith(" "):
            return j - i if lines[j].strip() else 0
    return 0


def _join_wraps(lines: list[str]) -> list[tuple[int, str]]:
    """Join terminal-wrapped continuation lines back onto the line they were cut from.

    A line is a wrap when it is exactly the paste's wrap width (and does not end padded with
    spaces: the last fragment of a wrapped line is padded to the width); the next line continues
    it unless it starts like a new record or repeats the previous line's opening (tables, progress).
    A next line padded with spaces to exactly this line's length is its wrapped tail whatever it
    starts with (a paste may mix widths, and a word cut in two can look like a record: "XidC" /
    "riticalError: ...").
    """
    padded = [_padded_run(lines, i) for i in range(len(lines))]
    width = _wrap_width(lines, padded)
    out: list[tuple[int, str]] = []
    i = 0
    while i < len(lines):
        start, text = i + 1, lines[i]
        head = _shape(text)
        while i + 1 < len(lines):
            rows = padded[i]
            if not rows and (
                width
                and len(lines[i]) == width
                and not lines[i].endswith("  ")
                and not _RULE.match(lines[i])
                and lines[i + 1].strip()
                and not _RECORD_START.match(lines[i + 1])
                and _shape(lines[i + 1]) != head
            ):
                rows = 1
            if not rows:
                break
            text += "".join(lines[i + 1 : i + 1 + rows])
            i += rows
        out.append((start, text.rstrip()))
        i += 1
    return out


def _parse_ts(raw: str) -> datetime | None:
    for fmt in ("%Y-%m-%d %H:%M:%S.%f", "%Y-%m-%d %H:%M:%S", "%a %b %d %H:%M:%S %Y"):
        try:
            return datetime.strptime(raw, fmt).replace(tzinfo=UTC)
        except ValueError:
            continue
    return None


def _norm_ts(raw: str) -> str:
    return raw.replace("T", " ").replace("_", " ").replace(",", ".").replace("/", "-")


def _peel(text: str, rec: _Record) -> str:
    """Strip known prefixes from the start of `text`, recording what they say into `rec`."""
    for _ in range(8):
        for name, rx in _PREFIXES:
            m = rx.match(text)
            if not m or (m.end() == 0):
                continue
            g = m.groupdict()
            if name == "pdsh":
                h = g["host"]
                if _NOT_HOSTS.search(h) or not re.search(r"[\d.-]", h):
                    continue
                rec.host, rec.host_basis = h, "pdsh_prefix"
            elif name in ("syslog", "journal_ident", "nccl_prefix") and g.get("host"):
                rec.host, rec.host_basis = g["host"], f"{name}"
                if g.get("pid"):  # NCCL's printer pid: its init line says which rank it is (log_identity)
                    rec.fields["nccl_pid"] = int(g["pid"])
            elif name == "slurmstepd":
                rec.host, rec.host_basis = g["host"], "host_tag"
            elif name == "kubectl_prefix":
                rec.host, rec.host_basis = g["host"], name
            elif name == "srun_label":
                rec.fields["slurm_task"] = int(g["task"])
            elif name in ("rank_prefix", "rank_world", "mpi_tag", "lightning_rank", "horovod_tag", "determined_rank"):
                rec.rank, rec.rank_basis = int(g["rank"]), name
                if g.get("world"):
                    rec.fields["world_size"] = int(g["world"])
                if g.get("host"):  # SageMaker's mpirun tag
                    rec.host, rec.host_basis = g["host"], name
            elif name in ("torchx", "elastic_tee"):
                rec.fields["local_rank"] = int(g["local_rank"])
            elif name == "iso_ts":
                rec.ts = rec.ts or _parse_ts(_norm_ts(g["ts"]))
            elif name == "dmesg_ctime":
                rec.ts = rec.ts or _parse_ts(re.sub(r"\s+", " ", g["ctime"]))
            elif name == "grep_file":
                rec.fields["file"] = g["file"]
            text = text[m.end() :]
            if name == "nccl_prefix":
                text = _NCCL_UNTAGGED_LEVEL.sub(r"\g<site>NCCL \g<level> ", text, count=1)
            break
        else:
            return text
    return text


# NCCL before 2.3 (2.0-2.2, released as binaries only) printed its level without the "NCCL " tag that
# src/include/debug.h has carried since v2.3.5-5 ("%s:%d:%d [%d] %s:%d NCCL WARN ", "... NCCL INFO "):
# "host:pid:tid [dev] include/socket.h:196 WARN Connection closed by remote peer" (as pasted in
# horovod/horovod#234). After NCCL's own prefix, the level is given its tag so that one table reads both.
_NCCL_UNTAGGED_LEVEL = re.compile(r"^(?P<site>(?:[\w./-]+:\d+ )?)(?P<level>WARN|INFO|TRACE) (?!NCCL)")


# syslogd's broadcast of an emergency message to logged-in terminals (rsyslog omusrmsg, sysklogd's
# wallmsg): "Message from syslogd@HOST at Nov 10 08:58:06 ..." on its own line, then the message
# (" kernel:[Hardware Error]: ..."), which carries no host of its own.
_SYSLOGD_WALL = re.compile(r"^Message from syslogd@(?P<host>[\w.-]{1,253}) at .{0,60}\.\.\.$")


# A log line shipped as a JSON object: docker's json-file driver (moby daemon/logger/jsonfilelog:
# {"log": "...\n", "stream": ..., "time": ...}), `journalctl -o json` (systemd man journalctl:
# MESSAGE, _HOSTNAME), fluentd/fluent-bit and Cloud Logging exports ("log", "message", "msg",
# "textPayload"). The message is the line; the host field says where it ran.
_JSON_MESSAGE_KEYS = ("log", "MESSAGE", "message", "msg", "textPayload")
_JSON_HOST_KEYS = ("_HOSTNAME", "hostname", "host")
# HTML character references, as a log copied from a rendered page or an HTML export carries them.
_HTML_ENTITY = re.compile(r"&(?:lt|gt|amp|quot|apos|#39|#x27|#34);")


def _unwrap_json_line(line: str) -> tuple[str, str | None] | None:
    """(message, host) of a log line that is a shipper's JSON object, else None."""
    s = line.strip()
    if not (s.startswith("{") and s.endswith("}")):
        return None
    try:
        obj = json.loads(s)
    except ValueError:
        return None
    if not isinstance(obj, dict):
        return None
    msg = next((obj[k] for k in _JSON_MESSAGE_KEYS if isinstance(obj.get(k), str)), None)
    if msg is None:
        return None
    host = next((obj[k] for k in _JSON_HOST_KEYS if isinstance(obj.get(k), str) and obj[k]), None)
    return msg.rstrip("\r\n"), host


def _normalized_lines(text: str) -> tuple[list[str], dict[int, str]]:
    """The text's lines with colour codes, CRLF endings, HTML character references and shippers'
    JSON envelopes removed, and the host each JSON envelope named (by 1-based line number)."""
    text = _ANSI_RE.sub("", text).replace("\r\n", "\n")
    if _HTML_ENTITY.search(text):
        text = html.unescape(text)
    lines = text.split("\n")
    hosts: dict[int, str] = {}
    for i, line in enumerate(lines):
        if line.lstrip().startswith("{"):
            unwrapped = _unwrap_json_line(line)
            if unwrapped is not None:
                lines[i], host = unwrapped
                if host:
                    hosts[i + 1] = host
    return lines, hosts


def clean_lines(text: str) -> Iterator[_Record]:
    """Yield one record per logical message: noise removed, prefixes peeled, wraps joined."""
    raw, json_hosts = _normalized_lines(text)
    wall_host: str | None = None  # "Message from syslogd@HOST at ...": the host of the next message
    for line_no, joined in _join_wraps(raw):
        m = _SYSLOGD_WALL.match(joined.strip())
        if m:
            wall_host = m.group("host")
            continue
        # tqdm redraws with \r: every segment is a separate screen state; progress segments are noise.
        for seg in joined.split("\r"):
            seg = _PROGRESS_RE.sub(_progress_postfix, seg) if "%|" in seg else seg
            seg = _MD_QUOTE_RE.sub("", seg)
            seg = _MD_LINK_RE.sub(r"\1", seg).replace("`", "")
            if not seg.strip():
                continue
            # Ray prefixes may appear mid-line (two messages glued together): split at each.
            ray = list(_RAY_RE.finditer(seg))
            pieces: list[tuple[str, re.Match[str] | None]] = []
            if ray:
                if ray[0].start() > 0 and seg[: ray[0].start()].strip():
                    pieces.append((seg[: ray[0].start()], None))
                for j, m in enumerate(ray):
                    end = ray[j + 1].start() if j + 1 < len(ray) else len(seg)
                    pieces.append((seg[m.end() : end], m))
            else:
                pieces.append((seg, None))
            for piece, rm in pieces:
                rec = _Record(line_no, "", wrap_joined=len(joined) > len(raw[line_no - 1]))
                if rm is not None:
                    rec.fields["ray_pid"] = int(rm.group("pid"))
                    if rm.group("ip"):
                        rec.host, rec.host_basis = rm.group("ip"), "ray_prefix"
                body = _peel(piece.strip(), rec).strip()
                if not body:
                    continue
                if wall_host is not None and rec.host is None:
                    rec.host, rec.host_basis = wall_host, "syslogd_wall"
                if rec.host is None and line_no in json_hosts:
                    rec.host, rec.host_basis = json_hosts[line_no], "json_envelope"
                rec.text = body
                _line_tags(rec)
                yield rec
        wall_host = None


def _line_tags(rec: _Record) -> None:
    """Rank/host/PG tags found anywhere in the message (after the prefixes)."""
    t = rec.text
    if rec.rank is None:
        m = _RANK_PREFIX_INNER.search(t)  # "[E ...] [rank3]:" or a prefix after a vLLM/logging prefix
        if m:
            rec.rank, rec.rank_basis = int(m.group("rank")), "rank_prefix"
    m = _PG_TAG.search(t)
    if m:
        pg = m.group("pg")
        name = m.group("guid_name") or m.group("desc")
        rec.fields["pg"] = f"{m.group('guid') or pg}({name})" if name else pg
        rec.fields["pg_rank"] = int(m.group("rank"))
        default = pg == "0" or (name or "") == "default_pg"
        # The PG tag carries the rank *within that group*: it is the global rank only on the default PG.
        if rec.rank is None and default:
            rec.rank, rec.rank_basis = int(m.group("rank")), "pg_tag"
    elif rec.rank is None:
        m = _OLD_RANK_TAG.search(t)
        if m:
            rec.rank, rec.rank_basis = int(m.group("rank")), "rank_tag"
    if rec.host is None:
        m = _HOST_IN_LINE.search(t)
        if m:
            rec.host, rec.host_basis = m.group("host"), "host_tag"
    if rec.ts is None:
        m = re.search(r"(\d{4}-\d\d-\d\d[ T_]\d\d:\d\d:\d\d(?:[.,]\d+)?)", t[:80])
        if m:
            rec.ts = _parse_ts(_norm_ts(m.group(1)))


_INT_FIELDS = {
    "seq",
    "xid",
    "exit_code",
    "rank",
    "root_xid",
    "timeout_ms",
    "ran_ms",
    "last_enqueued",
    "last_completed",
    "numel_in",
    "numel_out",
    "detector_rank",
    "local_rank",
    "pid",
    "ib_status",
    "ib_opcode",
    "vendor_err",
    "peer_port",
    "errno",
    "signal_no",
    "stuck_s",
    "timeout",
    "try",
    "joined",
    "world_size",
    "worker_count",
    "attempts_left",
    "attempts",
    "nan_iters",
    "ds_rank",
    "barrier_rank",
    "aborted_rank",
    "cuda_errno",
    "mismatch_rank_a",
    "mismatch_rank_b",
    "port",
    "timeout_s",
    "proc",
    "gpu",
}
_COLUMN_FIELDS = ("seq", "op", "xid", "gpu_pci", "exit_code", "peer")


def _keyword_hits(low: str) -> list[str]:
    """The keywords (of _KEYWORDS) in a lower-cased line."""
    hits = [k for k in _FIRST_KEYWORDS if k in low]  # plain substring tests: far faster than one big alternation
    return hits + [k for h in hits for k in _KEYWORDS_WITHIN[h] if k in low] if hits else hits


def classify_line(rec: _Record, default_rank: int | None = None, default_host: str | None = None) -> list[Event]:
    """All signature matches in one cleaned record, as events (possibly none)."""
    hits = _keyword_hits(rec.text.lower())
    if not hits:
        return []
    cands = [SIGNATURES[i] for i in sorted({i for h in hits for i in _BY_KEYWORD[h]})]
    rank, rank_basis = (
        (rec.rank, rec.rank_basis)
        if rec.rank is not None
        else (default_rank, "path" if default_rank is not None else None)
    )
    host, host_basis = (rec.host, rec.host_basis) if rec.host else (default_host, "path" if default_host else None)
    events: list[Event] = []
    for sig in cands:
        for m in sig.pattern.finditer(rec.text):
            ev = Event(
                rec.line_no,
                rec.text,
                sig.name,
                sig.kind,
                sig.category,
                sig.severity,
                sig.blame,
                sig.generic,
                rank=rank,
                rank_basis=rank_basis,
                host=host,
                host_basis=host_basis,
                ts=rec.ts,
            )
            ev.fields.update(rec.fields)
            ev.pg = rec.fields.get("pg")
            for k, v in m.groupdict().items():
                if v is None:
                    continue
                k = k.split("__")[0]
                v = v.strip()
                if k in _INT_FIELDS:
                    try:
                        v = int(v)
                    except ValueError:
                        continue
                if k in _COLUMN_FIELDS:
                    setattr(ev, k, v)
                else:
                    ev.fields[k] = v
            if ev.gpu_pci:
                ev.gpu_pci = ev.gpu_pci.lower()
            if sig.post:
                sig.post(ev)
            events.append(ev)
            if sig.kind is None or sig.name in ("loss_nan",):
                continue
            break  # one event per signature per record, except repeated metrics
    return events


def _finish(ev: Event) -> None:
    """Turn blame into culprit columns: what this line alone implicates."""
    if ev.kind is None:
        return
    if ev.blame == Blame.SELF:
        # The rank of the process that printed the line; a group-local rank of a non-default
        # PG is not a global rank and was never put in ev.rank.
        if ev.rank is not None:
            ev.culprit_rank = ev.rank
        if ev.host:
            ev.culprit_host = ev.host
        if ev.culprit_rank is not None or ev.culprit_host:
            ev.culprit_basis = ev.rank_basis if ev.culprit_rank is not None else ev.host_basis
    elif ev.blame == Blame.PEER and plausible_host(ev.peer):
        peer = ev.peer.strip("[]")
        ev.culprit_host = peer[7:] if peer.lower().startswith("::ffff:") else peer
        ev.culprit_basis = "peer" if ev.kind is not K.RENDEZVOUS_ERROR else "endpoint"


# ---------------------------------------------------------------------------------------------
# Multi-line blocks: torchelastic ChildFailedError banner, kernel GPU headers, stack frames
# ---------------------------------------------------------------------------------------------
_ELASTIC_FIELD = re.compile(r"^(?P<key>time|host|rank|exitcode|error_file|traceback)\s*:\s*(?P<value>.*)$")
_ELASTIC_ENTRY = re.compile(r"^\[(?P<idx>\d+)\]:$")
_FRAME = re.compile(r"^(?P<func>[\w<>.]+) \((?P<file>[^():]+):(?P<line>\d+)\)$")
# A frame of a dump inside a collective: the same test as the stand-alone frame signature.
_COLLECTIVE_FRAME = next(s.pattern for s in SIGNATURES if s.name == "stack_frame_in_collective")
_NVRM_GPU_HEADER = re.compile(rf"NVRM: (?:The NVIDIA GPU |GPU at |GPU ){PCI}")


@dataclass
class _ElasticEntry:
    section: str
    line_no: int
    lines: list[str] = field(default_factory=list)
    values: dict[str, str] = field(default_factory=dict)
    header_cut: bool = False  # begun by a field line with no "[N]:" before it (an excerpt that starts inside)


def _elastic_events(entries: list[_ElasticEntry], no_other: bool, default_host: str | None) -> list[Event]:
    """Events for one ChildFailedError banner.

    The 'Root Cause' entry is only the first failure torchelastic *observed* (smallest error-file
    timestamp, or the first entry when no error file exists). It settles the culprit rank when it is
    the only failure (<NO_OTHER_FAILURES>) or strictly earlier than every other one; all failures on
    one host settle the host.
    """
    if not entries:
        return []
    roots = [e for e in entries if e.section == "root"]
    others = [e for e in entries if e.section != "root"]
    root_time = roots[0].values.get("time") if roots else None
    other_times = [e.values.get("time") for e in others]
    sole = bool(roots) and (no_other or not others)
    earliest = (
        bool(roots)
        and bool(others)
        and root_time is not None
        and all(t is not None and t > root_time for t in other_times)
    )
    hosts = {e.values.get("host") for e in entries if e.values.get("host")}
    single_host = next(iter(hosts)) if len(hosts) == 1 else None
    out = []
    for e in entries:
        v = e.values
        rank_m = re.match(r"(\d+)(?: \(local_rank: (\d+)\))?", v.get("rank", ""))
        exit_m = re.match(r"(-?\d+)(?: \(pid: (\d+)\))?", v.get("exitcode", ""))
        is_root = e.section == "root"
        ev = Event(
            e.line_no,
            " | ".join(e.lines),
            "elastic_root_cause" if is_root else "elastic_failure",
            K.CRASH,
            C.EXIT_CODE,
            S.CRITICAL,
            Blame.NONE,
            False,
            rank=int(rank_m.group(1)) if rank_m else None,
            rank_basis="elastic_entry",
            host=v.get("host") or default_host,
            host_basis="elastic_entry" if v.get("host") else "path",
        )
        if exit_m:
            ev.exit_code = int(exit_m.group(1))
            if exit_m.group(2):
                ev.fields["pid"] = int(exit_m.group(2))
        if rank_m and rank_m.group(2) is not None:
            ev.fields["local_rank"] = int(rank_m.group(2))
        for k in ("time", "error_file", "traceback"):
            if v.get(k):
                ev.fields[k] = v[k]
        if v.get("time"):
            ev.ts = _parse_ts(_norm_ts(v["time"]))
        sm = re.search(r"Signal (\d+) \((SIG\w+)\)", v.get("traceback", ""))
        if sm:
            ev.category = C.SIGNAL
            ev.fields["signal"] = sm.group(2)
        exit_post(ev)
        if is_root and (sole or earliest):
            ev.culprit_rank = ev.rank
            ev.culprit_basis = "elastic_sole_failure" if sole else "elastic_earliest_failure"
        if single_host:
            ev.culprit_host = single_host
            ev.culprit_basis = ev.culprit_basis or "elastic_single_host"
        ev.fields["root_cause"] = is_root
        ev.fields["failures_in_banner"] = len(entries)
        out.append(ev)
    return out


# ray python/ray/exceptions.py ActorDiedError: "\tclass_name: ...", "\tactor_id:", "\tpid:", "\tname:",
# "\tnamespace:", "\tip: a.b.c.d" after its message.
_RAY_ACTOR_FIELD = re.compile(r"^(?P<key>class_name|actor_id|pid|name|namespace|ip): (?P<value>\S.*)$")


def parse_records(
    records: Iterable[_Record], *, default_rank: int | None = None, default_host: str | None = None
) -> list[Event]:
    events: list[Event] = []
    # ChildFailedError banner state
    section: str | None = None
    entries: list[_ElasticEntry] = []
    no_other = False
    current: _ElasticEntry | None = None
    # kernel: last "NVRM: The NVIDIA GPU <pci>" header, for the r570 multi-line lost-GPU message
    gpu_header: tuple[int, str] | None = None
    # stack dumps: frames following a thread header
    stack_ev: Event | None = None
    # Ray's ActorDiedError: its context lines follow it ("ip: a.b.c.d" names the dead actor's node)
    actor_ev: Event | None = None
    # Open MPI 1.x-3.x's lost-daemon message: its "hostname:  X" line names the node
    orte_ev: Event | None = None
    # scontrol show node: the record's NodeName, for its Reason= line
    slurm_node: str | None = None

    def flush_banner() -> None:
        nonlocal entries, no_other, current, section
        # one field line with no banner or entry header is not an entry: a wrapped line's tail ("rank: 1") or
        # a program's own "host: x" print; an excerpt cut inside an entry still shows several of its fields
        entries = [e for e in entries if not (e.header_cut and len(e.values) < 2)]
        events.extend(_elastic_events(entries, no_other, default_host))
        entries, no_other, current, section = [], False, None, None

    recs = list(records)  # read again below, for the readings across lines
    for rec in recs:
        t = rec.text
        # ---- torchelastic banner -------------------------------------------------------
        if t.startswith("Root Cause (first observed failure)"):
            section, current = "root", None
            continue
        if t.startswith("Failures:"):
            section, current = "failures", None
            continue
        if "<NO_OTHER_FAILURES>" in t:
            no_other = True
            continue
        me = _ELASTIC_ENTRY.match(t)
        if me and section:
            current = _ElasticEntry(section, rec.line_no)
            entries.append(current)
            continue
        mf = _ELASTIC_FIELD.match(t)
        if mf:
            if current is None:  # an excerpt that starts inside an entry (its header was cut)
                current = _ElasticEntry(section or "failures", rec.line_no, header_cut=True)
                entries.append(current)
                section = section or "failures"
            if mf.group("key") in current.values and current.section != "root":
                current = _ElasticEntry(current.section, rec.line_no)
                entries.append(current)
            current.values[mf.group("key")] = mf.group("value").strip()
            current.lines.append(t)
            continue
        if entries and (set(t) <= set("=-") and len(t) >= 10):
            if section == "root" and any(e.section == "root" for e in entries):
                flush_banner()
            continue
        if entries and not t.startswith(("[", " ")):
            flush_banner()
        # ---- stack dump frames ---------------------------------------------------------
        if stack_ev is not None:
            fm = _FRAME.match(t)
            if fm:
                frames = stack_ev.fields.setdefault("frames", [])
                if len(frames) < 12:
                    frames.append(t)
                if _COLLECTIVE_FRAME.search(t):  # py-spy's thread waits in a collective: as the frame alone says
                    stack_ev.severity = S.WARNING
                continue
            stack_ev = None
        # ---- Open MPI's lost-daemon message: its "hostname:" line names the node ---------------------
        if orte_ev is not None:
            mo = _ORTE_HOSTNAME.match(t)
            lost, orte_ev = orte_ev, None
            if mo and plausible_host(mo.group(1)):
                lost.peer, lost.fields["peer_from_line"] = mo.group(1), rec.line_no
                continue
        # ---- Ray actor context ------------------------------------------------------------
        if actor_ev is not None:
            mc = _RAY_ACTOR_FIELD.match(t)
            if mc:
                if mc.group("key") == "ip" and plausible_host(mc.group("value")):
                    actor_ev.host, actor_ev.host_basis = mc.group("value"), "text"
                continue
            actor_ev = None
        # ---- ordinary lines --------------------------------------------------------------
        mh = _NVRM_GPU_HEADER.search(t)
        if mh:
            gpu_header = (rec.line_no, mh.group("gpu_pci").lower())
        mn = _SCONTROL_NODE.match(t)
        if mn:
            slurm_node = mn.group(1)
        for ev in classify_line(rec, default_rank, default_host):
            if (
                ev.signature == "nvrm_fallen_off_bus"
                and not ev.gpu_pci
                and gpu_header
                and rec.line_no - gpu_header[0] <= 4
            ):
                ev.gpu_pci = gpu_header[1]
                ev.fields["gpu_pci_from_line"] = gpu_header[0]
            if ev.signature == "nvrm_xid" and ev.xid == 79:
                ev.category = C.GPU_LOST
            if ev.signature == "stack_dump_thread":
                stack_ev = ev
            if ev.signature == "ray_actor_died":
                actor_ev = ev
            if ev.signature == "orte_lost_daemon" and ev.peer is None:
                orte_ev = ev
            if ev.signature == "slurm_node_drained":  # the record's own node, not whoever printed it
                ev.host, ev.host_basis = slurm_node, "text" if slurm_node else None
            events.append(ev)
    if entries:
        flush_banner()
    events.extend(_ranked_exceptions(recs, events))
    events.extend(_loss_collapse(recs, events))
    events.extend(_loss_divergence(recs, events))
    for ev in events:
        _finish(ev)
    # Xid 79 text also matches the lost-GPU signature: keep the Xid event only. A generic match on
    # a line that also has a specific one of the same kind adds nothing.
    xid_lines = {e.line_no for e in events if e.signature == "nvrm_xid"}
    specific = {(e.line_no, e.kind) for e in events if not e.generic and e.kind is not None}
    out, seen = [], set()
    for e in events:
        if (e.signature == "nvrm_fallen_off_bus" and e.line_no in xid_lines) or (
            e.generic and (e.line_no, e.kind) in specific
        ):
            continue
        key = (e.line_no, e.kind, e.category, e.generic, e.message)
        if e.kind is not None and key in seen:  # two rules saying the same of one line: keep the first
            continue
        seen.add(key)
        out.append(e)
    return out


_ORTE_HOSTNAME = re.compile(r"^\s*hostname:\s+(\S+)\s*$")
_SCONTROL_NODE = re.compile(r"^NodeName=([\w.-]{1,253})\s")


# An exception's own line, the last line of CPython's traceback (Python/pythonrun.c print_exception:
# "module.Class: message", or the bare class name when raised without one).
_EXCEPTION_LINE = re.compile(r"^(?:[A-Za-z_]\w*\.){0,8}(?P<exc>[A-Z]\w{0,80}(?:Error|Exception|Failure))(?::\s|\s*$)")
# Prefixes a launcher or framework puts on a process's every line, naming its global rank.
_RANK_PREFIXES = frozenset({"rank_prefix", "lightning_rank", "determined_rank", "horovod_tag", "mpi_tag"})


def _ranked_exceptions(records: list[_Record], events: list[Event]) -> list[Event]:
    """An exception no signature knows, raised by a rank its line's prefix names ("[rank5]: KeyError: ..."):
    that rank's process failed on it, and the other ranks' timeouts that follow are the consequence. Raised
    by one rank only, it blames that rank; the same exception from several ranks is the program's (every
    rank ran the same code) and blames none. Its kind is what its words say (collectors/log_vocabulary.py),
    else a crash (category exception). Where its rank printed a classified failure too, it is that
    failure's consequence: generic, a warning."""
    classified = {e.line_no for e in events if e.kind is not None}
    # a rank that printed a classified failure of its own: its unknown exception is that failure's wrapper or
    # consequence (a re-raise, the error's Python face), so it is generic there
    ranks_explained = {e.rank for e in events if e.kind is not None and e.rank is not None}
    by_text: dict[str, list[_Record]] = {}
    for rec in records:
        if rec.rank is None or rec.rank_basis not in _RANK_PREFIXES or rec.line_no in classified:
            continue
        if _EXCEPTION_LINE.match(rec.text):  # (a KeyboardInterrupt is no Error/Exception/Failure: not read)
            by_text.setdefault(re.sub(r"\d+", "N", rec.text[:300]), []).append(rec)
    out: list[Event] = []
    for recs in by_text.values():
        ranks = sorted({r.rank for r in recs if r.rank is not None})
        rec = recs[0]
        guess = kind_from_words([rec.text])
        kind = guess.kind if guess else K.CRASH
        consequence = bool(ranks_explained.intersection(ranks))
        ev = Event(
            rec.line_no, rec.text, "ranked_exception", kind, C.EXCEPTION if kind is K.CRASH else None,
            S.WARNING if consequence else S.CRITICAL, Blame.SELF if len(ranks) == 1 else Blame.NONE, consequence,
            rank=rec.rank, rank_basis=rec.rank_basis, host=rec.host, host_basis=rec.host_basis, ts=rec.ts,
        )  # fmt: skip
        ev.fields.update(rec.fields, raising_ranks=ranks)
        if guess:
            ev.fields["kind_from_words"] = guess.words
        out.append(ev)
    return out


# A training loss as the trainers print it (HF Trainer's "{'loss': 1.7172, ...}", Megatron's "lm loss: 1.234E+00",
# Lightning's "loss=1.72", torchtitan's "loss:  1.7234", "loss 1.72"): the first loss value of a line.
_LOSS_VALUE = re.compile(
    r"\b(?:lm[ _]|train[_ ])?loss['\"]?(?:\s*[:=]\s*| )(?P<value>[-+]?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?)(?![\d.])"
)
# the gradient norm on the same line (HF Trainer's {'loss': 0.0, 'grad_norm': 0.0, ...}, Megatron's "grad norm: 0.000")
_GRAD_NORM_VALUE = re.compile(
    r"\bgrad[_ ]norm['\"]?(?:\s*[:=]\s*| )(?P<value>[-+]?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?)(?![\d.])"
)
LOSS_COLLAPSE_MIN_ZEROS = 2  # consecutive exact zeros that end the log
LOSS_COLLAPSE_MIN_BEFORE = 0.05  # the loss just before them: a real one (a model that still learns)


def _loss_collapse(records: list[_Record], events: list[Event]) -> list[Event]:
    """A loss that was a real value and then prints as exactly 0 to the end of the log: a cross-entropy is
    never exactly 0 while a model learns, so the loss stopped being computed over anything (every label
    masked, a bf16/fp16 underflow, a broken loss path). Zeros from the first printed step are that too when
    the same lines print a gradient norm of exactly 0: no gradient reached the weights at all.
    Numerical, a warning, no blame."""
    if any(e.kind is K.NUMERICAL for e in events):
        return []
    values = [(rec, float(m.group("value"))) for rec in records if (m := _LOSS_VALUE.search(rec.text))]
    zeros = 0
    for _, v in reversed(values):
        if v != 0.0:
            break
        zeros += 1
    before = [v for _, v in values[: len(values) - zeros]]
    if zeros < LOSS_COLLAPSE_MIN_ZEROS:
        return []
    # straight from a real loss to 0: a loss that converges passes through 0.01, 0.001 on its way (printed rounded)
    fell = bool(before) and before[-1] >= LOSS_COLLAPSE_MIN_BEFORE
    grads = [m.group("value") for rec, _ in values[len(values) - zeros :] if (m := _GRAD_NORM_VALUE.search(rec.text))]
    no_gradient = len(grads) == zeros and all(float(g) == 0.0 for g in grads)
    if not (fell or no_gradient):
        return []
    rec = values[len(values) - zeros][0]
    ev = Event(rec.line_no, rec.text, "loss_collapsed_to_zero", K.NUMERICAL, None, S.WARNING, Blame.NONE, False,
               rank=rec.rank, rank_basis=rec.rank_basis, host=rec.host, host_basis=rec.host_basis, ts=rec.ts)  # fmt: skip
    ev.fields.update(loss_before=before[-1] if before else None, zero_lines=zeros, grad_norm_zero=no_gradient)
    return [ev]


LOSS_DIVERGENCE_FACTOR = 4.0  # the log's last loss over the lowest one before it
LOSS_DIVERGENCE_MIN_RISE = 1.0  # and at least this much higher (0.01 -> 0.05 is noise, not divergence)


def _loss_divergence(records: list[_Record], events: list[Event]) -> list[Event]:
    """A loss that ends the log at several times its own earlier low: training diverged (a loss spike that did
    not come back, the step before a NaN). Read only where no line says anything else: a warning, no blame."""
    if any(e.kind is not None for e in events):
        return []
    values = [(rec, float(m.group("value"))) for rec in records if (m := _LOSS_VALUE.search(rec.text))]
    if len(values) < 2:
        return []
    low = min(v for _, v in values[:-1])
    rec, last = values[-1]
    if not (low > 0 and last >= LOSS_DIVERGENCE_FACTOR * low and last - low >= LOSS_DIVERGENCE_MIN_RISE):
        return []
    ev = Event(rec.line_no, rec.text, "loss_diverged", K.NUMERICAL, None, S.WARNING, Blame.NONE, False,
               rank=rec.rank, rank_basis=rec.rank_basis, host=rec.host, host_basis=rec.host_basis, ts=rec.ts)  # fmt: skip
    ev.fields.update(loss_low=low, loss_last=last, loss_lines=len(values))
    return [ev]


# ---------------------------------------------------------------------------------------------
# Tables
# ---------------------------------------------------------------------------------------------


MAX_MESSAGE_CHARS = 2000  # a line quoted in log_events (and so in findings' evidence)


def _to_table(events: list[Event], source: str) -> pa.Table:
    schema = schema_for(SignalKind.LOG_EVENTS)
    if not events:
        return empty_table(schema, host_column=HOST_COLUMN)
    cols: dict[str, list[Any]] = {f.name: [] for f in schema}
    hosts: list[str | None] = []
    for ev in events:
        extra = dict(ev.fields)
        extra.pop("pg", None)
        if ev.peer:
            extra["peer"] = ev.peer
        if ev.culprit_basis:
            extra["culprit_basis"] = ev.culprit_basis
        if ev.rank_basis and ev.rank is not None:
            extra["rank_basis"] = ev.rank_basis
        if ev.generic:
            extra["generic"] = True
        if len(ev.message) > MAX_MESSAGE_CHARS:
            extra["message_chars"] = len(ev.message)  # quoted cut: the original size is stated
        row = {
            "ts": ev.ts,
            "source": source,
            "line_no": ev.line_no,
            "rank": ev.rank,
            "kind": ev.kind.value if ev.kind else None,
            "category": ev.category.value if ev.category else None,
            "severity": ev.severity.value,
            "signature": ev.signature,
            "pg": ev.pg,
            "seq": ev.seq,
            "op": ev.op,
            "xid": ev.xid,
            "gpu_pci": ev.gpu_pci,
            "exit_code": ev.exit_code,
            "message": ev.message[:MAX_MESSAGE_CHARS],
            "culprit_rank": ev.culprit_rank,
            "culprit_host": ev.culprit_host,
            "fields": json.dumps(extra, sort_keys=True, default=str) if extra else None,
        }
        for k in cols:
            cols[k].append(row[k])
        hosts.append(ev.host)
    table = pa.Table.from_pydict(cols, schema=schema)
    return table.append_column(HOST_COLUMN, pa.array(hosts, pa.string()))


# An error-looking line (what people grep for): the levels the logging libraries print (Python
# logging's ERROR/CRITICAL, glog's E/F prefixes as c10 prints them, `[ERROR]`), a Python traceback
# or exception, NCCL's `NCCL WARN`, C++ `terminate called`, a signal's death. Linear: anchored
# alternatives of literals and bounded character classes only.
_ERRORISH = re.compile(
    # glog's "E1031 10:52:42" ("E20221031 ..." with --log_year_in_prefix, google/glog src/logging.cc LogMessage::Init)
    r"\b(?:ERROR|FATAL|CRITICAL)\b|\[(?:E|F)\d{0,4}[ \]]|^[EF](?:\d{4})?\d{4} \d\d:\d\d|Traceback \(most recent call last\)"
    r"|\b[A-Z]\w{0,60}(?:Error|Exception|Failure)\b\s*:|\berror:|NCCL WARN|terminate called"
    r"|Segmentation fault|core dumped|\bAborted\b|\bKilled\b|\bpanic\b|\bAn error occurred\b"
    r"|\[[A-Z]\w{0,60}(?:Error|Exception)\]"  # an exception's class in brackets ("[AssertionError] ...")
    # TensorFlow/absl's "E file.cc:123] msg" (tsl/platform/default/logging.cc; its time is peeled by iso_ts)
    r"|^[EF] [\w./-]{1,200}:\d+\] "
    # Huawei CANN's error codes (Ascend NPUs, torch_npu): "EH9999: <time> <message>", "EE9999: ...", "EZ9999: ..."
    r"|^E[A-Z]\d{4}: "
    # libstdc++'s verbose terminate handler (libsupc++/vterminate.cc): "terminate called after throwing an instance
    # of 'T'" then "  what():  <the exception's message>", the line that says what failed
    r"|^\s*what\(\):\s"
    # the NVIDIA driver's own failure prints (open-gpu-kernel-modules NV_PRINTF(LEVEL_ERROR, ...): "NVRM: <func>: ...
    # failed", "... timed out", "Unable to ...", "Assertion failed"), which carry no level of their own in dmesg
    r"|^NVRM: .{0,300}?(?i:\bfail(?:ed|ure)\b|\berror\b|\btimed out\b|\btimeout\b|\bunable to\b|\blost\b|\bfault\b"
    r"|\bcannot\b|\binvalid\b|\bunexpected(?:ly)?\b|\bcorrupt\w*)"
    # Go services' structured logs: logrus's text formatter "level=error|fatal|panic" (sirupsen/logrus
    # text_formatter.go; dcgm-exporter, the device plugins, containerd) and zap's JSON '"level":"error"'
    r'|\blevel=(?:error|fatal|panic)\b|"level":\s?"(?:error|fatal|panic|dpanic)"'
    r"|^(?:\w{1,40}\.){0,6}[A-Z]\w{0,60}(?:Error|Exception)$"  # raised without a message: `EOFError`
    # a C/C++/CUDA library's own error print at its source location ("mem_heap.cpp:1519: non-zero status: 1
    # cuMemMap failed": NVSHMEM, UCX, libfabric and most C libraries print __FILE__:__LINE__ before the failure)
    r"|^[\w./-]{1,200}\.(?:c|cc|cpp|cxx|cu|h|hpp):\d+:?\s[^\n]{0,300}?\b(?:failed|failure)\b"
)
MAX_UNCLASSIFIED_LINES = 20  # quoted per log; the rest are counted
# Error-looking lines their own printer treats as harmless: NCCL <= 2.4 printed
# WARN("Failed to open libibverbs.so[.1]") when the host has no IB verbs library and went on over its
# socket transport (src/misc/ibvwrap.cu); later releases print the same text as INFO(NCCL_INIT, ...)
# (src/misc/ibvwrap.cc). Quoting it as the failure hides what the log does show (a stalled init).
_HARMLESS = re.compile(r"NCCL WARN Failed to open libibverbs\.so")
_TRACEBACK = re.compile(r"Traceback \(most recent call last\)")


def _interrupted_tracebacks(records: list[_Record]) -> set[int]:
    """Line numbers of the tracebacks (header to exception line) that end in KeyboardInterrupt: the
    user's Ctrl-C, not a failure (log_progress.INTERRUPTED); their frames are read as a stack dump."""
    out: set[int] = set()
    start: int | None = None
    for rec in records:
        if _TRACEBACK.search(rec.text):
            start = rec.line_no
        elif start is not None and INTERRUPTED.match(rec.text):
            out.update(range(start, rec.line_no + 1))
            start = None
    return out


def _unclassified(records: list[_Record], default_rank: int | None, default_host: str | None) -> list[Event]:
    """Error-looking lines of a log in which no signature matched anything: one warning event each
    (at most MAX_UNCLASSIFIED_LINES), quoting the line. They blame no rank or host: the line says
    something failed, not who; the rank/host that printed it is kept as the reporter."""
    out: list[Event] = []
    more = 0
    interrupted = _interrupted_tracebacks(records)
    for rec in records:
        if not _ERRORISH.search(rec.text[:4000]) or _HARMLESS.search(rec.text[:4000]) or rec.line_no in interrupted:
            continue
        if len(out) >= MAX_UNCLASSIFIED_LINES:
            more += 1
            continue
        ev = Event(
            rec.line_no, rec.text, "unclassified_error", K.CRASH, C.UNCLASSIFIED, S.WARNING, Blame.NONE, True,
            rank=rec.rank if rec.rank is not None else default_rank,
            host=rec.host or default_host, ts=rec.ts,
        )  # fmt: skip
        ev.fields["unclassified"] = True
        out.append(ev)
    if out and more:
        out[-1].fields["more_unclassified_lines"] = more
    # what kind the lines' own words say (collectors/log_vocabulary.py): one kind for all, one finding
    if out and (guess := kind_from_words(e.message for e in out)):
        for ev in out:
            ev.kind = guess.kind
            ev.fields.update(kind_from_words=guess.words)
    return out


def parse_log_text(text: str, source: str = "<text>", *, rank: int | None = None, host: str | None = None) -> pa.Table:
    """Classify every line of `text` into a log_events table (plus a `host` column).

    `rank`/`host` are what the caller knows from where the text came from (a run dir's
    logs/H/rank-R.log); the text's own prefixes ([rankN]:, Ray ip, pdsh host) take precedence.
    A log in which no signature matched but some line looks like an error gets "unclassified
    error" events for those lines (never silence on a log that says something failed).
    """
    records = list(clean_lines(text))
    events = parse_records(records, default_rank=rank, default_host=host)
    # a blamed printer's other half (its host, its rank) from other lines of the text
    complete_culprits(events, read_identity(records, events, plausible_host=plausible_host))
    if not any(e.kind is not None for e in events):
        events = events + _unclassified(records, rank, host)
    if not any(e.kind is not None for e in events):
        events = events + _nccl_return_trace(records)
    # hosts that chose disjoint NCCL networks (collectors/log_net_mismatch.py): what a stalled set-up
    # after them means, so it comes before (and instead of) the reading of absence
    if mm := read_net_mismatch((r.line_no, r.host, r.text) for r in records):
        for n, h, t in mm.lines:
            ev = Event(n, t, "nccl_network_mismatch", K.NETWORK_ERROR, C.NCCL, S.WARNING, Blame.NONE, False, host=h)
            ev.fields.update(reason=mm.reason, networks_by_host=mm.networks_by_host)
            events.append(ev)
    # processes whose NCCL COLL trace shows different collectives at one opCount (collectors/log_coll_mismatch.py)
    if cm := read_coll_mismatch((r.line_no, r.host, r.fields.get("nccl_pid"), r.text) for r in records):
        n, _, t = cm.lines[0]  # an odd process's call
        ev = Event(n, t, "nccl_coll_mismatch", K.COLLECTIVE_MISMATCH, None, S.CRITICAL, Blame.NONE, False)
        ev.fields.update(
            op_count=cm.op_count, calls_by_process=cm.calls_by_process, odd_processes=list(cm.odd_processes)
        )
        events.append(ev)
    if not any(e.kind is not None for e in events):
        events = events + _progress_stopped(records, rank, host, text)
    return _to_table(events, source)


# NCCL's NCCLCHECK trail (src/include/checks.h: INFO(NCCL_ALL, "%s:%d -> %d", __FILE__, __LINE__, res), 2.19+
# INFO_LOC "-> %d (%s)"): each function a failed call returns through prints its file:line and the
# ncclResult_t (src/nccl.h.in: 1 unhandled cuda error, 2 system error, 3 internal error, 4 invalid argument,
# 5 invalid usage, 6 remote error). Read only where no line says more (no WARN printed): the trail is the
# failure's only trace then. Its other use, a teardown after an abort, comes with lines that say more.
_NCCL_RETURN = re.compile(r"\bNCCL INFO [\w./-]+:\d+ -> (?P<code>[1-6])\b")
_NCCL_RESULT = {
    1: (K.CRASH, C.CUDA_ERROR, "ncclUnhandledCudaError"),
    2: (K.NETWORK_ERROR, C.NCCL, "ncclSystemError"),
    3: (K.NETWORK_ERROR, C.NCCL, "ncclInternalError"),
    4: (K.CRASH, None, "ncclInvalidArgument"),
    5: (K.CRASH, None, "ncclInvalidUsage"),
    6: (K.NETWORK_ERROR, C.NCCL, "ncclRemoteError"),
}
MIN_NCCL_RETURN_LINES = 2  # one trace line alone may be a retried call


def _nccl_return_trace(records: list[_Record]) -> list[Event]:
    """A log whose only failure trace is NCCL's "file:line -> N" return trail: one warning event naming the
    ncclResult_t it carries (the first line's), blaming nobody."""
    trail = [(rec, int(m.group("code"))) for rec in records if (m := _NCCL_RETURN.search(rec.text))]
    if len(trail) < MIN_NCCL_RETURN_LINES:
        return []
    rec, code = trail[0]
    kind, category, name = _NCCL_RESULT[code]
    ev = Event(rec.line_no, rec.text, "nccl_return_trace", kind, category, S.WARNING, Blame.NONE, True,
               host=rec.host, host_basis=rec.host_basis, ts=rec.ts)  # fmt: skip
    ev.fields.update(nccl_result=name, nccl_result_code=code, trace_lines=len(trail))
    return [ev]


RAW_TAIL_LINES = 8  # the log's last lines, unwrapped but not cleaned, for readings of what cleaning drops (bars)


def _progress_stopped(
    records: list[_Record], default_rank: int | None, default_host: str | None, text: str
) -> list[Event]:
    """A log with no error line at all: the reading of absence (collectors/log_progress.py), if one holds,
    as one event that analyzers/log_progress.py makes a low-confidence finding of."""
    cut = max(0, len(text) - RAW_TAIL_LINES * 400)
    first_line = text.count("\n", 0, cut) + 1
    tail = [(n, ln) for n, ln in enumerate(_normalized_lines(text[cut:])[0], first_line) if ln.strip()]
    r = read_progress(
        ((rec.line_no, rec.text) for rec in records),
        {rec.line_no: rec.rank for rec in records if rec.rank is not None},
        raw_tail=tail[-RAW_TAIL_LINES:],
    )
    if r is None:
        return []
    ev = Event(r.line_no, r.summary, r.signature, K.HUNG_COLLECTIVE, None, S.WARNING, Blame.NONE, True,
               rank=default_rank, host=default_host)  # fmt: skip
    ev.fields.update(r.evidence, progress_reading=True, suspect_ranks=list(r.suspect_ranks))
    return [ev]


MAX_LOG_BYTES = 1 << 30  # read (after decompression) at most this much of one log; the rest is cut, said


def _read_text(path: Path, *, max_bytes: int = MAX_LOG_BYTES) -> str:
    """The file as text (any bytes decoded with replacement), at most `max_bytes` of it: a gzip bomb is
    cut off and a truncated .gz keeps every byte that was decompressible, each with a warning."""
    chunks: list[bytes] = []
    total = 0
    with open(path, "rb") as f:
        if path.suffix != ".gz":
            data = f.read(max_bytes + 1)
            if len(data) > max_bytes:
                logger.warning("%s: over %d bytes; the rest is not read", path, max_bytes)
            return data[:max_bytes].decode("utf-8", errors="replace")
        # zlib directly (wbits 47: gzip or zlib header, auto): gzip.GzipFile drops the last chunk when
        # the trailer is missing, and would decompress a bomb whole before we could stop it.
        d = zlib.decompressobj(wbits=47)
        try:
            while total < max_bytes and (raw := f.read(1 << 16)):
                out = d.decompress(raw, max_bytes - total)
                chunks.append(out)
                total += len(out)
                while d.unconsumed_tail and total < max_bytes:  # a bomb expands: drain within the cap
                    out = d.decompress(d.unconsumed_tail, max_bytes - total)
                    chunks.append(out)
                    total += len(out)
                if d.eof and d.unused_data:  # a second gzip member (concatenated .gz)
                    rest = d.unused_data
                    d = zlib.decompressobj(wbits=47)
                    out = d.decompress(rest, max_bytes - total)
                    chunks.append(out)
                    total += len(out)
            if total >= max_bytes:
                logger.warning("%s: over %d bytes decompressed; the rest is not read", path, max_bytes)
            elif not d.eof:
                logger.warning("%s: truncated gzip; the %d readable bytes are analysed", path, total)
        except zlib.error as exc:
            logger.warning("%s: damaged gzip (%s); the %d readable bytes are analysed", path, exc, total)
    return b"".join(chunks).decode("utf-8", errors="replace")


def parse_log_file(path: str | os.PathLike[str], *, rank: int | None = None, host: str | None = None) -> pa.Table:
    """Parse one log file (plain or .gz): a pasted log, a rank log, or a kernel log (dmesg/journalctl -k)."""
    p = Path(path)
    return parse_log_text(_read_text(p), str(p), rank=rank, host=host)


_RANK_LOG = re.compile(r"^rank-(\d+)\.log(?:\.gz)?$")


def attribute_to_host(table: pa.Table, host: str, known_hosts: Collection[str]) -> pa.Table:
    """Rows of a file that came from host `host` (logs/H/, kernel/H/) that name a host which is not
    one of the run's hosts are attributed to `host`; the original name is kept in `fields`.

    torchelastic's ChildFailedError banner and agent lines carry the machine's own hostname
    (`localhost` on a test host, a short hostname where the inventory uses an alias or an IP),
    so a crash finding could otherwise name a host trainctl cannot evict, and a repeat-offender
    rule would blame it. The file's folder is where the line was written, which settles it. A
    culprit that is a *peer* of the line (a connect failure to another machine) is not the
    writer, so it is only rewritten when it is the line's own host or the banner's host.
    """
    if not table.num_rows:
        return table
    known = set(known_hosts)
    hosts = table.column(HOST_COLUMN).to_pylist()
    culprits = table.column("culprit_host").to_pylist()
    fields = table.column("fields").to_pylist()
    changed = False
    for i, (h, c, fj) in enumerate(zip(hosts, culprits, fields)):
        extra = json.loads(fj) if fj else {}
        touched = False
        if h is not None and h not in known:
            extra["host_as_logged"] = h
            hosts[i], touched = host, True
        if c is not None and c not in known and (c == h or str(extra.get("culprit_basis", "")).startswith("elastic")):
            extra["culprit_host_as_logged"] = c
            culprits[i], touched = host, True
        if touched:
            fields[i] = json.dumps(extra, sort_keys=True, default=str)
            changed = True
    if not changed:
        return table
    for name, values in ((HOST_COLUMN, hosts), ("culprit_host", culprits), ("fields", fields)):
        idx = table.schema.get_field_index(name)
        table = table.set_column(idx, table.schema.field(idx), pa.array(values, pa.string()))
    return table


def parse_run_logs(root: str | os.PathLike[str], known_hosts: Collection[str] | None = None) -> pa.Table:
    """log_events of a run dir or collected dataset: logs/H/rank-R.log (rank R on host H, known from
    the path), other logs/H/*.log (host only) and kernel/H/dmesg.txt (host H).

    `known_hosts` (run.json's hosts; default: the host folders found under logs/ and kernel/):
    a line in a file under logs/H/ or kernel/H/ that names any other host is attributed to H
    (see attribute_to_host).
    """
    root = Path(root)
    files: list[tuple[Path, int | None, str]] = []
    logs = root / "logs"
    if logs.is_dir():
        for host_dir in sorted(p for p in logs.iterdir() if p.is_dir()):
            for f in sorted(host_dir.iterdir()):
                if not f.is_file() or not (f.name.endswith((".log", ".log.gz", ".txt"))):
                    continue
                m = _RANK_LOG.match(f.name)
                files.append((f, int(m.group(1)) if m else None, host_dir.name))
    kernel = root / "kernel"
    if kernel.is_dir():
        for host_dir in sorted(p for p in kernel.iterdir() if p.is_dir()):
            for f in sorted(host_dir.glob("*.txt")):
                files.append((f, None, host_dir.name))
    if not files:
        return _to_table([], "")
    known = set(known_hosts) if known_hosts else {h for _, _, h in files}
    return pa.concat_tables([attribute_to_host(parse_log_file(f, rank=r, host=h), h, known) for f, r, h in files])
