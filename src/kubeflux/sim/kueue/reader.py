"""Reading Kueue's objects from a workload file: ``ResourceFlavor``, ``ClusterQueue`` and ``LocalQueue`` of
``kueue.x-k8s.io/v1beta1``, held to the checks of Kueue's webhooks, and Kueue's own ``Configuration``
(``config.kueue.x-k8s.io/v1beta1``) for its ``waitForPodsReady`` and ``fairSharing``. A ``Cohort`` (hierarchical
cohorts) is refused as not modelled.

Each refusal raises :class:`~kubeflux.apiobjects.manifests.ManifestError` naming the object and the field
(``ClusterQueue team-a: spec.resourceGroups[0].flavors[0].resources[1].name: must be memory (the covered
resources in order), got 'cpu'``); the workload reader reports it with the file and the document, and skips the
object. What Kueue accepts but cannot use (a ClusterQueue naming a flavor no file defines, a LocalQueue naming a
ClusterQueue that does not exist) is no error: the admission layer keeps their workloads waiting, as Kueue keeps
them inactive, and says so.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from kubeflux.apiobjects.manifests import ManifestError, object_reader, read_taints, read_tolerations
from kubeflux.apiobjects.podterms import label_selector
from kubeflux.apiobjects.quantity import QuantityError, canonical_value, parse_quantity
from kubeflux.apiobjects.rules import MAX_INT32, MAX_INT64, dns_label_problem, dns_subdomain_problem
from kubeflux.scheduler.units import DurationError, parse_duration
from kubeflux.sim.kueue.objects import (
    API_VERSION,
    FAIR_SHARING_STRATEGY_LISTS,
    QUEUE_NAME_LABEL,
    ClusterQueue,
    FairSharing,
    FairSharingStrategy,
    KueueObjects,
    LocalQueue,
    QueueingStrategy,
    ReclaimWithinCohort,
    RequeuingTimestamp,
    ResourceFlavor,
    ResourceGroup,
    ResourceQuota,
    WaitForPodsReady,
    WithinClusterQueue,
)

KUEUE_KINDS: Final = ("ResourceFlavor", "ClusterQueue", "LocalQueue", "Configuration", "Cohort")
CONFIG_API_VERSION: Final = "config.kueue.x-k8s.io/v1beta1"
"""The API of Kueue's own ``Configuration`` (the manager's file; a workload file may hold one for its
``waitForPodsReady``)."""
MAX_ITEMS: Final = 16
"""Kueue's bound on resource groups, flavors per group and covered resources per group (the CRD's maxItems)."""


class _Fields:
    """Typed access to one object's fields; every mismatch is a :class:`ManifestError` naming the field."""

    def __init__(self, label: str) -> None:
        self.label = label

    def fail(self, path: str, problem: str) -> ManifestError:
        return ManifestError(self.label, path, problem)

    def mapping(self, path: str, value: Any, required: bool = False) -> Mapping[str, Any]:
        if value is None and not required:
            return {}
        if not isinstance(value, dict):
            raise self.fail(path, "required" if value is None else f"expected a mapping, got {type(value).__name__}")
        return value

    def items(self, path: str, value: Any) -> list[tuple[str, Any]]:
        if value is None:
            return []
        if not isinstance(value, list):
            raise self.fail(path, f"expected a list, got {type(value).__name__}")
        return [(f"{path}[{i}]", item) for i, item in enumerate(value)]

    def text(self, path: str, value: Any, default: str = "") -> str:
        if value is None:
            return default
        if not isinstance(value, str):
            raise self.fail(path, f"expected a string, got {value!r}")
        return value

    def choice(self, path: str, value: Any, choices: tuple[str, ...], default: str) -> str:
        text = self.text(path, value, default)
        if text not in choices:
            raise self.fail(path, f"must be one of {', '.join(choices)}, got {text!r}")
        return text

    def strings(self, path: str, value: Any) -> dict[str, str]:
        given = self.mapping(path, value)
        for key, item in given.items():
            if not isinstance(item, str):
                raise self.fail(f"{path}.{key}", f"expected a string, got {item!r}")
        return {str(k): v for k, v in given.items()}

    def amount(self, path: str, resource: str, value: Any) -> int:
        if isinstance(value, bool) or not isinstance(value, (str, int, float)):
            raise self.fail(path, f"expected a quantity, got {value!r}")
        try:
            amount = canonical_value(resource, value)
        except (QuantityError, ValueError) as exc:
            raise self.fail(path, f"not a quantity: {exc}") from None
        if amount < 0:
            raise self.fail(path, f"must be greater than or equal to 0, got {value!r}")
        if amount > MAX_INT64:
            raise self.fail(path, f"too large: Kueue holds quotas as 64-bit integers, got {value!r}")
        return amount

    def known(self, path: str, given: Mapping[str, Any], fields: tuple[str, ...]) -> None:
        """Refuse a field of ``given`` (at ``path``) that is none of ``fields``, as the API server's strict field
        validation (kubectl's default) refuses an unknown one (a typo)."""
        for key in given:
            if key not in fields:
                raise self.fail(f"{path}.{key}" if path else str(key), "unknown field")


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    meta = obj.get("metadata")
    return meta if isinstance(meta, dict) else {}


