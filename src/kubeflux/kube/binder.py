"""Writing the core's decisions to the cluster: Bindings, ``PodScheduled`` conditions, annotations and Events.

A small pool of threads (:mod:`kubeflux.kube.writers`) sends the requests (raw JSON on the official client's
pool: :mod:`kubeflux.kube.rest`), so a slow API server delays the writes, never the matching. Every write for one
pod goes to the same thread (by a hash of its key), one at a time. Each thread sends Bindings before anything else
(a pod waiting for its node matters more than a note about another pod), and a condition or event decided before a
pod's latest Binding is dropped unsent: it is stale, and a ``PodScheduled=False`` can never land after the pod's
Binding. The Bindings queued one after the other on a thread go back to back on one connection (HTTP/1.1
pipelining, :data:`~kubeflux.kube.keepalive.PIPELINE` at a time), their answers handled in order as each is read: a
pipelined Binding whose answer never came (the connection broke) is refused as any Binding whose outcome is
unknown, never sent again.

The events about Bindings done (``Scheduled``, and a :class:`PodWarning`'s) come last: they wait while Bindings are
queued anywhere or were queued within :data:`EVENTS_QUIET` seconds, so that a burst of Bindings does not share the
API server with as many Event writes (kube-scheduler's event broadcaster writes them beside its Bindings and drops
them when its queue of 1,000 is full). None is dropped or merged: they are all written, in order, once the burst
ends (pipelined as the Bindings are); only with more than :data:`EVENTS_BACKLOG` waiting do they go between the
Bindings again (memory stays bounded). ``kubeflux_pending_writes`` counts them. Stopping drops the ones not yet
written, like every other write but a Binding.

* :class:`Bind` → ``POST pods/binding`` (``_preload_content=False``: the typed call mis-reads the server's 201
  ``Status`` reply). The core's allocation annotation rides on the Binding itself (the API server copies a
  Binding's annotations onto the pod in the same write), so a pod is never bound without the record a restarted
  scheduler recovers it from, nor annotated without being bound. A stale expected-start annotation is removed
  first, and the Bind's claim bindings are written before the Binding (a JSON merge patch each:
  ``volume.kubernetes.io/selected-node`` on a claim waiting for its first consumer, or ``spec.claimRef`` on the
  PersistentVolume chosen for it), as kube-scheduler's volume binder writes them at PreBind; one refused refuses the
  Bind. Unlike kube-scheduler, the Binding does not wait for the claim to be bound (the kubelet waits for it).
  409 (already bound, being deleted, another UID) and 404 (gone) mean the race was lost: ``on_refused``
  is called, for the loop to tell the core (``unreserve``), and nothing else is written. Then a ``Scheduled``
  event, as kube-scheduler writes it. The ResourceClaims a Bind wrote (and took back, when refused:
  :mod:`kubeflux.kube.claimwrites`) go to ``on_claims`` as the server last answered them, before ``on_bound`` or
  ``on_refused``, so that the loop's books hold them before it hears the outcome.
* :class:`Unschedulable` / :class:`Reject` → the expected-start annotation (set or removed), the
  ``PodScheduled=False/Unschedulable`` condition with the core's message (a strategic merge patch of
  ``pods/status``, merged by condition type), and a ``FailedScheduling`` event. A pod is told the same thing once:
  the same message and expected start are not written again; the first time only after ``delay`` seconds (a pod
  bound at the next pass, or a gang member whose siblings are being created, is never told it waits), then at
  most once every ``interval`` seconds, the newest message winning (no event storms: a gang of 16 would otherwise
  be told 120 times while its members arrive; kube-scheduler's event recorder rate-limits per object in the same
  spirit).
  The pod's ``status.nominatedNodeName`` is written in the same patch (removed when the decision names none), as
  kube-scheduler writes it after preempting for the pod.
* :class:`PodWarning` → a ``Warning`` event with its reason.
* :class:`Deallocate` → the claim's allocation and ``reservedFor`` removed (:func:`~kubeflux.kube.claimwrites.
  free_claim`), on the claim's thread with the Bindings (after those decided before it that write the claim).
* :class:`Evict` → ``POST pods/NAME/eviction`` (``policy/v1`` Eviction, the pod's uid as a precondition), sent
  before conditions and events, as Bindings are: the Eviction API writes the victim's ``DisruptionTarget``
  condition and deletes it, unless a PodDisruptionBudget refuses (429: logged, the pod keeps running); then a
  ``Preempted`` event on the victim with the decision's message. The evictions of one victim job (``Evict.victim``,
  a gang evicted whole) go on one thread, one after the other in the core's order: once one is refused (a budget
  changed since the core decided) or fails, the rest are not sent (``spared``), as the simulator and ``cluster
  serve`` spare them (:func:`~kubeflux.scheduler.decisions.apply_decisions`), so a job is evicted whole or, as far
  as the cluster allows, not at all; different jobs' evictions still go in parallel. Each outcome (``evicted``,
  ``refused`` by a budget, ``gone``, ``failed``, ``spared``) is told to ``on_evicted``. An Evict that is no
  eviction (``budgets`` False: kube-scheduler's plain delete) is not serve's to make: refused at once, as no
  scheduler of serve's asks it.

Events are ``events.k8s.io/v1`` with kube-scheduler's reasons and actions. A failed write other than a Bind is
logged and dropped: the next decision about the pod writes it again.
"""

