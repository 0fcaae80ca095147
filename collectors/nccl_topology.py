"""NCCL's INFO init lines -> which network, transport and version each rank really uses.

Command + pure parser: the command is NCCL itself (NCCL_DEBUG=INFO with NCCL_DEBUG_FILE per rank,
set by trainctl.runtime.nccl_env); `parse_nccl_log` reads one such file (or any text holding NCCL's
lines, e.g. a pasted rank log) into two tables:

- `nccl_procs`: one row per process: NCCL version, the network it chose ("Using network IB"), the
  net plugin, the devices NCCL listed, GPU Direct RDMA, and its rank in the largest communicator;
- `nccl_links`: one row per channel connection: from rank -> to rank, channel, transport (P2P, SHM,
  NET), the detail after it (IPC/read, CUMEM, direct, IB/0/GDRDMA, Socket/1, ...).

So a finding can say "rank 5 fell back to sockets" (trainctl.analyzers.nccl). Every pattern below is
the format string in NVIDIA/nccl (master, v2.30.7, June 2026), cited where it is printed; older
releases print busIds instead of nvmlDev in the brackets (`0[1b000]`, v2.8-v2.18) and `Channel 00 :`
without the connection index (SHM, and NET before v2.12): both are accepted. Line prefix
(src/debug.cc ncclDebugLog): `HOST:PID:TID [CUDADEV] NCCL INFO <message>`, optionally preceded by a
timestamp (NCCL_DEBUG_TIMESTAMP_FORMAT) or a launcher's `[N]` prefix. Every pattern is anchored and
has no nested quantifiers: linear in the line's length.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from trainctl.schemas import SignalKind, schema_for

__all__ = ["NcclProcess", "channel_own_rank", "comm_rank", "parse_nccl_lines", "to_tables", "MAX_LINE_CHARS"]

MAX_LINE_CHARS = 4096  # NCCL's own lines are < 2 KiB (debug.cc buffer); longer ones are cut before matching

# src/debug.cc: snprintf(..., "%s:%d:%d ", hostname, pid, tid) then "[%d] NCCL INFO %s\n" (cudaDev).
_PREFIX = re.compile(r"(?P<host>[^\s:\[\]]+):(?P<pid>\d+):(?P<tid>\d+) \[(?P<dev>\d+)\] NCCL (?P<level>INFO|WARN) ")
# src/init.cc VERSION_STRING: "NCCL version %d.%d.%d%s+cuda%d.%d", printed with the INFO prefix, or bare
# (VERSION() at NCCL_DEBUG=VERSION|WARN, and by older releases) on a line of its own.
_VERSION = re.compile(r"NCCL version (?P<v>\d+\.\d+\.\d+\S*)")
# src/init.cc: INFO(NCCL_INIT, "Using network %s", comm->ncclNet->name)
_NETWORK = re.compile(r"Using network (?P<net>.+?)\s*$")
# src/plugin/net/net_v*.cc: "NET/Plugin: Loaded net plugin %s (v%d)"
_PLUGIN = re.compile(r"NET/Plugin: Loaded net plugin (?P<name>.+?)(?: \(v\d+\))?\s*$")
# src/transport/net_ib/init.cc "NET/IB : Using%s %s; OOB %s:%s"; net_socket.cc "NET/Socket : Using%s"
_NET_USING = re.compile(r"NET/(?P<net>[\w-]+) ?: Using (?P<devs>.*?)\s*$")
# src/graph/topo.cc: INFO(NCCL_NET, "NET/%s : GPU Direct RDMA %s for HCA %d '%s'", ...)
_GDR = re.compile(r"NET/(?P<net>[\w-]+) ?: GPU Direct RDMA (?P<state>Enabled|Disabled) for HCA")
# src/init.cc: "comm %p rank %d nRanks %d nNodes %d localRanks %d localRank %d MNNVL %d"
_COMM = re.compile(r"comm (?P<comm>0x[0-9a-f]+) rank (?P<rank>\d+) nRanks (?P<n>\d+) nNodes (?P<nodes>\d+)")
# src/init.cc: "%s comm %p rank %d nranks %d cudaDev %d nvmlDev %d busId %lx commId 0x%llx - Init COMPLETE"
# (older: "comm %p rank %d nranks %d cudaDev %d busId %lx - Init COMPLETE")
_COMPLETE = re.compile(r"comm (?P<comm>0x[0-9a-f]+) rank (?P<rank>\d+) nranks (?P<n>\d+) cudaDev (?P<dev>\d+)")
# src/transport/{p2p,net,shm}.cc: "Channel %02d/%d : %d[%d] -> %d[%d] [send] via NET/%s/%d%s%s%s",
# "... via P2P/IPC%s%s", "Channel %02d : %d[%d] -> %d[%d] via SHM/direct"; "Ring %02d : ..." before v2.6.
_CHANNEL = re.compile(
    r"(?:Channel|Ring) (?P<ch>\d+)(?:/(?P<conn>\d+))? : (?P<src>\d+)\[[0-9a-fx]+\] -> (?P<dst>\d+)\[[0-9a-fx]+\] "
    r"(?:\[(?P<dir>send|receive)\] )?via (?P<via>\S+(?: pointer)?)"
)


@dataclass
class NcclProcess:
    """What one process's NCCL said about itself."""

    host_as_logged: str | None = None
    pid: int | None = None
    cuda_dev: int | None = None
    version: str | None = None
    network: str | None = None
    net_plugin: str | None = None
    net_devices: dict[str, str] = field(default_factory=dict)  # net -> the devices NCCL listed for it
    gdr: bool | None = None
    rank: int | None = None  # in the largest communicator it joined (the world's, for the default group)
    nranks: int | None = None
    warnings: int = 0
    links: list[dict[str, Any]] = field(default_factory=list)


