"""DAPO with advantage_estimator="gigpo": one real training iteration on FrozenLake (tiny LM, in-process
engine) that reports GiGPO's step-group metrics; an env without state keys falls back to episode
advantages, said once."""

from __future__ import annotations

import math
import warnings

import pytest

from algorithms.dapo import DAPOConfig
from algorithms.dapo.advantage_estimators import ADVANTAGE_ESTIMATOR_REGISTRY
from algorithms.dapo.gigpo import GiGPOFallbackWarning
from algorithms.trajectory import Trajectory


def test_gigpo_trains_an_iteration_and_reports_its_step_groups(small_dapo_config):
    config = small_dapo_config(
        "freshrl/FrozenLake-v0",
        advantage_estimator="gigpo",
        # The random tiny model fails every episode: keep its groups and its length-capped responses.
        dynamic_sampling=False,
        overlong_filtering=False,
    )
    algo = config.build_algo()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", GiGPOFallbackWarning)  # FrozenLake reports state keys
            result = algo.train()
    finally:
        algo.stop()
    assert result["gigpo/groups_without_state_keys"] == 0
    # Every member of a group starts from the task's start state: at least G turns share a step group.
    assert 0 < result["gigpo/shared_turn_fraction"] <= 1
    assert result["gigpo/step_group_size_mean"] >= 1
    assert math.isfinite(result["gigpo/step_advantage_std"]) and result["gigpo/step_advantage_std"] >= 0
    learner = result["learners"]
    assert learner["train/optimizer_steps_fresh"] >= 1 and math.isfinite(float(learner["train/loss"]))


def trajectory(keys: list) -> Trajectory:
    return Trajectory(
        token_ids=[1, 2],
        loss_mask=[0, 1],
        behaviour_logprobs=[0.0, 0.0],
        response_spans=[(1, 2)] * len(keys),
        turn_rewards=[0.0] * len(keys),
        finish_reasons=["stop"] * len(keys),
        env_seed=0,
        group_id=0,
        collection_step=0,
        policy_version=0,
        turn_state_keys=keys,
    )


def test_groups_without_state_keys_are_counted_and_warned_about_once():
    estimator = ADVANTAGE_ESTIMATOR_REGISTRY.get("gigpo")(DAPOConfig())  # as DAPO.setup builds it
    keyless, keyed = [trajectory([None]), trajectory([None, None])], [trajectory(["a"]), trajectory(["a"])]
    with pytest.warns(GiGPOFallbackWarning, match="1 of 2 groups have no turn with an info\\['state_key'\\]"):
        first = estimator.generation_batch_metrics([keyless, keyed])
    with warnings.catch_warnings():
        warnings.simplefilter("error", GiGPOFallbackWarning)
        second = estimator.generation_batch_metrics([keyless])  # counted, not said again
    assert first == second == {"gigpo/groups_without_state_keys": 1}
