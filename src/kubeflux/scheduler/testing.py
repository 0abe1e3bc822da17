"""A test double for the scheduler: a tiny cluster that applies its decisions, and builders of nodes and pods.

For tests of :class:`~kubeflux.scheduler.core.KubefluxScheduler` (and of its parts through it) that need no
simulator: :class:`Cluster` tells the scheduler of nodes and pods, runs a pass, binds what it binds (writing the
annotations it asks for, and telling it of the bound pod), and checks that no node is over-committed. Time moves
only when a test says (``run(now)``). It is no API server: no validation, no watch, no lifecycle; the simulator
(:mod:`kubeflux.sim`) is the real cluster model.

:func:`parts` builds the scheduler's parts without the scheduler (queue, books, filter, placer, reserver, … over
the given nodes), for tests of one part on its own.

Usage::

    cluster = Cluster(KubefluxScheduler(), [node("w1", cores=4)])
    cluster.add(pod("a", 2000))
    assert bound(cluster.run()) == {"default/a": "w1"}
"""

from __future__ import annotations

from collections import deque
from dataclasses import replace

from kubeflux.match.engine import DEFAULT_HORIZON
from kubeflux.scheduler.claimfreeing import freed
from kubeflux.scheduler.core import KubefluxScheduler, Parts, wire
from kubeflux.scheduler.decisions import apply_decisions
from kubeflux.scheduler.devices import ResourceClaim
from kubeflux.scheduler.interface import (
    Bind,
    ClusterEvent,
    Deallocate,
    Decision,
    EventKind,
    Evict,
    PodWarning,
    Reject,
    Unschedulable,
)
from kubeflux.scheduler.messages import Watched
from kubeflux.scheduler.objects import CPU, MEMORY, Node, Pod, PodPhase
from kubeflux.scheduler.profile import Profile
from kubeflux.scheduler.sharing import SharedSharing, SharingPolicy
from kubeflux.scheduler.storage import (
    STORAGE_KINDS,
    ClaimRef,
    PersistentVolume,
    PersistentVolumeClaim,
    StorageObject,
)

__all__ = ["ADDED", "DELETED", "MODIFIED", "Cluster", "Parts", "bound", "messages", "node", "parts", "pod"]

ADDED, MODIFIED, DELETED = EventKind.ADDED, EventKind.MODIFIED, EventKind.DELETED


def node(name: str, cores: int = 4, **kwargs: object) -> Node:
    """A node of ``cores`` cores and 16 GiB of memory, its uid its name; ``kwargs`` are :class:`Node`'s fields."""
    return Node(name, uid=name, allocatable={CPU: cores * 1000, MEMORY: 16 * 2**30}, **kwargs)  # type: ignore[arg-type]


def pod(name: str, cpu: int, *, scheduler: str = "kubeflux", t: float = 0.0, **kwargs: object) -> Pod:
    """A pod ``default/<name>`` (uid ``uid-<name>``) requesting ``cpu`` millicores, created at ``t``."""
    return Pod("default", name, f"uid-{name}", scheduler, creation_time=t, requests={CPU: cpu}, **kwargs)  # type: ignore[arg-type]


def _storage_key(obj: StorageObject) -> str:
    name = obj.key if isinstance(obj, PersistentVolumeClaim) else obj.name
    return f"{type(obj).__name__} {name}"


