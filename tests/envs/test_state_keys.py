"""info["state_key"] of the grid envs (docs/adding_an_env.md, "State keys"): equal for equal states, whatever
the path there, different across maps and levels, and the state the next turn starts from."""

from __future__ import annotations

import gymnasium as gym

import envs  # noqa: F401  (registers the envs)
from envs.seeds import SPLITS

OPEN = ["SFFF", "FFFF", "FFFF", "FFFG"]
HOLE = ["SFFF", "FFFF", "FFHF", "FFFG"]


def frozen_lake(env_id: str = "freshrl/FrozenLake-v0"):
    return gym.make(env_id, max_actions_per_turn=2).unwrapped


def test_frozen_lake_keys_name_the_cell_whatever_the_path():
    env = frozen_lake()
    _, start = env.reset(options={"map": OPEN})
    _, _, _, _, right = env.step("<answer>Right</answer>")
    _, _, _, _, back = env.step("<answer>Left</answer>")
    assert back["state_key"] == start["state_key"] != right["state_key"]
    _, _, _, _, down_right = env.step("<answer>Down, Right</answer>")
    env.reset(options={"map": OPEN})
    _, _, _, _, right_down = env.step("<answer>Right, Down</answer>")
    assert down_right["state_key"] == right_down["state_key"]
    _, _, _, _, invalid = env.step("no answer")  # the state is unchanged, so is its key
    assert invalid["state_key"] == right_down["state_key"]


def test_frozen_lake_keys_of_different_maps_differ_at_the_same_cell():
    env = frozen_lake()
    keys = [env.reset(options={"map": desc})[1]["state_key"] for desc in (OPEN, HOLE)]
    assert keys[0] != keys[1]


def test_frozen_lake_vision_keys_equal_the_text_env_s():
    seed = SPLITS["train"][3]
    text, vision = frozen_lake(), frozen_lake("freshrl/FrozenLakeVision-v0")
    assert text.reset(seed=seed)[1]["state_key"] == vision.reset(seed=seed)[1]["state_key"]
    response = text.oracle_responses()[0]
    assert text.step(response)[4]["state_key"] == vision.step(response)[4]["state_key"]


def test_sokoban_keys_follow_the_boxes_and_the_player():
    env = gym.make("freshrl/Sokoban-v0").unwrapped
    level = "#######\n#P_X_O#\n#_____#\n#######"
    _, start = env.reset(options={"level": level})
    _, _, _, _, short = env.step("<answer>Right</answer>")
    env.reset(options={"level": level})
    _, _, _, _, detour = env.step("<answer>Down, Right, Up</answer>")
    assert short["state_key"] == detour["state_key"] != start["state_key"]  # same cell, box untouched
    _, _, _, _, pushed = env.step("<answer>Right</answer>")
    _, _, _, _, back = env.step("<answer>Left, Left</answer>")
    # Back on the start cell, but the box moved: another state.
    assert len({start["state_key"], pushed["state_key"], back["state_key"]}) == 3


def test_sokoban_keys_of_different_levels_differ():
    env = gym.make("freshrl/Sokoban-v0").unwrapped
    keys = {env.reset(seed=seed)[1]["state_key"] for seed in SPLITS["train"][:8]}
    assert len(keys) == 8
