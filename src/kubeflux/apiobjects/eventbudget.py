"""client-go's event spam filter (``EventSourceObjectSpamFilter``), as kube-scheduler's recorder applies it: each
object's events come from a bucket of ``burst`` tokens that refills one every ``refill_seconds``; an event with no
token left is dropped (the condition or status it reports is still written). The shells that write kubeflux's
decisions share it: ``kubeflux serve``'s binder (wall time) and the served cluster's in-process schedulers
(simulated time), so a pod whose wait is re-explained at every pass does not flood the cluster with events.
"""

from __future__ import annotations

import threading

__all__ = ["EventBudget"]


class EventBudget:
    """A token bucket per object key; :meth:`take` at time ``now`` (seconds, any clock that only goes forward)."""

    def __init__(self, burst: int = 25, refill_seconds: float = 300.0) -> None:
        if burst < 1:
            raise ValueError(f"burst must be at least 1, got {burst}")
        self.burst = burst
        self.refill_seconds = refill_seconds
        self._buckets: dict[str, tuple[float, float]] = {}
        """Key → (tokens, the time they were counted)."""
        self._lock = threading.Lock()

    def take(self, key: str, now: float) -> bool:
        """Whether an event about ``key`` may be written now (one token spent if so)."""
        with self._lock:
            tokens, then = self._buckets.get(key, (float(self.burst), now))
            if self.refill_seconds > 0:
                tokens = min(float(self.burst), tokens + max(0.0, now - then) / self.refill_seconds)
            else:
                tokens = float(self.burst)
            if tokens < 1.0:
                self._buckets[key] = (tokens, now)
                return False
            self._buckets[key] = (tokens - 1.0, now)
            return True

    def forget(self, key: str) -> None:
        """The object is gone."""
        with self._lock:
            self._buckets.pop(key, None)
