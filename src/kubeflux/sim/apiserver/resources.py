"""The resources kubeflux serves (see :mod:`kubeflux.sim.apiserver.registry`): one :class:`ResourceType` each,
with its strategy from the modules by concern (:mod:`.core_strategies`, :mod:`.batch_strategies`,
:mod:`.apps_strategies`, :mod:`.cluster_strategies`, :mod:`.event_strategies`, :mod:`.data_strategies`,
:mod:`.kueue_resources`)."""

from __future__ import annotations

from kubeflux.sim.apiserver.apps_strategies import (
    ControllerRevisionStrategy,
    daemonset_strategy,
    deployment_strategy,
    replicaset_strategy,
    statefulset_strategy,
)
from kubeflux.sim.apiserver.authentication import authentication_resources
from kubeflux.sim.apiserver.authorization import review_resources
from kubeflux.sim.apiserver.batch_strategies import CronJobStrategy, JobStrategy, PodGroupStrategy, WorkloadStrategy
from kubeflux.sim.apiserver.cluster_strategies import (
    EndpointSliceStrategy,
    EndpointsStrategy,
    LeaseStrategy,
    PodDisruptionBudgetStrategy,
    PriorityClassStrategy,
    ServiceAccountStrategy,
)
from kubeflux.sim.apiserver.core_strategies import NamespaceStrategy, NodeStrategy, PodStrategy
from kubeflux.sim.apiserver.data_strategies import ConfigMapStrategy, SecretStrategy
from kubeflux.sim.apiserver.event_strategies import (
    EventStrategy,
    EventsV1Strategy,
    core_event_from_v1,
    event_v1_from_core,
)
from kubeflux.sim.apiserver.kueue_resources import kueue_resources
from kubeflux.sim.apiserver.quota_strategy import ResourceQuotaStrategy
from kubeflux.sim.apiserver.registry import Registry, ResourceType, Strategy
from kubeflux.sim.apiserver.resource_strategies import resource_types
from kubeflux.sim.apiserver.storage_strategies import (
    CSINodeStrategy,
    PersistentVolumeClaimStrategy,
    PersistentVolumeStrategy,
    StorageClassStrategy,
)

__all__ = ["EMPTY_COLLECTIONS", "FEATURE_GATES", "default_registry"]


EMPTY_COLLECTIONS: tuple[tuple[str, str, str, str, bool, tuple[str, ...], tuple[str, ...]], ...] = (
    ("", "v1", "services", "Service", True, ("svc",), ("all",)),
    ("", "v1", "replicationcontrollers", "ReplicationController", True, ("rc",), ("all",)),
    ("storage.k8s.io", "v1", "csidrivers", "CSIDriver", False, (), ()),
    ("storage.k8s.io", "v1", "csistoragecapacities", "CSIStorageCapacity", True, (), ()),
    ("storage.k8s.io", "v1", "volumeattachments", "VolumeAttachment", False, (), ()),
    ("resource.k8s.io", "v1", "resourceclaims", "ResourceClaim", True, (), ()),
    ("resource.k8s.io", "v1", "resourceslices", "ResourceSlice", False, (), ()),
    ("resource.k8s.io", "v1", "deviceclasses", "DeviceClass", False, (), ()),
    ("resource.k8s.io", "v1", "resourceclaimtemplates", "ResourceClaimTemplate", True, (), ()),
    ("storage.k8s.io", "v1", "volumeattributesclasses", "VolumeAttributesClass", False, ("vac",), ()),
    ("autoscaling", "v2", "horizontalpodautoscalers", "HorizontalPodAutoscaler", True, ("hpa",), ("all",)),
    ("certificates.k8s.io", "v1", "certificatesigningrequests", "CertificateSigningRequest", False, ("csr",), ()),
    ("rbac.authorization.k8s.io", "v1", "clusterroles", "ClusterRole", False, (), ()),
    ("networking.k8s.io", "v1", "ipaddresses", "IPAddress", False, ("ip",), ()),
    ("networking.k8s.io", "v1", "servicecidrs", "ServiceCIDR", False, (), ()),
    (
        "admissionregistration.k8s.io",
        "v1",
        "validatingadmissionpolicies",
        "ValidatingAdmissionPolicy",
        False,
        (),
        ("api-extensions",),
    ),
)
"""What kube-scheduler and kube-controller-manager v1.36 watch at their default flags and kubeflux does not model
(no Services, CSI drivers, storage capacities, volume attachments, autoscaling, certificates, RBAC or admission
policies): served so that their informers sync, and empty.

(group, version, plural, kind, namespaced, short names, categories), as the real server's discovery has them."""


FEATURE_GATES = ("GenericWorkload",)
"""The feature gates the served cluster knows (all off by default, as in Kubernetes v1.36)."""


