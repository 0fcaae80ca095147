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

__all__ = [
    "HostSpec",
    "HostAddress",
    "parse_hosts",
    "expand_nodelist",
    "expand_host_terms",
    "split_top_level",
    "check_host",
    "host_key",
    "MAX_HOSTS",
]

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


# `[host]` or `[host]:port`: how OpenSSH (known_hosts, scp) and URLs write an IPv6 address with a
# port, since the address's own colons leave `host:port` ambiguous.
_BRACKETED = re.compile(r"\[([^\[\]]*)\](?::([^:]*))?")


@dataclass(frozen=True)
class HostAddress:
    """One host spec split into its parts: `[user@]host[:port]`, an IPv6 address bare
    (`2001:db8::1`) or in brackets (`[2001:db8::1]`, `[2001:db8::1]:22`).

    The one parser of host specs: inventories, the quarantine ledger, eviction targets and the SSH
    client all split a spec here, so a host keys the same however it is spelled. A bare IPv6
    address has several colons, so only a spec with exactly one colon is `host:port`; a port on an
    IPv6 address needs the brackets (`2001:db8::1:22` is the address 2001:db8::1:22)."""

    host: str  # as written, without brackets: node07, NODE07, 2001:DB8::1
    port: str | None = None  # the text after the colon, unchecked (check_host checks it)
    user: str | None = None  # the part before the last `@` (OpenSSH splits there too)
    bracketed: bool = False

    @classmethod
    def split(cls, spec: str) -> HostAddress:
        """Never raises (a key must exist for any name a ledger, a finding or a run holds): what
        does not parse is one host named as written."""
        user, at, rest = spec.rpartition("@")
        m = _BRACKETED.fullmatch(rest)
        if m:
            return cls(m.group(1), m.group(2), user if at else None, bracketed=True)
        if rest.count(":") == 1:
            host, port = rest.split(":")
            return cls(host, port, user if at else None)
        return cls(rest, None, user if at else None)

    @property
    def ip(self) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
        """The host as an IP address, None for a name. Leading zeros (`127.000.000.001`) are no
        address since Python 3.9.5 (they read as octal elsewhere), so such a host is a name."""
        try:
            return ipaddress.ip_address(self.host)
        except ValueError:
            return None

    @property
    def port_ok(self) -> bool:
        """No port, or one in 1..65535 written in ASCII digits (`²` is a digit to str.isdigit)."""
        p = self.port
        return p is None or (p.isascii() and p.isdigit() and 1 <= int(p) <= 65535)

    @property
    def is_bracketed_ip(self) -> bool:
        """`[2001:db8::1]` or `[2001:db8::1]:22`: one host, never a Slurm range."""
        return self.bracketed and self.ip is not None

    @property
    def key(self) -> str:
        """The machine: user and port dropped (they say how to log in, not which host), a name
        lower-cased (DNS names are case-insensitive, RFC 4343), an address in its one canonical
        form (RFC 5952: 2001:DB8:0:0::1 is 2001:db8::1; ::ffff:10.0.0.1 is 10.0.0.1)."""
        ip = self.ip
        if ip is None:
            return self.host.lower()
        mapped = ip.ipv4_mapped if isinstance(ip, ipaddress.IPv6Address) else None
        return str(mapped or ip)


def host_key(name: str) -> str:
    """The name every spelling of one host shares (HostAddress.key): `NODE07`, `node07:2222` and
    `user@node07` are node07; `[2001:DB8::1]:22` and `2001:db8:0:0::1` are 2001:db8::1. Compare and
    key hosts by this; show the name as written."""
    return HostAddress.split(name).key


def split_top_level(expr: str) -> list[str]:
    """Split on the commas outside [...] (a hostlist's ranges hold commas)."""
    pieces, depth, cur = [], 0, []
    for ch in expr:
        depth += ch == "["
        depth -= ch == "]"
        if ch == "," and depth == 0:
            pieces.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    pieces.append("".join(cur))
    return pieces


def expand_host_terms(expr: str) -> list[str]:
    """python-hostlist's expansion (duplicates kept), except that a bracketed IP address
    (`[2001:db8::1]:22`) is one host, not a range; raises hostlist.BadHostlist."""
    pieces = split_top_level(expr)
    if not any(HostAddress.split(p).is_bracketed_ip for p in pieces):
        return hostlist.expand_hostlist(expr, allow_duplicates=True)
    names: list[str] = []
    for p in pieces:
        names.extend(
            [p] if HostAddress.split(p).is_bracketed_ip else hostlist.expand_hostlist(p, allow_duplicates=True)
        )
    return names


def expand_nodelist(expr: str) -> list[str]:
    """Expand a Slurm hostlist: `node[01-03,7]` -> node01 node02 node03 node7 (python-hostlist, the
    same rules as Slurm: zero padding from the range's bounds, several bracket groups as a product)."""
    try:
        names = expand_host_terms(expr)  # duplicates are refused below, by host_key
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
    """`name` if it is a host trainctl can reach: an RFC 1123 host name or an IP address, with an
    optional port in 1..65535 (`node01:2222`; `[2001:db8::1]:2222` for IPv6). No `user@`: the
    login user comes from the ssh config, the one place the SSH client and `ssh` itself agree on."""
    addr = HostAddress.split(name)
    if addr.user is not None:
        raise InventoryError(
            f"{where}: {name!r} names a login user; write the host alone ({addr.host}) and set "
            f"`User {addr.user}` for it in the ssh config (--ssh-config)"
        )
    if not addr.port_ok:
        raise InventoryError(f"{where}: {name!r} has port {addr.port!r}; a port is a number in 1..65535 (node01:2222)")
    if addr.bracketed:
        if addr.ip is None:
            raise InventoryError(
                f"{where}: {name!r}: brackets hold an IP address ([2001:db8::1]:2222); write a host name without them"
            )
        return name
    if addr.ip is not None:
        return name
    if ":" in addr.host:  # several colons are an IPv6 address or nothing
        raise InventoryError(
            f"{where}: {name!r} is neither host:port nor an IPv6 address; an IPv6 address with a port is "
            "written in brackets ([2001:db8::1]:2222)"
        )
    if len(addr.host) > 253 or not _HOST_RE.match(addr.host):
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
    # By host_key: node07, NODE07 and node07:2222 are one machine, which would get two agents.
    seen: dict[str, str] = {}
    for h in hosts:
        key = host_key(h.name)
        if key in seen:
            first = seen[key]
            also = "" if first == h.name else f" (also as {first!r}: a port or the case does not make another host)"
            raise InventoryError(f"host {h.name!r} is listed twice in {spec!r}{also}; list each host once")
        seen[key] = h.name
    return hosts
