"""**Seed 000's planned experiment**: "show the difference in performance between updating or rebuilding the
graph". The informer keeps the scheduler's graph true to the cluster in place: a node that joins is attached
(:meth:`GraphView.put_node`), a node that leaves is marked down (:meth:`GraphView.set_gone`), a pod that ends has
its cores released (:meth:`GraphView.release`). The alternative is to rebuild the whole graph from the node list at
every such event and put back the pods still running (:meth:`GraphView.replay`, as after a restart).

At 1,000, 5,000 and 10,000 nodes (32 cores and 128Gi each; every node running one pod of 16 cores), this measures
the CPU time (``time.process_time``, so other processes on the machine do not count) of each in-place update, as
the mean over several events, and of one rebuild (the graph alone, and with the running pods put back). It is a
measurement, so its figures change from run to run and machine to machine: the page says on what machine and at
what load they were taken, and the test only checks that it runs and what the page holds.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt

from experiments.pages import machine, markdown_table, stamp, write_page
from kubeflux.resources import NodeSpec
from kubeflux.scheduler.graphview import GraphView

__all__ = ["SIZES", "UpdateRow", "measure", "update_rows", "update_table", "write_graph_update"]

SIZES = (1_000, 5_000, 10_000)
CORES, MEMORY, POD_CORES = 32, 128 * 2**30, 16
HORIZON = 7 * 86_400
POLICY = "lonode"
"""kubeflux's default match policy."""
NAME = "seed000-graph-update"


@dataclass(frozen=True, slots=True)
class UpdateRow:
    nodes: int
    vertices: int
    pods: int
    """Pods running when the event comes (one per node)."""
    node_added: float
    node_removed: float
    pod_ended: float
    rebuild_graph: float
    rebuild_with_pods: float
    """CPU milliseconds per event: the in-place updates (means), the rebuild (graph alone; with the pods put back)."""

    def times(self, update: float) -> str:
        """How many times a rebuild (with the pods) costs ``update``."""
        return f"{self.rebuild_with_pods / max(update, 1e-9):,.0f}x"

    def cells(self) -> list[str]:
        times = (self.node_added, self.node_removed, self.pod_ended, self.rebuild_graph, self.rebuild_with_pods)
        counts = (f"{self.nodes:,}", f"{self.vertices:,}", f"{self.pods:,}")
        return [*counts, *(_ms(t) for t in times), self.times(self.node_added), self.times(self.pod_ended)]


def _ms(value: float) -> str:
    return f"{value:.3f}" if value < 10 else f"{value:,.0f}"


def _specs(count: int, prefix: str = "node") -> list[NodeSpec]:
    return [NodeSpec(f"{prefix}-{i:05d}", cores=CORES, memory=MEMORY) for i in range(count)]


Pod = tuple[int, str, list[str]]
"""A running pod as the informer holds it: its engine job id, its node, its cores' names."""


def _place(view: GraphView, specs: Sequence[NodeSpec]) -> list[Pod]:
    """One pod of :data:`POD_CORES` cores on every node, put on the graph as the informer replays pods."""
    vertices = view.engine.graph.vertices
    pods: list[Pod] = []
    for spec in specs:
        leaves = view.free_leaves(spec.name, "core", 0, HORIZON, POD_CORES)
        assert leaves is not None
        result = view.replay(spec.name, leaves, 0, HORIZON, f"pod on {spec.name}", 0, whole_node=False)
        assert result.matched, result.error
        pods.append((result.jobid, spec.name, [vertices[uid].name for uid in leaves]))
    return pods


def _cpu_ms(action: Callable[[], object]) -> float:
    start = time.process_time()
    action()
    return (time.process_time() - start) * 1000.0


def _mean_ms(actions: Sequence[Callable[[], object]]) -> float:
    start = time.process_time()
    for action in actions:
        action()
    return (time.process_time() - start) * 1000.0 / len(actions)


def _rebuild(specs: list[NodeSpec], pods: Sequence[Pod] = ()) -> GraphView:
    """What a scheduler without in-place updates does at every event: a new graph from the node list, then every
    running pod put back on its cores."""
    view = GraphView(specs, POLICY, HORIZON, deque(maxlen=16))
    paths = view.paths
    graph = view.engine.graph
    for _, node, cores in pods:
        vertex = graph.vertex_at(paths[node])
        assert vertex is not None
        names = set(cores)
        leaves = [uid for uid in vertex.children if graph.vertices[uid].name in names]
        view.replay(node, leaves, 0, HORIZON, f"pod on {node}", 0, whole_node=False)
    return view


