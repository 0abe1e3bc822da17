"""Flux canonical jobspecs (RFC 14, version 1), read and validated exactly as Fluxion's matcher reads them.

The rules are those of flux-sched's ``resource/libjobspec`` (``jobspec.cpp``, ``constraint.cpp``,
``hostlist_constraint.cpp``, ``rank_constraint.cpp``); a document Fluxion refuses raises :class:`JobspecError`,
whose message names the file, the field (``resources[0].with[1].count.operand``) and the reason.

Deliberate differences from Fluxion, all on input Fluxion would mishandle or that only a graph can judge:

- Resource types are not checked unless ``known_types`` is given. Fluxion interns types in a closed table
  (filled by the graph and a few built-in names, :data:`BUILTIN_TYPES`) and refuses any other type with
  "must be a resource type known to fluxion"; pass the graph's types to get the same check here.
- A negative, NaN or infinite ``duration`` is refused here; Fluxion parses it and fails the match with EINVAL
  (``jobmeta_t::build``). :meth:`Jobspec.duration_seconds` makes the remaining, graph-dependent checks.
- Nesting deeper than :data:`MAX_DEPTH` or more than :data:`MAX_RESOURCES` resources is refused, so YAML
  aliases cannot make a recursive or exponentially large request.
- YAML is read with PyYAML's safe loader, but with YAML 1.2-like scalars: only ``true``/``false`` are booleans,
  there are no timestamps, no ``1_000`` or ``1:30`` numbers and no ``<<`` merge keys. This is how yaml-cpp
  sees them, so ``exclusive: True`` is refused as in Fluxion.

Why this module is long: it is one specification's reader (libjobspec's model, its YAML reading and each field's
validation, every error naming its field) and most callers want all of it at once. If it grows, the YAML scalar
rules and the constraint parsers are the parts that would stand alone.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, TypeAlias, cast

import yaml

__all__ = [
    "BUILTIN_TYPES",
    "MAX_DEPTH",
    "MAX_RESOURCES",
    "UINT_MAX",
    "AndConstraint",
    "Constraint",
    "Count",
    "HostRange",
    "HostlistConstraint",
    "Jobspec",
    "JobspecError",
    "MatchAll",
    "NotConstraint",
    "OrConstraint",
    "PropertyConstraint",
    "RankConstraint",
    "Resource",
    "Task",
    "jobspec_from_dict",
    "jobspec_from_yaml",
    "load_jobspec",
    "parse_jobspec",
]

UINT_MAX = 2**32 - 1
"""The open ``max`` of a count given as ``{min: N}`` (C's ``UINT_MAX``)."""
_INT_MIN, _INT_MAX = -(2**31), 2**31 - 1

BUILTIN_TYPES = frozenset(
    {"slot", "xor_slot", "cluster", "rack", "node", "socket", "gpu", "core", "ssd", "storage_node"}
)
"""Types Fluxion interns before any graph is read, so a jobspec may always name them."""

MAX_DEPTH = 64
MAX_RESOURCES = 100_000

_TOP_KEYS = ("version", "resources", "tasks", "attributes")
_RESOURCE_KEYS = ("type", "count", "unit", "exclusive", "with", "label", "id")
_BAD_PROPERTY_CHARS = frozenset("!&'\"^`|()")
_EMPTY: Mapping[str, Any] = MappingProxyType({})


def _empty() -> Mapping[str, Any]:
    return _EMPTY


class JobspecError(ValueError):
    """A jobspec Fluxion would refuse (the match fails with EINVAL).

    ``source`` is the file (or None), ``path`` the offending field (``resources[0].count.min``, "" for the
    document itself), ``line``/``column`` (1-based) are known only for YAML syntax errors.
    """

    def __init__(
        self,
        reason: str,
        path: str = "",
        source: str | None = None,
        line: int | None = None,
        column: int | None = None,
    ) -> None:
        self.reason = reason
        self.path = path
        self.source = source
        self.line = line
        self.column = column
        super().__init__(self._message())

    def _message(self) -> str:
        where = self.source
        if self.line is not None:
            position = f"{self.line}:{self.column}" if self.column is not None else str(self.line)
            where = f"{where}:{position}" if where else f"line {position}"
        return ": ".join(part for part in (where, self.path, self.reason) if part)

    def with_source(self, source: str | None) -> JobspecError:
        """The same error, attributed to ``source``."""
        return JobspecError(self.reason, self.path, source, self.line, self.column)


# --------------------------------------------------------------------------------------------------------------
# Model


@dataclass(frozen=True, slots=True)
class Count:
    """How many of a resource: ``min`` up to ``max``, stepping by ``operator`` (``+ * ^``) and ``operand``.

    A scalar count ``N`` is ``Count(N, N)``; ``{min: N}`` is ``Count(N)`` (``max`` = :data:`UINT_MAX`).
    """

    min: int
    max: int = UINT_MAX
    operator: str = "+"
    operand: int = 1

    def __post_init__(self) -> None:
        if self.operator not in ("+", "*", "^") or self.operand < 1 or self.min < 0 or self.max < 0:
            raise ValueError(f"invalid count {self!r}")

    def calc(self, available: int) -> int:
        """The count to take when ``available`` qualified candidates exist (Fluxion's ``calc_count``).

        0 when ``min`` exceeds ``available`` (or ``max``). ``+``: the largest ``min + k*operand`` ≤
        min(available, max); ``*``: the largest of ``min, min*operand, …``; ``^``: the largest of
        ``min, min**operand, (min**operand)**operand, …``, each ≤ available and ≤ max. Fluxion computes in
        32-bit unsigned arithmetic, which wraps for huge ``*``/``^`` steps; here the arithmetic is exact.
        """
        low = self.min
        if low > self.max or low > available:
            return 0
        if self.operator == "+":
            top = available if available < self.max else self.max
            return top - (top - low) % self.operand
        if self.operand < 2 or (self.operator == "^" and low < 2):
            return low
        count, current = 0, low
        while current <= available and current <= self.max:
            count = current
            current = current * self.operand if self.operator == "*" else current**self.operand
        return count


@dataclass(frozen=True, slots=True)
class Resource:
    """One resource request. ``exclusive`` is None when unspecified; ``with_`` holds the children."""

    type: str
    count: Count
    exclusive: bool | None = None
    with_: tuple[Resource, ...] = ()
    label: str | None = None
    unit: str | None = None
    id: str | None = None


@dataclass(frozen=True, slots=True)
class Task:
    """One task entry. Fluxion parses tasks but the matcher ignores them. Values are kept as strings."""

    command: tuple[str, ...]
    slot: str
    count: Mapping[str, str] = field(default_factory=_empty)
    distribution: str | None = None
    attributes: Mapping[str, str] = field(default_factory=_empty)


@dataclass(frozen=True, slots=True)
class MatchAll:
    """The empty constraint ``{}``: every vertex matches."""

    def matches(self, vertex_name: str, properties: Mapping[str, str], rank: int) -> bool:
        return True


@dataclass(frozen=True, slots=True)
class PropertyConstraint:
    """``properties: [a, ^b]``: the vertex has every property, and none of the ``^``-prefixed ones."""

    values: tuple[str, ...]

    def matches(self, vertex_name: str, properties: Mapping[str, str], rank: int) -> bool:
        for value in self.values:
            if value[:1] == "^":
                if value[1:] in properties:
                    return False
            elif value not in properties:
                return False
        return True


@dataclass(frozen=True, slots=True)
class HostRange:
    """``prefix[lo-hi]suffix`` of a hostlist; ``width`` > 0 when the numbers are zero-padded to that width."""

    prefix: str
    low: int
    high: int
    width: int
    suffix: str

    def contains(self, name: str) -> bool:
        end = len(name) - len(self.suffix)
        if end <= len(self.prefix) or not name.startswith(self.prefix) or not name.endswith(self.suffix):
            return False
        digits = name[len(self.prefix) : end]
        if not (digits.isascii() and digits.isdigit()) or not self.low <= int(digits) <= self.high:
            return False
        if self.width:
            return len(digits) == self.width
        return digits == "0" or digits[0] != "0"


@dataclass(frozen=True, slots=True)
class HostlistConstraint:
    """``hostlist: ["node[1-4]", "login0"]``: the vertex's name is in the list."""

    hosts: frozenset[str]
    ranges: tuple[HostRange, ...]

    def matches(self, vertex_name: str, properties: Mapping[str, str], rank: int) -> bool:
        return vertex_name in self.hosts or any(r.contains(vertex_name) for r in self.ranges)


@dataclass(frozen=True, slots=True)
class RankConstraint:
    """``ranks: ["0-3", 7]``: the vertex's broker rank is in the idset."""

    ranges: tuple[tuple[int, int], ...]

    def matches(self, vertex_name: str, properties: Mapping[str, str], rank: int) -> bool:
        return any(low <= rank <= high for low, high in self.ranges)


@dataclass(frozen=True, slots=True)
class AndConstraint:
    """``and: [...]``: every operand matches (an empty list matches)."""

    operands: tuple[Constraint, ...]

    def matches(self, vertex_name: str, properties: Mapping[str, str], rank: int) -> bool:
        return all(c.matches(vertex_name, properties, rank) for c in self.operands)


@dataclass(frozen=True, slots=True)
class OrConstraint:
    """``or: [...]``: some operand matches (an empty list does not match)."""

    operands: tuple[Constraint, ...]

    def matches(self, vertex_name: str, properties: Mapping[str, str], rank: int) -> bool:
        return any(c.matches(vertex_name, properties, rank) for c in self.operands)


@dataclass(frozen=True, slots=True)
class NotConstraint:
    """``not: [...]``: not all operands match (Fluxion negates their conjunction)."""

    operands: tuple[Constraint, ...]

    def matches(self, vertex_name: str, properties: Mapping[str, str], rank: int) -> bool:
        return not all(c.matches(vertex_name, properties, rank) for c in self.operands)


Constraint: TypeAlias = (
    MatchAll | PropertyConstraint | HostlistConstraint | RankConstraint | AndConstraint | OrConstraint | NotConstraint
)
"""An RFC 31 constraint tree. Fluxion tests it only on vertices of type ``node`` and ``storage_node``."""


@dataclass(frozen=True, slots=True)
class Jobspec:
    """A validated jobspec.

    ``duration`` is in seconds, 0 when unset (the whole graph horizon); ``queue`` and ``cwd`` are "" when
    unset; ``constraints`` is None when absent; ``user`` is ``attributes.user`` as loaded; ``system`` holds the
    system attributes other than duration, queue, cwd, environment and constraints, as loaded.
    """

    version: int
    resources: tuple[Resource, ...]
    tasks: tuple[Task, ...]
    duration: float = 0.0
    queue: str = ""
    cwd: str = ""
    environment: Mapping[str, str] = field(default_factory=_empty)
    constraints: Constraint | None = None
    user: Any = None
    system: Mapping[str, Any] = field(default_factory=_empty)
    source: str | None = field(default=None, compare=False)

    def duration_seconds(self, horizon: int) -> int:
        """The duration the matcher plans with, in whole seconds (``jobmeta_t::build``).

        0 gives ``horizon`` (the graph's length in seconds); a fraction is rounded up. Raises
        :class:`JobspecError` when the duration exceeds ``horizon`` and ValueError when ``horizon`` ≤ 0.
        """
        if horizon <= 0:
            raise ValueError(f"the graph horizon must be positive, not {horizon}")
        duration = self.duration
        if duration == 0:
            return horizon
        if not 0 < duration <= horizon:
            raise JobspecError(
                f"duration {duration:g} s does not fit in the graph's horizon of {horizon} s",
                "attributes.system.duration",
                self.source,
            )
        return math.ceil(duration)

    def matches(self, vertex_name: str, properties: Mapping[str, str], rank: int) -> bool:
        """Whether a vertex satisfies the constraints (True when there are none).

        Fluxion asks this only of ``node`` and ``storage_node`` vertices (``by_constraint``); other types pass.
        """
        return self.constraints is None or self.constraints.matches(vertex_name, properties, rank)


# --------------------------------------------------------------------------------------------------------------
# Entry points


def parse_jobspec(
    source: str | os.PathLike[str] | Mapping[str, Any], *, known_types: Collection[str] | None = None
) -> Jobspec:
    """A jobspec from a path (``os.PathLike``), YAML text (``str``) or an already loaded mapping."""
    if isinstance(source, os.PathLike):
        return load_jobspec(source, known_types=known_types)
    if isinstance(source, str):
        return jobspec_from_yaml(source, known_types=known_types)
    return jobspec_from_dict(source, known_types=known_types)


def load_jobspec(path: str | os.PathLike[str], *, known_types: Collection[str] | None = None) -> Jobspec:
    """A jobspec from a YAML (or JSON) file; errors name the file."""
    name = os.fspath(path)
    try:
        text = Path(name).read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise JobspecError(f"cannot read: not UTF-8 text ({exc.reason} at byte {exc.start})", source=name) from None
    except OSError as exc:
        raise JobspecError(f"cannot read: {exc.strerror or exc}", source=name) from None
    return jobspec_from_yaml(text, source=name, known_types=known_types)


def jobspec_from_yaml(text: str, *, source: str | None = None, known_types: Collection[str] | None = None) -> Jobspec:
    """A jobspec from YAML (or JSON) text; ``source`` names it in error messages."""
    return jobspec_from_dict(_load_yaml(text, source), source=source, known_types=known_types)


def jobspec_from_dict(data: Any, *, source: str | None = None, known_types: Collection[str] | None = None) -> Jobspec:
    """A jobspec from a loaded document (mappings, sequences and scalars as ``json``/``yaml`` give them)."""
    try:
        return _Builder(known_types).jobspec(data, source)
    except JobspecError as exc:
        raise exc.with_source(source) from None


# --------------------------------------------------------------------------------------------------------------
# YAML loading


class _PlainScalar:
    """An unquoted scalar inside a ``properties`` list: Fluxion accepts only quoted property strings."""

    __slots__ = ("value",)

    def __init__(self, value: str) -> None:
        self.value = value


_PLAIN_TAG = "!kubeflux/plain"
_STR_TAG = "tag:yaml.org,2002:str"
_Loader = cast(
    "type[yaml.SafeLoader]",
    type("_JobspecLoader", (getattr(yaml, "CSafeLoader", yaml.SafeLoader),), {"yaml_implicit_resolvers": {}}),
)
_Loader.add_implicit_resolver("tag:yaml.org,2002:bool", re.compile(r"^(?:true|false)$"), list("tf"))
_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(
        r"^(?:[-+]?(?:[0-9]+\.[0-9]*|\.[0-9]+)(?:[eE][-+]?[0-9]+)?|[-+]?[0-9]+[eE][-+]?[0-9]+"
        r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$"
    ),
    list("-+0123456789."),
)
_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:int",
    re.compile(r"^[-+]?(?:0|[1-9][0-9]*|0[0-7]+|0x[0-9a-fA-F]+)$"),
    list("-+0123456789"),
)
_Loader.add_implicit_resolver("tag:yaml.org,2002:null", re.compile(r"^(?:~|null|Null|NULL|)$"), ["~", "n", "N", ""])
_Loader.add_constructor(_PLAIN_TAG, lambda loader, node: _PlainScalar(str(node.value)))


