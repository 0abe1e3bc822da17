"""Dynamic Resource Allocation objects (``resource.k8s.io/v1``) as kubeflux reads and writes them: ResourceSlices,
DeviceClasses, ResourceClaims and ResourceClaimTemplates into the core's :mod:`kubeflux.scheduler.devices`, a
pod's ``spec.resourceClaims`` into its :class:`~kubeflux.scheduler.objects.ResourceClaimRef` list, and an allocation
decided by a scheduler back into a claim's ``status`` as kube-scheduler's DynamicResources plugin writes it.

Validation is the API server's where it is cheap and matters to scheduling: names, a request's ``exactly`` with a
``deviceClassName``, ``allocationMode`` ``ExactCount`` (``count`` ≥ 1, default 1) or ``All``, CEL selectors that
compile (:mod:`kubeflux.apiobjects.devicecel`), a slice's driver, pool and node, unique device names in a slice, and
one attribute value type per attribute. Each refusal names the object and the field. What kubeflux does not support
yet (``firstAvailable`` sub-requests, ``adminAccess``, partitionable devices' counters, consumable capacity, device
taints, constraints and config) is refused by name rather than ignored, so a claim never gets less than it asked.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final, TypeVar

from kubeflux.apiobjects.quantity import QuantityError, parse_quantity
from kubeflux.apiobjects.reader import ManifestReader
from kubeflux.apiobjects.rules import int_decode_error
from kubeflux.scheduler.devices import (
    ALL,
    EXACT_COUNT,
    AllocatedDevice,
    AttributeValue,
    ClaimAllocation,
    Device,
    DeviceClass,
    DeviceRequest,
    DeviceSelector,
    ResourceClaim,
    ResourceSlice,
    Version,
)
from kubeflux.scheduler.objects import ResourceClaimRef

__all__ = [
    "API_VERSION",
    "FINALIZER",
    "POD_CLAIM_NAME_ANNOTATION",
    "allocation_status",
    "claim_from_manifest",
    "claim_from_template",
    "claim_status_patch",
    "device_class_from_manifest",
    "finalizer_patch",
    "pod_claims",
    "slice_from_manifest",
    "template_from_manifest",
]

API_VERSION: Final = "resource.k8s.io/v1"
POD_CLAIM_NAME_ANNOTATION: Final = "resource.kubernetes.io/pod-claim-name"
FINALIZER: Final = "resource.kubernetes.io/delete-protection"
"""A claim's finalizer while a scheduler's allocation holds its devices (``resourceapi.Finalizer``): a claim deleted
while in use stays Terminating until the resourceclaim controller has deallocated it and taken the finalizer off."""
"""On a claim made from a template: the name of the pod's ``spec.resourceClaims[]`` entry it was made for."""
MAX_DEVICES_PER_SLICE: Final = 128
MAX_REQUESTS: Final = 32
MAX_SELECTORS: Final = 32
UNSUPPORTED_REQUEST_FIELDS: Final = ("firstAvailable",)
UNSUPPORTED_EXACTLY_FIELDS: Final = ("adminAccess", "tolerations", "capacity")
UNSUPPORTED_DEVICE_FIELDS: Final = ("consumesCounters", "taints", "bindsToNode", "bindingConditions")
UNSUPPORTED_CLASS_FIELDS: Final = ("config", "extendedResourceName")
NODE_FIELDS: Final = ("nodeName", "nodeSelector", "allNodes", "perDeviceNodeSelection")
"""A slice's node fields, exactly one of which is set (the API server's rule)."""


def device_class_from_manifest(obj: Any) -> DeviceClass:
    """A ``DeviceClass``: its name and CEL selectors."""
    reader = ManifestReader("DeviceClass", obj, ("DeviceClass",))
    name = reader.name()
    _refuse_unsupported(reader, "spec", reader.mapping("spec"), UNSUPPORTED_CLASS_FIELDS)
    return DeviceClass(name, _selectors(reader, "spec.selectors"))


