"""The allocation annotation (:mod:`kubeflux.scheduler.allocation`), the one owner of ``kubeflux.io/allocation``:
what a Bind writes, what a restarted kubeflux reads back, and how it refuses a text that is no allocation, naming
the field (the annotation is user-visible, so its text is hostile input)."""

from __future__ import annotations

import json
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kubeflux.match.writers import Placement
from kubeflux.scheduler.allocation import (
    ALLOCATION_ANNOTATION,
    Allocation,
    AllocationRecord,
    allocation_annotations,
    allocation_text,
    read_allocation,
    recorded_allocation,
)
from kubeflux.scheduler.core import KubefluxScheduler
from kubeflux.scheduler.interface import Bind
from kubeflux.scheduler.objects import CPU, MEMORY, Node, Pod
from kubeflux.scheduler.testing import Cluster, pod

HORIZON = 10**6
HUGE = 10**400
"""Seconds past the largest float (JSON and Python have integers of any size)."""


def _pod(cpu: int, memory: int) -> Pod:
    return Pod("default", "a", "uid-a", "kubeflux", requests={CPU: cpu, MEMORY: memory})


def _allocation(placement: Placement | None = None, **fields: int) -> Allocation:
    return Allocation("uid-a", "default/a", "w1", True, placement=placement, **fields)


# ---------------------------------------------------------------------------------------------------- writing


def test_a_bind_writes_compact_json_with_sorted_keys_of_every_field() -> None:
    placed = _allocation(Placement("w1", ("core0", "core1"), ("gpu0",)), jobid=7, start=100, duration=60)
    text = allocation_text(_pod(1500, 2**30), placed)
    assert text == (
        '{"cores":["core0","core1"],"cpu":1500,"duration":60,"gpus":["gpu0"],"jobid":7,"memory":1073741824,'
        '"node":"w1","start":100}'
    )
    assert allocation_annotations(pod("a", 1500), placed) == {
        ALLOCATION_ANNOTATION: allocation_text(pod("a", 1500), placed)
    }


def test_a_pod_the_engine_holds_nothing_of_writes_empty_core_and_gpu_lists() -> None:
    record = json.loads(allocation_text(pod("a", 500), _allocation(start=3, duration=9)))
    assert record == {
        "cores": [],
        "gpus": [],
        "cpu": 500,
        "memory": 0,
        "jobid": 0,
        "node": "w1",
        "start": 3,
        "duration": 9,
    }


def test_names_beyond_ascii_are_written_as_they_are_and_read_back_the_same() -> None:
    placed = _allocation(Placement("w1", ("cœur-0",), ("gpu-é",)), start=0, duration=5)
    text = allocation_text(pod("a", 1000), placed)
    assert "cœur-0" in text and "\\u" not in text
    assert read_allocation(text, HORIZON) == AllocationRecord(0, 5, ("cœur-0",), ("gpu-é",))


def test_a_memory_request_past_64_bits_is_written_exactly() -> None:
    """orjson refuses integers past 64 bits; the writer falls back to the same compact text by :mod:`json`."""
    big = Pod("default", "b", "uid-b", "kubeflux", requests={CPU: 1000, MEMORY: 2**66})
    text = allocation_text(big, _allocation(start=0, duration=60))
    assert json.loads(text)["memory"] == 2**66
    assert text == json.dumps(json.loads(text), sort_keys=True, separators=(",", ":"))


def test_an_allocation_asking_memory_past_64_bits_is_still_written_exactly() -> None:
    huge = Node("w1", uid="w1", allocatable={CPU: 4000, MEMORY: 2**70})
    cluster = Cluster(KubefluxScheduler(), [huge])
    big = Pod("default", "b", "uid-b", "kubeflux", requests={CPU: 1000, MEMORY: 2**66})
    cluster.add(pod("a", 1000), big)
    records = {d.pod: json.loads(d.annotations[ALLOCATION_ANNOTATION]) for d in cluster.run() if isinstance(d, Bind)}
    assert records["default/b"]["memory"] == 2**66 and records["default/a"]["memory"] == 0
    assert list(records["default/b"]) == sorted(records["default/b"])


def test_an_allocation_names_the_placement_it_was_made_with() -> None:
    placement = Placement("w1", ("core3",))
    made = _allocation(placement, jobid=4, start=1, duration=2)
    assert made.placement is placement and made.named is placement
    assert (made.uid, made.key, made.node, made.own, made.jobid, made.start, made.duration) == (
        "uid-a",
        "default/a",
        "w1",
        True,
        4,
        1,
        2,
    )


# ---------------------------------------------------------------------------------------------------- reading


@pytest.mark.parametrize(
    ("raw", "record"),
    [
        pytest.param('{"start": 0, "duration": 60}', AllocationRecord(0, 60, (), ()), id="no-cores-or-gpus"),
        pytest.param('{"start": 5.0, "duration": 60.0}', AllocationRecord(5, 60, (), ()), id="whole-floats"),
        pytest.param(
            f'{{"start": {HORIZON - 1}, "duration": 1}}', AllocationRecord(HORIZON - 1, 1, (), ()), id="ends-at-horizon"
        ),
        pytest.param(
            '{"start": 0, "duration": 60, "cores": ["core0"], "gpus": ["gpu1"], "node": "w1", "jobid": 3, "x": []}',
            AllocationRecord(0, 60, ("core0",), ("gpu1",)),
            id="other-fields-ignored",
        ),
    ],
)
def test_an_allocation_text_reads_as_its_record(raw: str, record: AllocationRecord) -> None:
    assert read_allocation(raw, HORIZON) == record