from __future__ import annotations

import contextlib
import heapq
import itertools
import logging
import os
import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import partial
from typing import Any, NamedTuple

import orjson
import urllib3
from kubernetes import client

from kubeflux.apiobjects.decisions import (
    binding,
    claim_patch,
    scheduled_message,
    scheduler_event,
    unschedulable_condition,
)
from kubeflux.apiobjects.eventbudget import EventBudget
from kubeflux.apiobjects.reader import format_timestamp
from kubeflux.kube.claimwrites import Written, free_claim, reserve_claims, unreserve_claims
from kubeflux.kube.keepalive import PIPELINE
from kubeflux.kube.rest import RawApi
from kubeflux.kube.writers import Write, Writers
from kubeflux.scheduler.devices import ClaimAllocation
from kubeflux.scheduler.interface import (
    BIND_BACKOFF,
    MAX_BIND_BACKOFF,
    PREEMPTED_REASON,
    Bind,
    Deallocate,
    Evict,
    PodWarning,
    Reject,
    Unschedulable,
    expected_start_annotations,
    expected_start_text,
    not_evicted_whole,
)
from kubeflux.scheduler.objects import DEFAULT_SCHEDULER

__all__ = ["EVENTS_BACKLOG", "EVENTS_QUIET", "EVICTION_RESULTS", "BindOutcome", "Binder", "PodRef"]

log = logging.getLogger("kubeflux.serve")
EVENTS_QUIET = 0.2
"""Seconds without a new Binding before the events about Bindings done are written (they wait during a burst)."""
EVENTS_BACKLOG = 50_000
"""Events about Bindings done that may wait; with more waiting, they are written between the Bindings again."""
EVICTION_RESULTS = ("evicted", "refused", "gone", "failed", "spared")
"""What became of an eviction: done, refused by a PodDisruptionBudget (429), the pod gone (404, or another pod of
its name: 409), not done (another answer, or no answer), or not sent (another pod of its job was refused or
failed)."""
_STOPS_THE_JOB = frozenset({"refused", "failed"})
"""The results after which the rest of a job's evictions are not sent."""
_TIMEOUT = (5.0, 30.0)
"""(connect, read) seconds of one write: a dead API server fails it instead of holding a thread for ever."""


class PodRef(NamedTuple):
    """What the writer needs of a pod: its identity and the expected-start annotation it carries. A tuple: serve
    makes one at every pod event and sends one with every Bind to its binder process (a frozen dataclass costs a
    few µs more to make and to pickle each way)."""

    namespace: str
    name: str
    uid: str
    expected_start: str | None = None
    created: float | None = None
    """Its creation time (seconds), for the end-to-end scheduling latency."""
    scheduler: str = DEFAULT_SCHEDULER
    """Its ``schedulerName``."""


@dataclass(frozen=True, slots=True)
class BindOutcome:
    """A Bind the cluster refused (or that could not be sent): the loop tells the core."""

    scheduler: str
    decision: Bind
    reason: str


