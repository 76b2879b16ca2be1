"""The learner's learning-rate warm-up (counted in rollout iterations) and its DDP shards (every learner runs
a backward for every step, also when a minibatch has fewer trajectories than learners)."""

from __future__ import annotations

import pytest
import torch

from algorithms.dapo import DAPOConfig, apply_algorithm, apply_scale
from algorithms.dapo.learner import learner_shard
from algorithms.trajectory import Trajectory
from envs.base import AnyText

LR, WARMUP = 1e-3, 3


def trajectory(advantage: float) -> Trajectory:
    return Trajectory(
        token_ids=[1, 2, 3, 4, 5],
        loss_mask=[0, 0, 1, 1, 1],
        behaviour_logprobs=[0.0, 0.0, -1.0, -1.0, -1.0],
        response_spans=[(2, 5)],
        turn_rewards=[1.0],
        finish_reasons=["stop"],
        env_seed=0,
        group_id=0,
        collection_step=0,
        policy_version=0,
        response_budget=8,
        advantage=advantage,
    )


@pytest.fixture(scope="module")
def learner():
    config = apply_scale(apply_algorithm(DAPOConfig().environment("freshrl/FrozenLake-v0"), "dapo"), "tiny")
    config = config.training(lr=LR, warmup_steps=WARMUP, num_epochs=1, minibatch_size=2)
    text = AnyText()
    learner = config.build_learner(spaces={"default_policy": (text, text)})
    learner.build()
    return learner


def lr_of(learner) -> float:
    (group,) = learner.get_optimizer("default_policy").param_groups
    return group["lr"]


def test_warmup_counts_iterations_not_optimizer_steps(learner):
    """2 optimizer steps per pass (2 minibatches), a fresh and a replay pass per iteration:
    within iteration i every step uses lr * (i + 1) / W, and replay steps do not advance it."""
    batch = [trajectory(a) for a in (1.0, -1.0, 0.5, -0.5)]
    for iteration in range(WARMUP + 1):
        want = LR * min(1.0, (iteration + 1) / WARMUP)
        steps = learner.optimizer_steps
        fresh = learner.update_from_trajectories(batch, tag="fresh", iteration=iteration)
        assert lr_of(learner) == pytest.approx(want, rel=1e-12)
        replay = learner.update_from_trajectories(batch, [0.5] * 4, tag="replay", iteration=iteration)
        assert lr_of(learner) == pytest.approx(want, rel=1e-12)
        assert learner.optimizer_steps == steps + 4
        for results in (fresh, replay):
            assert results["train/lr"].peek() == pytest.approx(want, rel=1e-12)


def test_shards_cover_the_minibatch_once():
    for rows in range(0, 9):
        for world in (1, 2, 3, 4):
            shards = [learner_shard(rows, index, world) for index in range(world)]
            real = sorted(i for shard, stand_in in shards if not stand_in for i in shard)
            assert real == list(range(rows))
            # Every learner has rows to run a backward on, whenever the step has any.
            assert all(shard for shard, _ in shards) or rows == 0
            assert all(stand_in == (index >= rows > 0) for index, (_, stand_in) in enumerate(shards))
    assert learner_shard(1, 1, 2) == ([0], True)
    assert learner_shard(5, 1, 2) == ([1, 3], False)


def test_learner_without_trajectories_of_its_own_still_runs_a_backward(learner, step_gradients):
    """The second of two learners, on a one-trajectory minibatch, runs the stand-in row
    (loss x 0): its parameters get a (zero) gradient, which is what keeps the DDP all-reduce from hanging, and
    it adds no tokens to the metrics. Simulated in one process: no DDP here, so the all-reduce itself is not
    exercised."""
    two = learner.config.copy(copy_frozen=False)
    two.num_learners = 2
    original, learner.config = learner.config, two
    learner._learner_index = 1
    steps = step_gradients(learner)
    try:
        results = learner.update_from_trajectories([trajectory(1.0)])
    finally:
        learner.config, learner._learner_index = original, 0
    (grads,) = steps
    trainable = [n for n, p in learner.module["default_policy"].model.named_parameters() if p.requires_grad]
    assert all(grads[n] is not None and torch.count_nonzero(grads[n]) == 0 for n in trainable)
    assert "train/tokens" not in results or results["train/tokens"].peek() == 0
    assert results["train/optimizer_steps_fresh"].peek() == 1  # it stepped, as learner 0 does
