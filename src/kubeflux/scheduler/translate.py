"""Pods → jobspecs and engine results → placements: the one place that knows how a pod becomes a Fluxion job.

**The graph of a node** (:func:`node_spec`, shaped by a :class:`NodeShape`): ``node → core × C, gpu × G, memory``
with ``C`` the node's allocatable cpu in *whole* cores (``3500m`` → 3) and ``G`` the sum of its GPU resources
(:attr:`NodeShape.gpu_resources`, by default ``nvidia.com/gpu``); or, on a node with sockets (its
:attr:`NodeShape.sockets_label`, else :attr:`NodeShape.default_sockets`), ``node → socket × S → [core, gpu,
memory]``, the cores, gpus and memory split as evenly as possible over the sockets (core and gpu names stay
numbered per node). Everything else a pod can ask (millicores, memory bytes, ephemeral storage, other extended
resources, the pod count) — and each GPU resource by its own name — is kept exactly in a per-node ledger
(:mod:`kubeflux.scheduler.ledger`), which is also kube-scheduler's NodeResourcesFit filter.

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

**One pod, one job** (:func:`pod_jobspec`): ``node(1) → slot(1, label task) → [core(k), gpu(g)]``, or on socketed
nodes ``node(1) → socket(n) → slot(1) → [core(⌈k/n⌉), gpu(⌈g/n⌉)]`` with ``n`` the fewest sockets of the largest
socket that hold the pod (1 for most pods: Fluxion's walk binds a slot to the vertex holding its cores, so a pod's
cores come from one socket, the one the match policy prefers; a pod larger than a socket takes ``n`` sockets evenly,
up to ``n - 1`` cores or gpus beyond its request when they do not divide evenly, which an allocation releases at once:
:meth:`kubeflux.scheduler.placing.Placer._trimmed`; a pod no socket has room for now is put over several by
:meth:`~kubeflux.scheduler.placing.Placer._span_sockets`); its
duration is the pod's ``activeDeadlineSeconds``, else the :data:`DURATION_ANNOTATION` (or the walltime
annotation), else the graph horizon. A pod group is matched as one job per member, all or nothing
(:mod:`kubeflux.scheduler.core`), so members may differ and each pod maps to exactly one node, and a member that
ends releases exactly its own job.

**Policy**: the scheduler profile's (default ``lonode``), or the pod's :data:`POLICY_ANNOTATION`.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Final

from kubeflux.jobspec import Jobspec, JobspecError, jobspec_from_dict
from kubeflux.match.policy import parse_policy
from kubeflux.match.writers import Placement, PlacementWriter
from kubeflux.resources import NodeSpec
from kubeflux.scheduler.objects import CPU, GPU, MEMORY, WALLTIME_ANNOTATION, Node, Pod, ResourceList
from kubeflux.scheduler.topology import DEFAULT_LEVELS, check_levels, domains_of
from kubeflux.scheduler.units import DurationError, parse_duration
from kubeflux.scheduler.validation import NODE_VERTICES_LIMIT, InvalidObject, PodRequestError

__all__ = [
    "DURATION_ANNOTATION",
    "MAX_SOCKETS",
    "POLICY_ANNOTATION",
    "SOCKETS_LABEL",
    "TASK_LABEL",
    "NodeShape",
    "Placement",
    "PlacementWriter",
    "gang_jobspec",
    "gpu_count",
    "node_spec",
    "placement_from_output",
    "placements_from_output",
    "pod_duration",
    "pod_jobspec",
    "pod_policy",
    "pod_shape",
    "whole_cores",
]

POLICY_ANNOTATION: Final = "kubeflux.io/match-policy"
"""A pod's own match policy (``first``, ``low``, ``lonode``, ``hinode`` …), overriding the profile's."""
DURATION_ANNOTATION: Final = "kubeflux.io/duration"
"""How long the pod's allocation is planned for: seconds, or a Go duration (``90m``)."""
TASK_LABEL: Final = "task"
MILLICORES: Final = 1000
SOCKETS_LABEL: Final = "kubeflux.io/sockets"
"""The node label the simulator writes for a node's socket count (``kubeflux simulate --sockets``)."""
MAX_SOCKETS: Final = 1024
"""The most sockets a node may be given (a label asking more is a mistake, not a machine)."""
DEFAULT_GPU_RESOURCES: Final = (GPU,)


