"""Suite-wide hooks: tests that patch the engine's internals run on the pure-Python engine only.

``make`` compiles the engine with mypyc (see ``kubeflux._native``) and the suite runs against it, as users do. A
compiled module's functions and classes cannot be patched (``mock.patch.object(Traverser, ...)``, a module constant
that compiled code reads as a C constant), so a test that does so carries ``@pytest.mark.pure_engine``: it is skipped
when the engine is compiled, and ``make test`` runs those tests again with ``KUBEFLUX_PURE=1``.

Property tests have no deadline (Hypothesis's default fails an example slower than 200 ms): a test never fails
because the machine was slow, as on a loaded two-core CI machine whose first examples also import and compile.

After every test the empty list that bulk-made leaves share (``kubeflux.resources.graph._NONE``) is still empty:
a write into one leaf's ``out`` or ``children`` that bypassed :class:`~kubeflux.resources.graph.Graph` would give
every leaf of every graph in the process that edge, silently. Nor is the placeholder in the slots of reserved
leaves (``graph._RESERVED``, ``graph._RESERVED_EDGE``: :meth:`~kubeflux.resources.graph.Graph.reserve_leaves`)
changed: a reader that wrote into a leaf not made would write into every graph's reserved slots.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from hypothesis import settings

import kubeflux.match
from kubeflux.resources import graph

settings.register_profile("kubeflux", deadline=None)
settings.load_profile("kubeflux")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not kubeflux.match.COMPILED:
        return
    skip = pytest.mark.skip(reason="patches the engine's internals: run with KUBEFLUX_PURE=1 (make test does)")
    for item in items:
        if item.get_closest_marker("pure_engine"):
            item.add_marker(skip)


@pytest.fixture(autouse=True)
def _leaves_share_nothing_written() -> Iterator[None]:
    yield
    assert not graph._NONE, f"a leaf's shared edge list was written in place: {graph._NONE[:10]}"
    held = graph._RESERVED
    assert (held.uid, held.type, held.name, held.id, held.parent, held.removed) == (
        -1,
        "<reserved>",
        "<reserved>",
        0,
        -1,
        True,
    )
    assert not held.properties and not held.paths and held.status == graph.Status.UP, "the reserved slot was written"
    edge = graph._RESERVED_EDGE
    assert (edge.source, edge.target, edge.subsystem) == (-1, -1, "<reserved>"), "a reserved edge was written"
