"""kubeflux's Dynamic Resource Allocation against the real kube-scheduler v1.36: random small clusters whose KWOK
nodes publish random GPUs in ResourceSlices (models, memory), and random pending pods each with a ResourceClaim of
its own (one to three devices, or ``All``, of a class selecting the driver's devices or only the big ones, with CEL
selectors on the model, the memory and the index), beside cpu requests.

The pending pods are given to the real kube-scheduler one at a time: each is bound (its claim allocated by
kube-scheduler stays, taking its devices from those after it) or told it waits (and is deleted with its claim). For
each, a fresh kubeflux core fed the nodes, the DRA objects (claims with kube-scheduler's allocations) and the bound
pods, all read from the API server, must agree on whether the pod can be placed now and on the per-reason node
counts of the ``FailedScheduling`` message (``cannot allocate all claims`` among them), and so must the simulator's
kube-default baseline. The node and the devices kubeflux picks must satisfy the claim by an independent checker that
knows the selectors' meaning (written here, not CEL).
"""

from __future__ import annotations

import functools
import random
import time
from collections import Counter
from typing import Any

import orjson
import pytest
from kubernetes import client

from kubeflux.apiobjects.manifests import node_from_manifest, pod_from_manifest
from kubeflux.apiobjects.quantity import parse_quantity
from kubeflux.apiobjects.resourceclaims import claim_from_manifest, device_class_from_manifest, slice_from_manifest
from kubeflux.controlplane import ControlPlane
from kubeflux.scheduler.core import KubefluxScheduler
from kubeflux.scheduler.interface import ClusterEvent, EventKind
from kubeflux.sim.baselines.kube_default import KubeDefaultScheduler
from tests.dra import API_VERSION, DRIVER, gpu_class, gpu_slice

from ._verdicts import Real, counts, decide
from .conftest import Api

GROUP, VERSION = "resource.k8s.io", "v1"
ROUNDS = 8
PENDING = 24
"""Pending pods per round: ROUNDS × PENDING cases in all (192, ~30 s)."""
MODELS = ("a100", "h100", "t4")
MEMORY = ("16Gi", "40Gi", "80Gi")
BIG = f'device.capacity["{DRIVER}"].memory.compareTo(quantity("40Gi")) >= 0'


@pytest.fixture(scope="module")
def scheduled(plane: ControlPlane) -> ControlPlane:
    plane.start_scheduler()
    return plane


# --- random clusters and claims ---------------------------------------------------------------------------------


def slices(rng: random.Random, nodes: list[str], round_: int) -> list[dict[str, Any]]:
    """Each node with GPUs (most of them): 1 to 4, of one model, each of a random memory size."""
    made = []
    for node in nodes:
        if rng.random() < 0.25:
            continue
        doc = gpu_slice(node, rng.randint(1, 4), model=rng.choice(MODELS))
        doc["metadata"]["name"] = f"r{round_}-{node}"
        for device in doc["spec"]["devices"]:
            device["capacity"]["memory"]["value"] = rng.choice(MEMORY)
        made.append(doc)
    return made


def selector_choice(rng: random.Random) -> tuple[str, Any] | None:
    """One of the selectors the checker knows: (kind, argument), or None."""
    roll = rng.random()
    if roll < 0.4:
        return None
    if roll < 0.65:
        return ("model", rng.choice(MODELS))
    if roll < 0.85:
        return ("memory", rng.choice(MEMORY))
    return ("index", rng.randint(1, 3))


def cel(selector: tuple[str, Any]) -> str:
    kind, argument = selector
    if kind == "model":
        return f'device.attributes["{DRIVER}"].model == "{argument}"'
    if kind == "memory":
        return f'device.capacity["{DRIVER}"].memory.compareTo(quantity("{argument}")) >= 0'
    return f'device.attributes["{DRIVER}"].index < {argument}'


def claim_doc(name: str, device_class: str, count: int | None, selector: tuple[str, Any] | None) -> dict[str, Any]:
    exactly: dict[str, Any] = {"deviceClassName": device_class}
    if count is None:
        exactly["allocationMode"] = "All"
    else:
        exactly["count"] = count
    if selector is not None:
        exactly["selectors"] = [{"cel": {"expression": cel(selector)}}]
    return {
        "apiVersion": API_VERSION,
        "kind": "ResourceClaim",
        "metadata": {"name": name},
        "spec": {"devices": {"requests": [{"name": "gpus", "exactly": exactly}]}},
    }