class Cluster:
    """A tiny stand-in for the API server: applies binds, tells the scheduler, checks nothing is over-committed."""

    def __init__(self, scheduler: KubefluxScheduler, nodes: list[Node]) -> None:
        self.scheduler = scheduler
        self.nodes = {n.name: n for n in nodes}
        self.pods: dict[str, Pod] = {}
        self.now = 0.0
        self.evicted: list[str] = []
        """The pods evicted, in order."""
        self.storage: dict[str, StorageObject] = {}
        """The storage objects told (:meth:`tell`) by kind and name, with what binds wrote on them."""
        self.claims: dict[str, ResourceClaim] = {}
        """The ResourceClaims told (:meth:`tell`), with what binds wrote to them."""
        for n in nodes:
            scheduler.observe(ClusterEvent(ADDED, n), 0.0)

    def tell(self, kind: EventKind, obj: Watched) -> None:
        if isinstance(obj, STORAGE_KINDS):
            self.storage[_storage_key(obj)] = obj
        elif isinstance(obj, ResourceClaim):
            self.claims[obj.key] = obj
        self.scheduler.observe(ClusterEvent(kind, obj), self.now)

    def add(self, *pods: Pod) -> None:
        for p in pods:
            self.pods[p.key] = p
            self.tell(ADDED, p)

    def run(self, now: float | None = None) -> list[Decision]:
        """One scheduling pass at ``now`` (else the time of the last), its binds applied; its decisions."""
        if now is not None:
            self.now = now
        decisions = self.scheduler.schedule(self.now)
        apply_decisions(self.scheduler.name, decisions, self, self.scheduler, self.now)
        self.check()
        return decisions

    # -- the DecisionSink that apply_decisions writes to: binds are applied, the rest is only returned ----------
    def pod(self, key: str, uid: str) -> Pod | None:
        found = self.pods.get(key)
        return found if found is not None and (not uid or found.uid == uid) else None

    def not_found(self, key: str) -> str:
        return f"pods {key!r} not found"

    def owner(self, pod: Pod) -> str:
        return pod.scheduler_name

    def bind(self, pod: Pod, decision: Bind) -> str:
        for binding in decision.volume_claims:  # as kube-scheduler's volume binder writes them, before the Binding
            claim = self.storage[f"PersistentVolumeClaim {binding.claim}"]
            assert isinstance(claim, PersistentVolumeClaim)
            if binding.volume:
                pv = self.storage[f"PersistentVolume {binding.volume}"]
                assert isinstance(pv, PersistentVolume)
                self.tell(MODIFIED, replace(pv, claim=ClaimRef(claim.namespace, claim.name, claim.uid)))
            else:
                self.tell(MODIFIED, replace(claim, selected_node=binding.node))
        for made in decision.resource_claims:  # then the ResourceClaims' status, as DynamicResources' PreBind
            held = self.claims[made.key]
            if pod.uid in held.reserved_for:  # written already (IsReservedForPod)
                continue
            allocation = made.results if made.allocate else held.allocation
            reserved = (*held.reserved_for, pod.uid)
            self.tell(MODIFIED, replace(held, allocation=allocation, node=made.node, reserved_for=reserved))
        pod.node_name = decision.node
        pod.annotations = {**pod.annotations, **decision.annotations}
        pod.phase = PodPhase.RUNNING
        self.tell(MODIFIED, pod)
        return ""

    def unschedulable(self, pod: Pod, decision: Unschedulable) -> None:
        pass

    def reject(self, pod: Pod, decision: Reject) -> None:
        pass

    def warn(self, pod: Pod, decision: PodWarning) -> None:
        pass

    def evict(self, pod: Pod, decision: Evict) -> str:
        """The pod is gone at once (a bound one ends ``Failed``, then is deleted)."""
        self.evicted.append(pod.key)
        if pod.node_name:
            pod.phase = PodPhase.FAILED
            self.tell(MODIFIED, pod)
        pod.deleted = True
        del self.pods[pod.key]
        self.tell(DELETED, pod)
        return ""

    def deallocate(self, pod: Pod, decision: Deallocate) -> str:
        """The claim's allocation and ``reservedFor`` cleared (refused when it changed since the scheduler read it)."""
        made = freed(self.claims.get(decision.claim.key), decision)
        if isinstance(made, str):
            return made
        self.tell(MODIFIED, made)
        return ""

    def problem(self, message: str) -> None:
        raise AssertionError(message)  # a decision the scheduler should never make

    def end(self, name: str, phase: PodPhase = PodPhase.SUCCEEDED) -> None:
        p = self.pods[f"default/{name}"]
        p.phase = phase
        self.tell(MODIFIED, p)

    def delete(self, name: str) -> None:
        p = self.pods.pop(f"default/{name}")
        p.deleted = True
        self.tell(DELETED, p)

    def check(self) -> None:
        """Raise AssertionError when a node's running pods request more cpu than it has."""
        for n in self.nodes.values():
            used = sum(
                p.requests.get(CPU, 0) for p in self.pods.values() if p.node_name == n.name and not p.phase.terminal
            )
            if used > n.allocatable[CPU]:
                raise AssertionError(f"node {n.name} over-committed: {used}")


def bound(decisions: list[Decision]) -> dict[str, str]:
    """Pod key → node, for the binds among ``decisions``."""
    return {d.pod: d.node for d in decisions if isinstance(d, Bind)}


def messages(decisions: list[Decision]) -> dict[str, str]:
    """Pod key → message, for the pods told they do not fit or are rejected."""
    return {d.pod: d.message for d in decisions if isinstance(d, Unschedulable | Reject)}


def parts(
    nodes: list[Node],
    *,
    policy: str = "lonode",
    sharing: SharingPolicy | None = None,
    horizon: int = DEFAULT_HORIZON,
) -> Parts:
    """The parts of a scheduler of ``policy`` (wired by :func:`~kubeflux.scheduler.core.wire`, as
    :class:`KubefluxScheduler` wires them) whose books hold ``nodes`` (its graph built from them)."""
    made = wire(Profile("kubeflux", policy, sharing or SharedSharing(), horizon), deque(maxlen=10_000))
    for n in nodes:
        made.books.put_node(n)
    made.books.ensure_graph()
    return made
