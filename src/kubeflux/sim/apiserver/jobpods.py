"""A ``batch/v1`` Job's pods as kube-controller-manager v1.36's Job controller reads them and makes them
(``pkg/controller/job``): what a pod's manifest says of its phase, readiness, deletion, tracking finalizer, completion
index and finish time, the order active pods are deleted in, and a new pod from the Job's template. The sync that
uses them is :mod:`kubeflux.sim.apiserver.jobsync`.
"""

from __future__ import annotations

import copy
from typing import Any

from kubeflux.apiobjects.manifests import parse_timestamp

__all__ = [
    "COMPLETION_INDEX",
    "TRACKING_FINALIZER",
    "completion_index",
    "deleting",
    "failed",
    "finished_at",
    "phase",
    "pod_from_template",
    "ready",
    "removal_order",
    "seconds",
    "tracked",
]

Object = dict[str, Any]

TRACKING_FINALIZER = "batch.kubernetes.io/job-tracking"
"""The finalizer that keeps a finished pod until the controller counted it."""
COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"
"""An Indexed Job's pod's index (label and annotation)."""


def phase(pod: Object) -> str:
    """The pod's ``status.phase`` (empty before one is set)."""
    return str((pod.get("status") or {}).get("phase") or "")


def deleting(pod: Object) -> bool:
    """Its deletion has begun (``deletionTimestamp`` set)."""
    return bool(pod["metadata"].get("deletionTimestamp"))


def ready(pod: Object) -> bool:
    """Its ``Ready`` condition is ``True``."""
    conditions = (pod.get("status") or {}).get("conditions") or ()
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions if isinstance(c, dict))


def tracked(pod: Object) -> bool:
    """It still carries :data:`TRACKING_FINALIZER`: the controller has not counted it yet."""
    return TRACKING_FINALIZER in (pod["metadata"].get("finalizers") or ())


def failed(pod: Object, only_failed: bool = False) -> bool:
    """``isPodFailed``: Failed, or deleted before it finished (unless ``only_failed``: ``podReplacementPolicy:
    Failed``, which a ``podFailurePolicy`` implies)."""
    now = phase(pod)
    return now == "Failed" or (not only_failed and deleting(pod) and now != "Succeeded")


def completion_index(pod: Object) -> int | None:
    """An Indexed Job's pod's index (its :data:`COMPLETION_INDEX` annotation); None without a readable one."""
    text = (pod["metadata"].get("annotations") or {}).get(COMPLETION_INDEX)
    try:
        return int(text) if text is not None else None
    except ValueError:
        return None


def seconds(text: Any) -> float | None:
    """An RFC 3339 timestamp in Unix seconds; None when absent or unreadable."""
    try:
        return parse_timestamp(text) if isinstance(text, str) and text else None
    except ValueError:
        return None


def finished_at(pod: Object) -> float:
    """``getFinishedTime``: the last container's ``finishedAt``, else ``Ready=False``'s transition, else the
    deletion time less its grace period, else the creation time."""
    status = pod.get("status") or {}
    ends = [
        seconds(((c or {}).get("state") or {}).get("terminated", {}).get("finishedAt"))
        for c in status.get("containerStatuses") or ()
    ]
    if ends and all(end is not None for end in ends):
        return max(end for end in ends if end is not None)
    for condition in status.get("conditions") or ():
        if condition.get("type") == "Ready" and condition.get("status") == "False":
            at = seconds(condition.get("lastTransitionTime"))
            if at is not None:
                return at
    meta = pod["metadata"]
    deleted = seconds(meta.get("deletionTimestamp"))
    if deleted is not None:
        return deleted - float(meta.get("deletionGracePeriodSeconds") or 0)
    return seconds(meta.get("creationTimestamp")) or 0.0


def removal_order(pod: Object) -> tuple[int, int, int]:
    """``controller.ActivePods``: unscheduled before scheduled, pending before running, not ready before ready."""
    return (1 if pod["spec"].get("nodeName") else 0, 1 if phase(pod) == "Running" else 0, 1 if ready(pod) else 0)


def pod_from_template(job: Object, index: int | None) -> Object:
    """A pod of ``job`` as the controller creates it: the template, the tracking finalizer, the controller
    reference, ``generateName`` (and an Indexed Job's index)."""
    meta, spec = job["metadata"], job["spec"]
    template = copy.deepcopy(spec.get("template") or {})
    pod_meta: Object = dict(template.get("metadata") or {})
    pod_spec: Object = dict(template.get("spec") or {})
    labels = dict(pod_meta.get("labels") or {})
    annotations = dict(pod_meta.get("annotations") or {})
    generate = f"{meta['name']}-"
    if index is not None:
        annotations[COMPLETION_INDEX] = labels[COMPLETION_INDEX] = str(index)
        pod_spec["hostname"] = f"{meta['name']}-{index}"
        generate = f"{meta['name']}-{index}-"
        variable = {
            "name": "JOB_COMPLETION_INDEX",
            "valueFrom": {"fieldRef": {"fieldPath": f"metadata.labels['{COMPLETION_INDEX}']"}},
        }
        pod_spec["containers"] = [
            {**c, "env": [*(c.get("env") or ()), variable]}
            if not any(e.get("name") == "JOB_COMPLETION_INDEX" for e in c.get("env") or ())
            else c
            for c in pod_spec.get("containers") or ()
        ]
    finalizers = list(pod_meta.get("finalizers") or ())
    if TRACKING_FINALIZER not in finalizers:
        finalizers.append(TRACKING_FINALIZER)
    owner = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "name": meta["name"],
        "uid": meta["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }
    pod_meta.pop("name", None)
    pod_meta.update(generateName=generate, finalizers=finalizers, ownerReferences=[owner])
    if labels:
        pod_meta["labels"] = labels
    if annotations:
        pod_meta["annotations"] = annotations
    return {"apiVersion": "v1", "kind": "Pod", "metadata": pod_meta, "spec": pod_spec}