def pod_doc(name: str, claim: str, cpu: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "resourceClaims": [{"name": "gpus", "resourceClaimName": claim}],
            "containers": [
                {
                    "name": "c",
                    "image": "registry.k8s.io/pause:3.9",
                    "resources": {"requests": {"cpu": cpu}, "claims": [{"name": "gpus"}]},
                }
            ],
        },
    }


# --- the independent checker ------------------------------------------------------------------------------------


def selected(device: dict[str, Any], device_class: str, selector: tuple[str, Any] | None) -> bool:
    """Whether ``device`` (a slice's entry) is one the class and the selector take, by their meaning."""
    memory = parse_quantity(device["capacity"]["memory"]["value"])
    if device_class == "big" and memory < parse_quantity("40Gi"):
        return False
    if selector is None:
        return True
    kind, argument = selector
    if kind == "model":
        return bool(device["attributes"]["model"]["string"] == argument)
    if kind == "memory":
        return memory >= parse_quantity(argument)
    return int(device["attributes"]["index"]["int"]) < argument


def check_devices(
    node: str,
    slice_docs: list[dict[str, Any]],
    claims: list[dict[str, Any]],
    wanted: tuple[str, int | None, tuple[str, Any] | None],
) -> str:
    """Why ``node`` cannot give the claim ``wanted`` (class, count or None for All, selector) its devices beside the
    allocated ``claims``; empty when it can."""
    taken = {
        (r["pool"], r["device"])
        for c in claims
        for r in ((c.get("status") or {}).get("allocation") or {}).get("devices", {}).get("results", [])
    }
    device_class, count, selector = wanted
    devices = [d for s in slice_docs if s["spec"]["nodeName"] == node for d in s["spec"]["devices"]]
    matching = [d for d in devices if selected(d, device_class, selector)]
    free = [d for d in matching if (node, d["name"]) not in taken]
    if count is None:
        return "" if matching and len(free) == len(matching) else f"All: {len(free)} of {len(matching)} free"
    return "" if len(free) >= count else f"{len(free)} free of {count}"


# --- kubeflux's answer ------------------------------------------------------------------------------------------


def verdict(
    scheduler: Any,
    nodes: list[dict[str, Any]],
    dra: list[dict[str, Any]],
    bound: list[dict[str, Any]],
    pending: dict[str, Any],
) -> tuple[str | None, str, Any]:
    """``scheduler`` (fresh) fed the nodes, the DRA objects and the bound pods: where it binds the pending pod, or its
    message; and the scheduler."""
    for node in nodes:
        scheduler.observe(ClusterEvent(EventKind.ADDED, node_from_manifest(node)), 0.0)
    readers = {"DeviceClass": device_class_from_manifest, "ResourceSlice": slice_from_manifest}
    for doc in dra:
        read = readers.get(doc["kind"], claim_from_manifest)
        scheduler.observe(ClusterEvent(EventKind.ADDED, read(doc)), 0.0)
    for pod in bound:
        scheduler.observe(ClusterEvent(EventKind.ADDED, pod_from_manifest(pod)), 0.0)
    node, message = decide(scheduler, pending, 0.0)
    return node, message, scheduler


def listed(api: Api, plural: str, namespace: str = "") -> list[dict[str, Any]]:
    custom = client.CustomObjectsApi(api.client)
    if namespace:
        found = custom.list_namespaced_custom_object(GROUP, VERSION, namespace, plural, _preload_content=False)
    else:
        found = custom.list_cluster_custom_object(GROUP, VERSION, plural, _preload_content=False)
    items: list[dict[str, Any]] = orjson.loads(found.data)["items"]
    for item in items:
        item.setdefault("apiVersion", API_VERSION)
        item.setdefault("kind", {"resourceclaims": "ResourceClaim", "resourceslices": "ResourceSlice"}.get(plural))
    return items


