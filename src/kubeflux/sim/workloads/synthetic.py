"""Seeded synthetic workloads: arrivals, job sizes and run times drawn from simple distributions.

The same :class:`SyntheticSpec` and seed always give the same workload (Python's ``random.Random``, seeded with an
integer). What the knobs mean:

* **arrivals**: ``poisson`` — exponential inter-arrival times of mean ``mean_interarrival`` seconds (a Poisson
  process); ``fixed`` — exactly ``mean_interarrival`` seconds apart. The first job arrives at 0; with
  ``mean_interarrival=0`` every job does, under either (a burst, as ``mean_runtime=0`` gives jobs of no run time).
* **sizes**: ``powers_of_two`` — 1, 2, 4 … up to ``max_size``, each equally likely; ``uniform`` — any integer
  1 … ``max_size``; or a mapping ``{size: weight}`` (relative weights, e.g. ``{1: 3, 8: 1}``).
* **run times**: ``exponential`` of mean ``mean_runtime``; ``log_uniform`` between ``min_runtime`` and
  ``max_runtime`` (uniform in log space: as many 10–100 s jobs as 1,000–10,000 s ones); ``fixed`` =
  ``mean_runtime``. Exponential draws are kept at or above ``min_runtime``. Run times are rounded to the
  millisecond.
* **requested time** = run time × ``overestimate`` (users' walltime estimates; 1 means exact).
* **kind**: ``trace`` — a size is processors (for :func:`~kubeflux.sim.workloads.mapping.map_to_cluster`);
  ``job`` — a ``batch/v1`` Job of ``size`` completions, all in parallel, each pod asking ``pod_requests``;
  ``podgroup`` — ``size`` pods of ``pod_requests`` in a gang of ``size`` (timeout ``schedule_timeout_seconds``);
  ``pod`` — one pod of ``pod_requests`` (the size is ignored).
* **annotations**: given to every pod of the Kubernetes kinds (e.g. ``kubeflux.io/required-topology``: each gang
  asks for one rack).

:func:`to_manifests` writes a workload of the Kubernetes kinds as the YAML ``simulate`` and ``sweep`` read (a Job, a
PodGroup and its Pods, a Pod; KWOK's run-time annotation), so a generated workload is a file a grid can name.

:data:`PRESETS` holds the shapes of seed 004's experiments (KubeCon NA 2023, "Improving Batch Scheduling
Performance at Scale Using MCAD and KWOK"): 50 Jobs of one pod asking 8 GPUs for 72 s every 17 s on 4 KWOK nodes
of 8 GPUs (:func:`seed004_cluster`: tainted ``kwok.x-k8s.io/node=fake:NoSchedule`` as KWOK's nodes are, which the
preset's pods tolerate), and the same load as coscheduled PodGroups of 2 such pods; and seed 000's sprint demos
(the KubeFlux informer project): on one worker of 16 cores (:func:`seed000_cluster`), a ``batch/v1`` Job of 4 pi
pods of 8 cores that succeed, and one whose pods segfault (exit code 139). :func:`preset_cluster` names each
preset's cluster.

On the command line: ``kubeflux simulate --preset seed004-jobs`` and ``--synthetic "jobs=1000,max_size=64"``
(:func:`parse_spec`: ``key=value`` pairs naming :class:`SyntheticSpec` fields, over a preset when both are given).
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Literal

import yaml

from kubeflux.scheduler.objects import CPU, GPU, MEMORY, POD_GROUP_LABEL, PODS, Node, ResourceList, Taint, Toleration
from kubeflux.scheduler.validation import EXIT_CODE_ANNOTATION, RUN_TIME_ANNOTATION
from kubeflux.sim.workloads.cluster_file import HOSTNAME_LABEL, uniform_cluster
from kubeflux.sim.workloads.limits import seconds_problem
from kubeflux.sim.workloads.manifests import SUBMIT_TIME_ANNOTATION
from kubeflux.sim.workloads.model import JobKind, PodTemplate, Workload, WorkloadJob

MAX_SYNTHETIC_JOBS = 10_000_000
"""The most jobs the generator makes (LCG, the largest shared trace, has 188,041)."""
MAX_SYNTHETIC_SIZE = 1_000_000
"""The largest ``max_size``: the ``uniform`` distribution lists every size up to it."""

Arrival = Literal["poisson", "fixed"]
SizeDistribution = Literal["powers_of_two", "uniform"]
RuntimeDistribution = Literal["exponential", "log_uniform", "fixed"]


@dataclass(frozen=True, slots=True)
class SyntheticSpec:
    """What to generate; every field is described in the module docstring."""

    jobs: int = 100
    arrival: Arrival = "poisson"
    mean_interarrival: float = 20.0
    sizes: SizeDistribution | Mapping[int, float] = "powers_of_two"
    max_size: int = 64
    runtime: RuntimeDistribution = "exponential"
    mean_runtime: float = 600.0
    min_runtime: float = 1.0
    max_runtime: float = 36_000.0
    overestimate: float = 2.0
    kind: JobKind = JobKind.TRACE
    pod_requests: Mapping[str, int] = field(default_factory=lambda: {CPU: 1000})
    """Per pod, canonical units (``cpu`` in millicores); used by the Kubernetes kinds."""
    schedule_timeout_seconds: float | None = None
    name: str = "synthetic"
    tolerations: tuple[Toleration, ...] = ()
    """Given to every pod (the KubeCon presets tolerate KWOK's node taint)."""
    exit_code: int = 0
    """Every pod of the Kubernetes kinds ends with it once its run time is over (non-zero: it fails; seed 000's
    segfaulting pods use 139)."""
    backoff_limit: int = 6
    """``job``: the Job's ``backoffLimit`` (it fails once more pods than this failed)."""
    annotations: Mapping[str, str] = field(default_factory=dict)
    """Given to every pod of the Kubernetes kinds."""

    def validate(self) -> None:
        """Raise ValueError naming the first field that makes no sense."""
        if self.jobs < 0:
            raise ValueError(f"jobs: must not be negative, got {self.jobs}")
        if self.jobs > MAX_SYNTHETIC_JOBS or self.max_size > MAX_SYNTHETIC_SIZE:
            raise ValueError(
                f"jobs and max_size: at most {MAX_SYNTHETIC_JOBS:,} and {MAX_SYNTHETIC_SIZE:,}, got {self.jobs:,} "
                f"and {self.max_size:,} (they are generated before anything else is checked)"
            )
        for name in ("mean_interarrival", "mean_runtime", "min_runtime", "max_runtime"):
            problem = seconds_problem(getattr(self, name))
            if problem is not None:
                raise ValueError(f"{name}: {problem}")
        if not math.isfinite(self.overestimate) or self.overestimate > 1_000:
            raise ValueError(f"overestimate: must be a finite factor of at most 1000, got {self.overestimate}")
        if self.mean_interarrival < 0:
            raise ValueError(f"mean_interarrival: must not be negative, got {self.mean_interarrival}")
        if self.max_size < 1:
            raise ValueError(f"max_size: must be at least 1, got {self.max_size}")
        if isinstance(self.sizes, Mapping):
            if not self.sizes or any(s < 1 or w < 0 for s, w in self.sizes.items()) or sum(self.sizes.values()) <= 0:
                raise ValueError("sizes: weights must map sizes >= 1 to non-negative weights, not all zero")
        elif self.sizes not in ("powers_of_two", "uniform"):
            raise ValueError(f"sizes: unknown distribution {self.sizes!r}")
        if self.runtime not in ("exponential", "log_uniform", "fixed"):
            raise ValueError(f"runtime: unknown distribution {self.runtime!r}")
        if not 0 < self.min_runtime <= self.max_runtime and self.runtime == "log_uniform":
            raise ValueError("min_runtime/max_runtime: need 0 < min_runtime <= max_runtime for log_uniform")
        if self.mean_runtime < 0 or self.overestimate < 1:
            raise ValueError("mean_runtime must be >= 0 and overestimate >= 1")
        if not 0 <= self.exit_code <= 255:
            raise ValueError(f"exit_code: must be in 0..255 (a container's exit status), got {self.exit_code}")
        if self.backoff_limit < 0:
            raise ValueError(f"backoff_limit: must not be negative, got {self.backoff_limit}")


def _size_table(spec: SyntheticSpec) -> tuple[list[int], list[float]]:
    if isinstance(spec.sizes, Mapping):
        sizes = sorted(spec.sizes)
        return sizes, [float(spec.sizes[s]) for s in sizes]
    if spec.sizes == "powers_of_two":
        sizes = [2**k for k in range(int(math.log2(spec.max_size)) + 1)]
    else:
        sizes = list(range(1, spec.max_size + 1))
    return sizes, [1.0] * len(sizes)


def _run_time(rng: random.Random, spec: SyntheticSpec) -> float:
    if spec.runtime == "fixed":
        value = spec.mean_runtime
    elif spec.runtime == "log_uniform":
        value = math.exp(rng.uniform(math.log(spec.min_runtime), math.log(spec.max_runtime)))
    else:
        value = max(spec.min_runtime, rng.expovariate(1.0 / spec.mean_runtime)) if spec.mean_runtime > 0 else 0.0
    return round(value, 3)


def _cores(requests: ResourceList) -> int:
    return -(-requests.get(CPU, 0) // 1000)


def _job(spec: SyntheticSpec, index: int, submit: float, size: int, run_time: float) -> WorkloadJob:
    name = f"{spec.name}-{index:05d}"
    job = WorkloadJob(
        id=str(index),
        submit_time=submit,
        kind=spec.kind,
        name=name,
        requested_time=round(run_time * spec.overestimate, 3),
        source=f"{spec.name}:{index}",
    )
    requests = dict(spec.pod_requests)

    def pod(pod_name: str, labels: dict[str, str] | None = None) -> PodTemplate:
        return PodTemplate(
            name=pod_name,
            requests=dict(requests),
            run_time=run_time,
            labels=labels or {},
            tolerations=spec.tolerations,
            exit_code=spec.exit_code,
            annotations=dict(spec.annotations),
        )

    if spec.kind is JobKind.TRACE:
        job.requested_processors = size
        job.run_time = run_time
    elif spec.kind is JobKind.JOB:
        job.pods = [pod(name)]
        job.completions = job.parallelism = size
        job.backoff_limit = spec.backoff_limit
        job.requested_processors = _cores(requests) * size
    elif spec.kind is JobKind.POD_GROUP:
        job.pods = [pod(f"{name}-{i}", {POD_GROUP_LABEL: name}) for i in range(size)]
        job.min_member = size
        job.schedule_timeout_seconds = spec.schedule_timeout_seconds
        job.requested_processors = _cores(requests) * size
    else:
        job.pods = [pod(name)]
        job.requested_processors = _cores(requests)
    return job


def generate(spec: SyntheticSpec, seed: int = 0) -> Workload:
    """A workload drawn from ``spec`` with ``seed``; the same arguments always give the same jobs."""
    spec.validate()
    rng = random.Random(seed)
    sizes, weights = _size_table(spec)
    jobs: list[WorkloadJob] = []
    now = 0.0
    for index in range(spec.jobs):
        if index > 0:
            gap = (
                rng.expovariate(1.0 / spec.mean_interarrival)
                if spec.arrival == "poisson" and spec.mean_interarrival > 0
                else spec.mean_interarrival
            )
            now = round(now + gap, 3)
        size = sizes[0] if len(sizes) == 1 else rng.choices(sizes, weights)[0]
        jobs.append(_job(spec, index, now, size, _run_time(rng, spec)))
    header = {"generator": f"kubeflux synthetic seed={seed}"}
    return Workload(name=spec.name, jobs=jobs, header=header)


def _quantity(resource: str, amount: int) -> str:
    return f"{amount}m" if resource == CPU else str(amount)


def _pod_spec(pod: PodTemplate) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "containers": [
            {
                "name": "main",
                "image": "synthetic",
                "resources": {"requests": {r: _quantity(r, a) for r, a in pod.requests.items()}},
            }
        ]
    }
    if pod.tolerations:
        spec["tolerations"] = [
            {k: v for k, v in (("key", t.key), ("operator", t.operator), ("value", t.value), ("effect", t.effect)) if v}
            for t in pod.tolerations
        ]
    return spec


def _pod_metadata(pod: PodTemplate) -> dict[str, Any]:
    annotations = dict(pod.annotations)
    if pod.run_time is not None:
        annotations[RUN_TIME_ANNOTATION] = f"{round(pod.run_time * 1000)}ms"
    if pod.exit_code:
        annotations[EXIT_CODE_ANNOTATION] = str(pod.exit_code)
    metadata: dict[str, Any] = {"annotations": annotations}
    if pod.labels:
        metadata["labels"] = dict(pod.labels)
    return metadata


def _submitted(name: str, at: float) -> dict[str, Any]:
    return {"name": name, "annotations": {SUBMIT_TIME_ANNOTATION: repr(at)}}


def _manifests(job: WorkloadJob) -> list[dict[str, Any]]:
    if job.kind is JobKind.JOB:
        (pod,) = job.pods
        template = {"metadata": _pod_metadata(pod), "spec": {"restartPolicy": "Never", **_pod_spec(pod)}}
        counts = {"parallelism": job.parallelism, "completions": job.completions, "backoffLimit": job.backoff_limit}
        return [
            {
                "apiVersion": "batch/v1",
                "kind": "Job",
                "metadata": _submitted(job.name, job.submit_time),
                "spec": {**counts, "template": template},
            }
        ]
    docs: list[dict[str, Any]] = []
    if job.kind is JobKind.POD_GROUP:
        group: dict[str, Any] = {"minMember": job.min_member}
        if job.schedule_timeout_seconds is not None:
            group["scheduleTimeoutSeconds"] = round(job.schedule_timeout_seconds)
        docs.append(
            {
                "apiVersion": "scheduling.x-k8s.io/v1alpha1",
                "kind": "PodGroup",
                "metadata": _submitted(job.name, job.submit_time),
                "spec": group,
            }
        )
    for pod in job.pods:
        metadata = _pod_metadata(pod)
        metadata["name"] = pod.name
        metadata["annotations"][SUBMIT_TIME_ANNOTATION] = repr(job.submit_time)
        docs.append(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": metadata,
                "spec": {"restartPolicy": "Never", **_pod_spec(pod)},
            }
        )
    return docs


