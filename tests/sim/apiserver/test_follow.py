"""The in-process components' way of following the store: events in batches on the loop, busy until read."""

from __future__ import annotations

import asyncio
from typing import Any

from kubeflux.sim.apiserver.follow import Follower
from kubeflux.sim.apiserver.resources import default_registry
from kubeflux.sim.apiserver.store import Store
from kubeflux.sim.apiserver.watch import WatchEvent


def _config(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {}}


def test_events_are_read_in_one_batch_per_collection_then_after_runs_once() -> None:
    store = Store(default_registry())
    configs = store.registry.find("", "v1", "configmaps")
    secrets = store.registry.find("", "v1", "secrets")
    assert configs is not None and secrets is not None
    seen: list[str] = []

    def config_event(type_: str, event: WatchEvent) -> None:
        seen.append(f"{type_} configmap {event.obj['metadata']['name']}")

    def secret_event(type_: str, event: WatchEvent) -> None:
        seen.append(f"{type_} secret {event.obj['metadata']['name']}")

    async def run() -> bool:
        loop = asyncio.get_running_loop()
        follower = Follower(
            store, loop, [(configs, config_event), (secrets, secret_event)], lambda: seen.append("after")
        )
        assert not follower.busy
        store.create(secrets, "default", {"metadata": {"name": "s"}, "data": {}})
        store.create(configs, "default", _config("a"))
        store.delete(configs, "default", "a")
        busy = follower.busy and seen == []  # queued, not read yet: the virtual clock must wait
        await asyncio.sleep(0)
        follower.stop()
        store.create(configs, "default", _config("b"))  # no longer followed
        await asyncio.sleep(0)
        return busy and not follower.busy

    assert asyncio.run(run())
    assert seen == ["ADDED configmap a", "DELETED configmap a", "ADDED secret s", "after"]
