"""Rows that add nothing to the loss (every token masked, or advantage 0 without a KL term) get no forward or
backward, and the step's gradient is the one of the whole minibatch computed in one plain pass."""

from __future__ import annotations

import torch

from algorithms.dapo import DAPOConfig, apply_algorithm, apply_scale
from algorithms.dapo.collate import collate
from algorithms.dapo.loss import LossConfig, loss_normalizer, policy_loss
from algorithms.dapo.overlong import is_overlong, overlong_filter_mask
from algorithms.trajectory import Trajectory
from envs.base import AnyText

PROMPT, RESPONSE = 5, 6


def build_learner(**training):
    config = apply_scale(apply_algorithm(DAPOConfig().environment("freshrl/FrozenLake-v0")), "tiny")
    training = {"micro_batch_size": 2, **training}
    config = config.training(
        overlong_filtering=True, num_epochs=1, minibatch_size=8, grad_clip=1e9, **training
    ).replay(mode="on_policy")
    text = AnyText()
    learner = config.build_learner(spaces={"default_policy": (text, text)})
    learner.build()
    return learner


def trajectory(
    group_id: int, advantage: float, offset: int, *, truncated: bool = False, prompt: list[int] | None = None
) -> Trajectory:
    ids = [(5 * k + 3 * offset) % 60 + 1 for k in range(PROMPT + RESPONSE)]
    if prompt is not None:
        ids = prompt + ids[PROMPT:]
    start = len(ids) - RESPONSE
    return Trajectory(
        token_ids=ids,
        loss_mask=[0] * start + [1] * RESPONSE,
        behaviour_logprobs=[0.0] * len(ids),
        response_spans=[(start, len(ids))],
        turn_rewards=[0.0],
        finish_reasons=["length" if truncated else "stop"],
        # Truncated on its budget's last token: overlong filtering masks all of it.
        response_budget=RESPONSE if truncated else 64,
        env_seed=0,
        group_id=group_id,
        collection_step=0,
        policy_version=0,
        advantage=advantage,
    )


def on_policy(learner, trajectories: list[Trajectory]) -> list[Trajectory]:
    """The trajectories with behaviour logprobs equal to the learner's (ratio 1: no token is clipped)."""
    batch = collate(trajectories)
    with torch.no_grad():
        logp = learner.policy.compute_logprobs(batch, with_entropy=False)["logp"]
    for row, t in enumerate(trajectories):
        t.behaviour_logprobs = [0.0] + logp[row, : len(t.token_ids) - 1].tolist()
    return trajectories


def reference_gradient(learner, trajectories: list[Trajectory]) -> dict[str, torch.Tensor]:
    """Every row in one forward/backward, the overlong-filtered one masked, as the learner did before."""
    model = learner.policy.model
    model.zero_grad(set_to_none=True)
    batch = collate(trajectories)
    out = learner.policy.compute_logprobs(batch, with_entropy=True)
    overlong = [is_overlong(t, learner.config.overlong_scope) for t in trajectories]
    mask = batch["loss_mask"] * torch.from_numpy(overlong_filter_mask(overlong)).float()[:, None]
    cfg = LossConfig.from_config(learner.config)
    loss, _ = policy_loss(
        out["logp"], batch["logp_old"], batch["advantages"], mask,
        normalizer=loss_normalizer([mask], "token-mean"), cfg=cfg, weights=batch["weights"],
    )  # fmt: skip
    loss.backward()
    grads = {name: p.grad.clone() for name, p in model.named_parameters()}
    model.zero_grad(set_to_none=True)
    return grads


def count_forward_rows(learner) -> list[int]:
    module = learner.module["default_policy"]
    rows: list[int] = []
    forward = module.forward_train

    def spy(batch, **kwargs):
        rows.append(int(batch["input_ids"].shape[0]))
        return forward(batch, **kwargs)

    module.forward_train = spy
    return rows


