"""``find``: Fluxion's predicate expressions over the resource graph."""

from __future__ import annotations

import pytest

from kubeflux.match.engine import Engine, EngineError, MatchOp
from kubeflux.match.find import Expression, FindError, Predicate, parse_expression
from kubeflux.resources import NodeSpec, Status, build_graph
from tests.match._helpers import whole_nodes_job


def engine(match_format: str = "simple") -> Engine:
    return Engine(build_graph([NodeSpec(f"node{i}", cores=2) for i in range(2)]), match_format=match_format)


def names(text: str) -> list[str]:
    return [line.strip(" -").split("[")[0] for line in text.splitlines()]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("status=up", Expression(Predicate("status", "up"))),
        ("status=UP sched-now=free", Expression(Predicate("status", "up"), (("and", Predicate("sched-now", "free")),))),
        (
            "  (jobid-tag=3 or agfilter=t)  and status=down ",
            Expression(
                Expression(Predicate("jobid-tag", "3"), (("or", Predicate("agfilter", "t")),)),
                (("and", Predicate("status", "down")),),
            ),
        ),
    ],
    ids=["one predicate", "implicit and, values lowercased", "parentheses and blanks"],
)
def test_expressions_parse_as_fluxion_reads_them(text: str, expected: Expression) -> None:
    assert parse_expression(text) == expected


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "empty expression"),
        ("status", "not a key=value predicate"),
        ("status=sideways", "status is one of up, down"),
        ("colour=red", "unknown predicate 'colour'"),
        ("jobid-alloc=x", "job id must be a non-negative integer"),
        ("(status=up", "unbalanced parenthesis"),
        ("status=up and", "missing operand"),
    ],
)
def test_bad_expressions_are_refused_with_the_reason(text: str, message: str) -> None:
    with pytest.raises(FindError, match=message):
        parse_expression(text)


def test_operators_apply_left_to_right_without_precedence() -> None:
    subject = engine()
    subject.set_status("/cluster0/node1", Status.DOWN)
    # (status=down or status=up) and sched-now=allocated: nothing is allocated
    assert subject.find("status=down or status=up and sched-now=allocated") == ""
    # status=down or (status=up and sched-now=allocated): only node1's subtree
    down = names(subject.find("status=down or (status=up and sched-now=allocated)"))
    assert down == ["core0", "core1", "node1", "cluster0"]


def test_find_walks_down_allocations_and_reports_ancestors() -> None:
    subject = engine()
    assert subject.match(MatchOp.ALLOCATE, whole_nodes_job(cores=2)).matched
    assert subject.find("sched-now=allocated").splitlines() == [
        "      ---------core0[1:x]",
        "      ---------core1[1:x]",
        "      ------node1[1:x]",
        "      ---cluster0[1:x]",
    ]
    assert names(subject.find("jobid-tag=1")) == ["core0", "core1", "node1", "cluster0"]
    assert names(subject.find("jobid-alloc=2")) == []


def test_agfilter_reports_use_per_type_in_jgf() -> None:
    subject = engine("jgf")
    subject.match(MatchOp.ALLOCATE, whole_nodes_job(cores=2))
    found = subject.find("jobid-alloc=1 agfilter=t")
    assert '"paths": {"containment": "/cluster0/node1"}, "agfilter": {"core": "used:2, total:2"}}' in found
    assert '"agfilter": {"core": "used:2, total:4", "node": "used:1, total:2"}' in found
    assert "/cluster0/node0" not in found


def test_engine_find_names_a_bad_expression() -> None:
    with pytest.raises(EngineError, match="invalid criteria: status=maybe"):
        engine().find("status=maybe")


def test_names_and_property_predicates() -> None:
    graph = build_graph([NodeSpec(f"node{i}", cores=1, properties={"ssd": ""} if i == 2 else {}) for i in range(4)])
    subject = Engine(graph)
    assert names(subject.find("names=node[1-2]")) == ["node1", "node2", "cluster0"]
    assert names(subject.find("property=SSD")) == ["node2", "cluster0"]
    assert names(subject.find("names=node[0,3] or property=ssd")) == ["node0", "node2", "node3", "cluster0"]
    with pytest.raises(FindError, match="invalid hostlist"):
        parse_expression("names=node[1-")


def test_a_jgf_of_one_vertex_cannot_be_written() -> None:
    graph = build_graph([NodeSpec(f"node{i}", cores=2) for i in range(2)])
    subject = Engine(graph, prune_filters="cluster:core", match_format="jgf")
    with pytest.raises(EngineError, match="writer emit: a JGF needs both vertices and edges"):
        subject.find("agfilter=t")
    assert '"core": "used:0, total:4", "node": "used:0, total:2"' in Engine(graph, match_format="jgf").find(
        "agfilter=t"
    )
