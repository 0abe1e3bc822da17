"""The syntax of a CEL expression as kubeflux reads it to check it (:mod:`kubeflux.apiobjects.celcheck`) and to
rewrite the macros the library lacks (:mod:`kubeflux.apiobjects.celrewrite`): :func:`parse` gives a tree of
:class:`Node`, or None for syntax it does not know (optional indexing ``[?``), which is then left to the library.

Nesting is bounded at :data:`MAX_NESTING`, as cel-go's parser bounds it; Python's recursion limit is raised while
an expression is read (:func:`deep_recursion`), as the parser recurses a few frames per level.
"""

from __future__ import annotations

import contextlib
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Final

__all__ = ["MAX_NESTING", "CelCheckError", "Node", "deep_recursion", "parse", "position", "too_deep"]


class CelCheckError(ValueError):
    """An expression the API server refuses: ``field_message`` is what follows the field in its 422 (without the
    ``Invalid value: "…": `` prefix when ``invalid`` is False)."""

    def __init__(self, message: str, *, invalid: bool = True) -> None:
        super().__init__(message)
        self.invalid = invalid


_ASSOCIATIVE: Final = frozenset({"||", "&&", "+", "*"})
"""Operators whose chain (``a || b || c``) is one node of many operands: its type and cost are the same."""


class _Unsupported(Exception):
    """Syntax this module does not parse: the checks are skipped."""


# ====================================================================== tokens

_TOKEN = re.compile(
    r"""(?P<space>\s+|//[^\n]*)
    |(?P<string>(?:[rR][bB]?|[bB][rR]?)?(?:\"\"\"[\s\S]*?\"\"\"|'''[\s\S]*?'''|"(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*'))
    |(?P<number>0[xX][0-9a-fA-F]+[uU]?|\d+\.\d+(?:[eE][+-]?\d+)?|\d*\.\d+(?:[eE][+-]?\d+)?|\d+[eE][+-]?\d+|\d+[uU]?)
    |(?P<ident>[A-Za-z_][A-Za-z0-9_]*)
    |(?P<op>\|\||&&|==|!=|<=|>=|[-+*/%!<>?:.,()\[\]{}])""",
    re.VERBOSE,
)


@dataclass(frozen=True, slots=True)
class _Token:
    kind: str
    text: str
    start: int
    end: int


def _tokens(source: str) -> list[_Token]:
    found: list[_Token] = []
    at = 0
    while at < len(source):
        match = _TOKEN.match(source, at)
        if match is None:
            raise _Unsupported(source[at])
        kind = match.lastgroup or ""
        after_operand = found and (found[-1].kind != "op" or found[-1].text in (")", "]", "}"))
        if kind == "number" and match.group().startswith(".") and after_operand:  # a member's dot, not ".5"
            found.append(_Token("op", ".", at, at + 1))
            at += 1
            continue
        if kind != "space":
            found.append(_Token(kind, match.group(), at, match.end()))
        at = match.end()
    return found


# ====================================================================== syntax


@dataclass(slots=True)
class Node:
    kind: str
    """lit, ident, select, index, call, list, map, op, cond."""
    value: str
    start: int
    end: int
    args: list[Node] = field(default_factory=list)
    method: bool = False
    """A call on a receiver (``args[0]``)."""
    at: int = -1
    """Where an error in it is reported (its operator, its field's dot, its call's parenthesis), when not at start."""


_OPERAND_START: Final = (
    "{'[', '{', '(', '.', '-', '!', 'true', 'false', 'null', NUM_FLOAT, NUM_INT, NUM_UINT, STRING, BYTES, IDENTIFIER}"
)
"""The tokens cel-go's parser expects where an operand starts."""
MAX_NESTING: Final = 250
"""The deepest nesting read (parentheses, ``!``/``-`` chains, calls, literals, selections), as cel-go's parser's
default recursion limit (kube-apiserver refuses ``(`` × 300): deeper is refused, never estimated."""


