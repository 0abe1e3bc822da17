"""kube-scheduler's volume filters, as pure functions over a pod, the nodes, a
:class:`~kubeflux.scheduler.storage.VolumeBook` and the bound pods (:class:`~kubeflux.scheduler.podterms.PodsByNode`):
shared by the scheduler core (:mod:`kubeflux.scheduler.filtering`) and the simulator's kube-default baseline.

Semantics as kube-scheduler v1.36 defines them (``pkg/scheduler/framework/plugins/{volumerestrictions,
nodevolumelimits,volumebinding,volumezone}``), in its default profile's order, after NodeResourcesFit and before
PodTopologySpread:

* **PreFilter** (:func:`pod_volumes`), whose failure is the whole message (``0/N nodes are available: <why>.``), in
  the plugins' order: a ``persistentVolumeClaim`` volume's claim missing (``persistentvolumeclaim "x" not found``);
  an ephemeral volume's claim missing (``waiting for ephemeral volume controller to create …``) or not owned by the
  pod; a claim lost or being deleted; a claim not bound whose class does not wait for its first consumer
  (``pod has unbound immediate PersistentVolumeClaims``: a missing class, or none, counts as ``Immediate``); a bound
  claim's PersistentVolume missing (``persistentvolume "x" not found``).
* **VolumeRestrictions**: a ``ReadWriteOncePod`` claim already used by a bound pod rules out every node.
* **NodeVolumeLimits**: a node's CSINode limits each driver's volumes (``allocatable.count``): the pod's volumes not
  already on the node, counted by driver beside those of the node's pods, may not exceed it. A volume's driver is its
  PV's CSI driver, or for a claim without a volume its class's provisioner.
* **VolumeBinding**: a bound claim's PV node affinity must match the node (``… didn't match PersistentVolume's node
  affinity``); a claim waiting for its first consumer needs, on that node, an available PV of its class that matches
  it (capacity, access modes, volume mode, selector, node affinity; the smallest is chosen, each PV for one claim),
  or else a class that provisions there (a provisioner, not ``kubernetes.io/no-provisioner``, and the node within
  its ``allowedTopologies``); a claim already given a node (``volume.kubernetes.io/selected-node``) fits only there.
  Else ``node(s) didn't find available persistent volumes to bind``. A bound claim whose volume is missing (an
  ephemeral one: VolumeZone's PreFilter skips those) gives ``… bound to non-existent pv(s)``.
* **VolumeZone**: on a node carrying a zone or region label, the bound PVs' zone and region labels (``__`` separating
  several zones) must hold its value.

Not modelled: the in-tree volume types' disk conflicts (GCE PD, EBS, iSCSI, RBD inline volumes: removed from
Kubernetes' volume plugins), VolumeAttachments counted by NodeVolumeLimits, in-tree to CSI migration, inline CSI
volumes, storage capacity tracking (CSIStorageCapacity) — a class is taken to have room.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Final

from kubeflux.scheduler.constraints import matches_terms
from kubeflux.scheduler.objects import Node, Pod
from kubeflux.scheduler.podterms import PodsByNode
from kubeflux.scheduler.storage import (
    NO_PROVISIONER,
    READ_WRITE_ONCE_POD,
    ClaimBinding,
    PersistentVolume,
    PersistentVolumeClaim,
    VolumeBook,
)

__all__ = [
    "REASON_BIND_CONFLICT",
    "REASON_MAX_VOLUMES",
    "REASON_NODE_CONFLICT",
    "REASON_PV_NOT_EXIST",
    "REASON_READ_WRITE_ONCE_POD",
    "REASON_UNBOUND_IMMEDIATE",
    "REASON_ZONE_CONFLICT",
    "PodVolumes",
    "claim_bindings",
    "find_volumes",
    "pod_volumes",
    "read_write_once_pod_claims",
    "volume_reasons",
]

REASON_READ_WRITE_ONCE_POD: Final = (
    "node(s) unavailable due to PersistentVolumeClaim with ReadWriteOncePod access mode already in-use by another pod"
)
REASON_MAX_VOLUMES: Final = "node(s) exceed max volume count"
REASON_NODE_CONFLICT: Final = "node(s) didn't match PersistentVolume's node affinity"
REASON_BIND_CONFLICT: Final = "node(s) didn't find available persistent volumes to bind"
REASON_PV_NOT_EXIST: Final = "node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)"
REASON_ZONE_CONFLICT: Final = "node(s) had no available volume zone"
REASON_UNBOUND_IMMEDIATE: Final = "pod has unbound immediate PersistentVolumeClaims"
ZONE_LABELS: Final = (
    "failure-domain.beta.kubernetes.io/zone",
    "failure-domain.beta.kubernetes.io/region",
    "topology.kubernetes.io/zone",
    "topology.kubernetes.io/region",
)
_GA_LABEL: Final = {
    "failure-domain.beta.kubernetes.io/zone": "topology.kubernetes.io/zone",
    "failure-domain.beta.kubernetes.io/region": "topology.kubernetes.io/region",
}


@dataclass(slots=True)
class PodVolumes:
    """What the volume filters read of a pod's claims, found once for a pod (its PreFilter)."""

    bound: list[PersistentVolumeClaim] = field(default_factory=list)
    """Its claims bound to a volume."""
    delayed: list[PersistentVolumeClaim] = field(default_factory=list)
    """Its unbound claims whose class waits for their first consumer."""
    read_write_once_in_use: bool = False
    """One of its ``ReadWriteOncePod`` claims is used by a bound pod."""
    zones: list[tuple[str, frozenset[str]]] = field(default_factory=list)
    """Its bound PVs' zone and region labels: (label, values)."""
    attached: dict[str, str] = field(default_factory=dict)
    """Its volumes a node's attach limit counts: unique name → CSI driver."""


