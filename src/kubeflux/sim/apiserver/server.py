"""Running the API server: uvicorn on 127.0.0.1 (a free port by default), a kubeconfig, the simulated nodes.

:class:`ApiServer` runs in the calling thread (:meth:`serve_forever`, which stops on Ctrl-C or SIGTERM) or in a
background thread (:meth:`start`/:meth:`stop`, for tests and benchmarks; also a context manager). The store is
only touched from the server's event loop; :meth:`call` runs a function there from another thread. With
``kubelet=True`` a :class:`SimulatedKubelet` runs the bound pods, with ``controllers=True`` the built-in
controllers run (:data:`CONTROLLERS`: the Job controller and the disruption controller, as kube-controller-manager's,
the PodGroup controller, which keeps groups' status, and the PV controller's binder), but those named in
``disabled_controllers``, which may also name the store's own garbage collector and namespace controller
(:data:`STORE_CONTROLLERS`, on otherwise);
``schedulers`` run in the process (:class:`InProcessSchedulers`), both on the server's loop, created when it starts
serving.
"""

from __future__ import annotations

import asyncio
import base64
import concurrent.futures
import contextlib
import functools
import gc
import signal
import socket
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, Protocol, TypeVar

import uvicorn
import yaml

from kubeflux.apiobjects.manifests import format_timestamp
from kubeflux.scheduler.interface import Scheduler
from kubeflux.scheduler.objects import DEFAULT_SCHEDULER, Node
from kubeflux.scheduler.units import format_quantity
from kubeflux.sim.apiserver.app import ApiApp, ServerSettings
from kubeflux.sim.apiserver.claim_controller import ClaimController
from kubeflux.sim.apiserver.clock import Clock, VirtualClock, WallEvents
from kubeflux.sim.apiserver.connection import CoalescingHttpProtocol
from kubeflux.sim.apiserver.controllers import PodGroupController
from kubeflux.sim.apiserver.disruption import DisruptionController
from kubeflux.sim.apiserver.inprocess import InProcessSchedulers
from kubeflux.sim.apiserver.jobs import JobController
from kubeflux.sim.apiserver.kubelet import SimulatedKubelet
from kubeflux.sim.apiserver.pacer import Activity, Pacer, TimeHeader, UnansweredPods
from kubeflux.sim.apiserver.quota_controller import QuotaController
from kubeflux.sim.apiserver.replay import WorkloadReplay
from kubeflux.sim.apiserver.resources import default_registry
from kubeflux.sim.apiserver.store import Store
from kubeflux.sim.apiserver.tls import TlsFiles
from kubeflux.sim.apiserver.volume_controller import VolumeBinder
from kubeflux.sim.pods import Lifecycle
from kubeflux.sim.workloads.model import JobKind, Workload
from kubeflux.wallclock import WallClock

__all__ = ["CONTROLLERS", "STORE_CONTROLLERS", "ApiServer", "kubeconfig", "node_manifest"]

STORE_CONTROLLERS = ("garbagecollector", "namespace")
"""What the store does on every delete as kube-controller-manager's controllers would (dependents of a deleted owner,
a Terminating namespace's content): on, whatever ``controllers`` says, unless named in ``disabled_controllers``, to
leave that work to a real kube-controller-manager run against the server, which then does it with its own timing."""
CONTROLLERS = (
    "job",
    "podgroup",
    "disruption",
    "resourcequota",
    "persistentvolume-binder",
    "resourceclaim",
    *STORE_CONTROLLERS,
)
"""The built-in controllers: ``controllers=True`` runs ``job`` (kube-controller-manager's Job controller, with its
TTL-after-finished controller), ``podgroup`` (scheduler-plugins' PodGroup status), ``disruption`` and
``resourcequota`` (kube-controller-manager's: budgets' and quotas' status), ``persistentvolume-binder`` (its PV
controller's binding of claims and volumes: :mod:`.volume_controller`), ``resourceclaim`` (its ResourceClaims made
from templates for pods, and freed when they end: :mod:`.claim_controller`); and the store's own."""

T = TypeVar("T")


class _Component(Protocol):
    """What the server runs beside the store (the kubelet, the controllers, the schedulers, a replay)."""

    def stop(self) -> None: ...


