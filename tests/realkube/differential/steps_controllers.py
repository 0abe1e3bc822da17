"""The sequence, part 4: what kube-controller-manager's controllers keep (ServiceAccounts, Endpoints, EndpointSlices,
PodDisruptionBudgets, the apps/v1 workloads and their ControllerRevisions, CronJobs): defaults,
the validation a client meets first, status subresources. No controller of them runs on either side."""

from __future__ import annotations

from typing import Any

from .dsl import NS, delete, get, patch, pod, post
from .runner import Json, Step

APPS = "/apis/apps/v1/namespaces/diff"
_TEMPLATE = {
    "metadata": {"labels": {"app": "web"}},
    "spec": {"automountServiceAccountToken": False, "containers": [{"name": "main", "image": "nginx:1.27"}]},
}


def _workload(kind: str, name: str, **spec: Any) -> dict[str, Any]:
    body = {"selector": {"matchLabels": {"app": "web"}}, "template": _TEMPLATE, **spec}
    return {"apiVersion": "apps/v1", "kind": kind, "metadata": {"name": name}, "spec": body}


_CRONJOB = {
    "apiVersion": "batch/v1",
    "kind": "CronJob",
    "metadata": {"name": "cj1"},
    "spec": {
        "schedule": "*/5 * * * *",
        "jobTemplate": {
            "spec": {
                "template": {
                    "spec": {
                        "restartPolicy": "Never",
                        "automountServiceAccountToken": False,
                        "containers": [{"name": "main", "image": "busybox:1.36"}],
                    }
                }
            }
        },
    },
}


def _cause_words(body: Json) -> dict[str, Json]:
    """The causes' messages of a refusal, compared word for word (the runner compares only fields and reasons)."""
    details = body.get("details") if isinstance(body, dict) else None
    causes = details.get("causes") if isinstance(details, dict) else None
    return {"causes": [cause.get("message") for cause in causes or ()]}


def _cronjob_counts(name: str, counts: dict[str, Any]) -> dict[str, Any]:
    """:data:`_CRONJOB` named ``name`` whose Job template has ``counts`` (held to a Job's rules)."""
    job = _CRONJOB["spec"]["jobTemplate"]  # type: ignore[index]
    spec = {**_CRONJOB["spec"], "jobTemplate": {"spec": {**job["spec"], **counts}}}  # type: ignore[dict-item]
    return {**_CRONJOB, "metadata": {"name": name}, "spec": spec}


_SLICE = {
    "apiVersion": "discovery.k8s.io/v1",
    "kind": "EndpointSlice",
    "metadata": {"name": "web-1", "labels": {"kubernetes.io/service-name": "web"}},
    "addressType": "IPv4",
    "endpoints": [{"addresses": ["10.0.0.1"]}],
    "ports": [{"port": 80}],
}
SLICES = "/apis/discovery.k8s.io/v1/namespaces/diff/endpointslices"
PDBS = "/apis/policy/v1/namespaces/diff/poddisruptionbudgets"

