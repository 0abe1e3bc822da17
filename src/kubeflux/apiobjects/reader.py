"""Reading one Kubernetes manifest as the API server would: :class:`ManifestReader` gives typed access to its fields
and turns every type mismatch into a :class:`ManifestError` naming the object and the field path; RFC 3339 times
as ``metav1.Time`` writes them. The readers of each kind (:mod:`.manifests`, :mod:`.podterms`, :mod:`.disruption`,
Kueue's) are built on it."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any, TypeGuard

from kubeflux.apiobjects.quantity import QuantityError, canonical_value
from kubeflux.apiobjects.rules import dns_label_problem, dns_subdomain_problem, int_decode_error
from kubeflux.scheduler.objects import ResourceList
from kubeflux.scheduler.units import echo
from kubeflux.scheduler.validation import InvalidObject, quantity_problem, seconds_problem

__all__ = [
    "ManifestError",
    "ManifestReader",
    "format_timestamp",
    "is_mapping",
    "object_reader",
    "parse_timestamp",
    "resource_list_of",
]


class ManifestError(InvalidObject):
    """A manifest Kubernetes would reject (or that kubeflux cannot read); names the object and the field path."""


def is_mapping(value: object) -> TypeGuard[Mapping[str, Any]]:
    """``isinstance(value, Mapping)``, a decoded manifest's dicts first: the test of an abstract class goes through
    its ``__instancecheck__``, ~60 times per pod read (half of ``pod_from_manifest``'s time, which serve spends on
    every pod event: issue 28)."""
    return type(value) is dict or isinstance(value, Mapping)


_PATHS: dict[str, tuple[str, ...]] = {}
_MAX_PATHS = 4096
"""Field paths kept split (:func:`_parts`): the readers' own, a few hundred; paths made per item (``spec.
containers[3].ports``) past this many are split each time, so that no input grows the table."""


def _parts(path: str) -> tuple[str, ...]:
    """``path`` split at its dots, kept: a pod event reads ~40 fields, each split again a read (with its parts'
    hashes computed again for the lookups), a third of :func:`~kubeflux.apiobjects.manifests.pod_from_manifest`'s
    time, which serve spends on every pod event (issue 28)."""
    parts = _PATHS.get(path)
    if parts is None:
        parts = tuple(path.split("."))
        if len(_PATHS) < _MAX_PATHS:
            _PATHS[path] = parts
    return parts


class ManifestReader:
    """Typed access to one manifest, turning every type mismatch into a :class:`ManifestError`."""

    def __init__(self, kind: str, obj: Any, expected_kinds: tuple[str, ...]) -> None:
        if not is_mapping(obj):
            raise ManifestError(kind, "", f"expected a mapping, got {type(obj).__name__}")
        self.obj = obj
        meta = obj.get("metadata")
        name = meta.get("name") if is_mapping(meta) else None
        namespace = meta.get("namespace") if is_mapping(meta) else None
        self.where = f"{kind} {namespace}/{name}" if namespace else f"{kind} {name}"
        actual = obj.get("kind")
        if actual is not None and actual not in expected_kinds:
            raise ManifestError(self.where, "kind", f"expected {' or '.join(expected_kinds)}, got {actual!r}")

    def fail(self, path: str, problem: str) -> ManifestError:
        return ManifestError(self.where, path, problem)

    def get(self, path: str, default: Any = None) -> Any:
        node: Any = self.obj
        parts = _parts(path)
        for depth, part in enumerate(parts):
            if type(node) is not dict:
                if node is None:
                    return default
                if not is_mapping(node):
                    raise self.fail(".".join(parts[:depth]), f"expected a mapping, got {type(node).__name__}")
            node = node.get(part)
        return default if node is None else node

    def mapping(self, path: str, value: Any = None) -> Mapping[str, Any]:
        value = self.get(path, {}) if value is None else value
        if not is_mapping(value):
            raise self.fail(path, f"expected a mapping, got {type(value).__name__}")
        return value

    def sequence(self, path: str, value: Any = None) -> list[Any]:
        value = self.get(path, []) if value is None else value
        if not isinstance(value, list):
            raise self.fail(path, f"expected a list, got {type(value).__name__}")
        return value

    def entries(self, path: str, value: Any = None) -> list[tuple[str, Mapping[str, Any]]]:
        """Each mapping of the list at ``path`` (or ``value``), with its own path (``spec.taints[0]``)."""
        result = []
        for i, raw in enumerate(self.sequence(path, value)):
            where = f"{path}[{i}]"
            result.append((where, self.mapping(where, raw)))
        return result

    def field(self, path: str, item: Mapping[str, Any], name: str, default: str = "") -> str:
        """The string ``item[name]`` of the entry at ``path``; ``default`` when it is missing or empty. (The field's
        path is made only for the message: a pod's two default tolerations read eight fields, on every event.)"""
        value = item.get(name) or default
        if not isinstance(value, str):
            raise self.fail(f"{path}.{name}", f"expected a string, got {value!r}")
        return value

    def string(self, path: str, value: Any = None, default: str = "") -> str:
        value = self.get(path, default) if value is None else value
        if not isinstance(value, str):
            raise self.fail(path, f"expected a string, got {value!r}")
        return value

    def integer(self, path: str, value: Any = None) -> int | None:
        value = self.get(path) if value is None else value
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.fail(path, f"expected an integer, got {value!r}")
        return value

    def boolean(self, path: str) -> bool:
        value = self.get(path, False)
        if not isinstance(value, bool):
            raise self.fail(path, f"expected true or false, got {value!r}")
        return value

    def string_map(self, path: str) -> dict[str, str]:
        result: dict[str, str] = {}
        for key, value in self.mapping(path).items():
            if not isinstance(key, str) or not isinstance(value, str):
                raise self.fail(f"{path}.{key}", f"expected a string value, got {value!r}")
            result[key] = value
        return result

    def resources(self, path: str, value: Any = None) -> ResourceList:
        return resource_list_of(self, path, self.mapping(path, value))

    def timestamp(self, path: str) -> float | None:
        value = self.get(path)
        if value is None:
            return None
        if isinstance(value, datetime):  # YAML loaders turn unquoted timestamps into datetimes
            seconds = _epoch(value)
        else:
            try:
                seconds = parse_timestamp(self.string(path, value))
            except ValueError as exc:
                raise self.fail(path, f"expected an RFC 3339 time, got {value!r}") from exc
        problem = seconds_problem(seconds, positive=False)
        if problem is not None:
            raise self.fail(path, f"must not be before 1970-01-01T00:00:00Z, got {value!r}")
        return seconds

    def name(self) -> str:
        """``metadata.name``: required, a DNS-1123 subdomain."""
        name = self.string("metadata.name")
        if not name:
            raise self.fail("metadata.name", "required")
        self.dns_name("metadata.name", name)
        return name

    def identity(self, kind: str, default_namespace: str) -> tuple[str, str]:
        """``metadata.name`` (:meth:`name`) and ``metadata.namespace`` (``default_namespace`` when absent; a DNS-1123
        label) of a namespaced object, which messages then name ``Kind namespace/name``."""
        namespace = self.string("metadata.namespace") or default_namespace
        self.where = f"{kind} {namespace}/{self.get('metadata.name')}"
        name = self.name()
        self.dns_name("metadata.namespace", namespace, label=True)
        return name, namespace

    def dns_name(self, path: str, name: str, *, label: bool = False) -> None:
        """Raise as the API server's 422 does when ``name`` is no DNS-1123 subdomain (``label``: label)."""
        problem = dns_label_problem(name) if label else dns_subdomain_problem(name)
        if problem is not None:
            raise self.fail(path, f"{echo(name)}: {problem}")

    def go_integer(self, go_struct: str, path: str, go_type: str = "int32") -> int | None:
        """The integer at ``path`` (None when absent), refused as the API server fails to decode a value beyond
        its Go type, a fraction or a string (:func:`~kubeflux.apiobjects.rules.int_decode_error`)."""
        value = self.get(path)
        message = int_decode_error(go_struct, path, value, go_type)
        if message is not None:
            raise self.fail(path, message)
        return self.integer(path, value)


def object_reader(kind: str, obj: Any) -> ManifestReader:
    """A reader of the manifest ``obj`` of ``kind`` (its errors name ``Kind [namespace/]name`` and the field), for
    the field readers of this module (:func:`read_taints`, :func:`read_tolerations`) and of
    :mod:`~kubeflux.apiobjects.podterms` on other kinds' objects."""
    return ManifestReader(kind, obj, (kind,))


def resource_list_of(reader: ManifestReader, path: str, raw: Mapping[str, Any]) -> ResourceList:
    result: ResourceList = {}
    for name, value in raw.items():
        try:
            amount = canonical_value(str(name), value)
        except QuantityError as exc:
            raise reader.fail(f"{path}.{name}", str(exc)) from exc
        problem = quantity_problem(amount, value)
        if problem is not None:
            raise reader.fail(f"{path}.{name}", problem)
        result[str(name)] = amount
    return result


def parse_timestamp(text: str) -> float:
    """Unix seconds for an RFC 3339 time (``2024-05-01T12:00:00Z``, with optional fraction and offset)."""
    value = datetime.fromisoformat(text.replace("z", "Z"))
    return _epoch(value)


def _epoch(value: datetime) -> float:
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return value.timestamp()


def format_timestamp(seconds: float) -> str:
    """RFC 3339 in UTC as Kubernetes writes ``metav1.Time`` (microseconds only when there are some)."""
    value = datetime.fromtimestamp(seconds, tz=UTC)
    if value.microsecond:
        return value.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    return value.strftime("%Y-%m-%dT%H:%M:%SZ")
