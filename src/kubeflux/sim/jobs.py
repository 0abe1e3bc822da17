"""Per-job bookkeeping of the simulated cluster, pod timing read from templates and KWOK annotations, and the
conversion of a finished simulation into :class:`~kubeflux.sim.records.JobRecord` rows.

A job record holds its pod records (:mod:`kubeflux.sim.pods`); a pod record names its job by index, as a pod's
``ownerReferences`` name its owner, so this module imports the pods module and never the other way round."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Final

from kubeflux.apiobjects.podfailure import failed_pod_of
from kubeflux.scheduler.objects import CPU, GPU, MEMORY, POD_GROUP_LABEL, WALLTIME_ANNOTATION
from kubeflux.sim.pods import Lifecycle, SimPod, TemplateTiming
from kubeflux.sim.podstatus import pod_status
from kubeflux.sim.records import FinalState, JobRecord, PodRecord
from kubeflux.sim.resourceids import ResourceKind, has_ids, units_of
from kubeflux.sim.workloads.model import JobKind, PodTemplate, WorkloadJob

READY_DELAY: Final = "pod-ready.stage.kwok.x-k8s.io/delay"
READY_JITTER: Final = "pod-ready.stage.kwok.x-k8s.io/jitter-delay"
COMPLETE_DELAY: Final = "pod-complete.stage.kwok.x-k8s.io/delay"
COMPLETE_JITTER: Final = "pod-complete.stage.kwok.x-k8s.io/jitter-delay"
PEER_FAILED: Final = "PeerFailed"
"""The reason of a coupled job's pod ended because another of its pods failed (an MPI rank lost)."""
JOB_NAME_LABEL: Final = "batch.kubernetes.io/job-name"
COUPLED_ANNOTATION: Final = "sim.kubeflux.io/coupled"
"""On a Job's pod template: ``"true"`` makes its ``parallelism`` pods one coupled job (see :func:`coupled_quorum`)."""


_DURATION_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h)")
_UNIT_SECONDS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_duration(text: str) -> float:
    """A Go duration (``"90s"``, ``"1h30m"``, ``"1.5h"``, ``"250ms"``) in seconds, as KWOK's ``durationFrom``
    reads it. Raises ValueError on anything else."""
    value = text.strip()
    if value in ("0", ""):
        if value == "":
            raise ValueError("empty duration")
        return 0.0
    pos, total = 0, 0.0
    while pos < len(value):
        match = _DURATION_PART.match(value, pos)
        if match is None:
            raise ValueError(f"bad duration {text!r} (expected a Go duration such as '90s' or '1h30m')")
        total += float(match.group(1)) * _UNIT_SECONDS[match.group(2)]
        pos = match.end()
    return total


def exact_seconds(value: float) -> str:
    """Seconds as text that reads back to the same float: ``"3600"``, ``"1000001"``, ``"12.25"`` (never the
    6-digit rounding of ``:g``, which would shift a backfilling plan)."""
    seconds = float(value)
    return str(int(seconds)) if seconds.is_integer() else repr(seconds)


def _annotation_seconds(template: PodTemplate, key: str, where: str) -> float | None:
    raw = template.annotations.get(key)
    if raw is None:
        return None
    try:
        return parse_duration(raw)
    except ValueError as exc:
        raise ValueError(f"{where}: annotation {key}: {exc}") from None


def _where(template: PodTemplate, wjob: WorkloadJob) -> str:
    return f"{wjob.source or 'job ' + wjob.id}: pod {template.name!r}"