def node_manifest(node: Node, now: float) -> dict[str, Any]:
    """The ``v1`` Node a kubelet would register for a simulated node (``node_from_manifest`` reads it back)."""
    resources = {name: format_quantity(name, amount) for name, amount in sorted(node.allocatable.items())}
    spec: dict[str, Any] = {}
    if node.unschedulable:
        spec["unschedulable"] = True
    if node.taints:
        spec["taints"] = [
            {k: v for k, v in (("key", t.key), ("value", t.value), ("effect", t.effect)) if v} for t in node.taints
        ]
    stamp = format_timestamp(float(int(now)))
    ready = {
        "type": "Ready",
        "status": "True" if node.ready else "False",
        "reason": "KubeletReady" if node.ready else "KubeletNotReady",
        "message": "kubeflux simulated kubelet" if node.ready else "node is down",
        "lastHeartbeatTime": stamp,
        "lastTransitionTime": stamp,
    }
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": node.name, "labels": dict(node.labels) or {"kubernetes.io/hostname": node.name}},
        "spec": spec,
        "status": {
            "capacity": resources,
            "allocatable": dict(resources),
            "conditions": [ready],
            "addresses": [{"type": "Hostname", "address": node.name}],
            "nodeInfo": {
                "kubeletVersion": "v1.36.0-kubeflux",
                "containerRuntimeVersion": "kubeflux://simulated",
                "operatingSystem": "linux",
                "architecture": "amd64",
                "osImage": "kubeflux simulated node",
                "kernelVersion": "",
                "kubeProxyVersion": "",
                "machineID": "",
                "systemUUID": "",
                "bootID": "",
            },
        },
    }


def kubeconfig(server: str, token: str = "", ca: bytes = b"") -> dict[str, Any]:
    """A kubeconfig with one cluster (trusting the CA ``ca``, PEM, when given), one user (the token, when given)
    and one current context ``kubeflux``."""
    user: dict[str, Any] = {"token": token} if token else {}
    cluster: dict[str, Any] = {"server": server}
    if ca:
        cluster["certificate-authority-data"] = base64.b64encode(ca).decode("ascii")
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "kubeflux", "cluster": cluster}],
        "users": [{"name": "kubeflux", "user": user}],
        "contexts": [
            {"name": "kubeflux", "context": {"cluster": "kubeflux", "user": "kubeflux", "namespace": "default"}}
        ],
        "current-context": "kubeflux",
    }


SERVED_GC_THRESHOLDS = (100_000, 50, 100)
"""The collector's thresholds while a cluster is served (Python's defaults: 700, 10, 10)."""


@contextlib.contextmanager
def _served_collections() -> Iterator[None]:
    """Collect cyclic garbage less often while the cluster is served, then restore the thresholds.

    The store keeps every object's current version and a cache of events, hundreds of thousands of dicts that
    live long and hold no cycles; with the default thresholds the collector rescans them again and again (about a
    tenth of a trace replay's time). Unlike a simulated run (:func:`kubeflux.sim.driver.Simulation`), a served
    cluster may run for days, so old generations are still collected, only less often."""
    with _SERVING_LOCK:
        if not _SERVING:
            _SERVING.append(gc.get_threshold())  # the thresholds to restore, kept while any cluster is served
        _SERVING.append(SERVED_GC_THRESHOLDS)
        gc.set_threshold(*SERVED_GC_THRESHOLDS)
    try:
        yield
    finally:
        with _SERVING_LOCK:  # several servers in one process (tests): the last to stop restores the thresholds
            _SERVING.pop()
            if len(_SERVING) == 1:
                gc.set_threshold(*_SERVING.pop())


_SERVING: list[tuple[int, ...]] = []
_SERVING_LOCK = threading.Lock()


class _Uvicorn(uvicorn.Server):
    """uvicorn, ending open watches on Ctrl-C/SIGTERM instead of waiting for them, and returning normally
    afterwards (uvicorn would re-raise the signal: the command could not print that it stopped)."""

    def __init__(self, config: uvicorn.Config, app: ApiApp) -> None:  # config.app: ``app``, maybe wrapped
        super().__init__(config)
        self.api = app

    def handle_exit(self, sig: int, frame: Any) -> None:
        self.api.shutdown()
        if self.should_exit and sig == signal.SIGINT:
            self.force_exit = True  # a second Ctrl-C
        self.should_exit = True


