"""The storage objects the served cluster stores, as the real kube-apiserver v1.36 defaults and checks what a
scheduler reads of them: ``v1`` PersistentVolumes and PersistentVolumeClaims (status ``Pending`` on create, kept by
the PV controller through ``status``), ``storage.k8s.io/v1`` StorageClasses and CSINodes.

Validation is the part a scheduler depends on, in the real server's words: a claim's access modes and requested
storage, a volume's access modes, capacity, one source and node affinity, a class's provisioner, reclaim policy and
binding mode, a CSINode's drivers; what an
update may not change (a claim's spec but its requested size and volume name being set, a class's provisioner,
parameters and binding mode).
"""

from __future__ import annotations

import copy
from typing import Any

from kubeflux.apiobjects.quantity import QuantityError, canonical_value
from kubeflux.apiobjects.rules import PV_SOURCES, TOO_MANY_SOURCES, extra_source
from kubeflux.apiobjects.storage import default_class_name, wants_default_class
from kubeflux.scheduler.units import echo
from kubeflux.sim.apiserver.errors import Cause, not_supported
from kubeflux.sim.apiserver.registry import Lookup, Strategy, required

__all__ = [
    "CSINodeStrategy",
    "PersistentVolumeClaimStrategy",
    "PersistentVolumeStrategy",
    "StorageClassStrategy",
    "storage_causes",
]

Object = dict[str, Any]
ACCESS_MODES = ("ReadWriteOnce", "ReadOnlyMany", "ReadWriteMany", "ReadWriteOncePod")
BINDING_MODES = ("Immediate", "WaitForFirstConsumer")
RECLAIM_POLICIES = ("Delete", "Retain")
_NOT_SOURCES = frozenset(
    (
        "capacity",
        "accessModes",
        "claimRef",
        "persistentVolumeReclaimPolicy",
        "storageClassName",
        "mountOptions",
        "volumeMode",
        "nodeAffinity",
        "volumeAttributesClassName",
    )
)
"""A PersistentVolume's spec fields that are not its volume source (``hostPath``, ``csi``, ``local`` ...)."""
STORAGE_CLASSES = "storage.k8s.io/storageclasses"
"""The collection of StorageClasses, as a :class:`Lookup` names it."""


def _spec_causes(obj: Object) -> tuple[Object | None, list[Cause]]:
    """A volume's or a claim's spec (None when it is none) and its access modes' causes."""
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return None, [required("spec")]
    return spec, _modes_causes(spec, "spec")


def _modes_causes(spec: Object, path: str) -> list[Cause]:
    modes = spec.get("accessModes")
    if not modes:
        return [required(f"{path}.accessModes")]
    if not isinstance(modes, list):
        return [Cause(f"{path}.accessModes", "Invalid value: must be a list")]
    causes = []
    for mode in modes:
        if mode not in ACCESS_MODES:
            causes.append(not_supported(f"{path}.accessModes", mode, ACCESS_MODES))
    if "ReadWriteOncePod" in modes and len(modes) > 1:
        causes.append(
            Cause(
                f"{path}.accessModes",
                "Forbidden: may not use ReadWriteOncePod with other access modes",
                "FieldValueForbidden",
            )
        )
    return causes


def _storage_causes(amount: Any, path: str) -> list[Cause]:
    if amount is None:
        return [required(path)]
    try:
        value = canonical_value("storage", amount)
    except QuantityError:
        return [Cause(path, f"Invalid value: {amount!r}: must be a quantity")]
    return [] if value > 0 else [Cause(path, f"Invalid value: {amount!r}: must be greater than zero")]


