"""The served cluster's disruption controller: every PodDisruptionBudget's status, as kube-controller-manager's
(``pkg/controller/disruption``, v1.36) keeps it, so that the Eviction API (:mod:`kubeflux.sim.apiserver.eviction`)
grants or refuses evictions from it, as the real server does (without it every guarded eviction is a 429: the
budget is "still being processed"). tests/realkube/test_disruption_differential.py holds it to the real one.

For each budget, from the pods of its namespace its selector selects (``policy/v1``: an empty selector selects
all, an absent one none):

* ``expectedPods`` and ``desiredHealthy`` (``getExpectedPodCount``): an integer ``minAvailable`` counts every
  selected pod and is the desired count; a percentage, or ``maxUnavailable``, is taken of the *scale* of the
  selected pods' controllers (the sum of each one's ``spec.replicas``; a percentage rounded up): pods with no
  controller add nothing, a ReplicaSet's pods count its Deployment, and a controller without a scale (a Job's) or
  not found fails the sync (:class:`SyncFailed`). With neither bound both are 0.
* ``disruptedPods``: the Eviction API's entries kept for pods that exist, are not being deleted and were evicted
  less than :data:`DELETION_TIMEOUT` ago (the budget is synced again when the first of them expires);
* ``currentHealthy``: the Ready pods neither being deleted nor in ``disruptedPods``;
* ``disruptionsAllowed``: the healthy beyond the desired (0 without expected pods);
* ``observedGeneration`` and the ``DisruptionAllowed`` condition (``SufficientPods`` / ``InsufficientPods``).

A failed sync is kube-controller-manager's ``failSafe``: the status is kept but ``disruptionsAllowed`` 0 and the
condition ``SyncFailed`` with the error as message and the *old* ``observedGeneration`` (so a budget that never
synced stays "being processed" for the Eviction API). An unchanged status is not written.

It also clears stale ``DisruptionTarget`` conditions, as the real controller does: a pod marked to be disrupted
(``DisruptionTarget=True``, not by the kubelet) that is still not being deleted nor finished
:data:`STALE_DISRUPTION_TIMEOUT` after the mark gets the condition ``False`` (an eviction or a preemption that did
not delete it).

A budget is synced when it changes (its status too, as the real informer's update does) and when a pod of its
namespace does. Known difference: the real controller, when a pod changes, syncs only one of the budgets selecting
it (``getPdbForPod``: the first the lister gives, in no fixed order), so with two budgets over one pod the other
keeps its old status until its own next sync; here both are synced. Not written: the real controller's Events
(``NoPods``, ``UnmanagedPods``, ``CalculateExpectedPodCountFailed``, ``MultiplePodDisruptionBudgets``,
``NotDeleted``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Any, Final

from kubeflux.apiobjects.disruption import budget_from_manifest, desired_healthy
from kubeflux.apiobjects.manifests import format_timestamp, parse_timestamp
from kubeflux.sim.apiserver.clock import Clock, Timer
from kubeflux.sim.apiserver.errors import ApiError
from kubeflux.sim.apiserver.follow import Reconciler, served
from kubeflux.sim.apiserver.jobpods import ready
from kubeflux.sim.apiserver.store import Store
from kubeflux.sim.apiserver.watch import WatchEvent
from kubeflux.sim.clock import Priority

__all__ = [
    "DELETION_TIMEOUT",
    "STALE_DISRUPTION_TIMEOUT",
    "DisruptionController",
    "Scales",
    "SyncFailed",
    "budget_status",
    "stale_disruption",
]

Object = dict[str, Any]
Key = tuple[str, str]
"""A budget's (namespace, name)."""

DELETION_TIMEOUT: Final = 120.0
"""``DeletionTimeout``: seconds an entry of ``disruptedPods`` waits for its pod to be deleted; then the pod is
assumed kept (it counts as healthy again)."""
STALE_DISRUPTION_TIMEOUT: Final = 120.0
"""``stalePodDisruptionTimeout``: seconds a pod may keep ``DisruptionTarget=True`` without being deleted."""
_SCALED: Final = frozenset(
    {("", "ReplicationController"), ("apps", "Deployment"), ("apps", "ReplicaSet"), ("apps", "StatefulSet")}
)
"""Built-in kinds with a ``scale`` subresource on the real server (the served one may not serve it)."""


class SyncFailed(Exception):
    """A budget's sync failed (its message is the ``SyncFailed`` condition's, the real controller's words)."""


