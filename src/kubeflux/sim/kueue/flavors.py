"""Flavor assignment, as Kueue's ``flavorassigner`` makes it: for each resource group of the ClusterQueue that
covers a resource the workload asks, its flavors in their order.

A flavor is skipped when the workload's pods cannot run on its nodes (Kueue's ``flavorSelector``, which replicates
kube-scheduler's NodeAffinity filter on the flavor's ``nodeLabels``): their ``nodeSelector`` or their required node
affinity, both restricted to the label keys of the group's flavors, does not match the flavor's ``nodeLabels``; or a
``NoSchedule``/``NoExecute`` taint of its ``nodeTaints`` is tolerated neither by the pods nor by the flavor's own
``tolerations`` (which Kueue adds to them).

Each flavor left gets a mode, the worst of its resources': *fit* (it fits now, borrowing if need be), else, when it
fits the ClusterQueue's nominal quota (or, with fair sharing, may preempt while borrowing: ``reclaimWithinCohort``
not ``Never``), what a simulated preemption for that resource alone finds (Kueue's preemption oracle): *reclaim*
(victims in other queues only), *preempt* (some in its own queue) or *no candidates*; else *no fit*. Kueue's default
``flavorFungibility`` (``whenCanBorrow: MayStopSearch``, ``whenCanPreempt: TryNextFlavor``, no preference): the
first flavor that fits is taken; else the best of the flavors tried (fit > reclaim > preempt > no candidates, then
the one that borrows less). A resource the workload asks that no resource group covers makes it inadmissible
(``pods`` is counted only when a group covers it).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from enum import IntEnum

from kubeflux.scheduler.constraints import matches_node_selector, untolerated_taint
from kubeflux.scheduler.objects import Node, NodeSelectorTerm, Pod, Toleration
from kubeflux.sim.kueue.objects import PODS, ClusterQueue, ResourceFlavor, ResourceGroup
from kubeflux.sim.kueue.quota import FlavorResource, QuotaBook


class Mode(IntEnum):
    """How a workload fits a ClusterQueue now (worse is higher)."""

    FIT = 0
    PREEMPT = 1
    NO_FIT = 2


class Possibility(IntEnum):
    """What a simulated preemption finds for one flavor-resource (Kueue's ``PreemptionPossibility``; better is
    higher, as Kueue's ``preemptionMode``)."""

    NO_CANDIDATES = 1
    PREEMPT = 2
    """Some victims in the preemptor's own ClusterQueue."""
    RECLAIM = 3
    """Victims in other ClusterQueues of its cohort only."""


_NO_FIT, _FIT = 0, 4
"""Kueue's ``noFit`` and ``fit``, around :class:`Possibility`'s values."""

Oracle = Callable[[FlavorResource, int], Possibility]
"""What preempting for ``amount`` of a flavor-resource would find (the admitter's preemption, simulated)."""


@dataclass(slots=True)
class Assignment:
    mode: Mode
    flavors: dict[str, str] = field(default_factory=dict)
    """Resource → the flavor chosen for it."""
    usage: dict[FlavorResource, int] = field(default_factory=dict)
    """What the workload would use, by flavor and resource."""
    why: str = ""
    """Why it does not fit (``Mode.NO_FIT``, or ``PREEMPT`` until victims are found)."""
    needs: set[FlavorResource] = field(default_factory=set)
    """The flavor-resources that do not fit now (``Mode.PREEMPT``): those preemption must free."""


PodConstraints = tuple[dict[str, str], tuple[Toleration, ...], tuple[NodeSelectorTerm, ...]]
"""A pod template's ``nodeSelector``, tolerations and required node affinity terms, as a flavor must suit them."""


def flavor_problem(flavor: ResourceFlavor, pods: PodConstraints, keys: frozenset[str] | None = None) -> str:
    """Why the pods of ``pods`` cannot run on ``flavor``'s nodes; ``""`` when they can. ``keys``: the label keys
    their ``nodeSelector`` and node affinity are restricted to (those of the resource group's flavors; by default
    ``flavor``'s own)."""
    selector, tolerations, affinity = pods
    taint = untolerated_taint(flavor.node_taints, (*tolerations, *flavor.tolerations))
    if taint is not None:
        return f"untolerated taint {taint.key}={taint.value}:{taint.effect} in flavor {flavor.name}"
    keys = frozenset(flavor.node_labels) if keys is None else keys
    terms: list[NodeSelectorTerm] = []
    for term in affinity:
        kept = tuple(e for e in term.match_expressions if e.key in keys)
        if not kept:
            terms = []  # a term left empty matches any flavor (the terms are ORed)
            break
        terms.append(NodeSelectorTerm(match_expressions=kept))
    selector = {key: value for key, value in selector.items() if key in keys}
    wrong = next((f"{key}={value}" for key, value in selector.items() if flavor.node_labels.get(key) != value), "")
    pod = Pod("", "", node_selector=selector, required_node_affinity=tuple(terms))
    if wrong or not matches_node_selector(pod, Node(flavor.name, labels=flavor.node_labels)):
        return f"flavor {flavor.name} doesn't match node affinity ({wrong or 'its required node affinity'})"
    return ""


def _label_keys(group: ResourceGroup, flavors: dict[str, ResourceFlavor]) -> frozenset[str]:
    return frozenset(key for name, _ in group.flavors if name in flavors for key in flavors[name].node_labels)


def assign(
    cq: ClusterQueue,
    flavors: dict[str, ResourceFlavor],
    book: QuotaBook,
    requests: dict[str, int],
    pods: tuple[PodConstraints, ...],
    oracle: Oracle | None = None,
    preempt_while_borrowing: bool = False,
) -> Assignment:
    """The flavors of ``cq`` for a workload asking ``requests`` in all (rules in the module docstring), whose pod
    templates have the constraints of ``pods`` (a flavor must suit each). ``oracle``: what preemption would find
    for a flavor-resource (None: any flavor that could fit once quota is reclaimed counts as one to preempt for);
    ``preempt_while_borrowing``: preemption may be tried beyond the nominal quota (fair sharing)."""
    covered = {resource for group in cq.resource_groups for resource in group.covered}
    missing = sorted(r for r, amount in requests.items() if amount > 0 and r != PODS and r not in covered)
    if missing:
        return Assignment(Mode.NO_FIT, why=f"resource {missing[0]} unavailable in ClusterQueue {cq.name}")
    result = Assignment(Mode.FIT)
    for group in cq.resource_groups:
        asked = {r: requests[r] for r in group.covered if requests.get(r, 0) > 0}
        if not asked:
            continue
        keys = _label_keys(group, flavors)
        best: tuple[int, int, str] | None = None  # (mode, -borrows, flavor)
        needs: set[FlavorResource] = set()
        reasons: list[str] = []
        candidates: list[str] = []
        for name, _quotas in group.flavors:
            problem = next(filter(None, (flavor_problem(flavors[name], pod, keys) for pod in pods)), "")
            if problem:
                reasons.append(problem)
            else:
                candidates.append(name)
        for at, name in enumerate(candidates):
            modes: list[tuple[int, int]] = []
            short: set[FlavorResource] = set()
            for r, amount in asked.items():
                fr = (name, r)
                top = book.ceiling(cq.name, fr)
                if top is not None and amount > top:
                    reasons.append(f"insufficient quota for {r} in flavor {name}")
                    modes.append((_NO_FIT, 0))
                    break
                if amount <= book.available(cq.name, fr):
                    modes.append((_FIT, int(book.would_borrow(cq.name, {fr: amount}))))
                    continue
                short.add(fr)
                reasons.append(f"insufficient unused quota for {r} in flavor {name}")
                if amount > book.nominal(cq.name, fr) and not preempt_while_borrowing:
                    modes.append((_NO_FIT, 0))
                    break
                last = at == len(candidates) - 1 and best is None
                found = Possibility.PREEMPT if oracle is None or last else oracle(fr, amount)
                modes.append((int(found), int(book.would_borrow(cq.name, {fr: amount}))))
            mode, borrows = min(modes, key=lambda m: (m[0], -m[1]))
            if mode == _NO_FIT:
                continue
            if best is None or (mode, -borrows) > best[:2]:
                best, needs = (mode, -borrows, name), short
            if mode == _FIT:
                break  # whenCanBorrow: MayStopSearch; whenCanPreempt: TryNextFlavor
        if best is None:
            return Assignment(Mode.NO_FIT, why="; ".join(reasons) or "no flavor")
        mode, _, name = best
        if mode != _FIT:
            result.mode = Mode.PREEMPT
            result.why = "; ".join(reasons)
            result.needs |= needs
        for r, amount in asked.items():
            result.flavors[r] = name
            result.usage[(name, r)] = amount
    if PODS in covered and requests.get(PODS, 0) > 0 and PODS not in result.flavors:
        return Assignment(Mode.NO_FIT, why=f"resource {PODS} has no flavor in ClusterQueue {cq.name}")
    return result


__all__ = ["Assignment", "Mode", "Oracle", "PodConstraints", "Possibility", "assign", "flavor_problem"]
