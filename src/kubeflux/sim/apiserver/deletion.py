"""Deletion for the generic store: graceful deletion, finalizers, garbage collection and namespace termination.

What k8s.io/apiserver's store does on ``DELETE`` (``deletionTimestamp`` and ``deletionGracePeriodSeconds``, the
``orphan`` and ``foregroundDeletion`` finalizers) and what kube-controller-manager's garbage collector and namespace
controller then do, for every resource alike: the dependents of an owner (``ownerReferences``) are deleted or
orphaned by the propagation policy, and a Terminating namespace's contents are deleted, its status says what remains
(the namespace controller's conditions), and it goes when nothing is left. :class:`Deletion` works on its
:class:`~kubeflux.sim.apiserver.store.Store`'s collections (composition: the store has one and delegates to it).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from kubeflux.apiobjects.manifests import format_timestamp
from kubeflux.sim.apiserver import errors
from kubeflux.sim.apiserver.errors import ApiError, Cause
from kubeflux.sim.apiserver.metadata import clone
from kubeflux.sim.apiserver.registry import Registry, ResourceType
from kubeflux.sim.apiserver.watch import Collection

__all__ = ["Deletion", "Dependents", "Stored", "namespace_conditions", "object_key", "read_only"]

Object = dict[str, Any]


def object_key(namespace: str, name: str) -> str:
    """The key of an object in its collection."""
    return f"{namespace}/{name}"


def read_only(resource: ResourceType) -> ApiError:
    return errors.method_not_allowed(
        f"{resource.plural}.{resource.group or 'core'} is served by kubeflux as an empty, read-only collection"
    )


_SETTLED = (
    ("NamespaceDeletionDiscoveryFailure", "ResourcesDiscovered", "All resources successfully discovered"),
    ("NamespaceDeletionGroupVersionParsingFailure", "ParsedGroupVersions", "All legacy kube types successfully parsed"),
    (
        "NamespaceDeletionContentFailure",
        "ContentDeleted",
        "All content successfully deleted, may be waiting on finalization",
    ),
)
"""The namespace controller's conditions that are False once it has deleted what it could."""
_REMAINING = (
    (
        "NamespaceContentRemaining",
        "SomeResourcesRemain",
        "Some resources are remaining: {}",
        "ContentRemoved",
        "All content successfully removed",
    ),
    (
        "NamespaceFinalizersRemaining",
        "SomeFinalizersRemain",
        "Some content in the namespace has finalizers remaining: {}",
        "ContentHasNoFinalizers",
        "All content-preserving finalizers have been removed",
    ),
)
"""The namespace controller's conditions on what holds a namespace: type, then reason and message (of what
holds it) when True, reason and message when False."""


def namespace_conditions(remaining: dict[str, int], finalizers: dict[str, int], now: str) -> list[Object]:
    """The conditions kube-controller-manager's namespace controller writes on a Terminating namespace whose
    content (``remaining``: count by ``resource.group``) and finalizers (count by name) hold it."""

    def condition(type_: str, status: str, reason: str, message: str) -> Object:
        return {"type": type_, "status": status, "lastTransitionTime": now, "reason": reason, "message": message}

    conditions = [condition(type_, "False", reason, message) for type_, reason, message in _SETTLED]
    content = ", ".join(f"{name} has {count} resource instances" for name, count in sorted(remaining.items()))
    held = ", ".join(f"{name} in {count} resource instances" for name, count in sorted(finalizers.items()))
    for (type_, reason, message, clear_reason, clear_message), what in zip(_REMAINING, (content, held), strict=True):
        if what:
            conditions.append(condition(type_, "True", reason, message.format(what)))
        else:
            conditions.append(condition(type_, "False", clear_reason, clear_message))
    return conditions


