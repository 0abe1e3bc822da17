"""Jobs that ask for one topology domain (Kueue's podset-required/preferred-topology, kubeflux's own), in the core."""

from __future__ import annotations

import pytest

from kubeflux.scheduler.confining import (
    KUEUE_PREFERRED,
    KUEUE_REQUIRED,
    PREFERRED_ANNOTATION,
    REQUIRED_ANNOTATION,
)
from kubeflux.scheduler.core import Backfill, KubefluxScheduler
from kubeflux.scheduler.interface import Reject
from kubeflux.scheduler.objects import CPU, MEMORY, POD_GROUP_LABEL, Node, Pod, PodGroup
from kubeflux.scheduler.testing import ADDED, MODIFIED, Cluster, bound, messages, node, pod
from kubeflux.scheduler.topology import RACK_LEVEL, ZONE_LEVEL
from tests.scheduler._racks import HOST, racks

RACK = {KUEUE_REQUIRED: RACK_LEVEL}


def busy(cluster: Cluster, *names: str) -> None:
    """Fill the named 16-core nodes with one pod each."""
    cluster.add(*[pod(f"busy-{name}", 16000, node_selector={HOST: name}) for name in names])
    assert set(bound(cluster.run()).values()) == set(names)


def gang(cluster: Cluster, size: int, cores: int, annotations: dict[str, str], name: str = "mpi", t: float = 1) -> None:
    cluster.tell(ADDED, PodGroup("default", name, min_member=size))
    members = [
        pod(f"{name}-{i}", cores * 1000, t=t, labels={POD_GROUP_LABEL: name}, annotations=annotations)
        for i in range(size)
    ]
    cluster.add(*members)


def placed(decisions: list[object]) -> list[str]:
    return sorted(bound(decisions).values(), key=lambda name: int(name[1:]))  # type: ignore[arg-type]


@pytest.mark.parametrize("annotation", [KUEUE_REQUIRED, REQUIRED_ANNOTATION])
def test_a_gang_requiring_one_rack_starts_in_the_rack_with_room_not_across_two_with_more(annotation: str) -> None:
    cluster = Cluster(KubefluxScheduler(), racks(4, 4, 4))
    busy(cluster, "n0", "n1", "n4", "n5")  # r0 and r1 have 2 free nodes each, r2 has 4
    gang(cluster, 4, 16, {annotation: RACK_LEVEL})
    assert placed(cluster.run(1.0)) == ["n8", "n9", "n10", "n11"]


def test_the_same_gang_asking_nothing_is_spread_over_the_lowest_nodes() -> None:
    cluster = Cluster(KubefluxScheduler(), racks(4, 4, 4))
    busy(cluster, "n0", "n1", "n4", "n5")
    gang(cluster, 4, 16, {})
    assert placed(cluster.run(1.0)) == ["n2", "n3", "n6", "n7"]


@pytest.mark.parametrize("annotation", [KUEUE_PREFERRED, PREFERRED_ANNOTATION])
def test_preferred_takes_one_rack_when_one_has_room_and_relaxes_to_two_when_none_has(annotation: str) -> None:
    cluster = Cluster(KubefluxScheduler(), racks(4, 4, 4))
    busy(cluster, "n0", "n1", "n4", "n5")
    gang(cluster, 4, 16, {annotation: RACK_LEVEL})
    assert placed(cluster.run(1.0)) == ["n8", "n9", "n10", "n11"]
    gang(cluster, 4, 16, {annotation: RACK_LEVEL}, name="second", t=2)
    assert placed(cluster.run(2.0)) == ["n2", "n3", "n6", "n7"]  # no rack has 4 free nodes: two racks


def test_preferred_relaxes_to_the_zone_before_the_whole_cluster() -> None:
    nodes = racks(2, 2, 2, 2)
    for n in nodes:
        n.labels[ZONE_LEVEL] = "za" if int(n.name[1:]) in (0, 1, 4, 5) else "zb"  # r0, r2 in za; r1, r3 in zb
    cluster = Cluster(KubefluxScheduler(), nodes)
    busy(cluster, "n0", "n6")  # za: n1 and n4, n5 free; zb: n2, n3 and n7 free
    gang(cluster, 3, 16, {KUEUE_PREFERRED: RACK_LEVEL})
    assert placed(cluster.run(1.0)) == ["n1", "n4", "n5"]  # one zone (za), over two racks