def label_of(obj: Mapping[str, Any]) -> str:
    """``Kind name`` (``Kind namespace/name`` for a LocalQueue, ``Configuration`` for Kueue's one configuration),
    as messages name the object."""
    kind, meta = obj.get("kind"), _meta(obj)
    if kind == "Configuration":
        return "Configuration"
    if kind == "LocalQueue":
        return f"LocalQueue {meta.get('namespace') or 'default'}/{meta.get('name')}"
    return f"{kind} {meta.get('name')}"


def _name(fields: _Fields, obj: Mapping[str, Any], dns_label: bool = False) -> str:
    if obj.get("apiVersion") != API_VERSION:
        raise fields.fail("apiVersion", f"expected {API_VERSION!r}, got {obj.get('apiVersion')!r}")
    name = _meta(obj).get("name")
    if not isinstance(name, str) or not name:
        raise fields.fail("metadata.name", "Required value: name or generateName is required")
    problem = dns_label_problem(name) if dns_label else dns_subdomain_problem(name)
    if problem is not None:
        raise fields.fail("metadata.name", f"{name!r}: {problem}")
    return name


TOP_FIELDS: Final = ("apiVersion", "kind", "metadata", "spec", "status")
NOT_MODELLED: Final = "not modelled (the simulator would admit otherwise than Kueue)"


def _not_modelled(fields: _Fields, path: str, value: Any, *, default: tuple[str, ...] = ()) -> None:
    """Refuse a field that changes what Kueue admits and that the simulator does not model, unless it is absent or
    one of ``default`` (what Kueue does without it)."""
    if value is not None and value not in default and value not in ([], {}):
        raise fields.fail(path, f"{NOT_MODELLED}, got {value!r}")


def read_flavor(obj: Mapping[str, Any]) -> ResourceFlavor:
    fields = _Fields(label_of(obj))
    name = _name(fields, obj)
    fields.known("", obj, TOP_FIELDS)
    spec = fields.mapping("spec", obj.get("spec"))
    fields.known("spec", spec, ("nodeLabels", "nodeTaints", "tolerations", "topologyName"))
    _not_modelled(fields, "spec.topologyName", spec.get("topologyName"))
    manifest = object_reader("ResourceFlavor", obj)
    labels = fields.strings("spec.nodeLabels", spec.get("nodeLabels"))
    return ResourceFlavor(name, labels, read_taints(manifest, "spec.nodeTaints"), read_tolerations(manifest))


