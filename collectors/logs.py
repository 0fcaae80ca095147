"""Log signatures: classify lines of rank logs, kernel logs and pasted logs into log_events.

A pure parser: text in, a `log_events` table out (trainctl.schemas), plus a `host` column (the
host that printed the line, from the path or the text; trainctl.dataset readers add the same
column from the partition). Formats drift across PyTorch and NCCL versions (the table in
tests/fixtures/logs/README.md), so each signature matches the stable core of a message and
tolerates the era-specific parts around it.

Each line goes through three steps:

1. Noise removal (collectors/log_records.py): ANSI colours, tqdm bars glued with `\\r`, markdown quotes and auto-links,
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

import codecs
import json
import logging
import os
import re
import zlib
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, field
from enum import Enum
from itertools import islice
from pathlib import Path
from typing import Any

import pyarrow as pa

from trainctl.collectors.log_coll_mismatch import CollTraceEnd, read_coll_mismatch, read_coll_trace_end
from trainctl.collectors.log_fr_trace import FrTraceMissing, read_fr_trace_missing
from trainctl.collectors.log_identity import complete_culprits, read_identity
from trainctl.collectors.log_nccl_ras import RasReport, read_nccl_ras
from trainctl.collectors.log_net_mismatch import read_local_interface, read_net_mismatch
from trainctl.collectors.log_progress import END_LINES, KEYBOARD_INTERRUPT, Reading, read_progress, stopped_mid_run
from trainctl.collectors.log_records import Record, clean_lines, norm_ts, normalized_lines, parse_ts
from trainctl.collectors.log_signatures import SIGNATURES, XID_MEANINGS
from trainctl.collectors.log_signatures.network import BENIGN_IB_WARNING
from trainctl.collectors.log_signatures.process_exits import exit_post
from trainctl.collectors.log_signatures.rule import Blame, C, Event, K, S, Signature, plausible_host
from trainctl.collectors.log_straggler_report import StragglerReport, read_megatron_straggler
from trainctl.collectors.log_vocabulary import kind_from_words
from trainctl.schemas import PRINTER_RANK_BASES, SignalKind, empty_table, schema_for

__all__ = [
    "Blame",
    "Signature",
    "SIGNATURES",
    "XID_MEANINGS",
    "clean_lines",
    "classify_line",
    "parse_log_text",
    "parse_log_file",
    "read_log_text",
    "LOG_END_KEY",
    "parse_run_logs",
    "attribute_to_host",
]

logger = logging.getLogger(__name__)

HOST_COLUMN = "host"

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


def _printer(
    rec: Record, default_rank: int | None, default_host: str | None
) -> tuple[int | None, str | None, str | None, str | None]:
    """(rank, rank_basis, host, host_basis) of the process that printed a record: what its own prefixes say, else
    what its file's path says (a run dir's logs/H/rank-R.log)."""
    rank, rank_basis = (
        (rec.rank, rec.rank_basis)
        if rec.rank is not None
        else (default_rank, "path" if default_rank is not None else None)
    )
    # A host read off the text must name a machine: a redacted or loopback name ("Apr 12 00:54:42 hostname kernel:",
    # "localhost:4242:4250 [0] NCCL ...") says nothing of which one, and a finding must not name it as a host.
    if rec.host and plausible_host(rec.host):
        return rank, rank_basis, rec.host, rec.host_basis
    return rank, rank_basis, default_host, "path" if default_host else None


def classify_line(rec: Record, default_rank: int | None = None, default_host: str | None = None) -> list[Event]:
    """All signature matches in one cleaned record, as events (possibly none)."""
    hits = _keyword_hits(rec.text.lower())
    if not hits:
        return []
    cands = [SIGNATURES[i] for i in sorted({i for h in hits for i in _BY_KEYWORD[h]})]
    rank, rank_basis, host, host_basis = _printer(rec, default_rank, default_host)
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
            ev.ts = parse_ts(norm_ts(v["time"]))
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
    records: Iterable[Record], *, default_rank: int | None = None, default_host: str | None = None
) -> list[Event]:
    events: list[Event] = []
    # ChildFailedError banner state
    section: str | None = None
    entries: list[_ElasticEntry] = []
    no_other = False
    current: _ElasticEntry | None = None
    # the last line of each header kind (_HEADERS) and the event whose following lines are its own (_FOLLOWERS)
    headers: dict[str, tuple[int, str]] = {}
    following: Event | None = None

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
        # ---- lines that belong to the event before them (its frames, its fields) -------------
        if following is not None:
            took = _FOLLOWERS[following.signature](following, rec)
            if took is not _Took.NO:
                following = following if took is _Took.MORE else None
                continue
            following = None
        # ---- ordinary lines --------------------------------------------------------------
        for name, pattern in _HEADERS.items():
            if mh := pattern.search(t):
                headers[name] = (rec.line_no, mh.group(1))
        for ev in classify_line(rec, default_rank, default_host):
            if (use := _HEADER_USES.get(ev.signature)) is not None:
                use(ev, headers, rec.line_no)
            if ev.signature in _FOLLOWERS:
                following = ev
            events.append(ev)
    if entries:
        flush_banner()
    events.extend(_ranked_exceptions(recs, events))
    losses = _loss_values(recs)  # read once for both readings of the loss
    events.extend(_loss_collapse(losses, events))
    events.extend(_loss_divergence(losses, events))
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


# ---------------------------------------------------------------------------------------------
# Lines read with their neighbours
# ---------------------------------------------------------------------------------------------
# Headers: a line that says what the events after it are about. Each kind keeps its last line and value.
_HEADERS: Mapping[str, re.Pattern[str]] = {
    # the r570 driver's multi-line lost-GPU message starts "NVRM: The NVIDIA GPU <pci> ..." and names no GPU after
    "gpu": re.compile(r"NVRM: (?:The NVIDIA GPU |GPU at |GPU )(?:PCI:)?([0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2})"),
    # scontrol show node: the record's "NodeName=X", for its "Reason=" line
    "slurm_node": re.compile(r"^NodeName=([\w.-]{1,253})\s"),
    # nvidia-smi -q's "Fabric" section header, and the state line under it
    "fabric": re.compile(r"^\s*(Fabric)\s*$"),
    "fabric_state": re.compile(r"^\s*State\s*:\s*(\S[^\n]*?)\s*$"),
    # nvidia-smi -q's (before R525) ECC counter blocks
    "ecc_bits": re.compile(r"^\s*(Single Bit|Double Bit)\s*$"),
}


def _gpu_from_header(ev: Event, headers: Mapping[str, tuple[int, str]], line_no: int) -> None:
    h = headers.get("gpu")
    if not ev.gpu_pci and h and line_no - h[0] <= 4:
        ev.gpu_pci, ev.fields["gpu_pci_from_line"] = h[1].lower(), h[0]


def _node_from_record(ev: Event, headers: Mapping[str, tuple[int, str]], line_no: int) -> None:
    h = headers.get("slurm_node")  # the record's own node, not whoever printed it
    ev.host, ev.host_basis = (h[1], "text") if h else (None, None)


def _fabric_from_header(ev: Event, headers: Mapping[str, tuple[int, str]], line_no: int) -> None:
    """A "Status" line is the fabric's only under nvidia-smi -q's "Fabric" header (a few lines above), after a state
    of "Completed" (nvml.h: the status is read only then); any other "Status" line is no finding."""
    h, st = headers.get("fabric"), headers.get("fabric_state")
    if not (h and 0 < line_no - h[0] <= 3 and st and h[0] < st[0] < line_no and st[1] == "Completed"):
        ev.kind, ev.category, ev.severity = None, None, S.INFO


ECC_BLOCK_LINES = 9  # a counter block: Device Memory, Register File, L1, L2, Texture Memory / Shared, CBU, Total


def _double_bit_from_header(ev: Event, headers: Mapping[str, tuple[int, str]], line_no: int) -> None:
    """A "Total" line is the double-bit count only under nvidia-smi -q's "Double Bit" header (the last of the two
    block headers, within a block's lines above); any other "Total" line is no finding."""
    h = headers.get("ecc_bits")
    if not (h and h[1] == "Double Bit" and 0 < line_no - h[0] <= ECC_BLOCK_LINES):
        ev.kind, ev.category, ev.severity = None, None, S.INFO