def test_a_required_rack_that_can_never_hold_the_gang_is_rejected_with_the_reason() -> None:
    scheduler = KubefluxScheduler()
    cluster = Cluster(scheduler, racks(4, 4, 3))
    gang(cluster, 6, 16, RACK)
    decisions = cluster.run(1.0)
    rejected = [d for d in decisions if isinstance(d, Reject)]
    assert len(rejected) == 6
    assert rejected[0].message == (
        f"the pod group requires one rack ({RACK_LEVEL}) but no rack can ever hold its 6 pods of 16 cores and 0 gpus "
        "(the most one holds: 4)"
    )
    assert scheduler.books.allocations.keys() == {f"uid-busy-{n}" for n in ()}
    cluster.tell(ADDED, node("n11", 16, labels={RACK_LEVEL: "r0", HOST: "n11"}))
    cluster.tell(ADDED, node("n12", 16, labels={RACK_LEVEL: "r0", HOST: "n12"}))
    assert len(bound(cluster.run(2.0))) == 6  # reconsidered when nodes change: r0 holds 6 now


def test_a_required_level_the_cluster_does_not_have_is_rejected_naming_it() -> None:
    cluster = Cluster(KubefluxScheduler(), racks(4))
    gang(cluster, 2, 16, {KUEUE_REQUIRED: "cloud.provider.com/topology-block"})
    message = messages(cluster.run(1.0))["default/mpi-0"]
    assert "'cloud.provider.com/topology-block' is not a topology level of the cluster" in message
    assert RACK_LEVEL in message


def test_a_required_gang_waits_for_its_rack_and_is_told_when_it_starts_there() -> None:
    scheduler = KubefluxScheduler(backfill=Backfill.EASY)
    cluster = Cluster(scheduler, racks(2, 2))
    cluster.add(pod("long", 16000, node_selector={HOST: "n0"}, annotations={"kubeflux.io/duration": "100"}))
    cluster.add(pod("short", 16000, node_selector={HOST: "n2"}, annotations={"kubeflux.io/duration": "50"}))
    assert placed(cluster.run()) == ["n0", "n2"]
    gang(cluster, 2, 16, RACK)
    decisions = cluster.run(1.0)
    assert bound(decisions) == {}
    assert "requires one rack" in messages(decisions)["default/mpi-0"]
    job = scheduler.queue.jobs["default/mpi"]
    assert job.expected_start == 50  # r1 frees first: reserved there, not over n1 and n3 at once
    cluster.add(pod("filler", 16000, t=2, annotations={"kubeflux.io/duration": "200"}))
    assert bound(cluster.run(2.0)) == {"default/filler": "n1"}  # backfilled: r0's n1 is not reserved
    cluster.end("short")
    assert placed(cluster.run(50.0)) == ["n2", "n3"]


def test_small_members_share_the_nodes_of_the_one_rack_that_holds_them() -> None:
    cluster = Cluster(KubefluxScheduler(), racks(4, 4, 2))
    busy(cluster, "n0", "n1", "n2", "n4", "n5", "n6")  # r0 and r1 each have one free node: 8 slots of 4 cores
    gang(cluster, 8, 4, RACK)
    assert placed(cluster.run(1.0)) == ["n8"] * 4 + ["n9"] * 4


def test_a_required_gang_never_goes_to_nodes_without_the_levels_label() -> None:
    nodes = [*racks(2), node("bare0", 16, labels={HOST: "bare0"}), node("bare1", 16, labels={HOST: "bare1"})]
    cluster = Cluster(KubefluxScheduler(), nodes)
    busy(cluster, "n0")
    gang(cluster, 2, 16, RACK)
    assert bound(cluster.run(1.0)) == {}  # the unknown rack is no rack
    cluster.tell(MODIFIED, node("bare0", 16, labels={HOST: "bare0", RACK_LEVEL: "r0"}))
    assert sorted(bound(cluster.run(2.0)).values()) == ["bare0", "n1"]


