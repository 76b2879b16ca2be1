"""BabyAI adapter (minigrid): the env contract on every exposed level (text and vision), and BabyAIBot."""

import gymnasium as gym
import numpy as np
import pytest

pytest.importorskip("minigrid", reason="the ecosystem extra (minigrid) is not installed")

from envs.contract import contract_test  # noqa: E402
from envs.ecosystem import ECOSYSTEM_IDS  # noqa: E402
from envs.seeds import seeds  # noqa: E402

IDS = [env_id for env_id in ECOSYSTEM_IDS if env_id.startswith("babyai/")]
# Few samples and split tasks (a held-out room takes ~20 resets): the full sizes take minutes here.
FAST = {"fuzz_samples": 8, "split_tasks": 8, "oracle_episodes": 4, "fresh_interpreter": False}

test_babyai_contract = contract_test(*IDS, **FAST)


@pytest.mark.parametrize("env_id", IDS)
def test_bot_solves_levels(env_id):
    env = gym.make(env_id).unwrapped
    solved = 0
    for seed in seeds("validation", 4):
        env.reset(seed=seed)
        while answers := env.oracle_responses():
            _, reward, terminated, truncated, info = env.step(answers[0])
            assert info["action_valid"]
            if terminated or truncated:
                break
        solved += info["success"] and reward == 1.0 and info["minigrid_reward"] > 0
    assert solved == 4


def test_text_map_shows_the_agent_and_moves_with_it():
    env = gym.make("babyai/GoToLocal-v0").unwrapped
    observation, _ = env.reset(seed=seeds("train", 1)[0])
    assert sum(env.map_text().split().count(agent) for agent in ("A>", "Av", "A<", "A^")) == 1
    assert f"Mission: {env._env.mission}" in observation and env.map_text() in observation
    observation, *_ = env.step("<answer>left</answer>")
    assert env.map_text() in observation


def test_vision_frame_changes_with_the_agent_and_text_hides_the_map():
    env = gym.make("babyai/GoToLocalVision-v0").unwrapped
    observation, _ = env.reset(seed=seeds("train", 1)[0])
    assert observation["image"].shape == (224, 224, 3) and "##" not in observation["text"]
    turned, *_ = env.step("<answer>left</answer>")
    assert not np.array_equal(observation["image"], turned["image"])


def test_state_keys_name_the_room_whatever_the_path():
    env = gym.make("babyai/GoToLocal-v0", max_actions_per_turn=3).unwrapped
    seed = seeds("train", 1)[0]
    _, start = env.reset(seed=seed)
    _, _, _, _, there_and_back = env.step("<answer>left, right</answer>")
    assert there_and_back["state_key"] == start["state_key"]  # more steps taken, the same room
    _, _, _, _, right = env.step("<answer>right</answer>")
    env.reset(seed=seed)
    _, _, _, _, three_lefts = env.step("<answer>left, left, left</answer>")
    assert three_lefts["state_key"] == right["state_key"] != start["state_key"]
    _, _, _, _, invalid = env.step("no answer")
    assert invalid["state_key"] == three_lefts["state_key"]


def test_state_keys_of_different_rooms_differ():
    env = gym.make("babyai/GoToLocal-v0").unwrapped
    keys = {env.reset(seed=seed)[1]["state_key"] for seed in seeds("train", 6)}
    assert len(keys) == 6


def test_state_keys_hold_a_sequenced_mission_s_progress():
    from types import SimpleNamespace

    from envs.ecosystem.babyai import _progress

    def mission(a_done):
        go_to, open_door = SimpleNamespace(), SimpleNamespace()
        return SimpleNamespace(instr_a=go_to, instr_b=open_door, a_done=a_done, b_done=False)

    assert _progress(SimpleNamespace()) == "-"
    assert _progress(mission(False)) != _progress(mission("success"))


def test_max_solution_length_draws_only_rooms_the_bot_solves_that_fast():
    short = gym.make("babyai/GoToLocal-v0", max_solution_length=3).unwrapped
    every = gym.make("babyai/GoToLocal-v0").unwrapped
    lengths = []
    for seed in [*seeds("train", 12), *seeds("validation", 2)]:
        short.reset(seed=seed)
        lengths.append(len(short.oracle_actions()))
        observation, _ = short.reset(seed=seed)
        assert observation == short.reset(seed=seed)[0]  # still fixed by the seed
    assert min(lengths) >= 1 and max(lengths) <= 3
    longest = 0
    for seed in seeds("train", 12):
        every.reset(seed=seed)
        longest = max(longest, len(every.oracle_actions()))
    assert longest > 3  # the unrestricted level draws longer rooms: the filter did the work


@pytest.mark.parametrize("bad", [0, -2, 2.5, "4"])
def test_max_solution_length_must_be_a_positive_integer(bad):
    with pytest.raises(ValueError, match="max_solution_length"):
        gym.make("babyai/GoToLocal-v0", max_solution_length=bad)


@pytest.mark.parametrize("config", [{}, {"max_solution_length": 4}])
def test_a_held_out_room_found_again_is_the_room_the_draws_make(config, monkeypatch):
    from envs.ecosystem import babyai

    monkeypatch.setattr(babyai, "_HELD_OUT_ROOMS", {})
    seed = seeds("validation", 1)[0]
    drawn, replayed = (gym.make("babyai/GoToLocal-v0", **config).unwrapped for _ in range(2))
    first, _ = drawn.reset(seed=seed)
    assert len(babyai._HELD_OUT_ROOMS) == 1
    again, _ = replayed.reset(seed=seed)
    assert again == first and replayed.oracle_actions() == drawn.oracle_actions()
    # The generator goes on as after the draws: the next unseeded (training) task is the same too.
    assert replayed.reset()[0] == drawn.reset()[0]
    drawn.reset(seed=seeds("train", 1)[0])
    assert len(babyai._HELD_OUT_ROOMS) == 1  # training rooms are seldom drawn twice: not kept
