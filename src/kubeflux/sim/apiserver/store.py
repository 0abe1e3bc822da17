"""The one generic store behind every resource: JSON objects keyed by collection, namespace and name.

It does what k8s.io/apiserver's ``registry/generic`` store does, for every :class:`ResourceType` alike: a global,
monotonically increasing resourceVersion; uid, ``generateName``, ``generation`` and ``creationTimestamp`` on
create; optimistic concurrency (409 ``Conflict`` when a write names a stale resourceVersion); finalizers and
``deletionTimestamp``; graceful deletion (the strategy says how long; an object whose grace period is not 0 stays,
Terminating, until something deletes it again with grace 0 — the simulated kubelet for pods); garbage collection
of dependents through ``ownerReferences`` (``propagationPolicy`` Background and Foreground delete them, Orphan
strips the reference); namespaces that end only when empty. What differs per resource is its strategy.

Stored object versions are never changed in place: a write stores a new dict, so watch events and responses may
hold references. Objects go in and out in a resource's *view* (``events.k8s.io`` Events are converted to and from
the stored core Events). Every method runs on the server's one event loop; none blocks.

The store has its parts: the writes are its own, lists and watches its :class:`~.listwatch.ListWatch`'s, and
deletion (with garbage collection and namespace termination) its :class:`~.deletion.Deletion`'s.
"""

from __future__ import annotations

import contextlib
import logging
import random
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from kubeflux.apiobjects.manifests import format_timestamp
from kubeflux.sim.apiserver import errors, system_objects
from kubeflux.sim.apiserver.deletion import Deletion, Dependents, object_key, read_only
from kubeflux.sim.apiserver.errors import ApiError, Cause
from kubeflux.sim.apiserver.fields import Path, apply_configuration, leaves, managed_after
from kubeflux.sim.apiserver.gates import binding_refusal
from kubeflux.sim.apiserver.listwatch import ListWatch
from kubeflux.sim.apiserver.metadata import (
    check_type,
    clone,
    metadata_causes,
    uid_from_bits,
)
from kubeflux.sim.apiserver.quota_admission import ADMISSION_MANAGER, QUOTAS, admit_create, admit_update
from kubeflux.sim.apiserver.registry import Registry, ResourceType
from kubeflux.sim.apiserver.watch import Collection, Watcher, WatchEvent

__all__ = ["DEFAULT_MAX_OBJECTS", "SPACE_EXCEEDED", "Store", "clone"]

log = logging.getLogger("kubeflux.apiserver")

DEFAULT_MAX_OBJECTS = 250_000
"""The objects a store holds at most unless told otherwise, and as many Events beside them (see :class:`Quota`)."""
SPACE_EXCEEDED = "etcdserver: mvcc: database space exceeded"
"""What etcd answers a write once its ``--quota-backend-bytes`` is reached (``rpctypes.ErrGRPCNoSpace``, etcd
v3.6), which kube-apiserver passes on as it is: ``InterpretCreateError`` knows no such error, so
``ErrorToAPIStatus`` makes it a 500 ``Status`` with no reason and etcd's words as the message (k8s.io/apiserver
v0.36, ``pkg/storage/errors/storage.go``, ``pkg/endpoints/handlers/responsewriters/status.go``): kubectl prints
``Error from server: etcdserver: mvcc: database space exceeded``."""

Object = dict[str, Any]
_NAME_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
_SUFFIXES = len(_NAME_ALPHABET) ** 5


def _name_suffix(number: int) -> str:
    """The five characters a ``generateName`` gets (as the real server's), from one random number below
    :data:`_SUFFIXES`: one draw instead of five, as events are created by the hundred thousand."""
    letters = []
    for _ in range(5):
        number, digit = divmod(number, len(_NAME_ALPHABET))
        letters.append(_NAME_ALPHABET[digit])
    return "".join(letters)


