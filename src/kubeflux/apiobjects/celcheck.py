"""What the API server checks in a device selector's CEL expression when a DeviceClass or ResourceClaim is written,
and the ``common-expression-language`` library does not (it parses, but has no declarations, types or costs).

:func:`check` refuses, in the API server's words (``resource.k8s.io/v1`` validation, as kube-apiserver v1.36 says
them; tests/realkube/test_cel_agreement.py compares some 2,700 expressions with the real server's verdicts):

* an expression longer than :data:`MAX_LENGTH` bytes (``Too long: may not be more than 10240 bytes``);
* what cel-go's type checker refuses, over the declarations of :mod:`kubeflux.apiobjects.celtypes`
  (``compilation failed: ERROR: <input>:1:3: found no matching overload for '_==_' applied to '(int, double)'``):
  an undeclared variable or function, a field of ``device`` other than ``driver``, ``attributes``, ``capacity`` and
  ``allowMultipleAllocations``, operands and arguments of no declared overload (no heterogeneous equality, no
  implicit conversion between numbers), a non-bool operand of ``&&`` and ``||`` or condition of a macro, a
  comprehension over what is not a list or map, ``has()`` of what is not a field selection; of several errors, the
  first in the text, as cel-go reports them sorted;
* then what Kubernetes' validators refuse: a list or map literal whose elements differ in type, a literal regular
  expression of ``matches`` that does not compile, a literal ``duration`` or ``timestamp`` that does not parse;
* an expression whose type is not bool nor an attribute's ``any`` (``must evaluate to bool or the unknown type, not
  string``): ``dyn`` is refused, so ``dyn(1)`` alone is;
* one whose estimated cost exceeds :data:`MAX_COST` (``Forbidden: too complex, exceeds cost limit``): every node
  costs 1, and a comprehension (``all``, ``exists``, ``exists_one``, ``map``, ``filter``) costs its range's size
  times its body's; a list literal's size is its length, a device's attribute or capacity map's 32 (the API's bound),
  any other list's the sum of the expression's list literals' lengths and string literals' bytes (at least 64, an
  attribute string's bound); and, as cel-go's estimator finds them unbounded, any value of a ``type``, ``min``,
  ``max`` and ``join`` of a list of strings, and ``!=`` between quantities;
* a constant that cel-go's program planner folds and fails on (``Internal error: program instantiation failed: type
  conversion error from 'string' to 'int'``): a conversion of a literal, a literal regular expression of ``find``
  and ``findAll``.

The estimate is Kubernetes' in spirit, not its numbers (cel-go's estimator weighs each function); a list built at
run time beyond the expression's literals (a string joined and split again inside nested comprehensions) is
underestimated. An expression this module cannot parse (syntax it does not know: optional indexing ``[?``) is left
to the library.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Final

from kubeflux.apiobjects.celsyntax import CelCheckError, Node, deep_recursion, parse, position, too_deep
from kubeflux.apiobjects.celtypes import (
    BOOL,
    DECLARATIONS,
    DYN,
    ERROR,
    NULL,
    CelType,
    assignable,
    equivalent,
    parse_type,
    resolve,
)

__all__ = ["KUBERNETES_ONLY", "MAX_COST", "MAX_LENGTH", "CelCheckError", "check"]

MAX_LENGTH: Final = 10 * 1024
"""``CELSelectorExpressionMaxLength``: bytes of UTF-8."""
MAX_COST: Final = 1_000_000
"""``CELSelectorExpressionMaxCost``."""
MAX_COLLECTION: Final = 32
"""``ResourceSliceMaxAttributesAndCapacitiesPerDevice``: entries of a device's attribute or capacity map."""
MAX_STRING: Final = 64
"""``DeviceAttributeMaxValueLength``."""

MACROS: Final = frozenset({"all", "exists", "exists_one", "map", "filter"})
_STRINGS: Final = parse_type("list(string)")


# ====================================================================== checks

