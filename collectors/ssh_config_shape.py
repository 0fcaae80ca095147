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
own `ssh -G`): `Match` (criteria beyond the name: exec, user, canonical, ...), `Include` inside a
Host block (a conditional include; `read_files` splices top-level ones), `Canonicalize*` (a second
pass with the canonical name), `%` tokens and `${ENV}`
references anywhere (expanded per host), quoted or `keyword=value` lines (parsed differently
than this reader splits them), and Host patterns with characters this reader does not match
exactly as OpenSSH's match_pattern does. A name with upper case or anything but [a-z0-9._-] gets
no class (OpenSSH lower-cases `hostname`, but matches Host patterns on the name as given).
"""

from __future__ import annotations

import glob
import re
from dataclasses import dataclass
from pathlib import Path

__all__ = ["ConfigShape", "parse", "read_files"]

_MAX_INCLUDE_DEPTH = 16  # readconf.c READCONF_MAX_DEPTH

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
    blocks: list[_Block] = []
    patterns: tuple[str, ...] | None = None
    global_hostname = sets_hostname = False
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if "%" in line or "${" in line or '"' in line:  # expanded or split per host; comments are not
            return None
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


def read_files(paths: list[Path], *, home: Path) -> ConfigShape | None:
    """The shape of the configs `ssh -G` reads, in its order, with top-level `Include`s spliced in.

    readconf.c: each file starts active for every host (`*activep = 1` in read_config_file_depth),
    and after an Include the includer's state comes back; so each file, and what follows an
    Include, is spliced after a `Host *` line (the same scope). Relative Include paths are under
    ~/.ssh, as for a user config (the files are read through `ssh -F`, whose file is one); glob
    matches in sorted order (glob(3)). An Include inside a Host or Match block, one nested deeper
    than OpenSSH allows, or a file that cannot be read: None (every host gets its own `ssh -G`)."""
    parts: list[str] = []
    for path in paths:
        text = _spliced(path, home, 0)
        if text is None:
            return None
        parts.append(text)
    return parse("\n".join(parts))


def _spliced(path: Path, home: Path, depth: int) -> str | None:
    if depth > _MAX_INCLUDE_DEPTH:
        return None
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return None
    out = ["Host *"]
    in_block = False
    for raw in text.splitlines():
        words = raw.split()
        key = words[0].lower() if words and not words[0].startswith("#") else ""
        if key in ("host", "match"):
            in_block = True
        if key != "include":
            out.append(raw)
            continue
        if in_block or len(words) < 2:
            return None
        for arg in words[1:]:
            pattern = str(home / arg[2:]) if arg.startswith("~/") else arg
            if not pattern.startswith("/"):
                pattern = str(home / ".ssh" / pattern)
            for match in sorted(glob.glob(pattern)):
                sub = _spliced(Path(match), home, depth + 1)
                if sub is None:
                    return None
                out.append(sub)
        out.append("Host *")
    return "\n".join(out)
