"""The cyclic garbage collector tuned for a long-running process that holds many objects (``kubeflux query``'s
graph, ``kubeflux serve``'s graph and caches, the benchmarks'; the simulator's loop has its own,
:mod:`kubeflux.sim.driver`). It imports nothing, so that ``kubeflux serve``'s command can turn the collector off
before its first heavy import and tune it once the graph is built without importing a module of the engine for it.
"""

from __future__ import annotations

import gc

__all__ = ["settle_gc"]


def settle_gc(*, collect: bool = True) -> None:
    """Tune the cyclic garbage collector for a long-running process that holds a large resource graph.

    Everything allocated so far (the graph, the planners) is frozen out of the collector's scans, and young
    objects are collected less often. The matcher keeps hundreds of thousands of small cached objects, and
    with the default thresholds full collections that rescan them cost more than the matching itself (2-3x on
    the 1,024-node benchmark). Call it once, after loading the graph; it affects the whole process.
    ``collect``: a full collection first, to free the cycles made so far rather than freeze them (0.5 s at
    5,000 nodes of 64 cores: ``kubeflux serve`` skips it, its start makes few).
    """
    if collect:
        gc.collect()
    gc.freeze()
    gc.set_threshold(50_000, 20, 20)