def whole_cores(millicores: int) -> int:
    """The exclusive cores for a cpu request or allocatable: ``2500`` → 2."""
    return millicores // MILLICORES


def gpu_count(resources: ResourceList, gpu_resources: tuple[str, ...] = DEFAULT_GPU_RESOURCES) -> int:
    """The gpus among ``resources`` (a request or an allocatable): the sum of its ``gpu_resources``."""
    if len(gpu_resources) == 1:
        return resources.get(gpu_resources[0], 0)
    return sum(resources.get(name, 0) for name in gpu_resources)


@dataclass(frozen=True, slots=True)
class NodeShape:
    """How a Kubernetes node becomes graph vertices (``serve``'s ``nodes`` configuration section).

    ``sockets_label``: a node label whose value is the node's socket count (empty: none is read);
    ``default_sockets``: the sockets of a node without a usable label (0: no socket level, the cores and gpus are
    the node's children). With a label, the default must be at least 1, so that every node has sockets: a pod's
    jobspec walks through a socket level that every node must have (see the module docstring).
    ``gpu_resources``: the extended resources that are GPUs (a node's gpu vertices are their sum; a pod takes as
    many as it asks of them in total, while the ledger checks each by name).
    ``levels``: node labels forming topology levels above the nodes, top first (:mod:`kubeflux.scheduler.topology`;
    only those some node carries are built).
    """

    sockets_label: str = ""
    default_sockets: int = 0
    gpu_resources: tuple[str, ...] = field(default=DEFAULT_GPU_RESOURCES)
    levels: tuple[str, ...] = DEFAULT_LEVELS

    def __post_init__(self) -> None:
        object.__setattr__(self, "levels", check_levels(self.levels))
        if not 0 <= self.default_sockets <= MAX_SOCKETS:
            raise ValueError(f"default sockets must be in [0, {MAX_SOCKETS}], got {self.default_sockets}")
        if self.sockets_label and self.default_sockets < 1:
            raise ValueError("with a sockets label, the default sockets must be at least 1 (every node has sockets)")
        if not self.gpu_resources or len(set(self.gpu_resources)) != len(self.gpu_resources):
            raise ValueError(f"gpu resources must be distinct and at least one, got {list(self.gpu_resources)}")

    def check(self, node: Node) -> None:
        """Raise :class:`InvalidObject` when the node's gpus, all its GPU resources summed, are more than a graph
        node holds (:data:`NODE_VERTICES_LIMIT`); ``nvidia.com/gpu`` alone is checked with every node."""
        if self.gpu_resources != DEFAULT_GPU_RESOURCES:
            total = gpu_count(node.allocatable, self.gpu_resources)
            if total > NODE_VERTICES_LIMIT:
                named = "+".join(self.gpu_resources)
                raise InvalidObject(
                    f"Node {node.name}",
                    f"allocatable[{named}]",
                    f"more than {NODE_VERTICES_LIMIT} GPUs in total, got {total}",
                )

    def sockets(self, node: Node) -> tuple[int, str | None]:
        """The node's socket count, and why its label was not used (None when it was, or there is none): a value
        that is not a whole number from 1 to :data:`MAX_SOCKETS`, or more sockets than the node has whole cores."""
        raw = node.labels.get(self.sockets_label) if self.sockets_label else None
        if raw is None:
            return self.default_sockets, None
        text = raw.strip()
        value = int(text) if text.isascii() and text.isdigit() and len(text) <= 5 else 0  # not '²', not 10**9
        problem = None
        if not 1 <= value <= MAX_SOCKETS:
            problem = f"must be a whole number of sockets from 1 to {MAX_SOCKETS}, got {raw!r}"
        else:
            cores = whole_cores(node.allocatable.get(CPU, 0))
            if value > max(cores, 1):
                problem = f"{value} sockets but only {cores} whole cores"
        if problem is not None:
            why = f"Node {node.name}: metadata.labels[{self.sockets_label}]: {problem}; "
            return self.default_sockets, why + f"taken as {self.default_sockets} socket(s)"
        return value, None


