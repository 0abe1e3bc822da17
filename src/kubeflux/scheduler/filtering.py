"""Which nodes may take a pod, by the books: kube-scheduler's filters, the exact books now and in time.

:class:`NodeFilter` answers every question about room that does not ask the engine for a match: the nodes that pass
the usage-independent filters and the exact ledger now (:mod:`kubeflux.scheduler.fit`, kept incrementally), whether
a node's books take a pod (or ``count`` alike pods) throughout a planned time beside the reservations
(:mod:`kubeflux.scheduler.timebooks`), the quick tests that tell a group cannot start now before any match is made,
and whether a group can never fit the cluster even empty (the assignment search of :mod:`kubeflux.scheduler.gang`).
The placer (:mod:`kubeflux.scheduler.placing`) and the reserver (:mod:`kubeflux.scheduler.reserving`) ask it.
"""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Iterator, Mapping

from kubeflux.match.policy import PolicySpec, parse_policy
from kubeflux.scheduler.among import Among, among
from kubeflux.scheduler.books import ClusterBooks
from kubeflux.scheduler.fit import NodeFit, StaticFit
from kubeflux.scheduler.gang import GangMember, assign
from kubeflux.scheduler.objects import PODS, Node, Pod, ResourceList
from kubeflux.scheduler.podterms import HOSTNAME_LABEL, early_reasons, late_reasons
from kubeflux.scheduler.profile import Profile
from kubeflux.scheduler.queue import PendingJob, PendingQueue
from kubeflux.scheduler.storage import ClaimBinding
from kubeflux.scheduler.translate import Placement, pod_policy
from kubeflux.scheduler.units import format_quantity
from kubeflux.scheduler.volumes import claim_bindings, pod_volumes, volume_reasons

__all__ = ["NodeFilter", "alike_run", "copies", "static_order", "whole_node_policy"]


