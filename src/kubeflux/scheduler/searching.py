"""A gang's assignment search as the placer and the reserver ask it: the numbers :func:`kubeflux.scheduler.gang.assign`
works on, read from the books, and its answer in the order the members are to be bound.

What the members ask of each other (:mod:`kubeflux.scheduler.among`) is held by the search: members kept apart by
node or domain, members kept in one domain of their affinity's key (pinned there by the confiner: every candidate of
every member in one domain, else not searched), and a topology spread constraint among them as a cap and a need per
domain, with the pods already matching in each domain counted. The nodes the members' filters refuse now (the pods
around them, their volumes) are left out of their candidates, except for that spread constraint, which the search
counts itself (a domain a single member would tip over may take one once the others are placed). The members come
back in an order of binding in which each keeps its skew (:func:`~kubeflux.scheduler.among.spread_order`).
The devices of the members' claims are a last dimension: each node's devices of any class free then (later: those
of claims whose pods are planned to end by then count as free) against the fewest each member takes, a necessary
condition (the allocator, run as each member is placed, decides).
"""

from __future__ import annotations

import dataclasses
from typing import Final

from kubeflux.scheduler.among import Among, spread_order
from kubeflux.scheduler.books import ClusterBooks
from kubeflux.scheduler.domainfit import device_needs
from kubeflux.scheduler.filtering import NodeFilter, whole_node_policy
from kubeflux.scheduler.gang import EXHAUSTED, Exhausted, GangMember, Spread, assign
from kubeflux.scheduler.objects import PODS, Pod, SpreadConstraint
from kubeflux.scheduler.podterms import affinity_held, node_counted, spread_counts
from kubeflux.scheduler.profile import Profile
from kubeflux.scheduler.queue import PendingJob

__all__ = ["Assignment", "search_assignment", "spread_of", "without_spread"]

_UNLIMITED: Final = 1 << 62

Assignment = list[tuple[str, Pod, str, int]]
"""(pod uid, pod, node, planned duration) for each member placed, in the order they are to be bound."""


def search_assignment(
    profile: Profile,
    books: ClusterBooks,
    filter: NodeFilter,
    job: PendingJob,
    at: int,
    now: int,
    minimum: int,
    exact: set[str],
) -> Assignment | Exhausted | None:
    """Nodes for at least ``minimum`` of the job's pods starting at ``at`` (now, or later for a reservation), by the
    search over what each node has free throughout the members' longest planned time (its cores counted one by one
    on the ``exact`` nodes, else by its planner: see :meth:`GraphView.free_counts`); None when there are none,
    :data:`~kubeflux.scheduler.gang.EXHAUSTED` when the search gave up."""
    graph = books.graph
    assert graph is not None
    members = list(job.pods.items())
    relation = filter.among([pod for _, pod in members])
    if relation is None:  # they ask more of each other than the search holds: placed one by one only
        return None
    durations = [profile.planned(pod, at, reserve=at > now) for _, pod in members]
    window = max(durations)
    index: dict[str, int] = {}
    names: list[str] = []
    candidates: list[tuple[int, ...]] = []
    for _, pod in members:
        mine: list[int] = []
        refused = filter.terms_unfit(without_spread(pod, relation.spread)) if at <= now else set()
        for name in filter.static_fit(pod).fit:
            if name in refused:
                continue
            position = index.get(name)
            if position is None:
                position = index[name] = len(names)
                names.append(name)
            mine.append(position)
        candidates.append(tuple(mine))
    # not kept in one domain of the affinity's key: one by one, unless pods the terms select run already (each
    # member's candidates are then the domains holding one, as its filters say, and the members bound before it add
    # no domain: they join those)
    if (
        relation.affine is not None
        and len({_label(books, name, relation.affine) for name in names}) > 1
        and affinity_held([pod for _, pod in members], books.nodes, books.pods) != {True}
    ):
        return None
    dims = sorted({res for _, pod in members for res, amount in pod.requests.items() if amount > 0})
    needs = device_needs(books.devices, [pod for _, pod in members])
    used = _devices_used(books, at, now) if needs is not None else None
    free: list[list[int]] = []
    whole: list[bool] = []
    for name in names:
        cores, gpus, wholly = graph.free_counts(name, at, window, exact=name in exact)
        room = filter.room_during(name, at, at + window)
        devices = books.devices.free_on(name, used) if used is not None else 0
        free.append([cores, gpus, *(room.get(res, 0) for res in dims), room.get(PODS, _UNLIMITED), devices])
        whole.append(wholly and name not in graph.unrecorded)
    gang = [
        GangMember(
            (*books.pod_shape(pod), *(pod.requests.get(res, 0) for res in dims), 1, needs[i] if needs else 0),
            candidates[i],
            whole_node_policy(pod, profile.policy),
            relation.flags[i],
        )
        for i, (_, pod) in enumerate(members)
    ]
    spread = spread_of(books, relation, [pod for _, pod in members], names)
    if spread is False:  # the members count the spread over different nodes: one by one
        return None
    assert not isinstance(spread, bool)
    found = assign(gang, free, whole, minimum, domains=filter.domains(relation.key, names), spread=spread)
    if found is None or found is EXHAUSTED:
        return found
    assert isinstance(found, list)
    placed = [i for i, node in enumerate(found) if node is not None]
    if spread is not None:
        domains = [spread.domain[node] for node in found if node is not None]
        counts = dict(enumerate(spread.counts))
        placed = [placed[k] for k in spread_order(domains, counts)]
    result: Assignment = []
    for i in placed:
        uid, pod = members[i]
        node = found[i]
        assert node is not None
        result.append((uid, pod, names[node], durations[i]))
    return result


