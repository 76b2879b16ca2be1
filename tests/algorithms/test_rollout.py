"""The multi-turn rollout on the real vLLM engine: token-in/token-out records that line up."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch

import envs  # noqa: F401
from algorithms.rollout import rollout_groups
from models.chat import ChatRenderer
from models.engine import RolloutEngine, SamplingConfig
from models.logprobs import token_logprobs
from models.policy_module import load_hf_model
from models.tiny import tiny_lm_path

SEEDS = [3, 11]
GROUP = 3


@pytest.fixture(scope="module")
def rollout():
    path = str(tiny_lm_path())
    engine = RolloutEngine(path, kv_cache_gib=0.5, max_model_len=1024)
    renderer = ChatRenderer(path)
    env_list = [gym.make("freshrl/FrozenLake-v0") for _ in range(len(SEEDS) * GROUP)]
    sampling = SamplingConfig(temperature=1.0, max_tokens=16, seed=5)
    groups = rollout_groups(
        engine, renderer, env_list, SEEDS, GROUP, sampling, max_context_tokens=1024, group_ids=[7, 8]
    )
    return path, renderer, groups


def test_groups_share_seed_and_id(rollout):
    _, _, groups = rollout
    assert [len(g) for g in groups] == [GROUP, GROUP]
    for seed, gid, group in zip(SEEDS, [7, 8], groups, strict=True):
        assert {t.env_seed for t in group} == {seed}
        assert {t.group_id for t in group} == {gid}
    # The G samples of a group differ (distinct sampling per member).
    assert len({tuple(t.token_ids) for t in groups[0]}) > 1


def test_masks_line_up_with_responses(rollout):
    _, renderer, groups = rollout
    for trajectory in (t for g in groups for t in g):
        mask = np.array(trajectory.loss_mask)
        expected = np.zeros_like(mask)
        for start, end in trajectory.response_spans:
            expected[start:end] = 1
        assert (mask == expected).all()
        assert len(trajectory.turn_rewards) == trajectory.num_turns == len(trajectory.finish_reasons)
        logp = np.array(trajectory.behaviour_logprobs)
        assert (logp[mask == 0] == 0).all() and (logp[mask == 1] <= 0).all()
        # The prompt part is exactly the renderer's first prompt for this seed's observation.
        env = gym.make("freshrl/FrozenLake-v0")
        observation, _ = env.reset(seed=trajectory.env_seed)
        prompt = renderer.prompt(observation).token_ids
        assert trajectory.token_ids[: len(prompt)] == prompt
        assert trajectory.response_spans[0][0] == len(prompt)


def test_behaviour_logprobs_match_hf_rescoring(rollout):
    path, _, groups = rollout
    model = load_hf_model(path).eval()
    diffs = []
    for trajectory in (t for g in groups for t in g):
        ids = torch.tensor([trajectory.token_ids])
        with torch.no_grad():
            logp, _ = token_logprobs(model, ids)
        mask = torch.tensor(trajectory.loss_mask[1:], dtype=torch.bool)
        behaviour = torch.tensor(trajectory.behaviour_logprobs[1:])
        diffs.append((logp[0][mask] - behaviour[mask]).abs())
    mean_abs = float(torch.cat(diffs).mean())
    print(f"mean |HF - vLLM| behaviour logprob over rollout tokens: {mean_abs:.2e}")
    assert mean_abs < 1e-3
