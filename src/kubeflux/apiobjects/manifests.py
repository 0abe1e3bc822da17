"""Kubernetes JSON/YAML objects → the scheduler's :mod:`kubeflux.scheduler.objects`, and back.

The input is a decoded manifest (``dict``), as ``yaml.safe_load`` or the API server gives it. Everything is
validated: a bad field raises :class:`ManifestError` naming the object (``Pod default/web-0``) and the field path
(``spec.containers[1].resources.requests.cpu``). What the real API server refuses in any object
(:mod:`kubeflux.apiobjects.rules`) is refused here in its words: names that are no DNS-1123 subdomain (a
namespace: no DNS-1123 label; a pod's ``spec.nodeName`` too), a ``spec.priority`` beyond Go's ``int32`` or an
``activeDeadlineSeconds`` beyond ``int64`` (``json: cannot unmarshal number 2147483648 into Go struct field
PodSpec.spec.priority of type int32``), a PodGroup's ``minMember`` or ``scheduleTimeoutSeconds`` beyond ``int32``.

A pod's effective request is computed as Kubernetes computes it (``k8s.io/component-helpers`` ``PodRequests``,
1.29+): regular containers summed; sidecars (init containers with ``restartPolicy: Always``) added to that sum; each
regular init container needs its own request plus the sidecars started before it; the pod needs the maximum of the
two, plus ``spec.overhead``. A container resource with a limit and no request requests its limit, as the API
server defaults it. ``spec.resources`` (pod-level resources, alpha in 1.32) is not read.

In-place resize (1.33+): a container whose status reports ``resources`` (the kubelet's view, with
``allocatedResources``) counts as kube-scheduler counts it: the maximum of the spec's request and what the kubelet
holds while a resize is proposed, pending (``PodResizePending``: ``Deferred``) or in progress
(``PodResizeInProgress``), and only what the kubelet holds once the resize is ``Infeasible``. The state is kept in
:attr:`Pod.resize <kubeflux.scheduler.objects.Pod.resize>`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from kubeflux.apiobjects.podterms import pod_terms, terms_to_manifest
from kubeflux.apiobjects.reader import (
    ManifestError,
    ManifestReader,
    format_timestamp,
    object_reader,
    parse_timestamp,
    resource_list_of,
)
from kubeflux.apiobjects.resourceclaims import pod_claims
from kubeflux.apiobjects.rules import MAX_INT32, POD_VOLUME_SOURCES, TOO_MANY_SOURCES, extra_source
from kubeflux.scheduler.objects import (
    DEFAULT_SCHEDULER,
    PREEMPT_LOWER_PRIORITY,
    PREEMPT_NEVER,
    Namespace,
    Node,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    Pod,
    PodGroup,
    PodPhase,
    ResourceList,
    Taint,
    Toleration,
    VolumeClaim,
)
from kubeflux.scheduler.phase import pod_phase
from kubeflux.scheduler.units import echo, format_quantity
from kubeflux.scheduler.validation import (
    min_member_problem,
    node_size_problem,
    seconds_problem,
)

__all__ = [
    "NATIVE_GANG_GROUP",
    "ManifestError",
    "ManifestReader",
    "format_timestamp",
    "namespace_from_manifest",
    "node_from_manifest",
    "node_selector_terms",
    "object_reader",
    "parse_timestamp",
    "pod_from_manifest",
    "pod_to_manifest",
    "podgroup_from_manifest",
    "read_taints",
    "read_tolerations",
    "resource_list",
    "toleration_to_manifest",
]

_TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
_SELECTOR_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt")
_RESIZE_STATES = ("Proposed", "InProgress", "Deferred", "Infeasible")


def resource_list(raw: Mapping[str, Any], where: str = "resources") -> ResourceList:
    """Canonical integers for a ``ResourceList`` mapping (``{"cpu": "500m"}`` → ``{"cpu": 500}``)."""
    return resource_list_of(ManifestReader(where, {}, (where,)), "", raw) if raw else {}


# --- times --------------------------------------------------------------------------------------------------


# --- pods ---------------------------------------------------------------------------------------------------


def _container_requests(reader: ManifestReader, path: str, container: Any) -> ResourceList:
    resources = reader.mapping(f"{path}.resources", reader.mapping(path, container).get("resources") or {})
    requests = reader.resources(f"{path}.resources.requests", resources.get("requests") or {})
    limits = reader.resources(f"{path}.resources.limits", resources.get("limits") or {})
    for name, amount in limits.items():
        requests.setdefault(name, amount)  # the API server defaults a missing request to the limit
    return requests


def _add(into: ResourceList, other: ResourceList) -> None:
    for name, amount in other.items():
        into[name] = into.get(name, 0) + amount


def _max(into: ResourceList, other: ResourceList) -> None:
    for name, amount in other.items():
        into[name] = max(into.get(name, 0), amount)


def _resize_status(reader: ManifestReader) -> str:
    """The pod's in-place resize state: the 1.33+ conditions ``PodResizePending`` (reason ``Deferred`` or
    ``Infeasible``) and ``PodResizeInProgress``, else the older ``status.resize``; empty when none."""
    for index, raw in enumerate(reader.sequence("status.conditions")):
        path = f"status.conditions[{index}]"
        condition = reader.mapping(path, raw)
        kind = condition.get("type")
        if condition.get("status", "True") != "True":
            continue
        if kind == "PodResizePending":
            reason = reader.string(f"{path}.reason", condition.get("reason") or "")
            if reason not in ("Deferred", "Infeasible"):
                raise reader.fail(f"{path}.reason", f"must be Deferred or Infeasible, got {reason!r}")
            return reason
        if kind == "PodResizeInProgress":
            return "InProgress"
    resize = reader.string("status.resize")
    if resize and resize not in _RESIZE_STATES:
        raise reader.fail("status.resize", f"must be one of {', '.join(_RESIZE_STATES)}, got {resize!r}")
    return resize


def _status_requests(reader: ManifestReader) -> dict[str, ResourceList]:
    """Container name → what the kubelet reports it holds: the maximum of ``resources.requests`` and
    ``allocatedResources`` of its status, for the containers whose status reports resources at all."""
    result: dict[str, ResourceList] = {}
    for field in ("status.containerStatuses", "status.initContainerStatuses"):
        for index, raw in enumerate(reader.sequence(field)):
            path = f"{field}[{index}]"
            status = reader.mapping(path, raw)
            resources = status.get("resources")
            if resources is None:
                continue
            resources = reader.mapping(f"{path}.resources", resources)
            held = reader.resources(f"{path}.resources.requests", resources.get("requests") or {})
            _max(held, reader.resources(f"{path}.allocatedResources", status.get("allocatedResources") or {}))
            result[reader.string(f"{path}.name", status.get("name") or "")] = held
    return result


def _effective(spec: ResourceList, held: ResourceList | None, resize: str) -> ResourceList:
    """A container's request as kube-scheduler counts it during an in-place resize (``PodRequests`` with status
    resources): the maximum of what the spec asks and what the kubelet holds, or only what the kubelet holds
    once the resize is found ``Infeasible``."""
    if held is None:
        return spec
    if resize == "Infeasible":
        return dict(held)
    result = dict(spec)
    _max(result, held)
    return result


def _container_name(reader: ManifestReader, path: str, container: Any) -> str:
    return reader.string(f"{path}.name", reader.mapping(path, container).get("name") or "")


def _pod_requests(reader: ManifestReader, resize: str) -> ResourceList:
    held = _status_requests(reader)
    total: ResourceList = {}
    containers = reader.sequence("spec.containers")
    for index, container in enumerate(containers):
        path = f"spec.containers[{index}]"
        requests = _container_requests(reader, path, container)
        _add(total, _effective(requests, held.get(_container_name(reader, path, container)), resize))
    sidecars: ResourceList = {}
    init_peak: ResourceList = {}
    for index, container in enumerate(reader.sequence("spec.initContainers")):
        path = f"spec.initContainers[{index}]"
        requests = _container_requests(reader, path, container)
        policy = reader.string(f"{path}.restartPolicy", reader.mapping(path, container).get("restartPolicy") or "")
        if policy == "Always":  # a sidecar: runs beside everything started after it (and may be resized)
            requests = _effective(requests, held.get(_container_name(reader, path, container)), resize)
            _add(total, requests)
            _add(sidecars, requests)
            needed = dict(sidecars)
        elif policy not in ("", "Never", "OnFailure"):  # these two are a plain init container's (v1.35+)
            supported = '"Always", "Never", "OnFailure"'  # the real server's words, its list sorted
            raise reader.fail(f"{path}.restartPolicy", f'Unsupported value: "{policy}": supported values: {supported}')
        else:
            needed = dict(requests)
            _add(needed, sidecars)
        _max(init_peak, needed)
    _max(total, init_peak)
    _add(total, reader.resources("spec.overhead"))
    return total


def _check_effect(reader: ManifestReader, path: str, effect: str) -> None:
    """A taint's (or a non-empty toleration's) ``effect`` is one Kubernetes knows."""
    if effect not in _TAINT_EFFECTS:
        raise reader.fail(f"{path}.effect", f"must be one of {', '.join(_TAINT_EFFECTS)}, got {effect!r}")


def toleration_to_manifest(toleration: Toleration) -> dict[str, str]:
    """A toleration as a pod spec lists it (empty fields left out)."""
    t = toleration
    return {k: v for k, v in (("key", t.key), ("operator", t.operator), ("value", t.value), ("effect", t.effect)) if v}


def read_tolerations(reader: ManifestReader, at: str = "spec.tolerations") -> tuple[Toleration, ...]:
    """The tolerations listed at ``at`` (a pod's, or a Kueue ResourceFlavor's), held to the API server's checks."""
    result = []
    for path, item in reader.entries(at):
        key = reader.field(path, item, "key")
        operator = reader.field(path, item, "operator", "Equal")
        value = reader.field(path, item, "value")
        effect = reader.field(path, item, "effect")
        if operator not in ("Equal", "Exists"):
            raise reader.fail(f"{path}.operator", f"must be Equal or Exists, got {operator!r}")
        if operator == "Exists" and value:
            raise reader.fail(f"{path}.value", "must be empty when operator is Exists")
        if not key and operator != "Exists":
            raise reader.fail(f"{path}.operator", "must be Exists when key is empty")
        if effect:
            _check_effect(reader, path, effect)
        result.append(Toleration(key=key, operator=operator, value=value, effect=effect))
    return tuple(result)


