"""``find``: the vertices that satisfy a predicate expression (Fluxion's ``expr_eval_api`` and ``dom_find_dfv``).

Expression language (exactly Fluxion's):

* a *predicate* is ``key=value`` with no blanks: ``status=up|down``, ``sched-now=allocated|free``,
  ``sched-future=reserved|free``, ``agfilter=true|t|false|f``, and ``jobid-alloc``, ``jobid-reserved``,
  ``jobid-span``, ``jobid-tag`` ``=<jobid>``, ``names=<hostlist>`` (the vertex's name is in it) and
  ``property=<name>`` (the vertex has that property); values are lowercased, as Fluxion does;
* predicates and parenthesised sub-expressions are joined by ``and`` / ``or``, or by blanks alone (an implicit
  ``and``), and evaluated strictly **left to right with no precedence**: ``a or b and c`` is ``(a or b) and c``.

Semantics per vertex: ``status=down``, ``sched-now=allocated`` and ``sched-future=reserved`` hold below a vertex
that is down, allocated or reserved too (the walk carries them down); ``jobid-*`` ask whether the job holds a
planner span (``alloc``/``reserved``), an aggregate-filter span (``span``) or a tag (``tag``) on the vertex.
The walk is a post-order over the containment tree; a vertex is emitted (with its full size, as exclusive) when
it matches or when one of its children was emitted, so the output is the matching sub-tree with its ancestors.

``agfilter=true`` anywhere in the expression also restricts the output to vertices with an aggregate filter and
reports its use per type: the job's span when the expression names a job id, else what is in use now (or at time
0 when nothing is in use now, as Fluxion's test suite relies on).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from kubeflux.jobspec import HostlistConstraint, JobspecError, parse_hostlist
from kubeflux.match.planner import PlannerError
from kubeflux.match.view import ScheduleView
from kubeflux.match.writers import Writer
from kubeflux.resources.graph import Status

_BLANKS = " \t"
_JOB_KEYS = ("jobid-alloc", "jobid-reserved", "jobid-span", "jobid-tag")
_VALUES = {
    "status": ("up", "down"),
    "sched-now": ("allocated", "free"),
    "sched-future": ("reserved", "free"),
    "agfilter": ("true", "t", "false", "f"),
}


class FindError(ValueError):
    """An expression ``find`` cannot parse; the message quotes the offending part."""


@dataclass(frozen=True, slots=True)
class Predicate:
    key: str
    value: str


@dataclass(frozen=True, slots=True)
class Expression:
    """``first`` then (operator, operand) pairs, applied left to right."""

    first: Predicate | Expression
    rest: tuple[tuple[str, Predicate | Expression], ...] = ()

    def predicates(self) -> list[Predicate]:
        found: list[Predicate] = []
        for term in (self.first, *(operand for _, operand in self.rest)):
            found.extend([term] if isinstance(term, Predicate) else term.predicates())
        return found


def parse_expression(text: str) -> Expression:
    """Parse a ``find`` expression; FindError names what is wrong."""
    if not text.strip(_BLANKS):
        raise FindError("empty expression")
    return _parse(text, text)


def _parse(text: str, whole: str) -> Expression:
    first, at = _operand(text, 0, whole)
    rest: list[tuple[str, Predicate | Expression]] = []
    end = len(text.rstrip(_BLANKS))
    while at < end:
        if text[at] not in _BLANKS:
            raise FindError(f"expected a blank before {text[at:]!r} in {whole!r}")
        word_at = _skip_blanks(text, at)
        word_end = _token_end(text, word_at)
        operator = text[word_at:word_end]
        if operator in ("and", "or"):
            at = word_end
        else:
            operator = "and"
        operand, at = _operand(text, at, whole)
        rest.append((operator, operand))
    return Expression(first, tuple(rest))


def _operand(text: str, at: int, whole: str) -> tuple[Predicate | Expression, int]:
    start = _skip_blanks(text, at)
    if start >= len(text):
        raise FindError(f"missing operand at the end of {whole!r}")
    if text[start] == "(":
        depth, i = 1, start + 1
        while depth and i < len(text):
            if text[i] in "()":
                depth += 1 if text[i] == "(" else -1
            i += 1
        if depth:
            raise FindError(f"unbalanced parenthesis in {whole!r}")
        return _parse(text[start + 1 : i - 1], whole), i
    end = _token_end(text, start)
    return _predicate(text[start:end], whole), end


def _predicate(token: str, whole: str) -> Predicate:
    key, sep, value = token.partition("=")
    value = value.lower()
    if not sep:
        raise FindError(f"{token!r} is not a key=value predicate (in {whole!r})")
    if key in _JOB_KEYS:
        if not value.isdigit():
            raise FindError(f"{token!r}: the job id must be a non-negative integer")
    elif key == "names":
        try:
            parse_hostlist(value)
        except JobspecError as error:
            raise FindError(f"{token!r}: {error}") from None
    elif key == "property":
        if not value:
            raise FindError(f"{token!r}: a property name is needed")
    elif key in _VALUES:
        if value not in _VALUES[key]:
            raise FindError(f"{token!r}: {key} is one of {', '.join(_VALUES[key])}")
    else:
        known = ", ".join([*_VALUES, *_JOB_KEYS, "names", "property"])
        raise FindError(f"unknown predicate {key!r} in {whole!r}; known: {known}")
    return Predicate(key, value)


@lru_cache(maxsize=64)
def _hostlist(text: str) -> HostlistConstraint:
    return parse_hostlist(text)


def _skip_blanks(text: str, at: int) -> int:
    while at < len(text) and text[at] in _BLANKS:
        at += 1
    return at


def _token_end(text: str, at: int) -> int:
    while at < len(text) and text[at] not in _BLANKS:
        at += 1
    return at


# ---------------------------------------------------------------------------------------------------- the walk


@dataclass(slots=True)
class _Inherited:
    down: bool = False
    allocated: bool = False
    reserved: bool = False


class _Finder:
    def __init__(self, schedule: ScheduleView, expression: Expression, now: int) -> None:
        self.schedule = schedule
        self.expression = expression
        self.now = now
        self.jobid = 0
        self.agfilter = False
        for predicate in expression.predicates():
            if predicate.key in _JOB_KEYS:
                self.jobid = int(predicate.value)
            elif predicate.key == "agfilter":
                self.agfilter = predicate.value in ("true", "t")

    def holds(self, expression: Expression, uid: int, inherited: _Inherited) -> bool:
        result = self._term(expression.first, uid, inherited)
        for operator, operand in expression.rest:
            value = self._term(operand, uid, inherited)
            result = (result and value) if operator == "and" else (result or value)
        return result

    def _term(self, term: Predicate | Expression, uid: int, inherited: _Inherited) -> bool:
        if isinstance(term, Expression):
            return self.holds(term, uid, inherited)
        t = self.schedule
        key, value = term.key, term.value
        if key == "status":
            up = not inherited.down and t.graph.vertices[uid].status == Status.UP
            return up if value == "up" else inherited.down
        if key == "sched-now":
            return inherited.allocated if value == "allocated" else not inherited.allocated
        if key == "sched-future":
            return inherited.reserved if value == "reserved" else not inherited.reserved
        if key == "agfilter":
            return value in ("true", "t")
        if key == "names":
            return _hostlist(value).matches(t.graph.vertices[uid].name, {}, -1)
        if key == "property":
            return value in t.graph.vertices[uid].properties
        jobid = int(value)
        table = {
            "jobid-alloc": t.allocations,
            "jobid-reserved": t.reservations,
            "jobid-span": t.job2span,
        }.get(key)
        if table is not None:
            return jobid in table.get(uid, {})
        return jobid in t.tags.get(uid, ())

    def usage(self, uid: int) -> dict[str, str] | None:
        """The ``agfilter`` report of ``uid``, None when it has no filter (or no span of the named job).

        Fluxion's filter on a non-leaf vertex tracks every pruning type of the vertex's type except its own,
        with total 0 for a type absent below; ours tracks only the types present, so the absent ones are
        reported as Fluxion reports them (``used:0, total:0``)."""
        schedule = self.schedule
        vertex = schedule.graph.vertices[uid]
        types = [type for type in schedule.prune_filters.types_for(vertex.type) if type != vertex.type]
        subplan = schedule.subplans.get(uid)
        if not types or not schedule.has_children(uid):
            return None
        tracked = subplan.resource_types if subplan is not None else ()
        report: dict[str, str] = {}
        span = None
        if self.jobid:
            span = schedule.job2span.get(uid, {}).get(self.jobid)
            if span is None:
                return None
        for type in types:
            if subplan is None or type not in tracked:
                report[type] = "used:0, total:0"
                continue
            total = subplan.resource_total(type)
            if span is not None:
                used = subplan.span_planned(span, type)
            else:
                free = _avail_at(schedule, uid, type, self.now)
                if free == total:
                    free = _avail_at(schedule, uid, type, 0)
                used = total - free
            report[type] = f"used:{used}, total:{total}"
        return dict(sorted(report.items()))


def _avail_at(schedule: ScheduleView, uid: int, type: str, at: int) -> int:
    try:
        return schedule.subplans[uid].avail_resources_at(at, type)
    except PlannerError:
        return -1


def find(schedule: ScheduleView, writer: Writer, expression: Expression, *, now: int = 0) -> int:
    """Emit the vertices matching ``expression`` to ``writer``; return how many were emitted.

    ``now`` (seconds) is the instant at which ``agfilter`` reports current use.
    """
    finder = _Finder(schedule, expression, now)
    return _visit(finder, writer, schedule.root, _Inherited(), 1)


def _visit(finder: _Finder, writer: Writer, uid: int, inherited: _Inherited, level: int) -> int:
    schedule = finder.schedule
    graph = schedule.graph
    vertex = graph.vertices[uid]
    mine = _Inherited(
        inherited.down or vertex.status == Status.DOWN,
        inherited.allocated or bool(schedule.allocations.get(uid)),
        inherited.reserved or bool(schedule.reservations.get(uid)),
    )
    emitted = 0
    for index, target in schedule.children(uid):
        below = _visit(finder, writer, target, mine, level + 1)
        if below > 0:
            writer.edge(graph, index)
            emitted += below
    if not finder.holds(finder.expression, uid, mine) and not emitted:
        return 0
    agfilter = None
    if finder.agfilter:
        agfilter = finder.usage(uid)
        if agfilter is None:
            return 0
    writer.vertex(level, vertex, vertex.size, True, agfilter=agfilter)
    return emitted + 1
