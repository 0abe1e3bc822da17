"""The kubeflux scheduler core on its own: events in, decisions out, with the real engine underneath."""

from __future__ import annotations

import json

import pytest

from kubeflux.match.engine import JobState
from kubeflux.scheduler.allocation import ALLOCATION_ANNOTATION
from kubeflux.scheduler.core import KubefluxScheduler
from kubeflux.scheduler.interface import (
    BIND_BACKOFF,
    EXPECTED_START_ANNOTATION,
    Bind,
    ClusterEvent,
    Decision,
    EventKind,
    Reject,
    Unschedulable,
)
from kubeflux.scheduler.objects import (
    CPU,
    MEMORY,
    POD_GROUP_LABEL,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    Pod,
    PodGroup,
    PodPhase,
    Taint,
    Toleration,
)
from kubeflux.scheduler.sharing import CappedSharing, ExclusiveSharing
from kubeflux.scheduler.testing import ADDED, DELETED, MODIFIED, Cluster, bound, messages, node, pod
from kubeflux.scheduler.translate import DURATION_ANNOTATION, POLICY_ANNOTATION


def test_a_pod_bound_by_kubeflux_carries_its_allocation() -> None:
    cluster = Cluster(KubefluxScheduler(), [node("w1")])
    cluster.add(pod("a", 2000, annotations={DURATION_ANNOTATION: "60"}))
    [decision] = cluster.run()
    assert isinstance(decision, Bind) and decision.node == "w1"
    record = json.loads(decision.annotations[ALLOCATION_ANNOTATION])
    assert record["node"] == "w1" and len(record["cores"]) == 2 and record["duration"] == 60


def test_fractional_pods_cost_millicores_not_whole_cores() -> None:
    cluster = Cluster(KubefluxScheduler(), [node("w1", cores=1)])
    cluster.add(*(pod(f"f{i}", 250) for i in range(4)), pod("late", 250, t=1))
    decisions = cluster.run()
    assert len(bound(decisions)) == 4
    assert messages(decisions) == {"default/late": "0/1 nodes are available: 1 Insufficient cpu."}


def test_whole_cores_and_millicores_share_one_set_of_books() -> None:
    cluster = Cluster(KubefluxScheduler(), [node("w1", cores=2)])
    cluster.add(pod("whole", 1000), pod("half-a", 500), pod("half-b", 500), pod("one-more", 1000, t=1))
    decisions = cluster.run()
    assert set(bound(decisions)) == {"default/whole", "default/half-a", "default/half-b"}
    assert "Insufficient cpu" in messages(decisions)["default/one-more"]


def test_other_schedulers_pods_take_their_share_of_the_node() -> None:
    cluster = Cluster(KubefluxScheduler(), [node("w1", cores=2)])
    web = pod("web", 1500, scheduler="default-scheduler")
    web.node_name = "w1"
    web.phase = PodPhase.RUNNING
    cluster.add(web, pod("hpc", 1000))
    assert bound(cluster.run()) == {}
    cluster.delete("web")
    assert bound(cluster.run(5.0)) == {"default/hpc": "w1"}


def test_a_pod_deleted_before_it_is_bound_is_forgotten() -> None:
    cluster = Cluster(KubefluxScheduler(), [node("w1", cores=1)])
    cluster.add(pod("holder", 1000), pod("doomed", 1000, t=1), pod("next", 1000, t=2))
    cluster.run()
    cluster.delete("doomed")
    cluster.end("holder")
    assert bound(cluster.run(10.0)) == {"default/next": "w1"}


def test_a_tombstone_without_uid_still_releases_the_pod() -> None:
    cluster = Cluster(KubefluxScheduler(), [node("w1", cores=1)])
    cluster.add(pod("a", 1000), pod("b", 1000, t=1))
    cluster.run()
    stale = Pod("default", "a", "", "kubeflux", requests={CPU: 1000})  # DeletedFinalStateUnknown: a stale copy
    cluster.pods.pop("default/a")
    cluster.tell(DELETED, stale)
    assert bound(cluster.run(3.0)) == {"default/b": "w1"}


def test_a_removed_node_takes_no_more_pods_and_its_pods_are_released() -> None:
    cluster = Cluster(KubefluxScheduler(), [node("w1", cores=2), node("w2", cores=2)])
    cluster.add(pod("a", 2000))
    assert bound(cluster.run()) == {"default/a": "w1"}
    cluster.tell(DELETED, cluster.nodes.pop("w1"))
    cluster.delete("a")
    cluster.add(pod("b", 2000, t=1), pod("c", 2000, t=2))
    decisions = cluster.run(1.0)
    assert bound(decisions) == {"default/b": "w2"}
    assert messages(decisions)["default/c"] == "0/1 nodes are available: 1 Insufficient cpu."
    cluster.nodes["w1"] = node("w1", cores=2)
    cluster.tell(ADDED, cluster.nodes["w1"])
    assert bound(cluster.run(2.0)) == {"default/c": "w1"}


