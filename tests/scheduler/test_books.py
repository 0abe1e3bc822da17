"""The books on their own (:class:`~kubeflux.scheduler.books.ClusterBooks`): what is counted where, in the ledgers
and the engine's graph, as pods are recorded, accounted, released, stuck, extended and their nodes change; and,
through the scheduler, a node shrunk under a pod and grown back, and the graph's node order."""

from __future__ import annotations

import json
import math

from kubeflux.scheduler.allocation import ALLOCATION_ANNOTATION, AllocationRecord
from kubeflux.scheduler.core import KubefluxScheduler
from kubeflux.scheduler.interface import Bind, ClusterEvent, EventKind
from kubeflux.scheduler.objects import CPU, MEMORY, Node, Pod, PodPhase
from kubeflux.scheduler.testing import Cluster, bound, node, parts, pod
from kubeflux.scheduler.translate import DURATION_ANNOTATION, Placement

ADDED, MODIFIED = EventKind.ADDED, EventKind.MODIFIED


def _bound_pod(name: str, cpu: int, where: str, scheduler: str = "other") -> Pod:
    bound_pod = pod(name, cpu, scheduler=scheduler)
    bound_pod.node_name, bound_pod.phase = where, PodPhase.RUNNING
    return bound_pod


def test_a_recorded_pod_is_in_both_ledgers_and_its_release_gives_back_books_and_engine_job() -> None:
    p = parts([node("w1", cores=4)])
    books = p.books
    a = pod("a", 2000, annotations={DURATION_ANNOTATION: "60"})
    job = p.queue.add(a.uid, a)
    made = p.placer.start_at(job, 0)
    assert isinstance(made, list)
    [(_, alloc)] = made
    assert books.allocations[a.uid] is alloc and alloc.own and alloc.jobid
    assert books.ledger.on("w1")[CPU] == 2000 and books.own.on("w1")[CPU] == 2000
    assert books.planned_end(a.uid) == 60 and books.uid_by_key[a.key] == a.uid
    assert books.graph is not None and books.graph.free_counts("w1", 0, 60)[0] == 2
    books.release(a.uid, "done")
    assert a.uid not in books.allocations and books.ledger.on("w1")[CPU] == 0 and books.own.on("w1")[CPU] == 0
    assert books.graph.free_counts("w1", 0, 60)[0] == 4
    assert books.log[-1] == f"Cancel flux job: {alloc.jobid} for pod default/a (done)"


def test_another_schedulers_pod_is_counted_at_once_and_put_in_the_engine_at_the_next_account() -> None:
    p = parts([node("w1", cores=4)])
    books = p.books
    other = _bound_pod("o", 3000, "w1")
    books.account(other.uid, other, False, None)
    assert books.ledger.on("w1")[CPU] == 3000 and not books.own.on("w1").get(CPU)
    assert books.planned_end(other.uid) == math.inf  # another scheduler's pod holds on for ever
    assert books.graph is not None and books.graph.free_counts("w1", 0, 10)[0] == 4
    books.account_unaccounted()
    assert books.graph.free_counts("w1", 0, 10)[0] == 1 and books.allocations[other.uid].jobid


def test_a_recovered_pod_goes_back_on_the_cores_its_allocation_names() -> None:
    p = parts([node("w1", cores=4)])
    books = p.books
    ours = _bound_pod("ours", 2000, "w1", scheduler="kubeflux")
    books.account(ours.uid, ours, True, AllocationRecord(0, 500, ("core2", "core3"), ()))
    books.account_unaccounted()
    alloc = books.allocations[ours.uid]
    assert alloc.placement == Placement("w1", ("core2", "core3"), ()) and (alloc.start, alloc.duration) == (0, 500)
    assert books.own.on("w1")[CPU] == 2000 and books.planned_end(ours.uid) == 500


def test_a_pod_the_engine_cannot_take_stays_counted_and_is_retried_when_a_pod_on_its_node_ends() -> None:
    p = parts([node("w1", cores=4)])
    books = p.books
    first, second = _bound_pod("first", 3000, "w1"), _bound_pod("second", 3000, "w1")  # over-committed by others
    for bound_pod in (first, second):
        books.account(bound_pod.uid, bound_pod, False, None)
    books.account_unaccounted()
    assert books.stuck == {"w1": {second.uid: second}} and books.ledger.on("w1")[CPU] == 6000
    assert books.graph is not None and books.graph.unrecorded == {"w1"}
    books.release(first.uid, "ended")
    assert second.uid in books.unaccounted and not books.stuck.get("w1")
    books.account_unaccounted()
    assert books.allocations[second.uid].jobid and books.graph.unrecorded == set()


def test_a_pod_past_its_planned_end_keeps_its_cores_to_the_horizon() -> None:
    p = parts([node("w1", cores=4)], horizon=10_000)
    books = p.books
    a = pod("a", 2000, annotations={DURATION_ANNOTATION: "60"})
    p.placer.start_at(p.queue.add(a.uid, a), 0)
    epoch = p.queue.epoch
    books.extend_overruns(59.0)
    assert books.allocations[a.uid].duration == 60
    books.extend_overruns(60.0)
    alloc = books.allocations[a.uid]
    assert (alloc.start, alloc.duration, alloc.jobid) == (60, 10_000 - 60, 0) and p.queue.epoch == epoch + 1
    books.account_unaccounted()
    assert books.allocations[a.uid].jobid and books.planned_end(a.uid) == math.inf  # its end is the horizon's


