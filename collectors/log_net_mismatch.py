"""Hosts that disagree on NCCL's network transport (issue 13 item 3): a reading of a log's INFO lines.

NCCL picks one network per communicator and prints it on every process (NVIDIA/nccl 2.30.7,
5067397c, src/init.cc: INFO(NCCL_INIT, "Using network %s", comm->ncclNet->name); 2.12.7 src/init.cc
the same with ncclNetName()): "IB", "Socket", a plugin's name ("IBext", "AWS Libfabric", ...). Two
processes connect over the network only through the same transport (the connect handle one sends
is the other's transport's), so hosts of one job that chose different networks are a classic
multi-node hang or failure: one host has no usable IB device ("NET/IB : No device found.",
src/transport/net_ib/init.cc; 2.12.7 src/transport/net_ib.cc) or has NCCL_IB_DISABLE set
("NCCL_IB_DISABLE set by environment to 1.", src/misc/param.cc "%s set by environment to %lld.")
or lacks the net plugin the others load. The lines say the hosts disagree, not which host is
misconfigured, so the reading blames nobody. docs/log-signatures.md "Native stacks and hosts that
disagree on NCCL's network".

One job only: a process prints its network in commAlloc, before bootstrapInit and
initTransportsRank's bootstrapAllGather, which wait for every rank of the communicator, and only
then "Init COMPLETE" (2.30.7 src/init.cc ncclCommInitRankFunc). A host that completed an init before
another host printed its network was not waiting for that host: another run in the same paste (a
healthy run's preamble), not a mismatch. (Per-host logs pasted one after the other are not in time
order; a mismatch whose init still completed (2.22+ connects at the first collective) is missed there.)

A second reading of the same lines: a process of a job that spans hosts whose NCCL chose the loopback or a container
bridge for its sockets. NCCL picks "lo", "docker*" or "virbr*" only when it finds no other interface or when
NCCL_SOCKET_IFNAME names one (NVIDIA/nccl 2.18-2.30 src/misc/socket.cc ncclFindInterfaces: "Then look for anything
else (but not docker,lo, or virtual)", "Finally look for docker, then lo"), and prints its choice ("Bootstrap :
Using%s", src/bootstrap.cc bootstrapNetInit; "NET/Socket : Using%s", src/transport/net_socket.cc, each interface as
" [%d]%s:%s"). Those addresses are the host's own (127.0.0.1, docker's 172.17.0.1 on every host), so a peer on
another host that connects to them reaches itself or nothing: set-up hangs or fails. A run spans hosts where NCCL's
lines come from two hosts or its init says so ("comm %p rank %d nRanks %d nNodes %d ...", src/init.cc).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

_USING_NETWORK = re.compile(r"\bNCCL INFO Using network (?P<net>\S.*)")
# Why a host fell back from IB: its own lines, quoted with its choice.
_DONE = re.compile(r"\bNCCL INFO .*- Init COMPLETE")
_NO_IB = re.compile(r"\bNCCL INFO (?:NET/IB ?: No device found|NCCL_IB_DISABLE set by environment to [1-9])")
MAX_HOSTS_NAMED = 8  # in the summary; the evidence lines name every host


@dataclass(frozen=True)
class NetMismatch:
    """Hosts whose NCCL processes chose disjoint networks: the reason, and the lines it rests on
    (line_no, host, text): each host's "Using network" lines, then its lines saying why IB was off."""

    reason: str
    lines: tuple[tuple[int, str, str], ...]
    networks_by_host: dict[str, tuple[str, ...]]


def _one_job(first: Mapping[Any, int], done: Mapping[Any, int], a: Any, b: Any) -> bool:
    """Hosts a and b print for one job: neither completed an NCCL init before the other's first line (`first`: a
    host's first line read, `done`: its first Init COMPLETE)."""
    return done.get(a, first[b] + 1) > first[b] and done.get(b, first[a] + 1) > first[a]


