"""Gangs through ``kubeflux serve`` on the real control plane, in both APIs: coscheduling's PodGroup
(``scheduling.x-k8s.io/v1alpha1``, its CRD from scheduler-plugins) and Kubernetes' own (``scheduling.k8s.io/v1alpha2``
with the ``GenericWorkload`` gate).

A gang is bound whole or not at all, and seed 004's PodGroup case (pairs of pods that each need a whole node, arriving
faster than they run) finishes every gang: on the real API server, the pods' own writes came back on the watch while
their Bindings were in flight, serve queued them again, re-bound bound pods (409) and stalled with every gang pending
on an empty cluster. Every watch event is checked (:class:`~tests.realkube.watching.PodWatch`).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kubeflux.controlplane import Binaries, ControlPlane
from tests.realkube._serving import member, nodes, pod, podgroup, serve, waiting

from .conftest import Api, eventually, phase, running_plane
from .watching import PodWatch


@pytest.fixture
def plane(binaries: Binaries, tmp_path: Path) -> Iterator[ControlPlane]:
    """The control plane with Kubernetes' own gang API on and coscheduling's PodGroup CRD installed."""
    with running_plane(
        binaries,
        tmp_path / "plane",
        crds=True,
        feature_gates={"GenericWorkload": True, "GangScheduling": True},
        runtime_config={"scheduling.k8s.io/v1alpha2": "true"},
    ) as started:
        yield started


def group_spec(api_version: str, size: int) -> dict[str, Any]:
    if api_version.startswith("scheduling.x-k8s.io"):
        return {"minMember": size}
    return {"schedulingPolicy": {"gang": {"minCount": size}}}


APIS = ["scheduling.x-k8s.io/v1alpha1", "scheduling.k8s.io/v1alpha2"]


@pytest.mark.parametrize("api_version", APIS, ids=["coscheduling", "native"])
def test_a_gang_is_bound_whole_and_one_too_big_for_what_is_free_waits_whole(
    plane: ControlPlane, api: Api, api_version: str
) -> None:
    """Two 16-core nodes. ``a`` (4 × 8 cores) fills them and runs whole; ``b`` (2 × 8) arrives next and no member of
    it is bound while ``a`` runs; when ``a`` ends, ``b`` runs whole."""
    capacity = nodes(plane, api, 2, 16)
    podgroup(api, api_version, "a", group_spec(api_version, 4))
    podgroup(api, api_version, "b", group_spec(api_version, 2))
    with serve(plane) as scheduler, PodWatch(api.client, "default", capacity, lambda: scheduler.binder.refused) as w:
        for index in range(3):  # a is short of a member: nothing of it is bound
            api.create_pod("default", member(f"a-{index}", "a", api_version, "8", run="4s"))
        api.create_pod("default", member("b-0", "b", api_version, "8"))
        eventually(lambda: all("FailedScheduling" in reasons for reasons in _reasons(api, "a-0", "b-0")))
        assert not any(p["spec"].get("nodeName") for p in api.pods("default").values())
        api.create_pod("default", member("a-3", "a", api_version, "8", run="4s"))
        api.create_pod("default", member("b-1", "b", api_version, "8"))
        eventually(lambda: all(api.pods("default")[f"a-{i}"]["spec"].get("nodeName") for i in range(4)))
        assert not any(api.pods("default")[f"b-{i}"]["spec"].get("nodeName") for i in range(2))
        eventually(lambda: all(phase(api.pods("default")[f"b-{i}"]) == "Running" for i in range(2)))
        assert all(phase(api.pods("default")[f"a-{i}"]) == "Succeeded" for i in range(4))
        w.check()


def _reasons(api: Api, *names: str) -> list[set[str]]:
    events = api.events("default")
    return [{e.get("reason", "") for e in events if e["regarding"].get("name") == name} for name in names]


@pytest.mark.parametrize("api_version", APIS, ids=["coscheduling", "native"])
def test_seed_004s_pairs_arriving_faster_than_they_run_all_finish(
    plane: ControlPlane, api: Api, api_version: str
) -> None:
    """Seed 004's PodGroup case, shortened: eight pairs of pods that each take a whole 8-core node, on two nodes, one
    pair every second, each running 3 s. Every pair runs whole, none is refused a Binding, and serve holds nothing at
    the end (it finished 8 of 50 on the real API server before)."""
    capacity = nodes(plane, api, 2, 8)
    pairs = [f"pg-{index:02d}" for index in range(8)]
    with serve(plane) as scheduler, PodWatch(api.client, "default", capacity, lambda: scheduler.binder.refused) as w:
        for name in pairs:
            podgroup(api, api_version, name, group_spec(api_version, 2))
            for index in range(2):
                api.create_pod("default", member(f"{name}-{index}", name, api_version, "8", run="3s"))
            time.sleep(1.0)  # the arrivals' pace, not a wait for anything
        eventually(
            lambda: (
                len(api.pods("default")) == 16 and all(phase(p) == "Succeeded" for p in api.pods("default").values())
            ),
            lambda: str({n: phase(p) for n, p in api.pods("default").items()}),
        )
        eventually(lambda: not any(core.books.allocations for core in scheduler.cores), lambda: "allocations released")
        w.check()
        assert scheduler.bound == 16


def _rank(name: str, group: str, cpu: str, job: str, *, apart: bool = True) -> dict[str, Any]:
    """A member of ``group`` labelled ``job``; ``apart``: required anti-affinity to its job's pods by node."""
    made = member(name, group, APIS[0], cpu)
    made["metadata"]["labels"]["job"] = job
    if apart:
        term = {"labelSelector": {"matchLabels": {"job": job}}, "topologyKey": "kubernetes.io/hostname"}
        made["spec"]["affinity"] = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}
    return made


