"""Which graph nodes may take a pod now: kube-scheduler's filters and the exact books, kept incrementally.

Scanning every node for every pod costs O(nodes) per pod. Here the answer is cached per pod *shape* (its
placement constraints, and its requests), and brought up to date from a log of the nodes whose books changed
since it was last asked, so a pod costs O(nodes changed) in the common case. The same entry keeps each short node's
reasons and their counts, so kube-scheduler's "0/N nodes are available" reasons for a pod that does not fit cost
no scan either. Node events and graph rebuilds :meth:`FitIndex.reset` everything.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from kubeflux.scheduler.constraints import fit_error_message, never_fits, node_resources_fit, static_filter
from kubeflux.scheduler.graphview import HiddenNodes
from kubeflux.scheduler.objects import Node, Pod

__all__ = ["FitIndex", "NodeFit", "StaticFit"]

Shortfall = Callable[[str, Pod], list[str]]
"""``shortfall(node name, pod)``: kube-scheduler's reasons the pod's requests do not fit on the node now."""

_LOG_LIMIT = 100_000


@dataclass(slots=True)
class StaticFit:
    """The usage-independent filters (cordon, taints, selector, affinity) for one constraint shape."""

    fit: list[str]
    """Graph nodes that pass, in graph order."""
    unfit: set[str]
    reasons: Counter[str]
    members: set[str] = field(default_factory=set)
    """The same nodes as :attr:`fit`, as a set."""


@dataclass(slots=True)
class NodeFit:
    """The nodes for one pod now."""

    static: StaticFit
    unfit: dict[str, list[str]] = field(default_factory=dict)
    """Static-fit nodes whose books are short for the pod, with kube-scheduler's reasons."""
    pos: int = 0
    hidden: HiddenNodes = field(init=False)
    """Graph nodes to hide from the matcher for this pod (:attr:`static`'s unfit and :attr:`unfit`), kept with
    them so that hiding them again re-marks only what changed."""
    short: Counter[str] = field(init=False)
    """The reasons of :attr:`unfit`, counted."""
    open: set[str] = field(init=False)
    """The nodes that may take the pod now (unordered), kept with :attr:`unfit` so that what is asked of them (how
    many copies fit, why they do not) costs the fitting nodes, not a scan of every node."""

    copies: dict[str, int | None] | None = field(init=False)
    """How many pods of this shape each :attr:`open` node takes now by the exact books (None: any number), kept by
    :meth:`FitIndex.copies`; None until first asked."""
    copies_pos: int = field(init=False)
    copies_total: int = field(init=False)
    """The sum of :attr:`copies` (its None aside)."""
    copies_unbounded: int = field(init=False)
    """How many of :attr:`copies` are None."""

    def __post_init__(self) -> None:
        self.copies = None
        self.copies_pos = self.copies_total = self.copies_unbounded = 0
        self.hidden = HiddenNodes(self.static.unfit | self.unfit.keys())
        self.short = Counter()
        for reasons in self.unfit.values():
            self.short.update(reasons)
        self.open = self.static.members - self.unfit.keys()

    def set_unfit(self, name: str, reasons: list[str]) -> None:
        """Record why static-fit node ``name`` is short for the pod now (no reasons: it is not)."""
        before = self.unfit.pop(name, None)
        short = self.short  # counted in loops: Counter's update and subtract are interpreted Python, even compiled
        if before:
            for reason in before:
                short[reason] -= 1
        if reasons:
            self.unfit[name] = reasons
            for reason in reasons:
                short[reason] += 1
            self.hidden.add(name)
            self.open.discard(name)
        else:
            self.hidden.discard(name)
            self.open.add(name)

    def reasons(self) -> Counter[str]:
        """Every node's reason the pod may not go there now, counted as kube-scheduler counts them (``static.reasons +
        short``, the positive counts, summed in a loop that compiles)."""
        total: Counter[str] = Counter()
        static, short = self.static.reasons, self.short
        for reason, count in static.items():
            count += short.get(reason, 0)
            if count > 0:
                total[reason] = count
        for reason, count in short.items():
            if count > 0 and reason not in static:
                total[reason] = count
        return total

    @property
    def any(self) -> bool:
        return len(self.static.fit) > len(self.unfit)

    def fits(self, name: str) -> bool:
        """Whether graph node ``name`` may take the pod now."""
        return name in self.static.members and name not in self.unfit