def measure(nodes: int, events: int = 20) -> UpdateRow:
    """The row for a cluster of ``nodes`` nodes: each in-place update the mean of ``events`` events (fewer for
    nodes added, whose cost grows with the graph)."""
    specs = _specs(nodes)
    view = GraphView(specs, POLICY, HORIZON, deque(maxlen=16))
    pods = _place(view, specs)
    vertices = len(view.engine.graph.vertices)
    ended = pods[:: max(1, nodes // events)][:events]
    pod_ended = _mean_ms([lambda pod=pod: view.release(*pod) for pod in ended])  # type: ignore[misc]
    gone = specs[1 :: max(1, nodes // events)][:events]
    node_removed = _mean_ms([lambda name=spec.name: view.set_gone(name, True) for spec in gone])  # type: ignore[misc]
    joining = _specs(max(1, events // 4), prefix="new")
    node_added = _mean_ms([lambda spec=spec: view.put_node(spec) for spec in joining])  # type: ignore[misc]
    rebuild_graph = _cpu_ms(lambda: _rebuild(specs))
    rebuild_with_pods = _cpu_ms(lambda: _rebuild(specs, pods))
    return UpdateRow(nodes, vertices, len(pods), node_added, node_removed, pod_ended, rebuild_graph, rebuild_with_pods)


def update_rows(sizes: Sequence[int] = SIZES, events: int = 20) -> list[UpdateRow]:
    return [measure(size, events) for size in sizes]


_HEADER = (
    "nodes",
    "graph vertices",
    "running pods",
    "node added (ms)",
    "node removed (ms)",
    "pod ended (ms)",
    "rebuild: graph (ms)",
    "rebuild: graph + pods (ms)",
    "rebuild ÷ node added",
    "rebuild ÷ pod ended",
)


def update_table(rows: Sequence[UpdateRow]) -> str:
    return markdown_table(_HEADER, [row.cells() for row in rows])


def plot(rows: Sequence[UpdateRow], path: Path) -> Path:
    """CPU ms per event against the node count, log-log: one line per in-place update, two for the rebuild."""
    figure, axes = plt.subplots(figsize=(7, 4.5))
    nodes = [row.nodes for row in rows]
    series = (
        ("rebuild: graph + running pods", [r.rebuild_with_pods for r in rows], "o-"),
        ("rebuild: graph only", [r.rebuild_graph for r in rows], "o--"),
        ("update: node added (put_node)", [r.node_added for r in rows], "s-"),
        ("update: node removed (set_gone)", [r.node_removed for r in rows], "^-"),
        ("update: pod ended (release)", [r.pod_ended for r in rows], "v-"),
    )
    for label, values, style in series:
        axes.plot(nodes, values, style, label=label)
    axes.set_xscale("log")
    axes.set_yscale("log")
    axes.set_xlabel("nodes in the graph (32 cores each)")
    axes.set_ylabel("CPU time per event (ms)")
    axes.set_title("Keeping the graph true to the cluster: update in place vs rebuild")
    axes.grid(True, which="both", alpha=0.3)
    axes.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)
    return path


_PAGE = """# Seed 000: updating the graph in place vs rebuilding it

{stamp}

**The question.** The seed's plan for its next sprint: "show the difference in performance between updating or
rebuilding the graph". Its informer keeps KubeFlux's resource graph true to the cluster as events come; the other
way is to rebuild the graph from the node list at every event. How much does each cost as the cluster grows?

**The setup.** A graph of N nodes of {cores} cores and 128Gi (N = {sizes}), built by the scheduler's own
`GraphView`, every node running one pod of {pod_cores} cores. The events the informer sees, applied in place as it
applies them: a **node added** (`GraphView.put_node`: the engine attaches its subgraph), a **node removed**
(`GraphView.set_gone`: marked down until it returns), a **pod ended** (`GraphView.release`: its cores freed, by
vertex). Against each, a **rebuild**: a new graph from the node list (`build_graph`, planners and all), alone and
with the N running pods put back on their cores (`GraphView.replay`), which a rebuild must do to stay true. CPU time
(`time.process_time`) per event: the mean of {events} events for removals and pod endings, {added} for nodes added.
Measured with {machine}.

{table}

![CPU time per event against the node count]({png})

**What it shows.** Updating in place costs almost nothing for the events that come most often: a pod that ends
and a node that leaves take a fraction of a millisecond whatever the size of the cluster, since they touch only the
pod's cores (and their ancestors' counts) or one node's status. A node that joins costs more, and grows with the
graph: after attaching the node's subgraph, the engine refreshes the matcher's per-subtree state with a pass over
the whole graph (`kubeflux.match.state`'s refresh, a prime pass of `kubeflux.match.schedule`), which could be made
incremental; it stays well below a rebuild all the same. A rebuild grows with the
cluster, and more again once the running pods are put back: at 10,000 nodes a scheduler that rebuilt at every event
would spend seconds of CPU per pod that ends, which at the rate pods end on such a cluster it cannot afford. The
informer's in-place updates are the answer to the seed's question.
"""


def write_graph_update(folder: Path, rows: Sequence[UpdateRow] | None = None, events: int = 20) -> Path:
    """Measure (unless ``rows`` are given), write the page and its plot into ``folder``; returns the page."""
    folder.mkdir(parents=True, exist_ok=True)
    rows = list(rows) if rows is not None else update_rows(events=events)
    png = plot(rows, folder / f"{NAME}.png")
    page = _PAGE.format(
        stamp=stamp(NAME, "a test runs it on a small graph and checks this page's structure (the times are measured)"),
        cores=CORES,
        pod_cores=POD_CORES,
        sizes=" / ".join(f"{row.nodes:,}" for row in rows),
        events=events,
        added=max(1, events // 4),
        machine=machine(),
        table=update_table(rows),
        png=png.name,
    )
    return write_page(folder, NAME, page)
