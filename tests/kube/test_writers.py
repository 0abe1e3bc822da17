"""The binder's writer threads (kubeflux.kube.writers): what goes together, and the events' backlog rule."""

from __future__ import annotations

import threading

from kubeflux.kube.keepalive import PIPELINE
from kubeflux.kube.writers import Write, Writers


def _writers(events_backlog: int) -> tuple[Writers[int], list[list[int]]]:
    batches: list[list[int]] = []

    def send_together(writes: list[Write[int]]) -> None:
        batches.append([write.together for write in writes if write.together is not None])
        for write in writes:
            writers.finished(write)

    writers: Writers[int] = Writers(1, send_together, events_quiet=3600.0, events_backlog=events_backlog)
    return writers, batches


def _burst(writers: Writers[int], events: int) -> None:
    """``events`` events about Bindings done queued while a Binding holds the one thread, then one more Binding: the
    burst has ended only just now."""
    gate = threading.Event()
    writers.submit("pod", "g", gate.wait, "bind")
    for i in range(events):
        writers.submit("pod", f"u{i}", lambda: None, "after", together=i)
    writers.submit("pod", "b", lambda: None, "bind")
    gate.set()


def test_events_beyond_the_backlog_go_between_the_bindings_at_most_a_pipeline_at_a_time() -> None:
    writers, batches = _writers(events_backlog=10)
    _burst(writers, 100)
    assert not writers.drain(0.5)  # the 9 below the backlog wait for the burst to be quiet
    assert [event for batch in batches for event in batch] == list(range(91))  # in order, each once
    assert all(len(batch) <= PIPELINE for batch in batches)
    writers.close(5.0)


def test_while_bindings_come_only_the_oldest_beyond_the_backlog_go() -> None:
    writers, batches = _writers(events_backlog=10)
    _burst(writers, 25)
    assert writers.drain(0.5) is False  # the events below the backlog wait for the burst to be quiet
    assert [event for batch in batches for event in batch] == list(range(16))  # 25 - 16 = 9 wait, below 10
    writers.close(5.0)
    assert [event for batch in batches for event in batch] == list(range(16))  # closing: the rest dropped unsent
