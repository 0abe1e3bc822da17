"""Label and field selectors as the API server parses them (``k8s.io/apimachinery/pkg/labels``, ``.../fields``).

Label selectors take every operator of the string form: ``key``, ``!key``, ``key=v``, ``key==v``, ``key!=v``,
``key in (a,b)``, ``key notin (a,b)``, ``key>3``, ``key<3``; requirements are ANDed. Field selectors take ``=``,
``==`` and ``!=`` on the fields a resource's strategy names (others are a 400 naming the allowed ones). A selector
that does not parse raises ``ApiError`` 400, never a server error.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from kubeflux.sim.apiserver.errors import ApiError, bad_request

__all__ = [
    "FieldSelector",
    "LabelSelector",
    "parse_field_selector",
    "parse_label_selector",
    "valid_label_key",
    "valid_label_value",
]

_KEY = re.compile(
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$"
)
_VALUE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?$")
_TOKEN = re.compile(r"\s*(==|!=|=|!|\(|\)|,|<|>|[^\s=!(),<>]+)")


@dataclass(frozen=True, slots=True)
class Requirement:
    key: str
    operator: str
    """``exists``, ``!``, ``=``, ``!=``, ``in``, ``notin``, ``gt``, ``lt``."""
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        op = self.operator
        present = self.key in labels
        if op == "exists":
            return present
        if op == "!":
            return not present
        value = labels.get(self.key)
        if op in ("=", "in"):
            return present and value in self.values
        if op in ("!=", "notin"):
            return not present or value not in self.values
        if not present:
            return False
        try:
            number = int(value or "")
        except ValueError:
            return False
        bound = int(self.values[0])
        return number > bound if op == "gt" else number < bound


@dataclass(frozen=True, slots=True)
class LabelSelector:
    requirements: tuple[Requirement, ...] = ()

    def matches(self, labels: Mapping[str, str] | None) -> bool:
        labels = labels or {}
        return all(r.matches(labels) for r in self.requirements)

    @property
    def empty(self) -> bool:
        return not self.requirements


def _fail(text: str, problem: str) -> ApiError:
    return bad_request(f"unable to parse requirement: {problem} (labelSelector {text!r})")


def valid_label_key(key: str) -> bool:
    """A qualified name: an optional DNS subdomain prefix and ``/``, then at most 63 name characters."""
    return len(key.rsplit("/", 1)[-1]) <= 63 and bool(_KEY.match(key))


def valid_label_value(value: str) -> bool:
    return len(value) <= 63 and bool(_VALUE.match(value))


def _check_key(text: str, key: str) -> str:
    if not valid_label_key(key):
        raise _fail(text, f"invalid label key {key!r}: must be a qualified name (optional DNS prefix and '/')")
    return key


def _check_value(text: str, value: str) -> str:
    if not valid_label_value(value):
        raise _fail(text, f"invalid label value {value!r}: at most 63 alphanumerics, '-', '_' or '.'")
    return value


def parse_label_selector(text: str) -> LabelSelector:
    """The selector of ``?labelSelector=``; raises a 400 ``ApiError`` naming the bad part."""
    tokens = [t for t in _TOKEN.findall(text)]
    if "".join(tokens).replace(" ", "") != re.sub(r"\s+", "", text):
        raise _fail(text, "unexpected characters")
    position = 0
    requirements: list[Requirement] = []

    def peek() -> str:
        return tokens[position] if position < len(tokens) else ""

    while position < len(tokens):
        token = tokens[position]
        if token == "!":
            position += 1
            requirements.append(Requirement(_check_key(text, peek()), "!"))
            position += 1
        else:
            key = _check_key(text, token)
            position += 1
            op = peek()
            if op in ("", ","):
                requirements.append(Requirement(key, "exists"))
            elif op in ("=", "==", "!="):
                position += 1
                value = peek() if peek() not in (",", "") else ""
                if value:
                    position += 1
                requirements.append(Requirement(key, "!=" if op == "!=" else "=", (_check_value(text, value),)))
            elif op in ("in", "notin"):
                position += 1
                if peek() != "(":
                    raise _fail(text, f"'(' expected after {op!r}")
                position += 1
                values: list[str] = []
                current: str | None = None
                while peek() != ")":
                    item = peek()
                    if item == "":
                        raise _fail(text, "')' expected")
                    if item == ",":
                        values.append(current or "")
                        current = None
                    elif current is not None:
                        raise _fail(text, f"',' expected between values, got {item!r}")
                    else:
                        current = _check_value(text, item)
                    position += 1
                if current is None and not values:
                    raise _fail(text, f"for {op!r}, the set of values can not be empty")
                values.append(current or "")
                position += 1
                requirements.append(Requirement(key, op, tuple(values)))
            elif op in ("<", ">"):
                position += 1
                bound = peek()
                if not bound.lstrip("-").isdigit():
                    raise _fail(text, f"an integer is expected after {op!r}, got {bound!r}")
                position += 1
                requirements.append(Requirement(key, "gt" if op == ">" else "lt", (bound,)))
            else:
                raise _fail(text, f"unexpected {op!r} after key {key!r}")
        if position < len(tokens):
            if tokens[position] != ",":
                raise _fail(text, f"',' expected, got {tokens[position]!r}")
            position += 1
            if position == len(tokens):
                raise _fail(text, "a requirement is expected after ','")
    return LabelSelector(tuple(requirements))


@dataclass(frozen=True, slots=True)
class FieldRequirement:
    field: str
    value: str
    equal: bool


FieldGetter = Callable[[dict[str, Any], str], str]


@dataclass(frozen=True, slots=True)
class FieldSelector:
    requirements: tuple[FieldRequirement, ...] = ()

    def matches(self, obj: dict[str, Any], get: FieldGetter) -> bool:
        return all((get(obj, r.field) == r.value) == r.equal for r in self.requirements)

    @property
    def empty(self) -> bool:
        return not self.requirements


def _split_unescaped(text: str, separator: str) -> list[str]:
    parts, current, escaped = [], [], False
    for char in text:
        if escaped:
            current.append(char)
            escaped = False
        elif char == "\\":
            current.append(char)
            escaped = True
        elif char == separator:
            parts.append("".join(current))
            current = []
        else:
            current.append(char)
    parts.append("".join(current))
    return parts


def _unescape(text: str) -> str:
    return re.sub(r"\\(.)", r"\1", text)


def parse_field_selector(text: str, allowed: frozenset[str], resource: str) -> FieldSelector:
    """The selector of ``?fieldSelector=``; a field the resource does not index is a 400 naming the allowed ones."""
    requirements: list[FieldRequirement] = []
    for part in _split_unescaped(text, ","):
        if not part.strip():
            if text.strip():
                raise bad_request(f"invalid selector: {text!r}; empty requirement")
            continue
        match = re.match(r"^([^=!]+)(==|!=|=)(.*)$", part)
        if not match:
            raise bad_request(f"invalid selector: {text!r}; can't understand {part!r}")
        field_name, op, value = match.group(1).strip(), match.group(2), _unescape(match.group(3))
        if field_name not in allowed:
            known = ", ".join(f'"{name}"' for name in sorted(allowed))
            raise bad_request(f'field label not supported: "{field_name}" on {resource} (supported: {known})')
        requirements.append(FieldRequirement(field_name, value, op != "!="))
    return FieldSelector(tuple(requirements))
