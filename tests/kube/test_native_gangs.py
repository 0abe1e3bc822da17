"""Hostile use of Kubernetes' own gang API in ``kubeflux serve`` (scheduling.k8s.io/v1alpha2 PodGroups, pods naming them
in ``spec.schedulingGroup``), against the served cluster with ``GenericWorkload`` on, through the real ``Serve``."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from .conftest import Cluster, condition, create_podgroup, eventually, pod, start_cluster

COSCHEDULING_LABEL = "scheduling.x-k8s.io/pod-group"


@pytest.fixture
def gated(tmp_path: Path) -> Iterator[Cluster]:
    """Two 16-core nodes, Kubernetes' own gang API served (GenericWorkload=true)."""
    started = start_cluster(tmp_path, nodes=2, generic_workload=True)
    try:
        yield started
    finally:
        started.api.close()
        started.server.stop()


def _native_group(cluster: Cluster, name: str, policy: dict[str, Any]) -> None:
    create_podgroup(cluster, "scheduling.k8s.io/v1alpha2", name, {"schedulingPolicy": policy})


def _coscheduling_group(cluster: Cluster, name: str, size: int) -> None:
    create_podgroup(cluster, "scheduling.x-k8s.io/v1alpha1", name, {"minMember": size})


def _native_member(name: str, group: str, cpu: str = "8", labels: dict[str, str] | None = None) -> dict[str, Any]:
    member = pod(name, cpu, run=None, labels=labels)
    member["spec"]["schedulingGroup"] = {"podGroupName": group}
    return member


def _bound(pods: dict[str, dict[str, Any]], *names: str) -> bool:
    return all(bool(pods[name]["spec"].get("nodeName")) for name in names)


def test_a_coscheduling_gang_and_a_native_gang_of_the_same_name_are_two_gangs(gated: Cluster) -> None:
    """Two APIs, two objects: coscheduling's PodGroup ``train`` (minMember 2, two members labelled for it) and
    Kubernetes' own ``train`` (a gang of 4, two members naming it in ``spec.schedulingGroup``). Coscheduling's gang is
    whole and should run; the native one is short of two and should wait. serve keys both by ``default/train``: the
    group it saw last decides for all four pods (minCount 4: coscheduling's whole gang waits for ever; minMember 2:
    the native gang of 4 runs with 2 members), whichever reflector's event came last."""
    _coscheduling_group(gated, "train", 2)
    _native_group(gated, "train", {"gang": {"minCount": 4}})
    with gated.serve() as serve:
        for index in range(2):
            gated.create(pod(f"cosched-{index}", "8", run=None, labels={COSCHEDULING_LABEL: "train"}))
            gated.create(_native_member(f"native-{index}", "train"))

        def settled(pods: dict[str, dict[str, Any]]) -> bool:
            told = [(condition(pods[f"cosched-{i}"]) or {}).get("message", "") for i in range(2)]
            return _bound(pods, "cosched-0", "cosched-1") or all("minMember 4" in m for m in told)

        gated.wait_for(settled)
        eventually(lambda: serve.binder.pending == 0)
        pods = gated.pods()
        assert _bound(pods, "cosched-0", "cosched-1"), "coscheduling's whole gang of 2 waits on the native minCount 4"
        assert not any(_bound(pods, f"native-{i}") for i in range(2)), "the native gang of 4 ran with 2 members"


def test_a_pod_with_a_coscheduling_label_and_a_scheduling_group_is_not_silently_put_in_the_label_s_group(
    gated: Cluster,
) -> None:
    """``x`` names Kubernetes' own gang ``ranks`` (minCount 2) in ``spec.schedulingGroup`` and also carries a
    coscheduling label ``other`` (left by a template); ``y`` names ``ranks`` only. serve silently takes the label:
    ``x`` waits for a coscheduling group ``other`` that does not exist, and ``ranks`` waits for a second member it
    already has. Either ``ranks`` should run with both, or ``x`` should be told it names two groups."""
    _native_group(gated, "ranks", {"gang": {"minCount": 2}})
    with gated.serve():
        gated.create(_native_member("x", "ranks", labels={COSCHEDULING_LABEL: "other"}))
        gated.create(_native_member("y", "ranks"))
        gated.wait_for(lambda pods: _bound(pods, "x", "y") or condition(pods["x"]) is not None)
        pods = gated.pods()
        if not _bound(pods, "x", "y"):
            told = (condition(pods["x"]) or {}).get("message", "")
            assert "schedulingGroup" in told, f"x is told only: {told!r}"


