"""Who is who in one excerpt: rank <-> host <-> pid, read from every line (issue 13 items 3 and 4).

A finding names what the one line it came from names. Users' excerpts often settle the culprit only
across lines: one line blames rank 3, another (printed by rank 3, with its launcher's host prefix)
says rank 3 runs on host X; an NCCL line printed by pid 1234 on host X blames its printer, and
NCCL's init line printed by that same pid says which rank it is. This module reads those pairings
from every record of an excerpt (`read_identity`) and completes the culprit of each event with them
(`complete_culprits`). It never adds a culprit: it only names the other half (host or rank) of a
culprit a line already blamed, and only where the pairing is unique in the excerpt.

Sources (docs/log-signatures.md, "Naming the culprit across lines"):
- a record whose prefixes carry both a rank ("[rankN]:", "[PG 0 ... Rank N]", "[Rank N]", MPI
  --tag-output, Lightning "[rank: N]") and a host (pdsh "host: ", NCCL's "host:pid:tid [dev]", Ray
  "(pid=N, ip=X)", kubectl "[pod/NAME/C]", slurmstepd-NODE): the process that printed it is that
  rank on that host;
- NCCL's init lines, "comm %p rank %d nranks %d cudaDev %d nvmlDev %d busId %lx commId 0x%llx -
  Init START/COMPLETE" (NVIDIA/nccl src/init.cc, 2.12 to 2.23; older "comm %p rank %d nranks %d
  cudaDev %d busId %lx"), printed under the "%s:%d:%d [%d] " host:pid:tid [cudaDev] prefix of
  src/debug.cc: the pid on that host is that rank of the communicator. Only the communicators with
  the most ranks in the excerpt count: a sub-communicator's rank is not the global rank.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from trainctl.collectors.log_records import Record
from trainctl.collectors.log_signatures.rule import Event
from trainctl.collectors.nccl_topology import channel_own_rank, comm_rank

# CUDA error reporters that print the host they ran on: microsoft/CNTK CudaCall (Source/Math,
# CUDA_CALL/CUBLAS_CALL) and onnxruntime's CudaCall (core/providers/cuda/cuda_call.cc):
# "%s failure %d: %s ; GPU=%d ; hostname=%s ; expr=%s".
_SELF_HOSTNAME = re.compile(r" ; GPU=\d+ ; hostname=(?P<host>[A-Za-z0-9][\w.-]{0,252}) ; ")
# A hostname shortened by the person who pasted it ("...-48", "node…", "gpu-...-7"): the visible part
# is not a machine's name and must not be named as one.
_SHORTENED = re.compile(r"\.\.\.|…")


def shortened(host: str) -> bool:
    return bool(_SHORTENED.search(host))


@dataclass(frozen=True)
class Identity:
    """Pairings read from an excerpt; each value lists every candidate seen (unique = proven)."""

    hosts_of_rank: Mapping[int, frozenset[str]]
    ranks_of_pid: Mapping[tuple[str, int], frozenset[int]]  # (short host, pid) -> ranks
    lines_of_rank: Mapping[int, int]  # rank -> the first line that paired it with a host
    lines_of_pid: Mapping[tuple[str, int], int]

    def host_of(self, rank: int) -> str | None:
        """The rank's host where every line names one machine (node-b and node-b.example.com are one)."""
        hosts = self.hosts_of_rank.get(rank, frozenset())
        return min(hosts) if len({_short(h) for h in hosts}) == 1 else None

    def rank_of(self, host: str, pid: int) -> int | None:
        ranks = self.ranks_of_pid.get((_short(host), pid), frozenset())
        return next(iter(ranks)) if len(ranks) == 1 else None


def _short(host: str) -> str:
    """The name NCCL prints: gethostname() cut at the first '.' (src/misc/utils.cc getHostName), where
    torchelastic's banner prints socket.getfqdn(). An address stays whole."""
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return host.split(".", 1)[0]
    return host