def _load_yaml(text: str, source: str | None) -> Any:
    loader = _Loader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        _mark_plain_properties(node)
        return loader.construct_document(node)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        problem = exc.problem or exc.context or "malformed"
        if exc.context and problem.startswith("but "):
            problem = f"{exc.context}, {problem}"
        line, column = (mark.line + 1, mark.column + 1) if mark is not None else (None, None)
        raise JobspecError(f"invalid YAML: {problem}", source=source, line=line, column=column) from None
    except yaml.YAMLError as exc:
        raise JobspecError(f"invalid YAML: {exc}", source=source) from None
    finally:
        loader.dispose()


def _mapping_value(node: yaml.Node | None, key: str) -> yaml.Node | None:
    if isinstance(node, yaml.MappingNode):
        for key_node, value_node in node.value:
            if isinstance(key_node, yaml.ScalarNode) and key_node.value == key:
                return cast(yaml.Node, value_node)
    return None


def _mark_plain_properties(root: yaml.Node) -> None:
    """Retag unquoted strings under ``properties`` in ``attributes.system.constraints`` (yaml-cpp tag ``?``)."""
    pending = [_mapping_value(_mapping_value(_mapping_value(root, "attributes"), "system"), "constraints")]
    seen: set[int] = set()
    while pending:
        node = pending.pop()
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, yaml.SequenceNode):
            pending.extend(node.value)
        elif isinstance(node, yaml.MappingNode):
            for key_node, value_node in node.value:
                if key_node.value == "properties" and isinstance(value_node, yaml.SequenceNode):
                    for item in value_node.value:
                        if isinstance(item, yaml.ScalarNode) and not item.style and item.tag == _STR_TAG:
                            item.tag = _PLAIN_TAG
                else:
                    pending.append(value_node)


