"""How fast kube-controller-manager's Job controller creates pods: its client's token bucket and its slow-start
batches, one model for both of kubeflux's Job controllers (the simulator's, :mod:`kubeflux.sim.jobcontroller`, and
``cluster serve``'s, :mod:`kubeflux.sim.apiserver.jobs`).

The real controller's client is rate-limited on the client side (client-go's ``flowcontrol`` token bucket, with
kube-controller-manager's ``--kube-api-qps=20 --kube-api-burst=30``): ``burst`` requests may go at once, then one
per ``1/qps`` seconds. A sync creates at most 500 pods (``MaxPodCreateDeletePerSync``) in slow-start batches of 1,
2, 4, …: a batch's requests are sent together (each waits for its token), the next batch starts when they all
returned, and a batch with a failed create ends the sync's creations. Measured on the real kube-controller-manager
v1.36.2, a Job of 1,200 pods gets about 25-30 pods at once, then 20 a second, with a gap of about a second after
each 500 (the next sync): 1,200 pods in about 60 s.

Modelled: the token bucket (full when first used, ``golang.org/x/time/rate``'s reservations) charged with pod
creations only, and the slow-start batches with no request latency. Not modelled: the controller's other requests
on the same client (Events, status writes, finalizer removals, deletions), so after the gap between two capped
syncs the model creates up to ``qps`` pods at once where the real controller, whose other requests took those
tokens, goes on at ``qps`` a second.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

__all__ = ["KCM_CLIENT_RATE", "ClientRate", "PacedCreates", "TokenBucket"]


@dataclass(frozen=True, slots=True)
class ClientRate:
    """A client's rate limit: ``qps`` requests a second after a ``burst`` of them."""

    qps: float
    burst: int

    def __post_init__(self) -> None:
        if not self.qps > 0 or self.burst < 1:
            raise ValueError(f"client rate: qps must be > 0 and burst >= 1, got {self.qps} and {self.burst}")


KCM_CLIENT_RATE: Final = ClientRate(20.0, 30)
"""kube-controller-manager's defaults, ``--kube-api-qps=20 --kube-api-burst=30``."""


class TokenBucket:
    """client-go's ``NewTokenBucketRateLimiter``: ``burst`` tokens, refilled at ``qps`` a second; full when first
    used. Times are seconds on the caller's clock."""

    __slots__ = ("_last", "_tokens", "rate")

    def __init__(self, rate: ClientRate) -> None:
        self.rate = rate
        self._tokens = float(rate.burst)
        self._last: float | None = None

    def reserve(self, now: float) -> float:
        """Take a token for a request made at ``now``: when that request goes (``now`` if a token was left, else
        when the tokens reserved before it have been refilled)."""
        rate = self.rate
        if self._last is not None and now > self._last:
            self._tokens = min(float(rate.burst), self._tokens + (now - self._last) * rate.qps)
        if self._last is None or now > self._last:
            self._last = now
        self._tokens -= 1.0
        return now if self._tokens >= 0 else now + -self._tokens / rate.qps


class PacedCreates:
    """One sync's ``count`` creations in slow-start batches, each request waiting for its token of ``bucket``
    (None: no limit, every batch at once); see the module docstring.

    ``create(i)`` makes the ``i``-th object and says whether it was created; ``at(when, resume)`` must call
    ``resume()`` at time ``when``; ``done(ok)`` is called once, when the creations ended (``ok``: every one was made;
    a batch with a failed one is the last). With no limit, or with tokens left for every request, everything happens
    inside :meth:`start`."""

    __slots__ = ("_at", "_clock", "_create", "_done", "_due", "_failed", "_next", "_size", "bucket", "count")

    def __init__(
        self,
        count: int,
        bucket: TokenBucket | None,
        clock: Callable[[], float],
        create: Callable[[int], bool],
        at: Callable[[float, Callable[[], None]], None],
        done: Callable[[bool], None],
    ) -> None:
        self.count, self.bucket = count, bucket
        self._clock, self._create, self._at, self._done = clock, create, at, done
        self._next = 0
        """The index of the next object to create."""
        self._size = 1
        self._failed = False
        self._due: deque[tuple[float, int]] = deque()
        """(when, index) of the current batch's requests still waiting for their tokens."""

    def start(self) -> None:
        self._run()

    def _run(self) -> None:
        now = self._clock()
        while True:
            while self._due and self._due[0][0] <= now:
                _, index = self._due.popleft()
                if not self._create(index):
                    self._failed = True
            if self._due:
                self._at(self._due[0][0], self._run)
                return
            if self._failed or self._next >= self.count:
                self._done(not self._failed)
                return
            size = min(self._size, self.count - self._next)
            self._size *= 2
            bucket = self.bucket
            self._due.extend((now if bucket is None else bucket.reserve(now), self._next + i) for i in range(size))
            self._next += size
