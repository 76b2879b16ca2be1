"""Group-relative advantages on hand-made reward tables."""

from __future__ import annotations

import math

import numpy as np
import pytest

from algorithms.dapo.advantages import group_advantages


def test_known_values_population_std():
    rewards = np.array([[1.0, 0.0, 0.0, 0.0], [1.0, -1.0, 1.0, -1.0]])
    adv = group_advantages(rewards, eps=0.0)
    # group 1: mean 1/4, population std sqrt(3)/4; group 2: mean 0, std 1
    s3 = math.sqrt(3.0)
    np.testing.assert_allclose(adv, [[s3, -1 / s3, -1 / s3, -1 / s3], [1.0, -1.0, 1.0, -1.0]], rtol=1e-15)
    np.testing.assert_allclose(adv.std(axis=1), 1.0)


def test_eps_is_added_to_the_std():
    adv = group_advantages(np.array([[2.0, 0.0]]), eps=0.5)
    np.testing.assert_allclose(adv, [[1.0 / 1.5, -1.0 / 1.5]])


def test_sample_std_matches_verl_convention():
    adv = group_advantages(np.array([[1.0, 0.0, 0.0, 0.0]]), eps=0.0, ddof=1)
    np.testing.assert_allclose(adv, [[1.5, -0.5, -0.5, -0.5]])  # sample std 1/2


def test_without_std_normalisation_rewards_are_centred():
    adv = group_advantages(np.array([[3.0, 1.0, 2.0]]), std_normalize=False)
    np.testing.assert_array_equal(adv, [[1.0, -1.0, 0.0]])


@pytest.mark.parametrize("value", [0.1, 1.0, -1.0, 0.0, 1e-7, 1 / 3])
@pytest.mark.parametrize("std_normalize", [True, False])
def test_all_equal_groups_get_exact_zeros(value, std_normalize):
    rewards = np.full((2, 7), value)
    assert (group_advantages(rewards, std_normalize=std_normalize) == 0).all()
    assert (group_advantages(rewards, eps=0.0) == 0).all()


def test_single_trajectory_group_with_sample_std_is_zero():
    assert (group_advantages(np.array([[5.0], [1.0]]), ddof=1) == 0).all()
    assert (group_advantages([[5.0]], ddof=1) == 0).all()  # nested lists are a [P, G] array too


def test_invalid_inputs_raise():
    with pytest.raises(ValueError, match="finite"):
        group_advantages(np.array([[1.0, np.nan]]))
    with pytest.raises(ValueError, match=r"\[P, G\]"):
        group_advantages(np.array([1.0, 0.0]))
    with pytest.raises(ValueError, match="eps"):
        group_advantages(np.zeros((1, 2)), eps=-1.0)
    with pytest.raises(ValueError, match="ddof"):
        group_advantages(np.zeros((1, 2)), ddof=2)
