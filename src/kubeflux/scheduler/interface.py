"""The contract between a scheduler core and the shells that drive it (simulator, Kubernetes driver).

A scheduler is a plain object with no I/O and no clock: the shell tells it what changed in the cluster
(:class:`ClusterEvent`) and asks it for decisions at a given time. The same object runs in the simulator (virtual
time) and on a real cluster (wall-clock time).

Lifecycle, per call from the shell:

1. ``observe(event, now)`` for every change since the last call, in the order they happened. A scheduler sees
   *every* pod and node, including pods that name another scheduler, so it can account for them.
2. ``schedule(now)`` returns the decisions for the pods this scheduler owns. The shell applies them: a
   :class:`Bind` becomes a Binding (and the pod is then reported back as updated with ``node_name`` set); an
   :class:`Unschedulable` becomes ``PodScheduled=False`` with reason ``Unschedulable`` and a
   ``FailedScheduling`` event.
3. ``next_wakeup(now)`` is the earliest time the scheduler wants ``schedule`` called again even if nothing
   changes (a gang's Permit timeout, a retry back-off); None when it only needs to hear of events; ``now`` itself
   when its pass left work it can do at once (it stopped at its queue depth after binding pods).
4. An :class:`Evict` ends a pod (whichever scheduler owns it) to make room for one of higher priority; the
   scheduler hears of it as of any pod's end, by the events that follow.
5. A :class:`PodWarning` reports a problem the scheduler found in a pod it does not reject (another scheduler's
   pod with a bad request, a corrupt allocation annotation on a pod it recovered): the shell records it as a
   ``Warning`` Kubernetes Event on the pod and changes nothing else. It may concern any pod, not only the
   scheduler's own, and is said once per problem.
6. A :class:`Bind` the cluster refuses (the pod is gone or already bound, the node is gone) is told back with
   ``unreserve(pod, uid, node, reason, now)`` to a scheduler that implements :class:`Unreserve` (kube-scheduler's
   extension point of that name), so that it gives up what it set aside for the pod.
7. A :class:`Deallocate` frees a pending pod's ResourceClaim allocated on a node the pod can no longer use
   (kube-scheduler's DynamicResources PostFilter): the shell clears the claim's allocation, and the scheduler hears
   of it by the claim's event that follows.

A shell must call ``schedule`` after any batch of events; it may call it more often. What each decision does is said
once, by :func:`kubeflux.scheduler.decisions.apply_decisions`: a shell gives it the decisions and a
:class:`DecisionSink`, its own way of writing them.
"""

from __future__ import annotations

from typing import Final, Protocol, TypeVar, runtime_checkable

from kubeflux.scheduler.messages import (
    EXPECTED_START_ANNOTATION,
    EXPECTED_START_TIME_ANNOTATION,
    PREEMPTED_REASON,
    PREEMPTION_CONDITION_REASON,
    Bind,
    ClusterEvent,
    Deallocate,
    EventKind,
    Evict,
    PodWarning,
    Reject,
    Unschedulable,
    expected_start_annotations,
    expected_start_text,
    not_evicted_whole,
    rfc3339,
)
from kubeflux.scheduler.objects import Node, Pod, PodGroup

Decision = Bind | Unschedulable | Reject | PodWarning | Evict | Deallocate


class Scheduler(Protocol):
    """A scheduler core. ``name`` is the ``schedulerName`` it owns pods for."""

    name: str

    def observe(self, event: ClusterEvent, now: float) -> None: ...

    def schedule(self, now: float) -> list[Decision]: ...

    def next_wakeup(self, now: float) -> float | None: ...


@runtime_checkable
class Unreserve(Protocol):
    """A scheduler that sets resources aside for a pod when it decides to bind it, and gives them up when the
    cluster refuses that :class:`Bind`: ``pod`` is its ``namespace/name``, ``node`` the Bind's node, ``reason``
    the API server's answer."""

    def unreserve(self, pod: str, uid: str, node: str, reason: str, now: float) -> None: ...


@runtime_checkable
class Unevict(Protocol):
    """A scheduler that waits for the pods it evicted to leave, and hears when the cluster refused an
    :class:`Evict` (a PodDisruptionBudget's 429, the pod gone): ``pod`` is its ``namespace/name``."""

    def unevict(self, pod: str, uid: str, reason: str, now: float) -> None: ...