# --------------------------------------------------------------------------------------------------------------
# Scalar conversions with yaml-cpp's ``as<T>()`` semantics


_UNSIGNED_RE = re.compile(r"\+?(?:0[xX][0-9a-fA-F]+|0[0-7]*|[1-9][0-9]*)\Z")
_SIGNED_RE = re.compile(r"[-+]?(?:0[xX][0-9a-fA-F]+|0[0-7]*|[1-9][0-9]*)\Z")
_DOUBLE_RE = re.compile(r"[-+]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][-+]?[0-9]+)?\Z")
_SPECIAL_DOUBLES = {
    **dict.fromkeys((".inf", ".Inf", ".INF", "+.inf", "+.Inf", "+.INF"), math.inf),
    **dict.fromkeys(("-.inf", "-.Inf", "-.INF"), -math.inf),
    **dict.fromkeys((".nan", ".NaN", ".NAN"), math.nan),
}


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"the boolean {'true' if value else 'false'}"
    if isinstance(value, int | float):
        return f"the number {value}"
    if isinstance(value, str):
        return f"the string {value!r}"
    if isinstance(value, _PlainScalar):
        return f"the unquoted string {value.value!r}"
    if isinstance(value, Mapping):
        return "a mapping"
    if isinstance(value, list | tuple):
        return "a sequence"
    return f"a {type(value).__name__}"


