"""What the select walk visits a vertex's children for: one value per request level, shared by the siblings.

A :class:`Visit` carries what is the same for every child a vertex explores: the job's window and kind (its
:class:`~kubeflux.match.meta.JobMeta`, whose ``alloc_type`` tells a satisfiability test from a match), the match's
policy, the request the children must meet, whether the walk is still above every request (pristine) and whether the
children are held exclusively. A vertex whose request is its parent's passes its own visit on (:meth:`Visit.below`):
a walk makes one per vertex whose request differs from its parent's, not one per child.

The update walk has no visit: it follows marks, and reads no request (:mod:`~kubeflux.match.record`).
"""

from __future__ import annotations

from kubeflux.match.meta import JobMeta
from kubeflux.match.policy import MatchPolicy
from kubeflux.match.request import Request


class Visit:
    """The request a vertex's children are visited for (see the module docstring)."""

    __slots__ = ("exclusive", "meta", "policy", "pristine", "resources")

    def __init__(
        self, meta: JobMeta, policy: MatchPolicy, resources: list[Request], pristine: bool, exclusive: bool
    ) -> None:
        self.meta = meta
        self.policy = policy
        self.resources = resources
        """The requests a child must meet (the parent's request's children, or the parent's own above every
        request)."""
        self.pristine = pristine
        """Whether the walk is above every request (a vertex may still match the request's top)."""
        self.exclusive = exclusive
        """Whether the children are held exclusively (a request above them asked so)."""

    def below(self, resources: list[Request], pristine: bool, exclusive: bool) -> Visit:
        """The visit of a vertex's children for ``resources``: this one when nothing changes."""
        if resources is self.resources and pristine == self.pristine and exclusive == self.exclusive:
            return self
        return Visit(self.meta, self.policy, resources, pristine, exclusive)
