"""The storage objects of a Kubernetes workload file: ``storage.k8s.io/v1`` StorageClasses and CSINodes, ``v1``
PersistentVolumes and PersistentVolumeClaims, in the cluster from the start of the workload (the volume filters of
:mod:`kubeflux.scheduler.volumes` read them).

The simulated cluster has no PV controller: a volume the file gives no ``status.phase`` is ``Available`` (``Bound``
when its ``claimRef`` names a claim), and a claim that names its volume (``spec.volumeName``) is taken as bound to it,
as the PV controller would have left it. A claim whose class waits for its first consumer is bound where the
scheduler puts its first pod: the Bind writes its ``volume.kubernetes.io/selected-node`` (or the chosen volume's
``claimRef``) into the cluster's copy (:class:`~kubeflux.sim.driver.ClusterSink`). A claim of an ``Immediate`` class
without a volume name stays unbound, and its pods wait (``pod has unbound immediate PersistentVolumeClaims``).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Final

from kubeflux.apiobjects.manifests import ManifestError
from kubeflux.apiobjects.storage import STORAGE_READERS
from kubeflux.scheduler.storage import PersistentVolume, PersistentVolumeClaim, StorageObject
from kubeflux.sim.apiserver.storage_strategies import storage_causes

__all__ = ["STORAGE_KINDS", "read_storage_object"]

STORAGE_KINDS: Final = {
    "StorageClass": "storage.k8s.io/v1",
    "CSINode": "storage.k8s.io/v1",
    "PersistentVolume": "v1",
    "PersistentVolumeClaim": "v1",
}
"""The kinds read here, and the ``apiVersion`` each must have."""


def read_storage_object(obj: dict[str, Any]) -> StorageObject:
    """The storage object ``obj`` of a workload file, as the cluster holds it from the start (see the module
    docstring); raises :class:`ManifestError` naming the field at fault."""
    kind = str(obj.get("kind"))
    meta = obj.get("metadata") if isinstance(obj.get("metadata"), dict) else {}
    name = meta.get("name") if isinstance(meta, dict) else None
    label = f"{kind} {name}"
    version = STORAGE_KINDS[kind]
    if obj.get("apiVersion") != version:
        raise ManifestError(label, "apiVersion", f"expected {version!r}, got {obj.get('apiVersion')!r}")
    if not isinstance(name, str) or not name:
        raise ManifestError(label, "metadata.name", "Required value: name or generateName is required")
    causes = storage_causes(obj)  # as cluster serve's API server would refuse it (a 422)
    if causes:
        raise ManifestError(label, causes[0].field, causes[0].message)
    read = STORAGE_READERS[kind](obj)
    status = obj.get("status") if isinstance(obj.get("status"), dict) else {}
    if isinstance(read, PersistentVolume) and not (status or {}).get("phase"):
        return replace(read, phase="Bound" if read.claim is not None else "Available")
    if isinstance(read, PersistentVolumeClaim) and read.volume_name and not read.bind_completed:
        return replace(read, bind_completed=True, phase="Bound")
    return read