def _group(fields: _Fields, path: str, item: Any, cohort: str) -> ResourceGroup:
    group = fields.mapping(path, item, required=True)
    fields.known(path, group, ("coveredResources", "flavors"))
    covered = [fields.text(p, v) for p, v in fields.items(f"{path}.coveredResources", group.get("coveredResources"))]
    if not covered or len(covered) > MAX_ITEMS:
        raise fields.fail(f"{path}.coveredResources", f"must list 1 to {MAX_ITEMS} resources, got {len(covered)}")
    flavors: list[tuple[str, dict[str, ResourceQuota]]] = []
    items = fields.items(f"{path}.flavors", group.get("flavors"))
    if not items or len(items) > MAX_ITEMS:
        raise fields.fail(f"{path}.flavors", f"must list 1 to {MAX_ITEMS} flavors, got {len(items)}")
    for where, raw in items:
        flavor = fields.mapping(where, raw, required=True)
        fields.known(where, flavor, ("name", "resources"))
        name = fields.text(f"{where}.name", flavor.get("name"))
        if not name:
            raise fields.fail(f"{where}.name", "required")
        resources = fields.items(f"{where}.resources", flavor.get("resources"))
        if len(resources) != len(covered):
            wanted = f"the {len(covered)} covered resource(s) {covered}"
            raise fields.fail(f"{where}.resources", f"must give {wanted}, got {len(resources)}")
        quotas: dict[str, ResourceQuota] = {}
        for (at, res), expected in zip(resources, covered, strict=True):
            res = fields.mapping(at, res, required=True)
            fields.known(at, res, ("name", "nominalQuota", "borrowingLimit", "lendingLimit"))
            resource = fields.text(f"{at}.name", res.get("name"))
            if resource != expected:
                wanted = f"{expected} (the covered resources in order)"
                raise fields.fail(f"{at}.name", f"must be {wanted}, got {resource!r}")
            nominal = fields.amount(f"{at}.nominalQuota", resource, res.get("nominalQuota", 0))
            borrowing = lending = None
            if res.get("borrowingLimit") is not None:
                if not cohort:
                    raise fields.fail(f"{at}.borrowingLimit", "must be nil when cohort is empty")
                borrowing = fields.amount(f"{at}.borrowingLimit", resource, res["borrowingLimit"])
            if res.get("lendingLimit") is not None:
                if not cohort:
                    raise fields.fail(f"{at}.lendingLimit", "must be nil when cohort is empty")
                lending = fields.amount(f"{at}.lendingLimit", resource, res["lendingLimit"])
                if lending > nominal:
                    raise fields.fail(f"{at}.lendingLimit", "must be less than or equal to the nominalQuota")
            quotas[resource] = ResourceQuota(nominal, borrowing, lending)
        flavors.append((name, quotas))
    return ResourceGroup(tuple(covered), tuple(flavors))


CLUSTER_QUEUE_FIELDS: Final = (
    "resourceGroups",
    "cohort",
    "queueingStrategy",
    "namespaceSelector",
    "preemption",
    "fairSharing",
    "flavorFungibility",
    "stopPolicy",
    "admissionChecks",
    "admissionChecksStrategy",
    "admissionScope",
)
"""The fields of a ClusterQueue's ``spec`` (``kueue.x-k8s.io/v1beta1``); those that change admission and are not
modelled are refused unless they say what Kueue does without them."""


