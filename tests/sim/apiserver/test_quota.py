"""ResourceQuotas on the served cluster: quantities written as Go writes them, the quota admission's refusals and
counts, the quota controller's status, scopes, and the validation of a quota (as the real server's: the
differential test compares them with it, tests/realkube/differential/steps_quota.py)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import closing
from typing import Any

import pytest

from kubeflux.sim.apiserver.errors import ApiError
from kubeflux.sim.apiserver.quota_controller import QuotaController
from kubeflux.sim.apiserver.resourcelists import parse_amount
from kubeflux.sim.apiserver.resources import default_registry
from kubeflux.sim.apiserver.store import Store
from tests.sim.apiserver._loop import ControllerLoop

Object = dict[str, Any]


@pytest.mark.parametrize(
    ("text", "written"),
    [
        ("600m", "600m"),
        ("1.5", "1500m"),
        ("1000", "1k"),
        ("1500", "1500"),
        ("0.0001", "100u"),
        ("1Gi", "1Gi"),
        ("1.5Gi", "1536Mi"),
        ("2048Ki", "2Mi"),
        ("512", "512"),
        ("1e3", "1e3"),
        ("0", "0"),
    ],
)
def test_quantities_are_written_as_go_writes_them(text: str, written: str) -> None:
    assert str(parse_amount(text)) == written


def test_a_sum_takes_the_format_of_its_first_non_zero_term() -> None:
    assert str(parse_amount("0").plus(parse_amount("1Gi"))) == "1Gi"
    assert str(parse_amount("1Gi").plus(parse_amount("500M"))) == "1573741824"
    assert str(parse_amount("600m").plus(parse_amount("600m"))) == "1200m"


class Cluster(ControllerLoop):
    """A store with its quota controller on a loop of its own (run by :meth:`settle`)."""

    def __init__(self) -> None:
        super().__init__(Store(default_registry()), QuotaController)
        find = self.store.registry.find
        self.pods, self.quotas = find("", "v1", "pods"), find("", "v1", "resourcequotas")
        self.configmaps, self.jobs = find("", "v1", "configmaps"), find("batch", "v1", "jobs")
        self.store.create(find("", "v1", "namespaces"), "", {"metadata": {"name": "q"}})

    def quota(self, name: str, hard: dict[str, str], **spec: Any) -> Object:
        with self.store.request("kubectl-create"):
            created = self.store.create(self.quotas, "q", {"metadata": {"name": name}, "spec": {"hard": hard, **spec}})
        self.settle()
        return created

    def status(self, name: str) -> Object:
        status: Object = self.store.get(self.quotas, "q", name)["status"]
        return status

    def pod(self, name: str, cpu: str | None = None, **spec: Any) -> Object:
        container: Object = {"name": "main", "image": "busybox"}
        if cpu is not None:
            container["resources"] = {"requests": {"cpu": cpu}}
        return self.store.create(
            self.pods, "q", {"metadata": {"name": name}, "spec": {"containers": [container], **spec}}
        )

    def refusal(self, name: str, cpu: str | None = None, **spec: Any) -> str:
        with pytest.raises(ApiError) as refused:
            self.pod(name, cpu, **spec)
        assert refused.value.code == 403 and refused.value.reason == "Forbidden"
        return refused.value.message


@pytest.fixture
def cluster() -> Iterator[Cluster]:
    with closing(Cluster()) as made:
        yield made


def test_the_controller_writes_hard_and_used_and_admission_counts_each_create(cluster: Cluster) -> None:
    created = cluster.quota(
        "compute", {"cpu": "1", "pods": "2", "count/jobs.batch": "1", "services": "1", "count/x.y": "1"}
    )
    assert created["status"] == {}
    assert cluster.status("compute") == {
        "hard": {"count/jobs.batch": "1", "count/x.y": "1", "cpu": "1", "pods": "2", "services": "1"},
        "used": {"count/jobs.batch": "0", "cpu": "0", "pods": "0", "services": "0"},  # nothing counts count/x.y
    }
    assert cluster.refusal("p0") == 'pods "p0" is forbidden: failed quota: compute: must specify cpu for: main'
    pod = cluster.pod("p1", "600m")
    quota = cluster.store.get(cluster.quotas, "q", "compute")
    assert quota["status"]["used"]["cpu"] == "600m" and quota["status"]["used"]["pods"] == "1"
    assert int(quota["metadata"]["resourceVersion"]) < int(pod["metadata"]["resourceVersion"])  # written first
    managers = [(m["manager"], m.get("subresource")) for m in quota["metadata"]["managedFields"]]
    assert managers == [("kubectl-create", None), ("kube-controller-manager", "status"), ("kube-apiserver", "status")]
    assert cluster.refusal("p2", "600m") == (
        'pods "p2" is forbidden: exceeded quota: compute, requested: cpu=600m, used: cpu=600m, limited: cpu=1'
    )
    with cluster.store.request("", dry=True):  # a dry run is checked, never counted
        cluster.pod("dry", "400m")
    assert cluster.status("compute")["used"]["cpu"] == "600m"


def test_a_deleted_or_ended_pod_is_recounted_by_the_controller(cluster: Cluster) -> None:
    cluster.quota("compute", {"requests.cpu": "1", "pods": "2", "count/pods": "5"})
    cluster.pod("a", "500m")
    pod = cluster.pod("b", "500m")
    assert cluster.status("compute")["used"] == {"count/pods": "2", "pods": "2", "requests.cpu": "1"}
    cluster.store.update(cluster.pods, "q", "b", {**pod, "status": {"phase": "Succeeded"}}, "status")
    cluster.settle()
    assert cluster.status("compute")["used"] == {"count/pods": "2", "pods": "1", "requests.cpu": "500m"}
    cluster.store.delete(cluster.pods, "q", "a")
    cluster.settle()
    assert cluster.status("compute")["used"] == {"count/pods": "1", "pods": "0", "requests.cpu": "0"}


def test_object_counts_and_their_old_names(cluster: Cluster) -> None:
    cluster.quota("objects", {"configmaps": "1", "count/jobs.batch": "1"})
    cluster.store.create(cluster.configmaps, "q", {"metadata": {"name": "c1"}})
    with pytest.raises(ApiError) as refused:
        cluster.store.create(cluster.configmaps, "q", {"metadata": {"name": "c2"}})
    assert refused.value.message == (
        'configmaps "c2" is forbidden: exceeded quota: objects, requested: configmaps=1, used: configmaps=1, '
        "limited: configmaps=1"
    )
    cluster.store.delete(cluster.configmaps, "q", "c1")
    cluster.settle()
    cluster.store.create(cluster.configmaps, "q", {"metadata": {"name": "c2"}})


def test_scopes_choose_the_pods_a_quota_counts(cluster: Cluster) -> None:
    cluster.quota("besteffort", {"pods": "1"}, scopes=["BestEffort"])
    cluster.quota("terminating", {"pods": "1"}, scopes=["Terminating"])
    cluster.pod("be")
    assert "exceeded quota: besteffort" in cluster.refusal("be2")
    cluster.pod("burstable", "10m")  # not best effort, not terminating: neither quota counts it
    cluster.pod("deadline", "10m", activeDeadlineSeconds=60)
    assert "exceeded quota: terminating" in cluster.refusal("deadline2", "10m", activeDeadlineSeconds=60)
    assert cluster.status("besteffort")["used"] == {"pods": "1"}
    assert cluster.status("terminating")["used"] == {"pods": "1"}


def test_a_pod_given_a_deadline_moves_into_the_terminating_quota(cluster: Cluster) -> None:
    """The one update the real plugin admits: a pod changing its Terminating scope."""
    cluster.quota("terminating", {"pods": "1"}, scopes=["Terminating"])
    for name in ("a", "b"):
        cluster.pod(name, "10m")
    pod = cluster.store.get(cluster.pods, "q", "a")
    cluster.store.update(cluster.pods, "q", "a", {**pod, "spec": {**pod["spec"], "activeDeadlineSeconds": 60}})
    assert cluster.status("terminating")["used"] == {"pods": "1"}
    other = cluster.store.get(cluster.pods, "q", "b")
    with pytest.raises(ApiError) as refused:
        cluster.store.update(cluster.pods, "q", "b", {**other, "spec": {**other["spec"], "activeDeadlineSeconds": 60}})
    assert refused.value.code == 403 and "exceeded quota: terminating" in refused.value.message


def test_a_priority_class_selector(cluster: Cluster) -> None:
    classes = cluster.store.registry.find("scheduling.k8s.io", "v1", "priorityclasses")
    cluster.store.create(classes, "", {"metadata": {"name": "high"}, "value": 1000})
    selector = {"matchExpressions": [{"scopeName": "PriorityClass", "operator": "In", "values": ["high"]}]}
    cluster.quota("high", {"pods": "1"}, scopeSelector=selector)
    cluster.pod("h1", "10m", priorityClassName="high")
    cluster.pod("plain", "10m")
    assert "exceeded quota: high" in cluster.refusal("h2", "10m", priorityClassName="high")


def test_a_quota_the_controller_has_not_seen_limits_nothing(cluster: Cluster) -> None:
    """As on a real server without kube-controller-manager: admission reads status.hard, which only the controller
    writes."""
    cluster.controller.stop()
    with cluster.store.request("kubectl-create"):
        cluster.store.create(cluster.quotas, "q", {"metadata": {"name": "q1"}, "spec": {"hard": {"pods": "0"}}})
    cluster.pod("free", "1")
    quota = cluster.store.get(cluster.quotas, "q", "q1")
    cluster.store.update(cluster.quotas, "q", "q1", {**quota, "status": {"hard": {"pods": "5"}}}, "status")
    assert (
        cluster.refusal("unknown", "1") == 'pods "unknown" is forbidden: status unknown for quota: q1, resources: pods'
    )


@pytest.mark.parametrize(
    ("spec", "causes"),
    [
        ({"hard": {"cpu": "-1"}}, [("spec.hard[cpu]", 'Invalid value: "-1": must be greater than or equal to 0')]),
        ({"hard": {"pods": "1.5"}}, [("spec.hard[pods]", 'Invalid value: "1500m": must be an integer')]),
        (
            {"hard": {"foo": "1"}},
            [
                ("spec.hard[foo]", 'Invalid value: "foo": must be a standard resource type or fully qualified'),
                ("spec.hard[foo]", 'Invalid value: "foo": must be a standard resource for quota'),
            ],
        ),
        (
            {"hard": {"pods": "1"}, "scopes": ["Bogus"]},
            [("spec.scopes", 'Invalid value: ["Bogus"]: unsupported scope')],
        ),
        (
            {"hard": {"cpu": "1"}, "scopes": ["BestEffort"]},
            [("spec.scopes", 'Invalid value: ["BestEffort"]: unsupported scope applied to resource')],
        ),
        (
            {"hard": {"pods": "1"}, "scopes": ["Terminating", "NotTerminating"]},
            [("spec.scopes", 'Invalid value: ["Terminating","NotTerminating"]: conflicting scopes')],
        ),
    ],
    ids=["negative", "fraction of pods", "unknown resource", "unknown scope", "scope for pods only", "conflict"],
)
def test_validation_in_the_real_servers_words(cluster: Cluster, spec: Object, causes: list[tuple[str, str]]) -> None:
    with pytest.raises(ApiError) as refused:
        cluster.store.create(cluster.quotas, "q", {"metadata": {"name": "bad"}, "spec": spec})
    assert refused.value.code == 422
    assert [(c.field, c.message) for c in refused.value.causes] == causes


def test_a_quantity_that_does_not_parse_is_a_bad_request(cluster: Cluster) -> None:
    with pytest.raises(ApiError) as refused:
        cluster.store.create(cluster.quotas, "q", {"metadata": {"name": "bad"}, "spec": {"hard": {"cpu": "abc"}}})
    assert refused.value.code == 400
