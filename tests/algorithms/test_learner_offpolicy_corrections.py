"""Stale and mismatched logprobs in the DAPO learner: the dual clip that replay turns on, the replay clip
fraction it reports, and the truncated-IS mismatch correction (pi_old recomputed once per pass)."""

from __future__ import annotations

import pytest
import torch

import algorithms.dapo.learner as learner_module
from algorithms.dapo import DAPOConfig, apply_algorithm, apply_scale
from algorithms.dapo.collate import collate
from algorithms.trajectory import Trajectory
from envs.base import AnyText

PROMPT, RESPONSE = 4, 6


def build_learner(**training):
    config = apply_scale(apply_algorithm(DAPOConfig().environment("freshrl/FrozenLake-v0"), "dapo"), "tiny")
    replay = training.pop("replay", "on_policy")
    config = config.training(micro_batch_size=4, **training).replay(mode=replay)
    text = AnyText()
    learner = config.build_learner(spaces={"default_policy": (text, text)})
    learner.build()
    return learner


def trajectory(group_id: int, advantage: float, behaviour: list[float], offset: int = 0) -> Trajectory:
    ids = [(7 * k + offset) % 50 + 1 for k in range(PROMPT + RESPONSE)]
    return Trajectory(
        token_ids=ids,
        loss_mask=[0] * PROMPT + [1] * RESPONSE,
        behaviour_logprobs=[0.0] * PROMPT + list(behaviour),
        response_spans=[(PROMPT, PROMPT + RESPONSE)],
        turn_rewards=[0.0],
        finish_reasons=["stop"],
        env_seed=0,
        group_id=group_id,
        collection_step=0,
        policy_version=0,
        advantage=advantage,
        response_budget=64,  # not truncated: overlong filtering keeps it
    )


def own_logprobs(learner, trajectories: list[Trajectory]) -> torch.Tensor:
    """The learner's logprobs of the response tokens under its current weights, [B, RESPONSE]."""
    batch = collate(trajectories)
    with torch.no_grad():
        logp = learner.policy.compute_logprobs(batch, with_entropy=False)["logp"]
    return logp[:, PROMPT - 1 :]


@pytest.fixture
def spy_policy_loss(monkeypatch):
    """Record the arguments of every policy_loss call the learner makes."""
    calls = []
    real = learner_module.policy_loss

    def spy(*args, **kwargs):
        calls.append({"logp_old": args[1].detach().clone(), "advantages": args[2].clone(), **kwargs})
        return real(*args, **kwargs)

    monkeypatch.setattr(learner_module, "policy_loss", spy)
    return calls


def test_dual_clip_defaults_follow_replay():
    config = DAPOConfig()
    assert config.dual_clip_c == "auto" and config.resolved_dual_clip_c() is None  # on-policy: off
    for mode in ("per", "freshper", "freshper_poly"):
        assert DAPOConfig().replay(mode=mode).resolved_dual_clip_c() == 3.0
    assert DAPOConfig().replay(mode="freshper").training(dual_clip_c=None).resolved_dual_clip_c() is None
    assert DAPOConfig().replay(mode="freshper").training(dual_clip_c=10).resolved_dual_clip_c() == 10.0
    assert DAPOConfig().training(dual_clip_c=2.5).resolved_dual_clip_c() == 2.5
    for bad in (1.0, "on"):
        with pytest.raises(ValueError, match="dual_clip_c"):
            DAPOConfig().environment("freshrl/FrozenLake-v0").training(dual_clip_c=bad).validate()


def test_mismatch_correction_auto_follows_dtypes():
    assert DAPOConfig().resolved_mismatch_correction() is False  # both "auto": the same dtype
    differ = DAPOConfig().training(engine_dtype="bfloat16", model_dtype="float32")
    assert differ.resolved_mismatch_correction() is True
    bf16_learner = DAPOConfig().training(engine_dtype="float32", model_dtype="bfloat16")
    assert bf16_learner.resolved_mismatch_correction() is True
    same_bf16 = DAPOConfig().training(engine_dtype="bfloat16", model_dtype="bfloat16")
    assert same_bf16.resolved_mismatch_correction() is False
    assert DAPOConfig().training(mismatch_correction=True).resolved_mismatch_correction() is True
    assert differ.training(mismatch_correction=False).resolved_mismatch_correction() is False
    with pytest.raises(ValueError, match="mismatch_correction"):
        DAPOConfig().environment("freshrl/FrozenLake-v0").training(mismatch_correction="yes").validate()
    with pytest.raises(ValueError, match="tis_cap"):
        DAPOConfig().environment("freshrl/FrozenLake-v0").training(tis_cap=0.5).validate()


@pytest.mark.parametrize("top_p", [0.7, 0.999])
def test_training_refuses_top_p_below_one(top_p):
    config = DAPOConfig().environment("freshrl/FrozenLake-v0").training(top_p=top_p)
    with pytest.raises(
        ValueError, match=r"top_p must be 1\.0 in training.*renormalised over the top-p nucleus"
    ):
        config.validate()
    DAPOConfig().environment("freshrl/FrozenLake-v0").training(top_p=1.0).validate()