def _is_map(value: Any) -> bool:
    return isinstance(value, dict | Mapping)


def _is_seq(value: Any) -> bool:
    return isinstance(value, list | tuple)


def _is_scalar(value: Any) -> bool:
    return isinstance(value, str | int | float)


def _as_str(value: Any, path: str) -> str:
    """``as<string>``: any scalar's text; null reads as "null"."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    if value is None:
        return "null"
    if isinstance(value, _PlainScalar):
        return value.value
    raise JobspecError(f"must be a string, not {_kind(value)}", path)


def _c_integer(text: str) -> int:
    sign = -1 if text[0] == "-" else 1
    body = text.lstrip("+-")
    if body[:2] in ("0x", "0X"):
        return sign * int(body[2:], 16)
    if len(body) > 1 and body[0] == "0":
        return sign * int(body, 8)
    return sign * int(body)


def _integer(value: Any, text: re.Pattern[str], what: str, path: str) -> int:
    """``value`` as an integer: an int, or decimal, octal or hex text that ``text`` accepts (a float or boolean is
    not); else "must be ``what``"."""
    if type(value) is int:
        return value
    if isinstance(value, str) and text.match(value):
        return _c_integer(value)
    raise JobspecError(f"must be {what}, not {_kind(value)}", path)


def _as_unsigned(value: Any, path: str) -> int:
    """``as<unsigned>``: 0..UINT_MAX."""
    number = _integer(value, _UNSIGNED_RE, "an unsigned integer", path)
    if number < 0:
        raise JobspecError(f"must be an unsigned integer, not {number}", path)
    if number > UINT_MAX:
        raise JobspecError(f"must be at most {UINT_MAX}, not {number}", path)
    return number


def _as_int(value: Any, path: str) -> int:
    """``as<int>``: a 32-bit signed integer."""
    number = _integer(value, _SIGNED_RE, "an integer", path)
    if not _INT_MIN <= number <= _INT_MAX:
        raise JobspecError(f"must be an integer from {_INT_MIN} to {_INT_MAX}, not {number}", path)
    return number


def _as_double(value: Any, path: str) -> float:
    """``as<double>``: a number, numeric text, or YAML's ``.inf``/``.nan`` spellings."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        try:
            return float(value)
        except OverflowError:
            raise JobspecError(f"must be a number of seconds, not {value}", path) from None
    if isinstance(value, str):
        if value in _SPECIAL_DOUBLES:
            return _SPECIAL_DOUBLES[value]
        if _DOUBLE_RE.match(value):
            return float(value)
    raise JobspecError(f"must be a number, not {_kind(value)}", path)