def test_a_node_whose_books_free_up_takes_pods_of_the_same_shape_again() -> None:
    cluster = Cluster(KubefluxScheduler(), [node("w1"), node("w2")])

    def big(name: str, t: float) -> Pod:
        return Pod(
            "default", name, f"uid-{name}", "kubeflux", creation_time=t, requests={CPU: 1000, MEMORY: 12 * 2**30}
        )

    cluster.add(big("a", 0), big("b", 1))
    assert bound(cluster.run()) == {"default/a": "w1", "default/b": "w2"}  # memory, not cores, keeps b off w1
    cluster.end("a")
    cluster.add(big("c", 2))
    assert bound(cluster.run(1.0)) == {"default/c": "w1"}
    cluster.add(pod("small", 1000, t=3))  # another shape, hiding other nodes, in between
    assert bound(cluster.run(2.0)) == {"default/small": "w1"}
    cluster.end("b")
    cluster.add(big("d", 4))
    assert bound(cluster.run(3.0)) == {"default/d": "w2"}


@pytest.mark.parametrize(
    ("target", "expected"),
    [
        ({}, "1 node(s) had untolerated taint(s), 1 node(s) were unschedulable"),
        ({"node_selector": {"disk": "ssd"}}, "1 node(s) didn't match Pod's node affinity/selector"),
    ],
    ids=["taint-and-cordon", "selector"],
)
def test_placement_constraints_say_why_in_kube_schedulers_words(target: dict[str, object], expected: str) -> None:
    nodes = [
        node("tainted", taints=(Taint("dedicated", "hpc"),)),
        node("cordoned", unschedulable=True),
        node("plain", labels={"disk": "hdd"}),
    ]
    cluster = Cluster(KubefluxScheduler(), nodes)
    cluster.add(pod("busy", 4000), pod("p", 1000, t=1, **target))
    message = messages(cluster.run())["default/p"]
    assert message.startswith("0/3 nodes are available: ") and expected in message


def test_tolerations_selectors_and_required_affinity_choose_the_node() -> None:
    nodes = [
        node("gpu-a", labels={"zone": "a"}),
        node("gpu-b", taints=(Taint("dedicated", "hpc"),), labels={"zone": "b"}),
    ]
    affinity = (NodeSelectorTerm((NodeSelectorRequirement("zone", "In", ("b",)),)),)
    cluster = Cluster(KubefluxScheduler(), nodes)
    cluster.add(pod("p", 1000, tolerations=(Toleration("dedicated", "Equal", "hpc"),), required_node_affinity=affinity))
    assert bound(cluster.run()) == {"default/p": "gpu-b"}


def test_a_cordoned_node_is_skipped_until_uncordoned() -> None:
    cluster = Cluster(KubefluxScheduler(), [node("w1", unschedulable=True)])
    cluster.add(pod("p", 1000))
    assert messages(cluster.run()) == {  # no node admits it now: rejected, and reconsidered when a node changes
        "default/p": "0/1 nodes are available: 1 node(s) were unschedulable. No node admits the pod as the nodes "
        "are now; it is reconsidered when a node is added or changes."
    }
    cluster.nodes["w1"].unschedulable = False
    cluster.tell(MODIFIED, cluster.nodes["w1"])
    assert bound(cluster.run(1.0)) == {"default/p": "w1"}


def test_a_pod_larger_than_any_node_is_rejected_and_the_rest_go_on() -> None:
    cluster = Cluster(KubefluxScheduler(), [node("w1", cores=4)])
    cluster.add(pod("huge", 64_000), pod("fine", 1000, t=1))
    decisions = cluster.run()
    assert "No node could ever host the pod" in messages(decisions)["default/huge"]
    assert bound(decisions) == {"default/fine": "w1"}


def test_a_bad_pod_gets_a_clear_error_and_never_stops_the_scheduler() -> None:
    cluster = Cluster(KubefluxScheduler(), [node("w1")])
    cluster.add(pod("bad", 1000, annotations={DURATION_ANNOTATION: "tomorrow"}), pod("good", 1000, t=1))
    decisions = cluster.run()
    assert "metadata.annotations[kubeflux.io/duration]" in messages(decisions)["default/bad"]
    assert bound(decisions) == {"default/good": "w1"}


def test_higher_priority_goes_first() -> None:
    cluster = Cluster(KubefluxScheduler(), [node("w1", cores=1)])
    cluster.add(pod("early", 1000, t=0), pod("urgent", 1000, t=5, priority=100))
    assert bound(cluster.run(5.0)) == {"default/urgent": "w1"}


def group_pods(group: str, count: int, cpu: int, t: float = 0.0) -> list[Pod]:
    return [pod(f"{group}-{i}", cpu, t=t, labels={POD_GROUP_LABEL: group}) for i in range(count)]


def test_a_gang_is_placed_all_at_once_or_not_at_all() -> None:
    cluster = Cluster(KubefluxScheduler(), [node("w1", cores=2), node("w2", cores=2), node("w3", cores=2)])
    cluster.add(pod("busy", 2000))
    assert bound(cluster.run()) == {"default/busy": "w1"}
    cluster.tell(ADDED, PodGroup("default", "mpi", min_member=3))
    cluster.add(*group_pods("mpi", 2, 2000))
    decisions = cluster.run()
    assert bound(decisions) == {} and "has 2 of its minMember 3 pods" in messages(decisions)["default/mpi-0"]
    cluster.add(pod("mpi-2", 2000, labels={POD_GROUP_LABEL: "mpi"}))
    assert "needs its 3 pods placed at once" in messages(cluster.run(1.0))["default/mpi-0"]
    assert bound(cluster.run(2.0)) == {}


