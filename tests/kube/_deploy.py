"""What the tests of kubeflux's deployment share: where the manifests and the Helm chart are, and the Kubernetes API
calls kubeflux's code makes with the permissions each needs (checked against deploy/rbac.yaml and the chart)."""

from __future__ import annotations

import re

from tests.shared import REPO

DEPLOY = REPO / "deploy"
CHART = DEPLOY / "helm" / "kubeflux"


CALLS: dict[str, set[tuple[str, str, str]]] = {
    # the reflectors list and then watch with the same call
    "list_node": {("", "nodes", "list"), ("", "nodes", "watch")},
    "list_pod_for_all_namespaces": {("", "pods", "list"), ("", "pods", "watch")},
    "list_namespace": {("", "namespaces", "list"), ("", "namespaces", "watch")},
    "list_cluster_custom_object": {  # coscheduling's PodGroups and Kubernetes' own, and DRA's objects
        ("scheduling.x-k8s.io", "podgroups", "list"),
        ("scheduling.x-k8s.io", "podgroups", "watch"),
        ("scheduling.k8s.io", "podgroups", "list"),
        ("scheduling.k8s.io", "podgroups", "watch"),
        *(  # Dynamic Resource Allocation's objects
            ("resource.k8s.io", plural, verb)
            for plural in ("deviceclasses", "resourceslices", "resourceclaims")
            for verb in ("list", "watch")
        ),
    },
    "patch_namespaced_resource_claim_status": {("resource.k8s.io", "resourceclaims/status", "patch")},
    "patch_namespaced_resource_claim": {("resource.k8s.io", "resourceclaims", "patch")},  # the finalizer
    "read_namespaced_resource_claim": {("resource.k8s.io", "resourceclaims", "get")},  # after a conflict
    "list_pod_disruption_budget_for_all_namespaces": {
        ("policy", "poddisruptionbudgets", "list"),
        ("policy", "poddisruptionbudgets", "watch"),
    },
    "list_persistent_volume": {("", "persistentvolumes", "list"), ("", "persistentvolumes", "watch")},
    "list_persistent_volume_claim_for_all_namespaces": {
        ("", "persistentvolumeclaims", "list"),
        ("", "persistentvolumeclaims", "watch"),
    },
    "list_storage_class": {("storage.k8s.io", "storageclasses", "list"), ("storage.k8s.io", "storageclasses", "watch")},
    "list_csi_node": {("storage.k8s.io", "csinodes", "list"), ("storage.k8s.io", "csinodes", "watch")},
    "patch_namespaced_persistent_volume_claim": {("", "persistentvolumeclaims", "patch")},
    "patch_persistent_volume": {("", "persistentvolumes", "patch")},
    "create_namespaced_pod_binding": {("", "pods/binding", "create")},
    "create_namespaced_pod_bindings": {("", "pods/binding", "create")},
    "create_namespaced_pod_eviction": {("", "pods/eviction", "create")},
    "patch_namespaced_pod_status": {("", "pods/status", "patch")},
    "patch_namespaced_pod": {("", "pods", "patch")},
    "create_namespaced_event": {("events.k8s.io", "events", "create")},
    "create_namespaced_events": {("events.k8s.io", "events", "create")},
    "read_namespaced_lease": {("coordination.k8s.io", "leases", "get")},
    "create_namespaced_lease": {("coordination.k8s.io", "leases", "create")},
    "replace_namespaced_lease": {("coordination.k8s.io", "leases", "update")},
}
"""Each Kubernetes client call serve makes → the (group, resource, verb) it needs."""


def calls_in_code() -> set[str]:
    pattern = re.compile(
        r"\.((?:list|read|create|patch|replace|delete|watch)_(?:namespace|cluster|node|pod|persistent|storage|csi)[a-z_]*)\b"
    )
    return {m for path in KUBE.glob("*.py") for m in pattern.findall(path.read_text(encoding="utf-8"))}


KUBE = REPO / "src" / "kubeflux" / "kube"