def stale_disruption(pod: Object, now: float) -> float | None:
    """Seconds until ``pod``'s ``DisruptionTarget`` condition is stale (0: it is; None: it never will be as it is:
    none, not ``True``, the kubelet's, or the pod is being deleted or finished)."""
    status = pod.get("status") or {}
    if pod["metadata"].get("deletionTimestamp") or status.get("phase") in ("Succeeded", "Failed"):
        return None
    condition = next(
        (c for c in status.get("conditions") or () if isinstance(c, dict) and c.get("type") == "DisruptionTarget"),
        None,
    )
    if condition is None or condition.get("status") != "True" or condition.get("reason") == "TerminationByKubelet":
        return None
    try:
        since = parse_timestamp(str(condition.get("lastTransitionTime")))
    except ValueError:
        since = now
    return max(since + STALE_DISRUPTION_TIMEOUT - now, 0.0)


def _controller_of(obj: Object) -> Object | None:
    refs = obj["metadata"].get("ownerReferences") or ()
    return next((r for r in refs if isinstance(r, dict) and r.get("controller")), None)


def _group(api_version: Any) -> str:
    text = str(api_version or "")
    return text.split("/", 1)[0] if "/" in text else ""


class Scales:
    """The scale of a pod's controller as the disruption controller's finders find it (``finders()``: a
    ReplicationController, a ReplicaSet's Deployment, a ReplicaSet of none, a StatefulSet, else any resource with a
    ``scale`` subresource), read from ``store``."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def _get(self, api_version: str, kind: str, namespace: str, name: str, uid: Any) -> Object | None:
        """The object of that kind, name and uid, or None."""
        resource = self.store.registry.by_kind(api_version, kind)
        if resource is None:
            return None
        try:
            found = self.store.get(resource, namespace, name)
        except ApiError:
            return None
        return found if found["metadata"].get("uid") == uid else None

    def of(self, namespace: str, ref: Object) -> tuple[str, int] | None:
        """(uid, replicas) of the controller ``ref`` names, or None when no finder finds it; raises
        :class:`SyncFailed` when it is of a kind the server does not know or that has no scale."""
        kind, group, name, uid = ref.get("kind"), _group(ref.get("apiVersion")), ref.get("name"), ref.get("uid")
        if (group, kind) in _SCALED:
            api_version = "v1" if not group else f"{group}/v1"
            found = self._get(api_version, str(kind), namespace, str(name), uid)
            if found is None:
                return None
            owner = _controller_of(found) if kind == "ReplicaSet" else None
            if owner is not None and owner.get("kind") == "Deployment" and _group(owner.get("apiVersion")) == "apps":
                deployment = self._get("apps/v1", "Deployment", namespace, str(owner.get("name")), owner.get("uid"))
                if deployment is not None:
                    found = deployment  # else the ReplicaSet's own scale (the scale finder's)
            return str(found["metadata"]["uid"]), int((found.get("spec") or {}).get("replicas", 1))
        resource = self.store.registry.by_kind(str(ref.get("apiVersion") or ""), str(kind))
        if resource is None:
            raise SyncFailed(f'no matches for kind "{kind}" in version "{ref.get("apiVersion")}"')
        if "scale" not in resource.subresources:
            shown = f"{resource.plural}.{resource.group}" if resource.group else resource.plural
            raise SyncFailed(f"{shown} does not implement the scale subresource")
        found = self._get(resource.api_version, resource.kind, namespace, str(name), uid)
        if found is None:
            return None
        return str(found["metadata"]["uid"]), int((found.get("spec") or {}).get("replicas", 1))

    def expected(self, namespace: str, pods: Iterable[Object]) -> int:
        """``getExpectedScale``: the sum of the scales of the pods' controllers (a pod with none adds nothing)."""
        scales: dict[str, int] = {}
        seen: set[str] = set()
        for pod in sorted(pods, key=lambda p: str(p["metadata"]["name"])):
            ref = _controller_of(pod)
            if ref is None or ref.get("uid") in seen:
                continue
            found = self.of(namespace, ref)
            if found is None:
                raise SyncFailed(f'found no controllers for pod "{pod["metadata"]["name"]}"')
            seen.add(str(ref.get("uid")))
            scales[found[0]] = found[1]
        return sum(scales.values())


def _condition(old: Object, status: str, reason: str, message: str, generation: int, now: str) -> list[Object]:
    """``SetStatusCondition`` of ``DisruptionAllowed``: its transition time kept while its status holds (an
    ``observedGeneration`` of 0 is not shown)."""
    conditions = [c for c in old.get("conditions") or () if isinstance(c, dict)]
    current = next((c for c in conditions if c.get("type") == "DisruptionAllowed"), None)
    changed = current is None or current.get("status") != status
    condition: Object = {"type": "DisruptionAllowed", "status": status}
    if generation:
        condition["observedGeneration"] = generation
    condition["lastTransitionTime"] = now if changed or current is None else current.get("lastTransitionTime")
    condition.update(reason=reason, message=message)
    return [c for c in conditions if c.get("type") != "DisruptionAllowed"] + [condition]


