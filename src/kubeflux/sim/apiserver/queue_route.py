"""``GET /kubeflux/queue`` on ``kubeflux cluster serve``: the in-process schedulers' queues, one entry per waiting
Job, PodGroup or lone pod, as ``serve``'s operations port answers them (:func:`kubeflux.apiobjects.queuejobs.
queue_by_job`; what ``kubeflux queue`` shows).

The schedulers run on the server's event loop, as the request does, so the snapshot is taken between two of their
passes. A cluster served without in-process schedulers answers an empty list of schedulers (an outside
``kubeflux serve`` shows its own queue on its operations port).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kubeflux.apiobjects.queuejobs import QUEUE_PATH, queue_by_job
from kubeflux.scheduler.interface import Scheduler

__all__ = ["QUEUE_PATH", "QueueRoute"]


class QueueRoute:
    """Answers :data:`QUEUE_PATH` from the schedulers it is given once they run (:meth:`serve`)."""

    def __init__(self) -> None:
        self.schedulers: Sequence[Scheduler] = ()

    def serve(self, schedulers: Sequence[Scheduler]) -> None:
        self.schedulers = schedulers

    def answer(self, method: str, now: float) -> tuple[int, dict[str, Any]]:
        """The status code and JSON body for a request of ``method``."""
        if method != "GET":
            return 405, {"error": f"{QUEUE_PATH} answers GET only"}
        return 200, queue_by_job(self.schedulers, now, "cluster serve")
