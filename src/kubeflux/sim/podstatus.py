"""A simulated pod's Kubernetes status, derived on demand from a few timestamps.

The cluster stores per pod only the times of its stages (created, unschedulable, bound, Running, finished) and
how it ended; conditions and container states are computed here when asked, so a month-long trace does not build
millions of dicts. The result follows the kubelet (and KWOK's ``pod/general`` stages):

* ``PodScheduled`` — absent until the scheduler acts; ``False/Unschedulable`` with the scheduler's message when it
  could not place the pod; ``True`` at the bind.
* ``Initialized`` — ``True`` at the bind (the simulated pods have no init containers).
* ``ContainersReady`` and ``Ready`` — ``False/ContainersNotReady`` from the bind until Running, ``True`` while
  running, ``False/PodCompleted`` once the container terminated.
* Container state — ``waiting/ContainerCreating`` between bind and Running, ``running`` with ``startedAt``,
  ``terminated`` with ``exitCode`` and reason ``Completed`` (0), ``Error`` (non-zero) or ``DeadlineExceeded``.

Times in the output are float seconds of virtual time (not RFC 3339 strings), under the Kubernetes field names.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kubeflux.scheduler.messages import PREEMPTED_REASON, PREEMPTION_CONDITION_REASON
from kubeflux.scheduler.objects import PodPhase

if TYPE_CHECKING:
    from kubeflux.sim.pods import SimPod


def _condition(kind: str, status: bool, at: float, reason: str = "", message: str = "") -> dict[str, Any]:
    cond: dict[str, Any] = {"type": kind, "status": "True" if status else "False", "lastTransitionTime": at}
    if reason:
        cond["reason"] = reason
    if message:
        cond["message"] = message
    return cond


_DISRUPTIONS = {
    "NodeLost": "DeletionByTaintManager",
    "Deleted": "DeletionByUser",
    PREEMPTED_REASON: PREEMPTION_CONDITION_REASON,
}
"""The ``DisruptionTarget`` condition's reason for each way a pod is ended from outside (its ``reason``)."""


def pod_conditions(sp: SimPod) -> list[dict[str, Any]]:
    """``status.conditions`` in the kubelet's order: PodScheduled, Initialized, ContainersReady, Ready."""
    conditions: list[dict[str, Any]] = []
    if sp.bound_at is None:
        if sp.unschedulable_at is not None:
            conditions.append(
                _condition("PodScheduled", False, sp.unschedulable_at, "Unschedulable", sp.unschedulable_message)
            )
        return conditions
    conditions.append(_condition("PodScheduled", True, sp.bound_at))
    if sp.reason == "OutOfcpu" or sp.reason.startswith("OutOf"):
        return conditions  # rejected by the kubelet's admission before anything started
    conditions.append(_condition("Initialized", True, sp.bound_at))
    ready: tuple[bool, float, str]
    if sp.finished_at is not None:
        ready = (False, sp.finished_at, "PodCompleted")
    elif sp.running_at is not None:
        ready = (True, sp.running_at, "")
    else:
        ready = (False, sp.bound_at, "ContainersNotReady")
    for kind in ("ContainersReady", "Ready"):
        conditions.append(_condition(kind, *ready))
    why = _DISRUPTIONS.get(sp.reason)
    if why is not None:
        at = sp.finished_at if sp.finished_at is not None else sp.bound_at
        conditions.append(_condition("DisruptionTarget", True, at, why))
    return conditions


def container_state(sp: SimPod) -> dict[str, Any]:
    """The one container's ``state`` (``waiting``, ``running`` or ``terminated``)."""
    if sp.finished_at is not None and sp.bound_at is not None:
        terminated: dict[str, Any] = {
            "exitCode": sp.exit_code,
            "reason": sp.container_reason,
            "finishedAt": sp.finished_at,
        }
        if sp.running_at is not None:
            terminated["startedAt"] = sp.running_at
        return {"terminated": terminated}
    if sp.running_at is not None:
        return {"running": {"startedAt": sp.running_at}}
    return {"waiting": {"reason": "ContainerCreating"}}


def pod_status(sp: SimPod) -> dict[str, Any]:
    """The pod's ``status`` object as the API server would return it (times as virtual seconds)."""
    status: dict[str, Any] = {"phase": str(sp.pod.phase), "conditions": pod_conditions(sp)}
    if sp.reason:
        status["reason"] = sp.reason
        if sp.status_message:
            status["message"] = sp.status_message
    if sp.bound_at is not None:
        status["startTime"] = sp.bound_at
        if not sp.reason.startswith("OutOf"):
            state = container_state(sp)
            status["containerStatuses"] = [
                {
                    "name": sp.container_name,
                    "state": state,
                    "ready": "running" in state,
                    "started": "running" in state,
                    "restartCount": 0,
                }
            ]
    elif sp.pod.phase is PodPhase.FAILED and sp.finished_at is not None:
        status["reason"] = sp.reason or "Deleted"
    elif sp.nominated_node:
        status["nominatedNodeName"] = sp.nominated_node
    return status


__all__ = ["container_state", "pod_conditions", "pod_status"]
