"""A served cluster collects garbage less often while it runs, and gives the collector back as it found it."""

from __future__ import annotations

import gc
from pathlib import Path

from kubeflux.sim.apiserver.server import SERVED_GC_THRESHOLDS

from .conftest import start_server


def test_overlapping_servers_restore_the_thresholds_when_the_last_one_stops(tmp_path: Path) -> None:
    before = gc.get_threshold()
    first = start_server(tmp_path / "a")
    try:
        assert gc.get_threshold() == SERVED_GC_THRESHOLDS
        second = start_server(tmp_path / "b")
        first.stop()  # stopped before the second: the second still serves, with the served thresholds
        assert gc.get_threshold() == SERVED_GC_THRESHOLDS
        second.stop()
    finally:
        first.stop()
    assert gc.get_threshold() == before
