"""A max-segment-tree over numbered nodes for first fit in O(log nodes): the index behind
:class:`kubeflux.sim.baselines.capacity.NodeCapacity`.

Each internal entry holds the largest free cpu (millicores), memory (bytes) and ``nvidia.com/gpu`` of its subtree.
A node the tree does not *admit* (a class of pods may not use it), or that has no room for one more pod, is a
closed leaf (-1 in every resource), so the descent never stops there. The owner keeps the free amounts and says
when a leaf changes (:meth:`FreeTree.set`, or :meth:`FreeTree.set_cpu` when only cpu changed).
"""

from __future__ import annotations

__all__ = ["CLOSED", "FreeTree"]

CLOSED = -1


class FreeTree:
    """First fit over the nodes with ``admits[i]`` true. ``admits`` is the caller's list (it may share it)."""

    __slots__ = ("admits", "size", "tc", "tg", "tm")

    def __init__(self, admits: list[bool], size: int = 1) -> None:
        self.admits = admits
        self.size = size
        self.tc: list[int] = [CLOSED] * (2 * size)
        self.tm: list[int] = [CLOSED] * (2 * size)
        self.tg: list[int] = [CLOSED] * (2 * size)

    def resize(self, size: int) -> None:
        """Empty the tree with room for ``size`` leaves; the caller sets them again."""
        self.size = size
        self.tc = [CLOSED] * (2 * size)
        self.tm = [CLOSED] * (2 * size)
        self.tg = [CLOSED] * (2 * size)

    def set(self, i: int, cpu: int, mem: int, gpu: int, room: bool) -> None:
        """Leaf ``i`` now has this much free (``room``: the node may take one more pod)."""
        tc, tm, tg = self.tc, self.tm, self.tg
        j = i + self.size
        if room and self.admits[i]:
            tc[j], tm[j], tg[j] = cpu, mem, gpu
        else:
            tc[j] = tm[j] = tg[j] = CLOSED
        j >>= 1
        while j:
            a = 2 * j
            b = a + 1
            nc = tc[a] if tc[a] > tc[b] else tc[b]
            nm = tm[a] if tm[a] > tm[b] else tm[b]
            ng = tg[a] if tg[a] > tg[b] else tg[b]
            if nc == tc[j] and nm == tm[j] and ng == tg[j]:
                break
            tc[j], tm[j], tg[j] = nc, nm, ng
            j >>= 1

    def set_cpu(self, i: int, cpu: int, room: bool) -> None:
        """:meth:`set` when only leaf ``i``'s free cpu changed (the usual pod): one tree, stopping as soon as a
        subtree's maximum is unchanged."""
        tc = self.tc
        j = i + self.size
        top = tc[j] = cpu if room and self.admits[i] else CLOSED
        while j > 1:
            other = tc[j ^ 1]
            if other > top:
                top = other
            j >>= 1
            if tc[j] == top:
                break
            tc[j] = top

    def first_fit(self, cpu: int, mem: int, gpu: int, start: int = 0) -> int:
        """The lowest-numbered admitted node ``>= start`` with at least this much free; -1 when none."""
        tc, tm, tg, size = self.tc, self.tm, self.tg, self.size
        if tc[1] < cpu or tm[1] < mem or tg[1] < gpu:
            return -1
        if mem <= 0 and gpu <= 0:  # cpu decides alone: one tree, and the descent is exact
            j = 1
            if start > 0:  # climb from leaf ``start`` to the first subtree on its right with room
                if start >= size:
                    return -1
                j = start + size
                if tc[j] >= cpu:
                    return start
                while j & 1 or tc[j + 1] < cpu:
                    j >>= 1
                    if j <= 1:
                        return -1
                j += 1
            while j < size:
                j *= 2
                if tc[j] < cpu:
                    j += 1
            return j - size
        if start == 0:
            j = 1
            while j < size:  # greedy descent: exact when one resource decides, checked below
                j *= 2
                if tc[j] < cpu or tm[j] < mem or tg[j] < gpu:
                    j += 1
            if tc[j] >= cpu and tm[j] >= mem and tg[j] >= gpu:
                return j - size
        stack = [1]
        while stack:
            j = stack.pop()
            if tc[j] < cpu or tm[j] < mem or tg[j] < gpu:
                continue
            level = j.bit_length() - 1
            span = size >> level
            if (j - (1 << level) + 1) * span <= start:
                continue  # the subtree ends before ``start``
            if j >= size:
                return j - size
            stack.append(2 * j + 1)
            stack.append(2 * j)
        return -1