def test_replay_turns_on_the_dual_clip_and_reports_replayed_clip_fraction(spy_policy_loss):
    """A replayed A < 0 trajectory whose behaviour logprobs are far below today's policy (ratio ~ e^25) is
    bounded by the dual clip c = 3 by default, and the replay batch reports its clipped fraction."""
    learner = build_learner(replay="freshper", num_epochs=1, minibatch_size=2)
    stale = [trajectory(0, -1.0, [-25.0] * RESPONSE), trajectory(1, -1.0, [-25.0] * RESPONSE, offset=3)]
    results = learner.update_from_trajectories(stale, [0.5, 0.7], tag="replay")
    assert spy_policy_loss and all(call["cfg"].dual_clip_c == 3.0 for call in spy_policy_loss)
    assert results["train/dual_clip_frac_replay"].peek() == 1.0
    assert results["train/ratio_max_replay"].peek() > 3.0
    assert results["train/approx_kl_replay"].peek() > 1.0  # collected by a far older policy: stale
    # The sequence weights the learner was given are the ones the loss multiplies by.
    torch.testing.assert_close(spy_policy_loss[0]["weights"].sort().values, torch.tensor([0.5, 0.7]))
    fresh = [trajectory(2, 1.0, own_logprobs(learner, [trajectory(2, 1.0, [0.0] * RESPONSE)])[0].tolist())]
    results = learner.update_from_trajectories(fresh, tag="fresh")
    assert results["train/dual_clip_frac_fresh"].peek() == 0.0
    assert results["train/approx_kl_fresh"].peek() == pytest.approx(0.0, abs=1e-5)


def test_mismatch_correction_recomputes_pi_old_once_per_pass(spy_policy_loss):
    """pi_old comes from the learner's weights before the pass (the same for both epochs, though the first
    step moved the weights), the engine's logprobs become the TIS denominator, and the mismatch metrics are
    the truncated-IS quantities of those two."""
    learner = build_learner(mismatch_correction=True, num_epochs=2, minibatch_size=2, lr=1e-2, warmup_steps=0)
    probe = [trajectory(0, 1.0, [0.0] * RESPONSE), trajectory(0, -1.0, [0.0] * RESPONSE, offset=3)]
    before = own_logprobs(learner, probe).double()
    gap = torch.tensor(
        [[0.0, 0.01, -0.01, 1.0, -1.0, 0.3], [0.0, 0.02, 0.0, 0.0, 2.0, -0.5]], dtype=torch.float64
    )
    engine = before - gap  # pi_old_learner / pi_engine = e^gap: e^1 and e^2 are beyond the cap of 2
    batch = [trajectory(0, 1.0, engine[0].tolist()), trajectory(0, -1.0, engine[1].tolist(), offset=3)]
    results = learner.update_from_trajectories(batch, tag="fresh")

    assert len(spy_policy_loss) == 2  # one micro-batch per optimizer step, two epochs
    after_first_step = own_logprobs(learner, probe)
    for call in spy_policy_loss:
        rows = [0, 1] if call["advantages"][0] > 0 else [1, 0]
        logp_old = call["logp_old"][rows, PROMPT - 1 :].double()
        sampler = call["logp_sampler"][rows, PROMPT - 1 :].double()
        torch.testing.assert_close(logp_old, before, rtol=0, atol=1e-6)
        torch.testing.assert_close(sampler, engine, rtol=0, atol=1e-6)
    torch.testing.assert_close(spy_policy_loss[0]["logp_old"], spy_policy_loss[1]["logp_old"], rtol=0, atol=0)
    assert (after_first_step.double() - before).abs().max() > 1e-4  # recomputing later would differ

    rho = gap.exp()
    assert results["train/tis_clip_frac_fresh"].peek() == pytest.approx(float((rho > 2.0).double().mean()))
    assert results["train/mismatch_ratio_max_fresh"].peek() == pytest.approx(float(rho.max()), rel=1e-4)
    assert results["train/mismatch_ratio_min_fresh"].peek() == pytest.approx(float(rho.min()), rel=1e-4)
    k3 = (rho - 1.0 - gap).mean()
    assert results["train/mismatch_kl_fresh"].peek() == pytest.approx(float(k3), rel=1e-3)


def test_without_mismatch_correction_the_ratio_is_against_the_engine(spy_policy_loss):
    learner = build_learner(num_epochs=1, minibatch_size=1)
    batch = [trajectory(0, 1.0, [-1.5] * RESPONSE)]
    results = learner.update_from_trajectories(batch, tag="fresh")
    (call,) = spy_policy_loss
    assert call["logp_sampler"] is None
    assert torch.equal(call["logp_old"][0, PROMPT - 1 :], torch.full((RESPONSE,), -1.5))
    assert "train/mismatch_kl_fresh" not in results
