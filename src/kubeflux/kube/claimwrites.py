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
* When a later write or the Binding is refused, what was written for the pod is taken back: the pod leaves
  ``reservedFor``; an allocation written for it that no other pod shares is removed, and the finalizer with it.
  Taking back is best effort (a change by another writer meanwhile wins; the resourceclaim controller frees a claim
  reserved for a pod that ended).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any, Protocol

import orjson
import urllib3
from kubernetes import client

from kubeflux.apiobjects.resourceclaims import FINALIZER, claim_status_patch, finalizer_patch
from kubeflux.scheduler.devices import ClaimAllocation

__all__ = ["ClaimWriter", "Written", "reserve_claims", "unreserve_claims"]

log = logging.getLogger(__name__)

Written = tuple[ClaimAllocation, dict[str, Any]]
"""A claim written for a pod, and the claim as the server answered the write."""


class ClaimWriter(Protocol):
    def patch_namespaced_resource_claim(self, name: str, namespace: str, patch: Any) -> bytes: ...

    def patch_namespaced_resource_claim_status(
        self, name: str, namespace: str, patch: Any, content_type: str = ...
    ) -> bytes: ...


def reserve_claims(
    writer: ClaimWriter, claims: Iterable[ClaimAllocation], pod: str, uid: str, written: list[Written]
) -> None:
    """Write each of ``claims`` for the pod ``pod`` (``uid``), appending to ``written`` what the server answered (see
    the module docstring); raises the first refusal."""
    for made in claims:
        if made.reserved:
            continue
        version = made.resource_version
        if made.allocate and FINALIZER not in made.finalizers:
            patch = finalizer_patch(made, [*made.finalizers, FINALIZER], version)
            version = _version(orjson.loads(writer.patch_namespaced_resource_claim(made.name, made.namespace, patch)))
        patch, kind = claim_status_patch(made, pod, uid, version)
        reply = writer.patch_namespaced_resource_claim_status(made.name, made.namespace, patch, kind)
        written.append((made, orjson.loads(reply)))


def unreserve_claims(writer: ClaimWriter, written: list[Written], uid: str) -> None:
    """Take back what :func:`reserve_claims` wrote for the pod of ``uid`` (see the module docstring)."""
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
                writer.patch_namespaced_resource_claim(made.name, made.namespace, undo)
        except (client.ApiException, urllib3.exceptions.HTTPError, OSError) as exc:
            log.warning("resourceclaim %s: reservation of pod %s not taken back: %s", made.key, uid, exc)


def _version(claim: dict[str, Any]) -> str:
    return str((claim.get("metadata") or {}).get("resourceVersion") or "")