_HEADER_USES: Mapping[str, Callable[[Event, Mapping[str, tuple[int, str]], int], None]] = {
    "nvrm_fallen_off_bus": _gpu_from_header,
    "slurm_node_drained": _node_from_record,
    "nvidia_smi_fabric_status": _fabric_from_header,
    "nvidia_smi_q_double_bit": _double_bit_from_header,
}


class _Took(str, Enum):
    MORE = "more"  # the line was the event's; read the next one for it too
    LAST = "last"  # the line was the event's last
    NO = "no"  # not the event's: it ends there, and the line is read as any other


def _take_frame(ev: Event, rec: Record) -> _Took:
    """A py-spy / faulthandler thread's frames, after its thread line."""
    if not _FRAME.match(rec.text):
        return _Took.NO
    frames = ev.fields.setdefault("frames", [])
    if len(frames) < 12:
        frames.append(rec.text)
    if _COLLECTIVE_FRAME.search(rec.text):  # py-spy's thread waits in a collective: as the frame alone says
        ev.severity = S.WARNING
    return _Took.MORE


def _take_actor_field(ev: Event, rec: Record) -> _Took:
    """Ray's ActorDiedError context lines ("\tip: a.b.c.d" names the dead actor's node)."""
    mc = _RAY_ACTOR_FIELD.match(rec.text)
    if not mc:
        return _Took.NO
    if mc.group("key") == "ip" and plausible_host(mc.group("value")):
        ev.host, ev.host_basis = mc.group("value"), "text"
    return _Took.MORE


_ORTE_HOSTNAME = re.compile(r"^\s*hostname:\s+(\S+)\s*$")


def _take_orte_hostname(ev: Event, rec: Record) -> _Took:
    """Open MPI 1.x-3.x's lost-daemon message: the next line, "hostname:  X", names the node."""
    mo = _ORTE_HOSTNAME.match(rec.text)
    if ev.peer is None and mo and plausible_host(mo.group(1)):
        ev.peer, ev.fields["peer_from_line"] = mo.group(1), rec.line_no
        return _Took.LAST
    return _Took.NO


# The WorkNCCL(...) of a watchdog timeout whose line a paste broke after "timeout:" (ProcessGroupNCCL.cpp).
_WORK_NCCL = re.compile(
    r"^WorkNCCL\((?:SeqNum=(?P<seq>\d+),\s*)?OpType=(?P<op>\w+)(?:[^\n]*?Timeout\(ms\)=(?P<timeout_ms>\d+))?"
)


def _take_work_nccl(ev: Event, rec: Record) -> _Took:
    """A timeout line broken after "timeout:": the next line's WorkNCCL(...) says which collective."""
    if ev.op is None and (m := _WORK_NCCL.match(rec.text)):
        ev.op, ev.seq = m["op"], int(m["seq"]) if m["seq"] else None
        if m["timeout_ms"]:
            ev.fields["timeout_ms"] = int(m["timeout_ms"])
        return _Took.MORE if m["timeout_ms"] is None else _Took.LAST
    if ev.op is not None and "timeout_ms" not in ev.fields and (mt := re.search(r"Timeout\(ms\)=(\d+)", rec.text)):
        ev.fields["timeout_ms"] = int(mt.group(1))
        return _Took.LAST
    return _Took.NO


# Ray's memory-monitor summary wrapped before its node: "... crashed due to other reasons at" / "node (ID: ..., IP: X)
# over the last time period" (ray src/ray/raylet/node_manager.cc).
_RAY_NODE_IP = re.compile(r"^[^\n]{0,140}?\bIP: (?P<ip>\d{1,3}(?:\.\d{1,3}){3})\)")


def _take_ray_node(ev: Event, rec: Record) -> _Took:
    """The node Ray's memory monitor names, on the line after its summary when a wrap cut it there."""
    if ev.host_basis != "text" and (m := _RAY_NODE_IP.match(rec.text)):
        ev.host, ev.host_basis = m["ip"], "text"
        return _Took.LAST
    return _Took.NO


