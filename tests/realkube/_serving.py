"""What the tests of ``kubeflux serve`` on a real control plane share: KWOK nodes and pods, pod groups, namespaces
cleaned up afterwards, serve started in the test's process (:func:`serve`, :func:`start_serve`) or as a process of
its own (:class:`ServeProcess`), and a network partition between serve and the API server (:class:`Partition`)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

from kubeflux.controlplane import ControlPlane, process_family
from kubeflux.kube.command import api_client
from kubeflux.kube.config import parse_config
from kubeflux.kube.serve import Serve
from kubeflux.scheduler.objects import POD_GROUP_LABEL, WALLTIME_ANNOTATION
from tests.shared import REPO

from .conftest import CEILING, Api, client, eventually, schedulable

COMPLETE_AFTER = "pod-complete.stage.kwok.x-k8s.io/delay"
"""KWOK's annotation: the pod completes this long after it runs (``kubeflux.controlplane``'s stages)."""


def nodes(plane: ControlPlane, api: Api, count: int, cpu: int) -> dict[str, int]:
    """``count`` KWOK nodes of ``cpu`` cores, Ready; node name → millicores."""
    names = plane.add_kwok_nodes(count, cpu=str(cpu))
    eventually(lambda: all(schedulable(n) for n in api.nodes().values()) and len(api.nodes()) == count)
    return {name: cpu * 1000 for name in names}


def serve(plane: ControlPlane, **settings: Any) -> Serve:
    """``kubeflux serve`` with the admin's kubeconfig and wall time (``settings`` merged into its configuration)."""
    config = parse_config({"clock": "wall", "watch": {"timeoutSeconds": 30}, **settings})
    return Serve(config, api_client(plane.kubeconfig, None, False, 16)).start()


def pod(
    name: str,
    cpu: str,
    *,
    scheduler: str = "kubeflux",
    annotations: dict[str, str] | None = None,
    deadline: int | None = None,
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "schedulerName": scheduler,
        "restartPolicy": "Never",
        "containers": [{"name": "pi", "image": "perl:5.34", "resources": {"requests": {"cpu": cpu}}}],
    }
    if deadline is not None:
        spec["activeDeadlineSeconds"] = deadline
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "annotations": annotations or {}},
        "spec": spec,
    }


def podgroup(api: Api, api_version: str, name: str, spec: dict[str, Any]) -> None:
    group, version = api_version.split("/")
    body = {"apiVersion": api_version, "kind": "PodGroup", "metadata": {"name": name}, "spec": spec}
    client.CustomObjectsApi(api.client).create_namespaced_custom_object(
        group, version, "default", "podgroups", body, _preload_content=False
    )


def member(name: str, group: str, api_version: str, cpu: str, run: str | None = None) -> dict[str, Any]:
    made = pod(name, cpu, annotations={COMPLETE_AFTER: run} if run else None)
    if api_version.startswith("scheduling.x-k8s.io"):
        made["metadata"]["labels"] = {POD_GROUP_LABEL: group}
    else:
        made["spec"]["schedulingGroup"] = {"podGroupName": group}
    return made


def manifest(name: str, cpu: str, *, run: str | None = None, walltime: str | None = None) -> dict[str, Any]:
    """A pod of kubeflux's asking ``cpu``; KWOK runs it for ``run`` (``2s``) then completes it, or until deleted.
    ``walltime``: the estimate kubeflux plans with (``kubeflux.io/walltime``)."""
    annotations = {"pod-complete.stage.kwok.x-k8s.io/delay": run} if run else {}
    if walltime:
        annotations[WALLTIME_ANNOTATION] = walltime
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "annotations": annotations},
        "spec": {
            "schedulerName": "kubeflux",
            "restartPolicy": "Never",
            "containers": [{"name": "main", "image": "busybox", "resources": {"requests": {"cpu": cpu}}}],
        },
    }


def serve_config(namespace: str, **settings: Any) -> Any:
    """Wall time (a real cluster publishes none), quick retries, and only ``namespace``'s pods scheduled."""
    return parse_config(
        {
            "clock": "wall",
            "namespaces": [namespace],
            "watch": {"timeoutSeconds": 30, "retrySeconds": 0.2},
            "binding": {"unschedulableDelaySeconds": 0.2, "unschedulableIntervalSeconds": 1},
            "operations": {"enabled": False},
            **settings,
        }
    )


def start_serve(kubeconfig: Path, namespace: str, **settings: Any) -> Serve:
    return Serve(serve_config(namespace, **settings), api_client(kubeconfig, None, False, 16)).start()


def stop_serve(serve: Serve) -> None:
    serve.stop()
    serve.api.close()


def delete_pods(api: Api, namespace: str, *names: str) -> None:
    for name in names:
        with contextlib.suppress(client.ApiException):
            api.core.delete_namespaced_pod(name, namespace, grace_period_seconds=0, _preload_content=False)


@contextlib.contextmanager
def kwok_nodes(plane: ControlPlane, api: Api, prefix: str, count: int, cpu: str) -> Iterator[list[str]]:
    """``count`` Ready KWOK nodes of ``cpu`` named ``prefix-N``, deleted afterwards."""
    names = plane.add_kwok_nodes(count, cpu=cpu, prefix=f"{prefix}-")
    try:
        eventually(lambda: all(n in api.nodes() and schedulable(api.nodes()[n]) for n in names), lambda: "nodes Ready")
        yield names
    finally:
        plane.kubectl("delete", "node", "--ignore-not-found", "--wait=false", *names, check=False)


