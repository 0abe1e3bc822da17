"""Volumes on the served cluster (``cluster serve``, issue 34): PersistentVolumes, claims, StorageClasses and
CSINodes are stored with the real server's defaults, its PV controller binds an ``Immediate`` claim to a matching
volume (and completes a binding a scheduler started), and the in-process schedulers place pods by their claims: a
claim waiting for its first consumer gets ``volume.kubernetes.io/selected-node``, the node its pod went to, or the
local volume there bound to it; an ``Immediate`` claim nothing binds keeps its pod waiting in kube-scheduler's words.
kubeflux and the kube-default baseline alike."""

from __future__ import annotations

import urllib.error
from collections.abc import Iterator
from typing import Any

import orjson
import pytest

from kubeflux.scheduler.interface import Scheduler
from kubeflux.sim.apiserver.clock import VirtualClock
from kubeflux.sim.apiserver.server import ApiServer
from kubeflux.sim.baselines import create
from kubeflux.sim.workloads.cluster_file import uniform_cluster
from tests.sim.apiserver._served import ORIGIN, PODS, call, eventually, scheduled

CLAIMS = "/api/v1/namespaces/default/persistentvolumeclaims"
VOLUMES = "/api/v1/persistentvolumes"
CLASSES = "/apis/storage.k8s.io/v1/storageclasses"


@pytest.fixture(params=["kubeflux", "kube-default"])
def served(request: pytest.FixtureRequest) -> Iterator[tuple[ApiServer, Scheduler]]:
    scheduler = create(request.param)
    server = ApiServer(
        uniform_cluster(3, 8, "64Gi"),
        kubelet=True,
        schedulers=[scheduler],
        clock=VirtualClock(ORIGIN),
        controllers=True,
    ).start()
    try:
        yield server, scheduler
    finally:
        server.stop()


def storage_class(name: str, provisioner: str, mode: str | None = None) -> dict[str, Any]:
    made: dict[str, Any] = {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": name}}
    made["provisioner"] = provisioner
    if mode:
        made["volumeBindingMode"] = mode
    return made


def claim(name: str, cls: str, size: str = "1Gi") -> dict[str, Any]:
    spec = {"accessModes": ["ReadWriteOnce"], "storageClassName": cls, "resources": {"requests": {"storage": size}}}
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": name}, "spec": spec}


def volume(name: str, cls: str, size: str, node: str = "") -> dict[str, Any]:
    spec: dict[str, Any] = {"capacity": {"storage": size}, "accessModes": ["ReadWriteOnce"], "storageClassName": cls}
    spec["hostPath"] = {"path": f"/mnt/{name}"}
    if node:
        term = {"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In", "values": [node]}]}
        spec["nodeAffinity"] = {"required": {"nodeSelectorTerms": [term]}}
    return {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": name}, "spec": spec}


def using(name: str, scheduler: str, claim_name: str) -> dict[str, Any]:
    container = {"name": "main", "image": "busybox:1.36", "resources": {"requests": {"cpu": "1"}}}
    volumes = [{"name": "data", "persistentVolumeClaim": {"claimName": claim_name}}]
    spec = {"schedulerName": scheduler, "containers": [container], "volumes": volumes}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec}


def test_storage_objects_are_stored_with_the_real_server_s_defaults(served: tuple[ApiServer, Scheduler]) -> None:
    server, _ = served
    made = call(server, "POST", CLASSES, storage_class("plain", "csi.example.com"))
    assert (made["reclaimPolicy"], made["volumeBindingMode"]) == ("Delete", "Immediate")
    pv = call(server, "POST", VOLUMES, volume("free", "none", "1Gi"))
    assert (pv["spec"]["persistentVolumeReclaimPolicy"], pv["spec"]["volumeMode"]) == ("Retain", "Filesystem")
    eventually(lambda: call(server, "GET", f"{VOLUMES}/free")["status"]["phase"] == "Available", "the PV available")
    pvc = call(server, "POST", CLAIMS, claim("c", "none"))
    assert (pvc["spec"]["volumeMode"], pvc["status"]["phase"]) == ("Filesystem", "Pending")