def timing_of(
    template: PodTemplate,
    wjob: WorkloadJob,
    lifecycle: Lifecycle,
    labels: dict[str, str],
    primary: str,
    shared: dict[float, dict[str, str]] | None = None,
) -> TemplateTiming:
    """Validate a template and read its timing; KWOK's annotations take precedence over the template's run time
    and the lifecycle's start delay. Raises ValueError naming the job, pod and field.

    ``shared``: the annotations made for templates that have none, by walltime (they hold the walltime alone), to
    reuse for the other templates of the job (pods never change a dict of annotations in place)."""
    requests: Mapping[str, object] = template.requests  # read untyped: compiled, a float would be a bare TypeError
    for res, amount in requests.items():
        if type(amount) is int and amount >= 0:
            continue
        if not isinstance(amount, int) or isinstance(amount, bool) or amount < 0:
            where = _where(template, wjob)
            raise ValueError(f"{where}: requests[{res!r}] must be a non-negative integer, got {amount!r}")
    run_time = template.run_time
    start_delay, start_jitter, run_jitter = lifecycle.start_delay, lifecycle.start_jitter, template.run_time_jitter
    if template.annotations:  # KWOK's stage annotations, when the pod came from a manifest
        where = _where(template, wjob)
        complete = _annotation_seconds(template, COMPLETE_DELAY, where)
        run_time = run_time if complete is None else complete
        ready = _annotation_seconds(template, READY_DELAY, where)
        start_delay = start_delay if ready is None else ready
        ready_jitter = _annotation_seconds(template, READY_JITTER, where)
        start_jitter = start_jitter if ready_jitter is None else ready_jitter
        complete_jitter = _annotation_seconds(template, COMPLETE_JITTER, where)
        run_jitter = run_jitter if complete_jitter is None else complete_jitter
    if run_time is not None and run_time < 0:
        raise ValueError(f"{_where(template, wjob)}: run_time must be >= 0 seconds, got {run_time}")
    requested = wjob.requested_time
    walltime = requested if requested > 0 else run_time
    annotations = template.annotations
    # no estimate without a positive time: a pod of no run time (a Job's pod with no KWOK delay completes as soon
    # as it runs) is planned as running until it ends, not refused for a walltime of 0
    if walltime is not None and walltime > 0 and WALLTIME_ANNOTATION not in annotations:
        if shared is None or annotations:
            annotations = {**annotations, WALLTIME_ANNOTATION: exact_seconds(walltime)}
        else:
            made = shared.get(walltime)
            if made is None:
                made = shared[walltime] = {WALLTIME_ANNOTATION: exact_seconds(walltime)}
            annotations = made
    requests = template.requests  # (whole and non-negative: checked above)
    ext = others = None
    if len(requests) > 1 or CPU not in requests:
        ext = {k: v for k, v in requests.items() if k not in (CPU, MEMORY, GPU, "pods")} or None
        others = {k: v for k, v in requests.items() if k not in (CPU, "pods") and v} or None
    kind = wjob.kind
    return TemplateTiming(
        template,
        cpu=requests.get(CPU, 0),
        mem=requests.get(MEMORY, 0),
        gpu=requests.get(GPU, 0),
        ext=ext,
        run_time=run_time,
        run_jitter=run_jitter,
        start_delay=start_delay,
        start_jitter=start_jitter,
        exit_code=template.exit_code,
        walltime_kill=requested if kind is JobKind.TRACE and requested > 0 else None,
        labels=labels,
        annotations=annotations,
        scheduler_name=template.scheduler_name or primary,
        owner=f"Job/{wjob.name}" if kind is JobKind.JOB else "",
        container_name="main" if template.manifest is None else _container_name(template.manifest),
        others=others,
    )


def job_timings(wjob: WorkloadJob, lifecycle: Lifecycle, primary: str) -> list[TemplateTiming]:
    """:func:`job_timing` for each of the job's pod templates, in order (those without annotations share one dict
    of the walltime annotation: a trace job's pods). Raises ValueError as :func:`timing_of` does."""
    shared: dict[float, dict[str, str]] = {}
    return [job_timing(template, wjob, lifecycle, primary, shared) for template in wjob.pods]


