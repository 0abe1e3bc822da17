"""A store and one of its controllers on an event loop of the test's own, for the controller tests that drive the
loop themselves instead of serving."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Protocol

from kubeflux.sim.apiserver.store import Store


class Controller(Protocol):
    def stop(self) -> None: ...


class ControllerLoop:
    """``store`` and the controller ``start`` makes on a new loop; :meth:`settle` runs the loop until the controller
    has handled what is queued, :meth:`close` stops the controller and closes the loop."""

    def __init__(self, store: Store, start: Callable[[Store, asyncio.AbstractEventLoop], Controller]) -> None:
        self.loop = asyncio.new_event_loop()
        self.store = store
        self.controller = start(store, self.loop)

    def settle(self) -> None:
        for _ in range(5):
            self.loop.run_until_complete(asyncio.sleep(0))

    def close(self) -> None:
        self.controller.stop()
        self.loop.close()
