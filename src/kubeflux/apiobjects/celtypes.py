"""CEL's types and the declarations of the functions a device selector may call, as kube-apiserver v1.36's CEL
environment declares them (cel-go v0.26's standard library, its ``ext`` strings, lists, sets, optional and
two-variable comprehensions, and Kubernetes' ``k8s.io/apiserver/pkg/cel/library``: lists, regex, quantity, semver,
ip, cidr, url), and cel-go's overload resolution over them (:func:`resolve`).

Assignability is cel-go's checker's: ``dyn`` (and the attribute values' ``any``) fits any type and any type fits it;
``null`` fits only itself, ``dyn``, ``any``, durations, timestamps and Kubernetes' object types; a type parameter
binds to its first argument and the others must fit it (so ``1 == 1.0`` has no overload: no heterogeneous equality);
numbers are never converted.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

__all__ = ["DECLARATIONS", "CelType", "Overload", "assignable", "equivalent", "parse_type", "resolve"]


@dataclass(frozen=True, slots=True)
class CelType:
    """A CEL type: ``name`` (``int``, ``list``, ``map``, ``kubernetes.Quantity``, a type parameter ``A``) and its
    parameters (``list(int)``'s ``int``)."""

    name: str
    params: tuple[CelType, ...] = ()

    def __str__(self) -> str:
        if self.name == "_":
            return "dyn"
        if not self.params:
            return self.name
        return f"{self.name}({', '.join(str(param) for param in self.params)})"

    def wide(self) -> str:
        """The name as the "must evaluate to bool" message spells it (protobuf's names for durations and timestamps)."""
        if self.name in _PROTOBUF:
            return _PROTOBUF[self.name]
        if self.name == "null":
            return "null_type"
        if not self.params:
            return self.name
        return f"{self.name}({', '.join(param.wide() for param in self.params)})"

    @property
    def is_param(self) -> bool:
        """A type parameter of a declaration (``A``) or an empty literal's element (``_``)."""
        return self.name == "_" or (len(self.name) == 1 and self.name.isupper())


_PROTOBUF: Final = {"duration": "google.protobuf.Duration", "timestamp": "google.protobuf.Timestamp"}
DYN: Final = CelType("dyn")
ANY: Final = CelType("any")
"""An attribute's value: fits and is fitted by anything, as ``dyn``, but no comprehension ranges over it."""
ERROR: Final = CelType("error")
NULL: Final = CelType("null")
BOOL: Final = CelType("bool")
_WILD: Final = frozenset({"dyn", "any", "error"})
_NULLABLE: Final = frozenset(
    {"null", "duration", "timestamp", "kubernetes.Quantity", "kubernetes.Semver", "kubernetes.URL", "net.IP"}
    | {"net.CIDR", "kubernetes.DRADevice", "optional_type"}
)


def parse_type(text: str) -> CelType:
    """``list(map(string, A))`` as a :class:`CelType`."""
    found, rest = _parse(text.replace(" ", ""))
    if rest:
        raise ValueError(f"trailing {rest!r} in type {text!r}")
    return found


def _parse(text: str) -> tuple[CelType, str]:
    at = 0
    while at < len(text) and text[at] not in "(),":
        at += 1
    name, rest = text[:at], text[at:]
    if not rest.startswith("("):
        return CelType(name), rest
    params: list[CelType] = []
    rest = rest[1:]
    while True:
        param, rest = _parse(rest)
        params.append(param)
        if rest.startswith(","):
            rest = rest[1:]
            continue
        return CelType(name, tuple(params)), rest[1:]


def _fits(actual: CelType, wanted: CelType, bound: dict[str, CelType]) -> bool:
    if wanted.is_param:
        if wanted.name not in bound:
            bound[wanted.name] = actual
            return True
        have = bound[wanted.name]
        if have.name in _WILD:  # the most general of the two: ``true ? attribute : 1`` is ``any``
            return True
        if actual.name in _WILD or have.is_param:
            bound[wanted.name] = actual
            return True
        return _fits(actual, have, bound)
    if actual.name in _WILD or wanted.name in _WILD or actual.is_param:
        return True
    if actual.name == "null" or wanted.name == "null":
        other = wanted if actual.name == "null" else actual
        return other.name in _NULLABLE
    if actual.name != wanted.name or len(actual.params) != len(wanted.params):
        return False
    return all(_fits(a, w, bound) for a, w in zip(actual.params, wanted.params, strict=True))


def equivalent(one: CelType, other: CelType) -> bool:
    """cel-go's ``IsEquivalentType``: equal but for type parameters, which match anything."""
    if one.is_param or other.is_param:
        return True
    if one.name != other.name or len(one.params) != len(other.params):
        return False
    return all(equivalent(a, b) for a, b in zip(one.params, other.params, strict=True))


def assignable(actual: CelType, wanted: CelType) -> bool:
    """Whether a value of ``actual`` may be where ``wanted`` is declared (no type parameters)."""
    return _fits(actual, wanted, {})


def substitute(declared: CelType, bound: dict[str, CelType]) -> CelType:
    if declared.is_param:
        found = bound.get(declared.name)
        return DYN if found is None or found.name == "error" or found.is_param else found
    if not declared.params:
        return declared
    return CelType(declared.name, tuple(substitute(param, bound) for param in declared.params))


@dataclass(frozen=True, slots=True)
class Overload:
    receiver: CelType | None
    params: tuple[CelType, ...]
    result: CelType


def resolve(overloads: tuple[Overload, ...], receiver: CelType | None, args: list[CelType]) -> CelType | None:
    """The result type of a call of ``args`` (on ``receiver``), cel-go's way: the one matching overload's result, or
    ``dyn`` when several match with different results; None when none matches."""
    result: CelType | None = None
    for overload in overloads:
        if (overload.receiver is None) != (receiver is None) or len(overload.params) != len(args):
            continue
        bound: dict[str, CelType] = {}
        if overload.receiver is not None and receiver is not None and not _fits(receiver, overload.receiver, bound):
            continue
        if not all(_fits(arg, param, bound) for arg, param in zip(args, overload.params, strict=True)):
            continue
        found = substitute(overload.result, bound)
        if result is None:
            result = found
        elif result != DYN and found != result:
            result = DYN
    return result


_COMPARABLE: Final = ("int", "uint", "double", "string", "bytes", "bool", "duration", "timestamp")
_ORDERED: Final = [
    *(f"({t}, {t}) bool" for t in _COMPARABLE),
    *(f"({a}, {b}) bool" for a in ("int", "uint", "double") for b in ("int", "uint", "double") if a != b),
]
_NUMERIC: Final = ("int", "uint", "double")

_TEXT: Final = {
    "_==_": ["(A, A) bool"],
    "_!=_": ["(A, A) bool"],
    "_<_": _ORDERED,
    "_<=_": _ORDERED,
    "_>_": _ORDERED,
    "_>=_": _ORDERED,
    "_+_": [
        *(f"({t}, {t}) {t}" for t in ("int", "uint", "double", "string", "bytes")),
        "(list(A), list(A)) list(A)",
        "(timestamp, duration) timestamp",
        "(duration, timestamp) timestamp",
        "(duration, duration) duration",
    ],
    "_-_": [
        *(f"({t}, {t}) {t}" for t in _NUMERIC),
        "(timestamp, timestamp) duration",
        "(timestamp, duration) timestamp",
        "(duration, duration) duration",
    ],
    "_*_": [f"({t}, {t}) {t}" for t in _NUMERIC],
    "_/_": [f"({t}, {t}) {t}" for t in _NUMERIC],
    "_%_": [f"({t}, {t}) {t}" for t in ("int", "uint")],
    "-_": ["(int) int", "(double) double"],
    "!_": ["(bool) bool"],
    "@in": ["(A, list(A)) bool", "(A, map(A, B)) bool"],
    "_[_]": ["(list(A), int) A", "(map(A, B), A) B"],
    "_?_:_": ["(bool, A, A) A"],
    "size": [
        *(f"({t}) int" for t in ("string", "bytes", "list(A)", "map(A, B)")),
        *(f"{t}.() int" for t in ("string", "bytes", "list(A)", "map(A, B)")),
    ],
    "int": [f"({t}) int" for t in ("int", "uint", "double", "string", "timestamp", "duration")],
    "uint": [f"({t}) uint" for t in ("int", "uint", "double", "string")],
    "double": [f"({t}) double" for t in ("int", "uint", "double", "string")],
    "string": [
        *(f"({t}) string" for t in ("int", "uint", "double", "bool", "bytes", "string", "timestamp", "duration")),
        "(net.IP) string",
        "(net.CIDR) string",
    ],
    "bytes": ["(bytes) bytes", "(string) bytes"],
    "bool": ["(bool) bool", "(string) bool"],
    "dyn": ["(A) dyn"],
    "type": ["(A) type(dyn)"],
    "duration": ["(duration) duration", "(string) duration", "(int) duration"],
    "timestamp": ["(timestamp) timestamp", "(string) timestamp", "(int) timestamp"],
    "contains": ["string.(string) bool"],
    "startsWith": ["string.(string) bool"],
    "endsWith": ["string.(string) bool"],
    "matches": ["string.(string) bool", "(string, string) bool"],
    **{
        getter: ["timestamp.() int", "timestamp.(string) int"]
        for getter in ("getDate", "getDayOfMonth", "getDayOfWeek", "getDayOfYear", "getFullYear", "getMonth")
    },
    **{
        getter: ["timestamp.() int", "timestamp.(string) int", "duration.() int"]
        for getter in ("getHours", "getMinutes", "getSeconds", "getMilliseconds")
    },
    # ext strings (version 2 as Kubernetes declares it: no reverse on strings)
    "charAt": ["string.(int) string"],
    "indexOf": ["string.(string) int", "string.(string, int) int", "list(A).(A) int"],
    "lastIndexOf": ["string.(string) int", "string.(string, int) int", "list(A).(A) int"],
    "lowerAscii": ["string.() string"],
    "upperAscii": ["string.() string"],
    "trim": ["string.() string"],
    "replace": ["string.(string, string) string", "string.(string, string, int) string"],
    "split": ["string.(string) list(string)", "string.(string, int) list(string)"],
    "substring": ["string.(int) string", "string.(int, int) string"],
    "join": ["list(string).() string", "list(string).(string) string"],
    "strings.quote": ["(string) string"],
    "format": ["string.(list(dyn)) string"],
    # regex
    "find": ["string.(string) string"],
    "findAll": ["string.(string) list(string)", "string.(string, int) list(string)"],
    # lists (Kubernetes' and ext)
    "isSorted": [f"list({t}).() bool" for t in _COMPARABLE],
    "sum": [f"list({t}).() {t}" for t in ("int", "uint", "double", "duration")],
    "min": [f"list({t}).() {t}" for t in _COMPARABLE],
    "max": [f"list({t}).() {t}" for t in _COMPARABLE],
    "distinct": ["list(A).() list(A)"],
    "flatten": ["list(list(A)).() list(A)", "list(A).(int) list(dyn)"],
    "lists.range": ["(int) list(int)"],
    "reverse": ["list(A).() list(A)"],
    "slice": ["list(A).(int, int) list(A)"],
    "sort": [f"list({t}).() list({t})" for t in _COMPARABLE],
    # sets
    **{name: ["(list(A), list(A)) bool"] for name in ("sets.contains", "sets.equivalent", "sets.intersects")},
    # quantity
    "quantity": ["(string) kubernetes.Quantity"],
    "isQuantity": ["(string) bool"],
    "isInteger": ["kubernetes.Quantity.() bool"],
    "asInteger": ["kubernetes.Quantity.() int"],
    "asApproximateFloat": ["kubernetes.Quantity.() double"],
    "sign": ["(kubernetes.Quantity) int"],
    "add": [f"kubernetes.Quantity.({t}) kubernetes.Quantity" for t in ("kubernetes.Quantity", "int")],
    "sub": [f"kubernetes.Quantity.({t}) kubernetes.Quantity" for t in ("kubernetes.Quantity", "int")],
    "isLessThan": [f"{t}.({t}) bool" for t in ("kubernetes.Quantity", "kubernetes.Semver")],
    "isGreaterThan": [f"{t}.({t}) bool" for t in ("kubernetes.Quantity", "kubernetes.Semver")],
    "compareTo": [f"{t}.({t}) int" for t in ("kubernetes.Quantity", "kubernetes.Semver")],
    # semver
    "semver": ["(string) kubernetes.Semver", "(string, bool) kubernetes.Semver"],
    "isSemver": ["(string) bool", "(string, bool) bool"],
    "major": ["kubernetes.Semver.() int"],
    "minor": ["kubernetes.Semver.() int"],
    "patch": ["kubernetes.Semver.() int"],
    # ip, cidr
    "ip": ["(string) net.IP", "net.CIDR.() net.IP"],
    "isIP": ["(string) bool"],
    "ip.isCanonical": ["(string) bool"],
    "family": ["net.IP.() int"],
    **{
        name: ["net.IP.() bool"]
        for name in ("isUnspecified", "isLoopback", "isLinkLocalMulticast", "isLinkLocalUnicast", "isGlobalUnicast")
    },
    "cidr": ["(string) net.CIDR"],
    "isCIDR": ["(string) bool"],
    "containsIP": ["net.CIDR.(string) bool", "net.CIDR.(net.IP) bool"],
    "containsCIDR": ["net.CIDR.(string) bool", "net.CIDR.(net.CIDR) bool"],
    "masked": ["net.CIDR.() net.CIDR"],
    "prefixLength": ["net.CIDR.() int"],
    # url
    "url": ["(string) kubernetes.URL"],
    "isURL": ["(string) bool"],
    **{
        name: ["kubernetes.URL.() string"]
        for name in ("getScheme", "getHost", "getHostname", "getPort", "getEscapedPath")
    },
    "getQuery": ["kubernetes.URL.() map(string, list(string))"],
    # optional
    "optional.of": ["(A) optional_type(A)"],
    "optional.ofNonZeroValue": ["(A) optional_type(A)"],
    "optional.none": ["() optional_type(dyn)"],
    "hasValue": ["optional_type(A).() bool"],
    "value": ["optional_type(A).() A"],
    "orValue": ["optional_type(A).(A) A"],
    "or": ["optional_type(A).(optional_type(A)) optional_type(A)"],
}


def _overload(text: str) -> Overload:
    """``recv.(a, b) result`` or ``(a, b) result``."""
    opening = 0 if text.startswith("(") else text.index(".(") + 1
    depth, closing = 0, opening
    for closing in range(opening, len(text)):
        depth += (text[closing] == "(") - (text[closing] == ")")
        if depth == 0:
            break
    receiver = parse_type(text[: opening - 1]) if opening else None
    inner = text[opening + 1 : closing]
    params = tuple(parse_type(part) for part in _split(inner)) if inner else ()
    return Overload(receiver, params, parse_type(text[closing + 1 :].strip()))


def _split(text: str) -> list[str]:
    parts, depth, start = [], 0, 0
    for at, char in enumerate(text):
        depth += (char == "(") - (char == ")")
        if char == "," and depth == 0:
            parts.append(text[start:at].strip())
            start = at + 1
    parts.append(text[start:].strip())
    return parts


DECLARATIONS: Final[dict[str, tuple[Overload, ...]]] = {
    name: tuple(_overload(text) for text in texts) for name, texts in _TEXT.items()
}
"""Each function's (and operator's) overloads."""
