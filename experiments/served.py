"""A workload replayed through the served cluster (what ``kubeflux cluster serve --workload … --until-done`` does),
from Python: the API server, its simulated kubelet and controllers, and the schedulers in the process."""

from __future__ import annotations

import time
from collections.abc import Sequence

from kubeflux.scheduler.interface import Scheduler
from kubeflux.scheduler.objects import Node
from kubeflux.sim.apiserver.clock import Clock, VirtualClock
from kubeflux.sim.apiserver.server import ApiServer
from kubeflux.sim.records import RunRecord
from kubeflux.sim.workloads.model import Workload

__all__ = ["replay_served"]


def replay_served(
    nodes: Sequence[Node],
    workload: Workload,
    schedulers: Sequence[Scheduler],
    primary: str,
    clock: Clock,
    *,
    label: str,
    timeout: float = 3600.0,
) -> tuple[ApiServer, RunRecord]:
    """Replay ``workload`` (fitted to ``nodes``) until it is done; returns the stopped server (its store still
    holds every object, for a look at what the API showed) and the run as ``kubeflux simulate`` reports it.
    Raises RuntimeError when it does not finish within ``timeout`` wall seconds."""
    server = ApiServer(
        nodes,
        kubelet=True,
        controllers=True,
        schedulers=list(schedulers),
        clock=clock,
        settle=0.0 if isinstance(clock, VirtualClock) else 0.05,
        workload=workload,
        primary=primary,
        until_done=True,
    ).start()
    try:
        if not server.join(timeout=timeout) or server.replay is None:
            raise RuntimeError(f"{workload.name} under {label}: the served run did not finish in {timeout:g} s")
        return server, server.replay.run_record(label, time.perf_counter() - server.started_at)
    finally:
        server.stop()
