"""Scheduler benchmark: kubeflux's core on large clusters, in wall time (no simulator, no API server).

Prints three tables:
  (a) pods bound per second for N nodes (4 cores, 32 GiB, 110 pods each: kube-scheduler's scheduler_perf node) and
      P one-core pods (SchedulingBasic 5000Nodes_10000Pods; its CI floor is 270 pods/s);
  (b) the same for G pod groups of 16 one-core members (gangs, all or nothing);
  (c) the seed's planned experiment: updating the graph for one pod event (a pod that ends: its engine job
      cancelled; a pod of another scheduler: put on its node) against rebuilding the graph, at 1,000 and 5,000
      nodes running --load one-core pods each: both the empty graph from the node list (a lower bound of any
      rebuild) and the rebuild a restarted scheduler does (the nodes, then every running pod put back).
Usage: python benchmarks/schedule.py [--nodes 5000] [--pods 10000] [--groups 1000] [--policy lonode]
       [--shapes 4,64,128,64s1,64s2,64g4] [--update-nodes 1000,5000] [--racks 0] [--repeat 1] [--default-gc]
--racks N labels the nodes in N racks of consecutive nodes: the graph gets a rack level (cluster → rack → node), and
(b) is also run with every group requiring one rack (``kueue.x-k8s.io/podset-required-topology``). --racks 0,50
runs each shape without racks and with 50, alternated (--repeat times each, in the same process: what the levels
cost, measured on the same machine at the same time).
(a) and (b) run for each node shape: cores per node (8 GiB of memory each), ``sN`` for N sockets per node (the
serve configuration's ``socketsDefault``: node → socket → cores; none by default, the cores right under the node),
``gN`` for N gpus per node (e.g. ``64s2g4``).
(a) and (b) are timed in CPU seconds of the process (the machine may be shared), the first pass included: its first
match evaluates every node of the fresh graph. The graph is built, then the collector settled as ``kubeflux query``
and the matcher benchmark do and as the simulator runs (its long-lived objects out of the collector's scans,
``settle_gc``); --default-gc keeps Python's default collector, whose full collections rescan the whole graph (a
64-core node is 66 vertices).
Large runs take long while the engine's whole-graph policies are slow; --pods/--groups measure a prefix of the
stream (the rate is per pod placed, on the same cluster).
"""

from __future__ import annotations

import argparse
import gc
import re
import statistics
import time

from rich.console import Console
from rich.table import Table

from kubeflux.collector import settle_gc
from kubeflux.scheduler.confining import KUEUE_REQUIRED
from kubeflux.scheduler.core import KubefluxScheduler
from kubeflux.scheduler.graphview import GraphView
from kubeflux.scheduler.interface import Bind, ClusterEvent, EventKind
from kubeflux.scheduler.objects import CPU, GPU, MEMORY, POD_GROUP_LABEL, PODS, Node, Pod, PodGroup, PodPhase
from kubeflux.scheduler.topology import RACK_LEVEL
from kubeflux.scheduler.translate import NodeShape, node_spec
from shared import at_least, comma_list, match_policy

ADDED, MODIFIED = EventKind.ADDED, EventKind.MODIFIED


