"""kubeflux's volume filters against the real kube-scheduler v1.36: VolumeRestrictions (ReadWriteOncePod),
NodeVolumeLimits (CSINode attach limits), VolumeBinding (bound claims' PV node affinity, claims waiting for their first
consumer matched to local PersistentVolumes or provisioned within a class's allowedTopologies, unbound Immediate
claims) and VolumeZone (bound PVs' zone labels), beside taints, node selectors and resources.

Random small clusters (KWOK nodes with zone and hostname labels, some with a CSINode limiting a CSI driver's volumes)
hold local PersistentVolumes pinned to a node or a zone, claims bound to zoned CSI volumes (some ReadWriteOncePod),
claims of classes that wait for their first consumer (one provisioning anywhere, one only in zone z1, one of static
volumes only), claims of an Immediate class that nothing provisions, and existing pods bound with ``spec.nodeName``
using some of the bound claims. Random pending pods using 0–3 of these claims (now and then one that does not exist)
are given to the real kube-scheduler one at a time. The real kube-controller-manager's PV controller completes the
bindings kube-scheduler's volume binder starts; the test is the CSI provisioner, making a volume on the node a claim
was given (kube-scheduler waits for it before binding the pod). Each pod is either bound (and stays) or told it waits
(and is deleted).

For each, a fresh kubeflux core and the simulator's kube-default baseline, fed the nodes, the storage objects and the
bound pods as read from the API server before the pod was created, must agree with kube-scheduler on whether the pod
can be placed now and on the message: the per-reason node counts, or a PreFilter's whole reason. The node each picks
must satisfy every constraint by an independent checker written here from the API reference and the documentation
("Persistent Volumes", "Storage Classes", "Node-specific Volume Limits")."""

from __future__ import annotations

import json
import random
import time
from collections import Counter
from collections.abc import Iterator
from typing import Any

import orjson
import pytest

from kubeflux.apiobjects.manifests import node_from_manifest, pod_from_manifest
from kubeflux.apiobjects.storage import STORAGE_READERS
from kubeflux.controlplane import ControlPlane
from kubeflux.scheduler.core import KubefluxScheduler
from kubeflux.scheduler.interface import ClusterEvent, EventKind
from kubeflux.sim.baselines.kube_default import KubeDefaultScheduler

from ._verdicts import HOST, ZONE, Real, counts, decide, node_docs
from .conftest import CEILING, Api, client

DRIVER = "csi.example.com"
NAMESPACE = "vols"
ROUNDS = 12
PENDING = 42
"""Pending pods per round: ROUNDS × PENDING cases in all (504)."""
CLASSES = (
    {"metadata": {"name": "wffc"}, "provisioner": DRIVER, "volumeBindingMode": "WaitForFirstConsumer"},
    {
        "metadata": {"name": "wffc-z1"},
        "provisioner": DRIVER,
        "volumeBindingMode": "WaitForFirstConsumer",
        "allowedTopologies": [{"matchLabelExpressions": [{"key": ZONE, "values": ["z1"]}]}],
    },
    {
        "metadata": {"name": "local"},
        "provisioner": "kubernetes.io/no-provisioner",
        "volumeBindingMode": "WaitForFirstConsumer",
    },
    {"metadata": {"name": "eager"}, "provisioner": DRIVER, "volumeBindingMode": "Immediate"},
)
NO_PROVISIONER = "kubernetes.io/no-provisioner"


@pytest.fixture(scope="module")
def scheduled(plane: ControlPlane) -> ControlPlane:
    plane.start_scheduler()
    return plane


