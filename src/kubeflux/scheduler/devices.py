"""Dynamic Resource Allocation (``resource.k8s.io/v1``) in the scheduler core: devices, claims and their allocation,
as kube-scheduler's DynamicResources plugin and its structured allocator (``k8s.io/dynamic-resource-allocation``)
decide them.

What the core holds (:class:`DeviceBooks`, fed by the informer):

* the devices each node publishes in its **ResourceSlices** (one driver, one pool per slice; only the newest
  ``generation`` of a pool counts, as the allocator reads pools);
* the **DeviceClasses** (their CEL selectors);
* the **ResourceClaims**: what each asks (requests of ``exactly`` a device class, ``count`` devices
  (``ExactCount``) or every matching device of the node (``All``), with CEL selectors of their own), and the
  devices already allocated (a claim's ``status.allocation``), plus kubeflux's own allocations decided and not yet
  seen written (:attr:`DeviceBooks.assumed`, kube-scheduler's assume cache): a device is never given twice.

A pod's claims (:attr:`~kubeflux.scheduler.objects.Pod.resource_claims`) are part of what it asks: a node that cannot
allocate all of them is refused with kube-scheduler's words (:data:`CANNOT_ALLOCATE`), one whose allocated claim
is bound to another node with :data:`NOT_AVAILABLE`, after every other filter (DynamicResources is the last of the
default profile's filters). When the pod is bound, :meth:`DeviceBooks.allocate` picks the devices on its node
(requests in order, devices in pool order, with backtracking) and the Bind carries them (:class:`ClaimAllocation`),
which the shells write to each claim's status as the plugin's PreBind does.

CEL selectors are given to the core already compiled (:class:`DeviceSelector`, built by
:mod:`kubeflux.apiobjects.devicecel`): the core never reads the wire format. A selector runs only on the devices of
the nodes every other filter passed (:meth:`DeviceBooks.refusals`, DynamicResources' Filter); one that fails there
(an attribute a device lacks, a type mismatch, a division by zero) fails the pod's scheduling with a
:class:`ClaimError` naming the claim (or class), the request and the selector (:meth:`DeviceBooks.failure`), as the
allocator's "CEL runtime error" does.

The engine's graph does not hold devices (yet): a device's attributes are matched by CEL, which the engine cannot
evaluate, and which devices of a node a request may take depends on the request, so the books decide devices and the
engine the node's cores (see docs/dra.md).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Final, Protocol

from kubeflux.scheduler.objects import Pod
from kubeflux.scheduler.validation import PodRequestError

__all__ = [
    "ALL",
    "CANNOT_ALLOCATE",
    "EXACT_COUNT",
    "NOT_AVAILABLE",
    "AllocatedDevice",
    "ClaimAllocation",
    "ClaimError",
    "Device",
    "DeviceBooks",
    "DeviceClass",
    "DeviceRequest",
    "DeviceSelector",
    "ResourceClaim",
    "ResourceSlice",
    "Version",
]

CANNOT_ALLOCATE: Final = "cannot allocate all claims"
"""kube-scheduler's reason for a node where the pod's claims cannot all be allocated."""
NOT_AVAILABLE: Final = "resourceclaim not available on the node"
"""kube-scheduler's reason for a node other than the one an allocated claim of the pod is bound to."""
EXACT_COUNT: Final = "ExactCount"
ALL: Final = "All"
SEARCH_STEPS: Final = 100_000
"""Devices tried at most in one node's allocation search (a claim of many requests over many alike devices); past
it the node is refused, as the allocator gives up past its own bound."""


class ClaimError(PodRequestError):
    """A pod's claims cannot be used: a selector that fails on a device; names the claim, request and selector."""


@dataclass(frozen=True, slots=True)
class Version:
    """A device attribute of type ``version`` (semantic version 2.0.0 text, ``1.2.3``)."""

    text: str


AttributeValue = bool | int | str | Version


@dataclass(frozen=True, slots=True)
class Device:
    """One device of a ResourceSlice: its name (unique in its pool), attributes and capacity by qualified name (an
    unqualified name is in the driver's domain), capacity as quantity text (``40Gi``)."""

    name: str
    attributes: Mapping[str, AttributeValue] = field(default_factory=dict)
    capacity: Mapping[str, str] = field(default_factory=dict)
    allow_multiple_allocations: bool = False
    """``allowMultipleAllocations`` (a selector reads it; kubeflux still gives the device to one claim at a time)."""


class DeviceSelector(Protocol):
    """A compiled CEL selector (``selectors[].cel.expression``) over a device of ``driver``: True when it matches;
    raises ValueError with the evaluation's error when it fails at run time."""

    @property
    def expression(self) -> str: ...

    def matches(self, device: Device, driver: str) -> bool: ...


