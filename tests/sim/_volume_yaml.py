"""The storage manifests the simulator's and the served cluster's volume tests share: zoned nodes, two
StorageClasses (one waiting for its first consumer, in zone b only), two claims, and a pod using a claim."""

from __future__ import annotations

NODES = """apiVersion: v1
kind: Node
metadata:
  name: {name}
  labels: {{kubernetes.io/hostname: {name}, topology.kubernetes.io/zone: {zone}}}
status:
  allocatable: {{cpu: "8", memory: 32Gi, pods: "110"}}"""

STORAGE = """apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {name: zonal}
provisioner: csi.example.com
volumeBindingMode: WaitForFirstConsumer
allowedTopologies:
  - matchLabelExpressions: [{key: topology.kubernetes.io/zone, values: [b]}]
---
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {name: eager}
provisioner: csi.example.com
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: data}
spec:
  storageClassName: zonal
  accessModes: [ReadWriteOnce]
  resources: {requests: {storage: 1Gi}}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: never}
spec:
  storageClassName: eager
  accessModes: [ReadWriteOnce]
  resources: {requests: {storage: 1Gi}}"""

POD = """apiVersion: v1
kind: Pod
metadata:
  name: {name}
  annotations:
    pod-complete.stage.kwok.x-k8s.io/delay: "100s"
    kubeflux.io/duration: "100"
    sim.kubeflux.io/submit-time: "{at}"
spec:
  containers:
    - {{name: main, image: app, resources: {{requests: {{cpu: "1", memory: 1Gi}}}}}}
  volumes:
    - {{name: data, persistentVolumeClaim: {{claimName: {claim}}}}}"""
