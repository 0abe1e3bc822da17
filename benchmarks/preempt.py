"""Preemption at scale: kubeflux's core on N nodes of 8 cores full of low-priority jobs (2 × 8-core gangs and
4-core lone pods, started at different times), then a stream of urgent 4 × 8-core gangs, each arriving on its own.

Prints, in CPU seconds of the process, the time of the pass in which an urgent gang preempts (the victims chosen
and evicted; the victims then leave and the gang is placed before the next arrives), and of a pass where nothing
of lower priority runs (the usual case). Usage: python benchmarks/preempt.py [--nodes 5000] [--urgent 5]
"""

from __future__ import annotations

import argparse
import statistics
import time

from kubeflux.collector import settle_gc
from kubeflux.scheduler.core import KubefluxScheduler
from kubeflux.scheduler.messages import Evict
from kubeflux.scheduler.objects import POD_GROUP_LABEL, DisruptionBudget, LabelSelector, PodGroup
from kubeflux.scheduler.testing import ADDED, Cluster, bound, node, pod
from shared import at_least

LONG = {"kubeflux.io/walltime": "100000"}


def fill(nodes: int) -> Cluster:
    """Half the nodes hold one 2 × 8-core gang per two nodes, the other half two 4-core lone pods each."""
    cluster = Cluster(KubefluxScheduler(), [node(f"n{i:05d}", cores=8) for i in range(nodes)])
    cluster.check = lambda: None  # type: ignore[method-assign]  # its O(nodes × pods) test is not what is timed
    t = 0.0
    for g in range(nodes // 4):
        cluster.tell(ADDED, PodGroup("default", f"g{g}", 2))
        labels = {POD_GROUP_LABEL: f"g{g}", "tier": "low"}
        cluster.add(*(pod(f"g{g}-{i}", 8000, t=t, labels=labels, annotations=dict(LONG)) for i in range(2)))
    for p in range(nodes):
        cluster.add(pod(f"p{p}", 4000, t=t, labels={"tier": "low"}, annotations=dict(LONG)))
    placed = 0
    while placed < nodes // 2 + nodes:
        t += 1.0
        got = len(bound(cluster.run(t)))
        if not got:
            break
        placed += got
    assert placed == nodes // 2 + nodes, placed
    return cluster


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=at_least(4), default=5000, help="a multiple of 4 (each gang fills two nodes)")
    parser.add_argument("--urgent", type=at_least(0), default=5, help="urgent gangs that preempt, one at a time")
    parser.add_argument("--blocked", type=at_least(0), default=20, help="urgent gangs that may not preempt")
    args = parser.parse_args()
    if args.nodes % 4:
        parser.error(f"--nodes {args.nodes}: a multiple of 4 (half the nodes hold gangs of two, half lone pods)")
    start = time.process_time()
    cluster = fill(args.nodes)
    settle_gc()
    print(f"{args.nodes} nodes filled in {time.process_time() - start:.1f} s CPU")
    t = 10_000.0
    times: list[float] = []
    for u in range(args.urgent):
        t += 100.0
        cluster.tell(ADDED, PodGroup("default", f"urgent{u}", 4))
        labels = {POD_GROUP_LABEL: f"urgent{u}"}
        cluster.add(
            *(pod(f"urgent{u}-{i}", 8000, t=t, priority=1000, labels=labels, annotations=dict(LONG)) for i in range(4))
        )
        before = time.process_time()
        decisions = cluster.run(t)
        times.append(time.process_time() - before)
        evicted = sum(1 for d in decisions if isinstance(d, Evict))
        placed = len(bound(cluster.run(t + 1)))
        print(f"urgent{u}: preempting pass {times[-1]:.3f} s CPU, {evicted} pods evicted, then {placed} placed")
    # every low job guarded by a budget that allows nothing: --blocked urgent gangs wait, each pass asks again
    guard = DisruptionBudget("default", "all", LabelSelector((("tier", "low"),)), min_available=len(cluster.pods))
    cluster.tell(ADDED, guard)
    for u in range(args.blocked):
        cluster.tell(ADDED, PodGroup("default", f"blocked{u}", 4))
        labels = {POD_GROUP_LABEL: f"blocked{u}"}
        cluster.add(*(pod(f"blocked{u}-{i}", 8000, t=t + 10, priority=1000, labels=labels) for i in range(4)))
    before = time.process_time()
    assert not [d for d in cluster.run(t + 10) if isinstance(d, Evict)]
    blocked = time.process_time() - before
    print(f"the pass where {args.blocked} urgent gangs arrive that may not preempt: {blocked:.3f} s CPU")
    before = time.process_time()
    cluster.add(pod("plain", 1000, t=t + 50, annotations=dict(LONG)))
    cluster.run(t + 50)
    plain = time.process_time() - before
    print(f"median preempting pass {statistics.median(times or [0.0]):.3f} s CPU; a plain pass {plain:.3f} s")


if __name__ == "__main__":
    main()
