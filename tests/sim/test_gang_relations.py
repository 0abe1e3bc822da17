"""Gangs whose members constrain each other, as manifests run through the real simulator: ranks spread over zones by
a topology spread among them, ranks kept to one zone by pod affinity among them, placed whole and reserved whole.
Each placement is checked in the order the simulator bound the members (its ``Scheduled`` events) by the
independent checker of :mod:`tests.scheduler._relations`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from kubeflux.scheduler.core import KubefluxScheduler
from kubeflux.scheduler.topology import RACK_LEVEL, ZONE_LEVEL
from kubeflux.sim.driver import Simulation
from tests.scheduler._relations import affinity, check_bind_order, spread
from tests.sim._gangs import group_yaml, simulation


def zoned_nodes(*shapes: tuple[str, str, int], level: str = ZONE_LEVEL) -> str:
    """Nodes from (name, domain of ``level``, cpus)."""
    return "\n---\n".join(
        f"apiVersion: v1\nkind: Node\nmetadata: {{name: {name}, labels: {{kubernetes.io/hostname: {name}, "
        f"{level}: {zone}}}}}\nstatus: {{allocatable: {{cpu: '{cpu}', memory: 32Gi, pods: '110'}}}}"
        for name, zone, cpu in shapes
    )


def rank_yaml(name: str, cpu: int, run: int, spec: dict[str, Any], *, group: str = "mpi", app: str = "mpi") -> str:
    """A pod of pod group ``group`` labelled ``app``, with the constraints of ``spec`` (a pod spec's fields)."""
    labels = {"app": app} | ({"scheduling.x-k8s.io/pod-group": group} if group else {})
    doc = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "labels": labels,
            "annotations": {
                "sim.kubeflux.io/submit-time": "0",
                "pod-complete.stage.kwok.x-k8s.io/delay": f"{run}s",
                "kubeflux.io/duration": str(run),
            },
        },
        "spec": {
            **spec,
            "containers": [{"name": "main", "image": "busybox", "resources": {"requests": {"cpu": str(cpu)}}}],
        },
    }
    return json.dumps(doc)


def run(tmp_path: Path, nodes: str, *objects: str) -> Simulation:
    sim = simulation(tmp_path, nodes, list(objects), KubefluxScheduler(backfill="easy"))
    sim.run()
    return sim


def checked(
    sim: Simulation, shapes: tuple[tuple[str, str, int], ...], specs: dict[str, dict[str, Any]]
) -> dict[str, tuple[str, float | None]]:
    """Pod name → (node, start), the placements checked in the order the simulator bound the pods (``specs``: the
    constraints of the pods, by name; ``shapes``: the nodes)."""
    cluster = sim.cluster
    nodes = {name: cluster.node_state.node(name).labels for name, _, _ in shapes}
    pods = {sp.pod.key: sp.pod for sp in cluster.pods.values()}
    order = [
        (event.object, event.message.rsplit(" to ", 1)[1])
        for event in cluster.kube_events
        if event.reason == "Scheduled"
    ]
    check_bind_order(
        nodes,
        {key: pod.labels for key, pod in pods.items()},
        {key: specs.get(pod.name, {}) for key, pod in pods.items()},
        order,
        {},
    )
    return {sp.pod.name: (sp.pod.node_name, sp.running_at) for sp in cluster.pods.values()}


def test_four_ranks_spread_over_four_zones_start_one_a_zone_the_big_rank_where_it_fits(tmp_path: Path) -> None:
    shapes = (("n0", "a", 8), ("n1", "b", 4), ("n2", "c", 4), ("n3", "d", 4))
    ranks = [rank_yaml(f"rank-{i}", cpu, 60, spread()) for i, cpu in enumerate((2, 2, 2, 8))]
    sim = run(tmp_path, zoned_nodes(*shapes), group_yaml("mpi", 4), *ranks)
    specs = {f"rank-{i}": spread() for i in range(4)}
    where = checked(sim, shapes, specs)
    assert where["rank-3"] == ("n0", 0.0)
    assert sorted(node for node, _ in where.values()) == ["n0", "n1", "n2", "n3"]
    assert {start for _, start in where.values()} == {0.0}