def _requirements(reader: ManifestReader, path: str, raw: Any) -> tuple[NodeSelectorRequirement, ...]:
    result = []
    for item_path, item in reader.entries(path, raw if raw is not None else []):
        key = reader.field(item_path, item, "key")
        operator = reader.field(item_path, item, "operator")
        raw_values = reader.sequence(f"{item_path}.values", item.get("values") or [])
        values = tuple(reader.string(f"{item_path}.values[{i}]", v) for i, v in enumerate(raw_values))
        if not key:
            raise reader.fail(f"{item_path}.key", "required")
        if operator not in _SELECTOR_OPERATORS:
            allowed = ", ".join(_SELECTOR_OPERATORS)
            raise reader.fail(f"{item_path}.operator", f"must be one of {allowed}, got {operator!r}")
        if operator in ("In", "NotIn") and not values:
            raise reader.fail(f"{item_path}.values", f"must be non-empty for operator {operator}")
        if operator in ("Exists", "DoesNotExist") and values:
            raise reader.fail(f"{item_path}.values", f"must be empty for operator {operator}")
        if operator in ("Gt", "Lt") and (len(values) != 1 or not values[0].lstrip("-").isdigit()):
            raise reader.fail(f"{item_path}.values", f"must be a single integer for operator {operator}")
        result.append(NodeSelectorRequirement(key=key, operator=operator, values=values))
    return tuple(result)