def test_what_a_job_asks_is_found_once_and_found_again_when_its_pods_change() -> None:
    """Kept on the pending job (every pass asks it of every job), but a member that joins, changes or leaves is
    read: a group whose first member says nothing asks what a later one says."""
    from kubeflux.scheduler.confining import job_request
    from kubeflux.scheduler.queue import PendingJob
    from kubeflux.scheduler.topology import Request

    job = PendingJob("default/g", "default/g", 0.0, 0)
    job.put("uid-a", pod("a", 1000))
    assert job_request(job) is None and job.request_found
    job.put("uid-b", pod("b", 1000, annotations=RACK))
    assert job_request(job) == Request(RACK_LEVEL, True, KUEUE_REQUIRED)
    job.put("uid-a", pod("a", 1000, annotations={PREFERRED_ANNOTATION: ZONE_LEVEL}))  # the first member now says one
    assert job_request(job) == Request(ZONE_LEVEL, False, PREFERRED_ANNOTATION)
    job.drop("uid-a")
    job.drop("uid-b")
    assert job_request(job) is None


def test_a_rack_named_alike_in_a_known_and_an_unknown_zone_is_two_racks_and_a_gang_keeps_to_one() -> None:
    # n0, n1: zone b, rack r0; n2-n4: rack r0 with no zone label: racks /b/r0 (2 nodes) and /_unknown/r0 (3)
    nodes = [node(f"n{i}", 16, labels={HOST: f"n{i}", RACK_LEVEL: "r0", ZONE_LEVEL: "b"}) for i in (0, 1)]
    nodes += [node(f"n{i}", 16, labels={HOST: f"n{i}", RACK_LEVEL: "r0"}) for i in (2, 3, 4)]
    cluster = Cluster(KubefluxScheduler(), nodes)
    cluster.run()
    gang(cluster, 3, 16, RACK)
    assert placed(cluster.run(1.0)) == ["n2", "n3", "n4"]  # not n0, n1 and n2: the two r0 racks


def test_nodes_with_an_empty_zone_and_without_one_share_the_unknown_zone_and_a_gang_uses_its_rack() -> None:
    # an empty value (valid in Kubernetes) names no domain: n0-n2 are all in rack r0 of the unknown zone
    nodes = [node(f"n{i}", 16, labels={HOST: f"n{i}", RACK_LEVEL: "r0", ZONE_LEVEL: ""}) for i in (0, 1)]
    nodes += [node("n2", 16, labels={HOST: "n2", RACK_LEVEL: "r0"})]
    nodes += [node("n3", 16, labels={HOST: "n3", RACK_LEVEL: "r1", ZONE_LEVEL: "a"})]
    cluster = Cluster(KubefluxScheduler(), nodes)
    cluster.run()
    gang(cluster, 3, 16, RACK)
    assert placed(cluster.run(1.0)) == ["n0", "n1", "n2"]


GI = 2**30


def big_memory_racks(*racks_of: tuple[int, ...]) -> list[Node]:
    """Racks ``r0``, ``r1`` … of 16-core nodes ``n0``, ``n1`` … with the given GiB of memory each."""
    nodes: list[Node] = []
    for rack, memories in enumerate(racks_of):
        for memory in memories:
            name = f"n{len(nodes)}"
            labels = {HOST: name, RACK_LEVEL: f"r{rack}"}
            nodes.append(Node(name, uid=name, allocatable={CPU: 16000, MEMORY: memory * GI}, labels=labels))
    return nodes


def members(cluster: Cluster, annotations: dict[str, str], *shapes: tuple[int, int]) -> None:
    """A pod group ``mpi`` of one member per (cores, GiB) in ``shapes``, all needed at once."""
    cluster.tell(ADDED, PodGroup("default", "mpi", min_member=len(shapes)))
    labels = {POD_GROUP_LABEL: "mpi"}
    cluster.add(
        *[
            Pod(
                "default",
                f"mpi-{i}",
                f"uid-mpi-{i}",
                "kubeflux",
                creation_time=1,
                labels=labels,
                annotations=annotations,
                requests={CPU: cores * 1000, MEMORY: memory * GI},
            )
            for i, (cores, memory) in enumerate(shapes)
        ]
    )


@pytest.mark.parametrize("annotation", [KUEUE_REQUIRED, KUEUE_PREFERRED])
def test_members_sharing_nodes_go_to_the_rack_whose_memory_holds_them_not_the_one_whose_cores_do(
    annotation: str,
) -> None:
    # r0: one 64 GiB node (4 members by cores, 2 by memory); r1: two (2 members each by memory)
    cluster = Cluster(KubefluxScheduler(), big_memory_racks((64,), (64, 64)))
    members(cluster, {annotation: RACK_LEVEL}, *[(4, 24)] * 4)
    assert placed(cluster.run(1.0)) == ["n1", "n1", "n2", "n2"]


