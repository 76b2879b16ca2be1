"""``blind_response``: an answer drawn without looking at the observation, the policy of the learning lab's
blind floor. It is always a valid strict answer of as many moves as a turn allows, and reproducible."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

import envs  # noqa: F401  (registers the ids)
import envs.ecosystem  # noqa: F401  (registers babyai/...)
from envs.seeds import seeds

BLIND_ENVS = [
    ("freshrl/FrozenLake-v0", {"max_actions_per_turn": 3}),
    ("freshrl/FrozenLakeVision-v0", {"max_actions_per_turn": 2}),
    ("freshrl/Sokoban-v0", {"difficulty": "simple"}),
    ("babyai/GoToLocal-v0", {"max_turns": 3, "max_actions_per_turn": 5}),
]


@pytest.mark.parametrize(("env_id", "kwargs"), BLIND_ENVS)
def test_a_blind_response_is_a_valid_strict_answer_of_a_full_turn(env_id, kwargs):
    env = gym.make(env_id, **kwargs).unwrapped
    env.reset(seed=seeds("validation", 1)[0])
    rng = np.random.default_rng(0)
    responses = [env.blind_response(rng) for _ in range(50)]
    for response in responses:
        moves = response.removeprefix("<answer>").removesuffix("</answer>").split(", ")
        assert response.startswith("<answer>") and len(moves) == env.max_actions_per_turn, response
    assert len(set(responses)) > 1  # drawn, not fixed
    again = np.random.default_rng(0)
    assert [env.blind_response(again) for _ in range(50)] == responses
    _, _, _, _, info = env.step(responses[0])
    assert info["action_valid"] and info["format_ok"], info
    env.close()
