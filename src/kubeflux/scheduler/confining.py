"""Jobs that ask for one topology domain: a whole pod group (or a lone pod) inside one zone, rack, block ….

A pod asks with Kueue's annotations, ``kueue.x-k8s.io/podset-required-topology: <level label>`` or
``kueue.x-k8s.io/podset-preferred-topology: <level label>``, or kubeflux's of the same meaning
(:data:`REQUIRED_ANNOTATION`, :data:`PREFERRED_ANNOTATION`); a group's first member that says one speaks for it.
The label must be one of the graph's levels (:mod:`kubeflux.scheduler.topology`). A group whose members ask required
pod affinity among themselves on a level's label (all in one zone, one rack: :data:`AFFINITY`) asks for one domain
of it as if required: kube-scheduler lets its first member go anywhere while no pod matches yet, and one by one the
others could then find no room beside it; kept to a domain with room for all, none is stranded.

How a job is kept in one domain (:class:`Confiner`):

1. **The engine picks the domain in one match**: the jobspec ``<level>(1) → slot(N) → node(1) → [core(k), gpu(g)]``
   (N the job's minimum of members, each on a node of its own with the largest member's cores and gpus), matched on
   the nodes the largest member may use now (never one in the level's unknown domain), puts the whole gang inside
   one vertex of the level, where the match policy prefers (``lonode``: the lowest domain with room). For a
   reservation the same jobspec is matched ``allocate_orelse_reserve``: the domain where the gang can start first.
   The match is then cancelled. When members could share nodes (or differ) and no domain holds them one a node as
   the largest, the first domain in the policy's node order whose nodes hold the members as they are, in their free
   cores, gpus and every other resource by the exact books, is taken (:meth:`Confiner._packed`, a greedy packing).
   A domain where the placement (or reservation) then fails after all is left out and the next one found.
2. **The job is placed (or reserved) as any job, pinned to that domain**: its pods are given, for this attempt, a
   required node affinity on the names of the domain vertex's nodes (never on label values: a node without a
   level's label, or with an empty value, is in the level's unknown domain, and a rack ``r0`` of two zones is two
   racks), so every path of the placer and the reserver (members one by one, alike members at once, the assignment
   search, the exact books in time) sees only the domain's nodes.
3. **Required**: when no domain has room now, the job waits (its reservation is in one domain too). **Preferred**:
   the level above is tried next, and so on, then the whole cluster (Kueue's preferred mode); its reservation is in
   a domain only when the domain starts it no later than the engine finds the whole cluster would (``cluster`` in
   :func:`level_jobspec`), so asking for a preference never delays a job nor lets a filler take the node it needs
   (EASY backfill). A required level that
   no domain can ever hold the job in, even empty, or that is not a level of the graph, rejects the job with the
   reason (:meth:`Confiner.never`).

Members beyond a group's minimum that start later are not kept in the domain. A pod group whose members take no
core or gpu is not confined.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Final, TypeVar

from kubeflux.jobspec import Jobspec, JobspecError, jobspec_from_dict
from kubeflux.match.engine import MatchOp
from kubeflux.scheduler.among import LabelsOf, affine_key
from kubeflux.scheduler.filtering import copies
from kubeflux.scheduler.graphview import first_placement
from kubeflux.scheduler.objects import PODS, NodeSelectorRequirement, NodeSelectorTerm, Pod, ResourceList
from kubeflux.scheduler.placing import Placer
from kubeflux.scheduler.podterms import REASON_AFFINITY, affinity_held
from kubeflux.scheduler.queue import PendingJob
from kubeflux.scheduler.topology import HOSTNAME_LEVEL, UNKNOWN, Request, level_type
from kubeflux.scheduler.translate import TASK_LABEL, PodRequestError, pod_policy

__all__ = [
    "AFFINITY",
    "KUEUE_PREFERRED",
    "KUEUE_REQUIRED",
    "PREFERRED_ANNOTATION",
    "REQUIRED_ANNOTATION",
    "Confiner",
    "Request",
]

KUEUE_REQUIRED: Final = "kueue.x-k8s.io/podset-required-topology"
KUEUE_PREFERRED: Final = "kueue.x-k8s.io/podset-preferred-topology"
REQUIRED_ANNOTATION: Final = "kubeflux.io/required-topology"
"""kubeflux's own: all the job's pods in one domain of this level (a node label), or none started."""
PREFERRED_ANNOTATION: Final = "kubeflux.io/preferred-topology"
"""kubeflux's own: one domain of this level if any has room, else of the level above, …, else anywhere."""
_ANNOTATIONS: Final = (
    (KUEUE_REQUIRED, True),
    (REQUIRED_ANNOTATION, True),
    (KUEUE_PREFERRED, False),
    (PREFERRED_ANNOTATION, False),
)

