"""The sequence, part 5: ResourceQuotas (validation, the quota admission's refusals and its ``status.used``, the quota
controller's recount after a delete, scopes), the ``scale`` subresource and ``serviceaccounts/NAME/token``, through
raw requests and the kubectl commands that use them (``create quota``, ``describe quota``, ``scale``, ``create
token``). Its own namespace, ``quota``, so that its quotas limit nothing of the other parts; on both sides the
quota controller runs (kube-controller-manager's, ``cluster serve``'s), and steps that need its work wait for it.
"""

from __future__ import annotations

import base64
import json
from datetime import datetime
from typing import Any

from .dsl import delete, get, kubectl, patch, post, put
from .runner import Json, Step

NS = "/api/v1/namespaces/quota"
QUOTAS = f"{NS}/resourcequotas"
APPS = "/apis/apps/v1/namespaces/quota"
JOBS = "/apis/batch/v1/namespaces/quota/jobs"


def _quota(name: str, hard: dict[str, str], **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": name}, "spec": {"hard": hard, **spec}}


def _pod(name: str, requests: dict[str, str] | None = None, **spec: Any) -> dict[str, Any]:
    container: dict[str, Any] = {"name": "main", "image": "busybox:1.36"}
    if requests is not None:
        container["resources"] = {"requests": requests}
    body = {"automountServiceAccountToken": False, "containers": [container], **spec}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": body}


def _job(name: str) -> dict[str, Any]:
    template = {
        "spec": {
            "restartPolicy": "Never",
            "automountServiceAccountToken": False,
            "containers": [{"name": "main", "image": "busybox:1.36", "resources": {"requests": {"cpu": "1m"}}}],
        }
    }
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name}, "spec": {"template": template}}


def _used(body: Json) -> dict[str, Json]:
    """The quota's counts, compared value for value."""
    status = body.get("status") or {}
    return {"hard": status.get("hard"), "used": status.get("used")}


def _synced(code: int, body: Json) -> bool:
    """The quota controller has written the quota's status."""
    return code == 200 and "used" in (body.get("status") or {})


def _used_is(name: str, value: str) -> Any:
    return lambda code, body: code == 200 and ((body.get("status") or {}).get("used") or {}).get(name) == value


def _workload(kind: str, name: str, selector: dict[str, Any]) -> dict[str, Any]:
    template = {
        "metadata": {"labels": {"app": "web", "tier": "a"}},
        "spec": {"automountServiceAccountToken": False, "containers": [{"name": "main", "image": "nginx:1.27"}]},
    }
    return {
        "apiVersion": "apps/v1",
        "kind": kind,
        "metadata": {"name": name},
        "spec": {"replicas": 1, "selector": selector, "template": template},
    }


def _scale(replicas: Any, **meta: Any) -> dict[str, Any]:
    return {
        "apiVersion": "autoscaling/v1",
        "kind": "Scale",
        "metadata": {"name": "web", **meta},
        "spec": {"replicas": replicas},
    }


def _scale_of(body: Json) -> dict[str, Json]:
    return {"spec": body.get("spec"), "status": body.get("status")}


def _claims(body: Json) -> dict[str, Json]:
    """What a TokenRequest's answer says: its spec, how long the token lasts (asked and in its claims), and the
    claims' names (the JWT's payload, decoded)."""
    token = str((body.get("status") or {}).get("token", ""))
    payload = token.split(".")[1] if token.count(".") == 2 else ""
    claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)) or b"{}")
    private = dict(claims.get("kubernetes.io") or {})
    if "warnafter" in private:  # a time: compared as seconds after the token's issue
        private["warnafter"] -= claims.get("iat", 0)
    created = datetime.fromisoformat(body["metadata"]["creationTimestamp"].replace("Z", "+00:00"))
    expires = datetime.fromisoformat(body["status"]["expirationTimestamp"].replace("Z", "+00:00"))
    return {
        "spec": body.get("spec"),
        "seconds": (expires - created).total_seconds(),
        "lasts": claims.get("exp", 0) - claims.get("iat", 0),
        "claims": sorted(claims),
        "private": {key: sorted(value) if isinstance(value, dict) else value for key, value in private.items()},
        "subject": claims.get("sub"),
    }


