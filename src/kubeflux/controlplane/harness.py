"""A real Kubernetes control plane on loopback: etcd and kube-apiserver, optionally kube-scheduler,
kube-controller-manager and KWOK, as kwokctl runs them, from the binaries ``make`` builds (:mod:`.binaries`).

    with ControlPlane(folder).start() as plane:
        plane.start_kwok()
        plane.add_kwok_nodes(4, cpu="16", memory="64Gi")
        plane.kubectl("get", "nodes")

Everything listens on 127.0.0.1 only, on free ports. Security is as a real cluster's: TLS with a CA of its own
(``folder/pki``), RBAC on (``--authorization-mode=Node,RBAC``), users authenticated by client certificates (an
admin in ``system:masters``; kube-scheduler and kube-controller-manager as their own system users, so the default
RBAC roles apply to them), service-account tokens signed by a key of its own (so ``serve`` can run with the
ServiceAccount of ``deploy/``). ``folder`` holds the kubeconfigs (``admin.kubeconfig`` is the one to give clients),
the etcd data and one log per component (``logs/NAME.log``, the first place to look when something fails).

Each component is a child process that dies with the thread that started it (``PR_SET_PDEATHSIG``), so a killed test
run leaves nothing behind; :meth:`ControlPlane.stop` ends them all (SIGTERM, then SIGKILL), newest first. A component
can be killed, stopped and started again (the API server restarted, or on an emptied etcd) to test what its clients
do then. Starts wait for readiness (``/readyz``, etcd's ``/health``) and fail with the end of the component's log.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import random
import shutil
import signal
import socket
import ssl
import subprocess
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from kubeflux.controlplane.binaries import Binaries, find_binaries

__all__ = ["ControlPlane", "ControlPlaneError", "free_port", "process_family"]

_READY_SECONDS = 90.0
"""How long a component may take to become ready on a loaded 2-core machine before its start is a failure."""
_STOP_SECONDS = 10.0
KWOK_NODE_ANNOTATION = "kwok.x-k8s.io/node"


class ControlPlaneError(RuntimeError):
    """A component did not start, or stopped on its own; the message ends with its log's last lines."""


_PORTS = range(20_000, 32_768)
"""Where servers' ports are drawn from: below Linux's ephemeral range (32768-60999), from which every outgoing
connection takes its source port, so a port free when drawn is not taken by some client's connection before the
server binds it. Another server drawing the same port is still possible: a start that finds its port taken tries
again on another (:meth:`ControlPlane.on_free_port`)."""


def process_family(pid: int) -> list[int]:
    """Process ``pid`` and its living descendants (``/proc``: serve's binder process, multiprocessing's helper), for
    a test or a benchmark to count their CPU or wait for them to end."""
    found, todo = [], [pid]
    while todo:
        current = todo.pop()
        found.append(current)
        with contextlib.suppress(FileNotFoundError, ProcessLookupError):  # (one that has just ended)
            for task in Path(f"/proc/{current}/task").iterdir():
                todo += [int(child) for child in (task / "children").read_text().split()]
    return found


def free_port() -> int:
    """A port free on 127.0.0.1 now, drawn at random from :data:`_PORTS` (the kernel's choice if none is found)."""
    for _ in range(100):
        port = random.choice(_PORTS)
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _die_with_parent() -> None:  # runs in the child between fork and exec
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


@dataclass
class Component:
    """One running binary of the control plane; ``cpus``: the CPUs it may run on (None: any), set in the child
    before the binary starts, so that every thread it makes has them (and a Go runtime sizes itself to them)."""

    name: str
    argv: list[str]
    log: Path
    process: subprocess.Popen[bytes] | None = None
    cpus: frozenset[int] | None = None

    def start(self) -> None:
        self.log.parent.mkdir(parents=True, exist_ok=True)
        cpus = self.cpus

        def prepare() -> None:  # runs in the child between fork and exec
            _die_with_parent()
            if cpus is not None:
                os.sched_setaffinity(0, cpus)

        with self.log.open("ab") as out:
            self.process = subprocess.Popen(
                self.argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, preexec_fn=prepare
            )

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def stop(self, sig: signal.Signals = signal.SIGTERM) -> None:
        """End the process (``sig`` first, SIGKILL after :data:`_STOP_SECONDS`) and reap it."""
        process, self.process = self.process, None
        if process is None or process.poll() is not None:
            return
        process.send_signal(sig)
        try:
            process.wait(_STOP_SECONDS)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()

    def tail(self, lines: int = 30) -> str:
        try:
            text = self.log.read_text(errors="replace")
        except OSError:
            return "(no log)"
        return "\n".join(text.splitlines()[-lines:])

    def failure(self, why: str) -> ControlPlaneError:
        return ControlPlaneError(f"{self.name}: {why}; the end of {self.log}:\n{self.tail()}")


