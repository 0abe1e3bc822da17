"""The served cluster's Priority admission (:func:`kubeflux.apiobjects.priority.admit_priority`): a created pod
gets its class's priority and preemption policy, or the global default class's, and is forbidden with the real
server's words when it names no class that exists or gives values of its own that differ; an update keeps them.
The differential sequence (tests/realkube) sends the same cases to the real kube-apiserver."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from kubeflux.sim.apiserver.errors import ApiError
from kubeflux.sim.apiserver.resources import default_registry
from kubeflux.sim.apiserver.store import Store


def _pod(name: str, **spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {"containers": [{"name": "c", "image": "busybox"}], **spec}}


@pytest.fixture
def store() -> Store:
    store = Store(default_registry())
    classes = store.registry.find("scheduling.k8s.io", "v1", "priorityclasses")
    assert classes is not None
    store.create(classes, "", {"metadata": {"name": "urgent"}, "value": 1000})
    store.create(classes, "", {"metadata": {"name": "polite"}, "value": 500, "preemptionPolicy": "Never"})
    return store


def _create(store: Store, pod: dict[str, Any]) -> dict[str, Any]:
    pods = store.registry.find("", "v1", "pods")
    assert pods is not None
    created: dict[str, Any] = store.create(pods, "default", pod)
    return created["spec"]


def test_a_pod_gets_its_class_priority_and_policy(store: Store) -> None:
    spec = _create(store, _pod("a", priorityClassName="polite"))
    assert (spec["priorityClassName"], spec["priority"], spec["preemptionPolicy"]) == ("polite", 500, "Never")
    spec = _create(store, _pod("b"))
    assert ("priorityClassName" in spec, spec["priority"], spec["preemptionPolicy"]) == (
        False,
        0,
        "PreemptLowerPriority",
    )


def test_without_a_class_a_pod_gets_the_lowest_global_default(store: Store) -> None:
    classes = store.registry.find("scheduling.k8s.io", "v1", "priorityclasses")
    assert classes is not None
    store.create(classes, "", {"metadata": {"name": "batch"}, "value": 10, "globalDefault": True})
    spec = _create(store, _pod("a"))
    assert (spec["priorityClassName"], spec["priority"]) == ("batch", 10)


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({"priorityClassName": "nope"}, 'pods "p" is forbidden: no PriorityClass with name nope was found'),
        (
            {"priorityClassName": "urgent", "priority": 7},
            'pods "p" is forbidden: the integer value of priority (7) must not be provided in pod spec; priority '
            "admission controller computed 1000 from the given PriorityClass name",
        ),
        (
            {"preemptionPolicy": "Never"},
            'pods "p" is forbidden: the string value of PreemptionPolicy (Never) must not be provided in pod spec; '
            "priority admission controller computed PreemptLowerPriority from the given PriorityClass name",
        ),
    ],
)
def test_the_real_servers_refusals(store: Store, spec: dict[str, Any], message: str) -> None:
    with pytest.raises(ApiError) as refused:
        _create(store, _pod("p", **spec))
    status = refused.value.status()
    assert (status["code"], status["reason"], status["message"]) == (403, "Forbidden", message)


def test_an_update_keeps_what_admission_set(store: Store) -> None:
    pods = store.registry.find("", "v1", "pods")
    assert pods is not None
    created = copy.deepcopy(store.create(pods, "default", _pod("a", priorityClassName="urgent")))
    created["metadata"]["labels"] = {"x": "y"}
    del created["spec"]["priority"]
    updated = store.update(pods, "default", "a", created)
    assert updated["spec"]["priority"] == 1000
