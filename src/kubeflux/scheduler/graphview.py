"""The engine as the scheduler sees it: one graph node per admitted Kubernetes node, matches with nodes hidden.

Hiding is how per-pod filters reach the matcher: a match is given the nodes that may not take the pod (a
:class:`HiddenNodes` kept up to date by its owner, the fit of one pod shape) as the engine's ``excluded`` nodes,
which it treats exactly as nodes marked down. Marking them down would change their fingerprints, and so void their
cached evaluations at every pod of another shape. Nodes deleted from the cluster are marked down
(:meth:`GraphView.set_gone`) until they come back; nodes that appear, or come
back with another capacity, are attached in place (:meth:`GraphView.put_node`, the engine's ``attach`` and
``remove``). Pods placed elsewhere (another scheduler, or kubeflux before a restart) are replayed onto their node
with the engine's ``update_leaves`` (:meth:`GraphView.replay`).

A node's cores and gpus may be its children or sit below its sockets: each node's core and gpu vertices are listed
once, when the node is built or attached (:meth:`GraphView.leaves`), and every count, search and release over a
node's cores and gpus reads that list.
"""

from __future__ import annotations

import dataclasses
from collections import Counter, deque
from collections.abc import Callable, Collection, Iterable
from contextlib import suppress
from typing import Any, Final

from kubeflux.jobspec import Jobspec
from kubeflux.match.engine import Engine, EngineError, MatchOp, MatchResult
from kubeflux.match.policy import MatchPolicy, PolicySpec, parse_policy, perf_class
from kubeflux.resources import (
    Graph,
    NodeSpec,
    Status,
    add_node,
    build_graph,
    graph_to_jgf,
    id_from_name_suffix,
    node_path,
)
from kubeflux.resources.graph import Vertex
from kubeflux.scheduler.hiding import HiddenNodes, domain_key
from kubeflux.scheduler.nodelevels import NodeLevels
from kubeflux.scheduler.translate import Placement, PlacementWriter

__all__ = ["CLUSTER_NAME", "GraphView", "HiddenNodes", "ReleaseLog"]

CLUSTER_NAME: Final = "kubeflux"
_CHANGES_KEPT = 4096
"""Changed names a :class:`HiddenNodes` records; beyond that, hiding it again compares whole sets."""
_LEAF_TYPES: Final = ("core", "gpu")
"""The vertex types a node's leaves have (:meth:`GraphView.leaves`, :meth:`GraphView.node_of`)."""
_FREED_KEPT = 1 << 16
"""Released vertices the release log (:class:`ReleaseLog`) holds before it starts again."""


class ReleaseLog:
    """What the graph gave back, in order: (core or gpu vertex uid, who released it) for every vertex a release or
    cancel freed (:mod:`kubeflux.scheduler.kept` reads it to tell whether a kept reservation is still the one the
    engine would make). ``who`` is the owner a caller named, else None. A release that does not name its vertices
    (a job cancelled whole, a node replaced or back up) makes every earlier mark unknown."""

    def __init__(self) -> None:
        self.freed: list[tuple[int, object]] = []
        self._base = 0
        """Entries dropped from the front of :attr:`freed` (log positions count from the first ever)."""
        self._unnamed = 0
        """Releases whose vertices were not named."""

    def note(self, uids: Iterable[Any], owner: object) -> None:
        """Log ``uids`` released (``Any``: the callers' int objects are kept, see :meth:`ScheduleView.uid_objects`)."""
        freed = self.freed
        if len(freed) >= _FREED_KEPT:
            self._base += len(freed)
            freed.clear()
            self._unnamed += 1  # what was dropped is no longer known to anyone reading from before
        freed.extend((uid, owner) for uid in uids)

    def note_unnamed(self) -> None:
        """Something was released without naming its vertices: anything may be free."""
        self._unnamed += 1

    def mark(self) -> tuple[int, int]:
        """The log's position now (for :meth:`since`)."""
        return self._base + len(self.freed), self._unnamed

    def since(self, mark: tuple[int, int]) -> list[tuple[int, object]] | None:
        """The vertices released since :meth:`mark` gave ``mark``; None when a release since did not name its
        vertices (anything may be free)."""
        position, unnamed = mark
        if unnamed != self._unnamed or position < self._base:
            return None
        return self.freed[position - self._base :]