def default_registry(*, generic_workload: bool = False) -> Registry:
    """Every resource the simulated cluster serves; with ``generic_workload`` (the ``GenericWorkload`` gate),
    Kubernetes' own gang API too."""
    events = EventStrategy()
    resources = [
        ResourceType(
            "", "v1", "namespaces", "Namespace", False, NamespaceStrategy(), ("ns",), (), ("finalize", "status")
        ),
        ResourceType("", "v1", "nodes", "Node", False, NodeStrategy(), ("no",), (), ("status",)),
        ResourceType(
            "", "v1", "pods", "Pod", True, PodStrategy(), ("po",), ("all",), ("status", "binding", "eviction", "log")
        ),
        ResourceType("", "v1", "bindings", "Binding", True, create_only=True),
        ResourceType("", "v1", "events", "Event", True, events, ("ev",)),
        ResourceType("", "v1", "configmaps", "ConfigMap", True, ConfigMapStrategy(), ("cm",)),
        ResourceType("", "v1", "secrets", "Secret", True, SecretStrategy()),
        ResourceType(
            "", "v1", "serviceaccounts", "ServiceAccount", True, ServiceAccountStrategy(), ("sa",), (), ("token",)
        ),
        ResourceType(
            "", "v1", "resourcequotas", "ResourceQuota", True, ResourceQuotaStrategy(), ("quota",), (), ("status",)
        ),
        ResourceType("", "v1", "endpoints", "Endpoints", True, EndpointsStrategy(), ("ep",)),
        ResourceType("batch", "v1", "jobs", "Job", True, JobStrategy(), (), ("all",), ("status",)),
        ResourceType("batch", "v1", "cronjobs", "CronJob", True, CronJobStrategy(), ("cj",), ("all",), ("status",)),
        ResourceType("coordination.k8s.io", "v1", "leases", "Lease", True, LeaseStrategy()),
        *_storage_objects(),
        ResourceType(
            "events.k8s.io",
            "v1",
            "events",
            "Event",
            True,
            EventsV1Strategy(),
            ("ev",),
            (),
            (),
            storage="/events",
            to_view=event_v1_from_core,
            from_view=core_event_from_v1,
        ),
        ResourceType(
            "scheduling.k8s.io", "v1", "priorityclasses", "PriorityClass", False, PriorityClassStrategy(), ("pc",)
        ),
        ResourceType(
            "scheduling.x-k8s.io",
            "v1alpha1",
            "podgroups",
            "PodGroup",
            True,
            PodGroupStrategy(),
            ("pg", "pgs"),
            (),
            ("status",),
        ),
    ]
    if generic_workload:
        # Kubernetes' own gang API as v1.36 serves it with the gate on (kubectl's `podgroup` then means this one, as
        # on a real cluster): pods name their group in spec.schedulingGroup.podGroupName; no status is written here
        resources += [
            ResourceType(
                "scheduling.k8s.io", "v1alpha2", "podgroups", "PodGroup", True, PodGroupStrategy(), (), (), ("status",)
            ),
            ResourceType("scheduling.k8s.io", "v1alpha2", "workloads", "Workload", True, WorkloadStrategy()),
        ]
    resources += _controllers_objects()
    resources += kueue_resources()
    resources += review_resources()
    resources += authentication_resources()
    resources += resource_types()
    served = {(r.group, r.plural) for r in resources}  # an empty collection only where no strategy serves it
    resources.extend(
        ResourceType(group, version, plural, kind, namespaced, Strategy(), short, categories, read_only_empty=True)
        for group, version, plural, kind, namespaced, short, categories in EMPTY_COLLECTIONS
        if (group, plural) not in served
    )
    return Registry(resources)


def _storage_objects() -> list[ResourceType]:
    """What the volume filters read (:mod:`kubeflux.sim.apiserver.storage_strategies`)."""
    status = ("status",)
    return [
        ResourceType(
            "", "v1", "persistentvolumes", "PersistentVolume", False, PersistentVolumeStrategy(), ("pv",), (), status
        ),
        ResourceType(
            "",
            "v1",
            "persistentvolumeclaims",
            "PersistentVolumeClaim",
            True,
            PersistentVolumeClaimStrategy(),
            ("pvc",),
            (),
            status,
        ),
        ResourceType("storage.k8s.io", "v1", "storageclasses", "StorageClass", False, StorageClassStrategy(), ("sc",)),
        ResourceType("storage.k8s.io", "v1", "csinodes", "CSINode", False, CSINodeStrategy()),
    ]


def _controllers_objects() -> list[ResourceType]:
    """What kube-controller-manager's controllers keep (the apps/v1 workloads, PodDisruptionBudgets, EndpointSlices),
    stored for it as the real server stores them."""
    status, scaled = ("status",), ("scale", "status")
    return [
        ResourceType(
            "apps", "v1", "deployments", "Deployment", True, deployment_strategy(), ("deploy",), ("all",), scaled
        ),
        ResourceType("apps", "v1", "replicasets", "ReplicaSet", True, replicaset_strategy(), ("rs",), ("all",), scaled),
        ResourceType(
            "apps", "v1", "statefulsets", "StatefulSet", True, statefulset_strategy(), ("sts",), ("all",), scaled
        ),
        ResourceType("apps", "v1", "daemonsets", "DaemonSet", True, daemonset_strategy(), ("ds",), ("all",), status),
        ResourceType("apps", "v1", "controllerrevisions", "ControllerRevision", True, ControllerRevisionStrategy()),
        ResourceType(
            "policy",
            "v1",
            "poddisruptionbudgets",
            "PodDisruptionBudget",
            True,
            PodDisruptionBudgetStrategy(),
            ("pdb",),
            (),
            status,
        ),
        ResourceType("discovery.k8s.io", "v1", "endpointslices", "EndpointSlice", True, EndpointSliceStrategy()),
    ]