# Horovod's stall report after its first line (horovod/common/stall_inspector.cc; see the horovod_stall_warning rule):
# "Missing ranks:" / "Stalled ranks:", then "R: [tensors]" per missing rank ("R!: " past the shutdown time; a
# bare "R: " may have been read as srun's task label, kept in the record's fields); v0.13.6-0.16.1's "Stalled ops:"
# and "TENSOR [missing ranks: R, ...]"; "One or more rank (marked by "!") is stalled ... Will shutdown." ends it.
_HVD_RANKS_HEADER = re.compile(r"^(?:Missing|Stalled) ranks:\s*$")
_HVD_RANK_LINE = re.compile(r"^(?P<rank>\d{1,6})(?P<bang>!)?: \[")
_HVD_OLD_OP = re.compile(r"\[missing ranks: (?P<ranks>\d{1,6}(?:, \d{1,6}){0,1000})\]\s*$")
_HVD_SHUTDOWN = re.compile(
    r"One or more rank \(marked by \"!\"\) is stalled for longer than \d+ seconds\. Will shutdown"
)


def _take_horovod_stall(ev: Event, rec: Record) -> _Took:
    """The ranks Horovod's stall inspector lists as missing, on the lines after its warning."""
    missing: list[int] = ev.fields.setdefault("missing_ranks", [])
    took = _Took.MORE
    if _HVD_SHUTDOWN.search(rec.text):
        ev.severity, took = S.CRITICAL, _Took.LAST
    elif _HVD_RANKS_HEADER.match(rec.text) or rec.text.startswith("Stalled ops:"):
        if mo := _HVD_OLD_OP.search(rec.text):  # v0.13.6-0.16.1: the first tensor on the header's line
            missing.extend(int(r) for r in mo["ranks"].split(", "))
    elif m := _HVD_RANK_LINE.match(rec.text):
        missing.append(int(m["rank"]))
        if m["bang"]:
            ev.severity = S.CRITICAL
    elif rec.fields.get("slurm_task") is not None and rec.text.startswith("["):  # "R: [" peeled as srun's label
        missing.append(int(rec.fields["slurm_task"]))
    elif mo := _HVD_OLD_OP.search(rec.text):
        missing.extend(int(r) for r in mo["ranks"].split(", "))
    else:
        return _Took.NO
    ranks = sorted(set(missing))
    ev.fields["missing_ranks"] = ranks
    if len(ranks) == 1:
        ev.culprit_rank, ev.culprit_basis = ranks[0], "horovod_stall_report"
    else:
        ev.culprit_rank = ev.culprit_basis = None
    return took


_FOLLOWERS: Mapping[str, Callable[[Event, Record], _Took]] = {
    "horovod_stall_warning": _take_horovod_stall,
    "stack_dump_thread": _take_frame,
    "ray_actor_died": _take_actor_field,
    "orte_lost_daemon": _take_orte_hostname,
    "ray_memory_monitor_kill": _take_ray_node,
    "nccl_watchdog_timeout": _take_work_nccl,
}


# An exception's own line, the last line of CPython's traceback (Python/pythonrun.c print_exception:
# "module.Class: message", or the bare class name when raised without one).
_EXCEPTION_LINE = re.compile(r"^(?:[A-Za-z_]\w*\.){0,8}(?P<exc>[A-Z]\w{0,80}(?:Error|Exception|Failure))(?::\s|\s*$)")


def _ranked_exceptions(records: list[Record], events: list[Event]) -> list[Event]:
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
    by_text: dict[str, list[Record]] = {}
    for rec in records:
        if rec.rank is None or rec.rank_basis not in PRINTER_RANK_BASES or rec.line_no in classified:
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


def _loss_values(records: list[Record]) -> list[tuple[Record, float]]:
    """Each line's first loss value, in log order."""
    return [(rec, float(m.group("value"))) for rec in records if (m := _LOSS_VALUE.search(rec.text))]


def _loss_collapse(values: list[tuple[Record, float]], events: list[Event]) -> list[Event]:
    """A loss that was a real value and then prints as exactly 0 to the end of the log: a cross-entropy is
    never exactly 0 while a model learns, so the loss stopped being computed over anything (every label
    masked, a bf16/fp16 underflow, a broken loss path). Zeros from the first printed step are that too when
    the same lines print a gradient norm of exactly 0: no gradient reached the weights at all.
    Numerical, a warning, no blame."""
    if any(e.kind is K.NUMERICAL for e in events):
        return []
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


