"""The sequence, part 3: paging, resourceVersion semantics, watch, discovery, tables, OpenAPI, access reviews and
kubectl."""

from __future__ import annotations

from typing import Any

from .dsl import NS, configmap, get, kubectl, post, table
from .runner import Json, Step

CMS = f"{NS}/configmaps"
SERVED = {
    "": {
        "namespaces", "nodes", "pods", "pods/status", "pods/binding", "pods/eviction", "bindings", "events",
        "configmaps", "secrets", "services", "replicationcontrollers", "persistentvolumes", "persistentvolumeclaims",
        "persistentvolumes/status", "persistentvolumeclaims/status", "namespaces/status", "nodes/status",
        "namespaces/finalize", "serviceaccounts", "endpoints", "resourcequotas",
        "resourcequotas/status", "serviceaccounts/token",
    },
    "apps/v1": {
        "replicasets", "statefulsets", "deployments", "daemonsets", "controllerrevisions", "replicasets/status",
        "statefulsets/status", "deployments/status", "daemonsets/status", "deployments/scale", "replicasets/scale",
        "statefulsets/scale",
    },
    "batch/v1": {"jobs", "jobs/status", "cronjobs", "cronjobs/status"},
    "discovery.k8s.io/v1": {"endpointslices"},
    "coordination.k8s.io/v1": {"leases"},
    "events.k8s.io/v1": {"events"},
    "policy/v1": {"poddisruptionbudgets", "poddisruptionbudgets/status"},
    "scheduling.k8s.io/v1": {"priorityclasses"},
    "storage.k8s.io/v1": {"storageclasses", "csinodes", "csidrivers", "csistoragecapacities", "volumeattachments"},
    "authorization.k8s.io/v1": {"selfsubjectaccessreviews", "subjectaccessreviews", "selfsubjectrulesreviews"},
    "authentication.k8s.io/v1": {"selfsubjectreviews", "tokenreviews"},
}  # fmt: skip
"""What ``cluster serve`` serves, by group/version (``""``: core/v1): discovery is compared for these."""


def _resources(group_version: str) -> Any:
    """The discovery entries of the served resources: name → (kind, namespaced, verbs, short names, categories)."""

    def pick(body: Json) -> dict[str, Json]:
        return {
            r["name"]: [r["kind"], r["namespaced"], sorted(r["verbs"]), r.get("shortNames"), r.get("categories")]
            for r in body["resources"]
            if r["name"] in SERVED[group_version]
        }

    return pick


def _groups(body: Json) -> dict[str, Json]:
    return {g["name"]: g["preferredVersion"]["groupVersion"] for g in body["groups"] if f"{g['name']}/v1" in SERVED}


def _aggregated(body: Json) -> dict[str, Json]:
    found: dict[str, Json] = {}
    for group in body.get("items") or ():
        for version in group.get("versions") or ():
            group_version = f"{group['metadata'].get('name', '')}/{version['version']}".lstrip("/")
            key = "" if group_version == "v1" else group_version
            for r in version.get("resources") or ():
                if r["resource"] in SERVED.get(key, ()):
                    found[f"{group_version}/{r['resource']}"] = [r.get("shortNames"), sorted(r.get("verbs") or [])]
    return found


def _columns(body: Json) -> dict[str, Json]:
    return {"columns": [c["name"] for c in body.get("columnDefinitions") or ()], "rows": len(body.get("rows") or ())}


def _openapi_index(body: Json) -> dict[str, Json]:
    wanted = {"api/v1", "apis/batch/v1", "apis/coordination.k8s.io/v1", "apis/events.k8s.io/v1"}
    return {path: path in body["paths"] for path in wanted}


def _schema(name: str, *properties: str) -> Any:
    def pick(body: Json) -> dict[str, Json]:
        schema = body.get("components", {}).get("schemas", {}).get(name) or {}
        return {prop: prop in (schema.get("properties") or {}) for prop in properties}

    return pick


def _first_line(text: Json) -> Json:
    return str(text).splitlines()[0] if str(text).strip() else ""


def _no_items(body: Json) -> Json:
    return {k: v for k, v in body.items() if k != "items"} if isinstance(body, dict) else body


_APPLY_CM = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: kapplied\n  namespace: diff\ndata:\n  a: '1'\n"
_KC1 = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: kc1\n  namespace: diff\ndata:\n  a: b\n"
_PAGE = [post(f"page create {n}", CMS, configmap(f"page-{n}", labels={"page": "yes"})) for n in "abc"]
_REVIEW = {
    "apiVersion": "authorization.k8s.io/v1",
    "kind": "SelfSubjectAccessReview",
    "spec": {"resourceAttributes": {"namespace": "diff", "verb": "create", "resource": "pods"}},
}

