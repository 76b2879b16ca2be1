"""The entropy guard in the learner's real update (DAPOTorchLearner._optimizer_step): it acts on the step's
gradient, reports entropy_guard/... metrics, and its step does not depend on micro_batch_size."""

from __future__ import annotations

import torch
from test_gigpo_learner import batch_of

from algorithms.dapo import DAPOConfig, apply_algorithm, apply_scale
from envs.base import AnyText


def build_learner(micro_batch_size: int, **training):
    config = apply_scale(apply_algorithm(DAPOConfig().environment("freshrl/FrozenLake-v0")), "tiny")
    # GiGPO's per-turn advantages: the guard reads each token's own.
    training = {"num_epochs": 1, "overlong_filtering": False, "advantage_estimator": "gigpo", **training}
    config = config.training(micro_batch_size=micro_batch_size, minibatch_size=8, grad_clip=1e9, **training)
    config = config.replay(mode="on_policy")
    text = AnyText()
    learner = config.build_learner(spaces={"default_policy": (text, text)})
    learner.build()
    return learner


def step(step_gradients, micro_batch_size: int, **training):
    learner = build_learner(micro_batch_size, **training)
    steps = step_gradients(learner)
    results = learner.update_from_trajectories(batch_of(learner))
    (grads,) = steps
    return grads, results


# Every token of the step is in this band, and with r = 1 Clip-Cov detaches them all.
EVERY_TOKEN = {"entropy_guard": "clip_cov", "clip_cov_ratio": 1.0, "clip_cov_low": -1e9, "clip_cov_high": 1e9}


def test_clip_cov_on_every_token_leaves_no_gradient(step_gradients):
    plain, _ = step(step_gradients, 8)
    guarded, results = step(step_gradients, 8, **EVERY_TOKEN)
    assert any(float(g.abs().max()) > 0 for g in plain.values())
    assert all(g is None or float(g.abs().max()) == 0 for g in guarded.values())
    assert results["entropy_guard/selected_frac"].peek() == 1.0
    assert results["entropy_guard/band_frac"].peek() == 1.0


def test_the_guarded_step_does_not_depend_on_micro_batch_size(step_gradients):
    settings = {**EVERY_TOKEN, "clip_cov_ratio": 0.3}
    plain, _ = step(step_gradients, 8)
    gradients = []
    for micro_batch_size in (1, 8):
        grads, results = step(step_gradients, micro_batch_size, **settings)
        gradients.append(grads)
        # The 4 trained rows have 3, 2, 1 and 3 turns of 3 response tokens: floor(0.3 x 27) = 8 tokens.
        assert results["entropy_guard/selected_frac"].peek() == 8 / 27
        assert "entropy_guard/cov_mean" in results and "entropy_guard/kl_penalty" not in results
    for name, grad in gradients[0].items():
        torch.testing.assert_close(gradients[1][name], grad, rtol=1e-5, atol=1e-6, msg=name)
    # The guard acted: 8 of 27 tokens detached move the gradient well beyond the split's rounding.
    change = max(float((gradients[0][name] - grad).abs().max()) for name, grad in plain.items())
    assert change > 1e-2 * max(float(grad.abs().max()) for grad in plain.values())


def test_kl_cov_penalises_once_the_policy_has_moved():
    # The first step starts at pi_old (penalty 0); the second epoch's step starts one AdamW step away.
    kl_cov = {"entropy_guard": "kl_cov", "kl_cov_ratio": 0.2}
    learner = build_learner(8, num_epochs=2, lr=1e-3, warmup_steps=0, **kl_cov)
    results = learner.update_from_trajectories(batch_of(learner))
    assert results["entropy_guard/kl_penalty"].peek() > 0
    assert results["entropy_guard/selected_frac"].peek() == 5 / 27  # floor(0.2 x 27) tokens
