"""Leader election on a ``coordination.k8s.io/v1`` Lease, as client-go's ``leaderelection`` package does it.

Two or more replicas of ``serve`` run; one holds the Lease and schedules, the others wait. The rules are
client-go's, so that kubeflux behaves like kube-scheduler under ``--leader-elect``:

* a replica *acquires* the Lease when it does not exist, when it holds it already, or when its holder has not
  renewed it for ``leaseDurationSeconds`` — measured on the replica's own monotonic clock from the moment it last
  saw the Lease change, never by comparing the holder's timestamps with its own (clocks of two machines differ);
* every write carries the Lease's resourceVersion: of two replicas taking over at once, one gets 409 Conflict;
* the leader renews every ``retryPeriodSeconds``; when it has not renewed for ``renewDeadlineSeconds`` it has lost
  the Lease and must stop scheduling at once (``on_stopped``; the command exits so that its pod restarts, as
  kube-scheduler does) — the deadline is shorter than the lease, so it stops before another replica may start;
* a replica that stops cleanly releases the Lease (empty holder), so the next one takes over at once.

A new leader starts from nothing: it lists the cluster and recovers every allocation from the pods' annotations.
"""

from __future__ import annotations

import logging
import socket
import threading
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import orjson
import urllib3
from kubernetes import client

__all__ = ["LeaderElector"]

log = logging.getLogger("kubeflux.serve")
Object = dict[str, Any]


def _micro_time() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _json(response: Any) -> Object:
    """The body of a raw (``_preload_content=False``) response; its connection goes back to the pool."""
    body: Object = orjson.loads(response.data)
    response.release_conn()
    return body


def _lease(body: Object) -> client.V1Lease:
    lease = client.V1Lease.from_dict(body)
    if lease is None:
        raise ValueError("not a Lease")
    return lease


