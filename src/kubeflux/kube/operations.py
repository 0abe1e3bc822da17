"""What operators of ``serve`` read: Prometheus metrics and the health endpoints, on 127.0.0.1 unless configured.

* ``/metrics`` (Prometheus text format, ``prometheus_client``): scheduling passes and their duration (the core's
  matching), decisions by result, pods bound and end-to-end pod scheduling latency (from the pod's creation to its
  Binding accepted), bind conflicts, relists and watches per resource, the watch queue's length, pending pods,
  graph nodes and allocations per scheduler, and whether this replica leads.
* ``/livez`` and ``/healthz``: 200 while the scheduling loop's thread is alive (a stuck process is restarted);
* ``/readyz``: 200 once every informer has synced and scheduling runs — or while the replica waits to lead (a
  standby is ready to take over); 503 with the reason otherwise — also while the API server has been unreachable
  (or failing every request) for longer than ``operations.unreachableSeconds``;
* ``/kubeflux/queue``: each scheduler's queue in order, one entry per waiting job, as JSON
  (:func:`kubeflux.apiobjects.queuejobs.queue_by_job`; what ``kubeflux queue`` shows).

Each :class:`ServeMetrics` has its own registry, so several serves in one process (tests, two replicas) do not
collide.
"""

from __future__ import annotations

import errno
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Protocol

import orjson
from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from kubeflux.apiobjects.queuejobs import QUEUE_PATH
from kubeflux.kube.binder import Binder
from kubeflux.kube.binderprocess import BinderProcess
from kubeflux.kube.reflector import EventQueue, Reflector
from kubeflux.scheduler.core import KubefluxScheduler

__all__ = ["Observed", "OperationsServer", "ServeMetrics", "unreachable"]

_LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0, 3600.0)


class Observed(Protocol):
    """What the metrics read of a serve (:class:`kubeflux.kube.serve.Serve`)."""

    reflectors: list[Reflector]
    events: EventQueue
    binder: Binder | BinderProcess
    cores: list[KubefluxScheduler]


def unreachable(reflectors: list[Reflector], seconds: float) -> str:
    """Why ``/readyz`` is false when a reflector has failed to reach the API server for longer than ``seconds``
    (:attr:`Reflector.failures <kubeflux.kube.reflector.Reflector.failures>`); empty otherwise."""
    for reflector in reflectors:
        failures = reflector.failures
        lasted = failures.for_longer_than(seconds)
        if lasted is not None:
            return (
                f"the API server has been unreachable for {lasted:.0f} s (more than operations.unreachableSeconds, "
                f"{seconds:g} s): {failures.kind}: {failures.last_error}"
            )
    return ""


class _StateCollector(Collector):
    """Values read from serve at scrape time (no bookkeeping on the hot path)."""

    def __init__(self, serve: Observed, leading: Callable[[], bool]) -> None:
        self.serve = serve
        self.leading = leading

    def collect(self) -> Iterator[Metric]:
        serve = self.serve
        relists = CounterMetricFamily("kubeflux_relists", "Full lists after the first (410 Gone)", labels=["resource"])
        watches = CounterMetricFamily("kubeflux_watches", "Watches opened", labels=["resource"])
        for reflector in serve.reflectors:
            relists.add_metric([reflector.resource.kind], max(0, reflector.relists - 1))
            watches.add_metric([reflector.resource.kind], reflector.watches)
        yield relists
        yield watches
        queue = GaugeMetricFamily("kubeflux_watch_queue_length", "Watch events waiting for the scheduling loop")
        queue.add_metric([], serve.events.qsize())
        yield queue
        writes = GaugeMetricFamily("kubeflux_pending_writes", "Binds, conditions and events not yet written")
        writes.add_metric([], serve.binder.pending)
        yield writes
        pending = GaugeMetricFamily("kubeflux_pending_pods", "Pods waiting in the queue", labels=["scheduler"])
        gated = GaugeMetricFamily(
            "kubeflux_gated_pods", "Pods held out of the queue by spec.schedulingGates", labels=["scheduler"]
        )
        nodes = GaugeMetricFamily("kubeflux_graph_nodes", "Nodes known to the scheduler", labels=["scheduler"])
        allocations = GaugeMetricFamily(
            "kubeflux_graph_allocations", "Pods holding an allocation in the graph", labels=["scheduler"]
        )
        for core in serve.cores:
            pending.add_metric([core.name], len(core.queue.by_pod))
            gated.add_metric([core.name], len(core.queue.gated))
            nodes.add_metric([core.name], len(core.books.nodes))
            allocations.add_metric([core.name], len(core.books.allocations))
        yield pending
        yield gated
        yield nodes
        yield allocations
        leader = GaugeMetricFamily("kubeflux_leader", "1 when this replica schedules (holds the lease)")
        leader.add_metric([], 1.0 if self.leading() else 0.0)
        yield leader


