"""What the API server checks in a device selector's CEL expression when a DeviceClass or ResourceClaim is written,
and the ``common-expression-language`` library does not (it parses, but has no declarations, types or costs).

:func:`check` refuses, in the API server's words (``resource.k8s.io/v1`` validation, as kube-apiserver v1.36 says
them):

* an expression longer than :data:`MAX_LENGTH` bytes (``Too long: may not be more than 10240 bytes``);
* a reference to a variable other than ``device`` and those a macro or ``cel.bind`` binds, a field of ``device``
  other than ``driver``, ``attributes``, ``capacity`` and ``allowMultipleAllocations``, and a function the
  environment does not have
  (``compilation failed: ERROR: <input>:1:1: undeclared reference to 'devise' (in container '')``);
* ``==``, ``!=`` and the orderings between a string and a number or bool, or a bool and a number, as far as the
  operands' types are known without the device (``found no matching overload for '_==_' applied to '(string, int)'``);
* an expression whose type is not bool (``must evaluate to bool or the unknown type, not string``): an attribute is
  ``dyn``, so ``device.attributes["d"].x`` alone is refused, as there;
* one whose estimated cost exceeds :data:`MAX_COST` (``Forbidden: too complex, exceeds cost limit``): every node
  costs 1, and a comprehension (``all``, ``exists``, ``exists_one``, ``map``, ``filter``) costs its range's size
  times its body's; a list literal's size is its length, a device's attribute or capacity map's 32 (the API's bound),
  any other list's the sum of the expression's list literals' lengths and string literals' bytes (at least 64, an
  attribute string's bound).

The estimate is Kubernetes' in spirit, not its numbers (cel-go's estimator weighs each function); a list built at
run time beyond the expression's literals (a string joined and split again inside nested comprehensions) is
underestimated. An expression this module cannot parse (syntax it does not know) is left to the library.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Final

__all__ = ["KUBERNETES_ONLY", "MAX_COST", "MAX_LENGTH", "CelCheckError", "check", "rewrite_binds"]

MAX_LENGTH: Final = 10 * 1024
"""``CELSelectorExpressionMaxLength``: bytes of UTF-8."""
MAX_COST: Final = 1_000_000
"""``CELSelectorExpressionMaxCost``."""
MAX_COLLECTION: Final = 32
"""``ResourceSliceMaxAttributesAndCapacitiesPerDevice``: entries of a device's attribute or capacity map."""
MAX_STRING: Final = 64
"""``DeviceAttributeMaxValueLength``."""

MACROS: Final = frozenset({"all", "exists", "exists_one", "map", "filter"})
BOOL: Final = "bool"
DYN: Final = "dyn"
UNTYPED: Final = "?"
"""A function whose result type kubeflux does not know: accepted, as the unknown type is."""


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
    |(?P<number>0[xX][0-9a-fA-F]+[uU]?|\d+\.\d*(?:[eE][+-]?\d+)?|\d*\.\d+(?:[eE][+-]?\d+)?|\d+[eE][+-]?\d+|\d+[uU]?)
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


MAX_NESTING: Final = 250
"""The deepest nesting read (parentheses, ``!``/``-`` chains, calls, literals, selections), as cel-go's parser's
default recursion limit (kube-apiserver refuses ``(`` × 300): deeper is refused, never estimated."""


class _Parser:
    def __init__(self, source: str) -> None:
        self.tokens = _tokens(source)
        self.at = 0
        self.depth = 0

    def deeper(self) -> None:
        self.depth += 1
        if self.depth > MAX_NESTING:
            raise _too_deep()

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
        if self.accept("?"):
            then = self.binary(0)
            self.take(":")
            other = self.expr()
            cond = Node("cond", "?", cond.start, other.end, [cond, then, other])
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
            if token.text == "-" and operand.kind == "lit" and operand.value in ("int", "double"):
                return Node("lit", operand.value, token.start, operand.end)
            return Node("op", "neg" if token.text == "-" else "!", token.start, operand.end, [operand])
        return self.member(self.primary())

    def member(self, node: Node) -> Node:
        while True:
            if (dot := self.accept(".")) is not None:
                name = self.take()
                if name.kind != "ident":
                    raise _Unsupported(name.text)
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
                return Node("lit", BOOL, token.start, token.end)
            if token.text == "null":
                return Node("lit", "null_type", token.start, token.end)
            if (call := self.accept("(")) is not None:
                args = self.arguments(")")
                return Node("call", token.text, token.start, self.tokens[self.at - 1].end, args, at=call.start)
            if (following := self.peek()) is not None and following.text == "{":
                raise _Unsupported("message construction")
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
                raise _too_deep()
            stack.append(arg)
    return tree


