"""The storage objects a scheduler core reads beside nodes and pods: PersistentVolumes, PersistentVolumeClaims,
StorageClasses and CSINodes, reduced to what kube-scheduler's volume filters read (:mod:`kubeflux.scheduler.volumes`),
and :class:`VolumeBook`, the core's record of them.

They come in as cluster events (:class:`~kubeflux.scheduler.messages.ClusterEvent`), read from manifests by
:mod:`kubeflux.apiobjects.storage`. A pod names its claims in :attr:`~kubeflux.scheduler.objects.Pod.volume_claims`.

When a scheduler binds a pod whose claims wait for their first consumer, it says in its
:class:`~kubeflux.scheduler.messages.Bind` what to write (:class:`ClaimBinding`: the claim's
``volume.kubernetes.io/selected-node``, or a matching PersistentVolume's ``spec.claimRef``), as kube-scheduler's
volume binder writes them, and assumes them in its book until the cluster's own events replace them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Final, TypeVar

from kubeflux.scheduler.objects import LabelSelector, NodeSelectorTerm

__all__ = [
    "ANN_BIND_COMPLETED",
    "ANN_BOUND_BY_CONTROLLER",
    "ANN_SELECTED_NODE",
    "NO_PROVISIONER",
    "READ_WRITE_ONCE_POD",
    "STORAGE_KINDS",
    "CSINode",
    "ClaimBinding",
    "ClaimRef",
    "PersistentVolume",
    "PersistentVolumeClaim",
    "StorageClass",
    "StorageObject",
    "VolumeBook",
]

ANN_SELECTED_NODE: Final = "volume.kubernetes.io/selected-node"
"""On a claim whose class waits for its first consumer: the node a scheduler chose, for the provisioner."""
ANN_BIND_COMPLETED: Final = "pv.kubernetes.io/bind-completed"
"""On a claim the PV controller bound (a claim with ``spec.volumeName`` and without it is not bound yet)."""
ANN_BOUND_BY_CONTROLLER: Final = "pv.kubernetes.io/bound-by-controller"
"""On a PersistentVolume (or claim) that a controller, not its user, bound."""
NO_PROVISIONER: Final = "kubernetes.io/no-provisioner"
"""A StorageClass's provisioner for statically made volumes only (local volumes): it provisions nothing."""
READ_WRITE_ONCE_POD: Final = "ReadWriteOncePod"


@dataclass(frozen=True, slots=True)
class ClaimRef:
    """A PersistentVolume's ``spec.claimRef``: the claim it is bound (or pre-bound) to; an empty ``uid`` matches any
    claim of that name."""

    namespace: str
    name: str
    uid: str = ""

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True, slots=True)
class PersistentVolume:
    """A ``v1`` PersistentVolume: its class (``volume.beta.kubernetes.io/storage-class`` first, as Kubernetes
    reads it), capacity in bytes, access modes, ``volumeMode: Block`` or not, required node affinity (empty: any
    node), labels (the zone labels VolumeZone reads), ``claimRef``, ``status.phase``, CSI driver and handle."""

    name: str
    storage_class: str = ""
    capacity: int = 0
    access_modes: frozenset[str] = frozenset()
    block: bool = False
    node_affinity: tuple[NodeSelectorTerm, ...] = ()
    labels: Mapping[str, str] = field(default_factory=dict)
    claim: ClaimRef | None = None
    phase: str = "Available"
    deleted: bool = False
    csi_driver: str = ""
    csi_handle: str = ""
    attributes_class: str = ""
    uid: str = ""
    resource_version: str = ""
    """``metadata.resourceVersion`` as read ("" when unknown): a binder's write is conditional on it."""


@dataclass(frozen=True, slots=True)
class PersistentVolumeClaim:
    """A ``v1`` PersistentVolumeClaim: its class (the beta annotation first; "" for none), ``spec.volumeName``,
    whether the PV controller completed its binding (:data:`ANN_BIND_COMPLETED`), the node chosen for it
    (:data:`ANN_SELECTED_NODE`; None when not annotated), access modes, requested storage in bytes, ``volumeMode``,
    the volume selector, ``status.phase``, and the uid of its controlling owner (a pod, for an ephemeral volume's)."""

    namespace: str
    name: str
    uid: str = ""
    storage_class: str = ""
    volume_name: str = ""
    bind_completed: bool = False
    selected_node: str | None = None
    access_modes: frozenset[str] = frozenset()
    request: int = 0
    block: bool = False
    selector: LabelSelector | None = None
    phase: str = "Pending"
    deleted: bool = False
    owner_uid: str = ""
    attributes_class: str = ""
    resource_version: str = ""
    """``metadata.resourceVersion`` as read ("" when unknown): a binder's write is conditional on it."""

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def bound(self) -> bool:
        """Fully bound, as kube-scheduler's volume binder reads it: a volume name and the PV controller's mark."""
        return bool(self.volume_name) and self.bind_completed