def test_a_gang_larger_than_the_cluster_is_rejected_saying_what_it_needs_and_what_the_cluster_has() -> None:
    scheduler = KubefluxScheduler()
    cluster = Cluster(scheduler, [node("w1", cores=2), node("w2", cores=2)])
    cluster.tell(ADDED, PodGroup("default", "mpi", min_member=3))
    cluster.add(*group_pods("mpi", 3, 2000))
    decisions = cluster.run()
    rejected = [d for d in decisions if isinstance(d, Reject)]
    assert {d.pod for d in rejected} == {"default/mpi-0", "default/mpi-1", "default/mpi-2"}
    assert "can never fit: its 3 pods need 6 cpu in all; the 2 node(s) available" in rejected[0].message
    assert "have 4 cpu even when empty (too little cpu)" in rejected[0].message
    assert scheduler.books.allocations == {} and len(scheduler.queue) == 0


@pytest.mark.parametrize("cpu", [500, 1000])
def test_a_gang_rejected_for_one_bad_member_gives_back_what_its_other_members_took(cpu: int) -> None:
    scheduler = KubefluxScheduler()
    cluster = Cluster(scheduler, [node("w1", cores=4), node("w2", cores=4)])
    cluster.tell(ADDED, PodGroup("default", "g", min_member=2))
    bad = pod("g-1", cpu, labels={POD_GROUP_LABEL: "g"}, annotations={POLICY_ANNOTATION: "nonsense"})
    cluster.add(pod("g-0", cpu, labels={POD_GROUP_LABEL: "g"}), bad)
    decisions = cluster.run()
    assert bound(decisions) == {} and set(messages(decisions)) == {"default/g-0", "default/g-1"}
    assert scheduler.books.allocations == {}
    assert not any(scheduler.books.ledger.on("w1").values()) and not any(scheduler.books.ledger.on("w2").values())
    assert scheduler.books.graph is not None
    assert scheduler.books.graph.engine.jobs == {}


def test_a_gang_that_fits_the_free_cores_in_total_but_not_node_by_node_waits() -> None:
    cluster = Cluster(KubefluxScheduler(), [node("w1"), node("w2")])
    cluster.add(pod("o1", 1000, scheduler="other", node_name="w1"), pod("o2", 1000, scheduler="other", node_name="w2"))
    cluster.tell(ADDED, PodGroup("default", "three", min_member=3))
    cluster.add(*group_pods("three", 3, 2000))
    decisions = cluster.run()
    assert bound(decisions) == {}
    assert messages(decisions)["default/three-2"] == (
        "0/2 nodes are available: pod group default/three needs its 3 pods placed at once."
    )
    cluster.tell(ADDED, PodGroup("default", "two", min_member=2))
    cluster.add(*group_pods("two", 2, 2000, t=1))
    assert bound(cluster.run(1.0)) == {"default/two-0": "w1", "default/two-1": "w2"}


def test_a_gang_of_different_members_gets_one_node_per_pod() -> None:
    cluster = Cluster(KubefluxScheduler(), [node("w1", cores=4), node("w2", cores=2)])
    cluster.tell(ADDED, PodGroup("default", "mix", min_member=2))
    cluster.add(
        pod("mix-big", 4000, labels={POD_GROUP_LABEL: "mix"}), pod("mix-small", 2000, labels={POD_GROUP_LABEL: "mix"})
    )
    assert bound(cluster.run()) == {"default/mix-big": "w1", "default/mix-small": "w2"}


def test_a_pod_group_deleted_and_made_again_under_its_name_is_a_new_gang() -> None:
    cluster = Cluster(KubefluxScheduler(), [node("w1", cores=2), node("w2", cores=2)])
    cluster.tell(ADDED, PodGroup("default", "mpi", min_member=2))
    cluster.add(*group_pods("mpi", 2, 2000))
    assert len(bound(cluster.run())) == 2
    for name in ("mpi-0", "mpi-1"):
        cluster.end(name)
        cluster.delete(name)
    cluster.tell(DELETED, PodGroup("default", "mpi", min_member=2))
    cluster.add(pod("holder", 2000, t=1))
    assert bound(cluster.run(1.0)) == {"default/holder": "w1"}
    cluster.tell(ADDED, PodGroup("default", "mpi", min_member=2))
    cluster.add(*group_pods("mpi", 2, 2000, t=2))
    decisions = cluster.run(2.0)
    assert bound(decisions) == {}  # one node free: the new gang waits whole rather than starting one member
    assert "needs its 2 pods placed at once" in messages(decisions)["default/mpi-0"]


def test_a_group_whose_first_member_ends_keeps_the_rest_of_its_allocation() -> None:
    cluster = Cluster(KubefluxScheduler(), [node("w1", cores=2), node("w2", cores=2)])
    cluster.tell(ADDED, PodGroup("default", "mpi", min_member=2))
    cluster.add(*group_pods("mpi", 2, 2000))
    assert len(bound(cluster.run())) == 2
    cluster.end("mpi-0")
    cluster.add(pod("a", 2000, t=1), pod("b", 2000, t=2))
    decisions = cluster.run(1.0)
    assert bound(decisions) == {"default/a": "w1"}  # only the ended member's node; mpi-1 still holds w2
    assert "Insufficient cpu" in messages(decisions)["default/b"]


