"""Jobs kept in one topology domain whose members differ, take no whole core, preempt, or ask what the graph lacks
(the second review of issue 32: members of different sizes, no-core pods, preemption in one rack, domains tried in
turn, a preferred reservation, memory that no rack holds, hostname and typos)."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kubeflux.scheduler.confining import DOMAIN_TRIES, KUEUE_PREFERRED, KUEUE_REQUIRED
from kubeflux.scheduler.core import Backfill, KubefluxScheduler
from kubeflux.scheduler.interface import Reject
from kubeflux.scheduler.messages import Evict
from kubeflux.scheduler.objects import CPU, MEMORY, POD_GROUP_LABEL, Node, Pod, PodGroup
from kubeflux.scheduler.testing import ADDED, Cluster, bound, messages, node, pod
from kubeflux.scheduler.topology import RACK_LEVEL
from tests.scheduler._racks import HOST, racks

GI = 2**30
RACK = {KUEUE_REQUIRED: RACK_LEVEL}
PREFER = {KUEUE_PREFERRED: RACK_LEVEL}


def busy(cluster: Cluster, name: str, cores: int = 16, **kwargs: object) -> None:
    cluster.add(pod(f"busy-{name}", cores * 1000, node_selector={HOST: name}, **kwargs))


def group(
    cluster: Cluster,
    name: str,
    cores: list[float],
    annotations: dict[str, str],
    minimum: int | None = None,
    **kwargs: object,
) -> None:
    cluster.tell(ADDED, PodGroup("default", name, min_member=len(cores) if minimum is None else minimum))
    labels = {POD_GROUP_LABEL: name}
    cluster.add(
        *[
            pod(f"{name}-{i}", int(c * 1000), t=1, labels=labels, annotations=annotations, **kwargs)
            for i, c in enumerate(cores)
        ]
    )


def memory_racks(count: int) -> list[Node]:
    """``count`` racks of two 16-core nodes, of 32 GiB but the last (64 GiB)."""
    nodes = []
    for rack in range(count):
        memory = 64 if rack == count - 1 else 32
        for _ in range(2):
            name = f"n{len(nodes)}"
            labels = {HOST: name, RACK_LEVEL: f"r{rack}"}
            nodes.append(Node(name, uid=name, allocatable={CPU: 16000, MEMORY: memory * GI}, labels=labels))
    return nodes


def sized_group(cluster: Cluster, name: str, sizes: list[tuple[float, int]], annotations: dict[str, str]) -> None:
    """A pod group of members of ``sizes`` (cores, GiB of memory)."""
    cluster.tell(ADDED, PodGroup("default", name, min_member=len(sizes)))
    for i, (cores, memory) in enumerate(sizes):
        cluster.add(
            Pod(
                "default",
                f"{name}-{i}",
                f"uid-{name}-{i}",
                "kubeflux",
                creation_time=1,
                labels={POD_GROUP_LABEL: name},
                annotations=annotations,
                requests={CPU: int(cores * 1000), MEMORY: memory * GI},
            )
        )


def where(decisions: list[object]) -> dict[str, str]:
    return {key.split("/")[1]: node for key, node in bound(decisions).items()}  # type: ignore[union-attr]


@pytest.mark.parametrize("annotations", [RACK, PREFER])
def test_an_mpi_launcher_takes_the_rack_node_too_full_for_a_worker_and_the_job_starts_in_that_rack(
    annotations: dict[str, str],
) -> None:
    # r0 = {n0, n1, n2}: n2 runs 12 cores (4 free), so only the 1-core launcher fits there; r1 = {n3} alone
    cluster = Cluster(KubefluxScheduler(), racks(3, 1))
    busy(cluster, "n2", 12)
    cluster.run(0.0)
    group(cluster, "mpi", [1, 16, 16], annotations)
    assert where(cluster.run(1.0)) == {"mpi-0": "n2", "mpi-1": "n0", "mpi-2": "n1"}


def test_a_gangs_minimum_starts_in_its_rack_while_a_member_beyond_it_fits_nowhere_yet() -> None:
    cluster = Cluster(KubefluxScheduler(), racks(2, 2))
    for name in ("n0", "n1", "n2", "n3"):
        busy(cluster, name, 8)
    cluster.run(0.0)
    group(cluster, "g", [4, 4, 16], RACK, minimum=2)  # 2 of 3: the 16-core rank waits for room
    assert where(cluster.run(1.0)) == {"g-0": "n0", "g-1": "n0"}


def test_members_of_5_4_3_and_3_cores_start_in_the_rack_whose_7_and_8_free_cores_hold_them_exactly() -> None:
    cluster = Cluster(KubefluxScheduler(), racks(2, 2))
    busy(cluster, "n0", 9)
    busy(cluster, "n1", 8)
    busy(cluster, "n2")
    busy(cluster, "n3")
    cluster.run(0.0)
    group(cluster, "g", [5, 4, 3, 3], RACK)  # largest first packs 5 on n0 and fails; 4+3 | 5+3 fits
    placed = where(cluster.run(1.0))
    assert len(placed) == 4 and set(placed.values()) == {"n0", "n1"}


@pytest.mark.parametrize("requests", [{MEMORY: GI}, {CPU: 500}, {}], ids=["memory only", "500m", "nothing"])
@pytest.mark.parametrize("annotations", [RACK, PREFER])
def test_a_gang_whose_pods_take_no_whole_core_starts_in_one_rack(
    requests: dict[str, int], annotations: dict[str, str]
) -> None:
    cluster = Cluster(KubefluxScheduler(), racks(2, 2))
    cluster.tell(ADDED, PodGroup("default", "g", min_member=2))
    for i in range(2):
        cluster.add(
            Pod(
                "default",
                f"g-{i}",
                f"uid-g-{i}",
                "kubeflux",
                creation_time=1,
                labels={POD_GROUP_LABEL: "g"},
                annotations=annotations,
                requests=dict(requests),
            )
        )
    placed = where(cluster.run(1.0))
    assert len(placed) == 2
    assert len({cluster.nodes[name].labels[RACK_LEVEL] for name in placed.values()}) == 1


def test_a_lone_pod_of_half_a_core_requiring_a_rack_starts() -> None:
    cluster = Cluster(KubefluxScheduler(), racks(2, 2))
    cluster.add(Pod("default", "lone", "uid-lone", "kubeflux", creation_time=1, annotations=RACK, requests={CPU: 500}))
    assert where(cluster.run(1.0)) == {"lone": "n0"}


def test_preempting_for_a_rack_gang_evicts_what_frees_one_rack_and_the_gang_starts_there() -> None:
    # r0 = {n0, n1}, r1 = {n2, n3}; low priority: a gang C on n1 and n3 (the oldest work), A on n0, B on n2
    cluster = Cluster(KubefluxScheduler(), racks(2, 2))
    cluster.tell(ADDED, PodGroup("default", "C", min_member=2))
    for i, name in enumerate(("n1", "n3")):
        cluster.add(pod(f"C-{i}", 16000, node_selector={HOST: name}, labels={POD_GROUP_LABEL: "C"}))
    cluster.run(0.0)
    busy(cluster, "n0", t=90)
    busy(cluster, "n2", t=90)
    cluster.run(90.0)
    group(cluster, "hi", [16, 16], RACK, priority=1000)
    decisions = cluster.run(100.0)
    evicted = sorted(d.pod for d in decisions if isinstance(d, Evict))
    # A and B (the least work) free n0 and n2: two racks, which starts nothing; one rack needs C gone too
    assert evicted in (
        ["default/C-0", "default/C-1", "default/busy-n0"],
        ["default/C-0", "default/C-1", "default/busy-n2"],
    )
    placed = where(cluster.run(101.0))
    assert len(placed) == 2 and len({cluster.nodes[n].labels[RACK_LEVEL] for n in placed.values()}) == 1


def test_a_rack_gang_with_one_free_node_in_each_rack_preempts_to_complete_one_rack() -> None:
    cluster = Cluster(KubefluxScheduler(), racks(2, 2))
    busy(cluster, "n0")
    busy(cluster, "n2")
    cluster.run(0.0)
    group(cluster, "hi", [16, 16], RACK, priority=1000)  # n1 and n3 are free: room enough, but in two racks
    evicted = [d.pod for d in cluster.run(100.0) if isinstance(d, Evict)]
    assert evicted == ["default/busy-n0"]
    assert where(cluster.run(101.0)) == {"hi-0": "n0", "hi-1": "n1"}


def test_the_only_rack_with_memory_for_a_member_is_found_after_more_racks_than_a_pass_tries() -> None:
    # 20 racks of two 32 GiB nodes, then one of two 64 GiB nodes; members (8 cores, 8 GiB) and (4 cores, 48 GiB):
    # every rack has the cores, only the last the memory
    nodes = memory_racks(DOMAIN_TRIES + 5)
    cluster = Cluster(KubefluxScheduler(), nodes)
    sized_group(cluster, "mpi", [(8, 8), (4, 48)], RACK)
    last = {f"n{2 * DOMAIN_TRIES + 8}", f"n{2 * DOMAIN_TRIES + 9}"}
    placed = where(cluster.run(1.0))
    assert len(placed) == 2 and set(placed.values()) <= last


@pytest.mark.parametrize("annotations", [PREFER, RACK])
def test_a_rack_gang_that_can_share_a_node_is_reserved_as_early_as_asking_nothing(annotations: dict[str, str]) -> None:
    # r0 = {n0, n1}, r1 = {n2, n3}: n0 has 8 cores busy until 100, n1 until 1000, r1 until 400. The gang of two
    # 8-core members starts at 100 on n0 (shared); on a node each, only at 400 in r1
    scheduler = KubefluxScheduler(backfill=Backfill.EASY)
    cluster = Cluster(scheduler, racks(2, 2))
    for name, cores, ends in (("n0", 8, 100), ("n1", 16, 1000), ("n2", 16, 400), ("n3", 16, 400)):
        busy(cluster, name, cores, annotations={"kubeflux.io/duration": str(ends)})
    cluster.run(0.0)
    group(cluster, "g", [8, 8], annotations)
    cluster.run(1.0)
    assert scheduler.queue.jobs["default/g"].expected_start == 100
    cluster.add(pod("filler", 8000, t=2, annotations={"kubeflux.io/duration": "500"}))
    assert bound(cluster.run(2.0)) == {}  # the filler would take n0's 8 cores the gang is reserved
    cluster.end("busy-n0")
    assert where(cluster.run(100.0)) == {"g-0": "n0", "g-1": "n0"}


def test_a_rack_gang_no_rack_holds_for_memory_is_rejected_saying_so() -> None:
    nodes = [
        Node(
            f"n{i}", uid=f"n{i}", allocatable={CPU: 16000, MEMORY: 64 * GI}, labels={HOST: f"n{i}", RACK_LEVEL: f"r{i}"}
        )
        for i in range(3)
    ]
    cluster = Cluster(KubefluxScheduler(), nodes)
    sized_group(cluster, "mpi", [(4, 48), (4, 48)], RACK)  # no node of 64 GiB holds both; each rack is one node
    rejected = [d for d in cluster.run(1.0) if isinstance(d, Reject)]
    assert len(rejected) == 2
    assert rejected[0].message == (
        f"the pod group requires one rack ({RACK_LEVEL}) but no rack can ever hold its 2 pods of 4 cores and 0 gpus "
        "(none holds them in every resource they request: cpu, memory)"
    )


def test_requiring_the_hostname_level_is_refused_saying_what_to_ask_instead() -> None:
    cluster = Cluster(KubefluxScheduler(), racks(2, 2))
    group(cluster, "mpi", [4, 4], {KUEUE_REQUIRED: HOST})
    message = messages(cluster.run(1.0))["default/mpi-0"]
    assert f"'{HOST}' (the whole group on one node) is not supported as a required topology" in message
    assert "pod affinity among the members" in message


def test_a_preferred_level_the_cluster_lacks_is_logged_once_and_the_gang_starts_anywhere() -> None:
    scheduler = KubefluxScheduler()
    cluster = Cluster(scheduler, racks(2, 2))
    group(cluster, "mpi", [16, 16], {KUEUE_PREFERRED: "topology.kubeflux.io/rak"})
    assert len(where(cluster.run(1.0))) == 2
    said = [line for line in scheduler.log if "'topology.kubeflux.io/rak' is not a topology level" in line]
    assert len(said) == 1 and RACK_LEVEL in said[0]


# ---------------------------------------------------------------------- against a brute force


def _packs(free: list[int], sizes: list[int]) -> bool:
    """Whether members of ``sizes`` cores fit the nodes' ``free`` cores (every assignment tried)."""
    return any(
        all(sum(s for s, at in zip(sizes, choice, strict=True) if at == node) <= room for node, room in enumerate(free))
        for choice in itertools.product(range(len(free)), repeat=len(sizes))
    )


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.lists(st.tuples(st.sampled_from([4, 8, 16]), st.integers(0, 16)), min_size=1, max_size=3),
        min_size=1,
        max_size=4,
    ),
    st.lists(st.sampled_from([1, 2, 3, 4, 8, 12, 15, 16]), min_size=1, max_size=4),
)
def test_a_rack_gang_starts_in_one_rack_exactly_when_one_has_room_and_is_rejected_when_none_ever_could(
    layout: list[list[tuple[int, int]]], sizes: list[int]
) -> None:
    nodes, free, capacity, rack_of = [], {}, {}, {}
    for rack, members in enumerate(layout):
        for cores, used in members:
            name = f"n{len(nodes)}"
            nodes.append(node(name, cores, labels={RACK_LEVEL: f"r{rack}", HOST: name}))
            capacity[name], free[name], rack_of[name] = cores, cores - min(used, cores), rack
    cluster = Cluster(KubefluxScheduler(), nodes)
    for name in capacity:
        if capacity[name] > free[name]:
            busy(cluster, name, capacity[name] - free[name])
    cluster.run(0.0)
    group(cluster, "g", [float(s) for s in sizes], RACK)
    decisions = cluster.run(1.0)
    placed = where(decisions)
    by_rack = [[name for name in capacity if rack_of[name] == rack] for rack in range(len(layout))]
    room = any(_packs([free[name] for name in names], sizes) for names in by_rack)
    ever = any(_packs([capacity[name] for name in names], sizes) for names in by_rack)
    assert bool(placed) == room, (placed, messages(decisions))
    if placed:
        assert len(placed) == len(sizes) and len({rack_of[name] for name in placed.values()}) == 1
    assert any(isinstance(d, Reject) for d in decisions) == (not ever)


