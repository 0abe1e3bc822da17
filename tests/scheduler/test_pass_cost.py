"""What keeps a scheduling pass cheap (issue 15) stays exact: counts kept incrementally equal a count afresh, and
what is remembered between passes is forgotten when the nodes change."""

from __future__ import annotations

import random

from kubeflux.scheduler.core import KubefluxScheduler
from kubeflux.scheduler.fit import FitIndex
from kubeflux.scheduler.interface import Reject, Unschedulable
from kubeflux.scheduler.objects import POD_GROUP_LABEL, PodGroup

from .test_core import ADDED, DELETED, Cluster, bound, node, pod


def test_copies_kept_from_the_change_log_equal_a_count_afresh_and_cost_only_the_changed_nodes() -> None:
    rng = random.Random(3)
    nodes = {f"n{i}": node(f"n{i}", cores=4) for i in range(30)}
    free = {name: 4000 for name in nodes}  # millicores free on each node
    two = pod("p", 2000)
    index = FitIndex()
    static = index.static(two, list(nodes), nodes, 0)

    def shortfall(name: str, _pod: object) -> list[str]:
        return [] if free[name] >= 2000 else ["Insufficient cpu"]

    asked: list[str] = []

    def count(name: str) -> int:
        asked.append(name)
        return free[name] // 2000

    entry = index.copies(index.fit(two, static, shortfall), count)
    assert sorted(asked) == sorted(nodes) and entry.copies_total == 2 * len(nodes)  # the first count: every node
    for _ in range(200):
        changed = rng.sample(sorted(nodes), rng.randint(0, 4))
        for name in changed:
            free[name] = rng.choice([0, 1000, 2000, 3000, 4000])
            index.changed(name)
        asked.clear()
        entry = index.copies(index.fit(two, static, shortfall), count)
        assert entry.copies_total == sum(free[name] // 2000 for name in nodes)
        assert entry.copies == {name: free[name] // 2000 for name in nodes if free[name] >= 2000}
        # counted again: only the changed nodes that may take the pod now
        assert sorted(asked) == sorted(name for name in changed if free[name] >= 2000)


def test_a_gang_alike_to_one_that_could_fit_is_rejected_once_a_node_is_gone() -> None:
    cluster = Cluster(KubefluxScheduler(), [node("w1", cores=2), node("w2", cores=2)])
    cluster.add(pod("hog", 2000))
    (busy,) = bound(cluster.run()).values()
    other = "w2" if busy == "w1" else "w1"
    cluster.tell(ADDED, PodGroup("default", "a", min_member=2))
    cluster.add(*(pod(f"a-{i}", 2000, labels={POD_GROUP_LABEL: "a"}) for i in range(2)))
    waiting = cluster.run(1.0)
    assert [type(d) for d in waiting] == [Unschedulable, Unschedulable]  # two whole nodes: it fits once hog ends
    gone = cluster.nodes.pop(other)
    cluster.tell(DELETED, gone)
    cluster.tell(ADDED, PodGroup("default", "b", min_member=2))
    cluster.add(*(pod(f"b-{i}", 2000, labels={POD_GROUP_LABEL: "b"}) for i in range(2)))
    decisions = cluster.run(2.0)
    # b has a's shape, which was found to fit the two empty nodes: that is forgotten with the node, and a, found
    # able to fit then, is asked again
    rejected = {d.pod for d in decisions if isinstance(d, Reject)}
    assert rejected == {"default/a-0", "default/a-1", "default/b-0", "default/b-1"}, decisions
    assert all("can never fit" in d.message for d in decisions if isinstance(d, Reject))


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
        assert scheduler.graph is not None and list(scheduler.graph.specs) == ids
    assert len(placed[0]) == 20 and placed[0] == placed[1]
