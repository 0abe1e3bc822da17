"""``benchmarks/serve.py --real``: kube-scheduler, ``kubeflux serve`` and a raw binding client on the real API server.

Each row gets a fresh control plane (:class:`kubeflux.controlplane.ControlPlane`: etcd and kube-apiserver only, no
controller-manager, no KWOK), so rows never disturb each other. Before the row's scheduler starts, this script
creates the nodes (Ready, with allocatable set, through the API) and then every pod, all pending, with a few
keep-alive HTTPS connections. Then the row's binder starts and a watch (in this process) records when each pod is
first seen bound:

* ``kube-scheduler``: the real one, with a KubeSchedulerConfiguration raising its client's QPS and burst (5000 /
  10000, as scheduler_perf does); otherwise its defaults;
* ``kubeflux serve``: its own process (``python -m kubeflux.cli serve``), its default config (only the operations
  port is free-chosen, so that another serve on the machine cannot collide);
* ``kubeflux serve (baseline)`` (``--baseline DIR``): the same, run from another checkout's ``src`` (with this
  Python and its packages, and that checkout's compiled engine when built), e.g. main's, so that a change and what
  it changes are measured in one run, alternated;
* ``raw binding``: the limit, ``--raw-processes`` processes each POSTing ``pods/binding`` on one keep-alive HTTPS
  connection, ``--raw-pipeline`` requests back to back before their answers are read (HTTP/1.1 pipelining, through
  the framing serve's own writes use, :class:`kubeflux.kube.keepalive.Connections`; pre-serialised bodies), pod ``i``
  to node ``i mod nodes``: no scheduling, no events. It writes as serve's binder does, with nothing else to do.

Definitions, the same for the three rows: *start* is the moment the binder's process is launched (pods already
created); pods/s is pods over the time from start to the last bind seen; a pod's latency is from start to its bind
seen (so p50 is about half the run); *first bind* is the first bind seen after start, and *pods/s after it* the
rate from there to the last bind (the binder's pace once started, its start left out). CPU seconds are read from
``/proc/PID/stat`` at the last bind: the binder's since its launch (serve's with its binder process's), the API
server's and etcd's since start; serve's again when its Events are all written (they wait for the end of the burst:
the CPU a pod costs serve is that figure over the pods).
*The row's CPU a pod*: its CPU at its last bind (the binder's, and the control plane's: the API server's, etcd's
and this script's watch) over the pods. Other processes of the machine are not in it, nor what a row does after its
last bind (serve's ``Scheduled`` events; kube-scheduler writes its own while it binds, inside the figure).
``--pin``: the control plane (etcd, kube-apiserver) and this script on one CPU, the row's binder (kube-scheduler,
serve with its binder process, the raw workers) on another, each process pinned from its start (a Go runtime then
sizes itself to its one CPU); every thread of them is checked at the last bind. One CPU each, not machines apart:
other load shares them, and on a VM two CPUs may be one core's two threads.
*Events done*: when the namespace holds one Event per pod (the ``Scheduled`` events; polled after the last bind).
Every client is the cluster's admin (``system:masters``: exempt from API Priority and Fairness), the same for all.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import shutil
import ssl
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

if TYPE_CHECKING:  # the raw binding workers run this file: they import nothing they do not use
    from kubeflux.controlplane import ControlPlane

NAMESPACE = "default"
CREATORS = 4
NODE_CPU = 64
SCHEDULER_QPS, SCHEDULER_BURST = 5000, 10000
RAW_PROCESSES = 8
RAW_PIPELINE = 32
"""The raw client's defaults: 8 processes, 32 requests back to back (kubeflux's ``keepalive.PIPELINE``): the fastest of
the shapes measured on the 2-core machine, 10,000 Bindings (2026-12-02, docs/performance.md)."""
STALL_SECONDS = 60.0
"""A row whose binds stop for this long has failed."""
ROWS = ("kube-scheduler", "kubeflux serve", "raw binding")
BASELINE = "kubeflux serve (baseline)"
"""The row of ``--baseline DIR``: serve run from another checkout (e.g. main's), to compare two versions in one run."""
_SCHEDULER_NAMES = {"kube-scheduler": "default-scheduler", "raw binding": "nobody"}


@dataclass(frozen=True)
class Row:
    name: str
    pods: int
    seconds: float
    first_bind: float
    p50: float
    p99: float
    cpu: dict[str, float]
    events_done: float | None
    nodes_used: int
    load: float

    @property
    def rate(self) -> float:
        return self.pods / self.seconds

    @property
    def binding_rate(self) -> float:
        """Pods per second from the first bind seen to the last: the rate once the binder has started."""
        return (self.pods - 1) / max(self.seconds - self.first_bind, 1e-9)


@dataclass(frozen=True)
class Pinning:
    """``--pin``: the CPUs of the control plane (and this script) and those of the row's binder, apart."""

    control: frozenset[int]
    binder: frozenset[int]

    @staticmethod
    def split() -> Pinning:
        """The first CPU this process may use for the control plane, the second for the binder."""
        cpus = sorted(os.sched_getaffinity(0))
        if len(cpus) < 2:
            raise ValueError(f"--pin needs two CPUs, this process may use {len(cpus)}")
        return Pinning(frozenset(cpus[:1]), frozenset(cpus[1:2]))

    def __str__(self) -> str:
        return f"pinned: control plane on CPU {_cpus(self.control)}, binder on CPU {_cpus(self.binder)}"


def _cpus(cpus: frozenset[int]) -> str:
    return ",".join(map(str, sorted(cpus)))


def strays(pid: int, cpus: AbstractSet[int], *, descendants: bool = True) -> list[str]:
    """The threads of process ``pid`` (and of its descendants) that may run elsewhere than on ``cpus``."""
    from kubeflux.controlplane import process_family

    out = []
    for member in process_family(pid) if descendants else [pid]:
        with contextlib.suppress(FileNotFoundError, ProcessLookupError):
            for task in Path(f"/proc/{member}/task").iterdir():
                allowed = os.sched_getaffinity(int(task.name))
                if allowed != cpus:
                    out.append(f"thread {task.name} of process {member} on CPUs {sorted(allowed)}")
    return out


def pin(pid: int, cpus: AbstractSet[int]) -> None:
    """Every thread of process ``pid`` onto ``cpus`` (a thread made later takes its maker's)."""
    with contextlib.suppress(FileNotFoundError, ProcessLookupError):  # (a thread, or the process, just ended)
        for task in Path(f"/proc/{pid}/task").iterdir():
            os.sched_setaffinity(int(task.name), cpus)


@contextlib.contextmanager
def launched_on(cpus: AbstractSet[int] | None) -> Iterator[None]:
    """The processes started inside run on ``cpus`` (a child takes the mask of the thread that starts it); None:
    as this thread. Only for launches that return at once: whatever else this thread does inside runs there too."""
    if cpus is None:
        yield
        return
    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, cpus)
    try:
        yield
    finally:
        os.sched_setaffinity(0, before)


