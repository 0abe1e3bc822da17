"""The pending side of the scheduler: jobs (a lone pod, or a pod group's members) waiting to be placed.

Order: higher pod priority first, then arrival (the PodGroup's creation time, else the first pod's, to the
microsecond), then the order kubeflux first saw them; a group's members stay together as one job. A group is
*ready* once its PodGroup is known and at least ``minMember`` of its pods exist (or once the group has started:
a late member, e.g. a replacement, then runs on its own).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from kubeflux.scheduler.interface import EXPECTED_START_ANNOTATION, EXPECTED_START_TIME_ANNOTATION
from kubeflux.scheduler.kept import KeptReservation
from kubeflux.scheduler.objects import Pod, PodGroup
from kubeflux.scheduler.timebooks import Hold
from kubeflux.scheduler.topology import Request

__all__ = ["INHERITED", "PendingJob", "PendingQueue", "placement_view"]

INHERITED: tuple[str, float | None] = ("", math.nan)
"""What a pod queued with an expected start already on it counts as told (:attr:`PendingJob.told`): a start, and
no message kubeflux would say. A restarted kubeflux cannot know what its previous run told; the annotation says
it, so the first decision about the pod is written whatever it says, and a pass that plans no start for the pod
takes the annotation back."""


@dataclass(slots=True, eq=False, init=False)
class PendingJob:
    """A job waiting in the queue: a lone pod or a pod group's members (its own ``__init__``: compiled, the one
    :mod:`dataclasses` generates stays interpreted, and calls each field's default factory in Python).

    A job in :attr:`PendingQueue.jobs` is changed through the queue's methods (:meth:`PendingQueue.add`,
    :meth:`~PendingQueue.remove_pod`, :meth:`~PendingQueue.take_place`), never by its own :meth:`put`, :meth:`drop`
    or :meth:`take_place_of`: :meth:`PendingQueue.ordered` reuses the last order while the queue has counted no
    change that can move a job. (A rejected job, out of the queue, is changed directly: it comes back through
    :meth:`~PendingQueue.add`.)"""

    key: str
    """``namespace/name`` of the group, or of the lone pod."""
    group: str | None
    arrival: float
    seq: int
    pods: dict[str, Pod] = field(default_factory=dict)
    """Pod uid → pod, in the order seen. Changed only by :meth:`put` and :meth:`drop`, which forget what was
    found of the pods (:attr:`alike`, the priority)."""
    slot: int = 0
    """Its place among :attr:`PendingQueue.jobs` (its first ``seq``, which :meth:`take_place_of` leaves as it is): the
    jobs a pass lists from the queue's registers are visited in the queue's own order by it."""
    ready_since: float | None = None
    retry_at: float = 0.0
    """Back-off: not tried before this time."""
    backoff: float = 0.0
    refusal: str = ""
    """Why the API server refused its last Binding (the server's words), while it backs off after it."""
    reservations: list[int] = field(default_factory=list)
    """Engine job ids holding this job's reservation (re-planned every pass)."""
    holds: list[Hold] = field(default_factory=list)
    """The same reservation in the exact books in time (:mod:`kubeflux.scheduler.timebooks`)."""
    expected_start: float | None = None
    left_out: set[str] = field(default_factory=set)
    """Pods of a group with minMember below its size that its reservation does not hold (they start as room frees,
    so they are told no expected start)."""
    assigned: dict[str, str] = field(default_factory=dict)
    """The node each member was reserved on by the last reservation made by assignment search (kept after the
    reservation is cancelled, for the next placement: :meth:`~kubeflux.scheduler.placing.Placer._place_planned`)."""
    member_reservations: dict[str, tuple[int, float]] = field(default_factory=dict)
    """Pods of a group beyond its minMember reserved on their own, later than the group (conservative
    backfilling): the engine job of each (also in :attr:`reservations`) and the start it is told instead of
    :attr:`expected_start`."""
    tried_epoch: int = -1
    """The scheduler's change counter when the job was last tried (-1: never, or it changed since)."""
    told: dict[str, tuple[str, float | None]] = field(default_factory=dict)
    """Pod uid → the last (message, expected start) reported, so each is reported once (:data:`INHERITED` for a
    pod queued with an expected start on it)."""
    alike: int = -1
    """How many of its first pods are alike (:func:`kubeflux.scheduler.filtering.alike_run`); -1 until found."""
    top_priority: int | None = None
    """The highest priority of its pods, once found (:attr:`priority`)."""
    kept: KeptReservation | None = None
    """Its last gang reservation as the engine made it, to put back when the engine would make it again."""
    request: Request | None = None
    """The topology domain it asks for, once found (:func:`kubeflux.scheduler.confining.job_request`)."""
    request_found: bool = False
    """Whether :attr:`request` is found (False again when its pods change)."""
    sort_key: tuple[int, float, int] | None = None
    """Its place in the queue (:meth:`order`) once found; None again when its pods or its place change."""
    sorted_as: tuple[int, float, int] | None = None
    """The :attr:`sort_key` under which :meth:`PendingQueue.ordered` last placed it (None: not placed there)."""

    def __init__(
        self, key: str, group: str | None, arrival: float, seq: int, pods: dict[str, Pod] | None = None
    ) -> None:
        self.key, self.group, self.arrival, self.seq, self.slot = key, group, arrival, seq, seq
        self.pods = {} if pods is None else pods
        self.ready_since = None
        self.retry_at = self.backoff = 0.0
        self.refusal = ""
        self.reservations = []
        self.holds = []
        self.expected_start = None
        self.left_out = set()
        self.assigned = {}
        self.member_reservations = {}
        self.tried_epoch = -1
        self.told = {}
        self.alike = -1
        self.top_priority = None
        self.kept = None
        self.request = None
        self.request_found = False
        self.sort_key = self.sorted_as = None

    @property
    def priority(self) -> int:
        top = self.top_priority
        if top is None:
            top = self.top_priority = max((pod.priority for pod in self.pods.values()), default=0)
        return top

    def put(self, uid: str, pod: Pod) -> None:
        """Add or replace a pod (a pod's object is replaced whenever what placing reads of it changes)."""
        pods = self.pods
        if pods.get(uid) is not pod:
            pods[uid] = pod
            self.alike, self.top_priority, self.request_found, self.sort_key = -1, None, False, None

    def drop(self, uid: str) -> None:
        if self.pods.pop(uid, None) is not None:
            self.alike, self.top_priority, self.request_found, self.sort_key = -1, None, False, None

    def take_place_of(self, job: PendingJob) -> None:
        """Wait in ``job``'s place in the queue (a group's member left over when the group started)."""
        self.arrival, self.seq, self.sort_key = job.arrival, job.seq, None

    def order(self) -> tuple[int, float, int]:
        key = self.sort_key
        if key is None:
            key = self.sort_key = (-self.priority, self.arrival, self.seq)
        return key


def _slot(job: PendingJob) -> int:
    return job.slot


class PendingQueue:
    """Pending jobs by key and their pods by uid; the jobs backing off and those rejected as never fitting; and
    whether the cluster changed since the last pass (:meth:`changed`)."""

    def __init__(self) -> None:
        self.jobs: dict[str, PendingJob] = {}
        self.by_pod: dict[str, PendingJob] = {}
        self.groups: dict[str, PodGroup] = {}
        self.started_groups: set[str] = set()
        self._seq = 0
        self.dirty = True
        """Whether a pass has something to do (a change, a notice to give, a job left for another pass)."""
        self.epoch = 0
        """Bumped whenever a waiting job might now fit, or a reservation might no longer hold."""
        self.backing_off: set[PendingJob] = set()
        """Gangs waiting out a back-off after their ``scheduleTimeoutSeconds``: tried again at any change."""
        self.rejected: dict[str, PendingJob] = {}
        """Jobs rejected as never fitting, kept to be queued again when a node is added or changes."""
        self._order: list[PendingJob] = []
        """The jobs in the order :meth:`ordered` last found."""
        self._changes = 0
        """Bumped by every change but a job's leaving (:meth:`add`, a pod removed from a job that stays), which may
        add a job or move one in the order; :meth:`ordered` compares it with :attr:`_ordered_at`."""
        self._ordered_at = (-1, -1)
        """(``_seq``, ``_changes``) when :meth:`ordered` last found the order."""
        self.reserving: dict[PendingJob, None] = {}
        """The jobs a pass reserved since the last full pass cancelled every reservation (the only jobs that may
        hold one: :meth:`~kubeflux.scheduler.core.KubefluxScheduler._reserve` notes each), so that a full pass
        cancels theirs without visiting every waiting job: 10,000 a pass in a burst, 157 passes."""
        self.starts_told: dict[PendingJob, None] = {}
        """The jobs that may have a pod told an expected start (:meth:`tell_start` notes each), which a full pass
        that no longer reserves them takes back (``_forget_stale_starts``), without visiting every waiting job."""
        self.gated: dict[str, Pod] = {}
        """Pod uid → a pod of the scheduler's that still has ``spec.schedulingGates``: not queued, not placed, waiting
        (``SchedulingGated``) until its last gate is removed; then it is queued as a new pod."""

    def changed(self) -> None:
        """The cluster changed: a waiting job might now fit (a gang backing off is tried again at once), or a
        reservation might no longer hold."""
        self.dirty = True
        self.epoch += 1
        if self.backing_off:
            for job in self.backing_off:
                job.retry_at = 0.0
            self.backing_off.clear()

    def __len__(self) -> int:
        return len(self.jobs)

    def add(self, uid: str, pod: Pod) -> PendingJob:
        """Queue ``pod`` (or refresh it when already queued); returns its job."""
        self._changes += 1
        job = self.by_pod.get(uid)
        if job is not None:
            job.put(uid, pod)
            return job
        group = pod.group
        key = pod.key if group is None or group in self.started_groups else group
        job = self.jobs.get(key)
        if job is None:
            self._seq += 1
            known = self.groups.get(key) if group is not None and key == group else None
            arrival = known.creation_time if known is not None and known.creation_time else pod.creation_time
            job = PendingJob(key, group if key == group else None, arrival, self._seq)
            self.jobs[key] = job
        job.put(uid, pod)
        self.by_pod[uid] = job
        if EXPECTED_START_ANNOTATION in pod.annotations:  # written before it was queued here (a restart)
            job.told.setdefault(uid, INHERITED)
            self.starts_told[job] = None
        return job

    def tell_start(self, job: PendingJob, uid: str, said: tuple[str, float | None]) -> None:
        """Record what pod ``uid`` of ``job`` was told (:attr:`PendingJob.told`): a start notes the job in
        :attr:`starts_told`."""
        job.told[uid] = said
        if said[1] is not None:
            self.starts_told[job] = None

    def registered(self, register: dict[PendingJob, None]) -> list[PendingJob]:
        """The jobs of ``register`` still in the queue, in the queue's order (that of :attr:`jobs`)."""
        jobs = self.jobs
        return sorted((job for job in register if jobs.get(job.key) is job), key=_slot)

    def remove_pod(self, uid: str) -> PendingJob | None:
        """Forget a pod (bound elsewhere, deleted, ended); its job goes when empty. Returns the job."""
        job = self.by_pod.pop(uid, None)
        if job is None:
            return None
        job.drop(uid)
        if not job.pods and self.jobs.get(job.key) is job:
            del self.jobs[job.key]
        elif job.pods:
            self._changes += 1  # its place may change (its priority is its pods')
        return job

    def take_place(self, job: PendingJob, of: PendingJob) -> None:
        """``job`` waits in the place of ``of`` (:meth:`PendingJob.take_place_of`: a started group's member left
        over)."""
        job.take_place_of(of)
        self._changes += 1

    def remove_job(self, job: PendingJob) -> None:
        for uid in job.pods:
            self.by_pod.pop(uid, None)
        if self.jobs.get(job.key) is job:
            del self.jobs[job.key]
        if job.group is not None:
            self.started_groups.add(job.group)

    def drop(self, job: PendingJob) -> None:
        """Forget a job that will never run (rejected)."""
        for uid in job.pods:
            self.by_pod.pop(uid, None)
        if self.jobs.get(job.key) is job:
            del self.jobs[job.key]

    def minimum(self, job: PendingJob) -> int:
        """How many of the job's pods must start together: a group's ``minMember`` (at most its pods), else all."""
        if job.group is None:
            return len(job.pods)
        group = self.groups.get(job.group)
        return len(job.pods) if group is None else max(1, min(group.min_member, len(job.pods)))

    def missing_members(self, job: PendingJob) -> int:
        """How many more pods the job's group needs before it can be tried (0 when ready)."""
        if job.group is None:
            return 0
        group = self.groups.get(job.group)
        if group is None:
            return max(1, len(job.pods))  # the PodGroup itself is missing: wait for it
        return max(0, group.min_member - len(job.pods))

    def timeout(self, job: PendingJob) -> float | None:
        if job.group is None:
            return None
        group = self.groups.get(job.group)
        return None if group is None else group.schedule_timeout_seconds

    def ordered(self) -> list[PendingJob]:
        """The jobs in queue order (a new list). The order found last time is kept and mended: the jobs gone are
        left out, and only the new ones and those whose place changed are sorted into it, so that a pass while
        thousands wait (a burst, :attr:`~kubeflux.scheduler.core.KubefluxScheduler.queue_depth` jobs tried a pass)
        does not sort them all again: with 10,000 pods waiting, the sort made 10,000 key tuples a pass (~1 ms) and
        set off the collections they cost (a 10,000-pod burst's 157 passes, compiled: 1.84 -> 1.57 s of CPU; the
        same 1.17 s both with the collector off).

        When jobs only left since (a burst: those bound, at the head of the queue), the order is the last one less
        the jobs gone at its head, found without a walk over every job (157 passes over 10,000 waiting pods each
        walked them all: ~7 % of a pass, compiled): no job came (:attr:`_seq`), none moved (:attr:`_changes`), so
        the jobs are a subset of the last order's, and when as many are left as the order holds past the gone head,
        they are exactly those."""
        jobs = self.jobs
        order = self._order
        if self._ordered_at == (self._seq, self._changes):
            gone = 0
            while gone < len(order) and jobs.get(order[gone].key) is not order[gone]:
                order[gone].sorted_as = None
                gone += 1
            if len(order) - gone == len(jobs):
                del order[:gone]
                return list(order)
        kept: list[PendingJob] = []
        for job in self._order:
            if jobs.get(job.key) is not job:
                job.sorted_as = None
            elif job.sort_key is not None and job.sorted_as is job.sort_key:
                kept.append(job)
            elif job.sorted_as is not None and job.sorted_as == job.order():  # its pods changed, not its place
                job.sorted_as = job.sort_key
                kept.append(job)
        if len(kept) < len(jobs):  # (the keys compared as the fields hold them: mypyc boxes a returned tuple anew)
            moved: list[PendingJob] = []
            for job in jobs.values():
                job.order()
                if job.sorted_as is not job.sort_key:
                    job.sorted_as = job.sort_key
                    moved.append(job)
            kept.extend(moved)
            kept.sort(key=PendingJob.order)  # two sorted runs, merged
        self._order = kept
        self._ordered_at = (self._seq, self._changes)
        return list(kept)


_WRITTEN_BACK = frozenset({EXPECTED_START_ANNOTATION, EXPECTED_START_TIME_ANNOTATION})


def placement_view(pod: Pod) -> tuple[object, ...]:
    """What placing a pending pod reads of it (not its status, nor the expected start written back on it, in either
    form)."""
    annotations = {k: v for k, v in pod.annotations.items() if k not in _WRITTEN_BACK}
    return (
        pod.requests,
        pod.priority,
        pod.labels,
        annotations,
        pod.node_selector,
        pod.tolerations,
        pod.required_node_affinity,
        pod.active_deadline_seconds,
        pod.scheduler_name,
        pod.preemption_policy,
        pod.terms,
        pod.resource_claims,
    )