AFFINITY: Final = "spec.affinity.podAffinity"
"""What a request found in the members' required pod affinity among themselves says it came from: all of them in one
domain of the term's key, kept there as a required topology when the key is a level of the graph (else the members
are placed one by one, each filtered against those before it)."""

DOMAIN_TRIES: Final = 16
"""Domains of one level a job is tried in per pass when the engine's pick does not hold it after all (its other
resources, its pods' constraints): beyond them the level counts as without room this pass."""

T = TypeVar("T")


def job_request(job: PendingJob, labels_of: LabelsOf | None = None) -> Request | None:
    """The topology a job asks for: said by its first pod that says one, else by required pod affinity among a
    group's members on a topology key (:func:`~kubeflux.scheduler.among.affine_key`, ``labels_of`` reading the
    namespaces' labels; :data:`AFFINITY`); None: it asks none. Found once per job and kept on it
    (:attr:`PendingJob.request`) until its pods change: every pass asks it of every job."""
    if job.request_found:
        return job.request
    found: Request | None = None
    for pod in job.pods.values():
        for annotation, required in _ANNOTATIONS:
            value = pod.annotations.get(annotation)
            if value is not None:
                found = Request(value.strip(), required, annotation)
                break
        if found is not None:
            break
    if found is None and labels_of is not None and len(job.pods) > 1:
        key = affine_key(list(job.pods.values()), labels_of)
        if key:
            found = Request(key, True, AFFINITY)
    job.request, job.request_found = found, True
    return found


