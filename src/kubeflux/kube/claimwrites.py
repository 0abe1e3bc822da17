"""A Bind's writes of its pod's ResourceClaims, as kube-scheduler's DynamicResources plugin makes them at PreBind
(``bindClaim``) and takes them back at Unreserve.

* A claim whose ``reservedFor`` holds the pod already is not written (``IsReservedForPod``: serve restarted between
  the claim's write and the Binding, or the Binding was refused after it): writing it again is refused as a
  duplicate, for ever.
* A claim allocated now first gets the finalizer ``resource.kubernetes.io/delete-protection`` (a write of the claim
  itself: a status write cannot change metadata), so that deleting it while its pod runs leaves it Terminating, its
  devices taken, until the resourceclaim controller has deallocated it; then its status: the allocation and the pod
  in ``reservedFor``.
* Every write carries the ``resourceVersion`` read (the one the finalizer's write answered, for the status after
  it): 409 when another writer changed the claim since, so another scheduler's reservation is never overwritten.
  Then, as kube-scheduler's ``RetryOnConflict``, the claim is read again and written again upon what it is now,
  unless that no longer allows the decision (allocated meanwhile when kubeflux allocates it, deallocated or given
  other devices when the pod joins a shared allocation, deleted or replaced): a gang member sharing a claim another
  member just allocated joins its ``reservedFor``.
* When a later write or the Binding is refused, what was written for the pod is taken back: the pod leaves
  ``reservedFor``; an allocation written for it that no other pod shares is removed, and the finalizer with it.
  Taking back is best effort (a change by another writer meanwhile wins; the resourceclaim controller frees a claim
  reserved for a pod that ended).
* A pending pod's claim allocated on a node the pod can no longer use is freed (:func:`free_claim`) when the scheduler
  says so (kube-scheduler's DynamicResources PostFilter): one conditional status write.
* The server's answers (to the writes, to their taking back) go to the scheduler's books at once, as kube-scheduler
  keeps its assume cache from its own writes: the watch may show a claim's undoing seconds later, and a pod tried
  again meanwhile against the claim as the watch last showed it (allocated, reserved for the pod) would be bound
  with nothing written, on a claim no longer allocated (:class:`~kubeflux.kube.claimversions.ClaimVersions`).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterable
from typing import Any, Protocol

import orjson
import urllib3
from kubernetes import client

from kubeflux.apiobjects.resourceclaims import FINALIZER, claim_status_patch, finalizer_patch
from kubeflux.scheduler.devices import ClaimAllocation

__all__ = ["ClaimWriter", "Written", "free_claim", "reserve_claims", "unreserve_claims"]

log = logging.getLogger(__name__)

Written = tuple[ClaimAllocation, dict[str, Any]]
"""A claim written for a pod, and the claim as the server answered the write."""


CONFLICT_RETRIES = 5
"""Writes of one claim tried upon a fresh read after a conflict, as client-go's ``retry.DefaultRetry`` (5 steps)."""


class ClaimWriter(Protocol):
    def read_namespaced_resource_claim(self, name: str, namespace: str) -> bytes: ...

    def patch_namespaced_resource_claim(self, name: str, namespace: str, patch: Any) -> bytes: ...

    def patch_namespaced_resource_claim_status(
        self, name: str, namespace: str, patch: Any, content_type: str = ...
    ) -> bytes: ...


def reserve_claims(
    writer: ClaimWriter,
    claims: Iterable[ClaimAllocation],
    pod: str,
    uid: str,
    written: list[Written],
    allocated_at: str = "",
) -> None:
    """Write each of ``claims`` for the pod ``pod`` (``uid``), appending to ``written`` what the server answered (see
    the module docstring); an allocation carries ``allocated_at`` as its ``allocationTimestamp`` (RFC 3339). Raises
    the first refusal."""
    for made in claims:
        if not made.reserved:
            _reserve(writer, made, pod, uid, written, allocated_at)


