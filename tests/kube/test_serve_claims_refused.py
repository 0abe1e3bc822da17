"""A pod with a ResourceClaim whose Binding the API server refuses, while the claims' watch lags behind serve's own
writes (held deterministically: :class:`~tests.held_claims.HeldClaims`), on the served (simulated) cluster.

serve writes the claim (finalizer, allocation, the pod in ``reservedFor``), the Binding is refused, and serve takes
the writes back. Its books must hold the claim as taken back from the server's answers, not as the watch last showed
it (allocated, reserved for the pod): else the next try writes nothing for the claim and binds the pod to a claim
with no allocation and no reservation (rev34y #5)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest
from kubernetes import client

from kubeflux.apiobjects.resourceclaims import FINALIZER, allocation_status
from kubeflux.apiobjects.watched import cluster_event
from kubeflux.kube import serve as serve_module
from kubeflux.kube.binder import Binder
from kubeflux.kube.command import api_client
from kubeflux.kube.config import parse_config
from kubeflux.kube.serve import Serve
from kubeflux.scheduler.devices import AllocatedDevice, ClaimAllocation, ResourceClaim
from tests.dra import DRIVER, claim, claiming_pod, gpu_class, gpu_slice
from tests.held_claims import HeldClaims

from .conftest import CEILING, Cluster, eventually, start_cluster

GROUP, VERSION = "resource.k8s.io", "v1"
REFUSAL = "h35l refuses this Binding"


@pytest.fixture
def gpu_cluster(tmp_path: Path) -> Any:
    """One node of 16 cores and one GPU, its DeviceClass, and the claim ``default/c`` of one GPU."""
    started = start_cluster(tmp_path)
    custom = client.CustomObjectsApi(started.api)
    custom.create_cluster_custom_object(GROUP, VERSION, "deviceclasses", gpu_class())
    custom.create_cluster_custom_object(GROUP, VERSION, "resourceslices", gpu_slice("node-0000", 1))
    body = claim("c", 1)
    body["metadata"].pop("uid")
    custom.create_namespaced_custom_object(GROUP, VERSION, "default", "resourceclaims", body)
    try:
        yield started
    finally:
        started.api.close()
        started.server.stop()


def _claim(cluster: Cluster, name: str) -> dict[str, Any]:
    got: dict[str, Any] = client.CustomObjectsApi(cluster.api).get_namespaced_custom_object(
        GROUP, VERSION, "default", "resourceclaims", name
    )
    return got


def _refuse_first(serve: Serve, held: HeldClaims, times: int) -> list[str]:
    """The first ``times`` Bindings are refused (403, as an admission policy refuses), each once serve's loop has
    been given the claim as the first Bind wrote it; returns the pods refused."""
    assert isinstance(serve.binder, Binder)
    real = serve.binder.writer.create_namespaced_pod_binding
    refused: list[str] = []

    def refusing(name: str, namespace: str, body: Any) -> Any:
        if len(refused) < times:
            assert held.reserved["default/c"].wait(CEILING)
            refused.append(name)
            status = {"kind": "Status", "status": "Failure", "message": REFUSAL, "reason": "Forbidden", "code": 403}
            raise client.ApiException(status=403, reason="Forbidden", body=orjson.dumps(status).decode())
        return real(name, namespace, body)

    serve.binder.writer.create_namespaced_pod_binding = refusing  # type: ignore[method-assign]
    return refused


def test_a_pod_refused_twice_is_bound_with_its_claim_allocated_and_reserved_though_the_watch_lags(
    gpu_cluster: Cluster,
) -> None:
    cluster = gpu_cluster
    config = parse_config({"watch": {"timeoutSeconds": 30}, "binding": {"process": False}})
    serve = Serve(config, api_client(cluster.kubeconfig, None, False, 16))
    held = HeldClaims(serve, "default/c")
    refused = _refuse_first(serve, held, 2)
    with serve:
        cluster.create(claiming_pod("p", "kubeflux", claim_name="c"))
        cluster.wait_for(lambda pods: bool(pods["p"]["spec"].get("nodeName")))
        assert refused == ["p", "p"]  # two refused tries in a row, then the Binding
        assert held.held  # the watch never showed serve's loop the claim taken back, nor written again
        written = _claim(cluster, "c")
        results = written["status"]["allocation"]["devices"]["results"]
        assert [r["device"] for r in results] == ["gpu-0"]
        assert [r["name"] for r in written["status"]["reservedFor"]] == ["p"]
        assert written["metadata"]["finalizers"] == [FINALIZER]

        # the watch catches up: its older events change nothing, and the books hold the claim as the server does
        held.release()
        books = serve.cores[0].books.devices
        eventually(
            lambda: books.claims["default/c"].resource_version == _claim(cluster, "c")["metadata"]["resourceVersion"]
        )
        known = books.claims["default/c"]
        assert known.reserved_for == (cluster.pods()["p"]["metadata"]["uid"],)
        assert known.allocation is not None and [d.device for d in known.allocation] == ["gpu-0"]


def test_an_older_watch_event_of_a_claim_never_overwrites_the_answer_to_serves_own_write(
    gpu_cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The events held are delivered after the pod is bound: each is older than what the cores heard from serve's
    own writes, and none reaches them."""
    cluster = gpu_cluster
    config = parse_config({"watch": {"timeoutSeconds": 30}, "binding": {"process": False}})
    serve = Serve(config, api_client(cluster.kubeconfig, None, False, 16))
    held = HeldClaims(serve, "default/c")
    heard: list[int] = []

    def read(type_: str, kind: str, obj: dict[str, Any], *reader: Any) -> Any:  # what its cores hear
        event = cluster_event(type_, kind, obj, *reader)
        if isinstance(event.obj, ResourceClaim):
            heard.append(int(event.obj.resource_version))
        return event

    monkeypatch.setattr(serve_module, "cluster_event", read)  # (the compiled core's methods cannot be patched)
    versions = serve.claim_versions
    real_watched = versions.watched
    watched: list[bool] = []

    def counted(type_: str, obj: dict[str, Any]) -> bool:
        news = real_watched(type_, obj)
        watched.append(news)
        return news

    versions.watched = counted  # type: ignore[method-assign]
    _refuse_first(serve, held, 1)
    with serve:
        cluster.create(claiming_pod("p", "kubeflux", claim_name="c"))
        cluster.wait_for(lambda pods: bool(pods["p"]["spec"].get("nodeName")))
        stale = len(held.held)
        before = len(watched)
        held.release()
        eventually(lambda: len(watched) >= before + stale)
    assert stale >= 3  # the writes taken back, and the claim written again
    assert watched[before : before + stale] == [False] * stale
    assert heard == sorted(set(heard))  # each state heard once, never an older one after a newer


