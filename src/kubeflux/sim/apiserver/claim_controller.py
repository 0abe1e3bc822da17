"""The served cluster's resourceclaim controller: what kube-controller-manager's (``pkg/controller/resourceclaim``)
does for pods with Dynamic Resource Allocation claims.

* For each ``spec.resourceClaims`` entry of a live pod that names a ``resourceClaimTemplateName`` and has no claim
  yet, it creates the claim from the template: ``generateName`` ``<pod>-<entry>-`` (the store adds the suffix), the
  annotation ``resource.kubernetes.io/pod-claim-name``, the pod its controlling owner; then it records the claim in
  the pod's ``status.resourceClaimStatuses`` (``pods/status``), where schedulers read which claim the entry is.
* When a pod has ended or is deleted, it leaves ``status.reservedFor`` of each of its claims; a claim reserved for no
  pod any more is deallocated (its ``status.allocation`` removed, then the finalizer
  ``resource.kubernetes.io/delete-protection``), so its devices can be given again, when a scheduler's allocation
  put that finalizer on it (an allocation without it stays, as the real controller leaves it); a claim made for the
  pod is then deleted.
* A claim deleted while a pod used it stays Terminating (the finalizer holds it, and its devices stay taken); once
  no pod uses it, it is deallocated and its finalizer removed, and it goes.

A template not found is waited for: the pod is synced again at its next event (the real controller requeues it).
"""

from __future__ import annotations

import asyncio
from typing import Any

from kubeflux.apiobjects.resourceclaims import FINALIZER, allocation_status, claim_from_template
from kubeflux.scheduler.devices import ClaimAllocation
from kubeflux.sim.apiserver import errors
from kubeflux.sim.apiserver.errors import ApiError
from kubeflux.sim.apiserver.follow import Reconciler, served
from kubeflux.sim.apiserver.registry import ResourceType
from kubeflux.sim.apiserver.store import Store
from kubeflux.sim.apiserver.watch import WatchEvent

__all__ = ["ClaimController", "free_claim", "unwrite_claims", "write_claims"]

Object = dict[str, Any]
TERMINAL = ("Succeeded", "Failed")
CLAIM_KEY = "resourceclaim:"
"""The prefix of a claim's key (``resourceclaim:namespace/name``) among the pods' uids in the work queue."""


def write_claims(
    store: Store,
    claims: tuple[ClaimAllocation, ...],
    pod: str,
    uid: str,
    written: list[Object],
    allocated_at: str = "",
) -> None:
    """Write a Bind's claim allocations for the pod ``pod`` (its ``uid``) to the claims, as kube-scheduler's
    DynamicResources PreBind does: nothing for a claim reserved for the pod already; the ``delete-protection``
    finalizer, then the allocation, for a claim allocated now; the pod in ``reservedFor``. Each claim written (as
    it was before) is appended to ``written``, for :func:`unwrite_claims`. Raises ApiError when a claim is gone,
    is being deleted, changed since the scheduler read it (409, as its ``resourceVersion`` precondition), or was
    allocated other devices (or deallocated) meanwhile. An allocation carries ``allocated_at`` as its
    ``allocationTimestamp`` (RFC 3339)."""
    resource = served(store, ("resource.k8s.io", "v1", "resourceclaims"))[0]
    for made in claims:
        claim = store.find(resource, made.namespace, made.name, made.uid or None)
        if claim is None:
            raise errors.not_found("resourceclaims", made.name, "resource.k8s.io")
        meta, status = claim["metadata"], claim.get("status") or {}
        if any(entry.get("uid") == uid for entry in status.get("reservedFor") or []):
            continue
        # changed since the scheduler read it (its resourceVersion): written upon what it is now while that still
        # allows the decision, as kube-scheduler's RetryOnConflict re-reads it (a gang member joining the allocation
        # another member just wrote)
        if meta.get("deletionTimestamp"):
            raise ApiError(409, "Conflict", f"claim {made.key} got deleted in the meantime")
        if made.allocate and status.get("allocation"):
            raise ApiError(409, "Conflict", f"claim {made.key} got allocated elsewhere in the meantime")
        results = ((status.get("allocation") or {}).get("devices") or {}).get("results") or []
        wanted = [{"request": d.request, "driver": d.driver, "pool": d.pool, "device": d.device} for d in made.results]
        if not made.allocate and results != wanted:
            raise ApiError(409, "Conflict", f"claim {made.key} got deallocated or allocated other devices meanwhile")
        written.append(claim)
        body = claim
        if made.allocate and FINALIZER not in (meta.get("finalizers") or []):
            finalizers = [*(meta.get("finalizers") or []), FINALIZER]
            body = {**claim, "metadata": {**meta, "finalizers": finalizers}}
            body = store.update(resource, made.namespace, made.name, body, trusted=True)
        body = {**body, "status": allocation_status(made, pod, uid, status, allocated_at)}
        store.update(resource, made.namespace, made.name, body, "status", trusted=True)


