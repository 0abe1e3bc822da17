"""MultiPlanner keeps one time axis for all its resource types; these property tests hold it to the answers of
the design it replaced, one independent :class:`Planner` per type (``PerTypePlanners`` below, the oracle): the same
values, errors (class, errno, message), span ids, per-type points and avail-time iterations, whatever the order of
adds, removals, partial releases, total changes and type changes."""

from __future__ import annotations

import copy
import errno as _errno
from collections.abc import Callable, Mapping, Sequence
from typing import Any
from unittest.mock import patch

from hypothesis import given, settings
from hypothesis import strategies as st

from kubeflux.match import timeline
from kubeflux.match.multiplanner import MultiPlanner
from kubeflux.match.planner import (
    Planner,
    PlannerError,
    PlannerInvalidError,
    PlannerRangeError,
    UnknownSpanError,
)

Totals = Mapping[str, int] | Sequence[tuple[str, int]]
Requests = Sequence[int] | Mapping[str, int]


def _pairs(totals: Totals) -> list[tuple[str, int]]:
    pairs = list(totals.items()) if isinstance(totals, Mapping) else list(totals)
    seen: set[str] = set()
    for resource_type, total in pairs:
        if resource_type in seen:
            raise PlannerInvalidError(f"resource type {resource_type!r} given twice")
        seen.add(resource_type)
        if total < 0:
            raise PlannerRangeError(f"total of {resource_type} must be >= 0, got {total}")
    return pairs