def _token_shape(text: Json) -> str:
    """A token is three base64url parts (its content differs by server)."""
    parts = str(text).strip().split(".")
    return f"{len(parts)} parts"


_EXPRESSIONS = {
    "matchLabels": {"app": "web"},
    "matchExpressions": [{"key": "tier", "operator": "In", "values": ["b", "a"]}],
}
TOKEN = f"{NS}/serviceaccounts/robot/token"
REVIEWS = "/apis/authentication.k8s.io/v1/tokenreviews"


def _without_extra(text: Json) -> str:
    """``kubectl auth whoami`` but its ``Extra`` lines (the real admin's client certificate has a credential id)."""
    return "\n".join(line for line in str(text).splitlines() if not line.startswith("Extra"))


_CACHE_LAG = 1.0
"""Seconds a create waits after the quota controller's first write: the real quota admission reads quotas from an
informer's cache, which may not have it yet (then the create is not counted, and the next one fits)."""

SAME_WORDS = (
    "quota negative",
    "quota bad quantity",
    "quota fraction of pods",
    "quota unknown scope",
    "quota conflicting scopes",
    "quota scope not for resource",
    "quota bad resource name",
    "quota not a standard resource",
    "quota best effort cpu",
    "quota selector without values",
    "quota selector bad operator",
    "quota scopes immutable",
    "quota pod without requests",
    "quota pod exceeds",
    "quota pod dry run exceeds",
    "quota configmap 3",
    "quota job 2",
    "quota best effort second pod",
    "quota terminating pod exceeds",
    "quota priority second pod",
    "quota pod given a deadline",
    "scale put stale",
    "scale put other name",
    "scale put negative",
    "scale put string",
    "scale put deployment",
    "scale missing",
    "token too short",
    "token too long",
    "token seconds a string",
    "token other kind",
    "token bound missing pod",
    "token bound deployment",
    "token bound other account's pod",
    "token named other",
    "token missing account",
    "token review without token",
)
"""Steps whose refusal ``cluster serve`` words as the real server does (compared word for word)."""

