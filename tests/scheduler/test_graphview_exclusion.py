"""The nodes a pod may not use reach the matcher as a mask kept in each pod shape's hidden set: it follows the set's
changes, a node attached again under its name (a new vertex), and a node that is new to the view."""

from __future__ import annotations

from collections import deque

from kubeflux.match.engine import MatchOp
from kubeflux.resources import NodeSpec
from kubeflux.scheduler.graphview import GraphView, HiddenNodes, first_placement
from kubeflux.scheduler.objects import CPU, Pod
from kubeflux.scheduler.translate import pod_jobspec

NODES = [f"n{i}" for i in range(70)]  # wide enough for the walk of allowed positions


def _node_of(view: GraphView, hidden: HiddenNodes, at: int) -> str | None:
    spec = pod_jobspec(Pod("default", f"p{at}", f"u{at}", requests={CPU: 1000}), 60)
    assert spec is not None
    result = view.match(MatchOp.ALLOCATE, spec, f"p{at}", at, hidden)
    return first_placement(result).node if result.matched else None


def test_the_hidden_mask_follows_changes_and_nodes_attached_again() -> None:
    view = GraphView([NodeSpec(name, cores=4) for name in NODES], "lonode", 86_400, deque())
    hidden = HiddenNodes(set(NODES) - {"n40"})
    assert _node_of(view, hidden, 1) == "n40"
    hidden.add("n40")
    hidden.discard("n7")
    assert _node_of(view, hidden, 2) == "n7"
    view.put_node(NodeSpec("n7", cores=8))  # the same name, a new vertex
    assert _node_of(view, hidden, 3) == "n7"
    hidden.add("n7")
    assert _node_of(view, hidden, 4) is None  # every node hidden
    view.put_node(NodeSpec("n70", cores=2))  # a name new to the view: not in the set, so allowed
    assert _node_of(view, hidden, 5) == "n70"
    hidden.add("n70")
    hidden.discard("n3")
    assert _node_of(view, hidden, 6) == "n3"
    assert _node_of(view, set(NODES) - {"n9"}, 7) == "n9"  # a plain set: tested name by name
