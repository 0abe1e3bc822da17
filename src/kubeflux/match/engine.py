"""The matcher's facade (Fluxion's REAPI): match, reserve, cancel and query jobs on one resource graph.

An :class:`Engine` owns a graph, its schedule, the walks' state, a traverser (the select walk) and a default
policy, and a table of the jobs it has placed. It does no
I/O: callers hand it parsed jobspecs and get :class:`MatchResult` values back (the ``kubeflux query`` shell
prints them in ``resource-query``'s format; the scheduler core uses them directly).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Final

import numpy as np
import numpy.typing as npt
from mypy_extensions import mypyc_attr

from kubeflux.jobspec import Jobspec, JobspecError
from kubeflux.match import cancel as cancel_walk
from kubeflux.match import elastic, record
from kubeflux.match.evaluation import Excluded
from kubeflux.match.find import FindError, find, parse_expression
from kubeflux.match.flexible import FlexibleTraverser
from kubeflux.match.meta import AllocType, Errno, JobMeta, MatchFailure, PruningFilters
from kubeflux.match.picklable import Picklable
from kubeflux.match.planner import PlannerRangeError
from kubeflux.match.policy import MatchPolicy, parse_policy
from kubeflux.match.request import Request, requests_from_jobspec
from kubeflux.match.schedule import Schedule
from kubeflux.match.state import WalkState
from kubeflux.match.subsystems import SubsystemError, SubsystemTraverser, SubsystemView, parse_subsystems
from kubeflux.match.traverser import Traverser
from kubeflux.match.update import (
    ResourceSet,
    ResourceSetError,
    load_jgf_set,
    load_resource_set,
    release,
    release_vertices,
    replay,
    replay_leaves,
)
from kubeflux.match.view import ScheduleView
from kubeflux.match.visit import Visit
from kubeflux.match.writers import WRITERS, DiscardWriter, Placement, Writer, WriterError
from kubeflux.resources.graph import CONTAINMENT, Graph, GraphFormatError, Status

REQUESTS_KEPT: Final = 256
"""Jobspecs whose working copies the engine keeps for reuse."""
DEFAULT_HORIZON: Final = 3_153_600_000
"""Fluxion's default graph duration: 100 years of seconds."""


_DISCARD = DiscardWriter()

TRAVERSERS: dict[str, type[Traverser]] = {"simple": Traverser, "flexible": FlexibleTraverser}
"""``resource-query -T``: the simple DFU traverser, or the flexible one (or-slots and xor-slots)."""


class MatchOp(StrEnum):
    ALLOCATE = "allocate"
    ALLOCATE_ORELSE_RESERVE = "allocate_orelse_reserve"
    ALLOCATE_WITH_SATISFIABILITY = "allocate_with_satisfiability"
    SATISFIABILITY = "satisfiability"


class JobState(StrEnum):
    ALLOCATED = "ALLOCATED"
    RESERVED = "RESERVED"
    CANCELED = "CANCELED"


@dataclass(slots=True, init=False)
class JobInfo(Picklable):
    jobid: int
    state: JobState
    at: int
    jobspec: str
    overhead: float

    def __init__(self, jobid: int, state: JobState, at: int, jobspec: str, overhead: float) -> None:
        self.jobid = jobid  # (written out: see docs/native.md)
        self.state = state
        self.at = at
        self.jobspec = jobspec
        self.overhead = overhead


@dataclass(slots=True)
class MatchTimes:
    """The time each match and replay took, as resource-query's ``stat`` reports it (seconds), kept as running
    figures so a long-running scheduler does not keep one number per match."""

    count: int = 0
    total: float = 0.0
    low: float = float("inf")
    high: float = 0.0

    def add(self, elapsed: float) -> None:
        self.count += 1
        self.total += elapsed
        if elapsed < self.low:
            self.low = elapsed
        if elapsed > self.high:
            self.high = elapsed


