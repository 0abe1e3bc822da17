"""What the walks of one match share: the marks the select walk leaves for the update walk, and its results.

The select walk marks the edges it chose (stamped with the match's sequence number, or kept in an evaluation until
the update walk reaches it); the update walk follows only marked edges. An edge that leads a task slot stays marked
so until the job is cancelled. The root's needs and exclusivity, and its evaluation, are what the select walk
found at the root.

:class:`WalkState` holds the schedule as the select walk reads it (a :class:`~kubeflux.match.view.ScheduleView`),
to find the edges and parents it stamps; it never changes the schedule.
"""

from __future__ import annotations

from typing import Any, Final

from kubeflux.match.evaluation import LEAD, NO_LEAD, NOT_LEAD, Evaluation, LeafRun, Mark
from kubeflux.match.scoring import Scoring
from kubeflux.match.view import ScheduleView

SLOT: Final = "slot"


class WalkState:
    """The marks and results of the current match (see the module docstring)."""

    def __init__(self, schedule: ScheduleView) -> None:
        self.schedule = schedule
        self.graph = schedule.graph
        self.sequence = 0
        self.sequence_object: Any = 0
        """:attr:`sequence` as one int object, the one :attr:`edge_seq` stores (see
        :meth:`ScheduleView.uid_objects`)."""
        self.task_labels: list[str] = []
        self.preorder = 0
        self.postorder = 0
        """Vertices the last cancel or release walk visited, on the way down and up (resource-query's ``stat``)."""
        n_edges = len(schedule.graph.edges)
        self.edge_needs = [0] * n_edges
        self.edge_excl = [False] * n_edges
        self.edge_seq = [0] * n_edges
        self.slot_leader: set[int] = set()
        self.leads: dict[int, int] = {}
        """Per vertex, how many of its out-edges are in :attr:`slot_leader` (only :meth:`_lead` and
        :meth:`unlead_edge` change either)."""
        self.root_needs = 0
        self.root_excl = False
        self.root_seq = 0
        self.root_eval: Evaluation | None = None
        self.run_marks: dict[int, LeafRun] = {}
        """The runs marked by the current match (``marked_seq``), by source, instead of their edges' stamps."""
        self.marked: dict[int, set[int]] = {}
        """The edges stamped by the current match (``marked_seq``), by source: the update walk's children."""
        self.marked_seq = -1

    def refresh(self) -> None:
        """Size the per-edge tables after the graph grew."""
        grow = len(self.graph.edges) - len(self.edge_needs)
        if grow > 0:
            self.edge_needs.extend([0] * grow)
            self.edge_excl.extend([False] * grow)
            self.edge_seq.extend([0] * grow)

    def next_sequence(self) -> None:
        """Start a new match: a new :attr:`sequence` (edges stamped with an older one are not this match's)."""
        self.sequence += 1
        self.sequence_object = self.sequence

    def choice_marks(self, dfu: Scoring) -> list[Mark]:
        """The edges a vertex's best-k choice marks (Fluxion's ``enforce``), in Fluxion's order.

        Below the root the marks are kept in the vertex's :class:`Evaluation` and stamped only when the update
        walk reaches the vertex, so a cached evaluation can be reused by a later match.
        """
        marks: list[Mark] = []
        labels = self.task_labels
        for type, evals in dfu.by_type.items():
            if evals.best_k == 0:
                continue
            if type != SLOT:
                marks.extend(
                    [
                        (item.edge, item.needs, item.exclusive, NO_LEAD)
                        for group in evals.groups[: evals.best_i]
                        if not group.root
                        for item in group.edges
                    ]
                )
                continue
            for i in range(evals.best_i):
                group = evals.groups[i]
                if group.root:
                    continue
                lead = LEAD if type == SLOT and group.task_label and group.task_label in labels else NO_LEAD
                for item in group.edges:
                    marks.append((item.edge, item.needs, item.exclusive, lead))
                    if lead == LEAD:
                        lead = NOT_LEAD
        return marks

    def mark_choices(self, dfu: Scoring) -> None:
        """Stamp the root's best-k choices in ``dfu`` and the paths above them (Fluxion's ``enforce``)."""
        edges = self.graph.edges
        last = -1
        for mark in self.choice_marks(dfu):
            self._apply_mark(mark)
            source = edges[mark[0]].source
            if source != last:
                # A slot's marks come source by source (a node's cores): the path above a source is stamped by its
                # first mark, and stamping it again changes nothing (a mark stamps only an edge below its source).
                self._apply_path(source)
                self._mark_ancestors(source, dfu)
                last = source

    def leaf_run(self, marks: list[Mark]) -> LeafRun | None:
        """``marks`` as a :class:`LeafRun`, if they are exclusive leaves of one source without slot leaders (and
        the containment is a tree: a leaf with two parents could be read through the one its pool is not under)."""
        if self.graph.shared_children:
            return None
        edges, vertices = self.graph.edges, self.graph.vertices
        source = edges[marks[0][0]].source
        leaves = []
        sizes: dict[str, int] = {}
        whole = True
        for edge, needs, exclusive, lead in marks:
            record = edges[edge]
            if record.source != source or not exclusive or lead != NO_LEAD:
                return None
            target = record.target
            vertex = vertices[target]
            if vertex.out and self.schedule.children(target):
                return None
            leaves.append((edge, target, needs))
            sizes[vertex.type] = sizes.get(vertex.type, 0) + vertex.size
            whole = whole and needs == vertex.size
        leaves.sort()
        if len({edge for edge, _uid, _needs in leaves}) != len(leaves):
            return None
        whole = whole and len(leaves) == len(self.schedule.children(source))
        uids = [uid for _edge, uid, _needs in leaves]
        return LeafRun(source, leaves, uids, sizes, whole, hash((source, tuple(leaves))))

    def run_of(self, source: int, leaves: list[tuple[int, int, int]]) -> LeafRun:
        """The exclusive leaves (edge, leaf, needs) of ``source`` that the update walk records in one piece, as a
        :class:`LeafRun` (when they are not all its marks, say a node's gpus next to its sockets). Only for a
        source the job holds whole: no other job's match reads its leaves during the job's window, so the pool
        stays unwritten."""
        vertices = self.graph.vertices
        sizes: dict[str, int] = {}
        for _edge, uid, _needs in leaves:
            vertex = vertices[uid]
            sizes[vertex.type] = sizes.get(vertex.type, 0) + vertex.size
        uids = [uid for _edge, uid, _needs in leaves]
        return LeafRun(source, leaves, uids, sizes, False, hash((source, tuple(leaves))))

    def _unrun(self, source: int) -> None:
        """Stamp a marked run's edges one by one: another mark under its source joins it."""
        for edge, _, needs in self.run_marks.pop(source).leaves:
            self.mark_edge(edge, needs, True)

    def _new_marks(self) -> None:
        """Start the current match's marks (the first stamp of a match)."""
        if self.marked_seq != self.sequence:
            self.marked_seq = self.sequence
            self.marked = {}
            self.run_marks = {}

    def _apply_mark(self, mark: Mark) -> None:
        edge, needs, exclusive, lead = mark
        self.edge_needs[edge] = needs
        self.edge_excl[edge] = exclusive
        self._stamp(edge)
        if lead == LEAD:
            self._lead(edge)
        elif lead == NOT_LEAD:
            self.unlead_edge(edge)

    def _lead(self, edge: int) -> None:
        if edge not in self.slot_leader:
            self.slot_leader.add(edge)
            source = self.graph.edges[edge].source
            self.leads[source] = self.leads.get(source, 0) + 1

    def unlead_edge(self, edge: int) -> None:
        if edge in self.slot_leader:
            self.slot_leader.discard(edge)
            source = self.graph.edges[edge].source
            left = self.leads[source] - 1
            if left:
                self.leads[source] = left
            else:
                del self.leads[source]

    def _stamp(self, edge: int) -> None:
        """Mark ``edge`` as chosen by the current match, and index it by its source for the update walk."""
        self.edge_seq[edge] = self.sequence_object  # one object for all (see ScheduleView.uid_objects)
        if self.marked_seq != self.sequence:
            self._new_marks()
        source = self.graph.edges[edge].source
        if source in self.run_marks:
            self._unrun(source)
        marked = self.marked.get(source)
        if marked is None:
            self.marked[source] = {edge}
        else:
            marked.add(edge)

    def apply_own(self, evaluation: Evaluation) -> None:
        """Stamp an evaluation's own marks for the current match (once)."""
        sequence = self.sequence
        if evaluation.marks is None or evaluation.applied == sequence:
            return
        evaluation.applied = sequence
        self._new_marks()
        run = evaluation.run
        if run is not None and run.source not in self.marked and run.source not in self.run_marks:
            self.run_marks[run.source] = run  # stands for its edges' stamps (see UpdateWalk.vertex)
            return
        for mark in evaluation.marks:
            self._apply_mark(mark)

    def _apply_path(self, uid: int) -> None:
        """Stamp the marks of the evaluations from the root down to ``uid`` (the edges above ``uid``)."""
        path = []
        while uid != self.schedule.root and uid != -1:
            path.append(uid)
            uid = self.schedule.walk_parent(uid)
        evaluation: Evaluation | None = self.root_eval
        for step in reversed(path):
            if evaluation is None or evaluation.kids is None:
                return
            evaluation = evaluation.kids.get(step)
            if evaluation is not None:
                self.apply_own(evaluation)

    def _mark_ancestors(self, parent: int, dfu: Scoring) -> None:
        """Mark the unconstrained edges from ``parent`` up to the root (Fluxion's ``enforce`` with
        ``enforce_unconstrained``), through the walked subsystem's parents."""
        schedule = self.schedule
        vertices = self.graph.vertices
        while True:
            grand = schedule.walk_parent(parent)
            if grand == -1:
                return
            edge = schedule.parent_edge(parent)
            if self.edge_seq[edge] == self.sequence:
                return
            evals = dfu.by_type.get(vertices[parent].type)
            if evals is not None and evals.best_k == 0:  # unconstrained
                self.edge_needs[edge] = vertices[parent].size
                self.edge_excl[edge] = False
                self._stamp(edge)
            parent = grand

    def mark_edge(self, edge: int, needs: int, exclusive: bool) -> None:
        """Mark ``edge`` for the update walk of the current sequence, as a match's choice would."""
        self.edge_needs[edge] = needs
        self.edge_excl[edge] = exclusive
        self._stamp(edge)

    def unlead(self, uid: int) -> None:
        """Forget that the edge into ``uid`` leads a task slot."""
        edge = self.schedule.walk_parent_edge(uid)
        if edge != -1:
            self.unlead_edge(edge)