def to_manifests(workload: Workload) -> str:
    """``workload`` (of the Kubernetes kinds: ``job``, ``podgroup``, ``pod``) as Kubernetes YAML that
    :func:`~kubeflux.sim.workloads.manifests.read_manifests` reads back as the same jobs: submit times, pods, their
    requests, annotations, run times (to the millisecond) and exit codes. ValueError for a ``trace`` job (a trace's
    jobs are processors, not pods)."""
    docs: list[dict[str, Any]] = []
    for job in workload.jobs:
        if job.kind is JobKind.TRACE:
            raise ValueError(
                f"job {job.name}: a trace job has no pods to write as YAML (generate kind=job, podgroup or pod)"
            )
        docs.extend(_manifests(job))
    return yaml.safe_dump_all(docs, sort_keys=False)


_SEED004_POD = {CPU: 10, MEMORY: 110 * 2**30, GPU: 8}
"""The seed's fake training pod: ``cpu: 10m``, ``memory: 110Gi``, ``nvidia.com/gpu: 8``."""
KWOK_TAINT = Taint(key="kwok.x-k8s.io/node", value="fake", effect="NoSchedule")
KWOK_TOLERATION = Toleration(key="kwok.x-k8s.io/node", operator="Exists", effect="NoSchedule")
_SEED000_POD = {CPU: 8000, MEMORY: 2**30}
"""The seed's pi pod: 8 cores (``perl -Mbignum=bpi -wle 'print bpi(2000)'``), 1Gi."""
_SEED_JOBS = SyntheticSpec(arrival="fixed", runtime="fixed", overestimate=1.0, kind=JobKind.JOB)
"""What the seeds' Jobs share: they arrive at fixed gaps, run a fixed time and state it exactly."""
_SEED000_JOB = replace(_SEED_JOBS, jobs=1, sizes={4: 1.0}, mean_runtime=60.0, pod_requests=_SEED000_POD, name="pi-job")
_SEED004_JOBS = replace(
    _SEED_JOBS,
    jobs=50,
    mean_interarrival=17.0,
    sizes={1: 1.0},
    mean_runtime=72.0,
    pod_requests=_SEED004_POD,
    name="seed004-jobs",
    tolerations=(KWOK_TOLERATION,),
)

