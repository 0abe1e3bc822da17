"""How kubeflux places a job (a lone pod, or a pod group's members) now.

:meth:`Placer.start_at`: one engine match per pod, in the pod's order, each on the nodes the pod may use now
(:mod:`kubeflux.scheduler.filtering`) and whose books stay within their allocatable for the pod's planned time
beside the reservations (:mod:`kubeflux.scheduler.timebooks`). For a group, at least ``minMember`` members (the
rest of those present when room allows; a member beyond ``minMember`` that does not fit is left for later). When
that one-by-one match fails for a group, the group's assignment is searched (:mod:`kubeflux.scheduler.gang`) and
placed as found: each member onto its node's free cores and gpus with the engine's ``update``. What is placed is
counted in the books (:meth:`ClusterBooks.record <kubeflux.scheduler.books.ClusterBooks.record>`).

Reservations for later are :mod:`kubeflux.scheduler.reserving`'s, which asks the placer for its engine matches and
assignment searches.
"""

from __future__ import annotations

import math
from collections import Counter, deque
from typing import Final

from kubeflux.match.engine import EngineError, MatchOp, MatchResult
from kubeflux.scheduler.allocation import Allocation
from kubeflux.scheduler.books import ClusterBooks
from kubeflux.scheduler.claimed import assume_devices
from kubeflux.scheduler.filtering import NodeFilter, alike_run, whole_node_policy
from kubeflux.scheduler.fit import NodeFit
from kubeflux.scheduler.gang import Exhausted
from kubeflux.scheduler.graphview import HiddenNodes, first_placement
from kubeflux.scheduler.objects import PODS, Pod
from kubeflux.scheduler.profile import Profile
from kubeflux.scheduler.queue import PendingJob, PendingQueue
from kubeflux.scheduler.searching import Assignment, search_assignment
from kubeflux.scheduler.translate import (
    Placement,
    gang_jobspec,
    pod_jobspec,
    pod_policy,
)
from kubeflux.scheduler.validation import PodRequestError

__all__ = [
    "EXACT_ROUNDS",
    "REASON_GROUP",
    "REASON_HELD_WHOLE",
    "REASON_NOT_EMPTY",
    "REASON_RESERVED",
    "Assignment",
    "Placer",
]

REASON_RESERVED: Final = "node(s) had no free cores for the pod's planned time (reserved for pods ahead in the queue)"
REASON_HELD_WHOLE: Final = "node(s) were held whole by a node-exclusive job"
REASON_NOT_EMPTY: Final = "node(s) were not empty for the pod's planned time (its match policy holds a node whole)"
REASON_GROUP: Final = "node(s) had room for the pod but not for the rest of its pod group with it"
"""A member's reason on a node whose books take it now and for its planned time, nothing reserved in the way: the
group as a whole did not fit (its members asking a node each, more than there are)."""
EXACT_ROUNDS: Final = 4
"""Searches per start time: after each, the node whose cores could not give what its planner's count promised is
counted core by core in the next."""


