"""CEL device selectors (``selectors[].cel.expression`` of DeviceClasses and ResourceClaims), evaluated as the
Kubernetes DRA environment does, with the ``common-expression-language`` library (cel-interpreter, in Rust).

The environment: one variable, ``device``, with ``driver`` (a string), ``attributes`` and ``capacity`` (maps of
domain → name → value; an attribute named without a domain is in the driver's, ``dom/name`` in ``dom``'s; a domain
no device attribute has reads as an empty map, as Kubernetes' lazy map does, so ``device.attributes["x"].y`` fails
with "no such key" and ``has(...)`` is false). Attribute values are CEL ints, bools, strings, or semver values;
capacities are quantities.

Kubernetes' CEL libraries used by device selectors, registered as custom functions (the library has no custom
types, so a quantity is a map ``{"kubeflux.quantity": "<numerator>/<denominator>"}`` and a version
``{"kubeflux.semver": "<text>"}``, exact values, equal when their values are):

* quantities (``k8s.io/apiserver/pkg/cel/library/quantity.go``): ``quantity(s)``, ``isQuantity(s)``,
  ``q.compareTo(r)``, ``q.isGreaterThan(r)``, ``q.isLessThan(r)``, ``q.add(r|int)``, ``q.sub(r|int)``,
  ``sign(q)``, ``q.isInteger()``, ``q.asInteger()``, ``q.asApproximateFloat()``;
* semantic versions (``semverlib.go``): ``semver(s[, normalize])``, ``isSemver(s[, normalize])``, ``v.major()``,
  ``v.minor()``, ``v.patch()``, ``v.compareTo(w)``, ``v.isGreaterThan(w)``, ``v.isLessThan(w)``.

Kubernetes' other libraries that selectors use are registered too (strings, regex ``find``/``findAll``, lists, sets,
``isIP``/``isCIDR``; IP, CIDR and URL values, ``format``, ``flatten``, ``lists.range``:
:mod:`kubeflux.apiobjects.celfunctions`), and the macros the library lacks (``cel.bind``, two-variable
comprehensions, ``transformList``/``transformMap``/``transformMapEntry``, ``sortBy``) are rewritten into its own
(:mod:`kubeflux.apiobjects.celrewrite`); the conversions' overloads still missing are
:data:`~kubeflux.apiobjects.celcheck.KUBERNETES_ONLY` (docs/dra.md lists them).

An expression that does not compile, or that the API server refuses (too long, an undeclared name, no matching
overload, not bool, too costly: :mod:`kubeflux.apiobjects.celcheck`, checked before the library compiles it, so the
refusal is in the server's words), is refused when its object is read (:class:`SelectorCompileError`,
naming the field, as the server's 422 does); one that fails on a device, with any error of the library, raises
ValueError from :meth:`CelSelector.matches`, which the core reports naming the claim
(:class:`~kubeflux.scheduler.devices.ClaimError`): never an exception that would end a scheduling pass.
Compiled programs are kept by expression text (:func:`program`), so a selector object pickles as its text.
"""

from __future__ import annotations

import functools
import ipaddress
import itertools
import operator
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Final

import cel
from cel import stdlib

from kubeflux.apiobjects.celcheck import KUBERNETES_ONLY, CelCheckError, check
from kubeflux.apiobjects.celfunctions import FUNCTIONS as LIBRARIES
from kubeflux.apiobjects.celrewrite import rewrite
from kubeflux.apiobjects.quantity import QuantityError, parse_quantity
from kubeflux.scheduler.devices import Device, Version

__all__ = ["CelSelector", "SelectorCompileError", "device_variable", "program"]

QUANTITY_KEY: Final = "kubeflux.quantity"
SEMVER_KEY: Final = "kubeflux.semver"
INT64_MAX: Final = 2**63 - 1

_SEMVER = re.compile(
    r"(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
    r"(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?"
    r"(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?"
)
"""Semantic Versioning 2.0.0, strict (no ``v`` prefix, no missing parts), as ``semver.Parse`` reads it."""


