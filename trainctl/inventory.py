"""Host inventories: comma lists, hostfiles (`node01 slots=8`), Slurm nodelists, `@file`.

Used by `launch --hosts` and `collect --hosts`. Order is preserved (the first host hosts the
rendezvous) and duplicates are refused, since a host listed twice would get two agents.
"""

from __future__ import annotations

import ipaddress
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import hostlist

from trainctl.errors import InventoryError

__all__ = ["HostSpec", "parse_hosts", "expand_nodelist", "check_host", "host_key", "MAX_HOSTS"]

# RFC 1123 host names (letters, digits, dashes; labels of at most 63) plus `_`, which real
# inventories and ssh config aliases use. `..`, `;`, spaces and leading dashes never pass.
_LABEL = r"[A-Za-z0-9_](?:[A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?"
_HOST_RE = re.compile(rf"^{_LABEL}(?:\.{_LABEL})*$")
MAX_HOSTS = 100_000  # one host list; past this a range is a typo (node[1-99999999])


@dataclass(frozen=True)
class HostSpec:
    """One host as the user named it; `slots` is the hostfile's process count, if given."""

    name: str
    slots: int | None = None


def host_key(name: str) -> str:
    """The name two spellings of one host share: DNS names are case-insensitive (RFC 4343), so
    `NODE07` and `node07` are one machine. Compare and key hosts by this; show the name as written."""
    return name.lower()


def expand_nodelist(expr: str) -> list[str]:
    """Expand a Slurm hostlist: `node[01-03,7]` -> node01 node02 node03 node7 (python-hostlist, the
    same rules as Slurm: zero padding from the range's bounds, several bracket groups as a product)."""
    try:
        names = hostlist.expand_hostlist(expr, allow_duplicates=True)  # duplicates are refused below, by name
    except hostlist.BadHostlist as exc:
        why = str(exc)
        hint = "write it low-high" if "start > stop" in why else "Slurm ranges look like node[01-16,20]"
        if "start > stop" in why:
            why = "a range runs backwards"
        elif "unbalanced" in why:
            why = "unbalanced brackets"
        raise InventoryError(f"bad host list {expr!r}: {why}; {hint}") from None
    if len(names) > MAX_HOSTS:
        raise InventoryError(f"host list {expr!r} expands to {len(names)} hosts, over {MAX_HOSTS}; check the bounds")
    return names


def check_host(name: str, *, where: str = "--hosts") -> str:
    """`name` or `name:port` with an RFC 1123 host name or an IP address and a port in 1..65535."""
    host, port = name, None
    if name.count(":") == 1:  # one colon: host:port (an IPv6 address has several)
        host, port = name.split(":")
    if port is not None and not (port.isdigit() and 1 <= int(port) <= 65535):
        raise InventoryError(f"{where}: {name!r} has port {port!r}; a port is a number in 1..65535 (node01:2222)")
    try:
        ipaddress.ip_address(host)
        return name
    except ValueError:
        pass
    if len(host) > 253 or not _HOST_RE.match(host):
        raise InventoryError(
            f"{where}: {name!r} is not a host name (letters, digits and dashes in dot-separated labels, e.g. node01)"
        )
    return name


def _parse_hostfile(path: Path) -> list[HostSpec]:
    if path.exists() and not path.is_file():  # a FIFO or a device would block the read or never end
        raise InventoryError(f"{path}: not a regular file; pass a hostfile (one host per line)")
    try:
        if path.stat().st_size > 64 << 20:
            raise InventoryError(f"{path}: over 64 MiB, not a hostfile; check the path")
        lines = path.read_text(errors="replace").splitlines()
    except OSError as exc:
        raise InventoryError(f"{path}: cannot read hostfile ({exc.strerror or exc})") from exc
    hosts: list[HostSpec] = []
    for n, raw in enumerate(lines, 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        words = line.split()
        slots = None
        for w in words[1:]:
            key, _, val = w.partition("=")
            if key in ("slots", "max_slots") and val.isdigit() and int(val) > 0:
                slots = int(val) if key == "slots" else slots
            else:
                raise InventoryError(f"{path}:{n}: cannot parse {w!r}; hostfile lines look like 'node01 slots=8'")
        for name in _expand_terms(words[0], where=f"{path}:{n}"):
            hosts.append(HostSpec(name, slots))
    if not hosts:
        raise InventoryError(f"{path}: hostfile lists no hosts; write one 'host slots=N' per line")
    return hosts


def _expand_terms(text: str, *, where: str) -> list[str]:
    return [check_host(name, where=where) for name in expand_nodelist(text)]


SLURM_SPEC = "slurm"  # --hosts slurm: the allocation's nodes, from SLURM_JOB_NODELIST
_SLURM_VARS = ("SLURM_JOB_NODELIST", "SLURM_NODELIST")  # sbatch/salloc set both; older Slurm only the second


def parse_hosts(spec: str, *, env: Mapping[str, str] | None = None) -> list[HostSpec]:
    """Parse `--hosts`: `@file` or an existing file path (hostfile), `slurm` (the current
    allocation's SLURM_JOB_NODELIST), else a comma/Slurm list."""
    spec = spec.strip()
    if spec == SLURM_SPEC:
        environ = os.environ if env is None else env
        nodelist = next((environ[v] for v in _SLURM_VARS if environ.get(v)), None)
        if not nodelist:
            raise InventoryError(
                "--hosts slurm: SLURM_JOB_NODELIST is not set; run inside an allocation (salloc/sbatch) or pass "
                "the nodelist itself, e.g. --hosts 'node[01-16]'"
            )
        return [HostSpec(n) for n in _expand_terms(nodelist, where="SLURM_JOB_NODELIST")]
    if not spec:
        raise InventoryError("empty host list; pass --hosts node01,node02, a hostfile, or node[01-16]")
    if "\0" in spec:
        raise InventoryError(f"--hosts {spec[:60]!r}: holds a NUL byte; pass host names or a hostfile path")
    if spec.startswith("@"):
        hosts = _parse_hostfile(Path(spec[1:]))
    elif "/" in spec or ("," not in spec and Path(spec).is_file()):  # long comma lists are no file names
        hosts = _parse_hostfile(Path(spec))
    else:
        hosts = [HostSpec(n) for n in _expand_terms(spec, where="--hosts")]
    seen: set[str] = set()
    for h in hosts:
        if h.name in seen:
            raise InventoryError(f"host {h.name!r} is listed twice in {spec!r}; list each host once")
        seen.add(h.name)
    return hosts
