"""A pod read once (``PodReadings``) is the pod read afresh, whatever changed between two versions of its manifest."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kubeflux.apiobjects.manifests import ManifestError, pod_from_manifest
from kubeflux.apiobjects.podreadings import PodReadings, written_fields


def _pod() -> dict[str, Any]:
    """A pending pod as kube-apiserver v1.36 serves it (defaults filled in, managedFields and all)."""
    return {
        "kind": "Pod",
        "apiVersion": "v1",
        "metadata": {
            "name": "pod-0",
            "namespace": "default",
            "uid": "9f53a0a9-66d5-4cf8-97a7-0ae1f8d31b72",
            "resourceVersion": "208",
            "generation": 1,
            "creationTimestamp": "2026-11-30T21:31:17Z",
            "labels": {"app": "bench"},
            "managedFields": [{"manager": "unknown", "operation": "Update", "apiVersion": "v1"}],
        },
        "spec": {
            "containers": [
                {
                    "name": "main",
                    "image": "busybox:1.36",
                    "resources": {"requests": {"cpu": "1", "memory": "1Gi"}},
                    "imagePullPolicy": "IfNotPresent",
                }
            ],
            "restartPolicy": "Always",
            "schedulerName": "kubeflux",
            "tolerations": [
                {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute"},
            ],
            "priority": 0,
            "preemptionPolicy": "PreemptLowerPriority",
        },
        "status": {"phase": "Pending", "qosClass": "Burstable"},
    }


def _bind(pod: dict[str, Any], node: str) -> None:
    pod["spec"]["nodeName"] = node
    pod["status"].setdefault("conditions", []).append({"type": "PodScheduled", "status": "True"})


def _run(pod: dict[str, Any], phase: str) -> None:
    pod["status"]["phase"] = phase
    pod["status"]["containerStatuses"] = [{"name": "main", "ready": phase == "Running", "restartCount": 0}]


def _annotate(pod: dict[str, Any], key: str, value: str | None) -> None:
    annotations = pod["metadata"].setdefault("annotations", {})
    if value is None:
        annotations.pop(key, None)
    else:
        annotations[key] = value


def _delete(pod: dict[str, Any]) -> None:
    pod["metadata"]["deletionTimestamp"] = "2026-11-30T21:40:00Z"
    pod["metadata"]["deletionGracePeriodSeconds"] = 30


def _manage(pod: dict[str, Any]) -> None:
    pod["metadata"]["managedFields"].append({"manager": "kubelet", "operation": "Update", "subresource": "status"})


def _relabel(pod: dict[str, Any], value: str) -> None:
    pod["metadata"]["labels"]["app"] = value


def _request(pod: dict[str, Any], cpu: str) -> None:
    pod["spec"]["containers"][0]["resources"]["requests"]["cpu"] = cpu


def _resize(pod: dict[str, Any], cpu: str) -> None:
    status = {"name": "main", "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}}}
    pod["status"]["containerStatuses"] = [status]


def _prioritise(pod: dict[str, Any], priority: int) -> None:
    pod["spec"]["priority"] = priority


def _select(pod: dict[str, Any], zone: str) -> None:
    pod["spec"]["nodeSelector"] = {"topology.kubernetes.io/zone": zone}


def _claim_status(pod: dict[str, Any], name: str) -> None:
    pod["status"]["resourceClaimStatuses"] = [{"name": "gpu", "resourceClaimName": name}]


_CHANGES = st.one_of(
    st.sampled_from(["node-0", "node-1"]).map(lambda n: ("bind", n)),
    st.sampled_from(["Running", "Succeeded", "Failed"]).map(lambda p: ("run", p)),
    st.tuples(st.sampled_from(["a", "kubeflux.io/expected-start"]), st.none() | st.sampled_from(["1", "2"])).map(
        lambda kv: ("annotate", *kv)
    ),
    st.just(("delete",)),
    st.just(("manage",)),
    st.sampled_from(["bench", "other"]).map(lambda v: ("relabel", v)),
    st.sampled_from(["1", "2", "500m"]).map(lambda c: ("request", c)),
    st.sampled_from(["1", "2"]).map(lambda c: ("resize", c)),
    st.integers(-5, 5).map(lambda p: ("prioritise", p)),
    st.sampled_from(["a", "b"]).map(lambda z: ("select", z)),
    st.sampled_from(["c1", "c2"]).map(lambda n: ("claim_status", n)),
)
_APPLY = {
    "bind": _bind,
    "run": _run,
    "annotate": _annotate,
    "delete": _delete,
    "manage": _manage,
    "relabel": _relabel,
    "request": _request,
    "resize": _resize,
    "prioritise": _prioritise,
    "select": _select,
    "claim_status": _claim_status,
}


@settings(max_examples=150, deadline=None)
@given(st.lists(st.lists(_CHANGES, min_size=1, max_size=3), min_size=1, max_size=6))
def test_a_pod_read_once_is_the_pod_read_afresh_after_any_changes(versions: list[list[tuple[Any, ...]]]) -> None:
    """Each version a deep copy (as a watch delivers it: nothing shared with the last), its reading equal to a fresh
    one, whether the reading was carried over or the manifest read again."""
    readings = PodReadings()
    pod = _pod()
    assert readings.read("ADDED", pod) == pod_from_manifest(pod)
    for changes in versions:
        pod = copy.deepcopy(pod)
        for name, *args in changes:
            _APPLY[name](pod, *args)
        pod["metadata"]["resourceVersion"] = str(int(pod["metadata"]["resourceVersion"]) + 1)
        assert readings.read("MODIFIED", pod) == pod_from_manifest(pod)
    readings.read("DELETED", pod)
    assert len(readings) == 0


def test_what_a_bind_and_the_kubelet_write_is_carried_over_and_nothing_else() -> None:
    pending = _pod()
    bound = copy.deepcopy(pending)
    _bind(bound, "node-0")
    _manage(bound)
    changes = written_fields(bound, pending)
    assert changes is not None and changes["node_name"] == "node-0"
    running = copy.deepcopy(bound)
    _run(running, "Running")
    _annotate(running, "kubeflux.io/expected-start", None)
    assert written_fields(running, bound) is not None
    for change in (_relabel, _request, _resize, _select, _claim_status):
        other = copy.deepcopy(running)
        change(other, "2")
        assert written_fields(other, running) is None, change.__name__


def test_a_version_that_does_not_follow_the_last_one_read_is_read_again() -> None:
    """Given the version before (the served cluster's watch events carry it), a reading follows only from it."""
    readings = PodReadings()
    first = _pod()
    readings.read("ADDED", first)
    second = copy.deepcopy(first)
    _bind(second, "node-1")
    assert readings.known(second, prev=copy.deepcopy(first)) is None  # another version before: not the one read
    assert readings.known(second, prev=first) == pod_from_manifest(second)
    assert readings.known(second) == pod_from_manifest(second)
    readings.read("DELETED", first)
    assert readings.known(second) is None


def _bound_elsewhere(node: str) -> tuple[dict[str, Any], dict[str, Any]]:
    pending = _pod()
    bound = copy.deepcopy(pending)
    _bind(bound, node)
    return pending, bound


def test_a_bind_to_a_node_name_the_api_checks_only_for_emptiness_is_refused_as_a_fresh_reading_refuses_it() -> None:
    """``pods/binding`` checks only that ``target.name`` is set (kube-apiserver's ValidatePodBinding; the served
    cluster's store alike): a client may bind a pod to ``Node_1``, which ``pod_from_manifest`` refuses naming
    ``spec.nodeName``. The carried reading must refuse it too, not hand the cores a pod on a node no reading accepts."""
    pending, bound = _bound_elsewhere("Node_1")
    readings = PodReadings()
    readings.read("ADDED", pending)
    with pytest.raises(ManifestError, match=r"spec\.nodeName"):
        pod_from_manifest(bound)
    with pytest.raises(ManifestError, match=r"spec\.nodeName"):
        readings.read("MODIFIED", bound)


@pytest.mark.parametrize(
    ("section", "field", "value"),
    [
        ("status", "phase", ["Running"]),  # unhashable: was a TypeError out of `phase in _PHASES`
        ("status", "phase", {"a": 1}),
        ("status", "phase", []),  # falsy: was taken as Pending
        ("status", "containerStatuses", 3),  # was a TypeError iterating it
        ("status", "containerStatuses", "main"),  # a string iterates as characters: was carried over
        ("status", "initContainerStatuses", True),
        ("status", "conditions", 1.5),
        ("status", "conditions", "Ready"),
        ("metadata", "annotations", ""),  # falsy: was taken as no annotations
        ("metadata", "annotations", {"kubeflux.io/expected-start": 5}),
        ("spec", "nodeName", ["node-0"]),
    ],
)
def test_a_version_no_reading_accepts_is_refused_with_the_readers_error(section: str, field: str, value: Any) -> None:
    """Whatever the server sends, the reading carried over is the fresh one: a ManifestError naming the field when
    ``pod_from_manifest`` refuses the version (serve catches that, and only that), never a reading nor a TypeError."""
    readings = PodReadings()
    pod = _pod()
    readings.read("ADDED", pod)
    changed = copy.deepcopy(pod)
    changed[section][field] = value
    with pytest.raises(ManifestError) as fresh:
        pod_from_manifest(changed)
    with pytest.raises(ManifestError) as carried:
        readings.read("MODIFIED", changed)
    assert str(carried.value) == str(fresh.value)


def test_a_change_of_kind_is_read_again_but_a_listed_pod_without_one_is_carried_over() -> None:
    """A list's items carry no ``kind`` (the watch's do): a pod listed at serve's start, then bound, is carried over;
    another kind is the reader's error."""
    readings = PodReadings()
    listed = _pod()
    del listed["kind"]
    readings.read("ADDED", listed)
    bound = copy.deepcopy(_pod())
    _bind(bound, "node-0")
    assert written_fields(bound, listed) is not None
    assert readings.read("MODIFIED", bound) == pod_from_manifest(bound)
    changed = {**copy.deepcopy(bound), "kind": "Node"}
    with pytest.raises(ManifestError, match="kind"):
        readings.read("MODIFIED", changed)


def test_a_pod_deleted_in_a_version_no_reading_accepts_is_forgotten() -> None:
    """The served cluster reads its DELETED events itself (no ``forget``): a last version its reader refuses
    (here bound to ``Node_1``, then deleted) must not keep the pod's entry for ever."""
    pending, bound = _bound_elsewhere("Node_1")
    readings = PodReadings()
    readings.read("ADDED", pending)
    deleted = copy.deepcopy(bound)
    _delete(deleted)
    with pytest.raises(ManifestError):
        readings.read("DELETED", deleted, prev=bound)
    assert len(readings) == 0