# --------------------------------------------------------------------------------------------------------------
# Validation, in Fluxion's order (so that of two errors, the one Fluxion reports is reported)


class _Builder:
    __slots__ = ("budget", "known_types")

    def __init__(self, known_types: Collection[str] | None) -> None:
        self.known_types = known_types
        self.budget = MAX_RESOURCES

    def jobspec(self, doc: Any, source: str | None) -> Jobspec:
        if not _is_map(doc):
            raise JobspecError(f"a jobspec must be a mapping, not {_kind(doc)}")
        for key in _TOP_KEYS:
            if key not in doc:
                raise JobspecError(f"missing top-level key {key!r} (a jobspec has {', '.join(_TOP_KEYS)})")
        if len(doc) != 4:
            extra = next(k for k in doc if k not in _TOP_KEYS)
            raise JobspecError(f"unknown top-level key {extra!r} (a jobspec has exactly {', '.join(_TOP_KEYS)})")
        if not _is_scalar(doc["version"]):
            raise JobspecError(f"must be an unsigned integer, not {_kind(doc['version'])}", "version")
        version = _as_unsigned(doc["version"], "version")
        if not 1 <= version <= 9999:
            raise JobspecError(f"only versions 1 to 9999 are supported, not {version}", "version")
        attributes = doc["attributes"]
        system: dict[str, Any] = {}
        user = None
        if attributes is not None:
            user, system = self.attributes(attributes)
        resources = self.resources(doc["resources"], "resources", 0)
        tasks = self.tasks(doc["tasks"])
        duration = system.pop("duration", 0.0)
        return Jobspec(
            version=version,
            resources=resources,
            tasks=tasks,
            duration=duration,
            queue=system.pop("queue", ""),
            cwd=system.pop("cwd", ""),
            environment=MappingProxyType(system.pop("environment", {})),
            constraints=system.pop("constraints", None),
            user=user,
            system=MappingProxyType(system.pop("optional", {})),
            source=source,
        )

    # resources ------------------------------------------------------------------------------------------------

    def resources(self, node: Any, path: str, depth: int) -> tuple[Resource, ...]:
        if not _is_seq(node):
            raise JobspecError(f"must be a sequence of resources, not {_kind(node)}", path)
        if depth >= MAX_DEPTH:
            raise JobspecError(f"resources are nested more than {MAX_DEPTH} levels deep", path)
        self.budget -= len(node)
        if self.budget < 0:
            raise JobspecError(f"a jobspec may hold at most {MAX_RESOURCES} resource entries", path)
        return tuple(self.resource(item, f"{path}[{i}]", depth) for i, item in enumerate(node))

    def resource(self, node: Any, path: str, depth: int) -> Resource:
        rtype = _first_field(node, "resource", "type", path)
        if not _is_scalar(rtype):
            raise JobspecError(f"must be a scalar, not {_kind(rtype)}", f"{path}.type")
        rtype = _as_str(rtype, f"{path}.type")
        known = self.known_types
        if known is not None and rtype not in BUILTIN_TYPES and rtype not in known:
            raise JobspecError(f"{rtype!r} is not a resource type known to the resource graph", f"{path}.type")
        if "count" not in node:
            raise JobspecError("a resource needs a count", path)
        count = _count(node["count"], f"{path}.count")
        entries = 2
        unit = label = rid = None
        exclusive: bool | None = None
        children: tuple[Resource, ...] = ()
        if "unit" in node:
            unit = _scalar_str(node["unit"], f"{path}.unit")
            entries += 1
        if "exclusive" in node:
            value = node["exclusive"]
            if not _is_scalar(value):
                raise JobspecError(f"must be true or false, not {_kind(value)}", f"{path}.exclusive")
            if value is True or value == "true":
                exclusive = True
            elif value is False or value == "false":
                exclusive = False
            else:
                raise JobspecError(f"must be true or false, not {_kind(value)}", f"{path}.exclusive")
            entries += 1
        if "with" in node:
            children = self.resources(node["with"], f"{path}.with", depth + 1)
            entries += 1
        if "label" in node:
            label = _scalar_str(node["label"], f"{path}.label")
            entries += 1
        elif rtype == "slot":
            raise JobspecError("a slot needs a label", path)
        if "id" in node:
            rid = _scalar_str(node["id"], f"{path}.id")
            entries += 1
        if entries != len(node):
            extra = next(k for k in node if k not in _RESOURCE_KEYS)
            raise JobspecError(f"unknown key {extra!r} (a resource has {', '.join(_RESOURCE_KEYS)})", f"{path}.{extra}")
        return Resource(rtype, count, exclusive, children, label, unit, rid)

    # tasks ----------------------------------------------------------------------------------------------------

    def tasks(self, node: Any) -> tuple[Task, ...]:
        if not _is_seq(node):
            raise JobspecError(f"must be a sequence of tasks, not {_kind(node)}", "tasks")
        return tuple(_task(item, f"tasks[{i}]") for i, item in enumerate(node))

    # attributes -----------------------------------------------------------------------------------------------

    def attributes(self, node: Any) -> tuple[Any, dict[str, Any]]:
        """``(user, system)``; ``system`` holds the known system keys parsed plus ``optional`` for the others."""
        _mapping(node, "attributes")
        user = None
        system: dict[str, Any] = {}
        for key, value in node.items():
            name = _as_str(key, "attributes")
            if name == "user":
                user = value
            elif name == "system":
                system = _system(value)
            else:
                raise JobspecError(f"unknown key {name!r} (attributes has only user and system)", f"attributes.{name}")
        return user, system


