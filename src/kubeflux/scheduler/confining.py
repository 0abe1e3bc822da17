"""Jobs that ask for one topology domain: a whole pod group (or a lone pod) inside one zone, rack, block ….

A pod asks with Kueue's annotations, ``kueue.x-k8s.io/podset-required-topology: <level label>`` or
``kueue.x-k8s.io/podset-preferred-topology: <level label>``, or kubeflux's of the same meaning
(:data:`REQUIRED_ANNOTATION`, :data:`PREFERRED_ANNOTATION`); a group's first member that says one speaks for it.
The label must be one of the graph's levels (:mod:`kubeflux.scheduler.topology`). A group whose members ask required
pod affinity among themselves on a level's label (all in one zone, one rack: :data:`AFFINITY`) asks for one domain
of it as if required: kube-scheduler lets its first member go anywhere while no pod matches yet, and one by one the
others could then find no room beside it; kept to a domain with room for all, none is stranded. On a label that is
not a level (``example.com/pool``), each of its values is a domain (a node without the label in none): the engine
has no vertex for it, so the domain is found by the exact search alone (:meth:`Confiner._domains`).

How a job is kept in one domain (:class:`Confiner`):

1. **The engine picks the domain in one match**: the jobspec ``<level>(1) → slot(N) → node(1) → [core(k), gpu(g)]``
   (N the job's minimum of members, each on a node of its own with the largest member's cores and gpus), matched on
   the nodes the largest member may use now (never one in the level's unknown domain), puts the whole gang inside
   one vertex of the level, where the match policy prefers (``lonode``: the lowest domain with room); the match is
   then cancelled. A reservation of members that could share nodes (or differ), and of any preferred job, is first
   made as if the job asked nothing, and kept when it lies in one domain of the level (the earliest start there
   is); else the same jobspec is matched ``allocate_orelse_reserve`` (the domain where the gang, a member a node,
   can start first), and when it finds none, the first domain that may ever hold the members is tried. When the
   engine finds no domain now (members that could share nodes, differ, or take no core), or members differ and
   its pick does not hold them as they are, the first domain in the policy's node order
   whose nodes hold at least the minimum of members as they are is taken (:meth:`Confiner._held`): the exact
   assignment search (:mod:`kubeflux.scheduler.domainfit`) on that domain's nodes, each member on the nodes that may
   take it now, in its cores, gpus and every other resource it requests by the exact books.
   A domain where the placement (or reservation) then fails after all (a placement's run includes its members'
   claims: a domain whose nodes cannot give every member its devices fails) is left out and the next one found, at most
   :data:`DOMAIN_TRIES` a pass; the domains tried are carried to the next passes (tried last), so every domain is
   tried in turn. A reservation is never made in a domain whose nodes could not give every member its claims'
   devices even empty (:meth:`Confiner._devices_never`: the reserver books devices by count, not in time).
2. **The job is placed (or reserved) as any job, pinned to that domain**: its pods are given, for this attempt, a
   required node affinity on the names of the domain vertex's nodes (never on label values: a node without a
   level's label, or with an empty value, is in the level's unknown domain, and a rack ``r0`` of two zones is two
   racks), so every path of the placer and the reserver (members one by one, alike members at once, the assignment
   search, the exact books in time) sees only the domain's nodes.
3. **Required**: when no domain has room now, the job waits (its reservation is in one domain too; preemption for
   it looks for victims that leave room in one domain: :mod:`kubeflux.scheduler.preempting`). **Preferred**: the
   level above is tried next, and so on, then the whole cluster (Kueue's preferred mode); its reservation is made
   first as if it asked nothing, and kept in a domain only when the domain's starts it no later, so asking for a
   preference never delays a job nor lets a filler take the node it needs (EASY backfill). A required level that no
   domain can ever hold the job in, even empty (the same search on the empty nodes, the members' devices counted),
   that is not a level of the graph, or that is ``kubernetes.io/hostname`` (one node for the whole group: not
   supported, ask for pod affinity among the members on it), rejects the job with the reason
   (:meth:`Confiner.never`); a preferred level the graph does not have is logged once per job, and the job placed
   anywhere.

Members beyond a group's minimum that start later are not kept in the domain.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import Final, TypeVar

from kubeflux.jobspec import Jobspec, JobspecError, jobspec_from_dict
from kubeflux.match.engine import MatchOp
from kubeflux.scheduler.among import LabelsOf, affine_key
from kubeflux.scheduler.domainfit import by_domain, device_needs, holds
from kubeflux.scheduler.filtering import alike_run, whole_node_policy
from kubeflux.scheduler.gang import GangMember
from kubeflux.scheduler.graphview import GraphView, first_placement
from kubeflux.scheduler.objects import PODS, NodeSelectorRequirement, NodeSelectorTerm, Pod
from kubeflux.scheduler.placing import Placer
from kubeflux.scheduler.podterms import REASON_AFFINITY, affinity_held
from kubeflux.scheduler.queue import PendingJob
from kubeflux.scheduler.topology import HOSTNAME_LEVEL, UNKNOWN, Request, level_type
from kubeflux.scheduler.translate import TASK_LABEL, pod_policy
from kubeflux.scheduler.validation import PodRequestError

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
domain of the term's key, kept there as a required topology (a level of the graph, or a label's values; on the
hostname the members are placed one by one, each filtered against those before it)."""