def _loss_divergence(values: list[tuple[Record, float]], events: list[Event]) -> list[Event]:
    """A loss that ends the log at several times its own earlier low: training diverged (a loss spike that did
    not come back, the step before a NaN). Read only where no line says anything else: a warning, no blame."""
    if any(e.kind is not None for e in events):
        return []
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
        if ev.host_basis and ev.host:
            extra["host_basis"] = ev.host_basis
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
    # a c10::Error's backtrace header (pytorch c10/util/Exception.cpp Error::Error: "Exception raised from "
    # << SourceLocation ("{function} at {file}:{line}") << " (most recent call first):"): torch threw, even
    # where the paste lost the message line above it
    r"|^Exception raised from \S{1,200} at \S{1,300}:\d+ \(most recent call first\)"
    # CPython's own headers of an exception that was raised, where a paste may stop: threading.py excepthook
    # ("Exception in thread {name}:" before the thread's traceback), traceback.py's chained-exception separators
    # (_cause_message "The above exception was the direct cause of the following exception:", _context_message
    # "During handling of the above exception, another exception occurred:")
    r"|^Exception in thread \S[^\n]{0,200}:\s*$|^The above exception was the direct cause of the following exception:"
    r"|^During handling of the above exception, another exception occurred:"
    # cuda-gdb's automatic API error checking ("set cuda api_failures", on by default): "warning: Cuda API error
    # detected: cudaMalloc returned (0x2)", a CUDA call that failed under the debugger
    r"|\bCuda API error detected: \w{1,80} returned \(0x[0-9a-fA-F]{1,8}\)"
    # TensorFlow/TSL's TF_CHECK_OK (tsl/platform/status.h): LOG(FATAL) << "Non-OK-status: " #val " status: " << status,
    # then abort(): "Non-OK-status: GpuLaunchKernel(...) status: Internal: out of memory"
    r"|\bNon-OK-status: "
    # an absl::Status as text (abseil absl/status/status.cc Status::ToString: StatusCodeToString(code) + ": " +
    # message), which XLA, JAX's coordination service, TensorFlow and gRPC print: "DEADLINE_EXCEEDED: Deadline
    # Exceeded", "UNAVAILABLE: failed to connect to all addresses" (OK is not a failure; UNKNOWN and INTERNAL
    # only at a line's start, where they cannot be a word of prose); not in a line logged at glog's I or W level
    # or as WARNING/INFO: a healthy JAX start-up warns "Unable to initialize backend 'rocm': NOT_FOUND: ..."
    r"|^(?!\s*(?:[IW](?:\d{4})?\d{4} \d\d:|(?:WARNING|INFO)\b))[^\n]{0,300}?(?<![\w-])(?:CANCELLED|INVALID_ARGUMENT"
    r"|DEADLINE_EXCEEDED|NOT_FOUND|ALREADY_EXISTS|PERMISSION_DENIED|RESOURCE_EXHAUSTED|FAILED_PRECONDITION|ABORTED"
    r"|OUT_OF_RANGE|UNIMPLEMENTED|UNAVAILABLE|DATA_LOSS|UNAUTHENTICATED): |^(?:UNKNOWN|INTERNAL): "
)
MAX_UNCLASSIFIED_LINES = 20  # quoted per log; the rest are counted
# Error-looking lines their own printer treats as harmless: NCCL <= 2.4 printed
# WARN("Failed to open libibverbs.so[.1]") when the host has no IB verbs library and went on over its
# socket transport (src/misc/ibvwrap.cu); later releases print the same text as INFO(NCCL_INIT, ...)
# (src/misc/ibvwrap.cc). Quoting it as the failure hides what the log does show (a stalled init).
_HARMLESS = re.compile(r"NCCL WARN Failed to open libibverbs\.so|" + BENIGN_IB_WARNING)
_TRACEBACK = re.compile(r"Traceback \(most recent call last\)")
# an exception line after a logger's prefix ("(Worker pid=7) ERROR ... [file.py:932] ValueError: ...")
_EXCEPTION_AFTER_PREFIX = re.compile(r"(?:^|\s)" + _EXCEPTION_LINE.pattern.removeprefix("^"))


@dataclass(frozen=True)
class _TracebackPart:
    """A stretch of a log between Python traceback boundaries (CPython traceback.c / traceback.py): it opens at a
    traceback's header, at the log's start or after the line that closed the part before it, and is closed by an
    exception line (after a logger's prefix too) or KeyboardInterrupt, or left open where the next header begins or
    the log ends (a paste, or a log, cut inside it). The one reading the passes over tracebacks share."""

    header: Record | None  # "Traceback (most recent call last):"; None where the part opened without one
    body: tuple[Record, ...]  # its frames and source lines (and any other line between)
    closing: Record | None  # the exception (or KeyboardInterrupt) line; None: cut before one


def _traceback_parts(records: list[Record]) -> list[_TracebackPart]:
    parts: list[_TracebackPart] = []
    header: Record | None = None
    body: list[Record] = []
    for rec in records:
        if _TRACEBACK.search(rec.text):
            if header is not None or body:
                parts.append(_TracebackPart(header, tuple(body), None))
            header, body = rec, []
        elif _EXCEPTION_AFTER_PREFIX.search(rec.text) or KEYBOARD_INTERRUPT.match(rec.text):
            parts.append(_TracebackPart(header, tuple(body), rec))
            header, body = None, []
        else:
            body.append(rec)
    if header is not None or body:
        parts.append(_TracebackPart(header, tuple(body), None))
    return parts


def _interrupted_tracebacks(parts: list[_TracebackPart]) -> set[int]:
    """Line numbers of the tracebacks (header to exception line) that end in KeyboardInterrupt, or that the
    terminal's "^C" echo begins and the paste cut before their exception line: the user's Ctrl-C, not a failure
    (log_progress.KEYBOARD_INTERRUPT); their frames are read as a stack dump. (One the echo begins that ends in another
    exception is that exception's: the process failed while the user stopped it.)"""
    out: set[int] = set()
    for i, part in enumerate(parts):
        if part.header is None:
            continue
        if part.closing is not None and KEYBOARD_INTERRUPT.match(part.closing.text):
            out.update(range(part.header.line_no, part.closing.line_no + 1))
        elif part.closing is None and i == len(parts) - 1 and part.header.fields.get("echoed_interrupt"):
            out.update(range(part.header.line_no, (part.body[-1] if part.body else part.header).line_no + 1))
    return out


# A traceback's frame (CPython traceback.c / traceback.py: 'File "{filename}", line {n}, in {name}', its source line
# after it; records come with their indentation stripped, a logger's prefix kept) inside a collective of
# torch.distributed (distributed_c10d.py) or of a framework's wrapper of one, or the source line that calls one
# ("dist.all_reduce(t)", "comm.gather(d)").
_COLLECTIVE_IN_TRACEBACK = re.compile(
    r'(?:^|\s)File "[^"\n]*(?:torch/distributed/distributed_c10d|deepspeed/comm/(?:comm|torch)|detectron2/utils/comm'
    r'|megatron/core/parallel_state|horovod/torch/(?:mpi_ops|functions))\.py", line \d+, in '
    r"(?:all_reduce\w*|all_gather\w*|reduce_scatter\w*|all_to_all\w*|broadcast\w*|barrier|gather\w*|scatter\w*|reduce"
    r"|send|recv|allreduce\w*|allgather\w*)\s*$"
    r"|(?:^|\s)(?:\w+ = )?(?:dist|torch\.distributed|comm|deepspeed\.comm|hvd)\."
    r"(?:all_reduce|all_gather\w*|reduce_scatter\w*|all_to_all\w*|broadcast\w*|barrier|gather\w*|scatter\w*|reduce"
    r"|allreduce|allgather)\("
)


def _cut_in_collective(parts: list[_TracebackPart]) -> Record | None:
    """The collective frame of a traceback cut off before its exception line (the paste, or the log, stops
    inside it): what failed is the collective's call, though not why. A traceback that reaches its exception line
    says why on that line, and is read there."""
    if not parts or parts[-1].closing is not None:
        return None
    return next((rec for rec in reversed(parts[-1].body) if _COLLECTIVE_IN_TRACEBACK.search(rec.text)), None)


