"""What ``kubeflux serve`` reads of a pod it follows on the real control plane (each pod read once,
:mod:`kubeflux.apiobjects.podreadings`) is what it would read afresh."""

from __future__ import annotations

import contextlib
import logging
from pathlib import Path

import pytest
from kubernetes.client import ApiException

from kubeflux.controlplane import Binaries
from tests.realkube._serving import nodes, pod, ready_for_pods, serve

from .conftest import Api, eventually, running_plane


def test_a_pod_another_client_binds_to_a_name_no_node_can_have_is_left_out_as_unreadable(
    binaries: Binaries, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """kube-apiserver's ``pods/binding`` checks only that the target is named (ValidatePodBinding): another client
    binds its pod to ``Node_1``. serve says it cannot read that version, naming ``spec.nodeName``, as a fresh reading
    does (on 37a268a it carried the pending reading over with node ``Node_1``, and said so only when PodGC deleted
    the pod); the pod deleted, nothing of it is kept."""
    caplog.set_level(logging.WARNING, logger="kubeflux.serve")
    with running_plane(binaries, tmp_path / "plane") as plane:
        api = Api(plane.kubeconfig)
        try:
            nodes(plane, api, 1, 16)
            ready_for_pods(api, "default")
            with serve(plane) as scheduler:
                created = api.create_pod("default", pod("elsewhere", "1", scheduler="other-scheduler"))
                eventually(lambda: scheduler.readings.known(created) is not None)  # read, pending
                binding = {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "elsewhere"}}
                binding["target"] = {"name": "Node_1"}
                api.core.create_namespaced_pod_binding("elsewhere", "default", binding, _preload_content=False)
                eventually(lambda: any("spec.nodeName" in r.getMessage() for r in caplog.records))
                # said of the bound version, not only of its deletion (PodGC deletes a pod on no node, 40 s on)
                assert "elsewhere" in api.pods("default")
                with contextlib.suppress(ApiException):  # (PodGC may have been first)
                    api.core.delete_namespaced_pod("elsewhere", "default", grace_period_seconds=0)
                eventually(lambda: len(scheduler.readings) == 0)
        finally:
            api.close()
