"""``kubeflux serve`` end to end on loopback: pods created through the API, bound by serve, seen bound by a watcher.

Three processes, as on a cluster: the simulated API server (``kubeflux cluster serve --nodes 5000 --no-kubelet``:
binds measure the scheduler and the API server, no kubelet runs the pods), ``kubeflux serve`` (its own process,
its default config), and this script, which creates the pods (raw JSON over keep-alive HTTP/1.1, a few client
threads) and watches them (one raw watch). Per pod, its scheduling latency is from just before its create was
sent to the moment the watcher saw it bound; the throughput is pods bound over the time from the first create
to the last bind seen. Workloads:

* ``pods``: 10,000 one-core pods on 5,000 nodes of 4 cores (kube-scheduler's CI floor on 5,000 nodes: 270
  pods/s; issue 14's target: ≥ 300 pods/s on a 2-core machine);
* ``gangs``: 1,000 PodGroups of 16 one-core pods (``minMember: 16``) on the same nodes.

Usage: ``python benchmarks/serve.py [--pods 10000] [--gangs 1000] [--nodes 5000]``. On a 2-core machine the three
processes share the two cores: the figures are the machine's as much as serve's.

``--real``: the real control plane instead (etcd and kube-apiserver built by ``make kube``; ``KUBEFLUX_KUBE_DIR``),
5,000 nodes of 64 cores and 10,000 pods, three rows in one run: the real kube-scheduler (raised QPS), ``kubeflux
serve``, and a raw binding client (the API server's limit); see ``benchmarks/serve_real.py`` for the definitions.
``--repeat N`` alternates the rows N times; ``--rows`` picks some; ``--baseline DIR`` adds serve run from another
checkout (e.g. main's), to measure a change against what it changes in one run; ``--pin`` puts the control plane on
one CPU and each row's binder on the other.
"""

from __future__ import annotations

import argparse
import compileall
import http.client
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import orjson
import yaml

import kubeflux
import serve_real  # this folder's: the --real mode
from kubeflux.kube.config import ConfigError, load_config
from shared import at_least

CREATORS = 4


def pod(name: str, group: str | None = None) -> bytes:
    labels = {"app": "bench"} | ({"scheduling.x-k8s.io/pod-group": group} if group else {})
    return orjson.dumps(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "labels": labels},
            "spec": {
                "schedulerName": "kubeflux",
                "containers": [
                    {"name": "main", "image": "busybox:1.36", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}
                ],
            },
        }
    )


def podgroup(name: str, size: int) -> bytes:
    return orjson.dumps(
        {
            "apiVersion": "scheduling.x-k8s.io/v1alpha1",
            "kind": "PodGroup",
            "metadata": {"name": name},
            "spec": {"minMember": size},
        }
    )


class Client:
    def __init__(self, port: int) -> None:
        self.connection = http.client.HTTPConnection("127.0.0.1", port, timeout=600)

    def post(self, path: str, body: bytes) -> None:
        self.connection.request("POST", path, body=body, headers={"Content-Type": "application/json"})
        response = self.connection.getresponse()
        data = response.read()
        if response.status != 201:
            raise RuntimeError(f"POST {path}: {response.status} {data[:200]!r}")


class Watcher(threading.Thread):
    """Records when each pod is first seen bound."""

    def __init__(self, port: int, expected: int) -> None:
        super().__init__(daemon=True)
        self.port, self.expected = port, expected
        self.bound: dict[str, float] = {}
        self.done = threading.Event()

    def run(self) -> None:
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=3600)
        connection.request("GET", "/api/v1/namespaces/default/pods?watch=true&resourceVersion=0")
        response = connection.getresponse()
        while len(self.bound) < self.expected:
            line = response.readline()
            if not line:
                break
            event = orjson.loads(line)
            obj = event["object"]
            name = obj["metadata"]["name"]
            if obj.get("spec", {}).get("nodeName") and name not in self.bound:
                self.bound[name] = time.perf_counter()
        self.done.set()