class LeaderElector:
    """Campaigns for the Lease ``namespace/name`` as ``identity`` (see the module docstring)."""

    def __init__(
        self,
        api: client.ApiClient,
        namespace: str,
        name: str,
        *,
        identity: str | None = None,
        lease_seconds: float = 15.0,
        renew_seconds: float = 10.0,
        retry_seconds: float = 2.0,
    ) -> None:
        if not retry_seconds < renew_seconds < lease_seconds:
            raise ValueError("leader election: retryPeriod < renewDeadline < leaseDuration is required")
        self.leases = client.CoordinationV1Api(api)
        self.namespace, self.name = namespace, name
        self.identity = identity or f"{socket.gethostname()}_{uuid.uuid4()}"
        self.lease_seconds, self.renew_seconds, self.retry_seconds = lease_seconds, renew_seconds, retry_seconds
        self.leading = threading.Event()
        self._stop = threading.Event()
        self._observed: tuple[str, str] | None = None
        """(holder, renewTime) of the Lease as last seen, and when (monotonic) it was seen to change."""
        self._observed_at = 0.0
        self._release_on_stop = True
        self._timeout = (min(5.0, retry_seconds * 2), renew_seconds)
        """A request may not outlast the renew deadline: a leader cut off must notice in time."""

    def stop(self, *, release: bool = True) -> None:
        """End the campaign; a leader steps down and, when ``release``, releases the Lease (a standby takes over
        at once) — without, the Lease stays until it expires, as when a leader dies."""
        self._release_on_stop = release
        self._stop.set()

    @property
    def stopped(self) -> bool:
        return self._stop.is_set()

    # ------------------------------------------------------------------ the campaign

    def run(self, on_started: Callable[[], None], on_stopped: Callable[[], None]) -> None:
        """Wait for the Lease, lead (``on_started``) while it is renewed, and return after ``on_stopped`` when it is
        lost or :meth:`stop` is called."""
        while not self._stop.is_set():
            if self._try():
                break
            self._stop.wait(self.retry_seconds)
        if self._stop.is_set():
            return
        log.info("leader election: %s leads (lease %s/%s)", self.identity, self.namespace, self.name)
        self.leading.set()
        on_started()
        renewed = time.monotonic()
        while not self._stop.wait(self.retry_seconds):
            if self._try():
                renewed = time.monotonic()
            elif time.monotonic() - renewed >= self.renew_seconds:
                log.error("leader election: %s could not renew for %gs: lost", self.identity, self.renew_seconds)
                break
        self.leading.clear()
        on_stopped()
        if self._stop.is_set() and self._release_on_stop:
            self._release()

    def _try(self) -> bool:
        """One attempt to acquire or renew; whether this replica holds the Lease now."""
        try:
            current = self._read()
            now = time.monotonic()
            if current is None:
                return self._write(None, self._record(None))
            spec = current.get("spec") or {}
            seen = (str(spec.get("holderIdentity") or ""), str(spec.get("renewTime") or ""))
            if seen != self._observed:
                self._observed, self._observed_at = seen, now
            holder = seen[0]
            duration = float(spec.get("leaseDurationSeconds") or self.lease_seconds)
            if holder and holder != self.identity and now < self._observed_at + duration:
                return False
            return self._write(current, self._record(spec))
        except (client.ApiException, urllib3.exceptions.HTTPError, OSError, ValueError) as exc:
            log.warning("leader election: %s", exc)
            return False

    def _record(self, spec: Object | None) -> Object:
        """The spec to write for this replica to hold the Lease whose spec is ``spec`` (None: it does not exist).
        As client-go counts them, taking over from any other holder — one that released it (empty) included — is a
        transition; creating the Lease is not."""
        existing = spec is not None
        spec = dict(spec or {})
        stamp = _micro_time()
        if spec.get("holderIdentity") != self.identity:
            spec["acquireTime"] = stamp
            spec["leaseTransitions"] = int(spec.get("leaseTransitions") or 0) + (1 if existing else 0)
        spec["holderIdentity"] = self.identity
        spec["leaseDurationSeconds"] = max(1, round(self.lease_seconds))
        spec["renewTime"] = stamp
        return spec

    def _read(self) -> Object | None:
        try:
            response = self.leases.read_namespaced_lease(
                self.name, self.namespace, _preload_content=False, _request_timeout=self._timeout
            )
        except client.ApiException as exc:
            if exc.status == 404:
                return None
            raise
        return _json(response)

    def _write(self, current: Object | None, spec: Object) -> bool:
        """Create the Lease or replace ``current`` (its resourceVersion a precondition); False on a lost race."""
        try:
            if current is None:
                body: Object = {
                    "apiVersion": "coordination.k8s.io/v1",
                    "kind": "Lease",
                    "metadata": {"name": self.name, "namespace": self.namespace},
                    "spec": spec,
                }
                lease = _lease(body)
                response = self.leases.create_namespaced_lease(
                    self.namespace, lease, _preload_content=False, _request_timeout=self._timeout
                )
            else:
                lease = _lease({**current, "spec": spec})
                response = self.leases.replace_namespaced_lease(
                    self.name, self.namespace, lease, _preload_content=False, _request_timeout=self._timeout
                )
        except client.ApiException as exc:
            if exc.status == 409:  # another replica wrote first
                return False
            raise
        written = _json(response)
        written_spec = written.get("spec") or {}
        self._observed = (str(written_spec.get("holderIdentity") or ""), str(written_spec.get("renewTime") or ""))
        self._observed_at = time.monotonic()
        return True

    def _release(self) -> None:
        try:
            current = self._read()
            if current is None or (current.get("spec") or {}).get("holderIdentity") != self.identity:
                return
            spec = {**current["spec"], "holderIdentity": "", "leaseDurationSeconds": 1, "renewTime": _micro_time()}
            self._write(current, spec)
            log.info("leader election: %s released the lease", self.identity)
        except (client.ApiException, urllib3.exceptions.HTTPError, OSError, ValueError) as exc:
            log.warning("leader election: the lease was not released: %s", exc)