class ServeMetrics:
    """The metrics of one :class:`~kubeflux.kube.serve.Serve`."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        registry = self.registry
        self.passes = Histogram(
            "kubeflux_scheduling_pass_duration_seconds",
            "One scheduling pass of the core (matching included)",
            ["scheduler"],
            registry=registry,
            buckets=_LATENCY_BUCKETS,
        )
        self.attempts = Counter(
            "kubeflux_schedule_attempts", "Decisions by result", ["scheduler", "result"], registry=registry
        )
        self.pod_latency = Histogram(
            "kubeflux_pod_scheduling_duration_seconds",
            "From a pod's creation to its Binding accepted",
            ["scheduler"],
            registry=registry,
            buckets=_LATENCY_BUCKETS,
        )
        self.binds = Counter("kubeflux_binds", "Bindings accepted", ["scheduler"], registry=registry)
        self.evictions = Counter(
            "kubeflux_evictions",
            "Evictions sent through the Eviction API, by result: evicted, refused (a PodDisruptionBudget's 429), "
            "gone (the pod was), failed; spared: not sent, another pod of the job was refused or failed",
            ["scheduler", "result"],
            registry=registry,
        )
        self.conflicts = Counter(
            "kubeflux_bind_conflicts",
            "Bindings refused (a race lost: 409, 404) or not sent",
            ["scheduler"],
            registry=registry,
        )

    def watch(self, serve: Observed, leading: Callable[[], bool]) -> None:
        """Export ``serve``'s state at each scrape."""
        self.registry.register(_StateCollector(serve, leading))

    def text(self) -> bytes:
        return generate_latest(self.registry)


class OperationsServer:
    """``/metrics``, ``/healthz``, ``/livez``, ``/readyz`` and ``/kubeflux/queue`` (when ``queue`` is given) on
    ``address:port`` (port 0: a free one) on a thread. A port in use raises :class:`OSError` saying which port and
    how to choose another."""

    def __init__(
        self,
        address: str,
        port: int,
        metrics: ServeMetrics,
        live: Callable[[], bool],
        ready: Callable[[], str],
        queue: Callable[[], dict[str, Any]] | None = None,
    ) -> None:
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                path = self.path.split("?", 1)[0]
                if path == "/metrics":
                    self._answer(200, owner.metrics.text(), "text/plain; version=0.0.4; charset=utf-8")
                elif path in ("/healthz", "/livez"):
                    alive = owner.live()
                    self._answer(200 if alive else 503, b"ok" if alive else b"the scheduling loop is not running")
                elif path == "/readyz":
                    why = owner.ready()
                    self._answer(503 if why else 200, why.encode() if why else b"ok")
                elif path == QUEUE_PATH and owner.queue is not None:
                    try:
                        document = owner.queue()
                    except TimeoutError:
                        self._answer(503, b"the scheduling loop did not answer in time (a long pass); ask again")
                        return
                    self._answer(200, orjson.dumps(document), "application/json")
                else:
                    self._answer(404, b"not found")

            def _answer(self, code: int, body: bytes, kind: str = "text/plain; charset=utf-8") -> None:
                self.send_response(code)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:  # probes every few seconds: not logged
                return

        self.metrics, self.live, self.ready, self.queue = metrics, live, ready, queue
        try:
            self.server = ThreadingHTTPServer((address, port), Handler)
        except OSError as exc:
            if exc.errno != errno.EADDRINUSE:
                raise
            raise OSError(
                f"the operations port {address}:{port} (/metrics, /readyz, /kubeflux/queue) is in use, perhaps by "
                "another kubeflux serve; choose another with --operations-port PORT (or operations.port in the "
                "config; 0 takes a free one), or turn the endpoints off with operations.enabled: false",
            ) from None
        self.server.daemon_threads = True
        self.port = int(self.server.server_address[1])
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True, name="kubeflux-operations")

    def start(self) -> OperationsServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
