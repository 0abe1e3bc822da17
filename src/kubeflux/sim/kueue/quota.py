"""Quota accounting of the ClusterQueues and their cohorts, as Kueue's cache computes it (``resource_node.go``).

Each ClusterQueue has, per flavor and resource (a ``FlavorResource``), a nominal quota, an optional borrowing limit
and an optional lending limit, and a usage: the sum of what its admitted workloads ask. Without a cohort it may use
its nominal quota. In a cohort, the part of each member's nominal quota beyond its *guaranteed* part (nominal −
lending limit; all of it without a lending limit) is pooled: a member may use what is left of its own guaranteed
part, plus what is left in the pool, but no more than its nominal quota plus its borrowing limit.

``available(cq, fr)`` = ``max(0, guaranteed − usage)`` + ``min(pool capacity − pool usage, nominal − guaranteed −
max(0, usage − guaranteed) + borrowingLimit)``, the pool's usage being each member's usage beyond its guaranteed
part.

With fair sharing, a ClusterQueue's *share* (:meth:`QuotaBook.share`) is Kueue's weighted dominant resource share
(``pkg/cache``'s ``dominantResourceShare``): per resource, what it uses above its nominal quota summed over flavors,
× 1000 / what its cohort lends of that resource (each member's nominal − guaranteed, summed over flavors), the largest
of these, divided by its weight; 0 when it borrows nothing (or has no cohort), infinite when it borrows at weight 0.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

from kubeflux.sim.kueue.objects import ClusterQueue, ResourceQuota

FlavorResource = tuple[str, str]
"""``(flavor, resource)``."""
Usage = dict[FlavorResource, int]


class QuotaBook:
    """The quotas and usage of every ClusterQueue (see the module docstring)."""

    def __init__(self, queues: Iterable[ClusterQueue]) -> None:
        self.quotas: dict[str, dict[FlavorResource, ResourceQuota]] = {}
        self.usage: dict[str, Usage] = {}
        self.cohort_of: dict[str, str] = {}
        self.members: dict[str, list[str]] = {}
        for cq in queues:
            self.quotas[cq.name] = cq.quotas()
            self.usage[cq.name] = {}
            if cq.cohort:
                self.cohort_of[cq.name] = cq.cohort
                self.members.setdefault(cq.cohort, []).append(cq.name)
        self.lendable: dict[str, dict[str, int]] = {}
        """Per cohort, per resource, what its members lend in all (nominal − guaranteed, over every flavor)."""
        for cohort, members in self.members.items():
            lent = self.lendable[cohort] = {}
            for member in members:
                for (_flavor, resource), quota in self.quotas[member].items():
                    lent[resource] = lent.get(resource, 0) + quota.nominal - quota.guaranteed

    def _quota(self, cq: str, fr: FlavorResource) -> ResourceQuota:
        return self.quotas[cq].get(fr) or _NONE

    def nominal(self, cq: str, fr: FlavorResource) -> int:
        return self._quota(cq, fr).nominal

    def pool(self, cohort: str, fr: FlavorResource) -> int:
        """What the cohort's members lend of ``fr`` and is not used: capacity − usage of the pool."""
        left = 0
        for member in self.members[cohort]:
            quota = self._quota(member, fr)
            guaranteed = quota.guaranteed
            left += quota.nominal - guaranteed - max(0, self.usage[member].get(fr, 0) - guaranteed)
        return left

    def available(self, cq: str, fr: FlavorResource, borrow: bool = True) -> int:
        """How much more of ``fr`` the ClusterQueue ``cq`` may use now (may be negative after a quota shrank);
        with ``borrow`` False, only what is left of its nominal quota (and, in a cohort, of the pool)."""
        quota = self._quota(cq, fr)
        used = self.usage[cq].get(fr, 0)
        cohort = self.cohort_of.get(cq)
        if cohort is None:
            return quota.nominal - used
        guaranteed = quota.guaranteed
        parent = self.pool(cohort, fr)
        stored = quota.nominal - guaranteed - max(0, used - guaranteed)
        limit = quota.borrowing_limit if borrow else 0
        if limit is not None:
            parent = min(parent, stored + limit)
        return max(0, guaranteed - used) + parent

    def borrowing(self, cq: str, fr: FlavorResource | None = None) -> bool:
        """Whether ``cq`` uses more than its nominal quota of ``fr`` (of any flavor-resource when None)."""
        usage = self.usage[cq]
        frs = usage if fr is None else (fr,)
        return any(usage.get(item, 0) > self._quota(cq, item).nominal for item in frs)

    def add(self, cq: str, amounts: Mapping[FlavorResource, int], sign: int = 1) -> None:
        """Count (``sign`` 1) or release (``sign`` -1) a workload's ``amounts`` in ``cq``'s usage."""
        usage = self.usage[cq]
        for fr, amount in amounts.items():
            usage[fr] = usage.get(fr, 0) + sign * amount

    def fits(self, cq: str, amounts: Mapping[FlavorResource, int], borrow: bool = True) -> bool:
        return all(amount <= self.available(cq, fr, borrow) for fr, amount in amounts.items())

    def would_borrow(self, cq: str, amounts: Mapping[FlavorResource, int]) -> bool:
        """Whether ``cq`` would use more than its nominal quota once ``amounts`` are added."""
        usage = self.usage[cq]
        return any(usage.get(fr, 0) + amount > self._quota(cq, fr).nominal for fr, amount in amounts.items())

    def ceiling(self, cq: str, fr: FlavorResource) -> int | None:
        """The most of ``fr`` ``cq`` could ever use (nominal + borrowing limit, capped by what its cohort lends);
        None when unbounded by a limit but by the cohort."""
        quota = self._quota(cq, fr)
        cohort = self.cohort_of.get(cq)
        if cohort is None:
            return quota.nominal
        others = sum(
            self._quota(m, fr).nominal - self._quota(m, fr).guaranteed for m in self.members[cohort] if m != cq
        )
        most = quota.nominal + others
        return most if quota.borrowing_limit is None else min(most, quota.nominal + quota.borrowing_limit)

    def share(self, cq: str, weight: float, extra: Mapping[FlavorResource, int] | None = None) -> float:
        """Kueue's weighted dominant resource share of ``cq`` (module docstring), with ``extra`` added to its usage
        (a workload it would admit)."""
        cohort = self.cohort_of.get(cq)
        if cohort is None:
            return 0.0
        usage = self.usage[cq]
        borrowed: dict[str, int] = {}
        for fr, quota in self.quotas[cq].items():
            over = usage.get(fr, 0) + (extra.get(fr, 0) if extra else 0) - quota.nominal
            if over > 0:
                borrowed[fr[1]] = borrowed.get(fr[1], 0) + over
        if not borrowed:
            return 0.0
        if weight == 0:
            return math.inf
        lendable = self.lendable[cohort]
        ratio = max(
            (amount * 1000 / lendable[r] for r, amount in borrowed.items() if lendable.get(r, 0) > 0), default=0.0
        )
        return ratio / weight


_NONE = ResourceQuota(0)

__all__ = ["FlavorResource", "QuotaBook", "Usage"]