class Confiner:
    """Places and reserves jobs that ask for one domain (see the module docstring); any other job goes straight to
    ``place`` and ``reserve``. It reads the cluster through the placer whose runs it keeps in a domain."""

    def __init__(self, placer: Placer) -> None:
        self.placer = placer

    def attempt(self, job: PendingJob, start: int, run: Callable[[], T], *, reserve: bool) -> T | None:
        """``run()`` (a placement or a reservation of ``job``) kept in one domain, as the job asks: its answer in the
        first domain the engine finds where it succeeds (a domain where ``run()`` fails, its reasons or None, is left
        out and the next tried; for preferred, at the asked level, then each above it; else ``run()`` over the whole
        cluster); None when a required domain was found nowhere."""
        request = self._request(job)
        if request is None:
            return run()
        levels = self._levels(request)
        latest: int | None = None
        if reserve and not request.required and levels:  # preferred: no later than anywhere in the cluster
            anywhere = self._domain(job, "cluster", start, set(), reserve=True)
            latest = anywhere[1] if anywhere is not None else None
        for label in levels:
            kind = level_type(label)
            tried: set[str] = set()
            for _ in range(DOMAIN_TRIES):
                found = self._domain(job, kind, start, tried, reserve=reserve)
                if found is None:
                    break
                pins, at = found
                if latest is not None and at > latest:
                    break  # a domain of this level starts it later than the cluster would: the level above
                with self._pinned(job, pins):
                    answer = run()
                if answer is not None and not isinstance(answer, Counter):
                    self.placer.log.append(f"Job {job.key}: kept in the {kind} of {pins[0]} ({len(pins)} nodes)")
                    return answer
                tried.update(pins)  # the engine's pick was wrong (memory, pods …): the next domain, then relax
        return None if request.required else run()

    def reasons(self, job: PendingJob) -> Counter[str]:
        """Why a job that requires one domain did not start now, as kube-scheduler's counted reasons."""
        request = self._request(job)
        kind = level_type(request.level) if request is not None else "domain"
        graph = self.placer.books.graph
        count = len(graph.specs) if graph is not None else 0
        if request is not None and request.annotation == AFFINITY:
            # kube-scheduler's words for a member once the others are bound in one domain: the nodes that refuse the
            # largest member for their own reasons, and the rest out of the members' domain
            largest = max(job.pods.values(), key=self.placer.books.pod_shape)
            fit = self.placer.filter.fit(largest)
            reasons = fit.reasons()
            reasons[REASON_AFFINITY] += len(fit.open)
            return reasons
        return Counter({f"node(s) were in no {kind} with room for the whole job (it requires one {kind})": count})

    def never(self, job: PendingJob) -> str | None:
        """Why ``job`` can never start as it asks (a required level the graph does not have, or no domain of which
        can hold its minimum of members even empty, sized as they are: its smallest members); None when it may."""
        request = self._request(job)
        if request is None or not request.required:
            return None
        levels = self.placer.books.levels
        if request.level not in levels and request.annotation == AFFINITY:
            return None  # not a level: its members are placed one by one
        if request.level not in levels:
            have = ", ".join(levels) or "none"
            return (
                f"pod {next(iter(job.pods.values())).key}: metadata.annotations[{request.annotation}]: "
                f"{request.level!r} is not a topology level of the cluster (its levels: {have})"
            )
        shape = self._shape(job)
        graph = self.placer.books.graph
        if shape is None or graph is None:
            return None
        count = shape[0]
        sizes = [self.placer.books.pod_shape(pod) for pod in self._members(job, count)]
        least = (min(c for c, _ in sizes), min(g for _, g in sizes))
        need = (sum(c for c, _ in sizes), sum(g for _, g in sizes), max(c for c, _ in sizes), max(g for _, g in sizes))
        largest = max(job.pods.values(), key=self.placer.books.pod_shape)
        admitted = set(self.placer.filter.static_fit(largest).fit)
        kind = level_type(request.level)
        held: Counter[int] = Counter()
        room: dict[int, list[int]] = {}  # a domain's cores, gpus, most cores and most gpus of one node
        domains = graph.domains(kind)
        for name, spec in graph.specs.items():
            if name in graph.gone or name not in admitted:
                continue
            domain = domains.get(name)
            if domain is None or graph.engine.graph.vertices[domain].name == UNKNOWN:
                continue
            held[domain] += min(
                spec.cores // least[0] if least[0] else count, spec.gpus // least[1] if least[1] else count
            )
            has = room.setdefault(domain, [0, 0, 0, 0])
            has[0], has[1] = has[0] + spec.cores, has[1] + spec.gpus
            has[2], has[3] = max(has[2], spec.cores), max(has[3], spec.gpus)
        # members as they are: a domain may hold them if its nodes could (each at most as many as of the smallest,
        # all of them between its cores and gpus, the largest on one node); alike members: exactly when it can
        if any(held[d] >= count and all(n <= h for n, h in zip(need, has, strict=True)) for d, has in room.items()):
            return None
        cores, gpus = _span(c for c, _ in sizes), _span(g for _, g in sizes)
        if len(set(sizes)) == 1:
            most = f"the most one holds: {max(held.values(), default=0)}"
        else:
            has = max(room.values(), default=[0, 0, 0, 0])
            most = f"{need[0]} cores and {need[1]} gpus between them; the most one has: {has[0]} and {has[1]}"
        return (
            f"the pod group requires one {kind} ({request.level}) but no {kind} can ever hold its {count} pods of "
            f"{cores} cores and {gpus} gpus ({most})"
        )

    def _request(self, job: PendingJob) -> Request | None:
        """What ``job`` asks (:func:`job_request`), but required pod affinity among its members only while it keeps
        them in one domain of a level: not on the hostname or a label that is not a level (the members are placed
        one by one, each beside those before it), and not once pods its terms select run (kube-scheduler's first-pod
        rule no longer applies: each member may go to any domain holding one, as its own filters say)."""
        books = self.placer.books
        request = job_request(job, books.pods.labels_of)
        if request is None or request.annotation != AFFINITY:
            return request
        if request.level == HOSTNAME_LEVEL or request.level not in books.levels:
            return None
        if True in affinity_held(job.pods.values(), books.nodes, books.pods):
            return None
        return request

    def _members(self, job: PendingJob, count: int) -> list[Pod]:
        """The ``count`` smallest of the job's pods (by cores and gpus): the fewest a domain must hold."""
        return sorted(job.pods.values(), key=self.placer.books.pod_shape)[:count]

    # ------------------------------------------------------------------ the domain

    def _levels(self, request: Request) -> list[str]:
        """The levels to try, the asked one first (for preferred, then each above it); empty when the graph has no
        such level (not confined: a required one is rejected by :meth:`never`)."""
        levels = self.placer.books.levels
        if request.level == HOSTNAME_LEVEL or request.level not in levels:
            return []
        index = levels.index(request.level)
        return [request.level] if request.required else list(reversed(levels[: index + 1]))

    def _shape(self, job: PendingJob) -> tuple[int, int, int] | None:
        """(slots, cores, gpus) of the jobspec that finds a domain: the minimum of members, each as the largest
        member; None when no member takes a core or gpu."""
        shapes = [self.placer.books.pod_shape(pod) for pod in job.pods.values()]
        cores = max(c for c, _ in shapes)
        gpus = max(g for _, g in shapes)
        if not cores and not gpus:
            return None
        return self.placer.queue.minimum(job), cores, gpus

    def _domain(
        self, job: PendingJob, kind: str, start: int, tried: set[str], *, reserve: bool
    ) -> tuple[tuple[str, ...], int] | None:
        """The nodes of the domain of type ``kind`` the engine puts the job in, by the graph's domain vertex (not by
        label values: a node without a level's label, or with an empty value, is in that level's unknown domain
        wherever its other labels say), the nodes of domains ``tried`` left out, and when the job may start there;
        None when no domain has room now, or, for a reservation, ever. ``cluster``: the whole cluster's."""
        graph = self.placer.books.graph
        shape = self._shape(job)
        if graph is None or shape is None:
            return None
        count, cores, gpus = shape
        largest = max(job.pods.values(), key=self.placer.books.pod_shape)
        # now: the nodes the member may not use now; later: those it may never use (their books change by then)
        hide = set(
            self.placer.filter.static_fit(largest).unfit if reserve else self.placer.filter.fit(largest).hidden.names
        )
        hide.update(tried)
        vertices = graph.engine.graph.vertices
        domains = graph.domains(kind)
        for name in graph.specs:
            domain = domains.get(name)
            if domain is None or vertices[domain].name == UNKNOWN:
                hide.add(name)
        duration = self.placer.profile.planned(largest, start, reserve=reserve)
        self.placer.books.drop_deferred()  # the engine is read from here on (a kept reservation of the job's must go)
        spec = level_jobspec(kind, count, cores, gpus, duration)
        op = MatchOp.ALLOCATE_ORELSE_RESERVE if reserve else MatchOp.ALLOCATE
        try:
            policy = pod_policy(largest, self.placer.profile.policy)
        except PodRequestError:
            policy = self.placer.profile.policy
        result = graph.match(op, spec, f"{job.key} ({kind})", start, hide, policy)
        at = start
        if result.matched:
            where: str | None = first_placement(result).node
            at = max(start, result.at)
            graph.cancel(result.jobid, freed=())
        elif reserve:
            return None
        else:  # members that could share nodes, or differ: the first domain, in the policy's order, that holds them
            where = self._packed(kind, hide, self._members(job, count), start, duration, policy)
        domain = domains.get(where) if where is not None else None
        if domain is None:
            return None
        return tuple(sorted(name for name, of in domains.items() if of == domain)), at

    def _packed(
        self, kind: str, hide: set[str], members: list[Pod], start: int, duration: int, policy: str
    ) -> str | None:
        """A node of the first domain of ``kind``, in the order ``policy`` prefers nodes, whose shown nodes have room
        for ``members`` as they are between them now (several on a node: each node, in that order, takes the largest
        members left that fit its free cores and gpus and, by the exact books, every other resource they request);
        None when none has."""
        graph = self.placer.books.graph
        assert graph is not None
        pod_shape = self.placer.books.pod_shape
        wanted = sorted(((*pod_shape(pod), pod.requests) for pod in members), key=lambda m: m[:2], reverse=True)
        left: dict[int, list[tuple[int, int, ResourceList]]] = {}
        first: dict[int, str] = {}
        domains = graph.domains(kind)
        for name in graph.ordered(policy, start):
            if name in hide or not graph.usable(name):
                continue
            domain = domains.get(name)
            if domain is None:
                continue
            free_cores, free_gpus, _ = graph.free_counts(name, start, duration)
            room = dict(self.placer.filter.room(name))
            todo = left.setdefault(domain, list(wanted))
            first.setdefault(domain, name)
            for member in list(todo):
                cores, gpus, requests = member
                if cores > free_cores or gpus > free_gpus or copies(room, requests) == 0:
                    continue
                free_cores, free_gpus = free_cores - cores, free_gpus - gpus
                for res, amount in requests.items():
                    room[res] = room.get(res, 0) - amount
                if PODS in room:
                    room[PODS] -= 1
                todo.remove(member)
            if not todo:
                return first[domain]
        return None

    @contextmanager
    def _pinned(self, job: PendingJob, pins: tuple[str, ...]) -> Iterator[None]:
        """The job's pods, while the block runs, kept to the domain's nodes ``pins`` (required node affinity on the
        node names, added to each term the pod has)."""
        before = dict(job.pods)
        for uid, pod in before.items():
            job.pods[uid] = _pin(pod, pins)
        try:
            yield
        finally:
            for uid in list(job.pods):
                if uid in before:
                    job.pods[uid] = before[uid]


