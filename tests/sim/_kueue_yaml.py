"""Small Kueue workload files for the tests, written as YAML text: a flavor, ClusterQueues, LocalQueues, and pods,
PodGroups and Jobs labelled with the LocalQueue ``q`` of their namespace."""

from __future__ import annotations

FLAVOR = "apiVersion: kueue.x-k8s.io/v1beta1\nkind: ResourceFlavor\nmetadata: {name: default-flavor}\n"
EVERY_NAMESPACE = "  namespaceSelector: {}\n"


def cluster_queue(
    name: str,
    cpu: int,
    *,
    spec: str = EVERY_NAMESPACE,
    flavor: str = "default-flavor",
    pods: int | None = None,
) -> str:
    """A ClusterQueue of ``cpu`` cores (and ``pods`` pods when given) of one flavor; ``spec``: its other fields."""
    covered = "[cpu]" if pods is None else "[cpu, pods]"
    resources = f"{{name: cpu, nominalQuota: {cpu}}}"
    if pods is not None:
        resources += f", {{name: pods, nominalQuota: {pods}}}"
    return (
        f"apiVersion: kueue.x-k8s.io/v1beta1\nkind: ClusterQueue\nmetadata: {{name: {name}}}\nspec:\n{spec}"
        f"  resourceGroups:\n    - coveredResources: {covered}\n"
        f"      flavors: [{{name: {flavor}, resources: [{resources}]}}]\n"
    )


def local_queue(namespace: str, cq: str) -> str:
    return (
        "apiVersion: kueue.x-k8s.io/v1beta1\nkind: LocalQueue\n"
        f"metadata: {{namespace: {namespace}, name: q}}\nspec: {{clusterQueue: {cq}}}\n"
    )


def pod(
    name: str, cpu: int, at: float, seconds: int, namespace: str = "default", priority: int = 0, group: str = ""
) -> str:
    """A lone pod (or a PodGroup's, ``group``) labelled with the LocalQueue ``q`` of its namespace."""
    labels = "kueue.x-k8s.io/queue-name: q" + (f", scheduling.x-k8s.io/pod-group: {group}" if group else "")
    return (
        f"apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\n  namespace: {namespace}\n  labels: {{{labels}}}\n"
        f"  annotations: {{sim.kubeflux.io/submit-time: '{at}', pod-complete.stage.kwok.x-k8s.io/delay: {seconds}s}}\n"
        f"spec:\n  priority: {priority}\n"
        f"  containers: [{{name: main, image: busybox, resources: {{requests: {{cpu: '{cpu}'}}}}}}]\n"
    )


def pod_group(name: str, members: int, at: float, seconds: int) -> list[str]:
    group = (
        "apiVersion: scheduling.x-k8s.io/v1alpha1\nkind: PodGroup\n"
        f"metadata: {{name: {name}, annotations: {{sim.kubeflux.io/submit-time: '{at}'}}}}\n"
        f"spec: {{minMember: {members}}}\n"
    )
    return [group, *(pod(f"{name}-{i}", 1, at, seconds, group=name) for i in range(members))]


def job(
    name: str,
    namespace: str,
    cpu: int,
    at: float,
    seconds: int,
    completions: int = 1,
    *,
    priority: int = 0,
    parallelism: int = 1,
    pod_spec: str = "",
) -> str:
    """A Job of ``completions`` pods, ``parallelism`` at a time, labelled with the LocalQueue ``q`` of its namespace;
    ``pod_spec``: more fields of its pods' spec (YAML lines indented by 6)."""
    return (
        f"apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: {name}\n  namespace: {namespace}\n"
        f"  labels: {{kueue.x-k8s.io/queue-name: q}}\n  annotations: {{sim.kubeflux.io/submit-time: '{at}'}}\n"
        f"spec:\n  completions: {completions}\n  parallelism: {parallelism}\n  template:\n"
        f"    metadata: {{annotations: {{pod-complete.stage.kwok.x-k8s.io/delay: {seconds}s}}}}\n"
        f"    spec:\n      restartPolicy: Never\n      priority: {priority}\n{pod_spec}"
        f"      containers: [{{name: main, image: busybox, resources: {{requests: {{cpu: '{cpu}'}}}}}}]\n"
    )
