"""The rules of preemption that hold whoever preempts: what a PodDisruptionBudget allows, and kube-scheduler
v1.36's DefaultPreemption choice of victims on a node and of one node among the candidates.

Pure functions over plain values (no cluster, no clock), so the kube-default baseline, kubeflux's own job-level
preemption and the tests share one reading of Kubernetes' rules:

* **PodDisruptionBudget status** (``pkg/controller/disruption``): the pods a budget's selector matches in its
  namespace (an empty selector matches none in ``policy/v1``); ``minAvailable`` (a count, or a percentage of the
  expected pods rounded up) or ``maxUnavailable`` (likewise, rounded up) gives the desired healthy count;
  ``disruptionsAllowed`` is the healthy (Ready, not deleted) pods beyond it, never negative. A percentage or
  ``maxUnavailable`` needs the expected count from the pods' controllers' scale: a pod whose controller has none
  (a Job's) leaves the budget allowing nothing, as the disruption controller does (``found no controllers``).
* **filterPodsWithPDBViolation**: the candidate victims, in order, each take one disruption from every budget that
  matches them (not one that already lists them as disrupted); a victim that takes a budget below zero violates it.
* **SelectVictimsOnNode**: every pod of lower priority than the preemptor is taken off the node; when the
  preemptor fits then, the pods are put back one by one, most important first (higher priority, then earlier
  start), those whose eviction would violate a budget before the others, and each that fits back is spared. The
  rest are the node's victims, with how many budgets they violate.
* **pickOneNodeForPreemption**: among candidate nodes, the fewest budget violations, then the lowest priority of
  the most important victim, then the smallest sum of victims' priorities (each shifted by 2^31 so negative ones
  count), then the fewest victims, then the latest start of the most important victims; then the first.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Final

from kubeflux.scheduler.objects import DisruptionBudget, LabelSelector, SelectorRequirement

__all__ = [
    "DisruptionBudget",
    "LabelSelector",
    "NodeVictims",
    "RunningPod",
    "SelectorRequirement",
    "VictimJob",
    "choose_victim_jobs",
    "disruptions_allowed",
    "evictable",
    "more_important",
    "pick_one_node",
    "select_victims_on_node",
    "split_by_budget",
]

PRIORITY_SHIFT: Final = 2**31
"""``math.MaxInt32 + 1``: kube-scheduler adds it to each victim's priority before summing (negative priorities)."""


def _scaled(value: int | str, expected: int) -> int:
    """``intstr.GetScaledValueFromIntOrPercent(value, expected, roundUp=true)``."""
    if isinstance(value, int):
        return value
    if not value.endswith("%") or not value[:-1].isdigit():
        raise ValueError(f"{value!r}: not an integer or a percentage such as '50%'")
    return math.ceil(int(value[:-1]) * expected / 100)


def disruptions_allowed(budget: DisruptionBudget, healthy: int, expected: int | None = None) -> int:
    """``status.disruptionsAllowed`` of ``budget``: ``healthy`` of the pods it selects are Ready and not being
    deleted; ``expected`` is the sum of the scale of those pods' controllers (pods without a controller left out),
    None when one of them has a controller without a scale (a Job): then a percentage or ``maxUnavailable`` cannot
    be computed, the controller's sync fails and nothing is allowed. Neither field set allows nothing."""
    if budget.max_unavailable is not None:
        if expected is None or expected <= 0:
            return 0
        desired = max(expected - _scaled(budget.max_unavailable, expected), 0)
    elif isinstance(budget.min_available, int):
        desired = budget.min_available
    elif budget.min_available is not None:
        if expected is None or expected <= 0:
            return 0
        desired = _scaled(budget.min_available, expected)
    else:
        return 0
    return max(healthy - desired, 0)


@dataclass(frozen=True, slots=True)
class RunningPod:
    """What preemption reads of a bound pod."""

    namespace: str
    name: str
    priority: int
    start_time: float
    """``status.startTime`` (when the kubelet took it)."""
    labels: Mapping[str, str]

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


def more_important(a: RunningPod, b: RunningPod) -> bool:
    """``util.MoreImportantPod``: higher priority, then the earlier start."""
    if a.priority != b.priority:
        return a.priority > b.priority
    return a.start_time < b.start_time


def _importance(pod: RunningPod) -> tuple[int, float]:
    return (-pod.priority, pod.start_time)