class SelectorCompileError(ValueError):
    """A CEL expression that does not compile, or that the API server refuses: the message is what its 422 says
    after the field (after ``Invalid value: "…": `` when ``invalid``)."""

    def __init__(self, message: str, *, invalid: bool = True) -> None:
        super().__init__(message)
        self.invalid = invalid


@dataclass(frozen=True, slots=True)
class CelSelector:
    """A device selector: its expression, compiled once per text (see the module docstring)."""

    expression: str

    def __post_init__(self) -> None:
        program(self.expression)

    def matches(self, device: Device, driver: str) -> bool:
        """Whether the expression is true for ``device`` of ``driver``; ValueError when it fails or is no bool."""
        try:
            context = cel.Context({"device": device_variable(device, driver, self.expression)}, _FUNCTIONS)
            result = program(self.expression).execute(context)
        except KeyError as exc:
            raise ValueError(f"no such key: {exc.args[0] if exc.args else exc}") from exc
        except Exception as exc:  # any error of the library or of a function here: the claim's, never the caller's
            said = str(exc).split("\n")[0] or type(exc).__name__
            missing = _UNDEFINED.search(said)
            if missing is not None and missing.group(1) in KUBERNETES_ONLY:
                said = (
                    f"{said[: missing.end()]}: an overload of Kubernetes' CEL environment that kubeflux does not have"
                )
            raise ValueError(said) from exc
        if type(result) is not bool:
            raise ValueError(f"expression evaluated to {type(result).__name__}, not bool")
        return result


@functools.lru_cache(maxsize=4096)
def program(expression: str) -> cel.Program:
    """The compiled ``expression``; raises :class:`SelectorCompileError` when it does not compile or the API server
    would refuse it (:mod:`kubeflux.apiobjects.celcheck`: length, declarations, type, cost)."""
    if not expression.strip():
        raise SelectorCompileError("expression is empty")
    try:
        check(expression)  # first: a longer one is refused before it is parsed, and in the API server's words
        compiled = cel.compile(rewrite(expression))
    except CelCheckError as exc:
        raise SelectorCompileError(str(exc), invalid=exc.invalid) from exc
    except ValueError as exc:
        said = _PARSE_FAILED.sub("", str(exc).split("\n")[0])
        raise SelectorCompileError(f"compilation failed: {said}") from exc
    return compiled


_PARSE_FAILED = re.compile(r"^Failed to parse expression '.*?': (?=ERROR: )", re.DOTALL)
"""The library's words before the parser's error, which the API server does not say."""
_UNDEFINED = re.compile(r"Undefined variable or function: '([\w.]+)'")
_LITERALS = re.compile(r'"((?:[^"\\]|\\.)*)"' + r"|'((?:[^'\\]|\\.)*)'")


def device_variable(device: Device, driver: str, expression: str = "") -> dict[str, Any]:
    """The ``device`` variable for ``device`` of ``driver``; the domains quoted in ``expression`` that the device
    lacks are empty maps (Kubernetes' lazy map of domains)."""
    attributes: dict[str, dict[str, Any]] = {}
    for name, value in device.attributes.items():
        domain, _, short = name.rpartition("/")
        attributes.setdefault(domain or driver, {})[short] = _attribute(value)
    capacity: dict[str, dict[str, Any]] = {}
    for name, text in device.capacity.items():
        domain, _, short = name.rpartition("/")
        capacity.setdefault(domain or driver, {})[short] = _quantity_value(parse_quantity(text))
    for match in _LITERALS.finditer(expression):
        quoted = match.group(1) if match.group(1) is not None else match.group(2)
        attributes.setdefault(quoted, {})
        capacity.setdefault(quoted, {})
    return {
        "driver": driver,
        "attributes": attributes,
        "capacity": capacity,
        "allowMultipleAllocations": device.allow_multiple_allocations,
    }


def _attribute(value: object) -> object:
    if isinstance(value, Version):
        return {SEMVER_KEY: value.text}
    return value


# ====================================================================== quantities


