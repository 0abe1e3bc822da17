"""Flavor assignment, as Kueue's ``flavorassigner`` makes it: for each resource group of the ClusterQueue that
covers a resource the workload asks, the flavors in their order, the first one that fits.

A flavor is skipped when the workload's pods cannot run on its nodes: their ``nodeSelector`` names one of the
flavor's ``nodeLabels`` with another value, or a ``NoSchedule``/``NoExecute`` taint of its ``nodeTaints`` is
tolerated neither by the pods nor by the flavor's own ``tolerations`` (which Kueue adds to them). Of the flavors
left, the first where the workload fits (borrowing from the cohort if need be: Kueue's default
``flavorFungibility``, ``whenCanBorrow: Borrow``) is taken; when none fits, the first where it would fit once
quota is reclaimed (within the ClusterQueue's nominal quota plus borrowing limit) is the one preemption is tried
for (``whenCanPreempt: TryNextFlavor``). A resource the workload asks that no resource group covers makes it
inadmissible (``pods`` is counted only when a group covers it).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import IntEnum

from kubeflux.scheduler.constraints import untolerated_taint
from kubeflux.scheduler.objects import Toleration
from kubeflux.sim.kueue.objects import PODS, ClusterQueue, ResourceFlavor
from kubeflux.sim.kueue.quota import FlavorResource, QuotaBook


class Mode(IntEnum):
    """How a workload fits a ClusterQueue now (worse is higher)."""

    FIT = 0
    PREEMPT = 1
    NO_FIT = 2


@dataclass(slots=True)
class Assignment:
    mode: Mode
    flavors: dict[str, str] = field(default_factory=dict)
    """Resource → the flavor chosen for it."""
    usage: dict[FlavorResource, int] = field(default_factory=dict)
    """What the workload would use, by flavor and resource."""
    why: str = ""
    """Why it does not fit (``Mode.NO_FIT``, or ``PREEMPT`` until victims are found)."""


def flavor_problem(flavor: ResourceFlavor, selector: dict[str, str], tolerations: tuple[Toleration, ...]) -> str:
    """Why the pods of ``selector`` and ``tolerations`` cannot run on ``flavor``'s nodes; ``""`` when they can."""
    for key, value in flavor.node_labels.items():
        wanted = selector.get(key)
        if wanted is not None and wanted != value:
            return f"flavor {flavor.name} doesn't match node affinity ({key}={wanted})"
    taint = untolerated_taint(flavor.node_taints, (*tolerations, *flavor.tolerations))
    if taint is not None:
        return f"untolerated taint {taint.key}={taint.value}:{taint.effect} in flavor {flavor.name}"
    return ""


PodConstraints = tuple[dict[str, str], tuple[Toleration, ...]]
"""A pod template's ``nodeSelector`` and tolerations, as a flavor must suit them."""


def assign(
    cq: ClusterQueue,
    flavors: dict[str, ResourceFlavor],
    book: QuotaBook,
    requests: dict[str, int],
    selector: dict[str, str],
    tolerations: tuple[Toleration, ...],
    others: tuple[PodConstraints, ...] = (),
) -> Assignment:
    """The flavors of ``cq`` for a workload asking ``requests`` in all (rules in the module docstring), whose pods
    have ``selector`` and ``tolerations`` (and, a workload of several pod templates, those of ``others``: a flavor
    must suit each of them)."""
    covered = {resource for group in cq.resource_groups for resource in group.covered}
    missing = sorted(r for r, amount in requests.items() if amount > 0 and r != PODS and r not in covered)
    if missing:
        return Assignment(Mode.NO_FIT, why=f"resource {missing[0]} unavailable in ClusterQueue {cq.name}")
    result = Assignment(Mode.FIT)
    for group in cq.resource_groups:
        asked = {r: requests[r] for r in group.covered if requests.get(r, 0) > 0}
        if not asked:
            continue
        chosen: tuple[str, Mode] | None = None
        reasons: list[str] = []
        for name, _quotas in group.flavors:
            flavor = flavors[name]
            problem = flavor_problem(flavor, selector, tolerations) or next(
                (found for pods in others if (found := flavor_problem(flavor, *pods))), ""
            )
            if problem:
                reasons.append(problem)
                continue
            amounts = {(name, r): amount for r, amount in asked.items()}
            if book.fits(cq.name, amounts):
                chosen = (name, Mode.FIT)
                break
            ceiling = [book.ceiling(cq.name, fr) for fr in amounts]
            if all(top is None or amount <= top for top, amount in zip(ceiling, amounts.values(), strict=True)):
                if chosen is None:
                    chosen = (name, Mode.PREEMPT)
                reasons.append(f"insufficient unused quota in flavor {name}")
            else:
                reasons.append(f"insufficient quota in flavor {name}")
        if chosen is None:
            return Assignment(Mode.NO_FIT, why="; ".join(reasons) or "no flavor")
        name, mode = chosen
        result.mode = max(result.mode, mode)
        if mode is not Mode.FIT:
            result.why = "; ".join(reasons)
        for r, amount in asked.items():
            result.flavors[r] = name
            result.usage[(name, r)] = amount
    if PODS in covered and requests.get(PODS, 0) > 0 and PODS not in result.flavors:
        return Assignment(Mode.NO_FIT, why=f"resource {PODS} has no flavor in ClusterQueue {cq.name}")
    return result


__all__ = ["Assignment", "Mode", "PodConstraints", "assign", "flavor_problem"]
