"""Suite-wide hooks: tests that patch the engine's internals run on the pure-Python engine only.

``make`` compiles the engine with mypyc (see ``kubeflux._native``) and the suite runs against it, as users do. A
compiled module's functions and classes cannot be patched (``mock.patch.object(Traverser, ...)``, a module constant
that compiled code reads as a C constant), so a test that does so carries ``@pytest.mark.pure_engine``: it is skipped
when the engine is compiled, and ``make test`` runs those tests again with ``KUBEFLUX_PURE=1``.
"""

from __future__ import annotations

import pytest

import kubeflux.match


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not kubeflux.match.COMPILED:
        return
    skip = pytest.mark.skip(reason="patches the engine's internals: run with KUBEFLUX_PURE=1 (make test does)")
    for item in items:
        if item.get_closest_marker("pure_engine"):
            item.add_marker(skip)
