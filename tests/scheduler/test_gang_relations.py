"""Gangs whose members constrain each other, placed as a whole in one search (and reserved so) rather than member by
member: a ``DoNotSchedule`` topology spread among the members, required pod affinity among them.

Every placement is checked by :func:`check_bind_order`, written here apart from the scheduler's filters: each member,
in the order it is bound, against the pods bound before it (the other members bound before it among them), as
kube-scheduler checks it when it binds the members one at a time."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from kubeflux.apiobjects.manifests import pod_from_manifest
from kubeflux.scheduler.core import Backfill, KubefluxScheduler
from kubeflux.scheduler.interface import Bind, Decision
from kubeflux.scheduler.objects import POD_GROUP_LABEL, Node, Pod, PodGroup
from kubeflux.scheduler.testing import ADDED, Cluster, bound, messages, node
from kubeflux.scheduler.topology import RACK_LEVEL, ZONE_LEVEL
from tests.scheduler._relations import SPECS, affinity, remember, spread
from tests.scheduler._relations import check_bind_order as check

HOST = "kubernetes.io/hostname"


def nodes_in(level: str, *domains: tuple[str, int, int]) -> list[Node]:
    """Nodes ``n0``, ``n1`` … in the ``level`` domains given as (domain, nodes, cores of each)."""
    made: list[Node] = []
    for domain, count, cores in domains:
        for _ in range(count):
            name = f"n{len(made)}"
            made.append(node(name, cores, labels={HOST: name, level: domain}))
    return made


def member(
    name: str,
    cpu: float,
    app: str = "mpi",
    *,
    group: str | None = "mpi",
    ends: int | None = None,
    labels_too: Mapping[str, str] | None = None,
    **spec: Any,
) -> Pod:
    """A pod labelled ``app`` (and ``labels_too``; a member of pod group ``group``), planned to run ``ends`` seconds
    when given."""
    labels = {"app": app, **(labels_too or {})} | ({POD_GROUP_LABEL: group} if group else {})
    annotations = {"kubeflux.io/duration": str(ends)} if ends is not None else {}
    body = {
        "metadata": {
            "name": name,
            "namespace": "default",
            "uid": f"uid-{name}",
            "labels": labels,
            "annotations": annotations,
        },
        "spec": {
            "schedulerName": "kubeflux",
            "containers": [{"name": "c", "resources": {"requests": {"cpu": str(cpu)}}}],
            **spec,
        },
    }
    return pod_from_manifest(body)


def other(name: str, on: str, app: str, cpu: float = 1) -> Pod:
    """A pod another scheduler bound to ``on``, labelled ``app``."""
    return member(name, cpu, app, group=None, schedulerName="default-scheduler", nodeName=on)


def gang(cluster: Cluster, pods: list[Pod], minimum: int | None = None) -> None:
    cluster.tell(ADDED, PodGroup("default", "mpi", minimum if minimum is not None else len(pods)))
    cluster.add(*pods)


def binds(decisions: list[Decision]) -> list[tuple[str, str]]:
    return [(d.pod, d.node) for d in decisions if isinstance(d, Bind)]


def check_bind_order(cluster: Cluster, order: Iterable[tuple[str, str]], before: Mapping[str, str]) -> None:
    """:func:`~tests.scheduler._relations.check_bind_order` over the test double's nodes and pods."""
    check(
        {name: n.labels for name, n in cluster.nodes.items()},
        {key: p.labels for key, p in cluster.pods.items()},
        {key: SPECS.get(p.name, {}) for key, p in cluster.pods.items()},
        order,
        before,
    )


def constrained(name: str, cpu: float, **spec: Any) -> Pod:
    """A gang member with the spread and affinity of ``spec``, remembered for the checker."""
    remember(name, spec)
    return member(name, cpu, **spec)


def zones_of(cluster: Cluster, placed: Mapping[str, str], level: str = ZONE_LEVEL) -> dict[str, int]:
    counts: dict[str, int] = {}
    for where in placed.values():
        zone = cluster.nodes[where].labels[level]
        counts[zone] = counts.get(zone, 0) + 1
    return counts


# --- topology spread among the members -------------------------------------------------------------------------


