"""A pending pod whose ResourceClaim is allocated on a node the pod can no longer use, against the real control plane
(rev35 finding 1): what a serve stopped between the claim's write and the Binding leaves, after which the node
filled up or was cordoned. kube-scheduler's DynamicResources PostFilter frees the claim and places the pod elsewhere;
``kubeflux serve`` does the same, and its allocation is written as kube-scheduler writes one, ``allocationTimestamp``
included (rev35 finding 3)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from kubernetes import client
from prometheus_client.parser import text_string_to_metric_families

from kubeflux.controlplane import Binaries, ControlPlane
from kubeflux.kube.claimwrites import Written, reserve_claims
from kubeflux.kube.rest import RawApi
from tests.dra import claiming_pod, gpu_class, gpu_slice
from tests.realkube._claims import allocation, create_claim, get_claim
from tests.realkube._serving import nodes, pod, serve, waiting

from .conftest import Api, eventually, running_plane

GROUP, VERSION = "resource.k8s.io", "v1"


@pytest.fixture
def plane(binaries: Binaries, tmp_path: Path) -> Iterator[ControlPlane]:
    """A control plane of its own for each case (one cordons a node, the other fills it)."""
    with running_plane(binaries, tmp_path) as started:
        yield started


def _two_gpu_nodes(plane: ControlPlane, api: Api) -> list[str]:
    names = sorted(nodes(plane, api, 2, 8))
    custom = client.CustomObjectsApi(api.client)
    custom.create_cluster_custom_object(GROUP, VERSION, "deviceclasses", gpu_class())
    for name in names:
        custom.create_cluster_custom_object(GROUP, VERSION, "resourceslices", gpu_slice(name, 2))
    return names


def _stuck(api: Api, scheduler: str, node: str) -> str:
    """A pod of ``scheduler`` whose claim is allocated gpu-0 of ``node`` and reserved for it, unbound (a serve
    stopped between the claim's write and the Binding); the pod's uid."""
    made = create_claim(api, f"c-{scheduler}")
    manifest = claiming_pod(f"p-{scheduler}", scheduler, claim_name=f"c-{scheduler}")
    uid = str(api.create_pod("default", manifest)["metadata"]["uid"])
    written: list[Written] = []
    reserve_claims(RawApi(api.client), [allocation(made, node, "gpu-0")], f"p-{scheduler}", uid, written)
    return uid


def _placed(api: Api, name: str) -> str:
    return str(api.pods("default")[name]["spec"].get("nodeName") or "")


@pytest.mark.parametrize("how", ["full", "cordoned"])
def test_a_pod_whose_claim_is_allocated_on_a_node_it_can_no_longer_use_gets_its_claim_freed_and_runs_elsewhere(
    plane: ControlPlane, api: Api, how: str
) -> None:
    first, second = _two_gpu_nodes(plane, api)
    uids = {who: _stuck(api, who, first) for who in ("default-scheduler", "kubeflux")}
    if how == "full":
        blocker = pod("blocker", "8", scheduler="nobody")
        blocker["spec"]["nodeName"] = first
        api.create_pod("default", blocker)
    else:
        api.core.patch_node(first, {"spec": {"unschedulable": True}}, _preload_content=False)
    plane.start_scheduler()
    began = int(time.time())  # the allocation's timestamp is in seconds
    with serve(plane):
        for who in uids:
            eventually(lambda who=who: _placed(api, f"p-{who}"), lambda who=who: waiting(api, f"p-{who}"))
    theirs, ours = get_claim(api, "c-default-scheduler")["status"], get_claim(api, "c-kubeflux")["status"]
    for who, status in (("default-scheduler", theirs), ("kubeflux", ours)):
        assert _placed(api, f"p-{who}") == second
        assert status["reservedFor"] == [{"resource": "pods", "name": f"p-{who}", "uid": uids[who]}]
        assert status["allocation"]["devices"]["results"][0]["pool"] == second
    # kubeflux's allocation as kube-scheduler's: the same fields, a timestamp of when it was written
    assert (
        sorted(ours["allocation"]) == sorted(theirs["allocation"]) == ["allocationTimestamp", "devices", "nodeSelector"]
    )
    stamp = datetime.strptime(ours["allocation"]["allocationTimestamp"], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
    assert stamp.timestamp() >= began  # written by serve, after it started


_NO_FREE = "admission refuses freeing"


def _refusing_frees(api: Api, node: str) -> None:
    """A ValidatingAdmissionPolicy refusing any claim status write that removes an allocation (a webhook or policy
    in the way; in life also a failing or unreachable API server), in force once a probe's free is refused."""
    admission = client.AdmissionregistrationV1Api(api.client)
    rule = {
        "apiGroups": ["resource.k8s.io"],
        "apiVersions": ["*"],
        "operations": ["UPDATE"],
        "resources": ["resourceclaims/status"],
    }
    keeps = "!has(oldObject.status) || !has(oldObject.status.allocation) || has(object.status.allocation)"
    admission.create_validating_admission_policy(
        {
            "metadata": {"name": "no-free"},
            "spec": {
                "failurePolicy": "Fail",
                "matchConstraints": {"resourceRules": [rule]},
                "validations": [{"expression": keeps, "message": _NO_FREE}],
            },
        }
    )
    admission.create_validating_admission_policy_binding(
        {"metadata": {"name": "no-free"}, "spec": {"policyName": "no-free", "validationActions": ["Deny"]}}
    )
    probe = create_claim(api, "probe")
    reserve_claims(RawApi(api.client), [allocation(probe, node, "gpu-1")], "nobody", "uid-nobody", [])
    custom = client.CustomObjectsApi(api.client)

    def refused() -> bool:
        patch = {"status": {"reservedFor": None, "allocation": None}}
        try:
            custom.patch_namespaced_custom_object_status(GROUP, VERSION, "default", "resourceclaims", "probe", patch)
        except client.ApiException as exc:
            return _NO_FREE in str(exc.body)
        reserve_claims(RawApi(api.client), [allocation(get_claim(api, "probe"), node, "gpu-1")], "nobody", "u", [])
        return False

    eventually(refused)


def _frees_refused(api: Api) -> float:
    """The claim status writes the ``no-free`` policy has refused, as the API server counts them (its metric
    ``apiserver_validating_admission_policy_check_total``, enforcement action ``deny``)."""
    response = api.client.call_api("GET", f"{api.client.configuration.host}/metrics")
    text = response.read().decode()
    return sum(
        sample.value
        for family in text_string_to_metric_families(text)
        if family.name == "apiserver_validating_admission_policy_check"
        for sample in family.samples
        if sample.name.endswith("_total")
        and sample.labels.get("policy") == "no-free"
        and sample.labels.get("enforcement_action") == "deny"
    )


def test_a_claims_freeing_refused_for_a_while_is_tried_again_until_the_pod_runs_elsewhere(
    plane: ControlPlane, api: Api
) -> None:
    """rev35b: serve's write freeing a stuck claim is refused (not a conflict: the claim is unchanged, so the core
    does not ask again); serve tries it again after a back-off, as kube-scheduler's PostFilter runs at each retry,
    and once the refusal is gone the pod runs on the other node."""
    first, second = _two_gpu_nodes(plane, api)
    _refusing_frees(api, first)
    _stuck(api, "kubeflux", first)
    blocker = pod("blocker", "8", scheduler="nobody")
    blocker["spec"]["nodeName"] = first
    api.create_pod("default", blocker)
    before = _frees_refused(api)
    with serve(plane):
        eventually(lambda: waiting(api, "p-kubeflux"))  # tried: the claim's freeing asked in the same pass
        # refused, then asked again after the back-off and refused again (before the mend, never asked again)
        eventually(lambda: _frees_refused(api) >= before + 2, lambda: f"{_frees_refused(api) - before} refused")
        assert get_claim(api, "c-kubeflux")["status"]["allocation"]["devices"]["results"][0]["pool"] == first
        admission = client.AdmissionregistrationV1Api(api.client)
        admission.delete_validating_admission_policy_binding("no-free")
        admission.delete_validating_admission_policy("no-free")
        eventually(lambda: _placed(api, "p-kubeflux"), lambda: waiting(api, "p-kubeflux"))
    assert _placed(api, "p-kubeflux") == second