def pod_volumes(pod: Pod, book: VolumeBook, pods: PodsByNode) -> PodVolumes | str:
    """The volume PreFilters for ``pod`` (which names claims): what its filters read, or why no node may take it
    (kube-scheduler's PreFilter message; see the module docstring)."""
    namespace = pod.namespace
    claims = book.claims
    read_write_once: set[str] = set()
    for claim in pod.volume_claims:  # VolumeRestrictions
        if claim.ephemeral:
            continue
        found = claims.get(f"{namespace}/{claim.name}")
        if found is None:
            return f'persistentvolumeclaim "{claim.name}" not found'
        if READ_WRITE_ONCE_POD in found.access_modes:
            read_write_once.add(found.name)
    made = PodVolumes()
    found_claims: list[PersistentVolumeClaim] = []
    for claim in pod.volume_claims:  # VolumeBinding
        pvc = claims.get(f"{namespace}/{claim.name}")
        if pvc is None:
            return f'waiting for ephemeral volume controller to create the persistentvolumeclaim "{claim.name}"'
        if pvc.phase == "Lost":
            return f'persistentvolumeclaim "{pvc.name}" bound to non-existent persistentvolume "{pvc.volume_name}"'
        if pvc.deleted:
            return f'persistentvolumeclaim "{pvc.name}" is being deleted'
        if claim.ephemeral and pvc.owner_uid != pod.uid:
            return f"PVC {namespace}/{pvc.name} was not created for pod {namespace}/{pod.name} (pod is not owner)"
        found_claims.append(pvc)
    for pvc in found_claims:
        if pvc.bound:
            made.bound.append(pvc)
        elif _waits_for_consumer(pvc, book) and not pvc.volume_name:
            made.delayed.append(pvc)
        else:
            return REASON_UNBOUND_IMMEDIATE
    for claim, pvc in zip(pod.volume_claims, found_claims, strict=True):  # VolumeZone
        if claim.ephemeral or not pvc.volume_name:
            continue
        pv = book.volumes.get(pvc.volume_name)
        if pv is None:
            return f'persistentvolume "{pvc.volume_name}" not found'
        made.zones.extend(_zones(pv))
    if read_write_once:
        made.read_write_once_in_use = _in_use(read_write_once, namespace, pods)
    made.attached = _attachable(found_claims, book)
    return made


