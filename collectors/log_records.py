"""A pasted log's lines as records: noise removed, wrapped lines joined back, and the prefixes that say who
printed each line read off (collectors/logs.py step 1; docs/log-signatures.md "Noise it survives").

Noise: ANSI colours, tqdm bars glued with `\\r` (their postfix kept), markdown quotes and auto-links, HTML
entities, shippers' JSON envelopes (Docker, journald, CloudWatch), terminal wraps. Prefixes: `[rankN]:`, Ray
`(Actor pid=N, ip=X)`, pdsh `host: `, srun `N: `, NCCL `host:pid:tid [dev]`, syslog and dmesg times and hosts,
torchrun's `[defaultN]:`, MPI's `[1,N]<stdout>:`, and the rank/PG tags inside a message. A `Record` is one
cleaned line with the rank, host, time and fields those gave; nothing here classifies.
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

__all__ = [
    "MAX_WRAP_ROWS",
    "Record",
    "clean_lines",
    "join_wraps",
    "norm_ts",
    "normalized_lines",
    "parse_ts",
    "wrap_width",
]

_ANSI_RE = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07]*\x07")
# The same codes as text: as rsyslog stores them (its escapeControlCharactersOnReceive, on by default, writes a
# control character as '#' and three octal digits: ESC is "#033", so a journald or container line forwarded to
# /var/log/messages reads "#033[2m#033[33m(raylet)#033[0m"), or in caret notation ("^[[0m", what `cat -v` and
# less print). A terminal shows them as characters, so they count in its wraps: removed after wraps are joined.
_ESCAPED_ANSI_RE = re.compile(r"(?:#033|\^\[)\[[0-9;?]*[ -/]*[@-~]")
_PROGRESS_RE = re.compile(
    r"(?P<desc>[^\r\n|]{0,80}?)\d{1,3}%\|[^|\n]{0,200}\|[^\[\n]{0,60}(?:\[(?P<r_bar>[^\]\n]{0,400})\])?"
)
# tqdm's r_bar is "[{elapsed}<{remaining}, {rate_fmt}{postfix}]" (tqdm/std.py format_meter): the
# postfix holds the metrics a trainer sets on its bar (Lightning's "loss=nan, v_num=3"), kept as text. A bar_format
# without {rate_fmt} ("[{elapsed}<{remaining}{postfix}]") puts the postfix right after the times.
_TQDM_POSTFIX = re.compile(
    r"^[^,]*,\s*[^,]*?(?:it/s|s/it|/s)\s*,\s*(?P<postfix>.+)$|^[\d:]+<[\d:?]+,\s*(?P<postfix_b>[\w./-]+=.+)$"
)


def _progress_postfix(m: re.Match[str]) -> str:
    """A tqdm bar removed, its postfix metrics kept."""
    r_bar = m.group("r_bar") or ""
    pm = _TQDM_POSTFIX.match(r_bar)
    # tqdm's l_bar is "{desc}: {percentage:3.0f}%|": a description some trainers fill with their metrics (the YOLO
    # trainers' epoch, memory and loss columns, ultralytics engine/trainer.py), kept as text like the postfix
    desc = m.group("desc")
    kept = desc[:-2] if desc.endswith(": ") and any(c.isalnum() for c in desc) else ""
    return f" {kept} {pm.group('postfix') or pm.group('postfix_b')} " if pm else f" {kept} "


_MD_QUOTE_RE = re.compile(r"^\s{0,3}(?:[+-]?\s?>\s?)+")
# Link text excludes "[" and is bounded: `[^\]\n]+` let every "[" of a long run of "[" scan to the end of
# the line (quadratic: a 100 KB line of "[" took 44 s).
_MD_LINK_RE = re.compile(r"\[([^\[\]\n]{1,500})\]\(https?://[^)\s]{0,2000}\)")
_RAY_RE = re.compile(r"\((?:(?P<actor>[\w.:-]+) )?pid=(?P<pid>\d+)(?:, ip=(?P<ip>[\w.:-]+))?\)\s?")

# Prefixes peeled off the start of a line, in any order; each may set rank/host/ts.
_PREFIXES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("grep_file", re.compile(r"^(?P<file>[\w./-]+\.(?:log|txt|out|err)):(?=\S)")),
    # (not torch's desync report, whose "[R] finished collective #N, ..." names the lagging rank R)
    # (its number kept as a field: gpustat's rows start with the GPU's index in the same brackets)
    ("line_counter", re.compile(r"^\[(?P<counter>\d+)\]\s(?=\S)(?!finished collective #|joined but didn't finish)")),
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
    # a program naming itself before its error, as command-line tools do ("nvidia-smi: No devices were found",
    # NVIDIA's nvidia-smi/nv-hostengine; CPython's "python3: can't open file ..." from Modules/main.c): a printer,
    # not a host (a name with no digit, dot or dash is never read as a host anyway)
    r"|^nvidia-(?:smi|debugdump|persistenced)$|^nv-hostengine$|^python\d(?:\.\d{1,2})?$|^pip\d(?:\.\d{1,2})?$"
    # a shell script's name in front of its error ("train.sh: line 12: ..."), not a host
    r"|\.(?:sh|bash|py)$"
    # Huawei CANN's error codes ("EH9999: ...", Ascend): a code, not a host (upper case only: "eb0001" may be a node)
    r"|(?-i:^E[A-Z]\d{4}$)"
    # TensorFlow/TSL's TF_CHECK_OK failure ("Non-OK-status: <expr> status: ..."), not a host
    r"|^Non-OK-status$"
    # a rank tag in pdsh's place ("rank3: RuntimeError ...", a user's print or a launcher's): a rank, never a host
    r"|^(?:local_|global_)?rank[-_]?\d{1,6}$"
    # the kernel's network-interface prefixes (netdev_warn's "%s: ", IPoIB's ipoib_warn: "ib0: transmit timeout ..."):
    # an interface of the host, not a host
    # ("ib0", a pkey child "ib0.8001", a predictable name "ibp202s0"; "ib01" may be a node and stays one)
    r"|^ib(?:0|[1-9]\d?|p\d{1,3}s\d{1,3}(?:f\d)?)(?:\.[0-9a-f]{4})?$",
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
class Record:
    line_no: int
    text: str
    rank: int | None = None
    rank_basis: str | None = None
    host: str | None = None
    host_basis: str | None = None
    ts: datetime | None = None
    fields: dict[str, Any] = field(default_factory=dict)
    wrap_joined: bool = False  # several raw lines joined as one terminal-wrapped line (log_identity)
    first_line: str = ""  # where wrap_joined: the first of those raw lines, as written (log_identity)


def wrap_width(lines: list[str], padded: list[int] | None = None) -> int | None:
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
            elif lines[i + 1].strip() and not _RECORD_START.match(lines[i + 1]) and not _table_rows(ln, lines[i + 1]):
                counts[len(ln)] = counts.get(len(ln), 0) + 1
    best = max(counts.items(), key=lambda kv: (kv[1], kv[0]), default=None)
    return best[0] if best and best[1] >= 2 else None


# A column of a fixed-width table starts after two or more spaces (kubectl's, sacct's, ps's rows): two rows whose
# columns start at two or more of the same places are a table's rows, which a terminal's wrap does not make.
_COLUMN_START = re.compile(r"(?<=  )\S")


def _table_rows(line: str, after: str) -> bool:
    starts = {m.start() for m in _COLUMN_START.finditer(line)}
    return len(starts.intersection(m.start() for m in _COLUMN_START.finditer(after))) >= 2


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


def join_wraps(lines: list[str]) -> list[tuple[int, str]]:
    """Join terminal-wrapped continuation lines back onto the line they were cut from.

    A line is a wrap when it is exactly the paste's wrap width (and does not end padded with
    spaces: the last fragment of a wrapped line is padded to the width); the next line continues
    it unless it starts like a new record or repeats the previous line's opening (tables, progress).
    A next line padded with spaces to exactly this line's length is its wrapped tail whatever it
    starts with (a paste may mix widths, and a word cut in two can look like a record: "XidC" /
    "riticalError: ...").
    """
    padded = [_padded_run(lines, i) for i in range(len(lines))]
    width = wrap_width(lines, padded)
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
                and not _table_rows(lines[i], lines[i + 1])
            ):
                rows = 1
            if not rows:
                break
            text += "".join(lines[i + 1 : i + 1 + rows])
            i += rows
        out.append((start, text.rstrip()))
        i += 1
    return out


# Fractions of a second past microseconds, which strptime's %f does not take: Go's time.RFC3339Nano (up to 9 digits: the
# kubelet's CRI log files, kubernetes pkg/kubelet/kuberuntime/logs/logs.go; docker's json-file "time"), .NET's
# round-trip "o" format (7 digits: GitHub Actions and Azure Pipelines runner logs).
_SUB_MICROSECONDS = re.compile(r"(\.\d{6})\d+$")


def parse_ts(raw: str) -> datetime | None:
    raw = _SUB_MICROSECONDS.sub(r"\1", raw)
    for fmt in ("%Y-%m-%d %H:%M:%S.%f", "%Y-%m-%d %H:%M:%S", "%a %b %d %H:%M:%S %Y"):
        try:
            return datetime.strptime(raw, fmt).replace(tzinfo=UTC)
        except ValueError:
            continue
    return None


def norm_ts(raw: str) -> str:
    return raw.replace("T", " ").replace("_", " ").replace(",", ".").replace("/", "-")


def _peel(text: str, rec: Record) -> str:
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
                rec.ts = rec.ts or parse_ts(norm_ts(g["ts"]))
            elif name == "dmesg_ctime":
                rec.ts = rec.ts or parse_ts(re.sub(r"\s+", " ", g["ctime"]))
            elif name == "grep_file":
                rec.fields["file"] = g["file"]
            elif name == "line_counter":
                rec.fields["line_counter"] = int(g["counter"])
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


def normalized_lines(text: str) -> tuple[list[str], dict[int, str]]:
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


_CTRL_C_ECHO = re.compile(r"^\s*(?:\^C)+")


def clean_lines(text: str) -> Iterator[Record]:
    """Yield one record per logical message: noise removed, prefixes peeled, wraps joined."""
    raw, json_hosts = normalized_lines(text)
    wall_host: str | None = None  # "Message from syslogd@HOST at ...": the host of the next message
    for line_no, joined in join_wraps(raw):
        joined = _ESCAPED_ANSI_RE.sub("", joined) if "#033[" in joined or "^[[" in joined else joined
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
            # Ray prefixes may appear mid-line (two messages glued together): split at each. One with nothing after
            # it is no prefix but the end of a message naming a worker (RayTaskError's "ray::A.f() (pid=N, ip=X)").
            ray = [m for m in _RAY_RE.finditer(seg) if seg[m.end() :].strip()]
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
                wrapped = len(joined) > len(raw[line_no - 1])
                rec = Record(line_no, "", wrap_joined=wrapped, first_line=raw[line_no - 1] if wrapped else "")
                if rm is not None:
                    rec.fields["ray_pid"] = int(rm.group("pid"))
                    if rm.group("ip"):
                        rec.host, rec.host_basis = rm.group("ip"), "ray_prefix"
                body = _peel(piece.strip(), rec).strip()
                # A terminal echoes Ctrl-C as "^C" where the cursor is (termios ECHOCTL, on by default: Linux
                # drivers/tty/n_tty.c echo_char writes '^' and the character + 0x40), glued to whatever is printed
                # next: the echo is a record of its own (the user's SIGINT, log_progress.INTERRUPTED) and the rest
                # is peeled as any line (a launcher's prefix may follow the echo), marked as printed after it.
                if echo := _CTRL_C_ECHO.match(body):
                    rec.fields["echoed_interrupt"] = True
                    if rest := body[echo.end() :].strip():
                        yield replace(rec, text="^C", fields=dict(rec.fields))
                        body = _peel(rest, rec).strip()
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


def _line_tags(rec: Record) -> None:
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
            rec.ts = parse_ts(norm_ts(m.group(1)))