class PerTypePlanners:
    """The former MultiPlanner (the oracle): a Planner per type, every span added to each of them."""

    def __init__(self, totals: Totals, base: int, duration: int) -> None:
        if duration < 1:
            raise PlannerInvalidError(f"planner duration must be >= 1, got {duration}")
        pairs = _pairs(totals)
        self.base, self.duration = base, duration
        self.planners = [Planner(n, base, duration, t) for t, n in pairs]
        self.spans: dict[int, dict[str, int]] = {}
        self.span_counter = 0
        self.iter: tuple[int, int, dict[str, int]] | None = None

    @property
    def resource_types(self) -> tuple[str, ...]:
        return tuple(p.resource_type for p in self.planners)

    def planner(self, resource_type: str) -> Planner:
        for p in self.planners:
            if p.resource_type == resource_type:
                return p
        raise PlannerInvalidError(f"no resource type {resource_type!r}")

    def resource_total(self, resource_type: str) -> int:
        return self.planner(resource_type).total

    def span_ids(self) -> list[int]:
        return sorted(self.spans)

    def span_count(self) -> int:
        return len(self.spans)

    def _span(self, span_id: int) -> dict[str, int]:
        if span_id not in self.spans:
            raise UnknownSpanError(span_id, _errno.ENOENT)
        return self.spans[span_id]

    def vector(self, requests: Requests) -> list[int]:
        types = self.resource_types
        if isinstance(requests, Mapping):
            unknown = set(requests) - set(types)
            if unknown:
                raise PlannerInvalidError(f"unknown resource types {sorted(unknown)}")
            return [requests.get(t, 0) for t in types]
        if len(requests) != len(types):
            raise PlannerInvalidError(f"{len(requests)} requests for {len(types)} resource types")
        return list(requests)

    def span_planned(self, span_id: int, resource_type: str) -> int:
        planner = self.planner(resource_type)
        sub = self._span(span_id).get(resource_type)
        return 0 if sub is None else planner.span_resources(sub)

    def add_span(self, start: int, duration: int, requests: Requests) -> int:
        vector = self.vector(requests)
        span_id = self.span_counter
        self.span_counter += 1
        subs: dict[str, int] = {}
        try:
            for planner, request in zip(self.planners, vector, strict=True):
                subs[planner.resource_type] = planner.add_span(start, duration, request)
        except PlannerError:
            for resource_type, sub in subs.items():
                self.planner(resource_type).rem_span(sub)
            raise
        self.spans[span_id] = subs
        return span_id

    def rem_span(self, span_id: int) -> None:
        for resource_type, sub in self._span(span_id).items():
            self.planner(resource_type).rem_span(sub)
        del self.spans[span_id]

    def reduce_span(self, span_id: int, reductions: Mapping[str, int]) -> bool:
        subs = self._span(span_id)
        for resource_type, amount in reductions.items():
            if amount < 0:
                raise PlannerRangeError(f"cannot release {amount} {resource_type}")
            if resource_type in subs:
                planned = self.planner(resource_type).span_resources(subs[resource_type])
                if amount > planned:
                    raise PlannerInvalidError(f"cannot release {amount} {resource_type} of span {span_id} ({planned})")
        for p in self.planners:
            sub = subs.get(p.resource_type)
            if sub is not None and p.reduce_span(sub, reductions.get(p.resource_type, 0)):
                del subs[p.resource_type]
        if subs:
            return False
        del self.spans[span_id]
        return True

    def avail_during(self, at: int, duration: int, requests: Requests) -> bool:
        vector = self.vector(requests)
        return all(p.avail_during(at, duration, n) for p, n in zip(self.planners, vector, strict=True))

    def avail_resources_at(self, at: int, resource_type: str) -> int:
        return self.planner(resource_type).avail_resources_at(at)

    def avail_resources_array_at(self, at: int) -> list[int]:
        return [p.avail_resources_at(at) for p in self.planners]

    def avail_resources_array_during(self, at: int, duration: int) -> list[int]:
        return [p.avail_resources_during(at, duration) for p in self.planners]

    def avail_time_first(self, on_or_after: int, duration: int, requests: Requests) -> int | None:
        if not self.planners:
            raise PlannerInvalidError("a multi-planner without resource types has no time points")
        vector = self.vector(requests)
        for p, n in zip(self.planners, vector, strict=True):
            if n < 0 or n > p.total:
                raise PlannerRangeError(f"request {n} is outside [0, {p.total}] {p.resource_type}")
        t = self.planners[0].avail_time_first(on_or_after, duration, vector[0])
        self.iter = (on_or_after, duration, dict(zip(self.resource_types, vector, strict=True)))
        return self._confirm(t, duration, vector)

    def avail_time_next(self) -> int | None:
        if not self.planners or self.iter is None:
            raise PlannerInvalidError("avail_time_next needs a live avail_time_first")
        _, duration, counts = self.iter
        if any(t not in counts for t in self.resource_types):
            raise PlannerInvalidError("the resource types changed since avail_time_first")
        vector = [counts[t] for t in self.resource_types]
        return self._confirm(self.planners[0].avail_time_next(), duration, vector)

    def _confirm(self, t: int | None, duration: int, vector: list[int]) -> int | None:
        first = self.planners[0]
        while t is not None:
            for p, n in zip(self.planners[1:], vector[1:], strict=True):
                if not p.avail_during(t, duration, n):  # skip the starts that this failure rules out too
                    first._iter_cursor = max(first._iter_cursor, p._tl.skip_after_failure(t, t + duration, n, p.end))
                    break
            else:
                return t
            t = first.avail_time_next()
        return None

    def update(self, totals: Totals) -> None:
        pairs = _pairs(totals)
        old = {p.resource_type: p for p in self.planners}
        planners = []
        for resource_type, total in pairs:
            planner = old.pop(resource_type, None)
            if planner is None:
                planner = Planner(total, self.base, self.duration, resource_type)
            else:
                planner.update_total(total)
            planners.append(planner)
        for subs in self.spans.values():
            for resource_type in old:
                subs.pop(resource_type, None)
        self.planners = planners

    def add_resource_type(self, resource_type: str, total: int) -> None:
        if resource_type in self.resource_types:
            raise PlannerInvalidError(f"resource type {resource_type!r} already planned")
        self.update([*((p.resource_type, p.total) for p in self.planners), (resource_type, total)])

    def update_total(self, resource_type: str, total: int) -> None:
        self.planner(resource_type).update_total(total)

    def reset(self, base: int, duration: int) -> None:
        if duration < 1:
            raise PlannerInvalidError(f"planner duration must be >= 1, got {duration}")
        for p in self.planners:
            p.reset(base, duration)
        self.base, self.duration = base, duration
        self.spans, self.span_counter, self.iter = {}, 0, None


BASE, DURATION = 10, 40
END = BASE + DURATION
TYPES = ["core", "memory", "gpu", "node"]
Multi = MultiPlanner | PerTypePlanners


def outcome(call: Callable[[], object]) -> tuple[object, ...]:
    """What a call answers: its value, or its error's class, errno and message."""
    try:
        return ("ok", call())
    except PlannerError as error:
        return ("error", type(error).__name__, error.errno, str(error))


def iteration(m: Multi, on_or_after: int, duration: int, requests: Requests, calls: int = 10**6) -> list[object]:
    """avail_time_first then avail_time_next until None or ``calls`` answers."""
    answers = [outcome(lambda: m.avail_time_first(on_or_after, duration, requests))]
    while answers[-1][0] == "ok" and answers[-1][1] is not None and len(answers) < calls:
        answers.append(outcome(m.avail_time_next))
    return answers