def _devices_used(books: ClusterBooks, at: int, now: int) -> set[tuple[str, str, str]]:
    """The devices taken at ``at``: now every one allocated; later those of claims some pod is planned to hold
    past it (:meth:`ClusterBooks.planned_end`; the devices' own books are not in time)."""
    if at <= now:
        return books.devices.in_use()
    return books.devices.in_use_by(lambda uid: books.planned_end(uid) > at)


def spread_of(books: ClusterBooks, relation: Among, pods: list[Pod], names: list[str]) -> Spread | bool | None:
    """The spread constraint among the members ``pods`` as the search holds it over the nodes ``names``: each
    node's domain among those that count, and the matching pods already in each; None when the members carry none.

    kube-scheduler counts each member's domains over the nodes its own node selectors and tolerations admit (the
    node inclusion policies): members whose views differ are held by the union of their domains (every domain at
    least the floor: each member's least count is then no lower than in one view), provided a domain counts the same
    nodes in every view holding it (a member placed there counts for all of them); False when not (one by one)."""
    constraint = relation.spread
    if constraint is None or pods[0].terms is None:
        return None
    views: dict[object, Pod] = {}
    for pod in pods:
        view = (
            tuple(sorted(pod.node_selector.items())) if constraint.honor_affinity else (),
            pod.required_node_affinity if constraint.honor_affinity else (),
            pod.tolerations if constraint.honor_taints else (),
            pod.terms.spread if pod.terms is not None else (),
        )
        views.setdefault(view, pod)
    seen = [_view(books, pod, constraint) for pod in views.values()]
    members: dict[str, frozenset[str]] = {}
    counted: dict[str, int] = {}
    for nodes_of, counts in seen:
        for value, nodes in nodes_of.items():
            if members.setdefault(value, nodes) != nodes:
                return False  # a domain counting different nodes for different members
            counted[value] = counts[value]
    ids = {value: i for i, value in enumerate(counted)}
    domain = []
    for name in names:
        node = books.nodes.get(name)
        label = node.labels.get(constraint.topology_key) if node is not None else None
        domain.append(ids[label] if label is not None and name in members.get(label, ()) else -1)
    few = any(len(counts) < constraint.min_domains for _, counts in seen)
    return Spread(domain, list(counted.values()), constraint.max_skew, few)


def _view(
    books: ClusterBooks, pod: Pod, constraint: SpreadConstraint
) -> tuple[dict[str, frozenset[str]], dict[str, int]]:
    """The nodes of each domain ``constraint`` counts for ``pod`` (a node without a key of its constraints counts
    for none, nor one its node inclusion policies leave out), and the matching pods in each."""
    spread = pod.terms.spread if pod.terms is not None else ()
    counts = spread_counts(pod, books.nodes, books.pods)[spread.index(constraint)]
    keys = [c.topology_key for c in spread]
    nodes: dict[str, set[str]] = {}
    for name, node in books.nodes.items():
        labels = node.labels
        if all(key in labels for key in keys) and node_counted(constraint, pod, node):
            nodes.setdefault(labels[constraint.topology_key], set()).add(name)
    return {value: frozenset(names) for value, names in nodes.items()}, counts


def without_spread(pod: Pod, constraint: SpreadConstraint | None) -> Pod:
    """``pod`` without the spread constraint among the members (the search counts it), for the filters that say
    which nodes refuse it whatever the other members do."""
    terms = pod.terms
    if constraint is None or terms is None:
        return pod
    kept = tuple(c for c in terms.spread if c != constraint)
    return dataclasses.replace(pod, terms=dataclasses.replace(terms, spread=kept))


def _label(books: ClusterBooks, name: str, key: str) -> str | None:
    node = books.nodes.get(name)
    return node.labels.get(key) if node is not None else None
