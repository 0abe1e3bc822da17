"""The served cluster's PV controller: kube-controller-manager's ``persistentvolume-binder``, for what a scheduler
waits on (``pkg/controller/volume/persistentvolume``), on the server's loop.

* A new volume (``Pending``) with no ``claimRef`` becomes ``Available``; one whose claim is bound to it ``Bound``;
  one whose claim (by uid) is gone ``Released``.
* A claim not bound whose class is ``Immediate`` (or that has no class) is bound to a volume pre-bound to it (its
  ``claimRef``, or the claim's ``spec.volumeName``), else to the smallest ``Available`` volume of its class that
  matches it (capacity, access modes, volume mode, selector); a claim whose class waits for its first consumer is
  bound only to a volume pre-bound to it, which is what a scheduler's volume binder writes (``claimRef``) once it
  chose a node. Binding writes both sides as the real controller does: the volume's ``claimRef`` (with the claim's
  uid), ``pv.kubernetes.io/bound-by-controller`` where the controller chose, phase ``Bound``; the claim's
  ``spec.volumeName``, ``pv.kubernetes.io/bind-completed``, phase ``Bound`` with the volume's access modes and
  capacity.
* A bound claim whose volume is gone is ``Lost``.

Nothing is provisioned: a claim of a class with a provisioner stays ``Pending`` until a volume is made for it (an
external provisioner's work; ``volume.kubernetes.io/selected-node`` names the node for one). Run when
``persistentvolume-binder`` is among the served cluster's controllers; a real kube-controller-manager on the
served cluster does this work otherwise.
"""

from __future__ import annotations

import asyncio
from typing import Any

from kubeflux.apiobjects.storage import pv_from_manifest, pvc_from_manifest, storage_class_from_manifest
from kubeflux.scheduler.storage import ANN_BIND_COMPLETED, ANN_BOUND_BY_CONTROLLER, PersistentVolume
from kubeflux.sim.apiserver.errors import ApiError
from kubeflux.sim.apiserver.follow import Reconciler, served
from kubeflux.sim.apiserver.store import Store
from kubeflux.sim.apiserver.watch import WatchEvent

__all__ = ["VolumeBinder"]

Object = dict[str, Any]