def planner_state(p: Planner) -> tuple[object, ...]:
    """One type's planner as its answers show it (the span ids of a multi-planner's types are not compared: the
    oracle's count each type's own adds)."""
    spans = [(p.span_start(s), p.span_duration(s), p.span_resources(s)) for s in p.span_ids()]
    iterator = (p._iter, p._iter_cursor) if p._iter is not None else None
    return (p.total, p.resource_type, p.base, p.end, p.points(), spans, p.is_empty, iterator)


def state(m: Multi) -> dict[str, object]:
    types = m.resource_types
    ids = m.span_ids()
    out: dict[str, object] = {
        "types": types,
        "totals": [m.resource_total(t) for t in types],
        "ids": ids,
        "count": m.span_count(),
        "planned": [[m.span_planned(s, t) for t in types] for s in ids],
        "at": [outcome(lambda at=at: m.avail_resources_array_at(at)) for at in range(BASE - 1, END + 2, 3)],
        "during": [
            outcome(lambda at=at, length=length: m.avail_resources_array_during(at, length))
            for at in range(BASE, END, 2)
            for length in (3, 11)
        ],
    }
    for t in types:
        out[t] = planner_state(m.planner(t))
    return out


KINDS = [
    *["add"] * 8,
    *["rem"] * 2,
    *["reduce"] * 3,
    "update_total",
    "add_resource_type",
    "update",
    *["avail_during"] * 2,
    "avail_resources",
    *["first"] * 2,
    *["next"] * 2,
    "type_planner",
    "save",
]


def often(data: st.DataObject) -> bool:
    """True 4 times in 5: the well-formed choice; otherwise the call is given something odd to refuse."""
    return data.draw(st.integers(0, 4)) != 4  # shrinks towards the well-formed choice


def draw_type(data: st.DataObject, m: PerTypePlanners) -> str:
    if m.resource_types and often(data):
        return data.draw(st.sampled_from(m.resource_types))
    return data.draw(st.sampled_from([*TYPES, "tpu"]))


def draw_count(data: st.DataObject, total: int) -> int:
    return data.draw(st.integers(0, total) if often(data) else st.integers(-1, total + 2))


def draw_window(data: st.DataObject, m: PerTypePlanners) -> tuple[int, int]:
    end = m.base + m.duration
    if often(data):
        at = data.draw(st.integers(m.base, end - 1))
        return at, data.draw(st.integers(1, min(end - at, 15)))
    return data.draw(st.integers(m.base - 2, end + 1)), data.draw(st.integers(0, m.duration + 2))


def draw_requests(data: st.DataObject, m: PerTypePlanners) -> Requests:
    types = m.resource_types
    if often(data):
        return [draw_count(data, m.resource_total(t)) for t in types]
    if often(data):
        chosen = data.draw(st.lists(st.sampled_from([*types, "tpu"]), max_size=3, unique=True))
        return {t: draw_count(data, m.resource_total(t) if t in types else 2) for t in chosen}
    return data.draw(st.lists(st.integers(-1, 7), max_size=5))


def draw_span(data: st.DataObject, m: PerTypePlanners) -> int:
    """Mostly a live span; else any id, issued (and maybe removed) or not."""
    if m.spans and often(data):
        return data.draw(st.sampled_from(m.span_ids()))
    return data.draw(st.integers(-1, m.span_counter + 1))


