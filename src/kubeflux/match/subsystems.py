"""Matching over other subsystems than containment (``resource-query -S``): a dominant walk plus auxiliary ones.

A matcher names its subsystems (Fluxion's ``set_subsystems_use``): ``-S PA`` is the ``power`` subsystem alone,
``-S C+PA`` is ``containment`` with ``power`` as an auxiliary subsystem, and so on (:data:`SUBSYSTEM_SETS`). The
first one is *dominant*: the DFU walk starts at its root and descends along its edges (any relation: Fluxion's
``in_subsystem`` compares only the edge's subsystem); the update and cancel walks follow the same edges, and the
emitted depth is the depth in that walk, so a ``-S PA`` match prints ``powerpanel0`` at depth 1.

At every dominant vertex the walk then explores each auxiliary subsystem (Fluxion's ``dom_exp`` and
``aux_upv``), visiting the targets of the vertex's out-edges in that subsystem. What that gives, read off
``dfu_impl.cpp``:

* an auxiliary target *qualifies* when it passes the status, availability and exclusivity checks of ``prune``
  (auxiliary subsystems get no aggregate filters: the prune filter spec is set for the dominant one only);
* it then adds one candidate of its type to the vertex's candidates *of that subsystem*, whose score and count are
  not its own but whatever the vertex's scoring holds at that moment: the score and availability of the last
  dominant child that matched (``-1`` and ``0`` before any did), since Fluxion's explore reads them back from the
  parent's ``scoring_api_t``;
* its own walk further along the auxiliary edges has no effect on the result (``aux_finish_vtx`` sets no score,
  so nothing it finds is ever merged), so it is not repeated here;
* auxiliary candidates travel up with the dominant ones (merged into the parent unless the vertex made its own
  best-k choice), no policy ever chooses among them, and the root's final check (``has_remaining``) fails the
  match (ENODEV) if one of their types has no qualified candidate;
* the update walk records nothing along auxiliary edges (Fluxion's ``upd_upv`` and ``rem_upv`` are empty).

:class:`SubsystemTraverser` does this on top of :class:`~kubeflux.match.traverser.Traverser`, over a
:class:`SubsystemView`, whose dominant subsystem is walked as a tree: each vertex's parent is the one through
which a depth-first walk from the root first reaches it (Fluxion colours visited vertices and skips them), so cross
edges are never followed. It keeps
no cached evaluations (each match re-walks the dominant tree), so the containment matcher (``-S CA``), which
uses the plain :class:`~kubeflux.match.traverser.Traverser`, is unaffected.
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import partial

from kubeflux.match.evaluation import Evaluation
from kubeflux.match.meta import AllocType, Errno, JobMeta, MatchFailure, PruningFilters
from kubeflux.match.policy import MatchPolicy
from kubeflux.match.request import Request, effective_max
from kubeflux.match.scoring import EdgeEval, EdgeGroup, Evals, Scoring
from kubeflux.match.state import SLOT, WalkState
from kubeflux.match.traverser import Traverser, tally_shares
from kubeflux.match.view import ScheduleView
from kubeflux.match.visit import Visit
from kubeflux.resources.graph import CONTAINMENT, Graph, Status, Vertex

IBNET, IBNETBW, PFS1BW, POWER, VIRTUAL1 = "ibnet", "ibnetbw", "pfs1bw", "power", "virtual1"

SUBSYSTEM_SETS: dict[str, tuple[str, ...]] = {
    "CA": (CONTAINMENT,),
    "IBA": (IBNET,),
    "IBBA": (IBNETBW,),
    "PA": (POWER,),
    "PFS1BA": (PFS1BW,),
    "C+IBA": (CONTAINMENT, IBNET),
    "C+IBBA": (CONTAINMENT, IBNETBW),
    "C+PA": (CONTAINMENT, POWER),
    "C+PFS1BA": (CONTAINMENT, PFS1BW),
    "IB+IBBA": (IBNET, IBNETBW),
    "C+P+IBA": (CONTAINMENT, POWER, IBNET),
    "V+PFS1BA": (VIRTUAL1, PFS1BW),
    "VA": (VIRTUAL1,),
    "ALL": (CONTAINMENT, IBNET, IBNETBW, PFS1BW, POWER),
}
"""``-S`` names and their subsystems, dominant first (resource-query's matcher table)."""


class SubsystemError(ValueError):
    """An unknown ``-S`` name, or one whose subsystems the graph lacks."""


def parse_subsystems(name: str, graph: Graph | None = None) -> tuple[str, ...]:
    """The subsystems of a ``-S`` name, dominant first; the name as listed or all in lower case, as Fluxion.

    With ``graph``, every subsystem must have a root in it (Fluxion's traverser refuses to initialise otherwise).
    """
    subsystems = SUBSYSTEM_SETS.get(name)
    if subsystems is None:
        subsystems = next((value for key, value in SUBSYSTEM_SETS.items() if key.lower() == name), None)
    if subsystems is None:
        raise SubsystemError(f"unknown match subsystems {name!r}; known: {', '.join(SUBSYSTEM_SETS)}")
    if graph is not None:
        missing = [subsystem for subsystem in subsystems if subsystem not in graph.roots]
        if missing:
            raise SubsystemError(f"match subsystems {name}: the graph has no {', '.join(missing)} subsystem")
    return subsystems


def _aux_evals(dfu: Scoring, subsystem: str, type: str) -> Evals:
    """``dfu``'s candidates of ``type`` in the auxiliary ``subsystem``, made if it has none."""
    aux = dfu.aux
    if aux is None:
        aux = dfu.aux = {}
    by_type = aux.setdefault(subsystem, {})
    evals = by_type.get(type)
    if evals is None:
        evals = by_type[type] = Evals()
    return evals


def _aux_total(dfu: Scoring, subsystem: str, type: str) -> int:
    evals = dfu.aux.get(subsystem, {}).get(type) if dfu.aux is not None else None
    return 0 if evals is None else evals.total


def _merge_aux(dfu: Scoring, aux: dict[str, dict[str, Evals]]) -> None:
    """Add a child's auxiliary candidates (its :attr:`Evaluation.aux`) to ``dfu``'s."""
    for subsystem, by_type in aux.items():
        for type, evals in by_type.items():
            _aux_evals(dfu, subsystem, type).merge(evals)


class SubsystemView(ScheduleView):
    """The schedule of a graph whose walks follow ``subsystems[0]`` (the dominant subsystem), as a tree: the same
    tables, read along another structure (each vertex's children and parent are its tree's)."""

    def __init__(
        self, graph: Graph, prune: PruningFilters, base: int, duration: int, subsystems: Iterable[str]
    ) -> None:
        names = tuple(subsystems)
        if not names:
            raise SubsystemError("no match subsystem given")
        self.dominant = names[0]
        self.aux = tuple(name for name in names[1:] if name != self.dominant)
        """The auxiliary subsystems (:class:`SubsystemTraverser` explores them at every dominant vertex)."""
        self._tree_parent: dict[int, int] = {}
        self._tree_edge: dict[int, int] = {}
        graph.make_all_leaves()  # (its walks read the out-edges of every subsystem as they stand)
        self._build_tree(graph)
        super().__init__(graph, prune, base, duration)

    def _build_tree(self, graph: Graph) -> None:
        """Each vertex's parent and parent edge in a depth-first walk of the dominant subsystem from its root,
        children in out-edge order; a vertex reached again (a cross or back edge) keeps its first parent."""
        dominant = self.dominant
        edges = graph.edges
        vertices = graph.vertices
        root = graph.roots[dominant]
        parent = {root: -1}
        parent_edge = {root: -1}
        stack = [(root, iter(vertices[root].out))]
        while stack:
            uid, pending = stack[-1]
            for index in pending:
                edge = edges[index]
                if edge.subsystem == dominant and edge.target not in parent:
                    parent[edge.target] = uid
                    parent_edge[edge.target] = index
                    stack.append((edge.target, iter(vertices[edge.target].out)))
                    break
            else:
                stack.pop()
        self._tree_parent = parent
        self._tree_edge = parent_edge

    def _children(self, uid: int) -> list[tuple[int, int]]:
        """(edge index, target) of a vertex's tree edges in the dominant subsystem, in out-edge order."""
        graph = self.graph
        tree = self._tree_edge
        result = []
        for index in graph.vertices[uid].out:
            target = graph.edges[index].target
            if tree.get(target) == index:
                result.append((index, target))
        return result

    def parent_edge(self, uid: int) -> int:
        edge = self._tree_edge.get(uid, -1)
        if edge == -1:
            raise KeyError(uid)
        return edge

    def walk_parent_edge(self, uid: int) -> int:
        return self._tree_edge.get(uid, -1)

    def _prime_leaf(self, vertex: Vertex) -> bool:
        # Fluxion's prime_pruning_filter takes a vertex for a leaf by its out-degree over all subsystems.
        return not vertex.out

    def restructure(self) -> None:
        self._build_tree(self.graph)
        self._kids.clear()
        self._by_weight.clear()
        super().restructure()

    def walk_parent(self, uid: int) -> int:
        return self._tree_parent.get(uid, -1)

    def walk_parents(self, uid: int) -> list[int]:
        return [self._tree_parent.get(uid, -1)]

    def reorder(self, edge: int, target: int, old: int, new: int) -> None:
        # The explore order is kept per dominant parent; forget it rather than patch it (walks here are small).
        self._by_weight.pop(self._tree_parent.get(target, -1), None)


class SubsystemTraverser(Traverser):
    """DFU matching over a :class:`SubsystemView`'s dominant subsystem, with up-walks over the ``aux`` ones."""

    wide_blocks = False
    count_free_parts = False  # (kept to what is shown exact for the containment walk alone)
    leaf_shortcut = False
    leaf_runs = False
    leaf_batches = False
    leaf_slots = False

    def __init__(self, state: WalkState, aux: tuple[str, ...]) -> None:
        super().__init__(state)
        self.aux = aux

    def _dom_dfv(self, visit: Visit, uid: int) -> Evaluation:
        """Visit ``uid`` afresh (no evaluation is cached: the subtree's state includes auxiliary vertices that the
        dominant tree's fingerprints do not cover)."""
        return self._evaluate(visit, uid, self.schedule.children(uid))

    def _explore_aux(self, visit: Visit, vertex: Vertex, dfu: Scoring) -> None:
        if self.aux:
            self._aux_explore(visit, vertex, dfu)

    def _pass_up(self, evaluation: Evaluation, dfu: Scoring) -> None:
        super()._pass_up(evaluation, dfu)
        if dfu.aux:
            evaluation.aux = dfu.aux

    def _take(self, evaluation: Evaluation, type: str, edge: int, dfu: Scoring) -> None:
        """Also take the child's auxiliary candidates, and leave its score and availability in ``dfu`` for the
        auxiliary candidates that follow."""
        super()._take(evaluation, type, edge, dfu)
        if evaluation.aux:
            _merge_aux(dfu, evaluation.aux)
        dfu.overall_score = evaluation.score
        dfu.avail = evaluation.avail

    def _aux_explore(self, visit: Visit, vertex: Vertex, dfu: Scoring) -> None:
        """Fluxion's explore of ``vertex``'s out-edges in each auxiliary subsystem (``visit_t::UPV``), for the
        request ``visit`` holds."""
        graph = self.graph
        edges = graph.edges
        vertices = graph.vertices
        meta, resources, excl = visit.meta, visit.resources, visit.exclusive
        for subsystem in self.aux:
            targets = [(index, edges[index].target) for index in vertex.out if edges[index].subsystem == subsystem]
            if not targets:
                continue
            dynamic = visit.policy.spec.stop_on_first
            if dynamic:
                weight = self.schedule.edge_weight
                targets.sort(key=lambda pair: (-weight[pair[0]], -vertices[pair[1]].uniq_id))
            shares = {r.type: [effective_max(r), 0, 0, 0] for r in resources}
            satisfied: set[str] = set()
            for index, target in targets:
                target_type = vertices[target].type
                if target_type in satisfied:
                    continue
                if not self._aux_upv(meta, vertices[target], resources, excl):
                    continue
                count = dfu.avail
                group = EdgeGroup(dfu.overall_score, count, 0, excl, edges=[EdgeEval(count, count, excl, index)])
                _aux_evals(dfu, subsystem, target_type).add(group)
                if dynamic and tally_shares(shares, satisfied, resources, partial(_aux_total, dfu, subsystem), 1):
                    break

    def _aux_upv(self, meta: JobMeta, vertex: Vertex, resources: list[Request], excl: bool) -> bool:
        """Whether an auxiliary vertex qualifies (Fluxion's ``aux_upv`` returning 0): it passes ``prune`` in its
        subsystem (status, availability, exclusivity; no aggregate filter there) and has units free."""
        if meta.alloc_type != AllocType.SATISFIABILITY and vertex.status != Status.UP:
            return False
        if self.schedule.avail(vertex.uid, meta.at, meta.duration) == 0:
            return False
        for resource in resources:
            if resource.type != vertex.type or resource.type == SLOT:
                continue
            try:
                if not self._by_excl(meta, excl, vertex, resource):
                    return False
            except MatchFailure as failure:  # Fluxion only sets errno here; the up-walk just fails
                if failure.errno is not Errno.EINVAL:
                    raise
                return False
        return True

    def _resolve_graph(self, root: int, resources: list[Request], dfu: Scoring, policy: MatchPolicy) -> int:
        """Fluxion's ``resolve_graph``; its ``has_remaining`` also covers the auxiliary candidates that reached
        the root."""
        needs = super()._resolve_graph(root, resources, dfu, policy)
        evaluation = self.state.root_eval
        if needs >= 0 and evaluation is not None and evaluation.aux:
            for by_type in evaluation.aux.values():
                if any(evals.qualified == 0 for evals in by_type.values()):
                    return -1
        return needs
