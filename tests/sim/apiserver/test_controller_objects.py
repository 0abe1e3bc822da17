"""What kube-controller-manager keeps, as ``cluster serve`` stores it: the apps/v1 workloads, CronJobs, ServiceAccounts,
Endpoints, EndpointSlices and PodDisruptionBudgets (defaults, the validation a client meets first), evictions that a
budget refuses, and the store with its garbage collector and namespace controller turned off for a real
kube-controller-manager's (the real server's answers are compared in tests/realkube/test_apiserver_differential.py;
the components' logs in tests/realkube/test_component_errors.py)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from kubeflux.sim.apiserver.errors import ApiError
from kubeflux.sim.apiserver.eviction import evict
from kubeflux.sim.apiserver.registry import ResourceType
from kubeflux.sim.apiserver.resources import default_registry
from kubeflux.sim.apiserver.store import Store
from kubeflux.sim.apiserver.system_objects import LEGACY_TOKEN_TRACKING

Object = dict[str, Any]
_TEMPLATE = {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "main", "image": "nginx"}]}}


def _resource(store: Store, group: str, plural: str) -> ResourceType:
    found = store.registry.find(group, "v1", plural)
    assert found is not None
    return found


def _workload(kind: str, **spec: Any) -> Object:
    body = {"selector": {"matchLabels": {"app": "web"}}, "template": copy.deepcopy(_TEMPLATE), **spec}
    return {"metadata": {"name": kind.lower()}, "spec": body}


def _causes(store: Store, resource: ResourceType, body: Object) -> list[tuple[str, str]]:
    with pytest.raises(ApiError) as refused:
        store.create(resource, "default", body)
    assert refused.value.code == 422
    return [(c.field, c.reason) for c in refused.value.causes]


@pytest.mark.parametrize(
    ("plural", "defaults", "status"),
    [
        (
            "deployments",
            {"replicas": 1, "revisionHistoryLimit": 10, "progressDeadlineSeconds": 600},
            {},
        ),
        ("replicasets", {"replicas": 1}, {"replicas": 0}),
        (
            "statefulsets",
            {"replicas": 1, "podManagementPolicy": "OrderedReady", "serviceName": ""},
            {"replicas": 0, "availableReplicas": 0},
        ),
        (
            "daemonsets",
            {"revisionHistoryLimit": 10},
            {"currentNumberScheduled": 0, "numberMisscheduled": 0, "desiredNumberScheduled": 0, "numberReady": 0},
        ),
    ],
)
def test_workloads_get_the_real_defaults(plural: str, defaults: Object, status: Object) -> None:
    store = Store(default_registry())
    created = store.create(_resource(store, "apps", plural), "default", _workload(plural))
    assert {k: created["spec"][k] for k in defaults} == defaults
    assert created["status"] == status and created["metadata"]["generation"] == 1
    assert created["spec"]["template"]["spec"]["restartPolicy"] == "Always"
    assert created["spec"]["template"]["spec"]["dnsPolicy"] == "ClusterFirst"


def test_a_deployment_rolls_by_a_quarter_and_a_daemonset_counts_its_templates() -> None:
    store = Store(default_registry())
    deployment = store.create(_resource(store, "apps", "deployments"), "default", _workload("Deployment"))
    assert deployment["spec"]["strategy"] == {
        "type": "RollingUpdate",
        "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": "25%"},
    }
    daemonsets = _resource(store, "apps", "daemonsets")
    created = store.create(daemonsets, "default", _workload("DaemonSet"))
    assert created["metadata"]["annotations"] == {"deprecated.daemonset.template.generation": "1"}
    changed = copy.deepcopy(created)
    changed["spec"]["template"]["spec"]["containers"][0]["image"] = "nginx:2"
    updated = store.update(daemonsets, "default", "daemonset", changed)
    assert updated["metadata"]["annotations"]["deprecated.daemonset.template.generation"] == "2"
    assert updated["metadata"]["generation"] == 2


@pytest.mark.parametrize(
    ("body", "causes"),
    [
        (
            {"metadata": {"name": "x"}, "spec": {}},
            [
                ("spec.selector", "FieldValueRequired"),
                ("spec.template.metadata.labels", "FieldValueInvalid"),
                ("spec.template.spec.containers", "FieldValueRequired"),
            ],
        ),
        (_workload("X", selector={}), [("spec.selector", "FieldValueInvalid")]),
        (
            _workload("X", selector={"matchLabels": {"app": "db"}}),
            [("spec.template.metadata.labels", "FieldValueInvalid")],
        ),
        (
            _workload("X", selector={"matchExpressions": [{"key": "app", "operator": "In", "values": ["web"]}]}),
            [],
        ),
        (_workload("X", replicas=-1), [("spec.replicas", "FieldValueInvalid")]),
        (
            _workload("X", template={**_TEMPLATE, "spec": {**_TEMPLATE["spec"], "restartPolicy": "Never"}}),
            [("spec.template.spec.restartPolicy", "FieldValueNotSupported")],
        ),
    ],
    ids=["empty spec", "empty selector", "selector mismatch", "expression", "negative replicas", "restart never"],
)
def test_a_deployment_is_validated_as_the_real_server_does(body: Object, causes: list[tuple[str, str]]) -> None:
    store = Store(default_registry())
    deployments = _resource(store, "apps", "deployments")
    if causes:
        assert _causes(store, deployments, body) == causes
    else:
        store.create(deployments, "default", body)


def test_selectors_are_immutable_and_a_statefulset_changes_only_some_fields() -> None:
    store = Store(default_registry())
    deployments = _resource(store, "apps", "deployments")
    deployment = copy.deepcopy(store.create(deployments, "default", _workload("Deployment")))
    deployment["spec"]["selector"] = {"matchLabels": {"app": "web"}, "matchExpressions": []}
    with pytest.raises(ApiError) as immutable:
        store.update(deployments, "default", "deployment", deployment)
    assert [c.field for c in immutable.value.causes] == ["spec.selector"]
    statefulsets = _resource(store, "apps", "statefulsets")
    created = store.create(statefulsets, "default", _workload("StatefulSet"))
    for change, field in (
        (("selector", {"matchLabels": {"app": "db"}}), ["spec.template.metadata.labels", "spec"]),
        (("serviceName", "x"), ["spec"]),
    ):
        changed = copy.deepcopy(created)
        changed["spec"][change[0]] = change[1]
        with pytest.raises(ApiError) as refused:
            store.update(statefulsets, "default", "statefulset", changed)
        assert [c.field for c in refused.value.causes] == field
    scaled = copy.deepcopy(created)
    scaled["spec"]["replicas"] = 3
    assert store.update(statefulsets, "default", "statefulset", scaled)["spec"]["replicas"] == 3


def test_cronjobs_accounts_endpoints_and_slices() -> None:
    store = Store(default_registry())
    cronjobs = _resource(store, "batch", "cronjobs")
    job = {"spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "m", "image": "x"}]}}}}
    created = store.create(
        cronjobs, "default", {"metadata": {"name": "c"}, "spec": {"schedule": "@hourly", "jobTemplate": job}}
    )
    assert (created["spec"]["concurrencyPolicy"], created["spec"]["successfulJobsHistoryLimit"]) == ("Allow", 3)
    assert created["spec"]["jobTemplate"]["metadata"] == {}
    bad = {"metadata": {"name": "d"}, "spec": {"schedule": "every minute", "jobTemplate": {}}}
    assert _causes(store, cronjobs, bad) == [
        ("spec.schedule", "FieldValueInvalid"),
        ("spec.jobTemplate.spec.template.spec.containers", "FieldValueRequired"),
        ("spec.jobTemplate.spec.template.spec.restartPolicy", "FieldValueRequired"),
    ]
    sometimes = {"metadata": {"name": "f"}, "spec": {"schedule": "@hourly", "jobTemplate": job}}
    sometimes["spec"]["concurrencyPolicy"] = "Sometimes"
    with pytest.raises(ApiError) as refused:
        store.create(cronjobs, "default", sometimes)
    (cause,) = refused.value.causes  # quoted as the real server quotes it (it once said 'Sometimes')
    assert cause.message == 'Unsupported value: "Sometimes": supported values: "Allow", "Forbid", "Replace"'
    endpoints = _resource(store, "", "endpoints")
    subsets = [{"addresses": [{"ip": "127.0.0.1"}, {"ip": "x"}], "ports": [{"port": 0}]}]
    assert _causes(store, endpoints, {"metadata": {"name": "e"}, "subsets": subsets}) == [
        ("subsets[0].addresses[0].ip", "FieldValueInvalid"),
        ("subsets[0].addresses[1].ip", "FieldValueInvalid"),
        ("subsets[0].addresses[1].ip", "FieldValueInvalid"),
        ("subsets[0].ports[0].port", "FieldValueInvalid"),
    ]
    good = store.create(endpoints, "default", {"metadata": {"name": "e"}, "subsets": [{"ports": [{"port": 80}]}]})
    assert good["subsets"][0]["ports"] == [{"port": 80, "protocol": "TCP"}]
    slices = _resource(store, "discovery.k8s.io", "endpointslices")
    made = store.create(
        slices,
        "default",
        {"metadata": {"name": "s"}, "addressType": "IPv4", "endpoints": [{"addresses": ["10.0.0.1"]}]},
    )
    assert made["endpoints"][0]["conditions"] == {} and made["metadata"]["generation"] == 1
    assert _causes(store, slices, {"metadata": {"name": "t"}}) == [("addressType", "FieldValueRequired")]


def test_every_namespace_has_its_default_account_and_kube_system_the_token_tracking_map() -> None:
    store = Store(default_registry())
    accounts = _resource(store, "", "serviceaccounts")
    namespaces = _resource(store, "", "namespaces")
    store.create(namespaces, "", {"metadata": {"name": "team"}})
    for namespace in ("default", "kube-system", "team"):
        account = store.get(accounts, namespace, "default")
        assert "managedFields" not in account["metadata"]  # no field of it is anyone's
    tracking = store.get(_resource(store, "", "configmaps"), "kube-system", LEGACY_TOKEN_TRACKING)
    assert len(tracking["data"]["since"]) == len("2026-01-01")


# --- evictions and budgets -------------------------------------------------------------------------------------


def _guarded(store: Store, phase: str = "Running", ready: bool = True) -> ResourceType:
    pods = _resource(store, "", "pods")
    pod = {"metadata": {"name": "p", "labels": {"app": "web"}}, "spec": {"containers": [{"name": "m", "image": "x"}]}}
    created = store.create(pods, "default", pod)
    status = {"phase": phase, "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}
    store.update(pods, "default", "p", {**created, "status": status}, "status")
    return pods


def _budget(store: Store, name: str = "b", **status: Any) -> Object:
    budgets = _resource(store, "policy", "poddisruptionbudgets")
    body = {"metadata": {"name": name}, "spec": {"maxUnavailable": 1, "selector": {"matchLabels": {"app": "web"}}}}
    created = store.create(budgets, "default", body)
    if status:
        store.update(budgets, "default", name, {**created, "status": {**created["status"], **status}}, "status")
    return store.get(budgets, "default", name)


def _refused(store: Store, pods: ResourceType) -> ApiError:
    with pytest.raises(ApiError) as refused:
        evict(store, pods, "default", "p", {})
    assert store.get(pods, "default", "p")["metadata"].get("deletionTimestamp") is None
    return refused.value


def test_an_eviction_waits_for_the_disruption_controller_and_takes_what_the_budget_allows() -> None:
    store = Store(default_registry())
    pods = _guarded(store)
    _budget(store)
    unprocessed = _refused(store, pods)
    assert (unprocessed.code, unprocessed.reason, unprocessed.retry_after) == (429, "TooManyRequests", 10)
    assert unprocessed.causes[0].message == "The disruption budget b is still being processed by the server."
    budgets = _resource(store, "policy", "poddisruptionbudgets")
    store.delete(budgets, "default", "b")
    _budget(store, observedGeneration=1, disruptionsAllowed=1, currentHealthy=1, desiredHealthy=0)
    evict(store, pods, "default", "p", {"deleteOptions": {"gracePeriodSeconds": 0}})
    with pytest.raises(ApiError):
        store.get(pods, "default", "p")
    status = store.get(budgets, "default", "b")["status"]
    assert status["disruptionsAllowed"] == 0 and list(status["disruptedPods"]) == ["p"]
    assert status["conditions"][0]["reason"] == "InsufficientPods"


def test_an_eviction_the_budget_cannot_afford_is_refused() -> None:
    store = Store(default_registry())
    pods = _guarded(store)
    _budget(store, observedGeneration=1, disruptionsAllowed=0, currentHealthy=1, desiredHealthy=1)
    refused = _refused(store, pods)
    assert refused.code == 429
    assert refused.causes[0].message == "The disruption budget b needs 1 healthy pods and has 1 currently"
    _budget(store, "c", observedGeneration=1, disruptionsAllowed=1)
    assert _refused(store, pods).code == 500  # two budgets: the real server does not choose


@pytest.mark.parametrize(("phase", "ready"), [("Pending", True), ("Succeeded", True), ("Running", False)])
def test_pods_not_running_or_not_ready_are_evicted_whatever_the_budget(phase: str, ready: bool) -> None:
    store = Store(default_registry())
    pods = _guarded(store, phase, ready)
    _budget(store, observedGeneration=1, disruptionsAllowed=0, currentHealthy=2, desiredHealthy=1)
    evict(store, pods, "default", "p", {})
    with pytest.raises(ApiError):  # gone (no node: no grace period)
        store.get(pods, "default", "p")
    budgets = _resource(store, "policy", "poddisruptionbudgets")
    assert store.get(budgets, "default", "b")["status"]["disruptionsAllowed"] == 0  # not charged


# --- a real kube-controller-manager's garbage collector and namespace controller -------------------------------


def _configmaps(store: Store) -> ResourceType:
    return _resource(store, "", "configmaps")


def test_without_the_store_s_garbage_collector_dependents_and_finalizers_wait_for_a_real_one() -> None:
    store = Store(default_registry())
    store.deletion.collects_garbage = False
    configmaps = _configmaps(store)
    owner = store.create(configmaps, "default", {"metadata": {"name": "owner"}})
    ref = {"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": owner["metadata"]["uid"]}
    store.create(configmaps, "default", {"metadata": {"name": "dependent", "ownerReferences": [ref]}})
    store.delete(configmaps, "default", "owner", propagation="Background")
    assert store.get(configmaps, "default", "dependent")["metadata"]["ownerReferences"] == [ref]
    store.create(configmaps, "default", {"metadata": {"name": "kept"}})
    store.delete(configmaps, "default", "kept", propagation="Orphan")
    held = store.get(configmaps, "default", "kept")
    assert held["metadata"]["finalizers"] == ["orphan"] and held["metadata"]["deletionTimestamp"]
    released = copy.deepcopy(held)
    released["metadata"]["finalizers"] = []
    store.update(configmaps, "default", "kept", released)  # the real garbage collector, done
    with pytest.raises(ApiError):
        store.get(configmaps, "default", "kept")


def test_without_the_store_s_namespace_controller_a_namespace_goes_when_finalized() -> None:
    store = Store(default_registry())
    store.deletion.finalizes_namespaces = False
    namespaces, configmaps = _resource(store, "", "namespaces"), _configmaps(store)
    store.create(namespaces, "", {"metadata": {"name": "team"}})
    store.create(configmaps, "team", {"metadata": {"name": "c"}})
    store.delete(namespaces, "", "team")
    terminating = store.get(namespaces, "", "team")
    assert terminating["status"] == {"phase": "Terminating"} and terminating["spec"] == {"finalizers": ["kubernetes"]}
    assert store.get(configmaps, "team", "c")  # the real namespace controller deletes the content
    store.delete(configmaps, "team", "c")
    store.delete(namespaces, "", "team")  # still finalized by nobody: stays
    assert store.get(namespaces, "", "team")["metadata"]["deletionTimestamp"]
    store.update(namespaces, "", "team", {**terminating, "spec": {}}, "finalize")
    with pytest.raises(ApiError) as gone:
        store.get(namespaces, "", "team")
    assert gone.value.code == 404
