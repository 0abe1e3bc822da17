"""The base of value classes that write their own ``__init__`` and cross processes (a sweep's results, a pickled
decision): pickle rebuilds them from their fields.

Compiled (mypyc), a class with its own ``__init__`` is not rebuilt field by field as a plain dataclass is, so it
needs a ``__reduce__``: this one calls the class with its fields in declaration order, which its ``__init__``
takes in that order (``tests/match/test_picklable.py`` checks every written ``__init__`` against its fields).
"""

from __future__ import annotations

import dataclasses
from typing import Any


class Picklable:
    """Subclass it from a ``@dataclass(slots=True, init=False)`` whose ``__init__`` takes every field in order."""

    __slots__ = ()

    def __reduce__(self) -> tuple[Any, ...]:
        cls: Any = type(self)
        return (cls, tuple([getattr(self, f.name) for f in dataclasses.fields(cls)]))
