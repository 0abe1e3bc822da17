"""Pods → jobspecs and engine results → placements: the one place that knows how a pod becomes a Fluxion job.

**The graph of a node** (:func:`node_spec`): ``node → core × C, gpu × G, memory`` with ``C`` the node's
allocatable cpu in *whole* cores (``3500m`` → 3), ``G`` its ``nvidia.com/gpu``. Everything else a pod can ask
(millicores, memory bytes, ephemeral storage, other extended resources, the pod count) is kept exactly in a
per-node ledger (:mod:`kubeflux.scheduler.ledger`), which is also kube-scheduler's NodeResourcesFit filter.

**The CPU rule.** A pod asking ``cpu = 1000·k + f`` millicores (``0 ≤ f < 1000``) takes ``k`` *exclusive* core
vertices from the engine (HPC pods asking whole cores get whole cores, pinned by the matcher) and the full
``cpu`` from its node's millicore ledger. A fractional pod (``k = 0``) takes no core vertex at all: ``250m``
costs 250 millicores, never a whole core. A node is offered to the matcher only when its ledger can give the
pod's whole request, so exclusive cores are never handed out on a node whose millicores fractional pods (of any
scheduler) already use. Pods that ask neither a whole core nor a gpu take no vertex: among the nodes that pass
every filter and whose books can take them, they go to the node the pod's match policy prefers, in the engine's
own node order (:meth:`kubeflux.scheduler.graphview.GraphView.preferred_node`): ``low``, ``lonode`` the lowest
node id, ``high``, ``hinode`` the highest, ``first`` the node with the most free cores (the subtree its walk
explores first), ``variation`` the lowest ``perf_class``. The node-exclusive policies (``lonodex`` …) order
nodes like their shared twins; such a pod holds no node exclusively, since it holds no vertex.

**One pod, one job** (:func:`pod_jobspec`): ``node(1) → slot(1, label task) → [core(k), gpu(g)]``; its
duration is the pod's ``activeDeadlineSeconds``, else the :data:`DURATION_ANNOTATION` (or the walltime
annotation), else the graph horizon. A pod group is matched as one job per member, all or nothing
(:mod:`kubeflux.scheduler.core`), so members may differ and each pod maps to exactly one node, and a member that
ends releases exactly its own job.

**Policy**: the scheduler profile's (default ``lonode``), or the pod's :data:`POLICY_ANNOTATION`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

from kubeflux.jobspec import Jobspec, JobspecError, jobspec_from_dict
from kubeflux.match.policy import parse_policy
from kubeflux.resources import NodeSpec
from kubeflux.scheduler.objects import CPU, GPU, MEMORY, WALLTIME_ANNOTATION, Node, Pod
from kubeflux.scheduler.quantity import QuantityError, parse_duration

__all__ = [
    "DURATION_ANNOTATION",
    "POLICY_ANNOTATION",
    "TASK_LABEL",
    "Placement",
    "PodRequestError",
    "gang_jobspec",
    "node_spec",
    "placement_from_output",
    "placements_from_output",
    "pod_duration",
    "pod_jobspec",
    "pod_policy",
    "pod_shape",
    "whole_cores",
]

POLICY_ANNOTATION = "kubeflux.io/match-policy"
"""A pod's own match policy (``first``, ``low``, ``lonode``, ``hinode`` …), overriding the profile's."""
DURATION_ANNOTATION = "kubeflux.io/duration"
"""How long the pod's allocation is planned for: seconds, or a Go duration (``90m``)."""
TASK_LABEL = "task"
MILLICORES = 1000


class PodRequestError(ValueError):
    """A pod whose scheduling inputs kubeflux cannot use; the message names the pod and the field."""


@dataclass(frozen=True, slots=True)
class Placement:
    """Where the engine put one pod's job: the node and the core/gpu vertex names it took there."""

    node: str
    cores: tuple[str, ...] = ()
    gpus: tuple[str, ...] = ()


def whole_cores(millicores: int) -> int:
    """The exclusive cores for a cpu request or allocatable: ``2500`` → 2."""
    return millicores // MILLICORES


def node_spec(node: Node, allocatable: dict[str, int] | None = None) -> NodeSpec:
    """The graph node for ``node`` (``allocatable`` overrides the node's, for capped sharing policies)."""
    alloc = node.allocatable if allocatable is None else allocatable
    return NodeSpec(
        node.name,
        cores=whole_cores(alloc.get(CPU, 0)),
        memory=alloc.get(MEMORY, 0),
        gpus=alloc.get(GPU, 0),
    )


def _seconds(pod: Pod, field: str, raw: str) -> float:
    try:
        value = float(raw)
    except ValueError:
        try:
            value = parse_duration(raw)
        except QuantityError as exc:
            raise PodRequestError(f"pod {pod.key}: {field}: {exc}") from None
    if not math.isfinite(value) or value <= 0:
        raise PodRequestError(f"pod {pod.key}: {field}: must be a positive duration, got {raw!r}")
    return value