def _node_affinity(reader: ManifestReader) -> tuple[NodeSelectorTerm, ...]:
    return node_selector_terms(
        reader, "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms"
    )


def node_selector_terms(reader: ManifestReader, path: str) -> tuple[NodeSelectorTerm, ...]:
    """The ``nodeSelectorTerms`` at ``path`` (a pod's required node affinity, a PersistentVolume's), each
    requirement checked; at least one term when the selector is there."""
    terms = []
    for term_path, term in reader.entries(path):
        expressions = _requirements(reader, f"{term_path}.matchExpressions", term.get("matchExpressions"))
        fields = _requirements(reader, f"{term_path}.matchFields", term.get("matchFields"))
        for field_index, requirement in enumerate(fields):
            if requirement.key != "metadata.name" or requirement.operator not in ("In", "NotIn"):
                raise reader.fail(
                    f"{term_path}.matchFields[{field_index}]", "only metadata.name with In or NotIn is supported"
                )
        terms.append(NodeSelectorTerm(match_expressions=expressions, match_fields=fields))
    if reader.get(path.rsplit(".", 1)[0]) is not None and not terms:
        raise reader.fail(path, "must have at least one term")
    return tuple(terms)


def _owner(reader: ManifestReader) -> str:
    owners = reader.sequence("metadata.ownerReferences")
    chosen: Mapping[str, Any] | None = None
    for index, raw in enumerate(owners):
        owner = reader.mapping(f"metadata.ownerReferences[{index}]", raw)
        if chosen is None or owner.get("controller") is True:
            chosen = owner
        if owner.get("controller") is True:
            break
    if chosen is None:
        return ""
    return f"{chosen.get('kind', '')}/{chosen.get('name', '')}"


