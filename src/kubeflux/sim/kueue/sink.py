"""Where the Kueue layer's decisions land (:class:`KueueSink`), and the clock it runs on (:class:`Timeline`): the
simulated cluster's own book and event loop in ``simulate`` (:class:`ClusterSink`), the served cluster's API and
clock in ``cluster serve`` (:mod:`kubeflux.sim.apiserver.kueue`), so that one layer (:mod:`kubeflux.sim.kueue.layer`)
decides for both, as a scheduler's decisions land on a :class:`DecisionSink
<kubeflux.scheduler.decisions.DecisionSink>` whatever the shell."""

from __future__ import annotations

from typing import Any, Protocol

from kubeflux.sim.clock import Callback
from kubeflux.sim.cluster import Cluster
from kubeflux.sim.jobs import SimJob
from kubeflux.sim.kueue.admission import Admitter
from kubeflux.sim.kueue.workload import QueuedWorkload

__all__ = ["ClusterSink", "KueueSink", "Timeline", "admitted_message"]


class Timeline(Protocol):
    """The clock the layer reads and sets its timers on: the cluster's event loop (``simulate``), or the served
    cluster's counted from the replay's start (``cluster serve``)."""

    @property
    def now(self) -> float: ...

    def schedule(self, at: float, priority: int, callback: Callback, payload: Any = None) -> None: ...


class KueueSink(Protocol):
    """Where the layer's decisions land on the cluster's objects (module docstring). The layer keeps the admission's
    state (the job held, its pods dressed for the flavors, its new attempt after an eviction); a sink only makes it
    visible and acts."""

    def queued(self, job: SimJob, workload: QueuedWorkload) -> None:
        """``job`` arrived, held by Kueue as ``workload`` (pending, or inactive: ``workload.why``)."""

    def admitted(self, job: SimJob, workload: QueuedWorkload) -> None:
        """``workload`` was admitted: ``job`` (its templates dressed for the flavors) runs now, its objects made or
        released."""

    def evicted(self, job: SimJob, workload: QueuedWorkload, reason: str, message: str) -> None:
        """``workload`` was evicted (``reason``: ``Preempted`` or ``PodsReadyTimeout``): ``job``'s unfinished pods
        are deleted with ``reason``; it is held again."""

    def ended(self, job: SimJob, workload: QueuedWorkload) -> None:
        """``job`` ended: its workload is finished."""

    def cycled(self, admitter: Admitter) -> None:
        """An admission cycle ran (the queues' counts may have changed)."""


class ClusterSink:
    """The simulated cluster's book as the layer's sink (``simulate``): an admitted job's objects are created by
    the book (:meth:`JobBook.start <kubeflux.sim.jobbook.JobBook.start>`), an evicted one's pods deleted by the
    cluster, each with its Kubernetes Event counted."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster

    def queued(self, job: SimJob, workload: QueuedWorkload) -> None:
        pass

    def admitted(self, job: SimJob, workload: QueuedWorkload) -> None:
        if job.index == workload.ref:  # one Event per workload (an AppWrapper's first component)
            self.cluster.record_event("Normal", "Admitted", workload.key, admitted_message(workload))
        self.cluster.book.start(job)

    def evicted(self, job: SimJob, workload: QueuedWorkload, reason: str, message: str) -> None:
        if job.index == workload.ref:
            self.cluster.record_event("Normal", reason, workload.key, message)
        for sp in list(job.attempt()):
            if not sp.pod.deleted:
                self.cluster.delete_pod(sp.pod.key, reason)

    def ended(self, job: SimJob, workload: QueuedWorkload) -> None:
        pass

    def cycled(self, admitter: Admitter) -> None:
        pass


def admitted_message(workload: QueuedWorkload) -> str:
    return f"Admitted by ClusterQueue {workload.cluster_queue}"
