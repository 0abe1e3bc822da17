"""kubeflux's preemption: a job of higher priority that cannot start now evicts lower-priority *whole jobs* when
that lets it start now (:class:`Preemptor`, a part of :class:`~kubeflux.scheduler.core.KubefluxScheduler`).

kube-scheduler preempts pod by pod (DefaultPreemption): for an MPI job that is one rank evicted and the rest left
idle. kubeflux preempts jobs, as Volcano and Kueue preempt workloads:

* **Who may preempt**: a job (a lone pod, or a pod group's members) that does not fit now, is not backing off, and
  none of whose pods says ``preemptionPolicy: Never``; under the profile's ``preemption: lowerPriority`` (the
  default, as kube-scheduler's) — ``never`` turns it off.
* **Who may be evicted**: running jobs of strictly lower priority (a job's priority is its highest pod's), whole: a
  pod group's bound pods all go or none, a lone pod alone (the pods of a ``batch/v1`` Job without a group are jobs
  of their own, as its controller replaces each). Pods already being evicted are no candidates.
* **Which**: the set that lets the preemptor start now and is least in this order (:func:`~kubeflux.scheduler.
  preemption.choose_victim_jobs`): the lowest priority tier that is enough, then the least work lost (elapsed run
  time × cores and gpus held: core-seconds; a pod kubeflux did not place ran from when it first saw it bound), then
  the fewest jobs. No set takes a PodDisruptionBudget below what it allows (``policy/v1``'s reading: kubeflux
  evicts through the Eviction API, which enforces them). Such a set is minimal: no job in it could be spared.
* **"Would it start now without them"** is asked of the exact books: each node's room (the ledger, under the
  sharing policy) with the candidates' requests given back, and its whole cores and gpus likewise, searched for an
  assignment of at least the job's minimum of pods by the same search that proves a gang can never fit
  (:func:`~kubeflux.scheduler.gang.assign`) on the nodes that pass the pods' filters. Nothing is evicted before a
  set is proven to be enough.
* **Once per pass**: the candidates and the budgets' allowances are read at the first job that may preempt in a
  pass (again if a job was placed meanwhile) and kept for the rest of it: the victims chosen leave the candidates,
  and the disruptions they take leave the budgets, so the next job never spends them again (the pods being evicted
  are not healthy, as the disruption controller leaves out a budget's ``disruptedPods``).
* **After**: the victims' pods get :class:`~kubeflux.scheduler.messages.Evict` decisions; the preemptor keeps its
  place at the head of its priority and waits for them to leave (it preempts nothing more meanwhile), then is
  placed by the next pass like any job: the queue tries higher priorities first, so the room goes to it.

**No loops**: a job only ever evicts jobs of strictly lower priority, so along any chain of evictions priorities
fall, and an evicted job that comes back (its Job's replacement pod) can never evict the job that evicted it.

**Backfill**: a job backfilled at low priority that would delay a high-priority reservation can be preempted
when the high-priority job could start now without it; a reservation alone evicts nothing (only a job that would
start now preempts).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

from kubeflux.scheduler.books import ClusterBooks
from kubeflux.scheduler.confining import job_request
from kubeflux.scheduler.constraints import fit_error_message
from kubeflux.scheduler.filtering import NodeFilter, whole_node_policy
from kubeflux.scheduler.gang import EXHAUSTED, GangMember, Spread, assign
from kubeflux.scheduler.messages import Evict
from kubeflux.scheduler.objects import PODS, PREEMPT_NEVER, DisruptionBudget, Pod, PodPhase
from kubeflux.scheduler.preemption import RunningPod, VictimJob, choose_victim_jobs, disruptions_allowed, evictable
from kubeflux.scheduler.profile import LOWER_PRIORITY, Profile
from kubeflux.scheduler.queue import PendingJob, PendingQueue
from kubeflux.scheduler.searching import spread_of, without_spread
from kubeflux.scheduler.topology import UNKNOWN, level_type

__all__ = ["REFUSAL_BACKOFF", "Preemptor"]

REFUSAL_BACKOFF: Final = 10.0
"""Seconds a job whose eviction the cluster refused is no candidate (the Eviction API's ``Retry-After``)."""


class Preemptor:
    """Chooses and evicts the jobs a blocked job of higher priority needs gone (see the module docstring)."""

    def __init__(
        self,
        profile: Profile,
        books: ClusterBooks,
        queue: PendingQueue,
        node_filter: NodeFilter,
        log: Callable[[str], None],
    ) -> None:
        self.profile, self.books, self.queue, self.filter, self._log = profile, books, queue, node_filter, log
        self.evicting: dict[str, set[str]] = {}
        """Preemptor job key → the uids of the pods it evicted that the books still count."""
        self.evicted: set[str] = set()
        """Every pod uid evicted and still counted (no candidate again)."""
        self._lowest: tuple[tuple[int, int], int | None] = ((-1, -1), None)
        """(books version, the lowest priority of a bound pod then)."""
        self._uid_of: dict[str, str] = {}
        """The candidates' pods of the last search: ``namespace/name`` → uid."""
        self.refusals: dict[str, float] = {}
        """Pod uid → until when its job is no candidate (its eviction was refused)."""
        self._pass = 0
        self._stamp: tuple[int, tuple[int, int]] | None = None
        """(pass, books version) the candidates below were read at; None: to be read again."""
        self._jobs: list[VictimJob] = []
        """Every running job that may be evicted, of any priority, by key (those being evicted left out)."""
        self._health: dict[str, tuple[int, int | None]] = {}
        """Budget key → (healthy pods it selects, their expected count) as the evictions chosen so far leave them."""
        self._allowed: dict[str, int] = {}
        """Budget key → its ``disruptionsAllowed`` after the evictions chosen so far."""
        self._evictable: list[VictimJob] | None = None
        """The jobs of :attr:`_jobs` whose eviction alone keeps every budget (None: to be found again)."""

    # ------------------------------------------------------------------ the question
    def new_pass(self) -> None:
        """A scheduling pass begins: the candidates and the budgets' allowances are read again when first needed,
        then kept for the pass (the cluster changes only between passes) and spent as victims are chosen."""
        self._pass += 1

    def waiting(self, job: PendingJob) -> int:
        """How many pods the job's earlier evictions still wait for (forgetting those gone)."""
        uids = self.evicting.get(job.key)
        if not uids:
            return 0
        bound = self.books.bound
        gone = {uid for uid in uids if uid not in bound}
        if gone:
            uids -= gone
            self.evicted -= gone
        if not uids:
            del self.evicting[job.key]
        return len(uids)

    def preempt(self, job: PendingJob, now: float) -> list[Evict]:
        """The evictions that let ``job`` start now (empty when it may not preempt or no set of victims is enough);
        remembered, so that the job waits for them rather than preempting again."""
        if self.profile.preemption != LOWER_PRIORITY or job.retry_at > now:
            return []
        priority = job.priority
        lowest = self._lowest_bound_priority()
        if lowest is None or lowest >= priority:
            return []  # nothing of lower priority runs: the usual case costs a comparison
        if self.waiting(job) or any(
            pod.preemption_policy == PREEMPT_NEVER or pod.resource_claims for pod in job.pods.values()
        ):
            return []  # (a victim's devices are freed by its claims' controller, not by its eviction: not counted)
        budgets = list(self.books.budgets.values())
        running = [victim for victim in self._candidates(budgets, now) if victim.priority < priority]
        if not running:
            return []
        by_key = {victim.key: victim for victim in running}
        fits = self._fits_without(job, by_key)
        if fits(frozenset()):
            return []  # the pods already leaving make room enough: it waits for them, evicting nobody more
        chosen = choose_victim_jobs(priority, running, fits, budgets, self._allowed, policy_v1=True)
        if chosen is None:
            return []
        self._spend(chosen, budgets)
        evictions: list[Evict] = []
        uids = self.evicting.setdefault(job.key, set())
        what = f"pod group {job.key}" if job.group else f"pod {job.key}"
        for victim in chosen:
            # the pods a budget guards first: a refusal (a budget changed meanwhile) then spares the whole job
            guarded = sorted(victim.pods, key=lambda p: not any(b.selects(p.namespace, p.labels) for b in budgets))
            for pod in guarded:
                uid = self._uid_of[pod.key]
                uids.add(uid)
                self.evicted.add(uid)
                message = f"Preempted by {what} (priority {priority}) to start now: {victim.key} is evicted whole"
                evictions.append(Evict(pod.key, uid, job.key, message, victim=victim.key))
        names = ", ".join(f"{v.key} (priority {v.priority})" for v in chosen)
        self._log(f"Preempting for {job.key} (priority {priority}): {len(chosen)} job(s) evicted whole: {names}")
        return evictions

    def refused(self, uid: str, now: float) -> None:
        """The cluster refused to evict pod ``uid`` (a budget's 429 in a race, the pod gone): no job waits for it,
        and its job is no candidate for :data:`REFUSAL_BACKOFF` seconds (the Eviction API's ``Retry-After``), so
        that a budget read differently by the cluster never makes the scheduler ask again and again."""
        self.evicted.discard(uid)
        self.refusals[uid] = now + REFUSAL_BACKOFF
        self._stamp = None
        for key, uids in list(self.evicting.items()):
            uids.discard(uid)
            if not uids:
                del self.evicting[key]

    def waiting_message(self, job: PendingJob, waiting: int) -> str:
        """Why a job that preempted still waits."""
        what = f"pod group {job.key}" if job.group else f"pod {job.key}"
        why = f"{what} preempted jobs of lower priority and waits for their {waiting} pod(s) to leave"
        return fit_error_message(len(self.books.nodes), {}, pre_filter_message=why)

    # ------------------------------------------------------------------ the candidates
    def _lowest_bound_priority(self) -> int | None:
        version = self.books.fits.version
        if self._lowest[0] != version:
            pods = self.books.bound.values()
            self._lowest = (version, min((pod.priority for pod in pods), default=None))
        return self._lowest[1]

    def _candidates(self, budgets: list[DisruptionBudget], now: float) -> list[VictimJob]:
        """The running jobs (any priority) that may be evicted within the budgets: read once per pass (again when
        the books changed within it, as when a job was placed), then kept as victims are chosen."""
        stamp = (self._pass, self.books.fits.version)
        if self._stamp != stamp:
            self._stamp = stamp
            self._jobs = self._running_jobs(now)
            self._health = self._budget_health(budgets)
            self._allowed = {b.key: disruptions_allowed(b, *self._health[b.key]) for b in budgets}
            self._evictable = None
        if self._evictable is None:
            self._evictable = evictable(self._jobs, budgets, self._allowed, True)
        return self._evictable

    def _spend(self, chosen: tuple[VictimJob, ...], budgets: list[DisruptionBudget]) -> None:
        """The victims just chosen are no candidates for the rest of the pass, and the disruptions they take from
        the budgets are not there to take again (as the Eviction API would count them)."""
        gone = {victim.key for victim in chosen}
        self._jobs = [job for job in self._jobs if job.key not in gone]
        spent = False
        for budget in budgets:
            healthy, expected = self._health[budget.key]
            for victim in chosen:
                for view in victim.pods:
                    pod = self.books.bound[self._uid_of[view.key]]
                    if _healthy(pod) and budget.selects(pod.namespace, pod.labels):
                        healthy -= 1
            if (healthy, expected) != self._health[budget.key]:
                self._health[budget.key] = (healthy, expected)
                self._allowed[budget.key] = disruptions_allowed(budget, healthy, expected)
                spent = True
        if self._evictable is not None and not spent:
            self._evictable = [job for job in self._evictable if job.key not in gone]
        else:
            self._evictable = None  # an allowance fell: which jobs alone keep the budgets is found again

    def _running_jobs(self, now: float) -> list[VictimJob]:
        """The bound, unfinished jobs, whole, not already being evicted nor spared after a refusal, by key."""
        books = self.books
        members: dict[str, list[tuple[str, Pod]]] = {}
        refusals = self.refusals
        if refusals:
            self.refusals = refusals = {uid: until for uid, until in refusals.items() if until > now}
        spared: set[str] = set()
        for uid, pod in books.bound.items():
            if uid in self.evicted or pod.deleted or pod.phase.terminal:
                continue
            if uid in refusals:
                spared.add(pod.group or pod.key)
            members.setdefault(pod.group or pod.key, []).append((uid, pod))
        for key in spared:
            del members[key]
        self._uid_of = {}
        jobs: list[VictimJob] = []
        for key, pods in sorted(members.items()):
            top = max(pod.priority for _, pod in pods)
            work = 0.0
            running: list[RunningPod] = []
            for uid, pod in pods:
                alloc = books.allocations.get(uid)
                started = float(alloc.start) if alloc is not None else now
                cores, gpus = books.pod_shape(pod)
                work += max(0.0, now - started) * (cores + gpus)
                running.append(RunningPod(pod.namespace, pod.name, pod.priority, started, pod.labels))
                self._uid_of[pod.key] = uid
            jobs.append(VictimJob(key, top, work, tuple(running)))
        return jobs

    def _budget_health(self, budgets: list[DisruptionBudget]) -> dict[str, tuple[int, int | None]]:
        """Each budget's healthy pods (running, not being deleted nor evicted: the disruption controller leaves out
        the pods in ``disruptedPods``) and their expected count (unknown when a selected pod has a controller, as
        a Job's pods do), from the pods the books count."""
        health: dict[str, tuple[int, int | None]] = {}
        bound = self.books.bound
        for budget in budgets:
            selected = [(uid, pod) for uid, pod in bound.items() if budget.selects(pod.namespace, pod.labels)]
            healthy = sum(1 for uid, pod in selected if _healthy(pod) and uid not in self.evicted)
            expected = None if any(pod.owner for _, pod in selected) else 0
            health[budget.key] = (healthy, expected)
        return health

    # ------------------------------------------------------------------ would it start now without them?
    def _fits_without(self, job: PendingJob, running: dict[str, VictimJob]) -> Callable[[frozenset[str]], bool]:
        """``fits(keys)``: whether at least the job's minimum of pods has an assignment to the nodes that pass their
        filters, each node's room by the exact books with the jobs of ``keys`` given back."""
        books, graph = self.books, self.books.graph
        assert graph is not None
        pods = list(job.pods.values())
        dims = sorted({res for pod in pods for res, amount in pod.requests.items() if amount > 0 and res != PODS})
        names = [name for name in graph.specs if graph.usable(name)]
        index = {name: i for i, name in enumerate(names)}
        base: list[list[int]] = []
        for name in names:
            room = self.filter.room(name)
            spec = graph.specs[name]
            held_cores = held_gpus = 0
            for uid in books.ledger.by_node.get(name, ()):
                pod = books.bound.get(uid)
                if pod is not None:
                    cores, gpus = books.pod_shape(pod)
                    held_cores += cores
                    held_gpus += gpus
            pods_room = room.get(PODS, 1 << 62)
            base.append([spec.cores - held_cores, spec.gpus - held_gpus, *(room.get(r, 0) for r in dims), pods_room])
        busy = [bool(books.ledger.by_node.get(name)) for name in names]
        per_node_pods = {i: len(books.ledger.by_node.get(name, ())) for i, name in enumerate(names)}
        # Already leaving (being deleted, ended; evicted for no job that still waits for them, as after a restart):
        # their room is the job's before anyone more is evicted.
        claimed: set[str] = set().union(*self.evicting.values())
        for uid, pod in books.bound.items():
            if uid in claimed or not (uid in self.evicted or pod.deleted or pod.phase.terminal):
                continue
            if (at := index.get(pod.node_name)) is None:
                continue
            if uid not in books.ledger.by_node.get(pod.node_name, ()):
                continue
            cores, gpus = books.pod_shape(pod)
            given_back = [cores, gpus, *(pod.requests.get(r, 0) for r in dims), 1]
            base[at] = [have + more for have, more in zip(base[at], given_back, strict=True)]
            per_node_pods[at] -= 1
        back: dict[str, list[tuple[int, list[int]]]] = {}
        for key, victim in running.items():
            given: list[tuple[int, list[int]]] = []
            for pod_view in victim.pods:
                uid = self._uid_of[pod_view.key]
                pod = books.bound[uid]
                at = index.get(pod.node_name)
                if at is None:
                    continue
                cores, gpus = books.pod_shape(pod)
                given.append((at, [cores, gpus, *(pod.requests.get(r, 0) for r in dims), 1]))
            back[key] = given
        # a topology spread among the members is held by the search (with the matching pods the victims take away
        # uncounted), as when they are placed: victims that leave no assignment keeping it are never evicted
        relation = self.filter.among(pods) if any(pod.terms is not None for pod in pods) else None
        constraint = relation.spread if relation is not None else None
        spread = spread_of(books, relation, pods, names) if relation is not None and constraint is not None else None
        if not isinstance(spread, Spread):
            constraint = spread = None
        matching: dict[str, list[int]] = {}  # per victim job, the spread domain of each of its pods it counts
        if spread is not None and constraint is not None and constraint.selector is not None:
            selector = constraint.selector
            for key, victim in running.items():
                for pod_view in victim.pods:
                    pod = books.bound[self._uid_of[pod_view.key]]
                    at = index.get(pod.node_name)
                    if at is not None and pod.namespace == pods[0].namespace and selector.matches(pod.labels):
                        matching.setdefault(key, []).append(spread.domain[at])
        members = []
        for pod in pods:
            static = self.filter.static_fit(pod)
            # nodes that the pods around it rule out now (anti-affinity, spread, host ports) are left out: evicting
            # for room there would not place it (an eviction that would lift such a rule is not searched yet)
            refused = self.filter.terms_unfit(without_spread(pod, constraint))
            candidates = tuple(index[name] for name in static.fit if name in index and name not in refused)
            shape = (*books.pod_shape(pod), *(pod.requests.get(r, 0) for r in dims), 1)
            one_per_node = self.filter.one_per_node([pod]) is True
            members.append(GangMember(shape, candidates, whole_node_policy(pod, self.profile.policy), one_per_node))
        minimum = self.queue.minimum(job)
        # Only two kinds of node can take a member: one with room for it now (few, on a cluster worth preempting
        # on) and one the victims leave; the others are left out of every search, so that a test costs the
        # victims' nodes, not the cluster's (each member's candidates kept in the order its policy prefers).
        ranks = [{at: rank for rank, at in enumerate(member.candidates)} for member in members]
        roomy = {
            at
            for member, rank in zip(members, ranks, strict=True)
            for at in rank
            if (not member.whole_node or not busy[at] or per_node_pods[at] == 0)
            and all(need <= have for need, have in zip(member.demand, base[at], strict=True))
        }

        domain_of = self._domains(job, names)

        def fits(keys: frozenset[str]) -> bool:
            free: dict[int, list[int]] = {}
            left: dict[int, int] = {}
            for key in keys:
                for at, amounts in back.get(key, ()):
                    free[at] = [have + more for have, more in zip(free.get(at, base[at]), amounts, strict=True)]
                    left[at] = left.get(at, per_node_pods[at]) - 1
            nodes = sorted(roomy.union(free))
            counts: list[int] | None = None
            if spread is not None:
                counts = list(spread.counts)
                for key in keys:
                    for domain in matching.get(key, ()):
                        if domain >= 0:
                            counts[domain] -= 1
            # a job that requires one domain: the members in the nodes of one (each domain searched on its own)
            parts = [nodes] if domain_of is None else _grouped(nodes, domain_of)
            for part in parts:
                where = {at: i for i, at in enumerate(part)}
                held = None
                if spread is not None and counts is not None:
                    held = Spread([spread.domain[at] for at in part], counts, spread.max_skew, spread.floor_zero)
                found = assign(
                    [
                        GangMember(
                            member.demand,
                            tuple(where[at] for at in sorted((at for at in part if at in rank), key=rank.__getitem__)),
                            member.whole_node,
                            member.distinct,
                        )
                        for member, rank in zip(members, ranks, strict=True)
                    ],
                    [free.get(at, base[at]) for at in part],
                    [not busy[at] or left.get(at, per_node_pods[at]) == 0 for at in part],
                    minimum,
                    spread=held,
                )
                if found is not None and found is not EXHAUSTED:
                    return True
            return False

        return fits

    def _domains(self, job: PendingJob, names: list[str]) -> list[int | None] | None:
        """For a job that requires one domain of a level of the graph, each of the nodes ``names``' domain (None:
        the level's unknown domain, or none); None for any other job (placed anywhere)."""
        request = job_request(job)
        graph = self.books.graph
        if request is None or not request.required or request.level not in self.books.levels or graph is None:
            return None
        domains = graph.domains(level_type(request.level))
        vertices = graph.engine.graph.vertices
        of: list[int | None] = []
        for name in names:
            domain = domains.get(name)
            of.append(None if domain is None or vertices[domain].name == UNKNOWN else domain)
        return of


def _grouped(nodes: list[int], domain_of: list[int | None]) -> list[list[int]]:
    """``nodes`` (indices) grouped by their domain, in order; the nodes of no known domain left out."""
    grouped: dict[int, list[int]] = {}
    for at in nodes:
        domain = domain_of[at]
        if domain is not None:
            grouped.setdefault(domain, []).append(at)
    return list(grouped.values())


def _healthy(pod: Pod) -> bool:
    """Counted healthy by a budget: running and not being deleted."""
    return pod.phase is PodPhase.RUNNING and not pod.deleted
