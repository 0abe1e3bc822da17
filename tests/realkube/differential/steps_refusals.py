"""The sequence, part 6: fields a workload file and ``cluster serve`` once took and the real server refuses (rev35,
issue 34): a host port twice in one pod, a volume with two sources, a preferred term's weight outside 1-100, a
``matchLabelKeys`` key the label selector has already, a PersistentVolume with two sources or ``nodeAffinity``
without ``required``, a StorageClass's unknown reclaim policy. Each is compared word for word (:data:`SAME_WORDS`)."""

from __future__ import annotations

from typing import Any

from .dsl import NS, pod, post
from .runner import Step

PODS = f"{NS}/pods"
PVS = "/api/v1/persistentvolumes"
SCS = "/apis/storage.k8s.io/v1/storageclasses"
_APP = {"app": "a"}
_TERM = {"labelSelector": {"matchLabels": _APP}, "topologyKey": "kubernetes.io/hostname"}
_PREFERRED = "preferredDuringSchedulingIgnoredDuringExecution"
_REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
_PV_SPEC = {
    "capacity": {"storage": "1Gi"},
    "accessModes": ["ReadWriteOnce"],
    "csi": {"driver": "x", "volumeHandle": "h"},
}


def _ports(*ports: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"name": "main", "image": "busybox:1.36", "ports": list(ports)}]


def _weighted(kind: str, weight: int) -> dict[str, Any]:
    if kind == "nodeAffinity":
        term: dict[str, Any] = {"preference": {"matchExpressions": [{"key": "z", "operator": "Exists"}]}}
    else:
        term = {"podAffinityTerm": _TERM}
    return {kind: {_PREFERRED: [{"weight": weight, **term}]}}


def _spread(selector: dict[str, Any], **keys: list[str]) -> list[dict[str, Any]]:
    return [{"maxSkew": 1, "topologyKey": "z", "whenUnsatisfiable": "DoNotSchedule", "labelSelector": selector, **keys}]


_POD_REFUSALS: list[tuple[str, dict[str, Any]]] = [
    (
        "duplicate host port",
        {"containers": _ports({"containerPort": 80, "hostPort": 80}, {"containerPort": 81, "hostPort": 80})},
    ),
    (
        "duplicate host port on one address",
        {
            "containers": [
                *_ports({"containerPort": 80, "hostPort": 80, "hostIP": "10.0.0.1", "protocol": "UDP"}),
                {
                    "name": "side",
                    "image": "busybox:1.36",
                    "ports": [{"containerPort": 80, "hostPort": 80, "hostIP": "10.0.0.1", "protocol": "UDP"}],
                },
            ]
        },
    ),
    ("volume two sources", {"volumes": [{"name": "v", "persistentVolumeClaim": {"claimName": "c"}, "emptyDir": {}}]}),
    *(
        (f"{kind} weight {weight}", {"affinity": _weighted(kind, weight)})
        for kind in ("nodeAffinity", "podAffinity", "podAntiAffinity")
        for weight in (0, 101)
    ),
    (
        "affinity matchLabelKeys in selector",
        {"affinity": {"podAntiAffinity": {_REQUIRED: [{**_TERM, "matchLabelKeys": ["app"]}]}}},
    ),
    (
        "spread matchLabelKeys in selector",
        {"topologySpreadConstraints": _spread({"matchLabels": _APP}, matchLabelKeys=["app"])},
    ),
    (
        "affinity matchLabelKeys in expressions",
        {
            "affinity": {
                "podAntiAffinity": {
                    _REQUIRED: [
                        {
                            "labelSelector": {"matchExpressions": [{"key": "app", "operator": "Exists"}]},
                            "topologyKey": "kubernetes.io/hostname",
                            "matchLabelKeys": ["app"],
                        }
                    ]
                }
            }
        },
    ),
    (
        "spread matchLabelKeys in expressions",
        {
            "topologySpreadConstraints": _spread(
                {"matchExpressions": [{"key": "app", "operator": "Exists"}]}, matchLabelKeys=["app"]
            )
        },
    ),
    (
        "spread matchLabelKeys in expressions as merged",
        {
            "topologySpreadConstraints": _spread(
                {"matchExpressions": [{"key": "app", "operator": "In", "values": ["a"]}]}, matchLabelKeys=["app"]
            )
        },
    ),
]
"""(step name after ``pod ``, the pod's spec): each refused (a key in the selector's expressions too, even the
requirement the server's merge of ``matchLabelKeys`` would add: it checks before merging)."""

_STORAGE_REFUSALS: list[tuple[str, str, dict[str, Any]]] = [
    ("pv two sources", PVS, {"metadata": {"name": "refused-pv-1"}, "spec": {**_PV_SPEC, "hostPath": {"path": "/x"}}}),
    (
        "pv required null",
        PVS,
        {"metadata": {"name": "refused-pv-2"}, "spec": {**_PV_SPEC, "nodeAffinity": {"required": None}}},
    ),
    (
        "storageclass reclaim policy typo",
        SCS,
        {"metadata": {"name": "refused-sc"}, "provisioner": "x", "reclaimPolicy": "Deleet"},
    ),
]

STEPS: list[Step] = [
    *(
        post(f"pod {name}", PODS, pod(f"refused-{i}", labels=_APP, **spec))
        for i, (name, spec) in enumerate(_POD_REFUSALS)
    ),
    *(post(name, path, body) for name, path, body in _STORAGE_REFUSALS),
]

SAME_WORDS = (
    *(f"pod {name}" for name, _ in _POD_REFUSALS),
    *(name for name, _, _ in _STORAGE_REFUSALS),
)
"""The refusals above, each in the real server's words."""
