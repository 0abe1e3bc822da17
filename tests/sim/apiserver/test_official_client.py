"""Scenarios with the official ``kubernetes`` Python client over real HTTP against the simulated API server."""

from __future__ import annotations

import http.client
import threading
import urllib.parse
from pathlib import Path
from typing import Any

import orjson
import pytest

from kubeflux.sim.apiserver.app import ServerSettings
from kubeflux.sim.apiserver.resources import default_registry
from kubeflux.sim.apiserver.server import ApiServer
from kubeflux.sim.apiserver.store import Store
from kubeflux.sim.workloads.cluster_file import uniform_cluster

from .conftest import kubernetes, pod_manifest, start_server

client = kubernetes.client
ApiException = client.ApiException


def _binding(name: str, node: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": name}, "target": {"kind": "Node", "name": node}}


def _error(exc: pytest.ExceptionInfo[ApiException]) -> dict[str, Any]:
    body: dict[str, Any] = orjson.loads(exc.value.body)
    return body


def test_nodes_of_the_simulated_cluster_are_listed_with_their_allocatable(kube: Any) -> None:
    nodes = client.CoreV1Api(kube).list_node().items
    assert [n.metadata.name for n in nodes] == ["node-0000", "node-0001", "node-0002", "node-0003"]
    assert nodes[0].status.allocatable["cpu"] == "16"
    assert nodes[0].status.conditions[0].type == "Ready"


def test_create_read_list_with_selectors_and_delete_a_pod(kube: Any) -> None:
    core = client.CoreV1Api(kube)
    created = core.create_namespaced_pod("default", pod_manifest("web-0", labels={"app": "web", "tier": "2"}))
    core.create_namespaced_pod("default", pod_manifest("db-0", labels={"app": "db"}))
    assert created.status.phase == "Pending"
    assert created.spec.scheduler_name == "default-scheduler"
    assert created.metadata.uid and created.metadata.creation_timestamp

    def names(**query: Any) -> list[str]:
        return [p.metadata.name for p in core.list_namespaced_pod("default", **query).items]

    assert names() == ["db-0", "web-0"]
    assert names(label_selector="app=web") == ["web-0"]
    assert names(label_selector="app in (web,db),app!=db") == ["web-0"]
    assert names(label_selector="tier>1") == ["web-0"]
    assert names(label_selector="!tier") == ["db-0"]
    assert names(label_selector="tier") == ["web-0"]
    assert names(label_selector="app notin (web)") == ["db-0"]
    assert names(field_selector="metadata.name=db-0") == ["db-0"]
    assert names(field_selector="status.phase!=Succeeded,status.phase!=Failed") == ["db-0", "web-0"]
    assert names(field_selector="spec.nodeName=") == ["db-0", "web-0"]
    core.delete_namespaced_pod("web-0", "default")
    assert names() == ["db-0"]
    with pytest.raises(ApiException) as gone:
        core.read_namespaced_pod("web-0", "default")
    assert gone.value.status == 404
    assert _error(gone)["reason"] == "NotFound"


def test_generate_name_gives_unique_names(kube: Any) -> None:
    core = client.CoreV1Api(kube)
    manifest = pod_manifest("")
    manifest["metadata"] = {"generateName": "worker-"}
    names = {core.create_namespaced_pod("default", manifest).metadata.name for _ in range(20)}
    assert len(names) == 20
    assert all(n.startswith("worker-") and len(n) == len("worker-") + 5 for n in names)


def test_an_update_with_a_stale_resource_version_is_a_conflict(kube: Any) -> None:
    core = client.CoreV1Api(kube)
    core.create_namespaced_config_map("default", {"metadata": {"name": "settings"}, "data": {"a": "1"}})
    first = core.read_namespaced_config_map("settings", "default")
    first.data = {"a": "2"}
    updated = core.replace_namespaced_config_map("settings", "default", first)
    assert int(updated.metadata.resource_version) > int(first.metadata.resource_version)
    first.data = {"a": "3"}
    with pytest.raises(ApiException) as stale:
        core.replace_namespaced_config_map("settings", "default", first)
    assert stale.value.status == 409
    assert _error(stale)["reason"] == "Conflict"
    assert "the object has been modified" in _error(stale)["message"]
    assert core.read_namespaced_config_map("settings", "default").data == {"a": "2"}


def test_the_three_patch_formats(kube: Any) -> None:
    core = client.CoreV1Api(kube)
    core.create_namespaced_pod("default", pod_manifest("p", labels={"app": "x"}))
    # strategic merge (the client's default for a dict body): labels merge, containers merge by name
    patched = core.patch_namespaced_pod(
        "p",
        "default",
        {"metadata": {"labels": {"team": "hpc"}}, "spec": {"containers": [{"name": "main", "image": "busybox:1.37"}]}},
    )
    assert patched.metadata.labels == {"app": "x", "team": "hpc"}
    assert patched.spec.containers[0].image == "busybox:1.37"
    assert patched.spec.containers[0].resources.requests == {"cpu": "1"}
    # JSON patch
    patched = core.patch_namespaced_pod(
        "p",
        "default",
        [{"op": "replace", "path": "/metadata/labels/app", "value": "y"}],
        _content_type="application/json-patch+json",
    )
    assert patched.metadata.labels["app"] == "y"
    # JSON merge patch: null deletes
    patched = core.patch_namespaced_pod(
        "p", "default", {"metadata": {"labels": {"team": None}}}, _content_type="application/merge-patch+json"
    )
    assert patched.metadata.labels == {"app": "y"}
    # a patch naming a stale resourceVersion is a conflict
    with pytest.raises(ApiException) as stale:
        core.patch_namespaced_pod("p", "default", {"metadata": {"resourceVersion": "2", "labels": {"a": "b"}}})
    assert stale.value.status == 409


def test_status_patch_changes_only_status_and_a_main_update_ignores_status(kube: Any) -> None:
    core = client.CoreV1Api(kube)
    core.create_namespaced_pod("default", pod_manifest("p"))
    conditions = [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": "0/4 nodes"}]
    patched = core.patch_namespaced_pod_status(
        "p", "default", {"status": {"conditions": conditions}, "metadata": {"labels": {"ignored": "yes"}}}
    )
    assert patched.status.conditions[0].reason == "Unschedulable"
    assert patched.status.phase == "Pending"
    assert not patched.metadata.labels or "ignored" not in patched.metadata.labels
    patched = core.patch_namespaced_pod("p", "default", {"status": {"phase": "Running"}})
    assert patched.status.phase == "Pending"


def test_binding_answers_201_with_a_status_then_409_then_404(kube: Any) -> None:
    core = client.CoreV1Api(kube)
    core.create_namespaced_pod("default", pod_manifest("p"))
    response = core.create_namespaced_pod_binding("p", "default", _binding("p", "node-0002"), _preload_content=False)
    assert response.status == 201
    assert orjson.loads(response.data) == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success",
        "code": 201,
    }
    pod = core.read_namespaced_pod("p", "default")
    assert pod.spec.node_name == "node-0002"
    assert [(c.type, c.status) for c in pod.status.conditions] == [("PodScheduled", "True")]
    with pytest.raises(ApiException) as again:
        core.create_namespaced_pod_binding("p", "default", _binding("p", "node-0001"), _preload_content=False)
    assert again.value.status == 409
    assert "already assigned" in _error(again)["message"]
    with pytest.raises(ApiException) as missing:
        core.create_namespaced_pod_binding("q", "default", _binding("q", "node-0001"), _preload_content=False)
    assert missing.value.status == 404
    # the bindings collection does the same
    core.create_namespaced_pod("default", pod_manifest("r"))
    response = core.create_namespaced_binding("default", _binding("r", "node-0003"), _preload_content=False)
    assert response.status == 201
    assert core.read_namespaced_pod("r", "default").spec.node_name == "node-0003"


def test_a_bound_pod_terminates_gracefully_and_grace_zero_deletes_at_once(kube: Any) -> None:
    core = client.CoreV1Api(kube)
    for name in ("a", "b"):
        core.create_namespaced_pod("default", pod_manifest(name))
        core.create_namespaced_pod_binding(name, "default", _binding(name, "node-0000"), _preload_content=False)
    core.delete_namespaced_pod("a", "default")
    terminating = core.read_namespaced_pod("a", "default")
    assert terminating.metadata.deletion_timestamp is not None
    assert terminating.metadata.deletion_grace_period_seconds == 30
    core.delete_namespaced_pod("a", "default", grace_period_seconds=0)
    core.delete_namespaced_pod("b", "default", grace_period_seconds=0)
    assert core.list_namespaced_pod("default").items == []


def test_finalizers_hold_a_deleted_object_until_they_are_removed(kube: Any) -> None:
    core = client.CoreV1Api(kube)
    core.create_namespaced_config_map("default", {"metadata": {"name": "held", "finalizers": ["example.com/keep"]}})
    core.delete_namespaced_config_map("held", "default")
    held = core.read_namespaced_config_map("held", "default")
    assert held.metadata.deletion_timestamp is not None
    core.patch_namespaced_config_map(
        "held",
        "default",
        [{"op": "remove", "path": "/metadata/finalizers"}],
        _content_type="application/json-patch+json",
    )
    with pytest.raises(ApiException) as gone:
        core.read_namespaced_config_map("held", "default")
    assert gone.value.status == 404


def test_invalid_objects_are_422_with_field_causes(kube: Any) -> None:
    core = client.CoreV1Api(kube)
    bad = pod_manifest("Bad_Name")
    with pytest.raises(ApiException) as name:
        core.create_namespaced_pod("default", bad)
    assert name.value.status == 422
    assert _error(name)["details"]["causes"][0]["field"] == "metadata.name"
    no_containers = pod_manifest("p")
    no_containers["spec"] = {"containers": []}
    with pytest.raises(ApiException) as empty:
        core.create_namespaced_pod("default", no_containers)
    assert _error(empty)["details"]["causes"][0] == {
        "reason": "FieldValueRequired",
        "message": "Required value",
        "field": "spec.containers",
    }
    with pytest.raises(ApiException) as negative:
        core.create_namespaced_pod("default", pod_manifest("p", cpu="-1"))
    assert negative.value.status == 422
    assert _error(negative)["details"]["causes"][0]["field"] == "spec.containers[0].resources.requests.cpu"
    core.create_namespaced_pod("default", pod_manifest("p"))
    with pytest.raises(ApiException) as immutable:
        core.patch_namespaced_pod("p", "default", {"spec": {"restartPolicy": "Never"}})
    assert immutable.value.status == 422
    assert "pod updates may not change fields" in _error(immutable)["message"]
    with pytest.raises(ApiException) as exists:
        core.create_namespaced_pod("default", pod_manifest("p"))
    assert exists.value.status == 409
    assert _error(exists)["reason"] == "AlreadyExists"
    with pytest.raises(ApiException) as nowhere:
        core.create_namespaced_pod("nowhere", pod_manifest("p"))
    assert nowhere.value.status == 404
    with pytest.raises(ApiException) as selector:
        core.list_namespaced_pod("default", label_selector="app in (a")
    assert selector.value.status == 400
    with pytest.raises(ApiException) as field:
        core.list_namespaced_pod("default", field_selector="spec.unknown=x")
    assert field.value.status == 400


def test_leases_support_leader_election_updates(kube: Any) -> None:
    coordination = client.CoordinationV1Api(kube)
    lease = {
        "metadata": {"name": "kubeflux-scheduler"},
        "spec": {"holderIdentity": "a", "leaseDurationSeconds": 15, "acquireTime": "2026-01-01T00:00:00.000000Z"},
    }
    created = coordination.create_namespaced_lease("kube-system", lease)
    assert created.spec.holder_identity == "a"
    stale = coordination.read_namespaced_lease("kube-system", "kube-system") if False else created
    current = coordination.read_namespaced_lease("kubeflux-scheduler", "kube-system")
    current.spec.holder_identity = "b"
    coordination.replace_namespaced_lease("kubeflux-scheduler", "kube-system", current)
    stale.spec.holder_identity = "c"
    with pytest.raises(ApiException) as lost:
        coordination.replace_namespaced_lease("kubeflux-scheduler", "kube-system", stale)
    assert lost.value.status == 409
    assert coordination.read_namespaced_lease("kubeflux-scheduler", "kube-system").spec.holder_identity == "b"


def test_events_are_one_collection_seen_through_core_and_events_k8s_io(kube: Any) -> None:
    core = client.CoreV1Api(kube)
    events = client.EventsV1Api(kube)
    core.create_namespaced_pod("default", pod_manifest("p"))
    events.create_namespaced_event(
        "default",
        {
            "metadata": {"name": "p.scheduled"},
            "eventTime": "2026-01-01T00:00:00.000000Z",
            "reportingController": "default-scheduler",
            "reportingInstance": "default-scheduler-1",
            "action": "Binding",
            "reason": "Scheduled",
            "type": "Normal",
            "note": "Successfully assigned default/p to node-0000",
            "regarding": {"kind": "Pod", "namespace": "default", "name": "p"},
        },
    )
    core.create_namespaced_event(
        "default",
        {
            "metadata": {"name": "p.pulled"},
            "involvedObject": {"kind": "Pod", "namespace": "default", "name": "p"},
            "reason": "Pulled",
            "message": "image pulled",
            "type": "Normal",
            "source": {"component": "kubelet"},
        },
    )
    seen = core.list_namespaced_event("default", field_selector="involvedObject.name=p").items
    assert {(e.reason, e.message) for e in seen} == {
        ("Scheduled", "Successfully assigned default/p to node-0000"),
        ("Pulled", "image pulled"),
    }
    v1 = events.list_namespaced_event("default", field_selector="reason=Scheduled").items
    assert [(e.note, e.regarding.name, e.reporting_controller) for e in v1] == [
        ("Successfully assigned default/p to node-0000", "p", "default-scheduler")
    ]


def test_jobs_get_defaults_and_their_pods_are_garbage_collected(kube: Any) -> None:
    batch = client.BatchV1Api(kube)
    core = client.CoreV1Api(kube)
    template = {"spec": {"restartPolicy": "Never", "containers": [{"name": "main", "image": "busybox"}]}}
    job = batch.create_namespaced_job("default", {"metadata": {"name": "train"}, "spec": {"template": template}})
    assert (job.spec.completions, job.spec.parallelism, job.spec.backoff_limit) == (1, 1, 6)
    assert job.spec.template.metadata.labels["batch.kubernetes.io/job-name"] == "train"
    owner = {"apiVersion": "batch/v1", "kind": "Job", "name": "train", "uid": job.metadata.uid, "controller": True}
    for index in range(3):
        pod = pod_manifest(f"train-{index}")
        pod["metadata"]["ownerReferences"] = [owner]  # type: ignore[index]
        core.create_namespaced_pod("default", pod)
    core.create_namespaced_pod("default", pod_manifest("bystander"))
    batch.delete_namespaced_job("train", "default", propagation_policy="Background")
    assert [p.metadata.name for p in core.list_namespaced_pod("default").items] == ["bystander"]

    # without a propagation policy a batch/v1 Job orphans its pods (the real server's compatibility default)
    job = batch.create_namespaced_job("default", {"metadata": {"name": "keep"}, "spec": {"template": template}})
    pod = pod_manifest("keep-0")
    pod["metadata"]["ownerReferences"] = [owner | {"name": "keep", "uid": job.metadata.uid}]  # type: ignore[index]
    core.create_namespaced_pod("default", pod)
    batch.delete_namespaced_job("keep", "default")
    assert core.read_namespaced_pod("keep-0", "default").metadata.owner_references is None

    invalid = {
        "metadata": {"name": "bad"},
        "spec": {"template": {"spec": template["spec"] | {"restartPolicy": "Always"}}},
    }
    with pytest.raises(ApiException) as always:
        batch.create_namespaced_job("default", invalid)
    assert _error(always)["details"]["causes"][0]["field"] == "spec.template.spec.restartPolicy"


def test_podgroups_through_the_custom_objects_api(kube: Any) -> None:
    custom = client.CustomObjectsApi(kube)
    group = ("scheduling.x-k8s.io", "v1alpha1", "default", "podgroups")
    custom.create_namespaced_custom_object(
        *group,
        {
            "apiVersion": "scheduling.x-k8s.io/v1alpha1",
            "kind": "PodGroup",
            "metadata": {"name": "lammps"},
            "spec": {"minMember": 3},
        },
    )
    custom.patch_namespaced_custom_object_status(*group, "lammps", {"status": {"phase": "Scheduling", "scheduled": 1}})
    got = custom.get_namespaced_custom_object(*group, "lammps")
    assert got["status"] == {"phase": "Scheduling", "scheduled": 1}
    assert got["metadata"]["generation"] == 1
    custom.patch_namespaced_custom_object(*group, "lammps", {"spec": {"minMember": 4}})
    assert custom.get_namespaced_custom_object(*group, "lammps")["metadata"]["generation"] == 2
    with pytest.raises(ApiException) as bad:
        custom.create_namespaced_custom_object(
            *group,
            {
                "apiVersion": "scheduling.x-k8s.io/v1alpha1",
                "kind": "PodGroup",
                "metadata": {"name": "x"},
                "spec": {"minMember": 0},
            },
        )
    assert _error(bad)["details"]["causes"][0]["field"] == "spec.minMember"


def test_deleting_a_namespace_deletes_what_it_holds(kube: Any) -> None:
    core = client.CoreV1Api(kube)
    core.create_namespace({"metadata": {"name": "team-a"}})
    core.create_namespaced_pod("team-a", pod_manifest("p"))
    core.create_namespaced_config_map("team-a", {"metadata": {"name": "c"}})
    core.delete_namespace("team-a")
    with pytest.raises(ApiException) as gone:
        core.read_namespace("team-a")
    assert gone.value.status == 404
    assert core.list_pod_for_all_namespaces().items == []


def test_paging_with_limit_and_continue(kube: Any) -> None:
    core = client.CoreV1Api(kube)
    for index in range(25):
        core.create_namespaced_config_map("default", {"metadata": {"name": f"c-{index:02d}"}})
    seen: list[str] = []
    token = None
    while True:
        page = core.list_namespaced_config_map("default", limit=10, _continue=token)
        seen.extend(c.metadata.name for c in page.items)
        token = page.metadata._continue
        if not token:
            break
        assert page.metadata.remaining_item_count == 25 - len(seen)
    assert seen == [f"c-{index:02d}" for index in range(25)]


# --- watch ----------------------------------------------------------------------------------------------------


def test_watch_from_a_list_version_sees_every_later_change(kube: Any) -> None:
    core = client.CoreV1Api(kube)
    core.create_namespaced_pod("default", pod_manifest("before"))
    listed = core.list_namespaced_pod("default")
    core.create_namespaced_pod("default", pod_manifest("after"))
    core.create_namespaced_pod_binding("after", "default", _binding("after", "node-0001"), _preload_content=False)
    core.delete_namespaced_pod("before", "default")
    watch = kubernetes.watch.Watch()
    seen = []
    for event in watch.stream(
        core.list_namespaced_pod, "default", resource_version=listed.metadata.resource_version, timeout_seconds=30
    ):
        seen.append((event["type"], event["object"].metadata.name, event["object"].spec.node_name))
        if len(seen) == 4:
            watch.stop()
    # as on the real server, a pod's deletion is first written with its deletionTimestamp (MODIFIED), then DELETED
    assert seen == [
        ("ADDED", "after", None),
        ("MODIFIED", "after", "node-0001"),
        ("MODIFIED", "before", None),
        ("DELETED", "before", None),
    ]


def test_a_filtered_watch_sees_an_object_leave_its_filter_as_deleted(kube: Any) -> None:
    core = client.CoreV1Api(kube)
    listed = core.list_namespaced_pod("default", field_selector="spec.nodeName=")
    core.create_namespaced_pod("default", pod_manifest("p"))
    core.create_namespaced_pod_binding("p", "default", _binding("p", "node-0001"), _preload_content=False)
    watch = kubernetes.watch.Watch()
    seen = []
    for event in watch.stream(
        core.list_namespaced_pod,
        "default",
        field_selector="spec.nodeName=",
        resource_version=listed.metadata.resource_version,
        timeout_seconds=30,
    ):
        seen.append((event["type"], event["object"].metadata.name))
        if len(seen) == 2:
            watch.stop()
    assert seen == [("ADDED", "p"), ("DELETED", "p")]


def test_a_version_the_server_has_not_reached_is_waited_for_then_a_list_answered_504_too_large(
    tmp_path: Path,
) -> None:
    """As the real watch cache: a list from a version ahead of the server's waits for the writes to reach it; if
    they do not in time (the server restarted with a new history), 504 ``Timeout`` with the cause
    ``ResourceVersionTooLarge`` that makes client-go's reflector relist from the current version. A watch from such
    a version waits silently, as the real server's does (it used to end with that 504 as an ERROR event), and sends
    the events after it once the history gets there."""
    server = start_server(tmp_path, fresh_wait=1.0)
    try:
        api = kubernetes.config.new_client_from_config(config_file=str(tmp_path / "kubeconfig"))
        core = client.CoreV1Api(api)
        current = int(core.list_namespaced_config_map("default").metadata.resource_version)
        later = threading.Timer(0.1, lambda: core.create_namespaced_config_map("default", {"metadata": {"name": "c"}}))
        later.start()
        reached = core.list_namespaced_config_map("default", resource_version=str(current + 1))
        later.join()
        assert [c.metadata.name for c in reached.items] == ["c"]
        future = str(current + 1000)
        with pytest.raises(ApiException) as too_large:
            core.list_namespaced_config_map("default", resource_version=future)
        status = _error(too_large)
        assert (too_large.value.status, status["reason"]) == (504, "Timeout")
        assert status["message"] == f"Timeout: Too large resource version: {future}, current: {current + 1}"
        assert status["details"] == {
            "causes": [{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}],
            "retryAfterSeconds": 1,
        }
        raw = core.list_namespaced_config_map(
            "default", watch=True, resource_version=future, timeout_seconds=1, _preload_content=False
        )
        assert raw.status == 200 and raw.data == b""  # no ERROR: it waited, and its timeout ended it
        soon = str(current + 2)  # reached by the next two writes: the watch sends what comes after it
        later = threading.Timer(
            0.3, lambda: [core.create_namespaced_config_map("default", {"metadata": {"name": n}}) for n in "de"]
        )
        later.start()
        raw = core.list_namespaced_config_map(
            "default", watch=True, resource_version=soon, timeout_seconds=2, _preload_content=False
        )
        later.join()
        assert [(e["type"], e["object"]["metadata"]["name"]) for e in map(orjson.loads, raw.data.splitlines())] == [
            ("ADDED", "e")
        ]
        api.close()
    finally:
        server.stop()


def test_a_watch_from_a_version_not_reached_can_still_end_with_the_504(tmp_path: Path) -> None:
    """``ServerSettings.watch_future_waits=False`` keeps the answer this server gave before (for a client that relies
    on it): the wait of ``fresh_wait_seconds``, then one ERROR event of the 504 ResourceVersionTooLarge."""
    store = Store(default_registry())
    settings = ServerSettings(fresh_wait_seconds=0.2, watch_future_waits=False)
    server = ApiServer(uniform_cluster(1, 4, "8Gi"), settings=settings, store=store).start()
    try:
        server.write_kubeconfig(tmp_path / "kubeconfig")
        api = kubernetes.config.new_client_from_config(config_file=str(tmp_path / "kubeconfig"))
        core = client.CoreV1Api(api)
        future = str(store.rv + 1000)
        raw = core.list_namespaced_config_map("default", watch=True, resource_version=future, _preload_content=False)
        [error] = [orjson.loads(line) for line in raw.data.splitlines()]
        assert (error["type"], error["object"]["code"]) == ("ERROR", 504)
        assert error["object"]["details"]["causes"][0]["reason"] == "ResourceVersionTooLarge"
        api.close()
    finally:
        server.stop()


def test_a_watch_from_a_compacted_version_gets_410_and_a_relist_recovers(tmp_path: Path) -> None:
    server = start_server(tmp_path, cache_size=5)
    try:
        api = kubernetes.config.new_client_from_config(config_file=str(tmp_path / "kubeconfig"))
        core = client.CoreV1Api(api)
        old = core.list_namespaced_config_map("default").metadata.resource_version
        for index in range(10):
            core.create_namespaced_config_map("default", {"metadata": {"name": f"c{index}"}})
        with pytest.raises(ApiException) as expired:
            for _ in kubernetes.watch.Watch().stream(
                core.list_namespaced_config_map, "default", resource_version=old, timeout_seconds=30
            ):
                pass
        assert expired.value.status == 410
        raw = core.list_namespaced_config_map("default", watch=True, resource_version=old, _preload_content=False)
        assert raw.status == 200
        error = orjson.loads(raw.data.splitlines()[0])
        assert error["type"] == "ERROR"
        assert (error["object"]["code"], error["object"]["reason"]) == (410, "Expired")
        relisted = core.list_namespaced_config_map("default")
        assert len(relisted.items) == 10
        watch = kubernetes.watch.Watch()
        core.create_namespaced_config_map("default", {"metadata": {"name": "late"}})
        for event in watch.stream(
            core.list_namespaced_config_map,
            "default",
            resource_version=relisted.metadata.resource_version,
            timeout_seconds=30,
        ):
            assert (event["type"], event["object"].metadata.name) == ("ADDED", "late")
            watch.stop()
        api.close()
    finally:
        server.stop()


def _lines(response: Any) -> Any:
    buffer = b""
    for chunk in response.stream(4096):
        buffer += chunk
        while b"\n" in buffer:
            line, buffer = buffer.split(b"\n", 1)
            yield orjson.loads(line)


def test_streaming_list_ends_its_initial_events_with_the_annotated_bookmark(kube: Any) -> None:
    """How v1.36 informers list: a watch with sendInitialEvents, synced at the initial-events-end bookmark."""
    core = client.CoreV1Api(kube)
    core.create_namespaced_pod("default", pod_manifest("a"))
    core.create_namespaced_pod("default", pod_manifest("b"))
    response = core.list_pod_for_all_namespaces(
        watch=True,
        send_initial_events=True,
        resource_version_match="NotOlderThan",
        allow_watch_bookmarks=True,
        field_selector="status.phase!=Succeeded,status.phase!=Failed",
        timeout_seconds=30,
        _preload_content=False,
    )
    events = _lines(response)
    initial = [next(events), next(events)]
    assert sorted((e["type"], e["object"]["metadata"]["name"]) for e in initial) == [("ADDED", "a"), ("ADDED", "b")]
    bookmark = next(events)
    assert bookmark["type"] == "BOOKMARK"
    assert bookmark["object"]["metadata"]["annotations"] == {"k8s.io/initial-events-end": "true"}
    core.create_namespaced_pod("default", pod_manifest("c"))
    following = next(events)
    while following["type"] == "BOOKMARK":
        following = next(events)
    assert (following["type"], following["object"]["metadata"]["name"]) == ("ADDED", "c")
    assert int(following["object"]["metadata"]["resourceVersion"]) > int(
        bookmark["object"]["metadata"]["resourceVersion"]
    )
    response.release_conn()


def test_streaming_list_without_not_older_than_is_invalid(kube: Any) -> None:
    core = client.CoreV1Api(kube)
    with pytest.raises(ApiException) as invalid:
        core.list_namespaced_pod(
            "default", watch=True, send_initial_events=True, allow_watch_bookmarks=True, _preload_content=False
        )
    assert invalid.value.status == 422


def test_a_watch_ends_after_its_timeout(kube: Any) -> None:
    core = client.CoreV1Api(kube)
    events = list(kubernetes.watch.Watch().stream(core.list_namespaced_pod, "default", timeout_seconds=1))
    assert events == []


class RawInformer:
    """A raw-JSON informer as kubeflux's own driver will run one: list, then watch from the list's version,
    relisting on 410; its cache is a dict of raw pods."""

    def __init__(self, api: Any) -> None:
        self.core = client.CoreV1Api(api)
        self.cache: dict[str, dict[str, Any]] = {}
        self.relists = 0
        self.stopped = threading.Event()
        self.changed = threading.Condition()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _list(self) -> str:
        response = self.core.list_namespaced_pod("default", _preload_content=False)
        body = orjson.loads(response.data)
        self.cache = {p["metadata"]["name"]: p for p in body["items"]}
        self.relists += 1
        with self.changed:
            self.changed.notify_all()
        return str(body["metadata"]["resourceVersion"])

    def _run(self) -> None:
        version = self._list()
        while not self.stopped.is_set():
            response = self.core.list_namespaced_pod(
                "default",
                watch=True,
                resource_version=version,
                allow_watch_bookmarks=True,
                timeout_seconds=2,
                _preload_content=False,
            )
            for event in _lines(response):
                kind, obj = event["type"], event["object"]
                if kind == "ERROR":
                    version = self._list() if obj.get("code") == 410 else version
                    break
                version = obj["metadata"]["resourceVersion"]
                if kind == "DELETED":
                    self.cache.pop(obj["metadata"]["name"], None)
                elif kind != "BOOKMARK":
                    self.cache[obj["metadata"]["name"]] = obj
                with self.changed:
                    self.changed.notify_all()
                if self.stopped.is_set():
                    break
            response.release_conn()

    def wait_for(self, predicate: Any) -> bool:
        with self.changed:
            return self.changed.wait_for(lambda: predicate(self.cache), timeout=60)


def test_a_raw_json_informer_follows_pods_and_recovers_from_410(tmp_path: Path) -> None:
    server: ApiServer = start_server(tmp_path, cache_size=20)
    try:
        api = kubernetes.config.new_client_from_config(config_file=str(tmp_path / "kubeconfig"))
        core = client.CoreV1Api(api)
        core.create_namespaced_pod("default", pod_manifest("a"))
        informer = RawInformer(api)
        informer.thread.start()
        assert informer.wait_for(lambda cache: set(cache) == {"a"})
        core.create_namespaced_pod("default", pod_manifest("b"))
        core.create_namespaced_pod_binding("b", "default", _binding("b", "node-0000"), _preload_content=False)
        assert informer.wait_for(lambda cache: cache.get("b", {}).get("spec", {}).get("nodeName") == "node-0000")
        core.delete_namespaced_pod("a", "default")
        assert informer.wait_for(lambda cache: set(cache) == {"b"})
        # make the informer's version fall out of the cache: it must relist and converge
        server.call(lambda: _compact(server))
        core.create_namespaced_pod("default", pod_manifest("c"))
        assert informer.wait_for(lambda cache: set(cache) == {"b", "c"})
        informer.stopped.set()
        informer.thread.join()
        api.close()
    finally:
        server.stop()


def _compact(server: ApiServer) -> None:
    for collection in server.store.collections.values():
        collection.compacted = server.store.rv
        collection.events.clear()


def test_eviction_deletes_the_pod_and_answers_201(kube: Any) -> None:
    core = client.CoreV1Api(kube)
    core.create_namespaced_pod("default", pod_manifest("p"))
    eviction = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "p", "namespace": "default"}}
    response = core.create_namespaced_pod_eviction("p", "default", eviction, _preload_content=False)
    assert response.status == 201
    assert core.list_namespaced_pod("default").items == []