def _waits_for_consumer(pvc: PersistentVolumeClaim, book: VolumeBook) -> bool:
    """``IsDelayBindingMode``: the claim's class exists and waits for its first consumer."""
    sc = book.classes.get(pvc.storage_class) if pvc.storage_class else None
    return sc is not None and sc.wait_for_first_consumer


def _zones(pv: PersistentVolume) -> list[tuple[str, frozenset[str]]]:
    """``getPVTopologies``: the PV's zone and region labels, each value split at ``__`` (a label with an empty part
    is ignored, as kube-scheduler ignores what it cannot parse)."""
    found = []
    for key in ZONE_LABELS:
        value = pv.labels.get(key)
        if value is None:
            continue
        parts = [part.strip() for part in value.split("__")]
        if all(parts):
            found.append((key, frozenset(parts)))
    return found


def _in_use(names: set[str], namespace: str, pods: PodsByNode) -> bool:
    """Whether a bound pod uses one of the claims ``names`` of ``namespace`` by a ``persistentVolumeClaim`` volume
    (the snapshot's used claims: a pod that ended no longer counts)."""
    return any(
        pod.volume_claims
        and pod.namespace == namespace
        and not pod.phase.terminal
        and any(not claim.ephemeral and claim.name in names for claim in pod.volume_claims)
        for pod in pods.bound.values()
    )


def _attachable(pvcs: Iterable[PersistentVolumeClaim], book: VolumeBook) -> dict[str, str]:
    """``filterAttachableVolumes``: the claims' volumes as an attach limit counts them, unique name → driver. A
    claim's driver and handle are its PV's CSI source; without a volume its class's provisioner, the claim naming
    the volume to come; a PV that is not CSI, or a claim of no known class, is not counted."""
    found: dict[str, str] = {}
    for pvc in pvcs:
        pv = book.volumes.get(pvc.volume_name) if pvc.volume_name else None
        if pv is not None:
            if pv.csi_driver and pv.csi_handle:
                found[f"{pv.csi_driver}/{pv.csi_handle}"] = pv.csi_driver
            continue
        sc = book.classes.get(pvc.storage_class) if pvc.storage_class else None
        if sc is not None and sc.provisioner:
            found[f"{sc.provisioner}/claim-{pvc.namespace}/{pvc.name}"] = sc.provisioner
    return found


def volume_reasons(
    pod: Pod,
    volumes: PodVolumes,
    names: Iterable[str],
    nodes: Mapping[str, Node],
    book: VolumeBook,
    pods: PodsByNode,
) -> dict[str, str]:
    """The nodes among ``names`` that the volume filters refuse ``pod`` (read by :func:`pod_volumes`), with the
    first failing plugin's reasons joined by ``"\\n"`` (VolumeBinding may give two)."""
    refused: dict[str, str] = {}
    if volumes.read_write_once_in_use:
        return dict.fromkeys(names, REASON_READ_WRITE_ONCE_POD)
    limited = _limited(volumes, book, pods)
    for name in names:
        node = nodes[name]
        if limited is not None and _over_limit(name, volumes, book, limited):
            refused[name] = REASON_MAX_VOLUMES
            continue
        reasons, _ = find_volumes(volumes, node, book)
        if reasons:
            refused[name] = "\n".join(reasons)
        elif volumes.zones and not _in_zone(volumes, node):
            refused[name] = REASON_ZONE_CONFLICT
    return refused


