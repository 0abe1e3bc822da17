"""The real Kueue (``sigs.k8s.io/kueue``, built by ``make kube``) admits Jobs to a ClusterQueue's quota and ``kubeflux
serve`` places the pods of those it admits, on the real control plane (:mod:`kubeflux.controlplane.kueue`).

A team's ClusterQueue has 4 cores of one ResourceFlavor (the nodes labelled ``pool: batch``); two Jobs of 2 × 2 cores
are sent to its LocalQueue, created suspended as Kueue's webhook would make them. Kueue admits the first (it fits) and
unsuspends it with the flavor's node selector; the second stays suspended, its Workload pending for want of quota,
and no pod of it exists. serve binds the first's pods on the batch nodes, though a larger node outside the pool is
free; when they complete, Kueue releases the quota and admits the second, whose pods serve binds in turn.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from kubeflux.controlplane import Binaries, ControlPlane
from kubeflux.controlplane.kueue import kueue_binary, start_kueue
from tests.realkube._serving import COMPLETE_AFTER, serve
from tests.shared import unavailable

from .conftest import Api, client, eventually, phase, running_plane, schedulable
from .watching import PodWatch

KUEUE = ("kueue.x-k8s.io", "v1beta2")
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
NAMESPACE = "team-a"


@pytest.fixture
def plane(binaries: Binaries, tmp_path: Path) -> Iterator[ControlPlane]:
    """A control plane of the test's own with the real Kueue in front of it."""
    with running_plane(binaries, tmp_path / "plane") as started:
        missing = kueue_binary(started)
        if isinstance(missing, str):
            unavailable(missing)
        start_kueue(started)
        yield started


def create(api: Api, plural: str, body: dict[str, Any], namespace: str | None = None) -> None:
    objects = client.CustomObjectsApi(api.client)
    body = {"apiVersion": "/".join(KUEUE), **body}
    if namespace is None:
        objects.create_cluster_custom_object(*KUEUE, plural, body, _preload_content=False)
    else:
        objects.create_namespaced_custom_object(*KUEUE, namespace, plural, body, _preload_content=False)


def queues(api: Api) -> None:
    """Flavor ``batch`` (nodes ``pool: batch``), ClusterQueue ``team`` (4 cores of it, every namespace), LocalQueue
    ``team-a/jobs``; returns once Kueue says the ClusterQueue is active (its controllers run)."""
    create(
        api,
        "resourceflavors",
        {"kind": "ResourceFlavor", "metadata": {"name": "batch"}, "spec": {"nodeLabels": {"pool": "batch"}}},
    )
    quota = {"name": "batch", "resources": [{"name": "cpu", "nominalQuota": "4"}]}
    spec = {"namespaceSelector": {}, "resourceGroups": [{"coveredResources": ["cpu"], "flavors": [quota]}]}
    create(api, "clusterqueues", {"kind": "ClusterQueue", "metadata": {"name": "team"}, "spec": spec})
    local = {"kind": "LocalQueue", "metadata": {"name": "jobs"}, "spec": {"clusterQueue": "team"}}
    create(api, "localqueues", local, NAMESPACE)

    def active() -> bool:
        found = client.CustomObjectsApi(api.client).get_cluster_custom_object(
            *KUEUE, "clusterqueues", "team", _preload_content=False
        )
        conditions = orjson.loads(found.data).get("status", {}).get("conditions") or []
        return any(c["type"] == "Active" and c["status"] == "True" for c in conditions)

    eventually(active, lambda: "ClusterQueue team Active")


def job(name: str, run: str) -> dict[str, Any]:
    """Two pods of 2 cores for kubeflux, sent to LocalQueue ``jobs``, suspended (what Kueue's webhook does to a Job
    labelled so); KWOK completes each pod ``run`` after it starts."""
    container = {"name": "main", "image": "busybox", "resources": {"requests": {"cpu": "2"}}}
    template = {
        "metadata": {"annotations": {COMPLETE_AFTER: run}},
        "spec": {"schedulerName": "kubeflux", "restartPolicy": "Never", "containers": [container]},
    }
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "labels": {QUEUE_LABEL: "jobs"}},
        "spec": {"parallelism": 2, "completions": 2, "suspend": True, "template": template},
    }


def workload(api: Api, job_name: str) -> dict[str, Any] | None:
    """The Workload Kueue made for Job ``job_name`` (its owner), or None yet."""
    listed = client.CustomObjectsApi(api.client).list_namespaced_custom_object(
        *KUEUE, NAMESPACE, "workloads", _preload_content=False
    )
    for item in orjson.loads(listed.data)["items"]:
        if any(owner["name"] == job_name for owner in item["metadata"].get("ownerReferences") or []):
            found: dict[str, Any] = item
            return found
    return None


