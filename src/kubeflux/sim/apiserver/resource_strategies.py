"""Dynamic Resource Allocation's resources (``resource.k8s.io/v1``), served as the real kube-apiserver v1.36 serves
them (on by default since DRA went GA): ResourceSlices and DeviceClasses (cluster-scoped), ResourceClaims (with a
``status`` subresource, where the scheduler writes the allocation and the pods it is reserved for) and
ResourceClaimTemplates.

Validation is :mod:`kubeflux.apiobjects.resourceclaims`'s, the same reading the schedulers and the simulator's
workload files use: a refusal is a 422 whose cause names the field. What the real server checks that does not
matter to scheduling (the full device attribute name rules, sizes of opaque config) is not checked. A claim's and a
template's ``spec`` are immutable, as on the real server.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kubeflux.apiobjects.reader import ManifestError
from kubeflux.apiobjects.resourceclaims import (
    claim_from_manifest,
    device_class_from_manifest,
    slice_from_manifest,
    template_from_manifest,
)
from kubeflux.sim.apiserver.errors import Cause
from kubeflux.sim.apiserver.registry import ResourceType, Strategy

__all__ = ["resource_types"]

Object = dict[str, Any]
GROUP = "resource.k8s.io"
_REASONS = {"Too long": "FieldValueTooLong", "Forbidden": "FieldValueForbidden", "Required value": "FieldValueRequired"}
"""A cause's reason by its message's first words, as the real server's field errors give it."""


class _ReadStrategy(Strategy):
    """Validated by reading the object as kubeflux reads it; ``immutable_spec``: an update may not change ``spec``."""

    tracks_generation = True

    def __init__(self, read: Callable[[Object], object], immutable_spec: bool = False) -> None:
        self.read = read
        self.immutable_spec = immutable_spec

    def validate(self, obj: Object) -> list[Cause]:
        try:
            self.read(obj)
        except ManifestError as exc:
            return [Cause(exc.path, exc.problem, _REASONS.get(exc.problem.split(":")[0], "FieldValueInvalid"))]
        return []

    def validate_update(self, new: Object, old: Object) -> list[Cause]:
        if self.immutable_spec and new.get("spec") != old.get("spec"):
            return [Cause("spec", "Invalid value: field is immutable")]
        return self.validate(new)


class _SliceStrategy(_ReadStrategy):
    fields = frozenset({"spec.nodeName", "spec.driver", "spec.pool.name"})


class _ClaimStrategy(_ReadStrategy):
    has_status = True
    tracks_generation = False  # the real server gives a ResourceClaim no metadata.generation

    def prepare_create(self, obj: Object, now: str) -> None:
        obj["status"] = {}
        for request in ((obj.get("spec") or {}).get("devices") or {}).get("requests") or []:
            exactly = request.get("exactly") if isinstance(request, dict) else None
            if isinstance(exactly, dict):  # the API's defaults
                mode = exactly.setdefault("allocationMode", "ExactCount")
                if mode == "ExactCount":
                    exactly.setdefault("count", 1)

    def validate_update(self, new: Object, old: Object) -> list[Cause]:
        return _status_causes(new, old) or super().validate_update(new, old)  # a status write changes no spec


def _status_causes(new: Object, old: Object) -> list[Cause]:
    """What the real ``ValidateResourceClaimStatusUpdate`` refuses of a claim's status: a pod reserved twice, a
    reservation without an allocation, a reservation added while the claim is being deleted, and a change of an
    allocation once set (it may only be removed)."""
    status, before = new.get("status") or {}, old.get("status") or {}
    reserved = [entry for entry in status.get("reservedFor") or [] if isinstance(entry, dict)]
    causes = []
    seen: set[object] = set()
    for index, entry in enumerate(reserved):
        uid = entry.get("uid")
        if uid in seen:
            causes.append(Cause(f"status.reservedFor[{index}]", f'Duplicate value: "{uid}"', "FieldValueDuplicate"))
        seen.add(uid)
    if reserved and not status.get("allocation"):
        why = "Forbidden: may not be specified when `allocated` is not set"
        causes.append(Cause("status.reservedFor", why, "FieldValueForbidden"))
    elif reserved and new.get("metadata", {}).get("deletionTimestamp"):
        known = {entry.get("uid") for entry in before.get("reservedFor") or [] if isinstance(entry, dict)}
        if any(entry.get("uid") not in known for entry in reserved):
            why = "Forbidden: new entries may not be added while `deallocationRequested` or `deletionTimestamp` are set"
            causes.append(Cause("status.reservedFor", why, "FieldValueForbidden"))
    if before.get("allocation") and status.get("allocation") and status["allocation"] != before["allocation"]:
        causes.append(Cause("status.allocation", "Invalid value: field is immutable"))
    return causes


def resource_types() -> list[ResourceType]:
    """The four resources, for :func:`~kubeflux.sim.apiserver.resources.default_registry`."""
    status = ("status",)
    return [  # in the order cluster serve listed them as empty collections
        ResourceType(
            GROUP,
            "v1",
            "resourceclaims",
            "ResourceClaim",
            True,
            _ClaimStrategy(claim_from_manifest, True),
            (),
            (),
            status,
        ),
        ResourceType(GROUP, "v1", "resourceslices", "ResourceSlice", False, _SliceStrategy(slice_from_manifest)),
        ResourceType(GROUP, "v1", "deviceclasses", "DeviceClass", False, _ReadStrategy(device_class_from_manifest)),
        ResourceType(
            GROUP,
            "v1",
            "resourceclaimtemplates",
            "ResourceClaimTemplate",
            True,
            _ReadStrategy(template_from_manifest, True),
        ),
    ]