def _unclassified(
    records: list[Record], default_rank: int | None, default_host: str | None, goodbye: set[int]
) -> list[Event]:
    """Error-looking lines of a log in which no signature matched anything: one warning event each
    (at most MAX_UNCLASSIFIED_LINES), quoting the line. They blame no rank or host: the line says
    something failed, not who; the rank/host that printed it is kept as the reporter. A traceback cut off
    inside a collective call makes them a network error (the collective raised: a peer that died, the
    network, a timeout) unless their words say another kind."""
    parts = _traceback_parts(records)
    interrupted = _interrupted_tracebacks(parts)
    errorish = [
        rec
        for rec in records
        if _ERRORISH.search(rec.text[:4000])
        and not _HARMLESS.search(rec.text[:4000])
        and rec.line_no not in interrupted
        and rec.line_no not in goodbye  # torchrun's goodbye (_store_goodbyes): its store call's failure and backtrace
    ]
    out = _quoted(errorish, default_rank, default_host)
    if out and not any("kind_from_words" in ev.fields for ev in out) and (cut := _cut_in_collective(parts)):
        for ev in out:
            ev.kind = K.NETWORK_ERROR
            ev.fields["cut_in_collective"] = cut.text[:200]
    return out


# Words that say something failed, in any printer's prose ("failed to verify GPU driver installation: exit status
# 255", "Unable to write to EQ", "rank 3 died"): too common in healthy logs to quote anywhere (a plugin "failed to
# load", a retry that then worked), but the last lines of a log that stopped are what stopped it.
_FAILURE_WORDS = re.compile(
    r"\b(?:fail(?:ed|ure|s|ing)?|errors?|errno|abort(?:ed|ing)?|(?<!non-)fatal|panic(?:ked)?|killed|crash(?:ed|es)?|segfault"
    r"|core dumped|died|exit(?:ed)? (?:with )?(?:code|status) [1-9]\d*|cannot|could not|couldn't|unable to|refused"
    r"|denied|timed out)\b",
    re.I,
)
_NO_FAILURE = re.compile(
    r"\b(?:no|0|zero|without)\s+(?:[\w-]+\s+){0,3}?(?:errors?|failures?)\b|\b(?:errors?|failures?)\s*[:=]\s*0\b", re.I
)


def _failure_words_at_end(records: list[Record], default_rank: int | None, default_host: str | None) -> list[Event]:
    """A log handed over on its own with no error-looking line and no reading of absence, whose last lines say in
    plain words that something failed: those lines, quoted as unclassified errors (what stopped it)."""
    tail = list(islice((rec for rec in reversed(records) if rec.text.strip()), END_LINES))[::-1]
    said = [
        rec
        for rec in tail
        if _FAILURE_WORDS.search(rec.text[:4000])
        and not _NO_FAILURE.search(rec.text[:4000])
        and not _HARMLESS.search(rec.text[:4000])
    ]
    out = _quoted(said, default_rank, default_host)
    for ev in out:
        ev.fields["read_at_log_end"] = True
    return out


def _quoted(lines: list[Record], default_rank: int | None, default_host: str | None) -> list[Event]:
    """One unclassified warning event per line (at most MAX_UNCLASSIFIED_LINES, the rest counted), blaming
    nobody, with the kind the lines' own words say (collectors/log_vocabulary.py) where they say one."""
    out: list[Event] = []
    for rec in lines[:MAX_UNCLASSIFIED_LINES]:
        rank, rank_basis, host, host_basis = _printer(rec, default_rank, default_host)
        ev = Event(
            rec.line_no, rec.text, "unclassified_error", K.CRASH, C.UNCLASSIFIED, S.WARNING, Blame.NONE, True,
            rank=rank, rank_basis=rank_basis, host=host, host_basis=host_basis, ts=rec.ts,
        )  # fmt: skip
        ev.fields["unclassified"] = True
        out.append(ev)
    more = len(lines) - len(out)
    if out and more:
        out[-1].fields["more_unclassified_lines"] = more
    # what kind the lines' own words say (collectors/log_vocabulary.py): one kind for all, one finding
    if out and (guess := kind_from_words(e.message for e in out)):
        for ev in out:
            ev.kind = guess.kind
            ev.fields.update(kind_from_words=guess.words)
    return out


def parse_log_text(
    text: str,
    source: str = "<text>",
    *,
    rank: int | None = None,
    host: str | None = None,
    ends_where_it_stopped: bool = False,
) -> pa.Table:
    """Classify every line of `text` into a log_events table (plus a `host` column).

    `rank`/`host` are what the caller knows from where the text came from (a run dir's
    logs/H/rank-R.log); the text's own prefixes ([rankN]:, Ray ip, pdsh host) take precedence.
    A log in which no signature matched but some line looks like an error gets "unclassified
    error" events for those lines (never silence on a log that says something failed).
    `ends_where_it_stopped`: the text is a log handed over on its own, whose end is where its run
    stopped printing (collectors/log_progress.read_progress).
    """
    records = list(clean_lines(text))
    events = parse_records(records, default_rank=rank, default_host=host)
    _retries_are_warnings(events)
    _raised_in_rendezvous(records, events)
    goodbye = _store_goodbyes(records, events)
    # a blamed printer's other half (its host, its rank) from other lines of the text
    complete_culprits(events, read_identity(records, events, plausible_host=plausible_host))
    if not any(e.kind is K.OOM for e in events):
        events = events + _oom_task_dump(records, host)
    # NCCL's RAS report (collectors/log_nccl_ras.py): NCCL's own verdict on dead processes and ranks behind; read
    # before the fallbacks, whose error words its "Errors" headers would otherwise be
    if ras := read_nccl_ras((r.line_no, r.text) for r in records):
        events = events + _ras_events(ras)
    # torch's Flight Recorder analyzer's report pasted in (collectors/log_fr_trace.py): the ranks it found missing
    if fr := read_fr_trace_missing((r.line_no, r.text) for r in records):
        events = events + [_fr_trace_event(fr)]
    if not any(e.kind is not None for e in events):
        events = events + _unclassified(records, rank, host, goodbye)
    if not any(e.kind is not None for e in events):
        events = events + _nccl_return_trace(records)
    # hosts that chose disjoint NCCL networks (collectors/log_net_mismatch.py): what a stalled set-up
    # after them means, so it comes before (and instead of) the reading of absence
    if mm := read_net_mismatch((r.line_no, r.host, r.text) for r in records):
        for n, h, t in mm.lines:
            ev = Event(n, t, "nccl_network_mismatch", K.NETWORK_ERROR, C.NCCL, S.WARNING, Blame.NONE, False, host=h)
            ev.fields.update(reason=mm.reason, networks_by_host=mm.networks_by_host)
            events.append(ev)
    # ... and a job across hosts whose NCCL chose lo or a container bridge for its sockets (the same module)
    if li := read_local_interface((r.line_no, r.host, r.text) for r in records):
        for n, h, t in li.lines:
            ev = Event(n, t, "nccl_local_interface", K.NETWORK_ERROR, C.NCCL, S.WARNING, Blame.NONE, False, host=h)
            ev.fields.update(reason=li.reason)
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
        events = events + _quiet_log_readings(records, rank, host, text, ends_where_it_stopped)
    # Megatron's own straggler reports (collectors/log_straggler_report.py): after the fallbacks, so that a straggler
    # never keeps an unknown error line from being quoted or a stop from being read (either outranks it)
    if sr := read_megatron_straggler((r.line_no, r.text) for r in records):
        events = events + [_straggler_event(sr)]
    table = _to_table(events, source)
    if not ends_where_it_stopped:
        return table
    return table.replace_schema_metadata({**(table.schema.metadata or {}), LOG_END_KEY: json.dumps(_log_end(text))})


