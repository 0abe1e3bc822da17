"""Invariants checked on every watch event a test sees from the real API server, while ``serve`` schedules.

:class:`PodWatch` follows the pods of one namespace (and the nodes) on a thread of its own and, after each event,
checks what a user would call a scheduling bug: a node holding more cpu than it has, a bound pod told it waits
(``PodScheduled=False``), a Binding of ``serve``'s refused by the cluster (409: it bound its own pod twice). The first
violation is kept with the event that showed it; :meth:`PodWatch.check` fails the test with it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from kubernetes import client, watch

from kubeflux.apiobjects.quantity import cpu_millis

__all__ = ["PodWatch", "millicores"]


def millicores(p: dict[str, Any]) -> int:
    """The pod's cpu request in millicores (its containers' sum)."""
    total = 0
    for container in p.get("spec", {}).get("containers") or []:
        cpu = ((container.get("resources") or {}).get("requests") or {}).get("cpu")
        if cpu is not None:
            total += cpu_millis(str(cpu))
    return total


def _condition(p: dict[str, Any], kind: str) -> dict[str, Any] | None:
    found = [c for c in p.get("status", {}).get("conditions") or [] if c.get("type") == kind]
    return found[0] if found else None


class PodWatch:
    """See the module docstring. ``capacity``: node name → its cpu in millicores; ``refused``: the count of Bindings
    the cluster refused so far (``serve.binder.refused``)."""

    def __init__(
        self, api: client.ApiClient, namespace: str, capacity: dict[str, int], refused: Callable[[], int]
    ) -> None:
        self.core = client.CoreV1Api(api)
        self.namespace = namespace
        self.capacity = capacity
        self.refused = refused
        self.pods: dict[str, dict[str, Any]] = {}
        self.events = 0
        self.violation: str | None = None
        self._stopping = False
        self._watch = watch.Watch()
        self._thread = threading.Thread(target=self._run, daemon=True, name="pod-watch")

    def __enter__(self) -> PodWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stopping = True
        self._watch.stop()
        self._thread.join(timeout=30)

    def _run(self) -> None:
        try:
            self._follow()
        except Exception as exc:  # the stream closed by __exit__, or the watch broken: a broken one is a failure
            if self.violation is None and not self._stopping:
                self.violation = f"the watch broke: {exc!r}"

    def _follow(self) -> None:
        stream = self._watch.stream(self.core.list_namespaced_pod, self.namespace, timeout_seconds=600)
        for event in stream:
            obj: dict[str, Any] = event["raw_object"]
            name = obj["metadata"]["name"]
            if event["type"] == "DELETED":
                self.pods.pop(name, None)
            else:
                self.pods[name] = obj
            self.events += 1
            if self.violation is None:
                problem = self._problem(obj)
                if problem is not None:
                    self.violation = f"after {event['type']} of {name} (event {self.events}): {problem}"

    def _problem(self, changed: dict[str, Any]) -> str | None:
        scheduled = _condition(changed, "PodScheduled")
        if changed["spec"].get("nodeName") and scheduled is not None and scheduled.get("status") == "False":
            return f"a bound pod is told it waits: {scheduled.get('message')}"
        held: dict[str, int] = {}
        for p in self.pods.values():
            node = p["spec"].get("nodeName")
            if node and p.get("status", {}).get("phase") not in ("Succeeded", "Failed"):
                held[node] = held.get(node, 0) + millicores(p)
        for node, used in held.items():
            if node in self.capacity and used > self.capacity[node]:
                return f"node {node} holds {used}m cpu of {self.capacity[node]}m"
        refused = self.refused()
        if refused:
            return f"{refused} Binding(s) of serve refused by the cluster"
        return None

    def check(self) -> None:
        assert self.violation is None, self.violation
        assert self.events > 0, "the watch saw no event"
