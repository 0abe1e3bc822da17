"""The objects a scheduler's decisions become on the Kubernetes API, built here once for every shell that writes them.

* a :class:`~kubeflux.scheduler.messages.Bind` is a ``v1`` ``Binding`` (:func:`binding`), whose annotations the
  API server copies onto the pod, and a ``Normal`` ``Scheduled`` event (:func:`scheduled_message`);
* an :class:`~kubeflux.scheduler.messages.Unschedulable` (or a ``Reject``) is the pod's ``PodScheduled=False``
  condition with reason ``Unschedulable`` (:func:`unschedulable_condition`) and a ``Warning`` ``FailedScheduling``
  event;
* events written through ``events.k8s.io/v1`` are :func:`scheduler_event` (kube-scheduler's recorder writes these).

``kubeflux serve``'s binder (:mod:`kubeflux.kube.binder`) and the served cluster's in-process schedulers
(:mod:`kubeflux.sim.apiserver.inprocess`) use them; when each applies a decision is
:func:`kubeflux.scheduler.decisions.apply_decisions`'s to say.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, Final

from kubeflux.scheduler.storage import ANN_BOUND_BY_CONTROLLER, ANN_SELECTED_NODE, ClaimBinding

__all__ = [
    "NOTE_LIMIT",
    "POD_SCHEDULED",
    "UNSCHEDULABLE",
    "binding",
    "claim_patch",
    "disruption_condition",
    "scheduled_message",
    "scheduler_event",
    "unschedulable_condition",
]

POD_SCHEDULED: Final = "PodScheduled"
"""The pod condition a scheduler writes."""
UNSCHEDULABLE: Final = "Unschedulable"
"""The ``PodScheduled=False`` reason of a pod the scheduler could not place (``v1.PodReasonUnschedulable``)."""


def binding(name: str, uid: str, node: str, annotations: dict[str, str] | None = None) -> dict[str, Any]:
    """The ``v1`` Binding of pod ``name`` to ``node``: ``uid`` (when given) is the pod's, a precondition the API
    server checks; ``annotations`` (when any) are copied onto the pod in the same write."""
    metadata: dict[str, Any] = {"name": name}
    if uid:
        metadata["uid"] = uid
    if annotations:
        metadata["annotations"] = dict(annotations)
    return {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": metadata,
        "target": {"apiVersion": "v1", "kind": "Node", "name": node},
    }


def claim_patch(claim: ClaimBinding) -> dict[str, Any]:
    """The JSON merge patch a :class:`~kubeflux.scheduler.storage.ClaimBinding` writes, as kube-scheduler's volume
    binder writes it before the pod's Binding: on the claim, ``volume.kubernetes.io/selected-node`` (its provisioner
    makes a volume on that node); on a chosen PersistentVolume (``claim.volume``), ``spec.claimRef`` naming the claim
    and ``pv.kubernetes.io/bound-by-controller`` (the PV controller then binds the claim to it). The
    ``resourceVersion`` read (when known) rides along: the API server refuses the patch (409) when another writer
    changed the object since, as kube-scheduler's ``bindAPIUpdate`` sends its assumed copy."""
    metadata: dict[str, Any] = {"resourceVersion": claim.resource_version} if claim.resource_version else {}
    if not claim.volume:
        return {"metadata": {**metadata, "annotations": {ANN_SELECTED_NODE: claim.node}}}
    namespace, _, name = claim.claim.partition("/")
    ref = {"kind": "PersistentVolumeClaim", "apiVersion": "v1", "namespace": namespace, "name": name}
    if claim.claim_uid:
        ref["uid"] = claim.claim_uid
    return {"metadata": {**metadata, "annotations": {ANN_BOUND_BY_CONTROLLER: "yes"}}, "spec": {"claimRef": ref}}


def scheduled_message(pod: str, node: str) -> str:
    """The ``Scheduled`` event's message for pod ``namespace/name`` bound to ``node``, as kube-scheduler writes it."""
    return f"Successfully assigned {pod} to {node}"


def unschedulable_condition(message: str, transition_time: str) -> dict[str, Any]:
    """``PodScheduled=False`` with reason ``Unschedulable`` and the scheduler's ``message``; ``transition_time`` is
    RFC 3339 (:func:`kubeflux.apiobjects.manifests.format_timestamp`)."""
    return {
        "type": POD_SCHEDULED,
        "status": "False",
        "reason": UNSCHEDULABLE,
        "message": message,
        "lastProbeTime": None,
        "lastTransitionTime": transition_time,
    }


def disruption_condition(reason: str, message: str, transition_time: str) -> dict[str, Any]:
    """``DisruptionTarget=True``: the pod is about to be ended from outside, ``reason`` saying by whom
    (``PreemptionByScheduler``, ``EvictionByEvictionAPI``…), as written before the pod is deleted."""
    return {
        "type": "DisruptionTarget",
        "status": "True",
        "reason": reason,
        "message": message,
        "lastProbeTime": None,
        "lastTransitionTime": transition_time,
    }


NOTE_LIMIT: Final = 1024
"""The longest ``note`` an ``events.k8s.io/v1`` Event may carry (longer ones are cut)."""


def scheduler_event(
    regarding: dict[str, str],
    *,
    name: str,
    at: float,
    controller: str,
    instance: str,
    action: str,
    reason: str,
    note: str,
    type_: str,
) -> dict[str, Any]:
    """An ``events.k8s.io/v1`` Event named ``name`` about the pod ``regarding`` (its ``namespace``, ``name`` and
    ``uid``), reported by ``controller`` (the scheduler's name) from ``instance`` at ``at`` (Unix seconds, written as
    a ``MicroTime``: RFC 3339 with microseconds)."""
    return {
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        "metadata": {"name": name, "namespace": regarding["namespace"]},
        "eventTime": datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
        "reportingController": controller,
        "reportingInstance": f"{controller}-{instance}"[:128],
        "action": action,
        "reason": reason,
        "note": note[:NOTE_LIMIT],
        "type": type_,
        "regarding": {"apiVersion": "v1", "kind": "Pod", **regarding},
    }
