"""What ``serve`` reads of a pod it follows (each pod read once, :mod:`kubeflux.apiobjects.podreadings`) is what it
would read afresh, and a pod gone is forgotten (a pod read is in scope, and stays so till it is deleted)."""

from __future__ import annotations

import logging

import pytest

from .conftest import Cluster, eventually, pod


def test_a_pod_bound_by_another_client_to_a_name_no_node_can_have_is_left_out_as_unreadable(
    cluster: Cluster, caplog: pytest.LogCaptureFixture
) -> None:
    """``pods/binding`` checks only that the target is named: another client binds its pod to ``Node_1``. serve says
    it cannot read that version (naming ``spec.nodeName``), as a fresh reading does, instead of handing its cores a
    pod bound to it; and once the pod is deleted nothing of it is kept."""
    caplog.set_level(logging.WARNING, logger="kubeflux.serve")
    with cluster.serve() as serve:
        created = cluster.create(pod("elsewhere", "1", scheduler="other-scheduler", run=None))
        eventually(lambda: serve.readings.known(created) is not None)  # read, pending
        cluster.bind("elsewhere", "Node_1")
        eventually(
            lambda: any("spec.nodeName" in r.getMessage() and "elsewhere" in r.getMessage() for r in caplog.records)
        )
        cluster.core.delete_namespaced_pod("elsewhere", "default", grace_period_seconds=0)
        eventually(lambda: len(serve.readings) == 0)
