"""The numba 8-ary tree kernels against numpy, and the two forms of each decay formula."""

from __future__ import annotations

import numpy as np
import pytest

from algorithms.replay import ExponentialDecay, NoDecay, PolynomialDecay
from algorithms.replay.decay import log_weight_scalar
from algorithms.replay.priority_tree import (
    FANOUT,
    build_min,
    build_sum,
    find_prefix_sums,
    new_trees,
    propagate_min,
    propagate_sum,
    tree_offsets,
)


@pytest.mark.parametrize("capacity", [1, 7, 8, 9, 64, 65, 1000])
def test_layout_levels_hold_every_slot_and_align(capacity):
    offsets = tree_offsets(capacity)
    sizes = np.diff(offsets)
    assert offsets[0] == 0 and np.all(offsets % FANOUT == 0)
    assert sizes[-1] >= capacity  # the leaf level
    for parent, child in zip(sizes[:-1], sizes[1:], strict=True):
        assert parent * FANOUT >= child
    trees = new_trees(offsets, (0.0, np.inf))
    assert trees.shape == (2, offsets[-1]) and trees.ctypes.data % 64 == 0
    assert np.all(trees[0] == 0) and np.all(np.isinf(trees[1]))


@pytest.mark.parametrize("capacity", [5, 37, 300])
def test_batched_updates_equal_a_rebuild_and_numpy(capacity):
    rng = np.random.default_rng(0)
    offsets = tree_offsets(capacity)
    leaves = offsets[-2]
    sums, mins = new_trees(offsets, (0.0, np.inf))
    ref_sum, ref_min = np.zeros(capacity), np.full(capacity, np.inf)
    for _ in range(50):
        slots = rng.integers(0, capacity, size=9).astype(np.int64)  # repeats included
        vals = rng.exponential(size=9) * (rng.random(9) > 0.3)
        for k, v in zip(slots, vals, strict=True):  # sequential semantics: last write wins
            sums[leaves + k], mins[leaves + k] = v, -v
            ref_sum[k], ref_min[k] = v, -v
        # As the buffer's kernels (kernels.py) do after writing leaves: the ancestors of every written slot.
        propagate_sum(sums, offsets, slots)
        propagate_min(mins, offsets, slots)
    rebuilt_sum, rebuilt_min = new_trees(offsets, (0.0, np.inf))
    rebuilt_sum[leaves : leaves + capacity] = ref_sum
    rebuilt_min[leaves : leaves + capacity] = ref_min
    build_sum(rebuilt_sum, offsets)
    build_min(rebuilt_min, offsets)
    np.testing.assert_array_equal(sums, rebuilt_sum)
    np.testing.assert_array_equal(mins, rebuilt_min)
    assert abs(sums[0] - ref_sum.sum()) < 1e-12 and mins[0] == ref_min.min()


@pytest.mark.parametrize("capacity", [1, 8, 100, 5000])
def test_prefix_search_matches_searchsorted_and_skips_zero_leaves(capacity):
    rng = np.random.default_rng(1)
    offsets = tree_offsets(capacity)
    keys = rng.exponential(size=capacity) * (rng.random(capacity) > 0.4)
    keys[rng.integers(capacity)] = 1.0  # at least one positive key
    (tree,) = new_trees(offsets, (0.0,))
    tree[offsets[-2] : offsets[-2] + capacity] = keys
    build_sum(tree, offsets)
    targets = rng.random(20_000) * tree[0]
    found = find_prefix_sums(tree, offsets, targets)
    expected = np.searchsorted(np.cumsum(keys), targets, side="right")
    assert np.mean(found == expected) > 0.999  # differs only where rounding straddles a boundary
    assert np.all(keys[found] > 0)
    edge = find_prefix_sums(tree, offsets, np.array([0.0, np.nextafter(tree[0], 0.0), tree[0]]))
    positive = np.flatnonzero(keys)
    assert edge.tolist() == [positive[0], positive[-1], positive[-1]]


@pytest.mark.parametrize("decay", [ExponentialDecay(3.0), PolynomialDecay(3.0, 1.7), NoDecay()])
def test_numpy_and_compiled_log_weights_agree_with_the_decay_factor(decay):
    steps = np.array([0.0, 1.0, 2.5, 10.0, 99.0])
    t = 100.0
    vectorised = decay.log_weight(steps, t)
    scalar = np.array([log_weight_scalar(*decay.kernel_params, s, t) for s in steps])
    np.testing.assert_allclose(scalar, vectorised, rtol=1e-14, atol=1e-15)
    # Up to a constant common to all items, the log weight is log d(age).
    log_factor = np.log(decay.factor(t - steps))
    np.testing.assert_allclose(vectorised - vectorised[0], log_factor - log_factor[0], rtol=1e-12, atol=1e-12)
