"""DAPOConfig(...).build_algo(), train twice, save, restore, train again: on the tiny LM (text env) with each
replay mode and on the tiny VLM (FrozenLakeVision). The FreshPER cases restore into a new algorithm
(``DAPO.from_checkpoint``); the others into the live one after it trained on, as ``experiments.train``
resumes."""

from __future__ import annotations

import math

import pytest
import torch

from algorithms.dapo import DAPO, DAPOConfig


def tiny_config(make, env: str, model_path: str | None, replay: str) -> DAPOConfig:
    return make(
        env,
        model_path,
        group_size=4,
        max_response_tokens=12,
        max_generation_batches=2,
        minibatch_size=8,
        engine_kv_cache_gib=0.5,
        # A random tiny model mostly fails every episode, so filtering would often leave nothing to train on;
        # dynamic sampling itself is tested in tests/algorithms/dapo/.
        dynamic_sampling=False,
        # Responses of the random tiny model always hit the token limit; filtering would mask them all.
        overlong_filtering=False,
        # Its groups mostly have zero advantage, and the learner skips such rows unless a KL term reads them:
        # a small KL keeps every row in the forward/backward (the reference-model path, tested here too).
        kl_coef=1e-3,
    ).replay(mode=replay, tau=50.0, insert_at_max_priority=replay == "per")  # reference-style PER


def learner_weights(algo: DAPO) -> dict[str, torch.Tensor]:
    return algo.learner_group.get_state(components="learner/rl_module")["learner"]["rl_module"][
        "default_policy"
    ]


def counters_of(algo: DAPO) -> tuple[int, int, int]:
    """What a restore must bring back besides the weights: task cursor, optimizer steps, buffer size."""
    counters = algo.counters
    return counters.task_cursor, counters.optimizer_steps, counters.replay_size


def run_case(make, tmp_path, env: str, model_path: str | None, replay: str, from_checkpoint: bool) -> None:
    algo = tiny_config(make, env, model_path, replay).build_algo()
    before = {k: v.clone() for k, v in learner_weights(algo).items()}
    for _ in range(2):
        result = algo.train()
    learner = result["learners"]
    for key in ("train/entropy", "train/loss", "train/grad_norm", "train/approx_kl"):
        assert math.isfinite(float(learner[key])), key
    assert learner["train/tokens"] > 0 and learner["train/entropy"] > 0
    assert result["rollout/groups_sampled"] >= 2
    sampled, kept = result["env_runners"]["rollout/success"], result["rollout/kept_groups_success"]
    assert 0 <= sampled <= 1
    assert kept == pytest.approx(sampled)  # dynamic sampling is off: every sampled group is kept
    after = learner_weights(algo)
    assert any(not torch.equal(before[k], after[k]) for k in before), "training did not change the weights"
    if replay != "on_policy":
        # Both iterations' fresh groups (2 prompts x 4 samples each) entered the buffer; the second trained on
        # a replay batch too.
        assert algo.counters.replay_size == 16
        assert result["replay/size"] == 8 and result["learners"]["train/optimizer_steps_replay"] >= 1

    checkpoint = algo.save_to_path(str(tmp_path / "checkpoint"))
    state = counters_of(algo)
    if from_checkpoint:
        # RLlib's own way back: a new algorithm built from the checkpoint's config.
        algo.stop()
        restored = DAPO.from_checkpoint(checkpoint)
    else:
        # The way experiments.train resumes, into a live algorithm whose state moved on since the save (one
        # engine and learner build fewer than a new algorithm).
        algo.train()
        assert counters_of(algo) != state
        algo.restore_from_path(checkpoint)
        restored = algo
    assert counters_of(restored) == state
    for name, tensor in learner_weights(restored).items():
        assert torch.equal(tensor, after[name])
    result = restored.train()
    assert math.isfinite(float(result["learners"]["train/loss"]))
    restored.stop()


@pytest.mark.parametrize("replay", ["freshper", "on_policy", "per", "freshper_poly"])
def test_text_env_tiny_lm(small_dapo_config, tmp_path, replay):
    run_case(small_dapo_config, tmp_path, "freshrl/FrozenLake-v0", None, replay, replay == "freshper")


def test_vision_env_tiny_vlm(small_dapo_config, tmp_path):
    from models.tiny import tiny_vlm_path

    run_case(
        small_dapo_config, tmp_path, "freshrl/FrozenLakeVision-v0", str(tiny_vlm_path()), "freshper", True
    )