def first_placement(result: MatchResult) -> Placement:
    """The node (the first, for a match over several), cores and gpus a successful match took, as its placements
    say (:attr:`MatchResult.placements`); ValueError when it took none."""
    if not result.placements:
        raise ValueError("the match names no node")
    return result.placements[0]


class GraphView:
    """An :class:`Engine` over ``specs`` (in order) with the scheduler's bookkeeping around it."""

    def __init__(self, specs: list[NodeSpec], policy: str, horizon: int, log: deque[str]) -> None:
        self._engine = Engine(  # (leaves reserved: a node's are made when a match first descends into it)
            build_graph(specs, cluster=CLUSTER_NAME, reserve=True), policy=policy, horizon=horizon, keep_cancelled=False
        )
        self._engine.writer = PlacementWriter()
        self._releasing: dict[int, list[int]] = {}
        """Engine job id → vertices released from it that the engine has not been told of yet (:meth:`release`
        with ``partial``): told at the next read of :attr:`engine`, or all at once when the job's last part ends."""
        self.lost: list[int] = []
        """Engine jobs cancelled whole because a part of them could not be released alone (never expected: the
        informer replays the pods that held the rest)."""
        self.policy = policy
        self.specs = {spec.name: spec for spec in specs}
        self.paths = {spec.name: node_path(spec, CLUSTER_NAME) for spec in specs}
        self.gone: set[str] = set()
        self.unrecorded: set[str] = set()
        """Nodes where a bound pod is counted in the books but not held in the graph (the engine could not take
        it yet): node-exclusive matches never land there, as the node is not whole (set by the informer)."""
        self._orders: dict[tuple[bool, bool], list[str]] = {}
        self._ranks: tuple[list[str], dict[str, int]] | None = None
        """:meth:`node_ranks`, with the order it was made from."""
        self._changes = 0
        """Counts the engine calls that change allocations (matches, replays, releases, cancels, attaches)."""
        self._free_at: tuple[tuple[int, int], list[str]] | None = None
        """``first``'s node order for fractional pods, with the (time, :attr:`_changes`) it was computed for."""
        self._leaves: dict[str, tuple[list[int], list[int]]] = {}
        """Node name → its core and gpu vertex uids, in graph order (:meth:`leaves`)."""
        self._engine.traverser.level_types = frozenset(kind for spec in specs for kind, _ in spec.domains)
        self.released = ReleaseLog()
        """What releases and cancels gave back (:mod:`kubeflux.scheduler.kept` reads it)."""
        graph = self.engine.graph
        uid_of: dict[str, int] = {}
        for name, path in self.paths.items():
            vertex = graph.vertex_at(path)
            if vertex is not None:
                self._leaves[name] = _core_and_gpu_leaves(graph, vertex)
                uid_of[name] = vertex.uid
        self.levels = NodeLevels(uid_of, any(spec.domains for spec in specs))
        """The nodes' vertices and slots and the levels above them, as a match hides nodes."""
        self._socket_sizes = Counter(_socket_size(spec) for spec in specs if spec.sockets > 0)
        """(cores, gpus) of one socket → how many nodes have sockets of that size (the first socket's, which takes
        a remainder)."""
        self.socket_size = _largest(self._socket_sizes)
        """The (cores, gpus) of the largest socket of any node, None when no node has sockets (the pods' jobspecs
        then have no socket level: :func:`kubeflux.scheduler.translate.pod_jobspec`)."""
        self.log = log
        self.log.append(f"Number nodes  {len(specs)}")
        for spec in specs:
            self.log.append(f"Node  {spec.name}  flux cpu  {spec.cores}")
            self.log.append(f"Node  {spec.name}  total mem  {spec.memory}")
        self.log.append(f"Can request at most  {max((s.cores for s in specs), default=0)}  exclusive cpu")
        self.log.append(f'Match policy:  {{"matcher_policy": "{policy}"}}')

    def node_of(self, uid: int) -> str | None:
        """The node of core or gpu vertex ``uid`` (None for another vertex): the node vertex above it, which is
        named after its node (and keeps its parent when the node is removed or attached again)."""
        graph = self._engine.graph
        vertices = graph.vertices
        if not 0 <= uid < len(vertices) or graph.vertex(uid).type not in _LEAF_TYPES:
            return None
        parent = vertices[uid].parent
        while parent != -1:
            vertex = vertices[parent]
            if vertex.type == "node":
                return vertex.name
            parent = vertex.parent
        return None

    @property
    def node_centric(self) -> bool:
        """Whether the engine's own policy orders matches by node id first (``lonode``, ``hinode`` …)."""
        spec = self.engine.policy.spec
        return spec.node_centric and not spec.stop_on_first and not spec.performance_class

    def node_ranks(self) -> dict[str, int]:
        """Each admitted node's place in the engine's own policy order (0 the most preferred)."""
        order = self._node_order(self.engine.policy.spec)
        ranks = self._ranks
        if ranks is None or ranks[0] is not order:
            ranks = self._ranks = (order, {name: rank for rank, name in enumerate(order)})
        return ranks[1]

    def usable(self, name: str) -> bool:
        return name in self.specs and name not in self.gone

    def leaves(self, name: str, *, made: bool = False) -> tuple[list[int], list[int]]:
        """Node ``name``'s core and gpu vertex uids (below its sockets, if it has some); empty for a node not in
        the graph. The lists are the cache itself: not to be changed. ``made``: the vertices are read (their
        names), so the node's reserved leaves are made first; otherwise the uids alone are good (as the engine's
        tables are keyed), and a vertex may be the graph's placeholder (:meth:`Graph.reserve_leaves`)."""
        found = self._leaves.get(name, _NO_LEAVES)
        if made and (first := found[0] or found[1]):
            self._engine.graph.vertex(first[0])  # (a node's leaves are made together)
        return found

    def _mark(self, name: str, status: Status) -> None:
        self.engine.set_status(self.paths[name], status)

    def set_gone(self, name: str, gone: bool) -> None:
        """A node left the cluster (down until it returns) or came back."""
        if name not in self.specs or (name in self.gone) == gone:
            return
        self.released.note_unnamed()
        if gone:
            self.gone.add(name)
        else:
            self.gone.discard(name)
        self._mark(name, Status.DOWN if gone else Status.UP)

    def match(
        self,
        op: MatchOp,
        spec: Jobspec,
        what: str,
        start: int,
        hide: Collection[str] | HiddenNodes,
        policy: str | None = None,
        *,
        later: bool = False,
    ) -> MatchResult:
        """One engine match at ``start`` that treats the ``hide`` nodes as down (the engine's ``excluded``: their
        status is not changed, so their cached evaluations stay valid for the next pod); logged as Fluence logs
        its match calls."""
        engine = self.engine
        names = hide.names if isinstance(hide, HiddenNodes) else hide
        if self.unrecorded and (parse_policy(policy) if policy is not None else engine.policy.spec).node_exclusive:
            names = {*names, *self.unrecorded}
        excluded = self.levels.excluded(names, hide, engine.graph.vertices) if names else None
        chosen = MatchPolicy(parse_policy(policy)) if policy is not None and policy != self.policy else None
        result = engine.match(op, spec, now=start, source=what, excluded=excluded, later=later, policy=chosen)
        self._changes += 1
        if not result.matched:
            self.log.append(f"Match {op.value} {what}: no fit ({result.elapsed:.6f} s)")
            return result
        if result.reserved:
            self.log.append(
                f"Match {op.value} {what}: jobid {result.jobid} reserved at {result.at} ({result.elapsed:.6f} s)"
            )
        else:
            where = first_placement(result)
            self.log.append(
                f"Match {op.value} {what}: jobid {result.jobid} node {where.node} cores {len(where.cores)} "
                f"({result.elapsed:.6f} s)"
            )
        return result

    def domains(self, kind: str) -> dict[str, int | None]:
        """Each node's domain vertex of type ``kind`` (None: none above it), kept until a node is attached."""
        return self.levels.domains(kind, self.engine.graph, self.paths)

    def preferred_node(self, fits: Callable[[str], bool], policy: str, at: int) -> str | None:
        """The node among those that ``fits`` that ``policy`` prefers for a pod that takes no vertex (a fractional
        pod), by the engine's own node order: low policies the lowest node id, high ones the highest (ties: uniq id,
        in the same direction), ``variation`` the lowest ``perf_class``, ``first`` (whose walk explores the subtrees
        with the most free cores first) the one with the most cores free at ``at``. None when no node fits.

        Each order is kept and walked until the first node that fits: the id orders until a node is attached,
        ``first``'s until the engine's allocations change or time moves on."""
        return next((name for name in self.ordered(policy, at) if fits(name)), None)

    def ordered(self, policy: str, at: int) -> list[str]:
        """The admitted nodes in the order ``policy`` prefers them (see :meth:`preferred_node`)."""
        spec = parse_policy(policy)
        return self._free_order(at) if spec.stop_on_first else self._node_order(spec)

    def _free_order(self, at: int) -> list[str]:
        """The admitted nodes by cores free at ``at``, most first (ties: highest uniq id)."""
        if self._free_at is not None and self._free_at[0] == (at, self._changes):
            return self._free_at[1]
        graph = self.engine.graph
        subplans = self.engine.schedule.subplans
        keyed: list[tuple[int, int, str]] = []
        for name in self.specs:
            vertex = graph.vertex_at(self.paths[name])
            if vertex is None:
                continue
            plan = subplans.get(vertex.uid)
            free = plan.avail_resources_at(at, "core") if plan and "core" in plan.resource_types else 0
            keyed.append((-free, -vertex.uniq_id, name))
        order = [name for _, _, name in sorted(keyed)]
        self._free_at = ((at, self._changes), order)
        return order

    def _node_order(self, spec: PolicySpec) -> list[str]:
        """The admitted nodes, most preferred first, for an id-ordering policy (kept until a node is attached)."""
        direction = (spec.performance_class, spec.high)
        order = self._orders.get(direction)
        if order is None:
            graph = self.engine.graph
            keyed: list[tuple[tuple[int, ...], str]] = []
            for name in self.specs:
                vertex = graph.vertex_at(self.paths[name])
                if vertex is None:
                    continue
                if spec.performance_class:
                    key: tuple[int, ...] = (perf_class(vertex), vertex.id, vertex.uniq_id)
                else:
                    key = (*domain_key(graph.vertices, vertex), vertex.id, vertex.uniq_id)
                    if spec.high:
                        key = tuple(-part for part in key)
                keyed.append((key, name))
            order = self._orders[direction] = [name for _, name in sorted(keyed)]
        return order

    def busy_cores(self, name: str, at: int) -> int:
        """How many of node ``name``'s cores an engine *allocation* (not a reservation) holds at time ``at``."""
        graph = self.engine.graph
        vertex = graph.vertex_at(self.paths[name])
        if vertex is None:
            return 0
        schedule = self.engine.schedule
        busy = 0
        for uid in self.leaves(name)[0]:
            spans = schedule.allocations.get(uid)
            if not spans:
                continue
            plan = schedule.plans[uid]
            for span in spans.values():
                start = plan.span_start(span)
                if start <= at < start + plan.span_duration(span):
                    busy += 1
                    break
        return busy

    def free_counts(self, name: str, at: int, duration: int, *, exact: bool = False) -> tuple[int, int, bool]:
        """(cores, gpus) of node ``name`` free throughout ``[at, at + duration)``, and whether the node is wholly
        free then (no engine job on it at all). Unless ``exact``, the cores come from the node's pruning planner
        when it has one: an upper bound of how many cores are each free throughout (a core busy early and another
        busy late count as one free core); ``exact`` counts them one by one. The gpus are counted one by one."""
        graph = self.engine.graph
        vertex = graph.vertex_at(self.paths[name]) if name in self.paths else None
        if vertex is None:
            return 0, 0, False
        schedule = self.engine.schedule
        plans = schedule.plans
        subplan = schedule.subplans.get(vertex.uid)
        counted = not exact and subplan is not None and "core" in subplan.resource_types
        cores = (
            subplan.avail_resources_array_during(at, duration)[subplan.resource_types.index("core")]
            if (subplan is not None and counted)
            else 0
        )
        gpus = 0
        core_uids, gpu_uids = self.leaves(name)
        total = len(core_uids)
        if not counted:
            for uid in core_uids:
                plan = plans.get(uid)
                cores += plan is None or plan.avail_during(at, duration, 1)
        for uid in gpu_uids:
            plan = plans.get(uid)
            gpus += plan is None or plan.avail_during(at, duration, 1)
        spec = self.specs[name]
        node_plan = plans.get(vertex.uid)
        whole = cores >= total and gpus >= spec.gpus and (node_plan is None or node_plan.avail_during(at, duration, 1))
        return cores, gpus, whole

    def held_whole(self, name: str, at: int) -> bool:
        """Whether an engine job holds node ``name`` whole at ``at`` (a pod of a node-exclusive policy)."""
        vertex = self.engine.graph.vertex_at(self.paths[name]) if name in self.paths else None
        if vertex is None:
            return False
        plan = self.engine.schedule.plans.get(vertex.uid)
        return plan is not None and not plan.avail_during(at, 1, 1)

    def free_total(self, at: int, duration: int) -> int:
        """Cores free in the whole graph throughout ``[at, at + duration)`` (an upper bound for any placement)."""
        root = self.engine.schedule.root_subplan()
        if "core" not in root.resource_types:
            return 0
        return root.avail_resources_array_during(at, duration)[root.resource_types.index("core")]

    def free_leaves(
        self,
        name: str,
        kind: str,
        at: int,
        duration: int,
        count: int,
        prefer: Iterable[str] = (),
        then: Iterable[str] = (),
    ) -> list[int] | None:
        """``count`` of node ``name``'s ``kind`` vertices (``core`` or ``gpu``) free during ``[at, at + duration)``,
        those named in ``prefer`` first, then those in ``then``, then in graph order; None when there are not
        enough."""
        if count == 0:
            return []
        if name not in self._leaves:
            return None
        vertices = self.engine.graph.vertices
        plans = self.engine.schedule.plans
        wanted, second = set(prefer), set(then)
        free: list[tuple[int, int]] = []
        for uid in self.leaves(name, made=bool(wanted or second))[1 if kind == "gpu" else 0]:
            plan = plans.get(uid)
            if plan is None or plan.avail_during(at, duration, 1):
                vertex_name = vertices[uid].name if wanted or second else ""
                free.append((0 if vertex_name in wanted else 1 if vertex_name in second else 2, uid))
        if len(free) < count:
            return None
        return [uid for _, uid in sorted(free)[:count]]

    def replay(
        self,
        name: str,
        leaves: list[int],
        start: int,
        duration: int,
        what: str,
        now: int,
        *,
        whole_node: bool,
        reserve: bool = False,
    ) -> MatchResult:
        """Put a pod placed elsewhere onto node ``name``: its ``leaves`` (cores, gpus) held during
        ``[start, start + duration)`` as a new engine job (the engine's ``update_leaves``), allocated when it
        started by ``now``. With ``whole_node`` (a pod of a node-exclusive policy) the job holds the node whole, as
        its match did; else only its leaves, whatever the engine's policy (another scheduler's pod uses what it
        asks for, and several may share a node). With ``reserve`` the job is a reservation, as
        ``allocate_orelse_reserve`` makes them: for a new allocation the engine counts an allocation on an
        exclusive vertex whenever it is (as Fluxion does), a reservation only during its own window."""
        engine = self.engine
        chosen = None
        if engine.policy.spec.node_exclusive != whole_node:
            chosen = MatchPolicy(dataclasses.replace(engine.policy.spec, node_exclusive=whole_node))
        result = engine.update_leaves(
            engine.next_jobid, leaves, at=start, duration=duration, reserve=reserve, now=now, source=what, policy=chosen
        )
        self._changes += 1
        if result.matched:
            self.log.append(f"Update allocate {what}: jobid {result.jobid} node {name} leaves {len(leaves)}")
        else:
            self.log.append(f"Update allocate {what}: refused: {result.error}")
        return result

    def put_node(self, spec: NodeSpec) -> None:
        """Attach node ``spec.name`` in place (the engine's ``attach``); a node of that name already in the graph
        is removed first (its jobs there are released: the caller replays them)."""
        engine = self.engine
        graph = engine.graph
        path = node_path(spec, CLUSTER_NAME)
        if (before := self.paths.get(spec.name)) is not None and graph.vertex_at(before) is not None:
            engine.remove_path(before)  # (a node whose domains changed leaves its old place)
        document = _attachable(graph, spec)
        engine.attach(document, source=f"node {spec.name}")
        self._orders.clear()
        self._changes += 1
        self.released.note_unnamed()
        old = self.specs.get(spec.name)
        self.specs[spec.name] = spec
        self.paths[spec.name] = path
        vertex = graph.vertex_at(path)
        self._leaves[spec.name] = _core_and_gpu_leaves(graph, vertex) if vertex is not None else _NO_LEAVES
        self.levels.attach(spec.name, vertex.uid if vertex is not None else None, bool(spec.domains))
        if spec.sockets > 0 or (old is not None and old.sockets > 0):
            if old is not None and old.sockets > 0:
                self._socket_sizes[_socket_size(old)] -= 1
            if spec.sockets > 0:
                self._socket_sizes[_socket_size(spec)] += 1
            self.socket_size = _largest(self._socket_sizes)
        self.gone.discard(spec.name)
        engine.traverser.level_types |= {kind for kind, _ in spec.domains}
        self.log.append(f"Node  {spec.name}  flux cpu  {spec.cores}  (attached)")

    @property
    def engine(self) -> Engine:
        """The engine, told first of every release still pending (:meth:`release`): whoever reads it sees the
        graph as the cluster is."""
        if self._releasing:
            self._tell_releases()
        return self._engine

    def _tell_releases(self) -> None:
        engine = self._engine
        pending, self._releasing = self._releasing, {}
        for jobid, uids in pending.items():
            try:
                engine.release_vertices(jobid, uids, source="pods ended")
            except EngineError:
                self.log.append(f"Cancel flux job: {jobid} (a part of it could not be released alone)")
                with suppress(EngineError):
                    engine.cancel(jobid)
                self.lost.append(jobid)

    def release(self, jobid: int, name: str, leaves: Iterable[str], *, partial: bool = False) -> bool:
        """End a one-node job: its ``leaves`` (core and gpu names) on node ``name`` released by vertex with the
        engine's ``release_vertices`` (which touches only those vertices and their ancestors), else a plain
        cancel. False when the engine no longer knows the job.

        ``partial``: the job holds more than these leaves (a gang's members placed by one match) and keeps the
        rest. The engine is told at its next read, or with the job's last part: a gang whose members end at
        once is then released in one step, not member by member. A job whose parts were released so is ended
        (``partial`` False) by its last part."""
        self._changes += 1
        engine = self._engine  # the other jobs' pending releases do not touch this one's vertices
        vertices = engine.graph.vertices
        names = set(leaves)
        if name in self._leaves and names:
            core_uids, gpu_uids = self.leaves(name, made=True)
            held = [uid for uids in (core_uids, gpu_uids) for uid in uids if vertices[uid].name in names]
            if partial:
                self._releasing.setdefault(jobid, []).extend(held)
                self.released.note(held, None)
                return True
            earlier = self._releasing.pop(jobid, None)
            whole = earlier is None and self._holds_whole(jobid, name)
            try:
                if engine.release_vertices(jobid, held if earlier is None else earlier + held, source=f"node {name}"):
                    self.released.note((*core_uids, *gpu_uids) if whole else held, None)
                    return True
            except EngineError:
                pass
        return self.cancel(jobid) and not partial

    def cancel(self, jobid: int, freed: Iterable[int] | None = None, owner: object = None) -> bool:
        """Cancel an engine job; False when the engine does not know it (already gone). ``freed`` names the core
        and gpu vertices it held, for the release log (with ``owner``): empty for a job made and cancelled within
        one decision, None when unknown."""
        self._changes += 1
        self._releasing.pop(jobid, None)
        try:
            self._engine.cancel(jobid)
        except EngineError:
            return False
        if freed is None:
            self.released.note_unnamed()
        else:
            self.released.note(freed, owner)
        return True

    def _holds_whole(self, jobid: int, name: str) -> bool:
        """Whether job ``jobid`` holds node ``name`` itself (a node-exclusive job: all its vertices free with it)."""
        vertex = self._engine.graph.vertex_at(self.paths[name])
        return vertex is not None and jobid in self._engine.schedule.allocations.get(vertex.uid, ())

    def reserve_again(self, leaves: Iterable[int], at: int, duration: int, what: str, now: int) -> int:
        """Put back a reservation the engine would make again (:mod:`kubeflux.scheduler.kept`): ``leaves`` held
        during ``[at, at + duration)`` as a new reserved job, under the job id a match would take; its id, or -1
        when the engine refused (nothing is held then)."""
        engine = self.engine
        result = engine.update_leaves(
            engine.next_jobid, leaves, at=at, duration=duration, reserve=True, now=now, source=what
        )
        self._changes += 1
        if not result.matched:
            self.log.append(f"Match allocate_orelse_reserve {what}: kept reservation refused: {result.error}")
            return -1
        self.log.append(f"Match allocate_orelse_reserve {what}: jobid {result.jobid} reserved at {at} (kept)")
        return result.jobid