class ApiServer:
    """The simulated cluster's API server on ``host:port`` (port 0: a free one, known after :meth:`bind`)."""

    def __init__(
        self,
        nodes: Iterable[Node] = (),
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        settings: ServerSettings | None = None,
        store: Store | None = None,
        kubelet: bool = False,
        lifecycle: Lifecycle | None = None,
        schedulers: Sequence[Scheduler] = (),
        clock: Clock | None = None,
        controllers: bool = False,
        disabled_controllers: Sequence[str] = (),
        settle: float = 0.05,
        external_schedulers: Sequence[str] = (),
        workload: Workload | None = None,
        primary: str = DEFAULT_SCHEDULER,
        until_done: bool = False,
        tls: TlsFiles | None = None,
    ) -> None:
        self.clock: Clock = clock or WallClock()
        self.tls = tls
        """The certificate and key served (HTTPS), or None (HTTP)."""
        self.store = store or Store(default_registry(), clock=self.clock)
        self.settings = settings or ServerSettings()
        self.app = ApiApp(self.store, self.settings, self.clock)
        self.activity = Activity()
        virtual = isinstance(self.clock, VirtualClock)
        self.app.activity = self.activity if virtual else None
        self.asgi = TimeHeader(self.app, self.clock, self.activity if virtual else None)
        """The application uvicorn runs: the API, with the simulated time header (and, in virtual time, the
        requests in flight the pacer reads)."""
        self.settle = settle
        self.external_schedulers = tuple(external_schedulers)
        self.pacer: Pacer | None = None
        """What advances virtual time (with a :class:`VirtualClock`), once serving."""
        self.workload, self.primary, self.until_done = workload, primary, until_done
        self.replay: WorkloadReplay | None = None
        """The replay of ``workload`` (objects created at their submit times), once serving."""
        self.started_at = 0.0
        """``time.perf_counter()`` when serving started (the run's wall time, for the report)."""
        self.host = host
        self.port = port
        self._socket: socket.socket | None = None
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._with_kubelet = kubelet
        unknown = sorted(set(disabled_controllers) - set(CONTROLLERS))
        if unknown:
            raise ValueError(f"unknown controller(s) {', '.join(unknown)}; known: {', '.join(CONTROLLERS)}")
        store_controllers = frozenset(STORE_CONTROLLERS) - set(disabled_controllers)
        self.controllers = (frozenset(CONTROLLERS) if controllers else store_controllers) - set(disabled_controllers)
        """The built-in controllers that run."""
        needed = {"job", "garbagecollector"}
        if (
            workload is not None
            and not needed <= self.controllers
            and any(j.kind is JobKind.JOB for j in workload.jobs)
        ):
            raise ValueError(
                "a workload's Jobs are replayed by the built-in Job controller and garbage collector: they cannot "
                "be turned off"
            )
        if workload is not None and not kubelet:
            raise ValueError("a workload's pods run in the simulated kubelet's cluster: it cannot be turned off")
        self.store.deletion.collects_garbage = "garbagecollector" in self.controllers
        self.store.deletion.finalizes_namespaces = "namespace" in self.controllers
        self.podgroup_controller: PodGroupController | None = None
        self.disruption_controller: DisruptionController | None = None
        self.volume_binder: VolumeBinder | None = None
        """The PodDisruptionBudgets' counts (with the ``disruption`` controller), once serving."""
        self.job_controller: JobController | None = None
        """The Job controller (with the ``job`` controller), once serving."""
        self.quota_controller: QuotaController | None = None
        self.claim_controller: ClaimController | None = None
        """The ResourceQuotas' status (with the ``resourcequota`` controller), once serving."""
        self.lifecycle = lifecycle or Lifecycle()
        self._scheduler_cores = list(schedulers)
        self.kubelet: SimulatedKubelet | None = None
        """The simulated kubelet (with ``kubelet=True``), once serving."""
        self.schedulers: InProcessSchedulers | None = None
        """The in-process schedulers (when given), once serving."""
        nodes_resource = self.store.registry.find("", "v1", "nodes")
        assert nodes_resource is not None
        self.nodes = list(nodes)
        for node in self.nodes:
            self.store.create(nodes_resource, "", node_manifest(node, self.store.clock()))

    @property
    def url(self) -> str:
        # a wildcard address is reached here through loopback (a URL or certificate naming 0.0.0.0 is no use)
        host = {"0.0.0.0": "127.0.0.1", "::": "::1"}.get(self.host, self.host)
        host = f"[{host}]" if ":" in host else host
        return f"{'https' if self.tls else 'http'}://{host}:{self.port}"

    def bind(self) -> socket.socket:
        """Open the listening socket now, so that the port is known before serving."""
        if self._socket is None:
            # proto=IPPROTO_TCP: asyncio sets TCP_NODELAY on accepted connections only for such sockets; without
            # it every response waits ~40 ms for the client's delayed ACK (Nagle)
            family = socket.AF_INET6 if ":" in self.host else socket.AF_INET
            sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((self.host, self.port))
            sock.listen(2048)  # clients given the kubeconfig may connect before the event loop serves
            self.port = sock.getsockname()[1]
            sock.set_inheritable(True)
            self._socket = sock
        return self._socket

    def write_kubeconfig(self, path: Path) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        ca = self.tls.ca.read_bytes() if self.tls else b""
        # kubectl asks an HTTPS server's user for a name and password when the kubeconfig gives it no credential;
        # a server without a token takes any, so it is given one that says so
        token = self.settings.token or ("anonymous" if self.tls else "")
        text = yaml.safe_dump(kubeconfig(self.url, token, ca), sort_keys=False)
        path.write_text(text, encoding="utf-8")
        path.chmod(0o600)
        return path

    def _uvicorn(self) -> uvicorn.Server:
        config = uvicorn.Config(
            self.asgi,
            log_level="warning",
            access_log=False,
            http=CoalescingHttpProtocol,  # httptools, one send per response
            lifespan="off",
            timeout_graceful_shutdown=1,
            timeout_keep_alive=30,
            proxy_headers=False,  # loopback, no proxy: the middleware is only a cost per request
            server_header=False,
            date_header=False,
            ssl_certfile=str(self.tls.certificate) if self.tls else None,
            ssl_keyfile=str(self.tls.key) if self.tls else None,
        )
        server = _Uvicorn(config, self.app)
        self._server = server
        return server

    async def _serve(self, server: uvicorn.Server) -> None:
        with _served_collections():
            await self._serve_cluster(server)

    async def _serve_cluster(self, server: uvicorn.Server) -> None:
        loop = self._loop = asyncio.get_running_loop()
        # one event loop for every timer and pod stage: the virtual clock's, or the simulator's run in wall time
        timers = self.clock if isinstance(self.clock, VirtualClock) else WallEvents(self.clock, loop)
        if self._with_kubelet:
            couple = self.workload is not None  # a replay's coupled jobs compute together, as in the simulator
            self.kubelet = SimulatedKubelet(self.store, loop, self.lifecycle, timers, couple=couple)
        if "podgroup" in self.controllers:
            self.podgroup_controller = PodGroupController(self.store, loop)
        if "disruption" in self.controllers and self.store.registry.find("policy", "v1", "poddisruptionbudgets"):
            self.disruption_controller = DisruptionController(self.store, loop, timers)
        if "resourcequota" in self.controllers:
            self.quota_controller = QuotaController(self.store, loop)
        if "persistentvolume-binder" in self.controllers:
            self.volume_binder = VolumeBinder(self.store, loop)
        if "resourceclaim" in self.controllers:
            self.claim_controller = ClaimController(self.store, loop)
        if self._scheduler_cores:
            paced = isinstance(self.clock, VirtualClock)
            self.schedulers = InProcessSchedulers(self.store, loop, self._scheduler_cores, timers, paced=paced)
            self.app.queue.serve(self.schedulers.schedulers)
            if self.kubelet is not None:
                self.kubelet.known_pod = self.schedulers.known_pod
        self.started_at = time.perf_counter()
        if self.workload is not None:
            done = self._replay_done if self.until_done else None
            assert self.kubelet is not None  # a replay runs its pods in the kubelet's cluster (see __init__)
            self.replay = WorkloadReplay(
                self.store, loop, timers, self.workload, self.kubelet, primary=self.primary, on_done=done
            )
            if self.schedulers is not None:
                self.schedulers.rejected.append(self.replay.rejected)
        if "job" in self.controllers:
            skip = self.replay.owns_job if self.replay is not None else (lambda uid: False)
            self.job_controller = JobController(self.store, loop, timers, skip)
        pacing: asyncio.Future[None] | None = None
        if isinstance(self.clock, VirtualClock):
            pacing = asyncio.ensure_future(self._pacer(self.clock).run())
        try:
            await server.serve(sockets=[self.bind()])
        finally:
            if self.pacer is not None and pacing is not None:
                self.pacer.stop()
                await pacing
                if self.pacer.unanswered is not None:
                    self.pacer.unanswered.stop()
            for component in self._components():
                component.stop()
            if isinstance(timers, WallEvents):
                timers.stop()

    def _components(self) -> list[_Component]:
        """The components running beside the store, in the order they stop."""
        components = (
            self.kubelet,
            self.schedulers,
            self.podgroup_controller,
            self.disruption_controller,
            self.quota_controller,
            self.volume_binder,
            self.claim_controller,
            self.job_controller,
            self.replay,
        )
        return [component for component in components if component is not None]

    def _pacer(self, clock: VirtualClock) -> Pacer:
        internal = [core.name for core in self._scheduler_cores]
        unanswered = UnansweredPods(self.store, internal, self.external_schedulers)
        pacer = self.pacer = Pacer(clock, self.activity, settle=self.settle, unanswered=unanswered)
        controllers = (
            self.podgroup_controller,
            self.disruption_controller,
            self.job_controller,
            self.quota_controller,
            self.volume_binder,
            self.claim_controller,
        )
        reconcilers = [controller.reconciler for controller in controllers if controller is not None]
        for component in (self.kubelet, *reconcilers, self.schedulers, self.replay):
            if component is not None:
                pacer.busy.append(functools.partial(getattr, component, "busy"))
        pacer.busy.append(self.app.unsent)
        if self.schedulers is not None:
            schedulers = self.schedulers
            clock.jumped.append(schedulers.time_point)
            pacer.cycles.append(schedulers.run_cycle)
            pacer.bound = lambda: schedulers.bound
        if self.replay is not None:
            pacer.idle.append(self.replay.idle)
            pacer.stalled.append(self.replay.stalled)
        return pacer

    def _replay_done(self) -> None:
        """The replayed workload is done (``until_done``): stop serving, as Ctrl-C would."""
        self.app.shutdown()
        if self._server is not None:
            self._server.should_exit = True

    def serve_forever(self) -> None:
        """Serve in this thread until Ctrl-C or SIGTERM (uvicorn's signal handling)."""
        asyncio.run(self._serve(self._uvicorn()))

    def start(self) -> ApiServer:
        """Serve in a background thread; returns once the server accepts connections."""
        server = self._uvicorn()
        self.bind()
        self._thread = threading.Thread(target=lambda: asyncio.run(self._serve(server)), daemon=True, name="apiserver")
        self._thread.start()
        while not server.started:
            if not self._thread.is_alive():
                raise RuntimeError("the API server thread ended before it started serving")
            self._thread.join(0.01)
        return self

    def join(self, timeout: float | None = None) -> bool:
        """Wait for a server started with :meth:`start` to stop by itself (``until_done``); True once it has."""
        if self._thread is not None:
            self._thread.join(timeout)
            return not self._thread.is_alive()
        return True

    def stop(self) -> None:
        if self._loop is not None and self._thread is not None and self._thread.is_alive():
            self._loop.call_soon_threadsafe(self.app.shutdown)
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        if self._socket is not None:
            self._socket.close()
            self._socket = None

    def call(self, function: Callable[[], T]) -> T:
        """Run ``function`` on the server's event loop (the store's thread) and return its result."""
        if self._loop is None or self._thread is None:
            return function()

        async def run() -> T:
            return function()

        future: concurrent.futures.Future[T] = asyncio.run_coroutine_threadsafe(run(), self._loop)
        return future.result()

    def __enter__(self) -> ApiServer:
        return self.start()

    def __exit__(
        self, kind: type[BaseException] | None, value: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self.stop()
