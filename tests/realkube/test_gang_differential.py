"""Gangs whose members constrain each other, placed by kubeflux as a whole, against the real kube-scheduler v1.36.

Random small clusters (as :mod:`tests.realkube.test_filter_differential` makes them: KWOK nodes with zones, racks and
taints, existing pods bound with labels, host ports and anti-affinity) and a random pod group whose members carry a
``DoNotSchedule`` topology spread selecting the group (on the zone or the hostname, maxSkew 1 or 2, sometimes
minDomains) or required pod affinity among them on the zone, sometimes with anti-affinity among them by hostname. A
fresh kubeflux core places the gang in one pass. Its members are then given to the real kube-scheduler one at a
time, in the order kubeflux binds them, each pinned to the node kubeflux chose (required node affinity on the node's
name): kube-scheduler must bind each there, beside the members bound before it, and the independent checker of the
filter differential must find each placement keeps every constraint.

The spread constraints say ``nodeAffinityPolicy: Ignore``: the pin is a node affinity, which the default policy
(``Honor``) would count in the spread's domains (kube-scheduler would then see other domains than the member
itself, unpinned, asks for).
"""

from __future__ import annotations

import json
import random
import time
from typing import Any

from kubeflux.apiobjects.manifests import pod_from_manifest
from kubeflux.controlplane import ControlPlane
from kubeflux.scheduler.core import KubefluxScheduler
from kubeflux.scheduler.interface import Bind, ClusterEvent, EventKind
from kubeflux.scheduler.objects import POD_GROUP_LABEL, PodGroup

from ._podterms import host_ports, informed, millicores, pod_doc, violations
from ._verdicts import HOST, ZONE, Real, node_docs
from .conftest import Api

ROUNDS = 32
GANGS = 3
"""Gangs per round, each placed beside the gangs before it."""


def gang_docs(rng: random.Random, name: str) -> list[dict[str, Any]]:
    """The members of pod group ``name``: alike or a bigger first rank, with a spread or affinity among them."""
    size = rng.randint(2, 5)
    selector = {"matchLabels": {"app": name}}
    spec: dict[str, Any] = {}
    if rng.random() < 0.6:
        constraint: dict[str, Any] = {
            "maxSkew": rng.choice((1, 1, 2)),
            "topologyKey": rng.choice((ZONE, ZONE, HOST)),
            "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": selector,
            "nodeAffinityPolicy": "Ignore",
        }
        if rng.random() < 0.2:
            constraint["minDomains"] = rng.choice((2, 3))
        if rng.random() < 0.2:
            constraint["nodeTaintsPolicy"] = "Honor"
        spec["topologySpreadConstraints"] = [constraint]
    else:
        affinity: dict[str, Any] = {
            "podAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [{"labelSelector": selector, "topologyKey": ZONE}]
            }
        }
        if rng.random() < 0.4:
            term = {"labelSelector": selector, "topologyKey": HOST}
            affinity["podAntiAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": [term]}
        spec["affinity"] = affinity
    if rng.random() < 0.3:
        spec["tolerations"] = [{"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"}]
    cpus = [rng.choice(("500m", "1", "2"))] * size
    if rng.random() < 0.4:
        cpus[rng.randrange(size)] = rng.choice(("2", "3"))
    docs = []
    for i, cpu in enumerate(cpus):
        container = {"name": "c", "image": "registry.k8s.io/pause:3.9", "resources": {"requests": {"cpu": cpu}}}
        labels = {"app": name, POD_GROUP_LABEL: name}
        docs.append(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": f"{name}-{i}", "labels": labels},
                "spec": {**json.loads(json.dumps(spec)), "containers": [container]},
            }
        )
    return docs