@contextlib.contextmanager
def namespace(api: Api, name: str, labels: dict[str, str] | None = None) -> Iterator[str]:
    """A namespace (labelled ``labels``; ready for pods: its ``default`` ServiceAccount made) whose pods are deleted
    at once afterwards (KWOK would take their grace period)."""
    api.namespace(name, labels)
    ready_for_pods(api, name)
    try:
        yield name
    finally:
        with contextlib.suppress(Exception):
            delete_pods(api, name, *api.pods(name))


def ready_for_pods(api: Api, namespace: str) -> None:
    """Until the controller-manager made ``namespace``'s ``default`` ServiceAccount (a pod is refused before)."""

    def made() -> bool:
        try:
            api.core.read_namespaced_service_account("default", namespace, _preload_content=False).release_conn()
        except client.ApiException:
            return False
        return True

    eventually(made, lambda: f"the default ServiceAccount of {namespace}")


def _operations_port(lines: list[str]) -> int:
    for line in lines:
        if "/metrics" in line and "http://127.0.0.1:" in line:
            return int(line.split("http://127.0.0.1:")[1].split()[0])
    raise AssertionError(f"no operations address in {lines}")


class ServeProcess:
    """``python -m kubeflux.cli serve`` as a child process; its output collected by a thread."""

    def __init__(self, kubeconfig: Path, config: Path) -> None:
        command = [sys.executable, "-m", "kubeflux.cli", "serve", "--kubeconfig", str(kubeconfig), "--config"]
        environment = {**os.environ, "PYTHONPATH": str(REPO / "src")}
        self.process = subprocess.Popen(
            [*command, str(config), "-v"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=environment
        )
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.append(line.rstrip("\n"))

    def said(self, text: str) -> bool:
        return any(text in line for line in self.lines)

    def metric(self, name: str) -> float:
        port = _operations_port(self.lines)
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
            text = response.read().decode()
        return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.startswith(name))

    def end(self, sig: signal.Signals) -> int:
        """Send ``sig``, wait for the process to end and then for its binder process too: killed (SIGKILL), serve
        leaves that process to write what the pipe still held (it stops at the pipe's end), so what is bound once
        this returns stays as it is."""
        children = process_family(self.process.pid)[1:]
        if self.process.poll() is None:
            self.process.send_signal(sig)
        try:
            return self.process.wait(CEILING)
        finally:
            if self.process.poll() is None:
                self.process.kill()
                self.process.wait()
            self._reader.join(10)
            eventually(lambda: not any(map(_alive, children)), lambda: f"serve's processes {children} still run")


def _alive(pid: int) -> bool:
    """Whether process ``pid`` runs (not ended, nor a zombie no one reaps: its parent was killed)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


def current_revision(plane: ControlPlane) -> int:
    request = urllib.request.Request(
        f"http://127.0.0.1:{plane.ports['etcd']}/v3/kv/range", data=json.dumps({"key": "AA=="}).encode(), method="POST"
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        return int(json.loads(response.read())["header"]["revision"])


def compact(plane: ControlPlane, revision: int) -> None:
    body = json.dumps({"revision": revision, "physical": True}).encode()
    request = urllib.request.Request(f"http://127.0.0.1:{plane.ports['etcd']}/v3/kv/compaction", data=body)
    with urllib.request.urlopen(request, timeout=30) as response:
        response.read()


class Partition:
    """A TCP relay in front of the API server: serve talks through it, and :meth:`cut` drops every connection and
    refuses new ones until :meth:`heal` (a network partition between serve and a healthy control plane)."""

    def __init__(self, target: int) -> None:
        self.target = target
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = int(self.listener.getsockname()[1])
        self.open = threading.Event()
        self.open.set()
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        while True:
            try:
                inbound, _ = self.listener.accept()
            except OSError:
                return
            if not self.open.is_set():
                inbound.close()
                continue
            try:
                outbound = socket.create_connection(("127.0.0.1", self.target), timeout=10)
            except OSError:
                inbound.close()
                continue
            outbound.settimeout(None)
            with self._lock:
                self._sockets += [inbound, outbound]
            for source, sink in ((inbound, outbound), (outbound, inbound)):
                threading.Thread(target=self._pump, args=(source, sink), daemon=True).start()

    @staticmethod
    def _pump(source: socket.socket, sink: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while data := source.recv(65536):
                sink.sendall(data)
        for end in (source, sink):
            with contextlib.suppress(OSError):
                end.shutdown(socket.SHUT_RDWR)

    def cut(self) -> None:
        self.open.clear()
        with self._lock:
            sockets, self._sockets = self._sockets, []
        for end in sockets:
            with contextlib.suppress(OSError):
                end.shutdown(socket.SHUT_RDWR)
            end.close()

    def heal(self) -> None:
        self.open.set()

    def close(self) -> None:
        self.cut()
        self.listener.close()

    def kubeconfig(self, plane: ControlPlane, path: Path) -> Path:
        config = yaml.safe_load(plane.kubeconfig.read_text())
        config["clusters"][0]["cluster"]["server"] = f"https://127.0.0.1:{self.port}"
        path.write_text(yaml.safe_dump(config))
        return path


def waiting(api: Api, name: str) -> str:
    """The pod's PodScheduled=False message, or "" while it has none."""
    found = api.pods("default").get(name) or {}
    for condition in (found.get("status") or {}).get("conditions") or []:
        if condition["type"] == "PodScheduled" and condition["status"] == "False":
            return str(condition.get("message") or "")
    return ""
