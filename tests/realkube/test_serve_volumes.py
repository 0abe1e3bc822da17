"""Volumes through ``kubeflux serve`` on the real control plane (issue 34): serve watches StorageClasses,
PersistentVolumes, claims and CSINodes, and binds a pod whose claim waits for its first consumer as kube-scheduler's
volume binder does: the claim gets ``volume.kubernetes.io/selected-node``, the node kubeflux chose, within the
class's ``allowedTopologies``; a claim a local PersistentVolume can hold gets that volume (its ``claimRef``), which
the real kube-controller-manager's PV controller then binds, and the pod goes to the volume's node; a claim of an
``Immediate`` class not bound yet keeps its pod waiting in kube-scheduler's words."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from kubeflux.controlplane import ControlPlane
from kubeflux.kube.binder import Binder, BindOutcome, PodRef
from kubeflux.scheduler.interface import Bind
from kubeflux.scheduler.storage import ANN_SELECTED_NODE, ClaimBinding
from tests.realkube._serving import pod, serve, waiting

from .conftest import Api, client, eventually, schedulable

HOST = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"


@pytest.fixture
def storage(api: Api) -> Iterator[Any]:
    """The storage API, with a zonal class that waits for its first consumer, a local class of static volumes only,
    and an Immediate class with no volumes (deleted afterwards)."""
    storage_api = client.StorageV1Api(api.client)
    classes = [
        {
            "metadata": {"name": "zonal"},
            "provisioner": "csi.example.com",
            "volumeBindingMode": "WaitForFirstConsumer",
            "allowedTopologies": [{"matchLabelExpressions": [{"key": ZONE, "values": ["vol-b"]}]}],
        },
        {
            "metadata": {"name": "local"},
            "provisioner": "kubernetes.io/no-provisioner",
            "volumeBindingMode": "WaitForFirstConsumer",
        },
        {"metadata": {"name": "eager"}, "provisioner": "csi.example.com", "volumeBindingMode": "Immediate"},
    ]
    for sc in classes:
        storage_api.create_storage_class({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", **sc})
    yield storage_api
    for sc in classes:
        storage_api.delete_storage_class(sc["metadata"]["name"])


def claim(api: Api, name: str, cls: str) -> None:
    body = {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": name},
        "spec": {
            "accessModes": ["ReadWriteOnce"],
            "storageClassName": cls,
            "resources": {"requests": {"storage": "1Gi"}},
        },
    }
    api.core.create_namespaced_persistent_volume_claim("default", body, _preload_content=False)


def read_claim(api: Api, name: str) -> Any:
    return api.core.read_namespaced_persistent_volume_claim(name, "default")


def using(name: str, claim_name: str) -> dict[str, Any]:
    made = pod(name, "500m")
    made["spec"]["volumes"] = [{"name": "data", "persistentVolumeClaim": {"claimName": claim_name}}]
    return made


def node_of(api: Api, name: str) -> str:
    return str(eventually(lambda: api.pods("default")[name]["spec"].get("nodeName")))


def test_claims_waiting_for_their_first_consumer_are_bound_where_kubeflux_puts_the_pod(
    plane: ControlPlane, api: Api, storage: Any
) -> None:
    zone_a = plane.add_kwok_nodes(2, cpu="4", prefix="vol-a-", labels={ZONE: "vol-a"})
    zone_b = plane.add_kwok_nodes(2, cpu="4", prefix="vol-b-", labels={ZONE: "vol-b"})
    eventually(lambda: all(n in api.nodes() and schedulable(api.nodes()[n]) for n in zone_a + zone_b))
    local_pv = {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": "vol-local"},
        "spec": {
            "capacity": {"storage": "2Gi"},
            "accessModes": ["ReadWriteOnce"],
            "storageClassName": "local",
            "local": {"path": "/mnt/disk"},
            "nodeAffinity": {
                "required": {
                    "nodeSelectorTerms": [
                        {"matchExpressions": [{"key": HOST, "operator": "In", "values": [zone_a[1]]}]}
                    ]
                }
            },
        },
    }
    api.core.create_persistent_volume(local_pv, _preload_content=False)
    eventually(lambda: api.core.read_persistent_volume("vol-local").status.phase == "Available")  # the PV controller
    claim(api, "vol-zonal", "zonal")
    claim(api, "vol-local", "local")
    claim(api, "vol-eager", "eager")
    with serve(plane):
        api.create_pod("default", using("vol-zonal-user", "vol-zonal"))
        api.create_pod("default", using("vol-local-user", "vol-local"))
        api.create_pod("default", using("vol-eager-user", "vol-eager"))
        chosen = node_of(api, "vol-zonal-user")
        assert chosen in zone_b  # the class provisions only there
        assert read_claim(api, "vol-zonal").metadata.annotations[ANN_SELECTED_NODE] == chosen
        assert node_of(api, "vol-local-user") == zone_a[1]  # where its volume is
        pv = api.core.read_persistent_volume("vol-local")
        assert (pv.spec.claim_ref.namespace, pv.spec.claim_ref.name) == ("default", "vol-local")
        bound = eventually(
            lambda: read_claim(api, "vol-local").status.phase == "Bound" and read_claim(api, "vol-local")
        )
        assert bound.spec.volume_name == "vol-local"  # completed by the real PV controller
        said = eventually(lambda: waiting(api, "vol-eager-user"))
        assert said.startswith("0/") and "pod has unbound immediate PersistentVolumeClaims." in said, said
        assert not api.pods("default")["vol-eager-user"]["spec"].get("nodeName")
    for name in ("vol-zonal-user", "vol-local-user", "vol-eager-user"):
        api.core.delete_namespaced_pod(name, "default", grace_period_seconds=0, _preload_content=False)


def test_a_claim_another_writer_changed_since_kubeflux_read_it_refuses_the_bind(api: Api) -> None:
    """kube-scheduler's ``bindAPIUpdate`` sends its assumed copy (the resourceVersion it read): the real API server
    refuses kubeflux's write of the claim's node (409) when another scheduler gave it one meanwhile, and the Bind
    is refused instead of overwriting it."""
    claim(api, "vol-raced", "local")
    read = read_claim(api, "vol-raced")
    other = {"metadata": {"annotations": {ANN_SELECTED_NODE: "their-node"}}}
    api.core.patch_namespaced_persistent_volume_claim("vol-raced", "default", other)
    refused: list[BindOutcome] = []
    binder = Binder(api.client, workers=1, on_refused=refused.append)
    ours = ClaimBinding("default/vol-raced", read.metadata.uid, "our-node", "", read.metadata.resource_version)
    try:
        binder.bind(
            "kubeflux",
            Bind("default/raced", "uid-raced", "our-node", volume_claims=(ours,)),
            PodRef("default", "raced", "uid-raced"),
        )
        assert binder.drain(60)
    finally:
        binder.stop()
        api.core.delete_namespaced_persistent_volume_claim("vol-raced", "default")
    assert [outcome.reason.split(":")[0] for outcome in refused] == ["409"]
    assert read_claim(api, "vol-raced").metadata.annotations[ANN_SELECTED_NODE] == "their-node"
