"""The values a shell and a scheduler core exchange: cluster events in, decisions out (see
:mod:`kubeflux.scheduler.interface` for the contract).

Each class writes its own ``__init__`` (see docs/native.md): a scheduling pass makes one decision per pending pod,
and the simulator one event per change, so construction is a hot path.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from typing import Final

from kubeflux.match.picklable import Picklable
from kubeflux.scheduler.devices import ClaimAllocation, DeviceClass, ResourceClaim, ResourceSlice
from kubeflux.scheduler.objects import DisruptionBudget, Namespace, Node, Pod, PodGroup
from kubeflux.scheduler.storage import ClaimBinding, StorageObject

Watched = (
    Pod | Node | PodGroup | DisruptionBudget | Namespace | StorageObject | ResourceSlice | DeviceClass | ResourceClaim
)
"""The kinds of object a scheduler core hears of."""


class EventKind(StrEnum):
    ADDED = "ADDED"
    MODIFIED = "MODIFIED"
    DELETED = "DELETED"


_EVENT_KINDS: Final = {kind.value: kind for kind in EventKind}


def event_kind(text: str) -> EventKind:
    """``EventKind(text)`` at a dictionary's cost (as :func:`~kubeflux.scheduler.phase.pod_phase`: every watch event
    goes through it): ValueError for another text."""
    kind = _EVENT_KINDS.get(text)
    return EventKind(text) if kind is None else kind


@dataclass(frozen=True, slots=True, init=False)
class ClusterEvent(Picklable):
    """A watch event: an object added, modified or deleted. ``obj`` is the object's state after the change
    (for DELETED, its last known state, which may be stale: a tombstone). A scheduler that does not preempt may
    ignore :class:`DisruptionBudget` events, one that reads no ``namespaceSelector`` :class:`Namespace` events, one
    that reads no volumes the storage objects (:data:`~kubeflux.scheduler.storage.StorageObject`), and one that
    allocates no devices the Dynamic Resource Allocation objects (:mod:`kubeflux.scheduler.devices`)."""

    kind: EventKind
    obj: Watched

    def __init__(self, kind: EventKind, obj: Watched) -> None:
        object.__setattr__(self, "kind", kind)
        object.__setattr__(self, "obj", obj)


@dataclass(frozen=True, slots=True, init=False)
class Bind(Picklable):
    pod: str
    """The pod's ``namespace/name``."""
    uid: str
    node: str
    annotations: dict[str, str] = field(default_factory=dict)
    """Annotations to write on the pod as it is bound (e.g. the allocation, for recovery)."""
    volume_claims: tuple[ClaimBinding, ...] = ()
    """What to write for the pod's claims waiting for their first consumer before its Binding, as kube-scheduler's
    volume binder does (:class:`~kubeflux.scheduler.storage.ClaimBinding`)."""
    resource_claims: tuple[ClaimAllocation, ...] = ()
    """What binding does to each of the pod's ResourceClaims (its devices allocated, the pod reserved): written to
    the claims' status before the Binding, as kube-scheduler's DynamicResources plugin does in PreBind; a shell that
    cannot write one refuses the Bind."""

    def __init__(
        self,
        pod: str,
        uid: str,
        node: str,
        annotations: dict[str, str] | None = None,
        volume_claims: tuple[ClaimBinding, ...] = (),
        resource_claims: tuple[ClaimAllocation, ...] = (),
    ) -> None:
        object.__setattr__(self, "pod", pod)
        object.__setattr__(self, "uid", uid)
        object.__setattr__(self, "node", node)
        object.__setattr__(self, "annotations", {} if annotations is None else annotations)
        object.__setattr__(self, "volume_claims", volume_claims)
        object.__setattr__(self, "resource_claims", resource_claims)


EXPECTED_START_ANNOTATION: Final = "kubeflux.io/expected-start"
"""On a pending pod: when its reservation lets it start, in seconds on the scheduler's clock (Unix time on a real
cluster, virtual time in the simulator), written as an integer when whole."""


