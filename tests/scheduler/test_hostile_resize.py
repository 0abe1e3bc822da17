"""A node shrunk under a running pod and grown back: the cores the pod's allocation annotation names stay its own.

When a node shrinks below the cores a running pod's annotation names (``core2`` of a node now of two cores), the
pod is put back on other free cores of the node in the graph (``core0``): its annotation, already written, still
names ``core2``. When the node grows back, the pod is replayed on the cores its annotation names first (they are
free again), not on those kubeflux last gave it, so no new pod is given ``core2``: two running pods whose
annotations named the same core would be pinned twice by a CPU pinning agent reading them.
"""

from __future__ import annotations

import json

from kubeflux.scheduler.core import ALLOCATION_ANNOTATION, KubefluxScheduler
from kubeflux.scheduler.interface import Bind, ClusterEvent, EventKind
from kubeflux.scheduler.objects import CPU, MEMORY, Node, Pod, PodPhase

ADDED, MODIFIED = EventKind.ADDED, EventKind.MODIFIED


def _node(cores: int) -> Node:
    return Node("n1", allocatable={CPU: cores * 1000, MEMORY: 2**34})


def _start(scheduler: KubefluxScheduler, name: str, cores: int, now: float) -> Pod:
    pod = Pod("default", name, name, "kubeflux", 0, now, {CPU: cores * 1000})
    scheduler.observe(ClusterEvent(ADDED, pod), now)
    (bind,) = scheduler.schedule(now)
    assert isinstance(bind, Bind)
    pod.node_name, pod.phase, pod.annotations = bind.node, PodPhase.RUNNING, dict(bind.annotations)
    scheduler.observe(ClusterEvent(MODIFIED, pod), now)
    return pod


def _cores(pod: Pod) -> set[str]:
    return set(json.loads(pod.annotations[ALLOCATION_ANNOTATION])["cores"])


def test_a_node_shrunk_under_a_pod_and_grown_back_gives_no_new_pod_the_cores_that_pod_names() -> None:
    scheduler = KubefluxScheduler()
    scheduler.observe(ClusterEvent(ADDED, _node(8)), 0.0)
    short = _start(scheduler, "short", 1, 1.0)
    long = _start(scheduler, "long", 2, 2.0)
    assert _cores(long) == {"core1", "core2"}
    short.phase = PodPhase.SUCCEEDED
    scheduler.observe(ClusterEvent(MODIFIED, short), 3.0)
    scheduler.observe(ClusterEvent(MODIFIED, _node(2)), 4.0)  # still room for "long"'s two cores
    assert scheduler.schedule(4.0) == []
    scheduler.observe(ClusterEvent(MODIFIED, _node(8)), 5.0)
    assert scheduler.schedule(5.0) == []
    late = _start(scheduler, "late", 3, 6.0)
    assert not _cores(late) & _cores(long)