BAD = [
    ("not-json", "{start: 0", "not JSON"),
    ("deeply-nested", "[" * 100_000, "not JSON"),
    ("not-an-object", "[1, 2, 3]", "expected a JSON object, got list"),
    ("no-start", '{"duration": 60}', "start: expected a whole number of seconds, got None"),
    ("start-a-string", '{"start": "0", "duration": 60}', "start: expected a whole number of seconds, got '0'"),
    ("start-a-boolean", '{"start": true, "duration": 60}', "start: expected a whole number of seconds, got True"),
    ("start-a-list", '{"start": [0], "duration": 60}', "start: expected a whole number of seconds"),
    ("start-a-fraction", '{"start": 1.5, "duration": 60}', "start: expected a whole number of seconds, got 1.5"),
    ("start-nan", '{"start": NaN, "duration": 60}', "start: expected a whole number of seconds, got nan"),
    ("start-infinite", '{"start": 1e400, "duration": 60}', "start: expected a whole number of seconds, got inf"),
    ("start-past-any-float", json.dumps({"start": HUGE, "duration": 60}), "start: expected a whole number of seconds"),
    ("start-negative", '{"start": -5, "duration": 60}', "start: must be between 0 and the graph's horizon"),
    ("start-past-horizon", '{"start": 1e30, "duration": 60}', "start: must be between 0 and the graph's horizon"),
    ("no-duration", '{"start": 0}', "duration: expected a whole number of seconds, got None"),
    ("duration-zero", '{"start": 0, "duration": 0}', "duration: must be between 1 and the graph's horizon"),
    ("duration-past-horizon", f'{{"start": 0, "duration": {HORIZON + 1}}}', "duration: must be between 1"),
    ("ends-past-horizon", f'{{"start": {HORIZON}, "duration": 1}}', f"is past the graph's horizon {HORIZON}"),
    ("cores-not-a-list", '{"start": 0, "duration": 60, "cores": "core0"}', "cores: expected a list of vertex names"),
    ("core-names-not-strings", '{"start": 0, "duration": 60, "cores": [0, 1]}', "cores: expected a list of vertex"),
    ("gpus-not-a-list", '{"start": 0, "duration": 60, "gpus": {"gpu0": 1}}', "gpus: expected a list of vertex names"),
    ("gpu-names-not-strings", '{"start": 0, "duration": 60, "gpus": [null]}', "gpus: expected a list of vertex"),
]


@pytest.mark.parametrize(("raw", "says"), [case[1:] for case in BAD], ids=[case[0] for case in BAD])
def test_a_text_that_is_no_allocation_is_refused_naming_what_is_wrong(raw: str, says: str) -> None:
    with pytest.raises(ValueError) as refused:
        read_allocation(raw, HORIZON)
    assert says in str(refused.value)


@pytest.mark.parametrize(("raw", "says"), [case[1:] for case in BAD[::4]], ids=[case[0] for case in BAD[::4]])
def test_a_pods_bad_annotation_is_refused_naming_the_annotation(raw: str, says: str) -> None:
    bad = pod("a", 1000, annotations={ALLOCATION_ANNOTATION: raw})
    with pytest.raises(ValueError) as refused:
        recorded_allocation(bad, HORIZON)
    message = str(refused.value)
    assert message.startswith(f"metadata.annotations[{ALLOCATION_ANNOTATION}]: ") and says in message


def test_a_pod_without_the_annotation_has_no_recorded_allocation() -> None:
    assert recorded_allocation(pod("a", 1000, annotations={"other": "x"}), HORIZON) is None


def test_a_pods_annotation_reads_as_its_record() -> None:
    text = allocation_text(pod("a", 1000), _allocation(Placement("w1", ("core1",)), start=7, duration=8))
    recorded = recorded_allocation(pod("a", 1000, annotations={ALLOCATION_ANNOTATION: text}), HORIZON)
    assert recorded == AllocationRecord(7, 8, ("core1",), ())


# ---------------------------------------------------------------------------------------------------- round trip

names = st.lists(st.text(min_size=1, max_size=12), max_size=6).map(tuple)


@given(
    start=st.integers(0, HORIZON - 1),
    length=st.integers(1, HORIZON),
    cores=names,
    gpus=names,
    cpu=st.integers(0, 2**40),
    memory=st.integers(0, 2**70),
    jobid=st.integers(0, sys.maxsize),
)
def test_what_a_bind_writes_a_restarted_kubeflux_reads_back(
    start: int, length: int, cores: tuple[str, ...], gpus: tuple[str, ...], cpu: int, memory: int, jobid: int
) -> None:
    duration = min(length, HORIZON - start)
    placed = _allocation(Placement("w1", cores, gpus), jobid=jobid, start=start, duration=duration)
    text = allocation_text(_pod(cpu, memory), placed)
    assert read_allocation(text, HORIZON) == AllocationRecord(start, duration, cores, gpus)
    record = json.loads(text)
    assert (record["cpu"], record["memory"], record["jobid"], record["node"]) == (cpu, memory, jobid, "w1")
    # names beyond ASCII are written as they are, by orjson and past 64 bits by the json fallback alike
    assert text == json.dumps(record, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
