"""Gangs kept in one zone whose members each have a ResourceClaim: the zone they wait for (their reservation, which
backfill keeps free) and whether any zone can ever hold them count the devices, not only the cores."""

from __future__ import annotations

import dataclasses
import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kubeflux.apiobjects.resourceclaims import claim_from_manifest, device_class_from_manifest, slice_from_manifest
from kubeflux.scheduler.core import Backfill, KubefluxScheduler
from kubeflux.scheduler.interface import Reject
from kubeflux.scheduler.objects import CPU, PodGroup, ResourceClaimRef
from kubeflux.scheduler.testing import ADDED, Cluster, bound, messages, node, pod
from kubeflux.scheduler.topology import ZONE_LEVEL
from tests.dra import claim, gpu_class
from tests.dra import gpu_slice as gpus
from tests.scheduler._devices import POOL, ranked
from tests.scheduler._racks import HOST

ASKS = ["pod affinity", "required zone"]


def zoned(*nodes: tuple[str, str, int, int]) -> Cluster:
    """A cluster of the nodes (name, zone, cores, GPUs) with EASY backfill (each node's :data:`POOL` its zone)."""
    cluster = Cluster(
        KubefluxScheduler(backfill=Backfill.EASY),
        [node(name, cores, labels={ZONE_LEVEL: zone, POOL: zone, HOST: name}) for name, zone, cores, _ in nodes],
    )
    cluster.tell(ADDED, device_class_from_manifest(gpu_class()))
    for name, _, _, count in nodes:
        if count:
            cluster.tell(ADDED, slice_from_manifest(gpus(name, count)))
    return cluster


def gang(cluster: Cluster, asks: str, size: int, name: str = "mpi", t: float = 1.0) -> None:
    """A pod group of ``size`` members of 1 core, each with its own claim of 1 GPU, kept in one zone."""
    cluster.tell(ADDED, PodGroup("default", name, min_member=size))
    for i in range(size):
        cluster.tell(ADDED, claim_from_manifest(claim(f"{name}-{i}", 1)))
    cluster.add(*(ranked(f"{name}-{i}", f"{name}-{i}", asks, group=name, t=t) for i in range(size)))


@pytest.mark.parametrize("asks", ASKS)
def test_a_waiting_gang_is_reserved_in_the_zone_whose_gpus_can_hold_it_and_no_filler_takes_it(asks: str) -> None:
    """Zone a's one node has 32 cores and 2 GPUs; zone b's two nodes 4 cores and 2 GPUs each, all four held until
    100 by two pods. A gang of 4 members of 1 core and 1 GPU each can start only in zone b, at 100. Its reservation
    was made by cores alone, on zone a's roomy node: a filler of 3 cores for 500 s then backfilled into zone b and
    the gang started only at 502."""
    cluster = zoned(("n0", "a", 32, 2), ("n1", "b", 4, 2), ("n2", "b", 4, 2))
    for name in ("n1", "n2"):
        cluster.tell(ADDED, claim_from_manifest(claim(f"busy-{name}", 2)))
        planned = {"kubeflux.io/duration": "100"}
        gpus_of = (ResourceClaimRef("gpus", f"busy-{name}"),)
        cluster.add(pod(f"busy-{name}", 1000, node_selector={HOST: name}, annotations=planned, resource_claims=gpus_of))
    assert sorted(bound(cluster.run(0.0)).values()) == ["n1", "n2"]
    gang(cluster, asks, 4)
    assert bound(cluster.run(1.0)) == {}
    job = cluster.scheduler.queue.jobs["default/mpi"]
    assert job.expected_start == 100
    assert {hold.node for hold in job.holds} == {"n1", "n2"}  # zone b: zone a never has a GPU for each
    filler = pod("filler", 3000, t=2, node_selector={ZONE_LEVEL: "b"}, annotations={"kubeflux.io/duration": "500"})
    cluster.add(filler)
    assert bound(cluster.run(2.0)) == {}  # 500 s in zone b would delay the gang
    cluster.end("busy-n1")
    cluster.end("busy-n2")
    for name in ("n1", "n2"):  # the claim controller deallocates a claim no pod uses any more
        cluster.tell(ADDED, claim_from_manifest(claim(f"busy-{name}", 2)))
    assert sorted(bound(cluster.run(100.0)).values())[:4] == ["n1", "n1", "n2", "n2"]


@pytest.mark.parametrize("asks", ASKS)
def test_a_gang_no_zone_has_gpus_for_even_empty_is_rejected_saying_so(asks: str) -> None:
    """Two zones of 2 GPUs each (one of them on a 32-core node that has cores for all) and a gang of 4 members of 1
    GPU each kept in one zone: it can never start. It waited forever; it is rejected, naming the GPUs."""
    cluster = zoned(("n0", "a", 32, 2), ("n1", "b", 4, 1), ("n2", "b", 4, 1))
    gang(cluster, asks, 4)
    decisions = cluster.run(1.0)
    assert bound(decisions) == {}
    rejected = [d for d in decisions if isinstance(d, Reject)]
    assert len(rejected) == 4
    assert rejected[0].message == (
        f"the pod group requires one zone ({ZONE_LEVEL}) but no zone can ever hold its 4 pods of 1 cores and 0 gpus "
        "(4 devices between them for their claims; the most one has: 2)"
    )


