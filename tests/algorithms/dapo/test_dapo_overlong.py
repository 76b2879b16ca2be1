"""Soft overlong punishment (DAPO Eq. 13) in its three regions and at the boundaries; overlong filtering; what
|y| and L_max are for a multi-turn episode in each scope."""

from __future__ import annotations

import numpy as np
import pytest

from algorithms.dapo import DAPOConfig
from algorithms.dapo.advantage_estimators import ADVANTAGE_ESTIMATOR_REGISTRY
from algorithms.dapo.groups import shape_and_score_group
from algorithms.dapo.overlong import is_overlong, overlong_filter_mask, overlong_length, soft_overlong_penalty
from algorithms.trajectory import Trajectory


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


def test_shape_and_scalar():
    got = soft_overlong_penalty(np.array([[10, 18], [20, 30]]), 20, 4)
    np.testing.assert_array_equal(got, [[0.0, -0.5], [-1.0, -1.0]])
    scalar = soft_overlong_penalty(17, 20, 4)
    assert scalar.shape == () and scalar == -0.25


@pytest.mark.parametrize(("max_len", "cache_len"), [(20, 0), (20, 21), (20, -1), (0, 0)])
def test_invalid_cache_or_budget_raises(max_len, cache_len):
    with pytest.raises(ValueError, match="max_len|cache_len"):
        soft_overlong_penalty([1], max_len, cache_len)


def test_invalid_lengths_raise():
    with pytest.raises(ValueError, match="lengths"):
        soft_overlong_penalty([-1], 20, 4)


def test_overlong_filter_mask():
    np.testing.assert_array_equal(overlong_filter_mask([True, False, True]), [0.0, 1.0, 0.0])
    np.testing.assert_array_equal(overlong_filter_mask(np.array([[0, 1], [1, 1]])), [[1.0, 0.0], [0.0, 0.0]])
    with pytest.raises(ValueError, match="truncated"):
        overlong_filter_mask([2])


def three_turns(budget: int | None) -> Trajectory:
    """Three responses of 10 tokens, each cut at a per-turn limit of 10, between observation tokens."""
    ids, mask, spans = [7, 7], [0, 0], []
    for _ in range(3):
        spans.append((len(ids), len(ids) + 10))
        ids, mask = ids + [5] * 10 + [7, 7], mask + [1] * 10 + [0, 0]
    return Trajectory(
        token_ids=ids,
        loss_mask=mask,
        behaviour_logprobs=[-1.0 if m else 0.0 for m in mask],
        response_spans=spans,
        turn_rewards=[0.0, 0.0, 1.0],
        finish_reasons=["length"] * 3,
        env_seed=0,
        group_id=0,
        collection_step=0,
        policy_version=0,
        success=True,
        response_budget=budget,
    )


def test_trajectory_scope_reads_the_whole_episode_against_its_budget():
    """By default |y| is the episode's 30 response tokens and L_max its budget (here 40:
    inside the cache of 16: penalised (24 - 30) / 16, not filtered); per turn, every 10-token turn hit its
    limit (penalty -1, filtered)."""
    trajectory = three_turns(budget=40)
    assert overlong_length(trajectory, "trajectory", 10) == (30, 40)
    assert not is_overlong(trajectory, "trajectory")
    assert overlong_length(trajectory, "turn", 10) == (10, 10)
    assert is_overlong(trajectory, "turn")
    assert is_overlong(three_turns(budget=30), "trajectory")  # the budget used up
    # A last response that ended by itself (EOS) on the budget's last token was not cut: not overlong.
    ended = three_turns(budget=30)
    ended.finish_reasons[-1] = "stop"
    assert not is_overlong(ended, "trajectory")
    with pytest.raises(ValueError, match="response_budget"):
        is_overlong(three_turns(budget=None), "trajectory")
    with pytest.raises(ValueError, match="scope"):
        overlong_length(trajectory, "episode", 10)


def test_default_shaping_penalises_the_total_length():
    config = DAPOConfig()
    assert config.overlong_scope == "trajectory"
    group = [three_turns(budget=40), three_turns(budget=40)]
    group[1].success, group[1].turn_rewards = False, [0.0, 0.0, 0.0]
    for scope, want in (("trajectory", [1.0 - 6 / 16, -6 / 16]), ("turn", [0.0, -1.0])):
        shape_and_score_group(
            group,
            overlong_punishment=True,
            overlong_scope=scope,
            max_response_tokens=10,
            overlong_cache_len=16 if scope == "trajectory" else 4,
            estimator=ADVANTAGE_ESTIMATOR_REGISTRY.get(config.advantage_estimator)(config),
        )
        np.testing.assert_allclose([t.reward for t in group], want)


def test_overlong_scope_and_budget_are_validated():
    base = DAPOConfig().environment("freshrl/FrozenLake-v0")
    with pytest.raises(ValueError, match="overlong_scope"):
        base.copy(copy_frozen=False).training(overlong_scope="episode").validate()
    with pytest.raises(ValueError, match="max_trajectory_response_tokens"):
        base.copy(copy_frozen=False).training(max_trajectory_response_tokens=0).validate()
    with pytest.raises(ValueError, match="overlong_cache_len"):
        base.copy(copy_frozen=False).training(max_trajectory_response_tokens=100).validate()