def test_a_four_rank_job_spread_over_four_zones_goes_one_rank_a_zone_with_its_big_rank_where_it_fits() -> None:
    # One by one the small ranks, listed first, take a zone each from the lowest, zone a's big node among them, and
    # the 8-cpu rank then fits nowhere; the search puts the big rank on zone a's node and a small one in each other.
    cluster = Cluster(KubefluxScheduler(), nodes_in(ZONE_LEVEL, ("a", 1, 8), ("b", 1, 4), ("c", 1, 4), ("d", 1, 4)))
    ranks = [constrained(f"rank-{i}", cpu, **spread()) for i, cpu in enumerate([2, 2, 2, 8])]
    gang(cluster, ranks)
    decisions = cluster.run(1.0)
    placed = bound(decisions)
    assert len(placed) == 4 and placed["default/rank-3"] == "n0"
    assert zones_of(cluster, placed) == {"a": 1, "b": 1, "c": 1, "d": 1}
    check_bind_order(cluster, binds(decisions), {})


def test_seven_ranks_over_three_zones_with_room_for_four_two_and_two_keep_a_skew_of_one() -> None:
    cluster = Cluster(KubefluxScheduler(), nodes_in(ZONE_LEVEL, ("a", 2, 4), ("b", 1, 4), ("c", 1, 4)))
    gang(cluster, [constrained(f"rank-{i}", 2, **spread()) for i in range(7)])
    decisions = cluster.run(1.0)
    placed = bound(decisions)
    assert len(placed) == 7 and zones_of(cluster, placed) == {"a": 3, "b": 2, "c": 2}
    check_bind_order(cluster, binds(decisions), {})


def test_eight_ranks_over_zones_with_room_for_four_two_and_two_wait_as_no_skew_of_one_holds_them() -> None:
    cluster = Cluster(KubefluxScheduler(), nodes_in(ZONE_LEVEL, ("a", 2, 4), ("b", 1, 4), ("c", 1, 4)))
    gang(cluster, [constrained(f"rank-{i}", 2, **spread()) for i in range(8)])
    decisions = cluster.run(1.0)
    assert not bound(decisions)
    said = messages(decisions)["default/rank-0"]
    assert said.startswith("0/4 nodes are available:") and "didn't match pod topology spread constraints" in said


def test_ranks_already_in_a_zone_are_counted_and_the_new_ones_go_round_the_others_first() -> None:
    cluster = Cluster(KubefluxScheduler(), nodes_in(ZONE_LEVEL, ("a", 2, 8), ("b", 2, 8), ("c", 2, 8)))
    cluster.add(other("old-0", "n0", "mpi"), other("old-1", "n1", "mpi"))  # zone a holds 2 pods the spread counts
    ranks = [constrained(f"rank-{i}", cpu, **spread()) for i, cpu in enumerate([1, 1, 1, 1, 6])]
    gang(cluster, ranks)
    decisions = cluster.run(1.0)
    placed = bound(decisions)
    counts = {"a": 2, "b": 0, "c": 0}
    for zone, count in zones_of(cluster, placed).items():
        counts[zone] += count
    assert len(placed) == 5 and max(counts.values()) - min(counts.values()) <= 1
    check_bind_order(cluster, binds(decisions), {"default/old-0": "n0", "default/old-1": "n1"})


def test_a_spread_gang_no_skew_can_hold_waits_saying_why_in_kube_schedulers_words() -> None:
    cluster = Cluster(KubefluxScheduler(), nodes_in(ZONE_LEVEL, ("a", 1, 8), ("b", 1, 1)))
    gang(cluster, [constrained(f"rank-{i}", cpu, **spread()) for i, cpu in enumerate([2, 2, 2])])
    decisions = cluster.run(1.0)
    assert not bound(decisions)
    said = messages(decisions)["default/rank-0"]
    assert said.startswith("0/2 nodes are available:") and "didn't match pod topology spread constraints" in said, said


def test_a_spread_gang_that_cannot_start_now_is_reserved_and_started_spread_when_room_comes() -> None:
    scheduler = KubefluxScheduler(backfill=Backfill.EASY)
    cluster = Cluster(scheduler, nodes_in(ZONE_LEVEL, ("a", 1, 8), ("b", 1, 4), ("c", 1, 4), ("d", 1, 4)))
    cluster.add(member("long", 4, "other", group=None, ends=100, nodeSelector={HOST: "n3"}))
    assert bound(cluster.run(0.0)) == {"default/long": "n3"}
    gang(cluster, [constrained(f"rank-{i}", cpu, **spread()) for i, cpu in enumerate([2, 2, 2, 8])])
    decisions = cluster.run(1.0)
    assert not bound(decisions)
    job = scheduler.queue.jobs["default/mpi"]
    assert job.expected_start == 100
    assert sorted(job.assigned.values()) == ["n0", "n1", "n2", "n3"]
    cluster.end("long")
    decisions = cluster.run(100.0)
    placed = bound(decisions)
    assert len(placed) == 4 and placed["default/rank-3"] == "n0"
    check_bind_order(cluster, binds(decisions), {})