class PersistentVolumeStrategy(Strategy):
    """A volume: ``Retain`` and ``Filesystem`` by default, ``status.phase: Pending`` until the PV controller looks."""

    has_status = True

    def prepare_create(self, obj: Object, now: str) -> None:
        spec = obj.setdefault("spec", {})
        spec.setdefault("persistentVolumeReclaimPolicy", "Retain")
        spec.setdefault("volumeMode", "Filesystem")
        obj["status"] = {"phase": "Pending", "lastPhaseTransitionTime": now}

    def canonicalize(self, obj: Object) -> None:
        host_path = (obj.get("spec") or {}).get("hostPath")
        if isinstance(host_path, dict) and host_path.get("type") is None:
            host_path["type"] = ""  # the real server's default

    def validate(self, obj: Object) -> list[Cause]:
        spec, causes = _spec_causes(obj)
        if spec is None:
            return causes
        capacity = spec.get("capacity")
        if not capacity:
            causes.append(required("spec.capacity"))
        if not isinstance(capacity, dict) or set(capacity) != {"storage"}:
            supported = 'supported values: "storage"'
            causes.append(
                Cause("spec.capacity", f"Unsupported value: {echo(capacity)}: {supported}", "FieldValueNotSupported")
            )
        else:
            causes += _storage_causes(capacity["storage"], "spec.capacity[storage]")
        if not set(spec) - _NOT_SOURCES:
            causes.append(Cause("spec", "Required value: must specify a volume type", "FieldValueRequired"))
        extra = extra_source(spec, PV_SOURCES)
        if extra is not None:
            causes.append(Cause(f"spec.{extra}", TOO_MANY_SOURCES, "FieldValueForbidden"))
        affinity = spec.get("nodeAffinity")
        if isinstance(affinity, dict) and affinity.get("required") is None:
            why = "Required value: must specify required node constraints"
            causes.append(Cause("spec.nodeAffinity.required", why, "FieldValueRequired"))
        return causes


class PersistentVolumeClaimStrategy(Strategy):
    """A claim: ``Filesystem`` by default, ``status.phase: Pending`` until the PV controller binds it; its spec may
    change after create only in its requested storage, its volume name once (when unset) and its class once."""

    has_status = True

    def prepare_create(self, obj: Object, now: str) -> None:
        obj.setdefault("spec", {}).setdefault("volumeMode", "Filesystem")
        obj["status"] = {"phase": "Pending"}

    def admit(self, obj: Object, lookup: Lookup) -> None:
        """The DefaultStorageClass admission plugin (on by default): a claim naming no class gets the default one,
        when a class is annotated the default."""
        if wants_default_class(obj):
            name = default_class_name(lookup.every(STORAGE_CLASSES))
            if name is not None:
                obj["spec"]["storageClassName"] = name

    def validate(self, obj: Object) -> list[Cause]:
        spec, causes = _spec_causes(obj)
        if spec is None:
            return causes
        requests = (spec.get("resources") or {}).get("requests") if isinstance(spec.get("resources"), dict) else None
        amount = requests.get("storage") if isinstance(requests, dict) else None
        if amount is None:
            return [*causes, required("spec.resources[storage]")]
        return causes + _storage_causes(amount, "spec.resources[storage]")

    def validate_update(self, new: Object, old: Object) -> list[Cause]:
        causes = self.validate(new)
        before, after = dict(old.get("spec") or {}), dict(new.get("spec") or {})
        for spec in (before, after):
            spec.pop("resources", None)
        if not before.get("volumeName"):
            after.pop("volumeName", None)
            before.pop("volumeName", None)
        if before.get("storageClassName") is None:
            after.pop("storageClassName", None)
            before.pop("storageClassName", None)
        if before != after:
            message = (
                "Forbidden: spec is immutable after creation except resources.requests and "
                "volumeAttributesClassName for bound claims"
            )
            causes.append(Cause("spec", message, "FieldValueForbidden"))
        return causes