def node_spec(
    node: Node,
    allocatable: dict[str, int] | None = None,
    shape: NodeShape | None = None,
    levels: tuple[str, ...] = (),
) -> NodeSpec:
    """The graph node for ``node`` (``allocatable`` overrides the node's, for capped sharing policies), shaped by
    ``shape`` (the default: no sockets, ``nvidia.com/gpu``), below its domains of the topology ``levels`` (the
    labels of the levels in the graph: :func:`kubeflux.scheduler.topology.present_levels`)."""
    alloc = node.allocatable if allocatable is None else allocatable
    domains = domains_of(node.labels, levels) if levels else ()
    if shape is None:
        return NodeSpec(
            node.name,
            cores=whole_cores(alloc.get(CPU, 0)),
            memory=alloc.get(MEMORY, 0),
            gpus=alloc.get(GPU, 0),
            domains=domains,
        )
    return NodeSpec(
        node.name,
        cores=whole_cores(alloc.get(CPU, 0)),
        memory=alloc.get(MEMORY, 0),
        gpus=gpu_count(alloc, shape.gpu_resources),
        sockets=shape.sockets(node)[0],
        domains=domains,
    )


_SECONDS: dict[str, float] = {}
"""Durations read from annotations, by their text (one per pod and pass otherwise; at most
:data:`_SECONDS_KEPT` kept)."""
_SECONDS_KEPT = 4096


def _seconds(pod: Pod, annotation: str, raw: str) -> float:
    value = _SECONDS.get(raw)
    if value is not None:
        return value
    try:
        value = float(raw)
    except ValueError:
        try:
            value = parse_duration(raw)
        except DurationError as exc:
            raise PodRequestError(f"pod {pod.key}: metadata.annotations[{annotation}]: {exc}") from None
    if not math.isfinite(value) or value <= 0:
        why = f"must be a positive duration, got {raw!r}"
        raise PodRequestError(f"pod {pod.key}: metadata.annotations[{annotation}]: {why}")
    if len(_SECONDS) >= _SECONDS_KEPT:
        _SECONDS.clear()
    _SECONDS[raw] = value
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
            return _seconds(pod, name, raw)
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


def pod_shape(pod: Pod, gpu_resources: tuple[str, ...] = DEFAULT_GPU_RESOURCES) -> tuple[int, int]:
    """(exclusive cores, gpus) the pod takes from the graph (its gpus: its requests of ``gpu_resources``)."""
    return whole_cores(pod.requests.get(CPU, 0)), gpu_count(pod.requests, gpu_resources)


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