KUBERNETES_ONLY: Final = frozenset({"int", "string", "timestamp"})
"""Functions of which the library lacks overloads that Kubernetes' CEL environment has (``int(duration)``,
``int(timestamp)``, ``string(bool)``, ``timestamp(int)``): accepted when read, as the API server accepts them, they
fail at run time, the pod's CEL runtime error saying so ("Undefined variable or function: 'int': an overload of
Kubernetes' CEL environment that kubeflux does not have")."""
DEVICE: Final = CelType("kubernetes.DRADevice")
_DEVICE_FIELDS: Final = {
    "driver": parse_type("string"),
    "attributes": parse_type("map(string, map(string, any))"),
    "capacity": parse_type("map(string, map(string, kubernetes.Quantity))"),
    "allowMultipleAllocations": parse_type("bool"),
}
_TYPE_NAMES: Final = frozenset({"bool", "int", "uint", "double", "string", "bytes", "list", "map", "null_type", "type"})
_NAMES: Final = _TYPE_NAMES | {"device"}
"""Identifiers that are declared (a call on them is a method, not a function of a namespace such as ``sets``)."""
_MACRO_SHAPES: Final = {
    "all": ((1, 1), (2, 1)),
    "exists": ((1, 1), (2, 1)),
    "exists_one": ((1, 1),),
    "existsOne": ((2, 1),),
    "map": ((1, 1), (1, 2)),
    "filter": ((1, 1),),
    "sortBy": ((1, 1),),
    "transformList": ((2, 1), (2, 2)),
    "transformMap": ((2, 1), (2, 2)),
    "transformMapEntry": ((2, 1), (2, 2)),
}
"""The macros (and two-variable comprehensions): how many variables they bind and how many expressions follow."""
_OPERATORS: Final = {"!": "!_", "neg": "-_", "in": "@in"}
_CONVERSIONS: Final = frozenset({"int", "uint", "double", "string", "bool", "bytes"})
_DURATION: Final = re.compile(r"[-+]?(?:(?:\d+\.?\d*|\.\d+)(?:ns|us|µs|ms|s|m|h))+|[-+]?0")
_TIMESTAMP: Final = re.compile(r"\d{4}-\d\d-\d\d[Tt]\d\d:\d\d:\d\d(?:\.\d+)?(?:[Zz]|[-+]\d\d:\d\d)")
_ESCAPES: Final = re.compile(r"\\(?:x[0-9a-fA-F]{2}|u[0-9a-fA-F]{4}|U[0-9a-fA-F]{8}|[0-7]{3}|.)", re.DOTALL)
_CLAUSE: Final = re.compile(r"%(?:\.\d+)?(.)", re.DOTALL)
_FORMAT_ACCEPTS: Final[dict[str, tuple[frozenset[str], str]]] = {
    "s": (frozenset(), ""),
    "f": (frozenset(), ""),
    "b": (frozenset(), ""),
    "d": (frozenset({"int", "uint"}), "decimal clause can only be used on integers"),
    "o": (frozenset({"int", "uint"}), "octal clause can only be used on integers"),
    "e": (frozenset({"double"}), "scientific clause can only be used on doubles"),
    **dict.fromkeys(
        "xX",
        (
            frozenset({"int", "uint", "bytes", "string"}),
            "only integers, byte buffers, and strings can be formatted as hex",
        ),
    ),
}
"""The clauses of ``format`` and the argument types cel-go's check allows each (any when empty)."""
_GO_REGEX_ERRORS: Final = {
    "missing ), unterminated subpattern": "missing closing )",
    "unterminated character set": "missing closing ]",
    "nothing to repeat": "missing argument to repetition operator",
    "unbalanced parenthesis": "unexpected )",
}
"""Python's words for a bad regular expression, as Go's regexp says them."""
_SIMPLE_ESCAPES: Final = {"n": "\n", "t": "\t", "r": "\r", "a": "\a", "b": "\b", "f": "\f", "v": "\v"}


def _where(node: Node) -> int:
    return node.at if node.at >= 0 else node.start