PRESETS: dict[str, SyntheticSpec] = {
    "seed004-jobs": _SEED004_JOBS,
    "seed004-podgroups": replace(
        _SEED004_JOBS,
        mean_interarrival=34.0,
        sizes={2: 1.0},
        kind=JobKind.POD_GROUP,
        schedule_timeout_seconds=10.0,
        name="seed004-podgroups",
    ),
    "seed000-succeed": _SEED000_JOB,
    "seed000-segfault": replace(
        _SEED000_JOB, mean_runtime=30.0, exit_code=139, backoff_limit=4, name="pi-job-segfault"
    ),
}
"""Named specs. ``seed004-jobs``: 50 one-pod Jobs of 8 GPUs, 72 s each, one every 17 s (the talk's high load:
the 4-node cluster queues once jobs arrive faster than every 18 s). ``seed004-podgroups``: 50 PodGroups of 2 such
pods (minMember 2, scheduleTimeoutSeconds 10), one every 34 s (queueing starts below 36 s). ``seed000-succeed``:
one Job of 4 pi pods of 8 cores running 60 s (two at a time on the 16-core worker); ``seed000-segfault``: one Job of
4 such pods that crash after 30 s with exit code 139, ``backoffLimit: 4`` (failed pods are replaced until the Job
fails)."""