def _quantity_value(value: Fraction) -> dict[str, str]:
    return {QUANTITY_KEY: f"{value.numerator}/{value.denominator}"}


def _quantity_of(value: object, what: str) -> Fraction:
    if isinstance(value, Mapping) and isinstance(value.get(QUANTITY_KEY), str):
        return Fraction(value[QUANTITY_KEY])
    if what == "operand" and type(value) is int:
        return Fraction(value)
    raise ValueError(f"no such overload: {what} is not a quantity")


def _quantity(text: object) -> dict[str, str]:
    if not isinstance(text, str):
        raise ValueError("no such overload: quantity(string)")
    try:
        return _quantity_value(parse_quantity(text))
    except QuantityError as exc:
        raise ValueError(str(exc)) from exc


def _is_quantity(text: object) -> bool:
    try:
        _quantity(text)
    except ValueError:
        return False
    return True


def _as_integer(value: object) -> int:
    number = _quantity_of(value, "receiver")
    if number.denominator != 1 or abs(number.numerator) > INT64_MAX:
        raise ValueError("cannot convert value to integer")
    return number.numerator


def _sign(value: object) -> int:
    number = _quantity_of(value, "receiver")
    return (number > 0) - (number < 0)


# ====================================================================== versions


def _semver_parts(value: object) -> tuple[int, int, int, str]:
    text = value.get(SEMVER_KEY) if isinstance(value, Mapping) else None
    match = _SEMVER.fullmatch(text) if isinstance(text, str) else None
    if match is None:
        raise ValueError("no such overload: not a semver")
    return int(match.group(1)), int(match.group(2)), int(match.group(3)), match.group(4) or ""


def _normalized(text: object, normalize: object = False) -> object:
    """``semver(s, true)``'s reading: a ``v`` prefix dropped, a missing minor or patch version 0, leading zeros
    dropped (``v1.02`` is ``1.2.0``)."""
    if normalize is not True or not isinstance(text, str):
        return text
    core, plus, build = text.removeprefix("v").partition("+")
    core, dash, prerelease = core.partition("-")
    parts = core.split(".")
    if not 1 <= len(parts) <= 3 or not all(part.isdigit() for part in parts):
        return text
    numbers = [str(int(part)) for part in parts] + ["0"] * (3 - len(parts))
    return ".".join(numbers) + dash + prerelease + plus + build


def _semver(text: object, normalize: object = False) -> dict[str, str]:
    text = _normalized(text, normalize)
    if not isinstance(text, str) or _SEMVER.fullmatch(text) is None:
        raise ValueError(f"could not parse {text!r} as semver")
    return {SEMVER_KEY: text}


def _is_semver(text: object, normalize: object = False) -> bool:
    text = _normalized(text, normalize)
    return isinstance(text, str) and _SEMVER.fullmatch(text) is not None


def _prerelease_key(text: str) -> tuple[tuple[int, int, str], ...]:
    """Precedence of pre-release identifiers (semver 11.4): numeric below alphanumeric, numbers compared as such."""
    return tuple((0, int(part), "") if part.isdigit() else (1, 0, part) for part in text.split("."))


def _semver_compare(left: object, right: object) -> int:
    a, b = _semver_parts(left), _semver_parts(right)
    if a[:3] != b[:3]:
        return -1 if a[:3] < b[:3] else 1
    if a[3] == b[3]:
        return 0
    if not a[3] or not b[3]:  # a release is above its pre-releases
        return 1 if not a[3] else -1
    return -1 if _prerelease_key(a[3]) < _prerelease_key(b[3]) else 1


# ====================================================================== methods of both


def _compare(left: object, right: object) -> int:
    if isinstance(left, Mapping) and SEMVER_KEY in left:
        return _semver_compare(left, right)
    a, b = _quantity_of(left, "receiver"), _quantity_of(right, "argument")
    return (a > b) - (a < b)


def _part(index: int) -> Callable[[object], int]:
    return lambda value: _semver_parts(value)[:3][index]