@dataclass
class _Checker:
    """cel-go's type checker over a :class:`Node` tree: each node's type, and the errors found, by position."""

    source: str
    scope: dict[str, CelType] = field(default_factory=dict)
    errors: list[tuple[int, str]] = field(default_factory=list)
    types: dict[int, CelType] = field(default_factory=dict)

    def error(self, at: int, what: str) -> CelType:
        self.errors.append((at, what))
        return ERROR

    def first_error(self) -> CelCheckError | None:
        if not self.errors:
            return None
        at, what = min(self.errors, key=lambda error: error[0])
        return CelCheckError(f"compilation failed: ERROR: {position(self.source, at)}: {what}")

    def type_of(self, node: Node) -> CelType:
        found = self._type_of(node)
        self.types[id(node)] = found
        return found

    def _type_of(self, node: Node) -> CelType:
        kind, args = node.kind, node.args
        if kind == "lit":
            return self._literal(node)
        if kind == "ident":
            if node.value in self.scope:
                return self.scope[node.value]
            if node.value in _TYPE_NAMES:  # ``type(x) == string``
                return CelType("type", (CelType("null" if node.value == "null_type" else node.value),))
            if node.value != "device":
                return self.error(node.start, f"undeclared reference to '{node.value}' (in container '')")
            return DEVICE
        if kind == "select":
            return self._select(self.type_of(args[0]), node.value, _where(node))
        if kind == "index":
            return self._resolve("_[_]", node, None, [self.type_of(args[0]), self.type_of(args[1])])
        if kind == "list":
            items = [self.type_of(item) for item in args]
            return CelType("list", (_joined(items),))
        if kind == "map":
            keys = [self.type_of(item) for item in args[::2]]
            values = [self.type_of(item) for item in args[1::2]]
            return CelType("map", (_joined(keys), _joined(values)))
        if kind == "cond":
            return self._resolve("_?_:_", node, None, [self.type_of(item) for item in args])
        if kind == "op":
            return self._operator(node)
        return self._call(node)

    def _literal(self, node: Node) -> CelType:
        text = self.source[node.start : node.end].replace(" ", "").lower()
        if node.value in ("int", "uint"):
            digits = text.removesuffix("u")
            number = int(digits, 16) if "0x" in digits else int(digits)
            top = 2**63 - 1 if node.value == "int" else 2**64 - 1
            if abs(number) > top + (node.value == "int" and digits.startswith("-")):
                return self.error(node.start, f"invalid {node.value} literal")
        if node.value == "double" and float(text) in (float("inf"), float("-inf")):
            return self.error(node.start, "invalid double literal")
        return NULL if node.value == "null_type" else CelType(node.value)

    def _select(self, of: CelType, name: str, at: int) -> CelType:
        if of == DEVICE:
            if name not in _DEVICE_FIELDS:
                return self.error(at, f"undefined field '{name}'")
            return _DEVICE_FIELDS[name]
        if of.name == "map":
            return of.params[1]
        if of.name in ("dyn", "any", "error"):
            return DYN if of.name != "error" else ERROR
        return self.error(at, f"type '{of}' does not support field selection")

    def _resolve(self, name: str, node: Node, receiver: CelType | None, args: list[CelType]) -> CelType:
        found = resolve(DECLARATIONS[name], receiver, args)
        if found is not None:
            return found
        listed = ", ".join(str(arg) for arg in args)
        applied = f"{receiver}.({listed})" if receiver is not None else f"({listed})"
        return self.error(_where(node), f"found no matching overload for '{name}' applied to '{applied}'")

    def _operator(self, node: Node) -> CelType:
        op = node.value
        if op in ("&&", "||"):
            for item in node.args:
                found = self.type_of(item)
                if not assignable(found, BOOL):
                    self.error(_where(item), f"expected type 'bool' but found '{found}'")
            return BOOL
        types = [self.type_of(item) for item in node.args]
        return self._resolve(_OPERATORS.get(op, f"_{op}_"), node, None, types)

    def _call(self, node: Node) -> CelType:
        name, args = node.value, node.args
        receiver = args[0] if node.method else None
        if (
            receiver is not None
            and receiver.kind == "ident"
            and receiver.value not in self.scope
            and receiver.value not in _NAMES
        ):
            return self._qualified(f"{receiver.value}.{name}", node)
        if name == "has" and receiver is None and len(args) == 1:
            return self._has(node, args[0])
        if receiver is not None and name in _MACRO_SHAPES:
            variables = 0
            while 1 + variables < len(args) and args[1 + variables].kind == "ident" and variables < 2:
                variables += 1
            for shape_variables, bodies in _MACRO_SHAPES[name]:
                if shape_variables <= variables and len(args) == 1 + shape_variables + bodies:
                    return self._comprehension(node, shape_variables)
        if name not in DECLARATIONS:
            return self.error(_where(node), f"undeclared reference to '{name}' (in container '')")
        on = self.type_of(receiver) if receiver is not None else None
        return self._resolve(name, node, on, [self.type_of(arg) for arg in args[1 if node.method else 0 :]])

    def _qualified(self, name: str, node: Node) -> CelType:
        args = node.args[1:]
        if name == "cel.bind" and len(args) == 3:
            if args[0].kind != "ident":
                return self.error(_where(args[0]), "cel.bind() variable names must be simple identifiers")
            return self._bound({args[0].value: self.type_of(args[1])}, args[2])
        if name not in DECLARATIONS:
            return self.error(node.args[0].start, f"undeclared reference to '{node.args[0].value}' (in container '')")
        return self._resolve(name, node, None, [self.type_of(arg) for arg in args])

    def _has(self, node: Node, argument: Node) -> CelType:
        if argument.kind != "select":
            return self.error(_where(argument), "invalid argument to has() macro")
        of = self.type_of(argument.args[0])
        if of.name not in ("map", "dyn", "any", "error") and of != DEVICE:
            return self.error(_where(node), f"type '{of}' does not support field selection")
        if of == DEVICE and argument.value not in _DEVICE_FIELDS:
            return self.error(_where(node), f"undefined field '{argument.value}'")
        return BOOL

    def _comprehension(self, node: Node, count: int) -> CelType:
        name, args = node.value, node.args
        over = self.type_of(args[0])
        names = [arg.value for arg in args[1 : 1 + count]]
        if over.name == "list":
            kinds = [over.params[0]] if count == 1 else [CelType("int"), over.params[0]]
        elif over.name == "map":
            kinds = list(over.params[:count])
        else:
            if over.name not in ("dyn", "error"):
                what = f"expression of type '{over}' cannot be range of a comprehension"
                self.error(_where(args[0]), f"{what} (must be list, map, or dynamic)")
            kinds = [DYN] * count
        bodies = [self._bound(dict(zip(names, kinds, strict=True)), body) for body in args[1 + count :]]
        if name in ("all", "exists", "exists_one", "existsOne"):
            self._predicate(node, args[-1], bodies[-1], name, CelType("bool" if "One" not in name else "int"))
            return BOOL
        if (name in ("filter", "map", "transformList") and len(bodies) == 2) or name == "filter":
            self._predicate(node, args[1 + count], bodies[0], name, CelType("list", (kinds[-1],)))
        if name == "filter" or name == "sortBy":
            return CelType("list", (kinds[-1],))
        if name in ("map", "transformList"):
            return CelType("list", (bodies[-1],))
        if name == "transformMap":
            return CelType("map", (kinds[0], bodies[-1]))
        return bodies[-1] if bodies[-1].name == "map" else DYN

    def _predicate(self, node: Node, body: Node, found: CelType, name: str, accumulator: CelType) -> None:
        """A macro's condition: ``all`` and ``exists`` expand to ``&&``/``||``, the others to ``_?_:_``."""
        if assignable(found, BOOL):
            return
        if name in ("all", "exists"):
            self.error(_where(body), f"expected type 'bool' but found '{found}'")
            return
        self.error(
            _where(node), f"found no matching overload for '_?_:_' applied to '({found}, {accumulator}, {accumulator})'"
        )

    def _bound(self, variables: dict[str, CelType], body: Node) -> CelType:
        saved = dict(self.scope)
        self.scope.update(variables)
        try:
            return self.type_of(body)
        finally:
            self.scope = saved

    # ================================================================== after the types

    def validate(self, nodes: list[Node]) -> None:
        """cel-go's validators that Kubernetes enables: homogeneous list and map literals, and literal regular
        expressions, durations and timestamps."""
        for node in nodes:
            if node.kind == "list":
                self._homogeneous(node.args)
            elif node.kind == "map":
                self._homogeneous(node.args[::2])
                self._homogeneous(node.args[1::2])
            elif node.kind == "call" and node.args:
                self._literal_argument(node)
                if node.value == "format" and node.method and len(node.args) == 2:
                    self._format(node, node.args[0], node.args[1])

    def _homogeneous(self, items: list[Node]) -> None:
        first: CelType | None = None
        for item in items:
            found = self.types.get(id(item), DYN)
            if first is None:
                first = found
            elif not equivalent(first, found):
                self.error(_where(item), f"expected type '{first}' but found '{found}'")

    def _literal_argument(self, node: Node) -> None:
        name, argument = node.value, node.args[-1]
        if name == "matches" and argument.kind == "lit" and argument.value == "string":
            try:
                re.compile(_string_value(self.source[argument.start : argument.end]))
            except re.error:
                self.error(_where(argument), "invalid matches argument")
        elif name in ("duration", "timestamp") and not node.method and len(node.args) == 1 and argument.kind == "lit":
            text = _string_value(self.source[argument.start : argument.end]) if argument.value == "string" else None
            pattern = _DURATION if name == "duration" else _TIMESTAMP
            literal = argument.value != "int" or name == "duration"  # timestamp(int) is seconds since the epoch
            if literal and (text is None or pattern.fullmatch(text) is None):
                self.error(_where(argument), f"invalid {name} argument")

    def _format(self, node: Node, template: Node, items: Node) -> None:
        """cel-go's check of a literal format string against a literal list of arguments."""
        if template.kind != "lit" or template.value != "string" or items.kind != "list":
            return
        clauses = [c for c in _CLAUSE.findall(_string_value(self.source[template.start : template.end])) if c != "%"]
        for index, clause in enumerate(clauses):
            if clause not in _FORMAT_ACCEPTS:
                self.error(
                    _where(node), f'could not parse formatting clause: unrecognized formatting clause "{clause}"'
                )
                return
            if index >= len(items.args):
                self.error(_where(node), f"index {index} out of range")
                return
            item = items.args[index]
            found = self.types.get(id(item), DYN)
            accepted, words = _FORMAT_ACCEPTS[clause]
            if found.name not in ("dyn", "error") and accepted and found.name not in accepted:
                given = "google.protobuf.Any" if found.name == "any" else str(found)  # an attribute's
                self.error(_where(item), f"error during formatting: {words}, was given {given}")

    def instantiation_error(self, nodes: list[Node]) -> CelCheckError | None:
        """What cel-go's program planner refuses, folding constants: a conversion of a literal that fails, a literal
        regular expression of ``find`` or ``findAll`` that does not compile."""
        for node in reversed(nodes):
            if node.kind != "call" or not node.args or node.args[-1].kind != "lit":
                continue
            argument = node.args[-1]
            text = self.source[argument.start : argument.end]
            said = ""
            if node.value in _CONVERSIONS and not node.method and len(node.args) == 1:
                said = _conversion_error(node.value, argument.value, text)
            elif node.value in ("find", "findAll") and node.method and len(node.args) == 2:
                try:
                    re.compile(_string_value(text))
                except re.error as exc:
                    said = f"error parsing regexp: {_GO_REGEX_ERRORS.get(exc.msg, exc.msg)}: `{_string_value(text)}`"
            if said:
                return CelCheckError(f"Internal error: program instantiation failed: {said}", invalid=False)
        return None


