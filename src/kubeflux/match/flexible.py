"""The flexible traverser (``resource-query -T flexible``, Fluxion's ``dfu_flexible_t``).

It differs from the simple traverser in four places, each mirrored here:

* sibling ``slot`` resources are alternatives (*or-slots*): a vertex that fits any of them is a slot match, and
  :meth:`FlexibleTraverser._dom_slot` explores the union of their shapes once, then picks the mix of slots that
  fits the most slots (a memoised search over the remaining counts, ``select_or_config``);
* ``xor_slot`` siblings are exclusive alternatives: the request is split into one variant per choice and the
  variants are tried in order; the first that matches wins;
* the aggregate counts of sibling alternatives, ``slot`` or ``xor_slot``, are the minimum over them instead of the
  sum (:meth:`FlexibleTraverser.aggregate_up`): the pruning filters' lower bounds, and at the root the counts
  an ``allocate_orelse_reserve`` asks the root's filter to find a start time for;
* a slot's subtree filter failing does not prune by itself: the last resource checked decides.
"""

from __future__ import annotations

import dataclasses
from typing import Final

from kubeflux.match.evaluation import Excluded, Kids
from kubeflux.match.meta import Errno, JobMeta, MatchFailure
from kubeflux.match.request import Request, calc_count, effective_max
from kubeflux.match.scoring import Scoring
from kubeflux.match.slots import take_slot
from kubeflux.match.state import SLOT
from kubeflux.match.traverser import Traverser
from kubeflux.match.visit import Visit
from kubeflux.resources.graph import Vertex

XOR_SLOT: Final = "xor_slot"
MAX_VARIANTS: Final = 4096
"""The most requests a jobspec's xor_slot choices may expand to."""

Counts = tuple[tuple[str, int], ...]
Config = tuple[Counts, int, int]
"""(the counts left after the chosen slot, how many slots fit from here, the chosen slot's index)."""


def split_xor_slots(resources: list[Request]) -> list[list[Request]]:
    """One request list per combination of ``xor_slot`` choices, each ``xor_slot`` made a ``slot``
    (Fluxion's ``split_xor_slots``): required siblings combine as a cross product of their own expansions,
    and each variant gets exactly one of the level's xor choices. Without any, the one variant is unchanged."""
    variants: list[list[Request]] = [[]]
    choices: list[Request] = []
    for resource in resources:
        expansions = split_xor_slots(resource.with_)
        if resource.type == XOR_SLOT:
            choices.extend(dataclasses.replace(resource, type=SLOT, with_=option, shape=-1) for option in expansions)
            continue
        variants = [
            [
                *variant,
                resource if _same(option, resource.with_) else dataclasses.replace(resource, with_=option, shape=-1),
            ]
            for variant in variants
            for option in expansions
        ]
        if len(variants) > MAX_VARIANTS:
            raise MatchFailure(Errno.EINVAL, f"xor_slot choices expand to more than {MAX_VARIANTS} requests")
    if not choices:
        return variants
    return [[*variant, choice] for variant in variants for choice in choices]


def _same(left: list[Request], right: list[Request]) -> bool:
    return len(left) == len(right) and all(a is b for a, b in zip(left, right, strict=True))


def _check_alternatives(resources: list[Request]) -> None:
    """Refuse (EINVAL) an or-slot alternative that requests nothing below it.

    Every sibling of a slot is another shape a slot may take (``_dom_slot``). One with nothing below it fits
    without using anything up, so the search for the best mix of slots (``select_or_config``) would recurse on
    the same counts without end; in Fluxion the stack overflows and resource-query crashes.
    """
    if len(resources) > 1 and any(resource.type == SLOT for resource in resources):
        for resource in resources:
            if not resource.with_:
                name = f"{resource.type} {resource.label}" if resource.label else resource.type
                raise MatchFailure(
                    Errno.EINVAL,
                    f"{name} requests nothing below it, but it is a sibling of a slot: the flexible traverser "
                    "takes each sibling of a slot as another shape of the slot, and a shape needs resources",
                )
    for resource in resources:
        _check_alternatives(resource.with_)