EXPECTED_START_TIME_ANNOTATION: Final = "kubeflux.io/expected-start-time"
"""The same start for people, in RFC 3339 (``2026-11-29T01:50:55Z``, UTC, to the second): written and removed
together with :data:`EXPECTED_START_ANNOTATION` (in the same patch) by ``serve`` and ``cluster serve``, whose clock
is Unix time. Programs read the seconds."""


def expected_start_text(expected: float) -> str:
    """The :data:`EXPECTED_START_ANNOTATION` value for ``expected`` seconds."""
    return str(int(expected)) if float(expected).is_integer() else repr(expected)


def rfc3339(seconds: float) -> str:
    """Unix ``seconds`` as RFC 3339 in UTC, to the second (``2026-11-29T01:50:55Z``)."""
    return datetime.fromtimestamp(math.floor(seconds), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def expected_start_annotations(text: str | None) -> dict[str, str | None]:
    """Both expected-start annotations for ``text`` (an :data:`EXPECTED_START_ANNOTATION` value), or None for
    each when ``text`` is None (a merge patch's removal)."""
    if text is None:
        return {EXPECTED_START_ANNOTATION: None, EXPECTED_START_TIME_ANNOTATION: None}
    return {EXPECTED_START_ANNOTATION: text, EXPECTED_START_TIME_ANNOTATION: rfc3339(float(text))}


@dataclass(frozen=True, slots=True, init=False)
class Unschedulable(Picklable):
    pod: str
    uid: str
    message: str
    """In kube-scheduler's form, e.g. ``0/4 nodes are available: 4 Insufficient cpu.``"""
    expected_start: float | None = None
    """When a reservation holds resources for the pod: its expected start time. A shell writes it on the pod as
    the :data:`EXPECTED_START_ANNOTATION` and removes that when a later decision has none or the pod is bound."""
    nominated_node: str = ""
    """The node the pod waits for after its scheduler evicted pods there to make room (:class:`Evict`): written as
    ``status.nominatedNodeName`` with the condition, as kube-scheduler's preemption does; empty clears it."""

    def __init__(
        self, pod: str, uid: str, message: str, expected_start: float | None = None, nominated_node: str = ""
    ) -> None:
        object.__setattr__(self, "pod", pod)
        object.__setattr__(self, "uid", uid)
        object.__setattr__(self, "message", message)
        object.__setattr__(self, "expected_start", expected_start)
        object.__setattr__(self, "nominated_node", nominated_node)


@dataclass(frozen=True, slots=True, init=False)
class Reject(Picklable):
    """The pod can never run here (e.g. it asks more than the whole cluster has); it stays Pending."""

    pod: str
    uid: str
    message: str

    def __init__(self, pod: str, uid: str, message: str) -> None:
        object.__setattr__(self, "pod", pod)
        object.__setattr__(self, "uid", uid)
        object.__setattr__(self, "message", message)


@dataclass(frozen=True, slots=True, init=False)
class PodWarning(Picklable):
    """A problem found in a pod that the scheduler reports without rejecting the pod (see
    :mod:`kubeflux.scheduler.interface`): a ``Warning`` Event with ``reason`` (e.g. ``InvalidAllocation``) and
    ``message`` on the pod ``namespace/name``."""

    pod: str
    uid: str
    reason: str
    message: str

    def __init__(self, pod: str, uid: str, reason: str, message: str) -> None:
        object.__setattr__(self, "pod", pod)
        object.__setattr__(self, "uid", uid)
        object.__setattr__(self, "reason", reason)
        object.__setattr__(self, "message", message)


@dataclass(frozen=True, slots=True, init=False)
class Deallocate(Picklable):
    """Free the ResourceClaim ``claim`` of the pending pod ``namespace/name``: its allocation is on a node the pod
    can no longer use (full or cordoned since), and it is reserved for no pod or for this pod alone, so the shell
    removes ``status.allocation`` and ``status.reservedFor`` (and ``status.devices``) in one status write,
    conditional on the claim's ``uid`` and ``resourceVersion`` as read (a claim another writer changed since is left
    as it is). kube-scheduler's DynamicResources PostFilter ("deallocation of ResourceClaim completed"); the pod
    is tried again when the claim's change is heard, and its claim allocated anew. The ``delete-protection``
    finalizer stays: the claim's next allocation keeps it."""

    pod: str
    uid: str
    claim: ClaimAllocation
    """The claim as read (its ``namespace``, ``name``, ``uid``, ``resource_version``, the node and devices of its
    allocation)."""

    def __init__(self, pod: str, uid: str, claim: ClaimAllocation) -> None:
        object.__setattr__(self, "pod", pod)
        object.__setattr__(self, "uid", uid)
        object.__setattr__(self, "claim", claim)


PREEMPTED_REASON: Final = "Preempted"
"""The reason of the event on an evicted pod (kube-scheduler's), and of the simulated pod's end."""

PREEMPTION_CONDITION_REASON: Final = "PreemptionByScheduler"
"""The reason of the ``DisruptionTarget`` condition a scheduler's preemption writes on its victims."""

GATED_REASON: Final = "SchedulingGated"
"""The reason of the ``PodScheduled=False`` condition the API server puts on a pod created with
``spec.schedulingGates`` (``GATED_MESSAGE``), and kube-scheduler's word for such a pod."""

GATED_MESSAGE: Final = "Scheduling is blocked due to non-empty scheduling gates"


def not_evicted_whole(victim: str) -> str:
    """Why an eviction of a pod of the job ``victim`` is not sent: the cluster refused another of its pods."""
    return f"another pod of {victim} was not evicted, and a job is evicted whole or not at all"


@dataclass(frozen=True, slots=True, init=False)
class Evict(Picklable):
    """Evict the pod ``namespace/name`` (running, or bound and not yet running) so that a pod of higher priority,
    ``preemptor``, can run: kube-scheduler's preemption of a victim. The shell writes the ``DisruptionTarget``
    condition (reason :data:`PREEMPTION_CONDITION_REASON`) and a ``Preempted`` event with ``message`` on the pod and
    deletes it, which gives it its graceful termination; its controller (a Job's) replaces it as for any failure.

    ``budgets``: through the Eviction API (``policy/v1``), which refuses (429) an eviction that would take a
    PodDisruptionBudget below what it allows, as kubeflux evicts; False: a plain delete, which no budget stops, as
    kube-scheduler's DefaultPreemption deletes victims it chose (it prefers victims that violate no budget, but may
    take those that do).

    ``victim``: the job (a gang's ``namespace/name``) the pod is evicted with, whole; once the cluster refuses one
    of its pods, the rest of that job's evictions are not sent (:func:`~kubeflux.scheduler.decisions.apply_decisions`;
    ``serve``'s binder sends one job's evictions one after the other for that, :mod:`kubeflux.kube.binder`).
    Empty: the pod alone (kube-scheduler's way)."""

    pod: str
    uid: str
    preemptor: str
    """The ``namespace/name`` of the pod (or pod group) it makes room for."""
    message: str
    """For the event, e.g. ``Preempted by pod 4f0c… on node n1``."""
    budgets: bool = True
    victim: str = ""

    def __init__(
        self, pod: str, uid: str, preemptor: str, message: str, budgets: bool = True, victim: str = ""
    ) -> None:
        object.__setattr__(self, "pod", pod)
        object.__setattr__(self, "uid", uid)
        object.__setattr__(self, "preemptor", preemptor)
        object.__setattr__(self, "message", message)
        object.__setattr__(self, "budgets", budgets)
        object.__setattr__(self, "victim", victim)