def _volume_claims(reader: ManifestReader, pod: str) -> tuple[VolumeClaim, ...]:
    """The claims of ``spec.volumes``: each ``persistentVolumeClaim.claimName``, and each ``ephemeral`` volume's
    claim, ``<pod>-<volume>``."""
    found = []
    for path, volume in reader.entries("spec.volumes"):
        extra = extra_source(volume, POD_VOLUME_SOURCES)
        if extra is not None:
            raise reader.fail(f"{path}.{extra}", TOO_MANY_SOURCES)
        if volume.get("persistentVolumeClaim") is not None:
            source = reader.mapping(f"{path}.persistentVolumeClaim", volume["persistentVolumeClaim"])
            name = reader.field(f"{path}.persistentVolumeClaim", source, "claimName")
            if not name:
                raise reader.fail(f"{path}.persistentVolumeClaim.claimName", "required")
            found.append(VolumeClaim(name))
        elif volume.get("ephemeral") is not None:
            found.append(VolumeClaim(f"{pod}-{reader.field(path, volume, 'name')}", ephemeral=True))
    return tuple(found)


def _scheduling_gates(reader: ManifestReader) -> tuple[str, ...]:
    """``spec.schedulingGates``' names (each gate is ``{name: ...}``; the API server checks the names)."""
    if reader.get("spec.schedulingGates") is None:
        return ()
    return tuple(reader.field(path, item, "name") for path, item in reader.entries("spec.schedulingGates"))