_NO_LEAVES: tuple[list[int], list[int]] = ([], [])


def _attachable(graph: Graph, spec: NodeSpec) -> dict[str, Any]:
    """Node ``spec`` (with its domains) as a JGF subgraph that the engine attaches to ``graph``: the vertices the graph
    has (the root, its zone, rack …) under their uniq ids, the others numbered after the graph's, as a full build
    numbers them."""
    rank = max((r for r in graph.by_rank if r >= 0), default=-1) + 1
    piece = Graph()
    add_node(piece, spec, cluster=CLUSTER_NAME, rank=rank)
    document = graph_to_jgf(piece)
    fresh = len(graph.vertices)
    renamed: dict[str, str] = {}
    levels = {kind for kind, _ in spec.domains}
    for record in document["graph"]["nodes"]:
        meta = record["metadata"]
        existing = graph.vertex_at(meta["paths"].get("containment", ""))
        if existing is not None:  # the root, or a domain (zone, rack) the graph has: the node joins it
            uniq = existing.uniq_id
        else:
            if meta["type"] in levels and id_from_name_suffix(meta["name"]) is None:
                meta["id"] = len(graph.by_type.get(meta["type"], ()))  # numbered as a full build numbers it
            uniq = fresh
            fresh += 1
        renamed[record["id"]] = str(uniq)
        record["id"], meta["uniq_id"] = str(uniq), uniq
    for edge in document["graph"]["edges"]:
        edge["source"], edge["target"] = renamed[edge["source"]], renamed[edge["target"]]
    return document