DOMAIN_TRIES: Final = 16
"""Domains of one level a job is tried in per pass when the engine's pick does not hold it after all (its other
resources, its pods' constraints): beyond them the level counts as without room this pass."""

_UNLIMITED: Final = 1 << 62
_NONE: Final[set[str]] = set()
_NO_DEVICES: Final[set[tuple[str, str, str]]] = set()
_LABEL: Final = "label "
"""The prefix of the kind of domains that a label which is not a level makes (its values)."""

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
        self._tried: dict[str, tuple[PendingJob, dict[tuple[str, bool], set[str]]]] = {}
        """Job key → (the job, the nodes of the domains of each (level type, reserve) tried and found wrong since
        it last started): carried from pass to pass, so that every domain is tried in turn (:data:`DOMAIN_TRIES`
        a pass)."""
        self._told: set[tuple[str, str]] = set()
        """(job key, level) of the preferred levels not in the graph already logged."""
        self._engine_found = True
        """Whether the engine's match found a domain at the last try of the current level (once it finds none, the
        next tries, with more domains left out, do not ask it)."""

    def attempt(self, job: PendingJob, start: int, run: Callable[[], T], *, reserve: bool) -> T | None:
        """``run()`` (a placement or a reservation of ``job``) kept in one domain, as the job asks: its answer in the
        first domain the engine finds where it succeeds (a domain where ``run()`` fails, its reasons or None, is left
        out and the next tried; for preferred, at the asked level, then each above it; else ``run()`` over the whole
        cluster); None when a required domain was found nowhere."""
        request = self._request(job)
        if request is None:
            return run()
        levels = self._levels(request)
        if not levels and not request.required:
            self._tell_missing(job, request)
            return run()
        latest: float | None = None
        if reserve and levels and (not request.required or self._may_share(job)):
            # its reservation anywhere in the cluster first: kept when it lies in one domain of the level asked (the
            # earliest start there is); else, for preferred, the latest a domain's may start it (a required job of
            # alike members that never share a node is reserved by the engine's domain, a member a node, at once)
            anywhere = run()
            kind = self._kind(levels[0])
            if isinstance(anywhere, (int, float)) and not isinstance(anywhere, bool):
                if self._in_one(job, kind):
                    self.placer.log.append(f"Job {job.key}: reserved in one {kind} as it would be anywhere")
                    self._tried.pop(job.key, None)
                    return anywhere
                latest = None if request.required else float(anywhere)
            elif request.annotation != AFFINITY:
                return anywhere  # none anywhere: none in a domain either
            # (members kept together by their affinity, which is required, are searched only pinned to one domain:
            # none anywhere says nothing of each domain)
            self.placer.books.cancel_reservations(job)
        for label in levels:
            answer = self._in_level(job, self._kind(label), start, run, reserve=reserve, latest=latest)
            if answer is not None:
                self._tried.pop(job.key, None)
                return answer
        return None if request.required else run()

    def _in_level(
        self, job: PendingJob, kind: str, start: int, run: Callable[[], T], *, reserve: bool, latest: float | None
    ) -> T | None:
        """``run()`` in the first domain of type ``kind`` found where it succeeds (and, ``latest`` given, starts the
        job no later), trying at most :data:`DOMAIN_TRIES` domains, the ones tried in earlier passes last."""
        tried = self._carried(job, kind, reserve)
        wrapped = not tried
        self._engine_found = True
        turns = 0
        while turns < DOMAIN_TRIES:
            found = self._domain(job, kind, start, tried, reserve=reserve)
            if found is None:
                if wrapped:
                    return None
                tried.clear()  # every domain was tried: from the first again, as the cluster is now
                wrapped = True
                continue
            turns += 1
            pins, at = found
            if latest is not None and at > latest:
                return None  # the domain the engine finds starts it later than anywhere: the level above
            with self._pinned(job, pins):
                answer = run()
            if answer is not None and not isinstance(answer, Counter):
                if latest is not None and isinstance(answer, (int, float)) and answer > latest:
                    self.placer.books.cancel_reservations(job)  # later in the domain than anywhere: the level above
                    return None
                self.placer.log.append(f"Job {job.key}: kept in the {kind} of {pins[0]} ({len(pins)} nodes)")
                return answer
            tried.update(pins)  # the engine's pick was wrong (memory, pods …): the next domain, then relax
        return None

    def _may_share(self, job: PendingJob) -> bool:
        """Whether the job's members differ, take no core or gpu, or two of them fit some node's cores and gpus."""
        graph = self.placer.books.graph
        shapes = {self.placer.books.pod_shape(pod) for pod in job.pods.values()}
        if graph is None or len(shapes) > 1:
            return True
        cores, gpus = shapes.pop()
        if not cores and not gpus:
            return True
        return any(spec.cores >= 2 * cores and spec.gpus >= 2 * gpus for spec in graph.specs.values())

    def _in_one(self, job: PendingJob, kind: str) -> bool:
        """Whether the job's reservation holds nodes of one known domain of ``kind`` only, one whose devices may
        hold the members' claims (:meth:`_devices_never`)."""
        graph = self.placer.books.graph
        if graph is None or not job.holds:
            return False
        domains, unknown = self._domains(kind)
        found = {domains.get(hold.node) for hold in job.holds}
        if len(found) != 1 or None in found or found & unknown:
            return False
        return not any(hold.node in self._devices_never(job, kind) for hold in job.holds)

    def _devices_never(self, job: PendingJob, kind: str) -> set[str]:
        """The nodes of the domains of ``kind`` that can never hold the job's members with their claims' devices,
        even empty (:meth:`_ever`): never reserved for it (the reserver books cores and other resources in time, not
        devices); none when no member's claims take devices."""
        if not any(pod.resource_claims for pod in job.pods.values()):
            return _NONE
        if device_needs(self.placer.books.devices, list(job.pods.values())) is None:
            return _NONE
        return {name for names, _, may in self._ever(job, kind) if not may for name in names}

    def _carried(self, job: PendingJob, kind: str, reserve: bool) -> set[str]:
        """The nodes of the domains of ``kind`` tried for ``job`` since it last started (see :attr:`_tried`)."""
        kept = self._tried.get(job.key)
        if kept is None or kept[0] is not job:
            if len(self._tried) > 2 * len(self.placer.queue.jobs) + 64:  # jobs gone meanwhile: forgotten
                jobs = self.placer.queue.jobs
                self._tried = {key: value for key, value in self._tried.items() if jobs.get(key) is value[0]}
            kept = self._tried[job.key] = (job, {})
        return kept[1].setdefault((kind, reserve), set())

    def _tell_missing(self, job: PendingJob, request: Request) -> None:
        """Log, once per job, a preferred level that is not a level of the graph (placed anywhere)."""
        if (job.key, request.level) in self._told:
            return
        if len(self._told) > 4096:
            self._told.clear()
        self._told.add((job.key, request.level))
        have = ", ".join(self.placer.books.levels) or "none"
        self.placer.log.append(
            f"Job {job.key}: metadata.annotations[{request.annotation}]: {request.level!r} is not a topology level "
            f"of the cluster (its levels: {have}): placed anywhere"
        )

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
        can hold its minimum of members even empty, in every resource they request, by the exact assignment search
        on the empty nodes that admit each; for pod affinity among the members on a label that is not a level, no
        value of the label); None when it may (or the search gave up)."""
        request = self._request(job)
        if request is None or not request.required:
            return None
        levels = self.placer.books.levels
        pod_key = next(iter(job.pods.values())).key
        where = f"pod {pod_key}: metadata.annotations[{request.annotation}]"
        if request.level == HOSTNAME_LEVEL and request.annotation in (KUEUE_REQUIRED, REQUIRED_ANNOTATION):
            return (
                f"{where}: {HOSTNAME_LEVEL!r} (the whole group on one node) is not supported as a required topology; "
                f"ask for pod affinity among the members on {HOSTNAME_LEVEL} instead"
            )
        if request.level not in levels and request.annotation != AFFINITY:
            have = ", ".join(levels) or "none"
            return f"{where}: {request.level!r} is not a topology level of the cluster (its levels: {have})"
        graph = self.placer.books.graph
        if graph is None:
            return None
        kind = self._kind(request.level)
        domains: list[list[list[int]]] = []
        for _names, free, may in self._ever(job, kind):
            if may:
                return None
            domains.append(free)
        return self._never_message(job, request, self.placer.queue.minimum(job), kind, domains)

    def _ever(
        self, job: PendingJob, kind: str, left_out: set[str] = _NONE
    ) -> Iterator[tuple[list[str], list[list[int]], bool]]:
        """Each known domain of ``kind`` (its usable nodes, in the graph's order, none of ``left_out``): its nodes,
        what each has when empty, and whether they may hold at least the job's minimum of members even empty (the
        exact assignment search on the empty nodes that admit each; True also when the search gave up). The devices
        of the members' claims are a last dimension (each node's devices of any class: :meth:`_held`), 0 when none
        takes any."""
        graph = self.placer.books.graph
        assert graph is not None
        pods = list(job.pods.values())
        empty = self.placer.books.fits.empty(self.placer.filter.empty_nodes)
        index = {node.name: i for i, node in enumerate(empty) if node.name not in left_out}
        dims = _dims(pods)
        devices = self.placer.books.devices
        needs = device_needs(devices, pods)
        free = [
            [
                graph.specs[node.name].cores,
                graph.specs[node.name].gpus,
                *_room(node.allocatable, dims),
                devices.free_on(node.name, _NO_DEVICES) if needs is not None else 0,
            ]
            for node in empty
        ]
        members = [
            GangMember(
                (*self._demand(pod, dims), need),
                tuple(index[name] for name in self.placer.filter.static_fit(pod).fit if name in index),
                whole_node_policy(pod, self.placer.profile.policy),
            )
            for pod, need in zip(pods, needs or [0] * len(pods), strict=True)
        ]
        whole = [True] * len(empty)
        count = self.placer.queue.minimum(job)
        for names in by_domain(index, *self._domains(kind)).values():
            nodes = [index[name] for name in names]
            yield names, [free[at] for at in nodes], holds(members, free, whole, count, nodes) is not False

    def _never_message(
        self, job: PendingJob, request: Request, count: int, kind: str, domains: list[list[list[int]]]
    ) -> str:
        """The reason no domain can ever hold the job: its members' sizes, and the most one domain has."""
        sizes = [self.placer.books.pod_shape(pod) for pod in self._members(job, count)]
        cores, gpus = _span(c for c, _ in sizes), _span(g for _, g in sizes)
        least = (min(c for c, _ in sizes), min(g for _, g in sizes))
        held = [
            sum(
                min(node[0] // least[0] if least[0] else count, node[1] // least[1] if least[1] else count)
                for node in nodes
            )
            for nodes in domains
        ]
        totals = [(sum(node[0] for node in nodes), sum(node[1] for node in nodes)) for nodes in domains]
        need = (sum(c for c, _ in sizes), sum(g for _, g in sizes))
        devices = sum(device_needs(self.placer.books.devices, list(job.pods.values())) or ())
        most_devices = max((sum(node[-1] for node in nodes) for nodes in domains), default=0)
        if devices > most_devices:
            most = f"{devices} devices between them for their claims; the most one has: {most_devices}"
        elif len(set(sizes)) == 1 and max(held, default=0) < count:
            most = f"the most one holds: {max(held, default=0)}"
        elif any(need[0] <= has[0] and need[1] <= has[1] for has in totals):
            requests = sorted({res for pod in job.pods.values() for res, amount in pod.requests.items() if amount > 0})
            requests += ["devices"] if devices else []
            most = f"none holds them in every resource they request: {', '.join(requests) or 'none'}"
        else:
            has = max(totals, default=(0, 0))
            most = f"{need[0]} cores and {need[1]} gpus between them; the most one has: {has[0]} and {has[1]}"
        noun = f"{request.level} value" if kind.startswith(_LABEL) else kind
        return (
            f"the pod group requires one {noun} ({request.level}) but no {noun} can ever hold its {count} pods of "
            f"{cores} cores and {gpus} gpus ({most})"
        )

    def _request(self, job: PendingJob) -> Request | None:
        """What ``job`` asks (:func:`job_request`), but required pod affinity among its members only while it keeps
        them in one domain of a level, or of a label that is not a level (its values the domains: :meth:`_domains`):
        not on the hostname (the members are placed one by one, each beside those before it), and not once pods its
        terms select run (kube-scheduler's first-pod rule no longer applies: each member may go to any domain holding
        one, as its own filters say)."""
        books = self.placer.books
        request = job_request(job, books.pods.labels_of)
        if request is None or request.annotation != AFFINITY:
            return request
        if request.level == HOSTNAME_LEVEL:
            return None
        if True in affinity_held(job.pods.values(), books.nodes, books.pods):
            return None
        return request

    def _members(self, job: PendingJob, count: int) -> list[Pod]:
        """The ``count`` smallest of the job's pods (by cores and gpus): the fewest a domain must hold."""
        return sorted(job.pods.values(), key=self.placer.books.pod_shape)[:count]

    def _demand(self, pod: Pod, dims: list[str]) -> tuple[int, ...]:
        """What ``pod`` takes of a node, as the free vectors count: cores, gpus, each of ``dims``, one pod."""
        return (*self.placer.books.pod_shape(pod), *(pod.requests.get(res, 0) for res in dims), 1)

    # ------------------------------------------------------------------ the domain

    def _levels(self, request: Request) -> list[str]:
        """The levels to try, the asked one first (for preferred, then each above it); empty when the graph has no
        such level (not confined: a required one is rejected by :meth:`never`), but the label of required pod
        affinity among the members, a level or not."""
        levels = self.placer.books.levels
        if request.level == HOSTNAME_LEVEL:
            return []
        if request.level not in levels:
            return [request.level] if request.annotation == AFFINITY else []
        index = levels.index(request.level)
        return [request.level] if request.required else list(reversed(levels[: index + 1]))

    def _kind(self, label: str) -> str:
        """The domains ``label`` makes: a level's vertex type, else the label's values (:data:`_LABEL` and it)."""
        return level_type(label) if label in self.placer.books.levels else _LABEL + label

    def _domains(self, kind: str) -> tuple[Mapping[str, int | None], set[int]]:
        """Each node's domain of ``kind`` (None: in none) and the unknown domains (no job is kept in one): a level's
        vertices in the graph; for a label that is not a level (:meth:`_kind`), one domain for each of its values,
        a node without it in none (required pod affinity on a key a node lacks never holds there)."""
        if not kind.startswith(_LABEL):
            graph = self.placer.books.graph
            assert graph is not None
            return graph.domains(kind), _unknown(graph, kind)
        key = kind.removeprefix(_LABEL)
        values: dict[str, int] = {}
        domains: dict[str, int | None] = {}
        for name, node in self.placer.books.nodes.items():
            value = node.labels.get(key)
            domains[name] = None if value is None else values.setdefault(value, len(values))
        return domains, set()

    def _shape(self, job: PendingJob) -> tuple[int, int, int]:
        """(slots, cores, gpus) of the jobspec that finds a domain: the minimum of members, each as the largest
        member (no cores and no gpus: none is found by the engine)."""
        shapes = [self.placer.books.pod_shape(pod) for pod in job.pods.values()]
        return self.placer.queue.minimum(job), max(c for c, _ in shapes), max(g for _, g in shapes)

    def _domain(
        self, job: PendingJob, kind: str, start: int, tried: set[str], *, reserve: bool
    ) -> tuple[tuple[str, ...], int] | None:
        """The nodes of the domain of type ``kind`` the engine puts the job in, by the graph's domain vertex (not by
        label values: a node without a level's label, or with an empty value, is in that level's unknown domain
        wherever its other labels say), the nodes of domains ``tried`` left out, and when the job may start there;
        None when no domain has room now, or, for a reservation, ever. ``cluster``: the whole cluster's. Now, when
        the engine finds none (members that could share nodes, or differ, or take no core), the first domain in the
        policy's order whose nodes hold the members as they are (:meth:`_held`)."""
        graph = self.placer.books.graph
        if graph is None:
            return None
        count, cores, gpus = self._shape(job)
        largest = max(job.pods.values(), key=self.placer.books.pod_shape)
        duration = self.placer.profile.planned(largest, start, reserve=reserve)
        try:
            policy = pod_policy(largest, self.placer.profile.policy)
        except PodRequestError:
            policy = self.placer.profile.policy
        self.placer.books.drop_deferred()  # the engine is read from here on (a kept reservation of the job's must go)
        domains, unknown = self._domains(kind)
        where: str | None = None
        at = start
        if (cores or gpus) and self._engine_found and not kind.startswith(_LABEL):
            # now: the nodes the member may not use now; later: those it may never use (their books change by then)
            hide = set(
                self.placer.filter.static_fit(largest).unfit
                if reserve
                else self.placer.filter.fit(largest).hidden.names
            )
            hide.update(tried)
            if reserve:
                hide.update(self._devices_never(job, kind))
            vertices = graph.engine.graph.vertices
            for name in graph.specs:
                domain = domains.get(name)
                if domain is None or vertices[domain].name == UNKNOWN:
                    hide.add(name)
            spec = level_jobspec(kind, count, cores, gpus, duration)
            op = MatchOp.ALLOCATE_ORELSE_RESERVE if reserve else MatchOp.ALLOCATE
            result = graph.match(op, spec, f"{job.key} ({kind})", start, hide, policy)
            if result.matched:
                where = first_placement(result).node
                at = max(start, result.at)
                graph.cancel(result.jobid, freed=())
            else:  # with more domains left out it finds none either: not asked again in this attempt
                self._engine_found = False
        if where is None and reserve:  # members that could share nodes: the first domain that may ever hold them
            where = next((names[0] for names, _, may in self._ever(job, kind, tried) if may), None)
        if not reserve and (
            where is None
            or not (alike_run(job) == len(job.pods) or self._held_at(job, domains, where, start, duration))
        ):
            # the engine found none, or (members that differ) its pick does not hold them as they are: alike members
            # each on a node of its own that may take one now are held; the exact search's
            opened = self._open(job)
            shown = (name for name in graph.ordered(policy, start) if name in opened and name not in tried)
            where = self._held(job, by_domain(shown, domains, unknown).values(), start, duration)
        domain = domains.get(where) if where is not None else None
        if domain is None:
            return None
        return tuple(sorted(name for name, of in domains.items() if of == domain)), at

    def _held_at(
        self, job: PendingJob, domains: Mapping[str, int | None], node: str, start: int, duration: int
    ) -> bool:
        """Whether the domain of ``node`` holds the job's members as they are now (:meth:`_held`)."""
        return self._held(job, [_of(domains, node)], start, duration) is not None

    def _open(self, job: PendingJob) -> set[str]:
        """The nodes that may take some member of the job now."""
        fits = {id(fit): fit for fit in map(self.placer.filter.fit, job.pods.values())}
        if len(fits) == 1:
            return next(iter(fits.values())).open
        return set().union(*(fit.open for fit in fits.values()))

    def _held(self, job: PendingJob, domains: Iterable[list[str]], start: int, duration: int) -> str | None:
        """A node of the first of ``domains`` (each its nodes, in the order the policy prefers them) whose nodes
        hold at least the job's minimum of members as they are now: each member on the nodes that may take it now,
        in its cores, gpus and every other resource it requests, by the exact assignment search
        (:func:`~kubeflux.scheduler.domainfit.holds`); None when none does."""
        graph = self.placer.books.graph
        assert graph is not None
        pods = list(job.pods.values())
        dims = _dims(pods)
        fits = [self.placer.filter.fit(pod) for pod in pods]
        # the devices of the members' claims, as a last dimension: the fewest each member takes, and each node's
        # free devices of any class (a domain that cannot give every member its devices is not chosen)
        devices = self.placer.books.devices
        needs = device_needs(devices, pods)
        used = devices.in_use() if needs is not None else None
        shapes = [
            ((*self._demand(pod, dims), need), whole_node_policy(pod, self.placer.profile.policy))
            for pod, need in zip(pods, needs or [0] * len(pods), strict=True)
        ]
        minimum = self.placer.queue.minimum(job)
        index: dict[str, int] = {}
        free: list[list[int]] = []
        whole: list[bool] = []
        for names in domains:
            mine: dict[int, list[str]] = {}  # members that may use the same nodes share one list
            candidates = [mine.setdefault(id(fit), [name for name in names if name in fit.open]) for fit in fits]
            if sum(1 for nodes in candidates if nodes) < minimum:
                continue
            for name in names:
                if name not in index and any(name in nodes for nodes in mine.values()):
                    index[name] = len(free)
                    cores, gpus, wholly = graph.free_counts(name, start, duration)
                    room = _room(self.placer.filter.room(name), dims)
                    free.append([cores, gpus, *room, devices.free_on(name, used) if used is not None else 0])
                    whole.append(wholly and name not in graph.unrecorded)
            members = [
                GangMember(demand, tuple(index[name] for name in nodes), whole_node)
                for (demand, whole_node), nodes in zip(shapes, candidates, strict=True)
            ]
            if holds(members, free, whole, minimum, [index[name] for name in names if name in index]):
                return names[0]
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


def _of(domains: Mapping[str, int | None], node: str) -> list[str]:
    """The nodes of ``node``'s domain (``domains``: each node's)."""
    domain = domains.get(node)
    return [name for name, of in domains.items() if of == domain and domain is not None]


def _unknown(graph: GraphView, kind: str) -> set[int]:
    """The unknown domains of ``kind`` (nodes without the level's label): no job is kept in one."""
    vertices = graph.engine.graph.vertices
    return {d for d in set(graph.domains(kind).values()) if d is not None and vertices[d].name == UNKNOWN}


def _dims(pods: list[Pod]) -> list[str]:
    """The resources any of ``pods`` requests (pods aside: each member counts one)."""
    return sorted({res for pod in pods for res, amount in pod.requests.items() if amount > 0 and res != PODS})


def _room(room: Mapping[str, int], dims: list[str]) -> list[int]:
    """A node's ``room`` as the free vectors count it: each of ``dims``, then pods."""
    return [*(room.get(res, 0) for res in dims), room.get(PODS, _UNLIMITED)]


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