def draw_reductions(data: st.DataObject, m: PerTypePlanners, span: int) -> dict[str, int]:
    """Mostly all, some or none of what the span holds of some of its types."""
    reductions = {}
    for t in data.draw(st.lists(st.sampled_from([*TYPES, "tpu"]), max_size=3, unique=True)):
        held = m.span_planned(span, t) if span in m.spans and t in m.resource_types else 0
        reductions[t] = data.draw(st.sampled_from([held, held, 0, held // 2]) if often(data) else st.integers(-1, 4))
    return reductions


def draw_totals(data: st.DataObject, m: PerTypePlanners) -> list[tuple[str, int]]:
    """A new type list: mostly some of the current types, in any order, and maybe new ones."""
    if often(data):
        kept = data.draw(st.permutations(m.resource_types))
        kept = kept[: data.draw(st.integers(0, len(kept)))]
        fresh = [t for t in TYPES if t not in kept]
        added = data.draw(st.lists(st.sampled_from(fresh), max_size=2, unique=True)) if fresh else []
        names = data.draw(st.permutations([*kept, *added]))
        return [(t, data.draw(st.integers(0, 8))) for t in names]
    return data.draw(st.lists(st.tuples(st.sampled_from([*TYPES, "tpu"]), st.integers(-1, 8)), max_size=4))


def draw_op(data: st.DataObject, m: PerTypePlanners) -> tuple[Any, ...]:
    """One call, drawn against the oracle's present state so that most calls are ones a caller would make."""
    kind = data.draw(st.sampled_from([*KINDS, "reset"] if not data.draw(st.integers(0, 30)) else KINDS))
    if kind in ("add", "avail_during"):
        return (kind, *draw_window(data, m), draw_requests(data, m))
    if kind == "rem":
        return (kind, draw_span(data, m))
    if kind == "reduce":
        span = draw_span(data, m)
        return (kind, span, draw_reductions(data, m, span))
    if kind in ("update_total", "add_resource_type"):
        resource_type = draw_type(data, m) if kind == "update_total" else data.draw(st.sampled_from([*TYPES, "tpu"]))
        return (kind, resource_type, data.draw(st.integers(0, 8) if often(data) else st.integers(-1, 8)))
    if kind == "update":
        return (kind, draw_totals(data, m))
    if kind == "avail_resources":
        return (kind, *draw_window(data, m), draw_type(data, m))
    if kind == "first":
        return (kind, *draw_window(data, m), draw_requests(data, m), data.draw(st.integers(1, 4)))
    if kind == "type_planner":
        resource_type = draw_type(data, m)
        total = m.resource_total(resource_type) if resource_type in m.resource_types else 2
        return (kind, resource_type, *draw_window(data, m), draw_count(data, total))
    if kind == "reset":
        return (kind, data.draw(st.integers(0, BASE)), data.draw(st.integers(0, DURATION + BASE)))
    return (kind,)


def answers(m: Multi, op: tuple[Any, ...]) -> list[object]:
    """Apply ``op`` to ``m``; what it answered."""
    kind = op[0]
    if kind == "add":
        return [outcome(lambda: m.add_span(op[1], op[2], op[3]))]
    if kind == "rem":
        return [outcome(lambda: m.rem_span(op[1]))]
    if kind == "reduce":
        return [outcome(lambda: m.reduce_span(op[1], op[2]))]
    if kind == "update_total":
        return [outcome(lambda: m.update_total(op[1], op[2]))]
    if kind == "add_resource_type":
        return [outcome(lambda: m.add_resource_type(op[1], op[2]))]
    if kind == "update":
        return [outcome(lambda: m.update(op[1]))]
    if kind == "avail_during":
        return [outcome(lambda: m.avail_during(op[1], op[2], op[3]))]
    if kind == "avail_resources":
        return [
            outcome(lambda: m.avail_resources_at(op[1], op[3])),
            outcome(lambda: m.avail_resources_array_during(op[1], op[2])),
        ]
    if kind == "first":
        return iteration(m, op[1], op[2], op[3], op[4])
    if kind == "next":
        return [outcome(m.avail_time_next)]
    if kind == "type_planner":
        got = outcome(lambda: m.planner(op[1]).copy())
        if got[0] != "ok":
            return [got]
        p = got[1]
        assert isinstance(p, Planner)
        first = outcome(lambda: p.avail_time_first(op[2], op[3], op[4]))
        return [
            first,
            outcome(p.avail_time_next) if first[0] == "ok" else None,
            outcome(lambda: p.unavail_time_first(op[2], op[4])),
            outcome(lambda: p.avail_resources_during(op[2], op[3])),
        ]
    if kind == "reset":
        return [outcome(lambda: m.reset(op[1], op[2]))]
    raise AssertionError(kind)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.tuples(st.sampled_from(TYPES), st.integers(0, 6)), max_size=4, unique_by=lambda p: p[0]),
    st.integers(10, 60),
    st.sampled_from([(128, 16), (6, 2), (3, 1)]),
    st.data(),
)
def test_one_axis_answers_as_a_planner_per_type(
    totals: list[tuple[str, int]], calls: int, block: tuple[int, int], data: st.DataObject
) -> None:
    """Small blocks (the timelines' block and short-block lengths patched) give a short horizon many blocks to
    split, empty and search across."""
    with patch.object(timeline, "_BLOCK_MAX", block[0]), patch.object(timeline, "_SHORT_BLOCK", block[1]):
        multi, oracle = MultiPlanner(totals, BASE, DURATION), PerTypePlanners(totals, BASE, DURATION)
        saved = multi.copy()
        for _ in range(calls):
            op = draw_op(data, oracle)
            if op[0] == "save":
                saved = multi.copy()
                assert saved == multi and copy.deepcopy(multi) == multi
                continue
            assert answers(multi, op) == answers(oracle, op), op
            assert state(multi) == state(oracle), op
            assert multi.copy() == multi
            if saved == multi:
                assert state(saved) == state(multi)
        for span in oracle.span_ids():
            multi.rem_span(span)
            oracle.rem_span(span)
        assert state(multi) == state(oracle)
    pairs = list(zip(multi.resource_types, [multi.resource_total(t) for t in multi.resource_types], strict=True))
    assert multi.same_schedule(MultiPlanner(pairs, multi.base, multi.duration))


def windows(m: Multi, duration: int) -> list[object]:
    """Counts at and during windows spread over a 4000-second horizon."""
    return [
        (
            outcome(lambda at=at: m.avail_resources_array_at(at)),
            outcome(lambda at=at: m.avail_resources_array_during(at, duration)),
        )
        for at in range(0, 4000 - duration, 61)
    ]


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(0, 3000), st.integers(1, 400), st.integers(0, 9), st.integers(0, 3)),
        min_size=150,
        max_size=400,
    ),
    st.lists(st.integers(0, 399), max_size=60),
    st.lists(st.integers(0, 399), max_size=300),
    st.tuples(st.integers(0, 40), st.integers(0, 9), st.integers(0, 3)),
    st.integers(1, 500),
)
def test_one_axis_with_many_blocks(
    spans: list[tuple[int, int, int, int]],
    reduced: list[int],
    removed: list[int],
    request: tuple[int, int, int],
    duration: int,
) -> None:
    """Enough points for several blocks of the axis, types reduced away from some spans, then many spans removed
    (blocks emptied and their extremes renewed): the same answers."""
    totals = [("core", 40), ("gpu", 9), ("node", 3)]
    multi, oracle = MultiPlanner(totals, 0, 4000), PerTypePlanners(totals, 0, 4000)
    for start, length, gpus, nodes in spans:
        vector = [length % 7, gpus, nodes]
        added = [outcome(lambda m=m: m.add_span(start, length, vector)) for m in (multi, oracle)]  # noqa: B023
        assert added[0] == added[1]
    for k, pick in enumerate(reduced):
        ids = oracle.span_ids()
        if ids:
            span = ids[pick % len(ids)]
            kind = TYPES[k % 2 * 2]  # core, then gpu
            reduction = {kind: oracle.span_planned(span, kind)}
            assert multi.reduce_span(span, reduction) == oracle.reduce_span(span, reduction)
    assert state(multi) == state(oracle) and windows(multi, duration) == windows(oracle, duration)
    assert iteration(multi, 0, duration, list(request)) == iteration(oracle, 0, duration, list(request))
    for pick in removed:
        ids = oracle.span_ids()
        if ids:
            span = ids[pick % len(ids)]
            multi.rem_span(span)
            oracle.rem_span(span)
    assert state(multi) == state(oracle) and windows(multi, duration) == windows(oracle, duration)
    assert iteration(multi, 0, duration, list(request)) == iteration(oracle, 0, duration, list(request))
    multi.add_resource_type("memory", 5)
    oracle.add_resource_type("memory", 5)
    multi.update([("memory", 5), ("node", 3), ("gpu", 9)])
    oracle.update([("memory", 5), ("node", 3), ("gpu", 9)])
    assert state(multi) == state(oracle)
    for vector in ([0, 2, 1], [5, 0, 0], [0, 0, 9]):
        assert iteration(multi, 100, duration, vector) == iteration(oracle, 100, duration, vector)


def test_a_copy_keeps_its_points_when_the_original_empties_and_fills_again() -> None:
    """An emptied axis is reset and refilled in place (its first block's lists are kept): a copy or a per-type
    planner taken before must not share them."""
    mp = MultiPlanner({"core": 4, "node": 1}, 0, 100)
    span = mp.add_span(10, 20, [2, 1])
    twin = mp.copy()
    cores = mp.planner("core")
    mp.rem_span(span)
    assert mp.avail_resources_array_during(10, 20) == [4, 1]
    mp.add_span(0, 50, [1, 0])
    mp.add_span(50, 10, [3, 1])
    assert twin.avail_resources_array_during(10, 20) == [2, 0]
    assert twin.avail_resources_array_during(30, 10) == [4, 1]
    assert cores.avail_resources_during(10, 20) == 2
    assert mp.avail_resources_array_during(0, 50) == [3, 1]
    assert mp.avail_resources_array_during(50, 10) == [1, 0]