def test_rows_without_loss_are_skipped_and_the_gradient_is_unchanged(step_gradients):
    learner = build_learner()
    batch = on_policy(
        learner,
        [
            trajectory(0, 1.0, 0),
            trajectory(0, 0.0, 1),  # zero advantage: no gradient
            trajectory(1, -1.0, 2),
            trajectory(1, 1.0, 3, truncated=True),  # overlong-filtered: every token masked
            trajectory(2, 0.0, 4),
            trajectory(2, 0.5, 5),
        ],
    )
    expected = reference_gradient(learner, batch)
    rows = count_forward_rows(learner)
    steps = step_gradients(learner)
    results = learner.update_from_trajectories(batch)
    assert sum(rows) == 3  # only the rows with a non-zero advantage and a response token
    assert results["train/skipped_rows"].peek() == 3
    (grads,) = steps
    for name, grad in grads.items():
        torch.testing.assert_close(grad, expected[name], rtol=1e-5, atol=1e-7, msg=name)
    # Freed after the step: they would stay resident through the rollout and weight sync otherwise.
    assert all(p.grad is None for p in learner.policy.model.parameters())
    assert any(float(g.abs().max()) > 0 for g in expected.values())


def test_a_step_whose_rows_all_have_zero_advantage_still_steps_on_zero_gradients(step_gradients):
    learner = build_learner(weight_decay=0.1)
    batch = on_policy(learner, [trajectory(0, 0.0, 0), trajectory(0, 0.0, 1), trajectory(1, 0.0, 2)])
    before = {k: v.clone() for k, v in learner.policy.model.state_dict().items()}
    rows = count_forward_rows(learner)
    steps = step_gradients(learner)
    learner.update_from_trajectories(batch)
    assert sum(rows) == 1  # one stand-in row, its loss times 0
    assert learner.optimizer_steps == 1  # AdamW's decay still applies, as when every row ran
    model = learner.policy.model
    (grads,) = steps
    assert all(float(grad.abs().max()) == 0 for grad in grads.values())
    assert any(not torch.equal(v, before[k]) for k, v in model.state_dict().items())


def test_with_a_kl_term_zero_advantage_rows_still_train():
    learner = build_learner(kl_coef=0.1)
    batch = on_policy(learner, [trajectory(0, 0.0, 0), trajectory(0, 1.0, 1)])
    rows = count_forward_rows(learner)
    learner.update_from_trajectories(batch)
    assert sum(rows) == 2


def test_the_kl_to_the_reference_is_reported_and_grows_once_the_policy_moves():
    learner = build_learner(kl_coef=0.1, lr=1e-2)
    batch = on_policy(learner, [trajectory(0, -1.0, 0), trajectory(0, 1.0, 1)])
    first = learner.update_from_trajectories(batch)["train/kl_ref"].peek()
    assert abs(first) < 1e-6  # the policy is still its reference
    assert learner.update_from_trajectories(batch)["train/kl_ref"].peek() > 1e-4


def test_gradient_checkpointing_steps_on_the_same_gradient(step_gradients):
    """DAPOConfig.gradient_checkpointing reaches the learner's forward and leaves the step's gradient as it
    was; the rows of each group share their prompt, so the shared-prefix path is the one checkpointed."""
    gradients = {}
    for checkpointed in (False, True):
        learner = build_learner(gradient_checkpointing=checkpointed, micro_batch_size=4)
        assert learner.policy.gradient_checkpointing is checkpointed
        prompt = [(7 * k) % 60 + 1 for k in range(24)]
        advantages = [1.0, -1.0, 0.5, -0.5]
        batch = on_policy(learner, [trajectory(0, a, k, prompt=prompt) for k, a in enumerate(advantages)])
        steps = step_gradients(learner)
        learner.update_from_trajectories(batch)
        (gradients[checkpointed],) = steps
    for name, grad in gradients[False].items():
        torch.testing.assert_close(gradients[True][name], grad, rtol=1e-5, atol=1e-7, msg=name)
    assert any(float(g.abs().max()) > 0 for g in gradients[False].values())
