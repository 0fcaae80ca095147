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

Where the config is also *exact* (`ConfigShape.exact`: no ProxyJump/ProxyCommand, which ssh -G
rewrites, and every value of the keywords trainctl reads in a form whose meaning is fixed here),
`ConfigShape.resolve` evaluates it for a host in Python, as `ssh -G` would print those keywords,
without a process per host: OpenSSH takes the first value obtained for a keyword (readconf.c; `-l`
and `-p` come before the config), every distinct IdentityFile in order, and its built-in defaults
for the rest (the caller passes them: `ssh -G` of an empty config).
"""

from __future__ import annotations

import functools
import glob
import os
import pwd
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

__all__ = ["EVALUATED", "ConfigShape", "parse", "read_files"]

_MAX_INCLUDE_DEPTH = 16  # readconf.c READCONF_MAX_DEPTH

_REFUSED_KEYWORDS = {"match", "include", "canonicalizehostname", "canonicaldomains", "canonicalizemaxdots"}
_REFUSED_KEYWORDS |= {"canonicalizefallbacklocal", "canonicalizepermittedcnames"}
_PATTERN_OK = re.compile(r"!?[A-Za-z0-9._*?:@-]+")
_NAME_OK = re.compile(r"[a-z0-9][a-z0-9._-]*")

# The keywords `resolve` evaluates: what trainctl reads from `ssh -G` (ssh._target_from_G) but the
# proxies, whose lines make a config inexact (ssh -G prints a ProxyJump as a generated ProxyCommand).
EVALUATED = (
    "hostname",
    "port",
    "user",
    "identityfile",
    "identitiesonly",
    "userknownhostsfile",
    "stricthostkeychecking",
    "hostkeyalias",
    "connecttimeout",
)
_INEXACT_KEYWORDS = {"proxyjump", "proxycommand"}
# readconf.c multistate_flag and multistate_strict_hostkey; ssh -G prints a value's first name in the table.
_FLAG = {"yes": "yes", "true": "yes", "no": "no", "false": "no"}
_STRICT = {"true": "true", "yes": "true", "false": "false", "no": "false", "off": "false", "ask": "ask"}
_STRICT |= {"accept-new": "accept-new"}
_NUMBER = re.compile(r"[0-9]{1,5}")


def _value(key: str, args: list[str], home: str) -> list[str] | None:
    """What ssh -G prints for one config line of an evaluated keyword; None: a form not evaluated
    here (a time like `1m`, `none`, `~user`, a service name as Port, ...), so the config is inexact."""
    if key == "userknownhostsfile":  # several files on one line, `~/` expanded with the passwd home
        if any(a.lower() == "none" or (a.startswith("~") and not a.startswith("~/")) for a in args):
            return None
        return [" ".join(home + a[1:] if a.startswith("~/") else a for a in args)]
    if len(args) != 1 or args[0].lower() == "none":
        return None
    arg = args[0]
    if key in ("port", "connecttimeout"):
        n = int(arg) if _NUMBER.fullmatch(arg) else 0
        return [str(n)] if 0 < n <= (65535 if key == "port" else 99999) else None
    if key == "identitiesonly":
        return [_FLAG[arg.lower()]] if arg.lower() in _FLAG else None
    if key == "stricthostkeychecking":
        return [_STRICT[arg.lower()]] if arg.lower() in _STRICT else None
    return [arg.lower() if key in ("hostname", "hostkeyalias") else arg]


@dataclass(frozen=True)
class _Block:
    patterns: tuple[str, ...]  # `!` kept on negated ones
    settings: tuple[tuple[str, tuple[str, ...]], ...]  # (keyword, what ssh -G prints) of EVALUATED, in order

    @property
    def sets_hostname(self) -> bool:
        return any(key == "hostname" for key, _ in self.settings)


@dataclass(frozen=True)
class ConfigShape:
    """The Host blocks of a config whose settings depend on nothing but which blocks match."""

    blocks: tuple[_Block, ...]  # the lines before the first Host line are a `Host *` block
    exact: bool  # `resolve` may evaluate it

    def host_class(self, host: str, user: str | None, port: str | None) -> tuple | None:
        """The hosts with an equal class get one resolution; None: resolve this host on its own."""
        if not _NAME_OK.fullmatch(host):
            return None
        return (tuple(i for i, b in enumerate(self.blocks) if _applies(b, host)), user, port)

    def sets_hostname(self, host_class: tuple) -> bool:
        """Whether the class's HostName comes from the config (else it is the host's own name)."""
        return any(self.blocks[i].sets_hostname for i in host_class[0])

    def resolve(
        self, host: str, user: str | None, port: str | None, defaults: dict[str, list[str]]
    ) -> dict[str, list[str]] | None:
        """What `ssh -G [-l user] [-p port] host` prints for the EVALUATED keywords (hostkeyalias
        only when set, as ssh prints it); `defaults`: ssh -G's output for an empty config. None: not
        evaluated here (an inexact config or a name without a class), ask ssh -G."""
        given_port = _value("port", [port], "") if port else None
        if not self.exact or not _NAME_OK.fullmatch(host) or (port and given_port is None):
            return None
        got: dict[str, list[str]] = {}
        if user:
            got["user"] = [user]
        if given_port:
            got["port"] = given_port
        for block in self.blocks:
            if not _applies(block, host):
                continue
            for key, value in block.settings:
                if key != "identityfile":
                    got.setdefault(key, list(value))
                elif value[0] not in got.setdefault(key, []):
                    got[key].append(value[0])
        got.setdefault("hostname", [host])
        for key in EVALUATED:
            if key not in got and key in defaults:
                got[key] = defaults[key]
        return got


def passwd_home() -> str:
    """Where ssh's `~` is: the passwd entry's home directory (misc.c tilde_expand), not $HOME."""
    return pwd.getpwuid(os.getuid()).pw_dir


def parse(text: str, *, home: str | None = None) -> ConfigShape | None:
    """The config's shape, or None where one host's resolution cannot stand for another's.
    `home`: for `~` in UserKnownHostsFile, default passwd_home()."""
    home = passwd_home() if home is None else home
    blocks: list[_Block] = []
    patterns: tuple[str, ...] = ("*",)
    settings: list[tuple[str, tuple[str, ...]]] = []
    exact = True
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
            blocks.append(_Block(patterns, tuple(settings)))
            if not args or not all(_PATTERN_OK.fullmatch(a) for a in args):
                return None
            patterns, settings = tuple(args), []
        elif key in EVALUATED:
            value = _value(key, args, home)
            exact = exact and value is not None
            settings.append((key, tuple(value or [""])))
        elif key in _INEXACT_KEYWORDS:
            exact = False
    blocks.append(_Block(patterns, tuple(settings)))
    return ConfigShape(tuple(blocks), exact)


def _applies(block: _Block, host: str) -> bool:
    """OpenSSH's `Host` line (readconf.c): applies when a pattern matches and no negated one does."""
    hit = False
    for p in block.patterns:
        negated = p.startswith("!")
        if _matcher(p[1:] if negated else p)(host):
            if negated:
                return False
            hit = True
    return hit


@functools.cache
def _matcher(pattern: str) -> Callable[[str], object]:
    """match.c match_pattern: `*` any run, `?` one character, everything else literal, case-sensitive.
    Made once per pattern: every host is checked against every block, and one pattern per host
    (a Host block per host) overflowed re's 512-entry cache past ~250 hosts, a compile per check."""
    if "*" not in pattern and "?" not in pattern:
        return pattern.__eq__
    regex = "".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern)
    return re.compile(regex, re.DOTALL).fullmatch


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
