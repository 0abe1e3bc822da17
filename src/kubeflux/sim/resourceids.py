"""Resource ids of the simulated cluster, per resource kind, and how much of each kind is in use.

Batsim names each resource a job ran on by an integer id (``allocated_resources``: ``0-3 5``). The simulator
gives ids to every countable resource, one id per unit:

* **cores**: one id per whole core of ``allocatable.cpu`` (``3500m`` gives 3 ids), numbered across the nodes in
  the order they joined; a pod gets ``cpu // 1000`` ids (a pod of ``500m`` gets none: it shares a core);
* **GPUs** (``nvidia.com/gpu``): one id per GPU, numbered across the nodes the same way;
* **other extended resources** (a name with a domain, ``example.com/fpga``, outside ``kubernetes.io``), one kind
  after another in the order of their names: one id per unit.

Memory, ephemeral storage and hugepages are amounts, not devices: they get no ids (they still count in the
utilization per kind). A node's ids within a kind are consecutive, and a pod takes the lowest free ones.

The **layout** of the ids in the outputs (:meth:`ResourceIds.layout`): cores first (ids ``0 … C−1``), then GPUs
(``C … C+G−1``), then each extended kind. Ids are numbered within each kind while the run goes (so a node that
grows mid-run appends ids to its kind) and shifted by the kinds before it when the records are written.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from kubeflux.scheduler.objects import CPU, GPU, MEMORY

MAX_IDS_PER_NODE: Final = 4096
"""An extended resource with more units than this on one node is taken for an amount, not devices: no ids."""


def has_ids(resource: str) -> bool:
    """Whether units of ``resource`` are devices that get ids of their own (cores, GPUs, extended resources)."""
    if resource in (CPU, GPU):
        return True
    if resource in (MEMORY, "pods") or "/" not in resource:
        return False
    domain = resource.split("/", 1)[0]
    return not (domain == "kubernetes.io" or domain.endswith(".kubernetes.io") or domain == "requests")


def units_of(resource: str, amount: int) -> int:
    """How many ids ``amount`` of ``resource`` (canonical units: ``cpu`` in millicores) takes."""
    return amount // 1000 if resource == CPU else amount


@dataclass(frozen=True, slots=True)
class ResourceKind:
    """One kind's place in the id layout: ids ``first … first + count − 1``; ``capacity`` is the cluster's
    amount in the kind's units (cores for ``cpu``, bytes for memory, units otherwise), the denominator of its
    utilization."""

    name: str
    first: int
    count: int
    capacity: int


class _Kind:
    """The ids of one kind: each node's first id, free ids (lazily built, highest first) and the total."""

    __slots__ = ("free", "offset", "size", "total")

    def __init__(self) -> None:
        self.offset: list[int] = []
        self.size: list[int] = []
        self.free: list[list[int] | None] = []
        self.total = 0

    def add_node(self, units: int) -> None:
        self.offset.append(self.total)
        self.size.append(units)
        self.free.append(None)
        self.total += units

    def _free(self, node: int) -> list[int]:
        ids = self.free[node]
        if ids is None:
            offset = self.offset[node]
            ids = self.free[node] = list(range(offset + self.size[node] - 1, offset - 1, -1))
        return ids

    def take(self, node: int, want: int) -> list[int]:
        ids = self._free(node)
        take = min(want, len(ids))
        if take <= 0:
            return []
        got = ids[-take:]
        del ids[-take:]
        return got

    def give(self, node: int, ids: list[int]) -> None:
        free = self._free(node)
        free.extend(ids)
        free.sort(reverse=True)

    def resize(self, node: int, units: int) -> None:
        """The node now has ``units``: growth gets new ids at the end of the kind; a shrink drops free ids."""
        free, grow = self._free(node), units - self.size[node]
        free[:0] = range(self.total + max(grow, 0) - 1, self.total - 1, -1)
        self.total += max(grow, 0)
        del free[: max(-grow, 0)]
        self.size[node] = units


