"""The simulated API server's throughput on loopback, against the targets of issue 13.

The server runs as ``kubeflux cluster serve --nodes 1000 --no-kubelet`` in its own process (its resident memory is
its own; without kubelets, binds measure the API server alone, as the real server's figures do);
clients are raw JSON over keep-alive HTTP/1.1 (``http.client``), as the anchors' figures for the real server are.
Figures:

* pod creates/s — one client; then 16 client threads, one connection each (target ≥ 2,000/s; a real
  kube-apiserver with etcd on this kind of machine: ~350–650/s);
* binds/s — ``pods/binding`` of unbound pods by one client (target ≥ 1,000/s);
* watch events/s — every cached event replayed to one watcher, then to ten at once (target ≥ 20,000/s to one);
* list — time to receive all pods in one unpaginated raw-JSON response (target: 100,000 pods in < 3 s), and
  apart the client's decoding of it (orjson; mostly the client's garbage collector at this size);
* resident memory of the server with 1,000 nodes and all the pods (target < 3 GB);
* the server process's CPU time (user + system) per create and per bind: on a shared machine, a figure that moves
  much less with the load than the rates do.

Usage: ``python benchmarks/apiserver.py [--pods 100000] [--kubelet]`` (``--kubelet``: simulated kubelets run the
bound pods, so a bind also starts its pod). Client threads share one Python process (and its
GIL): on a 2-core machine the 16-thread figure is bounded by the clients as much as by the server.
"""

from __future__ import annotations

import argparse
import http.client
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import orjson
import yaml

from shared import at_least


def pod(name: str) -> bytes:
    return orjson.dumps(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "labels": {"app": "bench"}},
            "spec": {
                "containers": [
                    {"name": "main", "image": "busybox:1.36", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}
                ]
            },
        }
    )


class Client:
    def __init__(self, port: int) -> None:
        self.connection = http.client.HTTPConnection("127.0.0.1", port, timeout=600)

    def call(self, method: str, path: str, body: bytes = b"") -> tuple[int, bytes]:
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        self.connection.request(method, path, body=body, headers=headers)
        response = self.connection.getresponse()
        return response.status, response.read()


def create(port: int, names: list[str]) -> None:
    client = Client(port)
    for name in names:
        status, data = client.call("POST", "/api/v1/namespaces/default/pods", pod(name))
        if status != 201:
            raise RuntimeError(f"create {name}: {status} {data[:200]!r}")


def rate(count: int, seconds: float) -> str:
    return f"{count / seconds:,.0f}/s"


def watch_replay(port: int, since: str, expected: int) -> None:
    """Read a watch from ``since`` until ``expected`` event lines arrived (counted, not decoded)."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    connection.request("GET", f"/api/v1/namespaces/default/configmaps?watch=true&resourceVersion={since}")
    response = connection.getresponse()
    seen = 0
    while seen < expected:
        chunk = response.read1(1 << 20)
        if not chunk:
            raise RuntimeError(f"watch ended after {seen} of {expected} events")
        seen += chunk.count(b"\n")
    connection.close()


def in_process(count: int = 20_000) -> tuple[str, str, str]:
    """Creates/s of the store itself (no HTTP): the ceiling the server's Python code sets."""
    from kubeflux.sim.apiserver.resources import default_registry
    from kubeflux.sim.apiserver.store import Store

    store = Store(default_registry())
    pods = store.registry.find("", "v1", "pods")
    assert pods is not None
    bodies = [pod(f"p{i}") for i in range(count)]
    began = time.perf_counter()
    for body in bodies:
        store.create(pods, "default", orjson.loads(body))
    return ("pod creates in the store, in process (no HTTP)", rate(count, time.perf_counter() - began), "")