def _limited(volumes: PodVolumes, book: VolumeBook, pods: PodsByNode) -> dict[str, dict[str, str]] | None:
    """For an attach limit, the volumes of each node's bound pods (node → unique name → driver); None when no
    node limits a driver of the pod's volumes."""
    drivers = set(volumes.attached.values())
    if not drivers or not any(drivers & csinode.limits.keys() for csinode in book.csinodes.values()):
        return None
    by_node: dict[str, dict[str, str]] = {}
    node_of = pods.node_of
    claims = book.claims
    for uid, other in pods.bound.items():
        if not other.volume_claims:
            continue
        found = [claims.get(f"{other.namespace}/{claim.name}") for claim in other.volume_claims]
        by_node.setdefault(node_of[uid], {}).update(_attachable((pvc for pvc in found if pvc is not None), book))
    return by_node


def _over_limit(name: str, volumes: PodVolumes, book: VolumeBook, limited: dict[str, dict[str, str]]) -> bool:
    csinode = book.csinodes.get(name)
    if csinode is None or not csinode.limits:
        return False
    there = limited.get(name, {})
    new: dict[str, int] = {}
    for unique, driver in volumes.attached.items():
        if unique not in there:
            new[driver] = new.get(driver, 0) + 1
    if not new:
        return False
    counts: dict[str, int] = {}
    for driver in there.values():
        counts[driver] = counts.get(driver, 0) + 1
    return any(
        driver in csinode.limits and counts.get(driver, 0) + count > csinode.limits[driver]
        for driver, count in new.items()
    )


def _in_zone(volumes: PodVolumes, node: Node) -> bool:
    labels = node.labels
    if not any(key in labels for key in ZONE_LABELS):
        return True  # a node without zone labels: a single-zone cluster
    for key, values in volumes.zones:
        value = labels.get(key)
        if value is None:
            value = labels.get(_GA_LABEL.get(key, key))
        if value is None or value not in values:
            return False
    return True


def find_volumes(
    volumes: PodVolumes, node: Node, book: VolumeBook
) -> tuple[list[str], list[tuple[PersistentVolumeClaim, str]]]:
    """``FindPodVolumes`` on ``node``: VolumeBinding's reasons (empty: it fits), and each waiting claim's binding
    there: the PV chosen for it, or "" to provision."""
    bound_ok, bound_found = _check_bound(volumes.bound, node, book)
    unbound_ok = True
    chosen: list[tuple[PersistentVolumeClaim, str]] = []
    if volumes.delayed:
        to_match = []
        to_provision = []
        for pvc in volumes.delayed:
            if pvc.selected_node is not None:
                if pvc.selected_node != node.name:
                    unbound_ok = False
                    break
                to_provision.append(pvc)
            else:
                to_match.append(pvc)
        if unbound_ok:
            taken: set[str] = set()
            for pvc in sorted(to_match, key=lambda c: c.request):
                pv = _matching_volume(pvc, book, node, taken)
                if pv is None:
                    to_provision.append(pvc)
                    unbound_ok = False
                else:
                    taken.add(pv.name)
                    chosen.append((pvc, pv.name))
            if to_provision:
                unbound_ok = all(_provisions(pvc, book, node) for pvc in to_provision)
                chosen += [(pvc, "") for pvc in to_provision]
    reasons = []
    if not bound_ok:
        reasons.append(REASON_NODE_CONFLICT)
    if not unbound_ok:
        reasons.append(REASON_BIND_CONFLICT)
    if not bound_found:
        reasons.append(REASON_PV_NOT_EXIST)
    return reasons, chosen


def _check_bound(bound: list[PersistentVolumeClaim], node: Node, book: VolumeBook) -> tuple[bool, bool]:
    """``checkBoundClaims``: (their volumes' node affinity matches ``node``, their volumes exist), stopping at the
    first that does not (an ephemeral claim's missing volume gets here: VolumeZone skips it)."""
    for pvc in bound:
        pv = book.volumes.get(pvc.volume_name)
        if pv is None:
            return True, False
        if not _pv_fits(pv, node):
            return False, True
    return True, True


def _pv_fits(pv: PersistentVolume | None, node: Node) -> bool:
    """``CheckNodeAffinity`` (a PV missing is a PreFilter failure: not asked here)."""
    return pv is None or not pv.node_affinity or matches_terms(pv.node_affinity, node)