class Storage:
    """The storage API of the real control plane (raw JSON), and the test's own CSI provisioner."""

    def __init__(self, api: Api) -> None:
        self.core = api.core
        self.storage = client.StorageV1Api(api.client)

    def classes(self) -> None:
        for sc in CLASSES:
            self.storage.create_storage_class({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", **sc})

    def snapshot(self) -> list[tuple[str, dict[str, Any]]]:
        """(kind, object) of every StorageClass, CSINode, PersistentVolume and claim of the test's namespace."""
        found = []
        lists = (
            ("StorageClass", self.storage.list_storage_class),
            ("CSINode", self.storage.list_csi_node),
            ("PersistentVolume", self.core.list_persistent_volume),
        )
        for kind, call in lists:
            found += [(kind, item) for item in orjson.loads(call(_preload_content=False).data)["items"]]
        claims = self.core.list_namespaced_persistent_volume_claim(NAMESPACE, _preload_content=False)
        found += [("PersistentVolumeClaim", item) for item in orjson.loads(claims.data)["items"]]
        return found

    def provision(self) -> None:
        """A volume for each claim given a node and not bound yet: a CSI volume on that node, pre-bound to it."""
        claims = orjson.loads(self.core.list_namespaced_persistent_volume_claim(NAMESPACE, _preload_content=False).data)
        names = {pv["metadata"]["name"] for _, pv in self.snapshot() if _ == "PersistentVolume"}
        for pvc in claims["items"]:
            node = (pvc["metadata"].get("annotations") or {}).get("volume.kubernetes.io/selected-node")
            name = f"pv-{pvc['metadata']['uid'][:13]}"
            if node is None or pvc["spec"].get("volumeName") or name in names:
                continue
            term = {"matchExpressions": [{"key": HOST, "operator": "In", "values": [node]}]}
            self.core.create_persistent_volume(
                {
                    "apiVersion": "v1",
                    "kind": "PersistentVolume",
                    "metadata": {"name": name, "annotations": {"pv.kubernetes.io/provisioned-by": DRIVER}},
                    "spec": {
                        "capacity": {"storage": pvc["spec"]["resources"]["requests"]["storage"]},
                        "accessModes": pvc["spec"]["accessModes"],
                        "storageClassName": pvc["spec"]["storageClassName"],
                        "persistentVolumeReclaimPolicy": "Retain",
                        "csi": {"driver": DRIVER, "volumeHandle": name},
                        "claimRef": {
                            "namespace": NAMESPACE,
                            "name": pvc["metadata"]["name"],
                            "uid": pvc["metadata"]["uid"],
                        },
                        "nodeAffinity": {"required": {"nodeSelectorTerms": [term]}},
                    },
                },
                _preload_content=False,
            )

    def clear(self, nodes: set[str]) -> None:
        self.core.delete_collection_namespaced_persistent_volume_claim(NAMESPACE, _preload_content=False)
        self.core.delete_collection_persistent_volume(_preload_content=False)
        for name in nodes:
            try:
                self.storage.delete_csi_node(name, _preload_content=False)
            except client.ApiException as exc:
                if exc.status != 404:
                    raise


# --- random storage and pods -------------------------------------------------------------------------------------


def pv_doc(
    name: str, size: str, cls: str, *, node: str = "", zones: tuple[str, ...] = (), **extra: Any
) -> dict[str, Any]:
    spec: dict[str, Any] = {"capacity": {"storage": size}, "accessModes": extra.get("modes", ["ReadWriteOnce"])}
    spec["storageClassName"] = cls
    meta: dict[str, Any] = {"name": name}
    if extra.get("claim"):
        spec["claimRef"] = {"namespace": NAMESPACE, "name": extra["claim"]}
    if extra.get("csi"):
        spec["csi"] = {"driver": DRIVER, "volumeHandle": name}
    else:
        spec["local"] = {"path": f"/mnt/{name}"}
    if node:
        expressions = [{"key": HOST, "operator": "In", "values": [node]}]
    else:
        expressions = [{"key": ZONE, "operator": "In", "values": list(zones)}] if zones else []
    if expressions:
        spec["nodeAffinity"] = {"required": {"nodeSelectorTerms": [{"matchExpressions": expressions}]}}
    elif not extra.get("csi"):
        raise AssertionError("a local volume needs a node affinity")
    if extra.get("zone_label"):
        meta["labels"] = {ZONE: extra["zone_label"]}
    return {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": meta, "spec": spec}


def pvc_doc(
    name: str, size: str, cls: str, *, volume: str = "", modes: tuple[str, ...] = ("ReadWriteOnce",)
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "accessModes": list(modes),
        "storageClassName": cls,
        "resources": {"requests": {"storage": size}},
    }
    if volume:
        spec["volumeName"] = volume
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": name}, "spec": spec}


def storage_docs(
    rng: random.Random, round_: int, names: list[str]
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[str]]:
    """(PVs, claims, the names of the claims bound to a volume) of a round."""
    pvs, claims, bound = [], [], []
    for i in range(rng.randint(2, 5)):  # local volumes for the claims of the static class
        where: dict[str, Any] = (
            {"node": rng.choice(names)} if rng.random() < 0.6 else {"zones": (rng.choice(("z0", "z1", "z2")),)}
        )
        pvs.append(pv_doc(f"r{round_}-local-{i}", rng.choice(("1Gi", "2Gi", "5Gi")), "local", **where))
    for i in range(rng.randint(2, 5)):  # claims bound to zoned CSI volumes (some pinned to a node)
        name = f"bound-{i}"
        zones = rng.choice((("z0",), ("z1",), ("z0", "z2"), ("z2",)))
        extra: dict[str, Any] = {"csi": True, "claim": name, "zone_label": "__".join(zones)}
        if rng.random() < 0.3:
            extra["node"] = rng.choice(names)
        elif rng.random() < 0.5:
            extra["zones"] = zones
        modes = ("ReadWriteOncePod",) if rng.random() < 0.25 else ("ReadWriteOnce",)
        pvs.append(pv_doc(f"r{round_}-csi-{i}", "1Gi", "", modes=list(modes), **extra))
        claims.append(pvc_doc(name, "1Gi", "", volume=f"r{round_}-csi-{i}", modes=modes))
        bound.append(name)
    for i in range(rng.randint(3, 8)):  # claims waiting for their first consumer, and Immediate ones never provisioned
        cls = rng.choice(("wffc", "wffc", "wffc-z1", "local", "local", "eager"))
        claims.append(pvc_doc(f"c-{i}", rng.choice(("1Gi", "2Gi", "3Gi")), cls))
    return pvs, claims, bound


def csinode_doc(rng: random.Random, node: str) -> dict[str, Any]:
    driver = {"name": DRIVER, "nodeID": node, "allocatable": {"count": rng.randint(0, 2)}}
    return {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "CSINode",
        "metadata": {"name": node},
        "spec": {"drivers": [driver]},
    }


def pod_doc(rng: random.Random, name: str, claims: list[str], node: str | None) -> dict[str, Any]:
    cpu = rng.choice(("0", "500m", "1", "2")) if node is None else rng.choice(("0", "100m", "500m"))
    container: dict[str, Any] = {"name": "c", "image": "registry.k8s.io/pause:3.9"}
    if cpu != "0":
        container["resources"] = {"requests": {"cpu": cpu}}
    spec: dict[str, Any] = {"containers": [container]}
    count = rng.choice((1, 1, 1, 2, 2, 3)) if node is None else 1
    chosen = rng.sample(claims, min(count, len(claims)))
    if node is None and rng.random() < 0.05:
        chosen.append("missing")
    spec["volumes"] = [{"name": f"v{i}", "persistentVolumeClaim": {"claimName": c}} for i, c in enumerate(chosen)]
    if node is not None:
        spec["nodeName"] = node
    elif rng.random() < 0.15:
        spec["nodeSelector"] = {ZONE: rng.choice(("z0", "z1"))}
    if node is None and rng.random() < 0.3:
        spec["tolerations"] = [{"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"}]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec}


# --- the verdicts -------------------------------------------------------------------------------------------------


def kubeflux_verdict(
    nodes: list[dict[str, Any]],
    storage: list[tuple[str, dict[str, Any]]],
    bound: list[dict[str, Any]],
    pending: dict[str, Any],
    *,
    baseline: bool,
) -> tuple[str | None, str]:
    scheduler: Any = KubeDefaultScheduler("kubeflux", preemption="never") if baseline else KubefluxScheduler()
    for node in nodes:
        scheduler.observe(ClusterEvent(EventKind.ADDED, node_from_manifest(node)), 0.0)
    for kind, obj in storage:
        scheduler.observe(ClusterEvent(EventKind.ADDED, STORAGE_READERS[kind](obj)), 0.0)
    for pod in bound:
        scheduler.observe(ClusterEvent(EventKind.ADDED, pod_from_manifest(pod)), 0.0)
    return decide(scheduler, pending, 0.0)


def said(message: str) -> Counter[str] | str:
    """The per-reason node counts of ``0/N nodes are available: 2 X, 3 Y.``, or a PreFilter's whole reason (the
    first sentence, before any preemption verdict)."""
    total, _, body = message.partition(" nodes are available: ")
    reasons = body.split(". ")[0].removesuffix(".")
    return counts(message) if reasons[:1].isdigit() else f"{total}: {reasons}"


# --- the independent checker --------------------------------------------------------------------------------------


def _selects(terms: list[dict[str, Any]], labels: dict[str, str]) -> bool:
    """The API reference's node selector: terms ORed, each term's matchExpressions ANDed (In and NotIn here)."""
    for term in terms:
        if all(
            (labels.get(e["key"]) in e["values"]) == (e["operator"] == "In") for e in term.get("matchExpressions") or []
        ):
            return True
    return False


def violations(
    node: dict[str, Any],
    storage: list[tuple[str, dict[str, Any]]],
    bound: list[dict[str, Any]],
    pending: dict[str, Any],
) -> list[str]:
    """Every volume constraint of ``pending`` that placing it on ``node`` breaks, from the API objects:

    * a claim must exist, and one not bound ("Pending") must have a class whose volumeBindingMode is
      WaitForFirstConsumer ("the binding and provisioning of a PersistentVolume" wait until a pod using it is
      scheduled); an Immediate claim not bound yet holds its pod;
    * a bound claim's PV "nodeAffinity … limits what nodes this volume can be accessed from", and its zone label
      (several zones joined by ``__``) must hold the node's zone;
    * a claim waiting for its first consumer needs on the node either an Available PV of its class, large enough,
      with its access modes, whose node affinity the node matches, or a class that provisions ("provisioner"
      other than kubernetes.io/no-provisioner) whose allowedTopologies the node matches;
    * a ReadWriteOncePod claim: "only one pod across the whole cluster can read that PVC or write to it";
    * a CSINode's ``allocatable.count``: "the maximum number of unique volumes managed by the CSI driver that can
      be used on a node", the pod's own and those of the node's pods."""
    labels = node["metadata"].get("labels") or {}
    here = node["metadata"]["name"]
    objects: dict[str, dict[str, dict[str, Any]]] = {}
    for kind, obj in storage:
        objects.setdefault(kind, {})[obj["metadata"]["name"]] = obj
    claims, pvs, classes = (objects.get(k, {}) for k in ("PersistentVolumeClaim", "PersistentVolume", "StorageClass"))
    wanted = claims_of(pending)
    broken = []
    taken: set[str] = set()
    for name in wanted:
        pvc = claims.get(name)
        if pvc is None:
            broken.append(f"claim {name} missing")
            continue
        volume = pvc["spec"].get("volumeName")
        if pvc["status"].get("phase") == "Bound" and volume:
            pv = pvs[volume]
            terms = ((pv["spec"].get("nodeAffinity") or {}).get("required") or {}).get("nodeSelectorTerms")
            if terms and not _selects(terms, labels):
                broken.append(f"{name}: volume elsewhere")
            zone = (pv["metadata"].get("labels") or {}).get(ZONE)
            if zone and ZONE in labels and labels[ZONE] not in zone.split("__"):
                broken.append(f"{name}: volume zone")
            if "ReadWriteOncePod" in pvc["spec"]["accessModes"] and any(name in claims_of(p) for p in bound):
                broken.append(f"{name}: in use")
            continue
        sc = classes.get(pvc["spec"].get("storageClassName") or "")
        if sc is None or sc.get("volumeBindingMode") != "WaitForFirstConsumer":
            broken.append(f"{name}: unbound immediate")
            continue
        if (pvc["metadata"].get("annotations") or {}).get("volume.kubernetes.io/selected-node", here) != here:
            broken.append(f"{name}: given another node")
            continue
        size = _bytes(pvc["spec"]["resources"]["requests"]["storage"])
        fitting = [
            pv
            for pv in pvs.values()
            if pv["metadata"]["name"] not in taken
            and pv["spec"].get("storageClassName") == sc["metadata"]["name"]
            and (pv.get("status") or {}).get("phase") == "Available"
            and not pv["spec"].get("claimRef")
            and _bytes(pv["spec"]["capacity"]["storage"]) >= size
            and set(pvc["spec"]["accessModes"]) <= set(pv["spec"]["accessModes"])
            and _selects(pv["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"], labels)
        ]
        if fitting:
            taken.add(min(fitting, key=lambda pv: _bytes(pv["spec"]["capacity"]["storage"]))["metadata"]["name"])
            continue
        topologies = [
            {"matchExpressions": [{**e, "operator": "In"} for e in t["matchLabelExpressions"]]}
            for t in sc.get("allowedTopologies") or []
        ]
        if sc["provisioner"] == NO_PROVISIONER or (topologies and not _selects(topologies, labels)):
            broken.append(f"{name}: no volume here")
    csinode = objects.get("CSINode", {}).get(here)
    limit = next(
        (
            d["allocatable"]["count"]
            for d in (csinode or {"spec": {}})["spec"].get("drivers") or []
            if d.get("allocatable")
        ),
        None,
    )
    if limit is not None:
        mine = _csi_volumes(wanted, claims, pvs, classes)
        theirs = set().union(
            *(
                _csi_volumes(
                    claims_of(p),
                    claims,
                    pvs,
                    classes,
                )
                for p in bound
                if p["spec"]["nodeName"] == here
            )
        )
        if mine - theirs and len(mine | theirs) > limit:
            broken.append("too many volumes")
    return broken


def claims_of(pod: dict[str, Any]) -> list[str]:
    """The claims of a pod's ``persistentVolumeClaim`` volumes (the API server adds a token volume to each pod)."""
    return [
        v["persistentVolumeClaim"]["claimName"]
        for v in pod["spec"].get("volumes") or []
        if "persistentVolumeClaim" in v
    ]


def _csi_volumes(wanted: list[str], claims: dict[str, Any], pvs: dict[str, Any], classes: dict[str, Any]) -> set[str]:
    """The CSI driver's unique volumes of claims ``wanted``: a bound claim's CSI volume, or a claim of a class the
    driver provisions (the volume it will make)."""
    found = set()
    for name in wanted:
        pvc = claims.get(name)
        if pvc is None:
            continue
        volume = pvs.get(pvc["spec"].get("volumeName") or "")
        if volume is not None:
            if (volume["spec"].get("csi") or {}).get("driver") == DRIVER:
                found.add(volume["metadata"]["name"])
        elif (classes.get(pvc["spec"].get("storageClassName") or "") or {}).get("provisioner") == DRIVER:
            found.add(f"claim {name}")
    return found


def _bytes(text: str) -> int:
    return int(text.removesuffix("Gi")) * 2**30 if text.endswith("Gi") else int(text)


# --- the test -------------------------------------------------------------------------------------------------


@pytest.fixture
def storage(api: Api) -> Iterator[Storage]:
    made = Storage(api)
    made.classes()
    api.namespace(NAMESPACE)
    yield made


def test_kubeflux_volume_filters_as_the_real_kube_scheduler(
    scheduled: ControlPlane, api: Api, storage: Storage
) -> None:
    real = Real(scheduled, api)
    rng = random.Random(3434)
    disagreements: list[str] = []
    tried = placed = 0
    seen: Counter[str] = Counter()
    started = time.monotonic()
    for round_ in range(ROUNDS):
        docs = node_docs(rng, round_)
        names = sorted(doc["metadata"]["name"] for doc in docs)
        real.apply_nodes(docs)
        nodes = real.nodes(set(names))
        for name in names:
            if rng.random() < 0.6:
                storage.storage.create_csi_node(csinode_doc(rng, name), _preload_content=False)
        pvs, claims, bound_claims = storage_docs(rng, round_, names)
        for doc in pvs:
            storage.core.create_persistent_volume(doc, _preload_content=False)
        for doc in claims:
            storage.core.create_namespaced_persistent_volume_claim(NAMESPACE, doc, _preload_content=False)
        _until(_settled, storage, len(pvs), bound_claims)
        bound: list[dict[str, Any]] = []
        for i in range(rng.randint(1, 4)):  # existing pods using bound claims (ReadWriteOncePod ones in use)
            doc = pod_doc(rng, f"old-{i}", bound_claims, rng.choice(names))
            bound.append(real.create(NAMESPACE, doc))
        claim_names = [doc["metadata"]["name"] for doc in claims]
        for i in range(PENDING):
            snapshot = storage.snapshot()
            doc = pod_doc(rng, f"new-{i}", claim_names, None)
            created = real.create(NAMESPACE, doc)
            where, message = real.verdict(NAMESPACE, f"new-{i}", storage.provision)  # kube-scheduler waits for it
            tried += 1
            case = f"round {round_} pod new-{i}: {json.dumps(doc['spec'])}"
            answers = [
                ("kubeflux", *kubeflux_verdict(nodes, snapshot, bound, created, baseline=False)),
                ("kube-default", *kubeflux_verdict(nodes, snapshot, bound, created, baseline=True)),
            ]
            for who, chose, words in answers:
                if (where is None) != (chose is None):
                    disagreements.append(f"{case}\n  kube-scheduler: {where or message}\n  {who}: {chose or words}")
                elif where is None and said(message) != said(words):
                    disagreements.append(f"{case}\n  kube-scheduler: {message}\n  {who}: {words}")
            if where is None:
                found = said(message)
                seen.update([found] if isinstance(found, str) else [r for r in found if r != "total"])
            for who, chosen in (("kube-scheduler", where), *((who, chose) for who, chose, _ in answers)):
                if chosen is not None:
                    node = next(n for n in nodes if n["metadata"]["name"] == chosen)
                    broken = violations(node, snapshot, bound, created)
                    if broken:
                        disagreements.append(f"{case}\n  {who} chose {chosen}, which breaks {broken}")
            if where is None:
                real.delete(NAMESPACE, f"new-{i}")
            else:
                placed += 1
                bound.append(real.get(NAMESPACE, f"new-{i}"))
                _until(_claims_bound, storage, created)
        real.clear([NAMESPACE], set(names))
        storage.clear(set(names))
        _until(
            lambda: (
                not [kind for kind, _ in storage.snapshot() if kind in ("PersistentVolume", "PersistentVolumeClaim")]
            )
        )
    elapsed = time.monotonic() - started
    print(f"{tried} cases ({placed} placed by kube-scheduler) in {elapsed:.0f} s; reasons met: {dict(seen)}")
    assert tried >= ROUNDS * PENDING
    for disagreement in disagreements[10:]:
        print(disagreement)
    assert not disagreements, f"{len(disagreements)} of {tried} disagree:\n" + "\n".join(disagreements[:10])


def _settled(storage: Storage, volumes: int, bound_claims: list[str]) -> bool:
    """The round's volumes seen by the PV controller (Available or Bound) and its pre-bound claims bound."""
    objects = storage.snapshot()
    pvs = [obj for kind, obj in objects if kind == "PersistentVolume"]
    claims = {obj["metadata"]["name"]: obj for kind, obj in objects if kind == "PersistentVolumeClaim"}
    return (
        len(pvs) == volumes
        and all((pv.get("status") or {}).get("phase") in ("Available", "Bound") for pv in pvs)
        and all((claims[name].get("status") or {}).get("phase") == "Bound" for name in bound_claims)
    )


def _claims_bound(storage: Storage, pod: dict[str, Any]) -> bool:
    """A bound pod's claims bound, their volumes too (what the next pod's snapshot reads)."""
    wanted = set(claims_of(pod))
    objects = storage.snapshot()
    claims = [obj for kind, obj in objects if kind == "PersistentVolumeClaim" and obj["metadata"]["name"] in wanted]
    volumes = {obj["metadata"]["name"]: obj for kind, obj in objects if kind == "PersistentVolume"}
    return all(
        (c.get("status") or {}).get("phase") == "Bound"
        and (volumes.get(c["spec"].get("volumeName")) or {}).get("status", {}).get("phase") == "Bound"
        for c in claims
    )


def _until(what: Any, *args: Any) -> None:
    deadline = time.monotonic() + CEILING
    while not what(*args):
        assert time.monotonic() < deadline, "never settled"
        time.sleep(0.02)
