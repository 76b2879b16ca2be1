"""8-ary sum and min trees in flat float64 arrays, with batched numba kernels.

A tree over ``capacity`` slots is stored level by level in one array: level ``d`` (the leaves) holds one
value per slot, and each level above holds one value per group of ``FANOUT`` = 8 consecutive entries of the
level below, which is their sum (a sum tree) or minimum (a min tree). ``offsets`` (from :func:`tree_offsets`)
gives where each level starts: level ``l`` is ``tree[offsets[l] : offsets[l + 1]]``, the root is
``tree[0]``, and the children of entry ``i`` of level ``l`` are entries ``8i .. 8i + 7`` of level ``l + 1``.
Every level starts on a multiple of 8 entries and the array on a 64-byte boundary, so a node's 8 children are
one cache line.

Why 8-ary: sampling at N = 1e6 is bound by cache misses on the way down. A binary tree has 20 levels and
misses on roughly the lowest 10; an 8-ary tree has 7 levels, each one cache line. Why level by level over the
batch: the B accesses of a level are independent, so the CPU overlaps their misses.

Every parent always equals the aggregate of its current children, summed in child order, so a tree is a pure
function of its leaves: :func:`build_sum` / :func:`build_min` reproduce bit for bit what any sequence of
updates gave. Padding entries hold 0 (sum) or +inf (min). Setting B leaves costs O(B log N), finding B
prefix-sum positions O(B log N), building O(N).
"""

from __future__ import annotations

import numba
import numpy as np

FANOUT = 8
_CACHE_LINE_BYTES = 64


def tree_offsets(capacity: int) -> np.ndarray:
    """Start of each level, root (level 0) to leaves, plus the total length at the end."""
    if capacity < 1:
        raise ValueError(f"capacity must be >= 1, got {capacity}")
    sizes = []
    n = capacity
    while True:
        sizes.append(-(-n // FANOUT) * FANOUT)  # padded to whole groups of children
        if n <= FANOUT:
            break
        n = -(-n // FANOUT)
    sizes.append(FANOUT)  # the root, padded so that level 1 starts on a group boundary
    offsets = np.zeros(len(sizes) + 1, dtype=np.int64)
    offsets[1:] = np.cumsum(sizes[::-1])
    return offsets


def new_trees(offsets: np.ndarray, fills: tuple[float, ...]) -> np.ndarray:
    """``len(fills)`` trees for ``offsets`` as the rows of one 64-byte aligned array, row ``r`` filled with
    ``fills[r]`` (0 for a sum tree, +inf for a min tree)."""
    rows, n = len(fills), int(offsets[-1])
    raw = np.empty(rows * n + _CACHE_LINE_BYTES // 8, dtype=np.float64)
    start = (-raw.ctypes.data % _CACHE_LINE_BYTES) // 8
    trees = raw[start : start + rows * n].reshape(rows, n)
    for r, fill in enumerate(fills):
        trees[r] = fill
    return trees


@numba.njit(cache=True, nogil=True, inline="always")
def _sum8(tree: np.ndarray, start: int) -> float:
    acc = tree[start]
    for c in range(1, FANOUT):
        acc += tree[start + c]
    return acc


@numba.njit(cache=True, nogil=True, inline="always")
def _min8(tree: np.ndarray, start: int) -> float:
    acc = tree[start]
    for c in range(1, FANOUT):
        acc = min(acc, tree[start + c])
    return acc


@numba.njit(cache=True, nogil=True)
def propagate_sum(tree: np.ndarray, offsets: np.ndarray, slots: np.ndarray) -> None:
    """Recompute every ancestor of leaves ``slots`` (already written) in a sum tree, level by level."""
    idx = slots.copy()
    for level in range(offsets.shape[0] - 3, -1, -1):
        child_level = offsets[level + 1]
        for j in range(idx.shape[0]):
            idx[j] //= FANOUT
            tree[offsets[level] + idx[j]] = _sum8(tree, child_level + FANOUT * idx[j])


@numba.njit(cache=True, nogil=True)
def propagate_min(tree: np.ndarray, offsets: np.ndarray, slots: np.ndarray) -> None:
    """Recompute every ancestor of leaves ``slots`` (already written) in a min tree, level by level."""
    idx = slots.copy()
    for level in range(offsets.shape[0] - 3, -1, -1):
        child_level = offsets[level + 1]
        for j in range(idx.shape[0]):
            idx[j] //= FANOUT
            tree[offsets[level] + idx[j]] = _min8(tree, child_level + FANOUT * idx[j])


@numba.njit(cache=True, nogil=True, inline="always")
def _n_parents(offsets: np.ndarray, level: int) -> int:
    """Entries of ``level`` that have children (the rest is padding and keeps its fill value)."""
    return -(-(offsets[level + 2] - offsets[level + 1]) // FANOUT)


@numba.njit(cache=True, nogil=True)
def build_sum(tree: np.ndarray, offsets: np.ndarray) -> None:
    """Recompute every level above the leaves of a sum tree, in O(N)."""
    for level in range(offsets.shape[0] - 3, -1, -1):
        for i in range(_n_parents(offsets, level)):
            tree[offsets[level] + i] = _sum8(tree, offsets[level + 1] + FANOUT * i)


@numba.njit(cache=True, nogil=True)
def build_min(tree: np.ndarray, offsets: np.ndarray) -> None:
    """Recompute every level above the leaves of a min tree, in O(N)."""
    for level in range(offsets.shape[0] - 3, -1, -1):
        for i in range(_n_parents(offsets, level)):
            tree[offsets[level] + i] = _min8(tree, offsets[level + 1] + FANOUT * i)


@numba.njit(cache=True, nogil=True)
def find_prefix_sums(tree: np.ndarray, offsets: np.ndarray, targets: np.ndarray) -> np.ndarray:
    """Slot ``i`` with ``sum(leaves[:i]) <= target < sum(leaves[:i + 1])`` for each target in
    ``[0, tree[0])`` (``tree[0] > 0``).

    Branch-free within a node: the child is the number of running sums the target reaches. The running sums
    repeat the parent's own summation order, so a target below the parent lands in a child with a positive
    sum; if rounding in ``target - running sum`` pushes it past the last one, the walk takes the last child
    with a positive sum. A leaf with value 0 is never returned.
    """
    n = targets.shape[0]
    idx = np.zeros(n, dtype=np.int64)
    u = targets.copy()
    for level in range(1, offsets.shape[0] - 1):
        for j in range(n):
            start = offsets[level] + FANOUT * idx[j]
            acc = 0.0
            below = 0.0  # running sum before the chosen child
            count = 0
            last_positive = 0
            for c in range(FANOUT):
                s = tree[start + c]
                acc += s
                reached = u[j] >= acc
                count += reached
                below += s if reached else 0.0
                last_positive = c if s > 0.0 else last_positive
            if count < FANOUT:
                idx[j] = FANOUT * idx[j] + count
                u[j] -= below
            else:
                idx[j] = FANOUT * idx[j] + last_positive
                # At (or past) that child's total: the walk keeps taking the last positive child.
                u[j] = tree[start + last_positive]
    return idx