STEPS: list[Step] = [
    post("quota namespace", "/api/v1/namespaces", {"metadata": {"name": "quota"}}),
    get("quota namespace account", f"{NS}/serviceaccounts/default", until=lambda code, body: code == 200),
    # --- the object and its validation ----------------------------------------------------------------------------
    post(
        "quota create",
        QUOTAS,
        _quota(
            "compute", {"cpu": "1", "requests.memory": "1Gi", "pods": "3", "count/jobs.batch": "1", "configmaps": "2"}
        ),
    ),
    get("quota synced", f"{QUOTAS}/compute", until=_synced, exact=_used),
    *(
        post(f"quota {name}", QUOTAS, _quota(f"bad{index}", hard, **spec))
        for index, (name, hard, spec) in enumerate(
            (
                ("negative", {"cpu": "-1"}, {}),
                ("bad quantity", {"cpu": "abc"}, {}),
                ("bad resource name", {"bad name!": "1"}, {}),
                ("not a standard resource", {"foo": "1"}, {}),
                ("fraction of pods", {"pods": "1.5"}, {}),
                ("unknown scope", {"pods": "1"}, {"scopes": ["Bogus"]}),
                ("conflicting scopes", {"pods": "1"}, {"scopes": ["Terminating", "NotTerminating"]}),
                ("scope not for resource", {"configmaps": "1"}, {"scopes": ["BestEffort"]}),
                ("best effort cpu", {"cpu": "1"}, {"scopes": ["BestEffort"]}),
                (
                    "selector without values",
                    {"pods": "1"},
                    {"scopeSelector": {"matchExpressions": [{"scopeName": "PriorityClass", "operator": "In"}]}},
                ),
                (
                    "selector bad operator",
                    {"pods": "1"},
                    {
                        "scopeSelector": {
                            "matchExpressions": [{"scopeName": "Terminating", "operator": "In", "values": ["x"]}]
                        }
                    },
                ),
            )
        )
    ),
    patch("quota scopes immutable", f"{QUOTAS}/compute", {"spec": {"scopes": ["NotTerminating"]}}),
    # --- admission ------------------------------------------------------------------------------------------------
    post("quota pod without requests", f"{NS}/pods", _pod("nocpu"), pause=_CACHE_LAG),
    post("quota pod fits", f"{NS}/pods", _pod("fits", {"cpu": "600m", "memory": "512Mi"})),
    get("quota used after pod", f"{QUOTAS}/compute", exact=_used),
    post("quota pod exceeds", f"{NS}/pods", _pod("exceeds", {"cpu": "600m", "memory": "100Mi"})),
    post("quota pod dry run", f"{NS}/pods?dryRun=All", _pod("dry", {"cpu": "300m", "memory": "100Mi"})),
    post("quota pod dry run exceeds", f"{NS}/pods?dryRun=All", _pod("dry", {"cpu": "500m", "memory": "100Mi"})),
    get("quota dry run counts nothing", f"{QUOTAS}/compute", exact=_used),
    post("quota configmap 1", f"{NS}/configmaps", {"metadata": {"name": "c1"}, "data": {"a": "1"}}),
    post("quota configmap 2", f"{NS}/configmaps", {"metadata": {"name": "c2"}, "data": {"a": "1"}}),
    post("quota configmap 3", f"{NS}/configmaps", {"metadata": {"name": "c3"}, "data": {"a": "1"}}),
    post("quota job 1", JOBS, _job("j1")),
    post("quota job 2", JOBS, _job("j2")),
    get("quota used after counts", f"{QUOTAS}/compute", exact=_used),
    kubectl("kubectl describe quota", "describe", "quota", "compute", "-n", "quota"),
    kubectl("kubectl get quota", "get", "quota", "-n", "quota"),
    delete("quota pod delete", f"{NS}/pods/fits?gracePeriodSeconds=0"),
    get("quota replenished", f"{QUOTAS}/compute", until=_used_is("cpu", "0"), exact=_used),
    delete("quota configmap delete", f"{NS}/configmaps/c1"),
    get("quota configmap replenished", f"{QUOTAS}/compute", until=_used_is("configmaps", "1"), exact=_used),
    patch("quota raise", f"{QUOTAS}/compute", {"spec": {"hard": {"cpu": "2", "pods": "3"}}}, "strategic"),
    get(
        "quota raised", f"{QUOTAS}/compute", until=lambda code, body: _used(body)["hard"].get("cpu") == "2", exact=_used
    ),
    delete("quota delete", f"{QUOTAS}/compute"),
    # --- scopes ---------------------------------------------------------------------------------------------------
    post("quota best effort", QUOTAS, _quota("besteffort", {"pods": "1"}, scopes=["BestEffort"])),
    get("quota best effort synced", f"{QUOTAS}/besteffort", until=_synced, exact=_used),
    post("quota best effort pod", f"{NS}/pods", _pod("be1"), pause=_CACHE_LAG),
    post("quota best effort second pod", f"{NS}/pods", _pod("be2")),
    post("quota burstable pod not counted", f"{NS}/pods", _pod("burst", {"cpu": "10m"})),
    post(
        "quota terminating",
        QUOTAS,
        _quota("terminating", {"pods": "1", "requests.cpu": "100m"}, scopes=["Terminating"]),
    ),
    get("quota terminating synced", f"{QUOTAS}/terminating", until=_synced, exact=_used),
    post("quota terminating pod", f"{NS}/pods", _pod("t1", {"cpu": "50m"}, activeDeadlineSeconds=60), pause=_CACHE_LAG),
    post("quota terminating pod exceeds", f"{NS}/pods", _pod("t2", {"cpu": "60m"}, activeDeadlineSeconds=60)),
    post("quota pod not yet terminating", f"{NS}/pods", _pod("late", {"cpu": "10m"})),
    patch("quota pod given a deadline", f"{NS}/pods/late", {"spec": {"activeDeadlineSeconds": 60}}),
    post(
        "quota priority class",
        "/apis/scheduling.k8s.io/v1/priorityclasses",
        {"metadata": {"name": "quota-high"}, "value": 1000},
    ),
    post(
        "quota priority",
        QUOTAS,
        _quota(
            "priority",
            {"pods": "1"},
            scopeSelector={
                "matchExpressions": [{"scopeName": "PriorityClass", "operator": "In", "values": ["quota-high"]}]
            },
        ),
    ),
    get("quota priority synced", f"{QUOTAS}/priority", until=_synced, exact=_used),
    post(
        "quota priority pod",
        f"{NS}/pods",
        _pod("high1", {"cpu": "10m"}, priorityClassName="quota-high"),
        pause=_CACHE_LAG,
    ),
    post("quota priority second pod", f"{NS}/pods", _pod("high2", {"cpu": "10m"}, priorityClassName="quota-high")),
    kubectl(
        "kubectl create quota", "create", "quota", "kq", "--hard=secrets=4,count/deployments.apps=2", "-n", "quota"
    ),
    get("kubectl quota synced", f"{QUOTAS}/kq", until=_synced, exact=_used),
    kubectl("kubectl describe quotas", "describe", "quota", "-n", "quota"),
    kubectl("kubectl create quota bad", "create", "quota", "kq2", "--hard=pods=x", "-n", "quota"),
    # --- scale ----------------------------------------------------------------------------------------------------
    post("scale deployment", f"{APPS}/deployments", _workload("Deployment", "web", {"matchLabels": {"app": "web"}})),
    get("scale get", f"{APPS}/deployments/web/scale", exact=_scale_of),
    put("scale put", f"{APPS}/deployments/web/scale", _scale(2), exact=_scale_of),
    put("scale put stale", f"{APPS}/deployments/web/scale", _scale(3, resourceVersion="1")),
    put("scale put other name", f"{APPS}/deployments/web/scale", {**_scale(3), "metadata": {"name": "other"}}),
    put("scale put negative", f"{APPS}/deployments/web/scale", _scale(-1)),
    put("scale put string", f"{APPS}/deployments/web/scale", _scale("3")),
    put(
        "scale put deployment",
        f"{APPS}/deployments/web/scale",
        {**_scale(3), "apiVersion": "apps/v1", "kind": "Deployment"},
    ),
    patch("scale merge patch", f"{APPS}/deployments/web/scale", {"spec": {"replicas": 4}}, exact=_scale_of),
    patch(
        "scale json patch",
        f"{APPS}/deployments/web/scale",
        [{"op": "replace", "path": "/spec/replicas", "value": 5}],
        "json",
    ),
    patch("scale strategic patch", f"{APPS}/deployments/web/scale", {"spec": {"replicas": 1}}, "strategic"),
    patch("scale patch string", f"{APPS}/deployments/web/scale", {"spec": {"replicas": "x"}}),
    post("scale post", f"{APPS}/deployments/web/scale", _scale(1)),
    delete("scale delete", f"{APPS}/deployments/web/scale"),
    get("scale missing", f"{APPS}/deployments/nope/scale"),
    get(
        "scale deployment after",
        f"{APPS}/deployments/web",
        exact=lambda body: {"replicas": body["spec"]["replicas"], "generation": body["metadata"]["generation"]},
    ),
    post("scale replicaset", f"{APPS}/replicasets", _workload("ReplicaSet", "web-rs", _EXPRESSIONS)),
    get("scale replicaset get", f"{APPS}/replicasets/web-rs/scale", exact=_scale_of),
    post(
        "scale statefulset",
        f"{APPS}/statefulsets",
        _workload("StatefulSet", "db", {"matchLabels": {"app": "web", "tier": "a"}}),
    ),
    patch("scale statefulset patch", f"{APPS}/statefulsets/db/scale", {"spec": {"replicas": 0}}, exact=_scale_of),
    kubectl("kubectl scale", "scale", "deployment", "web", "--replicas=3", "-n", "quota"),
    kubectl(
        "kubectl scale current", "scale", "deployment", "web", "--replicas=4", "--current-replicas=1", "-n", "quota"
    ),
    kubectl("kubectl scale several", "scale", "deployment/web", "statefulset/db", "--replicas=2", "-n", "quota"),
    kubectl("kubectl scale replicas", "get", "deployment", "web", "-n", "quota", "-o", "jsonpath={.spec.replicas}"),
    # --- tokens ---------------------------------------------------------------------------------------------------
    post("token account", f"{NS}/serviceaccounts", {"metadata": {"name": "robot"}}),
    post(
        "token request",
        TOKEN,
        {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}},
        save={"robot_token": "status.token"},
        exact=_claims,
    ),
    post("token request audiences", TOKEN, {"spec": {"audiences": ["api"], "expirationSeconds": 7200}}, exact=_claims),
    post("token too short", TOKEN, {"spec": {"expirationSeconds": 599}}),
    post("token too long", TOKEN, {"spec": {"expirationSeconds": 2**32 + 1}}),
    post("token seconds a string", TOKEN, {"spec": {"expirationSeconds": "x"}}),
    post("token other kind", TOKEN, {"apiVersion": "v1", "kind": "Pod"}),
    post(
        "token bound missing pod",
        TOKEN,
        {"spec": {"boundObjectRef": {"apiVersion": "v1", "kind": "Pod", "name": "nope"}}},
    ),
    post(
        "token bound deployment",
        TOKEN,
        {"spec": {"boundObjectRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}}},
    ),
    post(
        "token bound other account's pod",
        TOKEN,
        {"spec": {"boundObjectRef": {"apiVersion": "v1", "kind": "Pod", "name": "be1"}}},
    ),
    post("token pod of the account", f"{NS}/pods", _pod("robotpod", {"cpu": "10m"}, serviceAccountName="robot")),
    post(
        "token bound pod",
        TOKEN,
        {"spec": {"boundObjectRef": {"apiVersion": "v1", "kind": "Pod", "name": "robotpod"}}},
        exact=_claims,
    ),
    post(
        "token bound pod kubelet's",
        TOKEN,
        {
            "spec": {
                "expirationSeconds": 3607,
                "boundObjectRef": {"apiVersion": "v1", "kind": "Pod", "name": "robotpod"},
            }
        },
        exact=_claims,
    ),
    post("token named other", TOKEN, {"metadata": {"name": "other"}, "spec": {}}),
    post("token missing account", f"{NS}/serviceaccounts/nope/token", {"spec": {}}),
    post("token review", REVIEWS, {"spec": {"token": "$robot_token"}}),
    post("token review other audience", REVIEWS, {"spec": {"token": "$robot_token", "audiences": ["api"]}}),
    post("token review forged", REVIEWS, {"spec": {"token": "garbage"}}),
    post("token review without token", REVIEWS, {"spec": {}}),
    post("whoami", "/apis/authentication.k8s.io/v1/selfsubjectreviews", {}),
    kubectl("kubectl auth whoami", "auth", "whoami", view=_without_extra),
    get("token get", TOKEN),
    delete("token delete", TOKEN),
    kubectl("kubectl create token", "create", "token", "robot", "-n", "quota", view=_token_shape),
    kubectl("kubectl create token short", "create", "token", "robot", "--duration=5m", "-n", "quota"),
    kubectl(
        "kubectl create token audience",
        "create",
        "token",
        "robot",
        "--duration=1h",
        "--audience=api",
        "-n",
        "quota",
        view=_token_shape,
    ),
    kubectl("kubectl create token missing", "create", "token", "nope", "-n", "quota"),
    # --- the end: nothing left for a second run -----------------------------------------------------------------------
    delete("quota priority class delete", "/apis/scheduling.k8s.io/v1/priorityclasses/quota-high"),
    delete("quota namespace delete", "/api/v1/namespaces/quota"),
]