def split_by_budget(
    pods: Sequence[RunningPod],
    budgets: Sequence[DisruptionBudget],
    allowed: Mapping[str, int],
    *,
    policy_v1: bool = False,
) -> tuple[list[RunningPod], list[RunningPod]]:
    """``filterPodsWithPDBViolation``: ``pods`` (in the order given) split into those whose eviction would violate
    a budget and the others. ``allowed`` maps ``namespace/name`` of each budget to its ``disruptionsAllowed``.
    ``policy_v1``: budgets select pods as the Eviction API reads them (an empty selector selects every pod of its
    namespace), not as kube-scheduler does (it selects none), and a pod two budgets select violates (the Eviction
    API refuses it whatever they allow)."""
    left = {f"{b.namespace}/{b.name}": allowed.get(f"{b.namespace}/{b.name}", 0) for b in budgets}
    violating: list[RunningPod] = []
    sparing: list[RunningPod] = []
    for pod in pods:
        violated = False
        if policy_v1 and sum(1 for budget in budgets if budget.selects(pod.namespace, pod.labels)) > 1:
            violated = True  # the Eviction API refuses a pod that more than one budget selects (a 500)
        if pod.labels or policy_v1:
            for budget in budgets:
                guards = budget.selects if policy_v1 else budget.covers
                if not guards(pod.namespace, pod.labels) or pod.name in budget.disrupted:
                    continue
                key = f"{budget.namespace}/{budget.name}"
                left[key] -= 1
                if left[key] < 0:
                    violated = True
        (violating if violated else sparing).append(pod)
    return violating, sparing


@dataclass(frozen=True, slots=True)
class NodeVictims:
    """The pods to evict from ``node`` so the preemptor fits there, most important first."""

    node: str
    pods: tuple[RunningPod, ...]
    violations: int
    """How many of them violate a PodDisruptionBudget."""


def select_victims_on_node(
    node: str,
    preemptor_priority: int,
    pods: Sequence[RunningPod],
    fits_without: Callable[[frozenset[str]], bool],
    budgets: Sequence[DisruptionBudget] = (),
    allowed: Mapping[str, int] | None = None,
) -> NodeVictims | None:
    """kube-scheduler's ``SelectVictimsOnNode``. ``fits_without(keys)`` says whether the preemptor passes the
    filters on ``node`` once the pods of ``keys`` are gone. None: the node is no candidate (no pod of lower
    priority, or the preemptor does not fit even without all of them)."""
    lower = sorted((pod for pod in pods if pod.priority < preemptor_priority), key=_importance)
    if not lower:
        return None
    removed = {pod.key for pod in lower}
    if not fits_without(frozenset(removed)):
        return None
    violating, sparing = split_by_budget(lower, budgets, allowed or {})
    victims: list[RunningPod] = []
    violations = 0
    for group, counts in ((violating, True), (sparing, False)):
        for pod in group:
            removed.discard(pod.key)
            if not fits_without(frozenset(removed)):
                removed.add(pod.key)
                victims.append(pod)
                violations += counts
    if violating and sparing:
        victims.sort(key=_importance)
    return NodeVictims(node, tuple(victims), violations)


def _earliest_start_of_most_important(victims: NodeVictims) -> float:
    """``util.GetEarliestPodStartTime``: the earliest start among the victims of the highest priority."""
    top = victims.pods[0].priority
    return min(pod.start_time for pod in victims.pods if pod.priority == top)


def pick_one_node(candidates: Sequence[NodeVictims]) -> NodeVictims | None:
    """kube-scheduler's ``pickOneNodeForPreemption`` (the module docstring); None when there is no candidate."""
    if not candidates:
        return None
    for candidate in candidates:
        if not candidate.pods:
            return candidate  # a node where nothing need go (kube-scheduler takes it at once)

    def rank(victims: NodeVictims) -> tuple[int, int, int, int, float]:
        return (
            victims.violations,
            victims.pods[0].priority,
            sum(pod.priority + PRIORITY_SHIFT for pod in victims.pods),
            len(victims.pods),
            -_earliest_start_of_most_important(victims),
        )

    return min(candidates, key=rank)  # min keeps the first of equals


# --- kubeflux: whole jobs ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class VictimJob:
    """A running job (a lone pod or a whole gang) that a job of higher priority may evict, whole."""

    key: str
    priority: int
    work_lost: float
    """What evicting it now throws away: its elapsed run time × the resources it holds (the caller's measure)."""
    pods: tuple[RunningPod, ...]


SEARCH_LIMIT: Final = 2_000
"""How many victim sets :func:`choose_victim_jobs` looks at, cheapest first, before it settles for a greedy one."""


def _within_budgets(
    jobs: Sequence[VictimJob], budgets: Sequence[DisruptionBudget], allowed: Mapping[str, int], policy_v1: bool
) -> bool:
    pods = [pod for job in jobs for pod in job.pods]
    violating, _ = split_by_budget(pods, budgets, allowed, policy_v1=policy_v1)
    return not violating