@dataclass(frozen=True)
class RawClient:
    """The raw binding client's shape: ``processes``, each with one connection sending ``pipeline`` requests back to
    back before reading their answers (1: one request at a time)."""

    processes: int = RAW_PROCESSES
    pipeline: int = RAW_PIPELINE

    def __str__(self) -> str:
        return f"{self.processes} processes x 1 keep-alive connection, {self.pipeline} requests pipelined"


# ---------------------------------------------------------------------- HTTP


def tls(ca: str, cert: str, key: str) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=ca)
    context.load_cert_chain(cert, key)
    return context


class Connection:
    """One keep-alive HTTPS connection to the API server."""

    def __init__(self, port: int, context: ssl.SSLContext) -> None:
        self.http = http.client.HTTPSConnection("127.0.0.1", port, context=context, timeout=600)

    def send(self, method: str, path: str, body: bytes | None = None) -> tuple[int, bytes]:
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        self.http.request(method, path, body=body, headers=headers)
        response = self.http.getresponse()
        return response.status, response.read()

    def must(self, method: str, path: str, body: bytes | None = None) -> dict[str, Any]:
        status, data = self.send(method, path, body)
        if status >= 300:
            raise RuntimeError(f"{method} {path}: {status} {data[:300]!r}")
        answer: dict[str, Any] = orjson.loads(data)
        return answer


def _context(plane: ControlPlane) -> ssl.SSLContext:
    return tls(str(plane.ca), str(plane.pki / "admin.crt"), str(plane.pki / "admin.key"))


# ---------------------------------------------------------------------- objects


def node(name: str) -> bytes:
    capacity = {"cpu": str(NODE_CPU), "memory": f"{NODE_CPU * 4}Gi", "pods": "110"}
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    ready = {
        "type": "Ready",
        "status": "True",
        "reason": "KubeletReady",
        "message": "kubelet is posting ready status",
        "lastHeartbeatTime": stamp,
        "lastTransitionTime": stamp,
    }
    return orjson.dumps(
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
            "status": {"capacity": capacity, "allocatable": capacity, "conditions": [ready]},
        }
    )