def _too_deep() -> CelCheckError:
    """Nesting deeper than :data:`MAX_NESTING`, which kube-apiserver's parser refuses too (``(`` × 300 is refused
    there): refused rather than left unchecked, as its cost is unknown."""
    return CelCheckError("compilation failed: expression nested too deeply")


# ====================================================================== checks

_RESULTS: Final[dict[str, str]] = {
    **dict.fromkeys(
        [
            "has",
            "all",
            "exists",
            "exists_one",
            "existsOne",
            "startsWith",
            "endsWith",
            "contains",
            "matches",
            "isGreaterThan",
            "isLessThan",
            "isInteger",
            "isQuantity",
            "isSemver",
            "isSorted",
            "sets.contains",
            "sets.equivalent",
            "sets.intersects",
            "isIP",
            "isCIDR",
        ],
        BOOL,
    ),
    **dict.fromkeys(
        ["size", "int", "compareTo", "sign", "asInteger", "major", "minor", "patch", "indexOf", "lastIndexOf"], "int"
    ),
    **dict.fromkeys(
        [
            "string",
            "lowerAscii",
            "upperAscii",
            "trim",
            "replace",
            "substring",
            "charAt",
            "join",
            "find",
            "strings.quote",
        ],
        "string",
    ),
    **dict.fromkeys(["split", "map", "filter", "findAll", "distinct", "sort", "slice"], "list(dyn)"),
    "uint": "uint",
    "double": "double",
    "asApproximateFloat": "double",
    "bytes": "bytes",
    "quantity": "kubernetes.Quantity",
    "add": "kubernetes.Quantity",
    "sub": "kubernetes.Quantity",
    "semver": "kubernetes.Semver",
    "dyn": DYN,
    "type": "type",
    "timestamp": "google.protobuf.Timestamp",
    "duration": "google.protobuf.Duration",
}
NATIVE: Final = frozenset(
    [
        "has",
        "size",
        "int",
        "uint",
        "double",
        "string",
        "bytes",
        "dyn",
        "type",
        "timestamp",
        "duration",
        "contains",
        "startsWith",
        "endsWith",
        "matches",
        "all",
        "exists",
        "exists_one",
        "existsOne",
        "map",
        "filter",
        "getDate",
        "getDayOfMonth",
        "getDayOfWeek",
        "getDayOfYear",
        "getFullYear",
        "getHours",
        "getMilliseconds",
        "getMinutes",
        "getMonth",
        "getSeconds",
    ]
)
"""Functions and macros the library has itself."""
KUBERNETES_ONLY: Final = frozenset(
    [
        *("format", "isURL", "url", "getScheme", "getHost", "getHostname", "getPort", "getEscapedPath", "getQuery"),
        *("ip", "cidr", "family", "isUnspecified", "isLoopback", "isLinkLocalMulticast", "isLinkLocalUnicast"),
        *("isGlobalUnicast", "containsIP", "containsCIDR", "prefixLength", "masked", "isCanonical"),
        *("flatten", "lists.range", "sortBy", "transformList", "transformMap", "transformMapEntry"),
        *("optional.of", "optional.ofNonZeroValue", "optional.none", "hasValue", "value", "orValue", "or"),
    ]
)
"""Functions of Kubernetes' CEL environment that kubeflux does not have: accepted when read, as the API server
accepts them, they fail at run time (the pod's CEL runtime error says so)."""
_DEVICE_FIELDS: Final = {
    "driver": "string",
    "attributes": "map(string, map(string, dyn))",
    "capacity": "map(string, map(string, kubernetes.Quantity))",
    "allowMultipleAllocations": "bool",
}
_SCALARS: Final = frozenset({"bool", "int", "uint", "double", "string", "bytes"})
_TYPE_NAMES: Final = frozenset({*_SCALARS, "list", "map", "null_type", "type", "dyn"})
_BINDING: Final = MACROS | {"existsOne", "transformList", "transformMap", "transformMapEntry", "sortBy"}
"""Macros that bind variables (two-variable comprehensions too, which the library lacks: see KUBERNETES_ONLY)."""
_NUMBERS: Final = frozenset({"int", "uint", "double"})


