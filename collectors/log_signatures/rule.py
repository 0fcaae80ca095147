"""How a log signature is written: the rule (`Signature`), the event a matched line becomes (`Event`), what the
line alone blames (`Blame`), the builder every rule table uses (`sig`), and the pieces the tables share
(pattern fragments, the host-name test, the "the line names its own rank and node" refinement).

The tables themselves are the other modules of this package; `trainctl.collectors.log_signatures.SIGNATURES`
is their concatenation in the order the rules run.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from trainctl.findings import Category, FindingKind, Severity


class Blame:
    SELF = "self"
    PEER = "peer"
    NONE = "none"


K, C, S = FindingKind, Category, Severity


@dataclass(frozen=True)
class Signature:
    """One classification rule. `keywords` (lower case) gate the regex: the pattern runs only on
    lines containing one of them. `generic` marks consequence/teardown lines that say something
    failed but not what (the analyzer uses them only when nothing more specific is there).
    `post` may refine kind/category/severity/blame from the extracted fields."""

    name: str
    pattern: re.Pattern[str]
    kind: FindingKind | None
    category: Category | None
    severity: Severity
    blame: str
    keywords: tuple[str, ...]
    doc: str
    generic: bool = False
    post: Callable[[Event], None] | None = None


@dataclass
class Event:
    """A classified line while it is built (mutable: `post` hooks refine it)."""

    line_no: int
    message: str
    signature: str
    kind: FindingKind | None
    category: Category | None
    severity: Severity
    blame: str
    generic: bool
    rank: int | None = None
    rank_basis: str | None = None
    host: str | None = None
    host_basis: str | None = None
    ts: datetime | None = None
    pg: str | None = None
    seq: int | None = None
    op: str | None = None
    xid: int | None = None
    gpu_pci: str | None = None
    exit_code: int | None = None
    peer: str | None = None
    culprit_rank: int | None = None
    culprit_host: str | None = None
    culprit_basis: str | None = None
    fields: dict[str, Any] = field(default_factory=dict)


def sig(
    name: str,
    pattern: str,
    kind: FindingKind | None,
    category: Category | None,
    severity: Severity,
    blame: str,
    keywords: Iterable[str],
    doc: str,
    *,
    generic: bool = False,
    flags: int = 0,
    post: Callable[[Event], None] | None = None,
) -> Signature:
    return Signature(
        name,
        re.compile(pattern, flags),
        kind,
        category,
        severity,
        blame,
        tuple(k.lower() for k in keywords),
        doc,
        generic,
        post,
    )


PCI = r"(?:PCI:)?(?P<gpu_pci>[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2})(?:\.[0-7])?"
SIZE = r"[\d.]+ [KMGTP]i?B"
ADDR = r"\[?(?P<peer>[^\s\[\]<>()]+?)\]?"


_REDACTED_NAMES = frozenset({"localhost", "hostname", "host", "node", "nodename", "xxx", "xxxx", "redacted"})


def plausible_host(h: str | None) -> bool:
    """Could this name a real remote machine? Rejects 0.0.0.0/8 (what '05' or an all-digit
    hostname resolves to), unspecified/loopback, redacted ('172....') and all-digit names."""
    if not h:
        return False
    h = h.strip("[]")
    if h.lower().startswith("::ffff:"):
        h = h[7:]
    try:
        ip = ipaddress.ip_address(h)
    except ValueError:
        # "HOSTNAME"/"hostname"/"node"/"xxx": what people paste in place of a real name
        if h.lower() in _REDACTED_NAMES or h.isdigit() or ".." in h or h.endswith("."):
            return False
        return bool(re.fullmatch(r"[A-Za-z0-9](?:[A-Za-z0-9.-]*[A-Za-z0-9])?", h)) and any(c.isalpha() for c in h)
    return not (
        ip.is_unspecified
        or ip.is_loopback
        or ip.is_multicast
        or (ip.version == 4 and ip in ipaddress.ip_network("0.0.0.0/8"))
    )


def named_self_post(ev: Event) -> None:
    """The line names the process that checked (a framework's own "Rank R ... node N"): take those."""
    rank = ev.fields.pop("self_rank", None)
    if rank is not None:
        ev.rank, ev.rank_basis = int(rank), "text"
    node = ev.fields.pop("self_node", None)
    if node and plausible_host(node):
        ev.host, ev.host_basis = node, "text"
