"""Whether one topology domain's nodes can hold a gang: the members as they are (each its own cores, gpus and every
other resource it requests, the nodes each may use), by the exact assignment search of :mod:`kubeflux.scheduler.gang`
restricted to the domain's nodes.

The confiner (:mod:`kubeflux.scheduler.confining`) asks it for the domain to place a job in now, when the engine's
match (every member on a node of its own, sized as the largest) finds none, and for whether any domain could ever
hold the job, on the empty nodes; the preemptor (:mod:`kubeflux.scheduler.preempting`) for whether the victims it
would evict leave room in one domain.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Final

from kubeflux.scheduler.devices import DeviceBooks
from kubeflux.scheduler.gang import EXHAUSTED, GangMember, assign
from kubeflux.scheduler.objects import Pod

__all__ = ["DOMAIN_BUDGET", "by_domain", "device_needs", "holds"]

DOMAIN_BUDGET: Final = 2_000
"""Node trials of the assignment search in one domain (a domain is a few nodes; many domains may be asked)."""


def holds(
    members: Sequence[GangMember],
    free: Sequence[list[int]],
    wholly_free: Sequence[bool],
    minimum: int,
    nodes: Iterable[int],
    budget: int = DOMAIN_BUDGET,
) -> bool | None:
    """Whether at least ``minimum`` of ``members`` have an assignment to the nodes ``nodes`` (indices into ``free``,
    ``wholly_free`` and the members' candidates, each member's kept in its order); None when the search gave up."""
    inside = {at: i for i, at in enumerate(nodes)}
    local = [
        GangMember(
            member.demand,
            tuple(inside[at] for at in member.candidates if at in inside),
            member.whole_node,
            member.distinct,
        )
        for member in members
    ]
    if sum(1 for member in local if member.candidates) < minimum:
        return False
    order = list(inside)
    found = assign(local, [free[at] for at in order], [wholly_free[at] for at in order], minimum, budget)
    if found is EXHAUSTED:
        return None
    return found is not None


def device_needs(devices: DeviceBooks, pods: Sequence[Pod]) -> list[int] | None:
    """The fewest devices each of ``pods`` takes for its claims not yet allocated (a claim shared counted once, for
    the first member naming it: :meth:`~kubeflux.scheduler.devices.DeviceBooks.least_needed`), as a last dimension
    of the search beside each node's devices of any class; None when none takes any (the dimension is left out)."""
    counted: set[str] = set()
    needs = [devices.least_needed(pod, counted) if pod.resource_claims else 0 for pod in pods]
    return needs if any(needs) else None


def by_domain(names: Iterable[str], domain_of: Mapping[str, int | None], left_out: set[int]) -> dict[int, list[str]]:
    """``names`` grouped by their domain (``domain_of``), in the order first seen (a domain ``left_out``, or none,
    left out)."""
    grouped: dict[int, list[str]] = {}
    for name in names:
        domain = domain_of.get(name)
        if domain is not None and domain not in left_out:
            grouped.setdefault(domain, []).append(name)
    return grouped
