"""Reading benchmark: what ``kubeflux serve`` spends on a watch event before and after the engine, offline.

The end-to-end benchmark (``benchmarks/serve.py --real``) is CPU-bound on small machines, and its spread (10-15 %
between runs) hides cuts of a few microseconds a pod. This one times the same code on the same objects without a
server: N nodes and P one-core pods shaped as kube-apiserver v1.36 serves them (defaults filled in, managedFields
and all: those of ``benchmarks/serve_real.py``, captured from a real list), then

  (a) every pod's ADDED event read as serve reads it (``cluster_event`` with serve's ``PodReadings``), best of 5;
  (b) serve's core: the nodes observed, every pod observed, then the passes (``schedule``) until none binds; after
      each pass, every bound pod's MODIFIED event (``spec.nodeName`` and the PodScheduled condition, decoded afresh
      from JSON as a watch stream delivers it; the decoding, done by serve's reflector thread, is not timed) read
      and observed.

Prints µs a pod for (a) and (b)'s MODIFIED events, and the passes' seconds. With ``--baseline DIR`` the same runs are
made in a child process on ``DIR/src`` (another checkout, its native build included), alternated with this tree's,
and the two are printed side by side.
Usage: python benchmarks/reading.py [--nodes 5000] [--pods 10000] [--rounds 3] [--baseline DIR]
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import subprocess
import sys
import time
import uuid
from functools import partial
from pathlib import Path
from typing import Any

import orjson

STAMP = "2026-12-01T02:49:22Z"


def node(index: int) -> dict[str, Any]:
    name = f"node-{index}"
    capacity = {"cpu": "64", "memory": "256Gi", "pods": "110"}
    ready = {
        "type": "Ready",
        "status": "True",
        "lastHeartbeatTime": STAMP,
        "lastTransitionTime": STAMP,
        "reason": "KubeletReady",
        "message": "kubelet is posting ready status",
    }
    return {
        "metadata": {
            "name": name,
            "uid": str(uuid.uuid4()),
            "resourceVersion": str(5000 + index),
            "creationTimestamp": STAMP,
            "labels": {"kubernetes.io/hostname": name},
            "managedFields": [{"manager": "unknown", "operation": "Update", "apiVersion": "v1", "time": STAMP}],
        },
        "spec": {},
        "status": {"capacity": capacity, "allocatable": capacity, "conditions": [ready]},
    }


def pod(index: int) -> dict[str, Any]:
    tolerations = [
        {"key": key, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}
        for key in ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable")
    ]
    container = {
        "name": "main",
        "image": "busybox:1.36",
        "resources": {"requests": {"cpu": "1", "memory": "1Gi"}},
        "terminationMessagePath": "/dev/termination-log",
        "terminationMessagePolicy": "File",
        "imagePullPolicy": "IfNotPresent",
    }
    fields = {"f:metadata": {"f:labels": {".": {}, "f:app": {}}}, "f:spec": {"f:containers": {}, "f:dnsPolicy": {}}}
    return {
        "metadata": {
            "name": f"pod-{index}",
            "namespace": "default",
            "uid": str(uuid.uuid4()),
            "resourceVersion": str(10000 + index),
            "generation": 1,
            "creationTimestamp": STAMP,
            "labels": {"app": "bench"},
            "managedFields": [
                {"manager": "unknown", "operation": "Update", "apiVersion": "v1", "fieldsV1": fields, "time": STAMP}
            ],
        },
        "spec": {
            "containers": [container],
            "restartPolicy": "Always",
            "terminationGracePeriodSeconds": 30,
            "dnsPolicy": "ClusterFirst",
            "serviceAccountName": "default",
            "serviceAccount": "default",
            "automountServiceAccountToken": False,
            "securityContext": {},
            "schedulerName": "kubeflux",
            "tolerations": tolerations,
            "priority": 0,
            "enableServiceLinks": True,
            "preemptionPolicy": "PreemptLowerPriority",
        },
        "status": {"phase": "Pending", "qosClass": "Burstable"},
    }


def measure(nodes: int, pods: int) -> dict[str, Any]:
    """One round on the tree this process imports: (a) and (b) of the module docstring, the cyclic collector off
    (as serve's loop runs until its graph is frozen)."""
    gc.disable()
    try:
        return _round(nodes, pods)
    finally:
        gc.enable()


def _round(nodes: int, pods: int) -> dict[str, Any]:
    from kubeflux import _native
    from kubeflux.apiobjects.podreadings import PodReadings
    from kubeflux.apiobjects.watched import cluster_event
    from kubeflux.kube.config import parse_config
    from kubeflux.scheduler.interface import Bind

    listed = orjson.dumps({"items": [pod(i) for i in range(pods)]})
    clock = time.perf_counter
    added = float("inf")
    for _ in range(5):
        manifests = orjson.loads(listed)["items"]
        read_added = partial(PodReadings().read, "ADDED")
        start = clock()
        for manifest in manifests:
            cluster_event("ADDED", "Pod", manifest, read_added)
        added = min(added, clock() - start)
    config = parse_config(None)
    core = config.schedulers[0].build(config.nodes.shape())
    readings = PodReadings()
    read_added, read_modified = partial(readings.read, "ADDED"), partial(readings.read, "MODIFIED")
    now = time.time()
    for index in range(nodes):
        core.observe(cluster_event("ADDED", "Node", node(index)), now)
    core.schedule(now)
    manifests = orjson.loads(listed)["items"]
    for manifest in manifests:
        core.observe(cluster_event("ADDED", "Pod", manifest, read_added), now)
    by_key = {f"default/{manifest['metadata']['name']}": manifest for manifest in manifests}
    passes = modified = 0.0
    bound = 0
    while True:
        start = clock()
        decisions = core.schedule(now)
        passes += clock() - start
        if not decisions:
            break
        events = []
        for decision in decisions:
            if isinstance(decision, Bind):
                manifest = by_key[decision.pod]
                spec = dict(manifest["spec"], nodeName=decision.node)
                status = dict(manifest["status"], conditions=[{"type": "PodScheduled", "status": "True"}])
                events.append(orjson.dumps(dict(manifest, spec=spec, status=status)))
        fresh = [orjson.loads(event) for event in events]  # (the reflector's thread decodes them, not timed here)
        start = clock()
        for manifest in fresh:
            core.observe(cluster_event("MODIFIED", "Pod", manifest, read_modified), now)
        modified += clock() - start
        bound += len(events)
    return {
        "added_us": added / pods * 1e6,
        "modified_us": modified / max(bound, 1) * 1e6,
        "passes_s": passes,
        "bound": bound,
        "engine": _native.describe(),  # compiled (mypyc) or pure Python, per package
    }


def _child(source: Path, nodes: int, pods: int) -> dict[str, Any]:
    env = dict(os.environ, PYTHONPATH=str(source))
    argv = [sys.executable, __file__, "--nodes", str(nodes), "--pods", str(pods), "--json"]
    done = subprocess.run(argv, env=env, cwd="/", capture_output=True, check=True)
    figures: dict[str, Any] = orjson.loads(done.stdout.splitlines()[-1])
    return figures


COLUMNS = (("added_us", "ADDED read µs/pod"), ("modified_us", "MODIFIED µs/pod"), ("passes_s", "passes s"))


def main(nodes: int, pods: int, rounds: int, baseline: Path | None) -> None:
    here = Path(__file__).resolve().parent.parent / "src"
    trees = [("baseline", baseline / "src"), ("this tree", here)] if baseline else [("this tree", here)]
    results: dict[str, list[dict[str, Any]]] = {name: [] for name, _ in trees}
    for round_ in range(rounds):
        order = trees if round_ % 2 == 0 else list(reversed(trees))
        for name, source in order:
            results[name].append(_child(source, nodes, pods))
    print(f"{nodes} nodes of 64 cores, {pods} one-core pods; {rounds} rounds each (median, min-max)")
    print(f"{'tree':<10} " + " ".join(f"{title:>24}" for _, title in COLUMNS) + "  bound")
    for name, runs in results.items():
        cells = []
        for key, _ in COLUMNS:
            values = [run[key] for run in runs]
            cells.append(f"{statistics.median(values):7.2f} ({min(values):.2f}-{max(values):.2f})".rjust(24))
        print(f"{name:<10} " + " ".join(cells) + f"  {runs[0]['bound']:5d}")
    for name, runs in results.items():
        engines = "; ".join(sorted({line for run in runs for line in run["engine"].splitlines()}))
        print(f"{name}: {engines}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--nodes", type=int, default=5000, help="nodes of 64 cores")
    parser.add_argument("--pods", type=int, default=10_000, help="one-core pods")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of each tree (alternated with --baseline)")
    parser.add_argument("--baseline", type=Path, help="another checkout, timed alternately on its own src/")
    parser.add_argument("--json", action="store_true", help="one round on this process's tree, as a JSON line")
    args = parser.parse_args()
    if args.json:
        print(orjson.dumps(measure(args.nodes, args.pods)).decode())
    else:
        main(args.nodes, args.pods, args.rounds, args.baseline)