@dataclass(slots=True, init=False)
class MatchResult(Picklable):
    jobid: int
    matched: bool
    at: int = 0
    """Start time: :attr:`now` (0 for resource-query) means now; later means a reservation."""
    satisfiable: bool = True
    resources: str = ""
    """The allocated resource set in the engine's match format (empty on failure)."""
    error: str = ""
    errno: Errno | None = None
    elapsed: float = 0.0
    consumed_id: bool = True
    """Whether the match used up a job id (satisfiability checks and bad jobspecs do not)."""
    now: int = 0
    """The ``now`` the match was made at; :attr:`at` later than it is a reservation."""
    placements: tuple[Placement, ...] = ()
    """The nodes, cores and gpus the match took, when the engine's writer keeps them (a
    :class:`~kubeflux.match.writers.PlacementWriter`: the scheduler's engine); empty otherwise."""

    def __init__(
        self,
        jobid: int,
        matched: bool,
        at: int = 0,
        satisfiable: bool = True,
        resources: str = "",
        error: str = "",
        errno: Errno | None = None,
        elapsed: float = 0.0,
        consumed_id: bool = True,
        now: int = 0,
        placements: tuple[Placement, ...] = (),
    ) -> None:  # (written out: see docs/native.md)
        self.jobid = jobid
        self.matched = matched
        self.at = at
        self.satisfiable = satisfiable
        self.resources = resources
        self.error = error
        self.errno = errno
        self.elapsed = elapsed
        self.consumed_id = consumed_id
        self.now = now
        self.placements = placements

    @property
    def reserved(self) -> bool:
        return self.matched and self.at > self.now


@dataclass(slots=True, eq=False)
class _Requests:
    """The matcher's working copy of a jobspec's resources, and what priming it gave."""

    jobspec: Jobspec
    requests: list[Request]
    primed: tuple[int, int] | None = None
    """The traverser and the number of tracked types the priming was for."""
    aggregates: dict[str, int] = field(default_factory=dict)
    exclusive_types: set[str] = field(default_factory=set)
    task_labels: list[str] = field(default_factory=list)
    root_exclusive: dict[str, bool] = field(default_factory=dict)
    """Per root type, whether the request asks for the root exclusively."""
    duration: tuple[int, int] = (0, 0)
    """The last (horizon, duration in seconds) the jobspec gave (:meth:`Jobspec.duration_seconds` is pure Python,
    and the jobspec is frozen); horizon 0 until then."""

    def planned_duration(self, horizon: int) -> int:
        """:meth:`Jobspec.duration_seconds`, asked of the jobspec once per horizon (its errors as it raises them)."""
        if self.duration[0] != horizon:
            self.duration = (horizon, self.jobspec.duration_seconds(horizon))
        return self.duration[1]


class _MatchScope:
    """What one match is asked for besides its request and id, from :meth:`Engine.match` to the select walks it
    makes: nothing of it is kept on the engine or its walks between matches."""

    __slots__ = ("excluded", "later", "now", "policy")

    def __init__(self, now: int, later: bool, policy: MatchPolicy, excluded: Excluded | None) -> None:
        self.now = now
        self.later = later
        self.policy = policy
        self.excluded = excluded


def _exclusive_types(requests: list[Request]) -> set[str]:
    """The types requested exclusively anywhere in ``requests``."""
    types: set[str] = set()
    for request in requests:
        if request.exclusive is True:
            types.add(request.type)
        types |= _exclusive_types(request.with_)
    return types


class EngineError(Exception):
    """A request the engine refuses (unknown job, bad argument); the message says why."""