def slice_from_manifest(obj: Any) -> ResourceSlice:
    """A ``ResourceSlice`` published for one node (``spec.nodeName``); ``allNodes`` and ``nodeSelector`` slices are
    read with no node (kubeflux does not allocate from them yet)."""
    reader = ManifestReader("ResourceSlice", obj, ("ResourceSlice",))
    name = reader.name()
    driver = reader.string("spec.driver")
    if not driver:
        raise reader.fail("spec.driver", "Required value")
    reader.dns_name("spec.driver", driver)
    pool = reader.string("spec.pool.name")
    if not pool:
        raise reader.fail("spec.pool.name", "Required value")
    generation = reader.go_integer("ResourcePool", "spec.pool.generation", "int64") or 0
    count = reader.go_integer("ResourcePool", "spec.pool.resourceSliceCount", "int64")
    if count is None or count < 1:
        raise reader.fail("spec.pool.resourceSliceCount", f"must be greater than zero, got {count}")
    spec = reader.mapping("spec")
    chosen = [field for field in NODE_FIELDS if spec.get(field) not in (None, "", False)]
    if len(chosen) != 1:
        given = f" (given: {', '.join(chosen)})" if chosen else ""
        raise reader.fail("spec", f"exactly one of `{'`, `'.join(NODE_FIELDS)}` is required{given}")
    node = reader.string("spec.nodeName")
    if node:
        reader.dns_name("spec.nodeName", node)
    devices = _named_list(reader, "spec.devices", MAX_DEVICES_PER_SLICE, _device)
    return ResourceSlice(name, driver, pool, node, devices, generation, count)


Named = TypeVar("Named", Device, DeviceRequest)


def _named_list(
    reader: ManifestReader, at: str, limit: int, read: Callable[[ManifestReader, str, Any], Named]
) -> tuple[Named, ...]:
    """The entries of the list at ``at``, each read by ``read``: at most ``limit``, their names unique."""
    entries = reader.entries(at)
    if len(entries) > limit:
        raise reader.fail(at, f"Too many: {len(entries)}: must have at most {limit} items")
    seen: set[str] = set()
    found = []
    for path, item in entries:
        one = read(reader, path, item)
        if one.name in seen:
            raise reader.fail(f"{path}.name", f'Duplicate value: "{one.name}"')
        seen.add(one.name)
        found.append(one)
    return tuple(found)


def _named_entry(reader: ManifestReader, path: str, item: Any, unsupported: tuple[str, ...]) -> str:
    """The ``name`` of the list entry ``item`` at ``path`` (required, a DNS label), which sets none of the
    ``unsupported`` fields."""
    name = reader.field(path, item, "name")
    if not name:
        raise reader.fail(f"{path}.name", "Required value")
    reader.dns_name(f"{path}.name", name, label=True)
    _refuse_unsupported(reader, path, item, unsupported)
    return name


def _refuse_unsupported(reader: ManifestReader, path: str, item: Any, fields: tuple[str, ...]) -> None:
    for field in fields:
        if item.get(field):
            raise reader.fail(f"{path}.{field}", "not supported by kubeflux yet (see docs/dra.md)")


def _device(reader: ManifestReader, path: str, item: Any) -> Device:
    name = _named_entry(reader, path, item, UNSUPPORTED_DEVICE_FIELDS)
    attributes: dict[str, AttributeValue] = {}
    for key, raw in reader.mapping(f"{path}.attributes", item.get("attributes") or {}).items():
        where = f"{path}.attributes[{key}]"
        value = reader.mapping(where, raw)
        kinds = [kind for kind in ("int", "bool", "string", "version") if kind in value]
        if len(kinds) != 1:
            raise reader.fail(where, "exactly one value must be specified (int, bool, string or version)")
        found = value[kinds[0]]
        if kinds[0] == "int" and (type(found) is not int):
            raise reader.fail(f"{where}.int", f"expected an integer, got {found!r}")
        if kinds[0] == "bool" and type(found) is not bool:
            raise reader.fail(f"{where}.bool", f"expected true or false, got {found!r}")
        if kinds[0] in ("string", "version"):
            found = reader.string(f"{where}.{kinds[0]}", found)
        attributes[str(key)] = Version(found) if kinds[0] == "version" else found
    capacity: dict[str, str] = {}
    for key, raw in reader.mapping(f"{path}.capacity", item.get("capacity") or {}).items():
        where = f"{path}.capacity[{key}].value"
        amount = reader.mapping(f"{path}.capacity[{key}]", raw).get("value")
        text = str(amount) if isinstance(amount, int | float) and not isinstance(amount, bool) else amount
        try:
            parse_quantity(reader.string(where, text))
        except QuantityError as exc:
            raise reader.fail(where, str(exc)) from exc
        capacity[str(key)] = str(text)
    shared = item.get("allowMultipleAllocations")
    if shared is not None and type(shared) is not bool:
        raise reader.fail(f"{path}.allowMultipleAllocations", f"expected true or false, got {shared!r}")
    return Device(name, attributes, capacity, bool(shared))


