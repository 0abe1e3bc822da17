"""The books: what kubeflux counts of the cluster — its nodes, every bound pod, the engine's graph — kept consistent.

:class:`ClusterBooks` is the scheduler's cache (kube-scheduler's ``Cache``): the nodes, the exact books of what is
bound where (:class:`~kubeflux.scheduler.ledger.Ledger`, everyone's and kubeflux's own), the same in time with the
reservations' holds (:class:`~kubeflux.scheduler.timebooks.TimeBooks`), an :class:`Allocation` per bound pod, and
the engine's graph (:class:`~kubeflux.scheduler.graphview.GraphView`). Its operations keep them in step:

* :meth:`ClusterBooks.record` counts a pod kubeflux just placed, :meth:`ClusterBooks.account` one bound by another
  scheduler (or by kubeflux before a restart), :meth:`ClusterBooks.release` gives a pod's all back;
* a bound pod the engine cannot take yet (its node has too few free cores or gpus, holds a node-exclusive job, or
  is down) stays counted in the books and is retried whenever a pod on its node ends or the node changes
  (:meth:`ClusterBooks.account_unaccounted`); until then node-exclusive matches never land on its node
  (:attr:`GraphView.unrecorded`);
* a pod still running at the end of its planned time keeps its cores (:meth:`ClusterBooks.extend_overruns`);
* nodes are attached, changed and marked down in place (:meth:`ClusterBooks.put_node`,
  :meth:`ClusterBooks.node_deleted`), their pods replayed;
* a job's reservation (engine jobs and holds) is dropped by :meth:`ClusterBooks.cancel_reservations`.

What changes the books in a way a waiting job may care about tells the queue
(:meth:`~kubeflux.scheduler.queue.PendingQueue.changed`). The informer (:mod:`kubeflux.scheduler.informer`) turns
cluster events into these calls.
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from collections.abc import Mapping

from kubeflux.match.policy import parse_policy
from kubeflux.resources import NodeSpec, id_from_name_suffix
from kubeflux.scheduler.allocation import Allocation, AllocationRecord
from kubeflux.scheduler.devices import DeviceBooks
from kubeflux.scheduler.fit import FitIndex
from kubeflux.scheduler.graphview import GraphView
from kubeflux.scheduler.ledger import Ledger
from kubeflux.scheduler.objects import CPU, DisruptionBudget, Node, Pod, ResourceList
from kubeflux.scheduler.podterms import PodsByNode
from kubeflux.scheduler.profile import Profile, tick
from kubeflux.scheduler.queue import PendingJob, PendingQueue
from kubeflux.scheduler.storage import VolumeBook
from kubeflux.scheduler.timebooks import TimeBooks
from kubeflux.scheduler.topology import present_levels
from kubeflux.scheduler.translate import (
    Placement,
    gpu_count,
    node_spec,
    pod_policy,
    pod_shape,
    whole_cores,
)
from kubeflux.scheduler.validation import PodRequestError

__all__ = ["ClusterBooks"]


def _graph_order(node: Node) -> tuple[bool, int, str]:
    """Where a node goes among the graph's first nodes: by the id its name gives its vertex (``node-10`` → 10), as
    Fluxion numbers nodes, then by name. The API server lists nodes by name (``node-0``, ``node-1``, ``node-10``,
    ``node-100`` …): in that order a node-centric policy's walk never finds its best nodes first, cannot stop early
    (:mod:`kubeflux.match.ranked`) and visits every node for every pod (5,000 nodes of 64 cores, real API server:
    ~14 ms of CPU a pod instead of ~0.3). Nodes without a number keep their order after the numbered ones."""
    suffix = id_from_name_suffix(node.name)
    return suffix is None, suffix or 0, node.name if suffix is not None else ""


class ClusterBooks:
    """The scheduler's cache (see the module docstring); ``queue`` is told when a waiting job might now fit."""

    def __init__(self, profile: Profile, queue: PendingQueue, log: deque[str]) -> None:
        self.profile = profile
        self.queue = queue
        self.log = log
        """Fluence-style log lines (nodes found, cores per node, policy, each match and its result)."""
        self.nodes: dict[str, Node] = {}
        self.ledger = Ledger()
        """Every scheduler's bound pods, against each node's allocatable."""
        self.own = Ledger()
        """kubeflux's own pods, against its share of each node (the sharing policy)."""
        self.plans = TimeBooks(self.ledger, self.planned_end)
        """:attr:`ledger` in time, with the reservations' holds."""
        self.own_plans = TimeBooks(self.own, self.planned_end, self.plans.holds)
        """:attr:`own` in time, with the same holds (checked against the share when the sharing policy is not
        ``shared``)."""
        self.allocations: dict[str, Allocation] = {}
        """Pod uid → allocation, for every bound unfinished pod of any scheduler."""
        self.graph: GraphView | None = None
        self.budgets: dict[str, DisruptionBudget] = {}
        """The PodDisruptionBudgets by ``namespace/name``: what preemption may not take."""
        self.fits = FitIndex()
        """Which nodes may take a pod now, kept incrementally as the books change."""
        self.uid_by_key: dict[str, str] = {}
        self.pods = PodsByNode()
        """Every allocation's pod (:attr:`bound`) and where, and by node, for the filters that look at the pods
        around a pod (inter-pod affinity, topology spread, host ports: :mod:`kubeflux.scheduler.podterms`)."""
        self.volumes = VolumeBook()
        """The PersistentVolumes, claims, StorageClasses and CSINodes (:mod:`kubeflux.scheduler.volumes`)."""
        self.unaccounted: dict[str, Pod] = {}
        """Bound pods (others', or ours after a restart) still to be put into the engine."""
        self.stuck: dict[str, dict[str, Pod]] = {}
        """Node name → the bound pods there the engine could not take when last tried (pod uid → pod), retried
        when the node changes or a pod there ends."""
        self.ends: list[tuple[int, str]] = []
        """(planned end, pod uid) of kubeflux's allocations, to extend those of pods that run past it."""
        self.deferred: PendingJob | None = None
        """A job whose cancelled reservation is still in the engine (:meth:`cancel_reservations`)."""
        self.shared: dict[int, set[str]] = {}
        """Engine job id → the pods holding a part of it: a gang's alike members placed by one match
        (``Placer._run_at_once``); each pod's end releases its own vertices of the job."""
        self.now = 0.0
        """The time of the last pass (or refused Bind), in seconds."""
        self.carried: dict[str, set[str]] = {}
        """Topology level (node label) → the admitted nodes that carry it (:mod:`kubeflux.scheduler.topology`)."""
        self.levels: tuple[str, ...] = ()
        """The levels in the graph: those of the profile's some admitted node carries, top first."""
        self.devices = DeviceBooks()
        """The devices of Dynamic Resource Allocation: slices, classes, claims, and what kubeflux allocated."""
        self._unlabelled: set[tuple[str, str]] = set()
        """(node, level) put in the level's unknown domain, reported once."""

    @property
    def bound(self) -> Mapping[str, Pod]:
        """Pod uid → pod, for every allocation (to replay it when its node is re-attached); changed through
        :attr:`pods` (:meth:`PodsByNode.add`, :meth:`PodsByNode.remove`)."""
        return self.pods.bound

    def planned_end(self, uid: str) -> float:
        """When a booked pod is planned to leave its node: kubeflux's own at its allocation's end, unless it runs
        past it; every other pod holds on for ever (:class:`~kubeflux.scheduler.timebooks.TimeBooks`)."""
        alloc = self.allocations.get(uid)
        if alloc is None or not alloc.own or not alloc.duration:
            return math.inf
        end = alloc.start + alloc.duration
        return end if end > self.now and end < self.profile.horizon else math.inf

    def uid(self, pod: Pod) -> str:
        """The key a pod is counted under: its uid, else the uid last seen under its ``namespace/name``."""
        return pod.uid or self.uid_by_key.get(pod.key, pod.key)

    def pod_shape(self, pod: Pod) -> tuple[int, int]:
        """(exclusive cores, gpus) ``pod`` takes from the graph (:func:`~kubeflux.scheduler.translate.pod_shape`)."""
        return pod_shape(pod, self.profile.shape.gpu_resources)

    # ================================================================== counting pods

    def record(
        self, uid: str, pod: Pod, node: str, jobid: int, start: int, duration: int, placement: Placement | None
    ) -> Allocation:
        """Count a pod kubeflux just placed: books, allocation, its planned end."""
        self.ledger.take(uid, node, pod.requests)
        self.own.take(uid, node, pod.requests)
        self.fits.changed(node)
        alloc = Allocation(uid, pod.key, node, True, jobid, start, duration, placement)
        self.allocations[uid] = alloc
        if jobid:
            heapq.heappush(self.ends, (start + duration, uid))
        self.pods.add(uid, pod, node)
        self.uid_by_key[pod.key] = uid
        return alloc

    def account(self, uid: str, pod: Pod, own: bool, record: AllocationRecord | None) -> None:
        """Count a pod bound to a node that the books do not count yet (another scheduler's, or ``own``: kubeflux's
        after a restart, put back where its allocation ``record`` says when it has one); it is put into the engine
        by the next :meth:`account_unaccounted`."""
        node = pod.node_name
        self.ledger.take(uid, node, pod.requests)
        if own:
            self.own.take(uid, node, pod.requests)
        self.fits.changed(node)
        alloc = Allocation(uid, pod.key, node, own, 0, tick(self.now))  # started, as far as kubeflux knows: now
        if record is not None:
            alloc.start, alloc.duration = record.start, record.duration
            alloc.placement = alloc.named = Placement(node, record.cores, record.gpus)
        self.allocations[uid] = alloc
        self.pods.add(uid, pod, node)
        if own or self.profile.sharing.name != "capped":
            self.unaccounted[uid] = pod
        self.log.append(f"Accounting pod {pod.key} on node {node} ({'recovered' if own else pod.scheduler_name})")

    def resized(self, uid: str, pod: Pod, alloc: Allocation, before: ResourceList) -> None:
        """A bound pod's requests changed (an in-place resize): counted anew in the books, and when its whole
        cores or gpus changed, its engine job is dropped and the pod replayed onto its node (its own cores first;
        when the node has too few, it is retried as pods there end)."""
        node = alloc.node
        self.ledger.give(uid)
        self.ledger.take(uid, node, pod.requests)
        if self.own.give(uid) is not None:
            self.own.take(uid, node, pod.requests)
        self.fits.changed(node)
        self.pods.add(uid, pod, node)
        self.queue.changed()
        resize = f" ({pod.resize})" if pod.resize else ""
        self.log.append(f"Pod {pod.key} on node {node} resized{resize}: requests {before} -> {pod.requests}")
        shape = (whole_cores(before.get(CPU, 0)), gpu_count(before, self.profile.shape.gpu_resources))
        if shape != self.pod_shape(pod) or uid in self.stuck.get(node, ()):
            if alloc.jobid and self.graph is not None:
                self.release_engine(alloc)
                alloc.jobid = 0
            if alloc.own or self.profile.sharing.name != "capped":
                self.unaccounted[uid] = pod
        self.retry_stuck(node)

    def release_engine(self, alloc: Allocation) -> bool:
        """Release the engine vertices of a pod's allocation: its own job, or its part of a job it shares with
        other members of its gang (:attr:`shared`). False when the engine no longer knew the job."""
        graph = self.graph
        assert graph is not None
        leaves = (*alloc.placement.cores, *alloc.placement.gpus) if alloc.placement is not None else ()
        sharers = self.shared.get(alloc.jobid)
        if sharers is not None:
            sharers.discard(alloc.uid)
            if sharers:
                if not graph.release(alloc.jobid, alloc.node, leaves, partial=True):
                    self._unshare(alloc.jobid)  # cancelled whole instead: the others are replayed
                return True
            del self.shared[alloc.jobid]
        return graph.release(alloc.jobid, alloc.node, leaves)

    def _unshare(self, jobid: int) -> None:
        """Engine job ``jobid`` is gone whole: the pods that held parts of it are replayed onto their cores."""
        for uid in self.shared.pop(jobid, ()):
            alloc = self.allocations.get(uid)
            pod = self.bound.get(uid)
            if alloc is None or alloc.jobid != jobid:
                continue
            alloc.jobid = 0
            if pod is not None:
                self.unaccounted[uid] = pod
                self.queue.changed()

    def replay_lost(self) -> None:
        """The pods of the engine jobs the graph had to cancel whole (:attr:`GraphView.lost`) are replayed."""
        graph = self.graph
        if graph is not None and graph.lost:
            lost, graph.lost = graph.lost, []
            for jobid in lost:
                self._unshare(jobid)

    def retry_stuck(self, node: str) -> None:
        """Node ``node`` changed or freed something: its pods the engine could not take are tried again."""
        if self.stuck:
            self.unaccounted.update(self.stuck.pop(node, {}))

    def release(self, uid: str, why: str) -> None:
        """A pod's allocation is given back whole: books, engine job (or its part of a shared one)."""
        alloc = self.allocations.pop(uid, None)
        self.unaccounted.pop(uid, None)
        self.volumes.by_pod.pop(uid, None)
        self.pods.remove(uid)
        if self.devices.assumed or self.devices.by_pod or self.devices.binding:
            self.devices.forget(uid)
        if alloc is None:
            return
        if self.stuck:
            self.stuck.get(alloc.node, {}).pop(uid, None)
        self.ledger.give(uid)
        self.own.give(uid)
        self.fits.changed(alloc.node)
        self.retry_stuck(alloc.node)
        if not alloc.jobid or self.graph is None:
            return
        if self.release_engine(alloc):
            self.log.append(f"Cancel flux job: {alloc.jobid} for pod {alloc.key} ({why})")

    # ================================================================== the graph

    def ensure_graph(self) -> GraphView | None:
        """The graph, built from the admitted nodes the first time there are any; later changes are in place."""
        if self.graph is not None:
            return self.graph
        sharing = self.profile.sharing
        admitted = sorted((node for node in self.nodes.values() if sharing.admits(node)), key=_graph_order)
        if not admitted:
            return None
        for node in admitted:
            self._carry(node.name, node)
        self.levels = present_levels(self.profile.shape.levels, self.carried)
        specs = [self._spec(node) for node in admitted]
        self.graph = GraphView(specs, self.profile.policy, self.profile.horizon, self.log)
        self.fits.reset()
        return self.graph

    def _spec(self, node: Node) -> NodeSpec:
        """The graph node of an admitted ``node``, below its domains; a level it has no label of is reported once."""
        for label in self.levels:
            if label not in node.labels and (node.name, label) not in self._unlabelled:
                self._unlabelled.add((node.name, label))
                self.log.append(f"Node {node.name} has no label {label}: it is in the level's unknown domain")
        return node_spec(node, self.profile.sharing.share(node), self.profile.shape, self.levels)

    def _carry(self, name: str, node: Node | None) -> bool:
        """Count which levels node ``name`` carries (``node`` None: none, it is gone or kept out); whether the levels
        in the graph change with it."""
        for label in self.profile.shape.levels:
            carriers = self.carried.setdefault(label, set())
            if node is not None and label in node.labels:
                carriers.add(name)
            else:
                carriers.discard(name)
        return present_levels(self.profile.shape.levels, self.carried) != self.levels

    def _relevel(self) -> None:
        """The levels in the graph changed (a first node carries one, or the last one went): every node moves in
        place below its new domains, with its pods."""
        self.levels = present_levels(self.profile.shape.levels, self.carried)
        self.log.append(f"Topology levels now {list(self.levels) or 'none'}: every node moves")
        for name in list(self.nodes):
            node = self.nodes[name]
            if self.profile.sharing.admits(node):
                self.put_node(node)

    def node_deleted(self, name: str) -> None:
        """Node ``name`` is gone (or kept out): marked down in place."""
        self.fits.reset()
        self.nodes.pop(name, None)
        if self.graph is not None:
            self.graph.set_gone(name, True)
            if self._carry(name, None):
                self._relevel()

    def put_node(self, node: Node) -> None:
        """Node ``node`` is new or changed: marked down when the sharing policy no longer admits it, else up, and
        attached in place when new or of a new capacity, its pods replayed onto it."""
        name = node.name
        self.fits.reset()
        self.nodes[name] = node
        graph = self.graph
        if graph is None:
            return
        self.retry_stuck(name)
        sharing = self.profile.sharing
        if self._carry(name, node if sharing.admits(node) else None):
            self._relevel()
            return
        spec = self._spec(node) if sharing.admits(node) else None
        if spec is None:
            graph.set_gone(name, True)  # no longer kubeflux's under the sharing policy: kept down
        elif graph.specs.get(name) == spec:
            graph.set_gone(name, False)
        else:  # a new node, new capacity or new domains: attached in place, its pods replayed onto it
            graph.put_node(spec)
            for alloc in [alloc for alloc in self.allocations.values() if alloc.node == name]:
                if alloc.jobid:  # its vertices went with the node, not its record: the job is cancelled whole
                    graph.cancel(alloc.jobid)
                    self._unshare(alloc.jobid)
                alloc.jobid = 0
                pod = self.bound.get(alloc.uid)
                if pod is not None and (alloc.own or sharing.name != "capped"):  # as account
                    self.unaccounted[alloc.uid] = pod

    def account_unaccounted(self) -> None:
        """Replay the bound pods the engine does not hold yet (others', or ours after a restart, a resize or a node
        change) onto their node's cores and gpus: those named in their allocation when still free, else any free
        ones. A pod whose node is down or has too few free ones (or holds a node-exclusive job) stays counted in
        the exact books only and waits, stuck, until its node changes or a pod there ends; meanwhile its node is
        hidden from node-exclusive matches (:attr:`GraphView.unrecorded`)."""
        graph = self.graph
        if graph is None or not (self.unaccounted or graph.unrecorded):
            return
        self.drop_deferred()
        pending, self.unaccounted = self.unaccounted, {}
        now = tick(self.now)
        horizon = self.profile.horizon
        for uid, pod in sorted(pending.items(), key=self._others_last):
            alloc = self.allocations.get(uid)
            cores, gpus = self.pod_shape(pod)
            if alloc is None or (cores == 0 and gpus == 0):
                continue
            if not graph.usable(alloc.node):
                # a node that is down is tried again when it comes back; one outside the graph has all its pods
                # replayed when it is attached
                if alloc.node in graph.specs:
                    self.stuck.setdefault(alloc.node, {})[uid] = pod
                continue
            if alloc.own and alloc.duration and alloc.start + alloc.duration > now:
                start, duration = alloc.start, alloc.duration
            else:
                start, duration = now, horizon - now
            # the cores its annotation names first (a CPU pinning agent reads them), then those it last held
            named = [*alloc.named.cores, *alloc.named.gpus] if alloc.named is not None else []
            last = [*alloc.placement.cores, *alloc.placement.gpus] if alloc.placement is not None else []
            core_uids = graph.free_leaves(alloc.node, "core", start, duration, cores, named, last)
            gpu_uids = graph.free_leaves(alloc.node, "gpu", start, duration, gpus, named, last)
            if core_uids is None or gpu_uids is None:
                self.log.append(
                    f"Could not put pod {pod.key} on node {alloc.node} in the graph "
                    "(counted in the books; tried again when a pod there ends or the node changes)"
                )
                self.stuck.setdefault(alloc.node, {})[uid] = pod
                continue
            whole_node = alloc.own and self._holds_node_whole(pod)
            result = graph.replay(
                alloc.node, core_uids + gpu_uids, start, duration, pod.key, now, whole_node=whole_node
            )
            if not result.matched:
                self.stuck.setdefault(alloc.node, {})[uid] = pod
                continue
            alloc.jobid = result.jobid
            if alloc.own:
                alloc.start, alloc.duration = start, duration
                heapq.heappush(self.ends, (start + duration, uid))
            names = graph.engine.graph.vertices
            alloc.placement = Placement(
                alloc.node, tuple(names[u].name for u in core_uids), tuple(names[u].name for u in gpu_uids)
            )
        graph.unrecorded = {name for name, pods in self.stuck.items() if pods and graph.usable(name)}

    def _others_last(self, item: tuple[str, Pod]) -> bool:
        """Replay order: kubeflux's own pods first (their cores are recorded, a node-exclusive one holds its node
        whole), then other schedulers' (kubeflux picks any free cores for them), so a relist that lists another
        scheduler's pod first rebuilds the graph the restarted scheduler had, not one where that pod keeps ours out."""
        alloc = self.allocations.get(item[0])
        return alloc is None or not alloc.own

    def _holds_node_whole(self, pod: Pod) -> bool:
        """Whether kubeflux placed ``pod`` under a node-exclusive policy (its annotation's, else the profile's)."""
        policy = self.profile.policy
        try:
            name = pod_policy(pod, policy)
        except PodRequestError:  # the annotation changed since: the profile's policy placed it
            name = policy
        return parse_policy(name).node_exclusive

    def extend_overruns(self, now: float) -> None:
        """A pod of kubeflux still running at the end of its planned time keeps its cores: its engine job is
        replaced by one from now to the horizon (so reservations do not count on cores that are not free)."""
        at = tick(now)
        ends = self.ends
        while ends and ends[0][0] <= at:
            end, uid = heapq.heappop(ends)
            alloc = self.allocations.get(uid)
            pod = self.bound.get(uid)
            if alloc is None or pod is None or not alloc.jobid or alloc.start + alloc.duration != end:
                continue
            assert self.graph is not None
            if alloc.jobid in self.shared:
                self.release_engine(alloc)
            else:
                self.graph.cancel(alloc.jobid)
            alloc.jobid = 0
            alloc.start, alloc.duration = at, self.profile.horizon - at
            self.unaccounted[uid] = pod
            self.queue.changed()
            self.log.append(f"Pod {alloc.key} runs past its planned end ({end}); its allocation is extended")

    # ================================================================== reservations

    def cancel_reservations(self, job: PendingJob, *, defer: bool = False) -> None:
        """Drop the job's reservation: its engine jobs and holds. With ``defer`` a kept gang reservation
        (:mod:`kubeflux.scheduler.kept`) stays in the engine, for one job at a time, until the pass either finds it
        the same again or touches the engine otherwise (:meth:`drop_deferred`). A job that holds nothing is left as it
        is: every full pass asks this of every waiting job (10,000 in a burst), most of them holding nothing."""
        if not (
            job.reservations
            or job.holds
            or job.expected_start is not None
            or job.left_out
            or job.member_reservations
            or self.deferred is job
        ):
            return
        graph = self.graph
        if graph is not None:
            kept = job.kept
            for jobid in job.reservations:
                if kept is None or jobid != kept.jobid:
                    graph.cancel(jobid)
                elif defer and self.deferred is None:
                    self.deferred = job
                else:  # its vertices are known: named in the release log
                    graph.cancel(jobid, kept.leaves, job)
            if self.deferred is job and not defer:
                self.drop_deferred()
        job.reservations.clear()
        for hold in job.holds:
            self.plans.drop(hold)
            self.own_plans.drop(hold)
        job.holds.clear()
        job.left_out.clear()
        job.member_reservations.clear()
        job.expected_start = None

    def drop_deferred(self) -> None:
        """Cancel the engine job of the reservation left in the engine by a deferred cancel, if any: called before
        anything else reads or changes the engine in a pass."""
        job = self.deferred
        if job is None:
            return
        self.deferred = None
        kept = job.kept
        if kept is not None and self.graph is not None:
            self.graph.cancel(kept.jobid, kept.leaves, job)
