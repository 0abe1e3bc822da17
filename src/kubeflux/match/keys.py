"""The keys a select walk caches its evaluations under: request shapes and walk contexts numbered as small integers.

An evaluation depends on the subtree's state (its fingerprint), the spans its window meets (checked when it is
reused), and what :class:`CacheKeys` numbers: the shape of the request (:meth:`CacheKeys.sign`), the walk's flags,
and the walk's context (:meth:`CacheKeys.begin`: whether the window fits the planners' horizon, the kind of match,
the task labels and the policy). A key is then a short tuple of small integers.
"""

from __future__ import annotations

from kubeflux.match.evaluation import CacheKey
from kubeflux.match.meta import JobMeta
from kubeflux.match.policy import PolicySpec
from kubeflux.match.request import Request
from kubeflux.match.state import SLOT


class CacheKeys:
    """Numbers for request shapes and walk contexts, and the current select walk's (see the module docstring)."""

    def __init__(self) -> None:
        self._shapes: dict[tuple[object, ...], int] = {}
        self._signatures: dict[int, int] = {}
        self._free_list = -1
        """The current walk's request list id when it numbers evaluations without its slot count, else -1."""
        self._free_number = -1
        self._context = -1
        """The number of the current select walk's cache context (see :meth:`begin`)."""

    def sign(self, resources: list[Request]) -> int:
        """Intern the shape of a request list (and of every list below it) as a small integer cache key.

        A request remembers its own shape, so a jobspec matched again (the engine reuses its requests) costs
        one lookup per top-level request; the lists below were registered when the shape was first computed
        and stay registered while they live."""
        shapes = []
        for request in resources:
            shape = request.shape
            if shape < 0:
                inner = self.sign(request.with_)
                shape = request.shape = self._intern(
                    (request.type, request.count, request.exclusive, request.label, inner)
                )
            shapes.append(shape)
        number = self._signatures[id(resources)] = self._intern(tuple(shapes))
        return number

    def signature(self, resources: list[Request]) -> int | None:
        """The number :meth:`sign` gave ``resources``, None if it did not."""
        return self._signatures.get(id(resources))

    def forget(self, resources: list[Request]) -> None:
        """Drop the signatures of a request list and of the lists below it, which their owner no longer matches
        (and whose ids a later list may take)."""
        self._signatures.pop(id(resources), None)
        for request in resources:
            self.forget(request.with_)

    def _intern(self, shape: tuple[object, ...]) -> int:
        number = self._shapes.get(shape)
        if number is None:
            number = self._shapes[shape] = len(self._shapes)
        return number

    def begin(self, meta: JobMeta, in_range: bool, labels: tuple[str, ...], spec: PolicySpec) -> None:
        """Number what every cache key of this walk shares (see :meth:`root_key`): whether the window fits the
        planners' horizon (``in_range``), the kind of match, the task labels and the policy (the scheduler switches
        it per pod). Set at the start of each select walk."""
        self._context = self._intern(("context", in_range, int(meta.alloc_type), labels, spec))

    def root_key(self, resources: list[Request], pristine: bool, excl: bool) -> CacheKey:
        """What an evaluation depends on besides the subtree's state and the spans its window meets: the request,
        the walk's flags, and the walk's context (:meth:`begin`, numbered when the walk began)."""
        return (self._signatures[id(resources)], pristine, excl, self._context)

    def part_key(self, resources: list[Request], pristine: bool, excl: bool) -> CacheKey:
        """:meth:`root_key` of an evaluation below the root, or of a span of the root's children: the request of
        the walk's own slots alone (``slot(N) → …``) is numbered without its count ``N`` (see :meth:`count_free`)."""
        if id(resources) == self._free_list:
            return (self._free_number, pristine, excl, self._context)
        return (self._signatures[id(resources)], pristine, excl, self._context)

    def count_free(self, resources: list[Request], allowed: bool) -> None:
        """Note whether the walk's request list (signed: see :meth:`sign`) is numbered without its slot count below
        the root (:meth:`part_key`): when it is one ``slot(N)`` alone and ``allowed`` (the policy does not stop
        early, ``stop_on_1_matches``, whose explore stops after ``N`` shares, and the traverser allows it, its
        ``count_free_parts``).

        Why that is exact: ``N`` is read by the root alone (its best-k choice of ``N`` slots, the walk's early stop
        after ``N`` candidates among the root's children, the slot bound), and, below it, only where a vertex's
        own request holds the slot (``node → slot(N)``, not this shape) or where ``first``'s explore counts shares
        toward it. Below the root, a vertex where the slot fits offers every slot it can cut (the same for any
        ``N``); one where it does not passes its children's candidates up unchosen. So an evaluation below the
        root, and a span of the root's children, is the same for every ``N``, and a match for 10 slots reuses those
        made for 8 (a scheduler's gangs of many sizes otherwise evict each other's evaluations)."""
        self._free_list = -1
        if not allowed or len(resources) != 1:
            return
        slot = resources[0]
        if slot.type != SLOT:
            return
        inner = self._signatures[id(slot.with_)]
        self._free_number = self._intern(("any count", slot.type, slot.exclusive, slot.label, inner))
        self._free_list = id(resources)