_SYSTEM_FIELDS = ("uid", "resourceVersion", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds")


class Quota:
    """How many objects of one kind the store holds at most (``cluster serve --max-objects``): the bound etcd's
    ``--quota-backend-bytes`` (2 GiB by default) puts on a real cluster, in objects rather than bytes, so that a Job
    of a billion completions under virtual time fills the quota, not the memory.

    The store keeps two: one for every object but Events, whose creates are refused beyond it with etcd's answer
    (:data:`SPACE_EXCEEDED`), and one for Events, which clusters often keep in an etcd of their own
    (``--etcd-servers-overrides=/events#…``) and which expire (``--event-ttl``, one hour): an Event beyond its
    bound makes the oldest one expire, so that the latest (a ``FailedCreate`` saying the store is full) are
    seen. Unlike etcd's alarm, which stays raised until an operator disarms it, the quota has room again as soon as
    objects are deleted; updates are not refused (the quota bounds the count, and an update adds no object).

    Counting is amortized: the collections are counted only once as many creates went by as there was room at
    the last count, so a create far from the bound costs one decrement."""

    def __init__(self, limit: int, collections: list[Collection]) -> None:
        self.limit = limit
        self.collections = collections
        self._unchecked = 0
        """Creates that may go by before the next count: there was at least this much room at the last one."""

    def count(self) -> int:
        return sum(len(collection.objects) for collection in self.collections)

    def room(self, objects: int = 1) -> bool:
        """Whether ``objects`` more fit (counted against the bound only when they may not)."""
        if self._unchecked >= objects:
            self._unchecked -= objects
            return True
        left = self.limit - self.count()
        self._unchecked = left - objects
        return left >= objects


@dataclass(frozen=True, slots=True)
class _Writer:
    manager: str
    operation: str
    applied: set[Path] | None


class Store:
    """Every collection of the served resources. ``clock`` gives Unix seconds (the wall clock by default)."""

    def __init__(
        self,
        registry: Registry,
        *,
        clock: Callable[[], float] = time.time,
        cache_size: int = 10_000,
        watch_backlog: int = 200_000,
        seed: int | None = None,
        max_objects: int = DEFAULT_MAX_OBJECTS,
    ) -> None:
        self.registry = registry
        self.clock = clock
        self.rv = 1
        self.cache_size = cache_size
        self._random = random.Random(seed)
        self._now: tuple[int, str] = (-1, "")
        self._admission = _StoreLookup(self)
        """The store as admission reads it (one, not one a create)."""
        self.collections: dict[str, Collection] = {}
        self.dry = False
        """A dry run (``dryRun=All``) is under way: writes are checked and answered, nothing is stored."""
        self._writer: _Writer | None = None
        """Who writes (a request over HTTP), for ``managedFields``; None: the server's own components."""
        self.dependents = Dependents()
        self.deletion = Deletion(self)
        self.listwatch = ListWatch(self, watch_backlog)
        """Lists and watches (see :mod:`.listwatch`)."""
        for resource in registry.resources:
            if resource.collection not in self.collections:
                self.collections[resource.collection] = Collection(resource.collection, cache_size)
        self.namespaces = registry.find("", "v1", "namespaces")
        events = registry.find("", "v1", "events")
        self._events = None if events is None else self.collection_of(events)
        others = [c for c in self.collections.values() if c is not self._events]
        self.quota = Quota(max_objects, others)
        """Every object but Events: a create beyond it is refused (:class:`Quota`)."""
        self.event_quota = Quota(max_objects, [] if self._events is None else [self._events])
        """Events: one beyond it makes the oldest expire."""
        self._full = False
        """The last create was refused for want of room (logged once each time the store fills)."""
        system_objects.make(self)

    # -- helpers ---------------------------------------------------------------------------------------------
    def now(self) -> str:
        """The current time as ``metav1.Time`` writes it (whole seconds; formatted once per second)."""
        second = int(self.clock())
        if second != self._now[0]:
            self._now = (second, format_timestamp(float(second)))
        return self._now[1]

    def collection_of(self, resource: ResourceType) -> Collection:
        return self.collections[resource.collection]

    def view(self, resource: ResourceType, obj: Object) -> Object:
        return resource.to_view(obj) if resource.to_view else obj

    def next_rv(self) -> int:
        self.rv += 1
        return self.rv

    def record(self, collection: Collection, type_: str, obj: Object, prev: Object | None) -> None:
        collection.record(WatchEvent(int(obj["metadata"]["resourceVersion"]), type_, obj, prev))

    @contextlib.contextmanager
    def request(self, manager: str = "", *, dry: bool = False, applied: set[Path] | None = None) -> Iterator[None]:
        """Writes inside are ``manager``'s (its ``managedFields``; ``applied``: the leaves of a server-side apply);
        with ``dry`` they are validated and answered as usual but change nothing (``dryRun=All``)."""
        before = self.dry, self._writer
        self.dry = dry
        if manager:
            self._writer = _Writer(manager, "Apply" if applied is not None else "Update", applied)
        try:
            yield
        finally:
            self.dry, self._writer = before

    def _charge(self, quotas: list[Object]) -> None:
        """Write the ``status`` of the ResourceQuotas an admitted write is counted in (:mod:`.quota_admission`), as
        the real plugin writes it: ``kube-apiserver``'s update, before the object itself is stored; not in a dry run."""
        if not quotas or self.dry:
            return
        resource = self.registry.find("", "v1", "resourcequotas")
        assert resource is not None
        with self.request(ADMISSION_MANAGER):
            for quota in quotas:
                meta = quota["metadata"]
                self.update(resource, meta["namespace"], meta["name"], quota, "status", trusted=True)

    def _manage(self, resource: ResourceType, old: Object | None, new: Object, subresource: str = "") -> None:
        """``new``'s ``managedFields`` after the current writer's write (kept as they were without one)."""
        writer = self._writer
        if writer is None:
            if old is not None and "managedFields" in old["metadata"]:
                new["metadata"]["managedFields"] = old["metadata"]["managedFields"]
            return
        managed = managed_after(
            old,
            new,
            writer.manager,
            writer.operation,
            self.now(),
            subresource=subresource,
            status_separate=resource.strategy.has_status,
            applied=writer.applied,
        )
        if managed:
            new["metadata"]["managedFields"] = managed
        else:  # no field is anyone's (an object of metadata only): the real server shows none
            new["metadata"].pop("managedFields", None)

    def put(self, resource: ResourceType, key: str, obj: Object, old: Object | None, type_: str) -> Object:
        if self.dry:  # answered as stored, at the version it would replace (none for a create)
            if old is None:
                obj["metadata"].pop("resourceVersion", None)
            else:
                obj["metadata"]["resourceVersion"] = old["metadata"]["resourceVersion"]
            return obj
        collection = self.collection_of(resource)
        obj["metadata"]["resourceVersion"] = str(self.next_rv())
        collection.objects[key] = obj
        self.dependents.index(collection.name, key, old, obj)
        self.record(collection, type_, obj, old)
        return obj

    def _require_namespace(self, resource: ResourceType, namespace: str, creating: bool, name: str = "") -> None:
        if not resource.namespaced or self.namespaces is None:
            return
        ns = self.collection_of(self.namespaces).objects.get(object_key("", namespace))
        if ns is None:
            raise errors.not_found("namespaces", namespace)
        if creating and ns["metadata"].get("deletionTimestamp"):
            message = f"namespace {namespace} is being terminated"
            raise ApiError(
                403,
                "Forbidden",
                f'{resource.plural} "{name}" is forbidden: unable to create new content in namespace {namespace} '
                "because it is being terminated",
                resource.plural,
                name,
                resource.group,
                [Cause("metadata.namespace", message, "NamespaceTerminating")],
            )

    def get_object(self, collection: str, namespace: str, name: str) -> Object | None:
        """The stored object, or None (:class:`~kubeflux.sim.apiserver.registry.Lookup`'s ``get``)."""
        found = self.collections.get(collection)
        return None if found is None else found.objects.get(object_key(namespace, name))

    def every_object(self, collection: str) -> Iterable[Object]:
        """Every stored object of ``collection`` (:class:`~kubeflux.sim.apiserver.registry.Lookup`'s ``every``)."""
        found = self.collections.get(collection)
        return () if found is None else found.objects.values()

    # -- reads -----------------------------------------------------------------------------------------------
    def get(self, resource: ResourceType, namespace: str, name: str) -> Object:
        if resource.read_only_empty:
            raise errors.not_found(resource.plural, name, resource.group)
        obj = self.collection_of(resource).objects.get(object_key(namespace if resource.namespaced else "", name))
        if obj is None:
            raise errors.not_found(resource.plural, name, resource.group)
        return self.view(resource, obj)

    def find(self, resource: ResourceType, namespace: str, name: str, uid: str | None = None) -> Object | None:
        """:meth:`get`'s object, or None where there is none (given ``uid``: none of that uid, as when the object
        was deleted and another made under its name)."""
        try:
            found = self.get(resource, namespace, name)
        except ApiError:
            return None
        return found if uid is None or found["metadata"].get("uid") == uid else None

    def raw(self, resource: ResourceType, namespace: str, name: str) -> tuple[str, Object]:
        key = object_key(namespace if resource.namespaced else "", name)
        obj = self.collection_of(resource).objects.get(key)
        if obj is None or resource.read_only_empty:
            raise errors.not_found(resource.plural, name, resource.group)
        return key, obj

    def stop_watch(self, resource: ResourceType, watcher: Watcher) -> None:
        self.listwatch.stop_watch(resource, watcher)

    # -- writes ----------------------------------------------------------------------------------------------
    def create(self, resource: ResourceType, namespace: str, body: Any, *, trusted: bool = False) -> Object:
        """``POST``: fill metadata, default, validate, store; 409 ``AlreadyExists`` when the name is taken.
        ``trusted``: the body comes from the server's own components (see :func:`check_type`)."""
        if resource.read_only_empty:
            raise read_only(resource)
        obj = check_type(resource, body, trusted)
        meta = obj["metadata"]
        if resource.from_view is None:
            obj["apiVersion"], obj["kind"] = resource.api_version, resource.kind
        if resource.namespaced:
            given = meta.get("namespace")
            if given not in (None, "", namespace):
                raise errors.bad_request(
                    "the namespace of the provided object does not match the namespace sent on the request"
                )
            meta["namespace"] = namespace
        else:
            meta.pop("namespace", None)
        if meta.get("resourceVersion"):  # the real server answers it as an internal error
            raise ApiError(500, "", "resourceVersion should not be set on objects to be created")
        name = meta.get("name") or ""
        generate = meta.get("generateName") or ""
        if not isinstance(name, str) or not isinstance(generate, str):
            raise errors.invalid(resource.kind, "", [Cause("metadata.name", "Invalid value: must be a string")])
        collection = self.collection_of(resource)
        if not name:
            if not generate:
                cause = Cause("metadata.name", "Required value: name or generateName is required", "FieldValueRequired")
                raise errors.invalid(resource.kind, "", [cause], resource.group)
            for _ in range(8):
                name = generate[:58] + _name_suffix(self._random.randrange(_SUFFIXES))
                if object_key(meta.get("namespace", ""), name) not in collection.objects:
                    break
            meta["name"] = name
        for field in _SYSTEM_FIELDS:
            meta.pop(field, None)
        meta["uid"] = uid_from_bits(self._random.getrandbits(128))
        meta["creationTimestamp"] = self.now()
        strategy = resource.strategy
        if strategy.tracks_generation:
            meta["generation"] = 1
        else:
            meta.pop("generation", None)
        if strategy.has_status and not strategy.keep_status_on_create:
            obj.pop("status", None)
        causes = metadata_causes(resource, meta)
        if not causes:
            strategy.prepare_create(obj, self.now())
            strategy.canonicalize(obj)
            causes = strategy.validate(obj)
        if not causes:
            strategy.admit(obj, self._admission)
        if causes:
            raise errors.invalid(resource.kind, name, causes, resource.group)
        self._require_namespace(resource, meta.get("namespace", ""), creating=True, name=name)
        key = object_key(meta.get("namespace", ""), name)
        if key in collection.objects:
            raise errors.already_exists(resource.plural, name, resource.group)
        self._charge(admit_create(self.collections.get(QUOTAS), resource, obj))
        meta.pop("managedFields", None)
        if self._writer is not None:
            self._manage(resource, None, obj)
        if not self.dry:  # a namespace comes with its default ServiceAccount: room for both, or neither is made
            self._make_room(resource, collection, 2 if resource is self.namespaces else 1)
        stored = self.put(resource, key, obj, None, "ADDED")
        if resource is self.namespaces and not self.dry:
            system_objects.default_account(self, name)
        return self.view(resource, stored)

    def _make_room(self, resource: ResourceType, collection: Collection, objects: int = 1) -> None:
        """Before a create of ``objects`` (a namespace and its ServiceAccount are two): an Event beyond its quota
        makes the oldest expire; any other object beyond the store's is refused as etcd refuses it (:class:`Quota`),
        said in the log the first time."""
        if collection is self._events:
            if not self.event_quota.room():
                oldest = next(iter(collection.objects.items()))
                self.deletion.remove(resource, *oldest)
            return
        if self.quota.room(objects):
            self._full = False
            return
        if not self._full:
            self._full = True
            log.warning(
                "the store is full (--max-objects %s): creates are refused (%s) until some are deleted",
                f"{self.quota.limit:,}",
                SPACE_EXCEEDED,
            )
        raise ApiError(500, "", SPACE_EXCEEDED)

    def update(
        self,
        resource: ResourceType,
        namespace: str,
        name: str,
        body: Any,
        subresource: str = "",
        *,
        trusted: bool = False,
    ) -> Object:
        """``PUT`` (and the end of every ``PATCH``): optimistic concurrency on ``metadata.resourceVersion``."""
        if resource.read_only_empty:
            raise read_only(resource)
        key, old = self.raw(resource, namespace, name)
        new = check_type(resource, body, trusted)
        meta = new["metadata"]
        if meta.get("name", name) != name:
            raise errors.bad_request(
                f"the name of the object ({meta.get('name')}) does not match the name on the URL ({name})"
            )
        if resource.namespaced and meta.get("namespace") not in (None, "", namespace):
            raise errors.bad_request(
                "the namespace of the provided object does not match the namespace sent on the request"
            )
        given_rv = meta.get("resourceVersion")
        if given_rv and given_rv != old["metadata"]["resourceVersion"]:
            raise errors.conflict(resource.plural, name, errors.STALE_OBJECT, resource.group)
        return self._replace(resource, key, old, new, subresource)

    def _replace(self, resource: ResourceType, key: str, old: Object, new: Object, subresource: str) -> Object:
        strategy = resource.strategy
        old_meta = old["metadata"]
        if subresource == "status":
            status = new.get("status")
            if status is not None and not isinstance(status, dict):
                raise errors.invalid(
                    resource.kind, old_meta["name"], [Cause("status", "Invalid value: must be an object")]
                )
            new = dict(old)
            new["metadata"] = dict(old_meta)
            if status is None:
                new.pop("status", None)
            else:
                new["status"] = status
        elif subresource == "finalize":  # a namespace's spec.finalizers, and nothing else
            spec = new.get("spec")
            finalizers = spec.get("finalizers") if isinstance(spec, dict) else None
            new = dict(old)
            new["metadata"] = dict(old_meta)
            new["spec"] = {**old.get("spec", {}), "finalizers": finalizers} if finalizers else {}
        else:
            new["apiVersion"], new["kind"] = old["apiVersion"], old["kind"]
            if strategy.has_status:
                if "status" in old:
                    new["status"] = old["status"]
                else:
                    new.pop("status", None)
            meta = new["metadata"]
            meta["name"] = old_meta["name"]
            if "namespace" in old_meta:
                meta["namespace"] = old_meta["namespace"]
            for field in ("uid", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds", "generation"):
                if field in old_meta:
                    meta[field] = old_meta[field]
                else:
                    meta.pop(field, None)
        new["metadata"]["resourceVersion"] = old_meta["resourceVersion"]
        causes = metadata_causes(resource, new["metadata"], old_meta) + _finalizer_causes(new, old)
        strategy.canonicalize(new)
        causes += strategy.validate_update(new, old)
        if causes:
            raise errors.invalid(resource.kind, old_meta["name"], causes, resource.group)
        if not subresource:
            self._charge(admit_update(self.collections.get(QUOTAS), resource, new, old))
        if "managedFields" in old_meta:
            new["metadata"]["managedFields"] = old_meta["managedFields"]
        else:
            new["metadata"].pop("managedFields", None)
        if new == old:
            return self.view(resource, old)
        if self._writer is not None:
            self._manage(resource, old, new, subresource)
        if strategy.tracks_generation and _spec_of(new) != _spec_of(old):
            new["metadata"]["generation"] = int(old_meta.get("generation", 1)) + 1
        stored = self.put(resource, key, new, old, "MODIFIED")
        meta = stored["metadata"]
        if (
            meta.get("deletionTimestamp")
            and not meta.get("finalizers")
            and not meta.get("deletionGracePeriodSeconds")
            and (resource is not self.namespaces or self.deletion.finalized(stored))
        ):
            self.deletion.remove(resource, key, stored)
        return self.view(resource, stored)

    def patch(
        self,
        resource: ResourceType,
        namespace: str,
        name: str,
        apply: Callable[[Object], Any],
        subresource: str = "",
    ) -> Object:
        if resource.read_only_empty:
            raise read_only(resource)
        _, old = self.raw(resource, namespace, name)
        new = apply(clone(self.view(resource, old)))
        if not isinstance(new, dict):
            raise errors.bad_request("the patched object is not a JSON object")
        return self.update(resource, namespace, name, new, subresource)

    def apply(
        self,
        resource: ResourceType,
        namespace: str,
        name: str,
        config: Object,
        manager: str,
        *,
        force: bool = False,
        subresource: str = "",
    ) -> tuple[int, Object]:
        """Server-side apply of ``config`` by ``manager``: 201 and the object when it creates it, else 200 (see
        :mod:`kubeflux.sim.apiserver.fields`)."""
        if resource.read_only_empty:
            raise read_only(resource)
        check_type(resource, clone(config))  # the kind and version, the metadata's type
        meta = config.setdefault("metadata", {})
        if meta.get("name", name) != name:
            raise errors.bad_request(
                f"the name of the object ({meta.get('name')}) does not match the name on the URL ({name})"
            )
        separate = resource.strategy.has_status
        key = object_key(namespace if resource.namespaced else "", name)
        live = self.collection_of(resource).objects.get(key)
        if live is None:
            if subresource:
                raise errors.not_found(resource.plural, name, resource.group)
            created = clone(config)
            created["metadata"]["name"] = name
            with self.request(manager, dry=self.dry, applied=set(leaves(config, "", separate))):
                return 201, self.create(resource, namespace, created)
        merged, applied = apply_configuration(
            clone(self.view(resource, live)),
            config,
            manager,
            force=force,
            subresource=subresource,
            status_separate=separate,
        )
        with self.request(manager, dry=self.dry, applied=applied):
            return 200, self.update(resource, namespace, name, merged, subresource)

    # -- deletion (see :mod:`.deletion`) ----------------------------------------------------------------------
    def delete(
        self,
        resource: ResourceType,
        namespace: str,
        name: str,
        *,
        grace: int | None = None,
        propagation: str = "",
        uid: str = "",
        resource_version: str = "",
    ) -> Object:
        """``DELETE``: at once, or Terminating (``deletionTimestamp``) while finalizers or a grace period hold it;
        409 when the object's uid or resourceVersion is not the one given."""
        self.deletion.check_preconditions(resource, namespace, name, uid=uid, resource_version=resource_version)
        return self.deletion.delete_outcome(resource, namespace, name, grace=grace, propagation=propagation)[0]

    # -- pods ------------------------------------------------------------------------------------------------
    def bind(self, pods: ResourceType, namespace: str, name: str, binding: Any) -> None:
        """``pods/binding``: set ``spec.nodeName`` and ``PodScheduled=True``; 409 if bound or being deleted."""
        if not isinstance(binding, dict):
            raise errors.bad_request("the body must be a Binding object")
        raw_meta = binding.get("metadata")
        meta: Object = raw_meta if isinstance(raw_meta, dict) else {}
        target = binding.get("target")
        node = target.get("name") if isinstance(target, dict) else None
        if not isinstance(node, str) or not node:  # the real server answers it as an internal error
            raise ApiError(500, "", "target.name: Required value")
        if isinstance(target, dict) and target.get("kind") not in (None, "", "Node"):
            raise errors.invalid("Binding", name, [Cause("target.kind", "Invalid value: must be empty or 'Node'")])
        key, pod = self.raw(pods, namespace, name)
        pod_meta = pod["metadata"]
        uid = meta.get("uid")
        if uid and uid != pod_meta.get("uid"):
            why = f"Precondition failed: UID in precondition: {uid}, UID in object meta: {pod_meta.get('uid')}"
            raise errors.conflict("pods/binding", name, why)
        if pod_meta.get("deletionTimestamp"):
            raise errors.conflict("pods/binding", name, f"pod {name} is being deleted, cannot be assigned to a host")
        if pod.get("spec", {}).get("nodeName"):
            why = f'pod {name} is already assigned to node "{pod["spec"]["nodeName"]}"'
            raise errors.conflict("pods/binding", name, why)
        gated = binding_refusal(pod, name)
        if gated:
            raise errors.conflict("pods/binding", name, gated)
        # copy-on-write: only the mappings this write changes are copied; the rest is shared with the old version
        new = dict(pod)
        new["spec"] = {**pod["spec"], "nodeName": node}
        new["metadata"] = dict(pod_meta)
        annotations = meta.get("annotations")
        if isinstance(annotations, dict) and annotations:
            new["metadata"]["annotations"] = {**pod_meta.get("annotations", {}), **annotations}
        status = new["status"] = dict(pod.get("status") or {})
        status.pop("nominatedNodeName", None)  # ClearingNominatedNodeNameAfterBinding (on by default since v1.35)
        conditions = [c for c in status.get("conditions", []) if c.get("type") != "PodScheduled"]
        conditions.insert(
            0, {"type": "PodScheduled", "status": "True", "lastProbeTime": None, "lastTransitionTime": self.now()}
        )
        status["conditions"] = conditions
        self.put(pods, key, new, pod, "MODIFIED")

    def objects(self, resource: ResourceType) -> Iterable[Object]:
        """Every stored object of ``resource``'s collection (stored form; for the shell and tests)."""
        return self.collection_of(resource).objects.values()


def _finalizer_causes(new: Object, old: Object) -> list[Cause]:
    """No finalizer may be added to an object being deleted."""
    if not old["metadata"].get("deletionTimestamp"):
        return []
    before = set(old["metadata"].get("finalizers") or ())
    added = [f for f in new["metadata"].get("finalizers") or () if f not in before]
    if not added:
        return []
    listed = ", ".join(f'"{f}"' for f in added)
    message = (
        "Forbidden: no new finalizers can be added if the object is being deleted, "
        f"found new finalizers []string{{{listed}}}"
    )
    return [Cause("metadata.finalizers", message, "FieldValueForbidden")]


def _spec_of(obj: Object) -> Object:
    return {k: v for k, v in obj.items() if k not in ("metadata", "status")}


class _StoreLookup:
    """The store as admission reads it (:class:`~kubeflux.sim.apiserver.registry.Lookup`)."""

    __slots__ = ("_store",)

    def __init__(self, store: Store) -> None:
        self._store = store

    def get(self, collection: str, namespace: str, name: str) -> Object | None:
        return self._store.get_object(collection, namespace, name)

    def every(self, collection: str) -> Iterable[Object]:
        return self._store.every_object(collection)