def job_timing(
    template: PodTemplate,
    wjob: WorkloadJob,
    lifecycle: Lifecycle,
    primary: str,
    shared: dict[float, dict[str, str]] | None = None,
) -> TemplateTiming:
    """:func:`timing_of` for a pod of ``wjob``, with the labels its pods carry: the pod group's (a gang) and the
    Job's name (a ``batch/v1`` Job)."""
    labels = template.labels
    if wjob.min_member > 0 and labels.get(POD_GROUP_LABEL) != wjob.name:
        labels = {**labels, POD_GROUP_LABEL: wjob.name}
    if wjob.kind is JobKind.JOB:
        labels = {**labels, JOB_NAME_LABEL: wjob.name}
    return timing_of(template, wjob, lifecycle, labels, primary, shared)


def _container_name(manifest: Any) -> str:
    """The first container's name in a Pod or Job manifest (``main`` when it names none)."""
    if isinstance(manifest, dict):
        spec = manifest.get("spec", {})
        if isinstance(spec, dict) and "template" in spec:
            spec = spec["template"].get("spec", {}) if isinstance(spec["template"], dict) else {}
        containers = spec.get("containers") if isinstance(spec, dict) else None
        if isinstance(containers, list) and containers and isinstance(containers[0], dict):
            return str(containers[0].get("name", "main"))
    return "main"


def coupled_quorum(wjob: WorkloadJob) -> int:
    """How many of the job's pods must run before it computes, when they must run together; 0 when they need not.

    Coupled (an MPI job: ranks that start early wait, holding their resources idle, and all end together):

    * a trace job of more than one pod (all its pods);
    * a PodGroup of ``minMember`` > 1 (its ``minMember`` pods; with fewer pods than that, it never computes, as
      the served cluster's kubelet, which sees only the PodGroup, has it);
    * a ``batch/v1`` Job that names a PodGroup of ``minMember`` > 1 (``min(minMember, parallelism)`` pods), or whose
      pod template has the annotation ``sim.kubeflux.io/coupled: "true"`` (its ``parallelism`` pods).

    Raises ValueError naming the job when the annotation is neither ``"true"`` nor ``"false"``."""
    kind = wjob.kind
    if kind is JobKind.TRACE:
        return len(wjob.pods) if len(wjob.pods) > 1 else 0
    if kind is JobKind.POD_GROUP:
        return wjob.min_member if wjob.min_member > 1 else 0
    if kind is not JobKind.JOB or not wjob.pods:
        return 0
    text = wjob.pods[0].annotations.get(COUPLED_ANNOTATION)
    if text is not None and text.strip().lower() not in ("true", "false"):
        where = _where(wjob.pods[0], wjob)
        raise ValueError(f'{where}: annotation {COUPLED_ANNOTATION}: must be "true" or "false", got {text!r}')
    quorum = 0
    if wjob.min_member > 1:
        quorum = min(wjob.min_member, wjob.parallelism)
    elif text is not None and text.strip().lower() == "true":
        quorum = wjob.parallelism
    return quorum if quorum > 1 else 0