def _disrupted(old: Object, selected: list[Object], now: float) -> tuple[dict[str, str], float | None]:
    """``buildDisruptedPodMap``: the entries kept, and when the first of them expires (None: none kept)."""
    listed = old.get("disruptedPods") or {}
    kept: dict[str, str] = {}
    recheck: float | None = None
    for pod in selected:
        name = pod["metadata"]["name"]
        if pod["metadata"].get("deletionTimestamp") or name not in listed:
            continue
        try:
            expires = parse_timestamp(str(listed[name])) + DELETION_TIMEOUT
        except ValueError:
            continue
        if expires > now:  # the real controller keeps it at the very instant too; virtual time has such instants
            kept[name] = listed[name]
            recheck = expires if recheck is None else min(recheck, expires)
    return kept, recheck


def budget_status(
    pdb: Object, pods: Iterable[Object], now: float, scales: Scales | None = None
) -> tuple[Object, float | None]:
    """The status the disruption controller writes for ``pdb`` given every pod of its namespace (see the module
    docstring), and when to sync it again (Unix seconds: an entry of ``disruptedPods`` expires; None: no need).
    ``now``: Unix seconds; ``scales``: the pods' controllers (None: none is found, a pod with one fails the sync)."""
    budget = budget_from_manifest(pdb)
    old = pdb.get("status") or {}
    generation = int(pdb["metadata"].get("generation") or 1)
    stamp = format_timestamp(float(int(now)))
    selected = [p for p in pods if budget.selects(budget.namespace, p["metadata"].get("labels") or {})]
    try:
        if budget.max_unavailable is None and not isinstance(budget.min_available, str):
            expected = len(selected) if budget.min_available is not None else 0
        elif scales is None:
            expected = _no_scales(selected)
        else:
            expected = scales.expected(budget.namespace, selected)
    except SyncFailed as failed:  # failSafe: the old status, nothing allowed
        observed = int(old.get("observedGeneration") or 0)
        conditions = _condition(old, "False", "SyncFailed", str(failed), observed, stamp)
        return {**old, "disruptionsAllowed": 0, "conditions": conditions}, None
    desired = desired_healthy(budget, expected)
    assert desired is not None  # the expected count is known
    disrupted, recheck = _disrupted(old, selected, now)
    healthy = sum(
        1
        for p in selected
        if not p["metadata"].get("deletionTimestamp") and p["metadata"]["name"] not in disrupted and ready(p)
    )
    allowed = healthy - desired if expected > 0 and healthy > desired else 0
    status: Object = {
        "currentHealthy": healthy,
        "desiredHealthy": desired,
        "expectedPods": expected,
        "disruptionsAllowed": allowed,
        "observedGeneration": generation,
    }
    if disrupted:
        status["disruptedPods"] = disrupted
    reason = "SufficientPods" if allowed > 0 else "InsufficientPods"
    status["conditions"] = _condition(old, "True" if allowed > 0 else "False", reason, "", generation, stamp)
    return status, recheck


def _no_scales(selected: list[Object]) -> int:
    """The expected count when no controller can be looked up: 0 for pods without one."""
    for pod in sorted(selected, key=lambda p: str(p["metadata"]["name"])):
        if _controller_of(pod) is not None:
            raise SyncFailed(f'found no controllers for pod "{pod["metadata"]["name"]}"')
    return 0