def test_a_gang_waiting_past_its_timeout_backs_off_until_the_cluster_changes() -> None:
    scheduler = KubefluxScheduler(group_backoff=10.0)
    cluster = Cluster(scheduler, [node("w1", cores=2), node("w2", cores=2)])
    cluster.add(pod("holder", 2000))
    cluster.run()
    cluster.tell(ADDED, PodGroup("default", "mpi", min_member=2, schedule_timeout_seconds=30))
    cluster.add(*group_pods("mpi", 2, 2000, t=1))
    cluster.run(1.0)
    assert scheduler.next_wakeup(1.0) == 31.0
    cluster.add(pod("newcomer", 4000, t=5))  # an arrival in between keeps the gang's wake-up
    cluster.run(5.0)
    assert scheduler.next_wakeup(5.0) == 31.0
    message = messages(cluster.run(31.0))["default/mpi-0"]
    assert (
        "did not fit within its scheduleTimeoutSeconds of 30; retrying when the cluster changes, or in 10 s" in message
    )
    assert scheduler.next_wakeup(31.0) == 41.0
    assert bound(cluster.run(41.0)) == {}  # retried after its back-off: still no room
    cluster.end("holder")
    assert len(bound(cluster.run(45.0))) == 2  # the change ends its back-off: it starts as soon as it fits


def test_a_gang_backing_off_keeps_its_reservation_and_nothing_overtakes_it() -> None:
    scheduler = KubefluxScheduler(group_backoff=50.0)
    cluster = Cluster(scheduler, [node("w1", cores=2), node("w2", cores=2)])
    cluster.add(pod("holder", 2000, annotations={DURATION_ANNOTATION: "100"}))
    cluster.run()
    cluster.tell(ADDED, PodGroup("default", "mpi", min_member=2, schedule_timeout_seconds=10))
    cluster.add(*group_pods("mpi", 2, 2000, t=1))
    assert {d.expected_start for d in cluster.run(1.0) if isinstance(d, Unschedulable)} == {100.0}
    decisions = cluster.run(11.0)  # timed out: backs off to 61, keeps its reservation at 100
    assert {d.expected_start for d in decisions if isinstance(d, Unschedulable)} == {100.0}
    cluster.add(pod("late", 2000, t=12, annotations={DURATION_ANNOTATION: "500"}))
    assert bound(cluster.run(12.0)) == {}  # it would delay the gang's reservation on w2


def test_the_exclusive_policy_uses_only_labelled_nodes() -> None:
    nodes = [node("shared"), node("ours", labels={"kubeflux.io/owner": "kubeflux"})]
    cluster = Cluster(KubefluxScheduler(sharing=ExclusiveSharing()), nodes)
    cluster.add(pod("a", 4000), pod("b", 1000, t=1))
    decisions = cluster.run()
    assert bound(decisions) == {"default/a": "ours"}
    assert "1 node(s) are not available to kubeflux under its sharing policy" in messages(decisions)["default/b"]


def test_the_capped_policy_leaves_the_rest_of_each_node_to_others() -> None:
    cluster = Cluster(KubefluxScheduler(sharing=CappedSharing(0.5)), [node("w1", cores=4)])
    cluster.add(pod("a", 2000), pod("b", 1000, t=1))
    decisions = cluster.run()
    assert bound(decisions) == {"default/a": "w1"}
    assert "Insufficient cpu" in messages(decisions)["default/b"]


def test_the_match_policy_comes_from_the_profile_or_the_pod() -> None:

    cluster = Cluster(KubefluxScheduler(policy="lonode"), [node("w1"), node("w2"), node("w3")])
    cluster.add(pod("low", 1000), pod("high", 1000, t=1, annotations={POLICY_ANNOTATION: "hinode"}))
    assert bound(cluster.run()) == {"default/low": "w1", "default/high": "w3"}


def test_a_waiting_gang_of_different_members_reserves_one_start_sized_by_each_member() -> None:
    cluster = Cluster(KubefluxScheduler(), [node("w1", cores=4), node("w2", cores=4)])
    cluster.add(pod("holder", 4000, annotations={DURATION_ANNOTATION: "100"}))
    cluster.run()
    cluster.tell(ADDED, PodGroup("default", "mix", min_member=2))
    members = [
        pod("mix-big", 4000, t=1, labels={POD_GROUP_LABEL: "mix"}),
        pod("mix-small", 2000, t=1, labels={POD_GROUP_LABEL: "mix"}),
    ]
    cluster.add(*members, pod("long", 2000, t=2, annotations={DURATION_ANNOTATION: "500"}))
    decisions = cluster.run(1.0)
    waiting = {d.pod: d.expected_start for d in decisions if isinstance(d, Unschedulable)}
    assert waiting["default/mix-big"] == waiting["default/mix-small"] == 100.0
    # The reservation is sized by the real members: mix-small's 2 cores on w2 leave room for long beside it.
    assert bound(decisions) == {"default/long": "w2"}
    cluster.end("holder")
    assert bound(cluster.run(100.0)) == {"default/mix-big": "w1", "default/mix-small": "w2"}