def start(command: list[str]) -> subprocess.Popen[str]:
    return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def run(
    workload: str, pods: int, gang: int, nodes: int, config: Path | None
) -> tuple[str, int, float, float, float, float]:
    folder = Path(tempfile.mkdtemp(prefix="kubeflux-bench-serve-"))
    kubeconfig = folder / "kubeconfig"
    cli = [sys.executable, "-m", "kubeflux.cli"]
    cluster = ["cluster", "serve", "--nodes", str(nodes), "--cores-per-node", "4", "--no-kubelet"]
    server = start([*cli, *cluster, "--kubeconfig", str(kubeconfig)])
    serve: subprocess.Popen[str] | None = None
    profiler: subprocess.Popen[bytes] | None = None
    try:
        assert server.stdout is not None
        while not kubeconfig.exists() or "kubeconfig" not in server.stdout.readline():
            if server.poll() is not None:  # it ended before it served: say why, rather than wait for ever
                raise RuntimeError(f"cluster serve ended (exit {server.returncode}):\n{server.stdout.read()[-2000:]}")
        url = yaml.safe_load(kubeconfig.read_text())["clusters"][0]["cluster"]["server"]
        port = int(url.rsplit(":", 1)[1])
        serve = start([*cli, "serve", "--kubeconfig", str(kubeconfig), *(["--config", str(config)] if config else [])])
        if os.environ.get("KUBEFLUX_PROFILE"):  # py-spy on serve: where its time goes
            profiler = subprocess.Popen(
                [
                    os.environ["KUBEFLUX_PROFILE"],
                    "record",
                    "-o",
                    str(folder / "serve.svg"),
                    "-p",
                    str(serve.pid),
                    "--format",
                    "raw",
                    "-r",
                    "200",
                    "--gil",
                ],
            )
            print(f"profile of serve: {folder / 'serve.svg'}", file=sys.stderr)
        assert serve.stdout is not None
        said: list[str] = []  # what serve printed while starting: its error, if it ends
        while "caches synced" not in (line := serve.stdout.readline()):  # its start (imports, lists) is not the figure
            said.append(line)
            if serve.poll() is not None:
                said.append(serve.stdout.read())
                raise RuntimeError(f"serve ended (exit {serve.returncode}):\n{''.join(said)[-2000:]}")
        names = [f"{workload}-{i}" for i in range(pods)]
        watcher = Watcher(port, len(names))
        watcher.start()
        created: dict[str, float] = {}
        setup = Client(port)
        groups = pods // gang if gang > 1 else 0
        for index in range(groups):
            setup.post("/apis/scheduling.x-k8s.io/v1alpha1/namespaces/default/podgroups", podgroup(f"g{index}", gang))

        def create(part: list[str]) -> None:
            client = Client(port)
            for name in part:
                group = f"g{int(name.rsplit('-', 1)[1]) // gang}" if groups else None
                created[name] = time.perf_counter()
                client.post("/api/v1/namespaces/default/pods", pod(name, group))

        parts = [names[i::CREATORS] for i in range(CREATORS)]
        if groups:  # each thread creates whole gangs, their members one after the other
            parts = [[n for n in names if int(n.rsplit("-", 1)[1]) // gang % CREATORS == i] for i in range(CREATORS)]
        threads = [threading.Thread(target=create, args=(part,)) for part in parts]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        created_in = time.perf_counter() - min(created.values())
        if not watcher.done.wait(1800):
            raise RuntimeError(f"only {len(watcher.bound)} of {len(names)} pods were bound")
        if len(watcher.bound) < len(names):
            serve.terminate()
            output = serve.communicate(timeout=60)[0]
            raise RuntimeError(f"only {len(watcher.bound)} of {len(names)} pods were bound; serve said:\n{output}")
        latencies = sorted(watcher.bound[n] - created[n] for n in names)
        elapsed = max(watcher.bound.values()) - min(created.values())
        p50 = statistics.median(latencies)
        p99 = latencies[int(len(latencies) * 0.99) - 1]
        print(
            f"{workload}: created in {created_in:.1f} s, all bound {elapsed:.1f} s after the first create",
            file=sys.stderr,
        )
        return workload, len(names), elapsed, len(names) / elapsed, p50, p99
    finally:
        for process in (serve, server):
            if process is not None:
                process.terminate()
                try:
                    process.wait(30)
                except subprocess.TimeoutExpired:
                    process.kill()
        if profiler is not None:
            profiler.wait(60)  # it writes its file when serve has ended


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pods", type=at_least(1), default=10_000, help="one-core pods of the first workload")
    parser.add_argument("--gangs", type=at_least(0), default=1_000, help="gangs of 16 of the second workload (0: none)")
    parser.add_argument("--nodes", type=at_least(1), default=5_000)
    parser.add_argument("--config", type=Path, default=None, help="serve's config (default: its defaults)")
    parser.add_argument("--real", action="store_true", help="on the real control plane (64-core nodes, 3 rows)")
    parser.add_argument("--repeat", type=at_least(1), default=1, help="--real: runs of the rows, alternated")
    parser.add_argument("--rows", default=",".join(serve_real.ROWS), help="--real: which rows, comma-separated")
    parser.add_argument(
        "--raw-processes",
        type=at_least(1),
        default=serve_real.RAW_PROCESSES,
        help="--real: processes of the raw binding client",
    )
    parser.add_argument(
        "--raw-pipeline",
        type=at_least(1),
        default=serve_real.RAW_PIPELINE,
        help="--real: requests each raw binding process sends before reading their answers (1: one at a time)",
    )
    parser.add_argument(
        "--baseline",
        type=Path,
        default=None,
        help="--real: also a row of serve run from this checkout (e.g. main's worktree), alternated with the others",
    )
    parser.add_argument(
        "--pin",
        action="store_true",
        help="--real: the control plane on one CPU, each row's binder on another",
    )
    parser.add_argument(
        "--start-runs",
        type=at_least(0),
        default=0,
        help="--real: serve's start alone, N launches on one control plane (with --baseline's, alternated)",
    )
    args = parser.parse_args()
    if args.config is not None:
        try:
            load_config(args.config)  # the file serve reads: its error here, before a control plane starts
        except ConfigError as error:
            parser.error(f"--config: {error}")
    if args.real:
        rows = [row.strip() for row in args.rows.split(",") if row.strip()]
        unknown = set(rows) - {*serve_real.ROWS, serve_real.BASELINE}
        if unknown:
            parser.error(f"--rows: unknown {', '.join(sorted(unknown))} (known: {', '.join(serve_real.ROWS)})")
        if args.baseline is not None:
            if not (args.baseline / "src" / "kubeflux").is_dir():
                parser.error(f"--baseline {args.baseline}: no src/kubeflux in it")
            if serve_real.BASELINE not in rows:  # just before serve's row
                where = rows.index("kubeflux serve") if "kubeflux serve" in rows else len(rows)
                rows.insert(where, serve_real.BASELINE)
        if args.pin and args.start_runs:
            parser.error("--pin: not with --start-runs (serve's start alone runs unpinned)")
        try:
            pinning = serve_real.Pinning.split() if args.pin else None
        except ValueError as exc:
            parser.error(str(exc))
        # every tree serve runs from byte-compiled alike: one never imported yet (a fresh checkout, with
        # PYTHONDONTWRITEBYTECODE set) compiles its modules at each launch and starts later for that alone
        for tree in [Path(kubeflux.__file__).parents[1], *([args.baseline / "src"] if args.baseline else [])]:
            compileall.compile_dir(tree, quiet=1)
        if args.start_runs:
            serve_real.start_times(args.nodes, args.pods, args.start_runs, args.baseline)
            return
        raw = serve_real.RawClient(args.raw_processes, args.raw_pipeline)
        serve_real.main(args.nodes, args.pods, args.repeat, rows, raw, args.baseline, pinning)
        return
    rows = [run("pods", args.pods, 1, args.nodes, args.config)]
    if args.gangs:
        rows.append(run("gangs", args.gangs * 16, 16, args.nodes, args.config))
    load = os.getloadavg()[0]
    print(f"kubeflux serve end to end, {args.nodes} nodes x 4 cores, {os.cpu_count()} cores, load {load:.1f}")
    print("| workload | pods | seconds | pods/s | p50 latency | p99 latency |")
    print("|---|---|---|---|---|---|")
    for workload, count, elapsed, rate, p50, p99 in rows:
        print(f"| {workload} | {count:,} | {elapsed:.1f} | {rate:,.0f} | {p50 * 1000:.0f} ms | {p99 * 1000:.0f} ms |")


if __name__ == "__main__":
    main()
