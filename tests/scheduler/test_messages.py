"""A watch event's type and a pod's phase are read by dictionary (every event goes through them): the enum's members
for their texts, the enum's own refusal for any other."""

from __future__ import annotations

import pytest

from kubeflux.scheduler.messages import EventKind, event_kind
from kubeflux.scheduler.phase import PodPhase, pod_phase


@pytest.mark.parametrize("kind", list(EventKind))
def test_event_kind_reads_every_type(kind: EventKind) -> None:
    assert event_kind(kind.value) is kind


@pytest.mark.parametrize("text", ["BOOKMARK", "ERROR", "added", "", "MODIFIED "])
def test_event_kind_refuses_another_type(text: str) -> None:
    with pytest.raises(ValueError, match="EventKind"):
        event_kind(text)


@pytest.mark.parametrize("phase", list(PodPhase))
def test_pod_phase_reads_every_phase(phase: PodPhase) -> None:
    assert pod_phase(phase.value) is phase


@pytest.mark.parametrize("text", ["Sleeping", "running", ""])
def test_pod_phase_refuses_another_phase(text: str) -> None:
    with pytest.raises(ValueError, match="PodPhase"):
        pod_phase(text)