def test_a_node_that_appears_is_attached_to_the_graph_in_place() -> None:
    scheduler = KubefluxScheduler()
    cluster = Cluster(scheduler, [node("w1", cores=2)])
    cluster.add(pod("a", 2000), pod("b", 2000, t=1))
    assert bound(cluster.run()) == {"default/a": "w1"}
    graph = scheduler.books.graph
    cluster.nodes["w2"] = node("w2", cores=2)
    cluster.tell(ADDED, cluster.nodes["w2"])
    assert bound(cluster.run(1.0)) == {"default/b": "w2"}
    assert scheduler.books.graph is graph and "Node  w2  flux cpu  2  (attached)" in scheduler.log


def test_a_node_that_grows_keeps_its_pods_and_offers_the_new_cores() -> None:
    scheduler = KubefluxScheduler()
    cluster = Cluster(scheduler, [node("w1", cores=2)])
    cluster.add(pod("a", 2000), pod("b", 2000, t=1))
    cluster.run()
    cluster.nodes["w1"] = node("w1", cores=4)
    cluster.tell(MODIFIED, cluster.nodes["w1"])
    assert bound(cluster.run(1.0)) == {"default/b": "w1"}
    assert any(line.startswith("Update allocate default/a: jobid") for line in scheduler.log)
    cluster.add(pod("c", 1000, t=2))
    assert bound(cluster.run(2.0)) == {}  # a and b hold all 4 cores


def test_another_schedulers_pod_is_replayed_onto_its_node_in_the_graph() -> None:
    scheduler = KubefluxScheduler()
    cluster = Cluster(scheduler, [node("w1", cores=4)])
    web = pod("web", 3000, scheduler="default-scheduler")
    web.node_name, web.phase = "w1", PodPhase.RUNNING
    cluster.add(web)
    cluster.run()
    graph = scheduler.books.graph
    assert graph is not None and graph.busy_cores("w1", 0) == 3
    assert any(line.startswith("Update allocate default/web: jobid 1 node w1 leaves 3") for line in scheduler.log)


@pytest.mark.parametrize(("depth", "backfilled"), [(1, False), (2, True)])
def test_the_queue_depth_bounds_how_far_backfilling_looks(depth: int, backfilled: bool) -> None:
    cluster = Cluster(KubefluxScheduler(queue_depth=depth), [node("w1", cores=2)])
    cluster.add(pod("holder", 1000, annotations={DURATION_ANNOTATION: "100"}))
    cluster.run()
    cluster.add(pod("head", 2000, t=1), pod("short", 1000, t=2, annotations={DURATION_ANNOTATION: "50"}))
    assert ("default/short" in bound(cluster.run(2.0))) is backfilled


def _refuse(cluster: Cluster, decisions: list[Decision], reason: str) -> Bind:
    """The API server refuses the one Bind in ``decisions``: the pod stays as it was, the scheduler is told."""
    [refused] = [d for d in decisions if isinstance(d, Bind)]
    cluster.scheduler.unreserve(refused.pod, refused.uid, refused.node, reason, cluster.now)
    return refused


def test_a_bind_refused_because_the_node_is_gone_frees_its_cores_and_the_pod_goes_elsewhere() -> None:
    cluster = Cluster(KubefluxScheduler(), [node("w1"), node("w2")])
    cluster.add(pod("a", 4000))
    decisions = cluster.scheduler.schedule(0.0)
    assert _refuse(cluster, decisions, 'nodes "w1" not found').node == "w1"
    cluster.tell(DELETED, cluster.nodes["w1"])
    assert bound(cluster.run(1.0)) == {"default/a": "w2"}
    cluster.tell(ADDED, cluster.nodes["w1"])  # w1 is back: all of its cores are free
    cluster.add(pod("b", 4000, t=1))
    assert bound(cluster.run(2.0)) == {"default/b": "w1"}


@pytest.mark.parametrize("told_first", ["bound event", "refusal"])
@pytest.mark.parametrize("where", ["w2", "w1"], ids=["elsewhere", "on the node kubeflux chose"])
def test_a_bind_refused_because_the_pod_was_bound_by_another_client_counts_it_where_it_runs(
    told_first: str, where: str
) -> None:
    """Another client bound the pod first, elsewhere or on the very node kubeflux chose (the second case queued the
    pod again when the watch showed it bound before the refusal came: PodScheduled=False on a running pod, and its
    cores counted twice as free — issue 28, seen on the real API server)."""
    cluster = Cluster(KubefluxScheduler(), [node("w1", cores=2), node("w2", cores=2)])
    a = pod("a", 2000)
    cluster.add(a)
    decisions = cluster.scheduler.schedule(0.0)
    assert bound(decisions) == {"default/a": "w1"}
    other = Pod(a.namespace, a.name, a.uid, a.scheduler_name, requests=a.requests, node_name=where)
    other.phase = PodPhase.RUNNING
    cluster.pods[a.key] = other
    if told_first == "bound event":
        cluster.tell(MODIFIED, other)
        _refuse(cluster, decisions, f"pod default/a is already assigned to node '{where}'")
    else:
        _refuse(cluster, decisions, f"pod default/a is already assigned to node '{where}'")
        cluster.tell(MODIFIED, other)
    free = "w2" if where == "w1" else "w1"
    cluster.add(pod("b", 2000, t=1), pod("c", 2000, t=2))
    decisions = cluster.run(1.0)
    assert bound(decisions) == {"default/b": free}
    assert "default/a" not in messages(decisions)
    assert messages(decisions)["default/c"] == "0/2 nodes are available: 2 Insufficient cpu."
    assert cluster.scheduler.books.allocations[a.uid].node == where


