"""The small, safe expression language of playbook `when:` conditions and `${...}` templates.

Playbooks must never run arbitrary Python (they are copied between teams and run with --yes on
production clusters), so conditions are parsed by this module's recursive-descent parser and
evaluated against a plain dict context. Nothing is looked up outside that context.

Grammar (keywords are lower case):

    expr     := or_expr
    or_expr  := and_expr ("or" and_expr)*          value of the first truthy operand (Python-like)
    and_expr := not_expr ("and" not_expr)*
    not_expr := "not" not_expr | compare
    compare  := operand (("==" | "!=" | "<" | "<=" | ">" | ">=" | "in" | "not in") operand)?
    operand  := literal | "len" "(" expr ")" | path | "(" expr ")"
    literal  := NUMBER | 'text' | "text" | true | false | null
    path     := NAME ("." NAME | "[" NAME "=" scalar "]" | "[" INT "]")*

Paths walk dicts and lists: `diagnose.findings[kind=hung_collective].hosts` keeps the findings
whose `kind` equals `hung_collective` (or whose list-valued field contains it) and collects their
`hosts`, flattening lists. A missing key yields null (a playbook asks "is there a culprit?", and
an absent answer is "no"), so `when:` never fails on a step that produced no such output.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["ExprError", "Expr", "parse", "evaluate", "render", "template_roots"]


class ExprError(ValueError):
    """A condition or template does not parse; the message says where and what was expected."""


_TOKEN = re.compile(
    r"\s*(?:(?P<num>-?\d+(?:\.\d+)?)|(?P<str>'[^']*'|\"[^\"]*\")|(?P<op>==|!=|<=|>=|<|>|\(|\)|\[|\]|\.|=|,)"
    r"|(?P<name>[A-Za-z_][A-Za-z0-9_\-]*))"
)
_KEYWORDS = {"and", "or", "not", "in", "true", "false", "null", "len"}


@dataclass(frozen=True)
class _Tok:
    kind: str  # num | str | op | name | end
    text: str
    pos: int


def _tokenize(src: str) -> list[_Tok]:
    toks: list[_Tok] = []
    pos = 0
    while pos < len(src):
        if src[pos:].strip() == "":
            break
        m = _TOKEN.match(src, pos)
        if not m or m.end() == pos:
            raise ExprError(f"unexpected character {src[pos:].lstrip()[:1]!r} at column {pos + 1} of {src!r}")
        kind = m.lastgroup or "op"
        toks.append(_Tok(kind, m.group(kind), m.start(kind)))
        pos = m.end()
    toks.append(_Tok("end", "", len(src)))
    return toks


# AST: tuples, so a parsed expression is immutable and cheap to keep in a frozen dataclass.
#   ("lit", value) | ("path", root, (segment, ...)) | ("len", node) | ("not", node)
#   ("and", a, b) | ("or", a, b) | ("cmp", op, a, b)
# segment: ("key", name) | ("idx", int) | ("filter", key, value)
Node = tuple


@dataclass(frozen=True)
class Expr:
    source: str
    node: Node

    def roots(self) -> set[str]:
        """The first names of every path: which steps or namespaces the expression reads."""
        found: set[str] = set()

        def walk(n: Node) -> None:
            if n[0] == "path":
                found.add(n[1])
            elif n[0] in ("not", "len"):
                walk(n[1])
            elif n[0] in ("and", "or"):
                walk(n[1]), walk(n[2])
            elif n[0] == "cmp":
                walk(n[2]), walk(n[3])

        walk(self.node)
        return found


class _Parser:
    def __init__(self, src: str) -> None:
        self.src = src
        self.toks = _tokenize(src)
        self.i = 0

    def peek(self) -> _Tok:
        return self.toks[self.i]

    def take(self) -> _Tok:
        t = self.toks[self.i]
        self.i += 1
        return t

    def expect(self, text: str) -> None:
        t = self.take()
        if t.text != text:
            self.fail(t, f"expected {text!r}")

    def fail(self, t: _Tok, what: str) -> None:
        found = "the end" if t.kind == "end" else repr(t.text)
        raise ExprError(f"{what} at column {t.pos + 1} of {self.src!r}, found {found}")

    def parse(self) -> Node:
        node = self.or_expr()
        if self.peek().kind != "end":
            self.fail(self.peek(), "expected 'and', 'or' or the end of the expression")
        return node

    def or_expr(self) -> Node:
        node = self.and_expr()
        while self.peek().text == "or":
            self.take()
            node = ("or", node, self.and_expr())
        return node

    def and_expr(self) -> Node:
        node = self.not_expr()
        while self.peek().text == "and":
            self.take()
            node = ("and", node, self.not_expr())
        return node

    def not_expr(self) -> Node:
        if self.peek().text == "not":
            self.take()
            return ("not", self.not_expr())
        return self.compare()

    def compare(self) -> Node:
        left = self.operand()
        t = self.peek()
        if t.kind == "op" and t.text in ("==", "!=", "<", "<=", ">", ">="):
            self.take()
            return ("cmp", t.text, left, self.operand())
        if t.text == "in":
            self.take()
            return ("cmp", "in", left, self.operand())
        if t.text == "not" and self.toks[self.i + 1].text == "in":
            self.i += 2
            return ("cmp", "not in", left, self.operand())
        return left

    def operand(self) -> Node:
        t = self.take()
        if t.kind == "num":
            return ("lit", float(t.text) if "." in t.text else int(t.text))
        if t.kind == "str":
            return ("lit", t.text[1:-1])
        if t.text == "(":
            node = self.or_expr()
            self.expect(")")
            return node
        if t.kind == "name":
            if t.text in ("true", "false", "null"):
                return ("lit", {"true": True, "false": False, "null": None}[t.text])
            if t.text == "len":
                self.expect("(")
                node = self.or_expr()
                self.expect(")")
                return ("len", node)
            if t.text in _KEYWORDS:
                self.fail(t, "expected a value or a path")
            return self.path(t.text)
        self.fail(t, "expected a value or a path")
        raise AssertionError  # unreachable: fail raises

    def path(self, root: str) -> Node:
        segs: list[tuple] = []
        while self.peek().text in (".", "["):
            if self.take().text == ".":
                t = self.take()
                if t.kind not in ("name", "num"):
                    self.fail(t, "expected a name after '.'")
                segs.append(("key", t.text))
                continue
            t = self.take()
            if t.kind == "num" and self.peek().text == "]":
                self.take()
                segs.append(("idx", int(t.text)))
                continue
            if t.kind != "name":
                self.fail(t, "expected KEY=VALUE or an index inside [...]")
            self.expect("=")
            v = self.take()
            if v.kind == "str":
                value: Any = v.text[1:-1]
            elif v.kind == "num":
                value = float(v.text) if "." in v.text else int(v.text)
            elif v.kind == "name":
                value = {"true": True, "false": False, "null": None}.get(v.text, v.text)
            else:
                self.fail(v, "expected a value after '='")
            self.expect("]")
            segs.append(("filter", t.text, value))
        return ("path", root, tuple(segs))


MAX_EXPR_CHARS = 2048  # a condition is a line; longer is a mistake or an attack on the parser


def parse(src: str) -> Expr:
    if not isinstance(src, str) or not src.strip():
        raise ExprError("empty expression")
    if len(src) > MAX_EXPR_CHARS:
        raise ExprError(f"expression longer than {MAX_EXPR_CHARS} characters")
    try:
        return Expr(src, _Parser(src).parse())
    except RecursionError:
        raise ExprError(f"expression nested too deeply: {src[:40]!r}...") from None


def _matches(item: Any, key: str, value: Any) -> bool:
    if not isinstance(item, Mapping):
        return False
    got = item.get(key)
    if isinstance(got, (list, tuple)):
        return value in got
    return got == value


def _step(value: Any, seg: tuple) -> Any:
    if value is None:
        return None
    if seg[0] == "filter":
        if isinstance(value, (list, tuple)):
            return [v for v in value if _matches(v, seg[1], seg[2])]
        return value if _matches(value, seg[1], seg[2]) else None
    if seg[0] == "idx":
        if isinstance(value, (list, tuple)):
            return value[seg[1]] if -len(value) <= seg[1] < len(value) else None
        return None
    key = seg[1]
    if isinstance(value, Mapping):
        return value.get(key)
    if isinstance(value, (list, tuple)):
        # Projection over a list: collect the key from every element, flattening lists, so
        # `findings[kind=x].hosts` is one list of hosts.
        outv: list[Any] = []
        for v in value:
            got = v.get(key) if isinstance(v, Mapping) else None
            if isinstance(got, (list, tuple)):
                outv.extend(got)
            elif got is not None:
                outv.append(got)
        return outv
    return None


def _eval(node: Node, ctx: Mapping[str, Any]) -> Any:
    op = node[0]
    if op == "lit":
        return node[1]
    if op == "path":
        value: Any = ctx.get(node[1])
        for seg in node[2]:
            value = _step(value, seg)
        return value
    if op == "len":
        v = _eval(node[1], ctx)
        return len(v) if isinstance(v, (list, tuple, str, Mapping)) else 0
    if op == "not":
        return not _eval(node[1], ctx)
    if op == "and":
        a = _eval(node[1], ctx)
        return _eval(node[2], ctx) if a else a
    if op == "or":
        a = _eval(node[1], ctx)
        return a if a else _eval(node[2], ctx)
    if op == "cmp":
        a, b = _eval(node[2], ctx), _eval(node[3], ctx)
        cmp = node[1]
        if cmp in ("in", "not in"):
            inside = a in b if isinstance(b, (list, tuple, str, Mapping)) else False
            return inside if cmp == "in" else not inside
        if cmp == "==":
            return a == b
        if cmp == "!=":
            return a != b
        try:
            return {"<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b}[cmp] if cmp in ("<", "<=", ">", ">=") else False
        except TypeError:
            return False  # comparing null (a missing output) with a number is "no", not a crash
    raise AssertionError(f"unknown node {op}")


def evaluate(expr: Expr | str, ctx: Mapping[str, Any]) -> Any:
    if isinstance(expr, str):
        expr = parse(expr)
    return _eval(expr.node, ctx)


_TEMPLATE = re.compile(r"\$\{([^}]*)\}")


def template_roots(value: Any) -> set[str]:
    """Every path root used by `${...}` templates anywhere inside `value` (validation)."""
    roots: set[str] = set()
    if isinstance(value, str):
        for m in _TEMPLATE.finditer(value):
            roots |= parse(m.group(1)).roots()
    elif isinstance(value, Mapping):
        for v in value.values():
            roots |= template_roots(v)
    elif isinstance(value, (list, tuple)):
        for v in value:
            roots |= template_roots(v)
    return roots


def _text(v: Any) -> str:
    if v is None:
        return ""
    if isinstance(v, (list, tuple)):
        return ",".join(_text(x) for x in v)
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)


def render(value: Any, ctx: Mapping[str, Any]) -> Any:
    """Fill `${expr}` templates. A string that is exactly one template keeps the value's type
    (a list of hosts stays a list); inside longer text, lists are joined with commas."""
    if isinstance(value, str):
        m = _TEMPLATE.fullmatch(value.strip())
        if m:
            return evaluate(m.group(1), ctx)
        return _TEMPLATE.sub(lambda mm: _text(evaluate(mm.group(1), ctx)), value)
    if isinstance(value, Mapping):
        return {k: render(v, ctx) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [render(v, ctx) for v in value]
    return value