def _position(source: str, at: int) -> str:
    line = source.count("\n", 0, at) + 1
    column = at - (source.rfind("\n", 0, at) + 1) + 1
    return f"<input>:{line}:{column}"


@dataclass
class _Checker:
    source: str
    functions: frozenset[str]
    scope: dict[str, str] = field(default_factory=dict)
    unknown_size: int = MAX_STRING

    def fail(self, node: Node, what: str) -> CelCheckError:
        at = node.at if node.at >= 0 else node.start
        return CelCheckError(f"compilation failed: ERROR: {_position(self.source, at)}: {what}")

    def type_of(self, node: Node) -> str:
        kind, args = node.kind, node.args
        if kind == "lit":
            return node.value
        if kind == "ident":
            if node.value in self.scope:
                return self.scope[node.value]
            if node.value in _TYPE_NAMES:  # ``type(x) == string``
                return "type"
            if node.value != "device":
                raise self.fail(node, f"undeclared reference to '{node.value}' (in container '')")
            return "kubernetes.DRADevice"
        if kind == "select":
            of = self.type_of(args[0])
            if of == "kubernetes.DRADevice":
                if node.value not in _DEVICE_FIELDS:
                    raise self.fail(node, f"undefined field '{node.value}'")
                return _DEVICE_FIELDS[node.value]
            return _element(of)
        if kind == "index":
            index = self.type_of(args[1])
            of = self.type_of(args[0])
            del index
            return _element(of)
        if kind == "list":
            items = {self.type_of(item) for item in args}
            return f"list({items.pop() if len(items) == 1 else DYN})"
        if kind == "map":
            keys = {self.type_of(item) for item in args[::2]}
            values = {self.type_of(item) for item in args[1::2]}
            return f"map({keys.pop() if len(keys) == 1 else DYN}, {values.pop() if len(values) == 1 else DYN})"
        if kind == "cond":
            types = [self.type_of(item) for item in args]
            return types[1] if types[1] == types[2] else DYN
        if kind == "op":
            return self._operator(node)
        return self._call(node)

    def _operator(self, node: Node) -> str:
        types = [self.type_of(item) for item in node.args]
        op = node.value
        if op in ("!", "||", "&&", "in"):
            return BOOL
        if op in ("==", "!=", "<", "<=", ">", ">="):
            left, right = types
            mixed = left in _SCALARS and right in _SCALARS and left != right
            if mixed and not (left in _NUMBERS and right in _NUMBERS):
                name = f"_{op}_"
                raise self.fail(node, f"found no matching overload for '{name}' applied to '({left}, {right})'")
            return BOOL
        known = [t for t in types if t not in (DYN, UNTYPED)]
        return known[0] if known else DYN

    def _call(self, node: Node) -> str:
        name, args = node.value, node.args
        if node.method and args[0].kind == "ident" and args[0].value not in self.scope and args[0].value != "device":
            qualified = f"{args[0].value}.{name}"
            if qualified == "cel.bind" and len(args) == 4 and args[1].kind == "ident":
                init = self.type_of(args[2])
                return self._bound({args[1].value: init}, args[3])
            if qualified in self.functions or qualified in KUBERNETES_ONLY:
                for arg in args[1:]:
                    self.type_of(arg)
                return _RESULTS.get(qualified, UNTYPED)
        if node.method and name in _BINDING and len(args) >= 3 and args[1].kind == "ident":
            self.type_of(args[0])
            variables = {args[1].value: DYN}
            if len(args) >= 4 and args[2].kind == "ident" and name not in ("map", "filter"):  # all(i, v, …)
                variables[args[2].value] = DYN
            for body in args[1 + len(variables) :]:
                self._bound(variables, body)
            return _RESULTS.get(name, UNTYPED)
        if name == "has" and not node.method and len(args) == 1 and args[0].kind == "select":
            self.type_of(args[0].args[0])
            return BOOL
        if name not in NATIVE and name not in self.functions and name not in KUBERNETES_ONLY:
            raise self.fail(node, f"undeclared reference to '{name}' (in container '')")
        for arg in args:
            self.type_of(arg)
        return _RESULTS.get(name, UNTYPED)

    def _bound(self, variables: dict[str, str], body: Node) -> str:
        saved = dict(self.scope)
        self.scope.update(variables)
        try:
            return self.type_of(body)
        finally:
            self.scope = saved

    # ================================================================== cost

    def cost(self, node: Node) -> int:
        if node.kind == "call" and node.method and node.value in MACROS and len(node.args) >= 3:
            body = sum(self.cost(item) for item in node.args[2:])
            return self.cost(node.args[0]) + self.size(node.args[0]) * (body + 1)
        return 1 + sum(self.cost(item) for item in node.args)

    def size(self, node: Node) -> int:
        if node.kind == "list":
            return len(node.args)
        if node.kind == "map":
            return len(node.args) // 2
        if node.kind in ("index", "select") and _is_device_map(node.args[0]):
            return MAX_COLLECTION
        if node.kind == "call" and node.method and node.value in ("map", "filter"):
            return self.size(node.args[0])
        if node.kind == "op" and node.value == "+":
            return sum(self.size(item) for item in node.args)
        return self.unknown_size


