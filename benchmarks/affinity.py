"""Inter-pod anti-affinity benchmark: kubeflux's core on kube-scheduler's scheduler_perf ``SchedulingPodAntiAffinity``
workload (``test/integration/scheduler_perf/affinity``: 5,000 nodes, 1,000 pods placed first, then 2,000 measured;
every pod ``color: green`` with required anti-affinity against ``color: green`` on ``kubernetes.io/hostname``, in two
namespaces its term names; 100m cpu and 500Mi each). Its CI floor (``threshold``) is 60 pods/s.

Prints pods bound per CPU second of the process for the measured pods, placed in one pass as the queue holds them.
With ``--plain``, the measured pods carry no constraint and other labels (``color: blue``): pods beside bound pods
with anti-affinity, which every filter must still check against those pods' terms.
Usage: python benchmarks/affinity.py [--nodes 5000] [--init 1000] [--measure 2000] [--plain]
"""

from __future__ import annotations

import argparse
import time

from rich.console import Console
from rich.table import Table

from kubeflux.scheduler.core import KubefluxScheduler
from kubeflux.scheduler.interface import Bind, ClusterEvent, EventKind
from kubeflux.scheduler.objects import (
    CPU,
    MEMORY,
    PODS,
    AffinityTerm,
    LabelSelector,
    Node,
    Pod,
    PodPhase,
    PodTerms,
)
from shared import at_least

HOST = "kubernetes.io/hostname"
NAMESPACES = frozenset({"sched-0", "sched-1"})
TERMS = PodTerms(anti_affinity=(AffinityTerm(LabelSelector((("color", "green"),)), NAMESPACES, None, HOST),))


def anti_pod(namespace: str, name: str, plain: bool = False) -> Pod:
    requests = {CPU: 100, MEMORY: 500 * 2**20}
    labels, terms = ({"color": "blue"}, None) if plain else ({"color": "green"}, TERMS)
    return Pod(namespace, name, f"{namespace}-{name}", "kubeflux", requests=requests, labels=labels, terms=terms)


def place(scheduler: KubefluxScheduler, pods: list[Pod], now: float) -> tuple[int, float]:
    """Feed ``pods``, run a pass and apply its binds; (pods bound, CPU seconds of the pass)."""
    by_key = {pod.key: pod for pod in pods}
    for pod in pods:
        scheduler.observe(ClusterEvent(EventKind.ADDED, pod), now)
    started = time.process_time()
    decisions = scheduler.schedule(now)
    spent = time.process_time() - started
    bound = 0
    for decision in decisions:
        if isinstance(decision, Bind):
            pod = by_key[decision.pod]
            pod.node_name, pod.phase = decision.node, PodPhase.RUNNING
            scheduler.observe(ClusterEvent(EventKind.MODIFIED, pod), now)
            bound += 1
    return bound, spent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=at_least(1), default=5000)
    parser.add_argument("--init", type=at_least(0), default=1000, help="pods placed first (0: none)")
    parser.add_argument("--measure", type=at_least(1), default=2000)
    parser.add_argument("--plain", action="store_true", help="measure pods without constraints beside the first ones")
    args = parser.parse_args()
    scheduler = KubefluxScheduler(queue_depth=10**9)
    allocatable = {CPU: 4000, MEMORY: 32 * 2**30, PODS: 110}
    for i in range(args.nodes):
        node = Node(f"node-{i}", uid=f"n{i}", allocatable=dict(allocatable), labels={HOST: f"node-{i}"})
        scheduler.observe(ClusterEvent(EventKind.ADDED, node), 0.0)
    scheduler.schedule(0.0)
    init, _ = place(scheduler, [anti_pod("sched-0", f"init-{i}") for i in range(args.init)], 1.0)
    bound, spent = place(scheduler, [anti_pod("sched-1", f"pod-{i}", args.plain) for i in range(args.measure)], 2.0)
    what = "pods without constraints beside pods with" if args.plain else "pods with"
    table = Table(title=f"kubeflux: {what} required anti-affinity bound per CPU second (SchedulingPodAntiAffinity)")
    for column in ("nodes", "pods placed first", "pods measured", "bound", "CPU s", "pods/s", "kube-scheduler floor"):
        table.add_column(column, justify="right")
    rate = bound / spent if spent else float("inf")
    table.add_row(str(args.nodes), str(init), str(args.measure), str(bound), f"{spent:.2f}", f"{rate:.0f}", "60")
    Console().print(table)


if __name__ == "__main__":
    main()
