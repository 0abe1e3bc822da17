"""kube-scheduler v1.36's DefaultPreemption PostFilter, for the kube-default baselines (kube-default, kube-gang,
coscheduling), over their scheduler cache.

When a pod fails its filters (``pkg/scheduler/framework/plugins/defaultpreemption`` and
``pkg/scheduler/framework/preemption``):

1. **PodEligibleToPreemptOthers**: a pod whose ``preemptionPolicy`` is ``Never`` preempts nothing (``preemption: not
   eligible due to preemptionPolicy=Never.``); nor does a pod nominated to a node where a pod of lower priority it
   evicted is still terminating (``… due to a terminating pod on the nominated node.``), unless the filters cannot
   pass on that node at all. Both keep the pod's nominated node.
2. **Candidates** (``findCandidates``, ``DryRunPreemption``): the nodes whose failure removing pods may fix
   (``Unschedulable``: NodeResourcesFit short of room or of pod slots); a node failing a static filter (cordoned,
   an untolerated taint, node affinity) or asked more than its whole allocatable is ``UnschedulableAndUnresolvable``
   and skipped. From a random offset (``seed``: a seeded draw; none: the first node) each is dry-run by
   :func:`~kubeflux.scheduler.preemption.select_victims_on_node`, with the PodDisruptionBudgets' allowed
   disruptions, until ``max(10 % of them, 100)`` candidates are found, one of them violating no budget.
3. **pickOneNodeForPreemption** (:func:`~kubeflux.scheduler.preemption.pick_one_node`) chooses among them,
   candidates violating no budget listed first.
4. **Actuation** (``prepareCandidateAsync``): each victim is evicted (:class:`~kubeflux.scheduler.messages.Evict`,
   ``budgets=False``: kube-scheduler deletes its victims, budget or not) with the event ``Preempted by pod <uid> on
   node <node>``; a victim already being evicted is skipped; a victim held at Permit (coscheduling) is rejected in
   memory instead. Pods of lower priority nominated to that node lose their nomination. The preemptor gets
   ``status.nominatedNodeName`` and its FitError message without a PostFilter part (the PostFilter succeeded).
5. With no candidate, the message ends ``preemption: 0/N nodes are available: …`` counting, per node, why: ``No
   preemption victims found for incoming pod`` (no pod of lower priority there), the filter's reasons when even
   removing them all would not do, ``Preemption is not helpful for scheduling`` (the unresolvable nodes); the
   nomination is cleared.

While nominated, a pod counts on its node for every pod of equal or lower priority scheduled there
(``addGENominatedPods``): their filters see its requests as used, so they do not take the room made for it. The
pod itself tries its nominated node first (``evaluateNominatedNode``).

``disruptionsAllowed`` is computed here, as the disruption controller would, from the pods the scheduler sees:
healthy = Running and not being deleted among the pods a budget selects (``policy/v1``: an empty selector selects
every pod of the namespace); the expected count (for a percentage or ``maxUnavailable``) counts the pods of
controllers with a scale (ReplicaSet, ReplicationController, StatefulSet: their pods present stand for their
``replicas``), pods without a controller left out, and is unknown (nothing allowed) when a pod's controller has no
scale (a Job).

Approximations: a victim's ``status.startTime`` is when the scheduler first saw it Running (the kubelet sets it a
container start earlier), and "now" for a pod not yet running, as kube-scheduler's ``GetPodStartTime``; the dry
run is sequential where kube-scheduler's is parallel (its candidates then depend on goroutine timing); the
``PreEnqueue`` gate of async preemption is not needed (a simulated eviction takes no time); a nominated pod is
counted by the filters but not by scoring.

No cost when nothing can be preempted: with no pod of lower priority on any node, the PostFilter answers from a
count per priority and one cached count of the resolvable nodes per pod shape.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

import numpy as np

from kubeflux.scheduler.constraints import fit_error_message
from kubeflux.scheduler.interface import Decision, Evict, Unschedulable
from kubeflux.scheduler.objects import PREEMPT_NEVER, DisruptionBudget, Pod, PodPhase, ResourceList
from kubeflux.scheduler.preemption import (
    NodeVictims,
    RunningPod,
    disruptions_allowed,
    pick_one_node,
    select_victims_on_node,
)
from kubeflux.scheduler.profile import LOWER_PRIORITY, NEVER, PREEMPTION_SETTINGS
from kubeflux.sim.baselines.node_table import BoolArray, NodeTable

__all__ = [
    "NO_POST_FILTER",
    "PREEMPTION_LOWER_PRIORITY",
    "PREEMPTION_NEVER",
    "PREEMPTION_SETTINGS",
    "DefaultPreemption",
    "Failure",
    "Failures",
    "Nomination",
    "Placement",
    "PostFilterResult",
    "pod_never",
]

PREEMPTION_LOWER_PRIORITY: Final = LOWER_PRIORITY
"""The setting that runs DefaultPreemption (kube-scheduler's default profile); kubeflux's profile's value."""
PREEMPTION_NEVER: Final = NEVER
"""The setting that turns it off: no PostFilter, as a profile that disables DefaultPreemption."""

NO_VICTIMS: Final = "No preemption victims found for incoming pod"
NOT_HELPFUL: Final = "Preemption is not helpful for scheduling"
NOT_ELIGIBLE_NEVER: Final = "not eligible due to preemptionPolicy=Never."
NOT_ELIGIBLE_TERMINATING: Final = "not eligible due to a terminating pod on the nominated node."
MIN_CANDIDATE_NODES_PERCENTAGE = 10
MIN_CANDIDATE_NODES_ABSOLUTE = 100
"""``DefaultPreemptionArgs`` defaults: how many candidates the dry run looks for."""
SCALED_KINDS = frozenset({"ReplicaSet", "ReplicationController", "StatefulSet"})
"""Controllers whose scale the disruption controller reads for a budget's expected pod count."""
_KEPT = 4_096


@dataclass(slots=True)
class Placement:
    """A pod counted on a node: bound (whichever scheduler bound it) or assumed by this one."""

    pod: Pod
    """Its last observed state (labels, priority, phase)."""
    node: str
    requests: ResourceList
    group: str | None
    started: float | None = None
    """When it was first seen Running (``status.startTime``'s stand-in); None while not yet."""

    @property
    def uid(self) -> str:
        return self.pod.uid


@dataclass(slots=True)
class Nomination:
    """A pending pod's ``status.nominatedNodeName``, with what the filters of other pods count for it."""

    node: str
    priority: int
    requests: ResourceList
    uid: str
    message: str
    """Its last Unschedulable message (repeated when the nomination is cleared)."""


@dataclass(slots=True)
class PostFilterResult:
    """What the PostFilter plugins said: ``reason`` to append to the FitError (empty: none), the nominated node
    (a node: set it; ``""``: clear it; None: leave it as it is) and decisions about other pods. Never modified
    (not frozen only because a frozen dataclass is slower to build): the same answer is handed to every pod that
    fails alike."""

    reason: str = ""
    nominated: str | None = ""
    decisions: tuple[Decision, ...] = ()
    freed: bool = False
    """Resources were released in memory meanwhile (victims held at Permit): the preemptor's retry need not wait
    for another cluster event, as kube-scheduler moves its pods on the failed binding cycles' event."""


NO_POST_FILTER = PostFilterResult()
"""No PostFilter plugin ran (or none said anything): the nomination is cleared."""

Failure = tuple[str, int, PostFilterResult | None]
"""How a pod failed, for others failing alike in one pass: its FitError message, its priority and, when it holds
for every pod of that priority or lower (nothing of lower priority to preempt), DefaultPreemption's answer."""
Failures = dict[tuple[object, ...], Failure]


def pod_never(pod: Pod) -> bool:
    """The pod's ``preemptionPolicy`` is ``Never``."""
    return pod.preemption_policy == PREEMPT_NEVER


WaitingVictim = Callable[[str, float], "list[Decision] | None"]
"""``(victim key, now)``: the decisions that preempt a victim held at Permit (rejected in memory), or None when
it is not held there."""


class DefaultPreemption:
    """DefaultPreemption over a baseline's cache (the module docstring). It reads, never writes, the scheduler's
    ``nodes``, ``placed`` (pod key → :class:`Placement`), ``priorities`` (priority → placed pods) and ``budgets``;
    it keeps the nominations and the victims being evicted."""

    def __init__(
        self,
        nodes: NodeTable,
        placed: dict[str, Placement],
        priorities: dict[int, int],
        budgets: dict[str, DisruptionBudget],
        rng: random.Random | None,
        waiting_victim: WaitingVictim | None = None,
    ) -> None:
        self._nodes = nodes
        self._placed = placed
        self._priorities = priorities
        self._budgets = budgets
        self._rng = rng
        self._waiting_victim = waiting_victim
        self.nominations: dict[str, Nomination] = {}
        """Pending pod key → its nomination."""
        self.evicting: dict[str, str] = {}
        """Victim key → node, from its eviction until the scheduler sees it gone."""
        self._resolvable: dict[tuple[object, ...], tuple[int, BoolArray]] = {}
        self._messages: dict[object, PostFilterResult] = {}

    # --- bookkeeping ----------------------------------------------------------------------------------------

    def forget(self, key: str, *, gone: bool = False) -> None:
        """The pod ``key`` is bound or assumed (no longer nominated), or ``gone`` (nor being evicted)."""
        self.nominations.pop(key, None)
        if gone:
            self.evicting.pop(key, None)

    def record(self, pod: Pod, nominated: str | None, message: str) -> str:
        """After a failed cycle of ``pod`` told ``message``: apply the PostFilter's ``nominated`` (see
        :class:`PostFilterResult`); the node to write as its nominated node (empty: none)."""
        if not nominated and not self.nominations:
            return ""
        if nominated is None:
            kept = self.nominations.get(pod.key)
            if kept is None:
                return ""
            kept.message = message
            return kept.node
        if nominated:
            self.nominations[pod.key] = Nomination(nominated, pod.priority, dict(pod.requests), pod.uid, message)
        else:
            self.nominations.pop(pod.key, None)
        return nominated

    def count_nominated(self, pod: Pod) -> list[Nomination]:
        """Count on their nodes the nominated pods of at least ``pod``'s priority (not ``pod``): what its filters
        see (``addGENominatedPods``). Undo with :meth:`uncount`."""
        counted = [n for key, n in self.nominations.items() if n.priority >= pod.priority and key != pod.key and n.node]
        for n in counted:
            self._nodes.add_usage(n.node, n.requests, +1)
        return counted

    def uncount(self, counted: list[Nomination]) -> None:
        for n in counted:
            self._nodes.add_usage(n.node, n.requests, -1)

    def nominated_fit(self, pod: Pod) -> str | None:
        """``evaluateNominatedNode``: the pod's nominated node when it passes the filters there now."""
        nomination = self.nominations.get(pod.key)
        table = self._nodes
        if nomination is None or nomination.node not in table.index:
            return None
        index = table.index[nomination.node]
        if table.static_mask(pod)[index] and table.fit_mask(pod.requests)[index]:
            return nomination.node
        return None

    # --- the PostFilter -------------------------------------------------------------------------------------

    def post_filter(self, pod: Pod, now: float, *, pre_filter_failed: bool = False) -> PostFilterResult:
        """DefaultPreemption's PostFilter for ``pod``, which failed its filters (or, ``pre_filter_failed``, a
        PreFilter: every node is then unresolvable). Must run while :meth:`count_nominated` counts for it.

        When :meth:`nothing_lower` holds for a pod whose policy is not ``Never``, the answer depends only on the
        pod's filters and the nodes: a scheduler may hand it to every pod failing alike while nothing is placed
        or released (kube-default's ``failures``)."""
        if pod.preemption_policy == PREEMPT_NEVER:
            return PostFilterResult(f"preemption: {NOT_ELIGIBLE_NEVER}", None)
        if pre_filter_failed:  # every node UnschedulableAndUnresolvable; nothing terminating matters then
            total = len(self._nodes.names)  # refreshed: the scheduling pass began so
            known = self._messages.get(total)
            if known is None:
                known = self._no_candidate(total, {}) if total else NO_POST_FILTER
            return known
        total = len(self._nodes)
        if total == 0:
            return PostFilterResult()
        mask = self._resolvable_mask(pod)
        if self.evicting and self._terminating_on_nominated(pod, mask):
            return PostFilterResult(f"preemption: {NOT_ELIGIBLE_TERMINATING}", None)
        count, resolvable = mask
        if self.nothing_lower(pod.priority):
            return self._no_candidate(total, {NO_VICTIMS: count} if count else {})
        names = self._nodes.names
        potential = [names[int(i)] for i in np.flatnonzero(resolvable)]
        if not potential:
            return self._no_candidate(total, {})
        candidates, reasons = self._dry_run(pod, potential)
        best = pick_one_node(candidates)
        if best is None:
            return self._no_candidate(total, reasons)
        decisions, freed = self._actuate(pod, best, now)
        return PostFilterResult("", best.node, tuple(decisions), freed)

    def nothing_lower(self, priority: int) -> bool:
        """No pod on any node has a priority below ``priority``: nothing to preempt (a victim being evicted is
        still on its node, so nothing terminates on a nominated node either)."""
        priorities = self._priorities
        return not priorities or min(priorities) >= priority

    def _no_candidate(self, total: int, reasons: dict[str, int]) -> PostFilterResult:
        """No node where preemption helps: the dry run's reasons per node checked, every other node (the
        unresolvable ones) not helpful; the nomination cleared."""
        key = (total, *sorted(reasons.items())) if reasons else total
        result = self._messages.get(key)
        if result is None:
            counts = dict(reasons)
            rest = total - sum(counts.values())
            if rest > 0:
                counts[NOT_HELPFUL] = rest
            if len(self._messages) >= _KEPT:
                self._messages.clear()
            result = self._messages[key] = PostFilterResult(f"preemption: {fit_error_message(total, counts)}", "")
        return result

    def _resolvable_mask(self, pod: Pod) -> tuple[int, BoolArray]:
        table = self._nodes
        key = (table.layout, table.static_signature(pod), tuple(sorted(pod.requests.items())))
        known = self._resolvable.get(key)
        if known is None:
            if len(self._resolvable) >= _KEPT:
                self._resolvable.clear()
            mask = table.resolvable_mask(pod)
            known = self._resolvable[key] = (int(np.count_nonzero(mask)), mask)
        return known

    def _terminating_on_nominated(self, pod: Pod, mask: tuple[int, BoolArray]) -> bool:
        nomination = self.nominations.get(pod.key)
        if nomination is None:
            return False
        index = self._nodes.index.get(nomination.node)
        if index is None or not mask[1][index]:
            return False  # the filters cannot pass there: the pod may preempt elsewhere
        for key, node in self.evicting.items():
            placed = self._placed.get(key)
            if node == nomination.node and placed is not None and placed.pod.priority < pod.priority:
                return True
        return False

    def _dry_run(self, pod: Pod, potential: list[str]) -> tuple[list[NodeVictims], dict[str, int]]:
        """``DryRunPreemption`` from a random offset: (the candidates, violating no budget first; the reasons of
        the nodes that are none)."""
        lower: dict[str, list[str]] = {}
        for key, placed in self._placed.items():
            if placed.pod.priority < pod.priority:
                lower.setdefault(placed.node, []).append(key)
        budgets = list(self._budgets.values())
        allowed = self._disruptions_allowed(budgets) if budgets else {}
        wanted = min(
            max(len(potential) * MIN_CANDIDATE_NODES_PERCENTAGE // 100, MIN_CANDIDATE_NODES_ABSOLUTE), len(potential)
        )
        offset = self._rng.randrange(len(potential)) if self._rng is not None else 0
        sparing: list[NodeVictims] = []
        violating: list[NodeVictims] = []
        reasons: dict[str, int] = {}
        for i in range(len(potential)):
            node = potential[(offset + i) % len(potential)]
            keys = lower.get(node)
            if not keys:
                reasons[NO_VICTIMS] = reasons.get(NO_VICTIMS, 0) + 1
                continue
            shortfalls = self._shortfalls(pod, node, frozenset(keys))
            if shortfalls:
                for reason in shortfalls:
                    reasons[reason] = reasons.get(reason, 0) + 1
                continue
            running = [self._running(key) for key in keys]
            victims = select_victims_on_node(node, pod.priority, running, self._fits(pod, node), budgets, allowed)
            if victims is None or not victims.pods:
                continue  # kube-scheduler: an error ("expected at least one victim pod"), the node skipped
            (violating if victims.violations else sparing).append(victims)
            if sparing and len(sparing) + len(violating) >= wanted:
                break
        return sparing[:wanted] + violating[:wanted], reasons

    def _fits(self, pod: Pod, node: str) -> Callable[[frozenset[str]], bool]:
        """Whether ``pod`` passes the filters on ``node`` once the pods of the given keys are gone."""
        return lambda gone: not self._shortfalls(pod, node, gone)

    def _shortfalls(self, pod: Pod, node: str, gone: frozenset[str]) -> list[str]:
        freed: ResourceList = {}
        for key in gone:
            for name, amount in self._placed[key].requests.items():
                freed[name] = freed.get(name, 0) + amount
        return self._nodes.shortfalls(node, pod.requests, freed, len(gone))

    def _running(self, key: str) -> RunningPod:
        placed = self._placed[key]
        pod = placed.pod
        started = placed.started if placed.started is not None else float("inf")  # not started: "now", the latest
        return RunningPod(pod.namespace, pod.name, pod.priority, started, pod.labels)

    def _disruptions_allowed(self, budgets: list[DisruptionBudget]) -> dict[str, int]:
        """Each budget's ``disruptionsAllowed`` from the pods the scheduler sees (the module docstring)."""
        healthy = dict.fromkeys((b.key for b in budgets), 0)
        expected: dict[str, int | None] = dict.fromkeys(healthy, 0)
        for placed in self._placed.values():
            pod = placed.pod
            for budget in budgets:
                if not budget.selects(pod.namespace, pod.labels):
                    continue
                key = budget.key
                if pod.phase is PodPhase.RUNNING and not pod.deleted:
                    healthy[key] += 1
                count = expected[key]
                if pod.owner and count is not None:
                    expected[key] = count + 1 if pod.owner.partition("/")[0] in SCALED_KINDS else None
        return {b.key: disruptions_allowed(b, healthy[b.key], expected[b.key]) for b in budgets}

    def _actuate(self, pod: Pod, best: NodeVictims, now: float) -> tuple[list[Decision], bool]:
        """Evict ``best``'s victims for ``pod`` and clear the lower nominations on that node: the decisions, and
        whether a victim held at Permit was released at once."""
        node = best.node
        message = f"Preempted by pod {pod.uid} on node {node}"
        decisions: list[Decision] = []
        freed = False
        for victim in best.pods:
            key = victim.key
            if key in self.evicting or key not in self._placed:
                continue  # already being deleted (kube-scheduler skips the API call), or rejected with its group
            held = self._waiting_victim(key, now) if self._waiting_victim is not None else None
            if held is not None:
                decisions.extend(held)
                freed = True
                continue
            self.evicting[key] = node
            uid = self._placed[key].uid
            decisions.append(Evict(pod=key, uid=uid, preemptor=pod.key, message=message, budgets=False))
        for key, nomination in list(self.nominations.items()):
            if nomination.node == node and nomination.priority < pod.priority:
                del self.nominations[key]
                decisions.append(Unschedulable(key, nomination.uid, nomination.message, nominated_node=""))
        return decisions, freed