def test_the_official_informer_keeps_its_cache_in_step(kube: Any) -> None:
    core = client.CoreV1Api(kube)
    informer = kubernetes.informer.SharedInformer(core.list_namespaced_pod, namespace="default")
    changed = threading.Condition()

    def notify(_: Any) -> None:
        with changed:
            changed.notify_all()

    for kind in ("ADDED", "MODIFIED", "DELETED"):
        informer.add_event_handler(kind, notify)
    core.create_namespaced_pod("default", pod_manifest("a"))
    informer.start()
    try:
        core.create_namespaced_pod("default", pod_manifest("b"))
        core.create_namespaced_pod_binding("b", "default", _binding("b", "node-0001"), _preload_content=False)
        core.delete_namespaced_pod("a", "default")

        def settled() -> bool:
            pods = {p.metadata.name: p for p in informer.cache.list()}
            return set(pods) == {"b"} and pods["b"].spec.node_name == "node-0001"

        with changed:
            assert changed.wait_for(settled, timeout=60)
    finally:
        informer.stop()


def test_bad_label_keys_and_values_are_422(kube: Any) -> None:
    core = client.CoreV1Api(kube)
    for labels in ({"bad key": "x"}, {"app": "has space"}, {"app": "x" * 64}):
        with pytest.raises(ApiException) as invalid:
            core.create_namespaced_pod("default", pod_manifest("p", labels=labels))
        assert invalid.value.status == 422
        assert _error(invalid)["details"]["causes"][0]["field"] == "metadata.labels"
    core.create_namespaced_pod("default", pod_manifest("p", labels={"example.com/role": "a.b-c_d"}))