def _joined(items: list[CelType]) -> CelType:
    """A literal's element type: the elements' one type, else ``dyn`` (an empty literal's is a parameter)."""
    if not items:
        return CelType("_")
    first = items[0]
    return first if all(equivalent(first, item) for item in items) else DYN


def _string_value(literal: str) -> str:
    """A string literal's value (raw or not, any quotes)."""
    raw = literal[0] in "rR"
    body = literal.lstrip("rRbB")
    quote = 3 if body[:3] in ('"""', "'''") else 1
    body = body[quote:-quote]
    if raw:
        return body

    def unescape(match: re.Match[str]) -> str:
        escape = match.group()[1:]
        if escape[0] in "xuU":
            return chr(int(escape[1:], 16))
        if escape[0].isdigit():
            return chr(int(escape, 8))
        return _SIMPLE_ESCAPES.get(escape, escape)

    return _ESCAPES.sub(unescape, body)


def _conversion_error(function: str, kind: str, text: str) -> str:
    if kind == "null_type":
        return f"no such overload: {function}(null_type)"
    if kind != "string" or function not in ("int", "uint", "double"):
        if function == "uint" and kind == "int" and int(text.replace(" ", ""), 0) < 0:
            return "unsigned integer overflow"
        return ""
    value = _string_value(text)
    try:
        number = float(value) if function == "double" else int(value)
    except ValueError:
        return f"type conversion error from 'string' to '{function}'"
    del number
    return ""


