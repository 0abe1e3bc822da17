"""Seconds given as an integer past the largest float (JSON and Python have integers of any size) are bad input
that names its field, never an OverflowError out of the reader or the scheduler (found in review: ``math.isfinite``
raised on them). The allocation annotation's reader is held to the same in tests/scheduler/test_allocation.py."""

from __future__ import annotations

import pytest

from kubeflux.apiobjects.manifests import ManifestError, pod_from_manifest, podgroup_from_manifest
from kubeflux.scheduler.core import KubefluxScheduler
from kubeflux.scheduler.interface import ClusterEvent, EventKind, Reject
from kubeflux.scheduler.objects import CPU, MEMORY, POD_GROUP_LABEL, Node, Pod, PodGroup

HUGE = 10**400


@pytest.mark.parametrize(
    ("manifest", "path"),
    [
        (
            {
                "kind": "Pod",
                "metadata": {"name": "p", "namespace": "d"},
                "spec": {"activeDeadlineSeconds": HUGE, "containers": [{"name": "c"}]},
            },
            "spec.activeDeadlineSeconds",
        ),
        (
            {
                "kind": "PodGroup",
                "metadata": {"name": "g", "namespace": "d"},
                "spec": {"minMember": 2, "scheduleTimeoutSeconds": HUGE},
            },
            "spec.scheduleTimeoutSeconds",
        ),
    ],
    ids=["activeDeadlineSeconds", "scheduleTimeoutSeconds"],
)
def test_a_manifests_seconds_past_any_float_are_a_manifest_error_naming_the_field(
    manifest: dict[str, object], path: str
) -> None:
    read = pod_from_manifest if manifest["kind"] == "Pod" else podgroup_from_manifest
    # what the API server says: past int64 the pod's field cannot be decoded; past int32 the PodGroup's is invalid
    says = "json: cannot unmarshal number 1000" if manifest["kind"] == "Pod" else "must be at most 2147483647"
    with pytest.raises(ManifestError, match=f"{path}: {says}"):
        read(manifest)


def _pod(name: str, **fields: object) -> Pod:
    return Pod("default", name, uid=f"uid-{name}", scheduler_name="kubeflux", requests={CPU: 1000}, **fields)


@pytest.mark.parametrize(
    ("objects", "rejected", "field"),
    [
        ([_pod("p0", creation_time=HUGE)], "Pod default/p0", "creation_time"),
        ([_pod("p0", active_deadline_seconds=HUGE)], "Pod default/p0", "active_deadline_seconds"),
        (
            [PodGroup("default", "g", 1, schedule_timeout_seconds=HUGE), _pod("a", labels={POD_GROUP_LABEL: "g"})],
            "PodGroup default/g",
            "schedule_timeout_seconds",
        ),
        (
            [PodGroup("default", "g", 1, creation_time=HUGE), _pod("a", labels={POD_GROUP_LABEL: "g"})],
            "PodGroup default/g",
            "creation_time",
        ),
    ],
    ids=["pod creation time", "pod deadline", "group timeout", "group creation time"],
)
def test_objects_from_the_python_api_with_seconds_past_any_float_are_rejected_naming_the_field(
    objects: list[Pod | PodGroup], rejected: str, field: str
) -> None:
    scheduler = KubefluxScheduler("kubeflux", backfill="easy")
    node = Node("n0", uid="uid-n0", allocatable={CPU: 8000, MEMORY: 32 * 2**30, "pods": 110})
    scheduler.observe(ClusterEvent(EventKind.ADDED, node), 0.0)
    for obj in objects:
        scheduler.observe(ClusterEvent(EventKind.ADDED, obj), 0.0)
    decisions = scheduler.schedule(1.0) + scheduler.schedule(2.0)
    assert [d.message for d in decisions if isinstance(d, Reject)] == [
        f"{rejected}: {field}: must be a finite number of seconds, got {HUGE!r}"
    ]