def cpu_seconds(pid: int) -> float:
    """User plus system CPU time of process ``pid`` so far (its threads included)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def per_request(pid: int, since: float, count: int) -> str:
    """The server's CPU time per request since ``since`` (its :func:`cpu_seconds` then)."""
    return f"{(cpu_seconds(pid) - since) / count * 1e3:.2f} ms"


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--pods", type=at_least(4), default=100_000, help="pods created (and listed) in all; a quarter by one client"
    )
    parser.add_argument("--events", type=at_least(1), default=10_000, help="watch events replayed to each watcher")
    parser.add_argument(
        "--kubelet", action="store_true", help="run the simulated kubelets too (binds then start the pods)"
    )
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="kubeflux-bench-"))
    config = folder / "kubeconfig"
    command = [
        sys.executable,
        "-m",
        "kubeflux.cli",
        "cluster",
        "serve",
        "--nodes",
        "1000",
        "--cores-per-node",
        "64",
        "--kubeconfig",
        str(config),
        "--kubelet" if args.kubelet else "--no-kubelet",
    ]
    server = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    rows: list[tuple[str, str, str]] = [in_process()]
    try:
        assert server.stdout is not None
        server.stdout.readline()
        server.stdout.readline()
        url = yaml.safe_load(config.read_text())["clusters"][0]["cluster"]["server"]
        port = int(url.rsplit(":", 1)[1])
        one = min(5_000, args.pods // 4)
        began, cpu = time.perf_counter(), cpu_seconds(server.pid)
        create(port, [f"one-{i}" for i in range(one)])
        rows.append(("pod creates, 1 client (keep-alive)", rate(one, time.perf_counter() - began), "≥ 2,000/s"))
        rows.append(("  … server CPU time per create", per_request(server.pid, cpu, one), ""))

        binder = Client(port)
        began, cpu = time.perf_counter(), cpu_seconds(server.pid)
        for i in range(one):
            body = orjson.dumps(
                {
                    "apiVersion": "v1",
                    "kind": "Binding",
                    "metadata": {"name": f"one-{i}"},
                    "target": {"kind": "Node", "name": f"node-{i % 1000:04d}"},
                }
            )
            status, data = binder.call("POST", f"/api/v1/namespaces/default/pods/one-{i}/binding", body)
            if status != 201:
                raise RuntimeError(f"bind: {status} {data[:200]!r}")
        rows.append(("binds, 1 client", rate(one, time.perf_counter() - began), "≥ 1,000/s"))
        rows.append(("  … server CPU time per bind", per_request(server.pid, cpu, one), ""))

        rest = args.pods - one
        threads = 16
        names = [f"many-{i}" for i in range(rest)]
        workers = [threading.Thread(target=create, args=(port, names[t::threads])) for t in range(threads)]
        began, cpu = time.perf_counter(), cpu_seconds(server.pid)
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
        rows.append((f"pod creates, {threads} threads", rate(rest, time.perf_counter() - began), "≥ 2,000/s"))
        rows.append(("  … server CPU time per create", per_request(server.pid, cpu, rest), ""))

        lister = Client(port)
        began = time.perf_counter()
        status, data = lister.call("GET", "/api/v1/pods")
        received = time.perf_counter() - began
        listed = len(orjson.loads(data)["items"])
        decoded = time.perf_counter() - began - received
        size = f"{len(data) / 1e6:,.0f} MB"
        rows.append((f"list {listed:,} pods: response received ({size})", f"{received:.2f} s", "< 3 s for 100,000"))
        rows.append(("  … then decoded by the client (orjson)", f"{decoded:.2f} s", ""))
        rows.append((f"server RSS, 1,000 nodes + {listed:,} pods", f"{rss_mb(server.pid):,.0f} MB", "< 3 GB"))

        status, data = lister.call("GET", "/api/v1/namespaces/default/configmaps")
        since = orjson.loads(data)["metadata"]["resourceVersion"]
        for i in range(args.events):
            lister.call("POST", "/api/v1/namespaces/default/configmaps", orjson.dumps({"metadata": {"name": f"c{i}"}}))
        for watchers in (1, 10):
            readers = [threading.Thread(target=watch_replay, args=(port, since, args.events)) for _ in range(watchers)]
            began = time.perf_counter()
            for reader in readers:
                reader.start()
            for reader in readers:
                reader.join()
            total = args.events * watchers
            rows.append(
                (
                    f"watch events delivered to {watchers} watcher(s)",
                    rate(total, time.perf_counter() - began),
                    "≥ 20,000/s to one",
                )
            )
    finally:
        server.terminate()
        server.wait(timeout=60)
    width = max(len(r[0]) for r in rows)
    print(f"{'what':<{width}}  {'figure':>14}  target")
    for what, figure, target in rows:
        print(f"{what:<{width}}  {figure:>14}  {target}")
    print(f"(load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores)")


if __name__ == "__main__":
    main()
