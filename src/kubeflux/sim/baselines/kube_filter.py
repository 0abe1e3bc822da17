"""kube-scheduler's Filter and Score over the nodes of a :class:`~kubeflux.sim.baselines.node_table.NodeTable`, for
the kube-scheduler-like baselines (:mod:`~kubeflux.sim.baselines.kube_default`): the filters (NodeUnschedulable,
TaintToleration, NodeAffinity, NodePorts, NodeResourcesFit, PodTopologySpread, InterPodAffinity; the ones that look
at the pods around a pod are the scheduler core's, :mod:`kubeflux.scheduler.podterms`, over the bound pods) scanned
round-robin from where the previous cycle stopped (``nextStartNodeIndex``) until ``percentageOfNodesToScore`` of the
nodes passed, NodeResourcesFit ``LeastAllocated`` scores, the best node (ties: the first in scan order, or a seeded
random choice), and the ``0/N nodes are available: …`` message (``FitError``) when no node passes.

Answers that drew no random number are remembered per cluster state (the nodes' usage, the pod's shape and the scan
start): a gang cycling through Permit and rejection meets the same states again and again.
"""

from __future__ import annotations

import random

import numpy as np
import numpy.typing as npt

from kubeflux.scheduler.constraints import REASON_TOO_MANY_PODS, fit_error_message
from kubeflux.scheduler.devices import DeviceBooks
from kubeflux.scheduler.objects import CPU, MEMORY, Pod
from kubeflux.scheduler.podterms import PodsByNode, constrained, early_reasons, late_reasons
from kubeflux.scheduler.storage import VolumeBook
from kubeflux.scheduler.volumes import pod_volumes, volume_reasons
from kubeflux.sim.baselines.node_table import NodeTable, least_requested, nonzero_requests, num_feasible_nodes_to_find

__all__ = ["NodeSearch"]

_ANSWERS_KEPT = 4_096


