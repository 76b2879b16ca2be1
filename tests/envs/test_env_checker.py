"""Gymnasium's env checker on every grid env and example env, made by id and constructed directly."""

import warnings

import gymnasium as gym
import pytest
from gymnasium.utils.env_checker import check_env

import envs  # noqa: F401  (registers the envs)
from envs.frozen_lake import FrozenLakeEnv, FrozenLakeVisionEnv
from envs.sokoban import SokobanEnv

ENV_IDS = [
    "freshrl/Sokoban-v0",
    "freshrl/SokobanHard-v0",
    "freshrl/FrozenLake-v0",
    "freshrl/FrozenLakeVision-v0",
]
DIRECT = [
    lambda: SokobanEnv("simple", render_mode="rgb_array"),
    lambda: SokobanEnv("hard", render_mode="ansi", max_actions_per_turn=1),
    lambda: FrozenLakeEnv(is_slippery=True, render_mode="rgb_array"),
    lambda: FrozenLakeEnv(size=6, hole_prob=0.3, render_mode="ansi"),
    lambda: FrozenLakeVisionEnv(render_mode="rgb_array"),
    lambda: FrozenLakeVisionEnv(size=5, is_slippery=True, render_mode="ansi"),
]


def checked(env):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a checker warning fails the test ...
        # ... except that a directly constructed env has no spec to re-make it in other render modes.
        warnings.filterwarnings("ignore", message=".*alternative render modes.*")
        check_env(env, skip_render_check=False)


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_check_env_via_make(env_id):
    checked(gym.make(env_id).unwrapped)
    checked(gym.make(env_id, render_mode="rgb_array").unwrapped)


@pytest.mark.parametrize("factory", DIRECT, ids=range(len(DIRECT)))
def test_check_env_direct(factory):
    checked(factory())