def pod_from_manifest(obj: Any, *, default_namespace: str = "default") -> Pod:
    """A :class:`Pod` from a ``v1`` Pod manifest (requests, placement constraints, status, owner)."""
    reader = ManifestReader("Pod", obj, ("Pod",))
    name, namespace = reader.identity("Pod", default_namespace)
    phase_text = reader.string("status.phase") or PodPhase.PENDING.value
    try:
        phase = pod_phase(phase_text)
    except ValueError as exc:
        raise reader.fail("status.phase", f"unknown phase {phase_text!r}") from exc
    deadline = reader.go_integer("PodSpec", "spec.activeDeadlineSeconds", "int64")
    problem = None if deadline is None else seconds_problem(deadline)
    if problem is not None:
        raise reader.fail("spec.activeDeadlineSeconds", problem)
    priority = reader.go_integer("PodSpec", "spec.priority")
    preemption = reader.string("spec.preemptionPolicy") or PREEMPT_LOWER_PRIORITY
    if preemption not in (PREEMPT_LOWER_PRIORITY, PREEMPT_NEVER):
        supported = f'"{PREEMPT_NEVER}", "{PREEMPT_LOWER_PRIORITY}"'
        raise reader.fail("spec.preemptionPolicy", f'Unsupported value: "{preemption}": supported values: {supported}')
    node_name = reader.string("spec.nodeName")
    if node_name:
        reader.dns_name("spec.nodeName", node_name)
    resize = _resize_status(reader)
    labels = reader.string_map("metadata.labels")
    return Pod(
        namespace=namespace,
        name=name,
        uid=reader.string("metadata.uid"),
        scheduler_name=reader.string("spec.schedulerName") or DEFAULT_SCHEDULER,
        priority=priority or 0,
        creation_time=reader.timestamp("metadata.creationTimestamp") or 0.0,
        requests=_pod_requests(reader, resize),
        labels=labels,
        annotations=reader.string_map("metadata.annotations"),
        node_selector=reader.string_map("spec.nodeSelector"),
        tolerations=read_tolerations(reader),
        required_node_affinity=_node_affinity(reader),
        node_name=node_name,
        phase=phase,
        deleted=reader.get("metadata.deletionTimestamp") is not None,
        active_deadline_seconds=None if deadline is None else float(deadline),
        owner=_owner(reader),
        manifest=dict(obj),
        resize=resize,
        scheduling_group=reader.string("spec.schedulingGroup.podGroupName"),
        preemption_policy=preemption,
        scheduling_gates=_scheduling_gates(reader),
        terms=pod_terms(reader, namespace, labels),
        volume_claims=_volume_claims(reader, name) if reader.get("spec.volumes") is not None else (),
        resource_claims=pod_claims(reader) if _may_claim(obj.get("spec")) else (),
    )


def _may_claim(spec: Any) -> bool:
    """Whether a pod spec names ResourceClaims, or might (anything :func:`pod_claims` would read or refuse): a
    ``resourceClaims`` field, a container's ``resources.claims``, or a part of another type than a reader expects.
    Most pods name none, and :func:`pod_claims` (interpreted, as the rest of Dynamic Resource Allocation) walked the
    containers again for ~8 % of a pod's reading."""
    if type(spec) is not dict or "resourceClaims" in spec:
        return True
    for kind in ("initContainers", "containers"):
        containers = spec.get(kind)
        if containers is None:
            continue
        if type(containers) is not list:
            return True
        for container in containers:
            if type(container) is not dict:
                return True
            resources = container.get("resources")
            if resources is not None and (type(resources) is not dict or "claims" in resources):
                return True
    return False


# --- nodes and pod groups -----------------------------------------------------------------------------------


def read_taints(reader: ManifestReader, at: str = "spec.taints") -> tuple[Taint, ...]:
    """The taints listed at ``at`` (a node's, or a Kueue ResourceFlavor's ``spec.nodeTaints``): a key and a known
    effect each."""
    result = []
    for path, item in reader.entries(at):
        key = reader.field(path, item, "key")
        effect = reader.field(path, item, "effect")
        if not key:
            raise reader.fail(f"{path}.key", "required")
        _check_effect(reader, path, effect)
        result.append(Taint(key=key, value=reader.field(path, item, "value"), effect=effect))
    return tuple(result)