class Placer:
    """Places jobs now: engine matches (one by one, or a run of alike members at once), the assignment search, and
    what they place counted in the books. The reserver and the confiner hold the placer and read the scheduler's
    profile, books, queue, node filter and log through it."""

    def __init__(
        self, profile: Profile, books: ClusterBooks, queue: PendingQueue, filter: NodeFilter, log: deque[str]
    ) -> None:
        self.profile = profile
        self.books = books
        self.queue = queue
        self.filter = filter
        self.log = log
        self._said: Counter[str] | None = None
        """Why the first member short one by one did not fit, read beside the members placed before it."""

    def match(
        self, op: MatchOp, pod: Pod, duration: int, start: int, hide: set[str] | HiddenNodes
    ) -> MatchResult | None:
        """One engine match for ``pod`` with the ``hide`` nodes down; None for a pod that takes no core/gpu."""
        graph = self.books.graph
        assert graph is not None
        spec = pod_jobspec(pod, duration, self.profile.shape.gpu_resources, graph.socket_size)
        if spec is None:
            return None
        return graph.match(op, spec, pod.key, start, hide, pod_policy(pod, self.profile.policy))

    # ================================================================== placing now

    def start_at(self, job: PendingJob, start: int) -> list[tuple[Pod, Allocation]] | Counter[str]:
        """Place at least the job's minimum of pods now (as many as fit); their allocations, or why not."""
        pods = list(job.pods.items())
        minimum = self.queue.minimum(job)
        self._said = None
        if len(pods) > 1:
            short = self.filter.first_short_member(job, minimum)
            if short is not None:
                return self.filter.reasons(short)
        self.books.drop_deferred()  # the engine is read from here on
        if len(pods) > 1 and self.filter.too_few_slots(job, start, minimum):
            return self._short_reasons(pods[0][1], start, group=True)
        planned = self._place_planned(job, start, minimum)
        if planned is not None:
            return planned
        made, first_short = self._together(job, pods, start, minimum)
        if made is not None:
            return made
        related = len(pods) > 1 and self._related(pods)
        if len(pods) > 1 and (related or alike_run(job) < len(pods)) and self.filter.may_fit(job, start):
            # Alike members matched one by one fit as many as any assignment would (unless they count each other
            # in a domain: a topology spread among them): only different ones search.
            exact: set[str] = set()
            for _ in range(EXACT_ROUNDS):
                found = self.assignment(job, start, start, minimum, exact)
                if not isinstance(found, list):
                    break
                placed = self._place_assignment(found, start, checked=related)
                if not isinstance(placed, str):
                    return placed
                exact.add(placed)
        assert first_short is not None
        said = self._take_said()
        return said if said is not None else self._short_reasons(first_short[0], start, group=len(pods) > 1)

    def _take_said(self) -> Counter[str] | None:
        """:attr:`_said`, forgotten (read through a call: a read after ``self._said = None`` in the same method is
        narrowed to None by mypy, and mypyc checks that type when compiled)."""
        said = self._said
        self._said = None
        return said

    def _related(self, pods: list[tuple[str, Pod]]) -> bool:
        """Whether the members' filters count each other in a domain (a topology spread or affinity among them):
        one by one, each was filtered against those placed before it; the search places them whole."""
        if all(pod.terms is None for _, pod in pods):
            return False
        relation = self.filter.among([pod for _, pod in pods])
        return relation is not None and (relation.spread is not None or relation.affine is not None)

    def _short_reasons(self, pod: Pod, start: int, *, group: bool = False) -> Counter[str]:
        """Why ``pod``, the first member that did not fit now, did not: kube-scheduler's reasons, and for each node
        that may take it by the books now, what held it (read after the members placed before it were undone). A
        member of a ``group`` on a node whose cores and gpus are free for its planned time was not held by any
        reservation: its group did not fit (:data:`REASON_GROUP`), not pods ahead of it."""
        fit = self.filter.fit(pod)
        reasons = fit.reasons()
        if fit.any:
            graph = self.books.graph
            assert graph is not None
            whole = whole_node_policy(pod, self.profile.policy)
            duration = self.profile.planned(pod, start) if whole or group else 0
            cores, gpus = self.books.pod_shape(pod) if group else (0, 0)
            for name in fit.open:  # counted: their order does not matter
                if graph.held_whole(name, start):
                    reasons[REASON_HELD_WHOLE] += 1
                elif whole and (name in graph.unrecorded or not graph.free_counts(name, start, duration)[2]):
                    reasons[REASON_NOT_EMPTY] += 1
                elif group and name not in graph.unrecorded and self._room(name, start, duration, cores, gpus):
                    reasons[REASON_GROUP] += 1
                else:
                    reasons[REASON_RESERVED] += 1
        return reasons

    def _room(self, name: str, start: int, duration: int, cores: int, gpus: int) -> bool:
        """Whether node ``name`` has ``cores`` and ``gpus`` free throughout ``[start, start + duration)``."""
        graph = self.books.graph
        assert graph is not None
        free_cores, free_gpus, _ = graph.free_counts(name, start, max(duration, 1), exact=True)
        return free_cores >= cores and free_gpus >= gpus

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
            return None, (first, self.filter.fit(first))
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
        member: ``ClusterBooks.release_engine``); an empty list when the engine finds fewer than N slots;
        None when it cannot tell, and the members are matched one by one.

        Under a node-centric policy with a static order (``lonode``, ``hinode``) one by one places each member on
        the first node in that order with room, on its lowest free cores (its highest under ``hinode``); the
        gang's slots come from the nodes in the same order, as many from each as fit, so the placements are the
        same when every node's books take the members the engine gives it. That is checked after the match (the
        engine counts cores and gpus only, and a node with reservations was hidden only when one member would not
        fit beside them); when it fails the job is cancelled and the members are matched one by one. Nodes with
        sockets, policies that hold nodes whole, a pod count or differing planned times are left to the plain
        path."""
        graph = self.books.graph
        assert graph is not None
        first = run[0][1]
        if (
            first.volume_claims  # each member's volumes are assumed before the next is filtered: one by one
            or graph.socket_size is not None
            or not graph.node_centric
            or PODS in first.requests
            or pod_policy(first, self.profile.policy) != self.profile.policy
            or whole_node_policy(first, self.profile.policy)
        ):
            return None
        cores, gpus = self.books.pod_shape(first)
        duration = self.profile.planned(first, start)
        if (not cores and not gpus) or any(self.profile.planned(pod, start) != duration for _, pod in run):
            return None
        one_per_node = self.filter.one_per_node([pod for _, pod in run])
        if one_per_node is None:
            return None
        fit = self.filter.fit(first)
        if not fit.any:
            return None
        members = [pod for _, pod in run]
        spec = gang_jobspec(members, duration, self.profile.shape.gpu_resources, one_per_node=one_per_node)
        if spec is None:
            return None
        short = self.filter.held_short(first, fit, start, start + duration)
        for name in short:
            fit.hidden.add(name)
        try:
            result = graph.match(MatchOp.ALLOCATE, spec, job.key, start, fit.hidden, self.profile.policy)
        finally:
            for name in short:
                fit.hidden.discard(name)
        if not result.matched:
            return []
        chunks = self._split_slots(result.placements, cores, gpus)
        if chunks is None or len(chunks) != len(run) or not self.filter.books_take(first, chunks, start, duration):
            graph.cancel(result.jobid, freed=())
            return None
        made = [
            (pod, self.books.record(uid, pod, where.node, result.jobid, start, duration, where))
            for (uid, pod), where in zip(run, chunks, strict=True)
        ]
        self.books.shared[result.jobid] = {uid for uid, _ in run}
        return made

    def _split_slots(self, placements: tuple[Placement, ...], cores: int, gpus: int) -> list[Placement] | None:
        """A gang match's slots, one placement each, in the order one-by-one matching would have made them: the
        nodes in the policy's order, on each node its cores and gpus ``cores`` and ``gpus`` at a time, from the
        lowest in graph order up (``lonode``) or from the highest down (``hinode``: each member then takes the
        highest of those left). None when a node's share is not a whole number of slots."""
        graph = self.books.graph
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
            core_uids, gpu_uids = graph.leaves(where.node, made=True)
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

    def _one_by_one(
        self, pods: list[tuple[str, Pod]], start: int, minimum: int
    ) -> tuple[list[tuple[Pod, Allocation]] | None, tuple[Pod, NodeFit] | None]:
        """Each pod where its match policy prefers, in order, leaving out those beyond ``minimum`` that do not fit:
        the allocations (None when fewer than ``minimum`` fit: nothing is kept) and the first pod that did not."""
        made: list[tuple[Pod, Allocation]] = []
        spare = len(pods) - minimum
        first_short: tuple[Pod, NodeFit] | None = None
        for uid, pod in pods:
            fit = self.filter.fit(pod)
            try:
                alloc = self._place_pod(uid, pod, fit, start) if fit.any else None
            except PodRequestError:
                self._undo(made, "gang rejected")
                raise
            if alloc is not None and self._assume_claims(pod, alloc):
                made.append((pod, alloc))
                continue
            if first_short is None:
                first_short = (pod, fit)
                if pod.terms is not None and len(pods) > 1:  # its reasons beside the members placed before it
                    self._said = self._short_reasons(pod, start)
            if spare:
                spare -= 1
                continue
            self._undo(made, "gang incomplete")
            return None, first_short
        return made, first_short

    def _undo(self, made: list[tuple[Pod, Allocation]], why: str) -> None:
        volumes = self.books.volumes
        for _, placed in reversed(made):
            volumes.revert(volumes.by_pod.pop(placed.uid, ()))
            self.books.release(placed.uid, why)

    def _assume_claims(self, pod: Pod, alloc: Allocation) -> bool:
        """Assume what ``pod``'s Bind writes for its claims on its node (kube-scheduler's ``AssumePodVolumes`` at
        Reserve), so that the members placed after it see its volumes; False (its allocation released) when they do
        not fit there."""
        if not pod.volume_claims:
            return assume_devices(self.books, pod, alloc)
        claims = self.filter.claim_bindings(pod, alloc.node)
        if isinstance(claims, str):
            self.books.release(alloc.uid, f"its volumes do not fit node {alloc.node}: {claims}")
            return False
        if claims:
            self.books.volumes.by_pod[alloc.uid] = claims
        return assume_devices(self.books, pod, alloc)

    def _place_pod(self, uid: str, pod: Pod, fit: NodeFit, start: int) -> Allocation | None:
        graph = self.books.graph
        assert graph is not None
        duration = self.profile.planned(pod, start)
        short = self.filter.held_short(pod, fit, start, start + duration)
        for name in short:
            fit.hidden.add(name)
        try:
            result = self.match(MatchOp.ALLOCATE, pod, duration, start, fit.hidden)
            placement: Placement | None = None
            if result is None:  # takes no core or gpu: the policy's node among those the books can take it on
                excluded = set(short)
                chosen = graph.preferred_node(
                    lambda name: fit.fits(name) and name not in excluded, pod_policy(pod, self.profile.policy), start
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
                placement = self._trimmed(pod, result.jobid, first_placement(result))
                node, jobid = placement.node, result.jobid
        finally:
            for name in short:
                fit.hidden.discard(name)
        return self.books.record(uid, pod, node, jobid, start, duration, placement)

    def _trimmed(self, pod: Pod, jobid: int, placement: Placement) -> Placement:
        """A pod larger than a socket, split evenly over sockets, may have been given more cores or gpus than it
        asks (``pod_jobspec``): the surplus, the last ones, is released at once and the placement is what is left.
        A node-exclusive pod keeps its whole node."""
        cores, gpus = self.books.pod_shape(pod)
        if len(placement.cores) <= cores and len(placement.gpus) <= gpus:
            return placement
        graph = self.books.graph
        assert graph is not None
        if whole_node_policy(pod, self.profile.policy):
            return placement
        surplus = {*placement.cores[cores:], *placement.gpus[gpus:]}
        vertices = graph.engine.graph.vertices
        uids = [
            uid for leaves in graph.leaves(placement.node, made=True) for uid in leaves if vertices[uid].name in surplus
        ]
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
        graph = self.books.graph
        assert graph is not None
        if graph.socket_size is None:
            return None
        whole = whole_node_policy(pod, self.profile.policy)
        cores, gpus = self.books.pod_shape(pod)

        def room(name: str) -> bool:
            if not fit.fits(name) or name in excluded or (whole and name in graph.unrecorded):
                return False
            free_cores, free_gpus, empty = graph.free_counts(name, start, duration)
            if free_cores < cores or free_gpus < gpus or (whole and not empty):
                return False
            free_cores, _, _ = graph.free_counts(name, start, duration, exact=True)
            return free_cores >= cores

        node = graph.preferred_node(room, pod_policy(pod, self.profile.policy), start)
        leaves = None if node is None else self.leaves(pod, node, start, duration)
        if node is None or leaves is None:
            return None
        jobid = self.replay_member(pod, node, leaves, start, duration, start)
        if jobid < 0:
            return None
        names = graph.engine.graph.vertices
        self.log.append(f"Pod {pod.key}: no socket of a node has room; placed over sockets of node {node}")
        return Placement(
            node, tuple(names[u].name for u in leaves[:cores]), tuple(names[u].name for u in leaves[cores:])
        ), jobid

    # ================================================================== the assignment search

    def assignment(
        self, job: PendingJob, at: int, now: int, minimum: int, exact: set[str]
    ) -> Assignment | Exhausted | None:
        """Nodes for at least ``minimum`` of the job's pods starting at ``at``, in the order they are to be bound
        (:func:`~kubeflux.scheduler.searching.search_assignment`)."""
        return search_assignment(self.profile, self.books, self.filter, job, at, now, minimum, exact)

    def leaves(self, pod: Pod, node: str, at: int, duration: int) -> list[int] | None:
        """The engine vertices (cores, then gpus) ``pod`` takes on ``node`` during its planned time; None when the
        node's whole cores cannot give them (its free count was an upper bound)."""
        graph = self.books.graph
        assert graph is not None
        cores, gpus = self.books.pod_shape(pod)
        core_uids = graph.free_leaves(node, "core", at, duration, cores)
        gpu_uids = graph.free_leaves(node, "gpu", at, duration, gpus)
        if core_uids is None or gpu_uids is None:
            return None
        return core_uids + gpu_uids

    def replay_member(self, pod: Pod, node: str, leaves: list[int], at: int, duration: int, now: int) -> int:
        """Put one member of an assignment onto its node's ``leaves`` (a reservation when ``at`` is later than
        ``now``); its engine job id, 0 when it takes no leaf, -1 when the engine refused."""
        if not leaves:
            return 0
        graph = self.books.graph
        assert graph is not None
        whole = whole_node_policy(pod, self.profile.policy)
        result = graph.replay(node, leaves, at, duration, pod.key, now, whole_node=whole, reserve=at > now)
        return result.jobid if result.matched else -1

    def _place_assignment(
        self, found: Assignment, start: int, *, checked: bool = False
    ) -> list[tuple[Pod, Allocation]] | str:
        """Allocate an assignment found for now, in its order; the name of a node whose cores could not give it
        when one could not (nothing is kept then). ``checked``: each member's filters are asked again beside the
        members placed before it (kube-scheduler's view of it when it is bound), and a node they refuse fails it."""
        made: list[tuple[Pod, Allocation]] = []
        for uid, pod, node, duration in found:
            refused = checked and not self.filter.fit(pod).fits(node)
            placed = None if refused else self._place_on(uid, pod, node, duration, start)
            if placed is None:
                self._undo(made, "assignment not realizable")
                return node
            made.append((pod, placed))
        self.log.append(f"Placed pod group of {len(made)} by assignment search at {start}")
        return made

    def _place_on(self, uid: str, pod: Pod, node: str, duration: int, start: int) -> Allocation | None:
        """Allocate ``pod`` on ``node`` now, on the node's free cores and gpus; None when they cannot give it."""
        graph = self.books.graph
        assert graph is not None
        leaves = self.leaves(pod, node, start, duration)
        jobid = -1 if leaves is None else self.replay_member(pod, node, leaves, start, duration, start)
        if leaves is None or jobid < 0:
            return None
        names = graph.engine.graph.vertices
        cores, _ = self.books.pod_shape(pod)
        placement = Placement(
            node, tuple(names[u].name for u in leaves[:cores]), tuple(names[u].name for u in leaves[cores:])
        )
        return self.books.record(uid, pod, node, jobid, start, duration, placement)

    def _place_planned(self, job: PendingJob, start: int, minimum: int) -> list[tuple[Pod, Allocation]] | None:
        """A group placed where its last reservation's assignment put each member (:attr:`PendingJob.assigned`),
        when every one of them fits there now, then its other members one by one as they fit; None (nothing kept)
        otherwise. Placed in pod order instead, the members could take each other's nodes and start fewer than
        the reservation promised (a one-core member on the node an eight-core one was to have whole)."""
        plan = job.assigned
        if not plan:
            return None
        graph = self.books.graph
        assert graph is not None
        members = [(uid, job.pods[uid]) for uid in plan if uid in job.pods]  # in the order they are to be bound
        if len(members) < minimum:
            return None
        made: list[tuple[Pod, Allocation]] = []
        for uid, pod in members:
            node = plan[uid]
            duration = self.profile.planned(pod, start)
            fit = self.filter.fit(pod)
            placed = None
            if (
                fit.fits(node)
                and node not in self.filter.held_short(pod, fit, start, start + duration)
                and (
                    not whole_node_policy(pod, self.profile.policy)
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


def ceil_time(seconds: float) -> int:
    """A time in whole seconds of the engine's axis, rounded up (a back-off's end)."""
    return math.ceil(seconds)
