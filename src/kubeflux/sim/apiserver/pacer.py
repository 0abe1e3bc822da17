"""When virtual time may jump: the quiescence rule of ``cluster serve --clock virtual``.

The :class:`Pacer` runs on the server's loop and advances the :class:`~kubeflux.sim.apiserver.clock.VirtualClock`
one time point at a time, each time the cluster is *quiescent*:

1. every in-process component (kubelet, controllers, schedulers, the workload replay) has handled every watch
   event it was sent (:attr:`Pacer.busy` probes), and every open watch has written its queued events to its client;
2. no request is in flight (received, not yet answered; a watch counts until its stream starts), and the settle
   period has passed since the last request ended or the last watch data went out (:class:`Activity`, kept by
   :class:`TimeHeader`); ``GET /kubeflux/time``, ``/kubeflux/queue`` and the health endpoints do not count, so polling
   the time or the queue does not hold it;
3. every pending pod of an external scheduler (a ``schedulerName`` no in-process scheduler owns; with
   ``--external-scheduler``, only those names) has been bound or marked ``PodScheduled=False`` since it was created
   (:class:`UnansweredPods`).

Then the clock jumps to its next timer (a replayed submission, a kubelet stage, a Job deadline or back-off, a
scheduler's wake-up), runs every timer of that time point, and the cycle starts again. The settle period is what
lets an external client react to the watch events of a time point before time moves on; rule 3 makes a new pod
wait for its scheduler however slow it is. What neither guards is said in docs/apiserver.md.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import time
from collections.abc import Callable, Collection
from typing import Any

from kubeflux.scheduler.messages import GATED_REASON
from kubeflux.scheduler.objects import DEFAULT_SCHEDULER
from kubeflux.sim.apiserver.clock import Clock, VirtualClock
from kubeflux.sim.apiserver.selectors import FieldSelector, LabelSelector
from kubeflux.sim.apiserver.store import Store
from kubeflux.sim.apiserver.watch import Watcher
from kubeflux.sim.driver import IDLE_WAKEUP_LIMIT

__all__ = ["TIME_HEADER", "Activity", "Pacer", "TimeHeader", "UnansweredPods"]

log = logging.getLogger("kubeflux.apiserver")
Object = dict[str, Any]
TIME_HEADER = b"x-kubeflux-time"
"""Response header carrying the simulated time at the answer (Unix seconds)."""
_QUIET_PATHS = frozenset({"/kubeflux/time", "/kubeflux/queue", "/healthz", "/livez", "/readyz"})
ASGIApp = Callable[[Any, Any, Any], Any]


class Activity:
    """What the HTTP shell tells the pacer: requests in flight, and when data last went out (monotonic)."""

    __slots__ = ("in_flight", "last")

    def __init__(self) -> None:
        self.in_flight = 0
        self.last = time.monotonic()


class TimeHeader:
    """ASGI middleware: adds ``X-Kubeflux-Time`` to every response and, given an :class:`Activity`, counts
    requests in flight (until the response starts) and notes when data went out (any response body, watch
    streams included)."""

    def __init__(self, app: ASGIApp, clock: Clock, activity: Activity | None = None) -> None:
        self.app = app
        self.clock = clock
        self.activity = activity

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        clock = self.clock
        activity = self.activity if scope.get("path") not in _QUIET_PATHS else None
        counted = activity is not None
        if activity is not None:
            activity.in_flight += 1

        async def send_timed(message: Any) -> None:
            nonlocal counted
            if message["type"] == "http.response.start":
                headers = [*message.get("headers", ()), (TIME_HEADER, repr(clock()).encode())]
                message = {**message, "headers": headers}
                if counted and activity is not None:
                    activity.in_flight -= 1
                    counted = False
            if activity is not None:
                activity.last = time.monotonic()
            await send(message)

        try:
            await self.app(scope, receive, send_timed)
        finally:
            if counted and activity is not None:
                activity.in_flight -= 1
                activity.last = time.monotonic()


class UnansweredPods:
    """Pending pods of external schedulers that no scheduler has answered yet (rule 3 of the module docstring).

    A pod is unanswered from its creation until it is bound, marked ``PodScheduled=False``, finished or deleted.
    A pod with ``spec.schedulingGates`` is not: no scheduler answers it (its controller releases it, perhaps only
    once time has freed its quota); once its last gate goes it is new to its scheduler, unanswered until bound or
    marked again (the ``SchedulingGated`` condition it keeps is no answer).
    ``internal`` names the schedulers running in the process (their pods are covered by their busy probes);
    ``external``, when not empty, limits the rule to the pods naming those schedulers.
    """

    def __init__(self, store: Store, internal: Collection[str], external: Collection[str] = ()) -> None:
        pods = store.registry.find("", "v1", "pods")
        assert pods is not None
        self.store, self.pods_resource = store, pods
        self.internal, self.external = frozenset(internal), frozenset(external)
        self.waiting: dict[str, str] = {}
        """uid → ``namespace/name`` of every unanswered pod."""
        self.gated: set[str] = set()
        """The uids of the pods still gated (unanswered from the update that removes their last gate)."""
        self._watcher = Watcher(pods, "", LabelSelector(), FieldSelector(), backlog=10**9)
        store.collections[pods.collection].watchers.add(self._watcher)
        for obj in list(store.objects(pods)):
            self._see("ADDED", obj)

    def stop(self) -> None:
        self.store.stop_watch(self.pods_resource, self._watcher)

    def count(self) -> int:
        """How many pods are unanswered now (after reading the events queued since the last call)."""
        pending = self._watcher.pending
        while pending:
            type_, event = pending.popleft()
            self._see(type_, event.obj)
        return len(self.waiting)

    def _see(self, type_: str, obj: Object) -> None:
        meta, spec, status = obj["metadata"], obj.get("spec") or {}, obj.get("status") or {}
        uid = meta["uid"]
        if type_ == "DELETED" or spec.get("nodeName") or meta.get("deletionTimestamp"):
            self.waiting.pop(uid, None)
            self.gated.discard(uid)
            return
        if status.get("phase") in ("Succeeded", "Failed"):
            self.waiting.pop(uid, None)
            self.gated.discard(uid)
            return
        scheduler = spec.get("schedulerName") or DEFAULT_SCHEDULER
        if scheduler in self.internal or (self.external and scheduler not in self.external):
            return
        if spec.get("schedulingGates"):
            self.gated.add(uid)
        elif type_ == "ADDED" or uid in self.gated:
            self.gated.discard(uid)
            self.waiting[uid] = f"{meta.get('namespace', '')}/{meta.get('name', '')}"
        elif _unschedulable(status):
            self.waiting.pop(uid, None)


def _unschedulable(status: Object) -> bool:
    """Whether a scheduler marked the pod ``PodScheduled=False`` (the API server's ``SchedulingGated`` is not one)."""
    for condition in status.get("conditions") or ():
        if isinstance(condition, dict) and condition.get("type") == "PodScheduled":
            return bool(condition.get("status") == "False" and condition.get("reason") != GATED_REASON)
    return False


class Pacer:
    """Advances ``clock`` whenever the cluster is quiescent (see the module docstring), on the server's loop.

    ``busy`` probes answer True while an in-process component has work queued; ``unsent`` answers True while a
    watch stream holds events not yet written. ``idle`` is called whenever the clock has no timer left and the
    cluster is quiescent (the workload replay ends a ``--until-done`` run there).
    """

    def __init__(
        self,
        clock: VirtualClock,
        activity: Activity,
        *,
        settle: float = 0.05,
        unanswered: UnansweredPods | None = None,
        patience: float = 10.0,
    ) -> None:
        if not settle >= 0 or math.isinf(settle):
            raise ValueError(f"settle must be a non-negative number of seconds, got {settle}")
        self.clock, self.activity, self.settle = clock, activity, settle
        self.unanswered = unanswered
        self.patience = patience
        """Wall seconds the clock may be held by unanswered pods alone before a warning names them."""
        self.busy: list[Callable[[], bool]] = []
        self.cycles: list[Callable[[], bool]] = []
        """Work run only when the cluster is quiescent (the in-process schedulers' cycles, once per time point):
        each runs if due and says whether it ran; time jumps only when none is due."""
        self.idle: list[Callable[[], None]] = []
        self.bound: Callable[[], int] = lambda: 0
        """Pods bound so far by the in-process schedulers (the livelock guard's measure of progress)."""
        self.stalled: list[Callable[[int], None]] = []
        """Told the number of time points, once :data:`IDLE_WAKEUP_LIMIT` time points in a row held nothing but
        scheduler wake-ups and bound no pod (as the simulator stops such a run); time then waits for anything
        else to happen (a request, a timer other than a wake-up)."""
        self._idle_points = 0
        self._bound_before: int | None = None
        self._stopped = False
        self._wake = asyncio.Event()
        clock.scheduled = self._wake.set

    def stop(self) -> None:
        self._stopped = True
        self._wake.set()

    async def run(self) -> None:
        """Advance the clock until :meth:`stop`."""
        while not self._stopped:
            await self._quiescent()
            if self._stopped:
                return
            if any(cycle() for cycle in self.cycles):
                continue
            if self._livelocked():
                await self._wait_for_work()
                continue
            self._bound_before = self.bound()
            if self.clock.advance() is None:
                self._bound_before = None
                for callback in list(self.idle):
                    callback()
                self._wake.clear()
                if self.clock.next_time() == math.inf and not self._stopped:
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(self._wake.wait(), timeout=max(self.settle, 0.01))

    def _livelocked(self) -> bool:
        """Whether the time point just over held only scheduler wake-ups and bound no pod, for the
        :data:`IDLE_WAKEUP_LIMIT`-th time in a row (the simulator's livelock rule)."""
        if self._bound_before is None:
            return False
        if self.clock.working == 0 and self.bound() == self._bound_before:
            self._idle_points += 1
        else:
            self._idle_points = 0
        self._bound_before = None
        if self._idle_points < IDLE_WAKEUP_LIMIT:
            return False
        log.warning(
            "virtual time stopped jumping: %d time points in a row held nothing but scheduler wake-ups and none "
            "bound a pod (a scheduler keeps retrying pods that cannot run); it waits for a request",
            self._idle_points,
        )
        for callback in list(self.stalled):
            callback(self._idle_points)
        return True

    async def _wait_for_work(self) -> None:
        """Wait until a request arrives or a timer other than a wake-up is set."""
        last = self.activity.last
        while not self._stopped and self.clock.working == 0 and self.activity.last == last:
            await asyncio.sleep(max(self.settle, 0.05))
        self._idle_points = 0

    def _busy(self) -> bool:
        return any(probe() for probe in self.busy)

    async def _quiescent(self) -> None:
        """Return once the cluster is quiescent."""
        activity, settle = self.activity, self.settle
        held_since: float | None = None
        while not self._stopped:
            await asyncio.sleep(0)  # the call_soon chains of the in-process components run
            if self._busy():
                continue
            if activity.in_flight:
                await asyncio.sleep(min(settle, 0.001) or 0)
                continue
            quiet = time.monotonic() - activity.last
            if quiet < settle:
                await asyncio.sleep(settle - quiet)
                continue
            if self.unanswered is not None and self.unanswered.count():
                now = time.monotonic()
                held_since = now if held_since is None else held_since
                if now - held_since >= self.patience:
                    self._warn()
                    held_since = now
                await asyncio.sleep(max(settle, 0.001))
                continue
            return

    def _warn(self) -> None:
        assert self.unanswered is not None
        names = sorted(self.unanswered.waiting.values())
        shown = ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
        log.warning(
            "virtual time is held by %d pending pod(s) no scheduler has answered: %s (start their scheduler, or "
            "name the schedulers to wait for with --external-scheduler)",
            len(names),
            shown,
        )