class NodeFilter:
    """The books' answers about room for pods (see the module docstring)."""

    def __init__(self, profile: Profile, books: ClusterBooks, queue: PendingQueue) -> None:
        self.profile = profile
        self.books = books
        self.queue = queue
        self._pod_fit: tuple[Pod, tuple[object, ...], NodeFit, NodeFit] | None = None
        """(pod, books' versions, its shape's fit, its fit with the pods around it): the last pod's, asked several
        times while it is placed."""
        self._alike_fit: tuple[int, set[tuple[object, ...]]] = (-1, set())
        """(fit index resets, the shapes of groups of alike members found able to fit the empty nodes then): the
        static fits named by id are the index's own, kept until its next reset."""
        self._hostnames: tuple[int, bool] = (-1, False)
        """(fit index resets, :meth:`_hostnames_distinct` then)."""
        self._labels: tuple[int, dict[tuple[str, str], list[str]]] = (-1, {})
        """(fit index resets, :meth:`_by_label` then)."""

    # ================================================================== now

    def static_fit(self, pod: Pod) -> StaticFit:
        """The graph nodes passing the usage-independent filters for pods constrained like ``pod``."""
        books = self.books
        known = books.fits.known_static(pod)
        if known is not None:
            return known
        graph = books.graph
        assert graph is not None
        outside = sum(1 for name in books.nodes if not graph.usable(name))
        usable = [name for name in graph.specs if graph.usable(name)] if graph.gone else graph.specs
        return books.fits.static(pod, usable, books.nodes, outside)

    def _shortfall(self, name: str, pod: Pod) -> list[str]:
        books = self.books
        node = books.nodes[name]
        short = books.ledger.shortfall(pod.requests, name, node.allocatable)
        sharing = self.profile.sharing
        if not short and sharing.name != "shared":
            short = books.own.shortfall(pod.requests, name, sharing.share(node))
        return short

    def fit(self, pod: Pod) -> NodeFit:
        """The graph nodes that may take ``pod`` now: the static filters and the books (kept incrementally per pod
        shape), and for a pod that asks something of the pods around it (or when a bound pod's anti-affinity may be
        against it) the filters of :mod:`kubeflux.scheduler.podterms` over the books' pods, in kube-scheduler's order
        (host ports before the resources, the volume filters, topology spread and inter-pod affinity after them), then
        for a pod with ResourceClaims the devices (:mod:`kubeflux.scheduler.devices`)."""
        books = self.books
        fit = books.fits.fit(pod, self.static_fit(pod), self._shortfall)
        pods = books.pods
        if pod.terms is None and not pods.holders and not pod.volume_claims and not pod.resource_claims:
            return fit
        key = (books.fits.version, pods.version, books.volumes.version, books.devices.version)
        known = self._pod_fit
        if known is not None and known[0] is pod and known[1] == key and known[2] is fit:
            return known[3]
        asks = pod.terms is not None or pods.holders or pod.volume_claims
        refused = self._refused(pod, fit.static, fit.unfit) if asks else {}
        if pod.resource_claims:  # DynamicResources, the last filter: on the nodes every other one passes
            refused = {**refused, **books.devices.refusals(pod, _Open(fit.static, refused, fit.unfit))}
        made = fit  # nothing refused (most pods beside anti-affinity): the shared fit, not a copy of every node
        if refused:
            unfit = dict(fit.unfit)
            unfit.update((name, why.split("\n")) for name, why in refused.items())  # VolumeBinding may give two
            made = NodeFit(fit.static, unfit, fit.pos)
        self._pod_fit = (pod, key, fit, made)
        return made

    def _refused(self, pod: Pod, static: StaticFit, short: Mapping[str, object]) -> dict[str, str]:
        """The filters of :mod:`kubeflux.scheduler.podterms` over ``static``'s nodes, in kube-scheduler's order: host
        ports on each (before the resources: their reason wins over ``short``'s), the volume filters
        (:mod:`kubeflux.scheduler.volumes`), then topology spread and inter-pod affinity on those none of these
        refuses nor ``short`` (the nodes whose books are short) holds. Costs the nodes a filter looks at (the domains
        of the anti-affinity terms that apply, for most pods), not a scan of them all."""
        books = self.books
        pods = books.pods
        terms = pod.terms
        early = early_reasons(pod, static.fit, books.nodes, pods) if terms is not None and terms.host_ports else {}
        if pod.volume_claims:
            volumes = pod_volumes(pod, books.volumes, pods)
            if not isinstance(volumes, str):  # a PreFilter failure is the core's to say (pre_filter)
                early.update(
                    volume_reasons(pod, volumes, _Open(static, early, short), books.nodes, books.volumes, pods)
                )
        open_ = _Open(static, early, short)
        late = late_reasons(pod, open_, books.nodes, pods, self._by_label())
        if not early:
            return late
        early.update(late)
        return early

    def pre_filter(self, pod: Pod) -> str | None:
        """Why no node may take ``pod`` whatever its filters (kube-scheduler's PreFilter message), or None: its
        volume claims (:func:`~kubeflux.scheduler.volumes.pod_volumes`)."""
        if not pod.volume_claims:
            return None
        volumes = pod_volumes(pod, self.books.volumes, self.books.pods)
        return volumes if isinstance(volumes, str) else None

    def claim_bindings(self, pod: Pod, node: str) -> tuple[ClaimBinding, ...] | str:
        """What binding ``pod`` to ``node`` writes for its claims, assumed at once
        (:func:`~kubeflux.scheduler.volumes.claim_bindings`)."""
        if not pod.volume_claims:
            return ()
        books = self.books
        return claim_bindings(pod, books.nodes[node], books.volumes, books.pods)

    def one_per_node(self, pods: list[Pod]) -> bool | None:
        """For a run of alike members (:func:`alike_run`): whether what they ask of each other is "at most one member
        per node" (required anti-affinity of members matching their own term on ``kubernetes.io/hostname``, where every
        node has a hostname of its own, or the same host ports) and the engine can place them in one match of one
        slot per node; False when they ask nothing of each other; None when they ask more (topology spread,
        affinity, anti-affinity among themselves on a wider key), and are placed one by one."""
        terms = pods[0].terms
        if terms is None:
            return False
        if terms.affinity or terms.spread:
            return None
        per_node = bool(terms.host_ports)
        own = self.books.pods.labels_of(pods[0].namespace)
        for term in terms.anti_affinity:
            if not term.matches(pods[0], own):
                continue
            if term.topology_key != HOSTNAME_LABEL or not self._hostnames_distinct():
                return None
            per_node = True
        return per_node

    def among(self, pods: list[Pod]) -> Among | None:
        """What a gang's members ask of each other, as the assignment search can hold it
        (:func:`~kubeflux.scheduler.among.among`); None when they ask more, and are placed one by one only."""
        return among(pods, self.books.pods.labels_of, self._hostnames_distinct)

    def spread_among(self, pods: list[Pod]) -> bool:
        """Whether a gang's members carry a topology spread among them (the search holds it): counted alone through
        it as it stands, a member is refused nodes the members placed before it open (a zone it would tip over
        while another is still empty), so the quick tests that count them so prove nothing."""
        terms = pods[0].terms
        if terms is None or not terms.spread:
            return False
        relation = self.among(pods)
        return relation is not None and relation.spread is not None

    def domains(self, key: str, names: list[str]) -> list[int] | None:
        """Each of the nodes ``names``' domain of topology ``key`` as a small integer, for
        :func:`~kubeflux.scheduler.gang.assign`: -1 for a node without the label, which any number of members kept
        apart may share (kube-scheduler's anti-affinity counts and checks only nodes carrying the key); None for ""
        (the nodes themselves)."""
        if not key:
            return None
        nodes = self.books.nodes
        ids: dict[str, int] = {}
        found = []
        for name in names:
            node = nodes.get(name)
            value = node.labels.get(key) if node is not None else None
            found.append(ids.setdefault(value, len(ids)) if value is not None else -1)
        return found

    def _hostnames_distinct(self) -> bool:
        """Whether every graph node carries a ``kubernetes.io/hostname`` of its own (kept until the nodes change)."""
        resets = self.books.fits.version[0]
        if self._hostnames[0] != resets:
            graph = self.books.graph
            names = list(graph.specs) if graph is not None else []
            nodes = self.books.nodes
            values = {nodes[name].labels.get(HOSTNAME_LABEL) for name in names if name in nodes}
            self._hostnames = (resets, None not in values and len(values) == len(names))
        return self._hostnames[1]

    def _by_label(self) -> dict[tuple[str, str], list[str]]:
        """The nodes by (label, value), kept until the nodes change."""
        resets = self.books.fits.version[0]
        if self._labels[0] != resets:
            index: dict[tuple[str, str], list[str]] = {}
            for name, node in self.books.nodes.items():
                for pair in node.labels.items():
                    index.setdefault(pair, []).append(name)
            self._labels = (resets, index)
        return self._labels[1]

    def terms_unfit(self, pod: Pod) -> set[str]:
        """The nodes admitting ``pod`` (the static filters) that the filters of :mod:`kubeflux.scheduler.podterms`
        refuse it now, whatever their room (for a search that counts room itself)."""
        if pod.terms is None and not self.books.pods.holders and not pod.volume_claims:
            return set()
        return set(self._refused(pod, self.static_fit(pod), {}))

    def reasons(self, pod: Pod) -> Counter[str]:
        """Why each node may not take ``pod`` now, counted as kube-scheduler counts them."""
        return self.fit(pod).reasons()

    def room(self, name: str) -> dict[str, int]:
        """What kubeflux may still use of node ``name`` by the exact books now (under its sharing policy): what the
        node has left, and under a policy other than ``shared`` no more than what is left of kubeflux's share (as
        :meth:`room_during`; another scheduler's pods may fill the node below that share)."""
        books = self.books
        node = books.nodes[name]
        used = books.ledger.on(name)
        room = {res: amount - used.get(res, 0) for res, amount in node.allocatable.items()}
        sharing = self.profile.sharing
        if sharing.name != "shared":
            own = books.own.on(name)
            share = sharing.share(node)
            room = {res: min(amount - own.get(res, 0), room.get(res, amount)) for res, amount in share.items()}
        return room

    def copies_now(self, pod: Pod) -> NodeFit:
        """``pod``'s fit entry with how many pods like it each open node takes now by the exact books, kept up to date
        incrementally (:meth:`~kubeflux.scheduler.fit.FitIndex.copies`)."""
        requests = pod.requests
        return self.books.fits.copies(self.fit(pod), lambda name: copies(self.room(name), requests))

    def empty_nodes(self) -> list[Node]:
        """The usable graph nodes, empty, with kubeflux's share of each (the sharing policy) as allocatable."""
        books = self.books
        graph = books.graph
        assert graph is not None
        sharing = self.profile.sharing
        return [Node(name, allocatable=sharing.share(node)) for name, node in books.nodes.items() if graph.usable(name)]

    # ================================================================== in time

    def fits_during(self, name: str, pod: Pod, start: int, end: int) -> bool:
        """Whether node ``name``'s exact books take ``pod`` throughout ``[start, end)``, beside the reservations."""
        books = self.books
        node = books.nodes[name]
        if not books.plans.fits_during(name, pod.requests, node.allocatable, start, end):
            return False
        sharing = self.profile.sharing
        return sharing.name == "shared" or books.own_plans.fits_during(
            name, pod.requests, sharing.share(node), start, end
        )

    def room_during(self, name: str, start: int, end: int) -> ResourceList:
        """What kubeflux may use of node ``name`` throughout ``[start, end)`` by the exact books in time."""
        books = self.books
        node = books.nodes[name]
        room = books.plans.free_during(name, node.allocatable, start, end)
        sharing = self.profile.sharing
        if sharing.name != "shared":
            share = books.own_plans.free_during(name, sharing.share(node), start, end)
            room = {res: min(amount, room.get(res, amount)) for res, amount in share.items()}
        return room

    def held_short(self, pod: Pod, fit: NodeFit, start: int, end: int) -> list[str]:
        """The nodes that may take ``pod`` now but whose reservations leave it no room before ``end``."""
        return [
            name
            for name in self.books.plans.held_nodes()
            if fit.fits(name) and not self.fits_during(name, pod, start, end)
        ]

    def fits_many(self, name: str, pod: Pod, count: int, start: int, end: int) -> bool:
        """Whether ``count`` pods like ``pod`` fit node ``name``'s exact books together throughout ``[start, end)``."""
        books = self.books
        node = books.nodes[name]
        sharing = self.profile.sharing
        booked = [(books.plans, node.allocatable)]
        if sharing.name != "shared":
            booked.append((books.own_plans, sharing.share(node)))
        for plans, allocatable in booked:
            peak = plans.peak(name, start, end)
            for res, amount in pod.requests.items():
                if amount > 0 and peak.get(res, 0) + count * amount > allocatable.get(res, 0):
                    return False
            if PODS in allocatable and peak.get(PODS, 0) + count > allocatable[PODS]:
                return False
        return True

    def books_take(self, pod: Pod, chunks: list[Placement], start: int, duration: int) -> bool:
        """Whether each node's exact books take as many pods like ``pod`` as ``chunks`` put there, now and (on a
        node with reservations) throughout the pod's planned time."""
        counts = Counter(where.node for where in chunks)
        held = self.books.plans.holds
        for name, count in counts.items():
            if count == 1:  # the match hid the nodes that do not take one
                continue
            room = copies(self.room(name), pod.requests)
            if room is not None and room < count:
                return False
            if name in held and not self.fits_many(name, pod, count, start, start + duration):
                return False
        return True

    # ================================================================== quick tests for a group

    def first_short_member(self, job: PendingJob, minimum: int) -> Pod | None:
        """A quick test before matching a group of alike members (same requests and constraints) pod by pod: as
        many as the exact books' free amounts hold, node after node; the first member beyond them when fewer than
        ``minimum`` fit (None when enough do, or when the members differ: their search is exact, a packing is
        not). A full count is kept until the books change, for the next group of that shape in the pass."""
        pods = list(job.pods.values())
        first = pods[0]
        if PODS in first.requests or alike_run(job) < len(pods) or self.spread_among(pods):
            return None
        fit = self.copies_now(first)
        if fit.copies_unbounded:
            return None
        packed = fit.copies_total  # packed node after node, in any order: the first member beyond is the same
        return pods[packed] if packed < minimum else None

    def too_few_slots(self, job: PendingJob, start: int, minimum: int) -> bool:
        """A quick sufficient test that neither matching the job's members one by one now nor searching their
        assignment places ``minimum`` of them, so that neither need be tried; the first member that fails one by one
        is then one of its leading run of alike members (the trace's ``k`` pods of a node's cores and the rest).

        Each node that may take those members by the books now takes at most as many as its exact books hold, and
        on a node with reservations as many as its books in time hold beside them and its cores and gpus counted one
        by one stay free (for the shortest planned time of one): an upper bound of what a match or the search finds
        (elsewhere nothing is planned to start, and the books count every bound pod); every other member at most
        once. False when it cannot tell (sockets, a policy without a static order, pods the engine still has to
        take, a pod count in the requests)."""
        books = self.books
        graph = books.graph
        assert graph is not None
        pods = list(job.pods.values())
        first = pods[0]
        policy = self.profile.policy
        if graph.socket_size is not None or books.stuck or PODS in first.requests or not static_order(first, policy):
            return False
        if self.spread_among(pods):
            return False
        run = alike_run(job)
        needed = minimum - (len(pods) - run)  # of the run, when every other member is placed
        if needed <= 0:
            return False
        cores, gpus = books.pod_shape(first)
        fit = self.copies_now(first)
        counts = fit.copies
        assert counts is not None
        if fit.copies_unbounded:
            return False
        slots = fit.copies_total  # by the books now; a node with reservations may take fewer
        if slots < needed:
            return True
        duration = -1
        held = books.plans.holds
        for name in held if len(held) < len(counts) else counts:
            room = counts.get(name)
            if not room or name not in held:
                continue
            # reserved later: what stays free until the members' planned ends
            if duration < 0:
                duration = min(self.profile.planned(pod, start) for pod in pods[:run])
            fewer = min(room, copies(self.room_during(name, start, start + duration), first.requests) or 0)
            if fewer and (cores or gpus):
                free_cores, free_gpus, _ = graph.free_counts(name, start, duration, exact=True)
                fewer = min(fewer, free_cores // cores if cores else fewer, free_gpus // gpus if gpus else fewer)
            slots -= room - fewer
            if slots < needed:
                return True
        return False

    def may_fit(self, job: PendingJob, at: int) -> bool:
        """A quick necessary test before a search: the graph has as many cores free from ``at`` as the job's
        ``minimum`` smallest members take."""
        graph = self.books.graph
        assert graph is not None
        pods = list(job.pods.values())
        needed = sum(sorted(self.books.pod_shape(pod)[0] for pod in pods)[: self.queue.minimum(job)])
        shortest = min(self.profile.planned(pod, at, reserve=True) for pod in pods)
        return not needed or graph.free_total(at, shortest) >= needed

    # ================================================================== never

    def gang_never_fits(self, job: PendingJob) -> str | None:
        """Why the group can never fit the cluster's nodes even empty, or None (also when the search gave up).

        A group of alike members that fits is remembered by its shape (constraints, requests, policy, size, minimum)
        until the nodes change (the fit index is reset), so the next group alike is not searched again."""
        pods = list(job.pods.values())
        alike: tuple[object, ...] | None = None
        if alike_run(job) == len(pods):
            first = pods[0]
            shape = (id(self.static_fit(first)), tuple(sorted(first.requests.items())), self.books.pod_shape(first))
            alike = (*shape, whole_node_policy(first, self.profile.policy), len(pods), self.queue.minimum(job))
            alike = (*alike, first.terms, first.namespace, tuple(sorted(first.labels.items())) if first.terms else ())
            resets = self.books.fits.version[0]
            if self._alike_fit[0] != resets:
                self._alike_fit = (resets, set())
            if alike in self._alike_fit[1]:
                return None
        why = self._search_gang(job, pods)
        if why is None and alike is not None:
            self._alike_fit[1].add(alike)
        return why

    def _search_gang(self, job: PendingJob, pods: list[Pod]) -> str | None:
        """:meth:`gang_never_fits` by an assignment search on the empty nodes."""
        books = self.books
        nodes = books.fits.empty(self.empty_nodes)
        graph = books.graph
        assert graph is not None
        policy = self.profile.policy
        dims = sorted({res for pod in pods for res, amount in pod.requests.items() if amount > 0})
        free = []
        for node in nodes:
            spec = graph.specs[node.name]
            free.append([spec.cores, spec.gpus, *(node.allocatable.get(res, 0) for res in dims)])
            free[-1].append(node.allocatable.get(PODS, 1 << 62))
        index = {node.name: i for i, node in enumerate(nodes)}
        relation = self.among(pods)  # when they ask more of each other, not held here: never-fits is not claimed then
        key, flags = (relation.key, relation.flags) if relation is not None else ("", [False] * len(pods))
        candidates: dict[int, tuple[int, ...]] = {}  # per static fit: members constrained alike share one
        members: list[GangMember] = []
        for pod in pods:
            static = self.static_fit(pod)
            mine = candidates.get(id(static))
            if mine is None:
                mine = candidates[id(static)] = tuple(index[name] for name in static.fit if name in index)
            shape = (*books.pod_shape(pod), *(pod.requests.get(res, 0) for res in dims), 1)
            members.append(GangMember(shape, mine, whole_node_policy(pod, policy), flags[len(members)]))
        minimum = self.queue.minimum(job)
        domains = self.domains(key, [node.name for node in nodes])
        found = assign(members, free, [True] * len(nodes), minimum, domains=domains)
        if found is not None:  # an assignment, or the search gave up: not proven never to fit
            return None
        need: Counter[str] = Counter()
        for pod in sorted(pods, key=lambda p: -sum(p.requests.values()))[:minimum]:
            need.update({res: amount for res, amount in pod.requests.items() if amount > 0})
        have: Counter[str] = Counter()
        for node in nodes:
            have.update({res: node.allocatable.get(res, 0) for res in need})
        wanted = ", ".join(f"{format_quantity(res, need[res])} {res}" for res in sorted(need))
        held = ", ".join(f"{format_quantity(res, have[res])} {res}" for res in sorted(need))
        count = f"{minimum} of its {len(pods)} pods" if minimum < len(pods) else f"its {len(pods)} pods"
        short = [res for res in sorted(need) if need[res] > have[res]]
        why = f"too little {', '.join(short)}" if short else "no assignment of each pod to a node that admits it fits"
        if not short and any(whole_node_policy(pod, policy) for pod in pods):
            why += "; a node-exclusive pod holds its node whole"
        if not short and any(flags):
            where = f"a {key} of its own" if key else "a node of its own"
            why += f"; {sum(flags)} of its pods must each have {where} (anti-affinity or host ports among them)"
        return (
            f"pod group {job.key} can never fit: {count} need {wanted} in all; the {len(nodes)} node(s) available "
            f"to kubeflux have {held} even when empty ({why})."
        )


class _Open:
    """The nodes of a static fit that neither of two maps of refused nodes holds, as a set read without being built:
    a filter that rules out a few nodes asks whether each is open, and only a filter that looks at every node walks
    them (in the static fit's order)."""

    __slots__ = ("_out", "_short", "_static")

    def __init__(self, static: StaticFit, out: Mapping[str, object], short: Mapping[str, object]) -> None:
        self._static, self._out, self._short = static, out, short

    def __contains__(self, name: object) -> bool:
        return name in self._static.members and name not in self._out and name not in self._short

    def __iter__(self) -> Iterator[str]:
        out, short = self._out, self._short
        return (name for name in self._static.fit if name not in out and name not in short)

    def __len__(self) -> int:
        return sum(1 for _ in self)


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
        and pod.terms == other.terms
        and pod.volume_claims == other.volume_claims
        and not pod.resource_claims  # each pod's claims are its own: their devices are found pod by pod
        and not other.resource_claims
        and (pod.terms is None or pod.labels == other.labels)
        and pod.annotations.get("kubeflux.io/match-policy") == other.annotations.get("kubeflux.io/match-policy")
    )


def copies(room: dict[str, int], requests: dict[str, int]) -> int | None:
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


def static_order(pod: Pod, policy: str) -> bool:
    """Whether ``pod``'s match policy (and the profile's ``policy``) orders nodes statically and holds none whole:
    not ``first``, whose walk follows free amounts (with it, matches made and undone since change later choices: a
    failed one-by-one attempt is not skipped), nor ``*nodex``."""
    return all(
        not spec.stop_on_first and not spec.node_exclusive
        for spec in (_policy_spec(pod_policy(pod, policy)), _policy_spec(policy))
    )


def whole_node_policy(pod: Pod, policy: str) -> bool:
    """Whether ``pod``'s match policy (its annotation's, else ``policy``) holds a node whole."""
    return _policy_spec(pod_policy(pod, policy)).node_exclusive