def free_claim(store: Store, made: ClaimAllocation) -> None:
    """Free the claim ``made`` (as a scheduler read it): its ``allocation``, ``reservedFor`` and ``devices`` removed in
    one status write, as kube-scheduler's DynamicResources PostFilter does
    (:class:`~kubeflux.scheduler.messages.Deallocate`). Raises ApiError when the claim is gone or replaced (404), or
    changed since it was read (409, its ``resourceVersion`` precondition)."""
    resource = served(store, ("resource.k8s.io", "v1", "resourceclaims"))[0]
    claim = store.find(resource, made.namespace, made.name, made.uid or None)
    if claim is None:
        raise errors.not_found("resourceclaims", made.name, "resource.k8s.io")
    if made.resource_version and claim["metadata"].get("resourceVersion") != made.resource_version:
        raise errors.conflict("resourceclaims", made.name, errors.STALE_OBJECT, "resource.k8s.io")
    status = {key: value for key, value in (claim.get("status") or {}).items() if key not in _FREED}
    store.update(resource, made.namespace, made.name, {**claim, "status": status}, "status", trusted=True)


_FREED = ("allocation", "reservedFor", "devices")
"""What freeing a claim removes from its status."""


def unwrite_claims(store: Store, written: list[Object], uid: str) -> None:
    """The Binding after :func:`write_claims` was refused: the pod of ``uid`` leaves the claims' ``reservedFor``, and
    an allocation written for it that no other pod shares goes, with the finalizer (kube-scheduler's Unreserve)."""
    resource = served(store, ("resource.k8s.io", "v1", "resourceclaims"))[0]
    for before in reversed(written):
        meta = before["metadata"]
        claim = store.find(resource, meta["namespace"], meta["name"], meta.get("uid"))
        if claim is not None:
            allocated_now = not (before.get("status") or {}).get("allocation")
            _unreserve(store, resource, claim, uid, release=allocated_now)


def _unreserve(store: Store, resource: ResourceType, claim: Object, uid: str, *, release: bool) -> None:
    """``claim`` without the pod of ``uid`` in ``reservedFor``; reserved for no pod and ``release``, deallocated and
    its ``delete-protection`` finalizer removed (the store removes a claim being deleted once no finalizer holds
    it). Raises ApiError."""
    meta, status = claim["metadata"], dict(claim.get("status") or {})
    namespace, name = meta["namespace"], meta["name"]
    reserved = [entry for entry in status.get("reservedFor") or [] if entry.get("uid") != uid]
    changed = reserved != (status.get("reservedFor") or [])
    status["reservedFor"] = reserved
    if not reserved:
        status.pop("reservedFor")
        if release and "allocation" in status:
            status.pop("allocation")
            changed = True
    if changed:
        claim = store.update(resource, namespace, name, {**claim, "status": status}, "status", trusted=True)
    finalizers = claim["metadata"].get("finalizers") or []
    if release and not reserved and FINALIZER in finalizers:
        kept = [item for item in finalizers if item != FINALIZER]
        new_meta = {**claim["metadata"], "finalizers": kept}
        if not kept:
            del new_meta["finalizers"]
        store.update(resource, namespace, name, {**claim, "metadata": new_meta}, trusted=True)


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
        follow = [(pods, self._pod_event), (claims, self._claim_event)]
        self.reconciler: Reconciler[str] = Reconciler(store, loop, follow, self._sync)
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
        if uid.startswith(CLAIM_KEY):
            self._free(uid)
            return
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
            try:  # a scheduler's allocation (the finalizer says so) goes with the last pod; another one stays
                _unreserve(self.store, self.claims, claim, uid, release=FINALIZER in _finalizers(claim))
                if any(owner.get("uid") == uid for owner in owners):
                    self.store.delete(self.claims, namespace, claim["metadata"]["name"])
            except ApiError:
                continue

    def _claim_event(self, type_: str, event: WatchEvent) -> None:
        claim = event.obj
        if type_ != "DELETED" and _held(claim):
            meta = claim["metadata"]
            self.reconciler.add(f"{CLAIM_KEY}{meta['namespace']}/{meta['name']}")

    def _free(self, key: str) -> None:
        """A claim deleted while a pod used it, once no pod does: deallocated and its finalizer removed (the store
        then removes it)."""
        namespace, _, name = key.removeprefix(CLAIM_KEY).partition("/")
        claim = self.store.find(self.claims, namespace, name)
        if claim is None or not _held(claim):
            return
        try:
            _unreserve(self.store, self.claims, claim, "", release=True)
        except ApiError:
            return


def _finalizers(claim: Object) -> list[str]:
    return list(claim["metadata"].get("finalizers") or [])


def _held(claim: Object) -> bool:
    """Whether ``claim`` is being deleted and only the ``delete-protection`` finalizer of an unused allocation (or
    of one no longer allocated) holds it."""
    status = claim.get("status") or {}
    return (
        bool(claim["metadata"].get("deletionTimestamp"))
        and FINALIZER in _finalizers(claim)
        and not (status.get("reservedFor"))
    )