def claim_from_manifest(obj: Any, *, default_namespace: str = "default") -> ResourceClaim:
    """A ``ResourceClaim``: its requests, and its allocation and reservations from its status."""
    reader = ManifestReader("ResourceClaim", obj, ("ResourceClaim",))
    name, namespace = reader.identity("ResourceClaim", default_namespace)
    return _claim(reader, "spec", namespace, name, reader.string("metadata.uid"))


def template_from_manifest(obj: Any, *, default_namespace: str = "default") -> tuple[str, dict[str, Any]]:
    """A ``ResourceClaimTemplate``, checked as a claim of its ``spec.spec`` would be: its ``namespace/name`` and the
    manifest (namespace defaulted)."""
    reader = ManifestReader("ResourceClaimTemplate", obj, ("ResourceClaimTemplate",))
    name, namespace = reader.identity("ResourceClaimTemplate", default_namespace)
    _claim(reader, "spec.spec", namespace, name, "")
    return f"{namespace}/{name}", {**obj, "metadata": {**reader.mapping("metadata"), "namespace": namespace}}


def claim_from_template(template: Any, pod_name: str, pod_claim: str, suffix: str) -> dict[str, Any]:
    """The claim the resourceclaim controller makes from a ``ResourceClaimTemplate`` for a pod's claim entry:
    named ``<pod>-<claim>-<suffix>`` (the controller's generateName, its prefix cut as ``names.SimpleNameGenerator``
    cuts it), annotated with the entry's name; the pod its owner (the caller adds the owner reference's uid)."""
    reader = ManifestReader("ResourceClaimTemplate", template, ("ResourceClaimTemplate",))
    namespace = reader.string("metadata.namespace") or "default"
    spec = reader.mapping("spec.spec")
    meta = reader.mapping("spec.metadata")
    prefix = f"{pod_name}-{pod_claim}-"
    name = prefix[: 63 - len(suffix)] + suffix
    annotations = {**(meta.get("annotations") or {}), POD_CLAIM_NAME_ANNOTATION: pod_claim}
    metadata: dict[str, Any] = {"name": name, "namespace": namespace, "annotations": annotations}
    if meta.get("labels"):
        metadata["labels"] = dict(meta["labels"])
    return {"apiVersion": API_VERSION, "kind": "ResourceClaim", "metadata": metadata, "spec": dict(spec)}


def _claim(reader: ManifestReader, at: str, namespace: str, name: str, uid: str) -> ResourceClaim:
    _refuse_unsupported(reader, f"{at}.devices", reader.mapping(f"{at}.devices"), ("constraints", "config"))
    requests = _named_list(reader, f"{at}.devices.requests", MAX_REQUESTS, _request)
    allocation, node = _allocation(reader)
    reserved = tuple(
        reader.field(path, item, "uid") for path, item in reader.entries("status.reservedFor") if item.get("uid")
    )
    if reserved and allocation is None:
        raise reader.fail("status.reservedFor", "Forbidden: may not be specified when `allocated` is not set")
    version = reader.string("metadata.resourceVersion")
    finalizers = tuple(str(item) for item in reader.sequence("metadata.finalizers"))
    deleting = bool(reader.get("metadata.deletionTimestamp"))
    return ResourceClaim(namespace, name, uid, requests, allocation, node, reserved, version, finalizers, deleting)


