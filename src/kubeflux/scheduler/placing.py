"""How kubeflux places a job (a lone pod, or a pod group's members) now.

**Now** (:meth:`Placer._start_at`): one engine match per pod, in the pod's order, each on the nodes the pod may use
now (:mod:`kubeflux.scheduler.fit`) and whose books stay within their allocatable for the pod's planned time
beside the reservations (:mod:`kubeflux.scheduler.timebooks`). For a group, at least ``minMember`` members (the
rest of those present when room allows; a member beyond ``minMember`` that does not fit is left for later). When
that one-by-one match fails for a group, the group's assignment is searched (:mod:`kubeflux.scheduler.gang`) and
placed as found: each member onto its node's free cores and gpus with the engine's ``update``.

**Later**: reservations, in :mod:`kubeflux.scheduler.reserving`.
"""

from __future__ import annotations

import functools
import math
from collections import Counter

from mypy_extensions import mypyc_attr

from kubeflux.match.engine import EngineError, MatchOp
from kubeflux.match.policy import PolicySpec, parse_policy
from kubeflux.scheduler.fit import NodeFit, StaticFit
from kubeflux.scheduler.gang import EXHAUSTED, Exhausted, GangMember, assign
from kubeflux.scheduler.informer import Allocation, ClusterBooks
from kubeflux.scheduler.objects import PODS, Node, Pod, ResourceList
from kubeflux.scheduler.queue import PendingJob
from kubeflux.scheduler.translate import (
    Placement,
    PodRequestError,
    gang_jobspec,
    pod_policy,
)

__all__ = ["REASON_HELD_WHOLE", "REASON_NOT_EMPTY", "REASON_RESERVED", "Placer", "alike_run"]

REASON_RESERVED = "node(s) had no free cores for the pod's planned time (reserved for pods ahead in the queue)"
REASON_HELD_WHOLE = "node(s) were held whole by a node-exclusive job"
REASON_NOT_EMPTY = "node(s) were not empty for the pod's planned time (its match policy holds a node whole)"
EXACT_ROUNDS = 4
"""Searches per start time: after each, the node whose cores could not give what its planner's count promised is
counted core by core in the next."""
_UNLIMITED = 1 << 62

Assignment = list[tuple[str, Pod, str, int]]
"""(pod uid, pod, node, planned duration) for each member placed."""