def _reserve(
    writer: ClaimWriter, made: ClaimAllocation, pod: str, uid: str, written: list[Written], allocated_at: str
) -> None:
    """One claim's writes; on a conflict (409) the claim is read again and the writes made again upon it while the
    decision still holds (kube-scheduler's ``RetryOnConflict``): a gang member sharing a claim another member just
    allocated joins its ``reservedFor``."""
    version, finalizers = made.resource_version, list(made.finalizers)
    for attempt in range(CONFLICT_RETRIES):
        try:
            if made.allocate and FINALIZER not in finalizers:
                patch = finalizer_patch(made, [*finalizers, FINALIZER], version)
                version = _version(
                    orjson.loads(writer.patch_namespaced_resource_claim(made.name, made.namespace, patch))
                )
            patch, kind = claim_status_patch(made, pod, uid, version, allocated_at)
            reply = writer.patch_namespaced_resource_claim_status(made.name, made.namespace, patch, kind)
            written.append((made, orjson.loads(reply)))
            return
        except client.ApiException as exc:
            if exc.status != 409 or attempt == CONFLICT_RETRIES - 1:
                raise
        fresh = orjson.loads(writer.read_namespaced_resource_claim(made.name, made.namespace))
        meta, status = fresh.get("metadata") or {}, fresh.get("status") or {}
        if any(entry.get("uid") == uid for entry in status.get("reservedFor") or []):
            return
        why = _changed(made, meta, status)
        if why:
            body = orjson.dumps({"message": f"resourceclaim {made.key} {why}"})
            raise client.ApiException(status=409, reason="Conflict", body=body.decode())
        version, finalizers = _version(fresh), list(meta.get("finalizers") or [])


def _changed(made: ClaimAllocation, meta: dict[str, Any], status: dict[str, Any]) -> str:
    """How the claim read again (``meta``, ``status``) no longer allows the decision ``made`` ("" when it does)."""
    if made.uid and meta.get("uid") != made.uid:
        return "was replaced in the meantime"
    if meta.get("deletionTimestamp"):
        return "got deleted in the meantime"
    allocation = status.get("allocation")
    if made.allocate:
        return "got allocated elsewhere in the meantime" if allocation else ""
    results = [
        (item.get("request"), item.get("driver"), item.get("pool"), item.get("device"))
        for item in ((allocation or {}).get("devices") or {}).get("results") or []
    ]
    if results != [(d.request, d.driver, d.pool, d.device) for d in made.results]:
        return "got deallocated or allocated other devices in the meantime"
    return ""


def unreserve_claims(writer: ClaimWriter, written: list[Written], uid: str) -> list[dict[str, Any]]:
    """Take back what :func:`reserve_claims` wrote for the pod of ``uid`` (see the module docstring); the claims as
    the server answered the last write of each (or, when taking back failed, as read again: best effort too), for
    the scheduler's books, which must not wait for the watch to see the claims as they are now."""
    now: list[dict[str, Any]] = []
    for made, claim in reversed(written):
        meta, status = claim.get("metadata") or {}, claim.get("status") or {}
        reserved = [entry for entry in status.get("reservedFor") or [] if entry.get("uid") != uid]
        release = made.allocate and not reserved
        changes: dict[str, Any] = {"reservedFor": reserved or None}
        if release:
            changes["allocation"] = None
        precondition = {"uid": meta.get("uid"), "resourceVersion": meta.get("resourceVersion")}
        patch = {"metadata": precondition, "status": changes}
        try:
            reply = orjson.loads(writer.patch_namespaced_resource_claim_status(made.name, made.namespace, patch))
            finalizers = list((reply.get("metadata") or {}).get("finalizers") or [])
            if release and FINALIZER in finalizers:
                finalizers.remove(FINALIZER)
                undo = finalizer_patch(made, finalizers, _version(reply))
                reply = orjson.loads(writer.patch_namespaced_resource_claim(made.name, made.namespace, undo))
            now.append(reply)
        except (client.ApiException, urllib3.exceptions.HTTPError, OSError) as exc:
            log.warning("resourceclaim %s: reservation of pod %s not taken back: %s", made.key, uid, exc)
            with contextlib.suppress(client.ApiException, urllib3.exceptions.HTTPError, OSError):  # the watch tells
                now.append(orjson.loads(writer.read_namespaced_resource_claim(made.name, made.namespace)))
    return now


def free_claim(writer: ClaimWriter, made: ClaimAllocation) -> dict[str, Any]:
    """Free the claim ``made`` (as the scheduler read it): its ``allocation``, ``reservedFor`` and ``devices`` removed
    in one status write under its ``uid`` and ``resourceVersion`` (409 when another writer changed it since), as
    kube-scheduler's DynamicResources PostFilter does (:class:`~kubeflux.scheduler.messages.Deallocate`); the claim as
    the server answered. Raises the refusal."""
    meta: dict[str, Any] = {}
    if made.uid:
        meta["uid"] = made.uid
    if made.resource_version:
        meta["resourceVersion"] = made.resource_version
    patch = {"metadata": meta, "status": {"allocation": None, "reservedFor": None, "devices": None}}
    return dict(orjson.loads(writer.patch_namespaced_resource_claim_status(made.name, made.namespace, patch)))


def _version(claim: dict[str, Any]) -> str:
    return str((claim.get("metadata") or {}).get("resourceVersion") or "")