class ResourceIds:
    """Ids per kind for the nodes of one cluster, in the order they joined (see the module docstring)."""

    __slots__ = ("_capacity", "_kinds", "_nodes", "cores")

    def __init__(self) -> None:
        self.cores = _Kind()
        """The cores' ids (the common case, reached without a lookup)."""
        self._kinds: dict[str, _Kind] = {CPU: self.cores}
        self._capacity: dict[str, int] = {}
        self._nodes = 0

    def _kind(self, resource: str) -> _Kind:
        kind = self._kinds.get(resource)
        if kind is None:
            kind = self._kinds[resource] = _Kind()
            for _ in range(self._nodes):
                kind.add_node(0)
        return kind

    def add_node(self, allocatable: Mapping[str, int]) -> None:
        """A node joins with ``allocatable`` (canonical units)."""
        for resource, amount in allocatable.items():
            if resource != "pods":
                self._capacity[resource] = self._capacity.get(resource, 0) + units_of(resource, amount)
        for resource in allocatable:
            if has_ids(resource):
                self._kind(resource)
        for resource, kind in self._kinds.items():
            units = units_of(resource, allocatable.get(resource, 0))
            kind.add_node(units if units <= MAX_IDS_PER_NODE or resource == CPU else 0)
        self._nodes += 1

    def resize(self, node: int, was: Mapping[str, int], now: Mapping[str, int]) -> None:
        """Node ``node``'s allocatable changed from ``was`` to ``now``."""
        for resource in {*was, *now} - {"pods"}:
            change = units_of(resource, now.get(resource, 0)) - units_of(resource, was.get(resource, 0))
            self._capacity[resource] = self._capacity.get(resource, 0) + max(change, 0)
            if has_ids(resource):
                units = units_of(resource, now.get(resource, 0))
                self._kind(resource).resize(node, units if units <= MAX_IDS_PER_NODE or resource == CPU else 0)

    def take(self, resource: str, node: int, amount: int) -> list[int]:
        """The lowest free ids of ``resource`` on ``node`` for ``amount`` (canonical units; fewer when short)."""
        want = units_of(resource, amount)
        return self._kind(resource).take(node, want) if want > 0 else []

    def give(self, resource: str, node: int, ids: list[int]) -> None:
        """Ids a pod held on ``node`` are free again."""
        self._kinds[resource].give(node, ids)

    def layout(self) -> list[ResourceKind]:
        """Every kind with capacity, in the output layout's order: cores, GPUs, then extended kinds by name;
        memory and other amounts last, with no ids (``count`` 0)."""
        order = [CPU, GPU, *sorted(r for r in self._kinds if r not in (CPU, GPU))]
        kinds: list[ResourceKind] = []
        first = 0
        for resource in order:
            kind = self._kinds.get(resource)
            count = kind.total if kind is not None else 0
            if count or self._capacity.get(resource, 0) or resource == CPU:
                kinds.append(ResourceKind(resource, first, count, self._capacity.get(resource, 0)))
                first += count
        kinds.extend(
            ResourceKind(resource, first, 0, capacity)
            for resource, capacity in sorted(self._capacity.items())
            if resource not in self._kinds and capacity > 0
        )
        return kinds


Series = list[tuple[float, int, int]]
"""(time, allocated, useful) at each change, in a kind's units."""


class Usage:
    """How much of each kind is **allocated** (held by bound pods) and **useful** (held by pods that compute: a
    coupled job's pods from the job's compute start, any other pod from its Running) over time.

    Cores, the common case, are kept as two step series in whole cores of the pods' summed millicores: allocated
    (:attr:`cores_series`) and held idle (:attr:`idle_series`: allocated, not computing; useful = allocated − idle).
    The idle series changes only around start delays and coupled jobs' waits, so a trace without either adds
    almost nothing. Other kinds are in :attr:`series`, in their units, once a pod asked for them."""

    __slots__ = ("_allocated", "_useful", "cores_series", "idle_mcpu", "idle_series", "mcpu", "series")

    def __init__(self) -> None:
        self.mcpu = 0
        """Millicores held by bound pods."""
        self.idle_mcpu = 0
        """Millicores held by bound pods that do not compute (yet)."""
        self.cores_series: list[tuple[float, int]] = []
        """(time, cores allocated) at each change (:attr:`kubeflux.sim.records.RunRecord.utilization_series`)."""
        self.idle_series: list[tuple[float, int]] = []
        """(time, cores held idle) at each change of value."""
        self.series: dict[str, Series] = {}
        """Other kinds: (time, allocated, useful) at each change."""
        self._allocated: dict[str, int] = {}
        self._useful: dict[str, int] = {}

    def change(self, now: float, cpu: int, others: Mapping[str, int] | None, allocated: int, useful: int) -> None:
        """A pod asking ``cpu`` millicores and ``others`` (canonical units) is allocated (``allocated`` = 1),
        released (−1), starts computing (``useful`` = 1) or stops (−1), at ``now``."""
        if allocated:
            self.mcpu += allocated * cpu
            series = self.cores_series
            if series and series[-1][0] == now:
                series[-1] = (now, self.mcpu // 1000)
            else:
                series.append((now, self.mcpu // 1000))
        if cpu and allocated != useful:
            self.idle_mcpu += (allocated - useful) * cpu
            _step(self.idle_series, now, self.idle_mcpu // 1000)
        if others:
            for resource, amount in others.items():
                if amount:
                    total = self._allocated[resource] = self._allocated.get(resource, 0) + allocated * amount
                    busy = self._useful[resource] = self._useful.get(resource, 0) + useful * amount
                    _sample(self.series.setdefault(resource, []), now, total, busy)


def _step(series: list[tuple[float, int]], now: float, value: int) -> None:
    """Record ``value`` at ``now`` in a step series kept minimal: a change back within one time point cancels."""
    if series and series[-1][0] == now:
        if (series[-2][1] if len(series) > 1 else 0) == value:
            series.pop()
        else:
            series[-1] = (now, value)
    elif (series[-1][1] if series else 0) != value:
        series.append((now, value))


def _sample(series: Series, now: float, allocated: int, useful: int) -> None:
    if series and series[-1][0] == now:
        series[-1] = (now, allocated, useful)
    else:
        series.append((now, allocated, useful))


__all__ = ["MAX_IDS_PER_NODE", "ResourceIds", "ResourceKind", "Series", "Usage", "has_ids", "units_of"]
