"""deploy/: the manifests install what ``serve`` needs and no more (the RBAC rules are checked against the API
calls the code in src/kubeflux/kube makes), and the configuration they carry is valid."""

from __future__ import annotations

import re
from typing import Any

import yaml

from kubeflux.kube.config import parse_config
from tests.shared import REPO

DEPLOY = REPO / "deploy"
KUBE = REPO / "src" / "kubeflux" / "kube"

CALLS: dict[str, set[tuple[str, str, str]]] = {
    # the reflectors list and then watch with the same call
    "list_node": {("", "nodes", "list"), ("", "nodes", "watch")},
    "list_pod_for_all_namespaces": {("", "pods", "list"), ("", "pods", "watch")},
    "list_cluster_custom_object": {  # coscheduling's PodGroups and Kubernetes' own
        ("scheduling.x-k8s.io", "podgroups", "list"),
        ("scheduling.x-k8s.io", "podgroups", "watch"),
        ("scheduling.k8s.io", "podgroups", "list"),
        ("scheduling.k8s.io", "podgroups", "watch"),
    },
    "create_namespaced_pod_binding": {("", "pods/binding", "create")},
    "patch_namespaced_pod_status": {("", "pods/status", "patch")},
    "patch_namespaced_pod": {("", "pods", "patch")},
    "create_namespaced_event": {("events.k8s.io", "events", "create")},
    "read_namespaced_lease": {("coordination.k8s.io", "leases", "get")},
    "create_namespaced_lease": {("coordination.k8s.io", "leases", "create")},
    "replace_namespaced_lease": {("coordination.k8s.io", "leases", "update")},
}
"""Each Kubernetes client call serve makes → the (group, resource, verb) it needs."""


def _documents(name: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all((DEPLOY / name).read_text(encoding="utf-8")) if d]


def _calls_in_code() -> set[str]:
    pattern = re.compile(
        r"\.((?:list|read|create|patch|replace|delete|watch)_(?:namespaced|cluster|node|pod)[a-z_]*)\b"
    )
    return {m for path in KUBE.glob("*.py") for m in pattern.findall(path.read_text(encoding="utf-8"))}


def _granted() -> set[tuple[str, str, str]]:
    granted = set()
    for document in _documents("rbac.yaml"):
        for rule in document.get("rules") or []:
            for group in rule["apiGroups"]:
                for resource in rule["resources"]:
                    granted |= {(group, resource, verb) for verb in rule["verbs"]}
    return granted


def test_every_call_serve_makes_is_known_to_this_test() -> None:
    unknown = _calls_in_code() - set(CALLS)
    assert not unknown, f"add these calls and the permissions they need to CALLS (and deploy/rbac.yaml): {unknown}"


def test_the_role_grants_exactly_what_the_calls_need() -> None:
    needed = set().union(*(CALLS[call] for call in _calls_in_code()))
    granted = _granted()
    assert needed - granted == set(), "missing from deploy/rbac.yaml"
    assert granted - needed == set(), "deploy/rbac.yaml grants more than serve uses"


def test_the_kustomization_lists_every_manifest_and_the_config_is_valid() -> None:
    kustomization = _documents("kustomization.yaml")[0]
    manifests = {p.name for p in DEPLOY.glob("*.yaml")} - {"kustomization.yaml"}
    assert set(kustomization["resources"]) == manifests
    config_map = _documents("configmap.yaml")[0]
    config = parse_config(yaml.safe_load(config_map["data"]["config.yaml"]), "deploy/configmap.yaml")
    assert config.leader_election.enabled and config.leader_election.namespace == "kubeflux-system"
    deployment = _documents("deployment.yaml")[0]
    assert deployment["spec"]["replicas"] == 2
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    assert container["ports"][0]["containerPort"] == config.operations.port
    assert container["args"][:2] == ["serve", "--in-cluster"]
    account = deployment["spec"]["template"]["spec"]["serviceAccountName"]
    bindings = [d for d in _documents("rbac.yaml") if d["kind"] in ("ClusterRoleBinding", "RoleBinding")]
    assert all(b["subjects"][0]["name"] == account for b in bindings)


def test_the_serve_examples_are_read_by_the_cores_readers() -> None:
    from kubeflux.scheduler.kube_objects import pod_from_manifest, podgroup_from_manifest

    kinds = []
    for path in sorted((REPO / "examples" / "serve").glob("*.yaml")):
        for document in yaml.safe_load_all(path.read_text(encoding="utf-8")):
            if not document or document.get("kind") == "ServeConfig":
                continue
            document.setdefault("metadata", {}).setdefault("namespace", "default")
            reader = podgroup_from_manifest if document["kind"] == "PodGroup" else pod_from_manifest
            reader(document)
            kinds.append(document["kind"])
    assert kinds.count("Pod") >= 10 and "PodGroup" in kinds