class Dependents(dict[str, set[tuple[str, str]]]):
    """Owner uid → (collection, key) of every object naming it in ``ownerReferences``: what garbage collection
    deletes or orphans when the owner goes."""

    def index(self, collection: str, key: str, old: Object | None, new: Object | None) -> None:
        """The object ``key`` of ``collection`` went from ``old`` to ``new`` (None: absent)."""
        for obj, add in ((old, False), (new, True)):
            if obj is None:
                continue
            for ref in obj.get("metadata", {}).get("ownerReferences") or ():
                uid = ref.get("uid") if isinstance(ref, dict) else None
                if not isinstance(uid, str):
                    continue
                if add:
                    self.setdefault(uid, set()).add((collection, key))
                else:
                    dependents = self.get(uid)
                    if dependents is not None:
                        dependents.discard((collection, key))
                        if not dependents:
                            del self[uid]


class Stored(Protocol):
    """What deletion needs of the :class:`~kubeflux.sim.apiserver.store.Store` that has it."""

    registry: Registry
    clock: Callable[[], float]
    collections: dict[str, Collection]
    dependents: Dependents
    namespaces: ResourceType | None
    dry: bool

    def now(self) -> str: ...
    def collection_of(self, resource: ResourceType) -> Collection: ...
    def view(self, resource: ResourceType, obj: Object) -> Object: ...
    def next_rv(self) -> int: ...
    def record(self, collection: Collection, type_: str, obj: Object, prev: Object | None) -> None: ...
    def put(self, resource: ResourceType, key: str, obj: Object, old: Object | None, type_: str) -> Object: ...
    def raw(self, resource: ResourceType, namespace: str, name: str) -> tuple[str, Object]: ...