def condition(item: dict[str, Any] | None, kind: str) -> dict[str, Any]:
    if item is None:
        return {}
    conditions = item.get("status", {}).get("conditions") or []
    return next((c for c in conditions if c["type"] == kind), {})


def suspended(api: Api, name: str) -> bool:
    found = client.BatchV1Api(api.client).read_namespaced_job(name, NAMESPACE, _preload_content=False)
    return bool(orjson.loads(found.data)["spec"].get("suspend"))


def pods_of(api: Api, job_name: str) -> list[dict[str, Any]]:
    return [p for p in api.pods(NAMESPACE).values() if p["metadata"].get("labels", {}).get("job-name") == job_name]


def finish(plane: ControlPlane, name: str) -> None:
    """Pod ``name``'s container exits 0, as its kubelet would report it (KWOK would not before its delay)."""
    terminated = {"exitCode": 0, "reason": "Completed", "finishedAt": "2026-01-01T00:00:00Z"}
    container = {"name": "main", "image": "busybox", "imageID": "", "ready": False, "restartCount": 0}
    status = {"phase": "Succeeded", "containerStatuses": [{**container, "state": {"terminated": terminated}}]}
    patch = json.dumps({"status": status})
    plane.kubectl("patch", "pod", name, "-n", NAMESPACE, "--subresource=status", "--type=merge", "-p", patch)


def test_kueue_admits_the_job_that_fits_and_serve_places_its_pods_then_the_next(plane: ControlPlane, api: Api) -> None:
    batch_nodes = plane.add_kwok_nodes(2, cpu="2", prefix="batch-", labels={"pool": "batch"})
    other = plane.add_kwok_nodes(1, cpu="16", prefix="other-", labels={"pool": "other"})
    eventually(
        lambda: len(api.nodes()) == 3 and all(schedulable(n) for n in api.nodes().values()), lambda: "nodes Ready"
    )
    capacity = {name: 2000 for name in batch_nodes} | {name: 16000 for name in other}
    api.namespace(NAMESPACE)
    queues(api)
    jobs = client.BatchV1Api(api.client)
    with serve(plane) as scheduler, PodWatch(api.client, NAMESPACE, capacity, lambda: scheduler.binder.refused) as w:
        jobs.create_namespaced_job(NAMESPACE, job("first", "1h"), _preload_content=False)
        eventually(
            lambda: condition(workload(api, "first"), "Admitted").get("status") == "True", lambda: "first admitted"
        )
        jobs.create_namespaced_job(NAMESPACE, job("second", "1s"), _preload_content=False)
        pending = eventually(
            lambda: (found := condition(workload(api, "second"), "QuotaReserved")).get("status") == "False" and found,
            lambda: f"second's Workload pending: {workload(api, 'second')}",
        )
        assert pending["reason"] == "Pending" and "cpu" in pending["message"], pending
        # Kueue unsuspended the first with the flavor's node selector; serve binds its pods on the batch nodes only
        first = eventually(lambda: len(pods_of(api, "first")) == 2 and pods_of(api, "first"), lambda: "first's pods")
        assert all(p["spec"]["nodeSelector"] == {"pool": "batch"} for p in first)
        eventually(lambda: all(p["spec"].get("nodeName") for p in pods_of(api, "first")), lambda: "first bound")
        assert {p["spec"]["nodeName"] for p in pods_of(api, "first")} == set(batch_nodes)
        assert suspended(api, "second") and not pods_of(api, "second")
        assert condition(workload(api, "second"), "QuotaReserved")["status"] == "False"
        # the first completes, its quota is released, the second is admitted and placed in turn
        for p in pods_of(api, "first"):
            finish(plane, p["metadata"]["name"])
        eventually(
            lambda: condition(workload(api, "second"), "Admitted").get("status") == "True",
            lambda: f"second admitted: {workload(api, 'second')}",
        )
        assert all(phase(p) == "Succeeded" for p in pods_of(api, "first"))
        eventually(
            lambda: len(pods_of(api, "second")) == 2 and all(phase(p) == "Succeeded" for p in pods_of(api, "second")),
            lambda: f"second ran: {[(p['metadata']['name'], phase(p)) for p in pods_of(api, 'second')]}",
        )
        assert {p["spec"]["nodeName"] for p in pods_of(api, "second")} == set(batch_nodes)
        w.check()