class FitIndex:
    def __init__(self) -> None:
        self._static: dict[tuple[object, ...], StaticFit] = {}
        self._shapes: dict[tuple[object, ...], NodeFit] = {}
        self._never: dict[tuple[tuple[str, int], ...], str | None] = {}
        self._never_admitted: dict[tuple[object, ...], str | None] = {}
        self._empty: list[Node] | None = None
        self._log: list[str] = []
        self._base = 0
        self._resets = 0

    @property
    def version(self) -> tuple[int, int]:
        """Changes whenever any node's books may have changed (a reset, or a node noted :meth:`changed`)."""
        return self._resets, self._base + len(self._log)

    def reset(self) -> None:
        """Forget everything (a node changed, or the graph was rebuilt)."""
        self._resets += 1
        self._static.clear()
        self._shapes.clear()
        self._never.clear()
        self._never_admitted.clear()
        self._empty = None
        self._base += len(self._log)
        self._log.clear()

    def changed(self, node: str) -> None:
        """The books of ``node`` changed (a pod placed on it or gone from it)."""
        self._log.append(node)
        if len(self._log) > _LOG_LIMIT:
            self._shapes.clear()
            self._base += len(self._log)
            self._log.clear()

    def empty(self, empty_nodes: Callable[[], list[Node]]) -> list[Node]:
        """``empty_nodes()``, the candidate nodes as they are when empty, kept until the next reset."""
        if self._empty is None:
            self._empty = empty_nodes()
        return self._empty

    def never(self, pod: Pod, empty_nodes: Callable[[], list[Node]]) -> str | None:
        """:func:`~kubeflux.scheduler.constraints.never_fits` for ``pod``'s requests alone (its constraints aside)
        on ``empty_nodes()``, the candidate nodes as they are when empty; kept per requests until the next reset."""
        key = tuple(sorted(pod.requests.items()))
        if key not in self._never:
            empty = self.empty(empty_nodes)
            bare = Pod(pod.namespace, pod.name, pod.uid, requests=pod.requests)
            self._never[key] = never_fits(bare, empty) if empty else None
        return self._never[key]

    def never_admitted(
        self, pod: Pod, static: StaticFit, empty_nodes: Callable[[], list[Node]], num_nodes: int
    ) -> str | None:
        """Why ``pod``'s requests fit none of the nodes its constraints admit (``static``), even empty, though each
        part alone is met somewhere (a pod asking the memory of a tainted node it does not tolerate); None when one
        does. Kept per constraints and requests until the next reset."""
        key = (self._static_key(pod), tuple(sorted(pod.requests.items())))
        if key not in self._never_admitted:
            empty = self.empty(empty_nodes)
            bare = Pod(pod.namespace, pod.name, pod.uid, requests=pod.requests)
            reasons = Counter(static.reasons)
            why: str | None = None
            for node in empty:
                if node.name not in static.members:
                    continue
                short = node_resources_fit(bare, node, {})
                if not short:
                    break
                reasons.update(short)
            else:
                tail = "No node that admits the pod could ever host it, even empty."
                why = fit_error_message(num_nodes, reasons, post_filter_message=tail)
            self._never_admitted[key] = why
        return self._never_admitted[key]

    @staticmethod
    def _static_key(pod: Pod) -> tuple[object, ...]:
        selector = pod.node_selector
        return (tuple(sorted(selector.items())) if selector else (), pod.tolerations, pod.required_node_affinity)

    def known_static(self, pod: Pod) -> StaticFit | None:
        """The cached static filters for pods constrained like ``pod``, if computed since the last reset."""
        return self._static.get(self._static_key(pod))

    def static(self, pod: Pod, graph_nodes: Iterable[str], nodes: dict[str, Node], outside: int) -> StaticFit:
        """The static filters for pods constrained like ``pod`` (computed over ``graph_nodes`` unless cached);
        ``outside`` counts the cluster's nodes that are not in the graph."""
        key = self._static_key(pod)
        cached = self._static.get(key)
        if cached is None:
            fit: list[str] = []
            unfit: set[str] = set()
            reasons: Counter[str] = Counter()
            for name in graph_nodes:
                node = nodes.get(name)
                why = "node(s) were not found" if node is None else static_filter(pod, node)
                if why is None:
                    fit.append(name)
                else:
                    unfit.add(name)
                    reasons[why] += 1
            if outside:
                reasons["node(s) are not available to kubeflux under its sharing policy"] += outside
            cached = self._static[key] = StaticFit(fit, unfit, reasons, set(fit))
        return cached

    def copies(self, entry: NodeFit, count: Callable[[str], int | None]) -> NodeFit:
        """Bring ``entry``'s :attr:`~NodeFit.copies` up to date, ``count(name)`` being how many pods of its shape node
        ``name`` takes now (None: any number): counted for its open nodes the first time, then again only for the
        nodes whose books changed since (so a pass that asks it for every gang costs O(nodes changed), not
        O(nodes)). ``entry`` must be the one :meth:`fit` just returned (its open nodes up to date)."""
        end = self._base + len(self._log)
        counts = entry.copies
        names: Iterable[str]
        if counts is None or entry.copies_pos < self._base:
            counts = entry.copies = {}
            entry.copies_total = entry.copies_unbounded = 0
            names = entry.open
        elif entry.copies_pos < end:
            names = set(self._log[entry.copies_pos - self._base :])
        else:
            return entry
        entry.copies_pos = end
        for name in names:
            if name in counts:
                old = counts.pop(name)
                if old is None:
                    entry.copies_unbounded -= 1
                else:
                    entry.copies_total -= old
            if name in entry.open:
                new = counts[name] = count(name)
                if new is None:
                    entry.copies_unbounded += 1
                else:
                    entry.copies_total += new
        return entry

    def fit(self, pod: Pod, static: StaticFit, shortfall: Shortfall) -> NodeFit:
        """The nodes that may take ``pod`` now, brought up to date from the change log."""
        key = (id(static), tuple(sorted(pod.requests.items())))
        entry = self._shapes.get(key)
        end = self._base + len(self._log)
        if entry is None or entry.static is not static or entry.pos < self._base:
            unfit = {name: short for name in static.fit if (short := shortfall(name, pod))}
            entry = NodeFit(static, unfit, end)
            self._shapes[key] = entry
            return entry
        if entry.pos < end:
            for name in set(self._log[entry.pos - self._base :]):
                if name in static.members:
                    entry.set_unfit(name, shortfall(name, pod))
            entry.pos = end
        return entry