# A line that says in its own words that the failure it reports is being retried (requests/urllib3's "Retrying
# (Retry(total=4, ...)) after connection broken by ...", tenacity's and the clouds' SDKs' "Retrying in 2 s",
# "attempt 1/5", "will retry"): the program handles it; if the retries run out, the line that says so is the failure.
_RETRYING = re.compile(r"\bretrying\b|\bwill retry\b|\bretry(?:ing)? in \d|\battempt \d+\s*(?:/|of)\s*\d+", re.I)


def _raised_in_rendezvous(records: list[Record], events: list[Event]) -> None:
    """A traceback through the rendezvous (torch's init_process_group, its store, torchelastic's rendezvous: the
    generic `rendezvous_traceback_frame`) that ends in an exception no signature knows: the exception was raised
    while the group was being formed, which is what the excerpt can say of it. Its deepest rendezvous frame becomes
    the failure, read at the exception line (not generic, critical, the frame kept as `raised_in`), so that it
    outranks the launcher's banner that reports the process's exit (an exit 1 is the interpreter's for an uncaught
    exception: `analyzers/logs._late_banner`). A classified exception line says more, and is left to say it."""
    if not any(e.signature == "rendezvous_traceback_frame" for e in events):
        return  # most logs: no second pass over their lines
    on_line: dict[int, list[Event]] = {}
    for e in events:
        on_line.setdefault(e.line_no, []).append(e)
    for part in _traceback_parts(records):
        exc = part.closing
        if exc is None or not _EXCEPTION_AFTER_PREFIX.search(exc.text):
            continue  # cut, or the user's Ctrl-C
        frames = [
            e for rec in part.body for e in on_line.get(rec.line_no, []) if e.signature == "rendezvous_traceback_frame"
        ]
        if frames and not any(e.kind is not None for e in on_line.get(exc.line_no, [])):
            last = frames[-1]  # read as the exception line, raised in that frame
            last.fields["raised_in"] = last.message[:300]
            last.generic, last.severity, last.line_no, last.message = False, S.CRITICAL, exc.line_no, exc.text


def _retries_are_warnings(events: list[Event]) -> None:
    for ev in events:
        if ev.severity is S.CRITICAL and _RETRYING.search(ev.message):
            ev.severity = S.WARNING
            ev.fields["retrying"] = True


# torchrun's goodbye on a run of several agents: DynamicRendezvousHandler.shutdown() (torch/distributed/elastic/
# rendezvous/dynamic_rendezvous.py) logs "The node '%s' has failed to shutdown the rendezvous '%s' due to an error of
# type %s." when its last store call failed because the store's host, the first agent, had already exited after a
# run that ended (healthy or not). That call's own failure, TCPStore.cpp's C10D_WARNING "[c10d] <op> failed on
# SocketImpl(...)" with its c10::Error backtrace, is printed just before the goodbye: part of it, not a lost store.
_GOODBYE = re.compile(r"has failed to shutdown the rendezvous")
_GOODBYE_LINES = 64  # the C++ warning and its backtrace (about 30 frames) before the goodbye


def _store_goodbyes(records: list[Record], events: list[Event]) -> set[int]:
    """The store failures that are torchrun's goodbye lose their kind (no finding: the run's own findings say how it
    ended); returns the lines from each such failure to its goodbye, which the unknown-error fallback does not quote."""
    byes = [r.line_no for r in records if _GOODBYE.search(r.text)]
    quiet: set[int] = set()
    if not byes:
        return quiet
    for ev in events:
        bye = next((b for b in byes if 0 < b - ev.line_no <= _GOODBYE_LINES), None)
        if ev.signature in ("store_socket_failed", "c10d_store_connection_closed") and bye is not None:
            ev.kind = None
            ev.fields["agent_shutdown"] = True
            quiet.update(range(ev.line_no, bye + 1))
    return quiet


# Schema metadata of the table of a log handed over on its own: [its lines up to the last non-blank one, that line
# as written], what `diagnose` says of a log in which it found nothing (never a bare "no findings").
LOG_END_KEY = b"trainctl.log_end"


def _log_end(text: str) -> tuple[int, str]:
    """(lines up to the last non-blank one, that line as written: the last state of a line redrawn with "\r").
    Only the text's last 64 KiB are split into lines (a rank log may be a gigabyte)."""
    end = len(text)
    while end and text[end - 1].isspace():
        end -= 1
    if not end:
        return 0, ""
    cut = max(0, end - 64 * 1024)
    lines = normalized_lines(text[cut:end])[0]
    return text.count("\n", 0, cut) + len(lines), lines[-1].rsplit("\r", 1)[-1].strip()


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