STEPS: list[Step] = [
    *_PAGE,
    # --- paging --------------------------------------------------------------------------------------------------
    get("list limit", f"{CMS}?labelSelector=page%3Dyes&limit=2", save={"continue": "metadata.continue"}),
    get("list continue", f"{CMS}?labelSelector=page%3Dyes&limit=2&continue=$continue"),
    get("list bad continue", f"{CMS}?limit=2&continue=garbage"),
    get("list limit zero", f"{CMS}?labelSelector=page%3Dyes&limit=0"),
    get(
        "list all namespaces",
        "/api/v1/configmaps?labelSelector=page%3Dyes",
        save={"list_rv": "metadata.resourceVersion"},
    ),
    # --- resource versions ------------------------------------------------------------------------------------------
    get("list rv 0", f"{CMS}?resourceVersion=0&labelSelector=page%3Dyes"),
    get("list rv exact", f"{CMS}?resourceVersion=$list_rv&resourceVersionMatch=Exact&labelSelector=page%3Dyes"),
    get("list rv not older", f"{CMS}?resourceVersion=$list_rv&resourceVersionMatch=NotOlderThan"),
    get("list match without rv", f"{CMS}?resourceVersionMatch=NotOlderThan"),
    get("list match exact without rv", f"{CMS}?resourceVersionMatch=Exact"),
    get("list match unknown", f"{CMS}?resourceVersion=1&resourceVersionMatch=Sometimes"),
    get("list rv not a number", f"{CMS}?resourceVersion=abc"),
    get("list future rv", f"{CMS}?resourceVersion=99999999"),
    get("get rv 0", f"{CMS}/page-a?resourceVersion=0"),
    # --- watch --------------------------------------------------------------------------------------------------------
    post("watch change", CMS, configmap("watched", labels={"page": "yes"})),
    get("watch from rv", f"{CMS}?watch=1&resourceVersion=$list_rv&timeoutSeconds=1", stream=True),
    get(
        "watch legacy path",
        "/api/v1/watch/namespaces/diff/configmaps?resourceVersion=$list_rv&timeoutSeconds=1",
        stream=True,
    ),
    get(
        "watch by label",
        f"{CMS}?watch=1&labelSelector=page%3Dyes&resourceVersion=$list_rv&timeoutSeconds=1",
        stream=True,
    ),
    get(
        "watch by name",
        f"{CMS}?watch=1&fieldSelector=metadata.name%3Dwatched&resourceVersion=$list_rv&timeoutSeconds=1",
        stream=True,
    ),
    get("watch bad field", f"{CMS}?watch=1&fieldSelector=spec.x%3Dy&timeoutSeconds=1", stream=True),
    get(
        "watch initial events",
        f"{CMS}?watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true"
        "&labelSelector=page%3Dyes&timeoutSeconds=1",
        stream=True,
    ),
    get(
        "watch initial events without bookmarks",
        f"{CMS}?watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&labelSelector=page%3Dyes&timeoutSeconds=1",
        stream=True,
    ),
    get(
        "watch initial events without match",
        f"{CMS}?watch=1&sendInitialEvents=true&allowWatchBookmarks=true&timeoutSeconds=1",
        stream=True,
    ),
    get(
        "watch with bookmarks",
        f"{CMS}?watch=1&allowWatchBookmarks=true&resourceVersion=$list_rv&timeoutSeconds=1",
        stream=True,
    ),
    get("watch future rv", f"{CMS}?watch=1&resourceVersion=99999999&timeoutSeconds=4", stream=True),
    get("watch rv 0", f"{CMS}?watch=1&resourceVersion=0&labelSelector=page%3Dyes&timeoutSeconds=1", stream=True),
    get("watch one object", f"{CMS}/watched?watch=1&timeoutSeconds=1", stream=True),
    # --- discovery ---------------------------------------------------------------------------------------------------
    get("version", "/version", view=lambda b: {k: v for k, v in b.items() if k in ("major", "minor", "gitVersion")}),
    get("discovery api", "/api", exact=lambda b: {"versions": b["versions"]}),
    get("discovery apis", "/apis", view=lambda b: {}, exact=_groups),
    get("discovery core", "/api/v1", view=lambda b: {}, exact=_resources("")),
    *(get(f"discovery {gv}", f"/apis/{gv}", view=lambda b: {}, exact=_resources(gv)) for gv in sorted(SERVED) if gv),
    get("discovery group", "/apis/batch", exact=lambda b: {"preferred": b["preferredVersion"]}),
    get("discovery missing group", "/apis/nope.example.com/v1"),
    get(
        "discovery aggregated core",
        "/api",
        accept="application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json",
        view=lambda b: {},
        exact=_aggregated,
    ),
    get(
        "discovery aggregated apis",
        "/apis",
        accept="application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json",
        view=lambda b: {},
        exact=_aggregated,
    ),
    # --- tables ----------------------------------------------------------------------------------------------------
    table("table pods", f"{NS}/pods", exact=_columns),
    table("table pods with objects", f"{NS}/pods?includeObject=Object", exact=_columns, view=_no_items),
    table("table pods without objects", f"{NS}/pods?includeObject=None", exact=_columns),
    table("table one pod", f"{NS}/pods/p4-missing"),
    table("table pod", f"{NS}/pods/$gen_pod", exact=_columns),
    table("table nodes", "/api/v1/nodes", exact=_columns),
    table("table namespaces", "/api/v1/namespaces?labelSelector=team%3Da", exact=_columns),
    table("table configmaps", CMS, exact=_columns),
    table("table secrets", f"{NS}/secrets", exact=_columns),
    table("table events", f"{NS}/events", exact=_columns),
    table("table events v1", "/apis/events.k8s.io/v1/namespaces/diff/events", exact=_columns),
    table("table jobs", "/apis/batch/v1/namespaces/diff/jobs", exact=_columns),
    table("table leases", "/apis/coordination.k8s.io/v1/namespaces/diff/leases", exact=_columns),
    table("table priority classes", "/apis/scheduling.k8s.io/v1/priorityclasses", exact=_columns),
    table("table services", "/api/v1/namespaces/diff/services", exact=_columns),
    # --- openapi -----------------------------------------------------------------------------------------------------
    get("openapi v3 index", "/openapi/v3", view=lambda b: {}, exact=_openapi_index),
    get(
        "openapi v3 core",
        "/openapi/v3/api/v1",
        view=lambda b: {},
        exact=_schema("io.k8s.api.core.v1.Pod", "apiVersion", "kind", "metadata", "spec", "status"),
    ),
    get(
        "openapi v3 batch",
        "/openapi/v3/apis/batch/v1",
        view=lambda b: {},
        exact=_schema("io.k8s.api.batch.v1.JobSpec", "template", "completions", "parallelism", "backoffLimit"),
    ),
    get("openapi v3 missing", "/openapi/v3/apis/nope.example.com/v1"),
    # --- access reviews -----------------------------------------------------------------------------------------------
    post("access review", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", _REVIEW),
    post("access review invalid", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", {**_REVIEW, "spec": {}}),
    kubectl("kubectl auth can-i", "auth", "can-i", "create", "pods", "-n", "diff"),
    kubectl("kubectl auth can-i subresource", "auth", "can-i", "create", "pods/binding", "-n", "diff"),
    # --- kubectl ------------------------------------------------------------------------------------------------------
    kubectl("kubectl get pods", "get", "pods", "-n", "diff", view=_first_line),
    kubectl("kubectl get pods wide", "get", "pods", "-n", "diff", "-o", "wide", view=_first_line),
    kubectl("kubectl get pod name", "get", "pod", "$gen_pod", "-n", "diff", "-o", "name"),
    kubectl("kubectl get missing", "get", "pod", "nope", "-n", "diff"),
    kubectl("kubectl get sort", "get", "configmaps", "-n", "diff", "-l", "page=yes", "--sort-by=.metadata.name"),
    kubectl(
        "kubectl get sort pods", "get", "pods", "-n", "diff", "--sort-by=.metadata.creationTimestamp", view=_first_line
    ),
    kubectl("kubectl get jsonpath", "get", "configmap", "page-a", "-n", "diff", "-o", "jsonpath={.data.a}"),
    kubectl("kubectl get label columns", "get", "nodes", "-L", "rack", "-l", "rack", view=_first_line),
    kubectl("kubectl get all", "get", "all", "-n", "diff", "-o", "name", view=lambda t: sorted(str(t).split())),
    *(
        kubectl(f"kubectl short name {short}", "get", short, "-n", "diff")
        for short in ("svc", "pvc", "rs", "sts", "pdb", "rc", "cm", "ev", "po", "job", "lease")
    ),
    *(kubectl(f"kubectl short name {short}", "get", short) for short in ("pv", "sc", "no", "pc", "ns")),
    # `kubectl create configmap NAME` and `create namespace NAME` send protobuf (another branch): -f sends JSON
    kubectl("kubectl create configmap", "create", "-f", "-", stdin=_KC1),
    kubectl("kubectl create configmap again", "create", "-f", "-", stdin=_KC1),
    kubectl(
        "kubectl create namespace",
        "create",
        "-f",
        "-",
        stdin="apiVersion: v1\nkind: Namespace\nmetadata:\n  name: diff-kubectl\n",
    ),
    kubectl("kubectl apply create", "apply", "-f", "-", stdin=_APPLY_CM),
    kubectl("kubectl apply unchanged", "apply", "-f", "-", stdin=_APPLY_CM),
    kubectl("kubectl apply configured", "apply", "-f", "-", stdin=_APPLY_CM.replace("'1'", "'2'")),
    kubectl(
        "kubectl apply server side", "apply", "--server-side", "-f", "-", stdin=_APPLY_CM.replace("kapplied", "ssa")
    ),
    kubectl(
        "kubectl apply server side conflict",
        "apply",
        "--server-side",
        "--field-manager=second",
        "-f",
        "-",
        stdin=_APPLY_CM.replace("kapplied", "ssa").replace("'1'", "'3'"),
    ),
    kubectl(
        "kubectl apply pod",
        "apply",
        "-f",
        "-",
        stdin=(
            "apiVersion: v1\nkind: Pod\nmetadata:\n  name: kpod\n  namespace: diff\nspec:\n"
            "  automountServiceAccountToken: false\n  containers:\n  - name: main\n    image: busybox:1.36\n"
        ),
    ),
    kubectl("kubectl apply invalid", "apply", "-f", "-", stdin=_APPLY_CM.replace("a: '1'", "'bad key!': x")),
    kubectl("kubectl label", "label", "configmap", "kc1", "-n", "diff", "color=blue"),
    kubectl("kubectl label exists", "label", "configmap", "kc1", "-n", "diff", "color=red"),
    kubectl("kubectl label overwrite", "label", "configmap", "kc1", "-n", "diff", "color=red", "--overwrite"),
    kubectl("kubectl annotate", "annotate", "configmap", "kc1", "-n", "diff", "note=hi"),
    kubectl(
        "kubectl patch merge", "patch", "configmap", "kc1", "-n", "diff", "--type=merge", "-p", '{"data":{"m":"1"}}'
    ),
    kubectl(
        "kubectl patch json",
        "patch",
        "configmap",
        "kc1",
        "-n",
        "diff",
        "--type=json",
        "-p",
        '[{"op":"add","path":"/data/j","value":"2"}]',
    ),
    kubectl("kubectl patch strategic", "patch", "pod", "kpod", "-n", "diff", "-p", '{"metadata":{"labels":{"s":"1"}}}'),
    kubectl(
        "kubectl patch invalid",
        "patch",
        "configmap",
        "kc1",
        "-n",
        "diff",
        "--type=merge",
        "-p",
        '{"data":{"bad key!":"1"}}',
    ),
    kubectl(
        "kubectl describe pod",
        "describe",
        "pod",
        "kpod",
        "-n",
        "diff",
        view=lambda t: [line.split(":")[0] for line in str(t).splitlines() if line and not line.startswith(" ")],
    ),
    kubectl(
        "kubectl describe node",
        "describe",
        "node",
        "diff-node-a",
        view=lambda t: [line.split(":")[0] for line in str(t).splitlines() if line and not line.startswith(" ")],
    ),
    kubectl("kubectl describe configmap", "describe", "configmap", "kc1", "-n", "diff"),
    kubectl("kubectl explain", "explain", "pods.spec.restartPolicy", view=lambda t: str(t).splitlines()[:3]),
    kubectl("kubectl explain job", "explain", "jobs.spec.backoffLimit", view=lambda t: str(t).splitlines()[:3]),
    kubectl("kubectl wait delete", "wait", "--for=delete", "configmap/page-c", "-n", "diff", "--timeout=1s"),
    kubectl(
        "kubectl wait jsonpath", "wait", "--for=jsonpath={.data.a}=b", "configmap/kc1", "-n", "diff", "--timeout=5s"
    ),
    kubectl(
        "kubectl wait condition", "wait", "--for=condition=PodScheduled", "pod/$gen_pod", "-n", "diff", "--timeout=5s"
    ),
    kubectl("kubectl logs", "logs", "kpod", "-n", "diff"),
    kubectl("kubectl delete configmap", "delete", "configmap", "kc1", "-n", "diff"),
    kubectl("kubectl delete missing", "delete", "configmap", "kc1", "-n", "diff"),
    kubectl("kubectl delete by label", "delete", "configmaps", "-n", "diff", "-l", "page=yes"),
    kubectl("kubectl delete namespace", "delete", "namespace", "diff-kubectl", "--wait=false"),
]
