"""Fields the real kube-apiserver v1.36 refuses that a workload file and ``cluster serve`` once took (rev35, issue 34):
each refused naming the field, in the real server's words (the real differential, ``steps_refusals``, compares
them with the real server's)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from kubeflux.apiobjects.manifests import ManifestError, pod_from_manifest
from kubeflux.sim.apiserver.core_strategies import unreadable_causes
from kubeflux.sim.apiserver.errors import Cause
from kubeflux.sim.apiserver.storage_strategies import storage_causes
from kubeflux.sim.workloads.manifests import read_manifests

HOST = "kubernetes.io/hostname"
TERM = {"labelSelector": {"matchLabels": {"app": "a"}}, "topologyKey": HOST}
PREFERRED = "preferredDuringSchedulingIgnoredDuringExecution"
REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
ANTI = f"spec.affinity.podAntiAffinity.{REQUIRED}[0]"


def pod(**spec: Any) -> dict[str, Any]:
    container = {"name": "main", "image": "x", "resources": {"requests": {"cpu": "1"}}}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "labels": {"app": "a"}},
        "spec": {"containers": [container], **spec},
    }


def ports(*items: dict[str, Any], **more: Any) -> dict[str, Any]:
    return {"containers": [{"name": "main", "image": "x", "ports": list(items)}], **more}


def spread(selector: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        {"maxSkew": 1, "topologyKey": "z", "whenUnsatisfiable": "DoNotSchedule", "labelSelector": selector}
        | {"matchLabelKeys": ["app"]}
    ]


EXISTS = {"matchExpressions": [{"key": "app", "operator": "Exists"}]}
POD_CASES: list[tuple[str, dict[str, Any], str, str, str]] = [
    (
        "host port twice in one container",
        ports({"containerPort": 80, "hostPort": 80}, {"containerPort": 81, "hostPort": 80}),
        "spec.containers[0].ports[1].hostPort",
        'Duplicate value: "TCP//80"',
        "FieldValueDuplicate",
    ),
    (
        "host port twice across containers on one address",
        {
            "containers": [
                {"name": c, "image": "x", "ports": [{"containerPort": 1, "hostPort": 9, "hostIP": "10.0.0.1"}]}
                for c in ("a", "b")
            ]
        },
        "spec.containers[1].ports[0].hostPort",
        'Duplicate value: "TCP/10.0.0.1/9"',
        "FieldValueDuplicate",
    ),
    (
        "a volume with two sources",
        {"volumes": [{"name": "v", "persistentVolumeClaim": {"claimName": "c"}, "emptyDir": {}}]},
        "spec.volumes[0].persistentVolumeClaim",
        "Forbidden: may not specify more than 1 volume type",
        "FieldValueForbidden",
    ),
    (
        "preferred pod affinity weight 0",
        {"affinity": {"podAffinity": {PREFERRED: [{"weight": 0, "podAffinityTerm": TERM}]}}},
        f"spec.affinity.podAffinity.{PREFERRED}[0].weight",
        "Invalid value: 0: must be in the range 1-100",
        "FieldValueInvalid",
    ),
    (
        "preferred node affinity weight 101",
        {"affinity": {"nodeAffinity": {PREFERRED: [{"weight": 101, "preference": {}}]}}},
        f"spec.affinity.nodeAffinity.{PREFERRED}[0].weight",
        "Invalid value: 101: must be in the range 1-100",
        "FieldValueInvalid",
    ),
    (
        "anti-affinity matchLabelKeys in matchLabels",
        {"affinity": {"podAntiAffinity": {REQUIRED: [{**TERM, "matchLabelKeys": ["app"]}]}}},
        f"{ANTI}[0]",
        'Invalid value: "app": exists in both matchLabelKeys and labelSelector',
        "FieldValueInvalid",
    ),
    (
        "spread matchLabelKeys in an expression",
        {"topologySpreadConstraints": spread(EXISTS)},
        "spec.topologySpreadConstraints[0][0]",
        'Invalid value: "app": exists in both matchLabelKeys and labelSelector',
        "FieldValueInvalid",
    ),
]


@pytest.mark.parametrize(
    ("spec", "field", "words", "reason"), [c[1:] for c in POD_CASES], ids=[c[0] for c in POD_CASES]
)
def test_the_pod_reader_and_cluster_serve_refuse_in_the_servers_words(
    spec: dict[str, Any], field: str, words: str, reason: str
) -> None:
    with pytest.raises(ManifestError) as caught:
        pod_from_manifest(pod(**spec))
    assert (caught.value.path, caught.value.problem) == (field, words)
    assert unreadable_causes(pod_from_manifest, pod(**spec)) == [Cause(field, words, reason)]


def test_a_workload_file_names_file_document_and_field(tmp_path: Path) -> None:
    path = tmp_path / "w.yaml"
    bad = pod(**ports({"containerPort": 80, "hostPort": 80}, {"containerPort": 81, "hostPort": 80}))
    sc = {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": "s"}, "provisioner": "x"}
    path.write_text(yaml.safe_dump_all([pod(), bad, {**sc, "reclaimPolicy": "Deleet"}]))
    workload = read_manifests(path)
    assert len(workload.jobs) == 1
    assert workload.problems == [
        'w.yaml: document 2: Pod default/p: spec.containers[0].ports[1].hostPort: Duplicate value: "TCP//80"; skipped',
        'w.yaml: document 3: StorageClass s: reclaimPolicy: Unsupported value: "Deleet": supported values: '
        '"Delete", "Retain"; skipped',
    ]


def test_what_the_server_writes_back_is_read() -> None:
    # The server merges matchLabelKeys into the selector at creation (key In the pod's value): a pod read back has
    # both, and serve reads it. A host port in two protocols, or on two addresses, is no duplicate.
    merged = {"matchLabels": {"tier": "x"}, "matchExpressions": [{"key": "app", "operator": "In", "values": ["a"]}]}
    read = pod_from_manifest(
        pod(
            topologySpreadConstraints=spread(merged),
            affinity={
                "podAntiAffinity": {
                    REQUIRED: [{"labelSelector": merged, "topologyKey": HOST} | {"matchLabelKeys": ["app"]}]
                }
            },
            **ports(
                {"containerPort": 80, "hostPort": 80},
                {"containerPort": 80, "hostPort": 80, "protocol": "UDP"},
                {"containerPort": 80, "hostPort": 80, "hostIP": "10.0.0.1"},
            ),
        )
    )
    assert read.terms is not None and len(read.terms.host_ports) == 3


PV = {
    "apiVersion": "v1",
    "kind": "PersistentVolume",
    "metadata": {"name": "pv"},
    "spec": {
        "csi": {"driver": "x", "volumeHandle": "h"},
        "capacity": {"storage": "1Gi"},
        "accessModes": ["ReadWriteOnce"],
    },
}
SC = {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": "s"}, "provisioner": "x"}


def changed(obj: dict[str, Any], where: str, **fields: Any) -> dict[str, Any]:
    made = copy.deepcopy(obj)
    (made[where] if where else made).update(fields)
    return made


@pytest.mark.parametrize(
    ("obj", "cause"),
    [
        (
            changed(PV, "spec", hostPath={"path": "/x"}),
            Cause("spec.csi", "Forbidden: may not specify more than 1 volume type", "FieldValueForbidden"),
        ),
        (
            changed(PV, "spec", nodeAffinity={"required": None}),
            Cause(
                "spec.nodeAffinity.required",
                "Required value: must specify required node constraints",
                "FieldValueRequired",
            ),
        ),
        (
            changed(SC, "", reclaimPolicy="Deleet"),
            Cause(
                "reclaimPolicy",
                'Unsupported value: "Deleet": supported values: "Delete", "Retain"',
                "FieldValueNotSupported",
            ),
        ),
    ],
    ids=["pv two sources", "pv required null", "sc reclaim policy"],
)
def test_storage_objects_refused_in_the_servers_words(obj: dict[str, Any], cause: Cause) -> None:
    assert storage_causes(obj) == [cause]


def test_storage_objects_the_server_takes() -> None:
    assert storage_causes(PV) == []
    assert storage_causes(changed(SC, "", reclaimPolicy="Retain")) == []
    assert storage_causes(SC) == []  # Delete by default
