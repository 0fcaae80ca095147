"""When may one `ssh -G` answer for many hosts? Only when the config provably cannot tell them apart.

`ssh -G` costs ~4 ms of CPU per host (a process start; bench/collect_cpu_ab.py), a sixth of
collect's client CPU per host. Many hosts resolve identically: with `Host gpu-*` blocks, every
gpu-NNN gets the same settings and differs only in its name. This module decides, from the config
text alone and conservatively, which hosts share a resolution: the *class* of a host is the set of
`Host` blocks that match its name (plus the `-l`/`-p` given with it). Two hosts of one class get
the same `ssh -G` output except `host` (the name given) and, where no block of the class sets
`HostName`, `hostname` (the name itself).

That holds only for a config without anything that makes a host's settings depend on more than
which Host blocks match it, so any of these makes `parse` return None (every host then gets its
own `ssh -G`): `Match` (criteria beyond the name: exec, user, canonical, ...), `Include` (other
files, globs), `Canonicalize*` (a second pass with the canonical name), `%` tokens and `${ENV}`
references anywhere (expanded per host), quoted or `keyword=value` lines (parsed differently
than this reader splits them), and Host patterns with characters this reader does not match
exactly as OpenSSH's match_pattern does. A name with upper case or anything but [a-z0-9._-] gets
no class (OpenSSH lower-cases `hostname`, but matches Host patterns on the name as given).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["ConfigShape", "parse"]

_REFUSED_KEYWORDS = {"match", "include", "canonicalizehostname", "canonicaldomains", "canonicalizemaxdots"}
_REFUSED_KEYWORDS |= {"canonicalizefallbacklocal", "canonicalizepermittedcnames"}
_PATTERN_OK = re.compile(r"!?[A-Za-z0-9._*?:@-]+")
_NAME_OK = re.compile(r"[a-z0-9][a-z0-9._-]*")


@dataclass(frozen=True)
class _Block:
    patterns: tuple[str, ...]  # `!` kept on negated ones
    sets_hostname: bool


@dataclass(frozen=True)
class ConfigShape:
    """The Host blocks of a config whose settings depend on nothing but which blocks match."""

    global_hostname: bool  # HostName before the first Host line (applies to every host)
    blocks: tuple[_Block, ...]

    def host_class(self, host: str, user: str | None, port: str | None) -> tuple | None:
        """The hosts with an equal class get one resolution; None: resolve this host on its own."""
        if not _NAME_OK.fullmatch(host):
            return None
        return (tuple(i for i, b in enumerate(self.blocks) if _applies(b, host)), user, port)

    def sets_hostname(self, host_class: tuple) -> bool:
        """Whether the class's HostName comes from the config (else it is the host's own name)."""
        return self.global_hostname or any(self.blocks[i].sets_hostname for i in host_class[0])


def parse(text: str) -> ConfigShape | None:
    """The config's shape, or None where one host's resolution cannot stand for another's."""
    if "%" in text or "${" in text or '"' in text:
        return None
    blocks: list[_Block] = []
    patterns: tuple[str, ...] | None = None
    global_hostname = sets_hostname = False
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        keyword, *args = line.split()
        key = keyword.lower()
        if "=" in keyword or key in _REFUSED_KEYWORDS:
            return None
        if key == "host":
            if patterns is not None:
                blocks.append(_Block(patterns, sets_hostname))
            if not args or not all(_PATTERN_OK.fullmatch(a) for a in args):
                return None
            patterns, sets_hostname = tuple(args), False
        elif key == "hostname":
            if patterns is None:
                global_hostname = True
            sets_hostname = True
    if patterns is not None:
        blocks.append(_Block(patterns, sets_hostname))
    return ConfigShape(global_hostname, tuple(blocks))


def _applies(block: _Block, host: str) -> bool:
    """OpenSSH's `Host` line (readconf.c): applies when a pattern matches and no negated one does."""
    hit = False
    for p in block.patterns:
        negated = p.startswith("!")
        if _glob(p[1:] if negated else p).fullmatch(host):
            if negated:
                return False
            hit = True
    return hit


def _glob(pattern: str) -> re.Pattern[str]:
    # match.c match_pattern: `*` any run, `?` one character, everything else literal, case-sensitive.
    return re.compile("".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern), re.DOTALL)
