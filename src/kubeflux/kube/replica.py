"""One replica of ``serve``: the scheduling loop, the operations endpoints, and — when configured — leader election.

Without leader election the replica schedules from the start. With it, the replica serves its health endpoints
(a standby is ready) and campaigns for the Lease; once elected it creates a fresh :class:`Serve`, which lists the
cluster and recovers every allocation from the pods' annotations before it places anything, so a replica taking
over from a dead leader neither double-binds nor leaks. A leader that loses the Lease stops scheduling at once and
the replica ends with :attr:`Replica.lost` set (the command then exits 1, and Kubernetes restarts the pod, as with
kube-scheduler).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from kubernetes import client

from kubeflux.kube.config import ServeConfig
from kubeflux.kube.leader import LeaderElector
from kubeflux.kube.operations import OperationsServer, unreachable
from kubeflux.kube.serve import Serve, choose_clock
from kubeflux.wallclock import WallClock

__all__ = ["Replica"]

log = logging.getLogger("kubeflux.serve")


class Replica:
    """``serve`` as deployed (see the module docstring). :meth:`start` returns at once; :meth:`stop` drains."""

    def __init__(
        self,
        config: ServeConfig,
        api: client.ApiClient,
        *,
        identity: str | None = None,
        tune_gc: bool = False,
        connect: Callable[[], client.ApiClient] | None = None,
    ) -> None:
        self.config, self.api = config, api
        self.clock: WallClock = choose_clock(api, config.clock)
        election = config.leader_election
        self.elector: LeaderElector | None = None
        if election.enabled:
            self.elector = LeaderElector(
                api,
                election.namespace,
                election.name,
                identity=identity,
                lease_seconds=election.lease_seconds,
                renew_seconds=election.renew_seconds,
                retry_seconds=election.retry_seconds,
            )
        self.serve = Serve(config, api, clock=self.clock, tune_gc=tune_gc, connect=connect)
        self.serve.leading = self.elector is None
        self.operations: OperationsServer | None = None
        if config.operations.enabled:
            ops = config.operations
            self.operations = OperationsServer(
                ops.address,
                ops.port,
                self.serve.metrics,
                lambda: self.serve.alive,
                lambda: self.serve.not_ready() or unreachable(self.serve.reflectors, ops.unreachable_seconds),
                lambda: self.serve.queue_document(),
            )
        self.lost = False
        self.ended = threading.Event()
        self._campaign: threading.Thread | None = None

    def start(self) -> Replica:
        if self.operations is not None:
            self.operations.start()
        if self.elector is None:
            self.serve.start()
            return self
        elector = self.elector

        def campaign() -> None:
            elector.run(self._lead, self._step_down)
            if not elector.stopped:
                self.lost = True
            self.ended.set()

        self._campaign = threading.Thread(target=campaign, daemon=True, name="kubeflux-leader-election")
        self._campaign.start()
        return self

    def _lead(self) -> None:
        self.serve.leading = True
        self.serve.start()

    def _step_down(self) -> None:
        self.serve.leading = False
        self.serve.stop()

    def stop(self, *, release: bool = True) -> None:
        """Stop scheduling (writes already decided are finished) and, when elected, release the Lease."""
        if self.elector is not None:
            self.elector.stop(release=release)
            if self._campaign is not None:
                self._campaign.join()
        self.serve.stop()
        if self.operations is not None:
            self.operations.stop()
        self.ended.set()