def _scalar_str(value: Any, path: str) -> str:
    if not _is_scalar(value):
        raise JobspecError(f"must be a scalar, not {_kind(value)}", path)
    return _as_str(value, path)


def _count(node: Any, path: str) -> Count:
    if not _is_map(node):
        if _is_scalar(node):
            number = _as_unsigned(node, path)
            return Count(number, number)
        raise JobspecError(f"must be an unsigned integer or a mapping, not {_kind(node)}", path)
    if "min" not in node:
        raise JobspecError("a count mapping needs min", path)
    if not _is_scalar(node["min"]):
        raise JobspecError(f"must be a scalar, not {_kind(node['min'])}", f"{path}.min")
    given = [key for key in ("max", "operator", "operand") if key in node]
    high, operator, operand = UINT_MAX, "+", 1
    if given:
        if len(given) != 3:
            missing = [key for key in ("max", "operator", "operand") if key not in node]
            raise JobspecError(f"max, operator and operand go together: {', '.join(missing)} missing", path)
        for key in given:
            if not _is_scalar(node[key]):
                raise JobspecError(f"must be a scalar, not {_kind(node[key])}", f"{path}.{key}")
        high = _as_unsigned(node["max"], f"{path}.max")
        operator = _as_str(node["operator"], f"{path}.operator")
        if len(operator) != 1:
            raise JobspecError(f"must be one of '+', '*', '^', not {operator!r}", f"{path}.operator")
        operand = _as_int(node["operand"], f"{path}.operand")
    low = _as_unsigned(node["min"], f"{path}.min")
    if low < 1:
        raise JobspecError("min must be greater than zero", f"{path}.min")
    if given and high < low:
        raise JobspecError(f"max ({high}) must be greater than or equal to min ({low})", f"{path}.max")
    if operator == "+":
        if operand < 1:
            raise JobspecError(f"operand must be at least 1 for '+', not {operand}", f"{path}.operand")
    elif operator in ("*", "^"):
        if operand < 2:
            raise JobspecError(f"operand must be at least 2 for {operator!r}, not {operand}", f"{path}.operand")
        if operator == "^" and low < 2:
            raise JobspecError(f"min must be at least 2 for '^', not {low}", f"{path}.min")
    else:
        raise JobspecError(f"must be one of '+', '*', '^', not {operator!r}", f"{path}.operator")
    return Count(low, high, operator, operand)


