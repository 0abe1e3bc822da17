"""Hostile review: constraints of a pod that kube-scheduler enforces and ``kubeflux serve`` did not read at all
(required inter-pod anti-affinity and host ports, read since issue 34; a PersistentVolumeClaim that does not exist,
still not read). serve binds such pods
where kube-scheduler, given the same pods on the same real control plane, keeps them pending; nothing tells the user
(no event, no condition). The README lists taints, tolerations, nodeSelector, required node affinity and cordoned or
not-ready nodes as honoured; these other constraints are silently dropped.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from typing import Any

import pytest

from kubeflux.controlplane import ControlPlane
from tests.realkube._serving import kwok_nodes, start_serve, stop_serve

from ..conftest import Api, eventually

SETTLE = 8.0
"""Seconds given to a scheduler to bind what it would bind (serve binds a free pod in well under a second)."""


def _pod(name: str, scheduler: str, pool: str, **spec: Any) -> dict[str, Any]:
    labels = spec.pop("labels", {})
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": labels},
        "spec": {
            "schedulerName": scheduler,
            "restartPolicy": "Never",
            "nodeSelector": {"pool": pool},
            "containers": [
                {
                    "name": "c",
                    "image": "busybox",
                    "resources": {"requests": {"cpu": "1"}},
                    **spec.pop("container", {}),
                }
            ],
            **spec,
        },
    }


CASES: dict[str, dict[str, Any]] = {
    # two pods that may not share the "pool" topology domain (one node here): the second must wait
    "anti-affinity": {
        "labels": {"app": "solo"},
        "affinity": {
            "podAntiAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [
                    {"labelSelector": {"matchLabels": {"app": "solo"}}, "topologyKey": "kubernetes.io/hostname"}
                ]
            }
        },
    },
    # two pods asking the same host port of a single node: the second must wait
    "host-port": {"container": {"ports": [{"containerPort": 80, "hostPort": 8080}]}},
}


@pytest.fixture
def namespaced(plane: ControlPlane, api: Api, request: pytest.FixtureRequest) -> Iterator[tuple[str, str]]:
    tag = request.node.callspec.id if hasattr(request.node, "callspec") else "pvc"
    namespace = api.namespace(f"unread-{tag}")
    with kwok_nodes(plane, api, f"unread-{tag}", 1, "8") as names:
        plane.kubectl("label", "node", names[0], f"pool={tag}")
        yield namespace, tag


@pytest.mark.parametrize("case", CASES)  # was xfail (serve bound both): serve reads them since issue 34
def test_two_pods_that_may_not_share_a_node_are_not_both_bound_to_it(
    plane: ControlPlane, api: Api, namespaced: tuple[str, str], case: str
) -> None:
    namespace, pool = namespaced
    plane.start_scheduler() if "kube-scheduler" not in plane.components else None
    # kube-scheduler's answer for the same two pods, first (its pods then leave the node)
    for index in range(2):
        api.create_pod(namespace, _pod(f"ks-{index}", "default-scheduler", pool, **_copy(CASES[case])))
    eventually(lambda: api.pods(namespace)["ks-0"]["spec"].get("nodeName"))
    time.sleep(SETTLE)
    assert not api.pods(namespace)["ks-1"]["spec"].get("nodeName"), "kube-scheduler kept the second pending"
    for index in range(2):
        api.core.delete_namespaced_pod(f"ks-{index}", namespace, grace_period_seconds=0, _preload_content=False)
    eventually(lambda: not api.pods(namespace))
    serve = start_serve(plane.kubeconfig, namespace)
    try:
        for index in range(2):
            api.create_pod(namespace, _pod(f"kf-{index}", "kubeflux", pool, **_copy(CASES[case])))
        eventually(lambda: api.pods(namespace)["kf-0"]["spec"].get("nodeName"))
        time.sleep(SETTLE)
        assert not api.pods(namespace)["kf-1"]["spec"].get("nodeName"), "serve bound both pods to the one node"
    finally:
        stop_serve(serve)


def test_a_pod_whose_claim_does_not_exist_is_not_bound(
    plane: ControlPlane, api: Api, namespaced: tuple[str, str]
) -> None:
    """kube-scheduler: ``0/N nodes are available: persistentvolumeclaim "nope" not found``; the pod waits (was xfail:
    serve reads volumes since issue 34)."""
    namespace, pool = namespaced
    volume = {"volumes": [{"name": "v", "persistentVolumeClaim": {"claimName": "nope"}}]}
    serve = start_serve(plane.kubeconfig, namespace)
    try:
        api.create_pod(namespace, _pod("kf-claim", "kubeflux", pool, **volume))
        api.create_pod(namespace, _pod("kf-plain", "kubeflux", pool))
        eventually(lambda: api.pods(namespace)["kf-plain"]["spec"].get("nodeName"))  # serve is scheduling
        time.sleep(SETTLE)
        waiting = api.pods(namespace)["kf-claim"]
        assert not waiting["spec"].get("nodeName"), "serve bound a pod with no claim"
        told = [c.get("message", "") for c in waiting.get("status", {}).get("conditions") or ()]
        assert any('persistentvolumeclaim "nope" not found' in message for message in told), told
    finally:
        stop_serve(serve)
        with contextlib.suppress(Exception):
            api.core.delete_collection_namespaced_pod(namespace, grace_period_seconds=0, _preload_content=False)


def _copy(spec: dict[str, Any]) -> dict[str, Any]:
    import copy

    return copy.deepcopy(spec)
