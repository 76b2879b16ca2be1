"""Two learners through RLlib's LearnerGroup (``config.learners(num_learners=2)``: two Learner actors, torch
DDP over gloo on CPU) make the same update as one local learner: the weights after the same passes agree to
float tolerance, on both ranks, including a mini-batch of one trajectory (fewer rows than learners: the second
rank runs its zero-weight stand-in, and no collective waits for a backward that never runs); train/loss is
the whole step's on every rank, the ranks' token counts are their shards' and they step in lockstep."""

from __future__ import annotations

import pytest
import torch

from algorithms.dapo import DAPOConfig, apply_algorithm, apply_scale
from algorithms.trajectory import Trajectory
from envs.base import AnyText

SPACES = {"default_policy": (AnyText(), AnyText())}


def trajectory(group_id: int, advantage: float, prompt: list[int], response: list[int]) -> Trajectory:
    return Trajectory(
        token_ids=prompt + response,
        loss_mask=[0] * len(prompt) + [1] * len(response),
        behaviour_logprobs=[0.0] * len(prompt) + [-3.0] * len(response),
        response_spans=[(len(prompt), len(prompt) + len(response))],
        turn_rewards=[1.0],
        finish_reasons=["stop"],
        env_seed=0,
        group_id=group_id,
        collection_step=0,
        policy_version=0,
        response_budget=64,
        advantage=advantage,
    )


# Two passes: five trajectories in mini-batches of 2, 2 and 1 (the last has fewer rows than learners), two
# epochs each (shuffled, so the ratio departs from 1); the second pass with replay-style weights.
PASSES = [
    (
        [
            trajectory(0, 1.0, [5, 6, 7], [8, 9, 10, 11]),
            trajectory(0, -1.0, [5, 6, 7], [12, 13]),
            trajectory(1, 0.5, [20, 21], [22, 23, 24, 25, 26]),
            trajectory(1, -0.5, [20, 21], [27]),
            trajectory(2, 2.0, [30, 31, 32, 33], [34, 35, 36]),
        ],
        None,
    ),
    ([trajectory(3, -1.5, [40, 41], [42, 43, 44]), trajectory(3, 1.5, [40, 41], [45, 46])], [0.5, 1.0]),
]


LR = 1e-3


def learner_config(num_learners: int) -> DAPOConfig:
    config = apply_scale(apply_algorithm(DAPOConfig().environment("freshrl/FrozenLake-v0")), "tiny")
    config = config.training(num_epochs=2, minibatch_size=2, micro_batch_size=1, warmup_steps=0, lr=LR)
    return config.learners(num_learners=num_learners)


def learner_weights(learner_group) -> list[torch.Tensor]:
    """Each learner's parameters, flattened (a nested function: the learner actors cannot import tests)."""

    def flat_weights(learner) -> torch.Tensor:
        policy = learner.module["default_policy"]
        return torch.cat([p.detach().flatten() for p in policy.parameters()]).cpu()

    return [call.get() for call in learner_group.foreach_learner(flat_weights)]


def run_passes(learner_group) -> tuple[list[list[dict[str, float]]], list[torch.Tensor]]:
    """Every pass on every learner: per pass, each learner's loss, tokens and optimizer steps; and each
    learner's weights after the last."""

    def pass_summary(learner, trajectories, weights) -> dict[str, float]:
        # The whole step's loss, the tokens this learner trained on, its optimizer steps so far (nested: the
        # learner actors cannot import tests).
        results = learner.update_from_trajectories(trajectories, weights)
        tokens = results["train/tokens"].peek() if "train/tokens" in results else 0.0
        return {
            "loss": float(results["train/loss"].peek()),
            "tokens": float(tokens),
            "steps": learner.optimizer_steps,
        }

    summaries = []
    for trajectories, weights in PASSES:
        calls = learner_group.foreach_learner(
            lambda learner, t=trajectories, w=weights: pass_summary(learner, t, w)
        )
        summaries.append([call.get() for call in calls])
    return summaries, learner_weights(learner_group)


def test_two_ddp_learners_make_the_single_learner_update(ray_session):
    single = learner_config(0).build_learner_group(spaces=SPACES)
    (initial,) = learner_weights(single)
    single_passes, (single_weights,) = run_passes(single)
    single.shutdown()
    assert not torch.equal(initial, single_weights), "the passes did not train"

    double = learner_config(2).build_learner_group(spaces=SPACES)
    assert double.is_remote and len(double._worker_manager.healthy_actor_ids()) == 2
    uses_ddp = double.foreach_learner(lambda learner: hasattr(learner.module["default_policy"], "no_sync"))
    assert all(call.get() for call in uses_ddp), "the remote learners are not wrapped in DDP"
    double_passes, double_weights = run_passes(double)
    double.shutdown()

    # Both ranks hold the same weights (DDP all-reduced every step) ...
    assert torch.equal(double_weights[0], double_weights[1])
    # ... equal to the single learner's up to float summation order. Adam divides each gradient by its own
    # running scale, so for the few elements whose gradient is ~0 a summation-order difference of 1e-9 can
    # move the step by a fraction of lr: nearly every element agrees to 1e-6, and none by more than 2% of lr.
    difference = (double_weights[0] - single_weights).abs()
    assert (difference <= 1e-6).float().mean() > 0.999
    assert difference.max() <= 0.02 * LR
    for (single_pass,), ranks in zip(single_passes, double_passes, strict=True):
        # train/loss is the whole step's loss (summed over the ranks' shares), as the single learner's ...
        assert ranks[0]["loss"] == ranks[1]["loss"]
        assert ranks[0]["loss"] == pytest.approx(single_pass["loss"], rel=1e-5, abs=1e-7)
        # ... each rank trains on its shard's tokens (a stand-in adds none), together the single learner's ...
        assert ranks[0]["tokens"] + ranks[1]["tokens"] == single_pass["tokens"]
        assert all(rank["tokens"] > 0 for rank in ranks)
        # ... and the ranks step in lockstep with it, the one-row mini-batch included.
        assert ranks[0]["steps"] == ranks[1]["steps"] == single_pass["steps"]
