"""The matcher's facade (Fluxion's REAPI): match, reserve, cancel and query jobs on one resource graph.

An :class:`Engine` owns a graph, a policy and a traverser, and a table of the jobs it has placed. It does no
I/O: callers hand it parsed jobspecs and get :class:`MatchResult` values back (the ``kubeflux query`` shell
prints them in ``resource-query``'s format; the scheduler core uses them directly).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from enum import StrEnum

from kubeflux.jobspec import Jobspec, JobspecError
from kubeflux.match.flexible import FlexibleTraverser
from kubeflux.match.planner import PlannerRangeError
from kubeflux.match.policy import MatchPolicy, parse_policy
from kubeflux.match.request import Request, requests_from_jobspec
from kubeflux.match.traverser import AllocType, Errno, JobMeta, MatchFailure, PruningFilters, Traverser
from kubeflux.match.writers import WRITERS, Writer
from kubeflux.resources.graph import CONTAINMENT, Graph, Status

DEFAULT_HORIZON = 3_153_600_000
"""Fluxion's default graph duration: 100 years of seconds."""


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


@dataclass(slots=True)
class JobInfo:
    jobid: int
    state: JobState
    at: int
    jobspec: str
    overhead: float


@dataclass(slots=True)
class MatchResult:
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

    @property
    def reserved(self) -> bool:
        return self.matched and self.at > self.now


class EngineError(Exception):
    """A request the engine refuses (unknown job, bad argument); the message says why."""


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
    ) -> None:
        if match_format not in WRITERS:
            raise EngineError(f"unknown match format {match_format!r}; known: {', '.join(WRITERS)}")
        self.graph = graph
        self.policy = MatchPolicy(parse_policy(policy))
        self.base = base
        self.horizon = horizon
        kind = TRAVERSERS.get(traverser)
        if kind is None:
            raise EngineError(f"unknown traverser {traverser!r}; known: {', '.join(TRAVERSERS)}")
        self.traverser = kind(graph, self.policy, PruningFilters(prune_filters), base, horizon)
        self.writer: Writer = WRITERS[match_format]()
        self.jobs: dict[int, JobInfo] = {}
        self.next_jobid = 1
        self.match_times: list[float] = []

    @property
    def graph_end(self) -> int:
        return self.base + self.horizon

    # ------------------------------------------------------------------ matching

    def match(
        self, op: MatchOp, jobspec: Jobspec, *, jobid: int | None = None, source: str = "", now: int = 0
    ) -> MatchResult:
        """Allocate, reserve or test ``jobspec`` (``match <op>`` of resource-query).

        ``now`` is the current time on the graph's time axis (seconds from :attr:`base`): an allocation starts
        then, a reservation later. resource-query always matches at 0; a scheduler passes its clock.
        """
        started = time.perf_counter()
        consumes = op != MatchOp.SATISFIABILITY
        if jobid is None:
            jobid = self.next_jobid
        if consumes:
            self.next_jobid = jobid + 1
        result = MatchResult(jobid, False, consumed_id=consumes, now=now)
        try:
            result.at, result.resources = self._run(op, jobspec, jobid, now)
            result.matched = True
        except MatchFailure as failure:
            result.errno = failure.errno
            result.error = str(failure) if failure.errno == Errno.EINVAL else ""
            result.satisfiable = failure.errno not in (Errno.ENODEV, Errno.ENOENT)
        except JobspecError as exc:
            result.errno = Errno.EINVAL
            result.error = str(exc)
        result.elapsed = time.perf_counter() - started
        self.match_times.append(result.elapsed)
        if result.matched and consumes:
            state = JobState.RESERVED if result.at > now else JobState.ALLOCATED
            self.jobs[jobid] = JobInfo(jobid, state, result.at, source, result.elapsed)
        return result

    def _run(self, op: MatchOp, jobspec: Jobspec, jobid: int, now: int = 0) -> tuple[int, str]:
        traverser = self.traverser
        requests = requests_from_jobspec(jobspec.resources)
        saved_exclusive = set(self.policy.exclusive_types)
        try:
            root = self.graph.root(CONTAINMENT)
            exclusive = any(r.type == root.type and r.exclusive is True for r in requests)
            aggregates: dict[str, int] = {}
            traverser.prime_jobspec(requests, aggregates)
            duration = jobspec.duration_seconds(self.horizon)
            meta = JobMeta(jobid=jobid, at=now, duration=duration, now=now)
            traverser.task_labels = [task.slot for task in jobspec.tasks]
            if op == MatchOp.SATISFIABILITY:
                self._satisfiability(requests, meta, exclusive)
                return 0, ""
            self._schedule(op, requests, meta, exclusive, aggregates)
            if meta.at == self.graph_end:
                raise MatchFailure(Errno.EBUSY)
            if meta.at + meta.duration > self.graph_end:
                meta.duration = self.graph_end - meta.at
            traverser.update(self.writer, meta)
            return meta.at, self.writer.render()
        finally:
            self.policy.exclusive_types.clear()
            self.policy.exclusive_types.update(saved_exclusive)

    def _satisfiability(self, requests: list[Request], meta: JobMeta, exclusive: bool) -> None:
        meta.alloc_type = AllocType.SATISFIABILITY
        meta.at = self.graph_end - meta.duration - 1
        try:
            self.traverser.select(requests, meta, exclusive)
        except MatchFailure as failure:
            if failure.errno in (Errno.EBUSY, Errno.ERANGE, Errno.ENODEV):
                raise MatchFailure(Errno.ENODEV) from None
            raise

    def _feasible(self, op: MatchOp, aggregates: dict[str, int]) -> None:
        wanted = aggregates.get("node", 0)
        if wanted > self.traverser.nodes_up:
            if op in (MatchOp.ALLOCATE, MatchOp.ALLOCATE_ORELSE_RESERVE):
                raise MatchFailure(Errno.EBUSY)
            raise MatchFailure(Errno.ENODEV)

    def _schedule(
        self, op: MatchOp, requests: list[Request], meta: JobMeta, exclusive: bool, aggregates: dict[str, int]
    ) -> None:
        traverser = self.traverser
        self._feasible(op, aggregates)
        if self._select(requests, meta, exclusive):
            return
        if op == MatchOp.ALLOCATE_WITH_SATISFIABILITY:
            self._satisfiability(requests, meta, exclusive)
            raise MatchFailure(Errno.EBUSY)
        if op != MatchOp.ALLOCATE_ORELSE_RESERVE:
            raise MatchFailure(Errno.EBUSY)
        meta.alloc_type = AllocType.ALLOCATE_ORELSE_RESERVE
        subplan = traverser.root_subplan()
        counts = [aggregates.get(type, 0) for type in subplan.resource_types]
        try:
            t = subplan.avail_time_first(meta.at + 1, meta.duration, counts)
        except PlannerRangeError:
            t = None
        while t is not None:
            meta.at = t
            if self._select(requests, meta, exclusive):
                return
            t = subplan.avail_time_next()
        self._satisfiability(requests, meta, exclusive)
        raise MatchFailure(Errno.EBUSY)

    def _select(self, requests: list[Request], meta: JobMeta, exclusive: bool) -> bool:
        """One walk at ``meta.at``: True if it matched; a malformed request (EINVAL) propagates."""
        try:
            self.traverser.select(requests, meta, exclusive)
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
        self.traverser.cancel(jobid)
        info.state = JobState.CANCELED

    def set_status(self, path: str, status: Status) -> None:
        vertex = self.graph.vertex_at(path)
        if vertex is None:
            raise EngineError(f"Could not find path {path} in resource graph.")
        self.traverser.mark(vertex.uid, status)
