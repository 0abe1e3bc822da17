"""kubeflux's filters against the real kube-scheduler v1.36: NodePorts, required InterPodAffinity (affinity and
anti-affinity, existing pods' anti-affinity by symmetry), PodTopologySpread (``DoNotSchedule``), beside taints, node
selectors and resources.

Random small clusters (KWOK nodes with zone, rack and hostname labels, some tainted) hold existing pods bound with
``spec.nodeName`` (labels, host ports, anti-affinity). Random pending pods using these constraints are then given to
the real kube-scheduler one at a time: each is either bound (and stays, an existing pod for those after it) or told
it waits (and is deleted). For each, a fresh kubeflux core fed the same nodes and bound pods, read from the API server
(:func:`~kubeflux.apiobjects.manifests.pod_from_manifest`), must agree on whether the pod can be placed now and on
the per-reason node counts of the ``FailedScheduling`` message, and so must the simulator's kube-default baseline
(which shares the core's filter code), and so must one kubeflux core kept through the whole round, told of each
pod as kube-scheduler decided it (bound where it put it, or deleted): its incremental books, pod index and caches
are exercised step by step. The node each of them picks must satisfy every constraint by an independent checker
written from the API's definitions and the Kubernetes documentation (`_podterms.py`, shared with the gang
differential, test_gang_differential.py).

Namespaces carry labels of their own beside the ``kubernetes.io/metadata.name`` the API server gives each; terms
select namespaces by either (``namespaceSelector``), and the kubeflux cores are told of the namespaces as read
back from the API server.

By design the messages differ in their tails: kube-scheduler appends its preemption verdict (``preemption: 0/5 nodes
are available: 5 Preemption is not helpful for scheduling.``), kubeflux says no such thing for a pod that does not
preempt; only ``0/N nodes are available: <count> <reason>, …`` is compared.
"""

from __future__ import annotations

import json
import random
import time
from collections import Counter
from dataclasses import replace
from typing import Any

import pytest

from kubeflux.apiobjects.manifests import pod_from_manifest
from kubeflux.controlplane import ControlPlane
from kubeflux.scheduler.core import KubefluxScheduler
from kubeflux.scheduler.interface import ClusterEvent, EventKind
from kubeflux.sim.baselines.kube_default import KubeDefaultScheduler

from ._podterms import NAME_LABEL, TEAMS, host_ports, informed, millicores, pod_doc, scene, violations
from ._verdicts import Real, counts, decide, node_docs
from .conftest import Api

ROUNDS = 12
PENDING = 48
"""Pending pods per round: ROUNDS × PENDING cases in all (576)."""


@pytest.fixture(scope="module")
def scheduled(plane: ControlPlane) -> ControlPlane:
    plane.start_scheduler()
    return plane


# --- kubeflux's answer ------------------------------------------------------------------------------------------


def kubeflux_verdict(
    nodes: list[dict[str, Any]],
    namespaces: list[dict[str, Any]],
    bound: list[dict[str, Any]],
    pending: dict[str, Any],
    *,
    baseline: bool = False,
) -> tuple[str | None, str]:
    """A fresh kubeflux core (``baseline``: the simulator's kube-default baseline) fed the nodes, namespaces and
    bound pods: where it binds the pending pod, or its message."""
    scheduler: Any = KubeDefaultScheduler("kubeflux", preemption="never") if baseline else KubefluxScheduler()
    return decide(informed(scheduler, nodes, namespaces, bound), pending, 0.0)


class Incremental:
    """One kubeflux core kept through a round: each pending pod decided beside the pods before it, then told where
    kube-scheduler put it (or that it is gone), as a shell tells it of the cluster."""

    def __init__(
        self, nodes: list[dict[str, Any]], namespaces: list[dict[str, Any]], bound: list[dict[str, Any]]
    ) -> None:
        self.core = informed(KubefluxScheduler(), nodes, namespaces, bound)
        self.now = 1.0

    def verdict(self, pending: dict[str, Any]) -> tuple[str | None, str]:
        self.now += 2.0
        return decide(self.core, pending, self.now)

    def settle(self, pending: dict[str, Any], placed: dict[str, Any] | None) -> None:
        """kube-scheduler's verdict on ``pending``: ``placed``, the pod as bound and read back, or gone."""
        if placed is None:
            gone = replace(pod_from_manifest(pending), scheduler_name="kubeflux")
            self.core.observe(ClusterEvent(EventKind.DELETED, gone), self.now)
        else:
            bound = replace(pod_from_manifest(placed), scheduler_name="kubeflux")
            self.core.observe(ClusterEvent(EventKind.MODIFIED, bound), self.now)