def _ready(reader: ManifestReader) -> bool:
    """The ``Ready`` condition; a node that reports no conditions at all (a bare test manifest) is ready."""
    for index, raw in enumerate(reader.sequence("status.conditions")):
        condition = reader.mapping(f"status.conditions[{index}]", raw)
        if condition.get("type") == "Ready":
            return condition.get("status") == "True"
    return True


def namespace_from_manifest(obj: Any) -> Namespace:
    """A ``v1`` Namespace: its name and labels (what a ``namespaceSelector`` selects on)."""
    reader = ManifestReader("Namespace", obj, ("Namespace",))
    return Namespace(reader.string("metadata.name"), reader.string_map("metadata.labels"))


def node_from_manifest(obj: Any) -> Node:
    """A :class:`Node` from a ``v1`` Node manifest: ``status.allocatable`` (else ``capacity``), labels, taints,
    cordon and the ``Ready`` condition."""
    reader = ManifestReader("Node", obj, ("Node",))
    name = reader.name()
    allocatable_path = "status.allocatable" if reader.get("status.allocatable") is not None else "status.capacity"
    allocatable = reader.resources(allocatable_path)
    size = node_size_problem(allocatable)
    if size is not None:
        raise reader.fail(f"{allocatable_path}.{size[0]}", size[1])
    return Node(
        name=name,
        uid=reader.string("metadata.uid"),
        allocatable=allocatable,
        labels=reader.string_map("metadata.labels"),
        taints=read_taints(reader),
        unschedulable=reader.boolean("spec.unschedulable"),
        ready=_ready(reader),
    )


NATIVE_GANG_GROUP: Final = "scheduling.k8s.io"
"""The API group of Kubernetes' own PodGroup (1.35+, alpha); coscheduling's is ``scheduling.x-k8s.io``."""


def _native_min_count(reader: ManifestReader) -> int:
    """``spec.schedulingPolicy`` of a ``scheduling.k8s.io`` PodGroup: exactly one of ``basic`` (pods placed
    independently: a minimum of 1) and ``gang`` (``minCount`` pods placed at once)."""
    policy = reader.mapping("spec.schedulingPolicy", reader.get("spec.schedulingPolicy", {}))
    chosen = [name for name in ("basic", "gang") if policy.get(name) is not None]
    if len(chosen) != 1:
        raise reader.fail("spec.schedulingPolicy", "exactly one of basic and gang must be set")
    if chosen[0] == "basic":
        return 1
    min_count = reader.get("spec.schedulingPolicy.gang.minCount")
    problem = min_member_problem(min_count)
    if problem is not None:
        raise reader.fail("spec.schedulingPolicy.gang.minCount", problem)
    return int(min_count)


def podgroup_from_manifest(obj: Any, *, default_namespace: str = "default") -> PodGroup:
    """A :class:`PodGroup` from a ``scheduling.x-k8s.io/v1alpha1`` PodGroup (``minResources`` is not read) or a
    ``scheduling.k8s.io`` one (``spec.schedulingPolicy``; it has no timeout)."""
    reader = ManifestReader("PodGroup", obj, ("PodGroup",))
    name, namespace = reader.identity("PodGroup", default_namespace)
    if reader.string("apiVersion").partition("/")[0] == NATIVE_GANG_GROUP:
        return PodGroup(
            namespace=namespace,
            name=name,
            min_member=_native_min_count(reader),
            creation_time=reader.timestamp("metadata.creationTimestamp") or 0.0,
            uid=reader.string("metadata.uid"),
            native=True,
        )
    min_member = reader.get("spec.minMember")
    problem = min_member_problem(min_member)
    if problem is not None:
        raise reader.fail("spec.minMember", problem)
    timeout = reader.integer("spec.scheduleTimeoutSeconds")
    problem = None if timeout is None else seconds_problem(timeout)
    if timeout is not None and timeout > MAX_INT32:  # the CRD's format: int32
        problem = f"must be at most {MAX_INT32} (an int32), got {echo(timeout)}"
    if problem is not None:
        raise reader.fail("spec.scheduleTimeoutSeconds", problem)
    return PodGroup(
        namespace=namespace,
        name=name,
        min_member=min_member,
        schedule_timeout_seconds=None if timeout is None else float(timeout),
        creation_time=reader.timestamp("metadata.creationTimestamp") or 0.0,
        uid=reader.string("metadata.uid"),
    )