class NodeSearch:
    """Filter and Score for one pod at a time over ``nodes`` (see the module docstring). ``rng``: ties drawn at
    random (the scheduler's generator, shared with its preemption); None: the first in scan order."""

    def __init__(
        self,
        nodes: NodeTable,
        percentage_of_nodes_to_score: int,
        rng: random.Random | None,
        pods: PodsByNode | None = None,
        volumes: VolumeBook | None = None,
        devices: DeviceBooks | None = None,
    ) -> None:
        self.nodes = nodes
        self.devices = devices if devices is not None else DeviceBooks()
        """The devices and claims (Dynamic Resource Allocation), kept by the scheduler, for a pod's claims."""
        self.pods = pods if pods is not None else PodsByNode()
        """The bound pods by node (kept by the scheduler), for the filters that look at them."""
        self.volumes = volumes if volumes is not None else VolumeBook()
        """The storage objects (kept by the scheduler), for the volume filters."""
        self.percentage_of_nodes_to_score = percentage_of_nodes_to_score
        self._rng = rng
        self.next_start = 0
        """Where the next scan starts (``nextStartNodeIndex``)."""
        self._answers: dict[tuple[object, ...], tuple[str | None, int]] = {}
        """(usage, pod shape, scan start) -> (chosen node, next scan start), for answers that drew no random
        number."""
        self._fit_errors: dict[tuple[object, ...], str] = {}

    def find(self, pod: Pod) -> str | None:
        """The node kube-scheduler's Filter and Score choose for ``pod``; None when no node passes the filters."""
        table = self.nodes
        total = len(table)
        if total == 0:
            return None
        start = self.next_start % total
        if constrained(pod, self.pods) or pod.volume_claims or pod.resource_claims:  # depends on the rest: not kept
            node, _ = self._search(pod, start, total)
            return node
        key = (table.usage_key(), table.static_signature(pod), tuple(sorted(pod.requests.items())), start)
        known = self._answers.get(key)
        if known is not None:
            node, self.next_start = known
            return node
        if len(self._answers) >= _ANSWERS_KEPT:
            self._answers.clear()
        node, drew = self._search(pod, start, total)
        if not drew:
            self._answers[key] = (node, self.next_start)
        return node

    def _search(self, pod: Pod, start: int, total: int) -> tuple[str | None, bool]:
        """Filter from ``start`` round-robin, then score: (the chosen node, whether a random number was drawn)."""
        table = self.nodes
        feasible = table.static_mask(pod) & table.fit_mask(pod.requests)
        if constrained(pod, self.pods) or pod.volume_claims:
            feasible = feasible & ~self._terms_unfit(pod, feasible)
        if pod.resource_claims:  # DynamicResources, the last filter
            names = [table.names[int(i)] for i in np.flatnonzero(feasible)]
            for name in self.devices.refusals(pod, names):
                feasible[table.index[name]] = False
        rotated = np.concatenate((feasible[start:], feasible[:start])) if start else feasible
        wanted = num_feasible_nodes_to_find(total, self.percentage_of_nodes_to_score)
        cumulative = np.cumsum(rotated, dtype=np.int64)
        found = int(cumulative[-1])
        if found == 0:
            self.next_start = start  # every node was processed: back where it started
            return None, False
        # kube-scheduler cancels the (parallel) filter when it meets feasible node number wanted + 1; that node
        # is dropped, and every node before it counts as processed for the next cycle's start.
        processed = int(np.searchsorted(cumulative, wanted + 1)) if found > wanted else total
        candidates = (np.flatnonzero(rotated[:processed]) + start) % total
        self.next_start = (start + processed) % total
        scores = self._scores(pod, candidates)
        best = np.flatnonzero(scores == scores.max())
        if self._rng is None or len(best) == 1:
            return table.names[int(candidates[int(best[0])])], False
        return table.names[int(candidates[int(self._rng.choice(best.tolist()))])], True

    def _scores(self, pod: Pod, candidates: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        """NodeResourcesFit LeastAllocated over cpu and memory (weights 1 and 1), as integers 0..100."""
        table = self.nodes
        cpu, memory = nonzero_requests(pod.requests)
        total = least_requested(table.nonzero_cpu[candidates] + cpu, table.allocatable(CPU)[candidates])
        total += least_requested(table.nonzero_memory[candidates] + memory, table.allocatable(MEMORY)[candidates])
        return total // 2

    def fit_error(self, pod: Pod) -> str:
        """Every node's filter reasons, counted into kube-scheduler's message (remembered per cluster state)."""
        if constrained(pod, self.pods) or pod.volume_claims or pod.resource_claims:
            return self._count_reasons(pod)
        key = (self.nodes.usage_key(), self.nodes.static_signature(pod), tuple(sorted(pod.requests.items())))
        message = self._fit_errors.get(key)
        if message is None:
            if len(self._fit_errors) >= _ANSWERS_KEPT:
                self._fit_errors.clear()
            message = self._fit_errors[key] = self._count_reasons(pod)
        return message

    def _terms_unfit(self, pod: Pod, candidates: npt.NDArray[np.bool_]) -> npt.NDArray[np.bool_]:
        """The ``candidates`` (nodes passing the other filters) that NodePorts, the volume filters, PodTopologySpread
        or InterPodAffinity refuse."""
        table = self.nodes
        names = [table.names[int(i)] for i in np.flatnonzero(candidates)]
        refused = early_reasons(pod, names, table.by_name, self.pods)
        refused.update(self._volume_reasons(pod, [n for n in names if n not in refused]))
        refused.update(late_reasons(pod, [n for n in names if n not in refused], table.by_name, self.pods))
        mask = np.zeros(len(table), dtype=np.bool_)
        for name in refused:
            mask[table.index[name]] = True
        return mask

    def _count_reasons(self, pod: Pod) -> str:
        table = self.nodes
        counts: dict[str, int] = {}
        codes, reasons = table.static_reasons(pod)
        for code in np.flatnonzero(np.bincount(codes, minlength=len(reasons))):
            if code:
                counts[reasons[code]] = int(np.count_nonzero(codes == code))
        passed = codes == 0
        terms = constrained(pod, self.pods)
        if terms:  # NodePorts, before NodeResourcesFit
            names = [table.names[int(i)] for i in np.flatnonzero(passed)]
            for name, why in early_reasons(pod, names, table.by_name, self.pods).items():
                counts[why] = counts.get(why, 0) + 1
                passed[table.index[name]] = False
        if table.has_pod_limit:
            too_many = int(np.count_nonzero(passed & (table.pod_count + 1 > table.pod_limit)))
            if too_many:
                counts[REASON_TOO_MANY_PODS] = too_many
        fits = passed.copy()
        if table.has_pod_limit:
            fits &= ~(table.pod_count + 1 > table.pod_limit)
        if any(amount > 0 for amount in pod.requests.values()):
            for name, short in table.insufficient(pod.requests):
                count = int(np.count_nonzero(passed & short))
                fits &= ~short
                if count:
                    counts[f"Insufficient {name}"] = count
        if pod.volume_claims:  # the volume filters, after NodeResourcesFit
            names = [table.names[int(i)] for i in np.flatnonzero(fits)]
            for name, why in self._volume_reasons(pod, names).items():
                for reason in why.split("\n"):
                    counts[reason] = counts.get(reason, 0) + 1
                fits[table.index[name]] = False
        names = [table.names[int(i)] for i in np.flatnonzero(fits)]
        if terms:  # PodTopologySpread and InterPodAffinity, after NodeResourcesFit
            late = late_reasons(pod, names, table.by_name, self.pods)
            for why in late.values():
                counts[why] = counts.get(why, 0) + 1
            names = [name for name in names if name not in late]
        if pod.resource_claims:  # DynamicResources, last
            for why in self.devices.refusals(pod, names).values():
                counts[why] = counts.get(why, 0) + 1
        return fit_error_message(len(table), counts)

    def _volume_reasons(self, pod: Pod, names: list[str]) -> dict[str, str]:
        """The nodes ``names`` the volume filters refuse ``pod`` (whose PreFilter passed), with why."""
        if not pod.volume_claims:
            return {}
        volumes = pod_volumes(pod, self.volumes, self.pods)
        if isinstance(volumes, str):
            return dict.fromkeys(names, volumes)
        return volume_reasons(pod, volumes, names, self.nodes.by_name, self.volumes, self.pods)