class DisruptionController:
    """Keeps every PodDisruptionBudget's status in step with the pods, on the server's loop; ``timers`` (the
    server's clock) syncs a budget again when an entry of its ``disruptedPods`` expires (None: only events do)."""

    def __init__(self, store: Store, loop: asyncio.AbstractEventLoop, timers: Clock | None = None) -> None:
        pods, budgets = served(store, ("", "v1", "pods"), ("policy", "v1", "poddisruptionbudgets"))
        self.store, self.loop, self.timers, self.pods, self.budgets = store, loop, timers, pods, budgets
        self.scales = Scales(store)
        self._in: dict[str, dict[str, Object]] = {}
        """Namespace → uid → the latest version of each of its pods."""
        self._budgets: dict[str, set[str]] = {}
        """Namespace → the names of its budgets."""
        self._stale: dict[str, Timer] = {}
        """Pod uid → the timer that clears its ``DisruptionTarget`` condition once stale."""
        self._rechecks: dict[Key, tuple[float, Timer]] = {}
        """Budget → (when, the timer) of its next sync for an expiring ``disruptedPods`` entry."""
        self.reconciler: Reconciler[Key] = Reconciler(
            store, loop, [(pods, self._pod_event), (budgets, self._budget_event)], self._update
        )
        """Follows pods and budgets; syncs each budget their events touched."""
        self.reconciler.start()

    def stop(self) -> None:
        self.reconciler.stop()
        for _, timer in self._rechecks.values():
            timer.cancel()
        self._rechecks.clear()
        for timer in self._stale.values():
            timer.cancel()
        self._stale.clear()

    def _pod_event(self, type_: str, event: WatchEvent) -> None:
        meta = event.obj["metadata"]
        namespace = meta["namespace"]
        pods = self._in.setdefault(namespace, {})
        if type_ == "DELETED":
            pods.pop(meta["uid"], None)
        else:
            pods[meta["uid"]] = event.obj
        for name in self._budgets.get(namespace, ()):
            self.reconciler.add((namespace, name))
        self._watch_disruption(event.obj, gone=type_ == "DELETED")

    def _budget_event(self, type_: str, event: WatchEvent) -> None:
        meta = event.obj["metadata"]
        key = (meta["namespace"], meta["name"])
        names = self._budgets.setdefault(key[0], set())
        if type_ == "DELETED":
            names.discard(key[1])
            self.reconciler.discard(key)
            recheck = self._rechecks.pop(key, None)
            if recheck is not None:
                recheck[1].cancel()
        else:
            names.add(key[1])
            self.reconciler.add(key)

    def _update(self, key: Key) -> None:
        """Sync one budget: write its status if it changed, and ask for a recheck when an entry expires."""
        namespace, name = key
        pdb = self.store.find(self.budgets, namespace, name)
        if pdb is None:
            return
        status, recheck = budget_status(pdb, self._in.get(namespace, {}).values(), self.store.clock(), self.scales)
        if status != pdb.get("status"):
            try:
                self.store.update(self.budgets, namespace, name, {**pdb, "status": status}, "status", trusted=True)
            except ApiError:
                return
        if recheck is not None:
            self._recheck(key, recheck)
        elif key in self._rechecks:  # nothing left to expire
            self._rechecks.pop(key)[1].cancel()

    def _recheck(self, key: Key, at: float) -> None:
        """Sync ``key`` again at ``at`` (Unix seconds; the earliest asked is kept, as the recheck queue keeps it)."""
        if self.timers is None:
            return
        current = self._rechecks.get(key)
        if current is not None:
            if current[0] <= at:
                return
            current[1].cancel()
        delay = max(at - self.store.clock(), 0.0)
        self._rechecks[key] = (at, self.timers.call_later(self.loop, delay, Priority.STAGE, self._recheck_due, key))

    def _recheck_due(self, key: Key) -> None:
        self._rechecks.pop(key, None)
        self.reconciler.add(key)
        self.reconciler.wake()

    def _watch_disruption(self, pod: Object, gone: bool = False) -> None:
        """Clear ``pod``'s ``DisruptionTarget`` condition once stale (the stale-disruption queue: a timer a pod,
        cancelled as soon as the pod is being deleted, gone or unmarked, so that no timer waits for nothing)."""
        meta = pod["metadata"]
        left = None if gone else stale_disruption(pod, self.store.clock())
        current = self._stale.get(meta["uid"])
        if left is None and current is not None:
            current.cancel()
            del self._stale[meta["uid"]]
        elif left is not None and current is None and self.timers is not None:
            timer = self.timers.call_later(
                self.loop, left, Priority.STAGE, self._clear_stale, meta["namespace"], meta["name"], meta["uid"]
            )
            self._stale[meta["uid"]] = timer

    def _clear_stale(self, namespace: str, name: str, uid: str) -> None:
        """``syncStalePodDisruption``: the condition ``False`` (no reason, no message), if still stale."""
        self._stale.pop(uid, None)
        pod = self.store.find(self.pods, namespace, name, uid)
        if pod is None:
            return
        left = stale_disruption(pod, self.store.clock())
        if left is None or left > 0:
            if left is not None:
                self._watch_disruption(pod)
            return
        status = pod.get("status") or {}
        cleared: Object = {"type": "DisruptionTarget", "status": "False", "lastProbeTime": None}
        cleared["lastTransitionTime"] = self.store.now()
        generation = pod["metadata"].get("generation")
        if generation:
            cleared["observedGeneration"] = generation
        conditions = [cleared if c.get("type") == "DisruptionTarget" else c for c in status.get("conditions") or ()]
        try:
            self.store.update(
                self.pods,
                namespace,
                name,
                {**pod, "status": {**status, "conditions": conditions}},
                "status",
                trusted=True,
            )
        except ApiError:
            return
