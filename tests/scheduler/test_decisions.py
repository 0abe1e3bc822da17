"""What a decision does (``apply_decisions``), on a sink that writes down what it is asked: one table of cases."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from kubeflux.scheduler.decisions import apply_decisions
from kubeflux.scheduler.interface import Bind, Decision, Evict, PodWarning, Reject, Unschedulable


@dataclass
class _Pod:
    key: str
    owner: str


@dataclass
class _Sink:
    """A shell holding pods ``default/mine`` (of ``me``) and ``default/theirs`` (of ``other``); a Bind to node
    ``full`` is refused, one to node ``bad`` raises a TypeError (a malformed field, as compiled code finds it)."""

    written: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    pods: dict[str, _Pod] = field(
        default_factory=lambda: {
            "default/mine": _Pod("default/mine", "me"),
            "default/theirs": _Pod("default/theirs", "other"),
            "default/guarded": _Pod("default/guarded", "guarded"),
        }
    )

    def pod(self, key: str, uid: str) -> _Pod | None:
        return self.pods.get(key)

    def not_found(self, key: str) -> str:
        return f"{key} not found"

    def owner(self, pod: _Pod) -> str:
        return pod.owner

    def bind(self, pod: _Pod, decision: Bind) -> str:
        if decision.node == "bad":
            raise TypeError("node: expected str")
        if decision.node == "full":
            return "node full"
        self.written.append(f"bind {pod.key} {decision.node}")
        return ""

    def unschedulable(self, pod: _Pod, decision: Unschedulable) -> None:
        self.written.append(f"unschedulable {pod.key} {decision.message} {decision.expected_start}")

    def reject(self, pod: _Pod, decision: Reject) -> None:
        self.written.append(f"reject {pod.key} {decision.message}")

    def warn(self, pod: _Pod, decision: PodWarning) -> None:
        self.written.append(f"warn {pod.key} {decision.reason}")

    def evict(self, pod: _Pod, decision: Evict) -> str:
        if pod.owner == "guarded":
            return "Cannot evict pod as it would violate the pod's disruption budget."
        self.written.append(f"evict {pod.key} for {decision.preemptor}")
        return ""

    def problem(self, message: str) -> None:
        self.problems.append(message)


@dataclass
class _Scheduler:
    unreserved: list[str] = field(default_factory=list)

    def unreserve(self, pod: str, uid: str, node: str, reason: str, now: float) -> None:
        self.unreserved.append(f"{pod} {node} {reason} @{now:g}")


CASES: list[tuple[str, list[Decision], int, list[str], list[str], int]] = [
    # id, decisions, bound, written, unreserved, problems
    ("bind", [Bind("default/mine", "u", "n1")], 1, ["bind default/mine n1"], [], 0),
    ("refused-bind-is-unreserved", [Bind("default/mine", "u", "full")], 0, [], ["default/mine full node full @5"], 0),
    ("bind-of-a-gone-pod", [Bind("default/gone", "u", "n1")], 0, [], ["default/gone n1 default/gone not found @5"], 0),
    ("unschedulable-of-a-gone-pod", [Unschedulable("default/gone", "u", "no")], 0, [], [], 0),
    ("unschedulable", [Unschedulable("default/mine", "u", "no", 7.0)], 0, ["unschedulable default/mine no 7.0"], [], 0),
    ("reject", [Reject("default/mine", "u", "never")], 0, ["reject default/mine never"], [], 0),
    ("warning-on-any-pod", [PodWarning("default/theirs", "u", "Bad", "m")], 0, ["warn default/theirs Bad"], [], 0),
    ("another-schedulers-pod", [Bind("default/theirs", "u", "n1")], 0, [], [], 1),
    (
        "evict-any-schedulers-pod",
        [Evict("default/theirs", "u", "default/x", "m")],
        1,
        ["evict default/theirs for default/x"],
        [],
        0,
    ),
    ("refused-eviction-is-said", [Evict("default/guarded", "u", "default/x", "m")], 0, [], [], 1),
    ("eviction-of-a-gone-pod", [Evict("default/gone", "u", "default/x", "m")], 0, [], [], 0),
    (
        "a-job-is-evicted-whole-or-not-at-all",
        [
            Evict("default/guarded", "u", "default/x", "m", victim="default/g"),
            Evict("default/mine", "u", "default/x", "m", victim="default/g"),
        ],
        0,
        [],
        [],
        2,
    ),
    (
        "a-malformed-decision-spares-the-rest",
        [Bind("default/mine", "u", "bad"), Unschedulable("default/mine", "u", "no")],
        0,
        ["unschedulable default/mine no None"],
        [],
        1,
    ),
]


@pytest.mark.parametrize(
    ("decisions", "bound", "written", "unreserved", "problems"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_apply_decisions(
    decisions: list[Decision], bound: int, written: list[str], unreserved: list[str], problems: int
) -> None:
    sink, scheduler = _Sink(), _Scheduler()
    assert apply_decisions("me", decisions, sink, scheduler, 5.0) == bound
    assert sink.written == written
    assert scheduler.unreserved == unreserved
    assert len(sink.problems) == problems


def test_a_scheduler_that_does_not_unreserve_is_not_told() -> None:
    sink = _Sink()
    assert (
        apply_decisions("me", [Bind("default/mine", "u", "full"), Bind("default/gone", "u", "n")], sink, None, 0) == 0
    )
    assert sink.written == [] and sink.problems == []
