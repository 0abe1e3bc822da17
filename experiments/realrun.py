"""A workload of seed 004's shape on the real control plane: etcd, kube-apiserver, kube-controller-manager (the Job
controller), KWOK nodes and a real scheduler — kube-scheduler at its defaults, kube-scheduler with v1.36's own gang
scheduling (``GenericWorkload`` and ``GangScheduling`` gates, ``scheduling.k8s.io/v1alpha2`` PodGroups), or
``kubeflux serve`` — with every job submitted at its time (wall time from the run's start) and each job's
submission, first bind, compute start and end read off the watch.

What a job's times are, as :mod:`kubeflux.sim` counts them (seconds from the first submission):

* **submitted**: just before its first object (the Job, or the PodGroup) is created;
* **first bind**: the first watch event showing one of its pods with a ``spec.nodeName``;
* **start**: the event showing its ``min_member`` (else first) pod ``Running`` — a pair starts when both run;
* **end**: a ``batch/v1`` Job's ``Complete`` condition (the Job controller's, so its sync delay is in it);
  otherwise the event showing its last pod ``Succeeded``.

KWOK runs each pod its run time from its ``Running`` (the stage's delay; a Job's pod also needs ``jitter-delay``, or
KWOK's default stage draws at most 5 s), so pods of a pair are not coupled: the simulated runs it is compared with
use ``couple=False``.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import signal
import ssl
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import orjson
from kubernetes import client

from kubeflux.controlplane import ControlPlane, free_port
from kubeflux.kube.command import api_client
from kubeflux.scheduler.objects import MEMORY, POD_GROUP_LABEL
from kubeflux.scheduler.translate import DURATION_ANNOTATION
from kubeflux.scheduler.units import format_quantity
from kubeflux.sim.workloads.manifests import JITTER_ANNOTATION, RUN_TIME_ANNOTATION
from kubeflux.sim.workloads.model import JobKind, Workload, WorkloadJob

__all__ = ["REAL_SCHEDULERS", "JobTimes", "RealRun", "real_run"]

NAMESPACE = "default"
REAL_SCHEDULERS = ("kube-scheduler", "kube-scheduler-gang", "serve")
"""``kube-scheduler``: at its defaults, no gangs; ``kube-scheduler-gang``: v1.36's gang scheduling (feature gates,
``scheduling.k8s.io/v1alpha2`` PodGroups); ``serve``: ``kubeflux serve`` (coscheduling's PodGroup CRD)."""
_GANG_GATES = {"GenericWorkload": True, "GangScheduling": True}
_GANG_API = {"scheduling.k8s.io/v1alpha2": "true"}


@dataclass(slots=True)
class JobTimes:
    """One job's times, seconds from the first submission (None: it never got there)."""

    name: str
    submitted: float
    first_bind: float | None = None
    start: float | None = None
    end: float | None = None


@dataclass(slots=True)
class RealRun:
    """What one run measured: the jobs in submission order, and where it ran."""

    scheduler: str
    workload: str
    jobs: list[JobTimes]
    wall_seconds: float
    load: tuple[float, float, float]
    """The load average (1, 5, 15 min) at the run's end."""
    notes: list[str] = field(default_factory=list)
    pods: dict[str, dict[str, float]] = field(default_factory=dict)
    """Each pod's ``bind``, ``running`` and ``end`` as the watch showed them (seconds, as the jobs' times)."""
    origin_unix: float = 0.0
    """The wall clock (Unix seconds) at time 0 of the run: where kube-scheduler's whole-second back-off windows
    fall in the run's time."""
    scheduler_metrics: dict[str, float] = field(default_factory=dict)
    """From kube-scheduler's ``/metrics`` at the end: ``attempts_<result>`` and ``attempt_seconds_<result>``
    (``scheduler_scheduling_attempt_duration_seconds``' count and sum by result)."""

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @staticmethod
    def from_json(data: dict[str, Any]) -> RealRun:
        jobs = [JobTimes(**job) for job in data["jobs"]]
        load = (float(data["load"][0]), float(data["load"][1]), float(data["load"][2]))
        return RealRun(
            data["scheduler"],
            data["workload"],
            jobs,
            data["wall_seconds"],
            load,
            data["notes"],
            data.get("pods", {}),
            data.get("origin_unix", 0.0),
            data.get("scheduler_metrics", {}),
        )


def _go_duration(seconds: float) -> str:
    return f"{round(seconds * 1000)}ms"


def _resources(requests: dict[str, int]) -> dict[str, Any]:
    quantities = {name: format_quantity(name, amount) for name, amount in requests.items() if amount}
    limits = {name: q for name, q in quantities.items() if name not in ("cpu", MEMORY)}  # extended: limits too
    return {"requests": quantities, "limits": limits}


def _pod_spec(job: WorkloadJob, scheduler_name: str) -> tuple[dict[str, str], dict[str, Any]]:
    """The annotations and spec of ``job``'s pod (its first template)."""
    template = job.pods[0]
    assert template.run_time is not None, f"{job.name}: a run time is needed"
    run = _go_duration(template.run_time)
    annotations = {RUN_TIME_ANNOTATION: run, JITTER_ANNOTATION: run, DURATION_ANNOTATION: str(template.run_time)}
    spec: dict[str, Any] = {
        "schedulerName": scheduler_name,
        "restartPolicy": "Never",
        "terminationGracePeriodSeconds": 0,
        "tolerations": [
            {"key": t.key, "operator": t.operator, "effect": t.effect} | ({"value": t.value} if t.value else {})
            for t in template.tolerations
        ],
        "containers": [{"name": "train", "image": "busybox:1.36", "resources": _resources(template.requests)}],
    }
    return annotations, spec


class _Submitter:
    """Creates each job's objects through the API."""

    def __init__(self, api: client.ApiClient, scheduler: str) -> None:
        self.core: Any = client.CoreV1Api(api)  # raw JSON bodies in, raw responses out (_preload_content=False)
        self.batch: Any = client.BatchV1Api(api)
        self.custom: Any = client.CustomObjectsApi(api)
        self.scheduler = scheduler
        self.scheduler_name = "kubeflux" if scheduler == "serve" else "default-scheduler"

    def submit(self, job: WorkloadJob) -> None:
        annotations, spec = _pod_spec(job, self.scheduler_name)
        body: dict[str, Any]
        if job.kind is JobKind.JOB:
            body = {
                "apiVersion": "batch/v1",
                "kind": "Job",
                "metadata": {"name": job.name},
                "spec": {
                    "parallelism": job.parallelism,
                    "completions": job.completions,
                    "backoffLimit": job.backoff_limit,
                    "template": {"metadata": {"annotations": annotations}, "spec": spec},
                },
            }
            self.batch.create_namespaced_job(NAMESPACE, body, _preload_content=False)
            return
        gang = self.scheduler == "kube-scheduler-gang"
        members = len(job.pods)
        if job.min_member and gang:
            self._group(
                "scheduling.k8s.io", "v1alpha2", job.name, {"schedulingPolicy": {"gang": {"minCount": job.min_member}}}
            )
        elif job.min_member and self.scheduler == "serve":
            group: dict[str, Any] = {"minMember": job.min_member}
            if job.schedule_timeout_seconds is not None:
                group["scheduleTimeoutSeconds"] = round(job.schedule_timeout_seconds)
            self._group("scheduling.x-k8s.io", "v1alpha1", job.name, group)
        for index in range(members):
            metadata: dict[str, Any] = {"name": f"{job.name}-{index}", "annotations": annotations}
            pod_spec = dict(spec)
            if job.min_member and gang:
                pod_spec["schedulingGroup"] = {"podGroupName": job.name}
            elif job.min_member:
                metadata["labels"] = {POD_GROUP_LABEL: job.name}
            body = {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": pod_spec}
            self.core.create_namespaced_pod(NAMESPACE, body, _preload_content=False)

    def _group(self, group: str, version: str, name: str, spec: dict[str, Any]) -> None:
        body = {"apiVersion": f"{group}/{version}", "kind": "PodGroup", "metadata": {"name": name}, "spec": spec}
        self.custom.create_namespaced_custom_object(
            group, version, NAMESPACE, "podgroups", body, _preload_content=False
        )


def _lines(response: Any) -> Iterator[bytes]:
    """The non-empty lines of a streamed (watch) response, as they come."""
    pending = b""
    for chunk in response.stream(amt=None, decode_content=True):
        pending += chunk
        *lines, pending = pending.split(b"\n")
        yield from (line for line in lines if line.strip())
    if pending.strip():
        yield pending


class _Watcher(threading.Thread):
    """Reads one resource's watch (raw JSON lines) and hands each object to ``seen`` with the wall time it came."""

    def __init__(self, list_call: Any, seen: Any, clock: Any) -> None:
        super().__init__(daemon=True)
        self.list_call, self.seen, self.clock = list_call, seen, clock
        self.ready = threading.Event()
        self.stopping = False
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            listed = orjson.loads(self.list_call(NAMESPACE, _preload_content=False).data)
            version = listed["metadata"]["resourceVersion"]
            for obj in listed["items"]:
                self.seen(obj, self.clock())
            self.ready.set()
            while not self.stopping:
                response = self.list_call(
                    NAMESPACE,
                    watch=True,
                    resource_version=version,
                    timeout_seconds=300,
                    allow_watch_bookmarks=True,
                    _preload_content=False,
                    _request_timeout=330,
                )
                for line in _lines(response):
                    event = orjson.loads(line)
                    obj = event["object"]
                    version = obj["metadata"].get("resourceVersion", version)
                    if event["type"] in ("ADDED", "MODIFIED"):
                        self.seen(obj, self.clock())
                    if self.stopping:
                        break
                response.release_conn()
        except BaseException as exc:  # reported by the run
            self.error = exc
            self.ready.set()


class _Book:
    """Each job's times as the watch shows them."""

    def __init__(self, jobs: Sequence[WorkloadJob]) -> None:
        self.jobs = {job.name: job for job in jobs}
        self.times: dict[str, JobTimes] = {}
        self.pods: dict[str, dict[str, float]] = {}
        """Pod name → {"bind", "running", "end"} wall times."""
        self.owner: dict[str, str] = {}
        self.lock = threading.Lock()
        self.changed = threading.Condition(self.lock)

    def submitted(self, name: str, at: float) -> None:
        with self.lock:
            self.times[name] = JobTimes(name, at)

    def job_of(self, pod: dict[str, Any]) -> str | None:
        metadata = pod["metadata"]
        labels = metadata.get("labels") or {}
        name = labels.get("job-name") or labels.get(POD_GROUP_LABEL)
        if name is None:
            group = (pod["spec"].get("schedulingGroup") or {}).get("podGroupName")
            name = group or metadata["name"].rsplit("-", 1)[0]
        return name if name in self.jobs else None

    def pod_seen(self, pod: dict[str, Any], at: float) -> None:
        name = self.job_of(pod)
        if name is None:
            return
        with self.changed:
            times = self.pods.setdefault(pod["metadata"]["name"], {})
            self.owner[pod["metadata"]["name"]] = name
            if pod["spec"].get("nodeName"):
                times.setdefault("bind", at)
            phase = (pod.get("status") or {}).get("phase")
            if phase in ("Running", "Succeeded"):
                times.setdefault("running", at)
            if phase in ("Succeeded", "Failed"):
                times.setdefault("end", at)
            self._update(name)
            self.changed.notify_all()

    def job_seen(self, obj: dict[str, Any], at: float) -> None:
        name = obj["metadata"]["name"]
        conditions = (obj.get("status") or {}).get("conditions") or []
        if any(c.get("type") in ("Complete", "Failed") and c.get("status") == "True" for c in conditions):
            with self.changed:
                times = self.times.get(name)
                if times is not None and times.end is None:
                    times.end = at
                self.changed.notify_all()

    def _update(self, name: str) -> None:
        times = self.times.get(name)
        if times is None:
            return
        job = self.jobs[name]
        pods = [t for pod, t in self.pods.items() if self.owner[pod] == name]
        binds = [t["bind"] for t in pods if "bind" in t]
        if binds:
            times.first_bind = min(binds)
        running = sorted(t["running"] for t in pods if "running" in t)
        quorum = max(job.min_member, 1)
        if len(running) >= quorum:
            times.start = running[quorum - 1]
        ends = [t["end"] for t in pods if "end" in t]
        members = job.completions if job.kind is JobKind.JOB else len(job.pods)
        if job.kind is not JobKind.JOB and len(ends) >= members:
            times.end = max(ends)

    def done(self) -> bool:
        return len(self.times) == len(self.jobs) and all(t.end is not None for t in self.times.values())


def _run_serve(plane: ControlPlane, folder: Path) -> Any:
    """``kubeflux serve`` as a process of its own (its own interpreter, as a user runs it), wall clock; returns
    once its ``/readyz`` answers (its caches synced), so that no job waits for its start."""
    config = folder / "serve.yaml"
    port = free_port()
    settings = {"clock": "wall", "watch": {"timeoutSeconds": 60}, "operations": {"port": port}}
    config.write_text(json.dumps(settings))
    log = (folder / "logs" / "serve.log").open("ab")
    code = "import sys; from kubeflux.cli import main; sys.argv[0] = 'kubeflux'; main()"
    argv = [sys.executable, "-c", code, "serve", "--config", str(config), "--kubeconfig", str(plane.kubeconfig)]
    process = subprocess.Popen(
        argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, preexec_fn=_die_with_parent
    )
    deadline = time.monotonic() + 90.0
    while time.monotonic() < deadline and process.poll() is None:
        url = f"http://127.0.0.1:{port}/readyz"
        with contextlib.suppress(OSError), urllib.request.urlopen(url, timeout=2.0) as response:
            if response.status == 200:
                return process
        time.sleep(0.2)
    process.kill()
    process.wait()
    raise RuntimeError(f"kubeflux serve did not become ready (see {folder / 'logs' / 'serve.log'})")


def _die_with_parent() -> None:  # in the child between fork and exec, as the control plane's components
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


@contextmanager
def _plane(folder: Path, scheduler: str, nodes: int, node_capacity: dict[str, str]) -> Iterator[ControlPlane]:
    gang = scheduler == "kube-scheduler-gang"
    plane = ControlPlane(
        folder, feature_gates=_GANG_GATES if gang else {}, runtime_config=_GANG_API if gang else {}
    ).start()
    serve = None
    try:
        if scheduler == "serve":
            plane.install_crds()
        plane.start_controller_manager()
        plane.start_kwok()
        extra = {k: v for k, v in node_capacity.items() if k not in ("cpu", "memory")}
        plane.add_kwok_nodes(nodes, cpu=node_capacity["cpu"], memory=node_capacity["memory"], extra=extra)
        if scheduler == "serve":
            serve = _run_serve(plane, folder)
        else:
            plane.start_scheduler()
        yield plane
    finally:
        if serve is not None:
            serve.terminate()
            try:
                serve.wait(10)
            except Exception:
                serve.kill()
                serve.wait()
        plane.stop()


def _wait_nodes_ready(api: client.ApiClient, count: int, timeout: float = 120.0) -> None:
    core = client.CoreV1Api(api)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        response: Any = core.list_node(_preload_content=False)
        items = orjson.loads(response.data)["items"]
        ready = [
            n
            for n in items
            if any(c.get("type") == "Ready" and c.get("status") == "True" for c in n["status"].get("conditions") or [])
        ]
        if len(ready) >= count:
            return
        time.sleep(0.2)
    raise RuntimeError(f"{count} KWOK nodes not Ready after {timeout:g} s")


def real_run(
    workload: Workload,
    scheduler: str,
    folder: Path,
    *,
    nodes: int,
    node_capacity: dict[str, str],
    timeout: float = 3600.0,
) -> RealRun:
    """Run ``workload`` (jobs of one pod template each: seed 004's Jobs, or pod groups) on a new control plane in
    ``folder`` under ``scheduler`` (one of :data:`REAL_SCHEDULERS`), on ``nodes`` KWOK nodes of ``node_capacity``
    (``cpu``, ``memory`` and extended resources, as quantities); returns every job's times. Raises RuntimeError
    when it is not done within ``timeout`` wall seconds (the logs in ``folder/logs`` say why)."""
    if scheduler not in REAL_SCHEDULERS:
        raise ValueError(f"unknown real scheduler {scheduler!r}; known: {', '.join(REAL_SCHEDULERS)}")
    order = sorted(workload.jobs, key=lambda j: j.submit_time)
    book = _Book(order)
    started = time.perf_counter()
    with _plane(folder, scheduler, nodes, node_capacity) as plane:
        api: Any = api_client(plane.kubeconfig, None, False, 8)
        try:
            _wait_nodes_ready(api, nodes)
            submitter = _Submitter(api, scheduler)
            t0 = time.monotonic() + 1.0
            origin_unix = time.time() + 1.0

            def clock() -> float:
                return time.monotonic() - t0

            core, batch = client.CoreV1Api(api), client.BatchV1Api(api)
            watchers = [_Watcher(core.list_namespaced_pod, book.pod_seen, clock)]
            if any(job.kind is JobKind.JOB for job in order):
                watchers.append(_Watcher(batch.list_namespaced_job, book.job_seen, clock))
            for watcher in watchers:
                watcher.start()
            for watcher in watchers:
                watcher.ready.wait(60)
            origin = order[0].submit_time
            for job in order:
                delay = job.submit_time - origin - clock()
                if delay > 0:
                    time.sleep(delay)
                book.submitted(job.name, clock())
                submitter.submit(job)
            deadline = time.monotonic() + timeout
            with book.changed:
                while not book.done():
                    errors = [w.error for w in watchers if w.error is not None]
                    if errors:
                        raise RuntimeError(f"a watch failed: {errors[0]!r}")
                    if time.monotonic() > deadline:
                        missing = [t.name for t in book.times.values() if t.end is None]
                        raise RuntimeError(f"not done after {timeout:g} s: {len(missing)} job(s) left: {missing[:5]}")
                    book.changed.wait(1.0)
            for watcher in watchers:
                watcher.stopping = True
            metrics = _scheduler_metrics(plane) if scheduler != "serve" else {}
        finally:
            api.close()
    jobs = [book.times[job.name] for job in order]
    return RealRun(
        scheduler,
        workload.name,
        jobs,
        time.perf_counter() - started,
        os.getloadavg(),
        pods=book.pods,
        origin_unix=origin_unix,
        scheduler_metrics=metrics,
    )


_ATTEMPTS = "scheduler_scheduling_attempt_duration_seconds"


def _scheduler_metrics(plane: ControlPlane) -> dict[str, float]:
    """kube-scheduler's scheduling attempts by result: how many, and their seconds in all (its ``/metrics``, read
    as the admin); empty when it does not answer."""
    context = ssl.create_default_context(cafile=str(plane.ca))
    context.load_cert_chain(plane.pki / "admin.crt", plane.pki / "admin.key")
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE  # its serving certificate is its own, self-signed
    url = f"https://127.0.0.1:{plane.ports['kube-scheduler']}/metrics"
    try:
        with urllib.request.urlopen(url, timeout=10.0, context=context) as response:
            text = response.read().decode()
    except OSError:
        return {}
    found: dict[str, float] = {}
    for line in text.splitlines():
        for suffix, key in (("_count", "attempts"), ("_sum", "attempt_seconds")):
            if line.startswith(_ATTEMPTS + suffix + "{"):
                labels, value = line[len(_ATTEMPTS + suffix) + 1 :].rsplit("} ", 1)
                result = dict(part.split("=", 1) for part in labels.split(",")).get("result", '""').strip('"')
                found[f"{key}_{result}"] = found.get(f"{key}_{result}", 0.0) + float(value)
    return found