def _provisions(pvc: PersistentVolumeClaim, book: VolumeBook, node: Node) -> bool:
    """``checkVolumeProvisions`` for one claim: its class provisions, on ``node`` (``allowedTopologies``)."""
    sc = book.classes.get(pvc.storage_class)
    if sc is None or not sc.provisioner or sc.provisioner == NO_PROVISIONER:
        return False
    return not sc.allowed_topologies or matches_terms(sc.allowed_topologies, node)


def _matching_volume(
    pvc: PersistentVolumeClaim, book: VolumeBook, node: Node, taken: set[str]
) -> PersistentVolume | None:
    """``FindMatchingVolume``: a PV pre-bound to the claim (when it fits the node; else none), or the smallest
    available one of its class that matches it and the node (the first by name among the smallest). Only the
    volumes the book's index says may match are looked at (:meth:`~kubeflux.scheduler.storage.VolumeBook.candidates`).
    """
    claimed, free = book.candidates(pvc.storage_class, pvc.key, node.labels)
    volumes = book.volumes
    for name in claimed:
        pv = volumes[name]
        if name in taken or not _bound_to(pv, pvc) or not _same_kind(pv, pvc):
            continue
        return pv if _pv_fits(pv, node) else None
    best: PersistentVolume | None = None
    for name in free:
        pv = volumes[name]
        if name in taken or not _same_kind(pv, pvc):
            continue
        if pv.phase != "Available" or (pvc.selector is not None and not pvc.selector.matches(pv.labels)):
            continue
        if not _pv_fits(pv, node) or not pvc.access_modes <= pv.access_modes:
            continue
        if best is None or (pv.capacity, pv.name) < (best.capacity, best.name):
            best = pv
    return best


def _same_kind(pv: PersistentVolume, pvc: PersistentVolumeClaim) -> bool:
    """The claim's size, volume mode and attributes class fit ``pv``, which is not being deleted."""
    return (
        pv.capacity >= pvc.request
        and pv.block == pvc.block
        and pv.attributes_class == pvc.attributes_class
        and not pv.deleted
    )


def _bound_to(pv: PersistentVolume, pvc: PersistentVolumeClaim) -> bool:
    ref = pv.claim
    return ref is not None and ref.name == pvc.name and ref.namespace == pvc.namespace and ref.uid in ("", pvc.uid)


def claim_bindings(pod: Pod, node: Node, book: VolumeBook, pods: PodsByNode) -> tuple[ClaimBinding, ...] | str:
    """What binding ``pod`` to ``node`` writes for its waiting claims (:class:`ClaimBinding`), assumed in ``book``
    at once (kube-scheduler's ``AssumePodVolumes``); () for a pod without such claims. When its claims do not fit
    ``node`` as the book now is (the claim given another node, or the volume taken, by a pod placed beside it in the
    same pass: a gang's members), nothing is assumed and VolumeBinding's reasons are returned instead."""
    if not pod.volume_claims:
        return ()
    volumes = pod_volumes(pod, book, pods)
    if isinstance(volumes, str):
        return volumes
    if not volumes.delayed:
        return ()
    reasons, chosen = find_volumes(volumes, node, book)
    if reasons:
        return "\n".join(reasons)
    made = tuple(
        ClaimBinding(pvc.key, pvc.uid, node.name, pv, book.volumes[pv].resource_version if pv else pvc.resource_version)
        for pvc, pv in chosen
        if pv or not pvc.selected_node
    )
    book.assume(made)
    return made


def read_write_once_pod_claims(pod: Pod, book: VolumeBook) -> set[str]:
    """The ``namespace/name`` of ``pod``'s ``ReadWriteOncePod`` claims (one pod at a time may use each)."""
    found = set()
    for claim in pod.volume_claims:
        pvc = book.claims.get(f"{pod.namespace}/{claim.name}")
        if pvc is not None and READ_WRITE_ONCE_POD in pvc.access_modes:
            found.add(pvc.key)
    return found
