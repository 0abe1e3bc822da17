"""What placing a job's pods assumes of their claims at Reserve, once the engine and the exact books gave each pod its
node, as kube-scheduler's VolumeBinding then DynamicResources plugins do (the latter is last in its profile): each
pod's volume claim bindings (:func:`~kubeflux.scheduler.volumes.claim_bindings`), then the devices of its
ResourceClaims (:meth:`~kubeflux.scheduler.devices.DeviceBooks.allocate`), member after member, so that a gang's
members see each other's. When a member's claims do not fit its node beside the members before it, nothing placed is
kept: what was assumed is undone, the allocations released, and the reasons returned (the members were filtered one
at a time, without each other's claims)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Final

from kubeflux.scheduler.allocation import Allocation
from kubeflux.scheduler.books import ClusterBooks
from kubeflux.scheduler.devices import CANNOT_ALLOCATE, ClaimAllocation, ClaimError
from kubeflux.scheduler.filtering import NodeFilter
from kubeflux.scheduler.objects import Pod
from kubeflux.scheduler.storage import ClaimBinding
from kubeflux.scheduler.volumes import REASON_READ_WRITE_ONCE_POD, read_write_once_pod_claims

__all__ = ["GROUP_DEVICES", "Claimed", "assume_devices", "reserve_claims"]

GROUP_DEVICES: Final = "node(s) had too few devices for the claims of all the group's members together"
"""The reason for the nodes when each could give one member its claims' devices but the members placed together do
not all get theirs (never kube-scheduler's "cannot allocate all claims", which says a node cannot serve the pod)."""


@dataclass(frozen=True, slots=True)
class Claimed:
    """What each placed pod's Bind writes before its Binding, by allocation uid."""

    volumes: dict[str, tuple[ClaimBinding, ...]]
    devices: dict[str, tuple[ClaimAllocation, ...]]


def reserve_claims(
    books: ClusterBooks, filter_: NodeFilter, made: list[tuple[Pod, Allocation]]
) -> Claimed | Counter[str]:
    """The claims of the pods ``made`` placed, assumed in ``books``; or, when some do not fit, why (see the module
    docstring), the placement undone."""
    volumes = _volume_bindings(books, filter_, made)
    if isinstance(volumes, str):
        _undo(books, made, f"its volumes do not fit beside its group's: {volumes}")
        return Counter(volumes.split("\n"))
    devices = _device_allocations(books, made) if any(pod.resource_claims for pod, _ in made) else {}
    if devices is None:  # two members filtered before either took its devices
        _undo(books, made, "its claims cannot all be allocated")
        return Counter({CANNOT_ALLOCATE if len(made) == 1 else GROUP_DEVICES: len(books.nodes)})
    return Claimed(volumes, devices)


def _volume_bindings(
    books: ClusterBooks, filter_: NodeFilter, made: list[tuple[Pod, Allocation]]
) -> dict[str, tuple[ClaimBinding, ...]] | str:
    """Each placed pod's claim bindings, assumed member after member; or VolumeBinding's reasons for the first member
    whose claims do not fit its node beside the members before it (a claim waiting for its first consumer given
    another node, a volume taken, a ``ReadWriteOncePod`` claim used twice)."""
    volumes = books.volumes
    found: dict[str, tuple[ClaimBinding, ...]] = {}
    used_once: set[str] = set()
    for pod, alloc in made:
        if not pod.volume_claims:
            found[alloc.uid] = ()
            continue
        once = read_write_once_pod_claims(pod, volumes)
        assumed = volumes.by_pod.get(alloc.uid)  # as the placer assumed them member by member
        if once & used_once:
            return REASON_READ_WRITE_ONCE_POD
        claims = assumed if assumed is not None else filter_.claim_bindings(pod, alloc.node)
        if isinstance(claims, str):
            return claims
        used_once |= once
        found[alloc.uid] = claims
        if claims:
            volumes.by_pod[alloc.uid] = claims
    return found


def _device_allocations(
    books: ClusterBooks, made: list[tuple[Pod, Allocation]]
) -> dict[str, tuple[ClaimAllocation, ...]] | None:
    """The devices of each placed pod's ResourceClaims on its node, assumed in the books until the claims show them;
    None when some pod's cannot all be had there."""
    devices = books.devices
    found: dict[str, tuple[ClaimAllocation, ...]] = {}
    for pod, alloc in made:
        if not pod.resource_claims:
            continue
        claims = devices.by_pod.pop(alloc.uid, None)  # as the placer assumed them member by member
        if claims is None:
            claims = _allocate(books, pod, alloc.node)
            if claims is None:
                return None
            devices.assume(alloc.uid, claims)
            devices.by_pod.pop(alloc.uid)
        found[alloc.uid] = claims
    return found


def assume_devices(books: ClusterBooks, pod: Pod, alloc: Allocation) -> bool:
    """Assume the devices of ``pod``'s ResourceClaims on its node as the placer gives it one (kube-scheduler's
    DynamicResources Reserve), so that a gang's members placed after it see them taken (and a claim it shares
    allocated there); False (its allocation released) when they cannot all be had there."""
    if not pod.resource_claims:
        return True
    claims = _allocate(books, pod, alloc.node)
    if claims is None:
        books.release(alloc.uid, f"its claims cannot all be allocated on node {alloc.node}")
        return False
    books.devices.assume(alloc.uid, claims)
    return True


def _allocate(books: ClusterBooks, pod: Pod, node: str) -> tuple[ClaimAllocation, ...] | None:
    try:
        return books.devices.allocate(pod, node)
    except ClaimError:  # said by the core's problem(), asked before placing
        return None


def _undo(books: ClusterBooks, made: list[tuple[Pod, Allocation]], why: str) -> None:
    """Nothing placed is kept: the claims assumed are reverted, the allocations released (their devices too)."""
    volumes = books.volumes
    for _, alloc in reversed(made):
        volumes.revert(volumes.by_pod.pop(alloc.uid, ()))
        books.release(alloc.uid, why)