@dataclass
class ControlPlane:
    """See the module docstring. ``feature_gates`` go to every Kubernetes component, ``runtime_config`` to the API
    server (e.g. ``{"scheduling.k8s.io/v1alpha2": "true"}``), ``apiserver_args`` after the harness's own flags;
    ``cpus``: component name → the CPUs it runs on (e.g. a benchmark keeping kube-scheduler off the API server's)."""

    folder: Path
    binaries: Binaries | None = None
    feature_gates: Mapping[str, bool] = field(default_factory=dict)
    runtime_config: Mapping[str, str] = field(default_factory=dict)
    apiserver_args: Sequence[str] = ()
    cpus: Mapping[str, frozenset[int]] = field(default_factory=dict)
    components: dict[str, Component] = field(default_factory=dict)
    ports: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.folder = self.folder.resolve()
        if self.binaries is None:
            found = find_binaries()
            if isinstance(found, str):
                raise ControlPlaneError(found)
            self.binaries = found
        self.pki = self.folder / "pki"
        self._lock = threading.Lock()

    # ------------------------------------------------------------------ what clients need

    @property
    def server(self) -> str:
        """The API server's URL."""
        return f"https://127.0.0.1:{self.ports['kube-apiserver']}"

    @property
    def kubeconfig(self) -> Path:
        """The admin's kubeconfig (``system:masters``)."""
        return self.folder / "admin.kubeconfig"

    @property
    def ca(self) -> Path:
        return self.pki / "ca.crt"

    def kubeconfig_for(self, user: str, *, token: str = "", groups: Sequence[str] = ()) -> Path:
        """A kubeconfig for ``user`` (a client certificate in ``groups``), or for a bearer ``token`` (a
        ServiceAccount's); written once per user."""
        path = self.folder / f"{user.replace(':', '-')}.kubeconfig"
        credential: dict[str, str]
        if token:
            credential = {"token": token}
        else:
            from kubeflux.sim.apiserver.tls import client_certificate  # (cryptography: imported when used)

            cert, key = client_certificate(self.pki, user.replace(":", "-"), user, groups)
            credential = {"client-certificate": str(cert), "client-key": str(key)}
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {"name": "kubeflux", "cluster": {"server": self.server, "certificate-authority": str(self.ca)}}
            ],
            "users": [{"name": user, "user": credential}],
            "contexts": [{"name": "kubeflux", "context": {"cluster": "kubeflux", "user": user}}],
            "current-context": "kubeflux",
        }
        path.write_text(yaml.safe_dump(config, sort_keys=False))
        return path

    def kubectl(self, *args: str, check: bool = True, input: str | None = None, timeout: float = 120.0) -> str:
        """Run the real kubectl as the admin; its output (stdout). ``check``: a non-zero exit raises with stderr."""
        assert self.binaries is not None
        argv = [str(self.binaries.path("kubectl")), "--kubeconfig", str(self.kubeconfig), *args]
        result = subprocess.run(argv, capture_output=True, text=True, input=input, timeout=timeout)
        if check and result.returncode != 0:
            raise ControlPlaneError(f"kubectl {' '.join(args)}: exit {result.returncode}: {result.stderr.strip()}")
        return result.stdout

    # ------------------------------------------------------------------ life cycle

    def start(self) -> ControlPlane:
        """etcd, then the API server once etcd is healthy; returns when ``/readyz`` answers ok."""
        from kubeflux.sim.apiserver.tls import client_certificate, make_certificates, signing_key

        self.folder.mkdir(parents=True, exist_ok=True)
        make_certificates(self.pki, "127.0.0.1")
        client_certificate(self.pki, "admin", "kubernetes-admin", ["system:masters"])
        client_certificate(self.pki, "front-proxy-client", "front-proxy-client")
        if not (self.pki / "service-account.key").is_file():
            signing_key(self.pki, "service-account")
        try:
            self.on_free_port(("etcd", "etcd-peer"), self.start_etcd)
            self.on_free_port(("kube-apiserver",), self.start_apiserver)
        except BaseException:
            self.stop()
            raise
        return self

    def __enter__(self) -> ControlPlane:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        """Stop every component, the newest first (clients before the API server, the API server before etcd)."""
        with self._lock:
            running = list(self.components.values())
        for component in reversed(running):
            component.stop()

    def kill(self, name: str) -> None:
        """Kill ``name`` at once (SIGKILL), as a crash would."""
        self.components[name].stop(signal.SIGKILL)

    def run_component(self, name: str, argv: list[str], ready: Callable[[], bool]) -> Component:
        component = Component(name, argv, self.folder / "logs" / f"{name}.log", cpus=self.cpus.get(name))
        with self._lock:
            old = self.components.get(name)
            if old is not None and old.running:
                raise ControlPlaneError(f"{name} runs already")
            self.components[name] = component
        component.start()
        self._run_until(name, ready)
        return component

    def on_free_port(self, keys: tuple[str, ...], start: Callable[[], None], tries: int = 3) -> None:
        """``start()``, which takes its ports from :attr:`ports` (``keys``), drawing them when missing; when a port
        was taken meanwhile (another server drew it too), again on new ones."""
        for attempt in range(tries):
            try:
                start()
                return
            except ControlPlaneError as exc:
                if "address already in use" not in str(exc) or attempt == tries - 1:
                    raise
                for key in keys:
                    self.ports.pop(key, None)

    def _run_until(self, name: str, ready: Callable[[], bool]) -> None:
        """Wait until ``ready()``; fails when component ``name`` exits first or :data:`_READY_SECONDS` pass (then
        it is stopped)."""
        component = self.components[name]
        deadline = time.monotonic() + _READY_SECONDS
        while not ready():
            if not component.running:
                raise component.failure("exited before it was ready")
            if time.monotonic() > deadline:
                component.stop()
                raise component.failure(f"not ready after {_READY_SECONDS:.0f} s")
            time.sleep(0.1)

    def start_etcd(self, *, empty: bool = False) -> None:
        """etcd on loopback (no fsync: a test's data need not survive a power cut). ``empty``: its data wiped first,
        as an API server restored onto a new etcd sees it."""
        assert self.binaries is not None
        data = self.folder / "etcd"
        if empty:
            shutil.rmtree(data, ignore_errors=True)
        client, peer = self.ports.setdefault("etcd", free_port()), self.ports.setdefault("etcd-peer", free_port())
        argv = [
            str(self.binaries.path("etcd")),
            "--name=kubeflux",
            f"--data-dir={data}",
            f"--listen-client-urls=http://127.0.0.1:{client}",
            f"--advertise-client-urls=http://127.0.0.1:{client}",
            f"--listen-peer-urls=http://127.0.0.1:{peer}",
            f"--initial-advertise-peer-urls=http://127.0.0.1:{peer}",
            f"--initial-cluster=kubeflux=http://127.0.0.1:{peer}",
            "--unsafe-no-fsync",
            "--log-level=warn",
        ]
        self.run_component("etcd", argv, lambda: self.fetch(f"http://127.0.0.1:{client}/health") is not None)

    def _gates(self) -> list[str]:
        if not self.feature_gates:
            return []
        return ["--feature-gates=" + ",".join(f"{k}={str(v).lower()}" for k, v in sorted(self.feature_gates.items()))]

    def start_apiserver(self) -> None:
        """The API server on :attr:`ports`' ``kube-apiserver`` (drawn when missing), etcd running; the admin's
        kubeconfig written for it."""
        assert self.binaries is not None
        pki, port = self.pki, self.ports.setdefault("kube-apiserver", free_port())
        self.kubeconfig_for("kubernetes-admin", groups=["system:masters"]).rename(self.kubeconfig)
        argv = [
            str(self.binaries.path("kube-apiserver")),
            f"--etcd-servers=http://127.0.0.1:{self.ports['etcd']}",
            "--bind-address=127.0.0.1",
            "--advertise-address=127.0.0.1",
            f"--secure-port={port}",
            f"--tls-cert-file={pki / 'server.crt'}",
            f"--tls-private-key-file={pki / 'server.key'}",
            f"--client-ca-file={pki / 'ca.crt'}",
            f"--requestheader-client-ca-file={pki / 'ca.crt'}",  # the aggregation layer's front proxy, as kubeadm's
            "--requestheader-allowed-names=front-proxy-client",
            "--requestheader-username-headers=X-Remote-User",
            "--requestheader-group-headers=X-Remote-Group",
            "--requestheader-extra-headers-prefix=X-Remote-Extra-",
            f"--proxy-client-cert-file={pki / 'front-proxy-client.crt'}",
            f"--proxy-client-key-file={pki / 'front-proxy-client.key'}",
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
            f"--service-account-key-file={pki / 'service-account.pub'}",
            f"--service-account-signing-key-file={pki / 'service-account.key'}",
            "--service-cluster-ip-range=10.96.0.0/16",
            "--authorization-mode=Node,RBAC",
            "--allow-privileged=true",
            "--endpoint-reconciler-type=none",  # no Endpoints for a loopback address (validation refuses them)
            *self._gates(),
        ]
        if self.runtime_config:
            argv.append("--runtime-config=" + ",".join(f"{k}={v}" for k, v in sorted(self.runtime_config.items())))
        argv.extend(self.apiserver_args)
        self.run_component("kube-apiserver", argv, lambda: self.fetch(f"{self.server}/readyz") == b"ok")

    def restart_apiserver(self, *, empty_etcd: bool = False) -> None:
        """Stop the API server (and with ``empty_etcd`` etcd too, whose data is wiped) and start it again on the same
        port, as after a crash or a restore onto an empty etcd."""
        self.components["kube-apiserver"].stop()
        if empty_etcd:
            self.components["etcd"].stop()
            self.start_etcd(empty=True)
        self.start_apiserver()

    def _client_flags(self, user: str) -> list[str]:
        kubeconfig = str(self.kubeconfig_for(user))
        return [
            f"--kubeconfig={kubeconfig}",
            f"--authentication-kubeconfig={kubeconfig}",
            f"--authorization-kubeconfig={kubeconfig}",
            "--bind-address=127.0.0.1",
        ]

    def start_scheduler(self, *args: str) -> None:
        """The real kube-scheduler, as ``system:kube-scheduler``, at its default flags (``args`` added)."""
        self.on_free_port(("kube-scheduler",), lambda: self._start_component("kube-scheduler", args))

    def start_controller_manager(self, *args: str) -> None:
        """The real kube-controller-manager, as ``system:kube-controller-manager``, with every default controller
        (the Job controller and the garbage collector among them; ``args`` added)."""
        self.on_free_port(("kube-controller-manager",), lambda: self._start_controller_manager(args))

    def _start_component(self, name: str, args: tuple[str, ...], flags: tuple[str, ...] = ()) -> None:
        """Start ``name`` (kube-scheduler, kube-controller-manager) as ``system:NAME`` on its secure port, without
        leader election, with ``flags`` and ``args``; returns when its ``/healthz`` says ok."""
        assert self.binaries is not None
        port = self.ports.setdefault(name, free_port())
        argv = [
            str(self.binaries.path(name)),
            *self._client_flags(f"system:{name}"),
            f"--secure-port={port}",
            "--leader-elect=false",
            *flags,
            *self._gates(),
            *args,
        ]
        self.run_component(name, argv, lambda: self.fetch(f"https://127.0.0.1:{port}/healthz") == b"ok")

    def _start_controller_manager(self, args: tuple[str, ...]) -> None:
        flags = (
            f"--service-account-private-key-file={self.pki / 'service-account.key'}",
            f"--root-ca-file={self.ca}",
            "--use-service-account-credentials=true",  # each controller as its own ServiceAccount, as kubeadm runs it
        )
        self._start_component("kube-controller-manager", args, flags)
        # pods need their namespace's default ServiceAccount, which its controller makes a moment later (as kind
        # waits for it before it says the cluster is ready)
        account = f"{self.server}/api/v1/namespaces/default/serviceaccounts/default"
        self._run_until("kube-controller-manager", lambda: self.fetch(account) is not None)

    def start_kwok(self, *args: str) -> None:
        """KWOK's controller with kwokctl's default stages, managing the nodes annotated ``kwok.x-k8s.io/node:
        fake`` (:meth:`add_kwok_nodes`): they become Ready and keep a Lease; their pods run, complete when their
        containers would, and go when deleted."""
        self.on_free_port(("kwok",), lambda: self._start_kwok(args))

    def _start_kwok(self, args: tuple[str, ...]) -> None:
        assert self.binaries is not None
        config = self.folder / "kwok.yaml"
        config.write_text("\n---\n".join(stage.read_text() for stage in self.binaries.stages))
        port = self.ports.setdefault("kwok", free_port())
        argv = [
            str(self.binaries.path("kwok")),
            f"--kubeconfig={self.kubeconfig}",
            f"--config={config}",
            "--manage-all-nodes=false",
            f"--manage-nodes-with-annotation-selector={KWOK_NODE_ANNOTATION}=fake",
            "--node-lease-duration-seconds=40",
            f"--server-address=127.0.0.1:{port}",
            *args,
        ]
        self.run_component("kwok", argv, lambda: self.fetch(f"http://127.0.0.1:{port}/healthz") is not None)

    # ------------------------------------------------------------------ objects

    def install_crds(self) -> None:
        """The CustomResourceDefinitions kubeflux reads that Kubernetes does not define (coscheduling's PodGroup),
        established."""
        assert self.binaries is not None
        for crd in self.binaries.crds:
            self.kubectl("apply", "--server-side", "-f", str(crd))
        self.kubectl("wait", "--for=condition=established", "--timeout=60s", "crd", "--all")

    def add_kwok_nodes(
        self,
        count: int,
        *,
        cpu: str = "16",
        memory: str = "64Gi",
        prefix: str = "kwok-node-",
        labels: Mapping[str, str] | None = None,
        extra: Mapping[str, str] | None = None,
    ) -> list[str]:
        """Make ``count`` nodes KWOK runs (``cpu``, ``memory`` and 110 pods each, plus ``extra`` resources such as
        ``nvidia.com/gpu``), or make them so again; their names."""
        names = [f"{prefix}{i}" for i in range(count)]
        capacity = {"cpu": cpu, "memory": memory, "pods": "110", **(extra or {})}
        docs = [
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {
                    "name": name,
                    "annotations": {KWOK_NODE_ANNOTATION: "fake", "node.alpha.kubernetes.io/ttl": "0"},
                    "labels": {"kubernetes.io/hostname": name, "type": "kwok", **(labels or {})},
                },
                "status": {"allocatable": capacity, "capacity": capacity},
            }
            for name in names
        ]
        # applied, not created: a cluster started again on its folder (its etcd kept) has them already
        listed = json.dumps({"apiVersion": "v1", "kind": "List", "items": docs})
        self.kubectl(
            "apply", "--server-side", "--force-conflicts", "--field-manager=kubeflux-kube-up", "-f", "-", input=listed
        )
        return names

    # ------------------------------------------------------------------ plumbing

    def fetch(self, url: str) -> bytes | None:
        """``url``'s body, or None when it does not answer 200 (yet). HTTPS is verified against the CA and
        authenticated as the admin."""
        context: ssl.SSLContext | None = None
        if url.startswith("https:"):
            context = ssl.create_default_context(cafile=str(self.ca))
            context.load_cert_chain(self.pki / "admin.crt", self.pki / "admin.key")
            if not url.startswith(self.server):  # a component's own serving certificate, self-signed
                context.check_hostname = False
                context.verify_mode = ssl.CERT_NONE
        try:
            with urllib.request.urlopen(url, timeout=5.0, context=context) as response:
                body: bytes = response.read()
                return body
        except (urllib.error.URLError, OSError, ValueError):
            return None