@dataclass(frozen=True, slots=True)
class ResourceSlice:
    """A ``ResourceSlice``: devices of one ``driver`` in one ``pool`` (its ``generation``, of ``slice_count``
    slices), published for ``node`` (empty: not a node-local slice, which kubeflux does not use yet)."""

    name: str
    driver: str
    pool: str
    node: str
    devices: tuple[Device, ...] = ()
    generation: int = 0
    slice_count: int = 1


@dataclass(frozen=True, slots=True)
class DeviceClass:
    name: str
    selectors: tuple[DeviceSelector, ...] = ()


@dataclass(frozen=True, slots=True)
class DeviceRequest:
    """One ``spec.devices.requests[]`` entry, its ``exactly`` part: ``count`` devices of ``device_class`` (mode
    :data:`EXACT_COUNT`), or every matching device of the node (:data:`ALL`), each matching every selector."""

    name: str
    device_class: str
    mode: str = EXACT_COUNT
    count: int = 1
    selectors: tuple[DeviceSelector, ...] = ()


@dataclass(frozen=True, slots=True)
class AllocatedDevice:
    """One ``status.allocation.devices.results[]`` entry."""

    request: str
    driver: str
    pool: str
    device: str

    @property
    def id(self) -> tuple[str, str, str]:
        return (self.driver, self.pool, self.device)


@dataclass(frozen=True, slots=True)
class ResourceClaim:
    """A ``ResourceClaim``: what it asks, and (``allocation`` not None) the devices allocated, on ``node`` (the
    allocation's node selector), and the pod uids it is reserved for."""

    namespace: str
    name: str
    uid: str = ""
    requests: tuple[DeviceRequest, ...] = ()
    allocation: tuple[AllocatedDevice, ...] | None = None
    node: str = ""
    reserved_for: tuple[str, ...] = ()
    resource_version: str = ""
    """``metadata.resourceVersion`` as read ("" when unknown): a scheduler's write of the claim is conditional on it."""
    finalizers: tuple[str, ...] = ()
    deleting: bool = False
    """Its ``deletionTimestamp`` is set: Terminating (its finalizer keeps it while a pod uses it); never allocated."""

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True, slots=True)
class ClaimAllocation:
    """What binding a pod does to one of its claims: its allocation (``results`` on ``node``) when it had none
    (``allocate``), and the pod among those it is reserved for; a shell writes both to the claim's status before the
    Binding (kube-scheduler's PreBind)."""

    namespace: str
    name: str
    uid: str
    node: str
    results: tuple[AllocatedDevice, ...]
    allocate: bool = True
    reserved: bool = False
    """The claim's ``reservedFor`` holds the pod already (a Bind written before a restart, or another scheduler's
    write): nothing is written, as kube-scheduler's PreBind skips a claim ``IsReservedForPod``."""
    resource_version: str = ""
    """The claim's ``resourceVersion`` as read: the write is refused (409) when the claim changed since."""
    finalizers: tuple[str, ...] = ()
    """The claim's finalizers as read (the write of an allocation adds ``delete-protection`` when missing)."""

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


DeviceRef = tuple[str, str, Device]
"""(driver, pool, device): a device as a node offers it."""


