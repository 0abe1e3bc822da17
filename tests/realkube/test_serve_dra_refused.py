"""Bindings the real API server refuses (a ValidatingAdmissionPolicy denies the pods' ``pods/binding``) for pods with
ResourceClaims, through ``kubeflux serve``, while the watch of one claim lags behind serve's own writes (held
deterministically: :class:`~tests.held_claims.HeldClaims`):

* each refused try takes its claim writes back: the claim a pod allocated is left with no allocation, reservation or
  finalizer; the claim shared with a running pod keeps its allocation and that pod in ``reservedFor``;
* a pod refused twice in a row is bound, once allowed, with its claim allocated and reserved for it, though serve's
  loop never heard from the watch that the claim was taken back (rev34y #5: it bound the pod with nothing written);
* the pod is told the server's words once (rev34y #2: they reached its condition and events twice)."""

from __future__ import annotations

import re
from typing import Any

from kubernetes import client

from kubeflux.apiobjects.resourceclaims import FINALIZER
from kubeflux.controlplane import ControlPlane
from kubeflux.kube.binder import Binder, BindOutcome
from kubeflux.kube.command import api_client
from kubeflux.kube.config import parse_config
from kubeflux.kube.serve import Serve
from tests.dra import claiming_pod
from tests.held_claims import HeldClaims
from tests.realkube._claims import GROUP, VERSION, one_gpu_claims
from tests.realkube._serving import pod

from .conftest import CEILING, Api, eventually

REFUSAL = "h35l refuses this Binding"
POLICY = {
    "apiVersion": "admissionregistration.k8s.io/v1",
    "kind": "ValidatingAdmissionPolicy",
    "metadata": {"name": "no-binding"},
    "spec": {
        "failurePolicy": "Fail",
        "matchConstraints": {
            "resourceRules": [
                {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["pods/binding"]}
            ]
        },
        "validations": [{"expression": "!object.metadata.name.startsWith('refused')", "message": REFUSAL}],
    },
}
POLICY_BINDING = {
    "apiVersion": "admissionregistration.k8s.io/v1",
    "kind": "ValidatingAdmissionPolicyBinding",
    "metadata": {"name": "no-binding"},
    "spec": {"policyName": "no-binding", "validationActions": ["Deny"]},
}


def _told(name: str) -> re.Pattern[str]:
    """What a pod whose Binding the policy refused is told: the server's words once."""
    said = (
        f'0/2 nodes are available: the Binding of pod default/{name} was refused (422: pods "{name}" is forbidden: '
        f"ValidatingAdmissionPolicy 'no-binding' with binding 'no-binding' denied request: {REFUSAL}); "
        "it is tried again in "
    )
    return re.compile(re.escape(said) + r"[0-9.]+ s\.")


