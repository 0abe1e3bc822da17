"""The served cluster's resourceclaim controller: what kube-controller-manager's (``pkg/controller/resourceclaim``)
does for pods with Dynamic Resource Allocation claims.

* For each ``spec.resourceClaims`` entry of a live pod that names a ``resourceClaimTemplateName`` and has no claim
  yet, it creates the claim from the template: ``generateName`` ``<pod>-<entry>-`` (the store adds the suffix), the
  annotation ``resource.kubernetes.io/pod-claim-name``, the pod its controlling owner; then it records the claim in
  the pod's ``status.resourceClaimStatuses`` (``pods/status``), where schedulers read which claim the entry is.
* When a pod has ended or is deleted, it leaves ``status.reservedFor`` of each of its claims; a claim made for it is
  deleted, and any other claim reserved for no pod any more is deallocated (its ``status.allocation`` removed), so
  its devices can be given again.

A template not found is waited for: the pod is synced again at its next event (the real controller requeues it).
"""

from __future__ import annotations

import asyncio
from typing import Any

from kubeflux.apiobjects.resourceclaims import allocation_status, claim_from_template
from kubeflux.scheduler.devices import ClaimAllocation
from kubeflux.sim.apiserver import errors
from kubeflux.sim.apiserver.errors import ApiError
from kubeflux.sim.apiserver.follow import Reconciler, served
from kubeflux.sim.apiserver.store import Store
from kubeflux.sim.apiserver.watch import WatchEvent

__all__ = ["ClaimController", "write_claims"]

Object = dict[str, Any]
TERMINAL = ("Succeeded", "Failed")


def write_claims(store: Store, claims: tuple[ClaimAllocation, ...], pod: str, uid: str) -> None:
    """Write a Bind's claim allocations for the pod ``pod`` (its ``uid``) to the claims' status, as kube-scheduler's
    DynamicResources PreBind does; raises ApiError when a claim is gone or was allocated other devices meanwhile."""
    resource = served(store, ("resource.k8s.io", "v1", "resourceclaims"))[0]
    for made in claims:
        claim = store.find(resource, made.namespace, made.name, made.uid or None)
        if claim is None:
            raise errors.not_found("resourceclaims", made.name, "resource.k8s.io")
        status = claim.get("status") or {}
        if (
            made.allocate
            and status.get("allocation")
            and allocation_status(made, pod, uid).get("allocation") != (status.get("allocation"))
        ):
            raise ApiError(409, "Conflict", f"resourceclaim {made.key} is already allocated")
        body = {**claim, "status": allocation_status(made, pod, uid, status)}
        store.update(resource, made.namespace, made.name, body, "status", trusted=True)


class ClaimController:
    """Keeps the claims of pods in step with them (see the module docstring), on the server's loop."""

    def __init__(self, store: Store, loop: asyncio.AbstractEventLoop) -> None:
        group = "resource.k8s.io"
        pods, claims, templates = served(
            store, ("", "v1", "pods"), (group, "v1", "resourceclaims"), (group, "v1", "resourceclaimtemplates")
        )
        self.store, self.pods, self.claims, self.templates = store, pods, claims, templates
        self._made: dict[tuple[str, str], str] = {}
        """(pod uid, claim entry) → the name of the claim made for it (the controller's own record: the pod's status
        may not show it yet when the pod is synced again)."""
        self._pods: dict[str, tuple[Object, bool]] = {}
        """Pod uid → its latest version, and whether it was deleted; only pods with claims."""
        self.reconciler: Reconciler[str] = Reconciler(store, loop, [(pods, self._pod_event)], self._sync)
        self.reconciler.start()

    def stop(self) -> None:
        self.reconciler.stop()

    def _pod_event(self, type_: str, event: WatchEvent) -> None:
        pod = event.obj
        if not (pod.get("spec") or {}).get("resourceClaims"):
            return
        uid = pod["metadata"]["uid"]
        self._pods[uid] = (pod, type_ == "DELETED")
        self.reconciler.add(uid)

    def _sync(self, uid: str) -> None:
        known = self._pods.get(uid)
        if known is None:
            return
        pod, deleted = known
        meta, status = pod["metadata"], pod.get("status") or {}
        if deleted or status.get("phase") in TERMINAL or meta.get("deletionTimestamp"):
            self._release(pod)
            if deleted:
                del self._pods[uid]
            return
        self._make_claims(pod)

    def _make_claims(self, pod: Object) -> None:
        meta = pod["metadata"]
        namespace, name = meta["namespace"], meta["name"]
        shown = {entry.get("name") for entry in (pod.get("status") or {}).get("resourceClaimStatuses") or []}
        added = []
        for entry in pod["spec"]["resourceClaims"]:
            template_name = entry.get("resourceClaimTemplateName")
            if not template_name or entry.get("name") in shown:
                continue
            known = self._made.get((meta["uid"], entry["name"]))
            if known is not None:  # made at an earlier sync: the pod's status is still to show it
                added.append({"name": entry["name"], "resourceClaimName": known})
                continue
            template = self.store.find(self.templates, namespace, template_name)
            if template is None:
                continue
            body = claim_from_template(template, name, entry["name"], "")
            body["metadata"]["generateName"] = body["metadata"].pop("name")[:58]
            owner = {"apiVersion": "v1", "kind": "Pod", "name": name, "uid": meta["uid"]}
            body["metadata"]["ownerReferences"] = [{**owner, "controller": True, "blockOwnerDeletion": True}]
            try:
                claim = self.store.create(self.claims, namespace, body, trusted=True)
            except ApiError:
                continue
            self._made[(meta["uid"], entry["name"])] = claim["metadata"]["name"]
            added.append({"name": entry["name"], "resourceClaimName": claim["metadata"]["name"]})
        if not added:
            return
        current = self.store.find(self.pods, namespace, name, meta["uid"])
        if current is None:
            return
        status = dict(current.get("status") or {})
        present = status.get("resourceClaimStatuses") or []
        names = {entry.get("name") for entry in present}
        status["resourceClaimStatuses"] = [*present, *(entry for entry in added if entry["name"] not in names)]
        if status == current.get("status"):
            return
        try:
            self.store.update(self.pods, namespace, name, {**current, "status": status}, "status", trusted=True)
        except ApiError:
            return

    def _release(self, pod: Object) -> None:
        meta = pod["metadata"]
        namespace, uid = meta["namespace"], meta["uid"]
        statuses = {
            e.get("name"): e.get("resourceClaimName")
            for e in (pod.get("status") or {}).get("resourceClaimStatuses") or []
        }
        for entry in pod["spec"]["resourceClaims"]:
            made = self._made.pop((uid, entry.get("name")), None)
            claim_name = entry.get("resourceClaimName") or statuses.get(entry.get("name")) or made
            claim = self.store.find(self.claims, namespace, claim_name) if claim_name else None
            if claim is None:
                continue
            owners = claim["metadata"].get("ownerReferences") or []
            status = dict(claim.get("status") or {})
            reserved = [r for r in status.get("reservedFor") or [] if r.get("uid") != uid]
            try:
                if any(owner.get("uid") == uid for owner in owners):
                    self.store.delete(self.claims, namespace, claim["metadata"]["name"])
                elif reserved != (status.get("reservedFor") or []) or (not reserved and "allocation" in status):
                    status["reservedFor"] = reserved
                    if not reserved:
                        status.pop("reservedFor")
                        status.pop("allocation", None)
                    body = {**claim, "status": status}
                    self.store.update(self.claims, namespace, claim["metadata"]["name"], body, "status", trusted=True)
            except ApiError:
                continue
