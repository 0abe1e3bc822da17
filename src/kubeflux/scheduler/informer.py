"""The informer logic: cluster events turned into the books (:mod:`kubeflux.scheduler.books`) and the queue.

Keyed by pod UID (``namespace/name`` when a pod has none, or when a tombstone lost it):

* a pod that Succeeds, Fails or is deleted releases *its own* engine job and booking at once, so a group keeps
  the rest of its allocation until its last member ends; a pending pod that leaves gives up its job's
  reservation;
* a pod bound by another scheduler (or by kubeflux before a restart: the
  :data:`~kubeflux.scheduler.allocation.ALLOCATION_ANNOTATION` says where and when) is counted in the exact books
  and its whole cores and gpus are replayed onto its node with the engine's ``update``;
* nodes that are deleted are marked down in place; cordons, taints and readiness are filters; a node that
  appears or changes capacity is attached in place (the engine's ``attach``/``remove``) and its pods replayed;
* a Bind the cluster refuses (:meth:`Informer.unreserve`), or a pod seen bound to another node than the one
  kubeflux chose, releases kubeflux's allocation for it at once; a pod still pending waits in the queue again;
* a pod seen under a ``namespace/name`` that another UID held (a StatefulSet re-created it; a relist folded
  DELETED and ADDED into one update) first releases the old UID's allocation and queue entry, whatever the order;
* a bound pod whose requests change (an in-place resize, see :mod:`kubeflux.apiobjects.manifests`) is counted
  anew in the books, and its engine job is replayed when its whole cores or gpus change;
* a bound pod of kubeflux's own gang found after a restart marks the gang started, so its missing members are
  placed one by one, as an uninterrupted scheduler places them;
* a pending pod of kubeflux's with ``spec.schedulingGates`` waits outside the queue (:attr:`PendingQueue.gated`)
  until its last gate is removed, and is then queued as a new pod; a gang waits for its gated members;
* a pending pod of a job rejected as never fitting stays rejected until what placing reads of it changes, or a node
  is added or changes (then every rejected job is queued again);
* every object is checked first (:mod:`kubeflux.scheduler.validation`): a bad pod of kubeflux's that waits is
  rejected (:class:`Reject`), any other bad pod or a corrupt allocation annotation is reported
  (:class:`PodWarning`, once per problem), a bad node or PodGroup is logged and kept out; nothing bad reaches the
  engine. These notices go out with the next ``schedule`` (:meth:`Informer.take_notices`).
"""

from __future__ import annotations

import dataclasses
from collections import deque
from typing import Any, cast

from kubeflux.scheduler.allocation import AllocationRecord, recorded_allocation
from kubeflux.scheduler.books import ClusterBooks
from kubeflux.scheduler.devices import DeviceClass, ResourceClaim, ResourceSlice
from kubeflux.scheduler.interface import (
    BIND_BACKOFF,
    MAX_BIND_BACKOFF,
    ClusterEvent,
    Decision,
    EventKind,
    PodWarning,
    Reject,
)
from kubeflux.scheduler.objects import DisruptionBudget, Namespace, Node, Pod, PodGroup, PodPhase
from kubeflux.scheduler.profile import Profile
from kubeflux.scheduler.queue import PendingJob, PendingQueue, placement_view
from kubeflux.scheduler.storage import STORAGE_KINDS
from kubeflux.scheduler.translate import pod_duration, pod_policy
from kubeflux.scheduler.validation import (
    InvalidObject,
    PodRequestError,
    check_group,
    check_node,
    check_pod,
    pod_fields_problem,
    pod_run,
)

__all__ = ["Informer"]


def _fields_typed(pod: Any) -> bool:
    """Whether what :meth:`Informer.observe` reads of a pod before validating it is of its type: compiled (mypyc),
    reading a mistyped field raises a TypeError where the pure sources went on. ``pod`` is ``Any`` so the fields are
    read unchecked (five attribute reads and type tests, on every pod event)."""
    return (
        type(pod.uid) is str
        and type(pod.node_name) is str
        and type(pod.deleted) is bool
        and type(pod.phase) is PodPhase
        and type(pod.scheduler_name) is str
    )


