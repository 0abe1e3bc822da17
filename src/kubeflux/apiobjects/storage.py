"""The storage objects a scheduler reads, from their API manifests: ``v1`` PersistentVolumes and
PersistentVolumeClaims, ``storage.k8s.io/v1`` StorageClasses and CSINodes (:mod:`kubeflux.scheduler.storage`).

Each reader takes what the volume filters read and checks its types, naming the field at fault
(:class:`~kubeflux.apiobjects.reader.ManifestError`); the API server has validated the rest.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, Final

from kubeflux.apiobjects.manifests import node_selector_terms
from kubeflux.apiobjects.podterms import label_selector
from kubeflux.apiobjects.quantity import QuantityError, canonical_value
from kubeflux.apiobjects.reader import ManifestReader
from kubeflux.scheduler.objects import NodeSelectorRequirement, NodeSelectorTerm
from kubeflux.scheduler.storage import (
    ANN_BIND_COMPLETED,
    ANN_SELECTED_NODE,
    ClaimRef,
    CSINode,
    PersistentVolume,
    PersistentVolumeClaim,
    StorageClass,
    StorageObject,
)

__all__ = [
    "STORAGE_READERS",
    "csinode_from_manifest",
    "default_class_name",
    "pv_from_manifest",
    "pvc_from_manifest",
    "read_storage",
    "storage_class_from_manifest",
    "wants_default_class",
]

BETA_CLASS_ANNOTATION: Final = "volume.beta.kubernetes.io/storage-class"
"""The class annotation older objects carry; Kubernetes reads it before ``spec.storageClassName``."""
DEFAULT_CLASS_ANNOTATIONS: Final = (
    "storageclass.kubernetes.io/is-default-class",
    "storageclass.beta.kubernetes.io/is-default-class",
)


def wants_default_class(claim: Any) -> bool:
    """Whether the DefaultStorageClass admission plugin gives claim manifest ``claim`` the default class: it names
    none (no ``spec.storageClassName`` at all, not even "", and no beta class annotation)."""
    if not isinstance(claim, dict):
        return False
    spec = claim.get("spec")
    meta = claim.get("metadata")
    annotations = meta.get("annotations") if isinstance(meta, dict) else None
    if isinstance(annotations, dict) and BETA_CLASS_ANNOTATION in annotations:
        return False
    return isinstance(spec, dict) and spec.get("storageClassName") is None


def default_class_name(classes: Iterable[Any]) -> str | None:
    """The default StorageClass among the manifests ``classes``, as ``GetDefaultClass`` picks it: those annotated
    ``is-default-class: "true"``, the newest (``metadata.creationTimestamp``; RFC 3339 compares as text), then the
    first by name; None when no class is the default."""
    found: list[tuple[str, str]] = []
    for sc in classes:
        meta = sc.get("metadata") if isinstance(sc, dict) else None
        if not isinstance(meta, dict):
            continue
        annotations, name = meta.get("annotations"), meta.get("name")
        if not isinstance(annotations, dict) or not isinstance(name, str):
            continue
        if any(annotations.get(key) == "true" for key in DEFAULT_CLASS_ANNOTATIONS):
            found.append((str(meta.get("creationTimestamp") or ""), name))
    if not found:
        return None
    newest = max(created for created, _ in found)
    return min(name for created, name in found if created == newest)


def _storage(reader: ManifestReader, path: str) -> int:
    """A ``storage`` quantity at ``path``, in bytes (0 when absent)."""
    raw = reader.get(path)
    if raw is None:
        return 0
    try:
        return canonical_value("storage", raw)
    except QuantityError as exc:
        raise reader.fail(path, str(exc)) from exc


def _modes(reader: ManifestReader, path: str) -> frozenset[str]:
    return frozenset(reader.string(f"{path}[{i}]", mode) for i, mode in enumerate(reader.sequence(path)))


def _class(reader: ManifestReader, field: str) -> str:
    annotations = reader.string_map("metadata.annotations")
    if BETA_CLASS_ANNOTATION in annotations:
        return annotations[BETA_CLASS_ANNOTATION]
    return reader.string(field)


def pv_from_manifest(obj: Any) -> PersistentVolume:
    """A ``v1`` PersistentVolume (see :class:`~kubeflux.scheduler.storage.PersistentVolume`)."""
    reader = ManifestReader("PersistentVolume", obj, ("PersistentVolume",))
    ref = reader.mapping("spec.claimRef") if reader.get("spec.claimRef") is not None else None
    claim = None
    if ref is not None:
        claim = ClaimRef(
            reader.field("spec.claimRef", ref, "namespace"),
            reader.field("spec.claimRef", ref, "name"),
            reader.field("spec.claimRef", ref, "uid"),
        )
    affinity = "spec.nodeAffinity.required.nodeSelectorTerms"
    return PersistentVolume(
        name=reader.string("metadata.name"),
        storage_class=_class(reader, "spec.storageClassName"),
        capacity=_storage(reader, "spec.capacity.storage"),
        access_modes=_modes(reader, "spec.accessModes"),
        block=reader.string("spec.volumeMode") == "Block",
        node_affinity=node_selector_terms(reader, affinity) if reader.get(affinity) is not None else (),
        labels=reader.string_map("metadata.labels"),
        claim=claim,
        phase=reader.string("status.phase") or "Pending",
        deleted=reader.get("metadata.deletionTimestamp") is not None,
        csi_driver=reader.string("spec.csi.driver"),
        csi_handle=reader.string("spec.csi.volumeHandle"),
        attributes_class=reader.string("spec.volumeAttributesClassName"),
        uid=reader.string("metadata.uid"),
        resource_version=reader.string("metadata.resourceVersion"),
    )


def pvc_from_manifest(obj: Any) -> PersistentVolumeClaim:
    """A ``v1`` PersistentVolumeClaim (see :class:`~kubeflux.scheduler.storage.PersistentVolumeClaim`)."""
    reader = ManifestReader("PersistentVolumeClaim", obj, ("PersistentVolumeClaim",))
    annotations = reader.string_map("metadata.annotations")
    owner = ""
    for path, ref in reader.entries("metadata.ownerReferences"):
        if ref.get("controller") is True:
            owner = reader.field(path, ref, "uid")
    return PersistentVolumeClaim(
        namespace=reader.string("metadata.namespace") or "default",
        name=reader.string("metadata.name"),
        uid=reader.string("metadata.uid"),
        storage_class=_class(reader, "spec.storageClassName"),
        volume_name=reader.string("spec.volumeName"),
        bind_completed=ANN_BIND_COMPLETED in annotations,
        selected_node=annotations.get(ANN_SELECTED_NODE),
        access_modes=_modes(reader, "spec.accessModes"),
        request=_storage(reader, "spec.resources.requests.storage"),
        block=reader.string("spec.volumeMode") == "Block",
        selector=label_selector(reader, "spec.selector", reader.get("spec.selector")),
        phase=reader.string("status.phase") or "Pending",
        deleted=reader.get("metadata.deletionTimestamp") is not None,
        owner_uid=owner,
        attributes_class=reader.string("spec.volumeAttributesClassName"),
        resource_version=reader.string("metadata.resourceVersion"),
    )


def storage_class_from_manifest(obj: Any) -> StorageClass:
    """A ``storage.k8s.io/v1`` StorageClass: ``allowedTopologies``' ``matchLabelExpressions`` read as node selector
    terms of ``In`` requirements (they match as ``MatchTopologySelectorTerms`` does)."""
    reader = ManifestReader("StorageClass", obj, ("StorageClass",))
    terms = []
    for path, term in reader.entries("allowedTopologies"):
        requirements = []
        for at, expression in reader.entries(f"{path}.matchLabelExpressions", term.get("matchLabelExpressions")):
            values = reader.sequence(f"{at}.values", expression.get("values"))
            requirements.append(
                NodeSelectorRequirement(
                    reader.field(at, expression, "key"),
                    "In",
                    tuple(reader.string(f"{at}.values[{i}]", v) for i, v in enumerate(values)),
                )
            )
        terms.append(NodeSelectorTerm(match_expressions=tuple(requirements)))
    mode = reader.string("volumeBindingMode") or "Immediate"
    if mode not in ("Immediate", "WaitForFirstConsumer"):
        raise reader.fail("volumeBindingMode", f"must be Immediate or WaitForFirstConsumer, got {mode!r}")
    return StorageClass(
        name=reader.string("metadata.name"),
        provisioner=reader.string("provisioner"),
        wait_for_first_consumer=mode == "WaitForFirstConsumer",
        allowed_topologies=tuple(terms),
    )


def csinode_from_manifest(obj: Any) -> CSINode:
    """A ``storage.k8s.io/v1`` CSINode: each driver's ``allocatable.count``, where it has one."""
    reader = ManifestReader("CSINode", obj, ("CSINode",))
    limits: dict[str, int] = {}
    for path, driver in reader.entries("spec.drivers"):
        count = reader.integer(f"{path}.allocatable.count", (driver.get("allocatable") or {}).get("count"))
        if count is not None:
            limits[reader.field(path, driver, "name")] = count
    return CSINode(reader.string("metadata.name"), limits)


STORAGE_READERS: Final[dict[str, Callable[[Any], StorageObject]]] = {
    "PersistentVolume": pv_from_manifest,
    "PersistentVolumeClaim": pvc_from_manifest,
    "StorageClass": storage_class_from_manifest,
    "CSINode": csinode_from_manifest,
}
"""Each storage kind's reader, by kind."""


def read_storage(kind: str, obj: Any) -> StorageObject:
    """The storage object ``obj`` of ``kind`` (a key of :data:`STORAGE_READERS`)."""
    return STORAGE_READERS[kind](obj)