@pytest.mark.parametrize(
    "left",
    [
        pytest.param("protected", id="killed between taking back the status and the finalizer"),
        pytest.param("reserved", id="killed between the claim's writes and the Binding"),
    ],
)
def test_serve_restarted_between_a_binds_claim_writes_binds_the_pod_with_its_claim_whole(
    gpu_cluster: Cluster, left: str
) -> None:
    """A serve killed in the middle of a try leaves the claim with only the finalizer (its status taken back), or
    written for the pod (the Binding not sent): the next serve binds the pod with the claim allocated, reserved for
    it and protected, writing it only when it is not."""
    cluster = gpu_cluster
    uid = cluster.create(claiming_pod("p", "kubeflux", claim_name="c"))["metadata"]["uid"]
    custom = client.CustomObjectsApi(cluster.api)
    custom.patch_namespaced_custom_object(
        GROUP, VERSION, "default", "resourceclaims", "c", {"metadata": {"finalizers": [FINALIZER]}}
    )
    if left == "reserved":
        gpu = AllocatedDevice("gpus", DRIVER, "node-0000", "gpu-0")
        made = ClaimAllocation("default", "c", "", "node-0000", (gpu,))
        status = {"status": allocation_status(made, "p", uid)}
        custom.patch_namespaced_custom_object_status(GROUP, VERSION, "default", "resourceclaims", "c", status)
    version = _claim(cluster, "c")["metadata"]["resourceVersion"]
    with cluster.serve(binding={"process": False}):
        cluster.wait_for(lambda pods: pods["p"]["spec"].get("nodeName") == "node-0000")
    written = _claim(cluster, "c")
    assert [r["device"] for r in written["status"]["allocation"]["devices"]["results"]] == ["gpu-0"]
    assert [r["uid"] for r in written["status"]["reservedFor"]] == [uid]
    assert written["metadata"]["finalizers"] == [FINALIZER]
    assert (written["metadata"]["resourceVersion"] == version) == (left == "reserved")  # written only when needed