class SimJob:
    """One workload job in the cluster: its pods (all attempts) and the times the metrics need (seconds)."""

    __slots__ = (
        "active",
        "attempt_from",
        "coupled",
        "created",
        "deadline_hits",
        "fail_message",
        "fail_streak",
        "failed",
        "failed_reason",
        "fill_at",
        "finish",
        "first_bind",
        "group_key",
        "held",
        "index",
        "indexes_active",
        "indexes_done",
        "killed",
        "last_bind",
        "last_failure",
        "pods",
        "rejected_reason",
        "retries",
        "running_started",
        "spans",
        "start",
        "start_quorum",
        "submit",
        "succeeded",
        "sync_at",
        "timings",
        "waiting",
        "wjob",
    )

    def __init__(self, wjob: WorkloadJob, index: int, submit: float) -> None:
        self.wjob = wjob
        self.index = index
        self.submit = submit
        self.pods: list[SimPod] = []
        self.timings: list[TemplateTiming] = []
        self.created = self.active = self.succeeded = self.failed = 0
        self.fail_streak = self.retries = self.running_started = 0
        self.deadline_hits = self.killed = 0
        self.last_failure = 0.0
        self.fill_at = -1.0
        self.sync_at = -1.0
        """When the Job controller last put off looking at this Job's ended pods (one look per instant)."""
        gang = min(wjob.min_member, len(wjob.pods)) if wjob.kind is not JobKind.JOB else 0
        self.start_quorum = max(gang, 1)
        self.coupled = False
        """Its pods compute together (see :func:`coupled_quorum`); :attr:`start_quorum` of them must run."""
        self.waiting: list[SimPod] = []
        """A coupled job's pods that run and hold their resources idle until it can compute."""
        self.start: float | None = None
        """When it began computing: a coupled job's last required pod Running, else its first pod Running."""
        self.spans: tuple[int, ...] | None = None
        """The topology domains per level its pods were in when it began computing, when coupled and the run has
        topology levels (:mod:`kubeflux.sim.fabric`)."""
        self.finish: float | None = None
        self.first_bind: float | None = None
        self.last_bind: float | None = None
        self.group_key = ""
        self.rejected_reason = ""
        self.failed_reason = ""
        self.fail_message = ""
        """The message of the first of its pods a ``podFailurePolicy`` rule ``FailJob`` matched (the Job fails)."""
        self.indexes_done: set[int] = set()
        """An Indexed Job's completion indexes that succeeded."""
        self.indexes_active: set[int] = set()
        """An Indexed Job's completion indexes with a pod that has not ended."""
        self.attempt_from = 0
        """Where its current attempt's pods begin in :attr:`pods` (a trace job requeued: :meth:`requeued`)."""
        self.held = False
        """Suspended by an admission layer (Kueue evicted it): its pods' ends neither end it nor make new ones."""

    def attempt(self) -> list[SimPod]:
        """The pods of its current attempt (all its pods unless it was requeued)."""
        return self.pods[self.attempt_from :] if self.attempt_from else self.pods

    def requeued(self) -> None:
        """A new attempt begins (a trace job resubmitted whole after a preemption): one more retry, the figures of
        the attempt before forgotten (its start, binds and pod counts), its submit time kept."""
        self.retries += 1
        self.attempt_from = len(self.pods)
        self.start = self.first_bind = self.last_bind = self.spans = None
        self.succeeded = self.failed = self.killed = self.deadline_hits = self.fail_streak = 0
        self.running_started = 0

    def reject(self, reason: str, now: float) -> None:
        self.rejected_reason = reason

    def pod_ended(
        self, succeeded: bool, reason: str, now: float, index: int | None = None, sp: SimPod | None = None
    ) -> None:
        """Count one of the job's pods ending (the simulated cluster and the served one's replay record alike);
        ``index``: an Indexed Job's pod's completion index (a second success of one index counts once). A failed
        pod ``sp`` of a Job with a ``podFailurePolicy`` is judged by it: ``Ignore`` counts it in the back-off only
        (as the real controller's back-off record does), ``FailJob`` notes :attr:`fail_message`."""
        self.active -= 1
        if index is not None:
            self.indexes_active.discard(index)
        if succeeded:
            if index is None or index not in self.indexes_done:
                self.succeeded += 1
            if index is not None:
                self.indexes_done.add(index)
            self.fail_streak = 0
            return
        policy = self.wjob.pod_failure_policy
        if policy is not None and sp is not None:
            pod = sp.pod
            verdict = policy.judge(
                failed_pod_of({"metadata": {"namespace": pod.namespace, "name": pod.name}, "status": pod_status(sp)})
            )
            if not verdict.counts:
                self.fail_streak += 1
                self.last_failure = now
                return
            if verdict.fail_job and not self.fail_message:
                self.fail_message = verdict.fail_job
        self.failed += 1
        self.fail_streak += 1
        self.last_failure = now
        if reason == "DeadlineExceeded":
            self.deadline_hits += 1
        elif reason:
            self.killed += 1

    def final_state(self) -> FinalState:
        if self.rejected_reason and self.first_bind is None:
            return FinalState.REJECTED
        if self.finish is None:
            return FinalState.NOT_FINISHED
        if self.failed_reason == "DeadlineExceeded":
            return FinalState.COMPLETED_WALLTIME_REACHED
        if self.wjob.kind is JobKind.JOB:
            ok = self.succeeded >= self.wjob.completions
            return FinalState.COMPLETED_SUCCESSFULLY if ok else FinalState.COMPLETED_FAILED
        if self.deadline_hits:
            return FinalState.COMPLETED_WALLTIME_REACHED
        if self.failed > self.killed:
            return FinalState.COMPLETED_FAILED
        if self.killed:
            return FinalState.COMPLETED_KILLED
        return FinalState.COMPLETED_SUCCESSFULLY

    def requested_resources(self) -> int:
        """What ``requested_number_of_resources`` counts (:attr:`JobRecord.requested_number_of_resources`)."""
        wjob = self.wjob
        if wjob.kind is JobKind.TRACE and wjob.requested_processors > 0:
            return wjob.requested_processors
        per_wave = wjob.parallelism if wjob.kind is JobKind.JOB else 1
        return sum(pod_ids_asked(t.requests) for t in wjob.pods) * per_wave


