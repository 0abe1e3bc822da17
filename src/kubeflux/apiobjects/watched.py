"""The cluster events a scheduler core hears, read from the API's watch events: one reading of each watched kind for
every shell that follows a cluster (``serve``'s reflectors, the served cluster's in-process schedulers).

A ``Node``, ``PodGroup``, ``PodDisruptionBudget``, ``Namespace``, storage object (PersistentVolume,
PersistentVolumeClaim, StorageClass, CSINode: :mod:`kubeflux.apiobjects.storage`) or Dynamic Resource Allocation
object (``ResourceSlice``, ``DeviceClass``, ``ResourceClaim``) manifest is read by its kind's reader
(:func:`~kubeflux.apiobjects.manifests.node_from_manifest`, ...); any other kind is a pod, read by the shell's
``read_pod`` (its cached reading) or :func:`~kubeflux.apiobjects.manifests.pod_from_manifest`. A reader's
:class:`~kubeflux.apiobjects.manifests.ManifestError` is raised to the shell, which says what it could not read.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kubeflux.apiobjects.disruption import budget_from_manifest
from kubeflux.apiobjects.manifests import (
    namespace_from_manifest,
    node_from_manifest,
    pod_from_manifest,
    podgroup_from_manifest,
)
from kubeflux.apiobjects.resourceclaims import claim_from_manifest, device_class_from_manifest, slice_from_manifest
from kubeflux.apiobjects.storage import STORAGE_READERS, read_storage
from kubeflux.scheduler.messages import ClusterEvent, Watched, event_kind
from kubeflux.scheduler.objects import Pod

__all__ = ["cluster_event"]

_DEVICE_READERS: dict[str, Callable[[dict[str, Any]], Watched]] = {
    "ResourceSlice": slice_from_manifest,
    "DeviceClass": device_class_from_manifest,
    "ResourceClaim": claim_from_manifest,
}
"""Dynamic Resource Allocation's watched kinds (``resource.k8s.io/v1``)."""


def cluster_event(
    type_: str,
    kind: str,
    manifest: dict[str, Any],
    read_pod: Callable[[dict[str, Any]], Pod] = pod_from_manifest,
) -> ClusterEvent:
    """The watch event ``type_`` (``ADDED``, ``MODIFIED``, ``DELETED``) of the ``kind`` object ``manifest`` as the
    cores hear it (see the module docstring)."""
    obj: Watched
    if kind == "Node":
        obj = node_from_manifest(manifest)
    elif kind == "PodGroup":
        obj = podgroup_from_manifest(manifest)
    elif kind == "PodDisruptionBudget":
        obj = budget_from_manifest(manifest)  # the API server validated it
    elif kind == "Namespace":
        obj = namespace_from_manifest(manifest)
    elif kind in STORAGE_READERS:
        obj = read_storage(kind, manifest)
    elif kind in _DEVICE_READERS:
        obj = _DEVICE_READERS[kind](manifest)
    else:
        obj = read_pod(manifest)
    return ClusterEvent(event_kind(type_), obj)
