"""Topology through ``kubeflux serve`` on the real control plane: KWOK nodes labelled with racks, and a gang that
requires one rack (Kueue's annotation) is bound inside one rack, the one with room, not across two racks that have
more free cores between them."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from kubeflux.controlplane import Binaries, ControlPlane
from kubeflux.scheduler.confining import KUEUE_REQUIRED
from kubeflux.scheduler.topology import RACK_LEVEL
from tests.realkube._serving import member, podgroup, serve

from .conftest import Api, eventually, phase, running_plane, schedulable
from .watching import PodWatch

V1ALPHA1 = "scheduling.x-k8s.io/v1alpha1"


@pytest.fixture
def plane(binaries: Binaries, tmp_path: Path) -> Iterator[ControlPlane]:
    """The control plane with coscheduling's PodGroup CRD installed."""
    with running_plane(binaries, tmp_path / "plane", crds=True) as started:
        yield started


def racks(plane: ControlPlane, api: Api, sizes: dict[str, int]) -> dict[str, int]:
    """KWOK nodes of 16 cores, ``sizes[rack]`` of them labelled with each rack (named ``<rack>-node-<i>``)."""
    capacity: dict[str, int] = {}
    for rack, count in sizes.items():
        names = plane.add_kwok_nodes(count, cpu="16", prefix=f"{rack}-node-", labels={RACK_LEVEL: rack})
        capacity.update((name, 16_000) for name in names)
    eventually(lambda: len(api.nodes()) == len(capacity) and all(schedulable(n) for n in api.nodes().values()))
    return capacity


def test_a_gang_requiring_one_rack_is_bound_inside_the_rack_with_room(plane: ControlPlane, api: Api) -> None:
    """Rack ``a`` has 3 nodes, rack ``b`` 4, one of ``a``'s busy: the 4 × 16-core gang that requires one rack goes to
    ``b`` whole; a second such gang, while it runs, waits (no rack has 4 free nodes) until the first
    ends, then runs in ``b`` too."""
    capacity = racks(plane, api, {"a": 3, "b": 4})
    podgroup(api, V1ALPHA1, "filler", {"minMember": 1})
    podgroup(api, V1ALPHA1, "mpi", {"minMember": 4})
    podgroup(api, V1ALPHA1, "next", {"minMember": 4})

    def rank(name: str, group: str, run: str) -> dict[str, object]:
        made = member(name, group, V1ALPHA1, "16", run=run)
        made["metadata"]["annotations"][KUEUE_REQUIRED] = RACK_LEVEL
        return made

    with serve(plane) as scheduler, PodWatch(api.client, "default", capacity, lambda: scheduler.binder.refused) as w:
        api.create_pod("default", member("filler", "filler", V1ALPHA1, "16", run="60s"))
        eventually(lambda: api.pods("default")["filler"]["spec"].get("nodeName"))
        for index in range(4):
            api.create_pod("default", rank(f"mpi-{index}", "mpi", "4s"))
        eventually(lambda: all(api.pods("default")[f"mpi-{i}"]["spec"].get("nodeName") for i in range(4)))
        bound = {api.pods("default")[f"mpi-{i}"]["spec"]["nodeName"] for i in range(4)}
        assert bound == {f"b-node-{i}" for i in range(4)}
        for index in range(4):
            api.create_pod("default", rank(f"next-{index}", "next", "2s"))
        eventually(lambda: all(phase(api.pods("default")[f"next-{i}"]) == "Succeeded" for i in range(4)))
        pods = api.pods("default")
        assert {pods[f"next-{i}"]["spec"]["nodeName"] for i in range(4)} == {f"b-node-{i}" for i in range(4)}
        assert all(phase(pods[f"mpi-{i}"]) == "Succeeded" for i in range(4))
        w.check()