def evictable(
    jobs: Sequence[VictimJob], budgets: Sequence[DisruptionBudget], allowed: Mapping[str, int], policy_v1: bool
) -> list[VictimJob]:
    """The jobs whose eviction alone keeps every budget: one that alone takes a budget below zero is in no allowed
    set (a set only takes more), so it is left out before any search, and budgets that guard everything cost one
    look per job, not a search per tier."""
    if not budgets:
        return list(jobs)
    return [job for job in jobs if _within_budgets([job], budgets, allowed, policy_v1)]


def choose_victim_jobs(
    preemptor_priority: int,
    running: Sequence[VictimJob],
    fits_without: Callable[[frozenset[str]], bool],
    budgets: Sequence[DisruptionBudget] = (),
    allowed: Mapping[str, int] | None = None,
    limit: int = SEARCH_LIMIT,
    *,
    policy_v1: bool = False,
) -> tuple[VictimJob, ...] | None:
    """The jobs to evict, whole, so that a job of ``preemptor_priority`` starts now, or None when no such set
    exists. ``fits_without(keys)`` says whether it would start now once the jobs of ``keys`` are gone (it must be
    monotone: evicting more never hurts).

    Only jobs of lower priority are candidates, and no set whose evictions would take a PodDisruptionBudget below
    zero. Among the sets that let the preemptor start, the chosen one is the least in this order: the lowest
    priority of its most important job (evict only from the lowest priority tier that is enough), then the least
    work lost, then the fewest jobs. Such a set is minimal: no job in it could be spared. The search tests sets in
    that order, cheapest first; after ``limit`` sets it takes the tier's jobs by least work lost until the
    preemptor fits and spares, most work first, every job it can do without (still minimal, maybe not the
    cheapest). ``policy_v1``: budgets select pods as the Eviction API reads them (:func:`split_by_budget`)."""
    allowed = allowed or {}
    lower = sorted(
        evictable([job for job in running if job.priority < preemptor_priority], budgets, allowed, policy_v1),
        key=lambda j: (j.priority, j.key),
    )
    tiers = sorted({job.priority for job in lower})
    keeps_budgets: Callable[[Sequence[VictimJob]], bool] = partial(
        _within_budgets, budgets=budgets, allowed=allowed, policy_v1=policy_v1
    )
    for tier in tiers:
        pool = sorted((job for job in lower if job.priority <= tier), key=lambda j: (j.work_lost, j.key))
        if not fits_without(frozenset(job.key for job in pool)):
            continue
        chosen = _cheapest(pool, fits_without, keeps_budgets, limit)
        if chosen is not None:
            return chosen
    return None


def _cheapest(
    pool: Sequence[VictimJob],
    fits_without: Callable[[frozenset[str]], bool],
    keeps_budgets: Callable[[Sequence[VictimJob]], bool],
    limit: int,
) -> tuple[VictimJob, ...] | None:
    """The subset of ``pool`` (sorted by work lost) of least (work lost, size) that lets the preemptor fit and
    keeps every budget (``keeps_budgets``), by best-first enumeration of subsets; a greedy one after ``limit`` of
    them."""
    # Each state is a subset given by ascending indices; its children add the next index, or replace its last
    # index by the next: every subset is reached once, in nondecreasing (work, size) order.
    heap: list[tuple[float, int, tuple[int, ...]]] = [(pool[0].work_lost, 1, (0,))] if pool else []
    looked = 0
    while heap and looked < limit:
        looked += 1
        work, size, indices = heapq.heappop(heap)
        last = indices[-1]
        if last + 1 < len(pool):
            nxt = pool[last + 1]
            heapq.heappush(heap, (work + nxt.work_lost, size + 1, (*indices, last + 1)))
            heapq.heappush(heap, (work - pool[last].work_lost + nxt.work_lost, size, (*indices[:-1], last + 1)))
        jobs = [pool[i] for i in indices]
        if not keeps_budgets(jobs):
            continue
        if fits_without(frozenset(job.key for job in jobs)):
            return tuple(jobs)
    if not heap:
        return None  # every subset tested: none fits within the budgets
    return _greedy(pool, fits_without, keeps_budgets)


def _greedy(
    pool: Sequence[VictimJob],
    fits_without: Callable[[frozenset[str]], bool],
    keeps_budgets: Callable[[Sequence[VictimJob]], bool],
) -> tuple[VictimJob, ...] | None:
    taken: list[VictimJob] = []
    for job in pool:
        if not keeps_budgets([*taken, job]):
            continue
        taken.append(job)
        if fits_without(frozenset(j.key for j in taken)):
            break
    else:
        return None
    for job in sorted(taken, key=lambda j: (-j.work_lost, j.key)):
        rest = [j for j in taken if j is not job]
        if rest and fits_without(frozenset(j.key for j in rest)):
            taken = rest
    return tuple(taken)