@pytest.mark.parametrize("asks", ASKS)
def test_a_gang_whose_gpus_one_zone_has_when_empty_waits_and_starts_there(asks: str) -> None:
    """Zone b has GPUs for every member, all taken now: the gang waits (not rejected) and starts there once free."""
    cluster = zoned(("n0", "a", 32, 2), ("n1", "b", 4, 2), ("n2", "b", 4, 2))
    for name in ("n1", "n2"):
        cluster.tell(ADDED, claim_from_manifest(claim(f"busy-{name}", 2)))
        gpus_of = (ResourceClaimRef("gpus", f"busy-{name}"),)
        cluster.add(pod(f"busy-{name}", 1000, node_selector={HOST: name}, resource_claims=gpus_of))
    assert len(bound(cluster.run(0.0))) == 2
    gang(cluster, asks, 4)
    decisions = cluster.run(1.0)
    assert bound(decisions) == {}
    assert not [d for d in decisions if isinstance(d, Reject)], messages(decisions)


# ---------------------------------------------------------------------- against a brute force


def _holds(free: list[tuple[int, int]], members: list[tuple[int, int]]) -> bool:
    """Whether members of (cores, GPUs) fit the nodes' free (cores, GPUs) (every assignment tried)."""
    return any(
        all(
            sum(m[0] for m, at in zip(members, choice, strict=True) if at == node) <= room[0]
            and sum(m[1] for m, at in zip(members, choice, strict=True) if at == node) <= room[1]
            for node, room in enumerate(free)
        )
        for choice in itertools.product(range(len(free)), repeat=len(members))
    )


_NODE = st.tuples(st.sampled_from([2, 4]), st.integers(0, 3), st.integers(0, 4), st.integers(0, 3))
"""A node: cores, GPUs, and the cores and GPUs a running pod takes of them (cut to what it has)."""


@settings(max_examples=50, deadline=None)
@given(
    st.lists(st.lists(_NODE, min_size=1, max_size=2), min_size=1, max_size=3),
    st.lists(st.tuples(st.integers(1, 2), st.integers(0, 2)), min_size=2, max_size=4),
    st.sampled_from([*ASKS, "pool affinity"]),
)
def test_a_zone_gang_with_gpu_claims_starts_exactly_when_a_zone_holds_it_and_is_rejected_when_none_ever_could(
    layout: list[list[tuple[int, int, int, int]]], members: list[tuple[int, int]], asks: str
) -> None:
    nodes = [
        (f"n{zone}{i}", f"z{zone}", cores, gpus)
        for zone, row in enumerate(layout)
        for i, (cores, gpus, _, _) in enumerate(row)
    ]
    cluster = zoned(*nodes)
    taken = {
        f"n{zone}{i}": (min(used, cores), min(held, gpus))
        for zone, row in enumerate(layout)
        for i, (cores, gpus, used, held) in enumerate(row)
    }
    for name, (used, held) in taken.items():
        if used or held:
            claims: tuple[ResourceClaimRef, ...] = ()
            if held:
                cluster.tell(ADDED, claim_from_manifest(claim(f"busy-{name}", held)))
                claims = (ResourceClaimRef("gpus", f"busy-{name}"),)
            cluster.add(pod(f"busy-{name}", used * 1000, node_selector={HOST: name}, resource_claims=claims))
    cluster.run(0.0)
    cluster.tell(ADDED, PodGroup("default", "mpi", min_member=len(members)))
    for i, (_, count) in enumerate(members):
        if count:
            cluster.tell(ADDED, claim_from_manifest(claim(f"mpi-{i}", count)))
    made = [ranked(f"mpi-{i}", f"mpi-{i}", asks) for i in range(len(members))]
    sized = [
        dataclasses.replace(
            item,
            requests={**item.requests, CPU: cores * 1000},
            resource_claims=item.resource_claims if count else (),
        )
        for item, (cores, count) in zip(made, members, strict=True)
    ]
    cluster.add(*sized)
    decisions = cluster.run(1.0)
    placed = {key: at for key, at in bound(decisions).items() if key.startswith("default/mpi-")}
    zones = [[name for name, zone, _, _ in nodes if zone == f"z{k}"] for k in range(len(layout))]
    spec = {name: (cores, gpus) for name, _, cores, gpus in nodes}
    room = any(
        _holds([(spec[n][0] - taken[n][0], spec[n][1] - taken[n][1]) for n in names], members) for names in zones
    )
    ever = any(_holds([spec[n] for n in names], members) for names in zones)
    assert bool(placed) == room, (placed, messages(decisions))
    if placed:
        assert len(placed) == len(members) and len({at[:2] for at in placed.values()}) == 1
    assert any(isinstance(d, Reject) for d in decisions) == (not ever), messages(decisions)
