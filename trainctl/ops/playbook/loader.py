"""Reading a playbook file safely: YAML with limits, each value's line kept for error messages.

Playbooks are copied between teams and run with --yes against production fleets, so the file
itself is untrusted input. PyYAML's SafeLoader builds no objects but has no limits: a
billion-laughs file (aliases of aliases) expands exponentially once walked, an alias inside its
own anchor makes a cycle that recursion never leaves, a complex key (a mapping used as a key)
crashes a dict, and deep nesting exhausts the stack. This loader refuses each of them, in bounded
time and memory, before any schema check:

    MAX_BYTES    file size
    MAX_DEPTH    nesting depth, counted while composing and again through aliases
    MAX_ALIASES  `*alias` uses in the file
    MAX_NODES    values visited with aliases expanded (a billion-laughs file stops here)

plus: a recursive alias, a complex key, a duplicate key, more than one document. Every refusal is a
PlaybookInvalid `FILE:LINE: what; fix`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from trainctl.errors import PlaybookInvalid

__all__ = ["MAX_BYTES", "MAX_DEPTH", "MAX_ALIASES", "MAX_NODES", "Document", "load_yaml", "read_playbook_file"]

MAX_BYTES = 256 * 1024  # the built-ins are under 2 KiB
MAX_DEPTH = 32
MAX_ALIASES = 64
MAX_NODES = 20_000

# A path into the document: ("steps", 2, "with", "hosts"); a key's own line is at path + (KEY_LINE,).
Path_ = tuple
KEY_LINE = "__key__"


@dataclass(frozen=True)
class Document:
    data: Any
    lines: Mapping[Path_, int]  # 1-based line of each value (and of each key, at path + (KEY_LINE,))
    source: str

    def line_of(self, path: Path_, *, key: bool = True) -> int:
        """The line of `path` or of its nearest ancestor in the file (the key's line when there is one)."""
        p = tuple(path)
        while p and p not in self.lines:
            p = p[:-1]
        return (self.lines.get(p + (KEY_LINE,)) if key else None) or self.lines.get(p, 1)


class _Refused(Exception):
    def __init__(self, line: int, what: str, fix: str) -> None:
        super().__init__(what)
        self.line, self.what, self.fix = line, what, fix


class _LimitedLoader(yaml.SafeLoader):
    """SafeLoader whose composer counts nesting depth and aliases as it goes."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._depth = 0
        self._aliases = 0

    def fetch_flow_collection_start(self, token_class: Any) -> None:  # PyYAML's Scanner hook
        # Flow nesting is refused while scanning: PyYAML's scanner re-checks every open level's
        # possible simple key on each token, quadratic in depth, before the composer sees a node.
        if self.flow_level >= MAX_DEPTH:
            line = self.get_mark().line + 1
            raise _Refused(line, f"nested deeper than {MAX_DEPTH} levels", "a playbook needs a handful; flatten it")
        super().fetch_flow_collection_start(token_class)

    def compose_node(self, parent: Any, index: Any) -> Any:  # PyYAML's Composer hook
        line = self.peek_event().start_mark.line + 1
        if self.check_event(yaml.AliasEvent):
            self._aliases += 1
            if self._aliases > MAX_ALIASES:
                raise _Refused(line, f"more than {MAX_ALIASES} aliases (*name)", "write the values out")
            return super().compose_node(parent, index)
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                raise _Refused(line, f"nested deeper than {MAX_DEPTH} levels", "a playbook needs a handful; flatten it")
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


def _yaml_error(exc: yaml.YAMLError, source: str) -> PlaybookInvalid:
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    line = mark.line + 1 if mark else 1
    problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
    return PlaybookInvalid(f"{source}:{line}: not valid YAML ({problem}); fix the indentation or quoting on that line")


def load_yaml(text: str, source: str) -> Document:
    """Parse one YAML document within the limits; values as plain Python, lines by path."""
    if len(text.encode("utf-8", "surrogatepass")) > MAX_BYTES:
        raise PlaybookInvalid(
            f"{source}:1: the file is larger than {MAX_BYTES // 1024} KiB; a playbook is a short YAML file, "
            "check that this is the right file"
        )
    try:
        loader = _LimitedLoader(text)  # PyYAML's Reader refuses control characters right here
    except yaml.YAMLError as exc:
        raise _yaml_error(exc, source) from exc
    try:
        node = loader.get_single_node()
    except _Refused as exc:
        raise PlaybookInvalid(f"{source}:{exc.line}: {exc.what}; {exc.fix}") from None
    except yaml.YAMLError as exc:
        raise _yaml_error(exc, source) from exc
    except RecursionError:
        raise PlaybookInvalid(f"{source}:1: nested too deeply to read; flatten it") from None
    finally:
        loader.dispose()
    if node is None:
        raise PlaybookInvalid(f"{source}:1: the file is empty; a playbook needs name, description, trigger and steps")
    lines: dict[Path_, int] = {}
    constructor = yaml.SafeLoader("")  # scalars with YAML 1.1 rules (yes/no, numbers), nothing else
    visited = 0
    on_path: set[int] = set()

    def build(n: yaml.Node, path: Path_, depth: int) -> Any:
        nonlocal visited
        line = n.start_mark.line + 1
        visited += 1
        if visited > MAX_NODES:
            raise _Refused(
                line,
                f"expands to more than {MAX_NODES} values through its aliases (an alias bomb)",
                "write the values out",
            )
        if depth > MAX_DEPTH:
            raise _Refused(line, f"nested deeper than {MAX_DEPTH} levels through aliases", "write the values out")
        if id(n) in on_path:
            raise _Refused(line, "an alias refers to the value that contains it (a recursive alias)", "remove it")
        lines.setdefault(path, line)
        if isinstance(n, yaml.MappingNode):
            on_path.add(id(n))
            d: dict[Any, Any] = {}
            for k, v in n.value:
                kline = k.start_mark.line + 1
                if not isinstance(k, yaml.ScalarNode):
                    raise _Refused(kline, "a key is a mapping or a list (a complex key)", "keys are plain words")
                if k.tag == "tag:yaml.org,2002:merge":
                    raise _Refused(kline, "merge keys (<<) are not supported", "write the keys out")
                key = constructor.construct_object(k, deep=True)
                if not isinstance(key, (str, int, float, bool)) or key is None:
                    raise _Refused(kline, f"key {key!r} is not plain text", "keys are plain words")
                if key in d:
                    raise _Refused(kline, f"key {key!r} appears twice", "keep one")
                lines.setdefault(path + (key, KEY_LINE), kline)
                d[key] = build(v, path + (key,), depth + 1)
            on_path.discard(id(n))
            return d
        if isinstance(n, yaml.SequenceNode):
            on_path.add(id(n))
            items = [build(v, path + (i,), depth + 1) for i, v in enumerate(n.value)]
            on_path.discard(id(n))
            return items
        return constructor.construct_object(n, deep=True)

    try:
        data = build(node, (), 0)
    except _Refused as exc:
        raise PlaybookInvalid(f"{source}:{exc.line}: {exc.what}; {exc.fix}") from None
    except (yaml.YAMLError, ValueError, TypeError) as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark else 1
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise PlaybookInvalid(f"{source}:{line}: cannot read this value ({problem}); write plain YAML") from None
    return Document(data, lines, source)


def read_playbook_file(path: str | os.PathLike[str]) -> str:
    """The file's text, refusing one over MAX_BYTES before reading it whole."""
    p = Path(path)
    try:
        with open(p, "rb") as f:
            raw = f.read(MAX_BYTES + 1)
    except OSError as exc:
        raise PlaybookInvalid(
            f"{p}: cannot read ({exc.strerror}); pass a playbook YAML file or a built-in name"
        ) from exc
    if len(raw) > MAX_BYTES:
        raise PlaybookInvalid(
            f"{p}:1: the file is larger than {MAX_BYTES // 1024} KiB; a playbook is a short YAML file, "
            "check that this is the right file"
        )
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise PlaybookInvalid(f"{p}:1: not UTF-8 text ({exc.reason}); save the playbook as UTF-8") from exc