def _request(reader: ManifestReader, path: str, item: Any) -> DeviceRequest:
    name = _named_entry(reader, path, item, UNSUPPORTED_REQUEST_FIELDS)
    exactly = item.get("exactly")
    if exactly is None:
        raise reader.fail(f"{path}.exactly", "Required value: exactly one of `exactly` or `firstAvailable` is required")
    at = f"{path}.exactly"
    exactly = reader.mapping(at, exactly)
    _refuse_unsupported(reader, at, exactly, UNSUPPORTED_EXACTLY_FIELDS)
    device_class = reader.field(at, exactly, "deviceClassName")
    if not device_class:
        raise reader.fail(f"{at}.deviceClassName", "Required value")
    mode = reader.field(at, exactly, "allocationMode", EXACT_COUNT)
    if mode not in (EXACT_COUNT, ALL):
        raise reader.fail(f"{at}.allocationMode", f'Unsupported value: "{mode}": supported values: "All", "ExactCount"')
    decode = int_decode_error(
        "ExactDeviceRequest", "spec.devices.requests.exactly.count", exactly.get("count"), "int64"
    )
    if decode is not None:
        raise reader.fail(f"{at}.count", decode)
    count = reader.integer(f"{at}.count", exactly.get("count"))
    if mode == ALL and count is not None:
        raise reader.fail(f"{at}.count", "Forbidden: must not be set when allocationMode is All")
    if count is not None and count < 1:
        raise reader.fail(f"{at}.count", f"Invalid value: {count}: must be greater than zero")
    selectors = _selectors(reader, f"{at}.selectors", exactly.get("selectors"))
    return DeviceRequest(name, device_class, mode, count or 1, selectors)


def _selectors(reader: ManifestReader, path: str, value: Any = None) -> tuple[DeviceSelector, ...]:
    # imported here: the CEL library's package loads its interactive shell (prompt_toolkit), ~0.3 s of every
    # kubeflux process's start that only a DeviceClass or claim with selectors needs
    from kubeflux.apiobjects.devicecel import CelSelector, SelectorCompileError

    entries = reader.entries(path, value if value is not None else None)
    if len(entries) > MAX_SELECTORS:
        raise reader.fail(path, f"Too many: {len(entries)}: must have at most {MAX_SELECTORS} items")
    found: list[DeviceSelector] = []
    for where, item in entries:
        expression = reader.string(
            f"{where}.cel.expression", reader.mapping(f"{where}.cel", item.get("cel")).get("expression") or ""
        )
        if not expression:
            raise reader.fail(f"{where}.cel.expression", "Required value")
        try:
            found.append(CelSelector(expression))
        except SelectorCompileError as exc:
            said = f"Invalid value: {expression!r}: {exc}" if exc.invalid else str(exc)  # too long: not echoed
            raise reader.fail(f"{where}.cel.expression", said) from exc
    return tuple(found)


def _allocation(reader: ManifestReader) -> tuple[tuple[AllocatedDevice, ...] | None, str]:
    if reader.get("status.allocation") is None:
        return None, ""
    results = tuple(
        AllocatedDevice(
            reader.field(path, item, "request"),
            reader.field(path, item, "driver"),
            reader.field(path, item, "pool"),
            reader.field(path, item, "device"),
        )
        for path, item in reader.entries("status.allocation.devices.results")
    )
    node = ""
    for path, term in reader.entries("status.allocation.nodeSelector.nodeSelectorTerms"):
        for field_path, field in reader.entries(f"{path}.matchFields", term.get("matchFields") or []):
            if field.get("key") == "metadata.name" and field.get("operator") == "In":
                values = reader.sequence(f"{field_path}.values", field.get("values") or [])
                node = values[0] if len(values) == 1 and isinstance(values[0], str) else node
    return results, node


def pod_claims(reader: ManifestReader) -> tuple[ResourceClaimRef, ...]:
    """A pod's ``spec.resourceClaims``, each with the ResourceClaim it stands for (its ``resourceClaimName``, or the
    claim ``status.resourceClaimStatuses`` names for a template's entry; empty while none is made)."""
    entries = reader.entries("spec.resourceClaims")
    _container_claims(reader, {reader.field(path, item, "name") for path, item in entries})
    if not entries:
        return ()
    made = {
        reader.field(path, item, "name"): reader.field(path, item, "resourceClaimName")
        for path, item in reader.entries("status.resourceClaimStatuses")
    }
    claims = []
    for path, item in entries:
        name = reader.field(path, item, "name")
        if not name:
            raise reader.fail(f"{path}.name", "Required value")
        direct = reader.field(path, item, "resourceClaimName")
        template = reader.field(path, item, "resourceClaimTemplateName")
        if bool(direct) == bool(template):
            raise reader.fail(path, "must specify one of: `resourceClaimName`, `resourceClaimTemplateName`")
        claims.append(ResourceClaimRef(name, direct or made.get(name, ""), template))
    return tuple(claims)