def read_cluster_queue(obj: Mapping[str, Any]) -> ClusterQueue:
    fields = _Fields(label_of(obj))
    name = _name(fields, obj)
    fields.known("", obj, TOP_FIELDS)
    spec = fields.mapping("spec", obj.get("spec"), required=True)
    fields.known("spec", spec, CLUSTER_QUEUE_FIELDS)
    _not_modelled(fields, "spec.stopPolicy", spec.get("stopPolicy"), default=("None",))
    _not_modelled(fields, "spec.admissionChecks", spec.get("admissionChecks"))
    _not_modelled(fields, "spec.admissionChecksStrategy", spec.get("admissionChecksStrategy"))
    _not_modelled(fields, "spec.admissionScope", spec.get("admissionScope"))
    fungibility = fields.mapping("spec.flavorFungibility", spec.get("flavorFungibility"))
    for key, default in (("whenCanBorrow", ("Borrow", "MayStopSearch")), ("whenCanPreempt", ("TryNextFlavor",))):
        _not_modelled(fields, f"spec.flavorFungibility.{key}", fungibility.get(key), default=default)
    fields.known("spec.flavorFungibility", fungibility, ("whenCanBorrow", "whenCanPreempt"))
    cohort = fields.text("spec.cohort", spec.get("cohort"))
    if cohort and (problem := dns_label_problem(cohort)) is not None:
        raise fields.fail("spec.cohort", f"{cohort!r}: {problem}")
    groups = fields.items("spec.resourceGroups", spec.get("resourceGroups"))
    if len(groups) > MAX_ITEMS:
        raise fields.fail("spec.resourceGroups", f"must list at most {MAX_ITEMS} groups, got {len(groups)}")
    read = [_group(fields, path, item, cohort) for path, item in groups]
    seen_resources: dict[str, int] = {}
    seen_flavors: dict[str, int] = {}
    for index, group in enumerate(read):
        for resource in group.covered:
            if seen_resources.setdefault(resource, index) != index or group.covered.count(resource) > 1:
                raise fields.fail(f"spec.resourceGroups[{index}].coveredResources", f"{resource!r} is covered twice")
        for flavor, _ in group.flavors:
            if seen_flavors.setdefault(flavor, index) != index or [f for f, _ in group.flavors].count(flavor) > 1:
                raise fields.fail(f"spec.resourceGroups[{index}].flavors", f"flavor {flavor!r} is listed twice")
    strategy = fields.choice(
        "spec.queueingStrategy",
        spec.get("queueingStrategy"),
        tuple(QueueingStrategy),
        QueueingStrategy.BEST_EFFORT_FIFO,
    )
    preemption = fields.mapping("spec.preemption", spec.get("preemption"))
    fields.known("spec.preemption", preemption, ("withinClusterQueue", "reclaimWithinCohort", "borrowWithinCohort"))
    borrow = fields.mapping("spec.preemption.borrowWithinCohort", preemption.get("borrowWithinCohort"))
    _not_modelled(fields, "spec.preemption.borrowWithinCohort.policy", borrow.get("policy"), default=("Never",))
    within = fields.choice(
        "spec.preemption.withinClusterQueue",
        preemption.get("withinClusterQueue"),
        tuple(WithinClusterQueue),
        WithinClusterQueue.NEVER,
    )
    reclaim = fields.choice(
        "spec.preemption.reclaimWithinCohort",
        preemption.get("reclaimWithinCohort"),
        tuple(ReclaimWithinCohort),
        ReclaimWithinCohort.NEVER,
    )
    if reclaim != ReclaimWithinCohort.NEVER and not cohort:
        raise fields.fail("spec.preemption.reclaimWithinCohort", "must be Never when cohort is empty")
    fair = fields.mapping("spec.fairSharing", spec.get("fairSharing"))
    fields.known("spec.fairSharing", fair, ("weight",))
    weight = 1.0
    if fair.get("weight") is not None:
        raw = fair["weight"]
        try:
            if isinstance(raw, bool) or not isinstance(raw, (str, int, float)):
                raise QuantityError(f"expected a quantity, got {raw!r}")
            exact = parse_quantity(raw)
        except QuantityError as exc:
            raise fields.fail("spec.fairSharing.weight", str(exc)) from None
        if exact < 0:
            raise fields.fail("spec.fairSharing.weight", f"must be greater than or equal to 0, got {raw!r}")
        weight = float(exact)
    return ClusterQueue(
        name,
        tuple(read),
        cohort,
        QueueingStrategy(strategy),
        label_selector(object_reader("ClusterQueue", obj), "spec.namespaceSelector", spec.get("namespaceSelector")),
        WithinClusterQueue(within),
        ReclaimWithinCohort(reclaim),
        weight,
    )


