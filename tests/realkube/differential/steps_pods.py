"""The sequence, part 1: namespaces, pods (CRUD, validation, conflicts, patches, status, bindings, graceful
deletion, preconditions, eviction) and nodes."""

from __future__ import annotations

from typing import Any

from .dsl import NS, delete, get, gone, patch, pod, post, put
from .runner import Step

PODS = f"{NS}/pods"
_BAD_QUANTITY = pod(
    "quantity", containers=[{"name": "main", "image": "busybox", "resources": {"requests": {"cpu": "abc"}}}]
)
_NODE = {
    "apiVersion": "v1",
    "kind": "Node",
    "metadata": {"name": "diff-node-a", "labels": {"kubernetes.io/hostname": "diff-node-a", "rack": "r1"}},
    "status": {"capacity": {"cpu": "4", "memory": "8Gi", "pods": "110"}, "allocatable": {"cpu": "4", "pods": "110"}},
}


def _retry_until_service_account(code: int, body: object) -> bool:
    """The real server refuses pods (403) until the ServiceAccount controller made the namespace's ``default``."""
    return code != 403


def _nominated(body: Any) -> dict[str, Any]:
    return {"nominated": (body.get("status") or {}).get("nominatedNodeName") if isinstance(body, dict) else None}


def _disruption(body: Any) -> dict[str, Any]:
    """The DisruptionTarget condition's reason, message and status, and whether the pod is being deleted."""
    conditions = (body.get("status") or {}).get("conditions") or [] if isinstance(body, dict) else []
    found = [
        {k: c.get(k) for k in ("status", "reason", "message")}
        for c in conditions
        if c.get("type") == "DisruptionTarget"
    ]
    deleting = isinstance(body, dict) and bool(body["metadata"].get("deletionTimestamp"))
    return {"disruption": found, "deleting": deleting}


def _scheduled(body: Any) -> dict[str, Any]:
    """The PodScheduled condition's status, reason and message, the node and the gates."""
    if not isinstance(body, dict):
        return {}
    conditions = (body.get("status") or {}).get("conditions") or []
    found = [
        {k: c.get(k) for k in ("status", "reason", "message")} for c in conditions if c.get("type") == "PodScheduled"
    ]
    spec = body.get("spec") or {}
    return {"scheduled": found, "node": spec.get("nodeName"), "gates": spec.get("schedulingGates")}


def _bind(name: str, pod: str) -> Step:
    """A step binding ``pod`` to node ``n1`` through its ``binding`` subresource."""
    body = {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": pod}, "target": {"name": "n1"}}
    return post(name, f"{PODS}/{pod}/binding", body)


def _gates(*names: str) -> list[dict[str, str]]:
    return [{"name": f"example.com/{name}"} for name in names]


def _zone(*zones: str) -> dict[str, Any]:
    return {"key": "topology.kubernetes.io/zone", "operator": "In", "values": list(zones)}


_arch = {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]}


def _affinity(expressions: list[dict[str, Any]]) -> dict[str, Any]:
    terms = [{"matchExpressions": expressions}]
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}}


