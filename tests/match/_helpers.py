"""Helpers shared by the matcher tests."""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from kubeflux.jobspec import Jobspec, jobspec_from_yaml
from kubeflux.match.view import ScheduleView
from kubeflux.resources.graph import Graph
from kubeflux.resources.jgf import graph_to_jgf
from tests.shared import SHARED


def schedule(traverser: ScheduleView) -> dict[str, Any]:
    """Everything the matcher records per vertex (planner spans, exclusivity uses, aggregate filters, tags),
    keyed by containment path, with span ids left out, so two engines' schedules can be compared."""
    paths = {vertex.uid: vertex.paths.get("containment", str(vertex.uid)) for vertex in traverser.graph.vertices}
    state: dict[str, Any] = {}
    for uid, plan in traverser.plans.items():
        if plan.span_count():
            state[f"plan {paths[uid]}"] = plan.points()
    for uid, uses in traverser.x_uses.items():
        if uses:
            state[f"x {paths[uid]}"] = sorted((jobid, start, end) for jobid, (start, end, _) in uses.items())
    for uid, subplan in traverser.subplans.items():
        state[f"agg {paths[uid]}"] = {t: subplan.planner(t).points() for t in subplan.resource_types}
    for label, table in (
        ("tags", traverser.tags),
        ("alloc", traverser.allocations),
        ("rsv", traverser.reservations),
        ("job2span", traverser.job2span),
    ):
        for uid, jobs in table.items():
            if jobs:
                state[f"{label} {paths[uid]}"] = sorted(jobs)
    return state


def leaves_resource_set(graph: Graph, leaves: Iterable[int]) -> dict[str, Any]:
    """The JGF resource set :func:`kubeflux.match.update.replay_leaves` stands for: ``leaves`` held exclusively
    and whole, the path from the root to each held shared."""
    exclusive = set(leaves)
    chosen: set[int] = set()
    for leaf in exclusive:
        uid = leaf
        while uid != -1 and uid not in chosen:
            chosen.add(uid)
            uid = graph.vertices[uid].parent
    held = {str(graph.vertices[uid].uniq_id) for uid in exclusive}
    document = graph_to_jgf(graph, chosen)
    for record in document["graph"]["nodes"]:
        meta = record["metadata"]
        meta.pop("status", None)
        meta["exclusive"] = record["id"] in held
    return document


_TASKS = (
    "attributes: {{system: {{duration: {duration}}}}}\n"
    "tasks: [{{command: [app], slot: default, count: {{per_slot: 1}}}}]\n"
)


def whole_nodes_job(*, nodes: int = 1, cores: int = 4, duration: int = 3600) -> Jobspec:
    """``nodes`` slots of one node each (a slot holds its node whole), each node with ``cores`` cores."""
    return jobspec_from_yaml(
        f"""
version: 9999
resources:
  - type: slot
    count: {nodes}
    label: default
    with:
      - type: node
        count: 1
        with:
          - type: core
            count: {cores}
"""
        + _TASKS.format(duration=duration)
    )


def node_cores_job(*, nodes: int = 1, cores: int = 1, gpus: int = 0, memory: int = 0, duration: int = 3600) -> Jobspec:
    """``nodes`` nodes (shared), each with a slot of ``cores`` cores, and ``gpus`` gpus and ``memory`` memory units
    when not 0."""
    extra = "".join(
        f"          - type: {kind}\n            count: {count}\n"
        for kind, count in (("gpu", gpus), ("memory", memory))
        if count
    )
    return jobspec_from_yaml(
        f"""
version: 9999
resources:
  - type: node
    count: {nodes}
    with:
      - type: slot
        count: 1
        label: default
        with:
          - type: core
            count: {cores}
"""
        + extra
        + _TASKS.format(duration=duration)
    )


def socket_cores_job(*, cores: int = 1, duration: int = 3600) -> Jobspec:
    """One node (shared) with a slot of ``cores`` cores on each of its 2 sockets."""
    return jobspec_from_yaml(
        f"""
version: 9999
resources:
  - type: node
    count: 1
    with:
      - type: socket
        count: 2
        with:
          - type: slot
            count: 1
            label: default
            with:
              - type: core
                count: {cores}
"""
        + _TASKS.format(duration=duration)
    )


BENCH = SHARED / "bench"


def bench_graph(tmp_path: Path, racks: int, nodes_per_rack: int) -> Path:
    """The benchmark recipe (2 sockets x 32 cores, 4 gpus per node) with fewer racks and nodes."""
    recipe = (BENCH / "bench1024.graphml").read_text()
    recipe = re.sub(r'(<edge id="cluster2rack"[^>]*>\s*<data key="multi_scale">)\d+', rf"\g<1>{racks}", recipe)
    rack2node = r'(<edge id="rack2node"[^>]*>(?:(?!</edge>).)*?"multi_scale">)\d+'
    recipe = re.sub(rack2node, rf"\g<1>{nodes_per_rack}", recipe, flags=re.S)
    path = tmp_path / "bench-small.graphml"
    path.write_text(recipe)
    return path
