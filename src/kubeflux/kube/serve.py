"""``kubeflux serve``: the scheduler core driven by a Kubernetes API server — the Kubernetes shell of DESIGN.md.

It holds no scheduling logic. The :class:`Serve` loop runs on one thread and is the only one to touch the cores:

1. the reflectors (:mod:`kubeflux.kube.reflector`) put raw watch events of nodes, PodGroups, PodDisruptionBudgets,
   namespaces, storage and device kinds, and pods on a bounded queue; they all list at once but the pods', which
   starts once the others have synced, so the core sees the nodes (and the groups, claims and volumes) before the
   pods bound to them or waiting for them;
2. the loop drains the queue in batches, reads each object with the core's manifest readers
   (:mod:`kubeflux.apiobjects.manifests`) and gives it to every core's ``observe``; an object those readers
   refuse is reported (a kubeflux pod waiting for it gets ``FailedScheduling`` naming the field) and left out,
   and the others keep being scheduled;
3. once every reflector has synced, ``schedule(now)`` runs after each batch and at the cores' ``next_wakeup``
   (once before too, when the pods' list begins: no pod is known, so it decides nothing, but the cores build
   their graphs from the nodes while the pods are listed);
   its decisions go to the :class:`~kubeflux.kube.binder.Binder`'s threads — in a process of their own
   (:mod:`kubeflux.kube.binderprocess`, ``binding.process``), so that the writes and the passes never wait for
   each other's GIL — and Binds the cluster refused come back to the loop, which tells the core (``unreserve``:
   the allocation is released and the pod queued again), after the ResourceClaims the Bind wrote or took back, as
   the server answered (the cores never wait for the watch to show serve's own claim writes, nor hear an older
   state of a claim after a newer one: :mod:`kubeflux.kube.claimversions`). An :class:`Evict` goes through the
   Eviction API on the binder's threads (a ``Preempted`` event on the victim; one victim job's evictions one after
   the other); one a PodDisruptionBudget refuses is logged and counted (``kubeflux_evictions{result="refused"}``),
   the rest of its job's are not sent (``result="spared"``), and the core is told of each (``unevict``). When that
   process ends unasked, the loop ends too.

Time: the cores' ``now`` is Unix time, or the simulated cluster's time when it publishes one (``GET
/kubeflux/time``, asked only of a server whose ``/version`` is kubeflux's; its ``speed`` makes wake-ups shorter in
wall time), so that pod timestamps and the core agree.
"""

from __future__ import annotations

import gc
import logging
import queue
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

import orjson
import urllib3
from kubernetes import client

from kubeflux.apiobjects.manifests import (
    ManifestError,
    parse_timestamp,
)
from kubeflux.apiobjects.podreadings import PodReadings
from kubeflux.apiobjects.queuejobs import queue_by_job
from kubeflux.apiobjects.watched import cluster_event
from kubeflux.collector import settle_gc
from kubeflux.kube.binder import Binder, BindOutcome, PodRef
from kubeflux.kube.binderprocess import BinderProcess, copied_client
from kubeflux.kube.claimversions import ClaimVersions
from kubeflux.kube.config import ServeConfig
from kubeflux.kube.operations import ServeMetrics
from kubeflux.kube.reflector import SYNCED, EventQueue, RawEvent, Reflector, Resource, watched_resources
from kubeflux.scheduler.core import KubefluxScheduler
from kubeflux.scheduler.decisions import apply_decisions
from kubeflux.scheduler.interface import (
    EXPECTED_START_ANNOTATION,
    Bind,
    Deallocate,
    EventKind,
    Evict,
    PodWarning,
    Reject,
    Unschedulable,
)
from kubeflux.scheduler.messages import event_kind
from kubeflux.scheduler.objects import DEFAULT_SCHEDULER, Node
from kubeflux.wallclock import WallClock

__all__ = ["Serve", "choose_clock"]

