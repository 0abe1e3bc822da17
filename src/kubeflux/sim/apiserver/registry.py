"""What the API server serves: one :class:`ResourceType` per resource, each with a small :class:`Strategy`.

As in k8s.io/apiserver's generic registry, the store is the same for every resource; a strategy says only what
differs: defaults on create, validation (a list of field causes, answered as 422 ``Invalid``), what an update may
change, what the status subresource keeps, how long a graceful delete waits, which fields a field selector may
name and the default garbage-collection policy. Adding a resource is a strategy and one line in
:func:`kubeflux.sim.apiserver.resources.default_registry`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from kubeflux.apiobjects.rules import dns_label_problem, dns_subdomain_problem
from kubeflux.scheduler.units import echo
from kubeflux.sim.apiserver.errors import Cause

__all__ = [
    "Registry",
    "ResourceType",
    "Strategy",
    "dns_label_causes",
    "dns_subdomain_causes",
    "field_path",
    "fill_zeros",
    "list_of_objects_causes",
    "objects_causes",
    "path_segment_causes",
    "required",
]

Object = dict[str, Any]


def dns_subdomain_causes(name: str, path: str = "metadata.name") -> list[Cause]:
    """One cause when ``name`` is no DNS-1123 subdomain (:mod:`kubeflux.apiobjects.rules`, whose words the
    manifest readers use too)."""
    problem = dns_subdomain_problem(name)
    return [] if problem is None else [Cause(path, f"Invalid value: {echo(name)}: {problem}")]


def dns_label_causes(name: str, path: str = "metadata.name") -> list[Cause]:
    """One cause when ``name`` is no DNS-1123 label."""
    problem = dns_label_problem(name)
    return [] if problem is None else [Cause(path, f"Invalid value: {echo(name)}: {problem}")]


def path_segment_causes(name: str, path: str = "metadata.name") -> list[Cause]:
    if name in (".", "..") or "/" in name or "%" in name:
        return [Cause(path, f"Invalid value: {name!r}: may not contain '/' or '%' or be '.' or '..'")]
    return []


def required(path: str) -> Cause:
    return Cause(path, "Required value", "FieldValueRequired")


def list_of_objects_causes(parent: Object, prefix: str, fields: tuple[str, ...]) -> list[Cause]:
    """Each of ``fields`` of ``parent``, when present, is a list of objects (what readers of it iterate)."""
    causes = []
    for name in fields:
        value = parent.get(name)
        if value is not None and (not isinstance(value, list) or not all(isinstance(v, dict) for v in value)):
            causes.append(Cause(f"{prefix}{name}", "Invalid value: must be a list of objects"))
    return causes


def objects_causes(parent: Object, prefix: str, fields: tuple[str, ...]) -> list[Cause]:
    """Each of ``fields`` of ``parent``, when present, is an object."""
    return [
        Cause(f"{prefix}{name}", "Invalid value: must be an object")
        for name in fields
        if parent.get(name) is not None and not isinstance(parent.get(name), dict)
    ]


def fill_zeros(obj: Object, key: str, zeros: Object) -> None:
    """``obj[key]``, an object, shows the fields of ``zeros`` that are missing with their zero values (what Go
    writes of a field that is not ``omitempty``)."""
    part = obj.get(key)
    if isinstance(part, dict):
        for name, zero in zeros.items():
            if part.get(name) is None:
                part[name] = zero


def field_path(obj: Object, dotted: str) -> str:
    """The string at ``spec.nodeName``-style path of ``obj``; ``""`` when absent (as field selectors compare)."""
    node: Any = obj
    for part in dotted.split("."):
        if not isinstance(node, dict):
            return ""
        node = node.get(part)
    if node is None:
        return ""
    if isinstance(node, bool):  # as Go formats it (a field selector says spec.unschedulable=true)
        return "true" if node else "false"
    return node if isinstance(node, str) else str(node)


class Strategy:
    """The defaults of a plain resource; subclasses override what differs. ``now`` is an RFC 3339 time."""

    name_causes: Callable[[str, str], list[Cause]] = staticmethod(dns_subdomain_causes)
    has_status = False
    """A ``status`` subresource: status is reset on create (unless :attr:`keep_status_on_create`) and ignored by
    updates of the main resource; ``PUT``/``PATCH .../status`` change status only."""
    keep_status_on_create = False
    tracks_generation = False
    """``metadata.generation`` rises when anything but metadata and status changes."""
    fields: frozenset[str] = frozenset()
    """Field-selector fields besides ``metadata.name`` and ``metadata.namespace``."""
    orphan_by_default = False
    """Delete without ``propagationPolicy`` orphans the dependents (batch/v1 Jobs, for compatibility)."""

    graceful_delete = False
    """Every delete first writes the object with its ``deletionTimestamp`` (a ``MODIFIED`` event), even when it
    goes at once (pods)."""
    returns_deleted_object = False
    """A delete that removes the object at once answers with it (pods, nodes ...); others answer ``Status``."""
    delete_collection = True
    """``DELETE`` of the collection is served (not of namespaces, as on the real server)."""

    def decode_error(self, obj: Object) -> str:
        """Why ``obj`` could not be decoded into its Go type (a 400, not a 422: a string where a number goes, a bad
        quantity, bad base64); ``""`` when it can."""
        return ""

    def prepare_create(self, obj: Object, now: str) -> None:
        """Defaults set on create (after metadata is filled in)."""

    def canonicalize(self, obj: Object) -> None:
        """Fill in what the real server shows though the client left it out, on every create and update: the zero
        values Go marshals (a struct that is not a pointer, a time as ``null``, a string as ``""``) and drops (a
        ``null`` pointer); only keys that are missing or ``null`` are touched, so a stored object is left as is."""

    def admit(self, obj: Object, lookup: Callable[[str, str, str], Object | None]) -> None:
        """Admission on create, with ``lookup(group/plural, namespace, name)`` of other objects; raises ApiError."""

    def validate(self, obj: Object) -> list[Cause]:
        return []

    def validate_update(self, new: Object, old: Object) -> list[Cause]:
        return self.validate(new)

    def grace_seconds(self, obj: Object, requested: int | None) -> int:
        """Seconds a delete waits before the object goes (0: at once, unless finalizers hold it)."""
        return 0

    def field_value(self, obj: Object, name: str) -> str:
        return field_path(obj, name)


@dataclass(frozen=True, slots=True)
class ResourceType:
    """One served resource: its names, scope, verbs and strategy."""

    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool
    strategy: Strategy = field(default_factory=Strategy)
    short_names: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    subresources: tuple[str, ...] = ()
    storage: str = ""
    """The collection holding the objects; two views of one collection (core and events.k8s.io Events) share it."""
    read_only_empty: bool = False
    """Served as an empty, watchable collection: reads answer, writes are 405."""
    to_view: Callable[[Object], Object] | None = None
    """Stored form → this view's form (``None``: stored form as is)."""
    from_view: Callable[[Object], Object] | None = None
    create_only: bool = False
    """A verb, not a collection (``bindings``): ``POST`` only."""

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def collection(self) -> str:
        return self.storage or f"{self.group}/{self.plural}"

    @property
    def singular(self) -> str:
        return self.kind.lower()

    @property
    def list_kind(self) -> str:
        return f"{self.kind}List"

    @property
    def fields(self) -> frozenset[str]:
        return self.strategy.fields | {"metadata.name", "metadata.namespace"}

    def verbs(self) -> list[str]:
        if self.read_only_empty:
            return ["get", "list", "watch"]
        if self.create_only:
            return ["create"]
        if not self.strategy.delete_collection:
            return ["create", "delete", "get", "list", "patch", "update", "watch"]
        return ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]

    def verbs_allow(self, verb: str) -> bool:
        return verb in self.verbs()


class Registry:
    """Every served resource, found by (group, version, plural) or by kind."""

    def __init__(self, resources: Iterable[ResourceType]) -> None:
        self.resources = list(resources)
        self._by_path = {(r.group, r.version, r.plural): r for r in self.resources}
        self._by_kind: dict[tuple[str, str], ResourceType] = {}
        for r in self.resources:
            self._by_kind.setdefault((r.api_version, r.kind), r)

    def find(self, group: str, version: str, plural: str) -> ResourceType | None:
        return self._by_path.get((group, version, plural))

    def by_kind(self, api_version: str, kind: str) -> ResourceType | None:
        return self._by_kind.get((api_version, kind))

    def group_versions(self) -> dict[str, list[str]]:
        """``{group: [versions]}`` in registration order; the core group is ``""``."""
        result: dict[str, list[str]] = {}
        for r in self.resources:
            versions = result.setdefault(r.group, [])
            if r.version not in versions:
                versions.append(r.version)
        return result

    def in_group_version(self, group: str, version: str) -> list[ResourceType]:
        return [r for r in self.resources if r.group == group and r.version == version]
