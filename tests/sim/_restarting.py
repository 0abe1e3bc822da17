"""kubeflux restarted in the middle of a simulated run, as the recovery tests drive it."""

from __future__ import annotations

from kubeflux.scheduler.core import KubefluxScheduler
from kubeflux.scheduler.interface import ClusterEvent, Decision, EventKind
from kubeflux.scheduler.objects import Pod
from kubeflux.sim.cluster import Cluster


class Restarting:
    """kubeflux that crashes at ``at`` and comes back empty, re-fed the cluster's current objects (as a fresh
    informer lists them)."""

    def __init__(self, at: float) -> None:
        self.name = "kubeflux"
        self.at = at
        self.inner = KubefluxScheduler()
        self.cluster: Cluster | None = None
        self.restarted = False

    def observe(self, event: ClusterEvent, now: float) -> None:
        self.inner.observe(event, now)

    def schedule(self, now: float) -> list[Decision]:
        if not self.restarted and now >= self.at:
            assert self.cluster is not None
            self.restarted = True
            self.inner = KubefluxScheduler()
            for node in self.cluster.nodes:
                self.inner.observe(ClusterEvent(EventKind.ADDED, node), now)
            for group in self.cluster.groups.values():
                self.inner.observe(ClusterEvent(EventKind.ADDED, group), now)
            for pod in self.relisted_pods():
                self.inner.observe(ClusterEvent(EventKind.ADDED, pod), now)
        return self.inner.schedule(now)

    def relisted_pods(self) -> list[Pod]:
        """The pods as the fresh informer's list gives them (the cluster's order here)."""
        assert self.cluster is not None
        return [sp.pod for sp in self.cluster.pods.values()]

    def next_wakeup(self, now: float) -> float | None:
        return self.inner.next_wakeup(now)