def test_an_immediate_claim_is_bound_to_the_smallest_matching_volume(served: tuple[ApiServer, Scheduler]) -> None:
    server, scheduler = served
    call(server, "POST", CLASSES, storage_class("manual", "kubernetes.io/no-provisioner"))
    for name, size in (("big", "10Gi"), ("small", "2Gi"), ("tiny", "500Mi")):
        call(server, "POST", VOLUMES, volume(name, "manual", size))
    call(server, "POST", CLAIMS, claim("fast", "manual"))
    eventually(lambda: call(server, "GET", f"{CLAIMS}/fast")["status"]["phase"] == "Bound", "the claim bound")
    bound = call(server, "GET", f"{CLAIMS}/fast")
    assert bound["spec"]["volumeName"] == "small"
    assert bound["metadata"]["annotations"]["pv.kubernetes.io/bind-completed"] == "yes"
    assert bound["status"]["capacity"] == {"storage": "2Gi"}
    assert call(server, "GET", f"{VOLUMES}/small")["status"]["phase"] == "Bound"
    call(server, "POST", PODS, using("user", scheduler.name, "fast"))
    eventually(lambda: scheduled(server, "user")[0] != "", "the pod of a bound claim bound")


def test_claims_waiting_for_their_first_consumer_are_bound_where_the_pod_goes(
    served: tuple[ApiServer, Scheduler],
) -> None:
    server, scheduler = served
    call(server, "POST", CLASSES, storage_class("wffc", "csi.example.com", "WaitForFirstConsumer"))
    call(server, "POST", CLASSES, storage_class("local", "kubernetes.io/no-provisioner", "WaitForFirstConsumer"))
    call(server, "POST", CLASSES, storage_class("eager", "csi.example.com"))
    call(server, "POST", VOLUMES, volume("disk", "local", "5Gi", node="node-0002"))
    for name, cls in (("data", "wffc"), ("local-data", "local"), ("never", "eager")):
        call(server, "POST", CLAIMS, claim(name, cls))
    call(server, "POST", PODS, using("a", scheduler.name, "data"))
    call(server, "POST", PODS, using("b", scheduler.name, "local-data"))
    call(server, "POST", PODS, using("c", scheduler.name, "never"))
    eventually(lambda: scheduled(server, "a")[0] != "" and scheduled(server, "b")[0] != "", "a and b bound")
    annotations = call(server, "GET", f"{CLAIMS}/data")["metadata"]["annotations"]
    assert annotations["volume.kubernetes.io/selected-node"] == scheduled(server, "a")[0]
    assert scheduled(server, "b")[0] == "node-0002"  # where its volume is
    eventually(lambda: call(server, "GET", f"{CLAIMS}/local-data")["status"]["phase"] == "Bound", "the PV controller")
    assert call(server, "GET", f"{CLAIMS}/local-data")["spec"]["volumeName"] == "disk"
    eventually(lambda: scheduled(server, "c")[1] == "False", "c told it waits")
    pod = call(server, "GET", f"{PODS}/c")
    [condition] = [c for c in pod["status"]["conditions"] if c["type"] == "PodScheduled"]
    assert condition["message"].startswith("0/3 nodes are available: pod has unbound immediate PersistentVolumeClaims.")


def test_a_claim_naming_no_class_gets_the_default_class(served: tuple[ApiServer, Scheduler]) -> None:
    """The DefaultStorageClass admission plugin, on in every kube-apiserver: a claim without ``storageClassName``
    is stored with the class annotated the default; one naming "" keeps no class."""
    server, _ = served
    call(server, "POST", CLASSES, storage_class("other", "rancher.io/local-path", "WaitForFirstConsumer"))
    made = storage_class("standard", "rancher.io/local-path", "WaitForFirstConsumer")
    made["metadata"]["annotations"] = {"storageclass.kubernetes.io/is-default-class": "true"}
    call(server, "POST", CLASSES, made)
    plain = claim("plain", "")
    del plain["spec"]["storageClassName"]
    assert call(server, "POST", CLAIMS, plain)["spec"]["storageClassName"] == "standard"
    assert call(server, "POST", CLAIMS, claim("none", ""))["spec"]["storageClassName"] == ""


def test_a_csinode_with_a_malformed_or_negative_count_is_refused(served: tuple[ApiServer, Scheduler]) -> None:
    server, _ = served
    for allocatable, field in (
        ([1], "spec.drivers[0].allocatable"),
        ({"count": -1}, "spec.drivers[0].allocatable.count"),
    ):
        driver = {"name": "csi.example.com", "nodeID": "node-0000", "allocatable": allocatable}
        body = {"apiVersion": "storage.k8s.io/v1", "kind": "CSINode", "metadata": {"name": "node-0000"}}
        with pytest.raises(urllib.error.HTTPError) as refused:
            call(server, "POST", "/apis/storage.k8s.io/v1/csinodes", {**body, "spec": {"drivers": [driver]}})
        assert refused.value.code == 422
        assert orjson.loads(refused.value.read())["details"]["causes"][0]["field"] == field