class Deletion:
    """The deletion side of ``store`` (see the module docstring)."""

    def __init__(self, store: Stored) -> None:
        self.store = store
        self.collects_garbage = True
        """Dependents are deleted or orphaned here (kube-controller-manager's garbage collector); off, the
        ``orphan`` and ``foregroundDeletion`` finalizers and the dependents of a deleted owner are left to a real
        garbage collector run against the server, which then works as on a real server."""
        self.finalizes_namespaces = True
        """A Terminating namespace is emptied and removed here (the namespace controller); off, a real one run
        against the server deletes the content, finalizes (``namespaces/NAME/finalize``) and deletes the namespace
        again, which then goes, as on a real server."""

    def check_preconditions(
        self, resource: ResourceType, namespace: str, name: str, *, uid: str = "", resource_version: str = ""
    ) -> None:
        """A delete's preconditions: 409 when the object's uid or resourceVersion is not the one given."""
        if resource.read_only_empty:
            raise read_only(resource)
        meta = self.store.raw(resource, namespace, name)[1]["metadata"]
        if uid and uid != meta.get("uid"):
            why = f"Precondition failed: UID in precondition: {uid}, UID in object meta: {meta.get('uid')}"
            raise errors.conflict(resource.plural, name, why, resource.group)
        if resource_version and resource_version != meta.get("resourceVersion"):
            why = (
                f"Precondition failed: ResourceVersion in precondition: {resource_version}, "
                f"ResourceVersion in object meta: {meta.get('resourceVersion')}"
            )
            raise errors.conflict(resource.plural, name, why, resource.group)

    def delete_outcome(
        self, resource: ResourceType, namespace: str, name: str, *, grace: int | None = None, propagation: str = ""
    ) -> tuple[Object, bool]:
        """``DELETE`` without preconditions (see :meth:`check_preconditions`), and whether the object is gone (or
        would be, in a dry run)."""
        if resource.read_only_empty:
            raise read_only(resource)
        key, obj = self.store.raw(resource, namespace, name)
        if propagation not in ("", "Orphan", "Background", "Foreground"):
            cause = Cause("propagationPolicy", f"Unsupported value: {propagation!r}", "FieldValueNotSupported")
            raise errors.invalid("DeleteOptions", "", [cause])
        found, gone = self._delete(resource, key, obj, grace, propagation)
        return self.store.view(resource, found), gone

    def _delete(
        self, resource: ResourceType, key: str, obj: Object, grace: int | None, propagation: str
    ) -> tuple[Object, bool]:
        if resource is self.store.namespaces:
            return self._delete_namespace(key, obj), False
        meta = obj["metadata"]
        strategy = resource.strategy
        seconds = strategy.grace_seconds(obj, grace)
        if meta.get("deletionTimestamp"):
            if seconds == 0 and not meta.get("finalizers"):
                if strategy.graceful_delete:  # the shortened grace period is written first, as the real store does
                    obj = self._terminate(resource, key, obj, 0)
                return self.remove(resource, key, obj), True
            if seconds >= (meta.get("deletionGracePeriodSeconds") or 0):
                return obj, False
            return self._terminate(resource, key, obj, seconds), False
        policy = propagation or ("Orphan" if strategy.orphan_by_default else "Background")
        if policy != "Background":  # the garbage collector's finalizer holds the object until it has done its work
            finalizer = "orphan" if policy == "Orphan" else "foregroundDeletion"
            held = self._terminate(resource, key, obj, seconds, finalizer)
            if not self.store.dry and self.collects_garbage:
                self._after_delete(resource, held, policy)
                self._release(resource, key, finalizer)
            return held, False
        if seconds > 0 or meta.get("finalizers"):
            return self._terminate(resource, key, obj, seconds), False
        if strategy.graceful_delete:
            obj = self._terminate(resource, key, obj, 0)
        return self.remove(resource, key, obj), True

    def _release(self, resource: ResourceType, key: str, finalizer: str) -> None:
        """The garbage collector is done with ``key``: its ``finalizer`` goes, and so does the object if nothing
        else holds it."""
        current = self.store.collection_of(resource).objects.get(key)
        if current is None:
            return
        new = dict(current)
        new["metadata"] = meta = dict(current["metadata"])
        finalizers = [f for f in meta.get("finalizers") or () if f != finalizer]
        if finalizers:
            meta["finalizers"] = finalizers
        else:
            meta.pop("finalizers", None)
        stored = self.store.put(resource, key, new, current, "MODIFIED")
        if not finalizers and not meta.get("deletionGracePeriodSeconds"):
            self.remove(resource, key, stored)

    def _terminate(self, resource: ResourceType, key: str, obj: Object, seconds: int, finalizer: str = "") -> Object:
        """Mark ``obj`` Terminating: ``deletionTimestamp`` is when its grace period ends (and ``finalizer`` added)."""
        new = dict(obj)
        new["metadata"] = dict(obj["metadata"])
        if finalizer:
            new["metadata"]["finalizers"] = [*(obj["metadata"].get("finalizers") or ()), finalizer]
        new["metadata"]["deletionTimestamp"] = format_timestamp(float(int(self.store.clock()) + seconds))
        new["metadata"]["deletionGracePeriodSeconds"] = seconds
        return self.store.put(resource, key, new, obj, "MODIFIED")

    def _delete_namespace(self, key: str, obj: Object) -> Object:
        """A namespace goes Terminating, its contents are deleted, and it goes when the last of them has gone."""
        assert self.store.namespaces is not None
        if obj["metadata"].get("deletionTimestamp"):
            if (
                self.finalizes_namespaces
                or (obj.get("spec") or {}).get("finalizers")
                or obj["metadata"].get("finalizers")
            ):
                return obj
            return self.remove(self.store.namespaces, key, obj)  # finalized by a real namespace controller
        new = clone(obj)
        new["metadata"]["deletionTimestamp"] = self.store.now()
        new["status"] = {"phase": "Terminating"}
        stored = self.store.put(self.store.namespaces, key, new, obj, "MODIFIED")
        if not self.store.dry and self.finalizes_namespaces:
            self._empty_namespace(obj["metadata"]["name"])
        return stored

    def remove(self, resource: ResourceType, key: str, obj: Object) -> Object:
        if self.store.dry:
            return obj
        collection = self.store.collection_of(resource)
        del collection.objects[key]
        self.store.dependents.index(collection.name, key, obj, None)
        gone = dict(obj)
        gone["metadata"] = dict(obj["metadata"])
        gone["metadata"]["resourceVersion"] = str(self.store.next_rv())
        self.store.record(collection, "DELETED", gone, obj)
        if self.collects_garbage and obj["metadata"].get("uid") in self.store.dependents:  # dependents of a gone owner
            self._after_delete(resource, gone, "Background")
        namespace = obj["metadata"].get("namespace")
        if namespace and self.store.namespaces is not None:
            self._reap_namespace(namespace)
        return gone

    def _after_delete(self, resource: ResourceType, obj: Object, policy: str) -> None:
        """Garbage collection of the dependents of ``obj`` (whose deletion has begun) by ``policy``."""
        if self.store.dry:
            return
        uid = obj["metadata"]["uid"]
        for collection_name, key in sorted(self.store.dependents.get(uid, ())):
            dependent = self.store.collections[collection_name].objects.get(key)
            kind = self._resource_of(collection_name)
            if dependent is None or kind is None:
                continue
            if policy == "Orphan":
                new = clone(dependent)
                refs = [r for r in new["metadata"].get("ownerReferences", []) if r.get("uid") != uid]
                if refs:
                    new["metadata"]["ownerReferences"] = refs
                else:
                    new["metadata"].pop("ownerReferences", None)
                self.store.put(kind, key, new, dependent, "MODIFIED")
            else:
                namespace, name = key.split("/", 1)
                try:
                    self.delete_outcome(kind, namespace, name, propagation="Background")
                except ApiError:
                    continue

    def _resource_of(self, collection: str) -> ResourceType | None:
        return next((r for r in self.store.registry.resources if r.collection == collection and not r.to_view), None)

    def _empty_namespace(self, namespace: str) -> None:
        for resource in self.store.registry.resources:
            if not resource.namespaced or resource.to_view or resource.read_only_empty:
                continue
            collection = self.store.collection_of(resource)
            for key in [k for k in collection.objects if k.startswith(namespace + "/")]:
                try:
                    self.delete_outcome(resource, namespace, key.split("/", 1)[1])
                except ApiError:
                    continue
        self._reap_namespace(namespace)
        self._report_remaining(namespace)

    def _report_remaining(self, namespace: str) -> None:
        """A Terminating namespace that content still holds says what, in the namespace controller's conditions."""
        assert self.store.namespaces is not None
        ns_key = object_key("", namespace)
        ns = self.store.collection_of(self.store.namespaces).objects.get(ns_key)
        if ns is None:
            return
        remaining: dict[str, int] = {}
        finalizers: dict[str, int] = {}
        for resource in self.store.registry.resources:
            if not resource.namespaced or resource.to_view or resource.read_only_empty:
                continue
            for key, obj in self.store.collection_of(resource).objects.items():
                if key.startswith(namespace + "/"):
                    name = f"{resource.plural}.{resource.group}"
                    remaining[name] = remaining.get(name, 0) + 1
                    for finalizer in obj["metadata"].get("finalizers") or ():
                        finalizers[finalizer] = finalizers.get(finalizer, 0) + 1
        new = dict(ns)
        new["status"] = {
            **ns.get("status", {}),
            "conditions": namespace_conditions(remaining, finalizers, self.store.now()),
        }
        self.store.put(self.store.namespaces, ns_key, new, ns, "MODIFIED")

    def finalized(self, namespace: Object) -> bool:
        """Whether a write leaving Terminating ``namespace`` so removes it: never with the store's own namespace
        controller (it goes when its content has gone), else when it has no ``spec.finalizers`` left (a real
        controller's ``finalize``), as the real server's ``ShouldDeleteNamespaceDuringUpdate`` says."""
        spec = namespace.get("spec")
        return not self.finalizes_namespaces and not (isinstance(spec, dict) and spec.get("finalizers"))

    def _reap_namespace(self, namespace: str) -> None:
        """Remove a Terminating namespace once nothing is left in it."""
        if self.store.namespaces is None or not self.finalizes_namespaces:
            return
        ns_key = object_key("", namespace)
        ns = self.store.collection_of(self.store.namespaces).objects.get(ns_key)
        if ns is None or not ns["metadata"].get("deletionTimestamp"):
            return
        prefix = namespace + "/"
        for collection in self.store.collections.values():
            if any(k.startswith(prefix) for k in collection.objects):
                return
        self.remove(self.store.namespaces, ns_key, ns)