def _transport(via: str) -> tuple[str, str]:
    """'NET/IB/0/GDRDMA' -> ('NET', 'IB/0/GDRDMA'); 'SHM/direct/direct' -> ('SHM', 'direct/direct')."""
    head, _, rest = via.partition("/")
    return head, rest


def comm_rank(msg: str) -> tuple[int, int] | None:
    """(rank, nranks) from a communicator's init line (src/init.cc, the two formats above), else None."""
    c = _COMM.search(msg) or _COMPLETE.search(msg)
    return (int(c["rank"]), int(c["n"])) if c is not None else None


def nccl_process(line: str) -> str | None:
    """ "host:pid" of the process NCCL's prefix (src/debug.cc "%s:%d:%d [%d] NCCL INFO ") says printed the line."""
    m = _PREFIX.search(line)
    return f"{m['host']}:{m['pid']}" if m else None


def comm_pointer_rank(msg: str) -> tuple[str, int] | None:
    """(the communicator's pointer as printed, rank) from its init line (src/init.cc, the two formats above): the
    pointer its COLL lines print (src/enqueue.cc "comm %p"), else None."""
    c = _COMM.search(msg) or _COMPLETE.search(msg)
    return (c["comm"], int(c["rank"])) if c is not None else None


def channel_own_rank(msg: str) -> int | None:
    """The rank of the process that printed a channel line, else None. The transports print their own rank
    first on the sending side (net.cc sendSetup, p2p.cc, shm.cc: "%d[..] -> %d[..] [send] via", untagged for P2P
    and SHM) and the peer's first on the receiving side (net.cc recvSetup: "... [receive] via")."""
    c = _CHANNEL.search(msg)
    if c is None:
        return None
    return int(c["dst"]) if c["dir"] == "receive" else int(c["src"])