def test_a_refused_pod_waits_a_back_off_so_a_lagging_watch_does_not_make_it_refused_again_and_again() -> None:
    cluster = Cluster(KubefluxScheduler(), [node("w1", cores=2), node("w2", cores=2)])
    cluster.add(pod("a", 2000))
    decisions = cluster.scheduler.schedule(0.0)
    _refuse(cluster, decisions, "pod default/a is already assigned to node 'w2'")
    assert bound(cluster.scheduler.schedule(0.5)) == {}  # the watch has not said where it runs yet: no new Bind
    assert cluster.scheduler.next_wakeup(0.5) == BIND_BACKOFF
    assert bound(cluster.scheduler.schedule(BIND_BACKOFF)) == {"default/a": "w1"}  # the watch never said: tried


def test_a_pod_whose_binding_keeps_being_refused_backs_off_longer_each_time_and_is_told_why() -> None:
    """rev34y #2: a Binding an admission policy refuses was tried every second forever, and the pod was told only
    "backing off until 1.79604e+09". kube-scheduler's back-off doubles from 1 s up to 10 s."""
    cluster = Cluster(KubefluxScheduler(), [node("w1", cores=2)])
    cluster.add(pod("a", 2000))
    now, waits = 0.0, []
    for _ in range(6):
        cluster.now = now
        decisions = cluster.scheduler.schedule(now)
        _refuse(cluster, decisions, "denied by policy p: rev34y refuses this Binding")
        message = messages(cluster.scheduler.schedule(now))["default/a"]
        wake = cluster.scheduler.next_wakeup(now)
        assert wake is not None
        waits.append(wake - now)
        now = wake
    assert waits == [1.0, 2.0, 4.0, 8.0, 10.0, 10.0]
    assert message == (
        "0/1 nodes are available: the Binding of pod default/a was refused (denied by policy p: rev34y refuses"
        " this Binding); it is tried again in 10 s."
    )


def test_a_bind_refused_because_the_pod_is_gone_frees_its_cores() -> None:
    cluster = Cluster(KubefluxScheduler(), [node("w1", cores=2)])
    cluster.add(pod("a", 2000))
    decisions = cluster.scheduler.schedule(0.0)
    _refuse(cluster, decisions, "pods 'default/a' not found")
    cluster.delete("a")
    cluster.add(pod("b", 2000, t=1))
    assert bound(cluster.run(1.0)) == {"default/b": "w1"}


@pytest.mark.parametrize(
    ("policy", "expected"),
    [("lonode", "w1"), ("low", "w1"), ("hinode", "w3"), ("high", "w3"), ("first", "w3")],
)
def test_a_fractional_pod_goes_where_its_match_policy_says(policy: str, expected: str) -> None:

    cluster = Cluster(KubefluxScheduler(policy="lonode"), [node("w1"), node("w2"), node("w3")])
    cluster.add(pod("big", 2000))
    assert bound(cluster.run()) == {"default/big": "w1"}
    cluster.add(
        pod("web", 250, t=1, annotations={POLICY_ANNOTATION: policy}),
        pod("core", 1000, t=2, annotations={POLICY_ANNOTATION: policy}),
    )
    # the fractional pod takes no core vertex but the node a one-core pod of the same policy is matched to
    assert bound(cluster.run(1.0)) == {"default/web": expected, "default/core": expected}


def test_a_node_exclusive_pod_gets_a_node_no_other_pod_uses() -> None:
    """A ``lonodex`` pod holds its node whole: it must not be put on the node where a ``lonode`` pod already holds a
    core (the engine used to pick that node and fail half way through recording it), but go to a free node, or
    wait for one."""
    cluster = Cluster(KubefluxScheduler(policy="lonode"), [node("w1"), node("w2")])
    cluster.add(pod("a", 1000))
    assert bound(cluster.run()) == {"default/a": "w1"}
    cluster.add(pod("b", 1000, t=1, annotations={POLICY_ANNOTATION: "lonodex"}))
    assert bound(cluster.run(1.0)) == {"default/b": "w2"}
    cluster.add(pod("c", 1000, t=2, annotations={POLICY_ANNOTATION: "lonodex"}))
    decisions = cluster.run(2.0)
    assert bound(decisions) == {} and "default/c" in messages(decisions)
    cluster.end("a")
    assert bound(cluster.run(3.0)) == {"default/c": "w1"}