def pod_duration(pod: Pod) -> float | None:
    """Seconds the pod's allocation is planned for, or None (the graph's horizon).

    ``activeDeadlineSeconds`` first (the kubelet kills the pod then), else :data:`DURATION_ANNOTATION`, else
    the walltime annotation the simulator writes. A bad annotation raises :class:`PodRequestError`.
    """
    if pod.active_deadline_seconds is not None:
        return pod.active_deadline_seconds
    for name in (DURATION_ANNOTATION, WALLTIME_ANNOTATION):
        raw = pod.annotations.get(name)
        if raw is not None:
            return _seconds(pod, f"metadata.annotations[{name}]", raw)
    return None


def pod_policy(pod: Pod, default: str) -> str:
    """The match policy for ``pod``; raises :class:`PodRequestError` for an unknown policy annotation."""
    name = pod.annotations.get(POLICY_ANNOTATION)
    if name is None:
        return default
    try:
        parse_policy(name)
    except (KeyError, ValueError) as exc:
        raise PodRequestError(f"pod {pod.key}: metadata.annotations[{POLICY_ANNOTATION}]: {exc}") from None
    return name


def pod_shape(pod: Pod) -> tuple[int, int]:
    """(exclusive cores, gpus) the pod takes from the graph."""
    return whole_cores(pod.requests.get(CPU, 0)), pod.requests.get(GPU, 0)


def _slot(count: int, cores: int, gpus: int) -> dict[str, object]:
    shape: list[dict[str, object]] = []
    if cores:
        shape.append({"type": "core", "count": cores})
    if gpus:
        shape.append({"type": "gpu", "count": gpus})
    return {"type": "slot", "count": count, "label": TASK_LABEL, "with": shape}


def _jobspec(resources: list[dict[str, object]], duration: int, name: str, where: str) -> Jobspec:
    document = {
        "version": 1,
        "resources": resources,
        "attributes": {"system": {"duration": duration}},
        "tasks": [{"command": [name], "slot": TASK_LABEL, "count": {"per_slot": 1}}],
    }
    try:
        return jobspec_from_dict(document, source=where)
    except JobspecError as exc:  # pragma: no cover - the document is built here; kept as a clear error
        raise PodRequestError(f"{where}: {exc}") from None


def pod_jobspec(pod: Pod, duration: int) -> Jobspec | None:
    """The pod's jobspec for ``duration`` seconds, or None when it asks no core and no gpu (a ledger-only pod)."""
    cores, gpus = pod_shape(pod)
    if cores == 0 and gpus == 0:
        return None
    return _one_node_jobspec(cores, gpus, duration)


@lru_cache(maxsize=4096)
def _one_node_jobspec(cores: int, gpus: int, duration: int) -> Jobspec:
    """Jobspecs are immutable, so pods of one shape and duration share one."""
    return _jobspec([{"type": "node", "count": 1, "with": [_slot(1, cores, gpus)]}], duration, "pod", "a pod")


def gang_jobspec(pods: list[Pod], duration: int, name: str) -> Jobspec | None:
    """One jobspec of ``len(pods)`` slots for a gang of alike members (``slot(N) → [core(k), gpu(g)]``; several slots
    may share a node), used to reserve the gang at one start time. None when the members take different cores or
    gpus (their reservation is searched member by member: :mod:`kubeflux.scheduler.placing`) or nothing from the
    graph."""
    shapes = {pod_shape(pod) for pod in pods}
    if len(shapes) != 1:
        return None
    cores, gpus = shapes.pop()
    if cores == 0 and gpus == 0:
        return None
    return _jobspec([_slot(len(pods), cores, gpus)], duration, name, f"pod group {name}")


@lru_cache(maxsize=16)
def placement_from_output(output: str) -> Placement:
    """The node and vertices of a one-node match from the engine's ``simple`` output (remembered for the few
    latest outputs: the scheduler reads each match's output twice, to log it and to bind).

    The writer emits vertices children first, one ``name[count:x|s]`` per line indented by depth: the cores and
    gpus (the deepest lines) come first, then their node (the first line one level up). Other leaves (the memory
    pool a node-exclusive policy holds with the node) are not cores. Raises ValueError when the output names no
    node.
    """
    found = placements_from_output(output)
    if not found:
        raise ValueError(f"the match names no node: {output!r}")
    return found[0]


def placements_from_output(output: str) -> list[Placement]:
    """Every node of a match (a gang's, over several nodes) with the cores and gpus it took there, from the engine's
    ``simple`` output: each node's leaves come right before the node's own line (see
    :func:`placement_from_output`)."""
    found: list[Placement] = []
    cores: list[str] = []
    gpus: list[str] = []
    leaf_depth = -1
    for line in output.splitlines():
        stripped = line.strip()
        if not stripped:
            continue
        depth = len(stripped) - len(stripped.lstrip("-"))
        name = stripped.lstrip("-").split("[", 1)[0]
        if leaf_depth < 0:
            leaf_depth = depth
        if depth >= leaf_depth:
            if name.startswith("gpu"):
                gpus.append(name)
            elif name.startswith("core"):
                cores.append(name)
        elif cores or gpus:
            found.append(Placement(name, tuple(cores), tuple(gpus)))
            cores, gpus = [], []
    return found