def pod_jobspec(
    pod: Pod,
    duration: int,
    gpu_resources: tuple[str, ...] = DEFAULT_GPU_RESOURCES,
    socket_size: tuple[int, int] | None = None,
) -> Jobspec | None:
    """The pod's jobspec for ``duration`` seconds, or None when it asks no core and no gpu (a ledger-only pod).

    ``socket_size``: on a graph whose nodes have sockets, the (cores, gpus) of its largest socket (see
    :meth:`kubeflux.scheduler.graphview.GraphView.socket_size`); the pod then takes its cores and gpus from the
    fewest sockets that hold it, evenly."""
    cores, gpus = pod_shape(pod, gpu_resources)
    if cores == 0 and gpus == 0:
        return None
    if socket_size is None:
        return _one_node_jobspec(cores, gpus, duration, 0)
    per_cores, per_gpus = socket_size
    sockets = max(1, -(-cores // per_cores) if per_cores else 1, -(-gpus // per_gpus) if per_gpus else 1)
    return _one_node_jobspec(-(-cores // sockets), -(-gpus // sockets), duration, sockets)


@lru_cache(maxsize=4096)
def _one_node_jobspec(cores: int, gpus: int, duration: int, sockets: int = 0) -> Jobspec:
    """Jobspecs are immutable, so pods of one shape and duration share one. ``sockets`` > 0: the slot is under
    that many sockets of the node (``cores`` and ``gpus`` are then per socket)."""
    below: dict[str, object] = _slot(1, cores, gpus)
    if sockets:
        below = {"type": "socket", "count": sockets, "with": [below]}
    return _jobspec([{"type": "node", "count": 1, "with": [below]}], duration, "pod", "a pod")


def gang_jobspec(
    pods: list[Pod],
    duration: int,
    gpu_resources: tuple[str, ...] = DEFAULT_GPU_RESOURCES,
    *,
    one_per_node: bool = False,
) -> Jobspec | None:
    """One jobspec of ``len(pods)`` slots for a gang of alike members (``slot(N) → [core(k), gpu(g)]``; several slots
    may share a node, or a socket: a slot binds to the vertex that holds its cores), used to place or reserve the
    gang at one start time; ``one_per_node`` (members that may not share a node: required anti-affinity among them
    on ``kubernetes.io/hostname``, or the same host ports): ``node(N) → slot(1) → [core(k), gpu(g)]``, one node
    each. None when the members take different cores or gpus (their reservation is searched member by member:
    :mod:`kubeflux.scheduler.placing`) or nothing from the graph."""
    shapes = {pod_shape(pod, gpu_resources) for pod in pods}
    if len(shapes) != 1:
        return None
    cores, gpus = shapes.pop()
    if cores == 0 and gpus == 0:
        return None
    if one_per_node:
        return _nodes_jobspec(len(pods), cores, gpus, duration)
    return _slots_jobspec(len(pods), cores, gpus, duration)


@lru_cache(maxsize=1024)
def _nodes_jobspec(count: int, cores: int, gpus: int, duration: int) -> Jobspec:
    """A slot on each of ``count`` nodes (members that may not share one)."""
    nodes = {"type": "node", "count": count, "with": [_slot(1, cores, gpus)]}
    return _jobspec([nodes], duration, "pod group", "a pod group")


@lru_cache(maxsize=4096)
def _slots_jobspec(count: int, cores: int, gpus: int, duration: int) -> Jobspec:
    """Gangs of one shape, size and duration share one jobspec (it is immutable, as a pod's)."""
    return _jobspec([_slot(count, cores, gpus)], duration, "pod group", "a pod group")


def placement_from_output(output: str) -> Placement:
    """The node and vertices of a one-node match from the engine's ``simple`` output (see
    :func:`placements_from_output`): its first node. Raises ValueError when the output names no node."""
    found = placements_from_output(output)
    if not found:
        raise ValueError(f"the match names no node: {output!r}")
    return found[0]


_CORE = re.compile(r"-(core[^\[\s]*)\[")
_GPU = re.compile(r"-(gpu[^\[\s]*)\[")


@lru_cache(maxsize=8)
def _node_line(depth: int) -> re.Pattern[str]:
    """A line of the ``simple`` writer at exactly ``depth`` dashes; its vertex name."""
    return re.compile(rf"^[ \t]*-{{{depth}}}([^\[\s-][^\[\s]*)", re.MULTILINE)


@lru_cache(maxsize=16)
def placements_from_output(output: str) -> tuple[Placement, ...]:
    """Every node of a match (a gang's, over several nodes) with the cores and gpus it took there, from the engine's
    ``simple`` output, as ``resource-query -F simple`` prints it (the scheduler's own engine writes placements
    directly: :class:`PlacementWriter`, checked against this reading).

    The writer emits vertices children first, one ``name[count:x|s]`` per line indented by depth: the cores and
    gpus come first, then their socket (on a node with sockets), then their node, one level below the cluster (the
    last, shallowest line): each node's leaves are the lines between the node line before it and its own. Other
    leaves (the memory pool a node-exclusive policy holds with the node) are not cores. Read with regular
    expressions, not line by line: a gang of 16 nodes of 64 cores has over a thousand lines."""
    text = output.rstrip()
    if not text:
        return ()
    last = text[text.rfind("\n") + 1 :].strip()
    nodes = _node_line(len(last) - len(last.lstrip("-")) + 3)  # the cluster's children: three dashes deeper
    found: list[Placement] = []
    start = 0
    for line in nodes.finditer(output):
        cores = _CORE.findall(output, start, line.start())
        gpus = _GPU.findall(output, start, line.start())
        if cores or gpus:
            found.append(Placement(line.group(1), tuple(cores), tuple(gpus)))
        start = line.end()
    return tuple(found)