@dataclass(frozen=True, slots=True)
class StorageClass:
    """A ``storage.k8s.io/v1`` StorageClass: its provisioner, whether its ``volumeBindingMode`` is
    ``WaitForFirstConsumer`` (else ``Immediate``), and its ``allowedTopologies`` as node selector terms of ``In``
    requirements (empty: any node)."""

    name: str
    provisioner: str = ""
    wait_for_first_consumer: bool = False
    allowed_topologies: tuple[NodeSelectorTerm, ...] = ()


@dataclass(frozen=True, slots=True)
class CSINode:
    """A ``storage.k8s.io/v1`` CSINode (named as its node): each driver's ``allocatable.count``, the most volumes of
    that driver the node may have attached (drivers without a count are not limited)."""

    name: str
    limits: Mapping[str, int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ClaimBinding:
    """What a Bind writes for one of the pod's claims before the pod's Binding, as kube-scheduler's volume binder
    does: ``volume`` empty, the claim's :data:`ANN_SELECTED_NODE` set to ``node`` (its provisioner makes a volume
    there); else that PersistentVolume's ``spec.claimRef`` set to the claim (with :data:`ANN_BOUND_BY_CONTROLLER`),
    for the PV controller to complete."""

    claim: str
    """The claim's ``namespace/name``."""
    claim_uid: str
    node: str
    volume: str = ""
    resource_version: str = ""
    """The ``resourceVersion`` of the object written (the volume, else the claim) as the scheduler read it: the
    write is refused (409) when another writer changed it since, as kube-scheduler's ``bindAPIUpdate`` updates its
    assumed copy ("": unconditional)."""


StorageObject = PersistentVolume | PersistentVolumeClaim | StorageClass | CSINode
STORAGE_KINDS: Final = (PersistentVolume, PersistentVolumeClaim, StorageClass, CSINode)
"""The storage classes, for ``isinstance``."""


class VolumeBook:
    """The storage objects a core has been told of, with what it assumed of its own binds (:meth:`assume`) until the
    cluster's events replace them. :attr:`version` changes with every change."""

    def __init__(self) -> None:
        self.claims: dict[str, PersistentVolumeClaim] = {}
        """``namespace/name`` → the claim."""
        self.volumes: dict[str, PersistentVolume] = {}
        self.classes: dict[str, StorageClass] = {}
        self.csinodes: dict[str, CSINode] = {}
        self.version = 0
        self._assumed: dict[str, tuple[StorageObject, StorageObject]] = {}
        """``Kind name`` → (the object before :meth:`assume`, the object assumed), until :meth:`revert`."""
        self._by_class: dict[str, _ClassVolumes] = {}
        """Storage class → its volumes, indexed for :meth:`candidates`."""
        self.by_pod: dict[str, tuple[ClaimBinding, ...]] = {}
        """Pod uid → the claim bindings its Bind writes, while its allocation lasts: reverted when the cluster
        refuses the Bind (a claim binding refused leaves the ones after it unwritten)."""

    def observe(self, deleted: bool, obj: StorageObject) -> None:
        """``obj`` was added or changed (``deleted``: is gone). The cluster's word replaces an assumption, unless it
        is older than the object assumed upon (a stale event: kube-scheduler's assume cache compares them too)."""
        if isinstance(obj, PersistentVolumeClaim):
            if not deleted and self._stale(f"PersistentVolumeClaim {obj.key}", obj.resource_version):
                return
            _put(self.claims, obj.key, obj, deleted)
            self._assumed.pop(f"PersistentVolumeClaim {obj.key}", None)
        elif isinstance(obj, PersistentVolume):
            if not deleted and self._stale(f"PersistentVolume {obj.name}", obj.resource_version):
                return
            self._set_volume(obj.name, None if deleted else obj)
            self._assumed.pop(f"PersistentVolume {obj.name}", None)
        elif isinstance(obj, StorageClass):
            _put(self.classes, obj.name, obj, deleted)
        else:
            _put(self.csinodes, obj.name, obj, deleted)
        self.version += 1

    def _stale(self, key: str, version: str) -> bool:
        """Whether an event of ``version`` is no newer than the object assumed upon under ``key`` (unknown or
        unreadable versions are never stale)."""
        pair = self._assumed.get(key)
        if pair is None:
            return False
        before = pair[0]
        assert isinstance(before, PersistentVolume | PersistentVolumeClaim)
        if not (version.isdigit() and before.resource_version.isdigit()):
            return False
        return int(version) <= int(before.resource_version)

    def _set_volume(self, name: str, pv: PersistentVolume | None) -> None:
        """``volumes[name] = pv`` (None: removed), with the index of :meth:`candidates`."""
        old = self.volumes.pop(name, None)
        if old is not None:
            self._index(old, False)
        if pv is not None:
            self.volumes[name] = pv
            self._index(pv, True)

    def _index(self, pv: PersistentVolume, add: bool) -> None:
        entry = self._by_class.get(pv.storage_class)
        if entry is None:
            entry = self._by_class[pv.storage_class] = _ClassVolumes()
        if pv.claim is not None:
            names = entry.claimed.setdefault(pv.claim.key, set())
        else:
            pinned = _pinned_label(pv)
            if pinned is None:
                names = entry.free
            else:
                key, values = pinned
                by_value = entry.free_on.setdefault(key, {})
                for value in values:
                    if add:
                        by_value.setdefault(value, set()).add(pv.name)
                    else:
                        by_value.get(value, set()).discard(pv.name)
                return
        if add:
            names.add(pv.name)
        else:
            names.discard(pv.name)

    def candidates(self, storage_class: str, claim: str, labels: Mapping[str, str]) -> tuple[list[str], list[str]]:
        """The names of the volumes of ``storage_class`` that may match ``claim`` (``namespace/name``) on a node of
        ``labels``: those whose ``claimRef`` names it, by name; and those without a ``claimRef`` whose node affinity
        does not rule the node out by a label (any order). The rest never match it there, so a pod's filter costs
        the volumes that may, not all of them."""
        entry = self._by_class.get(storage_class)
        if entry is None:
            return [], []
        claimed = sorted(entry.claimed.get(claim, ()))
        free = list(entry.free)
        for key, by_value in entry.free_on.items():
            value = labels.get(key)
            if value is not None:
                free.extend(by_value.get(value, ()))
        return claimed, free

    def assume(self, bindings: tuple[ClaimBinding, ...]) -> None:
        """A bind's claim bindings as written (:class:`ClaimBinding`), until the cluster says otherwise."""
        for binding in bindings:
            claim = self.claims.get(binding.claim)
            if claim is None:
                continue
            if binding.volume:
                pv = self.volumes.get(binding.volume)
                if pv is not None:
                    assumed = replace(pv, claim=ClaimRef(claim.namespace, claim.name, claim.uid))
                    self._set_volume(pv.name, assumed)
                    self._assumed[f"PersistentVolume {pv.name}"] = (pv, assumed)
            else:
                made = self.claims[claim.key] = replace(claim, selected_node=binding.node)
                self._assumed[f"PersistentVolumeClaim {claim.key}"] = (claim, made)
        if bindings:
            self.version += 1

    def revert(self, bindings: tuple[ClaimBinding, ...]) -> None:
        """Undo :meth:`assume` of ``bindings`` that were never written (a pod unreserved before its Bind, as
        kube-scheduler's ``RevertAssumedPodVolumes``), where the book still holds what was assumed."""
        for binding in bindings:
            key = f"PersistentVolume {binding.volume}" if binding.volume else f"PersistentVolumeClaim {binding.claim}"
            pair = self._assumed.pop(key, None)
            if pair is None:
                continue
            before, assumed = pair
            if isinstance(before, PersistentVolume) and self.volumes.get(before.name) is assumed:
                self._set_volume(before.name, before)
            elif isinstance(before, PersistentVolumeClaim) and self.claims.get(before.key) is assumed:
                self.claims[before.key] = before
        if bindings:
            self.version += 1


class _ClassVolumes:
    """One class's volume names: by the claim their ``claimRef`` names; without one, by the node label their node
    affinity requires (``free_on``: label → value → names), else in ``free``."""

    __slots__ = ("claimed", "free", "free_on")

    def __init__(self) -> None:
        self.claimed: dict[str, set[str]] = {}
        self.free: set[str] = set()
        self.free_on: dict[str, dict[str, set[str]]] = {}


def _pinned_label(pv: PersistentVolume) -> tuple[str, set[str]] | None:
    """A label every term of ``pv``'s node affinity requires ``In`` some values (a local volume's hostname), with
    the values any term allows; None when there is no such label."""
    terms = pv.node_affinity
    if not terms:
        return None
    key = next((r.key for r in terms[0].match_expressions if r.operator == "In"), None)
    if key is None:
        return None
    values: set[str] = set()
    for term in terms:
        found = [r for r in term.match_expressions if r.key == key and r.operator == "In"]
        if not found:
            return None
        values.update(found[0].values)
    return key, values


_T = TypeVar("_T")


def _put(into: dict[str, _T], key: str, obj: _T, deleted: bool) -> None:
    if deleted:
        into.pop(key, None)
    else:
        into[key] = obj