KUBE_SCHEDULER_WATCHES = [
    ("/api/v1/pods", "status.phase!=Succeeded,status.phase!=Failed"),
    ("/api/v1/nodes", ""),
    ("/api/v1/namespaces", ""),
    ("/api/v1/services", ""),
    ("/api/v1/replicationcontrollers", ""),
    ("/api/v1/persistentvolumes", ""),
    ("/api/v1/persistentvolumeclaims", ""),
    ("/apis/apps/v1/replicasets", ""),
    ("/apis/apps/v1/statefulsets", ""),
    ("/apis/policy/v1/poddisruptionbudgets", ""),
    ("/apis/storage.k8s.io/v1/storageclasses", ""),
    ("/apis/storage.k8s.io/v1/csinodes", ""),
    ("/apis/storage.k8s.io/v1/csidrivers", ""),
    ("/apis/storage.k8s.io/v1/csistoragecapacities", ""),
    ("/apis/storage.k8s.io/v1/volumeattachments", ""),
    ("/apis/resource.k8s.io/v1/resourceclaims", ""),
    ("/apis/resource.k8s.io/v1/resourceslices", ""),
    ("/apis/resource.k8s.io/v1/deviceclasses", ""),
]


@pytest.mark.parametrize(("path", "fields"), KUBE_SCHEDULER_WATCHES, ids=[p for p, _ in KUBE_SCHEDULER_WATCHES])
def test_every_informer_kube_scheduler_starts_gets_synced(apiserver: ApiServer, path: str, fields: str) -> None:
    """The streaming list each of kube-scheduler v1.36's informers opens ends with the initial-events-end bookmark
    (a 404 or a missing bookmark would leave the scheduler waiting for its caches forever)."""
    query = {
        "watch": "true",
        "sendInitialEvents": "true",
        "resourceVersionMatch": "NotOlderThan",
        "allowWatchBookmarks": "true",
        "timeoutSeconds": "30",
    }
    if fields:
        query["fieldSelector"] = fields
    connection = http.client.HTTPConnection("127.0.0.1", apiserver.port, timeout=60)
    connection.request("GET", f"{path}?{urllib.parse.urlencode(query)}")
    response = connection.getresponse()
    assert response.status == 200
    while True:
        event = orjson.loads(response.readline())
        if event["type"] == "BOOKMARK":
            break
        assert event["type"] == "ADDED"
    assert event["object"]["metadata"]["annotations"] == {"k8s.io/initial-events-end": "true"}
    connection.close()


