"""rollout_groups records, turn by turn, the env's key of the state each turn starts from (reset's
info["state_key"], then each step's), with a scripted engine (no vLLM)."""

from __future__ import annotations

import gymnasium as gym
import pytest
from character_renderer import CharacterRenderer

import envs  # noqa: F401  (registers the envs)
import examples.guess_number  # noqa: F401  (registers examples/GuessNumber-v0, which reports no state keys)
from algorithms.rollout import rollout_groups
from envs.seeds import SPLITS
from models.engine import Completion, SamplingConfig

ANSWERS = ["<answer>Right</answer>", "<answer>Down, Left</answer>", "no moves here", "<answer>Up</answer>"]


class CyclingEngine:
    """Prompt k of call c gets ANSWERS[(c + k) % 4], so the members of a group take different paths."""

    def __init__(self):
        self.calls = 0

    def generate(self, prompts, sampling: SamplingConfig) -> list[list[Completion]]:
        answers = [ANSWERS[(self.calls + k) % len(ANSWERS)] for k in range(len(prompts))]
        self.calls += 1
        return [[Completion([1, 2], [-0.5, -0.5], "stop", answer)] for answer in answers]


def env_keys(env_id: str, seed: int, member: int, responses: list[str]) -> list:
    """The env's own state keys for these responses: reset's, then after each step."""
    env = gym.make(env_id, max_turns=4)
    _, info = env.reset(seed=seed, options={"member": member})
    keys = [info.get("state_key")]
    for response in responses:
        _, _, terminated, truncated, info = env.step(response)
        keys.append(info.get("state_key"))
        if terminated or truncated:
            break
    return keys


def responses_of(group, index: int) -> list[str]:
    """The answers member ``index`` got: call c answers the members still live (those with more than c
    turns, in order) ANSWERS[(c + k) % 4], k the member's place among them."""
    answers = []
    for call in range(group[index].num_turns):
        live = [i for i, t in enumerate(group) if t.num_turns > call]
        answers.append(ANSWERS[(call + live.index(index)) % len(ANSWERS)])
    return answers


@pytest.mark.parametrize("env_id", ["freshrl/FrozenLake-v0", "freshrl/Sokoban-v0"])
def test_recorded_keys_are_the_env_s_turn_by_turn(env_id):
    seed, group_size = SPLITS["train"][5], 2
    env_list = [gym.make(env_id, max_turns=4) for _ in range(group_size)]
    (group,) = rollout_groups(
        CyclingEngine(),
        CharacterRenderer(),
        env_list,
        [seed],
        group_size,
        SamplingConfig(max_tokens=8),
        max_context_tokens=8192,
    )
    for index, trajectory in enumerate(group):
        keys = env_keys(env_id, seed, index, responses_of(group, index))
        assert len(trajectory.turn_state_keys) == trajectory.num_turns >= 1
        # Turn t starts from the state reset (t = 0) or step t - 1 left; the last step's key is no turn's.
        assert trajectory.turn_state_keys == keys[: trajectory.num_turns]
        assert all(isinstance(key, str) for key in trajectory.turn_state_keys)
    assert group[0].turn_state_keys[0] == group[1].turn_state_keys[0]  # one task, one start state
    assert group[0].turn_state_keys != group[1].turn_state_keys  # different answers, different paths


def test_an_env_without_state_keys_records_none_per_turn():
    env_list = [gym.make("examples/GuessNumber-v0", max_turns=3) for _ in range(2)]
    (group,) = rollout_groups(
        CyclingEngine(),
        CharacterRenderer(),
        env_list,
        [SPLITS["train"][0]],
        2,
        SamplingConfig(max_tokens=8),
        max_context_tokens=8192,
    )
    assert [t.turn_state_keys for t in group] == [[None] * 3, [None] * 3]