@mypyc_attr(allow_interpreted_subclasses=True)  # compiled (mypyc), a user's Python subclass may still extend it
class Engine:
    def __init__(
        self,
        graph: Graph,
        *,
        policy: str = "first",
        prune_filters: str = "ALL:core,ALL:node",
        match_format: str = "simple",
        base: int = 0,
        horizon: int = DEFAULT_HORIZON,
        traverser: str = "simple",
        subsystems: str = "CA",
        keep_cancelled: bool = True,
    ) -> None:
        """``keep_cancelled=False`` forgets a job once it is cancelled or wholly released, instead of keeping it
        in :attr:`jobs` as CANCELED for ``info`` and ``stat`` (as resource-query does): a scheduler that runs
        for months makes and cancels millions of jobs (each reservation it re-plans is one)."""
        if match_format not in WRITERS:
            raise EngineError(f"unknown match format {match_format!r}; known: {', '.join(WRITERS)}")
        self.graph = graph
        self.policy = MatchPolicy(parse_policy(policy))
        self.base = base
        self.horizon = horizon
        kind = TRAVERSERS.get(traverser)
        if kind is None:
            raise EngineError(f"unknown traverser {traverser!r}; known: {', '.join(TRAVERSERS)}")
        try:
            walked = parse_subsystems(subsystems, graph)
        except SubsystemError as error:
            raise EngineError(str(error)) from error
        filters = PruningFilters(prune_filters)
        self.schedule: Schedule
        """The graph's schedule: what the update and cancel walks record and release. The select walk reads only
        its view (:attr:`Schedule.view`), through :attr:`state`."""
        self.state: WalkState
        """The marks and results the walks of a match share."""
        if walked == (CONTAINMENT,):
            self.schedule = Schedule(ScheduleView(graph, filters, base, horizon))
            self.state = WalkState(self.schedule.view)
            self.traverser: Traverser = kind(self.state)
        elif kind is Traverser:
            tree = SubsystemView(graph, filters, base, horizon, walked)
            self.schedule = Schedule(tree)
            self.state = WalkState(tree)
            self.traverser = SubsystemTraverser(self.state, tree.aux)
        else:
            raise EngineError(f"the {traverser} traverser matches only the containment subsystem (-S CA)")
        self.writer: Writer = WRITERS[match_format]()
        self.jobs: dict[int, JobInfo] = {}
        self.next_jobid = 1
        self._requests: dict[int, _Requests] = {}
        self.match_times = MatchTimes()
        self._live = LiveNodes()
        self.keep_cancelled = keep_cancelled

    @property
    def graph_end(self) -> int:
        return self.base + self.horizon

    # ------------------------------------------------------------------ matching

    def match(
        self,
        op: MatchOp,
        jobspec: Jobspec,
        *,
        jobid: int | None = None,
        source: str = "",
        now: int = 0,
        excluded: Excluded | None = None,
        later: bool = False,
        policy: MatchPolicy | None = None,
    ) -> MatchResult:
        """Allocate, reserve or test ``jobspec`` (``match <op>`` of resource-query).

        ``now`` is the current time on the graph's time axis (seconds from :attr:`base`): an allocation starts
        then, a reservation later. resource-query always matches at 0; a scheduler passes its clock.

        ``excluded``: uids of node vertices directly below the root that this match treats exactly as if they
        were marked down (a scheduler's per-pod filters), without changing their status. Nodes below levels
        (zones, racks) may be excluded too when ``excluded`` has a ``covers(uid)`` method telling the vertices
        above the nodes that have an excluded node below them (see :attr:`Traverser.covers`).

        ``later``: the caller knows the job cannot start at ``now`` (a scheduler whose exact books say so), so an
        ``allocate_orelse_reserve`` goes straight to the start times it would try after its walk at ``now`` failed.

        ``policy``: the match policy of this match (a scheduler's pod may name its own), else the engine's
        (:attr:`policy`).
        """
        chosen = self.policy if policy is None else policy
        return self._match(op, jobspec, jobid, source, _MatchScope(now, later, chosen, excluded))

    def _match(
        self,
        op: MatchOp,
        jobspec: Jobspec,
        jobid: int | None,
        source: str,
        scope: _MatchScope,
    ) -> MatchResult:
        started = time.perf_counter()
        now = scope.now
        consumes = op != MatchOp.SATISFIABILITY
        if jobid is None:
            jobid = self.next_jobid
        if consumes:
            self.next_jobid = jobid + 1
        result = MatchResult(jobid, False, consumed_id=consumes, now=now)
        try:
            if consumes:
                self._check_unused(jobid)
            result.at, result.resources, result.placements = self._run(op, jobspec, jobid, scope)
            result.matched = True
        except MatchFailure as failure:
            result.errno = failure.errno
            result.error = str(failure) if failure.errno == Errno.EINVAL else ""
            result.satisfiable = failure.errno not in (Errno.ENODEV, Errno.ENOENT)
        except JobspecError as exc:
            result.errno = Errno.EINVAL
            result.error = str(exc)
        result.elapsed = time.perf_counter() - started
        self.match_times.add(result.elapsed)
        if result.matched and consumes:
            state = JobState.RESERVED if result.at > now else JobState.ALLOCATED
            self.jobs[jobid] = JobInfo(jobid, state, result.at, source, result.elapsed)
        return result

    def _check_unused(self, jobid: int) -> None:
        """Refuse (EINVAL) a match under the id of a job that is still allocated or reserved.

        ``update`` sets the next id to its job's id + 1, which can be the id of a live job. resource-query matches
        under it regardless, and the vertices both jobs pass through (a rack, the root) then keep only the newer
        job's aggregate span: a cancel leaves the older one's behind for good, and a later match that the vertices
        admit is refused by an aggregate filter part-way through being recorded. One id names one job here.
        """
        info = self.jobs.get(jobid)
        if info is not None and info.state != JobState.CANCELED:
            raise MatchFailure(
                Errno.EINVAL, f"job {jobid} already exists ({info.state.value}); the next job id is {jobid + 1}"
            )

    def _working_copy(self, jobspec: Jobspec) -> _Requests:
        """The matcher's working copy of ``jobspec``'s resources, made once per jobspec object: a scheduler that
        matches the same jobspec again (pods of one shape) saves the copy, its priming and its shape signatures."""
        known = self._requests.get(id(jobspec))
        if known is not None and known.jobspec is jobspec:
            return known
        known = self._requests[id(jobspec)] = _Requests(
            jobspec, requests_from_jobspec(jobspec.resources), task_labels=[task.slot for task in jobspec.tasks]
        )
        if len(self._requests) > REQUESTS_KEPT:
            evicted = self._requests.pop(next(iter(self._requests)))
            self.traverser.forget_requests(evicted.requests)
        return known

    def _prime(self, copy: _Requests, policy: MatchPolicy) -> dict[str, int]:
        """The request's aggregate counts of the tracked types (for the root's filter), with each request's own
        counts set below it and its exclusive types given to the policy (Fluxion's ``prime_jobspec``). Computed
        again only when the tracked types change."""
        traverser = self.traverser
        key = (id(traverser), len(self.schedule.view.prune_filters.total))
        if copy.primed != key:
            copy.aggregates = {}
            traverser.prime_jobspec(copy.requests, copy.aggregates, policy)
            copy.exclusive_types = _exclusive_types(copy.requests)
            copy.primed = key
        policy.exclusive_types.update(copy.exclusive_types)
        return copy.aggregates

    def _run(
        self, op: MatchOp, jobspec: Jobspec, jobid: int, scope: _MatchScope
    ) -> tuple[int, str, tuple[Placement, ...]]:
        now, policy = scope.now, scope.policy
        copy = self._working_copy(jobspec)
        requests = copy.requests
        saved_exclusive = set(policy.exclusive_types)
        try:
            root_type = self.graph.vertices[self.schedule.view.root].type
            exclusive = copy.root_exclusive.get(root_type)
            if exclusive is None:
                exclusive = copy.root_exclusive[root_type] = any(
                    r.type == root_type and r.exclusive is True for r in requests
                )
            aggregates = self._prime(copy, policy)
            duration = copy.planned_duration(self.horizon)
            meta = JobMeta(jobid, now, duration, AllocType.ALLOCATE, now)
            self.state.task_labels = copy.task_labels
            root = Visit(meta, policy, requests, True, exclusive)
            if op == MatchOp.SATISFIABILITY:
                self._satisfiability(root, scope.excluded)
                return 0, "", ()
            self._schedule(op, root, aggregates, scope)
            graph_end = self.base + self.horizon
            if meta.at == graph_end:
                raise MatchFailure(Errno.EBUSY)
            if meta.at + meta.duration > graph_end:
                meta.duration = graph_end - meta.at
            record.update(self.state, self.schedule, self.writer, meta, policy, leaf_runs=self.traverser.leaf_runs)
            self.writer.interval(meta.at, meta.at + meta.duration)
            text = self._render()
            return meta.at, text, self.writer.placements()
        finally:
            policy.exclusive_types.clear()
            policy.exclusive_types.update(saved_exclusive)

    def _satisfiability(self, root: Visit, excluded: Excluded | None) -> None:
        meta = root.meta
        meta.alloc_type = AllocType.SATISFIABILITY
        # Fluxion tests at graph_end - duration - 1, which is base - 1 for a job that spans the whole horizon (no
        # duration): its planners then dereference a null point and resource-query crashes. The horizon's start is
        # the only window such a job can have; it is also where Fluxion tests a job one second shorter.
        meta.at = max(self.base, self.graph_end - meta.duration - 1)
        try:
            self.traverser.select(root, excluded)
        except MatchFailure as failure:
            if failure.errno in (Errno.EBUSY, Errno.ERANGE, Errno.ENODEV):
                raise MatchFailure(Errno.ENODEV) from None
            raise

    def _feasible(self, op: MatchOp, aggregates: dict[str, int], excluded: Excluded | None) -> None:
        wanted = aggregates.get("node", 0)
        up = self.schedule.view.nodes_up
        if wanted > up or (
            excluded and wanted > up - len(excluded) and wanted > self._live.up(self.schedule.view, excluded)
        ):
            if op in (MatchOp.ALLOCATE, MatchOp.ALLOCATE_ORELSE_RESERVE):
                raise MatchFailure(Errno.EBUSY)
            raise MatchFailure(Errno.ENODEV)

    def _schedule(self, op: MatchOp, root: Visit, aggregates: dict[str, int], scope: _MatchScope) -> None:
        """Place the root visit's request by ``op``: now, else (a reservation) at the first later start time that
        fits, else test it; MatchFailure if it is not placed."""
        excluded = scope.excluded
        self._feasible(op, aggregates, excluded)
        if not (scope.later and op == MatchOp.ALLOCATE_ORELSE_RESERVE) and self._select(root, excluded):
            return
        if op == MatchOp.ALLOCATE_WITH_SATISFIABILITY:
            self._satisfiability(root, excluded)
            raise MatchFailure(Errno.EBUSY)
        if op != MatchOp.ALLOCATE_ORELSE_RESERVE:
            raise MatchFailure(Errno.EBUSY)
        meta = root.meta
        meta.alloc_type = AllocType.ALLOCATE_ORELSE_RESERVE
        for t in reservation_times(self.schedule.view, meta, aggregates, self.graph_end):
            meta.at = t
            if self._select(root, excluded):
                return
        self._satisfiability(root, excluded)
        raise MatchFailure(Errno.EBUSY)

    def _select(self, root: Visit, excluded: Excluded | None) -> bool:
        """One walk at ``root.meta.at``: True if it matched; a malformed request (EINVAL) propagates."""
        try:
            self.traverser.select(root, excluded)
        except MatchFailure as failure:
            if failure.errno is Errno.EINVAL:
                raise
            return False
        return True

    # ------------------------------------------------------------------ other operations

    def cancel(self, jobid: int) -> None:
        info = self.jobs.get(jobid)
        if info is None or info.state == JobState.CANCELED:
            raise EngineError(f"nonexistent job {jobid}")
        cancel_walk.cancel(self.schedule, self.state, jobid)
        self._ended(info)

    def _ended(self, info: JobInfo) -> None:
        if self.keep_cancelled:
            info.state = JobState.CANCELED
        else:
            del self.jobs[info.jobid]

    def find(self, expression: str, *, now: int = 0) -> str:
        """The vertices matching a ``find`` expression (see :mod:`kubeflux.match.find`), in the match format.

        ``now`` is the instant (seconds) at which ``agfilter=true`` reports current use. Raises EngineError for
        an expression that does not parse.
        """
        try:
            parsed = parse_expression(expression)
        except FindError as error:
            raise EngineError(f"invalid criteria: {expression}: {error}") from error
        find(self.schedule.view, self.writer, parsed, now=now)
        self.writer.interval(0, 0)
        try:
            return self.writer.render()
        except WriterError as failure:  # not `error` again: compiled, one name has one type (FindError above)
            raise EngineError(f"writer emit: {failure}") from failure

    def set_status(self, path: str, status: Status) -> None:
        vertex = self.graph.vertex_at(path)
        if vertex is None:
            raise EngineError(f"Could not find path {path} in resource graph.")
        self.schedule.mark(vertex.uid, status)

    def _render(self) -> str:
        """The writer's text for a match or replay; empty when the format cannot express it (as resource-query)."""
        try:
            return self.writer.render()
        except WriterError:
            return ""

    # ------------------------------------------------------------------ replay and partial release

    def update(
        self,
        jobid: int,
        rset: ResourceSet,
        *,
        at: int = 0,
        duration: int,
        reserve: bool = False,
        source: str = "<resource set>",
    ) -> MatchResult:
        """Replay an allocation made elsewhere (resource-query's ``update allocate|reserve jgf``).

        ``rset`` is the JGF a ``jgf`` match writer emitted (text or a decoded dict); the job holds it during
        ``[at, at + duration)``, as an allocation, or as a reservation when ``reserve`` (job state RESERVED, which
        ``partial_cancel`` does not accept; a replay starting later than 0 is RESERVED too). On success the result
        carries the resource set re-emitted in this engine's match format, exactly as a match would, and the
        next job id becomes ``jobid + 1`` (also on failure, as in resource-query).

        Raises EngineError (and changes nothing) if ``jobid`` is allocated or reserved already or the window is
        invalid. A resource set that is malformed, names vertices or edges this graph lacks, or does not fit
        (over-commit) gives a failed result whose ``error`` says why; the graph is then unchanged.
        """
        started = time.perf_counter()
        meta = self._replay_meta(jobid, at, duration, reserve)
        result = MatchResult(jobid, False)
        try:
            replay(self.schedule, self.state, self.writer, load_jgf_set(rset, source=source), meta, self.policy)
        except ResourceSetError as error:
            result.error = str(error)
            result.errno = Errno.EINVAL
            self._render()
        else:
            result.matched = True
            result.at = at
            self.writer.interval(at, at + duration)
            result.resources = self._render()
        return self._replayed(result, reserve, source, started)

    def update_leaves(
        self,
        jobid: int,
        leaves: Iterable[int],
        *,
        at: int = 0,
        duration: int,
        reserve: bool = False,
        now: int = 0,
        source: str = "<resource set>",
        policy: MatchPolicy | None = None,
    ) -> MatchResult:
        """:meth:`update` of the resource set that holds the graph vertices ``leaves`` exclusively and the path
        from the root to them shared, given by vertex uid instead of as JGF (the scheduler puts a pod onto the
        cores it names). The state it leaves is the one :meth:`update` leaves with that set's JGF; the result
        carries no resources text. ``now`` is the current time, as for :meth:`match`: a replay starting later is
        RESERVED, one starting by then ALLOCATED (so :meth:`release_vertices` accepts it). ``policy``: the match
        policy the job is recorded under (as :meth:`match`'s), else the engine's. Errors as :meth:`update`.
        """
        started = time.perf_counter()
        meta = self._replay_meta(jobid, at, duration, reserve, now)
        result = MatchResult(jobid, False, now=now)
        try:
            replay_leaves(self.schedule, self.state, _DISCARD, leaves, meta, self.policy if policy is None else policy)
        except ResourceSetError as error:
            result.error = f"{source}: {error}"
            result.errno = Errno.EINVAL
        else:
            result.matched = True
            result.at = at
        return self._replayed(result, reserve, source, started)

    def _replay_meta(self, jobid: int, at: int, duration: int, reserve: bool, now: int = 0) -> JobMeta:
        """Check a replay's job id and window (EngineError) and take the job id; ``now`` is when ``first``'s
        explore weights are read (resource-query's ``update`` reads them at 0)."""
        info = self.jobs.get(jobid)
        if info is not None and info.state != JobState.CANCELED:
            raise EngineError(f"job {jobid} already exists ({info.state.value})")
        if jobid < 0:
            raise EngineError(f"invalid job id {jobid}")
        if at < 0 or duration <= 0 or at + duration > self.graph_end:
            raise EngineError(
                f"invalid time window (at={at}, duration={duration}) for a graph ending at {self.graph_end}"
            )
        self.next_jobid = jobid + 1
        alloc_type = AllocType.ALLOCATE_ORELSE_RESERVE if reserve else AllocType.ALLOCATE
        return JobMeta(jobid=jobid, at=at, duration=duration, alloc_type=alloc_type, now=now)

    def _replayed(self, result: MatchResult, reserve: bool, source: str, started: float) -> MatchResult:
        result.elapsed = time.perf_counter() - started
        self.match_times.add(result.elapsed)
        if result.matched:
            state = JobState.RESERVED if result.at > result.now or reserve else JobState.ALLOCATED
            self.jobs[result.jobid] = JobInfo(result.jobid, state, result.at, source, result.elapsed)
        return result

    def partial_cancel(self, jobid: int, rset: ResourceSet, *, source: str = "<resource set>") -> bool:
        """Release part of an allocated job (resource-query's ``partial-cancel``); True if nothing is left.

        ``rset`` names what to release: a JGF of vertices the job holds, or an RFC 20 R whose ``R_lite`` ranks
        are released whole. Later matches see the released resources. When nothing of the job is left it is
        cancelled (state CANCELED). Raises EngineError, with the graph unchanged, for an unknown or reserved job
        or a resource set that does not fit the graph or the job.
        """
        return self._release(
            jobid,
            "partial cancel",
            lambda: release(self.schedule, self.state, jobid, load_resource_set(rset, source=source)),
        )

    def release_vertices(self, jobid: int, uids: Iterable[int], *, source: str = "<resource set>") -> bool:
        """:meth:`partial_cancel` of the graph vertices ``uids``, given by uid instead of as JGF; the same state
        as releasing their JGF. True if nothing of the job is left. Errors as :meth:`partial_cancel`."""
        return self._release(
            jobid, "release", lambda: release_vertices(self.schedule, self.state, jobid, uids, source=source)
        )

    def _release(self, jobid: int, what: str, purge: Callable[[], bool]) -> bool:
        """Run ``purge`` (a partial release of allocated job ``jobid``: True if nothing is left) with the engine's
        checks and errors; the job is CANCELED when nothing of it is left."""
        info = self._allocated(jobid)
        self._containment_only(what)
        try:
            full = purge()
        except ResourceSetError as error:
            raise EngineError(str(error)) from error
        finally:
            self.state.preorder = 0
            self.state.postorder = 0
        if full:
            self._ended(info)
        return full

    def _allocated(self, jobid: int) -> JobInfo:
        """The allocated job ``jobid``; EngineError for an unknown, cancelled or reserved one."""
        info = self.jobs.get(jobid)
        if info is None or info.state == JobState.CANCELED:
            raise EngineError(f"nonexistent job {jobid}")
        if info.state == JobState.RESERVED:
            raise EngineError(f"job {jobid} is a reservation: only allocations can be released in part")
        return info

    # ------------------------------------------------------------------ graph growth and shrink

    def attach(self, rset: ResourceSet, *, source: str = "<resource set>") -> list[int]:
        """Grow the graph by a JGF subgraph (resource-query's ``attach``); return the uids of the new vertices.

        The subgraph names its place by paths from the root; vertices already in the graph are reused. Raises
        EngineError, with the graph unchanged, for a malformed or inconsistent document.
        """
        self._containment_only("attach")
        try:
            return elastic.attach(self.schedule, self.state, load_jgf_set(rset, source=source))
        except (ResourceSetError, GraphFormatError) as error:
            raise EngineError(str(error)) from error

    def remove_path(self, path: str) -> list[int]:
        """Shrink the graph by the subtree at a containment path (``remove <path> true``); return removed uids.

        Jobs holding resources there release them first (see :mod:`kubeflux.match.elastic`).
        """
        self._containment_only("remove")
        try:
            return elastic.remove_path(self.schedule, self.state, path)
        except ResourceSetError as error:
            raise EngineError(str(error)) from error

    def remove_ranks(self, ranks: Iterable[int]) -> list[int]:
        """Shrink the graph by every vertex of broker ``ranks`` (``remove <idset> false``); return removed uids."""
        self._containment_only("remove")
        try:
            return elastic.remove_ranks(self.schedule, self.state, ranks)
        except ResourceSetError as error:
            raise EngineError(str(error)) from error

    def _containment_only(self, what: str) -> None:
        """Partial release and graph growth and shrink walk containment parents (:mod:`kubeflux.match.update`,
        :mod:`kubeflux.match.elastic`): refuse them when another subsystem is dominant rather than leave state
        behind on its vertices."""
        if self.schedule.view.dominant != CONTAINMENT:
            raise EngineError(f"{what} is implemented only when containment is the dominant subsystem")