def test_another_schedulers_pod_on_a_shared_node_under_a_node_exclusive_profile() -> None:
    """Under a ``lonodex`` profile, a pod of another scheduler on the node a ``lonode`` pod shares is put on the
    graph (holding only its cores: that used to raise PlannerBusyError out of the scheduler); the node stays busy
    and the next node-exclusive pod goes to the free node."""
    cluster = Cluster(KubefluxScheduler(policy="lonodex"), [node("w1"), node("w2")])
    cluster.add(pod("a", 1000, annotations={POLICY_ANNOTATION: "lonode"}))
    assert bound(cluster.run()) == {"default/a": "w1"}
    web = pod("web", 1000, scheduler="default-scheduler")
    web.node_name = "w1"
    web.phase = PodPhase.RUNNING
    cluster.add(web, pod("b", 1000, t=1))
    assert bound(cluster.run(1.0)) == {"default/b": "w2"}


def test_other_schedulers_pods_hold_only_their_cores_under_a_node_exclusive_profile() -> None:
    """Two pods of another scheduler on one node are both put on the graph, each holding the cores it asks for
    (under ``lonodex`` the second replay was refused, the first holding the node whole, and it stayed counted in
    the books only); a ``lonode`` pod of kubeflux shares that node, a ``lonodex`` one goes to the free node."""
    scheduler = KubefluxScheduler(policy="lonodex")
    cluster = Cluster(scheduler, [node("w1"), node("w2")])
    for name in ("web", "db"):
        other = pod(name, 1000, scheduler="default-scheduler")
        other.node_name, other.phase = "w1", PodPhase.RUNNING
        cluster.add(other)
    cluster.run()
    graph = scheduler.books.graph
    assert graph is not None and graph.busy_cores("w1", 0) == 2
    assert not any("Could not put pod" in line for line in scheduler.log)
    cluster.add(pod("shared", 2000, t=1, annotations={POLICY_ANNOTATION: "lonode"}), pod("whole", 1000, t=1))
    assert bound(cluster.run(1.0)) == {"default/shared": "w1", "default/whole": "w2"}


def test_after_a_restart_a_node_exclusive_pod_of_kubeflux_still_holds_its_node_whole() -> None:
    """kubeflux replays its own pods after a restart under the policy that placed them: a ``lonodex`` pod under a
    ``lonode`` profile holds its node whole again, so a later pod goes to the other node, as it would have."""
    first = Cluster(KubefluxScheduler(policy="lonode"), [node("w1"), node("w2")])
    first.add(pod("whole", 1000, annotations={POLICY_ANNOTATION: "lonodex"}))
    assert bound(first.run()) == {"default/whole": "w1"}
    again = Cluster(KubefluxScheduler(policy="lonode"), list(first.nodes.values()))
    again.add(*first.pods.values())
    again.add(pod("next", 1000, t=1))
    assert bound(again.run(1.0)) == {"default/next": "w2"}


def test_the_profiles_policy_chooses_the_node_of_fractional_pods() -> None:
    placed = {}
    for policy in ("lonode", "first"):
        cluster = Cluster(KubefluxScheduler(policy=policy), [node("w1", cores=2), node("w2", cores=2)])
        cluster.add(pod("a", 500), pod("b", 500, t=1), pod("c", 1500, t=2))
        placed[policy] = bound(cluster.run())
    assert placed["lonode"] == {"default/a": "w1", "default/b": "w1", "default/c": "w2"}
    assert placed["first"] == {"default/a": "w2", "default/b": "w2", "default/c": "w1"}


def test_the_engine_keeps_only_the_jobs_of_running_and_reserved_pods() -> None:
    """A long-running scheduler must not keep a record per pod it ever placed or reservation it ever re-planned."""
    cluster = Cluster(KubefluxScheduler(), [node("w1", cores=2)])
    for wave in range(5):
        cluster.add(*(pod(f"p{wave}-{i}", 1000, t=wave) for i in range(3)))
        cluster.run(float(wave * 10))
        for i in range(2):
            cluster.end(f"p{wave}-{i}")
    cluster.run(100.0)
    assert cluster.scheduler.books.graph is not None
    engine = cluster.scheduler.books.graph.engine
    running = [p for p in cluster.pods.values() if p.node_name and not p.phase.terminal]
    assert running and len(engine.jobs) == len(running)
    assert all(info.state is not JobState.CANCELED for info in engine.jobs.values())


def test_a_node_attached_again_leaves_no_record_of_the_jobs_it_dropped() -> None:
    """A node whose capacity changes is attached again and its pods replayed as new engine jobs; the old ones go."""
    scheduler = KubefluxScheduler()
    cluster = Cluster(scheduler, [node("w1", cores=2)])
    cluster.add(pod("a", 1000))
    cluster.run()
    for step, cores in enumerate((4, 6, 8), start=1):
        cluster.nodes["w1"] = node("w1", cores=cores)
        cluster.tell(MODIFIED, cluster.nodes["w1"])
        cluster.run(float(step))
    assert scheduler.books.graph is not None
    assert len(scheduler.books.graph.engine.jobs) == 1


def test_a_gang_keeps_its_other_nodes_when_one_of_its_nodes_is_attached_again() -> None:
    scheduler = KubefluxScheduler()
    cluster = Cluster(scheduler, [node("w1", cores=2), node("w2", cores=2)])
    cluster.tell(ADDED, PodGroup("default", "mpi", min_member=2))
    cluster.add(*group_pods("mpi", 2, 2000))
    assert bound(cluster.run()) == {"default/mpi-0": "w1", "default/mpi-1": "w2"}
    cluster.nodes["w1"] = node("w1", cores=3)
    cluster.tell(MODIFIED, cluster.nodes["w1"])
    cluster.add(pod("late", 2000, t=1))
    assert bound(cluster.run(1.0)) == {}  # one core free on w1; w2 is still the gang's
    assert scheduler.books.graph is not None
    assert scheduler.books.graph.busy_cores("w2", 1) == 2