def _nccl_return_trace(records: list[Record]) -> list[Event]:
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


# Linux mm/oom_kill.c dump_tasks, called by dump_header when the OOM killer runs (vm.oom_dump_tasks, on by
# default): pr_info("Tasks state (memory values in pages):"), the header "[  pid  ]   uid  tgid total_vm      rss
# pgtables_bytes swapents oom_score_adj name" (4.x: "nr_ptes nr_pmds"; 6.x adds "rss_anon rss_file rss_shmem"),
# then dump_task's pr_info("[%7d] %5d %5d %8lu %8lu %8llu %8lu         %5hd %s\n", pid, uid, tgid, total_vm, rss,
# ..., oom_score_adj, comm) per task. A paste of its rows alone still proves the OOM killer ran on that host.
_OOM_TASK_LINE = re.compile(
    r"\[\s*\d{1,7}\]\s+\d+\s+\d+(?:\s+\d+){3,8}\s+-?\d{1,4}\s+\S.{0,40}$"  # a task's row
    r"|(?P<header>\[\s*pid\s*\]\s+uid\s+tgid\s+total_vm\s+rss|Tasks state \(memory values in pages\))"
)
MIN_OOM_TASK_ROWS = 3


def _oom_task_dump(records: list[Record], default_host: str | None) -> list[Event]:
    """The OOM killer's task dump (its header, or three or more of its rows): one event, host memory ran out."""
    hits = [(rec, m) for rec in records if (m := _OOM_TASK_LINE.search(rec.text))]
    if len(hits) < MIN_OOM_TASK_ROWS and not any(m.group("header") for _, m in hits):
        return []
    rows = [rec for rec, _ in hits]
    rec = rows[0]
    _, _, host, basis = _printer(rec, None, default_host)
    ev = Event(rec.line_no, rec.text, "oom_killer_task_dump", K.OOM, None, S.CRITICAL, Blame.SELF, False,
               host=host, host_basis=basis, ts=rec.ts)  # fmt: skip
    ev.fields.update(task_rows=len(rows))
    _finish(ev)  # the host whose kernel printed it is the one that ran out
    return [ev]


RAW_TAIL_LINES = 8  # the log's last lines, unwrapped but not cleaned, for readings of what cleaning drops (bars)


def _raw_tail(text: str) -> list[tuple[int, str]]:
    """The log's last RAW_TAIL_LINES non-blank lines as written (unwrapped, not cleaned), numbered."""
    cut = max(0, len(text) - RAW_TAIL_LINES * 400)
    first_line = text.count("\n", 0, cut) + 1
    return [(n, ln) for n, ln in enumerate(normalized_lines(text[cut:])[0], first_line) if ln.strip()][-RAW_TAIL_LINES:]


def _quiet_log_readings(
    records: list[Record], default_rank: int | None, default_host: str | None, text: str, ends_where_it_stopped: bool
) -> list[Event]:
    """A log with no error line at all, in order: the reading of absence (collectors/log_progress.py), if one holds,
    as one event that analyzers/log_progress.py makes a low-confidence finding of; then, for a log on its own, the
    failure words of its last lines; then the weakest reading (log_progress.stopped_mid_run), a run at work whose
    log ends with nothing said. The log's raw tail is cut once for the readings that look at it."""
    tail = _raw_tail(text)
    lines = [(rec.line_no, rec.text) for rec in records]
    r = (_coll_trace_stopped(records) if ends_where_it_stopped else None) or read_progress(
        lines,
        {rec.line_no: rec.rank for rec in records if rec.rank is not None},
        raw_tail=tail,
        ends_where_it_stopped=ends_where_it_stopped,
        counter_of_line={rec.line_no: rec.fields["line_counter"] for rec in records if "line_counter" in rec.fields},
    )
    if r is not None or not ends_where_it_stopped:
        return _reading_event(r, default_rank, default_host)
    return _failure_words_at_end(records, default_rank, default_host) or _reading_event(
        stopped_mid_run(lines, tail), default_rank, default_host
    )


def _reading_event(r: Reading | None, default_rank: int | None, default_host: str | None) -> list[Event]:
    if r is None:
        return []
    ev = Event(r.line_no, r.summary, r.signature, r.kind, None, S.WARNING, Blame.NONE, True,
               rank=default_rank, host=default_host)  # fmt: skip
    ev.fields.update(r.evidence, progress_reading=True, suspect_ranks=list(r.suspect_ranks))
    return [ev]


def _coll_trace_stopped(records: list[Record]) -> Reading | None:
    """A log on its own that ends in NCCL's COLL trace (collectors/log_coll_mismatch.read_coll_trace_end), as a
    reading of absence: the processes all in one collective, or a minority that stopped before the others."""
    end = read_coll_trace_end(
        (rec.line_no, rec.host, rec.fields.get("nccl_pid"), rec.rank, rec.text) for rec in records
    )
    return None if end is None else _coll_trace_reading(end)


def _coll_trace_reading(end: CollTraceEnd) -> Reading:
    k = len(end.last_by_process)
    of = f"{k} processes of a {end.nranks}-rank communicator" if k < end.nranks else f"all {k} processes"
    if not end.behind:
        summary = (
            f"the log ends in NCCL's collective trace with {of} in {end.op} opCount 0x{end.op_count} (each called it"
            " last, nothing after): the collective they all entered did not finish (a transfer stuck on a link or a"
            " GPU), or the excerpt was cut there"
        )
    else:
        named = ", ".join(f"{p} (rank {end.rank_behind[p]})" if p in end.rank_behind else p for p in end.behind)
        summary = (
            f"the log ends in NCCL's collective trace with {named} behind: {'its' if len(end.behind) == 1 else 'their'}"
            f" last call is before {end.op} opCount 0x{end.op_count}, which the other {k - len(end.behind)} of {of}"
            " called and wait in (stuck before it), or the excerpt was cut there"
        )
    return Reading(
        "nccl_coll_trace_ends",
        summary,
        end.line_no,
        suspect_ranks=tuple(sorted(end.rank_behind.values())),
        evidence={
            "last_op_count_by_process": end.last_by_process,
            "processes_behind": list(end.behind),
            "nranks": end.nranks,
        },
    )


