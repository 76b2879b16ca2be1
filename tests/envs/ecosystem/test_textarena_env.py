"""textarena adapter: the env contract on every exposed game, isolation of the global random, the oracle."""

import random

import gymnasium as gym
import pytest

pytest.importorskip("textarena", reason="the ecosystem extra (textarena) is not installed")

from envs.contract import contract_test, episode_digests  # noqa: E402
from envs.ecosystem import ECOSYSTEM_IDS  # noqa: E402
from envs.seeds import seeds  # noqa: E402

IDS = [env_id for env_id in ECOSYSTEM_IDS if env_id.startswith("textarena/")]
# Few split tasks: a validation or test board takes ~20 resets of the game (~20 ms each for Sudoku).
FAST = {"fuzz_samples": 8, "split_tasks": 6, "oracle_episodes": 3, "fresh_interpreter": False}

test_textarena_contract = contract_test(*IDS, **FAST)


def play(env, seed: int, turns: int) -> list[str]:
    """The texts of ``turns`` steps of the oracle, with a wrong move between."""
    observation, _ = env.reset(seed=seed)
    texts = [observation]
    for turn in range(turns):
        answers = env.oracle_responses()
        response = answers[0] if turn % 2 and answers else "[1 1 1] [0 0 z]"
        observation, _, terminated, truncated, _ = env.step(response)
        texts.append(observation)
        if terminated or truncated:  # Crosswords' oracle fills the grid in one turn
            break
    return texts


@pytest.mark.parametrize("env_id", IDS)
def test_interleaved_envs_are_deterministic_and_leave_global_random_alone(env_id):
    seed_a, seed_b = seeds("train", 2)
    solo = gym.make(env_id).unwrapped
    alone = [play(solo, seed_a, 6), play(solo, seed_b, 6)]
    a, b = gym.make(env_id).unwrapped, gym.make(env_id).unwrapped
    random.seed(123)
    expected_global = [random.random() for _ in range(3)]
    random.seed(123)
    texts = {id(a): [a.reset(seed=seed_a)[0]], id(b): [b.reset(seed=seed_b)[0]]}
    drawn, ended = [], set()
    for turn in range(6):
        for env in (a, b):  # interleaved turns, with the caller drawing from the global random between
            if id(env) in ended:
                continue
            answers = env.oracle_responses()
            response = answers[0] if turn % 2 and answers else "[1 1 1] [0 0 z]"
            observation, _, terminated, truncated, _ = env.step(response)
            texts[id(env)].append(observation)
            if terminated or truncated:
                ended.add(id(env))
        if turn < 3:
            drawn.append(random.random())
    assert [texts[id(a)], texts[id(b)]] == alone
    assert drawn == expected_global


@pytest.mark.parametrize("env_id", IDS)
def test_oracle_solves_games(env_id):
    env = gym.make(env_id).unwrapped
    for seed in seeds("test", 2):
        env.reset(seed=seed)
        info = {"success": False}
        while answers := env.oracle_responses():
            _, reward, terminated, truncated, info = env.step(answers[0])
            assert info["action_valid"]
            if terminated or truncated:
                break
        assert info["success"] and reward == 1.0 and info["completion"] == 1.0


def test_a_rejected_move_changes_nothing():
    env = gym.make("textarena/Sudoku-v0", render_mode="ansi").unwrapped
    env.reset(seed=seeds("train", 1)[0])
    before = env.render()  # the state as text
    observation, reward, terminated, _, info = env.step("[9 9 9] [1 1 1]")  # a given cell or a wrong digit
    assert not info["action_valid"] and reward == env.invalid_penalty and not terminated
    assert env.render() == before and observation.startswith("Invalid response:")
    assert episode_digests(env, seeds("train", 1)[0], []) == episode_digests(env, seeds("train", 1)[0], [])