# --- the test -------------------------------------------------------------------------------------------------


def test_kubeflux_filters_as_the_real_kube_scheduler(scheduled: ControlPlane, api: Api) -> None:
    real = Real(scheduled, api)
    rng = random.Random(34)
    disagreements: list[str] = []
    tried = placed = 0
    seen: Counter[str] = Counter()
    started = time.monotonic()
    for round_ in range(ROUNDS):
        namespaces = [
            api.namespace(f"r{round_}-a", {"team": rng.choice(TEAMS), **({"tier": "t"} if rng.random() < 0.5 else {})}),
            api.namespace(f"r{round_}-b", {"team": rng.choice(TEAMS)}),
        ]
        namespace_docs = [real.namespace(namespace) for namespace in namespaces]
        ns_labels = {doc["metadata"]["name"]: doc["metadata"]["labels"] for doc in namespace_docs}
        assert all(labels[NAME_LABEL] == name for name, labels in ns_labels.items())
        docs = node_docs(rng, round_)
        names = {doc["metadata"]["name"] for doc in docs}
        real.apply_nodes(docs)
        nodes = real.nodes(names)
        bound: list[dict[str, Any]] = []
        room = {n["metadata"]["name"]: int(n["status"]["allocatable"]["cpu"]) * 1000 for n in nodes}
        for i in range(rng.randint(3, 12)):
            node = rng.choice(sorted(names))
            namespace, doc = pod_doc(rng, f"old-{i}", namespaces, node, pending=False)
            if millicores(doc) > room[node] or (
                host_ports(doc) and any(host_ports(p) for p in bound if p["spec"]["nodeName"] == node)
            ):
                continue
            room[node] -= millicores(doc)
            bound.append(real.create(namespace, doc))
        incremental = Incremental(nodes, namespace_docs, bound)
        for i in range(PENDING):
            namespace, doc = pod_doc(rng, f"new-{i}", namespaces, None, pending=True)
            created = real.create(namespace, doc)
            where, message = real.verdict(namespace, f"new-{i}")
            mine, said = kubeflux_verdict(nodes, namespace_docs, bound, created)
            modelled, words_ = kubeflux_verdict(nodes, namespace_docs, bound, created, baseline=True)
            kept, kept_said = incremental.verdict(created)
            tried += 1
            case = f"round {round_} pod {namespace}/new-{i}: {json.dumps(doc['spec'])}"
            answers = (
                ("kubeflux", mine, said),
                ("kube-default", modelled, words_),
                ("kubeflux kept through the round", kept, kept_said),
            )
            for who, chose, words in answers:
                if (where is None) != (chose is None):
                    disagreements.append(
                        f"{case}\n  kube-scheduler: {where or message}\n  {who}: {chose or words}\n  "
                        + scene(nodes, bound, ns_labels, created)
                    )
                elif where is None and counts(message) != counts(words):
                    disagreements.append(f"{case}\n  kube-scheduler: {message}\n  {who}: {words}")
            if where is None:
                seen.update(reason for reason in counts(message) if reason != "total")
            for who, chosen, _ in (("kube-scheduler", where, ""), *answers):
                if chosen is not None:
                    node = next(n for n in nodes if n["metadata"]["name"] == chosen)
                    broken = violations(node, nodes, bound, created, ns_labels)
                    if broken:
                        disagreements.append(f"{case}\n  {who} chose {chosen}, which breaks {broken}")
            if where is None:
                real.delete(namespace, f"new-{i}")
                incremental.settle(created, None)
            else:
                placed += 1
                bound.append(real.get(namespace, f"new-{i}"))
                incremental.settle(created, bound[-1])
        real.clear(namespaces, names)
    elapsed = time.monotonic() - started
    print(f"{tried} cases ({placed} placed by both) in {elapsed:.0f} s; reasons met: {dict(seen)}")
    assert tried >= 500
    for disagreement in disagreements[10:]:  # the assertion shows the first ten
        print(disagreement)
    assert not disagreements, f"{len(disagreements)} of {tried} disagree:\n" + "\n".join(disagreements[:10])
