"""Python lists into NumPy arrays, the fast way (measured on LCG's 188,041 jobs and 376,082 series points).

``np.array`` is slow on what records hold: a list with ``None`` in it takes the object path (4× a plain list of
floats), and a list of (time, value) tuples is converted element by element (0.55 s for 376k pairs, against
0.06 s as two columns). :func:`floats` and :func:`columns` take the fast paths.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

Floats = NDArray[np.float64]


def floats(values: Sequence[float | int | None]) -> Floats:
    """A float64 array of ``values``, ``None`` as NaN."""
    return np.array([math.nan if value is None else value for value in values], dtype=np.float64)


def columns(points: Sequence[tuple[float, ...]], width: int) -> list[Floats]:
    """The ``width`` columns of a list of tuples (a series' (time, value, …) points) as float64 arrays."""
    return [np.array([point[index] for point in points], dtype=np.float64) for index in range(width)]


__all__ = ["Floats", "columns", "floats"]