def _reason(exc: client.ApiException) -> str:
    """The server's answer: its status and message, and the causes it gives (a budget's ``needs 2 healthy pods and
    has 2 currently``)."""
    body = exc.body
    if isinstance(body, bytes | str) and body:
        try:
            status = orjson.loads(body)
            message = str(status.get("message") or "")
            found = (status.get("details") or {}).get("causes") or ()
            causes = [c.get("message") for c in found if isinstance(c, dict)]
            # a cause the message says already is not said again (an admission policy's denial repeats its message)
            said = "".join(f" ({cause})" for cause in causes if cause and str(cause) not in message)
            if message:
                return f"{exc.status}: {message}{said}"
        except (ValueError, AttributeError, TypeError):
            pass
    return f"{exc.status}: {exc.reason}"


class _BindWrite(NamedTuple):
    """A Binding to send (it may go with others: :mod:`kubeflux.kube.writers`)."""

    scheduler: str
    decision: Bind
    pod: PodRef


class _EventWrite(NamedTuple):
    """An event about a Binding done, to send (it may go with others)."""

    pod: PodRef
    type_: str
    reason: str
    note: str
    scheduler: str
    action: str


class _VictimEvictions:
    """The evictions of one victim job queued and not yet done, and why one was not ("" while none)."""

    __slots__ = ("queued", "stopped")

    def __init__(self) -> None:
        self.queued = 0
        self.stopped = ""