def seed000_cluster() -> list[Node]:
    """The seed's sprint-3 demo cluster: one kind worker, ``kind-worker``, of one 16-core socket (64Gi)."""
    name = "kind-worker"
    allocatable = {CPU: 16_000, MEMORY: 64 * 2**30, PODS: 110}
    return [Node(name=name, uid=f"uid-{name}", allocatable=allocatable, labels={HOSTNAME_LABEL: name})]


def seed004_cluster() -> list[Node]:
    """The seed's cluster: 4 KWOK nodes of 8 GPUs (``cpu: 5000m`` → 5 cores, 256Gi, 110 pods), tainted
    ``kwok.x-k8s.io/node=fake:NoSchedule`` as KWOK's nodes are."""
    return [replace(node, taints=(KWOK_TAINT,)) for node in uniform_cluster(4, 5, "256Gi", 8, max_pods=110)]


def preset_cluster(name: str) -> list[Node]:
    """The cluster preset ``name`` runs on when none is given: seed 000's worker or seed 004's KWOK nodes."""
    return seed000_cluster() if name.startswith("seed000-") else seed004_cluster()


_SPEC_KEYS = (
    "jobs",
    "arrival",
    "mean_interarrival",
    "sizes",
    "max_size",
    "runtime",
    "mean_runtime",
    "min_runtime",
    "max_runtime",
    "overestimate",
    "kind",
    "schedule_timeout_seconds",
    "name",
    "exit_code",
    "backoff_limit",
)