log = logging.getLogger("kubeflux.serve")
_BATCH = 2000
_IDLE_WAIT = 5.0
_WAKE = RawEvent("", "WAKE", {})
_RESULTS = {
    Bind: "scheduled",
    Unschedulable: "unschedulable",
    Reject: "rejected",
    PodWarning: "warning",
    Evict: "evicted",
    Deallocate: "deallocated",
}


def _simulated(api: client.ApiClient) -> bool:
    """Whether the API server is kubeflux's simulated one (``kubeflux cluster serve``), as its ``GET /version`` says
    (``gitVersion`` ``v1.36.0-kubeflux.X``, ``compiler`` ``kubeflux``). ``/version`` is readable by every client of a
    real cluster (the ``system:public-info-viewer`` role), so asking is never refused."""
    try:
        response: Any = client.VersionApi(api).get_code(_preload_content=False, _request_timeout=(5.0, 10.0))
        version = orjson.loads(response.data)
    except Exception as exc:  # no answer, or not JSON: not one that publishes a time
        log.debug("GET /version: %s", exc)
        return False
    return isinstance(version, dict) and (
        version.get("compiler") == "kubeflux" or "-kubeflux." in str(version.get("gitVersion", ""))
    )


def choose_clock(api: client.ApiClient, mode: str) -> WallClock:
    """The clock for ``mode`` (``wall``, ``server``, ``auto``: see :class:`~kubeflux.kube.config.ServeConfig`).

    ``GET /kubeflux/time`` is asked only of a simulated server (:func:`_simulated`): on a real cluster that path
    does not exist, RBAC refuses it (403), and a refused request is an alarm in the cluster's audit log."""
    if mode == "wall":
        return WallClock()
    published: dict[str, Any] | None = None
    if _simulated(api):
        try:
            pool: urllib3.PoolManager = api.rest_client.pool_manager
            response = pool.request("GET", f"{api.configuration.host}/kubeflux/time", timeout=10.0, retries=False)
            if response.status == 200:
                published = orjson.loads(response.data)
        except Exception as exc:  # no answer
            log.debug("no published time: %s", exc)
    if published is None or not isinstance(published.get("now"), int | float):
        if mode == "server":
            raise RuntimeError("clock: server was asked, but the API server publishes no time (GET /kubeflux/time)")
        return WallClock()
    speed = published.get("speed", 1.0)
    rate = float(speed) if isinstance(speed, int | float) else 1.0
    return WallClock(rate, float(published["now"]), time.time())


def _pod_ref(obj: dict[str, Any]) -> PodRef:
    meta = obj.get("metadata") or {}
    annotations = meta.get("annotations") or {}
    expected = annotations.get(EXPECTED_START_ANNOTATION) if isinstance(annotations, dict) else None
    try:
        created: float | None = parse_timestamp(meta["creationTimestamp"])
    except (KeyError, TypeError, ValueError):
        created = None
    spec = obj.get("spec")
    scheduler = spec.get("schedulerName") if isinstance(spec, dict) else None
    return PodRef(
        str(meta.get("namespace", "")),
        str(meta.get("name", "")),
        str(meta.get("uid", "")),
        expected,
        created,
        str(scheduler or DEFAULT_SCHEDULER),
    )


def _settle_gc() -> None:
    """Freeze what the process holds (the graph, the planners: ~1.5 million objects for 5,000 nodes of 64 cores)
    out of the cyclic collector's scans, and collect young objects less often (:func:`kubeflux.collector.
    settle_gc`, without its full collection first: 0.5 s on that cluster, to find the few cycles made while
    starting). Every full collection would otherwise walk those objects again (0.5 s each)."""
    settle_gc(collect=False)
    gc.enable()


