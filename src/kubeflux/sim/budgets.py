"""The PodDisruptionBudgets of a simulated cluster, as its Eviction API enforces them
(``pkg/registry/core/pod/storage/eviction.go``), computed from the pods as they are at the eviction.

An eviction of a pod that is not Running (Pending, finished) or already being deleted goes without looking at any
budget. Otherwise the budgets of the pod's namespace whose selector selects it (``policy/v1``: an empty selector
selects every pod, an absent one none): none, and it goes; two or more, and it is refused as the real server
refuses it (a 500). With one, its ``disruptionsAllowed`` is what the disruption controller would write now
(:func:`~kubeflux.scheduler.preemption.disruptions_allowed`: the healthy pods are the selected ones Running and not
deleted; the expected count, needed by a percentage or ``maxUnavailable``, is unknown when a selected pod has a
controller, a Job having no scale, and 0 when none has); 0 refuses the eviction with the real 429's words. A
granted eviction ends the pod at once in the simulator, so the next one sees one healthy pod less.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from kubeflux.apiobjects.disruption import desired_healthy, eviction_refusal
from kubeflux.scheduler.objects import DisruptionBudget, Pod, PodPhase
from kubeflux.scheduler.preemption import disruptions_allowed

__all__ = ["TOO_MANY_BUDGETS", "DisruptionBudgets"]

TOO_MANY_BUDGETS = (
    "Internal error occurred: This pod has more than one PodDisruptionBudget, which the eviction subresource does "
    "not support."
)


class DisruptionBudgets:
    """The budgets of one simulated cluster: a workload's, from its start or from when it creates each until it
    deletes it (:meth:`add`, :meth:`remove`)."""

    def __init__(self, budgets: Sequence[DisruptionBudget] = ()) -> None:
        self.budgets = list(budgets)

    def __len__(self) -> int:
        return len(self.budgets)

    def add(self, budget: DisruptionBudget) -> None:
        """A budget created."""
        self.budgets.append(budget)

    def remove(self, budget: DisruptionBudget) -> None:
        """A budget deleted: it guards nothing more."""
        self.budgets = [b for b in self.budgets if b.key != budget.key]

    def refusal(self, pod: Pod, pods: Iterable[Pod]) -> str:
        """Why the Eviction API refuses to evict ``pod`` now, ``pods`` being every pod of the cluster; ``""`` when
        it evicts it."""
        if not self.budgets or pod.phase is not PodPhase.RUNNING or pod.deleted:
            return ""
        matching = [b for b in self.budgets if b.selects(pod.namespace, pod.labels)]
        if not matching:
            return ""
        if len(matching) > 1:
            return TOO_MANY_BUDGETS
        budget = matching[0]
        healthy = 0
        expected: int | None = 0
        for other in pods:
            if not budget.selects(other.namespace, other.labels):
                continue
            if other.phase is PodPhase.RUNNING and not other.deleted:
                healthy += 1
            if other.owner:
                expected = None  # a Job's pod: its controller has no scale
        if disruptions_allowed(budget, healthy, expected) > 0:
            return ""
        return eviction_refusal(budget.name, desired_healthy(budget, expected), healthy)