def test_a_rack_gang_is_reserved_in_the_only_rack_with_its_memory_within_a_few_passes() -> None:
    # as above, every node busy until 100: the engine reserves by cores, so its picks are wrong until the last
    # rack; the racks tried are carried from pass to pass, and the last one is reached
    scheduler = KubefluxScheduler(backfill=Backfill.EASY)
    nodes = memory_racks(2 * DOMAIN_TRIES + 1)
    cluster = Cluster(scheduler, [*nodes, node("spare", 16, labels={HOST: "spare"})])
    for item in nodes:
        busy(cluster, item.name, annotations={"kubeflux.io/duration": "100"})
    cluster.run(0.0)
    sized_group(cluster, "mpi", [(8, 8), (4, 48)], RACK)
    job = scheduler.queue.jobs["default/mpi"]
    for t in range(1, 5):  # a pass a second: a short pod on a node of no rack ends each second
        cluster.run(float(t))
        if job.expected_start is not None:
            break
        cluster.add(pod(f"tick-{t}", 1000, t=t, node_selector={HOST: "spare"}))
        cluster.run(t + 0.5)
        cluster.end(f"tick-{t}")
    assert job.expected_start is not None and 100 <= job.expected_start <= 101  # when the busy pods end
    for item in nodes:
        cluster.end(f"busy-{item.name}")
    placed = where(cluster.run(101.0))
    assert set(placed.values()) <= {f"n{4 * DOMAIN_TRIES}", f"n{4 * DOMAIN_TRIES + 1}"} and len(placed) == 2


def test_gangs_requiring_racks_of_one_node_they_share_are_reserved_in_turn() -> None:
    # racks of one 32-core node, each running 24 cores until 100 + i: each gang of 2 x 16 cores fits one node once
    # its pod ends (on a node each it fits no rack)
    scheduler = KubefluxScheduler(backfill=Backfill.CONSERVATIVE)
    cluster = Cluster(scheduler, [node(f"n{i}", 32, labels={HOST: f"n{i}", RACK_LEVEL: f"r{i}"}) for i in range(6)])
    for i in range(6):
        busy(cluster, f"n{i}", 24, annotations={"kubeflux.io/duration": str(100 + i)})
    cluster.run(0.0)
    for k in range(3):
        group(cluster, f"w{k}", [16, 16], RACK)
    cluster.run(2.0)
    assert [scheduler.queue.jobs[f"default/w{k}"].expected_start for k in range(3)] == [100, 101, 102]