_FUNCTIONS: dict[str, Callable[..., Any]] = {
    "quantity": _quantity,
    "isQuantity": _is_quantity,
    "semver": _semver,
    "isSemver": _is_semver,
    "compareTo": _compare,
    "isGreaterThan": lambda a, b: _compare(a, b) > 0,
    "isLessThan": lambda a, b: _compare(a, b) < 0,
    "add": lambda a, b: _quantity_value(_quantity_of(a, "receiver") + _quantity_of(b, "operand")),
    "sub": lambda a, b: _quantity_value(_quantity_of(a, "receiver") - _quantity_of(b, "operand")),
    "sign": _sign,
    "isInteger": lambda a: _quantity_of(a, "receiver").denominator == 1,
    "asInteger": _as_integer,
    "asApproximateFloat": lambda a: float(_quantity_of(a, "receiver")),
    "major": _part(0),
    "minor": _part(1),
    "patch": _part(2),
}


# ====================================================================== Kubernetes' other libraries


def _lists(name: str, on_list: Callable[..., Any], on_string: Callable[..., Any] | None = None) -> Callable[..., Any]:
    def call(receiver: object, *args: object) -> Any:
        if isinstance(receiver, list):
            return on_list(receiver, *args)
        if on_string is not None and isinstance(receiver, str):
            return on_string(receiver, *args)
        raise ValueError(f"no such overload: {name}")

    return call


def _extreme(pick: Callable[..., Any]) -> Callable[[list[Any]], Any]:
    def call(items: list[Any]) -> Any:
        if not items:
            raise ValueError("min/max called on empty list")
        return pick(items)

    return call


def _last_index(items: list[Any], value: object) -> int:
    return max((i for i, item in enumerate(items) if item == value), default=-1)


def _find_all(text: str, pattern: str, limit: int = -1) -> list[str]:
    found = [match.group() for match in re.finditer(pattern, text)]
    return found if limit < 0 else found[:limit]


def _find(text: str, pattern: str) -> str:
    match = re.search(pattern, text)
    return match.group() if match is not None else ""


def _is_ip(text: object) -> bool:
    try:
        ipaddress.ip_address(text)  # type: ignore[arg-type]
    except ValueError:
        return False
    return isinstance(text, str) and "%" not in text


def _is_cidr(text: object) -> bool:
    try:
        ipaddress.ip_network(text, strict=False)  # type: ignore[arg-type]
    except ValueError:
        return False
    return isinstance(text, str) and "/" in text


_STRINGS = stdlib.EXTENSIONS["strings"]
_FUNCTIONS.update(
    {
        **{name: _STRINGS[name] for name in ("charAt", "substring", "replace", "split", "join", "strings.quote")},
        **{name: _STRINGS[name] for name in ("lowerAscii", "upperAscii", "trim")},
        "indexOf": _lists(
            "indexOf", lambda items, value: items.index(value) if value in items else -1, _STRINGS["indexOf"]
        ),
        "lastIndexOf": _lists("lastIndexOf", _last_index, _STRINGS["lastIndexOf"]),
        "isSorted": _lists("isSorted", lambda items: all(a <= b for a, b in itertools.pairwise(items))),
        "sum": _lists("sum", lambda items: functools.reduce(operator.add, items) if items else 0),
        "min": _lists("min", _extreme(min)),
        "max": _lists("max", _extreme(max)),
        "reverse": _lists("reverse", lambda items: items[::-1]),
        "distinct": stdlib.EXTENSIONS["lists"]["distinct"],
        "sort": stdlib.EXTENSIONS["lists"]["sort"],
        "slice": stdlib.EXTENSIONS["lists"]["slice"],
        **stdlib.EXTENSIONS["sets"],
        "bool": stdlib.EXTENSIONS["core"]["bool"],
        "find": _find,
        "findAll": _find_all,
        "isIP": _is_ip,
        "isCIDR": _is_cidr,
    }
)
_FUNCTIONS.update(LIBRARIES)
FUNCTION_NAMES: Final = frozenset(_FUNCTIONS)
"""The functions registered beside the library's own (:data:`~kubeflux.apiobjects.celcheck.NATIVE`)."""