@pytest.mark.parametrize("annotation", [KUEUE_REQUIRED, KUEUE_PREFERRED])
def test_a_rack_the_gang_does_not_fit_after_all_is_left_for_the_next_one(annotation: str) -> None:
    # the engine picks a rack by the largest member's cores (r0, the lowest); its 48 GiB member fits only r1's nodes
    cluster = Cluster(KubefluxScheduler(), big_memory_racks((32, 32), (64, 64)))
    members(cluster, {annotation: RACK_LEVEL}, (8, 8), (4, 48))
    where = placed(cluster.run(1.0))
    assert len(where) == 2 and set(where) <= {"n2", "n3"}


def launcher_and_workers(cluster: Cluster, workers: int, annotations: dict[str, str]) -> None:
    """An MPI job: a 1-core launcher and ``workers`` 15-core workers, one pod group needing them all."""
    cluster.tell(ADDED, PodGroup("default", "mpi", min_member=1 + workers))
    labels = {POD_GROUP_LABEL: "mpi"}
    cluster.add(pod("mpi-launcher", 1000, t=1, labels=labels, annotations=annotations))
    cluster.add(*[pod(f"mpi-worker-{i}", 15000, t=1, labels=labels, annotations=annotations) for i in range(workers)])


@pytest.mark.parametrize("annotation", [KUEUE_REQUIRED, KUEUE_PREFERRED])
def test_a_launcher_and_two_workers_requiring_a_rack_of_two_nodes_start_in_it(annotation: str) -> None:
    cluster = Cluster(KubefluxScheduler(), racks(2, 2))
    launcher_and_workers(cluster, 2, {annotation: RACK_LEVEL})
    assert placed(cluster.run(1.0)) == ["n0", "n0", "n1"]  # the launcher beside a worker


def test_a_launcher_and_three_workers_no_rack_can_hold_are_rejected_naming_their_sizes() -> None:
    cluster = Cluster(KubefluxScheduler(), racks(2, 2))
    launcher_and_workers(cluster, 3, RACK)
    rejected = [d for d in cluster.run(1.0) if isinstance(d, Reject)]
    assert len(rejected) == 4
    assert rejected[0].message == (
        f"the pod group requires one rack ({RACK_LEVEL}) but no rack can ever hold its 4 pods of 1 to 15 cores and 0 "
        "gpus (46 cores and 0 gpus between them; the most one has: 32 and 0)"
    )


@pytest.mark.parametrize("annotations", [{}, {KUEUE_PREFERRED: RACK_LEVEL}])
def test_a_preferred_gang_is_reserved_no_later_than_asking_nothing_and_no_filler_takes_its_node(
    annotations: dict[str, str],
) -> None:
    # racks {n0, n1}, {n2, n3}, {n4}: n0 busy until 100, n1-n3 until 1000, n4 free. Across racks the gang can start
    # at 100 (n0 and n4); within one rack only at 1000: preferred must not wait for the rack
    scheduler = KubefluxScheduler(backfill=Backfill.EASY)
    nodes = [node(f"n{i}", 16, labels={HOST: f"n{i}", RACK_LEVEL: f"r{i // 2}"}) for i in range(5)]
    cluster = Cluster(scheduler, nodes)
    for name, ends in (("n0", 100), ("n1", 1000), ("n2", 1000), ("n3", 1000)):
        planned = {"kubeflux.io/duration": str(ends)}
        cluster.add(pod(f"busy-{name}", 16000, node_selector={HOST: name}, annotations=planned))
    cluster.run(0.0)
    gang(cluster, 2, 16, annotations, name="p")
    cluster.run(1.0)
    assert scheduler.queue.jobs["default/p"].expected_start == 100
    cluster.add(pod("filler", 16000, t=2, annotations={"kubeflux.io/duration": "500"}))
    assert bound(cluster.run(2.0)) == {}  # 500 s on n4 would delay the gang
    cluster.end("busy-n0")
    assert placed(cluster.run(100.0)) == ["n0", "n4"]
