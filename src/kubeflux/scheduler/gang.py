"""Where each member of a gang goes: a bounded search for an assignment of pods to nodes that fits them all.

Matching a gang's members one by one, each where the match policy likes best, fails where an assignment exists:
an MPI launcher of 500m listed first takes a millicore of the first 8-core node, and the 8-core workers after it no
longer fit. Sorting members largest first fixes that case but not the general one (bin packing in several
resources). So when the one-by-one match fails, the scheduler asks this module for an assignment.

The problem, as numbers only (no graph, no Kubernetes): members with a demand vector (cores, gpus, millicores,
bytes …, pods) and the nodes each may use, in the match policy's order; nodes with a free vector (what stays free
during the window the gang would run) and whether they are wholly free (for a member of a node-exclusive policy,
which takes its node whole); optionally the topology domain of each node (its zone, say). Find, for at least
``minimum`` members, a node each, such that no node's free vector is exceeded and no two members that must stay
apart (:attr:`GangMember.distinct`: required anti-affinity among them) share a node, or a domain when domains are
given.

The search is a depth-first search with backtracking, complete up to its budget:

* members are tried largest first (by their largest share of any one node's capacity), the most constrained (fewest
  candidate nodes) first among equals: failures show early;
* members alike (same demand, same candidates) take nodes in non-decreasing candidate order, so their permutations
  are never tried twice;
* at each step, nodes that are interchangeable for the members still to place (same free vector, same membership in
  every member's candidates) are tried once;
* a member beyond the ``minimum`` may be left out (tried after every node failed for it), so the first assignment
  found places as many members as the order allows;
* the search gives up after ``budget`` node trials and says so (:data:`EXHAUSTED`): "no assignment" is then unknown,
  never claimed. The scheduler treats that as "does not fit now" and never as "can never fit".
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from enum import Enum
from typing import Final

__all__ = ["DEFAULT_BUDGET", "EXHAUSTED", "Exhausted", "GangMember", "Spread", "assign"]

DEFAULT_BUDGET: Final = 20_000
"""Node trials before a search gives up: a few milliseconds of work, far more than any gang of alike members or a
launcher-plus-workers gang needs (those take one trial per member)."""


class Exhausted(Enum):
    EXHAUSTED = "exhausted"


EXHAUSTED = Exhausted.EXHAUSTED


@dataclass(frozen=True, slots=True)
class GangMember:
    demand: tuple[int, ...]
    """What the member takes from a node, one entry per resource dimension (the same dimensions as the nodes')."""
    candidates: tuple[int, ...]
    """The nodes (indices into the free vectors) the member may use, the match policy's preferred first."""
    whole_node: bool = False
    """The member takes its node whole (a node-exclusive policy): the node must be wholly free, and is full after."""
    distinct: bool = False
    """No two distinct members share a node, or a domain when :func:`assign` is given domains (required
    anti-affinity among them on the hostname or a wider key, the same host ports)."""


@dataclass(frozen=True, slots=True)
class Spread:
    """A topology spread constraint every member carries and counts for (``maxSkew`` over the domains of a key).

    Placed in the right order (:func:`kubeflux.scheduler.among.spread_order`), the members keep their skew when the
    final counts do: for some floor ``L`` every domain ends with at least ``L`` matching pods and every domain a
    member goes to with at most ``L + max_skew`` (``L`` is 0 when fewer domains than ``minDomains`` exist). The
    search tries each floor that could hold the members: a cap and a need per domain."""

    domain: list[int]
    """Each node's spread domain (an index into :attr:`counts`), -1 for a node no member may go to (without the key,
    or in a domain that does not count)."""
    counts: list[int]
    """The matching pods already in each domain that counts (every one of them, with or without candidates)."""
    max_skew: int
    floor_zero: bool = False
    """Fewer domains count than ``minDomains``: the least count is taken as 0."""

    def floors(self, count: int) -> list[tuple[list[int], list[int]]]:
        """(caps, needs) per domain for each floor that could hold ``count`` members, the lowest floor first."""
        counts = self.counts
        if not counts:
            return []
        if self.floor_zero:
            return [([max(0, self.max_skew - c) for c in counts], [0] * len(counts))]
        low, high = min(counts), (sum(counts) + count) // len(counts)
        found = []
        for floor in range(low, max(low, high) + 1):
            needs = [max(0, floor - c) for c in counts]
            if sum(needs) <= count:
                found.append(([max(0, floor + self.max_skew - c) for c in counts], needs))
        return found


def assign(
    members: list[GangMember],
    free: list[list[int]],
    wholly_free: list[bool],
    minimum: int,
    budget: int = DEFAULT_BUDGET,
    domains: list[int] | None = None,
    spread: Spread | None = None,
) -> list[int | None] | Exhausted | None:
    """A node index per member (None for a member left out), or None when no assignment of at least ``minimum``
    members exists, or :data:`EXHAUSTED` when the budget ran out first. ``free`` and ``wholly_free`` are not
    changed. ``domains``: each node's domain (a small integer) that distinct members may not share, -1 for a node in
    none (without the key: any number of them there), else each node its own. ``spread``: the members' topology
    spread, each floor tried in turn within one budget."""
    count = len(members)
    if minimum > count:
        return None
    domain = domains if domains is not None else list(range(len(free)))
    if spread is not None:
        left = [budget]
        exhausted = False
        for caps, needs in spread.floors(count):
            if not _may_hold(members, free, spread.domain, caps, minimum):
                continue
            found = _search(members, free, wholly_free, minimum, left, domains, (spread.domain, caps, needs))
            if found is EXHAUSTED:
                exhausted = True
                if left[0] <= 0:
                    return EXHAUSTED
            elif found is not None:
                return found
        return EXHAUSTED if exhausted else None
    if count and all(member == members[0] for member in members):
        return _fill(members[0], count, free, wholly_free, minimum, domain)
    return _search(members, free, wholly_free, minimum, [budget], domains, None)


def _may_hold(
    members: list[GangMember], free: list[list[int]], domain: list[int], caps: list[int], minimum: int
) -> bool:
    """A quick necessary test of a floor: its caps, and what the domains' nodes hold of the smallest member, leave
    room for ``minimum`` members."""
    smallest = min(members, key=lambda member: sum(member.demand)).demand
    held = [0] * len(caps)
    for node, vector in enumerate(free):
        d = domain[node]
        if d >= 0:
            held[d] += min((have // need for need, have in zip(smallest, vector, strict=True) if need > 0), default=1)
    return sum(min(cap, have) for cap, have in zip(caps, held, strict=True)) >= minimum


_Caps = tuple[list[int], list[int], list[int]]
"""A spread's (node → domain, cap per domain, need per domain)."""


def _search(
    members: list[GangMember],
    free: list[list[int]],
    wholly_free: list[bool],
    minimum: int,
    left: list[int],
    domains: list[int] | None,
    capped: _Caps | None,
) -> list[int | None] | Exhausted | None:
    """The depth-first search (see the module docstring), ``left[0]`` node trials left (spent here);
    ``capped``: at most a cap and at least a need of members per spread domain."""
    count = len(members)
    budget = left[0]
    domain = domains if domains is not None else list(range(len(free)))
    caps = [list(vector) for vector in free]
    whole = list(wholly_free)
    apart = [False] * (max(domain, default=-1) + 2)  # a distinct member is in the domain (the last: -1, never)
    order = sorted(range(count), key=lambda i: _sort_key(members[i], caps))
    signature = _membership(members, len(caps))
    chosen: list[int | None] = [None] * count
    trials = 0
    optional = count - minimum

    spread_of, caps_left, needs = capped if capped is not None else ([], [], [])
    caps_left, needs = list(caps_left), list(needs)
    deficit = [sum(needs)]

    def fits(member: GangMember, node: int) -> bool:
        if (member.whole_node and not whole[node]) or (member.distinct and apart[domain[node]]):
            return False
        if capped is not None and (spread_of[node] < 0 or not caps_left[spread_of[node]]):
            return False
        cap = caps[node]
        return all(need <= have for need, have in zip(member.demand, cap, strict=True))

    def take(member: GangMember, node: int) -> tuple[list[int], bool, bool]:
        before = (caps[node], whole[node], apart[domain[node]])
        apart[domain[node]] = before[2] or (member.distinct and domain[node] >= 0)
        if member.whole_node:
            caps[node] = [0] * len(caps[node])
        else:
            caps[node] = [have - need for need, have in zip(member.demand, caps[node], strict=True)]
        whole[node] = False
        return before

    def search(depth: int, skips: int) -> bool | Exhausted:
        nonlocal trials
        if depth == count:
            return True
        index = order[depth]
        member = members[index]
        floor = -1
        if depth and _alike(member, members[order[depth - 1]]):
            previous = chosen[order[depth - 1]]
            floor = -1 if previous is None else member.candidates.index(previous)
        tried: set[tuple[object, ...]] = set()
        for position, node in enumerate(member.candidates):
            if position < floor:
                continue
            if not fits(member, node):
                continue
            # interchangeable: alike now, for every member, and (given domains) in one domain
            spread_domain = spread_of[node] if capped is not None else -1
            key = (
                tuple(caps[node]),
                whole[node],
                apart[domain[node]],
                signature[node],
                domains and domain[node],
                spread_domain,
            )
            if key in tried:
                continue
            tried.add(key)
            trials += 1
            if trials > budget:
                return EXHAUSTED
            if capped is not None:
                sd = spread_of[node]
                short = needs[sd] > 0
                if deficit[0] - short > count - depth - 1:
                    continue  # the members left could not bring every domain up to the floor
                caps_left[sd] -= 1
                needs[sd] -= short
                deficit[0] -= short
            before = take(member, node)
            chosen[index] = node
            found = search(depth + 1, skips)
            caps[node], whole[node], apart[domain[node]] = before
            if capped is not None:
                caps_left[sd] += 1
                needs[sd] += short
                deficit[0] += short
            if found is not False:
                return found
            chosen[index] = None
        if skips < optional and deficit[0] <= count - depth - 1:
            return search(depth + 1, skips + 1)
        return False

    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 2 * count + 200))  # one frame per member (and per member left out)
    try:
        found = search(0, 0) if deficit[0] <= count else False
    finally:
        sys.setrecursionlimit(limit)
    left[0] = budget - trials
    if found is EXHAUSTED:
        return EXHAUSTED
    return chosen if found else None


def _fill(
    member: GangMember, count: int, free: list[list[int]], wholly_free: list[bool], minimum: int, domain: list[int]
) -> list[int | None] | None:
    """Members all alike: as many as fit on each candidate node in turn (the order does not change how many fit);
    distinct ones one per domain."""
    chosen: list[int | None] = []
    used: set[int] = set()
    for node in member.candidates:
        if len(chosen) == count:
            break
        if member.whole_node:
            copies = (
                1 if wholly_free[node] and all(n <= h for n, h in zip(member.demand, free[node], strict=True)) else 0
            )
        else:
            copies = min(
                (have // need for need, have in zip(member.demand, free[node], strict=True) if need > 0), default=count
            )
        if member.distinct and domain[node] >= 0:
            copies = 0 if domain[node] in used else min(copies, 1)
            if copies > 0:
                used.add(domain[node])
        chosen.extend([node] * min(max(copies, 0), count - len(chosen)))
    if len(chosen) < minimum:
        return None
    return chosen + [None] * (count - len(chosen))


def _sort_key(member: GangMember, caps: list[list[int]]) -> tuple[float, int, tuple[int, ...]]:
    """Largest first: a member's largest share of the biggest free amount in each dimension; then fewest nodes."""
    share = 0.0
    for dim, need in enumerate(member.demand):
        if need <= 0:
            continue
        biggest = max((caps[node][dim] for node in member.candidates), default=0)
        share = max(share, need / biggest if biggest > 0 else float("inf"))
    if member.whole_node:
        share = max(share, 1.0)
    return (-share, len(member.candidates), member.demand)


def _alike(member: GangMember, other: GangMember) -> bool:
    return member == other


def _membership(members: list[GangMember], nodes: int) -> list[int]:
    """Per node, a bit mask of the members that may use it: nodes with equal masks are interchangeable."""
    masks = [0] * nodes
    for bit, member in enumerate(members):
        for node in member.candidates:
            masks[node] |= 1 << bit
    return masks