class Serve:
    """The shell (see the module docstring). :meth:`run` blocks until :meth:`stop`; :meth:`start` runs it on a
    thread (tests, benchmarks)."""

    def __init__(
        self,
        config: ServeConfig,
        api: client.ApiClient,
        *,
        clock: WallClock | None = None,
        resources: list[Resource] | None = None,
        tune_gc: bool = False,
        connect: Callable[[], client.ApiClient] | None = None,
    ) -> None:
        """``connect``: how the binder's process builds its client (picklable; default: ``api``'s configuration
        copied, when it can be: see :func:`~kubeflux.kube.binderprocess.copied_client`)."""
        self.config = config
        self.tune_gc = tune_gc
        """Whether :meth:`run` may tune the process's garbage collector (:meth:`_settle_gc`): the command's
        process, not a test's."""
        self.api = api
        self.clock = clock or choose_clock(api, config.clock)
        self.shape = config.nodes.shape()
        self.cores: list[KubefluxScheduler] = [profile.build(self.shape) for profile in config.schedulers]
        self._names = {core.name for core in self.cores}
        self.events = EventQueue(config.watch.queue_capacity)
        self._refused: queue.SimpleQueue[BindOutcome | list[dict[str, Any]]] = queue.SimpleQueue()
        """Binds the cluster refused, and before each Bind's outcome the claims it wrote as the server answered
        (from the binder's threads, each Bind's in order): the loop tells the cores."""
        self.claim_versions = ClaimVersions()
        """The claim states the cores have heard (:mod:`kubeflux.kube.claimversions`)."""
        self._unevicted: queue.SimpleQueue[tuple[str, Evict, str]] = queue.SimpleQueue()
        """Evictions the cluster did not take (scheduler, decision, why): the loop tells the core (``unevict``)."""
        watch = config.watch
        self.reflectors = [
            Reflector(
                resource,
                self.events,
                page_size=watch.page_size,
                timeout_seconds=watch.timeout_seconds,
                retry_seconds=watch.retry_seconds,
            )
            for resource in (resources if resources is not None else watched_resources(api))
        ]
        self.pods: dict[str, PodRef] = {}
        """``namespace/name`` → the pod as last seen (what the binder needs to write to it)."""
        self.readings = PodReadings()
        """Each pod's last version read and its reading: a pod bound or run is not read again from its manifest."""
        binding = config.binding
        options: dict[str, Any] = {
            "workers": binding.workers,
            "pipeline": binding.pipeline,
            "clock": self.clock,
            "interval": binding.unschedulable_interval_seconds,
            "delay": binding.unschedulable_delay_seconds,
            "event_burst": binding.event_burst,
            "event_refill_seconds": binding.event_refill_seconds,
            "on_refused": self._on_refused,
            "on_bound": self._bound,
            "on_claims": self._on_claims,
            "on_evicted": self._evicted,
        }
        recipe = (connect or copied_client(api)) if binding.process else ""
        self.binder: Binder | BinderProcess  # last but the sinks: nothing after it may fail and leave its process
        if callable(recipe):
            self.binder = BinderProcess(recipe, **options)
        else:
            if recipe:
                log.warning("the binder runs in serve's process: %s", recipe)
            self.binder = Binder(api, **options)
        self._sinks = {core.name: _BinderSink(self, core.name) for core in self.cores}
        self._bad: dict[str, str] = {}
        """Object key → the reader's complaint last reported (said once)."""
        self._bad_shape: dict[str, str] = {}
        """Node name → why its sockets label was not used, last reported (said once; the node is still used)."""
        self.bound = 0
        """Bindings accepted (counted by the binder's threads, under :attr:`_count_lock`)."""
        self._count_lock = threading.Lock()
        self.synced = threading.Event()
        self._stop = threading.Event()
        self._stopped = False
        self._thread: threading.Thread | None = None
        self._wakeup: float | None = None
        self._lists_synced = 0
        """The reflectors whose first list has been taken (each says SYNCED once, after it)."""
        self.leading = True
        """False while this replica waits for the lease (set by its elector)."""
        self.metrics = ServeMetrics()
        self.metrics.watch(self, lambda: self.leading)
        self._asked: queue.SimpleQueue[Future[dict[str, Any]]] = queue.SimpleQueue()
        """Requests for the queue (:meth:`queue_document`), answered by the loop, the one thread touching the cores."""

    # ------------------------------------------------------------------ life cycle

    def start(self) -> Serve:
        if self._thread is not None:
            return self
        self._thread = threading.Thread(target=self.run, daemon=True, name="kubeflux-serve")
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop watching and scheduling; the writes already decided are finished (drained). Idempotent."""
        if self._stopped:
            return
        self._stopped = True
        self._stop.set()
        self._wake()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        for reflector in self.reflectors:
            reflector.stop()
        self.binder.stop()

    def __enter__(self) -> Serve:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def alive(self) -> bool:
        """Whether the scheduling loop runs (or has not been started yet)."""
        return self._thread is None or self._thread.is_alive()

    def not_ready(self) -> str:
        """Why this replica is not ready (``/readyz``); empty when it is."""
        if not self.leading:
            return ""  # a standby is ready to take over
        if not self.synced.is_set():
            waiting = [r.resource.describe() for r in self.reflectors if not r.synced.is_set()]
            return f"informers not synced: {', '.join(waiting)}"
        return ""

    def queue_document(self, timeout: float = 10.0) -> dict[str, Any]:
        """Each core's queue, one entry per waiting job (:func:`~kubeflux.apiobjects.queuejobs.queue_by_job`),
        taken by the scheduling loop between two batches (at once when the loop does not run); TimeoutError when it
        does not answer in ``timeout`` seconds (a long pass)."""
        thread = self._thread
        if thread is None or not thread.is_alive():
            return queue_by_job(self.cores, self.clock(), "serve")
        asked: Future[dict[str, Any]] = Future()
        self._asked.put(asked)
        self._wake()
        return asked.result(timeout)

    def _answer(self) -> None:
        while True:
            try:
                asked = self._asked.get_nowait()
            except queue.Empty:
                return
            if asked.set_running_or_notify_cancel():
                asked.set_result(queue_by_job(self.cores, self.clock(), "serve"))

    def _wake(self) -> None:
        self.events.offer(_WAKE)  # when full, the loop has work already: it will look

    def _on_refused(self, outcome: BindOutcome) -> None:  # a binder thread
        self.metrics.conflicts.labels(outcome.scheduler).inc()
        self._refused.put(outcome)
        self._wake()

    def _on_claims(self, claims: list[dict[str, Any]]) -> None:  # a binder thread, before the Bind's outcome
        self._refused.put(claims)
        self._wake()

    def _bound(self, scheduler: str, decision: Bind, pod: PodRef) -> None:  # a binder thread
        with self._count_lock:
            self.bound += 1
        self.metrics.binds.labels(scheduler).inc()
        if pod.created is not None:
            self.metrics.pod_latency.labels(scheduler).observe(max(0.0, self.clock() - pod.created))
        log.info("%s: bound pod %s to node %s", scheduler, decision.pod, decision.node)

    def _evicted(self, scheduler: str, decision: Evict, result: str, why: str) -> None:  # a binder thread
        self.metrics.evictions.labels(scheduler, result).inc()
        if result != "evicted":
            log.warning(
                "%s: pod %s not evicted for %s (%s): %s", scheduler, decision.pod, decision.preemptor, result, why
            )
            self._unevicted.put((scheduler, decision, why))
            self._wake()

    # ------------------------------------------------------------------ the loop

    def run(self) -> None:
        collecting = gc.isenabled()
        if self.tune_gc:
            gc.disable()  # until the graph is built and frozen (_settle_gc)
        try:
            self._loop()
        finally:
            if self.tune_gc and collecting:
                gc.enable()

    def _loop(self) -> None:
        if self.reflectors:
            for reflector in self.reflectors[:-1] or self.reflectors:  # the pods' (the last) once the others synced
                reflector.start()
        else:
            self.synced.set()
        settled = not self.tune_gc
        while not self._stop.is_set():
            timeout = _IDLE_WAIT
            if self._wakeup is not None:
                timeout = min(timeout, self.clock.wall(self._wakeup - self.clock()))
            batch: list[RawEvent] = []
            try:
                batch.append(self.events.get(timeout=max(timeout, 0.0)))
                while len(batch) < _BATCH:
                    batch.append(self.events.get_nowait())
            except queue.Empty:
                pass
            if self._stop.is_set():
                break
            if self.binder.failed:  # said by the binder; the liveness probe fails, the command exits
                break
            with self.binder.batch():  # what this round says to the binder goes as one message
                self._round(batch)
            if self.synced.is_set() and not settled:
                _settle_gc()
                settled = True
            self._answer()

    def _round(self, batch: list[RawEvent]) -> None:
        """The events taken, the binder's answers, then a pass (once synced)."""
        now = self.clock()
        for event in batch:
            self._observe(event, now)
        while True:
            try:
                outcome = self._refused.get_nowait()
            except queue.Empty:
                break
            if isinstance(outcome, BindOutcome):
                self._unreserve(outcome, now)
            else:
                self._claims_written(outcome, now)
        while True:
            try:
                scheduler, evict, why = self._unevicted.get_nowait()
            except queue.Empty:
                break
            for core in self.cores:
                if core.name == scheduler:
                    core.unevict(evict.pod, evict.uid, why, now)  # it stops waiting for that pod
        if self.synced.is_set():
            self._schedule(self.clock())

    def _observe(self, event: RawEvent, now: float) -> None:
        if event.type == SYNCED:
            # counted here, not read from the reflectors' flags: a reflector sets its own just after saying SYNCED
            self._lists_synced += 1
            if self._lists_synced == len(self.reflectors) - 1:
                self.reflectors[-1].start()
                if not self.pods:
                    # the last list (the pods) has begun; no pod is known, so a pass decides nothing, but it builds
                    # the cores' graphs from the nodes meanwhile, instead of after the pods' list
                    self._schedule(now)
            elif self._lists_synced == len(self.reflectors):  # the command says so (once)
                self.synced.set()
            return
        if event.type == "WAKE":
            return
        obj = event.obj
        kind = event_kind(event.type)
        if event.kind == "ResourceClaim" and not self.claim_versions.watched(event.type, obj):
            return  # a state the cores heard already from serve's own write, or older
        if event.kind == "Pod":
            key = f"{(obj.get('metadata') or {}).get('namespace')}/{(obj.get('metadata') or {}).get('name')}"
            if kind is EventKind.DELETED:
                gone = self.pods.pop(key, None)
                if gone is not None:
                    self.binder.forget(gone.uid)
            else:
                self.pods[key] = _pod_ref(obj)
            if not self._in_scope(obj):  # (never read: a pod read was in scope, and stays so till it is deleted)
                return
        try:
            observed = cluster_event(event.type, event.kind, obj, lambda pod: self.readings.read(event.type, pod))
        except ManifestError as exc:
            self._unreadable(event, str(exc))
            return
        if isinstance(observed.obj, Node):
            self._check_shape(kind, observed.obj)
        for core in self.cores:
            core.observe(observed, now)

    def _check_shape(self, kind: EventKind, node: Node) -> None:
        """A node whose sockets label is unusable is reported (once per problem) and shaped by the default."""
        problem = None if kind is EventKind.DELETED else self.shape.sockets(node)[1]
        if problem is None:
            self._bad_shape.pop(node.name, None)
        elif self._bad_shape.get(node.name) != problem:
            self._bad_shape[node.name] = problem
            log.warning("%s", problem)

    def _in_scope(self, obj: dict[str, Any]) -> bool:
        """A pending pod of kubeflux's in a namespace it does not schedule is left alone (not even queued)."""
        spec = obj.get("spec") or {}
        if not isinstance(spec, dict) or spec.get("nodeName"):
            return True
        name = spec.get("schedulerName", DEFAULT_SCHEDULER)
        namespace = (obj.get("metadata") or {}).get("namespace", "")
        return name not in self._names or self.config.schedules(str(namespace))

    def _unreadable(self, event: RawEvent, message: str) -> None:
        """An object the core's readers refuse: said once; a waiting kubeflux pod is told why it is not scheduled."""
        meta = event.obj.get("metadata") or {}
        key = f"{event.kind} {meta.get('namespace', '')}/{meta.get('name')}"
        if event.type == "DELETED":
            self._bad.pop(key, None)
            return
        if self._bad.get(key) == message:
            return
        self._bad[key] = message
        log.warning("%s; left out", message)
        spec = event.obj.get("spec")
        if event.kind != "Pod" or not isinstance(spec, dict) or spec.get("nodeName"):
            return
        scheduler = spec.get("schedulerName", DEFAULT_SCHEDULER)
        if scheduler in self._names:
            ref = _pod_ref(event.obj)
            self.binder.unschedulable(scheduler, Reject(f"{ref.namespace}/{ref.name}", ref.uid, message), ref)

    def _claims_written(self, claims: list[dict[str, Any]], now: float) -> None:
        """The claims a Bind wrote (or took back), as the server answered: the cores hear them now, not when the
        watch shows them (:mod:`kubeflux.kube.claimversions`)."""
        for claim in claims:
            if not self.claim_versions.written(claim):
                continue
            try:
                observed = cluster_event("MODIFIED", "ResourceClaim", claim)
            except ManifestError as exc:  # as its watch event would be
                self._unreadable(RawEvent("ResourceClaim", "MODIFIED", claim), str(exc))
                continue
            for core in self.cores:
                core.observe(observed, now)

    def _unreserve(self, outcome: BindOutcome, now: float) -> None:
        decision = outcome.decision
        log.info("bind of pod %s to node %s refused (%s): unreserved", decision.pod, decision.node, outcome.reason)
        for core in self.cores:
            if core.name == outcome.scheduler:
                core.unreserve(decision.pod, decision.uid, decision.node, outcome.reason, now)

    def _schedule(self, now: float) -> None:
        earliest: float | None = None
        for core in self.cores:
            began = time.perf_counter()
            decisions = core.schedule(now)
            self.metrics.passes.labels(core.name).observe(time.perf_counter() - began)
            for decision in decisions:
                self.metrics.attempts.labels(core.name, _RESULTS[type(decision)]).inc()
            if decisions:
                with self.binder.batch():  # (in the round's: this core's decisions go before the next core's pass)
                    apply_decisions(core.name, decisions, self._sinks[core.name], core, now)
            wake = core.next_wakeup(now)
            if wake is not None and (earliest is None or wake < earliest):
                earliest = wake
            if core.log:
                for line in core.log:
                    log.debug("%s: %s", core.name, line)
                core.log.clear()
        self._wakeup = earliest