@dataclass(frozen=True, slots=True)
class _Cost:
    """The cost estimate (see the module docstring) of an expression ``source``."""

    source: str
    unknown_size: int

    def cost(self, node: Node) -> int:
        """Every node costs 1, a comprehension its range's size times its body's, ``lists.range(n)`` n."""
        bodies = _comprehension_bodies(node)
        if bodies is not None:
            body = sum(self.cost(item) for item in bodies)
            return self.cost(node.args[0]) + self.size(node.args[0]) * (body + 2)  # the step and the condition
        if _is_range(node):
            return 1 + self.size(node)
        return 1 + sum(self.cost(item) for item in node.args)

    def size(self, node: Node) -> int:
        if node.kind == "list":
            return len(node.args)
        if node.kind == "map":
            return len(node.args) // 2
        if node.kind in ("index", "select") and _is_device_map(node.args[0]):
            return MAX_COLLECTION
        if node.kind == "call" and node.method and node.value in _SAME_SIZE:
            return self.size(node.args[0])
        if node.kind == "op" and node.value == "+":
            return sum(self.size(item) for item in node.args)
        if _is_range(node):
            count = node.args[1]
            if count.kind != "lit" or count.value != "int":  # unbounded: the server refuses it as too complex
                return MAX_COST + 1
            return max(0, int(self.source[count.start : count.end].replace(" ", ""), 0))
        return self.unknown_size