def read_identity(
    records: Iterable[Record], events: Iterable[Event] = (), *, plausible_host: Callable[[str | None], bool]
) -> Identity:
    """Pairings from records that are one raw line each (a record joined from a terminal wrap may glue
    one process's prefix, pdsh "host: ", to the next line's rank tag, which is no pairing), and from
    torchelastic's failure banner entries (`events`: rank, host and pid of each failed worker). A name
    that is no machine's (`plausible_host` says no: "localhost", "hostname", "...-48") pairs nothing."""

    hosts_of_rank: dict[int, set[str]] = {}
    lines_of_rank: dict[int, int] = {}
    ranks_of_pid: dict[tuple[str, int], set[int]] = {}
    lines_of_pid: dict[tuple[str, int], int] = {}
    for ev in events:
        # torch/distributed/elastic/multiprocessing/errors/__init__.py (v2.4.0) ChildFailedError.format_msg:
        # "host : %s", "rank : %s (local_rank: %s)", "exitcode : %s (pid: %s)" per failed worker.
        pid = ev.fields.get("pid")
        if ev.signature.startswith("elastic_") and ev.rank is not None and ev.host_basis == "elastic_entry":
            if not plausible_host(ev.host):
                continue
            hosts_of_rank.setdefault(ev.rank, set()).add(ev.host)
            lines_of_rank.setdefault(ev.rank, ev.line_no)
            if pid is not None:
                ranks_of_pid.setdefault((_short(ev.host), pid), set()).add(ev.rank)
                lines_of_pid.setdefault((_short(ev.host), pid), ev.line_no)
    comm_lines: list[tuple[str, int, int, int, int]] = []  # host, pid, rank, nranks, line
    channel_ranks: dict[tuple[str, int], set[int]] = {}  # (host, pid) -> its own rank in its channel lines
    channel_lines: dict[tuple[str, int], int] = {}
    for rec in records:
        host = rec.host
        if not plausible_host(host):
            continue
        if rec.wrap_joined:
            # a wrap may glue another host's line on, but NCCL's prefix and its init line's rank both on the first
            # physical line (the wrap cut the line's end: "... busId 200000 - Init COMPLE" / "TE") still pair
            pid = rec.fields.get("nccl_pid")
            if pid is not None and (rn := comm_rank(rec.first_line)) is not None:
                comm_lines.append((host, pid, *rn, rec.line_no))
            continue
        if rec.rank is not None:
            hosts_of_rank.setdefault(rec.rank, set()).add(host)
            lines_of_rank.setdefault(rec.rank, rec.line_no)
        pid = rec.fields.get("nccl_pid")
        # the communicator's init line (src/init.cc; formats: collectors/nccl_topology.py)
        rn = comm_rank(rec.text) if pid is not None else None
        if rn is not None:
            comm_lines.append((host, pid, *rn, rec.line_no))
        elif pid is not None and (own := channel_own_rank(rec.text)) is not None:
            channel_ranks.setdefault((_short(host), pid), set()).add(own)
            channel_lines.setdefault((_short(host), pid), rec.line_no)
    world = max((n for *_, n, _ in comm_lines), default=0)
    for host, pid, rank, nranks, line_no in comm_lines:
        if nranks != world:
            continue
        ranks_of_pid.setdefault((_short(host), pid), set()).add(rank)
        lines_of_pid.setdefault((_short(host), pid), line_no)
        hosts_of_rank.setdefault(rank, set()).add(host)
        lines_of_rank.setdefault(rank, line_no)
    # Where the excerpt shows no init line for a process, its channel lines name its rank (one communicator's:
    # a process that set up several shows several ranks there, and is left unpaired).
    if not comm_lines:
        for key, own in channel_ranks.items():
            if len(own) == 1 and key not in ranks_of_pid:
                ranks_of_pid[key] = own
                lines_of_pid[key] = channel_lines[key]
    return Identity(
        {r: frozenset(h) for r, h in hosts_of_rank.items()},
        {k: frozenset(v) for k, v in ranks_of_pid.items()},
        lines_of_rank,
        lines_of_pid,
    )


def complete_culprits(events: Iterable[Event], identity: Identity) -> None:
    """Name the other half of each blamed printer where the excerpt pairs it; drop shortened hosts.

    Only a culprit the line itself blamed is completed (a watchdog's reporter stays a reporter: its
    event has no culprit to complete). The pairing's line is kept in `identity_line`."""
    for ev in events:
        if ev.host is None and (m := _SELF_HOSTNAME.search(ev.message)):
            ev.host, ev.host_basis = m.group("host"), "host_tag"
            if ev.blame == "self" and ev.kind is not None and not ev.culprit_host:
                ev.culprit_host = ev.host
                ev.culprit_basis = ev.culprit_basis or "host_tag"
        if ev.culprit_host and shortened(ev.culprit_host):
            ev.fields["shortened_host_not_named"] = ev.culprit_host
            ev.culprit_host = None
            if ev.culprit_rank is None:
                ev.culprit_basis = None
        # torchelastic's banner decides its own host (one host for all failures, else none: tests/unit/
        # test_logs_formats.py); its entries pair other lines, they are not completed here.
        if ev.culprit_rank is not None and not ev.culprit_host and not ev.signature.startswith("elastic_"):
            host = identity.host_of(ev.culprit_rank)
            if host is not None:
                ev.culprit_host = host
                ev.fields["identity_line"] = identity.lines_of_rank[ev.culprit_rank]
        pid = ev.fields.get("nccl_pid")
        if ev.culprit_rank is None and ev.culprit_host and ev.culprit_host == ev.host and pid is not None:
            rank = identity.rank_of(ev.host, pid)
            if rank is not None:
                ev.culprit_rank = rank
                ev.fields["identity_line"] = identity.lines_of_pid[(_short(ev.host), pid)]
