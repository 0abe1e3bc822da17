"""Gangs whose members share one ResourceClaim, through ``kubeflux serve`` on the real control plane (a coscheduling
PodGroup, two nodes of one GPU each): members that fit together on one node are all bound to the node the claim is
allocated on, each in its ``reservedFor`` (their claim writes one after the other: the allocation first); members
that cannot all be on one node are not bound at all, as kube-scheduler refuses every other node ("resourceclaim not
available on the node") (rev34x finding 5)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client

from kubeflux.controlplane import Binaries, ControlPlane
from tests.dra import claim, gpu_class, gpu_slice
from tests.realkube._serving import member, nodes, podgroup, serve

from .conftest import Api, eventually, running_plane

GROUP, VERSION = "resource.k8s.io", "v1"
PODGROUPS = "scheduling.x-k8s.io/v1alpha1"


@pytest.fixture(scope="module")
def plane(binaries: Binaries, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    with running_plane(binaries, tmp_path_factory.mktemp("plane"), crds=True) as started:
        yield started


def sharing(name: str, group: str, claim_name: str, cpu: str) -> dict[str, Any]:
    made = member(name, group, PODGROUPS, cpu)
    made["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": claim_name}]
    made["spec"]["containers"][0]["resources"]["claims"] = [{"name": "gpu"}]
    return made


def test_gang_members_sharing_one_claim_are_all_bound_to_its_node_or_none_is(plane: ControlPlane, api: Api) -> None:
    names = sorted(nodes(plane, api, 2, 8))
    custom = client.CustomObjectsApi(api.client)
    custom.create_cluster_custom_object(GROUP, VERSION, "deviceclasses", gpu_class())
    for name in names:
        custom.create_cluster_custom_object(GROUP, VERSION, "resourceslices", gpu_slice(name, 1))
    for name in ("together", "apart"):
        body = claim(name, 1)
        body["metadata"].pop("uid")
        custom.create_namespaced_custom_object(GROUP, VERSION, "default", "resourceclaims", body)
    podgroup(api, PODGROUPS, "together", {"minMember": 4})
    podgroup(api, PODGROUPS, "apart", {"minMember": 4})

    def claimed(name: str) -> dict[str, Any]:
        found: dict[str, Any] = custom.get_namespaced_custom_object(GROUP, VERSION, "default", "resourceclaims", name)
        return found

    with serve(plane):
        for i in range(4):  # three cores each: never four on one node, so never all on the claim's
            api.create_pod("default", sharing(f"apart-{i}", "apart", "apart", "3"))
        for i in range(4):
            api.create_pod("default", sharing(f"together-{i}", "together", "together", "1"))
        eventually(lambda: all(api.pods("default")[f"together-{i}"]["spec"].get("nodeName") for i in range(4)))
        pods = api.pods("default")
        (node,) = {pods[f"together-{i}"]["spec"]["nodeName"] for i in range(4)}
        allocation = claimed("together")["status"]["allocation"]
        assert allocation["nodeSelector"]["nodeSelectorTerms"][0]["matchFields"][0]["values"] == [node]
        reserved = {entry["name"] for entry in claimed("together")["status"]["reservedFor"]}
        assert reserved == {f"together-{i}" for i in range(4)}

        def told(name: str) -> str:
            conditions = api.pods("default")[name].get("status", {}).get("conditions") or []
            return next((c.get("message", "") for c in conditions if c.get("type") == "PodScheduled"), "")

        eventually(lambda: all(told(f"apart-{i}") for i in range(4)))
        assert not any(api.pods("default")[f"apart-{i}"]["spec"].get("nodeName") for i in range(4))
        assert not (claimed("apart").get("status") or {}).get("allocation")