class VolumeBinder:
    """Binds claims to volumes and keeps their phases (see the module docstring)."""

    def __init__(self, store: Store, loop: asyncio.AbstractEventLoop) -> None:
        self.store = store
        self.volumes, self.claims, self.classes = served(
            store,
            ("", "v1", "persistentvolumes"),
            ("", "v1", "persistentvolumeclaims"),
            ("storage.k8s.io", "v1", "storageclasses"),
        )
        follow = [(resource, self._changed) for resource in (self.volumes, self.claims, self.classes)]
        self.reconciler: Reconciler[str] = Reconciler(store, loop, follow, self._sync)
        self.reconciler.start()

    def stop(self) -> None:
        self.reconciler.stop()

    def _changed(self, type_: str, event: WatchEvent) -> None:
        self.reconciler.add("all")  # served clusters hold few volumes: each change looks at them all

    def _sync(self, _: str) -> None:
        claims = {f"{c['metadata']['namespace']}/{c['metadata']['name']}": c for c in self.store.objects(self.claims)}
        for claim in list(claims.values()):
            self._sync_claim(claim)
        claims = {f"{c['metadata']['namespace']}/{c['metadata']['name']}": c for c in self.store.objects(self.claims)}
        for volume in list(self.store.objects(self.volumes)):
            self._sync_volume(volume, claims)

    def _sync_volume(self, volume: Object, claims: dict[str, Object]) -> None:
        ref = volume["spec"].get("claimRef")
        phase = "Available"
        if ref:
            claim = claims.get(f"{ref.get('namespace')}/{ref.get('name')}")
            if claim is not None and ref.get("uid") not in (None, "", claim["metadata"]["uid"]):
                claim = None
            if claim is None:
                phase = "Released" if ref.get("uid") else "Available"
            elif claim["spec"].get("volumeName") == volume["metadata"]["name"]:
                phase = "Bound"
        if (volume.get("status") or {}).get("phase") != phase:
            status = {**(volume.get("status") or {}), "phase": phase, "lastPhaseTransitionTime": self.store.now()}
            self._write_status(self.volumes, "", volume, status)

    def _sync_claim(self, claim: Object) -> None:
        meta = claim["metadata"]
        annotations = meta.get("annotations") or {}
        name = claim["spec"].get("volumeName")
        volumes = {v["metadata"]["name"]: v for v in self.store.objects(self.volumes)}
        if ANN_BIND_COMPLETED in annotations:
            if name not in volumes and (claim.get("status") or {}).get("phase") != "Lost":
                self._write_status(
                    self.claims, meta["namespace"], claim, {**(claim.get("status") or {}), "phase": "Lost"}
                )
            return
        pvc = pvc_from_manifest(claim)
        if name:
            volume = volumes.get(name)
            ref = (volume or {}).get("spec", {}).get("claimRef")
            if volume is not None and (not ref or _refers(ref, claim)):
                self._bind(claim, volume, chosen=False)
            return
        read = [pv_from_manifest(v) for v in volumes.values()]
        pre_bound = [pv for pv in read if pv.claim is not None and _refers_to(pv, claim)]
        if pre_bound:
            self._bind(claim, volumes[pre_bound[0].name], chosen=False)
            return
        sc_obj = self.store.find(self.classes, "", pvc.storage_class) if pvc.storage_class else None
        if sc_obj is not None and storage_class_from_manifest(sc_obj).wait_for_first_consumer:
            return  # a scheduler chooses (its volume binder pre-binds the volume it picked)
        fitting = [
            pv
            for pv in read
            if pv.claim is None
            and pv.phase == "Available"
            and not pv.deleted
            and pv.storage_class == pvc.storage_class
            and pv.capacity >= pvc.request
            and pv.block == pvc.block
            and pvc.access_modes <= pv.access_modes
            and (pvc.selector is None or pvc.selector.matches(pv.labels))
        ]
        if fitting:
            self._bind(claim, volumes[min(fitting, key=lambda pv: pv.capacity).name], chosen=True)

    def _bind(self, claim: Object, volume: Object, *, chosen: bool) -> None:
        """Both sides of a binding, the volume first (as the real controller), then the statuses."""
        meta = claim["metadata"]
        namespace, name = meta["namespace"], meta["name"]
        pv_name = volume["metadata"]["name"]
        ref = {"kind": "PersistentVolumeClaim", "apiVersion": "v1", "namespace": namespace, "name": name}
        ref.update({"uid": meta["uid"], "resourceVersion": meta["resourceVersion"]})
        updated = dict(volume)
        updated["spec"] = {**volume["spec"], "claimRef": ref}
        if chosen:
            updated["metadata"] = {
                **volume["metadata"],
                "annotations": {**(volume["metadata"].get("annotations") or {}), ANN_BOUND_BY_CONTROLLER: "yes"},
            }
        try:
            volume = self.store.update(self.volumes, "", pv_name, updated, trusted=True)
            bound_status = {
                **(volume.get("status") or {}),
                "phase": "Bound",
                "lastPhaseTransitionTime": self.store.now(),
            }
            volume = self._write_status(self.volumes, "", volume, bound_status)
            annotations = {**(meta.get("annotations") or {}), ANN_BIND_COMPLETED: "yes"}
            if chosen:
                annotations[ANN_BOUND_BY_CONTROLLER] = "yes"
            bound = {**claim, "metadata": {**meta, "annotations": annotations}}
            bound["spec"] = {**claim["spec"], "volumeName": pv_name}
            claim = self.store.update(self.claims, namespace, name, bound, trusted=True)
            status = {
                "phase": "Bound",
                "accessModes": volume["spec"].get("accessModes") or [],
                "capacity": dict(volume["spec"].get("capacity") or {}),
            }
            self._write_status(self.claims, namespace, claim, status)
        except ApiError:  # changed meanwhile: the next event syncs again
            return

    def _write_status(self, resource: Any, namespace: str, obj: Object, status: Object) -> Object:
        updated = {**obj, "status": status}
        try:
            return self.store.update(resource, namespace, obj["metadata"]["name"], updated, "status", trusted=True)
        except ApiError:
            return obj


def _refers(ref: Object, claim: Object) -> bool:
    meta = claim["metadata"]
    return (
        ref.get("namespace") == meta["namespace"]
        and ref.get("name") == meta["name"]
        and ref.get("uid") in (None, "", meta["uid"])
    )


def _refers_to(pv: PersistentVolume, claim: Object) -> bool:
    ref = pv.claim
    meta = claim["metadata"]
    return (
        ref is not None
        and ref.namespace == meta["namespace"]
        and ref.name == meta["name"]
        and ref.uid in ("", meta["uid"])
    )