def pod_ids_asked(requests: Mapping[str, object]) -> int:
    """Resource ids a pod asking ``requests`` gets (whole cores, GPUs, extended units), or 1 when it gets none.

    An amount that is no integer counts none: its job was rejected for it (:func:`timing_of`), and its record
    still says what it asked of the rest (read untyped, as compiled code would fail on a float)."""
    asked = 0
    for res, amount in requests.items():
        if type(amount) is int and has_ids(res):
            asked += units_of(res, amount)
    return asked or 1


def _id_bases(layout: list[ResourceKind] | None) -> dict[str, int]:
    return {kind.name: kind.first for kind in layout or () if kind.count}


def _pod_ids(sp: SimPod, bases: dict[str, int]) -> list[int]:
    """The pod's ids in the run's layout, sorted (cores keep theirs: they come first). A pod of cores only gives
    its own list, sorted in place: the job's and the pod's records share it (a month of trace has hundreds of
    thousands; the order of a pod's free ids is of no matter to the cluster)."""
    if not sp.ids:
        cores = sp.cores
        cores.sort()
        return cores
    ids = list(sp.cores)
    for res, local in sp.ids.items():
        base = bases.get(res, 0)
        ids.extend(base + i for i in local)
    ids.sort()
    return ids


def job_records(jobs: list[SimJob], workload_name: str, layout: list[ResourceKind] | None = None) -> list[JobRecord]:
    """Rows for ``jobs.csv``: one per job, in submission order; ids in ``layout`` (None: cores only)."""
    records: list[JobRecord] = []
    bases = _id_bases(layout)
    for job in jobs:
        start = job.start
        pods = job.attempt()  # a trace job requeued ran (and holds its ids) in its last attempt
        if start is None and job.finish is not None:
            started = [sp.running_at for sp in pods if sp.running_at is not None]
            start = min(started) if started else None
            if not job.pods and job.final_state() is FinalState.COMPLETED_SUCCESSFULLY:
                start = job.finish  # a Job of no pod (completions: 0) starts and ends at once
        if len(pods) == 1:
            allocated = _pod_ids(pods[0], bases)
        else:
            held: set[int] = set()
            for sp in pods:
                held.update(_pod_ids(sp, bases))
            allocated = sorted(held)
        wjob, state = job.wjob, job.final_state()
        records.append(
            JobRecord(
                job_id=wjob.id,
                workload_name=workload_name,
                submission_time=job.submit,
                requested_number_of_resources=job.requested_resources(),
                requested_time=wjob.requested_time,
                final_state=state,
                starting_time=start,
                finish_time=job.finish,
                first_bind_time=job.first_bind,
                last_bind_time=job.last_bind,
                allocated_resources=allocated,
                pods=job.created,
                attempts=1 + job.retries,
                reason=_why(job, state),
                profile=wjob.profile_name(),
                workload_submission_time=wjob.submit_time,
                priority=job_priority(wjob),
                priority_class=job_priority_class(wjob),
            )
        )
    return records