def _span(values: Iterator[int]) -> str:
    """``a`` when all ``values`` are ``a``, else ``a to b``."""
    ordered = sorted(values)
    return f"{ordered[0]}" if ordered[0] == ordered[-1] else f"{ordered[0]} to {ordered[-1]}"


def _pin(pod: Pod, pins: tuple[str, ...]) -> Pod:
    names = NodeSelectorRequirement("metadata.name", "In", pins)
    terms = pod.required_node_affinity or (NodeSelectorTerm(),)
    kept = tuple(dataclasses.replace(term, match_fields=(*term.match_fields, names)) for term in terms)
    return dataclasses.replace(pod, required_node_affinity=kept)


def level_jobspec(kind: str, count: int, cores: int, gpus: int, duration: int) -> Jobspec:
    """``<kind>(1) → slot(count) → node(1) → [core(cores), gpu(gpus)]``: a gang inside one domain of the level
    ``kind`` (``cluster``: anywhere, the slots at the top), each member on a node of its own (the engine cannot cut
    a slot's cores from the nodes below a domain without a node level in the slot: ``<kind>(1) → slot → core`` fails
    as in Fluxion, which marks no path to them)."""
    shape: list[dict[str, object]] = []
    if cores:
        shape.append({"type": "core", "count": cores})
    if gpus:
        shape.append({"type": "gpu", "count": gpus})
    slot = {"type": "slot", "count": count, "label": TASK_LABEL, "with": [{"type": "node", "count": 1, "with": shape}]}
    document = {
        "version": 1,
        "resources": [slot] if kind == "cluster" else [{"type": kind, "count": 1, "with": [slot]}],
        "attributes": {"system": {"duration": duration}},
        "tasks": [{"command": ["pod group"], "slot": TASK_LABEL, "count": {"per_slot": 1}}],
    }
    try:
        return jobspec_from_dict(document, source=f"a pod group in one {kind}")
    except JobspecError as exc:  # pragma: no cover - built here
        raise PodRequestError(str(exc)) from None
