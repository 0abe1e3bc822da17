"""A restarted ``serve`` owns the expected starts its previous run wrote on its pods, over HTTP.

A new process cannot know what the last one told; it reads it from the pods: a pending pod of its own with the
``kubeflux.io/expected-start`` annotation that it plans no start for has the annotation taken back, and its
``PodScheduled`` condition says why.
"""

from __future__ import annotations

from typing import Any

from .conftest import Cluster, condition, pod

EXPECTED = "kubeflux.io/expected-start"
PLANNED = 864_000
"""What each pod says it runs (kubeflux's duration annotation): ten days, which the served clock (200 times real
time) takes over an hour to reach, so no pod runs past its planned end while the test looks."""


def _expected(p: dict[str, Any]) -> str | None:
    annotations: dict[str, str] = p["metadata"].get("annotations") or {}
    return annotations.get(EXPECTED)


def test_serve_restarted_with_a_smaller_queue_depth_takes_back_the_start_of_a_pod_it_no_longer_plans(
    cluster: Cluster,
) -> None:
    for name in ("a", "b", "c"):  # the node's 16 cores each, running until deleted
        cluster.create(pod(name, "16", run=None, annotations={"kubeflux.io/duration": str(PLANNED)}))
    with cluster.serve(schedulers=[{"queuePolicy": "conservative", "queueDepth": 4}]):
        cluster.wait_for(lambda pods: _expected(pods["b"]) is not None and _expected(pods["c"]) is not None)
    first = cluster.pods()
    assert int(_expected(first["c"]) or 0) == int(_expected(first["b"]) or 0) + PLANNED
    with cluster.serve(schedulers=[{"queuePolicy": "conservative", "queueDepth": 1}]):
        cluster.wait_for(lambda pods: _expected(pods["c"]) is None)
        cluster.wait_for(lambda pods: "queue depth of 1" in (condition(pods["c"]) or {}).get("message", ""))
        pods = cluster.pods()
        assert _expected(pods["b"]) == _expected(first["b"])  # still planned, as before
        assert not pods["c"]["spec"].get("nodeName")