def _refusing(api: Api, node: str) -> None:
    """Until the policy refuses a Binding (the API server loads it a moment after it is created): probe pods of no
    scheduler, bound by hand, each deleted."""
    core = client.CoreV1Api(api.client)
    number = 0

    def refused() -> bool:
        nonlocal number
        number += 1
        name = f"refused-probe-{number}"
        api.create_pod("default", pod(name, "10m", scheduler="nobody"))
        body = {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": name}, "target": {"name": node}}
        try:
            core.create_namespaced_pod_binding(name, "default", body, _preload_content=False)
            return False
        except client.ApiException as exc:
            assert exc.status == 422 and REFUSAL in str(exc.body), exc.body
            return True
        finally:
            core.delete_namespaced_pod(name, "default", grace_period_seconds=0)

    eventually(refused)


def test_refused_bindings_take_their_claims_back_keep_the_sharers_reservation_and_say_the_refusal_once(
    plane: ControlPlane, api: Api
) -> None:
    gpu_node = one_gpu_claims(plane, api, 16, 2, "solo", "shared")
    custom = client.CustomObjectsApi(api.client)
    admission = client.AdmissionregistrationV1Api(api.client)

    def get(name: str) -> dict[str, Any]:
        got: dict[str, Any] = custom.get_namespaced_custom_object(GROUP, VERSION, "default", "resourceclaims", name)
        return got

    def node_of(name: str) -> str:
        return str(api.pods("default").get(name, {}).get("spec", {}).get("nodeName") or "")

    admission.create_validating_admission_policy(POLICY)
    admission.create_validating_admission_policy_binding(POLICY_BINDING)
    _refusing(api, gpu_node)

    config = parse_config({"clock": "wall", "watch": {"timeoutSeconds": 30}, "binding": {"process": False}})
    served = Serve(config, api_client(plane.kubeconfig, None, False, 16))
    held = HeldClaims(served, "default/solo")
    assert isinstance(served.binder, Binder)
    writer = served.binder.writer
    real_bind, real_refused = writer.create_namespaced_pod_binding, served.binder.on_refused
    refusals: dict[str, int] = {}
    after: list[tuple[str, dict[str, Any]]] = []

    def bind(name: str, namespace: str, body: Any) -> Any:
        if name == "refused-solo":  # sent once serve's loop has heard the claim as the first try wrote it
            assert held.reserved["default/solo"].wait(CEILING)
        try:
            return real_bind(name, namespace, body)
        except client.ApiException:
            refusals[name] = refusals.get(name, 0) + 1
            raise

    def refused(outcome: BindOutcome) -> None:  # the claim writes are taken back; the next try is not made yet
        name = outcome.decision.pod.partition("/")[2]
        after.append((name, get("solo" if name == "refused-solo" else "shared")))
        real_refused(outcome)

    writer.create_namespaced_pod_binding = bind  # type: ignore[method-assign]
    served.binder.on_refused = refused
    with served:
        api.create_pod("default", claiming_pod("keep", "kubeflux", claim_name="shared"))
        assert eventually(lambda: node_of("keep")) == gpu_node
        allocated = get("shared")["status"]["allocation"]
        api.create_pod("default", claiming_pod("refused-solo", "kubeflux", claim_name="solo"))
        api.create_pod("default", claiming_pod("refused-shared", "kubeflux", claim_name="shared"))
        eventually(lambda: min(refusals.get("refused-solo", 0), refusals.get("refused-shared", 0)) >= 2)

        def condition(name: str) -> str:
            found = api.pods("default")[name].get("status", {}).get("conditions") or []
            return next((c.get("message", "") for c in found if c.get("type") == "PodScheduled"), "")

        for name in ("refused-solo", "refused-shared"):
            said = eventually(lambda name=name: "was refused" in condition(name) and condition(name))  # type: ignore[misc]
            assert _told(name).fullmatch(said), said
        told = [
            (e["regarding"].get("name"), e.get("note", ""))
            for e in api.events("default")
            if (e.get("regarding") or {}).get("name") in ("refused-solo", "refused-shared")
            and "was refused" in e.get("note", "")
        ]
        assert told and all(_told(name).fullmatch(note) for name, note in told), told

        admission.delete_validating_admission_policy_binding("no-binding")
        admission.delete_validating_admission_policy("no-binding")
        assert eventually(lambda: node_of("refused-solo")) == gpu_node
        assert eventually(lambda: node_of("refused-shared")) == gpu_node
        assert held.held  # the watch never showed serve's loop the solo claim taken back, nor written again

    for name, taken_back in after:
        status, meta = taken_back.get("status") or {}, taken_back["metadata"]
        if name == "refused-solo":
            assert not status.get("allocation") and not status.get("reservedFor") and not meta.get("finalizers")
        else:  # the claim keeps its allocation, its finalizer and the pod that runs with it
            assert status["allocation"] == allocated, taken_back
            assert [r["name"] for r in status["reservedFor"]] == ["keep"], taken_back
            assert meta["finalizers"] == [FINALIZER]
    assert {name for name, _ in after} == {"refused-solo", "refused-shared"}

    solo, shared = get("solo"), get("shared")
    devices = [r["device"] for c in (solo, shared) for r in c["status"]["allocation"]["devices"]["results"]]
    assert sorted(devices) == ["gpu-0", "gpu-1"]
    assert [r["name"] for r in solo["status"]["reservedFor"]] == ["refused-solo"]
    assert solo["metadata"]["finalizers"] == [FINALIZER]
    assert shared["status"]["allocation"] == allocated
    assert sorted(r["name"] for r in shared["status"]["reservedFor"]) == ["keep", "refused-shared"]
    served.api.close()
