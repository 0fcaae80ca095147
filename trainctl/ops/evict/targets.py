"""Which hosts an eviction may name: validated before any ledger change or scheduler command.

An eviction target reaches scontrol / kubectl as an argument, so a value that a scheduler reads as
"every node" or as an option would turn one eviction into a cluster-wide drain: `scontrol update
NodeName=ALL State=DRAIN` drains every node, `kubectl drain --selector=x` (or `-l x`) every node
matching a label, and a glob or a Slurm hostlist like `node[01-99]` names far more than one host.
So a target is:

- an RFC 1123 host name (letters, digits and dashes in dot-separated labels of at most 63
  characters, 253 in all; no leading dash) or an IP address (v4 or v6), optionally with the SSH
  port a run was launched with (`node07:2222`, `[2001:db8::1]:22`): the ledger and the scheduler
  get the host alone (node07), since the machine is what is quarantined and drained;
- never `ALL` (any case), a selector (`key=value`, `--selector=x`, `-l`), anything starting with
  `-`, a glob (`*`, `?`, `{...}`) or an empty name;
- a Slurm hostlist (`node[01-04,07]`, or a comma list) only when the run is known: it is
  expanded with python-hostlist and every member is checked like a single name;
- when the run is known (run.json, its launch request, or the caller's own host list), a member
  of the run or of its spares, however it is spelled (trainctl.inventory.host_key: `NODE02` and
  `node02:2222` are the run's `node02`), named as the run names it, less any port.

Pure: names and the set of allowed hosts in, the expanded host tuple out, TargetError (one line:
the value, what is wrong, the fix) otherwise.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable

import hostlist

from trainctl.errors import InputError
from trainctl.inventory import HostAddress, expand_host_terms, host_key, split_top_level

__all__ = ["TargetError", "check_host_name", "expand_targets", "resolve_targets"]

# RFC 1123 section 2.1 (host names may start with a digit) over RFC 952's label rules.
_LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
_HOST_RE = re.compile(rf"^{_LABEL}(?:\.{_LABEL})*$")
_MAX_NAME = 253
_GLOB_CHARS = frozenset("*?{}")
# Refuse a hostlist that expands past this many hosts before any membership check (the run's own
# host list is the real bound; this stops `node[0-99999999]` from being expanded at all).
MAX_EXPANSION = 4096


class TargetError(InputError):
    """An eviction target is not one host (or a list of hosts) trainctl may drain."""


def _show(values: Iterable[str], n: int = 5) -> str:
    values = list(values)
    head = ", ".join(values[:n])
    return head + (f" and {len(values) - n} more" if len(values) > n else "")


def check_host_name(name: str) -> str:
    """`name` if it is one RFC 1123 host name or IP address; TargetError naming what it is otherwise."""
    if not isinstance(name, str) or not name.strip():
        raise TargetError("empty host name; name the host to evict, e.g. node03")
    if name != name.strip() or any(c.isspace() for c in name):
        raise TargetError(f"host {name!r} holds whitespace; name one host per target, e.g. node03")
    if name.upper() == "ALL":
        raise TargetError(
            f"{name!r} is not a host: a scheduler reads it as every node; trainctl evicts named hosts only"
        )
    if name.startswith("-"):
        raise TargetError(
            f"host {name!r} starts with '-', so a scheduler would read it as an option (a selector or flag); "
            "name the host to evict"
        )
    if "=" in name:
        raise TargetError(f"{name!r} is a selector (key=value), not a host; name the hosts to evict")
    if _GLOB_CHARS & set(name):
        raise TargetError(
            f"{name!r} is a glob pattern, which a scheduler may match against every node; name the hosts to evict"
        )
    addr = HostAddress.split(name)
    if addr.user is not None:
        raise TargetError(f"host {name!r} names a login user; name the host to evict, e.g. {addr.host}")
    if addr.port is not None or addr.bracketed:
        # A run's host with its sshd port (launch --hosts node07:2222): the host part must pass
        # every check above too (ALL:22 is still ALL); resolve_targets drops the port.
        if not addr.port_ok:
            raise TargetError(f"host {name!r} has port {addr.port!r}; a port is a number in 1..65535 (node07:2222)")
        if addr.bracketed and addr.ip is None:
            raise TargetError(
                f"host {name!r}: brackets hold an IP address ([2001:db8::1]:22); name the host without them"
            )
        check_host_name(addr.host)
        return name
    if addr.ip is not None:
        return name
    if len(name) > _MAX_NAME or not _HOST_RE.match(name):
        raise TargetError(
            f"host {name!r} is not an RFC 1123 host name or an IP address (letters, digits, dashes and dots); "
            "name the host as the scheduler does"
        )
    return name


def _is_list(spec: str) -> bool:
    if HostAddress.split(spec).is_bracketed_ip:
        return False  # [2001:db8::1]:22 is one host, not a range
    return "[" in spec or "]" in spec or "," in spec


def expand_targets(spec: str) -> list[str]:
    """One target as given: a host name, an IP, or a Slurm hostlist expanded with python-hostlist."""
    if not isinstance(spec, str) or not spec.strip():
        raise TargetError("empty host name; name the host to evict, e.g. node03")
    if not _is_list(spec):
        return [check_host_name(spec)]
    # Checked before expansion: these words and characters mean "many" (or an option) to a
    # scheduler whatever python-hostlist would make of them.
    for piece in split_top_level(spec):
        if not piece or piece.startswith("-") or "=" in piece or piece.upper() == "ALL" or _GLOB_CHARS & set(piece):
            check_host_name(piece)  # raises with the piece's own reason
    try:
        members = list(dict.fromkeys(expand_host_terms(spec)))  # a bracketed IPv6 address is one host
    except hostlist.BadHostlist as exc:
        raise TargetError(f"{spec!r} is not a valid Slurm hostlist ({exc}); write e.g. node[01-04,07]") from exc
    if len(members) > MAX_EXPANSION:
        raise TargetError(f"{spec!r} expands to {len(members)} hosts; name the hosts of the run to evict")
    return [check_host_name(m) for m in members]


def resolve_targets(
    specs: Iterable[str],
    *,
    members: Collection[str] | None,
    run_label: str | None = None,
) -> tuple[str, ...]:
    """Expand and check every target; with `members` (the run's hosts and spares) each must be one.

    Without `members` (no run known) a target must be one host: a list cannot be checked against
    anything, and a hostlist typo is exactly how a whole partition gets drained.
    """
    specs = list(specs)
    if not specs:
        raise TargetError("no host to evict; name the host, e.g. node03")
    hosts: list[str] = []
    # host_key -> the run's spelling: the scheduler and the ledger get the name the run was launched with
    known = {host_key(m): m for m in sorted(members)} if members is not None else {}
    seen: set[str] = set()
    for spec in specs:
        if members is None and _is_list(str(spec)):
            raise TargetError(
                f"{spec!r} names several hosts, and no run is known to check them against; "
                "name one host, or pass --run RUN_DIR (its run.json lists the hosts)"
            )
        expanded = expand_targets(spec)
        if members is not None:
            outside = [h for h in expanded if host_key(h) not in known]
            if outside:
                where = f"run {run_label}" if run_label else "the run"
                raise TargetError(
                    f"{spec!r} names {_show(outside)}, not among the hosts or spares of {where} "
                    f"({_show(sorted(members))}); name hosts of the run"
                )
            expanded = [known[host_key(h)] for h in expanded]
        # The machine, as the run spells it but without its sshd port: what the scheduler drains
        # and the ledger keys (node07:2222 -> node07).
        expanded = [HostAddress.split(h).host for h in expanded]
        for h in expanded:
            if host_key(h) not in seen:
                seen.add(host_key(h))
                hosts.append(h)
    return tuple(hosts)
