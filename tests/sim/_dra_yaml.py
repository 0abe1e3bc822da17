"""The Dynamic Resource Allocation manifests the simulator's and the served cluster's DRA tests share: a class of
one driver's GPUs, a template and a claim asking them, a node's slice of GPUs, and pods naming them."""

from __future__ import annotations

import yaml

DEVICES = """apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: gpu.example.com}
spec:
  selectors:
    - cel: {expression: 'device.driver == "gpu.example.com"'}
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: two-big-gpus}
spec:
  spec:
    devices:
      requests:
        - name: gpus
          exactly:
            deviceClassName: gpu.example.com
            count: 2
            selectors:
              - cel: {expression: 'device.capacity["gpu.example.com"].memory.compareTo(quantity("40Gi")) >= 0'}
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: one-gpu}
spec:
  devices:
    requests:
      - name: gpu
        exactly: {deviceClassName: gpu.example.com}
"""

SLICE = """apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {{name: {node}-gpus}}
spec:
  driver: gpu.example.com
  nodeName: {node}
  pool: {{name: {node}, generation: 1, resourceSliceCount: 1}}
  devices:
{devices}"""

DEVICE = """    - name: gpu-{i}
      attributes: {{model: {{string: {model}}}}}
      capacity: {{memory: {{value: {memory}}}}}"""

TRAINER = """apiVersion: v1
kind: Pod
metadata:
  name: trainer-{i}
  annotations:
    pod-complete.stage.kwok.x-k8s.io/delay: "100s"
    kubeflux.io/duration: "100"
spec:
  resourceClaims:
    - name: gpus
      resourceClaimTemplateName: two-big-gpus
  containers:
    - name: main
      image: trainer
      resources:
        requests: {{cpu: "2", memory: 1Gi}}
        claims: [{{name: gpus}}]"""

NOTEBOOK = """apiVersion: v1
kind: Pod
metadata:
  name: notebook
  annotations:
    pod-complete.stage.kwok.x-k8s.io/delay: "50s"
spec:
  resourceClaims:
    - name: gpu
      resourceClaimName: one-gpu
  containers:
    - name: main
      image: notebook
      resources:
        requests: {cpu: "1"}
        claims: [{name: gpu}]"""


def gpu_slice(node: str, count: int, memory: str, model: str) -> str:
    devices = "\n".join(DEVICE.format(i=i, model=model, memory=memory) for i in range(count))
    return SLICE.format(node=node, devices=devices)


def claim_pod(
    name: str, claim: str, *, seconds: int, template: bool = False, group: str = "", at: float = 0.0, cpu: str = "1"
) -> str:
    """A pod running ``seconds`` that asks one CPU and the devices of ``claim`` (a ResourceClaim by name, or a
    ResourceClaimTemplate with ``template``), in pod group ``group`` if given, submitted at ``at``."""
    source = "resourceClaimTemplateName" if template else "resourceClaimName"
    labels = {"scheduling.x-k8s.io/pod-group": group} if group else {}
    annotations = {
        "pod-complete.stage.kwok.x-k8s.io/delay": f"{seconds}s",
        "kubeflux.io/duration": str(seconds),
        "sim.kubeflux.io/submit-time": f"{at:g}",
    }
    container = {"name": "main", "image": "worker", "resources": {"requests": {"cpu": cpu}, "claims": [{"name": "d"}]}}
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": labels, "annotations": annotations},
        "spec": {"resourceClaims": [{"name": "d", source: claim}], "containers": [container]},
    }
    return yaml.safe_dump(pod, sort_keys=False)


def one_gpu_template(name: str) -> str:
    """A ResourceClaimTemplate ``name`` asking one device of class gpu.example.com."""
    request = {"name": "gpus", "exactly": {"deviceClassName": "gpu.example.com"}}
    template = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": name},
        "spec": {"spec": {"devices": {"requests": [request]}}},
    }
    return yaml.safe_dump(template, sort_keys=False)
