"""Dynamic Resource Allocation in the simulated cluster: its DeviceClasses, ResourceSlices and ResourceClaims, and
the part of kube-controller-manager's resourceclaim controller that scheduling depends on.

* the workload's objects (:class:`DeviceObjects`, read from its file) are in the cluster from the start, announced
  to every scheduler after the nodes;
* a pod whose ``spec.resourceClaims`` names a ResourceClaimTemplate gets a claim made from it before the pod is
  seen (the controller makes it as the pod is created), named ``<pod>-<claim>-<suffix>`` and annotated
  ``resource.kubernetes.io/pod-claim-name``; the pod's :attr:`~kubeflux.scheduler.objects.Pod.resource_claims` name
  it, as its ``status.resourceClaimStatuses`` would;
* a Bind's claim allocations (:attr:`~kubeflux.scheduler.messages.Bind.resource_claims`) are written to the claims
  before the pod is bound (kube-scheduler's PreBind): a claim missing, or allocated meanwhile to other devices,
  refuses the Bind;
* a Bind's allocation puts the finalizer ``resource.kubernetes.io/delete-protection`` on its claim;
* a scheduler's :class:`~kubeflux.scheduler.messages.Deallocate` clears a claim's allocation and ``reservedFor``
  (unless it changed since the scheduler read it);
* when a pod ends, it leaves its claims' ``reservedFor``; a claim reserved for no pod is deleted when it was made from
  a template for that pod (the controller's clean-up), else deallocated when it has the finalizer (its devices are
  free again), else keeps its allocation (the real controller deallocates only a claim with the finalizer).

Suffixes are drawn from the API server's alphabet (``names.SimpleNameGenerator``'s) by a counter, so runs repeat.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kubeflux.apiobjects.reader import ManifestError
from kubeflux.apiobjects.resourceclaims import (
    API_VERSION,
    FINALIZER,
    claim_from_manifest,
    claim_from_template,
    device_class_from_manifest,
    slice_from_manifest,
    template_from_manifest,
)
from kubeflux.scheduler.claimfreeing import freed
from kubeflux.scheduler.devices import ClaimAllocation, DeviceClass, ResourceClaim, ResourceSlice
from kubeflux.scheduler.interface import Deallocate, EventKind
from kubeflux.scheduler.objects import Pod, ResourceClaimRef

__all__ = ["DEVICE_KINDS", "ClaimController", "DeviceObjects", "name_suffix", "read_device_object"]

DEVICE_KINDS = ("DeviceClass", "ResourceSlice", "ResourceClaim", "ResourceClaimTemplate")

_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
"""The characters of generated name suffixes (``k8s.io/apiserver``'s ``utilrand.String``)."""

Emit = Callable[[EventKind, ResourceClaim | ResourceSlice | DeviceClass], None]


def name_suffix(number: int) -> str:
    """The ``number``-th five-character suffix (``bcdfg``, ``bcdfh``, …)."""
    chars = []
    for _ in range(5):
        number, digit = divmod(number, len(_ALPHABET))
        chars.append(_ALPHABET[digit])
    return "".join(reversed(chars))


@dataclass(slots=True)
class DeviceObjects:
    """A workload's Dynamic Resource Allocation objects, read and validated
    (:mod:`kubeflux.apiobjects.resourceclaims`)."""

    classes: list[DeviceClass] = field(default_factory=list)
    slices: list[ResourceSlice] = field(default_factory=list)
    claims: list[ResourceClaim] = field(default_factory=list)
    templates: dict[str, dict[str, Any]] = field(default_factory=dict)
    """``namespace/name`` → the ResourceClaimTemplate's manifest."""

    def __bool__(self) -> bool:
        return bool(self.classes or self.slices or self.claims or self.templates)


def read_device_object(objects: DeviceObjects, obj: dict[str, Any]) -> None:
    """Add ``obj``, one of :data:`DEVICE_KINDS`, to ``objects``; ManifestError names the field it is refused for."""
    kind = str(obj.get("kind"))
    if obj.get("apiVersion") != API_VERSION:
        raise ManifestError(kind, "apiVersion", f"expected {API_VERSION}, got {obj.get('apiVersion')!r}")
    if kind == "DeviceClass":
        objects.classes.append(device_class_from_manifest(obj))
    elif kind == "ResourceSlice":
        objects.slices.append(slice_from_manifest(obj))
    elif kind == "ResourceClaim":
        objects.claims.append(claim_from_manifest(obj))
    else:
        key, manifest = template_from_manifest(obj)
        objects.templates[key] = manifest


class ClaimController:
    """The claims of one simulated cluster (see the module docstring); ``emit`` sends a watch event."""

    def __init__(self, objects: DeviceObjects, emit: Emit) -> None:
        self.objects = objects
        self.emit = emit
        self.claims: dict[str, ResourceClaim] = {claim.key: claim for claim in objects.claims}
        self.made_for: dict[str, str] = {}
        """Claim key → uid of the pod it was made for from a template (deleted when that pod ends)."""
        self._made = 0
        self.problems: list[str] = []

    def announce(self) -> None:
        """Every class, slice and claim, ADDED (at the start, after the nodes)."""
        items: list[ResourceClaim | ResourceSlice | DeviceClass] = [*self.objects.classes, *self.objects.slices]
        for item in [*items, *self.claims.values()]:
            self.emit(EventKind.ADDED, item)

    def pod_created(self, pod: Pod) -> None:
        """Make the claims of ``pod``'s template entries, and name them in ``pod.resource_claims``."""
        resolved = []
        for ref in pod.resource_claims:
            if ref.claim or not ref.template:
                resolved.append(ref)
                continue
            template = self.objects.templates.get(f"{pod.namespace}/{ref.template}")
            if template is None:  # the controller waits for it: the pod waits for its claim
                self.problems.append(f"pod {pod.key}: resourceclaimtemplate {ref.template!r} not found")
                resolved.append(ref)
                continue
            manifest = claim_from_template(template, pod.name, ref.name, name_suffix(self._made))
            self._made += 1
            manifest["metadata"]["uid"] = f"claim-{self._made}"
            claim = claim_from_manifest(manifest)
            self.claims[claim.key] = claim
            self.made_for[claim.key] = pod.uid
            self.emit(EventKind.ADDED, claim)
            resolved.append(ResourceClaimRef(ref.name, claim.name, ref.template))
        pod.resource_claims = tuple(resolved)

    def bind(self, pod: Pod, allocations: tuple[ClaimAllocation, ...]) -> str:
        """Write ``allocations`` to the claims for binding ``pod`` (PreBind); "" when written, else why not."""
        for made in allocations:
            claim = self.claims.get(made.key)
            if claim is None or (claim.uid and made.uid and claim.uid != made.uid):
                return f'resourceclaims.resource.k8s.io "{made.name}" not found'
            if made.allocate and claim.allocation is not None and claim.allocation != made.results:
                return f"resourceclaim {made.key}: already allocated"
            if not made.allocate and claim.allocation is None and pod.uid not in claim.reserved_for:
                return f"resourceclaim {made.key}: not allocated"  # deallocated since the scheduler read it
        for made in allocations:
            claim = self.claims[made.key]
            allocation = made.results if made.allocate else claim.allocation
            node = made.node if made.allocate else claim.node
            reserved = claim.reserved_for if pod.uid in claim.reserved_for else (*claim.reserved_for, pod.uid)
            finalizers = claim.finalizers
            if made.allocate and FINALIZER not in finalizers:
                finalizers = (*finalizers, FINALIZER)
            self._put(
                dataclasses.replace(
                    claim, allocation=allocation, node=node, reserved_for=reserved, finalizers=finalizers
                )
            )
        return ""

    def unbind(self, pod: Pod, allocations: tuple[ClaimAllocation, ...]) -> None:
        """The Binding after :meth:`bind` was refused: what it wrote for ``pod`` is taken back (kube-scheduler's
        Unreserve)."""
        for made in allocations:
            claim = self.claims.get(made.key)
            if claim is not None and pod.uid in claim.reserved_for:
                reserved = tuple(uid for uid in claim.reserved_for if uid != pod.uid)
                if made.allocate and not reserved:
                    self._put(_deallocated(claim))
                else:
                    self._put(dataclasses.replace(claim, reserved_for=reserved))

    def deallocate(self, decision: Deallocate) -> str:
        """A scheduler frees a pending pod's claim allocated on a node the pod can no longer use (kube-scheduler's
        DynamicResources PostFilter): its allocation and ``reservedFor`` go; "" when written, else why not."""
        made = freed(self.claims.get(decision.claim.key), decision)
        if isinstance(made, str):
            return made
        self._put(made)
        return ""

    def pod_ended(self, pod: Pod) -> None:
        """``pod`` ended or was deleted: it leaves its claims' ``reservedFor``; a claim left to no pod is deleted
        when it was made for that pod, else deallocated when a scheduler's allocation put the ``delete-protection``
        finalizer on it (an allocation without it, written by someone else, is kept, as the real controller keeps
        it)."""
        for ref in pod.resource_claims:
            key = f"{pod.namespace}/{ref.claim}"
            claim = self.claims.get(key)
            if claim is None:
                continue
            reserved = tuple(uid for uid in claim.reserved_for if uid != pod.uid)
            if self.made_for.get(key) == pod.uid:
                del self.claims[key]
                del self.made_for[key]
                self.emit(EventKind.DELETED, claim)
            elif reserved:
                if reserved != claim.reserved_for:
                    self._put(dataclasses.replace(claim, reserved_for=reserved))
            elif FINALIZER in claim.finalizers:
                self._put(_deallocated(claim))
            elif claim.reserved_for:
                self._put(dataclasses.replace(claim, reserved_for=()))

    def _put(self, claim: ResourceClaim) -> None:
        self.claims[claim.key] = claim
        self.emit(EventKind.MODIFIED, claim)


def _deallocated(claim: ResourceClaim) -> ResourceClaim:
    """``claim`` reserved for no pod, its allocation and the ``delete-protection`` finalizer removed."""
    finalizers = tuple(name for name in claim.finalizers if name != FINALIZER)
    return dataclasses.replace(claim, allocation=None, node="", reserved_for=(), finalizers=finalizers)
