"""Leader election's Lease record against the simulated cluster (the takeovers on the real control plane:
tests/realkube/test_serve_resilience.py)."""

from __future__ import annotations

from typing import Any

import orjson

from kubeflux.kube.leader import LeaderElector

from .conftest import Cluster, client


def _lease(cluster: Cluster) -> dict[str, Any]:
    leases = client.CoordinationV1Api(cluster.api)
    response = leases.read_namespaced_lease("kubeflux", "default", _preload_content=False)
    spec: dict[str, Any] = orjson.loads(response.data)["spec"]
    return spec


def _elector(cluster: Cluster, identity: str) -> LeaderElector:
    return LeaderElector(
        cluster.api, "default", "kubeflux", identity=identity, lease_seconds=3, renew_seconds=2, retry_seconds=1
    )


def test_taking_over_a_released_lease_is_a_transition_as_client_go_counts_it(cluster: Cluster) -> None:
    first, second = _elector(cluster, "first"), _elector(cluster, "second")
    assert first._try()  # creates it: no transition
    assert _lease(cluster)["leaseTransitions"] == 0
    assert first._try()  # renews: none either
    assert _lease(cluster)["leaseTransitions"] == 0
    first._release()
    assert _lease(cluster)["holderIdentity"] == ""
    assert second._try()  # a released Lease is free at once, and taking it is a transition
    spec = _lease(cluster)
    assert (spec["holderIdentity"], spec["leaseTransitions"]) == ("second", 1)
    second._release()
    assert first._try()  # back to the first: another
    assert _lease(cluster)["leaseTransitions"] == 2
