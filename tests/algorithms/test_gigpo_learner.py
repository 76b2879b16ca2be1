"""GiGPO's per-turn advantages in the learner: a token's advantage is its turn's whatever the micro-batch it
lands in, so the step's gradient does not depend on micro_batch_size and equals one plain pass."""

from __future__ import annotations

import torch

from algorithms.dapo import DAPOConfig, apply_algorithm, apply_scale
from algorithms.dapo.collate import collate
from algorithms.dapo.loss import LossConfig, loss_normalizer, policy_loss
from algorithms.trajectory import Trajectory
from envs.base import AnyText


def build_learner(micro_batch_size: int):
    config = apply_scale(apply_algorithm(DAPOConfig().environment("freshrl/FrozenLake-v0")), "tiny")
    config = config.training(
        micro_batch_size=micro_batch_size,
        overlong_filtering=False,
        num_epochs=1,
        minibatch_size=8,
        grad_clip=1e9,
        advantage_estimator="gigpo",
    ).replay(mode="on_policy")
    text = AnyText()
    learner = config.build_learner(spaces={"default_policy": (text, text)})
    learner.build()
    return learner


def multi_turn(group_id: int, turn_advantages: list[float], offset: int) -> Trajectory:
    """A 4-token prompt, then per turn 3 response tokens and 2 observation tokens."""
    ids, mask, spans = [(7 * k + offset) % 50 + 1 for k in range(4)], [0] * 4, []
    for turn in range(len(turn_advantages)):
        spans.append((len(ids), len(ids) + 3))
        ids += [(11 * turn + 3 * offset + k) % 50 + 1 for k in range(5)]
        mask += [1, 1, 1, 0, 0]
    return Trajectory(
        token_ids=ids,
        loss_mask=mask,
        behaviour_logprobs=[0.0] * len(ids),
        response_spans=spans,
        turn_rewards=[0.0] * len(turn_advantages),
        finish_reasons=["stop"] * len(turn_advantages),
        env_seed=0,
        group_id=group_id,
        collection_step=0,
        policy_version=0,
        response_budget=64,
        advantage=0.3,  # the episode advantage: GiGPO's turn advantages replace it on the tokens
        turn_advantages=turn_advantages,
    )


def batch_of(learner) -> list[Trajectory]:
    trajectories = [
        multi_turn(0, [1.2, -0.4, 0.0], 0),
        multi_turn(0, [-0.7, 0.9], 1),
        multi_turn(1, [0.0, 0.0], 2),  # every turn 0: the row adds nothing and is skipped
        multi_turn(1, [0.5], 3),
        multi_turn(2, [-1.1, 0.2, 0.6], 4),
    ]
    # Behaviour logprobs equal to the learner's: ratio 1, no token clipped.
    batch = collate(trajectories)
    with torch.no_grad():
        logp = learner.policy.compute_logprobs(batch, with_entropy=False)["logp"]
    for row, trajectory in enumerate(trajectories):
        trajectory.behaviour_logprobs = [0.0] + logp[row, : len(trajectory.token_ids) - 1].tolist()
    return trajectories


def one_pass_gradient(learner, trajectories: list[Trajectory]) -> dict[str, torch.Tensor]:
    model = learner.policy.model
    model.zero_grad(set_to_none=True)
    batch = collate(trajectories)
    out = learner.policy.compute_logprobs(batch, with_entropy=False)
    loss, _ = policy_loss(
        out["logp"],
        batch["logp_old"],
        batch["advantages"],
        batch["loss_mask"],
        normalizer=loss_normalizer([batch["loss_mask"]], "token-mean"),
        cfg=LossConfig.from_config(learner.config),
    )
    loss.backward()
    grads = {name: p.grad.clone() for name, p in model.named_parameters()}
    model.zero_grad(set_to_none=True)
    return grads


def test_collated_token_advantages_do_not_depend_on_the_split():
    trajectories = [
        multi_turn(0, [1.0, -2.0], 0),
        multi_turn(0, [0.5], 1),
        multi_turn(1, [3.0, 0.0, -1.0], 2),
    ]
    whole = collate(trajectories)["advantages"]
    for row, trajectory in enumerate(trajectories):
        alone = collate([trajectory])["advantages"][0]
        assert torch.equal(whole[row, : alone.shape[0]], alone)
        assert not whole[row, alone.shape[0] :].any()  # padding
    # The first turn's response tokens (positions 4-6, shifted by one) carry its advantage.
    assert whole[2, 3:6].tolist() == [3.0, 3.0, 3.0] and whole[2, 8:11].tolist() == [0.0, 0.0, 0.0]


def test_the_step_gradient_does_not_depend_on_micro_batch_size(step_gradients):
    gradients = []
    for micro_batch_size in (1, 8):
        learner = build_learner(micro_batch_size)
        trajectories = batch_of(learner)
        expected = one_pass_gradient(learner, trajectories)
        steps = step_gradients(learner)
        results = learner.update_from_trajectories(trajectories)
        assert results["train/skipped_rows"].peek() == 1
        (grads,) = steps
        for name, grad in grads.items():
            torch.testing.assert_close(grad, expected[name], rtol=1e-5, atol=1e-6, msg=name)
        gradients.append(grads)
    assert any(float(g.abs().max()) > 0 for g in gradients[0].values())
    for other in gradients[1:]:
        for name, grad in gradients[0].items():
            torch.testing.assert_close(other[name], grad, rtol=1e-5, atol=1e-6, msg=name)
