"""serve's writer in a process of its own: the :class:`~kubeflux.kube.binder.Binder` runs in a child process, so
that its requests never wait for the GIL that a scheduling pass holds, nor the pass for theirs.

Why (issue 28, ``benchmarks/serve.py --real``: 5,000 nodes, 10,000 pods, the binder's threads in serve's process):
while a pass ran, a Binding took 15.6 ms against 9.5 ms between passes, Bindings went at 260/s against 439/s, and a
thread sleeping 1 ms woke 2.3 ms late on average against 0.4 ms (p90 6 ms: the interpreter's 5 ms switch interval):
the writer threads waited for the GIL. A process of its own also gets its own share of a loaded machine's cores.

:class:`BinderProcess` has the Binder's interface (``bind``, ``unschedulable``, ``warn``, ``evict``, ``forget``,
``drain``, ``stop``, ``pending``, the ``binds`` and ``refused`` counts; each eviction's outcome comes back to
``on_evicted``) and the same Binder runs in the child, so every rule of the binder holds as it is (one thread per
pod, Bindings first, no condition after a pod's Binding, events after
the burst). The two talk over one pipe, in pickled tuples:

* parent → child: the decisions, ``forget``, ``drain``, ``stop``; written by the scheduling loop (a write blocks
  only while the pipe's buffer is full, that is while the child is not reading); a pass's decisions go as one
  message (:meth:`BinderProcess.batch`);
* child → parent: each Binding done or refused (a thread of the parent's calls ``on_bound`` / ``on_refused``, so
  a refused Bind still goes back to the loop and the core's ``unreserve``), after the claims it wrote as the server
  answered (``on_claims``), the writes pending, drained, stopped; one thread of the child's sends them, in the
  order they were said, as many in a message as were waiting.

Batches, because each message costs both processes a pickle, a system call and, for the one receiving it, a thread
woken to take the GIL: one a pod each way took the parent ~65 µs of CPU a Binding, most of it waking the reader
(``benchmarks/serve.py --real``, 10,000 pods).

Life cycle. The child is started with ``spawn`` (a fresh interpreter: no copy of the parent's threads) and builds
its own client with ``connect`` (a picklable callable: the command's own recipe, or the parent's client
configuration copied). It ends:

* when told to (:meth:`BinderProcess.stop`): it sends the Bindings already decided within the grace, drops the
  rest, as :meth:`Binder.stop <kubeflux.kube.binder.Binder.stop>`; a child that does not end then is killed;
* when the parent's end of the pipe closes: the parent ended, even by SIGKILL; the writes not sent are dropped, as
  the parent's own threads' would be (a restarted serve recovers from the pods' annotations);
* never on SIGINT or SIGTERM (a Ctrl-C reaches the whole process group: the parent stops it in order).

A child that ends otherwise (killed, or its client could not be built) is said once: every Bind sent to it and not
answered is reported refused (its outcome unknown, as a Binding whose connection broke: the watch says whether it
bound) and :attr:`BinderProcess.failed` says why; serve then stops scheduling (its liveness fails).
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import multiprocessing
import os
import pickle
import signal
import sys
import threading
import time
import types
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from functools import partial
from multiprocessing.connection import Connection
from typing import Any

from kubernetes import client

from kubeflux.kube.binder import Binder, BindOutcome, PodRef
from kubeflux.scheduler.interface import Bind, Deallocate, Evict, PodWarning, Reject, Unschedulable

__all__ = ["BinderProcess", "copied_client"]

log = logging.getLogger("kubeflux.serve")
_REPORT_SECONDS = 0.1
"""How often the child says how many writes are pending (when the number changed)."""
_LOGGERS = ("kubeflux.serve", "urllib3.connectionpool")
"""Loggers whose level the child takes from the parent (``serve -v``)."""
_STOPPING = {signal.SIGINT, signal.SIGTERM}
_ABOUT_PODS = frozenset({"bind", "unschedulable", "warn", "evict", "deallocate", "forget"})
_LAST_WORDS = frozenset({"stopped", "failed"})
"""What the child says last: its sender ends after it."""
_GATHER_SECONDS = 0.02
"""How long after its last message the child's sender lets answers gather before it sends what it has as one: in a
burst the Bindings are answered ~0.1-1 ms apart, and each message costs both processes a pickle, two system calls
and a thread woken on each side. 10,000 Bindings on the real API server: one message an answer, 8,028 messages;
gathered 2 ms, ~3,000, and the sender (0.40-0.71 s of CPU) and the parent's reader (0.40-0.72 s) cost a tenth of
serve's CPU; gathered 20 ms, ~610, 0.06-0.12 s and 0.12-0.22 s (issue 28). An answer after a quiet spell goes at
once, and a word someone waits for (:data:`_URGENT`) cuts the gathering short, so only the answers of a burst wait,
at most this long (what ``serve``'s pod latency counts of them: their Binding was answered up to 20 ms earlier)."""
_URGENT = frozenset({"refused", "evicted", "drained", "stopped", "failed"})
"""What the child says that goes at once: what a caller waits for, or the core must hear to plan again."""


def _client_from(configuration: bytes, user_agent: str) -> client.ApiClient:
    api = client.ApiClient(pickle.loads(configuration))  # our own bytes, from the parent
    api.user_agent = user_agent
    return api


def copied_client(api: client.ApiClient) -> Callable[[], client.ApiClient] | str:
    """A picklable recipe for a client like ``api`` (its configuration copied), or why there is none (a
    configuration holding something that cannot be pickled, e.g. a token refresh hook of a closure)."""
    try:
        configuration = pickle.dumps(api.configuration)
    except Exception as exc:  # pickle raises several kinds
        return f"its client configuration cannot be copied to another process: {exc}"
    return partial(_client_from, configuration, api.user_agent)


# ---------------------------------------------------------------------- the child


class _Outbox:
    """What the child says, sent to the parent in the order it was said by one thread (:meth:`run`), as many in a
    message as were waiting: gathered for up to ``gather`` seconds after the last message (see
    :data:`_GATHER_SECONDS`), at once after a quiet spell or when an :data:`_URGENT` word is said."""

    def __init__(self, deliver: Callable[[tuple[Any, ...]], None], gather: float = _GATHER_SECONDS) -> None:
        self.deliver, self.gather = deliver, gather
        self.lock = threading.Condition()
        """Held while a message is said; also by whoever reads a count and says it in one step (reentrant)."""
        self._said: list[tuple[Any, ...]] = []
        self._urgent = False

    def say(self, message: tuple[Any, ...]) -> None:
        with self.lock:
            self._said.append(message)
            if message[0] in _URGENT:
                self._urgent = True
                self.lock.notify()
            elif len(self._said) == 1:  # (else the sender is gathering, or sending, and takes it with the rest)
                self.lock.notify()

    def run(self) -> None:
        """Deliver what is said, until a last word (stopped, failed) has gone."""
        last = -self.gather
        while True:
            with self.lock:
                while not self._said:
                    self.lock.wait()
                gather = last + self.gather - time.monotonic()
                if gather > 0 and not self._urgent:
                    self.lock.wait(gather)  # what is said meanwhile goes in the same message; cut short if urgent
                said = self._said[:]
                self._said.clear()
                self._urgent = False
            last = time.monotonic()
            self.deliver(said[0] if len(said) == 1 else ("batch", said))
            if any(each[0] in _LAST_WORDS for each in said):  # not always the last one taken: a report, a drain
                return  # thread may say more meanwhile (nobody reads it), and the child would wait for the sender


def _logging() -> tuple[str | None, dict[str, int]]:
    """The parent's log format and levels, for the child to log as it does."""
    handlers = logging.getLogger().handlers
    formatter = handlers[0].formatter if handlers else None
    return (formatter._fmt if formatter else None), {name: logging.getLogger(name).level for name in _LOGGERS}


def _child(
    pipe: Connection,
    connect: Callable[[], client.ApiClient],
    options: dict[str, Any],
    logs: tuple[str | None, dict[str, int]],
) -> None:
    """The child's life: a Binder fed from ``pipe`` until told to stop or the parent is gone."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, _STOPPING)  # blocked since the parent started us: now ignored
    form, levels = logs
    if form is not None:
        logging.basicConfig(format=form)
    for name, level in levels.items():
        logging.getLogger(name).setLevel(level)

    def deliver(said: tuple[Any, ...]) -> None:
        try:
            pipe.send(said)
        except OSError:  # the parent is gone: nobody to write for
            os._exit(0)
        except Exception:  # nothing more could be said: the parent hears the child end, refuses what is in flight
            log.exception("the binder process cannot answer serve")
            os._exit(1)

    outbox = _Outbox(deliver)
    send, waiting = outbox.say, outbox.lock
    speaking = threading.Thread(target=outbox.run, daemon=True, name="binder-sender")
    speaking.start()
    try:
        api = connect()
    except Exception as exc:  # a client that cannot be built: said to the parent, which fails
        send(("failed", f"cannot configure the Kubernetes client: {exc}"))
        speaking.join(10.0)
        return
    asked: dict[int, int] = {}
    """id(decision) → the parent's number for that Bind (the Binder hands the same object to its callbacks)."""

    def bound(scheduler: str, decision: Bind, pod: PodRef) -> None:
        send(("bound", asked.pop(id(decision))))  # the parent keeps the pod it sent

    def refused(outcome: BindOutcome) -> None:
        send(("refused", asked.pop(id(outcome.decision)), outcome.reason))

    def evicted(scheduler: str, decision: Evict, result: str, why: str) -> None:
        send(("evicted", scheduler, decision, result, why))

    def claims(written: list[dict[str, Any]]) -> None:  # before its Bind's outcome, on the same pipe
        send(("claims", written))

    binder = Binder(api, on_bound=bound, on_refused=refused, on_claims=claims, on_evicted=evicted, **options)
    stopped = threading.Event()
    received = 0
    """Messages about pods read so far (the parent counts those it sent: the difference is still in the pipe)."""

    def report() -> None:
        said = (-1, -1)
        while not stopped.wait(_REPORT_SECONDS):
            with waiting:  # taken and said in one step: an older count never arrives after a drain's newer one
                now = (received, binder.pending)  # in this order: a message read meanwhile is counted twice, not never
                if now != said:
                    said = now
                    send(("pending", *now))

    threading.Thread(target=report, daemon=True, name="binder-report").start()

    def drain(token: int, timeout: float | None) -> None:
        done = binder.drain(timeout)
        with waiting:  # as report()
            read = received  # before the writes pending, as report() reads them
            send(("drained", token, done, read, binder.pending))

    def handle(message: tuple[Any, ...]) -> None:
        nonlocal received
        kind = message[0]
        if kind == "batch":
            for each in message[1]:
                handle(each)
            return
        if kind == "bind":
            _, number, scheduler, decision, pod = message
            asked[id(decision)] = number
            binder.bind(scheduler, decision, pod)
        elif kind == "unschedulable":
            binder.unschedulable(*message[1:])
        elif kind == "warn":
            binder.warn(*message[1:])
        elif kind == "evict":
            binder.evict(*message[1:])
        elif kind == "deallocate":
            binder.deallocate(*message[1:])
        elif kind == "forget":
            binder.forget(message[1])
        elif kind == "drain":
            threading.Thread(target=drain, args=message[1:], daemon=True).start()
        received += kind in _ABOUT_PODS  # once its writes are queued: a write is never counted in neither
        if kind == "stop":
            binder.stop(message[1])
            stopped.set()
            send(("stopped",))
            speaking.join(10.0)
            pipe.close()
            os._exit(0)  # everything is written and said: no interpreter teardown (it delayed serve's stop)

    while True:
        try:
            message = pipe.recv()
        except (EOFError, OSError):  # the parent ended (even killed): drop what is left, as its threads would
            os._exit(0)
        handle(message)


# ---------------------------------------------------------------------- the parent


class BinderProcess:
    """A :class:`~kubeflux.kube.binder.Binder` in a child process (see the module docstring). ``options`` are the
    Binder's keywords (``workers``, ``clock``, ``interval`` …) but its callbacks, which are called here, on a
    thread of this process's."""

    def __init__(
        self,
        connect: Callable[[], client.ApiClient],
        *,
        on_refused: Callable[[BindOutcome], None] = lambda outcome: None,
        on_bound: Callable[[str, Bind, PodRef], None] = lambda scheduler, decision, pod: None,
        on_claims: Callable[[list[dict[str, Any]]], None] = lambda claims: None,
        on_evicted: Callable[[str, Evict, str, str], None] = lambda scheduler, decision, result, why: None,
        **options: Any,
    ) -> None:
        self.on_refused, self.on_bound, self.on_evicted = on_refused, on_bound, on_evicted
        self.on_claims = on_claims
        context = multiprocessing.get_context("spawn")
        self._pipe, theirs = context.Pipe()
        self.process = context.Process(
            target=_child, args=(theirs, connect, options, _logging()), name="kubeflux-binder", daemon=True
        )
        # the child inherits the signal mask: an interrupt while it starts waits until it ignores interrupts;
        # and it is not given the parent's main module to import (``kubeflux.cli``: ~1 s of imports it never uses)
        blocked = signal.pthread_sigmask(signal.SIG_BLOCK, _STOPPING)
        main = sys.modules["__main__"]
        sys.modules["__main__"] = types.ModuleType("__main__")
        try:
            self.process.start()
        finally:
            sys.modules["__main__"] = main
            signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
        theirs.close()
        self.binds = 0
        """Bindings accepted."""
        self.refused = 0
        """Bindings refused, or whose outcome is unknown."""
        self.failed = ""
        """Why the child ended unasked (empty while it runs or was stopped)."""
        self._sent = 0
        """Messages about pods sent (see :data:`_ABOUT_PODS`)."""
        self._reported = (0, 0)
        """The child's last (messages about pods read, writes pending)."""
        self._numbers = itertools.count()
        self._in_flight: dict[int, tuple[str, Bind, PodRef]] = {}
        """The parent's number of each Bind sent and not answered → (scheduler, decision, pod)."""
        self._outbox: list[tuple[Any, ...]] | None = None
        """The messages held while :meth:`batch` lasts (None: sent at once)."""
        self._drains: dict[int, Future[bool]] = {}
        self._lock = threading.Lock()
        self._sending = threading.Lock()
        self._stopping = False
        self._done = threading.Event()
        self._reader = threading.Thread(target=self._read, daemon=True, name="binder-results")
        self._reader.start()

    @property
    def pending(self) -> int:
        """Writes queued or being sent in the child, as it said last (every 0.1 s), plus the messages about pods
        it had not read then (or that a batch still holds); none once it has ended."""
        if self._done.is_set():  # it has ended: what it was told was refused or dropped
            return 0
        read, pending = self._reported
        return pending + self._sent - read

    # ------------------------------------------------------------------ decisions

    def bind(self, scheduler: str, decision: Bind, pod: PodRef) -> None:
        with self._lock:
            number = next(self._numbers)
            self._in_flight[number] = (scheduler, decision, pod)
        self._send(("bind", number, scheduler, decision, pod))

    def unschedulable(self, scheduler: str, decision: Unschedulable | Reject, pod: PodRef) -> None:
        self._send(("unschedulable", scheduler, decision, pod))

    def warn(self, scheduler: str, decision: PodWarning, pod: PodRef) -> None:
        self._send(("warn", scheduler, decision, pod))

    def evict(self, scheduler: str, decision: Evict, pod: PodRef) -> None:
        self._send(("evict", scheduler, decision, pod))

    def deallocate(self, scheduler: str, decision: Deallocate, pod: PodRef) -> None:
        self._send(("deallocate", scheduler, decision, pod))

    def forget(self, uid: str) -> None:
        self._send(("forget", uid))

    @contextlib.contextmanager
    def batch(self) -> Iterator[None]:
        """What is said meanwhile (a scheduling pass's decisions) goes to the child as one message, at the end (or
        with a :meth:`drain` or :meth:`stop`, which go at once). A batch inside another sends what is held at its
        end, and the outer one goes on holding (serve: a round holds its events' forgets, each core's pass its
        decisions, sent before the next core's pass)."""
        with self._sending:
            outer = self._outbox is None
            if outer:
                self._outbox = []
        try:
            yield
        finally:
            with self._sending:
                held = self._outbox
                if outer:
                    self._outbox = None
                elif held:
                    self._outbox = []
                if held:
                    self._write(held)

    def drain(self, timeout: float | None = None) -> bool:
        """Wait until every write submitted so far is done; whether it is (False: the child has ended)."""
        if self._done.is_set():
            return False
        asked: Future[bool] = Future()
        with self._lock:
            token = next(self._numbers)
            self._drains[token] = asked
        self._send(("drain", token, timeout), now=True)
        try:
            return asked.result(None if timeout is None else timeout + 5.0)
        except FutureTimeout:
            return False
        finally:
            with self._lock:
                self._drains.pop(token, None)

    def stop(self, grace: float = 10.0) -> None:
        """Stop the child as :meth:`Binder.stop <kubeflux.kube.binder.Binder.stop>` stops its threads (the
        Bindings decided are sent within ``grace`` seconds), then end it; killed if it does not end. Idempotent."""
        with self._lock:
            if self._stopping:
                return
            self._stopping = True
        self._send(("stop", grace), now=True)
        self._done.wait(grace + 10.0)
        self.process.join(5.0)
        if self.process.is_alive():
            log.warning("binder process %d did not end when told to: killed", self.process.pid)
            self.process.kill()
            self.process.join()
        self._pipe.close()
        self._reader.join()

    # ------------------------------------------------------------------ the pipe

    def _send(self, message: tuple[Any, ...], *, now: bool = False) -> None:
        """Held while a :meth:`batch` lasts; ``now``: at once, with what the batch holds so far (a drain or a stop
        waits for the answer: held by the caller's own batch, it would never come)."""
        with self._sending:
            self._sent += message[0] in _ABOUT_PODS
            if self._outbox is None:
                self._write([message])
            elif now:
                held = [*self._outbox, message]
                self._outbox.clear()  # the batch goes on with what is said next
                self._write(held)
            else:
                self._outbox.append(message)

    def _write(self, messages: list[tuple[Any, ...]]) -> None:
        """``messages`` as one (under :attr:`_sending`)."""
        if self._done.is_set():
            self._answer_lost()
            return
        with contextlib.suppress(OSError, ValueError):  # the child is gone: the reader says so and refuses the rest
            self._pipe.send(messages[0] if len(messages) == 1 else ("batch", messages))

    def _read(self) -> None:
        failed = ""
        ended = False
        while not ended:
            try:
                message = self._pipe.recv()
            except (EOFError, OSError):
                break
            for said in message[1] if message[0] == "batch" else (message,):
                kind = said[0]
                if kind == "stopped":
                    ended = True
                    break
                if kind == "failed":
                    failed = said[1]
                else:
                    self._heard(said)
        with self._lock:
            stopping = self._stopping
        if not stopping and not failed:
            self.process.join(5.0)
            failed = f"the binder process ended unexpectedly (exit code {self.process.exitcode})"
        if failed:
            log.error("%s", failed)
        with self._sending:  # together: a Bind sent after this is refused at once
            self.failed = failed
            self._done.set()
        self._answer_lost()

    def _heard(self, message: tuple[Any, ...]) -> None:
        """One thing the child said (but its last word)."""
        kind = message[0]
        if kind == "bound":
            scheduler, decision, pod = self._answered(message[1])
            self.binds += 1  # only this thread counts them
            self.on_bound(scheduler, decision, pod)
        elif kind == "refused":
            scheduler, decision, _ = self._answered(message[1], refused=True)
            self.on_refused(BindOutcome(scheduler, decision, message[2]))
        elif kind == "claims":
            self.on_claims(message[1])
        elif kind == "evicted":
            self.on_evicted(*message[1:])
        elif kind == "pending":
            self._reported = (message[1], message[2])
        elif kind == "drained":
            self._reported = (message[3], message[4])
            with self._lock:
                asked = self._drains.get(message[1])
            if asked is not None and not asked.done():
                asked.set_result(message[2])

    def _answered(self, number: int, *, refused: bool = False) -> tuple[str, Bind, PodRef]:
        with self._lock:
            self.refused += refused
            return self._in_flight.pop(number)

    def _answer_lost(self) -> None:
        """The child has ended: the Binds it did not answer are refused (unless serve is stopping anyway), and
        whoever waits for a drain is answered False."""
        with self._lock:
            lost = [] if self._stopping else list(self._in_flight.values())
            self._in_flight.clear()
            self.refused += len(lost)
            drains = list(self._drains.values())
            self._drains.clear()  # each answered once
        for scheduler, decision, _ in lost:
            self.on_refused(BindOutcome(scheduler, decision, f"bind not confirmed: {self.failed}"))
        for asked in drains:
            if not asked.done():  # answered by the child before it ended
                asked.set_result(False)
