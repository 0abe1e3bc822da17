"""The sequence, part 2: ConfigMaps, Secrets, Events (core and events.k8s.io), Leases, Jobs, PriorityClasses,
dry runs, server-side apply, finalizers, garbage collection and terminating namespaces."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .dsl import NS, configmap, delete, get, gone, patch, pod, post, put
from .runner import Step

CMS = f"{NS}/configmaps"
SECRETS = f"{NS}/secrets"
EVENTS_V1 = "/apis/events.k8s.io/v1/namespaces/diff/events"
LEASES = "/apis/coordination.k8s.io/v1/namespaces/diff/leases"
JOBS = "/apis/batch/v1/namespaces/diff/jobs"
PCS = "/apis/scheduling.k8s.io/v1/priorityclasses"
SCS = "/apis/storage.k8s.io/v1/storageclasses"
PVS = "/api/v1/persistentvolumes"
PVCS = f"{NS}/persistentvolumeclaims"
CSINODES = "/apis/storage.k8s.io/v1/csinodes"
_PV = {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"], "hostPath": {"path": "/mnt/d"}}
_PVC = {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}
RCS = "/apis/resource.k8s.io/v1/namespaces/diff/resourceclaims"
_RC_SPEC = {"devices": {"requests": [{"name": "gpus", "exactly": {"deviceClassName": "diff-gpu"}}]}}
_POD_A = {"resource": "pods", "name": "a", "uid": "uid-a"}
_POD_B = {"resource": "pods", "name": "b", "uid": "uid-b"}


def _allocation(device: str) -> dict[str, Any]:
    result = {"request": "gpus", "driver": "gpu.example.com", "pool": "n1", "device": device}
    term = {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}
    return {"devices": {"results": [result]}, "nodeSelector": {"nodeSelectorTerms": [term]}}


_ALLOC = _allocation("gpu-0")
_ALLOC_OTHER = _allocation("gpu-1")
_EXIT_42 = {"action": "FailJob", "onExitCodes": {"containerName": "main", "operator": "In", "values": [42]}}
_IGNORE_DISRUPTION = {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]}
POD_FAILURE_POLICIES: list[tuple[str, list[Any] | str | int, dict[str, Any]]] = [
    ("accepted", [_IGNORE_DISRUPTION, _EXIT_42], {}),
    ("no action", [{"onExitCodes": {"operator": "In", "values": [42]}}], {}),
    ("unknown action", [{**_EXIT_42, "action": "Restart"}], {}),
    ("fail index without a limit per index", [{**_EXIT_42, "action": "FailIndex"}], {}),
    ("both requirements", [{**_IGNORE_DISRUPTION, "onExitCodes": _EXIT_42["onExitCodes"]}], {}),
    ("no requirement", [{"action": "Ignore"}], {}),
    ("unknown operator", [{"action": "Count", "onExitCodes": {"operator": "Is", "values": [42]}}], {}),
    (
        "unknown container",
        [{"action": "Count", "onExitCodes": {"containerName": "x", "operator": "In", "values": [1]}}],
        {},
    ),
    ("no values", [{"action": "Count", "onExitCodes": {"operator": "In", "values": []}}], {}),
    ("zero in values", [{"action": "Count", "onExitCodes": {"operator": "In", "values": [0, 3]}}], {}),
    ("values repeated unordered", [{"action": "Count", "onExitCodes": {"operator": "NotIn", "values": [5, 3, 3]}}], {}),
    ("bad condition", [{"action": "Ignore", "onPodConditions": [{"type": "Bad Type!", "status": "Maybe"}]}], {}),
    ("too many rules", [_IGNORE_DISRUPTION] * 21, {}),
    ("value a string", [{"action": "Count", "onExitCodes": {"operator": "In", "values": ["x"]}}], {}),
    ("rules a string", "x", {}),
    ("rules a number", 7, {}),
    ("restart on failure", [_IGNORE_DISRUPTION], {"restartPolicy": "OnFailure"}),
    ("replacement policy", [_IGNORE_DISRUPTION], {"podReplacementPolicy": "TerminatingOrFailed"}),
]
"""(step name, ``podFailurePolicy.rules``, the Job's other fields): one Job each, refused in the real server's words
(:data:`~tests.realkube.test_apiserver_differential.SAME_WORDS`) but the first."""


def _failure_policy_job(
    name: str, rules: list[Any] | str | int, restartPolicy: str = "Never", **spec: Any
) -> dict[str, Any]:
    template = {"spec": {**_JOB["spec"]["template"]["spec"], "restartPolicy": restartPolicy}}  # type: ignore[index]
    return {
        **_JOB,
        "metadata": {"name": name},
        "spec": {**spec, "podFailurePolicy": {"rules": rules}, "template": template},
    }


_JOB = {
    "apiVersion": "batch/v1",
    "kind": "Job",
    "metadata": {"name": "j1"},
    "spec": {
        "template": {
            "spec": {
                "restartPolicy": "Never",
                "automountServiceAccountToken": False,
                "containers": [{"name": "main", "image": "busybox:1.36", "command": ["true"]}],
            }
        }
    },
}
_EVENT_V1 = {
    "apiVersion": "events.k8s.io/v1",
    "kind": "Event",
    "metadata": {"name": "ev2"},
    "eventTime": "2026-01-01T00:00:00.000000Z",
    "reportingController": "example.com/differential",
    "reportingInstance": "differential-1",
    "action": "Testing",
    "reason": "Tested",
    "type": "Normal",
    "note": "a note",
    "regarding": {"kind": "Pod", "namespace": "diff", "name": "p2", "apiVersion": "v1"},
}
_APPLIED = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: applied\n  labels:\n    by: apply\ndata:\n  a: '1'\n"


def _owned(name: str, owner: str, **ref: object) -> dict[str, object]:
    reference = {"apiVersion": "v1", "kind": "ConfigMap", "name": owner, "uid": f"${owner}_uid", **ref}
    return configmap(name, ownerReferences=[reference])


def _admission_sees(name: str, pc: str, holds: Callable[[dict[str, Any]], bool]) -> Step:
    """A dry-run pod naming PriorityClass ``pc``, repeated until its admitted spec ``holds``: the real server's
    Priority admission reads the classes through an informer, which may lag a write by a moment (cluster serve's
    does not), so the next step waits for it."""

    def seen(code: int, body: Any) -> bool:
        return code == 201 and isinstance(body, dict) and holds(body.get("spec") or {})

    probe = pod(f"probe-{pc}", priorityClassName=pc)
    return post(f"priority admission sees {name}", f"{NS}/pods?dryRun=All", probe, until=seen)


STEPS: list[Step] = [
    # --- configmaps ------------------------------------------------------------------------------------------
    post("configmap create", CMS, configmap("cm1", {"k": "v"}, labels={"kind": "cm"})),
    post("configmap bad key", CMS, configmap("badkey", {"bad key!": "v"})),
    post("configmap non-string value", CMS, configmap("badvalue", {"k": 1})),  # type: ignore[dict-item]
    post("configmap null value", CMS, configmap("nullvalue", {"k": None, "j": "v"})),  # type: ignore[dict-item]
    get("configmap null value stored", f"{CMS}/nullvalue"),
    post("configmap binary data", CMS, {**configmap("bin"), "binaryData": {"b": "aGVsbG8="}}),
    post("configmap immutable", CMS, {**configmap("frozen"), "immutable": True}),
    patch("configmap immutable change", f"{CMS}/frozen", {"data": {"a": "2"}}),
    get("configmap get", f"{CMS}/cm1", save={"cm1_rv": "metadata.resourceVersion"}),
    put("configmap update", f"{CMS}/cm1", configmap("cm1", {"k": "w"}, resourceVersion="$cm1_rv")),
    put("configmap update stale", f"{CMS}/cm1", configmap("cm1", {"k": "x"}, resourceVersion="$cm1_rv")),
    patch("configmap strategic patch", f"{CMS}/cm1", {"data": {"k2": "v2"}}, "strategic"),
    get("configmap list by label", f"{CMS}?labelSelector=kind%3Dcm"),
    get("configmap list by name", f"{CMS}?fieldSelector=metadata.name%3Dcm1"),
    get("configmap list bad field", f"{CMS}?fieldSelector=data.k%3Dv"),
    get("configmap list bad label selector", f"{CMS}?labelSelector=a%3D%3D%3Db"),
    delete("configmap delete", f"{CMS}/bin"),
    # --- dry runs ------------------------------------------------------------------------------------------------
    post("dry run create", f"{CMS}?dryRun=All", configmap("dry")),
    get("dry run not stored", f"{CMS}/dry"),
    post("dry run invalid", f"{CMS}?dryRun=All", configmap("dry", {"bad key!": "v"})),
    patch("dry run patch", f"{CMS}/cm1?dryRun=All", {"data": {"k": "dry"}}),
    delete("dry run delete", f"{CMS}/cm1?dryRun=All"),
    get("dry run delete kept", f"{CMS}/cm1"),
    post("dry run unknown value", f"{CMS}?dryRun=Some", configmap("dry")),
    post("dry run pod", f"{NS}/pods?dryRun=All", pod("drypod")),
    # --- server-side apply ------------------------------------------------------------------------------------
    patch("apply create", f"{CMS}/applied?fieldManager=differential", _APPLIED, "apply"),
    patch("apply again", f"{CMS}/applied?fieldManager=differential", _APPLIED, "apply"),
    patch("apply without manager", f"{CMS}/applied", _APPLIED, "apply"),
    patch("update by another manager", f"{CMS}/applied?fieldManager=other", {"data": {"a": "2"}}),
    patch("apply conflict", f"{CMS}/applied?fieldManager=differential", _APPLIED, "apply"),
    patch("apply force", f"{CMS}/applied?fieldManager=differential&force=true", _APPLIED, "apply"),
    patch(
        "apply invalid",
        f"{CMS}/applied?fieldManager=differential",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: applied\ndata:\n  'bad key!': x\n",
        "apply",
    ),
    patch("apply wrong name", f"{CMS}/other?fieldManager=differential", _APPLIED, "apply"),
    patch("apply not yaml", f"{CMS}/applied?fieldManager=differential", "{{{", "apply"),
    patch(
        "apply pod",
        f"{NS}/pods/applied?fieldManager=differential",
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: applied\nspec:\n  automountServiceAccountToken: false\n"
        "  containers:\n  - name: main\n    image: busybox:1.36\n",
        "apply",
    ),
    # --- secrets -------------------------------------------------------------------------------------------------
    post(
        "secret create", SECRETS, {"metadata": {"name": "s1"}, "stringData": {"user": "admin"}, "data": {"p": "cHc="}}
    ),
    post("secret bad base64", SECRETS, {"metadata": {"name": "s2"}, "data": {"p": "not base64!"}}),
    post("secret bad key", SECRETS, {"metadata": {"name": "s3"}, "data": {"bad key": "cHc="}}),
    post("secret null values", SECRETS, {"metadata": {"name": "s5"}, "data": {"p": None}, "stringData": {"u": None}}),
    get("secret null values stored", f"{SECRETS}/s5"),
    post("secret typed", SECRETS, {"metadata": {"name": "s4"}, "type": "kubernetes.io/basic-auth", "data": {}}),
    get("secret get", f"{SECRETS}/s1"),
    patch("secret patch", f"{SECRETS}/s1", {"stringData": {"extra": "x"}}),
    patch("secret type change", f"{SECRETS}/s1", {"type": "kubernetes.io/tls"}),
    get("secret list", SECRETS),
    delete("secret delete", f"{SECRETS}/s1"),
    # --- events ----------------------------------------------------------------------------------------------------
    post(
        "event core create",
        f"{NS}/events",
        {
            "metadata": {"name": "ev1"},
            "involvedObject": {"kind": "Pod", "namespace": "diff", "name": "p2"},
            "reason": "Tested",
            "message": "hello",
            "type": "Normal",
            "source": {"component": "differential"},
            "count": 1,
        },
    ),
    post(
        "event core bad namespace", f"{NS}/events", {"metadata": {"name": "ev0"}, "involvedObject": {"namespace": "x"}}
    ),
    post("event v1 create", EVENTS_V1, _EVENT_V1),
    post("event v1 without eventTime", EVENTS_V1, {**_EVENT_V1, "metadata": {"name": "ev3"}, "eventTime": None}),
    post(
        "event v1 without controller", EVENTS_V1, {**_EVENT_V1, "metadata": {"name": "ev4"}, "reportingController": ""}
    ),
    get("event core as v1", f"{EVENTS_V1}/ev1"),
    get("event v1 as core", f"{NS}/events/ev2"),
    get("event v1 by regarding", f"{EVENTS_V1}?fieldSelector=regarding.name%3Dp2"),
    get("event core by involvedObject", f"{NS}/events?fieldSelector=involvedObject.name%3Dp2"),
    patch("event v1 patch note", f"{EVENTS_V1}/ev2", {"note": "changed"}),
    delete("event core delete", f"{NS}/events/ev1"),
    delete("event v1 delete", f"{EVENTS_V1}/ev2"),
    # --- leases ------------------------------------------------------------------------------------------------------
    post(
        "lease create",
        LEASES,
        {"metadata": {"name": "l1"}, "spec": {"holderIdentity": "me", "leaseDurationSeconds": 15}},
        save={"lease_rv": "metadata.resourceVersion"},
    ),
    post("lease bad duration", LEASES, {"metadata": {"name": "l2"}, "spec": {"leaseDurationSeconds": 0}}),
    put(
        "lease renew",
        f"{LEASES}/l1",
        {
            "metadata": {"name": "l1", "resourceVersion": "$lease_rv"},
            "spec": {"holderIdentity": "me", "leaseDurationSeconds": 15, "renewTime": "2026-01-01T00:00:00.000000Z"},
        },
    ),
    put(
        "lease take over stale",
        f"{LEASES}/l1",
        {"metadata": {"name": "l1", "resourceVersion": "$lease_rv"}, "spec": {"holderIdentity": "you"}},
    ),
    delete("lease delete", f"{LEASES}/l1"),
    # --- jobs ---------------------------------------------------------------------------------------------------------
    post("job create", JOBS, _JOB, save={"j1_uid": "metadata.uid"}),
    post("job bad restart policy", JOBS, {**_JOB, "metadata": {"name": "j2"}, "spec": {"template": pod("x")}}),
    *(  # Always: a required value, as a missing one (defaulted to Always); unknown: the pod's rule and the Job's
        post(f"job restart policy {policy}", JOBS, {**_JOB, "metadata": {"name": "j2"}, "spec": {"template": template}})
        for policy in ("Always", "Sometimes")
        for template in [{"spec": {**_JOB["spec"]["template"]["spec"], "restartPolicy": policy}}]  # type: ignore[index]
    ),
    *(  # a template's gates are a pod's (checked as on a pod; a node name beside them is only a pod's refusal)
        post(f"job gated template {name}", JOBS, {**_JOB, "metadata": {"name": f"jg{i}"}, "spec": {"template": t}})
        for i, (name, gates) in enumerate((("kept", ["a"]), ("twice", ["a", "a"]), ("bad name", ["bad gate!"])))
        for t in [{"spec": {**_JOB["spec"]["template"]["spec"], "schedulingGates": [{"name": g} for g in gates]}}]  # type: ignore[index]
    ),
    post(
        "job negative completions",
        JOBS,
        {**_JOB, "metadata": {"name": "j3"}, "spec": {**_JOB["spec"], "completions": -1}},
    ),  # type: ignore[dict-item]
    *(
        post(f"job {name}", JOBS, {**_JOB, "metadata": {"name": job_name}, "spec": {**_JOB["spec"], **spec}})
        for name, job_name, spec in (
            ("zero completions", "j4", {"completions": 0}),
            ("zero parallelism", "j5", {"parallelism": 0}),
            ("completions beyond int32", "j6", {"completions": 2**31}),
            ("completions a fraction", "j6", {"completions": 1.5}),
            ("completions a string", "j6", {"completions": "3"}),
            ("indexed without counts", "j7", {"completionMode": "Indexed"}),
            ("indexed without completions", "j8", {"completionMode": "Indexed", "parallelism": 2}),
            (
                "indexed parallelism beyond 100000",
                "j8",
                {"completionMode": "Indexed", "completions": 200000, "parallelism": 100001},
            ),
            ("indexed a million completions", "j9", {"completionMode": "Indexed", "completions": 1000000}),
            ("indexed hostname beyond a dns label", "a" * 60, {"completionMode": "Indexed", "completions": 10000}),
            ("unknown completion mode", "j10", {"completionMode": "Sometimes"}),
        )
    ),
    *(
        post(f"job pod failure policy {name}", JOBS, _failure_policy_job(f"pf{index}", rules, **spec))
        for index, (name, rules, spec) in enumerate(POD_FAILURE_POLICIES)
    ),
    get("job get", f"{JOBS}/j1"),
    patch(
        "job change template",
        f"{JOBS}/j1",
        {"spec": {"template": {"spec": {"containers": [{"name": "main", "image": "x"}]}}}},
        "strategic",
    ),
    patch("job suspend", f"{JOBS}/j1", {"spec": {"suspend": True}}),
    # How Kueue injects a flavor: a Job created suspended, never started, may change its template's scheduling
    # directives (JobMutableNodeSchedulingDirectives); cluster serve's Kueue relies on it.
    post(
        "job create suspended",
        JOBS,
        {**_JOB, "metadata": {"name": "held"}, "spec": {**_JOB["spec"], "suspend": True}},  # type: ignore[dict-item]
    ),
    patch(
        "job suspended gets a node selector",
        f"{JOBS}/held",
        {"spec": {"template": {"spec": {"nodeSelector": {"instance-type": "spot"}}}}},
        "strategic",
    ),
    patch(
        "job suspended template image",
        f"{JOBS}/held",
        {"spec": {"template": {"spec": {"containers": [{"name": "main", "image": "x"}]}}}},
        "strategic",
    ),
    patch("job status", f"{JOBS}/j1/status", {"status": {"active": 1}}),
    post(
        "job dependent pod",
        f"{NS}/pods",
        {
            **pod("j1-pod"),
            "metadata": {
                "name": "j1-pod",
                "ownerReferences": [
                    {"apiVersion": "batch/v1", "kind": "Job", "name": "j1", "uid": "$j1_uid", "controller": True}
                ],
            },
        },
    ),
    delete("job delete default policy", f"{JOBS}/j1"),
    gone("job gone", f"{JOBS}/j1"),
    get("job pod orphaned", f"{NS}/pods/j1-pod"),
    post("job k2 create", JOBS, {**_JOB, "metadata": {"name": "j4"}}),
    delete("job delete background", f"{JOBS}/j4?propagationPolicy=Background"),
    # --- storage: what the volume filters read (no PV controller on either side) ------------------------------
    post(
        "storageclass wait",
        SCS,
        {
            "metadata": {"name": "diff-wffc"},
            "provisioner": "csi.example.com",
            "volumeBindingMode": "WaitForFirstConsumer",
        },
    ),
    post("storageclass defaults", SCS, {"metadata": {"name": "diff-plain"}, "provisioner": "csi.example.com"}),
    post("storageclass no provisioner", SCS, {"metadata": {"name": "diff-none"}}),
    patch("storageclass change mode", f"{SCS}/diff-plain", {"volumeBindingMode": "WaitForFirstConsumer"}),
    post("pv create", PVS, {"metadata": {"name": "diff-pv"}, "spec": {**_PV, "storageClassName": "diff-wffc"}}),
    post(
        "pv no source",
        PVS,
        {"metadata": {"name": "diff-pv-bad"}, "spec": {"capacity": _PV["capacity"], "accessModes": ["ReadWriteOnce"]}},
    ),
    post("pv no capacity", PVS, {"metadata": {"name": "diff-pv-bad"}, "spec": {**_PV, "capacity": None}}),
    get("pv read", f"{PVS}/diff-pv"),
    post("pvc create", PVCS, {"metadata": {"name": "c1"}, "spec": {**_PVC, "storageClassName": "diff-wffc"}}),
    post("pvc no access modes", PVCS, {"metadata": {"name": "c2"}, "spec": {**_PVC, "accessModes": []}}),
    post("pvc no storage", PVCS, {"metadata": {"name": "c3"}, "spec": {**_PVC, "resources": {}}}),
    post(
        "pvc read write once pod with others",
        PVCS,
        {"metadata": {"name": "c4"}, "spec": {**_PVC, "accessModes": ["ReadWriteOncePod", "ReadWriteOnce"]}},
    ),
    patch(
        "pvc selected node", f"{PVCS}/c1", {"metadata": {"annotations": {"volume.kubernetes.io/selected-node": "n"}}}
    ),
    patch("pvc change access modes", f"{PVCS}/c1", {"spec": {"accessModes": ["ReadWriteMany"]}}),
    get("pvc read", f"{PVCS}/c1"),
    post(
        "csinode create",
        CSINODES,
        {
            "metadata": {"name": "diff-node"},
            "spec": {"drivers": [{"name": "csi.example.com", "nodeID": "n1", "allocatable": {"count": 3}}]},
        },
    ),
    post(
        "csinode negative count",
        CSINODES,
        {
            "metadata": {"name": "diff-node-2"},
            "spec": {"drivers": [{"name": "csi.example.com", "nodeID": "n1", "allocatable": {"count": -1}}]},
        },
    ),
    # --- a ResourceClaim's status, as schedulers write it (rev34x finding 8) ---------------------------------------
    post("resourceclaim create", RCS, {"metadata": {"name": "rc1"}, "spec": _RC_SPEC}),
    patch("resourceclaim reserved without allocation", f"{RCS}/rc1/status", {"status": {"reservedFor": [_POD_A]}}),
    patch("resourceclaim allocate", f"{RCS}/rc1/status", {"status": {"allocation": _ALLOC, "reservedFor": [_POD_A]}}),
    patch("resourceclaim reserved twice", f"{RCS}/rc1/status", {"status": {"reservedFor": [_POD_A, _POD_A]}}),
    patch("resourceclaim another allocation", f"{RCS}/rc1/status", {"status": {"allocation": _ALLOC_OTHER}}),
    patch("resourceclaim reserved for two", f"{RCS}/rc1/status", {"status": {"reservedFor": [_POD_A, _POD_B]}}),
    patch("resourceclaim deallocate", f"{RCS}/rc1/status", {"status": {"allocation": None, "reservedFor": None}}),
    # --- priority classes ---------------------------------------------------------------------------------------------
    post("priorityclass create", PCS, {"metadata": {"name": "diff-high"}, "value": 1000, "description": "d"}),
    post("priorityclass too high", PCS, {"metadata": {"name": "diff-huge"}, "value": 2_000_000_000}),
    post("priorityclass no value", PCS, {"metadata": {"name": "diff-none"}}),
    patch("priorityclass change value", f"{PCS}/diff-high", {"value": 5}),
    get("priorityclass system", f"{PCS}/system-node-critical"),
    _admission_sees("class value", "diff-high", lambda spec: spec.get("priority") == 1000),
    post("pod with priority class", f"{NS}/pods", pod("prioritised", priorityClassName="diff-high")),
    post("priorityclass never", PCS, {"metadata": {"name": "diff-polite"}, "value": 50, "preemptionPolicy": "Never"}),
    _admission_sees("class never", "diff-polite", lambda spec: spec.get("preemptionPolicy") == "Never"),
    post("pod with a class that never preempts", f"{NS}/pods", pod("polite", priorityClassName="diff-polite")),
    post("pod priority not its class's", f"{NS}/pods", pod("mismatch", priorityClassName="diff-high", priority=7)),
    post(
        "pod policy not its class's",
        f"{NS}/pods",
        pod("pushy", priorityClassName="diff-polite", preemptionPolicy="PreemptLowerPriority"),
    ),
    post("pod never without a class", f"{NS}/pods", pod("never", preemptionPolicy="Never")),
    post(
        "priorityclass global default", PCS, {"metadata": {"name": "diff-default"}, "value": 3, "globalDefault": True}
    ),
    post(  # the real admission knows the default once its informer has it: wait until a second is refused
        "priorityclass default known",
        f"{PCS}?dryRun=All",
        {"metadata": {"name": "diff-probe"}, "value": 4, "globalDefault": True},
        until=lambda code, body: code == 403,
    ),
    post(
        "priorityclass second global default",
        PCS,
        {"metadata": {"name": "diff-default-2"}, "value": 4, "globalDefault": True},
    ),
    post("pod gets the global default", f"{NS}/pods", pod("defaulted")),
    get("pod with the global default", f"{NS}/pods/defaulted"),
    delete("priorityclass global default delete", f"{PCS}/diff-default"),
    *(
        post(f"priorityclass {name}", PCS, {"metadata": {"name": "diff-bad"}, "value": 5, **fields})
        for name, fields in (
            ("value a string", {"value": "5"}),
            ("value beyond int32", {"value": 2**31}),
            ("global default a string", {"globalDefault": "yes"}),
            ("unknown policy", {"preemptionPolicy": "Sometimes"}),
            ("empty policy", {"preemptionPolicy": ""}),
            ("system name", {"metadata": {"name": "system-diff"}}),
            ("system value", {"metadata": {"name": "system-node-critical"}}),
            (
                "bad name and policy",
                {"metadata": {"name": "Diff_Bad"}, "value": 2_000_000_000, "preemptionPolicy": "x"},
            ),
        )
    ),
    delete("priorityclass never delete", f"{PCS}/diff-polite"),
    delete("priorityclass delete", f"{PCS}/diff-high"),
    # --- finalizers ---------------------------------------------------------------------------------------------------
    post("finalized create", CMS, configmap("held", finalizers=["example.com/hold"])),
    delete("finalized delete", f"{CMS}/held"),
    get("finalized terminating", f"{CMS}/held"),
    patch(
        "finalizer added while deleting",
        f"{CMS}/held",
        {"metadata": {"finalizers": ["example.com/hold", "example.com/more"]}},
    ),
    put("finalized update data", f"{CMS}/held", configmap("held", {"b": "2"}, finalizers=["example.com/hold"])),
    patch("finalizer removed", f"{CMS}/held", {"metadata": {"finalizers": None}}),
    get("finalized gone", f"{CMS}/held"),
    # --- garbage collection -------------------------------------------------------------------------------------------
    post("owner orphan create", CMS, configmap("owner1"), save={"owner1_uid": "metadata.uid"}),
    post("dependent orphan create", CMS, _owned("dep1", "owner1")),
    delete("owner delete orphan", f"{CMS}/owner1", {"propagationPolicy": "Orphan"}),
    gone("owner orphan gone", f"{CMS}/owner1"),
    get("dependent orphaned", f"{CMS}/dep1"),
    post("owner foreground create", CMS, configmap("owner2"), save={"owner2_uid": "metadata.uid"}),
    post("dependent foreground create", CMS, _owned("dep2", "owner2", blockOwnerDeletion=True)),
    delete("owner delete foreground", f"{CMS}/owner2?propagationPolicy=Foreground"),
    gone("dependent foreground gone", f"{CMS}/dep2"),
    gone("owner foreground gone", f"{CMS}/owner2"),
    post("owner background create", CMS, configmap("owner3"), save={"owner3_uid": "metadata.uid"}),
    post("dependent background create", CMS, _owned("dep3", "owner3")),
    delete("owner delete background", f"{CMS}/owner3?propagationPolicy=Background"),
    gone("dependent background gone", f"{CMS}/dep3"),
    delete("owner delete orphanDependents", f"{CMS}/dep1", {"orphanDependents": True}),
    # --- terminating namespaces ---------------------------------------------------------------------------------------
    post("term namespace create", "/api/v1/namespaces", {"metadata": {"name": "diff-term"}}),
    post(
        "term held create", "/api/v1/namespaces/diff-term/configmaps", configmap("held", finalizers=["example.com/h"])
    ),
    post("term plain create", "/api/v1/namespaces/diff-term/configmaps", configmap("plain")),
    delete("term namespace delete", "/api/v1/namespaces/diff-term"),
    post("create in terminating namespace", "/api/v1/namespaces/diff-term/configmaps", configmap("late")),
    get("term namespace terminating", "/api/v1/namespaces/diff-term"),
    gone("term plain deleted", "/api/v1/namespaces/diff-term/configmaps/plain"),
    patch("term held released", "/api/v1/namespaces/diff-term/configmaps/held", {"metadata": {"finalizers": None}}),
    gone("term namespace gone", "/api/v1/namespaces/diff-term"),
]