def _mapping(value: Any, path: str) -> Any:
    """``value``; JobspecError when it is no mapping."""
    if not _is_map(value):
        raise JobspecError(f"must be a mapping, not {_kind(value)}", path)
    return value


def _first_field(node: Any, what: str, key: str, path: str) -> Any:
    """``node[key]``, the first field read of a ``what`` (a resource, a task) at ``path``; JobspecError when
    ``node`` is no mapping or has no ``key``."""
    if not _is_map(node):
        raise JobspecError(f"a {what} must be a mapping, not {_kind(node)}", path)
    if key not in node:
        raise JobspecError(f"a {what} needs a {key}", path)
    return node[key]


def _string_map(node: Any, path: str) -> dict[str, str]:
    return {_as_str(k, path): _as_str(v, f"{path}.{k}") for k, v in node.items()}


def _task(node: Any, path: str) -> Task:
    command = _first_field(node, "task", "command", path)
    if not _is_seq(command):
        raise JobspecError(f"must be a sequence, not {_kind(command)}", f"{path}.command")
    words = tuple(_as_str(word, f"{path}.command[{i}]") for i, word in enumerate(command))
    if "slot" not in node:
        raise JobspecError("a task needs a slot", path)
    slot = _scalar_str(node["slot"], f"{path}.slot")
    count: Mapping[str, str] = _EMPTY
    if "count" in node:
        value = _mapping(node["count"], f"{path}.count")
        if len(value) != 1:
            raise JobspecError(f"must have exactly one entry (per_slot or total), not {len(value)}", f"{path}.count")
        count = MappingProxyType(_string_map(value, f"{path}.count"))
    distribution = None
    if "distribution" in node:
        distribution = _scalar_str(node["distribution"], f"{path}.distribution")
    attributes: Mapping[str, str] = _EMPTY
    if "attributes" in node:
        value = _mapping(node["attributes"], f"{path}.attributes")
        attributes = MappingProxyType(_string_map(value, f"{path}.attributes"))
    if not 3 <= len(node) <= 5:
        raise JobspecError(
            f"a task has 3 to 5 entries (command, slot, and some of count, distribution, attributes), not {len(node)}",
            path,
        )
    return Task(words, slot, count, distribution, attributes)


def _system(node: Any) -> dict[str, Any]:
    """``attributes.system``. Like Fluxion, a scalar or null ``system`` (or ``environment``) is ignored."""
    result: dict[str, Any] = {}
    if _is_seq(node):
        raise JobspecError(f"must be a mapping, not {_kind(node)}", "attributes.system")
    if not _is_map(node):
        return result
    optional: dict[str, Any] = {}
    for key, value in node.items():
        name = _as_str(key, "attributes.system")
        path = f"attributes.system.{name}"
        if name == "duration":
            duration = _as_double(value, path)
            if not duration >= 0 or duration == math.inf:
                raise JobspecError(f"must be a finite number of seconds ≥ 0, not {duration}", path)
            result["duration"] = duration
        elif name in ("queue", "cwd"):
            result[name] = _as_str(value, path)
        elif name == "environment":
            if _is_seq(value):
                raise JobspecError(f"must be a mapping, not {_kind(value)}", path)
            result[name] = _string_map(value, path) if _is_map(value) else {}
        elif name == "constraints":
            result[name] = _constraint(value, path, 0)
        else:
            optional[name] = value
    result["optional"] = optional
    return result


# --------------------------------------------------------------------------------------------------------------
# RFC 31 constraints