def test_a_spread_gang_waits_for_its_zone_and_starts_spread_when_it_frees(tmp_path: Path) -> None:
    shapes = (("n0", "a", 8), ("n1", "b", 4), ("n2", "c", 4), ("n3", "d", 4))
    busy = rank_yaml("busy", 4, 100, {"nodeSelector": {"kubernetes.io/hostname": "n3"}}, group="", app="busy")
    ranks = [rank_yaml(f"rank-{i}", cpu, 60, spread()) for i, cpu in enumerate((2, 2, 2, 8))]
    sim = run(tmp_path, zoned_nodes(*shapes), busy, group_yaml("mpi", 4), *ranks)
    specs = {f"rank-{i}": spread() for i in range(4)}
    where = checked(sim, shapes, specs)
    assert where["rank-3"] == ("n0", 100.0)
    assert {start for name, (_, start) in where.items() if name != "busy"} == {100.0}


def test_an_affine_gang_is_reserved_in_the_zone_that_frees_first_and_starts_there(tmp_path: Path) -> None:
    shapes = (("n0", "a", 4), ("n1", "a", 4), ("n2", "b", 4), ("n3", "b", 4))
    fillers = [
        rank_yaml(name, 4, ends, {"nodeSelector": {"kubernetes.io/hostname": on}}, group="", app="busy")
        for name, on, ends in (("long", "n0", 200), ("short", "n2", 50))
    ]
    ranks = [rank_yaml(f"rank-{i}", 4, 60, affinity(key=ZONE_LEVEL)) for i in range(2)]
    sim = run(tmp_path, zoned_nodes(*shapes), *fillers, group_yaml("mpi", 2), *ranks)
    specs = {f"rank-{i}": affinity(key=ZONE_LEVEL) for i in range(2)}
    where = checked(sim, shapes, specs)
    assert sorted(where[f"rank-{i}"][0] for i in range(2)) == ["n2", "n3"]
    assert {where[f"rank-{i}"][1] for i in range(2)} == {50.0}


def test_seven_ranks_over_zones_with_room_for_four_two_and_two_start_three_two_two(tmp_path: Path) -> None:
    shapes = (("n0", "a", 4), ("n1", "a", 4), ("n2", "b", 4), ("n3", "c", 4))
    ranks = [rank_yaml(f"rank-{i}", 2, 60, spread()) for i in range(7)]
    sim = run(tmp_path, zoned_nodes(*shapes), group_yaml("mpi", 7), *ranks)
    where = checked(sim, shapes, {f"rank-{i}": spread() for i in range(7)})
    zones = {"n0": "a", "n1": "a", "n2": "b", "n3": "c"}
    per_zone = {zone: sum(1 for node, _ in where.values() if zones[node] == zone) for zone in "abc"}
    assert per_zone == {"a": 3, "b": 2, "c": 2} and {start for _, start in where.values()} == {0.0}


def test_eight_ranks_affine_by_rack_start_together_in_the_rack_that_holds_them_all(tmp_path: Path) -> None:
    shapes = tuple((f"n{i}", f"r{i // 4}", 4) for i in range(12))
    busy = [
        rank_yaml(f"busy-{n}", 4, 500, {"nodeSelector": {"kubernetes.io/hostname": n}}, group="", app="busy")
        for n in ("n0", "n1", "n4", "n5")
    ]
    ranks = [rank_yaml(f"rank-{i}", 2, 60, affinity(key=RACK_LEVEL)) for i in range(8)]
    sim = run(tmp_path, zoned_nodes(*shapes, level=RACK_LEVEL), *busy, group_yaml("mpi", 8), *ranks)
    where = checked(sim, shapes, {f"rank-{i}": affinity(key=RACK_LEVEL) for i in range(8)})
    assert {where[f"rank-{i}"][0] for i in range(8)} == {"n8", "n9", "n10", "n11"}
    assert {where[f"rank-{i}"][1] for i in range(8)} == {0.0}