def read_local_queue(obj: Mapping[str, Any]) -> LocalQueue:
    fields = _Fields(label_of(obj))
    name = _name(fields, obj)
    namespace = _meta(obj).get("namespace") or "default"
    if not isinstance(namespace, str) or dns_label_problem(namespace) is not None:
        raise fields.fail("metadata.namespace", f"{namespace!r}: {dns_label_problem(str(namespace))}")
    fields.known("", obj, TOP_FIELDS)
    spec = fields.mapping("spec", obj.get("spec"), required=True)
    fields.known("spec", spec, ("clusterQueue", "stopPolicy", "fairSharing"))
    _not_modelled(fields, "spec.stopPolicy", spec.get("stopPolicy"), default=("None",))
    cluster_queue = fields.text("spec.clusterQueue", spec.get("clusterQueue"))
    if not cluster_queue:
        raise fields.fail("spec.clusterQueue", "required")
    return LocalQueue(namespace, name, cluster_queue)


def _count(fields: _Fields, path: str, value: Any, default: int | None) -> int | None:
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or value < 0 or value > MAX_INT32:
        raise fields.fail(path, f"must be an integer from 0 to {MAX_INT32}, got {value!r}")
    return value


def read_configuration(obj: Mapping[str, Any]) -> tuple[WaitForPodsReady | None, FairSharing | None]:
    """Kueue's ``Configuration``: its ``waitForPodsReady`` (:func:`read_wait_for_pods_ready`) and its
    ``fairSharing`` (:func:`read_fair_sharing`), each None unless enabled; the rest of the configuration is not
    read, except ``admissionFairSharing``, refused as not modelled."""
    fields = _Fields(label_of(obj))
    if obj.get("apiVersion") != CONFIG_API_VERSION:
        raise fields.fail("apiVersion", f"expected {CONFIG_API_VERSION!r}, got {obj.get('apiVersion')!r}")
    if obj.get("admissionFairSharing") is not None:
        raise fields.fail("admissionFairSharing", "not modelled (ordering by the LocalQueues' past usage)")
    return read_wait_for_pods_ready(fields, obj), read_fair_sharing(fields, obj)


def _enabled(fields: _Fields, path: str, section: Mapping[str, Any]) -> bool:
    enable = section.get("enable", False)
    if not isinstance(enable, bool):
        raise fields.fail(f"{path}.enable", f"expected true or false, got {enable!r}")
    return enable


def read_fair_sharing(fields: _Fields, obj: Mapping[str, Any]) -> FairSharing | None:
    """``fairSharing`` when ``enable`` is true: its ``preemptionStrategies``, one of the lists Kueue accepts
    (default ``[LessThanOrEqualToFinalShare, LessThanInitialShare]``)."""
    fair = fields.mapping("fairSharing", obj.get("fairSharing"))
    if not _enabled(fields, "fairSharing", fair):
        return None
    path = "fairSharing.preemptionStrategies"
    given = fair.get("preemptionStrategies")
    if given is None:
        return FairSharing()
    names = tuple(fields.choice(p, v, tuple(FairSharingStrategy), "") for p, v in fields.items(path, given))
    strategies = tuple(FairSharingStrategy(name) for name in names)
    if strategies not in FAIR_SHARING_STRATEGY_LISTS:
        allowed = " or ".join("[" + ", ".join(lst) + "]" for lst in FAIR_SHARING_STRATEGY_LISTS)
        raise fields.fail(path, f"must be {allowed}, got [{', '.join(names)}]")
    return FairSharing(strategies)