def _constraint(node: Any, path: str, depth: int) -> Constraint:
    if not _is_map(node):
        raise JobspecError(f"a constraint must be a mapping, not {_kind(node)}", path)
    if len(node) > 1:
        raise JobspecError(f"a constraint has at most one operator, not {len(node)}", path)
    if not node:
        return MatchAll()
    if depth >= MAX_DEPTH:
        raise JobspecError(f"constraints are nested more than {MAX_DEPTH} levels deep", path)
    ((key, operands),) = node.items()
    operator = _as_str(key, path)
    path = f"{path}.{operator}"
    if not _is_seq(operands):
        raise JobspecError(f"the operands of {operator!r} must be a sequence, not {_kind(operands)}", path)
    if operator == "properties":
        return PropertyConstraint(tuple(_property(value, f"{path}[{i}]") for i, value in enumerate(operands)))
    if operator == "hostlist":
        hosts: set[str] = set()
        ranges: list[HostRange] = []
        for i, value in enumerate(operands):
            _hostlist(_as_str(value, f"{path}[{i}]"), f"{path}[{i}]", hosts, ranges)
        return HostlistConstraint(frozenset(hosts), tuple(ranges))
    if operator == "ranks":
        idset: list[tuple[int, int]] = []
        for i, value in enumerate(operands):
            idset.extend(_idset(_as_str(value, f"{path}[{i}]"), f"{path}[{i}]"))
        return RankConstraint(tuple(idset))
    if operator in ("and", "or", "not"):
        children = tuple(_constraint(value, f"{path}[{i}]", depth + 1) for i, value in enumerate(operands))
        if operator == "and":
            return AndConstraint(children)
        return OrConstraint(children) if operator == "or" else NotConstraint(children)
    raise JobspecError(f"unknown constraint operator {operator!r} (properties, hostlist, ranks, and, or, not)", path)


def _property(value: Any, path: str) -> str:
    if not isinstance(value, str):
        raise JobspecError(f"a property must be a quoted string, not {_kind(value)}", path)
    name = value[1:] if value[:1] == "^" else value
    bad = _BAD_PROPERTY_CHARS.intersection(name)
    if bad:
        raise JobspecError(f"invalid property {value!r}: it may not contain {''.join(sorted(bad))!r}", path)
    return value


_RANGE_RE = re.compile(r"([0-9]+)(?:-([0-9]+))?\Z")


def _ranges(text: str) -> list[tuple[str, str]] | None:
    """``"1-3,5"`` as ``[("1", "3"), ("5", "5")]``, or None when malformed or a range runs backwards."""
    result = []
    for part in text.split(","):
        found = _RANGE_RE.match(part)
        if found is None:
            return None
        low, high = found.group(1), found.group(2) or found.group(1)
        if int(high) < int(low):
            return None
        result.append((low, high))
    return result


def _idset(text: str, path: str) -> list[tuple[int, int]]:
    """An RFC 22 idset (``"0-3,7"``, optionally in brackets; "" is empty)."""
    body = text[1:-1] if text[:1] == "[" and text[-1:] == "]" else text
    if not body:
        return []
    ranges = _ranges(body)
    if ranges is None:
        raise JobspecError(f"invalid idset {text!r}", path)
    return [(int(low), int(high)) for low, high in ranges]


def parse_hostlist(text: str) -> HostlistConstraint:
    """An RFC 29 hostlist (``"node[1-4,7],login0"``) as a name test; JobspecError if it is malformed."""
    hosts: set[str] = set()
    ranges: list[HostRange] = []
    _hostlist(text, "hostlist", hosts, ranges)
    return HostlistConstraint(frozenset(hosts), tuple(ranges))


def _hostlist(text: str, path: str, hosts: set[str], ranges: list[HostRange]) -> None:
    """An RFC 29 hostlist (``"node[1-4,7],login0"``), added to ``hosts`` and ``ranges``."""
    terms: list[str] = []
    start = depth = 0
    for i, char in enumerate(text):
        if char == "[":
            depth += 1
        elif char == "]":
            depth -= 1
        elif char == "," and depth == 0:
            terms.append(text[start:i])
            start = i + 1
        if depth not in (0, 1):
            raise JobspecError(f"invalid hostlist {text!r}", path)
    if depth:
        raise JobspecError(f"invalid hostlist {text!r}", path)
    terms.append(text[start:])
    for term in terms:
        if "[" not in term:
            if "]" in term:
                raise JobspecError(f"invalid hostlist {text!r}", path)
            if term:
                hosts.add(term)
            continue
        prefix, _, rest = term.partition("[")
        inner, _, suffix = rest.partition("]")
        parsed = _ranges(inner)
        if parsed is None or "[" in suffix or "]" in suffix:
            raise JobspecError(f"invalid hostlist {text!r}", path)
        for low, high in parsed:
            width = len(low) if len(low) > 1 and low[0] == "0" else 0
            ranges.append(HostRange(prefix, int(low), int(high), width, suffix))