def _container_claims(reader: ManifestReader, names: set[str]) -> None:
    """Each container's ``resources.claims`` names an entry of the pod's ``spec.resourceClaims``."""
    for kind in ("initContainers", "containers"):
        for path, container in reader.entries(f"spec.{kind}"):
            resources = reader.mapping(f"{path}.resources", container.get("resources") or {})
            for at, item in reader.entries(f"{path}.resources.claims", resources.get("claims") or []):
                name = reader.field(at, item, "name")
                if name not in names:
                    detail = (
                        "must be one of the names in pod.spec.resourceClaims"
                        if names
                        else ("no claims defined in pod.spec.resourceClaims")
                    )
                    raise reader.fail(at, f'Not found: "{name}": {detail}')


def claim_status_patch(
    allocation: ClaimAllocation, pod: str, uid: str, version: str = "", allocated_at: str = ""
) -> tuple[Any, str]:
    """The patch of a claim's status that binding the pod ``pod`` (``uid``) writes, and its content type: for a claim
    allocated now a JSON merge patch of the allocation and ``reservedFor``, for one allocated already a JSON patch
    adding the pod to ``reservedFor``. Both carry the claim's ``uid`` (never another claim of the name) and the
    ``resourceVersion`` read (``version``, else the allocation's), so the server refuses the write (409) when another
    writer changed the claim since, as kube-scheduler's ``UpdateStatus`` does: another pod's reservation is never
    overwritten. ``allocated_at``: the allocation's ``allocationTimestamp`` (see :func:`allocation_status`)."""
    version = version or allocation.resource_version
    if allocation.allocate:
        status = allocation_status(allocation, pod, uid, allocated_at=allocated_at)
        meta: dict[str, Any] = {}
        if allocation.uid:
            meta["uid"] = allocation.uid
        if version:
            meta["resourceVersion"] = version
        patch: dict[str, Any] = {"status": status}
        if meta:
            patch["metadata"] = meta
        return patch, "application/merge-patch+json"
    entry = {"resource": "pods", "name": pod, "uid": uid}
    ops: list[dict[str, Any]] = []
    if allocation.uid:
        ops.append({"op": "test", "path": "/metadata/uid", "value": allocation.uid})
    if version:
        ops.append({"op": "replace", "path": "/metadata/resourceVersion", "value": version})
    ops.append({"op": "add", "path": "/status/reservedFor/-", "value": entry})
    return ops, "application/json-patch+json"


def finalizer_patch(allocation: ClaimAllocation, finalizers: list[str], version: str) -> dict[str, Any]:
    """The JSON merge patch of a claim's metadata setting its ``finalizers`` (under the claim's ``uid`` and the
    ``resourceVersion`` read: 409 when it changed since)."""
    meta: dict[str, Any] = {"finalizers": finalizers or None}
    if allocation.uid:
        meta["uid"] = allocation.uid
    if version:
        meta["resourceVersion"] = version
    return {"metadata": meta}


def allocation_status(
    allocation: ClaimAllocation, pod: str, uid: str, status: Any = None, allocated_at: str = ""
) -> dict[str, Any]:
    """The claim's ``status`` after binding the pod ``pod`` (its name, ``uid``): ``allocation`` as the structured
    allocator writes it (results with request, driver, pool, device; a node selector of the node's name; when
    ``allocated_at`` is given, the ``allocationTimestamp`` kube-scheduler v1.36 writes, RFC 3339 in seconds) when the
    claim had none, and the pod added to ``reservedFor``; ``status`` is the claim's status before."""
    made: dict[str, Any] = dict(status) if isinstance(status, dict) else {}
    if allocation.allocate:
        made["allocation"] = {
            "devices": {
                "results": [
                    {"request": d.request, "driver": d.driver, "pool": d.pool, "device": d.device}
                    for d in allocation.results
                ]
            },
            "nodeSelector": {
                "nodeSelectorTerms": [
                    {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [allocation.node]}]}
                ]
            },
        }
        if allocated_at:
            made["allocation"]["allocationTimestamp"] = allocated_at
    reserved = [entry for entry in made.get("reservedFor") or [] if isinstance(entry, dict) and entry.get("uid") != uid]
    reserved.append({"resource": "pods", "name": pod, "uid": uid})
    made["reservedFor"] = reserved
    return made