def read_wait_for_pods_ready(fields: _Fields, obj: Mapping[str, Any]) -> WaitForPodsReady | None:
    """``waitForPodsReady`` when enabled (None otherwise). ``blockAdmission`` must be false (blocking admissions
    until the admitted workloads' pods are ready is not modelled; Kueue defaults it to true when ``enable`` is) and
    ``recoveryTimeout`` absent."""
    wait = fields.mapping("waitForPodsReady", obj.get("waitForPodsReady"))
    if not _enabled(fields, "waitForPodsReady", wait):
        return None
    timeout = 300.0
    if wait.get("timeout") is not None:
        text = fields.text("waitForPodsReady.timeout", wait["timeout"])
        try:
            timeout = parse_duration(text)
        except DurationError as exc:
            raise fields.fail("waitForPodsReady.timeout", str(exc)) from None
        if timeout <= 0:
            raise fields.fail("waitForPodsReady.timeout", f"must be greater than 0, got {text!r}")
    if wait.get("blockAdmission") is not False:
        problem = "must be false: blocking admissions until pods are ready is not modelled (Kueue's default is true)"
        raise fields.fail("waitForPodsReady.blockAdmission", f"{problem}, got {wait.get('blockAdmission')!r}")
    if wait.get("recoveryTimeout") is not None:
        raise fields.fail("waitForPodsReady.recoveryTimeout", "not modelled")
    path = "waitForPodsReady.requeuingStrategy"
    strategy = fields.mapping(path, wait.get("requeuingStrategy"))
    timestamp = fields.choice(f"{path}.timestamp", strategy.get("timestamp"), tuple(RequeuingTimestamp), "Eviction")
    base = _count(fields, f"{path}.backoffBaseSeconds", strategy.get("backoffBaseSeconds"), 60)
    most = _count(fields, f"{path}.backoffMaxSeconds", strategy.get("backoffMaxSeconds"), 3600)
    assert base is not None and most is not None
    return WaitForPodsReady(
        timeout,
        RequeuingTimestamp(timestamp),
        _count(fields, f"{path}.backoffLimitCount", strategy.get("backoffLimitCount"), None),
        base,
        most,
    )


def queue_label(labels: Any) -> str:
    """The LocalQueue a workload's labels name (:data:`QUEUE_NAME_LABEL`); ``""`` when none."""
    queue = labels.get(QUEUE_NAME_LABEL) if isinstance(labels, dict) else None
    return queue if isinstance(queue, str) else ""


class KueueReader:
    """Collects a file's Kueue objects (:meth:`add` one at a time; :attr:`objects` the result)."""

    def __init__(self) -> None:
        self.objects = KueueObjects()
        self._where: dict[str, str] = {}

    def add(self, where: str, obj: Mapping[str, Any]) -> None:
        """Read one ResourceFlavor, ClusterQueue, LocalQueue or Configuration found at ``where``; raises
        :class:`ManifestError` naming the field Kueue's webhooks refuse, or a second object of one name."""
        self.objects.given = True
        label = label_of(obj)
        first = self._where.get(label)
        if first is not None:
            raise ManifestError(label, "metadata.name", f"defined twice (first in {first})")
        kind = obj.get("kind")
        if kind == "ResourceFlavor":
            flavor = read_flavor(obj)
            self.objects.flavors[flavor.name] = flavor
        elif kind == "ClusterQueue":
            queue = read_cluster_queue(obj)
            self.objects.cluster_queues[queue.name] = queue
        elif kind == "Configuration":
            self.objects.wait_for_pods_ready, self.objects.fair_sharing = read_configuration(obj)
        elif kind == "Cohort":
            problem = "not modelled: hierarchical cohorts (a Cohort object, its quotas and fairSharing weight)"
            raise ManifestError(label, "kind", f"{problem}; a ClusterQueue's spec.cohort names a flat cohort")
        else:
            local = read_local_queue(obj)
            self.objects.local_queues[local.key] = local
        if kind != "Configuration":
            self.objects.manifests.append(dict(obj))
        self._where[label] = where


__all__ = [
    "KUEUE_KINDS",
    "KueueReader",
    "label_of",
    "queue_label",
    "read_cluster_queue",
    "read_configuration",
    "read_fair_sharing",
    "read_flavor",
    "read_local_queue",
]