def read_net_mismatch(records: Iterable[tuple[int, str | None, str]]) -> NetMismatch | None:
    """The mismatch in these (line_no, host, text) records, if two hosts' networks share none; a host's
    lines are those its "host:pid:tid [dev]" prefix names (records with no host are not read)."""
    chose: dict[str, dict[str, tuple[int, str]]] = {}  # host -> network -> its first line
    why: dict[str, dict[str, tuple[int, str]]] = {}  # host -> reason text -> its first line
    done: dict[str, int] = {}  # host -> the line of its first Init COMPLETE
    for n, host, text in records:
        if not host or "NCCL INFO" not in text:
            continue
        if m := _USING_NETWORK.search(text):
            chose.setdefault(host, {}).setdefault(m.group("net").strip(), (n, text))
        elif _NO_IB.search(text):
            why.setdefault(host, {}).setdefault(text.strip(), (n, text))
        elif _DONE.search(text):
            done.setdefault(host, n)

    first = {h: min(n for n, _ in nets.values()) for h, nets in chose.items()}  # a host's first network line
    hosts = sorted(chose)
    # disjoint, not merely different: a host that shows IB and Socket (a retry with NCCL_IB_DISABLE
    # set, another job in the same paste) shares a network with a host that chose either
    pairs = [(a, b) for i, a in enumerate(hosts) for b in hosts[i + 1 :] if chose[a].keys().isdisjoint(chose[b].keys())]
    hosts = sorted({h for a, b in pairs if _one_job(first, done, a, b) for h in (a, b)})
    if not hosts:
        return None
    by_host = {h: tuple(sorted(chose[h])) for h in hosts}
    named = "; ".join(f"{h} uses {', '.join(nets)}" for h, nets in list(by_host.items())[:MAX_HOSTS_NAMED])
    more = f"; and {len(hosts) - MAX_HOSTS_NAMED} more hosts" if len(hosts) > MAX_HOSTS_NAMED else ""
    lines = sorted(
        [(n, h, t) for h in hosts for n, t in chose[h].values()]
        + [(n, h, t) for h in hosts for n, t in why.get(h, {}).values()]
    )
    return NetMismatch(
        f"hosts disagree on NCCL's network transport ({named}{more}): processes on different hosts connect"
        " only through the same transport, so set-up hangs or fails; the lines do not say which host is"
        " misconfigured (check NCCL_IB_DISABLE, NCCL_NET, the IB devices and the net plugin on each)",
        tuple(lines),
        by_host,
    )


_LOCAL_ONLY = re.compile(
    r"\bNCCL INFO (?:Bootstrap ?: Using|NET/Socket : Using)\s*(?:\[\d+\])?(?P<ifname>lo|docker\d*|virbr\d*):(?P<addr>\S+)"
)
_NNODES = re.compile(r"\bNCCL INFO comm \S+ rank \d+ nRanks \d+ nNodes (?P<nodes>\d+)")


@dataclass(frozen=True)
class LocalInterface:
    """NCCL sockets on a host-local interface in a job across hosts: the reason and its lines (line_no, host, text)."""

    reason: str
    lines: tuple[tuple[int, str | None, str], ...]


def read_local_interface(records: Iterable[tuple[int, str | None, str]]) -> LocalInterface | None:
    """The processes whose NCCL chose lo, docker* or virbr* for its sockets, if their job spans hosts: another
    host's NCCL lines count when neither host completed an init before the other's first line (else it is
    another run, as in read_net_mismatch), the init's nNodes when the same host printed it."""
    chose: dict[str, tuple[int, str | None, str]] = {}  # interface:address -> its first line
    first: dict[str | None, int] = {}  # host -> its first NCCL line
    done: dict[str | None, int] = {}  # host -> its first Init COMPLETE
    nodes: dict[str | None, int] = {}  # host -> the most nodes its init lines say
    for n, host, text in records:
        if "NCCL INFO" not in text:
            continue
        first.setdefault(host, n)
        if m := _LOCAL_ONLY.search(text):
            chose.setdefault(f"{m.group('ifname')}:{m.group('addr')}", (n, host, text))
        elif m := _NNODES.search(text):
            nodes[host] = max(nodes.get(host, 1), int(m.group("nodes")))
        elif _DONE.search(text):
            done.setdefault(host, n)
    local = {h for _, h, _ in chose.values()}
    others = {h for h in first if h is not None and h not in local for a in local if _one_job(first, done, a, h)}
    spans = max([len(local - {None}) + len(others)] + [nodes.get(a, 1) for a in local])
    if spans < 2:
        return None
    where = ", ".join(sorted(chose))
    return LocalInterface(
        f"NCCL uses a host-local interface ({where}) in a job across {spans} hosts: NCCL picks lo or a container"
        " bridge only when it finds no other interface or NCCL_SOCKET_IFNAME names it, and peers on other hosts"
        " cannot reach that address (set NCCL_SOCKET_IFNAME to the interface the hosts share)",
        tuple(sorted(chose.values(), key=lambda x: x[0])),
    )