# --- the reverse ----------------------------------------------------------------------------------------------


def _requirement_to_dict(requirement: NodeSelectorRequirement) -> dict[str, Any]:
    result: dict[str, Any] = {"key": requirement.key, "operator": requirement.operator}
    if requirement.values:
        result["values"] = list(requirement.values)
    return result


def _volume_of(pod: Pod, claim: VolumeClaim, index: int) -> dict[str, Any]:
    """A ``spec.volumes`` entry naming ``claim``."""
    if not claim.ephemeral:
        return {"name": f"claim-{index}", "persistentVolumeClaim": {"claimName": claim.name}}
    template = {"spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}
    return {"name": claim.name.removeprefix(f"{pod.name}-"), "ephemeral": {"volumeClaimTemplate": template}}


def pod_to_manifest(pod: Pod) -> dict[str, Any]:
    """A minimal valid ``v1`` Pod for ``pod``: one ``main`` container requesting the pod's effective request.

    :func:`pod_from_manifest` reads it back to an equal :class:`Pod` apart from ``manifest``, ``deleted`` and
    ``owner`` (an ownerReference needs the owner's UID, which a :class:`Pod` does not carry).
    """
    metadata: dict[str, Any] = {"name": pod.name, "namespace": pod.namespace}
    if pod.uid:
        metadata["uid"] = pod.uid
    if pod.labels:
        metadata["labels"] = dict(pod.labels)
    if pod.annotations:
        metadata["annotations"] = dict(pod.annotations)
    metadata["creationTimestamp"] = format_timestamp(pod.creation_time)
    requests = {name: format_quantity(name, amount) for name, amount in sorted(pod.requests.items())}
    container: dict[str, Any] = {"name": "main", "image": "registry.k8s.io/pause:3.9"}
    if requests:
        container["resources"] = {"requests": requests}
    spec: dict[str, Any] = {"schedulerName": pod.scheduler_name, "containers": [container]}
    if pod.priority:
        spec["priority"] = pod.priority
    if pod.preemption_policy != PREEMPT_LOWER_PRIORITY:
        spec["preemptionPolicy"] = pod.preemption_policy
    if pod.node_name:
        spec["nodeName"] = pod.node_name
    if pod.node_selector:
        spec["nodeSelector"] = dict(pod.node_selector)
    if pod.tolerations:
        spec["tolerations"] = [toleration_to_manifest(t) for t in pod.tolerations]
    if pod.required_node_affinity:
        terms = []
        for term in pod.required_node_affinity:
            raw: dict[str, Any] = {}
            if term.match_expressions:
                raw["matchExpressions"] = [_requirement_to_dict(r) for r in term.match_expressions]
            if term.match_fields:
                raw["matchFields"] = [_requirement_to_dict(r) for r in term.match_fields]
            terms.append(raw)
        spec["affinity"] = {
            "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}
        }
    if pod.active_deadline_seconds is not None:
        spec["activeDeadlineSeconds"] = max(1, round(pod.active_deadline_seconds))
    if pod.scheduling_group:
        spec["schedulingGroup"] = {"podGroupName": pod.scheduling_group}
    if pod.terms is not None:
        terms_to_manifest(pod.terms, spec)
    if pod.volume_claims:
        spec["volumes"] = [_volume_of(pod, claim, i) for i, claim in enumerate(pod.volume_claims)]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec, "status": {"phase": pod.phase.value}}