class Binder:
    """Sends decisions with ``workers`` threads (see the module docstring)."""

    def __init__(
        self,
        api: client.ApiClient,
        *,
        workers: int = 4,
        clock: Callable[[], float] = time.time,
        on_refused: Callable[[BindOutcome], None] = lambda outcome: None,
        on_bound: Callable[[str, Bind, PodRef], None] = lambda scheduler, decision, pod: None,
        on_claims: Callable[[list[dict[str, Any]]], None] = lambda claims: None,
        on_evicted: Callable[[str, Evict, str, str], None] = lambda scheduler, decision, result, why: None,
        interval: float = 5.0,
        delay: float = 1.0,
        event_burst: int = 25,
        event_refill_seconds: float = 300.0,
        events_quiet: float = EVENTS_QUIET,
        events_backlog: int = EVENTS_BACKLOG,
        pipeline: int = PIPELINE,
    ) -> None:
        self.writer = RawApi(api, _TIMEOUT)
        self.clock = clock
        self.on_refused = on_refused
        self.on_bound = on_bound
        self.on_claims = on_claims
        self.on_evicted = on_evicted
        """Told ``(scheduler, decision, result, why)`` of each eviction sent (``result``: one of
        :data:`EVICTION_RESULTS`; ``why``: the server's answer when it did not evict)."""
        self.instance = f"{socket.gethostname()}-{os.getpid()}"
        self._told: dict[str, tuple[str, str | None, str]] = {}
        """Pod uid → (message, expected start, nominated node) last written for it, so the same is not written
        twice."""
        self._annotated: set[str] = set()
        """Pods (uid) this binder wrote an expected start on, which the watch may not show yet."""
        self._warned: dict[str, dict[str, str]] = {}
        """Pod uid → reason → the warning last written."""
        self._told_lock = threading.Condition()
        self.interval = interval
        self.delay = delay
        self.event_budget = EventBudget(event_burst, event_refill_seconds)
        """Each pod's FailedScheduling events (client-go's spam filter)."""
        self._last: dict[str, float] = {}
        """Pod uid → when (monotonic) its last PodScheduled=False was sent."""
        self._deferred: dict[str, tuple[str, str, str | None, str, PodRef]] = {}
        """Pod uid → the newest (scheduler, message, expected start, nominated node, pod) held back by the
        interval."""
        self._due: list[tuple[float, int, Callable[[], None]]] = []
        """(when, order, what): the writes waiting for their time, done by the flusher (:meth:`_at`)."""
        self._due_order = itertools.count()
        self._writers: Writers[_BindWrite | _EventWrite] = Writers(
            workers, self._send_together, events_quiet, events_backlog, pipeline
        )
        self._flusher = threading.Thread(target=self._flush, daemon=True, name="binder-flusher")
        self._flusher.start()
        self.binds = 0
        self.refused = 0
        self.failed = ""
        """Always empty: the threads are this process's (a :class:`~kubeflux.kube.binderprocess.BinderProcess`
        says there why its process ended)."""
        self._count_lock = threading.Lock()
        self._victims: dict[tuple[str, str], _VictimEvictions] = {}
        """(scheduler, victim job) → its evictions, while any is queued (under ``_victims_lock``)."""
        self._victims_lock = threading.Lock()

    # ------------------------------------------------------------------ the threads

    def _submit(
        self,
        pod: PodRef,
        task: Callable[[], None],
        kind: str,
        route: str = "",
        together: _BindWrite | _EventWrite | None = None,
    ) -> None:
        """Queue ``task`` on ``pod``'s thread (``route``'s when given: every eviction of one victim job on one).
        ``kind``: ``bind`` (sent first, and even while stopping), ``evict`` (with the Bindings, not while
        stopping), ``advisory`` (a condition or event decided before any later Binding of the pod: dropped once one
        is queued), ``after`` (an event about a Binding done); ``together``: the write's data, for it to go with
        others of its kind: see :mod:`kubeflux.kube.writers`."""
        self._writers.submit(route or f"{pod.namespace}/{pod.name}", pod.uid, task, kind, together)

    @property
    def _closing(self) -> bool:
        return self._writers.closing

    def drain(self, timeout: float | None = None) -> bool:
        """Wait until every write submitted so far is done; whether it is."""
        return self._writers.drain(timeout)

    def stop(self, grace: float = 10.0) -> None:
        """Send the Bindings already decided (within ``grace`` seconds), drop the conditions and events not yet
        written (a scheduler that runs next writes its own), then end the threads. A Binding not sent leaves its
        pod pending for the next scheduler: nothing is half done."""
        with self._told_lock:
            if self._writers.closing:
                return
            self._writers.closing = True
            self._told_lock.notify_all()
        self._flusher.join()
        self._writers.close(grace, abandoning=self.writer.close)  # a pipeline under way sends nothing again
        self.writer.close()

    def _count(self, what: str) -> None:
        with self._count_lock:  # from several threads: += alone may lose a count
            setattr(self, what, getattr(self, what) + 1)

    @property
    def pending(self) -> int:
        return self._writers.pending

    def batch(self) -> contextlib.AbstractContextManager[None]:
        """As :meth:`BinderProcess.batch <kubeflux.kube.binderprocess.BinderProcess.batch>` (here every write is
        queued at once: nothing to gather)."""
        return contextlib.nullcontext()

    def forget(self, uid: str) -> None:
        """The pod is gone: drop what was told to it."""
        with self._told_lock:
            self._told.pop(uid, None)
            self._warned.pop(uid, None)
            self._annotated.discard(uid)
            self._last.pop(uid, None)
            self._deferred.pop(uid, None)
        self._writers.forget(uid)
        self.event_budget.forget(uid)

    # ------------------------------------------------------------------ decisions

    def bind(self, scheduler: str, decision: Bind, pod: PodRef) -> None:
        with self._told_lock:  # under the lock: a held-back PodScheduled=False can no longer follow the Binding
            self._told.pop(pod.uid, None)
            self._deferred.pop(pod.uid, None)
            # the Binds of pods sharing a claim go on one thread, in the core's order: the allocation's write first
            route = decision.resource_claims[0].key if decision.resource_claims else ""
            work = _BindWrite(scheduler, decision, pod)
            self._submit(pod, partial(self._bind, *work), "bind", route=route, together=work)

    def unschedulable(self, scheduler: str, decision: Unschedulable | Reject, pod: PodRef) -> None:
        expected = decision.expected_start if isinstance(decision, Unschedulable) else None
        wanted = None if expected is None else expected_start_text(expected)
        nominated = decision.nominated_node if isinstance(decision, Unschedulable) else ""
        told = (decision.message, wanted, nominated)
        with self._told_lock:
            if self._told.get(pod.uid) == told:
                return
            self._told[pod.uid] = told
            now = time.monotonic()
            last = self._last.get(pod.uid)
            # the first time after a short delay (a pod that is bound at the next pass, or a gang member whose
            # siblings arrive, is never told it waits), then at most once every interval: the newest goes out
            due = now + self.delay if last is None else last + self.interval
            if due > now:
                if pod.uid not in self._deferred:
                    self._at(due, partial(self._send_deferred, pod.uid))
                self._deferred[pod.uid] = (scheduler, decision.message, wanted, nominated, pod)
                return
            self._last[pod.uid] = now
            self._send_unschedulable(scheduler, decision.message, wanted, nominated, pod)

    def _send_unschedulable(
        self, scheduler: str, message: str, wanted: str | None, nominated: str, pod: PodRef
    ) -> None:
        self._submit(pod, lambda: self._unschedulable(scheduler, message, wanted, nominated, pod), "advisory")

    def _at(self, when: float, what: Callable[[], None]) -> None:
        """Have the flusher do ``what`` (queue a write: it must not block) at ``when`` (monotonic)."""
        with self._told_lock:
            heapq.heappush(self._due, (when, next(self._due_order), what))
            self._told_lock.notify_all()

    def _send_deferred(self, uid: str) -> None:
        """The newest update held back for the pod, once its interval has passed (under :attr:`_told_lock`)."""
        held = self._deferred.pop(uid, None)
        if held is not None:  # not bound nor gone meanwhile
            self._last[uid] = time.monotonic()
            self._send_unschedulable(*held)

    def _flush(self) -> None:
        """Do the writes waiting for their time (:meth:`_at`) when it comes."""
        with self._told_lock:
            while not self._closing:
                if not self._due:
                    self._told_lock.wait()
                    continue
                when, _, what = self._due[0]
                delay = when - time.monotonic()
                if delay > 0:
                    self._told_lock.wait(delay)
                    continue
                heapq.heappop(self._due)
                what()

    def warn(self, scheduler: str, decision: PodWarning, pod: PodRef) -> None:
        with self._told_lock:
            warned = self._warned.setdefault(pod.uid, {})
            if warned.get(decision.reason) == decision.message:
                return
            warned[decision.reason] = decision.message
        self._event_after(_EventWrite(pod, "Warning", decision.reason, decision.message, scheduler, "Scheduling"))

    def evict(self, scheduler: str, decision: Evict, pod: PodRef) -> None:
        """Send the eviction on ``pod``'s thread (see the module docstring); its outcome goes to ``on_evicted``."""
        if not decision.budgets:
            why = "serve evicts through the Eviction API only (a plain delete is kube-scheduler's preemption)"
            self.on_evicted(scheduler, decision, "failed", why)
            return
        job = (scheduler, decision.victim or decision.pod)
        with self._victims_lock:
            self._victims.setdefault(job, _VictimEvictions()).queued += 1
        self._submit(pod, lambda: self._evict_in_turn(job, decision, pod), "evict", route=job[1])

    def deallocate(self, scheduler: str, decision: Deallocate, pod: PodRef) -> None:
        """Free the decision's claim on the claim's thread (after the Binds decided before it that write the claim);
        the claim as the server answered goes to ``on_claims``, a refusal (the claim changed or went meanwhile) is
        logged: the watch shows the claim as it is, and the core decides again upon it. Any other failure (the
        server unreachable or failing, an admission webhook or policy refusing) is tried again after a back-off of
        1 s doubling to 10 s, as kube-scheduler's PostFilter runs again at each retry of the pod: the claim is
        unchanged, so the core, which asks a claim's freeing once per version of it, would not ask again."""
        self._free(scheduler, decision.claim, pod, BIND_BACKOFF)

    # ------------------------------------------------------------------ the writes (on the pool's threads)

    def _free(self, scheduler: str, made: ClaimAllocation, pod: PodRef, delay: float) -> None:
        if not self._closing:
            self._submit(pod, lambda: self._deallocate(scheduler, made, pod, delay), "evict", route=made.key)

    def _deallocate(self, scheduler: str, made: ClaimAllocation, pod: PodRef, delay: float) -> None:
        try:
            self._claims_now([free_claim(self.writer, made)])
            return
        except client.ApiException as exc:
            why, final = _reason(exc), exc.status in (404, 409)  # gone or changed: the core decides again upon it
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            why, final = str(exc), False
        if final or self._closing:
            log.warning("%s: resourceclaim %s not deallocated: %s", scheduler, made.key, why)
            return
        log.warning("%s: resourceclaim %s not deallocated (%s): tried again in %g s", scheduler, made.key, why, delay)
        again = partial(self._free, scheduler, made, pod, min(delay * 2, MAX_BIND_BACKOFF))
        self._at(time.monotonic() + delay, again)

    def _evict_in_turn(self, job: tuple[str, str], decision: Evict, pod: PodRef) -> None:
        """One of a victim job's evictions, on the job's thread after the ones decided before it: not sent once
        another was not done (see the module docstring)."""
        scheduler = job[0]
        with self._victims_lock:
            evictions = self._victims[job]
            stopped = evictions.stopped
        try:
            if stopped:
                why = f"{not_evicted_whole(job[1])} ({stopped})"
                log.warning("%s: eviction of pod %s/%s not sent: %s", scheduler, pod.namespace, pod.name, why)
                self.on_evicted(scheduler, decision, "spared", why)
                return
            result, why = self._evict(scheduler, decision, pod)
            if result in _STOPS_THE_JOB:
                with self._victims_lock:
                    evictions.stopped = f"pod {pod.namespace}/{pod.name}: {why}"
        finally:
            with self._victims_lock:
                evictions.queued -= 1
                if not evictions.queued:
                    del self._victims[job]

    def _evict(self, scheduler: str, decision: Evict, pod: PodRef) -> tuple[str, str]:
        uid = decision.uid or pod.uid
        body = {
            "apiVersion": "policy/v1",
            "kind": "Eviction",
            "metadata": {"name": pod.name, "namespace": pod.namespace},
            "deleteOptions": {"preconditions": {"uid": uid}},
        }
        try:
            self.writer.create_namespaced_pod_eviction(pod.name, pod.namespace, body)
        except client.ApiException as exc:
            result = "refused" if exc.status == 429 else "gone" if exc.status in (404, 409) else "failed"
            why = _reason(exc)
            log.warning("%s: eviction of pod %s/%s %s: %s", scheduler, pod.namespace, pod.name, result, why)
            self.on_evicted(scheduler, decision, result, why)
            return result, why
        except (urllib3.exceptions.HTTPError, OSError) as exc:  # unknown outcome: the watch says if it went
            log.warning("%s: eviction of pod %s/%s not sent: %s", scheduler, pod.namespace, pod.name, exc)
            why = f"eviction not sent: {exc}"
            self.on_evicted(scheduler, decision, "failed", why)
            return "failed", why
        log.info("%s: evicted pod %s/%s for %s", scheduler, pod.namespace, pod.name, decision.preemptor)
        self.on_evicted(scheduler, decision, "evicted", "")
        self.event(pod, "Normal", PREEMPTED_REASON, decision.message, scheduler, "Preempting")
        return "evicted", ""

    def _send_together(self, writes: list[Write[_BindWrite | _EventWrite]]) -> None:
        """Writes of one kind queued one after the other on a thread, in their order: Bindings (those with nothing
        to write before them back to back, any other on its own: :meth:`_bind`), or events about Bindings done (back
        to back)."""
        if writes[0].kind != "bind":
            self._pipelined(writes, self._send_events, self._event_answered)
            return
        plain: list[Write[_BindWrite | _EventWrite]] = []
        for write in writes:
            assert isinstance(write.together, _BindWrite)
            _, decision, pod = write.together
            if decision.volume_claims or decision.resource_claims or self._annotation_stale(pod):
                self._pipelined(plain, self._send_bindings, self._binding_answered)
                plain = []
                self._writers.run(write)
            else:
                plain.append(write)
        self._pipelined(plain, self._send_bindings, self._binding_answered)

    def _send_bindings(self, writes: list[_BindWrite | _EventWrite]) -> Iterator[bytes | Exception]:
        bodies = []
        for write in writes:
            assert isinstance(write, _BindWrite)
            _, decision, pod = write
            bodies.append(
                (pod.name, pod.namespace, binding(pod.name, decision.uid, decision.node, decision.annotations))
            )
        return self.writer.create_namespaced_pod_bindings(bodies)

    def _binding_answered(self, write: _BindWrite | _EventWrite, answer: bytes | Exception) -> None:
        assert isinstance(write, _BindWrite)
        self._bound(*write, [], None if isinstance(answer, bytes) else answer)

    def _send_events(self, writes: list[_BindWrite | _EventWrite]) -> Iterator[bytes | Exception]:
        bodies = []
        for write in writes:
            assert isinstance(write, _EventWrite)
            bodies.append((write.pod.namespace, self._event_body(*write)))
        return self.writer.create_namespaced_events(bodies)

    def _event_answered(self, write: _BindWrite | _EventWrite, answer: bytes | Exception) -> None:
        assert isinstance(write, _EventWrite)
        if not isinstance(answer, bytes):
            log.warning(
                "event %s on pod %s/%s not written: %s", write.reason, write.pod.namespace, write.pod.name, answer
            )

    def _pipelined(
        self,
        writes: list[Write[_BindWrite | _EventWrite]],
        send: Callable[[list[_BindWrite | _EventWrite]], Iterator[bytes | Exception]],
        answered: Callable[[_BindWrite | _EventWrite, bytes | Exception], None],
    ) -> None:
        """``writes`` sent back to back on one connection (``send``), each one's answer or failure handled
        (``answered``) as it is read, and each counted done; when sending fails unexpectedly (a token refresh hook
        failing), the writes not answered are told so."""
        left = iter(writes)
        failed: Exception | None = None
        try:
            if self._writers.abandoned or not writes:
                return
            together = [write.together for write in writes if write.together is not None]
            for write, answer in zip(writes, send(together), strict=True):
                next(left)
                self._answered(write, answered, answer)
        except Exception as exc:
            log.exception("writing decisions failed")
            failed = exc
        finally:
            for write in left:  # not answered: told why (but when abandoned: nothing more is said), counted done
                if failed is None:
                    self._writers.finished(write)
                else:
                    self._answered(write, answered, urllib3.exceptions.ProtocolError(f"not sent: {failed!r}"))

    def _answered(
        self,
        write: Write[_BindWrite | _EventWrite],
        answered: Callable[[_BindWrite | _EventWrite, bytes | Exception], None],
        answer: bytes | Exception,
    ) -> None:
        try:
            assert write.together is not None
            answered(write.together, answer)
        except Exception:  # one bad write never stops the writer
            log.exception("writing a decision failed")
        finally:
            self._writers.finished(write)

    def _annotation_stale(self, pod: PodRef) -> bool:
        """Whether the pod may carry an expected start, to remove before its Binding."""
        return pod.expected_start is not None or pod.uid in self._annotated  # seen on the pod, or written by us

    def _bind(self, scheduler: str, decision: Bind, pod: PodRef) -> None:
        if self._annotation_stale(pod):
            self._patch_annotations(pod, expected_start_annotations(None))
            self._annotated.discard(pod.uid)
        body = binding(pod.name, decision.uid, decision.node, decision.annotations)
        written: list[Written] = []
        try:
            for claim in decision.volume_claims:  # PreBind: what the volume binder writes, before the Binding
                if claim.volume:
                    self.writer.patch_persistent_volume(claim.volume, claim_patch(claim))
                else:
                    namespace, _, name = claim.claim.partition("/")
                    self.writer.patch_namespaced_persistent_volume_claim(name, namespace, claim_patch(claim))
            if decision.resource_claims:  # kube-scheduler's DynamicResources PreBind: the claims first (taken back
                # when refused: its Unreserve), their allocationTimestamp as kube-scheduler's (not made for a pod
                # without claims: 14 µs of the binder process's CPU a Binding, a tenth of it)
                stamp = format_timestamp(int(self.clock()))
                reserve_claims(self.writer, decision.resource_claims, pod.name, decision.uid, written, stamp)
            self.writer.create_namespaced_pod_binding(pod.name, pod.namespace, body)
        except Exception as exc:  # a refusal, a failure to send, or one not expected (a token refresh hook failing)
            self._bound(scheduler, decision, pod, written, exc)
            return
        self._bound(scheduler, decision, pod, written, None)

    def _bound(
        self, scheduler: str, decision: Bind, pod: PodRef, written: list[Written], failure: Exception | None
    ) -> None:
        """A Binding answered (``failure`` None: done; a refusal; a failure to send, its outcome unknown) after the
        claims ``written`` for it: told to the callbacks, a refused Bind's claims taken back."""
        if isinstance(failure, client.ApiException):
            self._claims_now(unreserve_claims(self.writer, written, decision.uid))
            self._count("refused")
            self.on_refused(BindOutcome(scheduler, decision, _reason(failure)))
            return
        if failure is not None:  # unknown outcome (a failure to send, or one not expected): the watch will say
            self._claims_now([claim for _, claim in written])
            self._count("refused")
            self.on_refused(BindOutcome(scheduler, decision, f"bind not sent: {failure}"))
            return
        self._claims_now([claim for _, claim in written])
        self._count("binds")
        self.on_bound(scheduler, decision, pod)
        message = scheduled_message(f"{pod.namespace}/{pod.name}", decision.node)
        self._event_after(_EventWrite(pod, "Normal", "Scheduled", message, scheduler, "Binding"))

    def _claims_now(self, claims: list[dict[str, Any]]) -> None:
        """The claims as the server answered this Bind's writes: to ``on_claims`` before the Bind's outcome."""
        if claims:
            self.on_claims(claims)

    def _unschedulable(self, scheduler: str, message: str, expected: str | None, nominated: str, pod: PodRef) -> None:
        if expected != pod.expected_start:
            self._patch_annotations(pod, expected_start_annotations(expected))  # seconds and RFC 3339
            if expected is not None:
                self._annotated.add(pod.uid)
        condition = unschedulable_condition(message, format_timestamp(int(self.clock())))
        status = {"conditions": [condition], "nominatedNodeName": nominated or None}  # null: removed
        patch = {"metadata": {"uid": pod.uid}, "status": status}
        try:
            self.writer.patch_namespaced_pod_status(pod.name, pod.namespace, patch)
        except client.ApiException as exc:
            if exc.status == 404:
                return
            # the event still goes: a pod the server itself finds invalid (422) must still be told why it waits
            log.warning("pod %s/%s: PodScheduled condition not written: %s", pod.namespace, pod.name, _reason(exc))
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            log.warning("pod %s/%s: PodScheduled condition not written: %s", pod.namespace, pod.name, exc)
            return
        if self.event_budget.take(pod.uid, time.monotonic()):  # the condition is written regardless
            self.event(pod, "Warning", "FailedScheduling", message, scheduler, "Scheduling")

    def _patch_annotations(self, pod: PodRef, annotations: dict[str, str | None]) -> None:
        patch = {"metadata": {"uid": pod.uid, "annotations": annotations}}
        try:
            self.writer.patch_namespaced_pod(pod.name, pod.namespace, patch)
        except client.ApiException as exc:
            if exc.status not in (404, 409):
                log.warning("pod %s/%s: annotations not written: %s", pod.namespace, pod.name, _reason(exc))
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            log.warning("pod %s/%s: annotations not written: %s", pod.namespace, pod.name, exc)

    def _event_after(self, event: _EventWrite) -> None:
        """Queue an event about a Binding done (it may go with others: :meth:`_send_together`)."""
        self._submit(event.pod, partial(self.event, *event), "after", together=event)

    def event(self, pod: PodRef, type_: str, reason: str, note: str, scheduler: str, action: str) -> None:
        """An ``events.k8s.io/v1`` Event about ``pod``, reported by ``scheduler``."""
        body = self._event_body(pod, type_, reason, note, scheduler, action)
        try:
            self.writer.create_namespaced_event(pod.namespace, body)
        except (client.ApiException, urllib3.exceptions.HTTPError, OSError) as exc:
            log.warning("event %s on pod %s/%s not written: %s", reason, pod.namespace, pod.name, exc)

    def _event_body(
        self, pod: PodRef, type_: str, reason: str, note: str, scheduler: str, action: str
    ) -> dict[str, Any]:
        return scheduler_event(
            {"namespace": pod.namespace, "name": pod.name, "uid": pod.uid},
            name=f"{pod.name}.{time.time_ns():x}",
            at=self.clock(),
            controller=scheduler,
            instance=self.instance,
            action=action,
            reason=reason,
            note=note,
            type_=type_,
        )