class FlexibleTraverser(Traverser):
    """DFU matching where sibling slots are alternatives."""

    slot_bounds = False  # (its slots may be alternatives: :mod:`kubeflux.match.slotbound` counts plain ones)
    count_free_parts = False  # (its slots are cut by their count below the root)

    def select(self, root_visit: Visit, excluded: Excluded | None = None) -> None:
        resources = root_visit.resources
        variants = split_xor_slots(resources)
        for variant in variants:
            _check_alternatives(variant)
        if len(variants) == 1 and _same(variants[0], resources):
            super().select(root_visit, excluded)
            return
        failure = MatchFailure(Errno.EBUSY)
        for variant in variants:
            self.prime_jobspec(variant, {}, root_visit.policy)
            try:
                super().select(root_visit.below(variant, True, root_visit.exclusive), excluded)
            except MatchFailure as exc:
                if exc.errno is Errno.EINVAL:
                    raise
                failure = exc
                continue
            return
        raise failure

    def aggregate_up(self, resource: Request, to_parent: dict[str, int], total: set[str]) -> None:
        """Fluxion's ``dfu_flexible_t::prime_jobspec``: the aggregates of sibling alternatives (or-slots, and the
        xor_slots a match splits into one slot each) are the minimum of their needs, met in order; a type an
        alternative lacks is lowered to 0 only if an earlier one brought it (Fluxion's order, kept). Summed, the
        alternatives of an xor request would ask the root for all its shapes at once: a reservation would be
        refused (a count beyond the graph) or placed later than Fluxion places it."""
        if resource.type not in (SLOT, XOR_SLOT):
            Traverser.aggregate_up(self, resource, to_parent, total)
            return
        for type, count in resource.user_data.items():
            if type in total:
                wanted = resource.min * count
                to_parent[type] = min(to_parent.get(type, wanted), wanted)
        for type in list(to_parent):
            if type not in resource.user_data and type in total:
                to_parent[type] = min(to_parent[type], 0)

    def _match_kind(
        self, vertex: Vertex, resources: list[Request], pristine: bool
    ) -> tuple[str, list[Request], int, str, bool]:
        matched_resource: Request | None = None
        slots: list[Request] | None = None
        nslots = 0
        matched = or_matched = False
        for resource in resources:
            if resource.type == vertex.type:
                if matched or or_matched:
                    return "none", resources, 0, "", pristine
                matched_resource = resource
                for child in resource.with_:
                    if child.type == SLOT:
                        slots = resource.with_
                        nslots = effective_max(child)
                matched = True
            elif resource.type == SLOT:
                if matched:
                    return "none", resources, 0, "", pristine
                slots = resources
                nslots = effective_max(resource)
                or_matched = True
        if slots is not None:
            if any(self.schedule.slot_fits(vertex, slot) for slot in slots):
                return "slot", slots, nslots, "", False
            return ("pristine" if pristine else "none"), resources, nslots, "", pristine
        if matched_resource is not None:
            return "resource", matched_resource.with_, nslots, "", False
        return ("pristine" if pristine else "none"), resources, nslots, "", pristine

    def _prune_resources(self, meta: JobMeta, exclusive: bool, vertex: Vertex, resources: list[Request]) -> bool:
        ok = True
        for resource in resources:
            if vertex.type != resource.type and resource.type != SLOT:
                continue
            if resource.type != SLOT:
                if not self._by_excl(meta, exclusive, vertex, resource):
                    return False
                if not self.schedule.by_subplan(meta, vertex.uid, resource):
                    return False
                ok = True
            else:
                ok = self.schedule.by_subplan(meta, vertex.uid, resource)
        return ok

    def _dom_slot(
        self, visit: Visit, children: list[tuple[int, int]], nslots: int, label: str, dfu: Scoring, kids: Kids
    ) -> None:
        slots = visit.resources
        union: dict[str, Request] = {}
        for slot in slots:
            for element in slot.with_:
                known = union.get(element.type)
                if known is None or known.min < element.min:
                    union[element.type] = element
        shapes = list(union.values())
        self.keys.sign(shapes)
        dfu_slot = Scoring()
        if not self._explore(visit.below(shapes, visit.pristine, True), children, dfu_slot, nslots, kids):
            return
        visit.policy.finish_slot(dfu_slot)
        counts: Counts = tuple(sorted((type, dfu_slot.qualified_count(type)) for type in union))
        memo: dict[Counts, Config] = {}
        config = _select_or_config(slots, counts, nslots, memo)
        groups = []
        for _ in range(config[1]):
            slot_group = take_slot(slots[config[2]].with_, dfu_slot, "")
            if slot_group is None:
                return
            groups.append(slot_group)
            config = memo.get(config[0], ((), 0, 0))
        for group in groups:
            dfu.add(SLOT, group)


def _select_or_config(slots: list[Request], counts: Counts, nslots: int, memo: dict[Counts, Config]) -> Config:
    """How many of ``slots`` fit in ``counts``, choosing the best slot first (Fluxion's ``select_or_config``)."""
    known = memo.get(counts)
    if known is not None:
        return known
    available = dict(counts)
    if len(slots) == 1:
        matches = nslots
        for element in slots[0].with_:
            have = available.get(element.type)
            count = calc_count(element, have or 0)
            if have is None or have < count or count <= 0:
                matches = 0
                break
            matches = min(matches, have // count)
        memo[counts] = (counts, matches, 0)
        return memo[counts]
    best = -1
    for index, slot in enumerate(slots):
        left = dict(available)
        fits = True
        for element in slot.with_:
            count = calc_count(element, available.get(element.type, 0))
            if count <= 0:
                fits = False
                break
            left[element.type] = left.get(element.type, 0) - count
        if not fits:
            continue
        after: Counts = tuple(sorted(left.items()))
        score = _select_or_config(slots, after, nslots, memo)[1]
        if best < score:
            best = score
            memo[counts] = (after, best + 1, index)
    if best < 0:
        memo[counts] = ((), 0, -1)
    return memo[counts]