def parse_nccl_lines(lines: Iterable[str]) -> list[NcclProcess]:
    """Group NCCL lines by (host, pid) as logged; a file written through NCCL_DEBUG_FILE holds one."""
    procs: dict[tuple[str, int], NcclProcess] = {}
    bare_version: str | None = None
    for raw in lines:
        line = raw[:MAX_LINE_CHARS]
        m = _PREFIX.search(line)
        if m is None:
            if (v := _VERSION.match(line.strip())) is not None:
                bare_version = v["v"]
            continue
        key = (m["host"], int(m["pid"]))
        p = procs.get(key)
        if p is None:
            p = procs[key] = NcclProcess(host_as_logged=m["host"], pid=int(m["pid"]), cuda_dev=int(m["dev"]))
        msg = line[m.end() :].strip()
        if m["level"] == "WARN":
            p.warnings += 1
            continue
        if (c := _CHANNEL.match(msg)) is not None:
            kind, detail = _transport(c["via"])
            p.links.append(
                {
                    "channel": int(c["ch"]),
                    "src_rank": int(c["src"]),
                    "dst_rank": int(c["dst"]),
                    "direction": c["dir"],
                    "transport": kind,
                    "detail": detail or None,
                }
            )
        elif (rn := comm_rank(msg)) is not None:
            if p.nranks is None or rn[1] > p.nranks:
                p.rank, p.nranks = rn
        elif (c := _VERSION.match(msg)) is not None:
            p.version = c["v"]
        elif (c := _NETWORK.match(msg)) is not None:
            p.network = c["net"]
        elif (c := _PLUGIN.match(msg)) is not None:
            p.net_plugin = c["name"]
        elif (c := _NET_USING.match(msg)) is not None:
            p.net_devices[c["net"]] = c["devs"]
        elif (c := _GDR.match(msg)) is not None:
            p.gdr = bool(p.gdr) or c["state"] == "Enabled"
    if bare_version is not None and len(procs) == 1:  # one process per file (NCCL_DEBUG_FILE): it is its version
        only = next(iter(procs.values()))
        only.version = only.version or bare_version
    return list(procs.values())


def to_tables(
    procs: Iterable[NcclProcess], *, host: str | None, rank: int | None = None, source: str | None = None
) -> dict[SignalKind, pa.Table]:
    """Rows for `host` (the run's host name, from the file's place, not NCCL's hostname); None (a
    pasted log, no run to place it in): the hostname NCCL logged on each line.

    `rank`: the trainctl rank the file belongs to (logs/H/nccl-rank-R.log); when None, NCCL's rank
    in the largest communicator the process joined is used.
    """
    prow: list[dict[str, Any]] = []
    lrow: list[dict[str, Any]] = []
    phosts: list[str | None] = []
    lhosts: list[str | None] = []
    for p in procs:
        h = host if host is not None else p.host_as_logged
        r = rank if rank is not None else p.rank
        counts = {"NET": 0, "P2P": 0, "SHM": 0}
        for link in p.links:
            counts[link["transport"]] = counts.get(link["transport"], 0) + 1
            lrow.append({"rank": r, **link})
            lhosts.append(h)
        net_details = {
            link["detail"].split("/")[0] for link in p.links if link["transport"] == "NET" and link["detail"]
        }
        prow.append(
            {
                "rank": r,
                "pid": p.pid,
                "hostname": p.host_as_logged,
                "cuda_dev": p.cuda_dev,
                "nccl_version": p.version,
                # "Using network X" is the network NCCL chose; without it, what its NET links say.
                "network": p.network or (sorted(net_details)[0] if len(net_details) == 1 else None),
                "net_plugin": p.net_plugin,
                "net_devices": _devices(p),
                "gdr": p.gdr,
                "nccl_rank": p.rank,
                "nccl_nranks": p.nranks,
                "links_net": counts["NET"],
                "links_p2p": counts["P2P"],
                "links_shm": counts["SHM"],
                "warnings": p.warnings,
                "source": source,
            }
        )
        phosts.append(h)
    return {
        SignalKind.NCCL_PROCS: _with_host(pa.Table.from_pylist(prow, schema=schema_for(SignalKind.NCCL_PROCS)), phosts),
        SignalKind.NCCL_LINKS: _with_host(pa.Table.from_pylist(lrow, schema=schema_for(SignalKind.NCCL_LINKS)), lhosts),
    }


def _devices(p: NcclProcess) -> str | None:
    """The devices of the network NCCL chose (the socket transport lists its own even on IB hosts)."""
    if not p.net_devices:
        return None
    net = p.network if p.network in p.net_devices else next(reversed(p.net_devices))
    return f"{net}: {p.net_devices[net]}"


def _with_host(t: pa.Table, hosts: list[str | None]) -> pa.Table:
    return t.append_column("host", pa.array(hosts, pa.string()))