class StorageClassStrategy(Strategy):
    """A class: ``Delete`` and ``Immediate`` by default; its provisioner, parameters, reclaim policy and binding mode
    never change."""

    def prepare_create(self, obj: Object, now: str) -> None:
        obj.setdefault("reclaimPolicy", "Delete")
        obj.setdefault("volumeBindingMode", "Immediate")

    def validate(self, obj: Object) -> list[Cause]:
        causes = [] if obj.get("provisioner") else [required("provisioner")]
        if obj.get("reclaimPolicy") not in RECLAIM_POLICIES:
            causes.append(not_supported("reclaimPolicy", obj.get("reclaimPolicy"), RECLAIM_POLICIES))
        mode = obj.get("volumeBindingMode")
        if mode not in BINDING_MODES:
            causes.append(not_supported("volumeBindingMode", mode, BINDING_MODES))
        return causes + _topology_causes(obj.get("allowedTopologies"))

    def validate_update(self, new: Object, old: Object) -> list[Cause]:
        causes = self.validate(new)
        for name in ("parameters", "provisioner", "reclaimPolicy", "volumeBindingMode"):
            if new.get(name) != old.get(name):
                causes.append(Cause(name, f"Invalid value: {echo(new.get(name))}: field is immutable"))
        return causes


def _topology_causes(terms: Any) -> list[Cause]:
    """``ValidateAllowedTopologies``' requirements: each with a key and at least one value."""
    if terms is None:
        return []
    if not isinstance(terms, list):
        return [Cause("allowedTopologies", "Invalid value: must be a list of objects")]
    causes = []
    for i, term in enumerate(terms):
        expressions = term.get("matchLabelExpressions") if isinstance(term, dict) else None
        if not isinstance(expressions, list) or not expressions:
            why = "Required value: must have at least one label requirement"
            causes.append(Cause(f"allowedTopologies[{i}]", why, "FieldValueRequired"))
            continue
        for j, requirement in enumerate(expressions):
            path = f"allowedTopologies[{i}].matchLabelExpressions[{j}]"
            if not isinstance(requirement, dict) or not requirement.get("key"):
                causes.append(required(f"{path}.key"))
            elif not isinstance(requirement.get("values"), list) or not requirement["values"]:
                causes.append(
                    Cause(f"{path}.values", "Required value: must specify as least one value", "FieldValueRequired")
                )
    return causes


class CSINodeStrategy(Strategy):
    """A node's CSI drivers (the kubelet writes it): each with a name and a node ID, a count not below zero."""

    def canonicalize(self, obj: Object) -> None:
        for driver in (obj.get("spec") or {}).get("drivers") or []:
            if isinstance(driver, dict):
                driver.setdefault("topologyKeys", None)  # a nil list, which Go writes

    def validate(self, obj: Object) -> list[Cause]:
        drivers = (obj.get("spec") or {}).get("drivers")
        if drivers is None:
            return [required("spec.drivers")]
        if not isinstance(drivers, list):
            return [Cause("spec.drivers", "Invalid value: must be a list of objects")]
        causes = []
        for i, driver in enumerate(drivers):
            path = f"spec.drivers[{i}]"
            if not isinstance(driver, dict):
                causes.append(Cause(path, "Invalid value: must be an object"))
                continue
            causes += [required(f"{path}.{name}") for name in ("name", "nodeID") if not driver.get(name)]
            allocatable = driver.get("allocatable") or {}
            if not isinstance(allocatable, dict):
                causes.append(Cause(f"{path}.allocatable", "Invalid value: must be an object"))
                continue
            count = allocatable.get("count")
            if count is not None and (isinstance(count, bool) or not isinstance(count, int) or count < 0):
                causes.append(
                    Cause(f"{path}.allocatable.count", f"Invalid value: {count!r}: must be greater than or equal to 0")
                )
        return causes


_STRATEGIES: dict[str, Strategy] = {
    "PersistentVolume": PersistentVolumeStrategy(),
    "PersistentVolumeClaim": PersistentVolumeClaimStrategy(),
    "StorageClass": StorageClassStrategy(),
    "CSINode": CSINodeStrategy(),
}


def storage_causes(obj: Object) -> list[Cause]:
    """What the served API server refuses of a create of storage object ``obj`` (of a kind of :data:`_STRATEGIES`),
    for readers that take the objects without a server (a workload file); ``obj`` is left as it was."""
    made = copy.deepcopy(obj)
    strategy = _STRATEGIES[str(made.get("kind"))]
    strategy.prepare_create(made, "1970-01-01T00:00:00Z")
    strategy.canonicalize(made)
    return strategy.validate(made)