def reservation_times(
    schedule: ScheduleView, meta: JobMeta, aggregates: dict[str, int], graph_end: int
) -> Iterator[int]:
    """The start times after ``meta.at`` that a reservation tries, earliest first: the scheduled points of the
    root's aggregate filter where the request's aggregates fit (``planner_multi_avail_time_first/next``), before
    ``graph_end``."""
    root = schedule.root
    if meta.at + 1 >= graph_end:  # no later start (the planners refuse to look past their horizon)
        return
    subplan = schedule.subplans.get(root)
    if subplan is not None:
        counts = [aggregates.get(type, 0) for type in subplan.resource_types]
        try:
            t = subplan.avail_time_first(meta.at + 1, meta.duration, counts)
        except PlannerRangeError:
            return
        while t is not None:
            yield t
            t = subplan.avail_time_next()
        return
    # The root has no filter when none of the types it tracks is below it (-S PA -p ALL:core: the power tree
    # has no core). Fluxion's root keeps those types at 0 units all the same, and every job adds a 0-unit span
    # to it: its points are the jobs' starts and ends, and a request for one of those types exceeds it (ERANGE).
    vertex = schedule.graph.vertices[root]
    tracked = [type for type in schedule.prune_filters.types_for(vertex.type) if type != vertex.type]
    if not tracked:
        # Fluxion's root has no filter either, and resource-query aborts (std::out_of_range).
        raise MatchFailure(
            Errno.EINVAL,
            f"cannot reserve: the root {vertex.name} has no aggregate filter to find a start time in; "
            f"--prune-filters names no type for a {vertex.type} to track (e.g. ALL:node)",
        )
    if any(aggregates.get(type, 0) > 0 for type in tracked):
        return
    windows = schedule.x_uses.get(root, {}).values()
    for t in sorted({t for start, end, _ in windows for t in (start, end)}):
        if t + meta.duration > graph_end:
            return
        if t > meta.at:
            yield t