def job_priority(wjob: WorkloadJob) -> int:
    """A job's priority: its pods' highest (0 without pods, as a pod naming no PriorityClass has)."""
    pods = wjob.pods
    if len(pods) == 1:
        return pods[0].priority
    return max([t.priority for t in pods], default=0)


def job_priority_class(wjob: WorkloadJob) -> str:
    """The PriorityClass that gave a job its priority: its highest pod's (the first of them), empty when none."""
    pods = wjob.pods
    if not pods:
        return ""
    top = max(pods, key=lambda t: t.priority)
    return top.priority_class


def _why(job: SimJob, state: FinalState) -> str:
    """What ``jobs.csv``'s ``metadata`` says of a job that was rejected, did not succeed or did not finish
    (``state``: its final state)."""
    if state is FinalState.COMPLETED_SUCCESSFULLY:
        return ""
    if state is FinalState.REJECTED:
        return f"rejected: {job.rejected_reason}"
    if state is FinalState.NOT_FINISHED:
        waiting = [sp for sp in job.pods if sp.bound_at is None and sp.finished_at is None]
        told = next((sp.unschedulable_message for sp in reversed(waiting) if sp.unschedulable_message), "")
        if told:
            return f"not finished: a pod still waited: {told}"
        if waiting or not job.pods:
            return "not finished: a pod was never placed"
        return "not finished: still running when the run ended"
    if job.failed_reason:
        return f"failed: {job.failed_reason}"
    ended = [sp for sp in job.pods if sp.finished_at is not None and sp.pod.phase.value == "Failed"]
    if ended:
        sp = ended[-1]
        why = sp.reason or sp.container_reason or "Error"
        return f"failed: pod {sp.pod.name}: {why} (exit code {sp.exit_code})"
    return state.value


def pod_records(jobs: list[SimJob], layout: list[ResourceKind] | None = None) -> list[PodRecord]:
    """Rows for ``pods.csv``: every pod of every job (all attempts), jobs in submission order."""
    bases = _id_bases(layout)
    records: list[PodRecord] = []
    append = records.append
    for job in jobs:
        job_id = job.wjob.id
        for sp in job.pods:
            pod = sp.pod
            ended = sp.finished_at is not None
            append(
                PodRecord(
                    job_id=job_id,
                    pod=pod.key,
                    node=pod.node_name,
                    created_time=sp.created_at,
                    bind_time=sp.bound_at,
                    running_time=sp.running_at,
                    compute_time=sp.computing_at,
                    end_time=sp.finished_at,
                    phase=str(pod.phase),
                    reason=(sp.reason or sp.container_reason) if ended else "",
                    exit_code=sp.exit_code if ended else None,
                    resources=_pod_ids(sp, bases),
                    message=sp.status_message if ended else sp.unschedulable_message,
                )
            )
    return records


__all__ = [
    "COMPLETE_DELAY",
    "COMPLETE_JITTER",
    "COUPLED_ANNOTATION",
    "JOB_NAME_LABEL",
    "PEER_FAILED",
    "READY_DELAY",
    "READY_JITTER",
    "SimJob",
    "coupled_quorum",
    "exact_seconds",
    "job_priority",
    "job_records",
    "job_timing",
    "job_timings",
    "parse_duration",
    "pod_ids_asked",
    "pod_records",
    "timing_of",
]