def test_with_fewer_zones_than_min_domains_each_zone_takes_at_most_max_skew_ranks() -> None:
    # minDomains 3 over two zones: the least count is taken as 0, so a zone holds at most maxSkew (1) of the ranks.
    nodes = nodes_in(ZONE_LEVEL, ("a", 2, 8), ("b", 2, 8))
    cluster = Cluster(KubefluxScheduler(), nodes)
    gang(cluster, [constrained(f"rank-{i}", 1, **spread(minDomains=3)) for i in range(3)])
    decisions = cluster.run(1.0)
    assert not bound(decisions)
    assert "didn't match pod topology spread constraints" in messages(decisions)["default/rank-0"]
    cluster = Cluster(KubefluxScheduler(), nodes)
    pair = [constrained(f"pair-{i}", 1, **spread(minDomains=3)) for i in range(2)]
    gang(cluster, pair)
    decisions = cluster.run(1.0)
    assert zones_of(cluster, bound(decisions)) == {"a": 1, "b": 1}
    check_bind_order(cluster, binds(decisions), {})


# --- required pod affinity among the members -------------------------------------------------------------------


def test_an_eight_member_job_affine_by_rack_starts_in_the_one_rack_that_holds_it_all() -> None:
    # Racks r0 and r1 are half full: one by one the first member takes r0 and the others, kept to it by their
    # affinity, find room for three more only. The gang is kept to one rack as a whole: r2.
    cluster = Cluster(KubefluxScheduler(), nodes_in(RACK_LEVEL, ("r0", 4, 4), ("r1", 4, 4), ("r2", 4, 4)))
    cluster.add(*[other(f"busy-{n}", f"n{n}", "busy", 4) for n in (0, 1, 4, 5)])
    gang(cluster, [constrained(f"rank-{i}", 2, **affinity(key=RACK_LEVEL)) for i in range(8)])
    decisions = cluster.run(1.0)
    placed = bound(decisions)
    assert sorted(set(placed.values())) == ["n10", "n11", "n8", "n9"] and len(placed) == 8
    check_bind_order(cluster, binds(decisions), {})


def test_an_affine_gang_joins_the_rack_of_the_pods_it_names_already_running() -> None:
    cluster = Cluster(KubefluxScheduler(), nodes_in(RACK_LEVEL, ("r0", 2, 4), ("r1", 2, 4), ("r2", 2, 4)))
    cluster.add(other("mpi-old", "n4", "mpi", 1))  # a pod the affinity names runs in r2: the gang must go there
    gang(cluster, [constrained(f"rank-{i}", 2, **affinity(key=RACK_LEVEL)) for i in range(3)])
    decisions = cluster.run(1.0)
    placed = bound(decisions)
    assert set(placed.values()) <= {"n4", "n5"} and len(placed) == 3
    check_bind_order(cluster, binds(decisions), {"default/mpi-old": "n4"})


def test_an_affine_gang_that_cannot_start_now_is_reserved_in_one_zone_and_started_there_when_it_frees() -> None:
    scheduler = KubefluxScheduler(backfill=Backfill.EASY)
    cluster = Cluster(scheduler, nodes_in(ZONE_LEVEL, ("a", 2, 4), ("b", 2, 4)))
    for name, on, ends in (("long", "n0", 100), ("short", "n2", 50)):
        cluster.add(member(name, 4, "other", group=None, ends=ends, nodeSelector={HOST: on}))
    assert sorted(bound(cluster.run(0.0)).values()) == ["n0", "n2"]
    gang(cluster, [constrained(f"rank-{i}", 4, **affinity(key=ZONE_LEVEL)) for i in range(2)])
    decisions = cluster.run(1.0)
    assert not bound(decisions)  # n1 and n3 are free, in two zones
    said = messages(decisions)["default/rank-0"]
    assert said.startswith("0/4 nodes are available: 2 Insufficient cpu, 2 node(s) didn't match pod affinity rules."), (
        said
    )
    job = scheduler.queue.jobs["default/mpi"]
    assert job.expected_start == 50  # zone b frees first: reserved there
    cluster.end("short")
    decisions = cluster.run(50.0)
    assert sorted(bound(decisions).values()) == ["n2", "n3"]
    check_bind_order(cluster, binds(decisions), {"default/long": "n0"})