class DeviceBooks:
    """The devices, classes and claims the scheduler knows, and which devices are taken (see the module docstring)."""

    def __init__(self) -> None:
        self.slices: dict[str, ResourceSlice] = {}
        self.classes: dict[str, DeviceClass] = {}
        self.claims: dict[str, ResourceClaim] = {}
        self.assumed: dict[str, tuple[str, ClaimAllocation]] = {}
        """Claim key → (pod uid, allocation) kubeflux decided and has not yet seen in the claim's status."""
        self.binding: dict[str, set[str]] = {}
        """Claim key → the pods (uids) whose Bind reserves the claim and that the claim does not show reserved yet
        (a Bind in flight: :meth:`bound`); no pod's claim among them is freed (:mod:`kubeflux.scheduler.
        claimfreeing`)."""
        self.by_pod: dict[str, tuple[ClaimAllocation, ...]] = {}
        """Pod uid → what its Bind writes for its claims, assumed while its job is being placed (a gang's members
        one after the other, each seeing the devices of those before it) and taken by the job's Binds."""
        self.version = 0
        """Bumped at every change: a fit computed at another version is stale."""
        self._by_node: dict[str, list[DeviceRef]] | None = None
        self.failures: dict[str, str] = {}
        """Pod uid → the CEL runtime error its last :meth:`refusals` met (see there)."""
        self._matches: dict[tuple[str, str, str, str], bool] = {}
        """(expression, driver, pool, device) → whether the selector matches the device (kept until slices change)."""

    # ================================================================== events

    def put_slice(self, item: ResourceSlice, deleted: bool = False) -> None:
        if deleted:
            self.slices.pop(item.name, None)
        else:
            self.slices[item.name] = item
        self._by_node = None
        self._matches.clear()
        self.version += 1

    def put_class(self, item: DeviceClass, deleted: bool = False) -> None:
        if deleted:
            self.classes.pop(item.name, None)
        else:
            self.classes[item.name] = item
        self.version += 1

    def put_claim(self, claim: ResourceClaim, deleted: bool = False) -> None:
        key = claim.key
        if deleted:
            self.claims.pop(key, None)
            self.assumed.pop(key, None)
            self.binding.pop(key, None)
        else:
            self.claims[key] = claim
            if claim.allocation is not None:  # the allocation is written: the claim's own status counts now
                self.assumed.pop(key, None)
            waiting = self.binding.get(key)
            if waiting is not None:
                waiting.difference_update(claim.reserved_for)
                if not waiting:
                    del self.binding[key]
        self.version += 1

    def observe(self, obj: ResourceSlice | DeviceClass | ResourceClaim, deleted: bool) -> None:
        """A watch event of ``obj`` (``deleted``: its last state)."""
        if isinstance(obj, ResourceSlice):
            self.put_slice(obj, deleted)
        elif isinstance(obj, DeviceClass):
            self.put_class(obj, deleted)
        else:
            self.put_claim(obj, deleted)

    def assume(self, uid: str, allocations: tuple[ClaimAllocation, ...]) -> None:
        """Count ``allocations``, decided for the pod of ``uid``, until their claims show them."""
        for allocation in allocations:
            if allocation.allocate:
                self.assumed[allocation.key] = (uid, allocation)
        self.by_pod[uid] = allocations
        self.version += 1

    def bound(self, uid: str, allocations: tuple[ClaimAllocation, ...]) -> None:
        """The pod of ``uid`` is bound with ``allocations``: its claims are being reserved for it until they show
        it (:attr:`binding`)."""
        for allocation in allocations:
            self.binding.setdefault(allocation.key, set()).add(uid)

    def forget(self, uid: str) -> None:
        """The pod of ``uid`` ended, was deleted or its Bind was refused: what kubeflux assumed for it goes. (Its
        claims' written allocations go when the claims change: the resourceclaim controller's work.)"""
        self.failures.pop(uid, None)
        for key in [key for key, uids in self.binding.items() if uid in uids]:
            uids = self.binding[key]
            uids.discard(uid)
            if not uids:
                del self.binding[key]
        gone = [key for key, (owner, _) in self.assumed.items() if owner == uid]
        for key in gone:
            del self.assumed[key]
        if self.by_pod.pop(uid, None) is not None or gone:
            self.version += 1

    # ================================================================== the filter

    def waiting(self, pod: Pod) -> str | None:
        """Why ``pod`` cannot be scheduled on any node yet (kube-scheduler's PreFilter), or None: a claim not
        created yet (from its template) or not found, or a request naming a device class that does not exist."""
        for ref in pod.resource_claims:
            if not ref.claim:
                return f'waiting for resource claim "{ref.name}" of pod {pod.key} to be created from its template'
            claim = self.claims.get(f"{pod.namespace}/{ref.claim}")
            if claim is None:
                return f'resourceclaim "{ref.claim}" not found'
            if claim.deleting:  # Terminating: its allocation still counts until the controller frees it
                return f'resourceclaim "{ref.claim}" is being deleted'
            if claim.allocation is None:
                for request in claim.requests:
                    if request.device_class not in self.classes:
                        return (
                            f"claim {claim.key}, request {request.name}: "
                            f'deviceclass.resource.k8s.io "{request.device_class}" not found'
                        )
        return None

    def refusals(self, pod: Pod, nodes: Iterable[str]) -> dict[str, str]:
        """The nodes among ``nodes`` (those every other filter passed) where ``pod``'s claims cannot be allocated (or
        are bound elsewhere), with kube-scheduler's reason. A selector that fails on a device of one of them fails
        the whole Filter, as the allocator's CEL runtime error does: every node is refused, and :meth:`failure`
        says why until the next call for the pod (a node no other filter passed is never evaluated)."""
        self.failures.pop(pod.uid, None)
        nodes = list(nodes)
        claims = self._claims_of(pod)
        if len(claims) < len(
            {ref.claim for ref in pod.resource_claims}
        ):  # one missing (kept waiting by :meth:`waiting`)
            return dict.fromkeys(nodes, CANNOT_ALLOCATE)
        used = self.in_use()
        refused: dict[str, str] = {}
        for name in nodes:
            if any(self._node_of(claim) not in ("", name) for claim in claims):
                refused[name] = NOT_AVAILABLE
                continue
            try:
                if self._search(claims, name, used) is None:
                    refused[name] = CANNOT_ALLOCATE
            except ClaimError as exc:
                self.failures[pod.uid] = str(exc)
                return dict.fromkeys(nodes, CANNOT_ALLOCATE)
        return refused

    def failure(self, pod: Pod) -> str | None:
        """The CEL runtime error the last :meth:`refusals` of ``pod`` met (naming the claim or class, the request,
        the selector and the device), which fails its scheduling; None when it met none."""
        return self.failures.get(pod.uid)

    def allocate(self, pod: Pod, node: str) -> tuple[ClaimAllocation, ...] | None:
        """What binding ``pod`` to ``node`` does to each of its claims, or None when they cannot all be allocated
        there. Raises :class:`ClaimError` when a selector fails."""
        claims = self._claims_of(pod)
        if any(self._node_of(claim) not in ("", node) for claim in claims):  # allocated (or assumed) elsewhere
            return None
        picks = self._search(claims, node, self.in_use())
        if picks is None:
            return None
        made = []
        for claim in claims:
            known = self._allocation_of(claim)
            version, fin = claim.resource_version, claim.finalizers
            if known is not None:
                reserved = pod.uid in claim.reserved_for
                made.append(
                    ClaimAllocation(
                        claim.namespace,
                        claim.name,
                        claim.uid,
                        self._node_of(claim),
                        known,
                        False,
                        reserved,
                        version,
                        fin,
                    )
                )
            else:
                results = tuple(picks[(claim.key, i)] for i in range(len(claim.requests)))
                flat = tuple(device for devices in results for device in devices)
                made.append(
                    ClaimAllocation(claim.namespace, claim.name, claim.uid, node, flat, True, False, version, fin)
                )
        return tuple(made)

    # ================================================================== the search

    def _claims_of(self, pod: Pod) -> list[ResourceClaim]:
        """The pod's claims known, each once (two entries may name one claim: it is allocated once, as kube's)."""
        claims = self.claims
        keys = dict.fromkeys(f"{pod.namespace}/{ref.claim}" for ref in pod.resource_claims)
        found = [claims.get(key) for key in keys]
        return [claim for claim in found if claim is not None]

    def _allocation_of(self, claim: ResourceClaim) -> tuple[AllocatedDevice, ...] | None:
        if claim.allocation is not None:
            return claim.allocation
        assumed = self.assumed.get(claim.key)
        return assumed[1].results if assumed is not None else None

    def _node_of(self, claim: ResourceClaim) -> str:
        if claim.allocation is not None:
            return claim.node
        assumed = self.assumed.get(claim.key)
        return assumed[1].node if assumed is not None else ""

    def in_use(self) -> set[tuple[str, str, str]]:
        """Every device allocated to a claim, written or assumed."""
        used = {device.id for claim in self.claims.values() for device in claim.allocation or ()}
        used.update(device.id for _, allocation in self.assumed.values() for device in allocation.results)
        return used

    def in_use_by(self, holding: Callable[[str], bool]) -> set[tuple[str, str, str]]:
        """The devices allocated to a claim (written or assumed) that some pod it is reserved for, by uid, is
        ``holding`` (at some later time: a claim no pod holds any more is deallocated by its controller)."""
        used = {
            device.id
            for claim in self.claims.values()
            if claim.allocation and any(map(holding, claim.reserved_for))
            for device in claim.allocation
        }
        used.update(
            device.id for uid, allocation in self.assumed.values() if holding(uid) for device in allocation.results
        )
        return used

    def free_on(self, node: str, used: set[tuple[str, str, str]]) -> int:
        """How many devices ``node`` publishes that are not ``used`` (:meth:`in_use`), of any class."""
        return sum(1 for driver, pool, device in self.devices_on(node) if (driver, pool, device.name) not in used)

    def least_needed(self, pod: Pod, counted: set[str]) -> int:
        """The fewest devices ``pod``'s claims not yet allocated, and not among the claim keys ``counted`` (added
        to it), take on its node: each ``ExactCount`` request's count (``All``: none known)."""
        need = 0
        for claim in self._claims_of(pod):
            if claim.key in counted or self._allocation_of(claim) is not None:
                continue
            counted.add(claim.key)
            need += sum(request.count for request in claim.requests if request.mode == EXACT_COUNT)
        return need

    def devices_on(self, node: str) -> list[DeviceRef]:
        """The devices ``node`` publishes, pools in (driver, pool) order, each pool's newest generation only."""
        by_node = self._by_node
        if by_node is None:
            newest: dict[tuple[str, str], int] = {}
            for item in self.slices.values():
                pool = (item.driver, item.pool)
                newest[pool] = max(newest.get(pool, item.generation), item.generation)
            slices = sorted(self.slices.values(), key=lambda s: (s.driver, s.pool, s.name))
            by_node = {}
            for item in slices:
                if item.node and item.generation == newest[(item.driver, item.pool)]:
                    by_node.setdefault(item.node, []).extend((item.driver, item.pool, d) for d in item.devices)
            self._by_node = by_node
        return by_node.get(node, [])

    def _search(
        self, claims: list[ResourceClaim], node: str, used: set[tuple[str, str, str]]
    ) -> dict[tuple[str, int], tuple[AllocatedDevice, ...]] | None:
        """The devices of ``node`` not in ``used`` for each request of the unallocated ``claims`` (keyed by claim and
        request index), or None when they cannot all be had: the allocator's search, requests in order, devices in
        pool order, backtracking when a later request finds too few."""
        devices = self.devices_on(node)
        wanted: list[tuple[ResourceClaim, int, DeviceRequest, list[int]]] = []
        for claim in claims:
            if self._allocation_of(claim) is not None:
                continue
            for index, request in enumerate(claim.requests):
                wanted.append((claim, index, request, self._candidates(claim, request, devices)))
        if not wanted:
            return {}
        free = [(driver, pool, device.name) not in used for driver, pool, device in devices]
        chosen: list[list[int]] = []
        steps = [0]

        def place(at: int) -> bool:
            if at == len(wanted):
                return True
            _, _, request, candidates = wanted[at]
            if request.mode == ALL:
                if not candidates or not all(free[i] for i in candidates):
                    return False
                return take(at, list(candidates))
            return pick(at, candidates, 0, [], request.count)

        def take(at: int, picked: list[int]) -> bool:
            for i in picked:
                free[i] = False
            chosen.append(picked)
            if place(at + 1):
                return True
            chosen.pop()
            for i in picked:
                free[i] = True
            return False

        def pick(at: int, candidates: list[int], start: int, picked: list[int], count: int) -> bool:
            if len(picked) == count:
                return take(at, list(picked))
            for position in range(start, len(candidates)):
                steps[0] += 1
                if steps[0] > SEARCH_STEPS or len(candidates) - position < count - len(picked):
                    return False
                i = candidates[position]
                if free[i]:
                    picked.append(i)
                    if pick(at, candidates, position + 1, picked, count):
                        return True
                    picked.pop()
            return False

        if not place(0):
            return None
        found: dict[tuple[str, int], tuple[AllocatedDevice, ...]] = {}
        for (claim, index, request, _), picked in zip(wanted, chosen, strict=True):
            found[(claim.key, index)] = tuple(
                AllocatedDevice(request.name, devices[i][0], devices[i][1], devices[i][2].name) for i in picked
            )
        return found

    def _candidates(self, claim: ResourceClaim, request: DeviceRequest, devices: list[DeviceRef]) -> list[int]:
        """The indexes of ``devices`` the request's class and its own selectors match."""
        device_class = self.classes.get(request.device_class)
        if device_class is None:
            return []
        found = []
        for i, (driver, pool, device) in enumerate(devices):
            if self._all_match(
                device_class.selectors, driver, pool, device, f"class {device_class.name}", request
            ) and (self._all_match(request.selectors, driver, pool, device, f"claim {claim.key}", request)):
                found.append(i)
        return found

    def _all_match(
        self,
        selectors: tuple[DeviceSelector, ...],
        driver: str,
        pool: str,
        device: Device,
        owner: str,
        request: DeviceRequest,
    ) -> bool:
        cache = self._matches
        for number, selector in enumerate(selectors):
            key = (selector.expression, driver, pool, device.name)
            known = cache.get(key)
            if known is None:
                try:
                    known = cache[key] = selector.matches(device, driver)
                except ValueError as exc:
                    where = f"{owner}, request {request.name}: selector #{number}"
                    raise ClaimError(
                        f"{where} ({selector.expression!r}): CEL runtime error on device {driver}/{pool}/"
                        f"{device.name}: {exc}"
                    ) from exc
            if not known:
                return False
        return True
