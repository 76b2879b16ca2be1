"""The invalid-output policy (noop, reprompt, terminate) and its penalty, on every grid env."""

import gymnasium as gym
import numpy as np
import pytest

import envs  # noqa: F401  (registers the envs)

ENV_IDS = [
    "freshrl/Sokoban-v0",
    "freshrl/SokobanHard-v0",
    "freshrl/FrozenLake-v0",
    "freshrl/FrozenLakeVision-v0",
]
BAD = ["no tags and no direction words", "<answer>fly</answer>"]


def text_of(obs):
    return obs["text"] if isinstance(obs, dict) else obs


def snapshot(env):
    return env.unwrapped.map_text()


@pytest.mark.parametrize("env_id", ENV_IDS)
@pytest.mark.parametrize("response", BAD)
def test_noop_repeats_the_state(env_id, response):
    env = gym.make(env_id, invalid_output="noop", invalid_penalty=-0.5).unwrapped
    obs0, _ = env.reset(seed=11)
    before = snapshot(env)
    obs, reward, terminated, truncated, info = env.step(response)
    assert snapshot(env) == before
    assert text_of(obs) == env._state_text() and not text_of(obs).startswith("Invalid")
    assert reward == -0.5 and not terminated and not truncated
    assert not info["action_valid"] and not info["action_effective"] and not info["success"]
    if isinstance(obs, dict):
        assert np.array_equal(obs["image"], obs0["image"])


@pytest.mark.parametrize("env_id", ENV_IDS)
@pytest.mark.parametrize("response", BAD)
def test_reprompt_explains_and_repeats_the_format(env_id, response):
    env = gym.make(env_id, invalid_output="reprompt").unwrapped
    env.reset(seed=11)
    before = snapshot(env)
    obs, reward, terminated, truncated, info = env.step(response)
    text = text_of(obs)
    assert snapshot(env) == before
    assert text.startswith("Invalid response:") and env.format_reminder() in text and text.isascii()
    assert reward == pytest.approx(-0.1) and not terminated and not truncated


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_terminate_ends_the_episode(env_id):
    env = gym.make(env_id, invalid_output="terminate", invalid_penalty=-1.0).unwrapped
    env.reset(seed=11)
    obs, reward, terminated, truncated, info = env.step("gibberish")
    assert terminated and not truncated and reward == -1.0 and not info["success"]
    assert "episode ends" in text_of(obs)
    with pytest.raises(RuntimeError):
        env.step("<answer>Up</answer>")


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_invalid_turns_count_towards_the_turn_limit(env_id):
    env = gym.make(env_id, invalid_output="noop", max_turns=3).unwrapped
    env.reset(seed=11)
    results = [env.step("???") for _ in range(3)]
    assert [r[3] for r in results] == [False, False, True]
    assert [r[4]["turn"] for r in results] == [1, 2, 3]


def test_unknown_policy_is_rejected():
    with pytest.raises(ValueError):
        gym.make("freshrl/FrozenLake-v0", invalid_output="ignore")