class _BinderSink:
    """Where one core's decisions go (:func:`~kubeflux.scheduler.decisions.apply_decisions`): to the binder's
    threads, for the pods as the watch last showed them; a Bind the cluster refuses comes back later
    (:meth:`Serve._unreserve`)."""

    def __init__(self, serve: Serve, scheduler: str) -> None:
        self.serve, self.binder, self.scheduler = serve, serve.binder, scheduler

    def pod(self, key: str, uid: str) -> PodRef | None:
        ref = self.serve.pods.get(key)
        return None if ref is None or (uid and ref.uid != uid) else ref

    def not_found(self, key: str) -> str:
        return f'pod "{key}" not found'

    def owner(self, pod: PodRef) -> str:
        return pod.scheduler

    def bind(self, pod: PodRef, decision: Bind) -> str:
        self.binder.bind(self.scheduler, decision, pod)
        return ""

    def unschedulable(self, pod: PodRef, decision: Unschedulable) -> None:
        self.binder.unschedulable(self.scheduler, decision, pod)

    def reject(self, pod: PodRef, decision: Reject) -> None:
        self.binder.unschedulable(self.scheduler, decision, pod)

    def warn(self, pod: PodRef, decision: PodWarning) -> None:
        self.binder.warn(self.scheduler, decision, pod)

    def evict(self, pod: PodRef, decision: Evict) -> str:
        self.binder.evict(self.scheduler, decision, pod)  # a refusal (a budget's 429) is counted and logged there
        return ""

    def deallocate(self, pod: PodRef, decision: Deallocate) -> str:
        self.binder.deallocate(self.scheduler, decision, pod)  # a refusal is logged there
        return ""

    def problem(self, message: str) -> None:
        log.warning("%s", message)
