"""What a gang's members ask of each other, as the assignment search (:mod:`kubeflux.scheduler.gang`) holds it.

A pod group's members often constrain each other through the pods around them: required anti-affinity among them
(one rank per node or per zone), the same host ports, required pod affinity among them (all in one zone or rack),
a ``DoNotSchedule`` topology spread constraint selecting them (ranks spread evenly over zones). kube-scheduler checks
each member against the pods bound before it; kubeflux places the whole gang in one search instead, and needs these
relations as numbers the search can hold (:func:`among`):

* **apart**: the flagged members must stay in distinct domains of a key (``""``: distinct nodes);
* **affine**: every member in one domain of a key (the confiner, :mod:`kubeflux.scheduler.confining`, pins the
  gang to one domain of that level, and the search then sees only its nodes);
* **spread**: a per-domain cap, with the pods already matching in each domain counted: the final counts of the
  domains must keep every member's skew in some order of binding them (:func:`spread_order` gives one).

None when the members ask more of each other than that (several keys, terms that select some members but not
others, different constraints on different members): such members are placed one by one, each filtered against
those placed before it, never by the search.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from kubeflux.scheduler.objects import Pod, SpreadConstraint
from kubeflux.scheduler.podterms import HOSTNAME_LABEL

__all__ = ["Among", "affine_key", "among", "spread_order"]

LabelsOf = Callable[[str], Mapping[str, str]]


@dataclass(frozen=True, slots=True)
class Among:
    """What the members ask of each other (see the module docstring)."""

    key: str
    """The topology key by whose domains the flagged members must stay apart ("" for the nodes themselves)."""
    flags: list[bool]
    """Each member: kept apart from the other flagged ones."""
    affine: str | None = None
    """The topology key of required pod affinity among the members: all of them in one domain of it."""
    spread: SpreadConstraint | None = None
    """The one ``DoNotSchedule`` topology spread constraint every member carries and whose selector selects every
    member."""


def among(pods: Sequence[Pod], labels_of: LabelsOf, hostnames_distinct: Callable[[], bool]) -> Among | None:
    """What ``pods`` (a gang's members) ask of each other, as the search holds it; None when they ask more (see
    the module docstring). ``labels_of``: a namespace's labels; ``hostnames_distinct``: whether every node has a
    hostname label of its own (then anti-affinity on it is "one per node")."""
    groups: dict[tuple[str, frozenset[tuple[str, str]]], list[int]] = {}
    for i, pod in enumerate(pods):
        groups.setdefault((pod.namespace, frozenset(pod.labels.items())), []).append(i)
    firsts = [(members, pods[members[0]]) for members in groups.values()]
    keys: set[str] = set()
    flags = [False] * len(pods)
    selected: set[int] = set()
    affine = affine_key(pods, labels_of)
    if affine == "":
        return None
    spread = _spread(pods)
    if isinstance(spread, bool) or (spread is not None and affine is not None):
        return None
    for i, pod in enumerate(pods):
        terms = pod.terms
        if terms is None:
            continue
        for term in terms.anti_affinity:
            for members, other in firsts:
                if term.matches(other, labels_of(other.namespace)) and (len(members) > 1 or members[0] != i):
                    keys.add(term.topology_key)
                    flags[i] = True
                    selected.update(j for j in members if j != i)
        if terms.host_ports:
            keys.add("")
            flags[i] = True
    if any(not flags[j] for j in selected):
        return None
    if keys == {"", HOSTNAME_LABEL} and hostnames_distinct():
        keys = {""}
    if len(keys) > 1:
        return None
    return Among(keys.pop() if keys else "", flags, affine, spread)


def affine_key(pods: Sequence[Pod], labels_of: LabelsOf) -> str | None:
    """The topology key of the required pod affinity among ``pods``: every affinity term of a member selects some
    member, on one key, and each member with such terms matches all of its own (kube-scheduler lets the first of a
    self-affine set go anywhere no matching pod is yet). None when no term selects a member; "" when the members'
    affinity is more than "all in one domain of a key" (the search cannot hold it)."""
    keys: set[str] = set()
    foreign = False  # a term selecting no member: the member asks for pods that are not members
    for pod in pods:
        terms = pod.terms
        if terms is None or not terms.affinity:
            continue
        own = labels_of(pod.namespace)
        for term in terms.affinity:
            if not any(term.matches(other, labels_of(other.namespace)) for other in pods):
                foreign = True
            elif not term.matches(pod, own):
                return ""
            else:
                keys.add(term.topology_key)
    if not keys:
        return None
    return "" if foreign or len(keys) > 1 else keys.pop()


def _spread(pods: Sequence[Pod]) -> SpreadConstraint | bool | None:
    """The one spread constraint among the members (None: none selects a member); False when they ask more."""
    found: SpreadConstraint | None = None
    for pod in pods:
        terms = pod.terms
        spread = terms.spread if terms is not None else ()
        mine = [
            constraint
            for constraint in spread
            if constraint.selector is not None
            and not constraint.selector.empty
            and any(other.namespace == pod.namespace and constraint.selector.matches(other.labels) for other in pods)
        ]
        if len(mine) > 1 or (found is not None and mine != [found]):
            return False
        if mine:
            if found is None and pod is not pods[0]:
                return False  # an earlier member does not carry it
            found = mine[0]
    if found is None:
        return None
    selector = found.selector
    assert selector is not None
    if any(pod.namespace != pods[0].namespace or not selector.matches(pod.labels) for pod in pods):
        return False
    return found


def spread_order(domains: Sequence[int], counts: Mapping[int, int]) -> list[int]:
    """An order of binding members placed in spread ``domains`` (each member's domain, -1 for none) in which every
    member keeps its skew when it is bound, given the matching pods ``counts`` already in each domain: always the
    member of the domain with the fewest matching pods so far (round robin over domains, from the emptiest). When
    the final counts keep the skew of every domain a member goes to, against the least of all domains, so does each
    member in this order (the least a member meets is either its own domain's count or a domain finished already)."""
    queues: dict[int, list[int]] = {}
    for i, domain in enumerate(domains):
        queues.setdefault(domain, []).append(i)
    current = {domain: counts.get(domain, 0) for domain in queues}
    order: list[int] = []
    while queues:
        domain = min(queues, key=lambda d: (current[d], d))
        order.append(queues[domain].pop(0))
        current[domain] += 1
        if not queues[domain]:
            del queues[domain]
    return order