_SAME_SIZE: Final = frozenset({"map", "filter", "transformList", "sortBy", "reverse", "sort", "distinct"})
"""Functions whose list is at most as long as their receiver."""


def _is_range(node: Node) -> bool:
    """``lists.range(n)``."""
    if node.kind != "call" or not node.method or node.value != "range" or len(node.args) != 2:
        return False
    namespace = node.args[0]
    return namespace.kind == "ident" and namespace.value == "lists"


def _comprehension_bodies(node: Node) -> list[Node] | None:
    """The expressions a comprehension evaluates per item (after its variables), None when ``node`` is none."""
    if node.kind != "call" or not node.method or node.value not in _MACRO_SHAPES or len(node.args) < 3:
        return None
    variables = 2 if node.args[2].kind == "ident" and len(node.args) >= 4 and node.value != "map" else 1
    return node.args[1 + variables :]


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


def check(expression: str) -> None:
    """Raise :class:`CelCheckError` when the API server would refuse ``expression`` (see the module docstring)."""
    if len(expression.encode()) > MAX_LENGTH:
        raise CelCheckError(f"Too long: may not be more than {MAX_LENGTH} bytes", invalid=False)
    with deep_recursion():
        _check(expression)


def _check(expression: str) -> None:
    tree = parse(expression)
    if tree is None:
        return
    nodes = _nodes(tree)
    checker = _Checker(expression)
    try:
        result = checker.type_of(tree)
        if not checker.errors:
            checker.validate(nodes)
    except RecursionError:
        raise too_deep() from None
    failed = checker.first_error()
    if failed is not None:
        raise failed
    if result != BOOL and result.name != "any":  # ``any``, an attribute's type, is "the unknown type"
        raise CelCheckError(f"must evaluate to bool or the unknown type, not {result.wide()}")
    literals = sum(len(node.args) for node in nodes if node.kind == "list")
    strings = sum(node.end - node.start for node in nodes if node.kind == "lit" and node.value == "string")
    if _too_costly(checker, nodes) or _Cost(expression, max(MAX_STRING, literals + strings)).cost(tree) > MAX_COST:
        raise CelCheckError("Forbidden: too complex, exceeds cost limit", invalid=False)
    failed = checker.instantiation_error(nodes)
    if failed is not None:
        raise failed


def _too_costly(checker: _Checker, nodes: list[Node]) -> bool:
    """What cel-go's estimator finds unbounded, by rule: a value of a ``type``, ``min``, ``max`` and ``join`` of a
    list of strings, and ``!=`` between quantities."""
    for node in nodes:
        found = checker.types.get(id(node))
        if found is not None and found.name == "type":
            return True
        if node.kind == "call" and node.method and node.value in ("min", "max", "join"):
            receiver = checker.types.get(id(node.args[0]))
            if receiver is not None and receiver == _STRINGS:
                return True
        if node.kind == "op" and node.value == "!=":
            operands = [checker.types.get(id(item)) for item in node.args]
            if all(found is not None and found.name == "kubernetes.Quantity" for found in operands):
                return True
    return False
