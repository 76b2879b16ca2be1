"""The learning lab's blind floor: the success of a policy that never looks, on the tasks an evaluation
played, with tasks as the unit of its interval."""

from __future__ import annotations

import numpy as np

from envs.seeds import seeds
from experiments.common.blind_floor import blind_floor

LAKE = "freshrl/FrozenLake-v0"
SETTING = {"size": 4, "hole_prob": 0.2, "is_slippery": False, "max_turns": 5, "max_actions_per_turn": 3}


def test_the_floor_is_the_mean_of_per_task_rates_with_a_t_interval_over_tasks():
    tasks = seeds("validation", 40)
    floor = blind_floor(LAKE, SETTING, tasks, repeats=4, seed=3)
    assert floor["tasks"] == 40 and floor["repeats"] == 4
    assert floor["success"] in {k / 160 for k in range(161)}  # 40 tasks x 4 episodes
    assert 0 < floor["success"] < 0.5 and 0 < floor["ci95"] < 0.2
    assert blind_floor(LAKE, SETTING, tasks, repeats=4, seed=3) == floor  # reproducible
    one_task = blind_floor(LAKE, SETTING, tasks[:1], repeats=8, seed=3)
    assert one_task["ci95"] is None  # one task: no interval over tasks, however many episodes


def test_an_easier_setting_raises_the_floor():
    tasks = seeds("validation", 64)
    default = blind_floor(LAKE, SETTING, tasks, repeats=2)["success"]
    no_holes = blind_floor(LAKE, {**SETTING, "hole_prob": 0.0, "max_turns": 20}, tasks, repeats=2)["success"]
    assert no_holes > default + 0.3
    assert np.isclose(blind_floor(LAKE, SETTING, tasks, repeats=2)["success"], default)


def test_an_env_without_a_blind_response_has_no_floor():
    assert blind_floor("freshrl/Math-v0", {}, seeds("validation", 2)) is None