def test_alike_spread_ranks_that_cannot_start_now_are_reserved_spread_not_where_the_engine_packs_them() -> None:
    # Four alike ranks, maxSkew 1 over zones a and b: two a zone. Zone a's two nodes free at 50 would take all four,
    # which the spread forbids; zone b's node frees at 100: the reservation is at 100, two ranks in each zone.
    scheduler = KubefluxScheduler(backfill=Backfill.EASY)
    cluster = Cluster(scheduler, nodes_in(ZONE_LEVEL, ("a", 2, 4), ("b", 1, 4)))
    for on, ends in (("n0", 50), ("n1", 50), ("n2", 100)):
        cluster.add(member(f"busy-{on}", 4, "other", group=None, ends=ends, nodeSelector={HOST: on}))
    assert len(bound(cluster.run(0.0))) == 3
    gang(cluster, [constrained(f"rank-{i}", 2, **spread()) for i in range(4)])
    assert not bound(cluster.run(1.0))
    job = scheduler.queue.jobs["default/mpi"]
    assert job.expected_start == 100
    assigned = list(job.assigned.values())
    assert len(assigned) == 4 and assigned.count("n2") == 2
    for on in ("n0", "n1"):
        cluster.end(f"busy-{on}")
    assert not bound(cluster.run(50.0))
    cluster.end("busy-n2")
    decisions = cluster.run(100.0)
    placed = bound(decisions)
    assert len(placed) == 4 and zones_of(cluster, placed) == {"a": 2, "b": 2}
    check_bind_order(cluster, binds(decisions), {})


def test_ranks_affine_by_hostname_or_by_a_label_that_is_no_level_are_placed_one_by_one_side_by_side() -> None:
    # Neither key is a topology level the confiner could keep the gang in: the first rank goes anywhere (the first
    # of a set), the other beside it, as kube-scheduler binds them (they waited forever when confined to no level).
    for key in (HOST, "pool"):
        nodes = [node(f"n{i}", 4, labels={HOST: f"n{i}", "pool": "x", ZONE_LEVEL: "a"}) for i in range(2)]
        cluster = Cluster(KubefluxScheduler(), nodes)
        gang(cluster, [constrained(f"rank-{i}", 1, **affinity(key=key)) for i in range(2)])
        decisions = cluster.run(1.0)
        assert len(bound(decisions)) == 2, (key, messages(decisions))
        check_bind_order(cluster, binds(decisions), {})


def test_ranks_affine_by_zone_to_pods_already_in_two_zones_may_go_to_either_zone() -> None:
    # Pods the affinity selects run in zones a and b, 3 cpu free in each: kube-scheduler lets each rank go to any
    # zone holding one, so the two 2-cpu ranks start one a zone (kept to one zone, they were rejected as never fitting).
    cluster = Cluster(KubefluxScheduler(), nodes_in(ZONE_LEVEL, ("a", 1, 4), ("b", 1, 4)))
    cluster.add(other("old-a", "n0", "mpi"), other("old-b", "n1", "mpi"))
    gang(cluster, [constrained(f"rank-{i}", 2, **affinity(key=ZONE_LEVEL)) for i in range(2)])
    decisions = cluster.run(1.0)
    placed = bound(decisions)
    assert sorted(placed.values()) == ["n0", "n1"], messages(decisions)
    check_bind_order(cluster, binds(decisions), {"default/old-a": "n0", "default/old-b": "n1"})


def test_a_launcher_and_workers_affine_by_zone_to_pods_in_two_zones_are_searched_over_both() -> None:
    # Pods the affinity selects run in zones a and b. One by one, the 1-cpu launcher listed first takes n0 and the
    # 3-cpu worker then fits nowhere; the search over both zones puts the worker on n0 and the launcher on n1.
    cluster = Cluster(KubefluxScheduler(), nodes_in(ZONE_LEVEL, ("a", 1, 4), ("b", 1, 2)))
    cluster.add(other("old-a", "n0", "mpi"), other("old-b", "n1", "mpi"))
    gang(cluster, [constrained("launcher", 1, **affinity()), constrained("worker", 3, **affinity())])
    decisions = cluster.run(1.0)
    placed = bound(decisions)
    assert placed == {"default/worker": "n0", "default/launcher": "n1"}, messages(decisions)
    check_bind_order(cluster, binds(decisions), {"default/old-a": "n0", "default/old-b": "n1"})