STEPS: list[Step] = [
    # --- namespaces ------------------------------------------------------------------------------------------
    post("namespace create", "/api/v1/namespaces", {"metadata": {"name": "diff", "labels": {"team": "a"}}}),
    post("namespace create again", "/api/v1/namespaces", {"metadata": {"name": "diff"}}),
    post("namespace bad name", "/api/v1/namespaces", {"metadata": {"name": "Bad_NS"}}),
    post("namespace dotted name", "/api/v1/namespaces", {"metadata": {"name": "a.b"}}),
    get("namespace get", NS),
    get("namespace list by label", "/api/v1/namespaces?labelSelector=team%3Da"),
    get("namespace missing", "/api/v1/namespaces/nope"),
    # --- pods: create and validation -------------------------------------------------------------------------
    post("pod create", PODS, pod("p1", labels={"app": "web"}), until=_retry_until_service_account),
    post("pod create again", PODS, pod("p1")),
    post("pod generateName", PODS, pod(generate="gen-", labels={"app": "gen"}), save={"gen_pod": "metadata.name"}),
    get("pod get generated", f"{PODS}/$gen_pod"),
    post("pod with token", PODS, pod("tokened", automountServiceAccountToken=None)),
    post("pod bad name", PODS, pod("Bad_Name")),
    post("pod no name", PODS, {"metadata": {}, "spec": pod("x")["spec"]}),
    post("pod no containers", PODS, pod("empty", containers=[])),
    post("pod container without image", PODS, pod("noimage", containers=[{"name": "main"}])),
    post("pod bad quantity", PODS, _BAD_QUANTITY),
    post("pod bad label key", PODS, pod("badlabel", labels={"bad key": "x"})),
    post("pod bad label value", PODS, pod("badvalue", labels={"app": "x" * 64})),
    post("pod bad restart policy", PODS, pod("badrestart", restartPolicy="Sometimes")),
    *(  # an init container's Never and OnFailure are a plain init container's since 1.35 (ContainerRestartRules)
        post(f"pod init container restart {policy}", PODS, pod(f"init-{policy.lower()}", initContainers=[init]))
        for policy in ("Never", "Sometimes")
        for init in [{"name": "init", "image": "busybox:1.36", "restartPolicy": policy}]
    ),
    post("pod namespace mismatch", PODS, {**pod("other"), "metadata": {"name": "other", "namespace": "default"}}),
    post("pod with resourceVersion", PODS, {**pod("withrv"), "metadata": {"name": "withrv", "resourceVersion": "5"}}),
    post("pod wrong kind", PODS, {**pod("wrongkind"), "kind": "Node"}),
    post("pod not json", PODS, "{not json"),
    post("pod unknown priority class", PODS, pod("prio", priorityClassName="nope")),
    post("pod priority beyond int32", PODS, pod("prio32", priority=2**31)),
    post("pod node name not dns", PODS, pod("badnode", nodeName="Node_1")),
    post("pod system priority class", PODS, pod("critical", priorityClassName="system-cluster-critical")),
    post("pod in missing namespace", "/api/v1/namespaces/nope/pods", pod("lost")),
    # --- pods: read, update, conflicts -----------------------------------------------------------------------
    get("pod get", f"{PODS}/p1", save={"p1_rv": "metadata.resourceVersion", "p1_uid": "metadata.uid"}),
    get("pod missing", f"{PODS}/nope"),
    put("pod update stale", f"{PODS}/p1", {**pod("p1"), "metadata": {"name": "p1", "resourceVersion": "2"}}),
    put(
        "pod update image",
        f"{PODS}/p1",
        {
            **pod("p1", labels={"app": "web"}),
            "metadata": {"name": "p1", "labels": {"app": "web"}, "resourceVersion": "$p1_rv"},
        },
    ),
    get("pod get after update", f"{PODS}/p1", save={"p1_rv": "metadata.resourceVersion"}),
    put(
        "pod update forbidden field",
        f"{PODS}/p1",
        {**pod("p1", restartPolicy="Never"), "metadata": {"name": "p1", "resourceVersion": "$p1_rv"}},
    ),
    put("pod update name mismatch", f"{PODS}/p1", {**pod("p2"), "metadata": {"name": "p2"}}),
    put("pod update missing", f"{PODS}/nope", pod("nope")),
    # --- pods: patches ----------------------------------------------------------------------------------------
    patch("pod merge patch labels", f"{PODS}/p1", {"metadata": {"labels": {"tier": "front"}}}),
    patch(
        "pod strategic patch image",
        f"{PODS}/p1",
        {"spec": {"containers": [{"name": "main", "image": "busybox:1.37"}]}},
        "strategic",
    ),
    patch(
        "pod strategic patch forbidden",
        f"{PODS}/p1",
        {"spec": {"containers": [{"name": "extra", "image": "busybox"}]}},
        "strategic",
    ),
    patch(
        "pod json patch add",
        f"{PODS}/p1",
        [{"op": "add", "path": "/metadata/annotations", "value": {"a": "b"}}],
        "json",
    ),
    patch("pod json patch test fails", f"{PODS}/p1", [{"op": "test", "path": "/metadata/name", "value": "x"}], "json"),
    patch("pod json patch missing path", f"{PODS}/p1", [{"op": "replace", "path": "/spec/nope/x", "value": 1}], "json"),
    patch("pod json patch not a list", f"{PODS}/p1", {"op": "add"}, "json"),
    patch("pod patch bad content type", f"{PODS}/p1", {"a": 1}, "text/plain"),
    patch("pod merge patch missing", f"{PODS}/nope", {"metadata": {"labels": {"a": "b"}}}),
    patch("pod merge patch stale", f"{PODS}/p1", {"metadata": {"resourceVersion": "2", "labels": {"x": "y"}}}),
    patch("pod merge patch bad label", f"{PODS}/p1", {"metadata": {"labels": {"bad key": "y"}}}),
    # --- pods: status ------------------------------------------------------------------------------------------
    get("pod status get", f"{PODS}/p1/status"),
    patch(
        "pod status patch",
        f"{PODS}/p1/status",
        {"status": {"conditions": [{"type": "Example", "status": "True"}]}, "spec": {"nodeName": "ignored"}},
    ),
    patch("pod status bad phase", f"{PODS}/p1/status", {"status": {"phase": "Sleeping"}}),
    get("pod after status patch", f"{PODS}/p1"),
    # --- pods: bindings -----------------------------------------------------------------------------------------
    post(
        "binding other pod",
        f"{PODS}/p1/binding",
        {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "someone-else"}, "target": {"name": "n1"}},
    ),
    post(
        "binding no target", f"{PODS}/p1/binding", {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "p1"}}
    ),
    post(
        "binding",
        f"{PODS}/p1/binding",
        {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "p1"}, "target": {"kind": "Node", "name": "n1"}},
    ),
    post(
        "binding again",
        f"{PODS}/p1/binding",
        {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "p1"}, "target": {"name": "n2"}},
    ),
    post(
        "binding through bindings",
        f"{NS}/bindings",
        {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "$gen_pod"}, "target": {"name": "n1"}},
    ),
    _bind("binding missing pod", "nope"),
    get("pod bound", f"{PODS}/p1"),
    # a scheduler's nomination (after preempting for the pod) is cleared by its binding (v1.35+)
    post("pod nominated create", PODS, pod("nominated")),
    patch("pod nominated", f"{PODS}/nominated/status", {"status": {"nominatedNodeName": "n1"}}),
    get("pod nominated get", f"{PODS}/nominated", exact=_nominated),
    _bind("pod nominated binding", "nominated"),
    get("pod nominated bound", f"{PODS}/nominated", exact=_nominated),
    delete("pod nominated delete", f"{PODS}/nominated?gracePeriodSeconds=0"),
    # --- pods: scheduling gates (how Kueue holds pods back, then narrows their nodes and lets them go) -----------
    post(
        "pod gated create", PODS, pod("gated", schedulingGates=[{"name": "example.com/a"}, {"name": "example.com/b"}])
    ),
    get("pod gated get", f"{PODS}/gated", exact=_scheduled),
    _bind("pod gated binding", "gated"),
    patch("pod gated add gate", f"{PODS}/gated", {"spec": {"schedulingGates": _gates("a", "b", "c")}}),
    patch("pod gated add selector", f"{PODS}/gated", {"spec": {"nodeSelector": {"flavor": "spot"}}}),
    patch("pod gated change selector", f"{PODS}/gated", {"spec": {"nodeSelector": {"flavor": "on-demand"}}}),
    patch("pod gated add affinity", f"{PODS}/gated", {"spec": {"affinity": _affinity([_zone("a", "b")])}}),
    patch("pod gated narrow affinity", f"{PODS}/gated", {"spec": {"affinity": _affinity([_zone("a", "b"), _arch])}}),
    patch("pod gated widen affinity", f"{PODS}/gated", {"spec": {"affinity": _affinity([_zone("a", "b", "c")])}}),
    patch("pod gated change restart policy", f"{PODS}/gated", {"spec": {"restartPolicy": "Never"}}),
    patch("pod gated drop a gate", f"{PODS}/gated", {"spec": {"schedulingGates": _gates("b")}}),
    get("pod gated still", f"{PODS}/gated", exact=_scheduled),
    patch("pod gated drop gates", f"{PODS}/gated", {"spec": {"schedulingGates": None}}),
    get("pod ungated", f"{PODS}/gated", exact=_scheduled),
    patch("pod ungated add selector", f"{PODS}/gated", {"spec": {"nodeSelector": {"disk": "ssd"}}}),
    patch("pod ungated add gate", f"{PODS}/gated", {"spec": {"schedulingGates": _gates("a")}}),
    _bind("pod ungated binding", "gated"),
    get("pod ungated bound", f"{PODS}/gated", exact=_scheduled),
    delete("pod gated delete", f"{PODS}/gated?gracePeriodSeconds=0"),
    post("pod gated with node", PODS, pod("gatednode", nodeName="n1", schedulingGates=_gates("a"))),
    post("pod gated twice", PODS, pod("gatedtwice", schedulingGates=_gates("a", "a"))),
    post("pod gated bad name", PODS, pod("gatedbad", schedulingGates=[{"name": "bad gate!"}])),
    post("pod gated no name", PODS, pod("gatednone", schedulingGates=[{}])),
    # --- pods: deletion ---------------------------------------------------------------------------------------
    delete("pod delete bound", f"{PODS}/p1"),
    get("pod terminating", f"{PODS}/p1"),
    patch("pod finalizer while deleting", f"{PODS}/p1", {"metadata": {"finalizers": ["example.com/hold"]}}),
    delete("pod delete bound again", f"{PODS}/p1"),
    delete("pod delete now", f"{PODS}/p1?gracePeriodSeconds=0"),
    get("pod deleted", f"{PODS}/p1"),
    post("pod p2 create", PODS, pod("p2", labels={"app": "web"}), save={"p2_rv": "metadata.resourceVersion"}),
    delete(
        "pod delete precondition uid", f"{PODS}/p2", {"preconditions": {"uid": "00000000-0000-0000-0000-000000000000"}}
    ),
    delete("pod delete precondition rv", f"{PODS}/p2", {"preconditions": {"resourceVersion": "2"}}),
    delete("pod delete bad propagation", f"{PODS}/p2?propagationPolicy=Sometimes"),
    delete("pod delete unbound", f"{PODS}/p2"),
    get(
        "pod unbound deletion events",
        f"{PODS}?watch=1&resourceVersion=$p2_rv&timeoutSeconds=1&fieldSelector=metadata.name%3Dp2",
        stream=True,
    ),
    delete("pod delete missing", f"{PODS}/p2"),
    post("pod p3 create", PODS, pod("p3", labels={"app": "evict"})),
    post(
        "pod eviction",
        f"{PODS}/p3/eviction",
        {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "p3", "namespace": "diff"}},
    ),
    gone("pod evicted", f"{PODS}/p3"),
    # a running pod on a node is evicted gracefully: first marked DisruptionTarget (EvictionByEvictionAPI)
    post("pod bound create", PODS, pod("p3b", labels={"app": "evict"}, nodeName="diff-ghost")),
    patch("pod bound runs", f"{PODS}/p3b/status", {"status": {"phase": "Running"}}),
    post(
        "pod bound eviction wrong uid",
        f"{PODS}/p3b/eviction",
        {
            "apiVersion": "policy/v1",
            "kind": "Eviction",
            "metadata": {"name": "p3b"},
            "deleteOptions": {"preconditions": {"uid": "00000000-0000-0000-0000-000000000000"}},
        },
    ),
    post(
        "pod bound eviction",
        f"{PODS}/p3b/eviction",
        {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "p3b"}},
    ),
    get("pod bound evicted", f"{PODS}/p3b", exact=_disruption),
    delete("pod bound evicted delete", f"{PODS}/p3b?gracePeriodSeconds=0"),
    post("pod p4 create", PODS, pod("p4", labels={"batch": "x"})),
    post("pod p5 create", PODS, pod("p5", labels={"batch": "x"})),
    delete("pods delete collection", f"{PODS}?labelSelector=batch%3Dx"),
    get("pods after delete collection", f"{PODS}?labelSelector=batch%3Dx"),
    # --- nodes -------------------------------------------------------------------------------------------------
    post("node create", "/api/v1/nodes", _NODE, save={"node_rv": "metadata.resourceVersion"}),
    post("node create again", "/api/v1/nodes", _NODE),
    post(
        "node bad quantity",
        "/api/v1/nodes",
        {"metadata": {"name": "diff-node-bad"}, "status": {"capacity": {"cpu": "lots"}}},
    ),
    post("node bad name", "/api/v1/nodes", {"metadata": {"name": "Node_A"}}),
    post("node create b", "/api/v1/nodes", {"metadata": {"name": "diff-node-b", "labels": {"rack": "r2"}}}),
    get("node get", "/api/v1/nodes/diff-node-a"),
    get("node list by label", "/api/v1/nodes?labelSelector=rack%3Dr1"),
    patch("node cordon", "/api/v1/nodes/diff-node-a", {"spec": {"unschedulable": True}}, "strategic"),
    get("node list unschedulable", "/api/v1/nodes?fieldSelector=spec.unschedulable%3Dtrue"),
    patch(
        "node taint",
        "/api/v1/nodes/diff-node-a",
        {"spec": {"taints": [{"key": "k", "value": "v", "effect": "NoSchedule"}]}},
        "strategic",
    ),
    patch("node bad taint", "/api/v1/nodes/diff-node-a", {"spec": {"taints": [{"key": "k", "effect": "Often"}]}}),
    patch(
        "node status patch",
        "/api/v1/nodes/diff-node-a/status",
        {"status": {"conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "ok"}]}},
        "strategic",
    ),
    put(
        "node update stale",
        "/api/v1/nodes/diff-node-a",
        {**_NODE, "metadata": {"name": "diff-node-a", "resourceVersion": "$node_rv"}},
    ),
    get("node in namespace path", f"{NS}/nodes/diff-node-a"),
    delete("node delete", "/api/v1/nodes/diff-node-b"),
    get("node deleted", "/api/v1/nodes/diff-node-b"),
]