@mypyc_attr(allow_interpreted_subclasses=True)  # so that KubefluxScheduler may allow them (core.py)
class Placer(ClusterBooks):
    """The placement half of the scheduler core: filters, matches, the assignment search and reservations."""

    # ================================================================== filters

    def _static_fit(self, pod: Pod) -> StaticFit:
        """The graph nodes passing the usage-independent filters for pods constrained like ``pod``."""
        known = self._fits.known_static(pod)
        if known is not None:
            return known
        graph = self.graph
        assert graph is not None
        outside = sum(1 for name in self.nodes if not graph.usable(name))
        usable = [name for name in graph.specs if graph.usable(name)] if graph.gone else graph.specs
        return self._fits.static(pod, usable, self.nodes, outside)

    def _shortfall(self, name: str, pod: Pod) -> list[str]:
        node = self.nodes[name]
        short = self.ledger.shortfall(pod.requests, name, node.allocatable)
        if not short and self.sharing.name != "shared":
            short = self.own.shortfall(pod.requests, name, self.sharing.share(node))
        return short

    def _fit(self, pod: Pod) -> NodeFit:
        """The graph nodes that may take ``pod`` now."""
        return self._fits.fit(pod, self._static_fit(pod), self._shortfall)

    def _reasons(self, pod: Pod) -> Counter[str]:
        """Why each node may not take ``pod`` now, counted as kube-scheduler counts them."""
        return self._fit(pod).reasons()

    def _fits_during(self, name: str, pod: Pod, start: int, end: int) -> bool:
        """Whether node ``name``'s exact books take ``pod`` throughout ``[start, end)``, beside the reservations."""
        node = self.nodes[name]
        if not self.plans.fits_during(name, pod.requests, node.allocatable, start, end):
            return False
        return self.sharing.name == "shared" or self.own_plans.fits_during(
            name, pod.requests, self.sharing.share(node), start, end
        )

    def _room_during(self, name: str, start: int, end: int) -> ResourceList:
        """What kubeflux may use of node ``name`` throughout ``[start, end)`` by the exact books in time."""
        node = self.nodes[name]
        room = self.plans.free_during(name, node.allocatable, start, end)
        if self.sharing.name != "shared":
            share = self.own_plans.free_during(name, self.sharing.share(node), start, end)
            room = {res: min(amount, room.get(res, amount)) for res, amount in share.items()}
        return room

    def _room(self, name: str) -> dict[str, int]:
        """What kubeflux may still use of node ``name`` by the exact books now (under its sharing policy): what the
        node has left, and under a policy other than ``shared`` no more than what is left of kubeflux's share (as
        :meth:`_room_during`; another scheduler's pods may fill the node below that share)."""
        node = self.nodes[name]
        used = self.ledger.on(name)
        room = {res: amount - used.get(res, 0) for res, amount in node.allocatable.items()}
        if self.sharing.name != "shared":
            own = self.own.on(name)
            share = self.sharing.share(node)
            room = {res: min(amount - own.get(res, 0), room.get(res, amount)) for res, amount in share.items()}
        return room

    def _held_short(self, pod: Pod, fit: NodeFit, start: int, end: int) -> list[str]:
        """The nodes that may take ``pod`` now but whose reservations leave it no room before ``end``."""
        return [
            name for name in self.plans.held_nodes() if fit.fits(name) and not self._fits_during(name, pod, start, end)
        ]

    # ================================================================== placing now

    def _minimum(self, job: PendingJob) -> int:
        """How many of the job's pods must start together: a group's ``minMember`` (at most its pods), else all."""
        if job.group is None:
            return len(job.pods)
        group = self.queue.groups.get(job.group)
        return len(job.pods) if group is None else max(1, min(group.min_member, len(job.pods)))

    def _start_at(self, job: PendingJob, start: int) -> list[tuple[Pod, Allocation]] | Counter[str]:
        """Place at least the job's minimum of pods now (as many as fit); their allocations, or why not."""
        pods = list(job.pods.items())
        minimum = self._minimum(job)
        if len(pods) > 1:
            short = self._first_short_member(job, minimum)
            if short is not None:
                return self._reasons(short)
        self._drop_deferred()  # the engine is read from here on
        if len(pods) > 1 and self._too_few_slots(job, start, minimum):
            return self._short_reasons(pods[0][1], start)
        planned = self._place_planned(job, start, minimum)
        if planned is not None:
            return planned
        made, first_short = self._together(job, pods, start, minimum)
        if made is not None:
            return made
        if len(pods) > 1 and alike_run(job) < len(pods) and self._may_fit(job, start):
            # Alike members matched one by one fit as many as any assignment would: only different ones search.
            exact: set[str] = set()
            for _ in range(EXACT_ROUNDS):
                found = self._assignment(job, start, start, minimum, exact)
                if not isinstance(found, list):
                    break
                placed = self._place_assignment(found, start)
                if not isinstance(placed, str):
                    return placed
                exact.add(placed)
        assert first_short is not None
        return self._short_reasons(first_short[0], start)

    def _short_reasons(self, pod: Pod, start: int) -> Counter[str]:
        """Why ``pod``, the first member that did not fit now, did not: kube-scheduler's reasons, and for each node
        that may take it by the books now, what held it (read after the members placed before it were undone)."""
        fit = self._fit(pod)
        reasons = fit.reasons()
        if fit.any:
            graph = self.graph
            assert graph is not None
            whole = self._whole_node_policy(pod)
            duration = self._planned(pod, start) if whole else 0
            for name in fit.open:  # counted: their order does not matter
                if graph.held_whole(name, start):
                    reasons[REASON_HELD_WHOLE] += 1
                elif whole and (name in graph.unrecorded or not graph.free_counts(name, start, duration)[2]):
                    reasons[REASON_NOT_EMPTY] += 1
                else:
                    reasons[REASON_RESERVED] += 1
        return reasons

    def _too_few_slots(self, job: PendingJob, start: int, minimum: int) -> bool:
        """A quick sufficient test that neither matching the job's members one by one now nor searching their
        assignment places ``minimum`` of them, so that neither need be tried; the first member that fails one by one
        is then one of its leading run of alike members (the trace's ``k`` pods of a node's cores and the rest).

        Each node that may take those members by the books now takes at most as many as its exact books hold, and
        on a node with reservations as many as its books in time hold beside them and its cores and gpus counted one
        by one stay free (for the shortest planned time of one): an upper bound of what a match or the search finds
        (elsewhere nothing is planned to start, and the books count every bound pod); every other member at most
        once. False when it cannot tell (sockets, a policy without a static order, pods the engine still has to
        take, a pod count in the requests)."""
        graph = self.graph
        assert graph is not None
        pods = list(job.pods.values())
        first = pods[0]
        if graph.socket_size is not None or self._stuck or PODS in first.requests or not self._static_order(first):
            return False
        run = alike_run(job)
        needed = minimum - (len(pods) - run)  # of the run, when every other member is placed
        if needed <= 0:
            return False
        cores, gpus = self._pod_shape(first)
        fit = self._copies_now(first)
        counts = fit.copies
        assert counts is not None
        if fit.copies_unbounded:
            return False
        slots = fit.copies_total  # by the books now; a node with reservations may take fewer
        if slots < needed:
            return True
        duration = -1
        held = self.plans.holds
        for name in held if len(held) < len(counts) else counts:
            copies = counts.get(name)
            if not copies or name not in held:
                continue
            # reserved later: what stays free until the members' planned ends
            if duration < 0:
                duration = min(self._planned(pod, start) for pod in pods[:run])
            fewer = min(copies, _copies(self._room_during(name, start, start + duration), first.requests) or 0)
            if fewer and (cores or gpus):
                free_cores, free_gpus, _ = graph.free_counts(name, start, duration, exact=True)
                fewer = min(fewer, free_cores // cores if cores else fewer, free_gpus // gpus if gpus else fewer)
            slots -= copies - fewer
            if slots < needed:
                return True
        return False

    def _may_fit(self, job: PendingJob, at: int) -> bool:
        """A quick necessary test before a search: the graph has as many cores free from ``at`` as the job's
        ``minimum`` smallest members take."""
        graph = self.graph
        assert graph is not None
        pods = list(job.pods.values())
        needed = sum(sorted(self._pod_shape(pod)[0] for pod in pods)[: self._minimum(job)])
        shortest = min(self._planned(pod, at, reserve=True) for pod in pods)
        return not needed or graph.free_total(at, shortest) >= needed

    def _together(
        self, job: PendingJob, pods: list[tuple[str, Pod]], start: int, minimum: int
    ) -> tuple[list[tuple[Pod, Allocation]] | None, tuple[Pod, NodeFit] | None]:
        """:meth:`_one_by_one`'s answer, with the job's leading run of alike members placed by one engine match
        when that gives the same placements (:meth:`_run_at_once`)."""
        run = alike_run(job) if len(pods) > 1 else 1
        placed = self._run_at_once(job, pods[:run], start) if run > 1 else None
        if placed is None:
            return self._one_by_one(pods, start, minimum)
        if not placed:  # fewer than the run fit: one by one, the first member short is one of them
            if minimum < len(pods):
                return self._one_by_one(pods, start, minimum)
            first = pods[0][1]
            return None, (first, self._fit(first))
        more, short = self._one_by_one(pods[run:], start, max(0, minimum - run))
        if more is None:
            self._undo(placed, "gang incomplete")
            return None, short
        return placed + more, short

    def _run_at_once(
        self, job: PendingJob, run: list[tuple[str, Pod]], start: int
    ) -> list[tuple[Pod, Allocation]] | None:
        """A run of alike members placed by one engine match of a gang jobspec (``slot(N)`` of the member's
        shape) instead of one match each: their allocations, all sharing one engine job (released member by
        member: :meth:`ClusterBooks._release_engine`); an empty list when the engine finds fewer than N slots;
        None when it cannot tell, and the members are matched one by one.

        Under a node-centric policy with a static order (``lonode``, ``hinode``) one by one places each member on
        the first node in that order with room, on its lowest free cores (its highest under ``hinode``); the
        gang's slots come from the nodes in the same order, as many from each as fit, so the placements are the
        same when every node's books take the members the engine gives it. That is checked after the match (the
        engine counts cores and gpus only, and a node with reservations was hidden only when one member would not
        fit beside them); when it fails the job is cancelled and the members are matched one by one. Nodes with
        sockets, policies that hold nodes whole, a pod count or differing planned times are left to the plain
        path."""
        graph = self.graph
        assert graph is not None
        first = run[0][1]
        if (
            graph.socket_size is not None
            or not graph.node_centric
            or PODS in first.requests
            or pod_policy(first, self.policy) != self.policy
            or self._whole_node_policy(first)
        ):
            return None
        cores, gpus = self._pod_shape(first)
        duration = self._planned(first, start)
        if (not cores and not gpus) or any(self._planned(pod, start) != duration for _, pod in run):
            return None
        fit = self._fit(first)
        if not fit.any:
            return None
        spec = gang_jobspec([pod for _, pod in run], duration, self.shape.gpu_resources)
        if spec is None:
            return None
        short = self._held_short(first, fit, start, start + duration)
        for name in short:
            fit.hidden.add(name)
        try:
            result = graph.match(MatchOp.ALLOCATE, spec, job.key, start, fit.hidden, self.policy)
        finally:
            for name in short:
                fit.hidden.discard(name)
        if not result.matched:
            return []
        chunks = self._split_slots(graph.placements, cores, gpus)
        if chunks is None or len(chunks) != len(run) or not self._books_take(first, chunks, start, duration):
            graph.cancel(result.jobid, freed=())
            return None
        made = [
            (pod, self._record(uid, pod, where.node, result.jobid, start, duration, where))
            for (uid, pod), where in zip(run, chunks, strict=True)
        ]
        self._shared[result.jobid] = {uid for uid, _ in run}
        return made

    def _split_slots(self, placements: tuple[Placement, ...], cores: int, gpus: int) -> list[Placement] | None:
        """A gang match's slots, one placement each, in the order one-by-one matching would have made them: the
        nodes in the policy's order, on each node its cores and gpus ``cores`` and ``gpus`` at a time, from the
        lowest in graph order up (``lonode``) or from the highest down (``hinode``: each member then takes the
        highest of those left). None when a node's share is not a whole number of slots."""
        graph = self.graph
        assert graph is not None
        ranks = graph.node_ranks()
        engine = graph.engine
        vertices = engine.graph.vertices
        high = engine.policy.spec.high  # one by one, each member takes the highest free cores (hinode) or lowest
        chunks: list[Placement] = []
        for where in sorted(placements, key=lambda where: ranks.get(where.node, 1 << 62)):
            count = len(where.cores) // cores if cores else len(where.gpus) // gpus
            if not count or len(where.cores) != count * cores or len(where.gpus) != count * gpus:
                return None
            core_uids, gpu_uids = graph.leaves(where.node)
            taken_cores, taken_gpus = set(where.cores), set(where.gpus)
            node_cores = [vertices[uid].name for uid in core_uids if vertices[uid].name in taken_cores]
            node_gpus = [vertices[uid].name for uid in gpu_uids if vertices[uid].name in taken_gpus]
            for slot in range(count):
                index = count - 1 - slot if high else slot
                chunks.append(
                    Placement(
                        where.node,
                        tuple(node_cores[index * cores : (index + 1) * cores]),
                        tuple(node_gpus[index * gpus : (index + 1) * gpus]),
                    )
                )
        return chunks

    def _books_take(self, pod: Pod, chunks: list[Placement], start: int, duration: int) -> bool:
        """Whether each node's exact books take as many pods like ``pod`` as ``chunks`` put there, now and (on a
        node with reservations) throughout the pod's planned time."""
        counts = Counter(where.node for where in chunks)
        held = self.plans.holds
        for name, count in counts.items():
            if count == 1:  # the match hid the nodes that do not take one
                continue
            copies = _copies(self._room(name), pod.requests)
            if copies is not None and copies < count:
                return False
            if name in held and not self._fits_many(name, pod, count, start, start + duration):
                return False
        return True

    def _fits_many(self, name: str, pod: Pod, count: int, start: int, end: int) -> bool:
        """Whether ``count`` pods like ``pod`` fit node ``name``'s exact books together throughout ``[start, end)``."""
        node = self.nodes[name]
        books = [(self.plans, node.allocatable)]
        if self.sharing.name != "shared":
            books.append((self.own_plans, self.sharing.share(node)))
        for plans, allocatable in books:
            peak = plans.peak(name, start, end)
            for res, amount in pod.requests.items():
                if amount > 0 and peak.get(res, 0) + count * amount > allocatable.get(res, 0):
                    return False
            if PODS in allocatable and peak.get(PODS, 0) + count > allocatable[PODS]:
                return False
        return True

    def _one_by_one(
        self, pods: list[tuple[str, Pod]], start: int, minimum: int
    ) -> tuple[list[tuple[Pod, Allocation]] | None, tuple[Pod, NodeFit] | None]:
        """Each pod where its match policy prefers, in order, leaving out those beyond ``minimum`` that do not fit:
        the allocations (None when fewer than ``minimum`` fit: nothing is kept) and the first pod that did not."""
        made: list[tuple[Pod, Allocation]] = []
        spare = len(pods) - minimum
        first_short: tuple[Pod, NodeFit] | None = None
        for uid, pod in pods:
            fit = self._fit(pod)
            try:
                alloc = self._place_pod(uid, pod, fit, start) if fit.any else None
            except PodRequestError:
                self._undo(made, "gang rejected")
                raise
            if alloc is not None:
                made.append((pod, alloc))
                continue
            if first_short is None:
                first_short = (pod, fit)
            if spare:
                spare -= 1
                continue
            self._undo(made, "gang incomplete")
            return None, first_short
        return made, first_short

    def _undo(self, made: list[tuple[Pod, Allocation]], why: str) -> None:
        for _, placed in made:
            self._release(placed.uid, why)

    def _first_short_member(self, job: PendingJob, minimum: int) -> Pod | None:
        """A quick test before matching a group of alike members (same requests and constraints) pod by pod: as
        many as the exact books' free amounts hold, node after node; the first member beyond them when fewer than
        ``minimum`` fit (None when enough do, or when the members differ: their search is exact, a packing is
        not). A full count is kept until the books change, for the next group of that shape in the pass."""
        pods = list(job.pods.values())
        first = pods[0]
        if PODS in first.requests or alike_run(job) < len(pods):
            return None
        fit = self._copies_now(first)
        if fit.copies_unbounded:
            return None
        packed = fit.copies_total  # packed node after node, in any order: the first member beyond is the same
        return pods[packed] if packed < minimum else None

    def _copies_now(self, pod: Pod) -> NodeFit:
        """``pod``'s fit entry with how many pods like it each open node takes now by the exact books, kept up to date
        incrementally (:meth:`~kubeflux.scheduler.fit.FitIndex.copies`)."""
        requests = pod.requests
        return self._fits.copies(self._fit(pod), lambda name: _copies(self._room(name), requests))

    def _place_pod(self, uid: str, pod: Pod, fit: NodeFit, start: int) -> Allocation | None:
        graph = self.graph
        assert graph is not None
        duration = self._planned(pod, start)
        short = self._held_short(pod, fit, start, start + duration)
        for name in short:
            fit.hidden.add(name)
        try:
            result = self._match(MatchOp.ALLOCATE, pod, duration, start, fit.hidden)
            placement: Placement | None = None
            if result is None:  # takes no core or gpu: the policy's node among those the books can take it on
                excluded = set(short)
                chosen = graph.preferred_node(
                    lambda name: fit.fits(name) and name not in excluded, pod_policy(pod, self.policy), start
                )
                if chosen is None:
                    return None
                node, jobid = chosen, 0
            elif not result.matched:
                spanned = self._span_sockets(pod, fit, set(short), start, duration)
                if spanned is None:
                    return None
                placement, jobid = spanned
                node = placement.node
            else:
                placement = self._trimmed(pod, result.jobid, graph.placement())
                node, jobid = placement.node, result.jobid
        finally:
            for name in short:
                fit.hidden.discard(name)
        return self._record(uid, pod, node, jobid, start, duration, placement)

    def _trimmed(self, pod: Pod, jobid: int, placement: Placement) -> Placement:
        """A pod larger than a socket, split evenly over sockets, may have been given more cores or gpus than it
        asks (``pod_jobspec``): the surplus, the last ones, is released at once and the placement is what is left.
        A node-exclusive pod keeps its whole node."""
        cores, gpus = self._pod_shape(pod)
        if len(placement.cores) <= cores and len(placement.gpus) <= gpus:
            return placement
        graph = self.graph
        assert graph is not None
        if self._whole_node_policy(pod):
            return placement
        surplus = {*placement.cores[cores:], *placement.gpus[gpus:]}
        vertices = graph.engine.graph.vertices
        uids = [uid for leaves in graph.leaves(placement.node) for uid in leaves if vertices[uid].name in surplus]
        try:
            graph.engine.release_vertices(jobid, uids, source=f"node {placement.node}")
        except EngineError:
            return placement
        return Placement(placement.node, placement.cores[:cores], placement.gpus[:gpus])

    def _span_sockets(
        self, pod: Pod, fit: NodeFit, excluded: set[str], start: int, duration: int
    ) -> tuple[Placement, int] | None:
        """On nodes with sockets, a pod no single socket has room for now: its cores and gpus from several sockets
        of the node its match policy prefers among those with enough free (the lowest-numbered free ones: the
        fewest sockets), put on with the engine's ``update``. (placement, engine job id); None when no node has
        room, or the graph has no sockets.

        A pod whose policy holds nodes whole takes only a wholly free node, which it then holds whole: its match
        fails on an empty node too when the node's sockets are smaller or more uneven than the largest socket its
        jobspec was split by (``pod_jobspec``: 3 gpus over 2 sockets are 2 + 1, a pod of 3 asks 2 + 2)."""
        graph = self.graph
        assert graph is not None
        if graph.socket_size is None:
            return None
        whole = self._whole_node_policy(pod)
        cores, gpus = self._pod_shape(pod)

        def room(name: str) -> bool:
            if not fit.fits(name) or name in excluded or (whole and name in graph.unrecorded):
                return False
            free_cores, free_gpus, empty = graph.free_counts(name, start, duration)
            if free_cores < cores or free_gpus < gpus or (whole and not empty):
                return False
            free_cores, _, _ = graph.free_counts(name, start, duration, exact=True)
            return free_cores >= cores

        node = graph.preferred_node(room, pod_policy(pod, self.policy), start)
        leaves = None if node is None else self._leaves(pod, node, start, duration)
        if node is None or leaves is None:
            return None
        jobid = self._replay_member(pod, node, leaves, start, duration, start)
        if jobid < 0:
            return None
        names = graph.engine.graph.vertices
        self.log.append(f"Pod {pod.key}: no socket of a node has room; placed over sockets of node {node}")
        return Placement(
            node, tuple(names[u].name for u in leaves[:cores]), tuple(names[u].name for u in leaves[cores:])
        ), jobid

    def _record(
        self, uid: str, pod: Pod, node: str, jobid: int, start: int, duration: int, placement: Placement | None
    ) -> Allocation:
        """Count a pod kubeflux just placed: books, allocation, its planned end."""
        self.ledger.take(uid, node, pod.requests)
        self.own.take(uid, node, pod.requests)
        self._fits.changed(node)
        alloc = Allocation(uid, pod.key, node, True, jobid, start, duration, placement)
        self.allocations[uid] = alloc
        if jobid:
            self._note_end(start + duration, uid)
        self._bound[uid] = pod
        self._uid_by_key[pod.key] = uid
        return alloc

    # ================================================================== the assignment search

    def _assignment(
        self, job: PendingJob, at: int, now: int, minimum: int, exact: set[str]
    ) -> Assignment | Exhausted | None:
        """Nodes for at least ``minimum`` of the job's pods starting at ``at`` (now, or later for a reservation), by
        the search of :mod:`kubeflux.scheduler.gang` over what each node has free throughout the members' longest
        planned time (its cores counted one by one on the ``exact`` nodes, else by its planner: see
        :meth:`GraphView.free_counts`); None when there are none, :data:`~kubeflux.scheduler.gang.EXHAUSTED` when
        the search gave up."""
        graph = self.graph
        assert graph is not None
        members = list(job.pods.items())
        durations = [self._planned(pod, at, reserve=at > now) for _, pod in members]
        window = max(durations)
        index: dict[str, int] = {}
        names: list[str] = []
        candidates: list[tuple[int, ...]] = []
        for _, pod in members:
            mine: list[int] = []
            for name in self._static_fit(pod).fit:
                position = index.get(name)
                if position is None:
                    position = index[name] = len(names)
                    names.append(name)
                mine.append(position)
            candidates.append(tuple(mine))
        dims = sorted({res for _, pod in members for res, amount in pod.requests.items() if amount > 0})
        free: list[list[int]] = []
        whole: list[bool] = []
        for name in names:
            cores, gpus, wholly = graph.free_counts(name, at, window, exact=name in exact)
            room = self._room_during(name, at, at + window)
            free.append([cores, gpus, *(room.get(res, 0) for res in dims), room.get(PODS, _UNLIMITED)])
            whole.append(wholly and name not in graph.unrecorded)
        gang = [
            GangMember(
                (*self._pod_shape(pod), *(pod.requests.get(res, 0) for res in dims), 1),
                candidates[i],
                self._whole_node_policy(pod),
            )
            for i, (_, pod) in enumerate(members)
        ]
        found = assign(gang, free, whole, minimum)
        if found is None or found is EXHAUSTED:
            return found
        assert isinstance(found, list)
        return [
            (uid, pod, names[node], durations[i])
            for i, ((uid, pod), node) in enumerate(zip(members, found, strict=True))
            if node is not None
        ]

    def _static_order(self, pod: Pod) -> bool:
        """Whether ``pod``'s match policy (and the profile's) orders nodes statically and holds none whole: not
        ``first``, whose walk follows free amounts (with it, matches made and undone since change later choices:
        a failed one-by-one attempt is not skipped), nor ``*nodex``."""
        return all(
            not spec.stop_on_first and not spec.node_exclusive
            for spec in (_policy_spec(pod_policy(pod, self.policy)), _policy_spec(self.policy))
        )

    def _whole_node_policy(self, pod: Pod) -> bool:
        return _policy_spec(pod_policy(pod, self.policy)).node_exclusive

    def _leaves(self, pod: Pod, node: str, at: int, duration: int) -> list[int] | None:
        """The engine vertices (cores, then gpus) ``pod`` takes on ``node`` during its planned time; None when the
        node's whole cores cannot give them (its free count was an upper bound)."""
        graph = self.graph
        assert graph is not None
        cores, gpus = self._pod_shape(pod)
        core_uids = graph.free_leaves(node, "core", at, duration, cores)
        gpu_uids = graph.free_leaves(node, "gpu", at, duration, gpus)
        if core_uids is None or gpu_uids is None:
            return None
        return core_uids + gpu_uids

    def _replay_member(self, pod: Pod, node: str, leaves: list[int], at: int, duration: int, now: int) -> int:
        """Put one member of an assignment onto its node's ``leaves`` (a reservation when ``at`` is later than
        ``now``); its engine job id, 0 when it takes no leaf, -1 when the engine refused."""
        if not leaves:
            return 0
        graph = self.graph
        assert graph is not None
        whole = self._whole_node_policy(pod)
        result = graph.replay(node, leaves, at, duration, pod.key, now, whole_node=whole, reserve=at > now)
        return result.jobid if result.matched else -1

    def _place_assignment(self, found: Assignment, start: int) -> list[tuple[Pod, Allocation]] | str:
        """Allocate an assignment found for now; the name of a node whose cores could not give it when one could
        not (nothing is kept then)."""
        made: list[tuple[Pod, Allocation]] = []
        for uid, pod, node, duration in found:
            placed = self._place_on(uid, pod, node, duration, start)
            if placed is None:
                self._undo(made, "assignment not realizable")
                return node
            made.append((pod, placed))
        self.log.append(f"Placed pod group of {len(made)} by assignment search at {start}")
        return made

    def _place_on(self, uid: str, pod: Pod, node: str, duration: int, start: int) -> Allocation | None:
        """Allocate ``pod`` on ``node`` now, on the node's free cores and gpus; None when they cannot give it."""
        graph = self.graph
        assert graph is not None
        leaves = self._leaves(pod, node, start, duration)
        jobid = -1 if leaves is None else self._replay_member(pod, node, leaves, start, duration, start)
        if leaves is None or jobid < 0:
            return None
        names = graph.engine.graph.vertices
        cores, _ = self._pod_shape(pod)
        placement = Placement(
            node, tuple(names[u].name for u in leaves[:cores]), tuple(names[u].name for u in leaves[cores:])
        )
        return self._record(uid, pod, node, jobid, start, duration, placement)

    def _place_planned(self, job: PendingJob, start: int, minimum: int) -> list[tuple[Pod, Allocation]] | None:
        """A group placed where its last reservation's assignment put each member (:attr:`PendingJob.assigned`),
        when every one of them fits there now, then its other members one by one as they fit; None (nothing kept)
        otherwise. Placed in pod order instead, the members could take each other's nodes and start fewer than
        the reservation promised (a one-core member on the node an eight-core one was to have whole)."""
        plan = job.assigned
        if not plan:
            return None
        graph = self.graph
        assert graph is not None
        members = [(uid, pod) for uid, pod in job.pods.items() if uid in plan]
        if len(members) < minimum:
            return None
        made: list[tuple[Pod, Allocation]] = []
        for uid, pod in members:
            node = plan[uid]
            duration = self._planned(pod, start)
            fit = self._fit(pod)
            placed = None
            if (
                fit.fits(node)
                and node not in self._held_short(pod, fit, start, start + duration)
                and (
                    not self._whole_node_policy(pod)
                    or (node not in graph.unrecorded and graph.free_counts(node, start, duration)[2])
                )
            ):
                placed = self._place_on(uid, pod, node, duration, start)
            if placed is None:
                self._undo(made, "planned assignment not realizable")
                return None
            made.append((pod, placed))
        rest = [(uid, pod) for uid, pod in job.pods.items() if uid not in plan]
        more, _ = self._one_by_one(rest, start, 0)
        self.log.append(f"Placed pod group of {len(made)} as its reservation assigned at {start}")
        return made + (more or [])

    def _empty_nodes(self) -> list[Node]:
        """The usable graph nodes, empty, with kubeflux's share of each (the sharing policy) as allocatable."""
        graph = self.graph
        assert graph is not None
        return [
            Node(name, allocatable=self.sharing.share(node)) for name, node in self.nodes.items() if graph.usable(name)
        ]


def alike_run(job: PendingJob) -> int:
    """How many of the job's first pods are alike (all of them: ``len(job.pods)``); kept on the job until its pods
    change (:meth:`PendingJob.put`: a pod's object is replaced whenever what placing reads of it changes, as the
    informer assumes too)."""
    run = job.alike
    if run >= 0:
        return run
    pods = list(job.pods.values())
    first = pods[0] if pods else None
    run = next((i for i, pod in enumerate(pods) if first is None or not _alike(pod, first)), len(pods))
    job.alike = run
    return run


def _alike(pod: Pod, other: Pod) -> bool:
    """Whether the two pods request the same and are constrained alike (one fit shape)."""
    return pod is other or (
        pod.requests == other.requests
        and pod.node_selector == other.node_selector
        and pod.tolerations == other.tolerations
        and pod.required_node_affinity == other.required_node_affinity
        and pod.annotations.get("kubeflux.io/match-policy") == other.annotations.get("kubeflux.io/match-policy")
    )


def _copies(room: dict[str, int], requests: dict[str, int]) -> int | None:
    """How many pods requesting ``requests`` fit in ``room`` (None: any number)."""
    counts = [max(0, room.get(res, 0) // amount) for res, amount in requests.items() if amount > 0]
    if PODS in room:
        counts.append(max(0, room[PODS]))
    return min(counts) if counts else None


@functools.lru_cache(maxsize=64)
def _policy_spec(name: str) -> PolicySpec:
    """:func:`~kubeflux.match.policy.parse_policy`, parsed once per name (asked for several times per gang and pass;
    a bad name raises each time, as it is not cached)."""
    return parse_policy(name)


def ceil_time(seconds: float) -> int:
    """A time in whole seconds of the engine's axis, rounded up (a back-off's end)."""
    return math.ceil(seconds)