STEPS: list[Step] = [
    # --- service accounts, endpoints, quotas ------------------------------------------------------------------
    post("serviceaccount create", f"{NS}/serviceaccounts", {"metadata": {"name": "robot"}}),
    get("serviceaccount default", f"{NS}/serviceaccounts/default"),
    post("serviceaccount bad secrets", f"{NS}/serviceaccounts", {"metadata": {"name": "bad"}, "secrets": "x"}),
    post(
        "endpoints create",
        f"{NS}/endpoints",
        {"metadata": {"name": "web"}, "subsets": [{"addresses": [{"ip": "10.0.0.1"}], "ports": [{"port": 80}]}]},
    ),
    post(
        "endpoints without ip",
        f"{NS}/endpoints",
        {"metadata": {"name": "bad"}, "subsets": [{"addresses": [{"hostname": "a"}], "ports": [{"port": 80}]}]},
    ),
    post("endpointslice create", SLICES, _SLICE),
    post("endpointslice without address type", SLICES, {**_SLICE, "metadata": {"name": "bad"}, "addressType": None}),
    patch("endpointslice address type change", f"{SLICES}/web-1", {"addressType": "IPv6"}),
    get("resourcequota list", f"{NS}/resourcequotas"),
    # --- disruption budgets -----------------------------------------------------------------------------------
    post(
        "pdb create",
        PDBS,
        {"metadata": {"name": "b"}, "spec": {"minAvailable": 1, "selector": {"matchLabels": {"a": "b"}}}},
    ),
    post("pdb both bounds", PDBS, {"metadata": {"name": "c"}, "spec": {"minAvailable": 1, "maxUnavailable": 1}}),
    post("pdb any name", PDBS, {"metadata": {"name": "Any_Name"}, "spec": {"maxUnavailable": "0%"}}),
    *(
        post(f"pdb {name}", PDBS, {"metadata": {"name": "bad"}, "spec": spec})
        for name, spec in (
            ("negative", {"minAvailable": -1}),
            ("fraction", {"minAvailable": 1.5}),
            ("beyond int32", {"maxUnavailable": 2**31}),
            ("percent over 100", {"minAvailable": "150%"}),
            ("not a percent", {"maxUnavailable": "3"}),
            ("spec a string", "x"),
            ("selector a string", {"selector": "app=x"}),
            ("label a number", {"selector": {"matchLabels": {"a": 5}}}),
            ("bad label", {"selector": {"matchLabels": {"a b": "c d"}}}),
            ("bad operator", {"selector": {"matchExpressions": [{"key": "a", "operator": "Maybe", "values": ["x"]}]}}),
            ("in without values", {"selector": {"matchExpressions": [{"key": "a", "operator": "In"}]}}),
            ("unhealthy policy", {"minAvailable": 1, "unhealthyPodEvictionPolicy": "Never"}),
            (
                "every cause",
                {
                    "minAvailable": -1,
                    "maxUnavailable": "x%",
                    "selector": {"matchExpressions": [{"key": "", "operator": "Exists", "values": ["c d"]}]},
                },
            ),
        )
    ),
    # an eviction the budget refuses: no disruption controller has processed it (on either side)
    post("pdb guarded pod", f"{NS}/pods", pod("guarded", labels={"tier": "guarded"})),
    patch("pdb guarded pod runs", f"{NS}/pods/guarded/status", {"status": {"phase": "Running"}}),
    post(
        "pdb guarding",
        PDBS,
        {
            "metadata": {"name": "guard"},
            "spec": {"maxUnavailable": 0, "selector": {"matchLabels": {"tier": "guarded"}}},
        },
    ),
    post(
        "pdb eviction refused",
        f"{NS}/pods/guarded/eviction",
        {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "guarded"}},
    ),
    get("pdb pod kept", f"{NS}/pods/guarded"),
    # --- apps/v1 ------------------------------------------------------------------------------------------------
    post("deployment create", f"{APPS}/deployments", _workload("Deployment", "web")),
    post("deployment without selector", f"{APPS}/deployments", {**_workload("Deployment", "bad"), "spec": {}}),
    post(
        "deployment selector mismatch",
        f"{APPS}/deployments",
        _workload("Deployment", "bad", selector={"matchLabels": {"app": "other"}}),
    ),
    post(
        "deployment restart never",
        f"{APPS}/deployments",
        _workload("Deployment", "bad", template={**_TEMPLATE, "spec": {**_TEMPLATE["spec"], "restartPolicy": "Never"}}),
    ),
    patch("deployment selector change", f"{APPS}/deployments/web", {"spec": {"selector": {"matchLabels": {"x": "y"}}}}),
    patch("deployment scale by patch", f"{APPS}/deployments/web", {"spec": {"replicas": 3}}),
    patch("deployment status", f"{APPS}/deployments/web/status", {"status": {"replicas": 3}}),
    get("deployment get", f"{APPS}/deployments/web"),
    post("replicaset create", f"{APPS}/replicasets", _workload("ReplicaSet", "web-1")),
    post("replicaset negative replicas", f"{APPS}/replicasets", _workload("ReplicaSet", "bad", replicas=-1)),
    post("statefulset create", f"{APPS}/statefulsets", _workload("StatefulSet", "db")),
    patch("statefulset forbidden change", f"{APPS}/statefulsets/db", {"spec": {"serviceName": "other"}}),
    post("daemonset create", f"{APPS}/daemonsets", _workload("DaemonSet", "agent")),
    post(
        "controllerrevision create",
        f"{APPS}/controllerrevisions",
        {"metadata": {"name": "agent-1"}, "revision": 1, "data": {"spec": {}}},
    ),
    post("controllerrevision negative", f"{APPS}/controllerrevisions", {"metadata": {"name": "bad"}, "revision": -1}),
    get("apps list", f"{APPS}/deployments"),
    delete("deployment delete", f"{APPS}/deployments/web"),
    # --- cronjobs -------------------------------------------------------------------------------------------------
    post("cronjob create", "/apis/batch/v1/namespaces/diff/cronjobs", _CRONJOB),
    post(
        "cronjob bad schedule",
        "/apis/batch/v1/namespaces/diff/cronjobs",
        {**_CRONJOB, "metadata": {"name": "bad"}, "spec": {**_CRONJOB["spec"], "schedule": "every minute"}},  # type: ignore[dict-item]
    ),
    post(
        "cronjob unsupported concurrency policy",  # in the server's words (cluster serve said 'Sometimes')
        "/apis/batch/v1/namespaces/diff/cronjobs",
        {**_CRONJOB, "metadata": {"name": "bad1"}, "spec": {**_CRONJOB["spec"], "concurrencyPolicy": "Sometimes"}},  # type: ignore[dict-item]
        exact=_cause_words,
    ),
    post(
        "cronjob without template",
        "/apis/batch/v1/namespaces/diff/cronjobs",
        {**_CRONJOB, "metadata": {"name": "bad2"}, "spec": {"schedule": "@hourly"}},
    ),
    *(
        post(f"cronjob {name}", "/apis/batch/v1/namespaces/diff/cronjobs", _cronjob_counts(f"bad{3 + index}", counts))
        for index, (name, counts) in enumerate(
            (
                ("completions beyond int32", {"completions": 2**31}),
                ("completions a string", {"completions": "3"}),
                ("negative counts", {"parallelism": -1, "backoffLimit": -2}),
                ("indexed without completions", {"completionMode": "Indexed"}),
            )
        )
    ),
]
