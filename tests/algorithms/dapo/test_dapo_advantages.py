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


@pytest.mark.parametrize("std_normalize", [True, False])
def test_the_algorithm_scores_groups_with_the_configured_advantages(std_normalize):
    """DAPOConfig.advantage_std_normalize reaches the groups DAPO trains on: (R - mean) / (std + eps), or Dr.
    GRPO's R - mean."""
    from types import SimpleNamespace

    from algorithms.dapo import DAPOConfig
    from algorithms.dapo.advantage_estimators import ADVANTAGE_ESTIMATOR_REGISTRY
    from algorithms.dapo.dapo import DAPO
    from algorithms.trajectory import Trajectory

    config = DAPOConfig().training(advantage_std_normalize=std_normalize, overlong_punishment=False)
    group = [
        Trajectory([5, 6], [0, 1], [0.0, 0.0], [(1, 2)], [reward], ["stop"], 0, 0, 0, 0)
        for reward in (1.0, 0.0, 0.0, 0.0)
    ]
    stub = SimpleNamespace(
        config=config,
        _in_flight=None,
        _next_seeds=range,
        _rollout=lambda seeds: [group],
        _drop_stale=list,
        _advantage_estimator=ADVANTAGE_ESTIMATOR_REGISTRY.get(config.advantage_estimator)(config),  # as setup
    )
    (scored,) = DAPO._generate_groups(stub, 1)
    centred = np.array([0.75, -0.25, -0.25, -0.25])
    expected = centred / (np.sqrt(0.1875) + config.advantage_eps) if std_normalize else centred
    assert np.allclose([t.advantage for t in scored], expected)


def test_advantage_std_normalize_is_validated():
    from algorithms.dapo import DAPOConfig

    config = DAPOConfig().environment("freshrl/FrozenLake-v0").training(advantage_std_normalize="no")
    with pytest.raises(ValueError, match="advantage_std_normalize must be True or False"):
        config.validate()