class LiveNodes:
    """The node vertices of a graph and which are up (no vertex at or above them marked down), kept until a status
    or the graph changes: what a match that excludes nodes counts to know whether enough are left."""

    def __init__(self) -> None:
        self._kept: tuple[tuple[int, int], npt.NDArray[np.int64], npt.NDArray[np.bool_]] | None = None

    def up(self, schedule: ScheduleView, excluded: Excluded) -> int:
        """The nodes up that ``excluded`` leaves; one vectorised step when it has an ``allowed`` mask."""
        uids, live = self._arrays(schedule)
        allowed: Callable[[npt.NDArray[np.int64]], npt.NDArray[np.bool_]] | None = getattr(excluded, "allowed", None)
        if allowed is not None:
            return int(np.count_nonzero(allowed(uids) & live))
        return sum(1 for uid in uids[live].tolist() if uid not in excluded)

    def _arrays(self, schedule: ScheduleView) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.bool_]]:
        graph = schedule.graph
        key = (schedule.status_epoch, len(graph.vertices))
        if self._kept is None or self._kept[0] != key:
            vertices = graph.vertices
            uids = [uid for uid in graph.by_type.get("node", ()) if not vertices[uid].removed]

            def up(uid: int) -> bool:
                while uid != -1:
                    if vertices[uid].status != Status.UP:
                        return False
                    uid = vertices[uid].parent
                return True

            live = np.fromiter((up(uid) for uid in uids), dtype=bool, count=len(uids))
            self._kept = (key, np.array(uids, dtype=np.int64), live)
        return self._kept[1], self._kept[2]
