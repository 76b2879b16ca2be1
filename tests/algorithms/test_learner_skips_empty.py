"""A mini-batch without response tokens (all masked by overlong filtering) must not move the weights."""

from __future__ import annotations

import torch

from algorithms.dapo import DAPOConfig, apply_algorithm, apply_scale
from algorithms.trajectory import Trajectory
from envs.base import AnyText


def test_fully_masked_minibatch_is_skipped():
    config = apply_scale(apply_algorithm(DAPOConfig().environment("freshrl/FrozenLake-v0"), "dapo"), "tiny")
    config = config.training(overlong_filtering=True, weight_decay=0.1, num_epochs=1, minibatch_size=2)
    text = AnyText()
    learner = config.build_learner(spaces={"default_policy": (text, text)})
    learner.build()
    module = learner.module["default_policy"]
    before = {k: v.clone() for k, v in module.model.state_dict().items()}
    truncated = Trajectory(
        token_ids=[1, 2, 3, 4, 5],
        loss_mask=[0, 0, 1, 1, 1],
        behaviour_logprobs=[0.0, 0.0, -1.0, -1.0, -1.0],
        response_spans=[(2, 5)],
        turn_rewards=[1.0],
        finish_reasons=["length"],
        response_budget=3,
        env_seed=0,
        group_id=0,
        collection_step=0,
        policy_version=0,
        advantage=1.0,
    )
    results = learner.update_from_trajectories([truncated, truncated])
    assert learner.optimizer_steps == 0
    for name, tensor in module.model.state_dict().items():
        assert torch.equal(tensor, before[name]), name
    assert results["train/skipped_empty_steps"].peek() == 1 and "train/tokens" not in results