def _element(of: str) -> str:
    if of.startswith("list(") and of.endswith(")"):
        return of[5:-1]
    if of.startswith("map("):
        return of[4:-1].split(", ", 1)[1] if ", " in of else DYN
    return DYN


def _is_device_map(node: Node) -> bool:
    """``device.attributes``, ``device.capacity``, or one domain's map of them."""
    if node.kind == "select" and node.args[0].kind == "ident" and node.args[0].value == "device":
        return node.value in ("attributes", "capacity")
    return node.kind == "index" and _is_device_map(node.args[0])


def _nodes(tree: Node) -> list[Node]:
    """Every node of ``tree`` (without recursion: a chain of a few thousand ``+`` is as deep)."""
    found, stack = [], [tree]
    while stack:
        node = stack.pop()
        found.append(node)
        stack.extend(node.args)
    return found


def check(expression: str, functions: frozenset[str]) -> None:
    """Raise :class:`CelCheckError` when the API server would refuse ``expression`` (see the module docstring);
    ``functions`` are the custom functions the environment registers (dotted names for ``sets.contains`` …)."""
    if len(expression.encode()) > MAX_LENGTH:
        raise CelCheckError(f"Too long: may not be more than {MAX_LENGTH} bytes", invalid=False)
    tree = parse(expression)
    if tree is None:
        return
    nodes = _nodes(tree)
    literals = sum(len(node.args) for node in nodes if node.kind == "list")
    strings = sum(node.end - node.start for node in nodes if node.kind == "lit" and node.value == "string")
    checker = _Checker(expression, functions, unknown_size=max(MAX_STRING, literals + strings))
    try:
        result = checker.type_of(tree)
        cost = checker.cost(tree)
    except RecursionError:
        raise _too_deep() from None
    if result not in (BOOL, UNTYPED):
        raise CelCheckError(f"must evaluate to bool or the unknown type, not {result}")
    if cost > MAX_COST:
        raise CelCheckError("Forbidden: too complex, exceeds cost limit", invalid=False)


def rewrite_binds(expression: str) -> str:
    """``expression`` with each ``cel.bind(x, init, body)`` (which the library lacks) as ``[init].map(x, body)[0]``:
    ``body`` with ``x`` bound to ``init``'s value, evaluated once."""
    if "cel.bind" not in expression:
        return expression
    tree = parse(expression)
    return expression if tree is None else _rewritten(expression, tree)


def _rewritten(source: str, node: Node) -> str:
    args = node.args
    is_bind = node.kind == "call" and node.method and node.value == "bind" and len(args) == 4
    if is_bind and args[0].kind == "ident" and args[0].value == "cel" and args[1].kind == "ident":
        init, body = _rewritten(source, args[2]), _rewritten(source, args[3])
        return f"([{init}].map({args[1].value}, {body})[0])"
    text = source[node.start : node.end]
    for item in sorted(args, key=lambda item: item.start, reverse=True):
        text = text[: item.start - node.start] + _rewritten(source, item) + text[item.end - node.start :]
    return text