class Informer:
    """Turns the cluster events of one kubeflux scheduler into its books and queue (see the module docstring)."""

    def __init__(self, profile: Profile, books: ClusterBooks, queue: PendingQueue, log: deque[str]) -> None:
        self.profile = profile
        self.books = books
        self.queue = queue
        self.log = log
        self.notices: list[Decision] = []
        """Rejects and warnings found while observing, for the next ``schedule``."""
        self.told: dict[str, str] = {}
        """Pod uid → the last notice message said about it (each problem is said once)."""
        self.refusals: dict[str, int] = {}
        """Pod uid → how many of its Binds were refused in a row (its back-off doubles with each)."""
        self.bad_groups: dict[str, str] = {}
        """PodGroup key → why it is unusable; its pods are rejected with that until it is fixed."""
        self.bad_nodes: dict[str, str] = {}
        """Node name → why it is kept out of the graph (logged once per problem)."""
        self.held: dict[str, Pod] = {}
        """Pod uid → kubeflux's pending pods rejected for their bad PodGroup, queued again when it is fixed."""
        self.node_seen: dict[str, Node] = {}
        """Each node as last seen, to tell a change (which reconsiders rejected jobs) from a repeat."""
        self.node_epoch = 0
        """Bumped whenever a node is added, changes or goes: a job found able to fit may no longer."""

    # ================================================================== observe

    def observe(self, event: ClusterEvent, now: float) -> None:
        obj = event.obj
        kind = event.kind
        if type(obj) is Pod:
            if not _fields_typed(obj):
                self._refuse(obj)
                return
            if not obj.node_name and self._same_waiting(kind, obj):
                return
        if isinstance(obj, Node):
            if type(cast(Any, obj).name) is not str:
                self._refuse_node(obj)
                return
            self._observe_node(kind, obj)
        elif isinstance(obj, PodGroup):
            self.queue.changed()
            self._observe_group(kind, obj)
        elif isinstance(obj, DisruptionBudget):
            self._observe_budget(kind, obj)
        elif isinstance(obj, Namespace):
            self.books.pods.namespace(obj.name, None if kind is EventKind.DELETED else obj.labels)
            self.queue.changed()  # a pod whose namespaceSelector now selects others (or none) may fit
        elif isinstance(obj, STORAGE_KINDS):
            self.books.volumes.observe(kind is EventKind.DELETED, obj)
            self.queue.changed()  # a claim bound, a volume made or a limit raised may let a pod fit
        elif isinstance(obj, ResourceSlice | DeviceClass | ResourceClaim):
            self._observe_devices(kind, obj)
        elif not (self.queue.rejected and isinstance(obj, Pod) and self._still_rejected(kind, obj)):
            self._observe_pod(kind, obj)

    def _observe_budget(self, kind: EventKind, budget: DisruptionBudget) -> None:
        """A PodDisruptionBudget into the books (what preemption may evict); a change may let a job preempt."""
        budgets = self.books.budgets
        if kind is EventKind.DELETED:
            budgets.pop(budget.key, None)
        else:
            budgets[budget.key] = budget
        self.queue.changed()

    def _observe_devices(self, kind: EventKind, obj: ResourceSlice | DeviceClass | ResourceClaim) -> None:
        """A Dynamic Resource Allocation object into the device books; any change may let a waiting pod with claims
        fit (or a rejected one: its claim now made, its class now there)."""
        self.books.devices.observe(obj, kind is EventKind.DELETED)
        queue = self.queue
        queue.changed()
        for key, job in list(queue.rejected.items()):
            if any(pod.resource_claims for pod in job.pods.values()):
                del queue.rejected[key]
                for uid, pod in job.pods.items():
                    if uid not in self.books.allocations and uid not in queue.by_pod:
                        queue.add(uid, pod).tried_epoch = -1

    def take_notices(self) -> list[Decision]:
        """The rejects and warnings found since the last call (the start of a ``schedule``'s decisions)."""
        notices, self.notices = self.notices, []
        return notices

    def _notify(self, uid: str, notice: Reject | PodWarning) -> None:
        if self.told.get(uid) != notice.message:
            self.told[uid] = notice.message
            self.notices.append(notice)
            self.queue.dirty = True

    def _valid(self, uid: str, pod: Pod) -> bool:
        """Whether ``pod`` may be used; a bad one is reported: rejected when it is kubeflux's and waits (its
        duration, match policy and run-time annotations too), else warned about. Nothing of it is counted or
        queued."""
        name = self.profile.name
        try:
            check_pod(pod)
            if pod.scheduler_name == name and not pod.node_name:  # what placing it reads (annotations)
                pod_duration(pod)
                pod_policy(pod, self.profile.policy)
                pod_run(f"Pod {pod.key}", pod.annotations)  # what its kubelet reads: never bind what none can run
        except (InvalidObject, PodRequestError) as exc:
            message = str(exc)
            if self.told.get(uid) != message:
                self.log.append(f"{message}; the pod is left out")
            if pod.scheduler_name == name and not pod.node_name:
                self._notify(uid, Reject(pod.key, pod.uid, message))
            else:
                self._notify(uid, PodWarning(pod.key, pod.uid, "InvalidPod", f"{message}; kubeflux does not count it"))
            return False
        return True

    def _refuse(self, pod: Pod) -> None:
        """Leave out a pod whose uid, node name, scheduler name, deleted flag or phase is not of its type (one built
        through the Python API): rejected when it names kubeflux and is unbound, else warned about, as a pod that
        fails validation is (:meth:`_valid`)."""
        field, problem = pod_fields_problem(pod) or ("", "unusable")
        message = str(InvalidObject(f"Pod {pod.key}", field, problem))
        raw: Any = pod  # (Any: compiled code would check each field's type, the very check that failed)
        uid = raw.uid if type(raw.uid) is str and raw.uid else pod.key
        if self.told.get(uid) != message:
            self.log.append(f"{message}; the pod is left out")
        if self.forget_pending(uid) is not None:
            self.queue.changed()
        if type(raw.scheduler_name) is str and raw.scheduler_name == self.profile.name and not raw.node_name:
            self._notify(uid, Reject(pod.key, uid, message))
        else:
            self._notify(uid, PodWarning(pod.key, uid, "InvalidPod", f"{message}; kubeflux does not count it"))

    # ================================================================== nodes and pod groups

    def _refuse_node(self, node: Node) -> None:
        """Leave out a node whose name is no string (said once per name): nothing can be booked on it."""
        name = repr(cast(Any, node).name)
        if name not in self.bad_nodes:
            message = f"Node {name}: name: must be a non-empty string, got {name}"
            self.bad_nodes[name] = message
            self.log.append(f"{message}; the node is kept out of the graph")

    def _observe_node(self, kind: EventKind, node: Node) -> None:
        """A node came, changed or went: the books follow it (a bad one is kept out, as if deleted), and a change
        queues again every job rejected as never fitting."""
        self.queue.changed()
        books = self.books
        if kind is not EventKind.DELETED:
            try:
                check_node(node)
                self.profile.shape.check(node)
            except InvalidObject as exc:
                if self.bad_nodes.get(node.name) != str(exc):  # said once, not at every heartbeat
                    self.bad_nodes[node.name] = str(exc)
                    self.log.append(f"{exc}; the node is kept out of the graph")
                books.node_deleted(node.name)
            else:
                self.bad_nodes.pop(node.name, None)
                books.put_node(node)
        else:
            books.node_deleted(node.name)
        if kind.value == "DELETED":
            self.node_seen.pop(node.name, None)
            self.node_epoch += 1  # a job found able to fit may no longer: asked again
            return
        # A copy, not the object: a caller may change a node in place and tell it again.
        seen = dataclasses.replace(node, allocatable=dict(node.allocatable), labels=dict(node.labels))
        if self.node_seen.get(node.name) != seen:
            self.node_seen[node.name] = seen
            self.node_epoch += 1
            self._requeue_rejected()

    def _requeue_rejected(self) -> None:
        """A node was added or changed: every job rejected as never fitting is queued again and reconsidered."""
        queue = self.queue
        rejected, queue.rejected = queue.rejected, {}
        allocations = self.books.allocations
        for job in rejected.values():
            for uid, pod in job.pods.items():
                if uid not in allocations and uid not in queue.by_pod:
                    queue.add(uid, pod)  # told afresh: the Reject replaced its message and expected start
        if rejected:
            queue.dirty = True

    def _observe_group(self, kind: EventKind, group: PodGroup) -> None:
        key = group.key
        queue = self.queue
        if kind is EventKind.DELETED:
            queue.groups.pop(key, None)
            queue.started_groups.discard(key)  # a group made again under this name is a new gang
            if self.bad_groups.pop(key, None) is not None:
                self._unhold(key)  # they wait for a group of that name, as members of a missing group do
            return
        try:
            check_group(group)
        except InvalidObject as exc:
            message = str(exc)
            if self.bad_groups.get(key) != message:
                self.log.append(f"{message}; its pods are rejected until it is fixed")
            self.bad_groups[key] = message
            queue.groups.pop(key, None)
            job = queue.jobs.get(key)
            for uid, pod in list(job.pods.items()) if job is not None and job.group == key else []:
                self._hold(uid, pod, message)
            return
        queue.groups[key] = group
        if self.bad_groups.pop(key, None) is not None:
            self._unhold(key)

    def _unhold(self, group: str) -> None:
        """The pods held for the bad PodGroup ``group`` are observed again (it was fixed or deleted)."""
        for uid, pod in list(self.held.items()):
            if pod.group == group:
                del self.held[uid]
                self.told.pop(uid, None)
                self._observe_pod(EventKind.MODIFIED, pod)

    def _hold(self, uid: str, pod: Pod, message: str) -> None:
        """Reject a pending pod of a bad PodGroup, and keep it to queue again when the group is fixed."""
        self.forget_pending(uid)
        self.held[uid] = pod
        self._notify(uid, Reject(pod.key, pod.uid, message))

    # ================================================================== pods

    def _same_waiting(self, kind: EventKind, pod: Pod) -> bool:
        """Whether ``pod`` is a queued pod of kubeflux's told again as the very object it was queued as, still
        waiting and usable (most events: the status and expected start written on a waiting pod, by the shell
        for kubeflux's own decisions): the informer would keep it as it is, so nothing is done."""
        uid = pod.uid
        if not uid or self.queue.rejected or kind is EventKind.DELETED or pod.deleted:
            return False
        job = self.queue.by_pod.get(uid)
        if job is None or job.pods.get(uid) is not pod:  # the cheap, decisive tests first: ~200,000 calls a run
            return False
        return not pod.phase.terminal and (
            uid not in self.told
            and uid not in self.held
            and pod.scheduler_name == self.profile.name
            and self.books.uid_by_key.get(pod.key) == uid
            and (not self.bad_groups or pod.group is None or pod.group not in self.bad_groups)
        )

    def _still_rejected(self, kind: EventKind, pod: Pod) -> bool:
        """A pending pod of a job rejected as never fitting changed: a change placing reads (its requests,
        selector, tolerations …) queues the whole job again; any other (a status the shell wrote) keeps it
        rejected, with the new object, and is not passed on (it would queue the pod alone, splitting a gang)."""
        if kind is EventKind.DELETED or pod.phase.terminal or pod.node_name or pod.deleted:
            return False
        uid = self.books.uid(pod)
        queue = self.queue
        for key, job in queue.rejected.items():
            known = job.pods.get(uid)
            if known is None:
                continue
            job.put(uid, pod)
            if placement_view(known) != placement_view(pod):
                del queue.rejected[key]
                for member_uid, member in job.pods.items():
                    if member_uid not in self.books.allocations and member_uid not in queue.by_pod:
                        queue.add(member_uid, member).tried_epoch = -1
                queue.changed()
            return True
        return False

    def _observe_pod(self, kind: EventKind, pod: Pod) -> None:
        books = self.books
        queue = self.queue
        uid = books.uid(pod)
        phase = pod.phase  # PodPhase.terminal, without the property call (pure Python) on every pod event
        if kind is EventKind.DELETED or phase is PodPhase.SUCCEEDED or phase is PodPhase.FAILED:
            self._gone(uid, "deleted" if kind is EventKind.DELETED else pod.phase.value)
            group = pod.group  # a member that ran means its gang started (news to a restarted scheduler)
            own = pod.scheduler_name == self.profile.name
            if own and pod.node_name and group is not None and group not in queue.started_groups:
                self._started(group)
            key = pod.key
            if books.uid_by_key.get(key) == uid:  # a late tombstone of a re-created pod keeps the new one
                del books.uid_by_key[key]
            return
        key = pod.key
        previous = books.uid_by_key.get(key)
        if previous is not None and previous != uid:
            self._gone(previous, f"re-created as uid {uid}")
        books.uid_by_key[key] = uid
        if pod.node_name:
            alloc = books.allocations.get(uid)
            if alloc is not None and alloc.node != pod.node_name:  # bound elsewhere than kubeflux decided
                books.release(uid, f"bound to {pod.node_name} instead")
                alloc = None
            if alloc is None:
                if self.forget_pending(uid) is not None:
                    queue.changed()
                if self._valid(uid, pod):
                    queue.changed()
                    self._account_bound(uid, pod)
                return
            # bound where kubeflux counts it (by its own Binding, or another client's to the same node): the
            # pod as bound, so that a refusal of kubeflux's Binding arriving after this leaves it counted there
            books.pods.add(uid, pod, alloc.node)  # its labels, for the pods placed beside it, as they are now
            booking = books.ledger.bookings.get(uid)
            if booking is not None and booking.requests != pod.requests and self._valid(uid, pod):
                books.resized(uid, pod, alloc, booking.requests)
            return
        if pod.scheduler_name != self.profile.name:
            return
        assumed = books.allocations.get(uid)
        if assumed is not None and assumed.own:
            # Assumed, as kube-scheduler's cache says: kubeflux decided to bind it and the Binding is in flight. The
            # watch may still show writes sent before it (the expected start taken off, a PodScheduled=False held
            # back): the pod is never queued again; only the Binding's refusal (unreserve), the pod's end or
            # deletion, or its binding elsewhere changes that.
            books.pods.add(uid, pod, assumed.node)
            return
        if pod.deleted:
            if self.forget_pending(uid) is not None:
                queue.changed()
            return
        if pod.scheduling_gates:  # kube-scheduler's SchedulingGates: it waits outside the queue until ungated
            if self.forget_pending(uid) is not None:
                queue.changed()
            queue.gated[uid] = pod
            return
        if queue.gated:
            queue.gated.pop(uid, None)  # its last gate went: queued below as a new pod
        known = queue.by_pod.get(uid)
        if (
            known is not None
            and uid not in self.told
            and uid not in self.held
            and (pod.group is None or pod.group not in self.bad_groups)
            and (known.pods[uid] is pod or placement_view(known.pods[uid]) == placement_view(pod))
        ):
            # a queued pod whose change placing does not read (its status, the expected start written back on
            # it: most events about a waiting pod; the simulator sends the live pod it changed in place, whose
            # view is its own): as valid as it was, and it keeps its place in the plan
            queue.add(uid, pod)
            return
        if not self._valid(uid, pod):
            if self.forget_pending(uid) is not None:
                queue.changed()
            return
        group = pod.group
        if group is not None and group in self.bad_groups:
            self._hold(uid, pod, self.bad_groups[group])
            return
        self.held.pop(uid, None)
        if self.told.pop(uid, None) is not None:  # it was rejected and is usable now
            queue.changed()
        if known is not None:  # (nothing above changed the queue)
            # A queued pod changed: only what placing it reads matters. The status and the expected-start
            # annotation the shell writes for kubeflux's own decisions change nothing, and must not make the
            # queue's head be tried again as if it were new (it would lose its place in the plan).
            changed = placement_view(known.pods[uid]) != placement_view(pod)
            job = queue.add(uid, pod)
            if changed:
                job.tried_epoch = -1
                queue.changed()
            return
        queue.dirty = True
        job = queue.add(uid, pod)
        job.tried_epoch = -1
        if job.reservations:  # a gang grew: its reservation no longer covers it, so re-plan
            queue.changed()

    def unreserve(self, pod: str, uid: str, node: str, reason: str, now: float) -> None:
        """The cluster refused kubeflux's Bind of ``pod`` to ``node`` (see
        :class:`~kubeflux.scheduler.interface.Unreserve`): the allocation made for it is released at once (engine
        job and books) and the pod, unless it is deleted or bound, waits in the queue again. A pod the informer
        has meanwhile seen bound (elsewhere) is already counted where it runs, and stays so."""
        books = self.books
        uid = uid or books.uid_by_key.get(pod, pod)
        alloc = books.allocations.get(uid)
        waiting = books.bound.get(uid)
        if alloc is None or not alloc.own or alloc.node != node or waiting is None or waiting.node_name:
            return
        books.now = now
        self.queue.changed()
        books.volumes.revert(books.volumes.by_pod.pop(uid, ()))  # RevertAssumedPodVolumes
        books.release(uid, f"bind refused: {reason}")
        self.log.append(f"Bind of pod {pod} to node {node} refused: {reason}; its allocation is released")
        if not waiting.deleted and waiting.scheduler_name == self.profile.name:
            job = self.queue.add(uid, waiting)
            job.tried_epoch = -1
            # the refusal often comes before the watch shows why (the pod bound by another scheduler, or
            # deleted): tried again at once, it would be bound and refused again, as often as the watch lags
            # (kube-scheduler's pod back-off: 1 s, doubling with each refusal up to 10 s)
            refused = self.refusals[uid] = self.refusals.get(uid, 0) + 1
            backoff = min(MAX_BIND_BACKOFF, BIND_BACKOFF * 2 ** min(refused - 1, 10))
            job.retry_at = max(job.retry_at, now + backoff)
            job.refusal = reason

    def _gone(self, uid: str, why: str) -> None:
        """The pod of ``uid`` ended, was deleted, or its name now belongs to another pod: all of it goes."""
        if uid in self.books.allocations or uid in self.queue.by_pod:
            self.queue.changed()
        self.books.release(uid, why)
        self.forget_pending(uid)
        self.told.pop(uid, None)
        self.held.pop(uid, None)
        self.refusals.pop(uid, None)

    def forget_pending(self, uid: str) -> PendingJob | None:
        """A pending pod is gone (bound elsewhere, ended, deleted): out of the queue (and out of the jobs rejected
        as never fitting), its job's reservation too."""
        queue = self.queue
        queue.gated.pop(uid, None)
        for rejected in queue.rejected.values():
            rejected.drop(uid)
        job = queue.by_pod.get(uid)
        if job is not None:
            self.books.cancel_reservations(job)
        return queue.remove_pod(uid)

    def _account_bound(self, uid: str, pod: Pod) -> None:
        """A pod bound to a node kubeflux does not count yet (another scheduler's, or ours after a restart).

        Ours carries the allocation annotation: its start, duration and cores are put back as they were. A
        corrupt one is reported (:class:`PodWarning`) and the pod put back as if it had none: counted by its
        requests from now on, on any free cores of its node. A member of one of our gangs marks the gang started.
        """
        own = pod.scheduler_name == self.profile.name
        record: AllocationRecord | None = None
        if own:
            try:
                record = recorded_allocation(pod, self.profile.horizon)
            except ValueError as exc:
                message = f"Pod {pod.key}: {exc}; counted by its requests on node {pod.node_name}, on any free cores"
                self.log.append(message)
                self._notify(uid, PodWarning(pod.key, pod.uid, "InvalidAllocation", message))
        self.books.account(uid, pod, own, record)
        group = pod.group
        if own and group is not None and group not in self.queue.started_groups:
            self._started(group)

    def _started(self, group: str) -> None:
        """A member of kubeflux's gang ``group`` is bound (seen after a restart): the gang has started, so the
        members still pending, queued together before this was known, wait as lone pods."""
        queue = self.queue
        queue.started_groups.add(group)
        job = queue.jobs.get(group)
        if job is None or job.group != group:
            return
        queue.changed()
        for uid, member in list(job.pods.items()):
            self.forget_pending(uid)
            queue.add(uid, member).tried_epoch = -1
