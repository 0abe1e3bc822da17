"""A ResourceClaim whose CEL selector fails at run time, through ``kubeflux serve`` on the real control plane: the
real API server accepts a division by zero, an index past a list or an int64 overflow (they are run-time errors),
and kube-scheduler fails only that pod with a "CEL runtime error". serve did the same for the errors the CEL library
raises as ValueError, but a ZeroDivisionError, IndexError or OverflowError once escaped, ended serve's loop thread,
and no pod was scheduled after it."""

from __future__ import annotations

from kubernetes import client

from kubeflux.controlplane import ControlPlane
from tests.dra import DRIVER, claim, claiming_pod, gpu_class, gpu_slice
from tests.realkube._serving import nodes, pod, serve, waiting

from .conftest import Api, eventually

GROUP, VERSION = "resource.k8s.io", "v1"
INDEX = f'device.attributes["{DRIVER}"].index'
FAILING = {
    "zero": (f"10 / {INDEX} > 1", "division by zero"),
    "past": (f"[1][{INDEX} + 5] == 1", "index out of bounds"),
    "over": (f"{INDEX} - 9223372036854775807 - 2 < 0", "overflow"),
}


def test_pods_whose_selectors_fail_at_run_time_wait_with_the_error_and_a_later_pod_is_bound(
    plane: ControlPlane, api: Api
) -> None:
    (name,) = nodes(plane, api, 1, 8)
    custom = client.CustomObjectsApi(api.client)
    custom.create_cluster_custom_object(GROUP, VERSION, "deviceclasses", gpu_class())
    custom.create_cluster_custom_object(GROUP, VERSION, "resourceslices", gpu_slice(name, 2))
    for key, (expression, _) in FAILING.items():
        body = claim(key, 1, expression)
        del body["metadata"]["uid"]
        custom.create_namespaced_custom_object(GROUP, VERSION, "default", "resourceclaims", body)
    with serve(plane) as served:
        for key in FAILING:
            api.create_pod("default", claiming_pod(f"evil-{key}", "kubeflux", claim_name=key))
        for key, (_, error) in FAILING.items():
            said = eventually(lambda key=key: waiting(api, f"evil-{key}"))  # type: ignore[misc]
            assert f"pod default/evil-{key}: claim default/{key}, request gpus: selector #0" in said, said
            assert f"CEL runtime error on device {DRIVER}/{name}/gpu-" in said and error in said.lower(), said
        api.create_pod("default", pod("plain", "1"))
        eventually(lambda: api.pods("default")["plain"]["spec"].get("nodeName") == name)
        assert served.alive