@runtime_checkable
class IgnoresStatusUpdates(Protocol):
    """A scheduler that reads nothing of what a shell writes on a pending pod for an :class:`Unschedulable` or
    :class:`Reject` (the ``PodScheduled`` condition, the :data:`EXPECTED_START_ANNOTATION`), when
    ``ignores_status_updates`` is True: a shell whose events carry the live pod object (the simulator) may then leave
    out the MODIFIED events that bring only that, one per pod and scheduling pass (most of a busy run's events).
    The pod the scheduler holds is the same object, so it sees the new status all the same."""

    ignores_status_updates: bool


P = TypeVar("P")
"""A pod as a shell holds it (the simulator's ``SimPod``, a stored manifest, ``serve``'s ``PodRef``)."""


class DecisionSink(Protocol[P]):
    """Where a shell writes a scheduler's decisions (see :func:`kubeflux.scheduler.decisions.apply_decisions`, which
    says when each method is called). ``pod`` is the shell's own record of the pod a decision names."""

    def pod(self, key: str, uid: str) -> P | None:
        """The pod ``key`` (``namespace/name``) decided for; None when it is gone (the shell may also say so of a
        pod whose ``uid`` is another than the decision's, or take that to the write)."""
        ...

    def not_found(self, key: str) -> str:
        """Why a Bind of the pod ``key`` that is gone was refused, as the shell's API says it."""
        ...

    def owner(self, pod: P) -> str:
        """The pod's ``schedulerName``."""
        ...

    def bind(self, pod: P, decision: Bind) -> str:
        """Bind the pod; empty when the cluster took the Binding (or it went out, with a refusal coming back later
        through the scheduler's ``unreserve``), else why the cluster refused it."""
        ...

    def unschedulable(self, pod: P, decision: Unschedulable) -> None:
        """``PodScheduled=False/Unschedulable`` with the message, a ``FailedScheduling`` event and the expected
        start annotation (set or removed)."""
        ...

    def reject(self, pod: P, decision: Reject) -> None:
        """As :meth:`unschedulable` (no expected start), and the pod can never run here."""
        ...

    def warn(self, pod: P, decision: PodWarning) -> None:
        """A ``Warning`` event with the decision's reason and message on the pod (whoever owns it)."""
        ...

    def evict(self, pod: P, decision: Evict) -> str:
        """Evict the pod (whoever owns it; see :class:`Evict`): empty when the cluster took the eviction (or it went
        out on a writer), else why it refused (a PodDisruptionBudget's 429, the pod gone)."""
        ...

    def deallocate(self, pod: P, decision: Deallocate) -> str:
        """Clear the claim's ``status.allocation`` and ``reservedFor`` (see :class:`Deallocate`): empty when written
        (or sent to a writer), else why the cluster refused it (the claim changed or went meanwhile)."""
        ...

    def problem(self, message: str) -> None:
        """A decision not applied, and why (the scheduler decided for another's pod, or sent a malformed decision)."""
        ...


__all__ = [
    "BIND_BACKOFF",
    "EXPECTED_START_ANNOTATION",
    "EXPECTED_START_TIME_ANNOTATION",
    "MAX_BIND_BACKOFF",
    "PREEMPTED_REASON",
    "PREEMPTION_CONDITION_REASON",
    "Bind",
    "ClusterEvent",
    "Deallocate",
    "Decision",
    "DecisionSink",
    "EventKind",
    "Evict",
    "IgnoresStatusUpdates",
    "Node",
    "Pod",
    "PodGroup",
    "PodWarning",
    "Reject",
    "Scheduler",
    "Unevict",
    "Unreserve",
    "Unschedulable",
    "expected_start_annotations",
    "expected_start_text",
    "not_evicted_whole",
    "rfc3339",
]

BIND_BACKOFF: Final = 1.0
"""Seconds a pod whose Bind was refused waits before it is tried again (kube-scheduler's
``podInitialBackoffSeconds``); each further refusal doubles it up to :data:`MAX_BIND_BACKOFF`. The shell's binder
waits as long before it writes again what a refused Bind left to undo."""
MAX_BIND_BACKOFF: Final = 10.0
"""The longest back-off after refused Binds (kube-scheduler's ``podMaxBackoffSeconds``)."""
