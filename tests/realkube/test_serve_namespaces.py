"""Inter-pod anti-affinity by a namespace's own labels through ``kubeflux serve`` on the real control plane: serve
watches Namespaces, so a ``namespaceSelector`` on a label given to a namespace (not only the
``kubernetes.io/metadata.name`` the API server gives every one) keeps a pod away from that namespace's pods, and
follows the namespace as it is labelled anew."""

from __future__ import annotations

from typing import Any

from kubeflux.controlplane import ControlPlane
from tests.realkube._serving import namespace, pod, serve, waiting

from .conftest import Api, eventually, schedulable

HOST = "kubernetes.io/hostname"


def away_from_prod(name: str) -> dict[str, Any]:
    """A pod of kubeflux's that may not share a node with a ``web`` pod of a namespace labelled ``tier: prod``."""
    made = pod(name, "1")
    term = {
        "labelSelector": {"matchLabels": {"app": "web"}},
        "namespaceSelector": {"matchLabels": {"tier": "prod"}},
        "topologyKey": HOST,
    }
    made["spec"]["affinity"] = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}
    return made


def web(name: str, node: str) -> dict[str, Any]:
    made = pod(name, "100m", scheduler="default-scheduler")
    made["metadata"]["labels"] = {"app": "web"}
    made["spec"]["nodeName"] = node
    return made


def test_a_namespace_selector_on_a_namespace_label_keeps_the_pod_from_that_namespace_s_pods(
    plane: ControlPlane, api: Api
) -> None:
    nodes = plane.add_kwok_nodes(2, cpu="4", prefix="nsel-")
    eventually(lambda: all(n in api.nodes() and schedulable(api.nodes()[n]) for n in nodes))
    with namespace(api, "nsel-prod", {"tier": "prod"}), namespace(api, "nsel-dev", {"tier": "dev"}), serve(plane):
        api.create_pod("nsel-prod", web("web", nodes[0]))
        api.create_pod("nsel-dev", web("web", nodes[1]))
        api.create_pod("default", away_from_prod("db"))
        eventually(lambda: api.pods("default")["db"]["spec"].get("nodeName"))
        assert api.pods("default")["db"]["spec"]["nodeName"] == nodes[1]  # beside dev's web, away from prod's
        api.core.patch_namespace("nsel-dev", {"metadata": {"labels": {"tier": "prod"}}}, _preload_content=False)
        api.create_pod("default", away_from_prod("db-2"))
        said = eventually(lambda: waiting(api, "db-2"))
        assert "0/2 nodes are available: 2 node(s) didn't match pod anti-affinity rules" in said, said
        assert not api.pods("default")["db-2"]["spec"].get("nodeName")
