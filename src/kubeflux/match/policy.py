"""Match policies: how the DFU walk scores candidates (Fluxion's ``dfu_match_*`` callbacks).

A policy never walks the graph: the traverser calls :meth:`MatchPolicy.discover` on the way down and
``finish_*`` on the way up, and the policy picks the best candidates of each requested type by score. Named
policies are rows of one table (:data:`NAMED_POLICIES`), as in Fluxion; a custom policy is a string such as
``"policy=low node_centric=true node_exclusive=false stop_on_1_matches=false"``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kubeflux.match.request import Request, calc_count
from kubeflux.match.scoring import MATCH_MET, MATCH_UNMET, Scoring
from kubeflux.resources.graph import Vertex

NAMED_POLICIES: dict[str, str] = {
    "first": "policy=high node_centric=true stop_on_1_matches=true",
    "firstnodex": "policy=high node_centric=true node_exclusive=true stop_on_1_matches=true",
    "high": "policy=high",
    "low": "policy=low",
    "lonode": "policy=low node_centric=true",
    "hinode": "policy=high node_centric=true",
    "lonodex": "policy=low node_centric=true node_exclusive=true",
    "hinodex": "policy=high node_centric=true node_exclusive=true",
    "variation": "policy=low",
}
_OPTIONS = ("policy", "node_centric", "stop_on_1_matches", "node_exclusive")
NODE_FACTOR = (1, 10000)
"""Node-centric scoring: a node's (id + 1 + 1) * 10000 is added to everything below it."""


class PolicyError(ValueError):
    """An unknown policy name or a malformed custom policy string."""


@dataclass(frozen=True, slots=True)
class PolicySpec:
    name: str
    high: bool = True
    node_centric: bool = False
    node_exclusive: bool = False
    stop_on_first: bool = False
    performance_class: bool = False
    """The ``variation`` policy: score by the ``perf_class`` property, lowest class first."""


def parse_policy(name: str) -> PolicySpec:
    """Resolve a named policy or a custom ``key=value`` policy string."""
    text = NAMED_POLICIES.get(name, name)
    options: dict[str, bool] = {}
    high: bool | None = None
    for word in text.split(" "):
        key, _, value = word.partition("=")
        if key not in _OPTIONS:
            raise PolicyError(f"unknown match policy {name!r}: invalid policy option {key!r}")
        if key == "policy":
            if value not in ("low", "high"):
                raise PolicyError(f"match policy {name!r}: policy accepts only low or high, got {value!r}")
            high = value == "high"
        elif value in ("true", "false"):
            options[key] = value == "true"
        else:
            raise PolicyError(f"match policy {name!r}: option {key} requires true or false, got {value!r}")
    if high is None:
        raise PolicyError(f"match policy {name!r} names neither low nor high")
    return PolicySpec(
        name=name,
        high=high,
        node_centric=options.get("node_centric", False),
        node_exclusive=options.get("node_exclusive", False),
        stop_on_first=options.get("stop_on_1_matches", False),
        performance_class=name == "variation",
    )


@dataclass(slots=True)
class MatchPolicy:
    """Multi-level id scoring (Fluxion's ``multilevel_id_t``), optionally by performance class."""

    spec: PolicySpec
    exclusive_types: set[str] = field(default_factory=set)
    """Types allocated whole with all their children (``node`` under the ``*nodex`` policies)."""
    _factors: dict[str, tuple[int, int]] = field(default_factory=dict)
    _last_factor: dict[str, int] = field(default_factory=dict)
    _multilevel: int = 0

    def __post_init__(self) -> None:
        if self.spec.node_centric:
            self._factors["node"] = NODE_FACTOR
        if self.spec.node_exclusive:
            self.exclusive_types.add("node")

    @property
    def descending(self) -> bool:
        return self.spec.high and not self.spec.performance_class

    def discover(self, vertex: Vertex) -> None:
        factor = self._factors.get(vertex.type)
        if factor is not None:
            add_by, multiply_by = factor
            value = (vertex.id + 1 + add_by) * multiply_by + abs(vertex.uniq_id % multiply_by - 1)
            self._last_factor[vertex.type] = value
            self._multilevel += value

    def finish_vertex(self, vertex: Vertex, resources: list[Request], dfu: Scoring) -> bool:
        met = True
        for resource in resources:
            if resource.type != vertex.type:
                continue
            for child in resource.with_:
                count = calc_count(child, dfu.qualified_count(child.type))
                if count == 0:
                    met = False
                    break
                dfu.choose_accum_best_k(child.type, count, self.descending)
        dfu.overall_score = self.finish_chosen(vertex, met)
        return met

    def finish_chosen(self, vertex: Vertex, met: bool) -> int:
        """The end of :meth:`finish_vertex` once the vertex's choices are made (``met``: they all were): its score."""
        if vertex.type in self._factors:
            self._multilevel -= self._last_factor.get(vertex.type, 0)
        return self._vertex_score(vertex) if met else MATCH_UNMET

    def finish_leaf(self, vertex: Vertex) -> int:
        """:meth:`finish_vertex` for a vertex with no children and no request below it: always met; its score."""
        if vertex.type in self._factors:
            self._multilevel -= self._last_factor.get(vertex.type, 0)
        return self._vertex_score(vertex)

    def leaf_base(self, type: str) -> int | None:
        """What :meth:`finish_leaf` adds to a ``type`` leaf's id, while nothing is discovered (None when the score
        is not the id plus a constant: a type with a factor, or scoring by performance class)."""
        if self.spec.performance_class or type in self._factors:
            return None
        return MATCH_MET + self._multilevel + 1

    def _vertex_score(self, vertex: Vertex) -> int:
        if self.spec.performance_class:
            return perf_class(vertex)
        return MATCH_MET + self._multilevel + vertex.id + 1

    def finish_slot(self, dfu: Scoring) -> None:
        for type in list(dfu.by_type):
            dfu.choose_accum_all(type, self.descending)

    def finish_graph(self, resources: list[Request], dfu: Scoring) -> bool:
        met = True
        types = [resource.type for resource in resources]
        for resource in resources:
            count = calc_count(resource, dfu.qualified_count(resource.type))
            if count == 0:
                met = False
                break
            # A type requested more than once is chosen among again: all its candidates must stay sorted.
            once = types.count(resource.type) == 1
            dfu.choose_accum_best_k(resource.type, count, self.descending, partial=once)
        dfu.overall_score = MATCH_MET if met else MATCH_UNMET
        self._multilevel = 0
        return met


def perf_class(vertex: Vertex) -> int:
    """A vertex's ``perf_class`` property (0-9999), 9999 when it has none or a bad one."""
    value = vertex.properties.get("perf_class", "")
    try:
        perf = int(value)
    except ValueError:
        return 9999
    return perf if 0 <= perf <= 9999 else 9999