def _core_and_gpu_leaves(graph: Graph, node: Vertex) -> tuple[list[int], list[int]]:
    """The core and gpu vertices below ``node`` (its children, or its sockets' children), in graph order."""
    cores: list[int] = []
    gpus: list[int] = []
    vertices = graph.vertices
    leaves = graph.reserved.get(node.uid)
    if leaves is not None:  # (not made: the node's first children, cores then gpus, on the uids reserved)
        return node.children[: leaves.cores], node.children[leaves.cores : leaves.cores + leaves.gpus]
    stack = [node.uid]
    while stack:
        children: list[Any] = vertices[stack.pop()].children  # Any: the graph's int objects (ScheduleView.uid_objects)
        for uid in children:
            kind = vertices[uid].type
            if kind == "core":
                cores.append(uid)
            elif kind == "gpu":
                gpus.append(uid)
            elif kind != "memory":
                stack.append(uid)
    cores.sort()
    gpus.sort()
    return cores, gpus


def _socket_size(spec: NodeSpec) -> tuple[int, int]:
    """The (cores, gpus) of the node's first socket, its largest (the first sockets take a remainder)."""
    return -(-spec.cores // spec.sockets), -(-spec.gpus // spec.sockets)


def _largest(sizes: Counter[tuple[int, int]]) -> tuple[int, int] | None:
    """The most cores and the most gpus of any socket counted in ``sizes``, None when there is none."""
    present = [size for size, count in sizes.items() if count > 0]
    if not present:
        return None
    return max(c for c, _ in present), max(g for _, g in present)
