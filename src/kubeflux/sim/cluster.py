"""The simulated cluster: nodes, pods, Jobs and pod groups living in virtual time, as KWOK models a kubelet.

Pod lifecycle (every transition is a watch event sent to every observer, i.e. every scheduler):

``created`` (Pending, ADDED) → ``bound`` by a scheduler (still Pending, ``node_name`` set, MODIFIED) → after the
start delay (KWOK's ``pod-ready`` stage: ``delay`` + uniform jitter up to ``jitter``) ``Running`` (MODIFIED) →
after the run time ``Succeeded`` (exit code 0) or ``Failed`` (non-zero exit code, MODIFIED). Other endings:

* ``activeDeadlineSeconds`` counted from the bind (the kubelet's ``startTime``): ``Failed``, reason
  ``DeadlineExceeded``, container exit code 137;
* the kubelet's admission refusing a pod bound to a node without room: ``Failed``, reason ``OutOf<resource>``;
* the node going down (taint manager eviction, no toleration time): ``Failed``, reason ``NodeLost``, then DELETED;
* deletion (a user, or a Job controller killing the rest of a failed Job): ``Failed`` unless already finished,
  then DELETED.

While Pending, a pod the scheduler could not place has ``PodScheduled=False/Unschedulable`` with its message and,
when a reservation holds resources for it, its expected start in the ``kubeflux.io/expected-start`` annotation
(virtual seconds), removed at the bind.

Kubernetes Jobs follow the Job controller (:mod:`kubeflux.sim.jobcontroller`): up to ``parallelism`` pods at once
until ``completions`` succeeded; a failed pod is replaced after a back-off of 10 s doubled per failure since the
last success, capped at 6 min; the Job fails when more than ``backoffLimit`` pods failed. Other jobs (trace gangs,
pod groups, lone pods) end when all their pods have ended, except a trace job that lost a pod to preemption: it is
requeued whole (:meth:`JobBook.pods_ended <kubeflux.sim.jobbook.JobBook.pods_ended>`).

Coupled jobs (:func:`~kubeflux.sim.jobs.coupled_quorum`: a trace job of several pods, a PodGroup, a Job that
says so) compute together: a pod that runs before its job's last required pod holds its resources idle; at that
pod's Running every waiting pod begins computing, and its run time, crash point and walltime kill count from
then. A trace job's or PodGroup's pod that fails ends the others (``PeerFailed``); one preempted ends them once
that instant's evictions are applied (a scheduler evicting the gang whole ends every pod ``Preempted``).
:meth:`Cluster.stalled_jobs` tells the driver when such holding can never end (a deadlock). The nodes, what is
free on each (the kubelet's admission) and the resource ids are a :class:`~kubeflux.sim.nodestate.NodeState`; the
usage per kind (allocated and computing) is kept by :mod:`kubeflux.sim.resourceids`. The kubelet's settings, node
outages and the per-pod record (:class:`SimPod`) are in :mod:`kubeflux.sim.pods`; the jobs, pods and pod groups by
key and the queue figures are the cluster's :class:`~kubeflux.sim.jobbook.JobBook` (:attr:`Cluster.book`).

Run time comes from the pod template, or from KWOK's annotations (``pod-complete.stage.kwok.x-k8s.io/delay`` and
``…/jitter-delay``; ``pod-ready.stage.kwok.x-k8s.io/…`` for the start delay), so the same manifests run on KWOK.
Random draws (jitter, injected failures) are made when a pod is created, from one seeded generator, so every
scheduler sees the same pods fail.

The cluster never builds Kubernetes JSON per pod; :func:`kubeflux.sim.podstatus.pod_status` derives it on demand.
Events carry the live :class:`~kubeflux.scheduler.objects.Pod`: an observer reads it during ``observe`` and must
not change it.

The served cluster (``cluster serve``) runs its pods in this same class: its kubelet
(:mod:`kubeflux.sim.apiserver.kubelet`) adds each pod the API creates to the cluster's job book
(:meth:`JobBook.add_job <kubeflux.sim.jobbook.JobBook.add_job>`, :meth:`~kubeflux.sim.jobbook.JobBook.adopt_pod`;
a workload replay's jobs arrive through :meth:`~kubeflux.sim.jobbook.JobBook.arrive` and its pods are made by the
book), binds them here when the API binds them, deletes through the API what the cluster deletes, and writes each
change back; the Jobs clients create are the served Job controller's (``job_controller=False``; a replay's Job
controller hears of its pods' ends through :attr:`Cluster.after_pod_end`), and its entries are cancellable
(``cancellable=True``) so that virtual time never jumps to a stage of a pod that has ended.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from kubeflux.scheduler.interface import EXPECTED_START_ANNOTATION, ClusterEvent, EventKind, expected_start_text
from kubeflux.scheduler.messages import PREEMPTED_REASON, Watched
from kubeflux.scheduler.objects import DEFAULT_SCHEDULER, Node, Pod, PodPhase, Taint
from kubeflux.sim.claims import ClaimController
from kubeflux.sim.clock import EventLoop, Handle, Priority
from kubeflux.sim.jobbook import JobBook
from kubeflux.sim.jobcontroller import JOB_BACKOFF_BASE, JOB_BACKOFF_CAP, JobController
from kubeflux.sim.jobs import PEER_FAILED, SimJob
from kubeflux.sim.nodestate import NodeState
from kubeflux.sim.pods import KubeEvent, Lifecycle, NodeOutage, SimPod, TemplateTiming
from kubeflux.sim.records import JobRecord, PodRecord
from kubeflux.sim.resourceids import Usage
from kubeflux.sim.workloads.model import JobKind, WorkloadJob

Observer = Callable[[ClusterEvent, float], None]


class Cluster:
    """Nodes and pods in virtual time on an :class:`EventLoop`. See the module docstring for the lifecycle."""

    def __init__(
        self,
        loop: EventLoop,
        nodes: Iterable[Node],
        lifecycle: Lifecycle | None = None,
        *,
        primary_scheduler: str = DEFAULT_SCHEDULER,
        workload_name: str = "",
        keep_events: bool = False,
        couple: bool = True,
        job_controller: bool = True,
        cancellable: bool = False,
    ) -> None:
        self.loop = loop
        self.lifecycle = lifecycle or Lifecycle()
        self.keep_events = keep_events
        self.kube_events: list[KubeEvent] = []
        self.event_counts: dict[str, int] = {}
        """How many Kubernetes Events were recorded per reason (``Scheduled``, ``FailedScheduling`` …), kept or not."""
        self.node_state = NodeState()
        """The nodes and what is free on each (the kubelet's admission, the resource ids)."""
        self.nodes = self.node_state.nodes
        """Every node that joined, by index (a removed one keeps its place); :attr:`node_index` names the current."""
        self.node_index = self.node_state.node_index
        self.ids = self.node_state.ids
        """Resource ids per kind (:mod:`kubeflux.sim.resourceids`)."""
        self.usage = Usage()
        """Allocated and useful amounts per kind over time."""
        for node in nodes:
            self.node_state.add(node)
        self.book = JobBook(
            loop,
            self._emit,
            self.ids,
            self.lifecycle,
            primary_scheduler=primary_scheduler,
            workload_name=workload_name,
            couple=couple,
        )
        """The jobs, pods and pod groups, and the queue figures."""
        self.pods = self.book.pods
        """The pods not deleted, by key (the book's)."""
        self.jobs = self.book.jobs
        """Every job, by index (the book's)."""
        self.groups = self.book.groups
        self.problems = self.book.problems
        self.queue_series = self.book.queue_series
        self._observers: list[Observer] = []
        self._status_observers: list[Observer] = []
        """The observers that are sent the status written on a pending pod for a scheduler's decision."""
        self.job_controller = JobController.for_lifecycle(self, self.lifecycle) if job_controller else None
        """The simulator's Job controller; None where another one keeps the Jobs (the served cluster's, through the
        API): a Job's pods then come from :meth:`JobBook.adopt_pod <kubeflux.sim.jobbook.JobBook.adopt_pod>` and the
        cluster only runs them."""
        self.book.job_controller = self.job_controller
        self.after_pod_end: Callable[[SimJob], None] | None = None
        """Called with a pod's job once the job took the pod's end in (the served cluster's replay follows it)."""
        self._handles: dict[SimPod, list[Handle]] | None = {} if cancellable else None
        """With ``cancellable`` (the served cluster, whose virtual time must not jump to an entry that does
        nothing): each unfinished pod's pending entries, dropped when it ends. Else None: a stale entry checks its
        pod and returns."""
        self.claims: ClaimController | None = None  # a workload's ResourceClaims (sim/claims.py), set by the driver
        self.idle_holding = 0
        """Running pods of coupled jobs holding their resources idle until their job can compute."""
        self.pods_bound = 0
        self.events_emitted = 0
        self.utilization_series = self.usage.cores_series

    # -- nodes -----------------------------------------------------------------------------------------------
    def subscribe(self, observer: Observer, *, status_updates: bool = True) -> None:
        """Send every later watch event to ``observer(event, now)``; with ``status_updates`` False, all but the
        MODIFIED events of a pending pod whose only change is what :meth:`mark_unschedulable` writes (its
        ``PodScheduled`` condition and expected start: for a scheduler that reads neither, see
        :class:`~kubeflux.scheduler.interface.IgnoresStatusUpdates`; events carry the live pod, so it holds the
        change anyway)."""
        self._observers.append(observer)
        if status_updates:
            self._status_observers.append(observer)

    def announce(self, objs: Sequence[Watched], kind: EventKind = EventKind.ADDED) -> None:
        """Emit ``kind`` for each of ``objs``: every node, PodDisruptionBudget and storage object once the observers
        subscribed, a budget created (or deleted) during the run, a claim (volume or device) a Bind wrote to."""
        for obj in objs:
            self._emit(kind, obj)

    def _emit(self, kind: EventKind, obj: Watched) -> None:
        self._send(ClusterEvent(kind, obj))

    def _modified(self, sp: SimPod) -> None:
        """Emit MODIFIED for a pod. Events carry the live pod, so one MODIFIED event object per pod serves all its
        updates (an observer reads the pod during ``observe``, whichever event object brought it)."""
        event = sp.modified
        if event is None:
            event = sp.modified = ClusterEvent(EventKind.MODIFIED, sp.pod)
        self._send(event)

    def _send(self, event: ClusterEvent) -> None:
        self.events_emitted += 1
        observers = self._observers
        if observers:
            if len(observers) == 1:
                observers[0](event, self.loop.now)
            else:
                now = self.loop.now
                for observe in observers:
                    observe(event, now)

    def record_event(self, type_: str, reason: str, obj: str, message: str) -> None:
        """Record a Kubernetes Event about ``obj``: counted per reason, kept in :attr:`kube_events` when asked."""
        counts = self.event_counts
        counts[reason] = counts.get(reason, 0) + 1
        if self.keep_events:
            self.kube_events.append(KubeEvent(self.loop.now, type_, reason, obj, message))

    def _node(self, name: str) -> Node:
        return self.node_state.node(name)

    def cordon(self, name: str, unschedulable: bool = True) -> None:
        """``kubectl cordon`` (or ``uncordon`` with ``unschedulable=False``) at the current time."""
        node = self._node(name)
        if node.unschedulable != unschedulable:
            node.unschedulable = unschedulable
            self._emit(EventKind.MODIFIED, node)

    def node_down(self, name: str) -> None:
        """The node stops reporting: NotReady, and its pods are evicted at once (Failed ``NodeLost``, deleted)."""
        node = self._node(name)
        if not node.ready:
            return
        node.ready = False
        self._emit(EventKind.MODIFIED, node)
        index = self.node_index[name]
        victims = [sp for sp in self.pods.values() if sp.node_index == index and sp.finished_at is None]
        for sp in victims:
            if sp.finished_at is None:  # not ended meanwhile with a coupled peer
                self._end(
                    sp, PodPhase.FAILED, 137, "Error", "NodeLost", f"Node {name} which was running pod is unresponsive"
                )
            self._remove(sp)

    def node_up(self, name: str) -> None:
        node = self._node(name)
        if not node.ready:
            node.ready = True
            self._emit(EventKind.MODIFIED, node)

    def schedule_outage(self, outage: NodeOutage) -> None:
        self._node(outage.node)
        self.loop.schedule(outage.down_at, Priority.NODE, self.node_down, outage.node)
        if outage.up_at is not None:
            if outage.up_at < outage.down_at:
                raise ValueError(f"outage of {outage.node!r}: up_at precedes down_at")
            self.loop.schedule(outage.up_at, Priority.NODE, self.node_up, outage.node)

    # -- nodes that join, leave or change mid-run (each emits the watch event, as ``cordon`` does) -------------
    def add_node(self, node: Node) -> None:
        """A node joins the cluster now (ADDED). Raises ValueError on a duplicate name or a bad allocatable."""
        self.node_state.add(node)
        self._emit(EventKind.ADDED, node)

    def remove_node(self, name: str) -> None:
        """``kubectl delete node`` now: its unfinished pods fail (``NodeLost``) and are deleted, as the pod
        garbage collector does, then the node is DELETED. :attr:`nodes` keeps its record (indices stay valid);
        :meth:`current_nodes` and binds no longer see it."""
        node = self._node(name)
        index = self.node_index[name]
        for sp in [sp for sp in self.pods.values() if sp.node_index == index and sp.finished_at is None]:
            if sp.finished_at is None:  # not ended meanwhile with a coupled peer
                self._end(sp, PodPhase.FAILED, 137, "Error", "NodeLost", f"Node {name} was deleted")
            self._remove(sp)
        del self.node_index[name]
        self._emit(EventKind.DELETED, node)

    def update_node(
        self,
        name: str,
        *,
        allocatable: dict[str, int] | None = None,
        labels: dict[str, str] | None = None,
        taints: tuple[Taint, ...] | None = None,
    ) -> None:
        """The node's allocatable, labels or taints change now (one MODIFIED event carrying a new Node object, as
        an informer delivers it). Allocatable may drop below what running pods use: they keep running (the
        kubelet evicts nothing), only new pods are refused. Core ids added by growth are new ids; a shrink drops
        free ones."""
        node = self.node_state.update(name, allocatable, labels, taints)
        self._emit(EventKind.MODIFIED, node)

    def current_nodes(self) -> list[Node]:
        """The nodes in the cluster now (not those removed), in the order they joined."""
        return self.node_state.current()

    @property
    def total_cores(self) -> int:
        return self.node_state.total_cores

    # -- the job book (its part: :class:`~kubeflux.sim.jobbook.JobBook`) -------------------------------------
    def submit(self, wjob: WorkloadJob, submit_time: float | None = None) -> SimJob:
        """Create the job's objects now (:meth:`JobBook.submit <kubeflux.sim.jobbook.JobBook.submit>`)."""
        return self.book.submit(wjob, submit_time)

    def create_pod(self, job: SimJob, timing: TemplateTiming, name: str, index: int | None = None) -> None:
        """Create one of ``job``'s pods, Pending (see :meth:`kubeflux.sim.jobbook.JobBook.create_pod`)."""
        self.book.create_pod(job, timing, name, index)

    def finish_job(self, job: SimJob) -> None:
        """``job`` ended (all its pods, or its Job controller says so): it leaves the queue figures."""
        self.book.finish_job(job)

    def job_records(self) -> list[JobRecord]:
        """One :class:`JobRecord` per submitted job, in submission order."""
        return self.book.job_records()

    def pod_records(self) -> list[PodRecord]:
        """One :class:`PodRecord` per pod created (``pods.csv``), per job in submission order."""
        return self.book.pod_records()

    def pod(self, key: str) -> SimPod:
        """The pod ``namespace/name``, including finished pods that were not deleted."""
        return self.book.pod(key)

    # -- scheduler decisions -----------------------------------------------------------------------------------
    def bind(self, key: str, uid: str, node_name: str, annotations: dict[str, str] | None = None) -> str:
        """Apply a Binding. Returns "" on success, else why the API server refused it (the pod stays Pending)."""
        sp = self.pods.get(key)
        if sp is None:
            return f"pods {key!r} not found"
        return self.bind_pod(sp, uid, node_name, annotations)

    def bind_pod(self, sp: SimPod, uid: str, node_name: str, annotations: dict[str, str] | None = None) -> str:
        """:meth:`bind` for a pod the caller found in :attr:`pods` by its key (the driver looks each decision's pod
        up once); ``uid``, when given, must be the pod's."""
        pod = sp.pod
        if uid and pod.uid != uid:
            return f"pods {pod.key!r} not found"
        if pod.node_name or pod.deleted:
            return f"pod {pod.key} is already assigned to node {pod.node_name!r}" if pod.node_name else "pod is deleted"
        index = self.node_index.get(node_name)
        if index is None:
            return f"nodes {node_name!r} not found"
        now = self.loop.now
        _set_expected_start(pod, None)
        if annotations:
            pod.annotations = pod.annotations | annotations
        pod.node_name = node_name
        sp.node_index = index
        sp.bound_at = now
        self.pods_bound += 1
        job = self.jobs[sp.job_index]
        if job.first_bind is None:
            self.book.first_bind(job, now)
        job.last_bind = now
        if self.keep_events:
            key = pod.key
            self.record_event("Normal", "Scheduled", key, f"Successfully assigned {key} to {node_name}")
        else:
            counts = self.event_counts
            counts["Scheduled"] = counts.get("Scheduled", 0) + 1
        self._modified(sp)
        short = self.node_state.admit(sp, index)  # the usage counts the allocation below
        if short:
            message = f"Pod was rejected: Node didn't have enough resource: {short}"
            self._end(sp, PodPhase.FAILED, 0, "", f"OutOf{short}", message)
            self.record_event("Warning", f"OutOf{short}", pod.key, message)
            return ""
        if not self.nodes[index].ready:
            node = self.nodes[index]
            self.usage.change(now, sp.cpu, sp.timing.others, 1, 0)
            self._end(
                sp, PodPhase.FAILED, 137, "Error", "NodeLost", f"Node {node.name} which was running pod is unresponsive"
            )
            self._remove(sp)
            return ""
        if pod.active_deadline_seconds is not None:
            self._at(now + pod.active_deadline_seconds, Priority.RELEASE, self._deadline, sp)
        if sp.start_delay > 0.0:
            self.usage.change(now, sp.cpu, sp.timing.others, 1, 0)  # allocated, idle until Running
            self._at(now + sp.start_delay, Priority.STAGE, self._start, sp)
        else:
            self._start(sp, allocating=True)  # KWOK's fast pod-ready stage: Running at the bind's time point
        return ""

    def _release(self, sp: SimPod) -> None:
        self.node_state.release(sp)
        self.usage.change(self.loop.now, sp.cpu, sp.timing.others, -1, 0 if sp.computing_at is None else -1)

    def mark_unschedulable(
        self, key: str, uid: str, message: str, scheduler: str = "", expected_start: float | None = None
    ) -> None:
        """``PodScheduled=False`` with reason ``Unschedulable`` and a ``FailedScheduling`` event; the pod carries
        ``expected_start`` (its reservation's start) as the :data:`EXPECTED_START_ANNOTATION`, or none."""
        sp = self.pods.get(key)
        if sp is not None:
            self.mark_pod_unschedulable(sp, uid, message, expected_start)

    def mark_pod_unschedulable(self, sp: SimPod, uid: str, message: str, expected_start: float | None = None) -> None:
        """:meth:`mark_unschedulable` for a pod the caller found in :attr:`pods` by its key; nothing when ``uid``
        is given and not the pod's, or once the pod is bound."""
        if (uid and sp.pod.uid != uid) or sp.bound_at is not None:
            return
        pod = sp.pod
        if expected_start is not None or EXPECTED_START_ANNOTATION in pod.annotations:
            _set_expected_start(pod, expected_start)
        if self.keep_events:
            self.record_event("Warning", "FailedScheduling", pod.key, message)
        else:  # the count alone, as record_event keeps it: one call per pod per scheduling pass that tried it
            counts = self.event_counts
            counts["FailedScheduling"] = counts.get("FailedScheduling", 0) + 1
        if sp.unschedulable_at is None:
            sp.unschedulable_at = self.loop.now
        elif sp.unschedulable_message == message:
            return
        sp.unschedulable_message = message
        if len(self._status_observers) == len(self._observers):
            self._modified(sp)
            return
        self.events_emitted += 1  # emitted all the same (the figures count it), sent to those that read it
        event = sp.modified
        if event is None:
            event = sp.modified = ClusterEvent(EventKind.MODIFIED, sp.pod)
        now = self.loop.now
        for observe in self._status_observers:
            observe(event, now)

    def reject(self, key: str, uid: str, message: str) -> None:
        """The scheduler says the pod can never run: it stays Pending, Unschedulable; its job is REJECTED."""
        sp = self.pods.get(key)
        if sp is None or (uid and sp.pod.uid != uid) or sp.bound_at is not None:
            return
        self.mark_unschedulable(key, uid, message)
        self.book.reject(self.jobs[sp.job_index], message)

    def delete_pod(self, key: str, reason: str = "Deleted") -> None:
        """Delete a pod now (a user's ``kubectl delete``, or a controller's): a running pod is killed (exit 137, with
        ``reason``) and counts as failed."""
        sp = self.pods.get(key)
        if sp is None:
            raise KeyError(f"pods {key!r} not found")
        if sp.finished_at is None:
            self._end(sp, PodPhase.FAILED, 137, "Error", reason, "")
        self._remove(sp)

    # -- kubelet stages ----------------------------------------------------------------------------------------
    def _start(self, sp: SimPod, allocating: bool = False) -> None:
        """The pod is Running. It computes at once, unless its job is coupled and has not begun computing: it
        then holds its resources idle until the job's last required pod runs, and all of them compute from then.
        ``allocating``: it was bound at this instant and its allocation is not in the usage yet."""
        if sp.finished_at is not None:
            return
        now = self.loop.now
        sp.running_at = now
        sp.pod.phase = PodPhase.RUNNING
        job = self.jobs[sp.job_index]
        job.running_started += 1
        if job.coupled and job.start is None:
            self._modified(sp)
            job.waiting.append(sp)
            if len(job.waiting) < job.start_quorum:
                if allocating:
                    self.usage.change(now, sp.cpu, sp.timing.others, 1, 0)
                self.idle_holding += 1
                return
            members = self.book.begin(job, now)
            self.idle_holding -= len(members) - 1
            for member in members:
                self._compute(member, now, allocating and member is sp)
            return
        if job.start is None and job.running_started >= job.start_quorum:
            job.start = now
        self._modified(sp)
        self._compute(sp, now, allocating)

    def _compute(self, sp: SimPod, now: float, allocating: bool) -> None:
        """The pod computes from ``now``: its end (run time, crash or walltime kill) is counted from here."""
        sp.computing_at = now
        self.usage.change(now, sp.cpu, sp.timing.others, 1 if allocating else 0, 1)
        walltime = sp.timing.walltime_kill
        if sp.fail_after is not None and (walltime is None or sp.fail_after < walltime):
            self._at(now + sp.fail_after, Priority.RELEASE, self._crash, sp)
        elif walltime is not None and (sp.run_time is None or sp.run_time > walltime):
            self._at(now + walltime, Priority.RELEASE, self._walltime, sp)
        elif sp.run_time is not None:
            self._at(now + sp.run_time, Priority.RELEASE, self._complete, sp)

    def _at(self, at: float, priority: int, stage: Callable[[SimPod], None], sp: SimPod) -> None:
        """Run ``stage(sp)`` at ``at``: an entry of the loop (see ``cancellable``)."""
        handles = self._handles
        if handles is None:
            self.loop.schedule(at, priority, stage, sp)
        else:
            handles.setdefault(sp, []).append(self.loop.schedule_cancellable(at, priority, stage, sp))

    def _complete(self, sp: SimPod) -> None:
        if sp.finished_at is None:
            code = sp.exit_code
            phase, why = (PodPhase.SUCCEEDED, "Completed") if code == 0 else (PodPhase.FAILED, "Error")
            self._end(sp, phase, code, why, "", "", peers=False)

    def _crash(self, sp: SimPod) -> None:
        if sp.finished_at is None:
            self._end(sp, PodPhase.FAILED, sp.exit_code, "Error", "", "")

    def _walltime(self, sp: SimPod) -> None:
        """A trace job reached its requested time: killed, as Batsim kills it (``COMPLETED_WALLTIME_REACHED``)."""
        if sp.finished_at is None:
            self._end(sp, PodPhase.FAILED, 137, "DeadlineExceeded", "DeadlineExceeded", "walltime reached", peers=False)

    def _deadline(self, sp: SimPod) -> None:
        if sp.finished_at is None:
            message = "Pod was active on the node longer than the specified deadline"
            self._end(sp, PodPhase.FAILED, 137, "DeadlineExceeded", "DeadlineExceeded", message)
            self.record_event("Normal", "DeadlineExceeded", sp.pod.key, message)

    def _end(
        self,
        sp: SimPod,
        phase: PodPhase,
        code: int,
        container_reason: str,
        reason: str,
        message: str,
        *,
        peers: bool = True,
    ) -> None:
        """The pod reached a terminal phase: free its resources, tell the observers, update its job. A coupled
        trace job or pod group whose pod failed (``peers``: not its own walltime or completion) loses the others
        too (:meth:`_end_peers`)."""
        now = self.loop.now
        sp.finished_at = now
        sp.exit_code = code
        sp.container_reason = container_reason
        sp.reason = reason
        sp.status_message = message
        pod = sp.pod
        pod.phase = phase
        if self._handles is not None:
            for handle in self._handles.pop(sp, ()):
                handle.cancel()
        if sp.cores or (sp.bound_at is not None and not reason.startswith("OutOf")):
            self._release(sp)
        self._modified(sp)
        if pod.resource_claims and self.claims is not None:
            self.claims.pod_ended(pod)
        job = self.jobs[sp.job_index]
        if job.coupled and job.start is None and sp in job.waiting:
            job.waiting.remove(sp)
            self.idle_holding -= 1
        job.pod_ended(phase is PodPhase.SUCCEEDED, reason, now, sp.completion_index, sp)
        if peers and phase is PodPhase.FAILED and job.coupled and job.wjob.kind is not JobKind.JOB:
            if reason != PREEMPTED_REASON:
                self._end_peers(sp)
            else:  # once this instant's evictions are in: a scheduler that evicts the gang whole ends each Preempted
                self.loop.schedule(now, Priority.RELEASE, self._end_peers, sp)
        if job.finish is None:
            if job.wjob.kind is JobKind.JOB:
                if self.job_controller is not None:
                    self.job_controller.pod_ended(job)
            elif job.active == 0:
                self.book.pods_ended(job)
        if self.after_pod_end is not None:
            self.after_pod_end(job)

    def _end_peers(self, failed: SimPod) -> None:
        """A pod of a coupled job failed: the job cannot compute without it (an MPI rank lost), so its other
        unfinished pods end too, reason ``PeerFailed``; those never bound are deleted (nothing waits for them)."""
        job = self.jobs[failed.job_index]
        message = f"pod {failed.pod.key} of the coupled job ended ({failed.reason or failed.container_reason})"
        for sp in job.attempt():
            if sp.finished_at is None:
                self._end(sp, PodPhase.FAILED, 137, "Error", PEER_FAILED, message, peers=False)
                if sp.bound_at is None:
                    self._remove(sp)

    def _remove(self, sp: SimPod) -> None:
        pod = sp.pod
        if not pod.deleted:
            pod.deleted = True
            self.pods.pop(pod.key, None)
            self._emit(EventKind.DELETED, pod)

    # -- reading ------------------------------------------------------------------------------------------------
    def stalled_jobs(self, owned: Callable[[str], bool]) -> list[SimJob]:
        """The coupled jobs holding resources idle, when no pending pod of a scheduler that ``owned`` names fits the
        free resources of any ready, schedulable node: then, with no other change to come, they wait for ever (a
        deadlock). Empty when none waits or a pending pod could still be placed."""
        if not self.idle_holding:
            return []
        pending = self.pods.values()
        if self.node_state.fits_somewhere(sp for sp in pending if _placeable(sp) and owned(sp.pod.scheduler_name)):
            return []
        return [job for job in self.jobs if job.waiting]

    def free(self, node: str) -> dict[str, int]:
        """What is left on ``node`` (allocatable minus the requests of its bound, unfinished pods)."""
        return self.node_state.free(node)


def _placeable(sp: SimPod) -> bool:
    """Whether a scheduler may place ``sp`` now: not bound, not deleted, held by no scheduling gate (Kueue's)."""
    return sp.bound_at is None and not sp.pod.deleted and not sp.pod.scheduling_gates


def _set_expected_start(pod: Pod, expected: float | None) -> None:
    """Write (or, for None, remove) a pending pod's expected start; the annotation dict is replaced, never
    changed in place, as pods of one template may share it."""
    current = pod.annotations.get(EXPECTED_START_ANNOTATION)
    text = None if expected is None else expected_start_text(expected)
    if current == text:
        return
    annotations = {name: value for name, value in pod.annotations.items() if name != EXPECTED_START_ANNOTATION}
    if text is not None:
        annotations[EXPECTED_START_ANNOTATION] = text
    pod.annotations = annotations


__all__ = [
    "JOB_BACKOFF_BASE",
    "JOB_BACKOFF_CAP",
    "Cluster",
    "KubeEvent",
    "Lifecycle",
    "NodeOutage",
    "Observer",
    "SimPod",
]
