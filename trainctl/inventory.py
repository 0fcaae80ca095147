"""Host inventories: comma lists, hostfiles (`node01 slots=8`), Slurm nodelists, `@file`.

Used by `launch --hosts` and `collect --hosts`. Order is preserved (the first host hosts the
rendezvous) and duplicates are refused, since a host listed twice would get two agents.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from trainctl.errors import InventoryError

__all__ = ["HostSpec", "parse_hosts", "expand_nodelist"]

_HOST_RE = re.compile(r"^[A-Za-z0-9_.\-@:\[\]]+$")


@dataclass(frozen=True)
class HostSpec:
    """One host as the user named it; `slots` is the hostfile's process count, if given."""

    name: str
    slots: int | None = None


def _split_top_level(text: str) -> list[str]:
    """Split on commas that are not inside [...] (Slurm ranges hold commas)."""
    out, depth, cur = [], 0, []
    for ch in text:
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
            if depth < 0:
                raise InventoryError(f"unbalanced ']' in host list {text!r}; Slurm ranges look like node[01-16,20]")
        if ch == "," and depth == 0:
            out.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    if depth != 0:
        raise InventoryError(f"unbalanced '[' in host list {text!r}; Slurm ranges look like node[01-16,20]")
    out.append("".join(cur))
    return [s.strip() for s in out if s.strip()]


def expand_nodelist(expr: str) -> list[str]:
    """Expand one Slurm nodelist term: `node[01-03,7]` -> node01 node02 node03 node07.

    Zero padding follows the range's first bound (as Slurm does); several bracket groups
    (`rack[1-2]-gpu[1-2]`) expand as a product, left to right.
    """
    m = re.search(r"\[([^\[\]]*)\]", expr)
    if not m:
        return [expr]
    head, tail = expr[: m.start()], expr[m.end() :]
    values: list[str] = []
    for item in m.group(1).split(","):
        item = item.strip()
        if re.fullmatch(r"\d+", item):
            values.append(item)
            continue
        rm = re.fullmatch(r"(\d+)-(\d+)", item)
        if not rm:
            raise InventoryError(f"bad range {item!r} in {expr!r}; use node[01-16,20]")
        lo, hi = rm.group(1), rm.group(2)
        if int(hi) < int(lo):
            raise InventoryError(f"range {item!r} in {expr!r} runs backwards; write it low-high")
        if int(hi) - int(lo) > 100_000:
            raise InventoryError(f"range {item!r} in {expr!r} expands to over 100000 hosts; check the bounds")
        width = len(lo) if lo.startswith("0") else 0
        values.extend(str(i).zfill(width) for i in range(int(lo), int(hi) + 1))
    return [name for v in values for name in expand_nodelist(f"{head}{v}{tail}")]


def _parse_hostfile(path: Path) -> list[HostSpec]:
    try:
        lines = path.read_text().splitlines()
    except OSError as exc:
        raise InventoryError(f"{path}: cannot read hostfile ({exc.strerror})") from exc
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
    names = []
    for term in _split_top_level(text):
        for name in expand_nodelist(term):
            if not _HOST_RE.match(name) or name.startswith("-"):
                raise InventoryError(f"{where}: {name!r} is not a host name")
            names.append(name)
    return names


def parse_hosts(spec: str) -> list[HostSpec]:
    """Parse `--hosts`: `@file` or an existing file path (hostfile), else a comma/Slurm list."""
    spec = spec.strip()
    if not spec:
        raise InventoryError("empty host list; pass --hosts node01,node02, a hostfile, or node[01-16]")
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