def test_two_spread_ranks_beside_an_old_one_start_though_each_alone_would_tip_a_zone_over() -> None:
    # The old rank is in zone a (n1); zone c (n0) holds one 1-cpu rank. Alone, a rank may not join zone a while c is
    # empty, and c holds one: counted alone, the gang looked one short and was never searched. Bound c first, then a.
    zones = [node("n0", 1, labels={HOST: "n0", ZONE_LEVEL: "c"}), node("n1", 4, labels={HOST: "n1", ZONE_LEVEL: "a"})]
    cluster = Cluster(KubefluxScheduler(), zones)
    cluster.add(other("old-rank", "n1", "mpi"))
    gang(cluster, [constrained(f"rank-{i}", 1, **spread()) for i in range(2)])
    decisions = cluster.run(1.0)
    assert sorted(bound(decisions).values()) == ["n0", "n1"], messages(decisions)
    check_bind_order(cluster, binds(decisions), {"default/old-rank": "n1"})


def test_a_spread_launcher_that_fits_one_zone_only_starts_once_its_workers_fill_the_other() -> None:
    # Zone c (n1) already holds a pod the spread counts; the 3-cpu launcher fits only n1, which it may join only once
    # both workers are in zone a (n0). Counted alone, the launcher fit nowhere and the gang was never searched.
    zones = [node("n0", 2, labels={HOST: "n0", ZONE_LEVEL: "a"}), node("n1", 4, labels={HOST: "n1", ZONE_LEVEL: "c"})]
    cluster = Cluster(KubefluxScheduler(), zones)
    cluster.add(other("old-rank", "n1", "mpi"))
    members = [constrained("launcher", 3, **spread())] + [constrained(f"worker-{i}", 1, **spread()) for i in range(2)]
    gang(cluster, members)
    decisions = cluster.run(1.0)
    placed = bound(decisions)
    assert placed == {"default/launcher": "n1", "default/worker-0": "n0", "default/worker-1": "n0"}, messages(decisions)
    check_bind_order(cluster, binds(decisions), {"default/old-rank": "n1"})


# --- required anti-affinity among the members ------------------------------------------------------------------


