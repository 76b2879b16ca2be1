"""The env contract (envs.contract) on every registered env; gymnasium's checker on directly built ones."""

import warnings

import gymnasium as gym
import pytest
from gymnasium.utils.env_checker import check_env

import envs
from envs.contract import PROPERTIES, check_property
from envs.frozen_lake import FrozenLakeEnv, FrozenLakeVisionEnv
from envs.sokoban import SokobanEnv

GRID_ENV_IDS = [
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
CASES = [
    pytest.param(env_id, prop, id=f"{env_id.split('/')[-1]}-{prop}")
    for env_id in envs.ENV_IDS
    for prop in PROPERTIES
]


@pytest.mark.parametrize(("env_id", "prop"), CASES)
def test_registered_env_keeps_the_contract(env_id, prop):
    assert check_property(env_id, prop).startswith("ok")


def checked(env):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a checker warning fails the test ...
        # ... except that a directly constructed env has no spec to re-make it in other render modes.
        warnings.filterwarnings("ignore", message=".*alternative render modes.*")
        check_env(env, skip_render_check=False)


@pytest.mark.parametrize("env_id", GRID_ENV_IDS)
def test_check_env_in_rgb_array_mode(env_id):
    checked(gym.make(env_id, render_mode="rgb_array").unwrapped)


@pytest.mark.parametrize("factory", DIRECT, ids=range(len(DIRECT)))
def test_check_env_direct(factory):
    checked(factory())