def test_an_mpi_job_with_one_rank_per_node_by_anti_affinity_is_placed_as_a_whole_gang(
    plane: ControlPlane, api: Api
) -> None:
    """Issue 34's scenario on the real control plane: four 4-core nodes, one holding a 3-core pod of kube-scheduler's.
    Four ranks of 2 cores that keep apart by node wait whole (three nodes could take three of them); when that pod
    ends they are bound at once, one per node. Then a launcher without the rule and three workers with it: the
    workers on three nodes, the launcher wherever 1 core is free."""
    names = sorted(nodes(plane, api, 4, 4))
    blocker = pod("blocker", "3", scheduler="default-scheduler")
    blocker["spec"]["nodeName"] = names[0]
    api.create_pod("default", blocker)
    podgroup(api, APIS[0], "mpi", {"minMember": 4})
    podgroup(api, APIS[0], "mpi2", {"minMember": 4})
    with serve(plane):
        for index in range(4):
            api.create_pod("default", _rank(f"mpi-{index}", "mpi", "2", "mpi"))
        eventually(lambda: waiting(api, "mpi-0"))
        assert not any(api.pods("default")[f"mpi-{index}"]["spec"].get("nodeName") for index in range(4))
        api.core.delete_namespaced_pod("blocker", "default", grace_period_seconds=0)
        eventually(lambda: all(api.pods("default")[f"mpi-{index}"]["spec"].get("nodeName") for index in range(4)))
        assert len({api.pods("default")[f"mpi-{index}"]["spec"]["nodeName"] for index in range(4)}) == 4
        api.create_pod("default", _rank("mpi2-launcher", "mpi2", "1", "mpi2", apart=False))
        for index in range(3):
            api.create_pod("default", _rank(f"mpi2-w{index}", "mpi2", "2", "mpi2w"))
        second = [f"mpi2-w{index}" for index in range(3)] + ["mpi2-launcher"]
        eventually(lambda: all(api.pods("default")[name]["spec"].get("nodeName") for name in second))
        assert len({api.pods("default")[name]["spec"]["nodeName"] for name in second[:3]}) == 3
