"""Soft overlong punishment (DAPO Eq. 13) in its three regions and at the boundaries; overlong filtering."""

from __future__ import annotations

import numpy as np
import pytest

from algorithms.dapo.overlong import overlong_filter_mask, soft_overlong_penalty


def test_three_regions_and_boundaries():
    # L_max = 20, L_cache = 4: no penalty up to 16, linear to -1 at 20, -1 beyond.
    lengths = [0, 15, 16, 17, 18, 19, 20, 21, 1000]
    want = [0.0, 0.0, 0.0, -0.25, -0.5, -0.75, -1.0, -1.0, -1.0]
    np.testing.assert_array_equal(soft_overlong_penalty(lengths, max_len=20, cache_len=4), want)


def test_paper_setting():
    got = soft_overlong_penalty([16384, 16385, 18432, 20480, 20481], max_len=20480, cache_len=4096)
    np.testing.assert_allclose(got, [0.0, -1 / 4096, -0.5, -1.0, -1.0], rtol=1e-15)


def test_cache_as_long_as_the_budget():
    np.testing.assert_array_equal(soft_overlong_penalty([0, 1, 5, 10, 11], 10, 10), [0, -0.1, -0.5, -1, -1])


def test_shape_scalar_and_penalty_factor():
    got = soft_overlong_penalty(np.array([[10, 18], [20, 30]]), 20, 4, penalty_factor=2.0)
    np.testing.assert_array_equal(got, [[0.0, -1.0], [-2.0, -2.0]])
    scalar = soft_overlong_penalty(17, 20, 4)
    assert scalar.shape == () and scalar == -0.25


@pytest.mark.parametrize(("max_len", "cache_len"), [(20, 0), (20, 21), (20, -1), (0, 0)])
def test_invalid_cache_or_budget_raises(max_len, cache_len):
    with pytest.raises(ValueError, match="max_len|cache_len"):
        soft_overlong_penalty([1], max_len, cache_len)


def test_invalid_lengths_raise():
    with pytest.raises(ValueError, match="lengths"):
        soft_overlong_penalty([-1], 20, 4)
    with pytest.raises(ValueError, match="penalty_factor"):
        soft_overlong_penalty([1], 20, 4, penalty_factor=-1.0)


def test_overlong_filter_mask():
    np.testing.assert_array_equal(overlong_filter_mask([True, False, True]), [0.0, 1.0, 0.0])
    np.testing.assert_array_equal(overlong_filter_mask(np.array([[0, 1], [1, 1]])), [[1.0, 0.0], [0.0, 0.0]])
    with pytest.raises(ValueError, match="truncated"):
        overlong_filter_mask([2])
