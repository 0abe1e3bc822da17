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

    def prepare_create(self, obj: Object, now: str) -> None:
        obj["status"] = {}


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
