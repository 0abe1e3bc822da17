"""Pod groups and nodes as YAML, for the simulator tests of gangs (kubeflux's and the baselines')."""

from __future__ import annotations


def nodes_yaml(*shapes: tuple[str, str, str]) -> str:
    """Nodes from (name, cpu, memory)."""
    return "\n---\n".join(
        f"apiVersion: v1\nkind: Node\nmetadata: {{name: {name}, labels: {{kubernetes.io/hostname: {name}}}}}\n"
        f"status: {{allocatable: {{cpu: '{cpu}', memory: {memory}, pods: '110'}}}}"
        for name, cpu, memory in shapes
    )


def group_yaml(name: str, min_member: int, *, submit: float = 0, timeout: int | None = None) -> str:
    extra = f"\n  scheduleTimeoutSeconds: {timeout}" if timeout is not None else ""
    return f"""apiVersion: scheduling.x-k8s.io/v1alpha1
kind: PodGroup
metadata:
  name: {name}
  annotations: {{sim.kubeflux.io/submit-time: "{submit}"}}
spec:
  minMember: {min_member}{extra}"""