def test_ranks_one_a_zone_share_a_node_without_a_zone_label() -> None:
    # kube-scheduler's anti-affinity counts and checks only nodes carrying the key: any number of ranks may share
    # nz. The 2-cpu rank takes zone a, the two 1-cpu ranks nz (taken as a zone of its own, the gang was rejected as
    # one that never fits).
    term = {"labelSelector": {"matchLabels": {"app": "mpi"}}, "topologyKey": ZONE_LEVEL}
    apart = {"affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}}
    nodes = [node("za", 4, labels={HOST: "za", ZONE_LEVEL: "a"}), node("nz", 2, labels={HOST: "nz"})]
    cluster = Cluster(KubefluxScheduler(), nodes)
    gang(cluster, [member(f"r{i}", cpu, labels_too={"rank": str(i)}, **apart) for i, cpu in enumerate([1, 2, 1])])
    decisions = cluster.run(1.0)
    assert bound(decisions) == {"default/r0": "nz", "default/r1": "za", "default/r2": "nz"}, messages(decisions)


def test_a_rank_per_node_gang_waiting_for_a_full_node_is_told_its_group_does_not_fit_not_of_reservations() -> None:
    # rev35: four ranks, one per node, and n0 full (a pod of another scheduler): each of n1-n3 takes a rank, the
    # gang does not fit. Nothing is reserved: the ranks were told "3 node(s) had no free cores … (reserved for pods
    # ahead in the queue)". Once n0 is free the four go one a node.
    term = {"labelSelector": {"matchLabels": {"app": "mpi"}}, "topologyKey": HOST}
    apart = {"affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}}
    cluster = Cluster(KubefluxScheduler(), [node(f"n{i}", 4, labels={HOST: f"n{i}"}) for i in range(4)])
    cluster.add(other("blocker", "n0", "x", cpu=3))
    gang(cluster, [member(f"mpi-{i}", 2, **apart) for i in range(4)])
    decisions = cluster.run(1.0)
    assert not bound(decisions)
    said = (
        "0/4 nodes are available: 1 Insufficient cpu, 3 node(s) had room for the pod but not for the rest of its "
        "pod group with it. pod group default/mpi needs its 4 pods placed at once."
    )
    assert messages(decisions) == {f"default/mpi-{i}": said for i in range(4)}
    cluster.delete("blocker")
    placed = bound(cluster.run(2.0))
    assert sorted(placed.values()) == ["n0", "n1", "n2", "n3"], placed


def test_a_gang_kept_off_a_node_reserved_for_a_gang_ahead_is_told_of_the_reservation() -> None:
    # Gang a (2 × 4 cpu) waits for n0 (long ends at 100) and is reserved n0 and n1 then; gang b's 1000-second
    # members would fit n1 now but run into a's reservation.
    cluster = Cluster(KubefluxScheduler(), [node(f"n{i}", 4, labels={HOST: f"n{i}"}) for i in range(2)])
    cluster.add(member("long", 4, group=None, ends=100))
    assert bound(cluster.run(1.0)) == {"default/long": "n0"}
    for name in "ab":
        cluster.tell(ADDED, PodGroup("default", name, 2))
    cluster.add(*[member(f"a-{i}", 4, group="a", ends=50) for i in range(2)])
    cluster.run(2.0)
    cluster.add(*[member(f"b-{i}", 2, group="b", ends=1000) for i in range(2)])
    decisions = cluster.run(3.0)
    said = (
        "0/2 nodes are available: 1 Insufficient cpu, 1 node(s) had no free cores for the pod's planned time "
        "(reserved for pods ahead in the queue). pod group default/b needs its 2 pods placed at once."
    )
    assert messages(decisions) == {f"default/b-{i}": said for i in range(2)}


def test_spread_ranks_whose_node_selectors_differ_are_searched_each_counting_its_own_nodes() -> None:
    # Over hostnames (nodeAffinityPolicy Honor) rank-0, kept to pool y, counts n2 alone; the others count every
    # node. One by one, rank-1 takes n0 and rank-3 (2 cpu) then fits nowhere. Searched as rank-0 counts, only n2 was
    # open to all. Each counting its own nodes: the 2-cpu ranks on n0 and n1, rank-1 beside rank-0 on n2.
    nodes = [node(f"n{i}", 2, labels={HOST: f"n{i}", "pool": pool}) for i, pool in enumerate("xxy")]
    cluster = Cluster(KubefluxScheduler(), nodes)
    ranks = [constrained("rank-0", 1, nodeSelector={"pool": "y"}, **spread(key=HOST))]
    ranks += [constrained(f"rank-{i}", cpu, **spread(key=HOST)) for i, cpu in ((1, 1), (2, 2), (3, 2))]
    gang(cluster, ranks)
    decisions = cluster.run(1.0)
    placed = bound(decisions)
    assert placed["default/rank-0"] == placed["default/rank-1"] == "n2" and len(placed) == 4, messages(decisions)
    check_bind_order(cluster, binds(decisions), {})


# --- preemption for members spread among themselves ------------------------------------------------------------


def preempting_cluster(b_priority: int) -> Cluster:
    """Zone a: n0, n1; zone b: n2; 2 cpu each, full: n0 and n1 with pods of priority 0, n2 of ``b_priority``."""
    cluster = Cluster(KubefluxScheduler(), nodes_in(ZONE_LEVEL, ("a", 2, 2), ("b", 1, 2)))
    for n, priority in ((0, 0), (1, 0), (2, b_priority)):
        cluster.add(member(f"low-{n}", 2, "low", group=None, priority=priority, nodeSelector={HOST: f"n{n}"}))
    assert len(bound(cluster.run(0.0))) == 3
    return cluster


def test_spread_ranks_never_evict_pods_whose_room_they_could_not_use() -> None:
    # Two 2-cpu ranks, maxSkew 1 over zones a and b: one a zone. Zone b's pod outranks them: evicting zone a's two
    # pods would give room for both ranks in zone a only, which the spread forbids (they were evicted for nothing).
    cluster = preempting_cluster(2000)
    gang(cluster, [constrained(f"rank-{i}", 2, priority=1000, **spread()) for i in range(2)])
    cluster.run(1.0)
    assert not cluster.evicted and not bound(cluster.run(2.0))


def test_spread_ranks_evict_one_pod_a_zone_and_start_one_rank_a_zone() -> None:
    cluster = preempting_cluster(500)
    gang(cluster, [constrained(f"rank-{i}", 2, priority=1000, **spread()) for i in range(2)])
    cluster.run(1.0)
    assert sorted(cluster.evicted) == ["default/low-0", "default/low-2"]
    decisions = cluster.run(2.0)
    assert sorted(bound(decisions).values()) == ["n0", "n2"], messages(decisions)
    check_bind_order(cluster, binds(decisions), {"default/low-1": "n1"})