def pinned(doc: dict[str, Any], node: str) -> dict[str, Any]:
    """``doc`` required onto ``node`` by node affinity on its name (the rest of its affinity kept)."""
    made = json.loads(json.dumps(doc))
    term = {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}
    affinity = made["spec"].setdefault("affinity", {})
    affinity["nodeAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}}
    return made


def kubeflux_binds(
    nodes: list[dict[str, Any]],
    namespaces: list[dict[str, Any]],
    bound: list[dict[str, Any]],
    namespace: str,
    name: str,
    members: list[dict[str, Any]],
) -> list[tuple[str, str]]:
    """(member name, node) in the order a fresh kubeflux core binds the gang's members in one pass (none: it
    waits)."""
    core = informed(KubefluxScheduler(), nodes, namespaces, bound)
    core.observe(ClusterEvent(EventKind.ADDED, PodGroup(namespace, name, len(members))), 0.0)
    for doc in members:
        made = json.loads(json.dumps(doc))
        made["metadata"] |= {"namespace": namespace, "uid": f"uid-{name}-{doc['metadata']['name']}"}
        made["spec"]["schedulerName"] = "kubeflux"
        core.observe(ClusterEvent(EventKind.ADDED, pod_from_manifest(made)), 0.0)
    decisions = core.schedule(1.0)
    return [(d.pod.split("/", 1)[1], d.node) for d in decisions if isinstance(d, Bind)]


def test_kube_scheduler_accepts_each_member_where_kubeflux_put_it_in_kubefluxs_bind_order(
    plane: ControlPlane, api: Api
) -> None:
    plane.start_scheduler()
    real = Real(plane, api)
    rng = random.Random(3434)
    disagreements: list[str] = []
    gangs = placed = members_checked = 0
    started = time.monotonic()
    for round_ in range(ROUNDS):
        namespace = api.namespace(f"g{round_}", {"team": "x"})
        namespace_docs = [real.namespace(namespace)]
        ns_labels = {doc["metadata"]["name"]: doc["metadata"]["labels"] for doc in namespace_docs}
        docs = node_docs(rng, 100 + round_)
        names = {doc["metadata"]["name"] for doc in docs}
        real.apply_nodes(docs)
        nodes = real.nodes(names)
        by_name = {n["metadata"]["name"]: n for n in nodes}
        bound: list[dict[str, Any]] = []
        room = {n["metadata"]["name"]: int(n["status"]["allocatable"]["cpu"]) * 1000 for n in nodes}
        for i in range(rng.randint(2, 8)):
            node = rng.choice(sorted(names))
            _, doc = pod_doc(rng, f"old-{i}", [namespace], node, pending=False)
            if millicores(doc) > room[node] or (
                host_ports(doc) and any(host_ports(p) for p in bound if p["spec"]["nodeName"] == node)
            ):
                continue
            room[node] -= millicores(doc)
            bound.append(real.create(namespace, doc))
        for g in range(GANGS):
            name = f"gang-{g}"
            members = gang_docs(rng, name)
            gangs += 1
            order = kubeflux_binds(nodes, namespace_docs, bound, namespace, name, members)
            if not order:
                continue
            placed += 1
            by_member = {doc["metadata"]["name"]: doc for doc in members}
            for member_name, node in order:
                members_checked += 1
                doc = by_member[member_name]
                case = f"round {round_} {name} ({json.dumps(doc['spec'])}): {member_name} on {node} after {order}"
                real.create(namespace, pinned(doc, node))
                where, message = real.verdict(namespace, member_name)
                if where != node:
                    disagreements.append(f"{case}\n  kube-scheduler: {where or message}")
                unpinned = {**doc, "metadata": {**doc["metadata"], "namespace": namespace}}
                broken = violations(by_name[node], nodes, bound, unpinned, ns_labels)
                if broken:
                    disagreements.append(f"{case}\n  breaks {broken}")
                if where is None:
                    real.delete(namespace, member_name)
                else:
                    bound.append(real.get(namespace, member_name))
        real.clear([namespace], names)
    elapsed = time.monotonic() - started
    print(f"{gangs} gangs ({placed} placed by kubeflux, {members_checked} members) in {elapsed:.0f} s")
    assert placed >= gangs // 3
    assert not disagreements, f"{len(disagreements)} disagree:\n" + "\n".join(disagreements[:10])
