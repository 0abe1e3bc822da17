"""Python lists into NumPy arrays, the fast way (measured on LCG's 188,041 jobs and 290,174 series points).

A list of (time, value) tuples given to ``np.array`` is converted element by element (0.55 s for 376k pairs);
:func:`columns` streams the tuples' numbers into one array instead (``itertools.chain``, ``np.fromiter``: 0.07 s
for LCG's utilization series against 0.13 s as one list per column). :func:`floats` lets NumPy turn ``None``
into NaN itself (float64 conversion does), 2x faster than replacing them in a list first.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import chain

import numpy as np
from numpy.typing import NDArray

Floats = NDArray[np.float64]


def floats(values: Sequence[float | int | None]) -> Floats:
    """A float64 array of ``values``, ``None`` as NaN."""
    return np.array(values, dtype=np.float64)


def columns(points: Sequence[tuple[float, ...]], width: int) -> list[Floats]:
    """The ``width`` columns of a list of tuples (a series' (time, value, …) points) as float64 arrays."""
    table = np.fromiter(chain.from_iterable(points), dtype=np.float64, count=len(points) * width)
    return list(table.reshape(len(points), width).T)


__all__ = ["Floats", "columns", "floats"]