def test_a_deleted_node_is_down_in_place_and_a_grown_one_replays_its_pods() -> None:
    p = parts([node("w1", cores=2), node("w2", cores=2)])
    books = p.books
    other = _bound_pod("o", 2000, "w1")
    books.account(other.uid, other, False, None)
    books.account_unaccounted()
    graph = books.graph
    assert graph is not None
    books.node_deleted("w2")
    assert not graph.usable("w2") and "w2" not in books.nodes and "w2" in graph.specs
    books.put_node(node("w2", cores=2))
    assert graph.usable("w2")
    books.put_node(node("w1", cores=4))  # new capacity: attached again, its pod replayed at the next account
    assert books.allocations[other.uid].jobid == 0 and other.uid in books.unaccounted
    books.account_unaccounted()
    assert books.allocations[other.uid].jobid and graph.free_counts("w1", 0, 10)[0] == 2


def test_a_cancelled_reservation_leaves_neither_engine_job_nor_hold() -> None:
    p = parts([node("w1", cores=4)])
    books = p.books
    a, b = pod("a", 4000, annotations={DURATION_ANNOTATION: "100"}), pod("b", 4000, t=1)
    p.placer.start_at(p.queue.add(a.uid, a), 0)
    job = p.queue.add(b.uid, b)
    assert p.reserver.reserve(job, 0.0) == 100.0 and job.reservations and job.holds
    books.cancel_reservations(job)
    assert not job.reservations and not job.holds and job.expected_start is None and not books.plans.holds


def _node(cores: int) -> Node:
    return Node("n1", allocatable={CPU: cores * 1000, MEMORY: 2**34})


def _start(scheduler: KubefluxScheduler, name: str, cores: int, now: float) -> Pod:
    pod = Pod("default", name, name, "kubeflux", 0, now, {CPU: cores * 1000})
    scheduler.observe(ClusterEvent(ADDED, pod), now)
    (bind,) = scheduler.schedule(now)
    assert isinstance(bind, Bind)
    pod.node_name, pod.phase, pod.annotations = bind.node, PodPhase.RUNNING, dict(bind.annotations)
    scheduler.observe(ClusterEvent(MODIFIED, pod), now)
    return pod


def _cores(pod: Pod) -> set[str]:
    return set(json.loads(pod.annotations[ALLOCATION_ANNOTATION])["cores"])


def test_a_node_shrunk_under_a_pod_and_grown_back_gives_no_new_pod_the_cores_that_pod_names() -> None:
    """When a node shrinks below the cores a running pod's annotation names (``core2`` of a node now of two cores),
    the pod is put back on other free cores of the node in the graph (``core0``): its annotation, already written,
    still names ``core2``. When the node grows back, the pod is replayed on the cores its annotation names first
    (they are free again), not on those kubeflux last gave it, so no new pod is given ``core2``: two running pods
    whose annotations named the same core would be pinned twice by a CPU pinning agent reading them."""
    scheduler = KubefluxScheduler()
    scheduler.observe(ClusterEvent(ADDED, _node(8)), 0.0)
    short = _start(scheduler, "short", 1, 1.0)
    long = _start(scheduler, "long", 2, 2.0)
    assert _cores(long) == {"core1", "core2"}
    short.phase = PodPhase.SUCCEEDED
    scheduler.observe(ClusterEvent(MODIFIED, short), 3.0)
    scheduler.observe(ClusterEvent(MODIFIED, _node(2)), 4.0)  # still room for "long"'s two cores
    assert scheduler.schedule(4.0) == []
    scheduler.observe(ClusterEvent(MODIFIED, _node(8)), 5.0)
    assert scheduler.schedule(5.0) == []
    late = _start(scheduler, "late", 3, 6.0)
    assert not _cores(late) & _cores(long)


def test_nodes_listed_by_name_are_built_in_the_order_of_their_ids_and_placed_as_if_listed_so() -> None:
    """The API server lists nodes by name (node-0, node-1, node-10, node-11, node-2 …): the graph takes them in the
    order of their ids, where a node-centric walk meets its best nodes first and may stop early (in name order it
    walked all 5,000 nodes for every pod), and the placements are those of nodes observed in id order."""
    ids = [f"node-{i}" for i in range(12)]
    placed = []
    for order in (ids, sorted(ids)):
        scheduler = KubefluxScheduler()
        cluster = Cluster(scheduler, [node(name, cores=2) for name in order])
        cluster.add(*(pod(f"p{i}", 1000, t=float(i)) for i in range(20)))
        placed.append(bound(cluster.run()))
        assert scheduler.books.graph is not None and list(scheduler.books.graph.specs) == ids
    assert len(placed[0]) == 20 and placed[0] == placed[1]