class _Parser:
    def __init__(self, source: str) -> None:
        self.source = source
        self.tokens = _tokens(source)
        self.at = 0
        self.depth = 0

    def error(self, at: int, what: str) -> CelCheckError:
        return CelCheckError(f"compilation failed: ERROR: {position(self.source, at)}: {what}")

    def deeper(self) -> None:
        self.depth += 1
        if self.depth > MAX_NESTING:
            raise too_deep()

    def peek(self, offset: int = 0) -> _Token | None:
        at = self.at + offset
        return self.tokens[at] if at < len(self.tokens) else None

    def take(self, text: str | None = None) -> _Token:
        token = self.peek()
        if token is None or (text is not None and token.text != text):
            raise _Unsupported(text or "end")
        self.at += 1
        return token

    def accept(self, *texts: str) -> _Token | None:
        token = self.peek()
        if token is not None and token.kind == "op" and token.text in texts:
            self.at += 1
            return token
        if token is not None and token.kind == "ident" and token.text in texts:  # ``in``
            self.at += 1
            return token
        return None

    def parse(self) -> Node:
        node = self.expr()
        if self.peek() is not None:
            raise _Unsupported("trailing")
        return node

    def expr(self) -> Node:
        self.deeper()
        cond = self.binary(0)
        if (question := self.accept("?")) is not None:
            then = self.binary(0)
            self.take(":")
            other = self.expr()
            cond = Node("cond", "?", cond.start, other.end, [cond, then, other], at=question.start)
        self.depth -= 1
        return cond

    _LEVELS: Final = (("||",), ("&&",), ("==", "!=", "<", "<=", ">", ">=", "in"), ("+", "-"), ("*", "/", "%"))

    def binary(self, level: int) -> Node:
        if level == len(self._LEVELS):
            return self.unary()
        left = self.binary(level + 1)
        chained = False
        while (token := self.accept(*self._LEVELS[level])) is not None:
            right = self.binary(level + 1)
            if chained and left.value == token.text and token.text in _ASSOCIATIVE:  # one node, not a deep tree
                left.args.append(right)
                left.end = right.end
            else:
                left = Node("op", token.text, left.start, right.end, [left, right], at=token.start)
            chained = True
        return left

    def unary(self) -> Node:
        token = self.accept("!", "-")
        if token is not None:
            self.deeper()
            operand = self.unary()
            self.depth -= 1
            alone = self.tokens[self.at - 2] is token  # ``-1``, not ``--1``
            if token.text == "-" and alone and operand.kind == "lit" and operand.value in ("int", "double"):
                return Node("lit", operand.value, token.start, operand.end)
            return Node("op", "neg" if token.text == "-" else "!", token.start, operand.end, [operand])
        return self.member(self.primary())

    def member(self, node: Node) -> Node:
        while True:
            if (dot := self.accept(".")) is not None:
                name = self.take()
                if name.kind != "ident":
                    raise _Unsupported(name.text)
                if name.text == "in":  # a keyword
                    raise self.error(name.start, "Syntax error: no viable alternative at input '.in'")
                if (call := self.accept("(")) is not None:
                    args = self.arguments(")")
                    end = self.tokens[self.at - 1].end
                    node = Node("call", name.text, node.start, end, [node, *args], True, at=call.start)
                else:
                    node = Node("select", name.text, node.start, name.end, [node], at=dot.start)
            elif (bracket := self.accept("[")) is not None:
                index = self.expr()
                close = self.take("]")
                node = Node("index", "[]", node.start, close.end, [node, index], at=bracket.start)
            else:
                return node

    def arguments(self, close: str) -> list[Node]:
        args: list[Node] = []
        while not self.accept(close):
            args.append(self.expr())
            if not self.accept(","):
                self.take(close)
                break
        return args

    def primary(self) -> Node:
        token = self.take()
        if token.kind == "string":
            kind = "bytes" if "b" in token.text[:2].lower() and token.text[0] not in "\"'" else "string"
            return Node("lit", kind, token.start, token.end)
        if token.kind == "number":
            text = token.text.lower()
            kind = "uint" if text.endswith("u") else "int" if text.startswith("0x") or text.isdigit() else "double"
            return Node("lit", kind, token.start, token.end)
        if token.kind == "ident":
            if token.text in ("true", "false"):
                return Node("lit", "bool", token.start, token.end)
            if token.text == "null":
                return Node("lit", "null_type", token.start, token.end)
            if (call := self.accept("(")) is not None:
                args = self.arguments(")")
                return Node("call", token.text, token.start, self.tokens[self.at - 1].end, args, at=call.start)
            if (following := self.peek()) is not None and following.text == "{":  # no message type is declared
                raise self.error(following.start, f"undeclared reference to '{token.text}' (in container '')")
            if token.text == "in":  # a keyword
                raise self.error(token.start, f"Syntax error: mismatched input 'in' expecting {_OPERAND_START}")
            return Node("ident", token.text, token.start, token.end)
        if token.text == "(":
            inner = self.expr()
            end = self.take(")")
            return Node(inner.kind, inner.value, token.start, end.end, inner.args, inner.method, inner.at)
        if token.text == "[":
            items = self.arguments("]")
            return Node("list", "[]", token.start, self.tokens[self.at - 1].end, items)
        if token.text == "{":
            entries: list[Node] = []
            while not self.accept("}"):
                entries.append(self.expr())
                self.take(":")
                entries.append(self.expr())
                if not self.accept(","):
                    self.take("}")
                    break
            return Node("map", "{}", token.start, self.tokens[self.at - 1].end, entries)
        raise _Unsupported(token.text)


def parse(source: str) -> Node | None:
    """The syntax tree of ``source``, or None when it uses syntax this module does not parse; nested deeper than
    :data:`MAX_NESTING` is refused (while read, and, for chains of selections and indexes, once read)."""
    try:
        tree = _Parser(source).parse()
    except _Unsupported:
        return None
    depth = {id(tree): 1}
    stack = [tree]
    while stack:  # iteratively: the checks after this recurse over the tree
        node = stack.pop()
        for arg in node.args:
            depth[id(arg)] = depth[id(node)] + 1
            if depth[id(arg)] > MAX_NESTING:
                raise too_deep()
            stack.append(arg)
    return tree


def too_deep() -> CelCheckError:
    """Nesting deeper than :data:`MAX_NESTING`, which kube-apiserver's parser refuses too (``(`` × 300 is refused
    there): refused rather than left unchecked, as its cost is unknown."""
    return CelCheckError(f"compilation failed: ERROR: <input>:-1:0: expression recursion limit exceeded: {MAX_NESTING}")


def position(source: str, at: int) -> str:
    """``<input>:line:column`` of offset ``at``, as cel-go says where an error is."""
    line = source.count("\n", 0, at) + 1
    column = at - (source.rfind("\n", 0, at) + 1) + 1
    return f"<input>:{line}:{column}"


RECURSION: Final = 20_000
"""Python's recursion limit while an expression is read: the parser and the checker recurse a few frames per level
of nesting, and cel-go reads 250 levels (a Python-to-Python call takes no C stack, and compiled code none of these
frames)."""


@contextlib.contextmanager
def deep_recursion() -> Iterator[None]:
    """Python's recursion limit at least :data:`RECURSION` inside."""
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, RECURSION))
    try:
        yield
    finally:
        sys.setrecursionlimit(limit)