def parse_spec(text: str, base: SyntheticSpec | None = None) -> SyntheticSpec:
    """A spec from ``key=value`` pairs separated by commas (``"jobs=1000,max_size=64,runtime=log_uniform"``),
    over ``base`` (default :class:`SyntheticSpec`'s defaults). ``sizes`` is ``powers_of_two``, ``uniform`` or
    weights ``1:3/8:1``; ``kind`` is ``trace``, ``job``, ``podgroup`` or ``pod``. Raises ValueError naming the
    pair that is wrong; the result is validated."""
    spec = base or SyntheticSpec()
    changes: dict[str, object] = {}
    for pair in filter(None, (p.strip() for p in text.split(","))):
        key, sep, raw = pair.partition("=")
        key, raw = key.strip(), raw.strip()
        if not sep or key not in _SPEC_KEYS:
            raise ValueError(f"{pair!r}: expected key=value with a key among {', '.join(_SPEC_KEYS)}")
        try:
            changes[key] = _spec_value(key, raw, getattr(spec, key))
        except ValueError as exc:
            raise ValueError(f"{pair!r}: {exc}") from None
    result = replace(spec, **changes)  # type: ignore[arg-type]
    result.validate()
    return result


def _spec_value(key: str, raw: str, current: object) -> object:
    if key == "kind":
        return JobKind(raw)
    if key == "sizes" and ":" in raw:
        weights = {}
        for item in raw.split("/"):
            size, _, weight = item.partition(":")
            weights[int(size)] = float(weight)
        return weights
    if key == "schedule_timeout_seconds":
        return None if raw in ("", "none") else float(raw)
    if isinstance(current, bool) or key in ("arrival", "sizes", "runtime", "name"):
        return raw
    if isinstance(current, int):
        return int(raw)
    return float(raw)


def preset(name: str, *, seed: int = 0, jobs: int | None = None, mean_interarrival: float | None = None) -> Workload:
    """Generate a named preset, optionally with another job count or inter-arrival time (e.g. 20 s: no queue)."""
    try:
        spec = PRESETS[name]
    except KeyError:
        raise ValueError(f"unknown preset {name!r}; known: {', '.join(sorted(PRESETS))}") from None
    spec = replace(
        spec,
        jobs=spec.jobs if jobs is None else jobs,
        mean_interarrival=spec.mean_interarrival if mean_interarrival is None else mean_interarrival,
    )
    return generate(spec, seed)


__all__ = [
    "KWOK_TAINT",
    "KWOK_TOLERATION",
    "PRESETS",
    "SyntheticSpec",
    "generate",
    "parse_spec",
    "preset",
    "preset_cluster",
    "seed000_cluster",
    "seed004_cluster",
    "to_manifests",
]