def nodes(count: int, cores: int = 4, gpus: int = 0, racks: int = 0) -> list[Node]:
    """``count`` nodes of ``cores`` cores (8 GiB of memory per core) and ``gpus`` gpus, 110 pods each; with ``racks``,
    labelled in that many racks of consecutive nodes (``topology.kubeflux.io/rack``: the graph gets a rack level)."""
    allocatable = {CPU: cores * 1000, MEMORY: cores * 8 * 2**30, PODS: 110}
    if gpus:
        allocatable[GPU] = gpus
    per_rack = -(-count // racks) if racks else 0
    return [
        Node(
            f"node-{i}",
            uid=f"n{i}",
            allocatable=dict(allocatable),
            labels={RACK_LEVEL: f"rack-{i // per_rack:02d}"} if racks else {},
        )
        for i in range(count)
    ]


def parse_shape(text: str) -> tuple[int, int, int]:
    """``64`` (cores), ``64s2`` (and sockets), ``64g4`` (and gpus), ``64s2g4`` → (cores, sockets, gpus); an argparse
    ``type``."""
    found = re.fullmatch(r"(\d+)(?:s(\d+))?(?:g(\d+))?", text)
    if found is None or int(found[1]) < 1:
        example = "(e.g. 64, 64s2, 64s2g4)"
        raise argparse.ArgumentTypeError(f"{text!r} is not CORES[sSOCKETS][gGPUS] with one core or more {example}")
    cores, sockets, gpus = found.groups()
    return int(cores), int(sockets or 0), int(gpus or 0)


RACK_REQUIRED = {KUEUE_REQUIRED: RACK_LEVEL}
"""A pod group's members asking for one rack."""


def one_core_pod(name: str, labels: dict[str, str] | None = None, annotations: dict[str, str] | None = None) -> Pod:
    requests = {CPU: 1000, MEMORY: 2**30}
    return Pod("default", name, name, "kubeflux", requests=requests, labels=labels or {}, annotations=annotations or {})


def scheduler_on(cluster: list[Node], policy: str, settle: bool = False, sockets: int = 0) -> KubefluxScheduler:
    """A scheduler that has built its graph of ``cluster`` (``sockets`` per node); with ``settle``, the collector
    then settled."""
    scheduler = KubefluxScheduler(policy=policy, queue_depth=10**9, shape=NodeShape(default_sockets=sockets))
    for node in cluster:
        scheduler.observe(ClusterEvent(ADDED, node), 0.0)
    scheduler.schedule(0.0)  # builds the graph
    if settle:
        settle_gc()
    return scheduler


def bind_rate(scheduler: KubefluxScheduler, pods: list[Pod]) -> tuple[int, float]:
    """Feed ``pods`` and run passes until none is left to place; (pods bound, CPU seconds)."""
    for pod in pods:
        scheduler.observe(ClusterEvent(ADDED, pod), 1.0)
    started = time.process_time()
    bound = sum(isinstance(d, Bind) for d in scheduler.schedule(1.0))
    return bound, time.process_time() - started


def bind_all(scheduler: KubefluxScheduler, pods: list[Pod], now: float) -> list[Pod]:
    """Feed ``pods``, run a pass and apply its binds as the API server would (node, annotations, Running)."""
    by_key = {pod.key: pod for pod in pods}
    for pod in pods:
        scheduler.observe(ClusterEvent(ADDED, pod), now)
    placed = []
    for decision in scheduler.schedule(now):
        if isinstance(decision, Bind):
            pod = by_key[decision.pod]
            pod.node_name, pod.phase = decision.node, PodPhase.RUNNING
            pod.annotations = {**pod.annotations, **decision.annotations}
            scheduler.observe(ClusterEvent(MODIFIED, pod), now)
            placed.append(pod)
    return placed


def update_vs_rebuild(count: int, policy: str, load: int, repeats: int = 50) -> tuple[float, float, float, float]:
    """On ``count`` nodes already running ``load`` one-core pods each: (ms to release one ended pod, ms to account
    one pod of another scheduler, ms to build the graph from the node list, ms to rebuild the scheduler's graph
    from the cluster as a restart does: the nodes, then every running pod put back on its cores)."""
    cluster = nodes(count)
    scheduler = scheduler_on(cluster, policy)
    running = bind_all(scheduler, [one_core_pod(f"r{i}") for i in range(count * load)], 0.5)
    pods = [one_core_pod(f"p{i}") for i in range(repeats)]
    for pod in pods:
        scheduler.observe(ClusterEvent(ADDED, pod), 1.0)
    scheduler.schedule(1.0)
    releases = []
    for pod in pods:
        pod.phase = PodPhase.SUCCEEDED
        started = time.perf_counter()
        scheduler.observe(ClusterEvent(MODIFIED, pod), 2.0)
        releases.append(time.perf_counter() - started)
    accounts = []
    for i in range(repeats):
        other = Pod("default", f"web-{i}", f"web-{i}", "default-scheduler", requests={CPU: 1000})
        other.node_name, other.phase = cluster[-1 - i % count].name, PodPhase.RUNNING  # nodes lonode left free
        started = time.perf_counter()
        scheduler.observe(ClusterEvent(ADDED, other), 3.0 + i)
        scheduler.schedule(3.0 + i)  # puts it on its node's cores in the graph
        accounts.append(time.perf_counter() - started)
    specs = [node_spec(node) for node in cluster]
    builds = []
    for _ in range(3):
        started = time.perf_counter()
        GraphView(specs, policy, scheduler.profile.horizon, scheduler.log)
        builds.append(time.perf_counter() - started)
    rebuilds = []
    for _ in range(3):
        started = time.perf_counter()
        fresh = KubefluxScheduler(policy=policy, queue_depth=10**9)
        for node in cluster:
            fresh.observe(ClusterEvent(ADDED, node), 4.0 + repeats)
        for pod in running:
            fresh.observe(ClusterEvent(ADDED, pod), 4.0 + repeats)
        fresh.schedule(4.0 + repeats)
        rebuilds.append(time.perf_counter() - started)
    ms = 1000.0
    return (
        statistics.median(releases) * ms,
        statistics.median(accounts) * ms,
        statistics.median(builds) * ms,
        statistics.median(rebuilds) * ms,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=at_least(1), default=5000)
    parser.add_argument("--pods", type=at_least(1), default=10_000)
    parser.add_argument("--groups", type=at_least(1), default=1000)
    parser.add_argument("--group-size", type=at_least(1), default=16)
    parser.add_argument("--policy", type=match_policy, default="lonode")
    parser.add_argument(
        "--shapes",
        type=comma_list(parse_shape),
        default="4,64,128,64s1,64s2,64g4",
        help="node shapes for (a) and (b): cores per node, sN for N sockets, gN for N gpus (e.g. 4,64,64s2,64s2g4)",
    )
    parser.add_argument("--update-nodes", default="1000,5000", help="node counts for (c), comma-separated ('': none)")
    parser.add_argument("--load", type=at_least(0), default=2, help="one-core pods running per node during (c)")
    parser.add_argument("--default-gc", action="store_true", help="keep Python's default garbage collector")
    parser.add_argument(
        "--racks",
        type=comma_list(at_least(0)),
        default="0",
        help="racks of consecutive nodes for (a) and (b) (0: none); several (0,50): alternated",
    )
    parser.add_argument("--repeat", type=at_least(1), default=1, help="runs of each shape and rack count, alternated")
    args = parser.parse_args()
    try:
        update_counts = [int(n) for n in args.update_nodes.split(",")] if args.update_nodes else []
    except ValueError:
        parser.error(f"--update-nodes {args.update_nodes!r}: node counts, comma-separated (e.g. 1000,5000)")
    if any(count < 1 for count in update_counts):
        parser.error(f"--update-nodes {args.update_nodes!r}: a node count must be at least 1 ('' skips (c))")
    console = Console(width=160)
    settle = not args.default_gc
    collector = "collector settled after the build" if settle else "Python's default collector"

    table = Table(title=f"kubeflux: pods bound per CPU second (policy {args.policy}, {collector})")
    for column in (
        "workload",
        "nodes",
        "racks",
        "cores/node",
        "gpus/node",
        "pods asked",
        "pods bound",
        "CPU s",
        "pods/s",
        "kube-scheduler CI floor",
    ):
        table.add_column(column, justify="right")
    runs = [(shape, racks) for shape in args.shapes for _ in range(args.repeat) for racks in args.racks]
    for (cores, sockets, gpus), racks in runs:
        cluster = nodes(args.nodes, cores, gpus, racks)
        per_node = f"{cores} in {sockets} socket{'s' * (sockets > 1)}" if sockets else str(cores)
        size = (str(args.nodes), str(racks), per_node, str(gpus))
        scheduler = scheduler_on(cluster, args.policy, settle, sockets)
        bound, seconds = bind_rate(scheduler, [one_core_pod(f"p{i}") for i in range(args.pods)])
        rate = f"{bound / seconds:.0f}"
        table.add_row("one-core pods", *size, str(args.pods), str(bound), f"{seconds:.2f}", rate, "270")
        del scheduler
        gc.unfreeze()
        gc.collect()
        for workload, asks in (("pod groups", {}), ("pod groups, one rack each", RACK_REQUIRED)):
            if asks and not racks:
                continue
            scheduler = scheduler_on(cluster, args.policy, settle, sockets)
            members: list[Pod] = []
            for g in range(args.groups):
                scheduler.observe(ClusterEvent(ADDED, PodGroup("default", f"g{g}", args.group_size)), 0.5)
                labels = {POD_GROUP_LABEL: f"g{g}"}
                members += [one_core_pod(f"g{g}-{m}", labels, asks) for m in range(args.group_size)]
            bound, seconds = bind_rate(scheduler, members)
            asked = f"{args.groups} x {args.group_size}"
            table.add_row(workload, *size, asked, str(bound), f"{seconds:.2f}", f"{bound / seconds:.0f}", "-")
            del scheduler
            gc.unfreeze()
            gc.collect()
    console.print(table)
    if not update_counts:
        return

    table = Table(
        title=f"One pod event against a rebuild, {args.load} one-core pods running per node (median ms)",
        caption="empty graph: built from the node list only; rebuild: as a restarted scheduler does, the nodes and "
        "then every running pod put back",
    )
    for column in (
        "nodes",
        "running pods",
        "pod ends (release)",
        "other scheduler's pod (put on node)",
        "empty graph",
        "empty graph / update",
        "rebuild",
        "rebuild / update",
    ):
        table.add_column(column, justify="right")
    for count in update_counts:
        release, account, build, rebuild = update_vs_rebuild(count, args.policy, args.load)
        worst = max(release, account)
        table.add_row(
            str(count),
            f"{count * args.load:,}",
            f"{release:.3f}",
            f"{account:.3f}",
            f"{build:.1f}",
            f"{build / worst:,.0f}x",
            f"{rebuild:.1f}",
            f"{rebuild / worst:,.0f}x",
        )
    console.print(table)


if __name__ == "__main__":
    main()