def test_kubeflux_allocates_devices_as_the_real_kube_scheduler(scheduled: ControlPlane, api: Api) -> None:
    real = Real(scheduled, api)
    custom = client.CustomObjectsApi(api.client)
    rng = random.Random(3434)
    for made in (gpu_class("gpu"), gpu_class("big", f'device.driver == "{DRIVER}"', BIG)):
        custom.create_cluster_custom_object(GROUP, VERSION, "deviceclasses", made)
    classes = [{**c, "kind": "DeviceClass"} for c in listed(api, "deviceclasses")]
    disagreements: list[str] = []
    tried = placed = 0
    seen: Counter[str] = Counter()
    started = time.monotonic()
    for round_ in range(ROUNDS):
        namespace = api.namespace(f"dra-{round_}", {})
        names = {  # KWOK nodes of 2 to 8 cores
            name
            for i in range(rng.randint(3, 6))
            for name in scheduled.add_kwok_nodes(1, cpu=str(rng.choice((2, 4, 8))), prefix=f"d{round_}-n{i}-")
        }
        real.until(functools.partial(real.usable, names))
        nodes = real.nodes(names)
        slice_docs = slices(rng, sorted(names), round_)
        for doc in slice_docs:
            custom.create_cluster_custom_object(GROUP, VERSION, "resourceslices", doc)
        bound: list[dict[str, Any]] = []
        for i in range(PENDING):
            wanted = (
                rng.choice(("gpu", "gpu", "big")),
                None if rng.random() < 0.1 else rng.choice((1, 1, 2, 3)),
                selector_choice(rng),
            )
            claim = f"c{i}"
            custom.create_namespaced_custom_object(
                GROUP, VERSION, namespace, "resourceclaims", claim_doc(claim, *wanted)
            )
            cpu = rng.choice(("500m", "1", "2", "3"))
            pending = real.create(namespace, pod_doc(f"p{i}", claim, cpu))
            where, message = real.verdict(namespace, f"p{i}")
            claims = listed(api, "resourceclaims", namespace)
            before = [c for c in claims if c["metadata"]["name"] != claim or where is None]
            dra = [*classes, *listed(api, "resourceslices"), *before]
            if where is not None:  # kubeflux decides as kube-scheduler did, the claim still unallocated
                unallocated = next(c for c in claims if c["metadata"]["name"] == claim)
                dra.append({**unallocated, "status": {}})
            ours, our_message, core = verdict(KubefluxScheduler(), nodes, dra, bound, pending)
            baseline = KubeDefaultScheduler("kubeflux", preemption="never")
            base, base_message, _ = verdict(baseline, nodes, dra, bound, pending)
            tried += 1
            label = f"round {round_} pod p{i} {wanted} cpu {cpu}"
            if (base is None) != (where is None) or (where is None and counts(base_message) != counts(message)):
                disagreements.append(
                    f"{label}: kube-scheduler {where or message!r}, kube-default {base or base_message!r}"
                )
            if (where is None) != (ours is None):
                disagreements.append(f"{label}: kube-scheduler {where or message!r}, kubeflux {ours or our_message!r}")
            elif where is None:
                theirs, mine = counts(message), counts(our_message)
                seen.update(reason for reason in theirs if reason != "total")
                if theirs != mine:
                    disagreements.append(f"{label}: kube-scheduler {message!r}, kubeflux {our_message!r}")
            if ours is not None:
                problem = check_devices(
                    ours, slice_docs, before if where is None else claims_without(claims, claim), wanted
                )
                allocation = core.books.devices.assumed.get(f"{namespace}/{claim}")
                if problem or allocation is None or any(d.pool != ours for d in allocation[1].results):
                    disagreements.append(f"{label}: kubeflux's node {ours}: {problem or allocation}")
            if where is None:
                real.delete(namespace, f"p{i}")
                custom.delete_namespaced_custom_object(GROUP, VERSION, namespace, "resourceclaims", claim)
            else:
                placed += 1
                bound.append(real.get(namespace, f"p{i}"))
        real.clear([namespace], names)
        for doc in slice_docs:
            custom.delete_cluster_custom_object(GROUP, VERSION, "resourceslices", doc["metadata"]["name"])
    elapsed = time.monotonic() - started
    print(f"DRA differential: {tried} cases, {placed} placed, reasons seen {dict(seen)}, {elapsed:.0f} s")
    assert "cannot allocate all claims" in seen, seen
    assert not disagreements, "\n".join(disagreements)


def claims_without(claims: list[dict[str, Any]], name: str) -> list[dict[str, Any]]:
    """The claims but ``name`` (the pod's own, allocated by kube-scheduler since)."""
    return [c for c in claims if c["metadata"]["name"] != name]