@pytest.mark.parametrize("write", ["expected start taken off", "PodScheduled=False", "deletion begun"])
def test_a_pod_whose_binding_is_in_flight_is_never_queued_again(write: str) -> None:
    """serve writes to a pod before its Binding (the expected start taken off, a PodScheduled=False held back): the
    watch shows the pod still unbound after the Bind decision. It stays assumed on its node, is neither bound again
    nor told it waits, and keeps exactly one allocation; a refusal then frees it, or its Binding lands."""
    cluster = Cluster(KubefluxScheduler(), [node("w1", cores=2)])
    a = pod("a", 2000, annotations={EXPECTED_START_ANNOTATION: "100"})
    cluster.add(a)
    decisions = cluster.scheduler.schedule(0.0)
    assert bound(decisions) == {"default/a": "w1"}
    seen = Pod(a.namespace, a.name, a.uid, a.scheduler_name, requests=a.requests)  # unbound, as the watch shows
    if write == "deletion begun":
        seen.deleted = True
    cluster.pods[a.key] = seen
    cluster.tell(MODIFIED, seen)
    cluster.add(pod("b", 2000, t=1))
    decisions = cluster.scheduler.schedule(1.0)
    assert "default/a" not in bound(decisions) and "default/a" not in messages(decisions)
    assert messages(decisions)["default/b"] == "0/1 nodes are available: 1 Insufficient cpu."
    assert set(cluster.scheduler.books.allocations) == {a.uid} and a.uid not in cluster.scheduler.queue.by_pod
    if write == "deletion begun":  # its Binding is refused: the cores go to b
        _refuse(cluster, [Bind("default/a", a.uid, "w1")], "pod default/a is being deleted")
        cluster.delete("a")
        assert bound(cluster.run(2.0)) == {"default/b": "w1"}
    else:  # its Binding lands
        seen.node_name, seen.phase = "w1", PodPhase.RUNNING
        cluster.tell(MODIFIED, seen)
        assert bound(cluster.run(2.0)) == {}
        assert set(cluster.scheduler.books.allocations) == {a.uid}


def test_a_pod_no_node_admits_is_rejected_blocks_no_fcfs_queue_and_runs_once_a_node_is_labelled() -> None:
    cluster = Cluster(KubefluxScheduler(backfill="fcfs"), [node("w1"), node("w2")])
    cluster.add(pod("picky", 1000, node_selector={"zone": "b"}), pod("after", 1000, t=1))
    decisions = cluster.run()
    assert bound(decisions) == {"default/after": "w1"}
    rejected = [d for d in decisions if isinstance(d, Reject)]
    assert [d.pod for d in rejected] == ["default/picky"]
    assert rejected[0].message == (
        "0/2 nodes are available: 2 node(s) didn't match Pod's node affinity/selector. No node admits the pod as "
        "the nodes are now; it is reconsidered when a node is added or changes."
    )
    cluster.nodes["w2"] = node("w2", labels={"zone": "b"})
    cluster.tell(MODIFIED, cluster.nodes["w2"])
    assert bound(cluster.run(2.0)) == {"default/picky": "w2"}


def test_a_gang_whose_members_only_fit_nodes_that_do_not_admit_them_is_rejected() -> None:
    # Two 4-core members that must run in zone b: only w2 is in zone b, and it holds one of them.
    cluster = Cluster(KubefluxScheduler(), [node("w1"), node("w2", labels={"zone": "b"})])
    cluster.tell(ADDED, PodGroup("default", "pair", min_member=2))
    cluster.add(
        *(pod(f"pair-{i}", 4000, node_selector={"zone": "b"}, labels={POD_GROUP_LABEL: "pair"}) for i in range(2))
    )
    decisions = cluster.run()
    assert {d.pod for d in decisions if isinstance(d, Reject)} == {"default/pair-0", "default/pair-1"}
    cluster.nodes["w1"] = node("w1", labels={"zone": "b"})
    cluster.tell(MODIFIED, cluster.nodes["w1"])
    assert len(bound(cluster.run(1.0))) == 2


def test_a_users_subclass_of_kubeflux_schedules_as_kubeflux_does() -> None:
    """The scheduler core is a class users (and tests/sim/test_status_updates.py) extend, e.g. to count what it is
    told; compiled, its classes allow interpreted subclasses (``@mypyc_attr(allow_interpreted_subclasses=True)``)."""

    class Counting(KubefluxScheduler):
        def __init__(self) -> None:
            super().__init__("kubeflux")
            self.seen = 0

        def observe(self, event: ClusterEvent, now: float) -> None:
            self.seen += 1
            super().observe(event, now)

    scheduler = Counting()
    for obj in (node("n0"), pod("p0", 1000)):
        scheduler.observe(ClusterEvent(EventKind.ADDED, obj), 0.0)
    assert scheduler.seen == 2
    assert [type(decision).__name__ for decision in scheduler.schedule(1.0)] == ["Bind"]