def pod(name: str, scheduler: str) -> bytes:
    return orjson.dumps(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "labels": {"app": "bench"}},
            "spec": {
                "schedulerName": scheduler,
                "automountServiceAccountToken": False,
                "containers": [
                    {"name": "main", "image": "busybox:1.36", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}
                ],
            },
        }
    )


def _parallel(work: list[bytes], post: Callable[[Connection, bytes], None], port: int, context: ssl.SSLContext) -> None:
    errors: list[BaseException] = []

    def run(part: list[bytes]) -> None:
        connection = Connection(port, context)
        try:
            for body in part:
                post(connection, body)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(work[i::CREATORS],)) for i in range(CREATORS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]


def populate(plane: ControlPlane, nodes: int, pods: int, scheduler: str) -> str:
    """The nodes, the namespace's default ServiceAccount (no controller-manager makes it), then the pods, pending;
    the pods' list resourceVersion (where the watch starts)."""
    port, context = plane.ports["kube-apiserver"], _context(plane)
    setup = Connection(port, context)
    deadline = time.monotonic() + 60
    account = orjson.dumps({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default"}})
    while True:  # the namespace appears a moment after /readyz
        status, data = setup.send("POST", f"/api/v1/namespaces/{NAMESPACE}/serviceaccounts", account)
        if status in (201, 409):
            break
        if time.monotonic() > deadline:
            raise RuntimeError(f"no ServiceAccount: {status} {data[:200]!r}")
        time.sleep(0.2)
    names = [f"node-{i}" for i in range(nodes)]
    _parallel([node(name) for name in names], lambda c, b: _created(c, "/api/v1/nodes", b), port, context)
    # the API server's TaintNodesByCondition admission taints a new node not-ready until the node lifecycle
    # controller (kube-controller-manager, not run here) sees it Ready and lifts the taint: lifted here instead
    untaint = orjson.dumps({"spec": {"taints": None}})
    _parallel([name.encode() for name in names], lambda c, n: _untainted(c, n.decode(), untaint), port, context)
    tainted = [n for n in setup.must("GET", "/api/v1/nodes")["items"] if n["spec"].get("taints")]
    if tainted:
        raise RuntimeError(f"{len(tainted)} nodes still tainted: {tainted[0]['spec']['taints']}")
    path = f"/api/v1/namespaces/{NAMESPACE}/pods"
    _parallel([pod(f"pod-{i}", scheduler) for i in range(pods)], lambda c, b: _created(c, path, b), port, context)
    listed = setup.must("GET", f"{path}?limit=1")
    version = str(listed["metadata"]["resourceVersion"])
    counted = 1 + int(listed["metadata"].get("remainingItemCount", 0))
    if counted != pods:
        raise RuntimeError(f"{counted} pods listed, {pods} created")
    return version


def _untainted(connection: Connection, name: str, patch: bytes) -> None:
    connection.http.request(
        "PATCH", f"/api/v1/nodes/{name}", body=patch, headers={"Content-Type": "application/merge-patch+json"}
    )
    response = connection.http.getresponse()
    data = response.read()
    if response.status != 200:
        raise RuntimeError(f"PATCH node {name}: {response.status} {data[:300]!r}")


def _created(connection: Connection, path: str, body: bytes) -> None:
    status, data = connection.send("POST", path, body)
    if status != 201:
        raise RuntimeError(f"POST {path}: {status} {data[:300]!r}")


# ---------------------------------------------------------------------- measuring


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` so far (``/proc/PID/stat``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def tree_cpu_seconds(pid: int) -> float:
    """CPU seconds of process ``pid`` and of its living descendants (serve's binder process) so far."""
    from kubeflux.controlplane import process_family

    return sum(cpu_seconds(member) for member in process_family(pid))


class BindWatch(threading.Thread):
    """Records when (``perf_counter``) and where each pod is first seen bound. A watch the server ends (it closes a
    watcher that falls behind) is opened again from the last version seen, as an informer does."""

    def __init__(self, port: int, context: ssl.SSLContext, version: str, expected: int) -> None:
        super().__init__(daemon=True, name="bind-watch")
        self.port, self.context = port, context
        self.version, self.expected = version, expected
        self.bound: dict[str, tuple[float, str]] = {}
        self.done = threading.Event()
        self.opened = threading.Event()
        self.error: BaseException | None = None
        self.watches = 0

    def run(self) -> None:
        try:
            while len(self.bound) < self.expected:
                self._watch()
        except BaseException as exc:
            self.error = exc
        finally:
            self.opened.set()
            self.done.set()

    def _watch(self) -> None:
        connection = Connection(self.port, self.context)
        path = f"/api/v1/namespaces/{NAMESPACE}/pods?watch=1&allowWatchBookmarks=true&resourceVersion={self.version}"
        connection.http.request("GET", path, headers={"Accept": "application/json"})
        response = connection.http.getresponse()
        if response.status != 200:
            raise RuntimeError(f"watch: {response.status} {response.read()[:200]!r}")
        self.watches += 1
        self.opened.set()
        try:
            while len(self.bound) < self.expected:
                line = response.readline()
                if not line:
                    return
                seen = time.perf_counter()
                event = orjson.loads(line)
                obj = event["object"]
                if event["type"] == "ERROR":
                    raise RuntimeError(f"watch: {obj}")
                self.version = obj["metadata"]["resourceVersion"]
                if event["type"] == "BOOKMARK":
                    continue
                where = (obj.get("spec") or {}).get("nodeName")
                name = obj["metadata"]["name"]
                if where and name not in self.bound:
                    self.bound[name] = (seen, where)
        finally:
            connection.http.close()


def events_done(plane: ControlPlane, pods: int, start: float, patience: float = 120.0) -> float | None:
    """Seconds from ``start`` until the namespace holds ``pods`` Events (None: not within ``patience`` s)."""
    connection = Connection(plane.ports["kube-apiserver"], _context(plane))
    deadline = time.perf_counter() + patience
    while time.perf_counter() < deadline:
        listed = connection.must("GET", f"/api/v1/namespaces/{NAMESPACE}/events?limit=1")
        items = listed.get("items") or []
        if items and len(items) + int(listed["metadata"].get("remainingItemCount", 0)) >= pods:
            return time.perf_counter() - start
        time.sleep(0.1)
    return None


# ---------------------------------------------------------------------- the binders


def scheduler_config(plane: ControlPlane) -> Path:
    import yaml

    config = {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "clientConnection": {"kubeconfig": str(plane.kubeconfig), "qps": SCHEDULER_QPS, "burst": SCHEDULER_BURST},
        "leaderElection": {"leaderElect": False},
    }
    path = plane.folder / "kube-scheduler.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


class Binder:
    """The row's binder process(es): started, read (CPU) and stopped."""

    def __init__(
        self,
        row: str,
        plane: ControlPlane,
        nodes: int,
        pods: int,
        raw: RawClient,
        baseline: Path | None = None,
        cpus: frozenset[int] | None = None,
    ) -> None:
        """``cpus``: where serve and the raw workers run (kube-scheduler's: the plane's ``cpus``)."""
        self.row, self.plane, self.nodes, self.pods, self.raw = row, plane, nodes, pods, raw
        self.baseline = baseline
        self.cpus = cpus
        self.processes: list[subprocess.Popen[bytes]] = []
        self.profiler: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        plane = self.plane
        if self.row == "kube-scheduler":
            plane.start_scheduler(f"--config={scheduler_config(plane)}")
            process = plane.components["kube-scheduler"].process
            assert process is not None
            self.processes = [process]
        elif self.row.startswith("kubeflux serve"):
            config = plane.folder / "serve.yaml"
            config.write_text("operations:\n  port: 0\n")
            log = (plane.folder / "logs" / "serve.log").open("ab")
            env, cwd = None, None
            if self.row == BASELINE and self.baseline is not None:  # this Python and packages: only kubeflux differs
                env, cwd = {**os.environ, "PYTHONPATH": str(self.baseline / "src")}, self.baseline
            command = [sys.executable, "-m", "kubeflux.cli", "serve", "--kubeconfig", str(plane.kubeconfig)]
            with launched_on(self.cpus):
                self.processes = [
                    subprocess.Popen([*command, "--config", str(config)], stdout=log, stderr=log, env=env, cwd=cwd)
                ]
            self._profile(self.processes[0].pid)
        else:
            command = [sys.executable, __file__, "--worker", str(plane.ports["kube-apiserver"]), str(plane.ca)]
            command += [str(plane.pki / "admin.crt"), str(plane.pki / "admin.key"), str(self.nodes), str(self.pods)]
            command += [str(self.raw.processes), str(self.raw.pipeline)]
            with launched_on(self.cpus):
                self.processes = [
                    subprocess.Popen([*command, str(i)], stdout=subprocess.PIPE) for i in range(self.raw.processes)
                ]

    def _profile(self, pid: int) -> None:
        if os.environ.get("KUBEFLUX_PROFILE"):  # py-spy on serve: where its time goes
            out = Path(tempfile.gettempdir()) / f"kubeflux-serve-profile-{pid}.txt"
            argv = [os.environ["KUBEFLUX_PROFILE"], "record", "-o", str(out), "-p", str(pid), "--format", "raw"]
            self.profiler = subprocess.Popen([*argv, "-r", "100", "--gil", "--nonblocking"])
            print(f"profile of serve: {out}", file=sys.stderr)

    def cpu(self) -> float:
        """The binder's CPU seconds so far (raw workers: as they report it when they are done)."""
        if self.row != "raw binding":
            return tree_cpu_seconds(self.processes[0].pid)
        total = 0.0
        for process in self.processes:
            out, _ = process.communicate(timeout=600)
            report = json.loads(out)
            if report["errors"]:
                raise RuntimeError(f"raw binding: {report['errors']} refused, the first: {report['first']}")
            total += report["cpu"]
        return total

    def stop(self) -> None:
        for process in self.processes:
            if process.poll() is None:
                process.terminate()
                try:
                    process.wait(30)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()
        if self.profiler is not None:
            self.profiler.wait(60)


def worker(argv: list[str]) -> None:
    """One raw binding process: binds pods ``index``, ``index + processes`` … on one keep-alive connection,
    ``pipeline`` requests back to back at a time; prints its CPU seconds and refusals as JSON."""
    import urllib3

    from kubeflux.kube.keepalive import Connections, Reply, Request

    port, ca, cert, key, nodes, pods, processes, pipeline, index = argv
    pool = urllib3.HTTPSConnectionPool("127.0.0.1", int(port), ssl_context=tls(ca, cert, key))
    connections = Connections(pool, f"127.0.0.1:{port}", "", urllib3.Timeout(600))
    headers = {"Content-Type": "application/json", "Accept": "application/json"}
    requests = [
        Request(
            "POST",
            f"/api/v1/namespaces/{NAMESPACE}/pods/pod-{i}/binding",
            headers,
            b'{"apiVersion":"v1","kind":"Binding","metadata":{"name":"pod-%d"},'
            b'"target":{"apiVersion":"v1","kind":"Node","name":"node-%d"}}' % (i, i % int(nodes)),
        )
        for i in range(int(index), int(pods), int(processes))
    ]
    errors, first = 0, ""
    step = int(pipeline)
    for start in range(0, len(requests), step):
        replies = connections.send_all(requests[start : start + step])
        if replies is None:
            raise RuntimeError("raw binding: the API server chose a protocol other than HTTP/1.1")
        for reply in replies:
            if isinstance(reply, Reply) and reply.status == 201:
                continue
            errors += 1
            if not first:
                first = f"{reply.status} {reply.data[:200]!r}" if isinstance(reply, Reply) else repr(reply)
    connections.close()
    times = os.times()
    print(json.dumps({"cpu": times.user + times.system, "errors": errors, "first": first}))


# ---------------------------------------------------------------------- one row


def run_row(
    row: str,
    nodes: int,
    pods: int,
    raw: RawClient,
    folder: Path,
    baseline: Path | None = None,
    pinning: Pinning | None = None,
) -> Row:
    from kubeflux.controlplane import ControlPlane

    script_cpus = os.sched_getaffinity(0)
    cpus: dict[str, frozenset[int]] = {}
    if pinning is not None:  # the plane's processes are pinned from their start (as is kube-scheduler, when started)
        cpus = {"etcd": pinning.control, "kube-apiserver": pinning.control, "kube-scheduler": pinning.binder}
        pin(os.getpid(), pinning.control)  # this script, its watch and its populating threads with the plane
    plane = ControlPlane(folder / row.replace(" ", "-").replace("(", "").replace(")", ""), cpus=cpus)
    binder = Binder(row, plane, nodes, pods, raw, baseline, pinning.binder if pinning is not None else None)
    try:
        plane.start()
        version = populate(plane, nodes, pods, _SCHEDULER_NAMES.get(row, "kubeflux"))
        watch = BindWatch(plane.ports["kube-apiserver"], _context(plane), version, pods)
        watch.start()
        watch.opened.wait(60)
        apiserver, etcd = (plane.components[name].process for name in ("kube-apiserver", "etcd"))
        assert apiserver is not None and etcd is not None
        load = os.getloadavg()[0]
        before = {"kube-apiserver": cpu_seconds(apiserver.pid), "etcd": cpu_seconds(etcd.pid)}
        script_cpu_before = time.process_time()
        start = time.perf_counter()
        binder.start()
        seen = -1
        while not watch.done.wait(STALL_SECONDS) and len(watch.bound) > seen:  # a stall of a minute is a failure
            seen = len(watch.bound)
        if not watch.done.is_set() or watch.error is not None:
            raise RuntimeError(f"{row}: {len(watch.bound)} of {pods} pods seen bound: {watch.error}; {plane.folder}")
        cpu = {  # (the binder's last: the raw workers' is read when they have exited)
            "kube-apiserver": cpu_seconds(apiserver.pid) - before["kube-apiserver"],
            "etcd": cpu_seconds(etcd.pid) - before["etcd"],
            "watch": time.process_time() - script_cpu_before,
        }
        if pinning is not None:  # every thread, as the kernel holds it at the last bind
            wrong = [*strays(apiserver.pid, pinning.control), *strays(etcd.pid, pinning.control)]
            wrong += strays(os.getpid(), pinning.control, descendants=False)  # (the plane and binders are its children)
            for process in binder.processes:
                wrong += strays(process.pid, pinning.binder)
            if wrong:
                raise RuntimeError(f"{row}: not pinned: {'; '.join(wrong[:5])} ({len(wrong)} threads)")
        cpu["binder"] = binder.cpu()
        times = sorted(seen - start for seen, _ in watch.bound.values())
        per_node = Counter(where for _, where in watch.bound.values())
        if max(per_node.values()) > NODE_CPU:
            raise RuntimeError(f"{row}: a node holds {max(per_node.values())} one-core pods of {NODE_CPU} cores")
        done = None if row == "raw binding" else events_done(plane, pods, start)
        if done is not None:  # the Events are written after the last bind: their CPU too
            cpu["binder, events done"] = binder.cpu()
        return Row(
            row,
            pods,
            times[-1],
            times[0],
            statistics.median(times),
            times[int(len(times) * 0.99) - 1],
            cpu,
            done,
            len(per_node),
            load,
        )
    finally:
        if pinning is not None:
            pin(os.getpid(), script_cpus)
        binder.stop()
        plane.stop()
        if sys.exc_info()[0] is None:
            shutil.rmtree(plane.folder, ignore_errors=True)
        else:
            print(f"{row}: the control plane's files are kept in {plane.folder}", file=sys.stderr)


def control_cpu(row: Row) -> float:
    """The control plane's CPU ms a pod in the row, at its last bind: the API server's, etcd's and the watch's."""
    cpu = row.cpu
    return 1000 * (cpu["kube-apiserver"] + cpu["etcd"] + cpu["watch"]) / row.pods


def row_cpu(row: Row) -> float:
    """The row's CPU ms a pod at its last bind: its binder's and the control plane's."""
    return 1000 * row.cpu["binder"] / row.pods + control_cpu(row)


def print_table(rows: list[Row], nodes: int, raw: RawClient, pinning: Pinning | None = None) -> None:
    print(
        "Real control plane (etcd + kube-apiserver), "
        f"{nodes:,} nodes x {NODE_CPU} cpu, pods pre-created; {os.cpu_count()} cores"
        f"{'; ' + str(pinning) if pinning is not None else ''}; raw binding: {raw}"
    )
    print(
        "| binder | load | pods | pods/s | first bind | pods/s after it | p50 / p99 (from start) | events done "
        "| CPU s: binder / apiserver / etcd | binder's CPU ms a pod (events done) "
        "| row's CPU ms a pod (the plane's part) | nodes used |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for row in rows:
        cpu = row.cpu
        events = "—" if row.events_done is None else f"{row.events_done:.1f} s"
        per_pod = f"{1000 * cpu['binder'] / row.pods:.2f}"
        if "binder, events done" in cpu:
            per_pod += f" ({1000 * cpu['binder, events done'] / row.pods:.2f})"
        print(
            f"| {row.name} | {row.load:.1f} | {row.pods:,} | {row.rate:,.0f} | {row.first_bind:.2f} s "
            f"| {row.binding_rate:,.0f} | {row.p50:.1f} / {row.p99:.1f} s | {events} "
            f"| {cpu['binder']:.1f} / {cpu['kube-apiserver']:.1f} / {cpu['etcd']:.1f} | {per_pod} "
            f"| {row_cpu(row):.2f} (plane {control_cpu(row):.2f}) | {row.nodes_used:,} |"
        )


def main(
    nodes: int,
    pods: int,
    repeat: int,
    rows: list[str],
    raw: RawClient,
    baseline: Path | None = None,
    pinning: Pinning | None = None,
) -> None:
    folder = Path(tempfile.mkdtemp(prefix="kubeflux-bench-real-"))
    results: list[Row] = []
    try:
        for turn in range(repeat):
            for row in rows:  # alternated: a b c a b c
                result = run_row(row, nodes, pods, raw, folder, baseline, pinning)
                results.append(result)
                print(
                    f"[{turn + 1}/{repeat}] {row}: {result.rate:,.0f} pods/s, load {result.load:.1f}, "
                    f"CPU watch {result.cpu['watch']:.1f} s",
                    file=sys.stderr,
                )
    except BaseException:
        print_table(results, nodes, raw, pinning)
        raise
    shutil.rmtree(folder, ignore_errors=True)
    print_table(results, nodes, raw, pinning)
    by_row: dict[str, list[float]] = {}
    binding: dict[str, list[float]] = {}
    events: dict[str, list[float | None]] = {}
    row_cpus: dict[str, list[float]] = {}
    for result in results:
        row_cpus.setdefault(result.name, []).append(row_cpu(result))
        by_row.setdefault(result.name, []).append(result.rate)
        binding.setdefault(result.name, []).append(result.binding_rate)
        events.setdefault(result.name, []).append(result.events_done)
    for name in (BASELINE, "kubeflux serve"):
        for turn, serve in enumerate(by_row.get(name, [])):
            ratios = []
            if "kube-scheduler" in by_row and turn < len(by_row["kube-scheduler"]):
                ratios.append(f"{serve / by_row['kube-scheduler'][turn]:.2f}x kube-scheduler")
                done, theirs = events[name][turn], events["kube-scheduler"][turn]
                if done is not None and theirs is not None:  # serve writes its Events after the burst
                    ratios.append(f"{theirs / done:.2f}x counted to the last Scheduled event written")
            if "raw binding" in by_row and turn < len(by_row["raw binding"]):
                ratios.append(f"{100 * serve / by_row['raw binding'][turn]:.0f} % of the raw limit")
                raw_rate = binding["raw binding"][turn]
                ratios.append(f"{100 * binding[name][turn] / raw_rate:.0f} % of its rate after the first bind")
                if pinning is None:  # (pinned, the busier CPU sets the pace, not the sum)
                    ratio = row_cpus[name][turn] / row_cpus["raw binding"][turn]
                    ratios.append(f"its row's CPU a pod {ratio:.2f}x the raw row's")
            if ratios:
                print(f"run {turn + 1}: {name} at {', '.join(ratios)}")
        summary = target_summary(by_row.get(name, []), by_row.get("kube-scheduler", []), by_row.get("raw binding", []))
        if summary:
            print(f"{name}: {summary}")


TARGETS = (2.0, 0.8)
"""Issue 28's figures: serve at least twice kube-scheduler's rate and at least 80 % of the raw binding limit."""


def target_summary(serve: list[float], scheduler: list[float], raw: list[float]) -> str:
    """Over the runs (each ratio taken within its run, the rows alternated): the median ratio to kube-scheduler and
    to the raw limit with their range, and in how many runs both targets (:data:`TARGETS`) were met; "" when
    there is nothing to compare. One run says little on a 2-core machine: every row is CPU-bound, and the raw
    limit itself moves by a third from run to run."""
    runs = min(len(serve), len(scheduler), len(raw))
    if runs == 0:
        return ""
    times = [serve[i] / scheduler[i] for i in range(runs)]
    shares = [serve[i] / raw[i] for i in range(runs)]
    both = sum(t >= TARGETS[0] and r >= TARGETS[1] for t, r in zip(times, shares, strict=True))
    return (
        f"over {runs} run(s), median {statistics.median(times):.2f}x kube-scheduler "
        f"({min(times):.2f}-{max(times):.2f}), "
        f"median {100 * statistics.median(shares):.0f} % of the raw limit ({100 * min(shares):.0f}-"
        f"{100 * max(shares):.0f} %); both targets ({TARGETS[0]:g}x, {100 * TARGETS[1]:.0f} %) met in {both} of {runs}"
    )


# ---------------------------------------------------------------------- serve's start alone


def _reset_bound(plane: ControlPlane, pods: int) -> str:
    """Every bound pod deleted (at once: no kubelet) and made again pending; the pods' list resourceVersion."""
    port, context = plane.ports["kube-apiserver"], _context(plane)
    setup = Connection(port, context)
    path = f"/api/v1/namespaces/{NAMESPACE}/pods"
    bound = setup.must("GET", f"{path}?fieldSelector=spec.nodeName%21%3D")["items"]
    names = [item["metadata"]["name"].encode() for item in bound]
    now = orjson.dumps({"gracePeriodSeconds": 0})
    _parallel(names, lambda c, n: _deleted(c, f"{path}/{n.decode()}", now), port, context)
    _parallel([pod(name.decode(), "kubeflux") for name in names], lambda c, b: _created(c, path, b), port, context)
    listed = setup.must("GET", f"{path}?limit=1")
    if 1 + int(listed["metadata"].get("remainingItemCount", 0)) != pods:
        raise RuntimeError("the pods were not made again")
    return str(listed["metadata"]["resourceVersion"])


def _deleted(connection: Connection, path: str, body: bytes) -> None:
    status, data = connection.send("DELETE", path, body)
    if status != 200:
        raise RuntimeError(f"DELETE {path}: {status} {data[:300]!r}")


def start_times(nodes: int, pods: int, runs: int, baseline: Path | None) -> None:
    """``--start-runs N``: serve's start alone — one control plane populated once, then serve launched N times (and
    the baseline's, alternated), each time killed at its first bind seen, its bound pods made again pending. Prints
    the time from launch to the first bind and serve's CPU seconds until then (with its binder process's)."""
    from kubeflux.controlplane import ControlPlane

    folder = Path(tempfile.mkdtemp(prefix="kubeflux-bench-start-"))
    plane = ControlPlane(folder / "plane").start()
    rows = ([BASELINE] if baseline is not None else []) + ["kubeflux serve"]
    seen: dict[str, list[tuple[float, float, float, float]]] = {row: [] for row in rows}
    try:
        version = populate(plane, nodes, pods, "kubeflux")
        for turn in range(runs):
            for row in rows:
                watch = BindWatch(plane.ports["kube-apiserver"], _context(plane), version, 1)
                watch.start()
                watch.opened.wait(60)
                binder = Binder(row, plane, nodes, pods, RawClient(), baseline)
                load = os.getloadavg()[0]
                start = time.perf_counter()
                binder.start()
                try:
                    if not watch.done.wait(STALL_SECONDS) or watch.error is not None:
                        raise RuntimeError(f"{row}: no bind within {STALL_SECONDS:.0f} s: {watch.error}")
                    first = min(when for when, _ in watch.bound.values()) - start
                    cpu, own = binder.cpu(), cpu_seconds(binder.processes[0].pid)
                finally:
                    for process in binder.processes:
                        process.kill()
                        process.wait()
                time.sleep(1.0)  # its binder process ends when the pipe closes
                seen[row].append((first, own, cpu - own, load))
                print(
                    f"[{turn + 1}/{runs}] {row}: first bind {first:.2f} s, CPU {own:.2f} + {cpu - own:.2f} s, "
                    f"load {load:.1f}",
                    file=sys.stderr,
                )
                version = _reset_bound(plane, pods)
    finally:
        plane.stop()
        shutil.rmtree(folder, ignore_errors=True)
    print(
        f"serve's start: {nodes:,} nodes x {NODE_CPU} cpu, {pods:,} pending pods, one control plane, "
        f"{runs} launches each"
    )
    print("| serve | load | first bind: median (min-max) | CPU s to it, median: serve / its binder process |")
    print("|---|---|---|---|")
    for row, values in seen.items():
        firsts = [first for first, _, _, _ in values]
        loads = [load for _, _, _, load in values]
        own = statistics.median(value[1] for value in values)
        child = statistics.median(value[2] for value in values)
        print(
            f"| {row} | {min(loads):.1f}-{max(loads):.1f} | {statistics.median(firsts):.2f} s "
            f"({min(firsts):.2f}-{max(firsts):.2f}) | {own:.2f} / {child:.2f} |"
        )


if __name__ == "__main__" and sys.argv[1:2] == ["--worker"]:
    worker(sys.argv[2:])
