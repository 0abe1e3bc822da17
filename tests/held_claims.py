"""A lagging watch of ResourceClaims, made deterministic: :class:`HeldClaims` stands between serve's ResourceClaim
reflector and its loop, and holds every event of the chosen claims after the first one showing a pod in
``reservedFor`` (serve's own write), until :meth:`HeldClaims.release`. So serve's loop hears a Bind's claim write
from the watch, but not what follows it (the write taken back after a refused Binding, the writes of the next
tries), as on an API server whose watch lags seconds behind its writes. Shared by the served (simulated) cluster's
and the real cluster's tests."""

from __future__ import annotations

import threading
from typing import Any

from kubeflux.kube.reflector import EventQueue, RawEvent
from kubeflux.kube.serve import Serve

__all__ = ["HeldClaims", "claim_key"]


def claim_key(claim: dict[str, Any]) -> str:
    meta = claim.get("metadata") or {}
    return f"{meta.get('namespace')}/{meta.get('name')}"


class HeldClaims:
    """Installed on a :class:`Serve` not yet started (see the module docstring)."""

    def __init__(self, serve: Serve, *claims: str) -> None:
        self.claims = set(claims)
        """The ``namespace/name`` of the claims whose events are held once reserved."""
        self.reserved: dict[str, threading.Event] = {key: threading.Event() for key in claims}
        """Set once serve's loop has been given the claim's event showing a reservation."""
        self.held: list[RawEvent] = []
        self._lock = threading.Lock()
        self._released = False
        (reflector,) = [r for r in serve.reflectors if r.resource.kind == "ResourceClaim"]
        self.out: EventQueue = reflector.out
        reflector.out = self  # type: ignore[assignment]

    def put(self, event: RawEvent, stop: threading.Event) -> bool:
        key = claim_key(event.obj) if event.kind == "ResourceClaim" else ""
        with self._lock:
            if key in self.claims and self.reserved[key].is_set() and not self._released:
                self.held.append(event)
                return True
        if not self.out.put(event, stop):
            return False
        if key in self.claims and (event.obj.get("status") or {}).get("reservedFor"):
            self.reserved[key].set()
        return True

    def release(self) -> None:
        """Deliver the events held, in order, and hold no more."""
        with self._lock:
            self._released = True
            held, self.held = self.held, []
        never = threading.Event()
        for event in held:
            self.out.put(event, never)
