"""The fit index (:mod:`kubeflux.scheduler.fit`): what keeps a scheduling pass cheap stays exact — counts kept
incrementally from the change log equal a count afresh, and only the changed nodes are counted again."""

from __future__ import annotations

import random

from kubeflux.scheduler.fit import FitIndex
from kubeflux.scheduler.testing import node, pod


def test_copies_kept_from_the_change_log_equal_a_count_afresh_and_cost_only_the_changed_nodes() -> None:
    rng = random.Random(3)
    nodes = {f"n{i}": node(f"n{i}", cores=4) for i in range(30)}
    free = {name: 4000 for name in nodes}  # millicores free on each node
    two = pod("p", 2000)
    index = FitIndex()
    static = index.static(two, list(nodes), nodes, 0)

    def shortfall(name: str, _pod: object) -> list[str]:
        return [] if free[name] >= 2000 else ["Insufficient cpu"]

    asked: list[str] = []

    def count(name: str) -> int:
        asked.append(name)
        return free[name] // 2000

    entry = index.copies(index.fit(two, static, shortfall), count)
    assert sorted(asked) == sorted(nodes) and entry.copies_total == 2 * len(nodes)  # the first count: every node
    for _ in range(200):
        changed = rng.sample(sorted(nodes), rng.randint(0, 4))
        for name in changed:
            free[name] = rng.choice([0, 1000, 2000, 3000, 4000])
            index.changed(name)
        asked.clear()
        entry = index.copies(index.fit(two, static, shortfall), count)
        assert entry.copies_total == sum(free[name] // 2000 for name in nodes)
        assert entry.copies == {name: free[name] // 2000 for name in nodes if free[name] >= 2000}
        # counted again: only the changed nodes that may take the pod now
        assert sorted(asked) == sorted(name for name in changed if free[name] >= 2000)