def test_a_basic_group_places_each_pod_alone_and_the_one_left_over_runs_when_room_frees(gated: Cluster) -> None:
    """``basic``: each pod is scheduled independently. Five pods of 8 cores on 2 x 16 cores: four run, the fifth
    runs once one of them is deleted."""
    _native_group(gated, "loose", {"basic": {}})
    with gated.serve():
        for index in range(5):
            gated.create(_native_member(f"loose-{index}", "loose"))
        gated.wait_for(lambda pods: sum(bool(p["spec"].get("nodeName")) for p in pods.values()) == 4)
        gated.wait_for(lambda pods: any((condition(p) or {}).get("reason") == "Unschedulable" for p in pods.values()))
        pods = gated.pods()
        waiting = [name for name, p in pods.items() if not p["spec"].get("nodeName")]
        assert len(waiting) == 1
        running = next(name for name, p in pods.items() if p["spec"].get("nodeName"))
        gated.core.delete_namespaced_pod(running, "default", grace_period_seconds=0)
        gated.wait_for(lambda pods: _bound(pods, waiting[0]))


def test_serve_restarted_between_a_native_gang_s_members_places_the_gang_when_it_is_whole(gated: Cluster) -> None:
    """Two of a gang of 3 exist when serve stops; a new serve (recovery) sees them and the third: all three run."""
    _native_group(gated, "ranks", {"gang": {"minCount": 3}})
    with gated.serve():
        for index in range(2):
            gated.create(_native_member(f"rank-{index}", "ranks"))
        gated.wait_for(lambda pods: all(condition(pods[f"rank-{i}"]) is not None for i in range(2)))
    with gated.serve():
        gated.create(_native_member("rank-2", "ranks"))
        gated.wait_for(lambda pods: _bound(pods, "rank-0", "rank-1", "rank-2"))


def test_serve_restarted_after_a_native_gang_started_runs_a_late_member_alone(gated: Cluster) -> None:
    """A gang of 2 runs; serve restarts; a replacement third member arrives: the gang has started, so it runs on its
    own (as for coscheduling's groups) instead of waiting for a whole new gang."""
    _native_group(gated, "ranks", {"gang": {"minCount": 2}})
    with gated.serve():
        for index in range(2):
            gated.create(_native_member(f"rank-{index}", "ranks"))
        gated.wait_for(lambda pods: _bound(pods, "rank-0", "rank-1"))
    with gated.serve():
        gated.create(_native_member("rank-2", "ranks"))
        gated.wait_for(lambda pods: _bound(pods, "rank-2") or condition(pods["rank-2"]) is not None)
        assert _bound(gated.pods(), "rank-2"), gated.pods()["rank-2"]["status"]


def test_a_manifest_workload_using_kubernetes_own_gang_api_is_simulated_as_a_gang(tmp_path: Path) -> None:
    """``kubeflux simulate`` / ``sweep`` / ``cluster serve --workload`` read manifests with
    :mod:`kubeflux.sim.workloads.manifests`, which joins PodGroups with pods by the coscheduling label only. A
    native PodGroup ``ranks`` (gang of 3) with two pods naming it in ``spec.schedulingGroup``: the group is
    "skipped: no pods in the file" and the two pods run as lone pods, a gang that should never start."""
    from kubeflux.sim.workloads import load_workload

    documents = [
        {
            "apiVersion": "scheduling.k8s.io/v1alpha2",
            "kind": "PodGroup",
            "metadata": {"name": "ranks"},
            "spec": {"schedulingPolicy": {"gang": {"minCount": 3}}},
        },
        *(_native_member(f"rank-{index}", "ranks") for index in range(2)),
    ]
    path = tmp_path / "native.yaml"
    path.write_text(yaml.safe_dump_all(documents), encoding="utf-8")
    workload = load_workload(path)
    assert [(len(job.pods), job.min_member) for job in workload.jobs] == [(2, 3)], workload.problems