def test_dry_runs_answer_as_the_write_would_and_change_nothing(kube: Any) -> None:
    """As on the real server (they were refused with a 400 before issue 28)."""
    core = client.CoreV1Api(kube)
    core.create_namespaced_pod("default", pod_manifest("kept"))
    version = core.read_namespaced_pod("kept", "default").metadata.resource_version
    created = core.create_namespaced_pod("default", pod_manifest("dry"), dry_run="All")
    assert created.metadata.name == "dry" and created.metadata.uid
    labelled = core.patch_namespaced_pod("kept", "default", {"metadata": {"labels": {"a": "b"}}}, dry_run="All")
    assert labelled.metadata.labels == {"a": "b"}
    core.delete_namespaced_pod("kept", "default", dry_run="All")
    with pytest.raises(ApiException) as refused:
        core.create_namespaced_pod("default", pod_manifest("Bad_Name"), dry_run="All")
    assert refused.value.status == 422
    assert [p.metadata.name for p in core.list_namespaced_pod("default").items] == ["kept"]
    assert core.read_namespaced_pod("kept", "default").metadata.resource_version == version


def test_server_side_apply_by_the_official_client(kube: Any) -> None:
    """As on the real server (it was a 415 before issue 28)."""
    core = client.CoreV1Api(kube)
    core.create_namespaced_pod("default", pod_manifest("applied"))
    core.patch_namespaced_pod(
        "applied",
        "default",
        pod_manifest("applied", labels={"a": "b"}),
        field_manager="test",
        _content_type="application/apply-patch+yaml",
    )
    applied = core.read_namespaced_pod("applied", "default")
    assert applied.metadata.labels == {"a": "b"}
    assert {(m.manager, m.operation) for m in applied.metadata.managed_fields} >= {("test", "Apply")}