def _ras_events(ras: RasReport) -> list[Event]:
    """A dead process is its host's process gone (a crash, or the host unreachable); a rank behind is the one the
    others wait for in a collective. Each names the node the report gives, as a peer of the process that printed the
    report (the printer is not that node: a run dir's attribution never moves the blame onto the writer's host), at
    basis `nccl_ras`; the rank it gives is the communicator's, kept as evidence, not taken for the job's rank."""
    out: list[Event] = []

    def add(ev: Event) -> None:
        _finish(ev)
        if ev.culprit_host:
            ev.culprit_basis = "nccl_ras"
        out.append(ev)

    for p, dead in [*((p, True) for p in ras.dead), *((p, False) for p in ras.behind)]:
        ev = Event(p.line_no, p.text, "nccl_ras_dead_process" if dead else "nccl_ras_rank_behind",
                   K.CRASH if dead else K.HUNG_COLLECTIVE, None if dead else C.COLLECTIVE_TIMEOUT, S.CRITICAL,
                   Blame.PEER, False, peer=p.node)  # fmt: skip
        ev.fields.update(pid=p.pid)
        if not dead:
            ev.fields.update(comm_rank=p.comm_rank, comm_hash=p.comm, op=p.op, launched=p.launched,
                             most_launched=p.most_launched)  # fmt: skip
        add(ev)
    for p in ras.errored:
        kind, category, own = _RAS_ERRORS.get(p.error or "", (K.CRASH, None, False))
        ev = Event(p.line_no, p.text, "nccl_ras_rank_error", kind, category, S.CRITICAL if own else S.WARNING,
                   Blame.PEER if own else Blame.NONE, not own, peer=p.node if own else None)  # fmt: skip
        ev.fields.update(pid=p.pid, node=p.node, comm_rank=p.comm_rank, comm_hash=p.comm, error=p.error,
                         error_phase=p.phase)  # fmt: skip
        add(ev)
    return out


# NCCL's RAS report's names of ncclResult_t (src/ras/client_support.cc ncclErrorToString) -> (kind, category, whether
# the error is the reporting rank's own). A CUDA error is the GPU's or its process's own failure; a system, internal or
# remote error is what a rank saw when a socket or a peer failed (NCCL's own "remote process exited or there was a
# network error"), a consequence that names its reporter, not the cause; invalid argument/usage is the program's.
_RAS_ERRORS: dict[str, tuple[K, C | None, bool]] = {
    "Unhandled CUDA error": (K.CRASH, C.CUDA_ERROR, True),
    "System error": (K.NETWORK_ERROR, C.NCCL, False),
    "Internal error": (K.NETWORK_ERROR, C.NCCL, False),
    "Remote process error": (K.NETWORK_ERROR, C.NCCL, False),
    "Invalid argument": (K.CRASH, None, False),
    "Invalid usage": (K.CRASH, None, False),
}


def _fr_trace_event(fr: FrTraceMissing) -> Event:
    """torch's analyzer's missing ranks: one is the culprit (basis `fr_trace`); several are named, none blamed alone."""
    ev = Event(fr.line_no, fr.text, "fr_trace_missing_ranks", K.HUNG_COLLECTIVE, C.COLLECTIVE_TIMEOUT, S.CRITICAL,
               Blame.SELF if len(fr.missing_ranks) == 1 else Blame.NONE, False)  # fmt: skip
    if len(fr.missing_ranks) == 1:
        ev.rank, ev.rank_basis = fr.missing_ranks[0], "fr_trace"
    ev.fields.update(missing_ranks=list(fr.missing_ranks), collective=fr.collective, seq=fr.seq, reports=fr.reports)
    _finish(ev)
    return ev


def _straggler_event(sr: StragglerReport) -> Event:
    """The rank Megatron's straggler reports keep naming slowest. The report names a rank, not its host (rank 0 prints
    it for every rank), so no host is taken from the printer."""
    ev = Event(sr.line_no, sr.text, "megatron_straggler_report", K.STRAGGLER, C.COMPUTE, S.WARNING, Blame.SELF, False,
               rank=sr.rank, rank_basis="megatron_straggler_report")  # fmt: skip
    ev.fields.update(
        slowdown_ratio=round(sr.median_ratio, 3),
        reports_slowest=sr.reports_slowest,
        reports_with_gap=sr.reports_with_gap,
        reports=sr.reports,
    )
    _finish(ev)
    return ev


MAX_LOG_BYTES = 1 << 30  # read (after decompression) at most this much of one log; the rest is cut, said


def _decoded(data: bytes) -> str:
    # PowerShell's `>` and Out-File (Windows PowerShell 5) write UTF-16 with a byte order mark: read as
    # UTF-16, not as a NUL between every two letters.
    if data[:2] in (codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE):
        return data.decode("utf-16", errors="replace")
    return data.decode("utf-8", errors="replace")


def read_log_text(path: Path, *, max_bytes: int = MAX_LOG_BYTES) -> str:
    """The file as text (any bytes decoded with replacement), at most `max_bytes` of it: a gzip bomb is
    cut off and a truncated .gz keeps every byte that was decompressible, each with a warning."""
    chunks: list[bytes] = []
    total = 0
    with open(path, "rb") as f:
        if path.suffix != ".gz":
            data = f.read(max_bytes + 1)
            if len(data) > max_bytes:
                logger.warning("%s: over %d bytes; the rest is not read", path, max_bytes)
            return _decoded(data[:max_bytes])
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
    return _decoded(b"".join(chunks))


def parse_log_file(
    path: str | os.PathLike[str],
    *,
    rank: int | None = None,
    host: str | None = None,
    ends_where_it_stopped: bool = False,
) -> pa.Table:
    """Parse one log file (plain or .gz): a pasted log, a rank log, or a kernel log (dmesg/journalctl -k).
    ends_where_it_stopped: the file is diagnosed on its own (parse_log_text)."""
    p = Path(path)
    return parse_log_text(read_log_text(p), str(p), rank=rank, host=host, ends_where_it_stopped=ends_where_it_stopped)


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
