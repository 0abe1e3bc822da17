"""``std::sort`` exactly as libstdc++ performs it, so equal-score candidates end up where Fluxion puts them.

Fluxion orders candidate resources with ``std::sort``, which is not stable: among candidates of equal score the
order it leaves depends on the algorithm (introsort: median-of-three quicksort down to runs of 16, then one
insertion sort). Reproducing the algorithm step by step is the only way to pick the same vertex on ties.
:func:`sort` takes the fast path (Python's sort) when no two keys are equal, where every correct sort agrees.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import numpy as np
import numpy.typing as npt

T = TypeVar("T")

_THRESHOLD = 16


def sort(items: list[T], key: Callable[[T], int], descending: bool) -> None:
    """Sort ``items`` in place by ``key`` (greater first when ``descending``), ties as libstdc++ leaves them."""
    n = len(items)
    if n < 2:
        return
    keys = [key(item) for item in items]
    if len(set(keys)) == n:  # without ties every correct sort agrees (Python's takes one pass over a sorted list)
        items.sort(key=key, reverse=descending)
        return
    signed = [-k for k in keys] if descending else keys
    order = list(range(n))
    _introsort(order, signed)
    items[:] = [items[i] for i in order]


def _introsort(a: list[int], k: list[int]) -> None:
    n = len(a)
    if n > 1:
        _introsort_loop(a, k, 0, n, 2 * (n.bit_length() - 1))
        _final_insertion_sort(a, k, 0, n)


def _introsort_loop(a: list[int], k: list[int], first: int, last: int, depth: int) -> None:
    while last - first > _THRESHOLD:
        if depth == 0:
            _heap_sort(a, k, first, last)
            return
        depth -= 1
        cut = _partition_pivot(a, k, first, last)
        _introsort_loop(a, k, cut, last, depth)
        last = cut


def _partition_pivot(a: list[int], k: list[int], first: int, last: int) -> int:
    mid = first + (last - first) // 2
    _move_median_to_first(a, k, first, first + 1, mid, last - 1)
    return _unguarded_partition(a, k, first + 1, last, first)


def _move_median_to_first(a: list[int], k: list[int], result: int, x: int, y: int, z: int) -> None:
    kx, ky, kz = k[a[x]], k[a[y]], k[a[z]]
    # libstdc++'s comparisons, in its order: ties pick the same element as std::__move_median_to_first
    median = (y if ky < kz else z if kx < kz else x) if kx < ky else (x if kx < kz else z if ky < kz else y)
    a[result], a[median] = a[median], a[result]


def _unguarded_partition(a: list[int], k: list[int], first: int, last: int, pivot: int) -> int:
    pk = k[a[pivot]]
    while True:
        while k[a[first]] < pk:
            first += 1
        last -= 1
        while pk < k[a[last]]:
            last -= 1
        if not first < last:
            return first
        a[first], a[last] = a[last], a[first]
        first += 1


def _final_insertion_sort(a: list[int], k: list[int], first: int, last: int) -> None:
    if last - first > _THRESHOLD:
        _insertion_sort(a, k, first, first + _THRESHOLD)
        for i in range(first + _THRESHOLD, last):
            _unguarded_linear_insert(a, k, i)
    else:
        _insertion_sort(a, k, first, last)


def _insertion_sort(a: list[int], k: list[int], first: int, last: int) -> None:
    for i in range(first + 1, last):
        value = a[i]
        if k[value] < k[a[first]]:
            a[first + 1 : i + 1] = a[first:i]
            a[first] = value
        else:
            _unguarded_linear_insert(a, k, i)


def _unguarded_linear_insert(a: list[int], k: list[int], last: int) -> None:
    value = a[last]
    kv = k[value]
    nxt = last - 1
    while kv < k[a[nxt]]:
        a[last] = a[nxt]
        last = nxt
        nxt -= 1
    a[last] = value


def _heap_sort(a: list[int], k: list[int], first: int, last: int) -> None:
    length = last - first
    parent = (length - 2) // 2
    while True:
        _adjust_heap(a, k, first, parent, length, a[first + parent])
        if parent == 0:
            break
        parent -= 1
    while last - first > 1:
        last -= 1
        value = a[last]
        a[last] = a[first]
        _adjust_heap(a, k, first, 0, last - first, value)


def _adjust_heap(a: list[int], k: list[int], first: int, hole: int, length: int, value: int) -> None:
    top = hole
    child = hole
    while child < (length - 1) // 2:
        child = 2 * (child + 1)
        if k[a[first + child]] < k[a[first + child - 1]]:
            child -= 1
        a[first + hole] = a[first + child]
        hole = child
    if length & 1 == 0 and child == (length - 2) // 2:
        child = 2 * (child + 1)
        a[first + hole] = a[first + child - 1]
        hole = child - 1
    parent = (hole - 1) // 2
    while hole > top and k[a[first + parent]] < k[value]:
        a[first + hole] = a[first + parent]
        hole = parent
        parent = (hole - 1) // 2
    a[first + hole] = value


def first_positions(keys: npt.NDArray[np.int64], m: int) -> npt.NDArray[np.intp] | None:
    """The original indices that ``std::sort`` (ascending ``keys``) leaves in positions ``0 .. m-1``, in order.

    The same introsort as :func:`sort`, but each partition is done with whole-array operations and only the
    partitions that reach the first ``m`` positions are sorted further, so picking the best few of 10^5 tied
    candidates costs a few array passes. A Hoare partition is vectorised exactly: its i-th swap pairs the i-th
    element from the left not below the pivot with the i-th from the right not above it, until they cross.
    Returns None in the rare case introsort would fall back to heap sort (the caller then sorts in full).
    """
    n = len(keys)
    k = keys.copy()
    index = np.arange(n)
    bounds = [n]
    stack = [(0, n, 2 * (n.bit_length() - 1))]
    while stack:
        first, last, depth = stack.pop()
        while last - first > _THRESHOLD:
            if depth == 0:
                return None
            depth -= 1
            cut = _vector_partition_pivot(k, index, first, last)
            bounds.append(cut)
            if cut < m:
                stack.append((cut, last, depth))
            last = cut
    end = min(b for b in bounds if b >= m) if m < n else n
    order = np.argsort(k[:end], kind="stable")
    return index[:end][order][:m]


def _vector_partition_pivot(k: npt.NDArray[np.int64], index: npt.NDArray[np.intp], first: int, last: int) -> int:
    mid = first + (last - first) // 2
    kx, ky, kz = k[first + 1], k[mid], k[last - 1]
    if kx < ky:
        chosen = mid if ky < kz else (last - 1 if kx < kz else first + 1)
    elif kx < kz:
        chosen = first + 1
    elif ky < kz:
        chosen = last - 1
    else:
        chosen = mid
    k[first], k[chosen] = k[chosen], k[first]
    index[first], index[chosen] = index[chosen], index[first]
    pivot = k[first]
    lo = first + 1
    segment = k[lo:last]
    left = np.flatnonzero(segment >= pivot) + lo
    right = np.flatnonzero(segment <= pivot)[::-1] + lo
    right = np.append(right, first)  # the pivot itself stops the unguarded right scan
    pairs = min(len(left), len(right))
    crossed = np.flatnonzero(left[:pairs] >= right[:pairs])
    swaps = int(crossed[0]) if len(crossed) else pairs
    if swaps < len(left):
        cut = int(left[swaps]) if swaps == 0 else min(int(left[swaps]), int(right[swaps - 1]))
    else:
        cut = int(right[swaps - 1])
    if swaps:
        lpos, rpos = left[:swaps], right[:swaps]
        k[lpos], k[rpos] = k[rpos], k[lpos].copy()
        index[lpos], index[rpos] = index[rpos], index[lpos].copy()
    return cut
