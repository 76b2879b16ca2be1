"""rollout_groups with a scripted engine (no vLLM): how a group is reset, and where an episode's response
budget stops it."""

from __future__ import annotations

import gymnasium as gym
from character_renderer import CharacterRenderer

import envs  # noqa: F401  (registers the envs)
from algorithms.rollout import rollout_groups
from envs.seeds import SPLITS
from models.engine import Completion, SamplingConfig

EOS = 0


class ScriptedEngine:
    """Answers every prompt with ``answer`` padded to ``length`` tokens (cut at the turn's max_tokens)."""

    def __init__(self, answer: str, length: int):
        self.answer, self.length = answer, length
        self.max_tokens: list[int] = []

    def generate(self, prompts, sampling: SamplingConfig) -> list[list[Completion]]:
        self.max_tokens.append(sampling.max_tokens)
        n = min(self.length, sampling.max_tokens)
        finish = "length" if n < self.length else "stop"
        return [[Completion([1] * n, [-0.5] * n, finish, self.answer)] for _ in prompts]


def test_slippery_members_share_the_task_but_not_their_luck():
    """The rollout resets a group through envs.group.reset_group, so every member gets its
    own slip stream (options["member"]) while all start from the same observation."""
    group_size, seed = 16, SPLITS["train"][0]
    env_list = [
        gym.make("freshrl/FrozenLake-v0", is_slippery=True, max_turns=3, max_actions_per_turn=1)
        for _ in range(group_size)
    ]
    engine = ScriptedEngine("<answer>Down</answer>", 4)
    (group,) = rollout_groups(
        engine,
        CharacterRenderer(),
        env_list,
        [seed],
        group_size,
        SamplingConfig(max_tokens=8),
        max_context_tokens=4096,
    )
    first = {tuple(t.token_ids[: t.response_spans[0][0]]) for t in group}
    assert len(first) == 1, "all members start from the same first observation"
    # The same answers every turn; only the slips differ, and they do between members.
    assert len({tuple(t.token_ids) for t in group}) > 1


def test_episode_stops_at_its_response_budget():
    env_list = [gym.make("freshrl/FrozenLake-v0", max_turns=5) for _ in range(2)]
    seed = SPLITS["train"][1]
    sampling = SamplingConfig(max_tokens=10)
    nonsense = ScriptedEngine("no moves here", 10)  # never ends the episode: reprompted every turn
    (group,) = rollout_groups(
        nonsense,
        CharacterRenderer(),
        env_list,
        [seed],
        2,
        sampling,
        max_context_tokens=4096,
        max_trajectory_response_tokens=25,
    )
    assert nonsense.max_tokens == [10, 10, 5]
    for trajectory in group:
        assert trajectory.response_budget == 25 and trajectory.response_lengths == [10, 10, 5]
        assert not trajectory.terminated
    # By default the budget is what the turn limit allows: max_tokens x max_turns.
    (group,) = rollout_groups(
        ScriptedEngine("no moves here", 10),
        CharacterRenderer(),
        env_list,
        [seed],
        2,
        sampling,
        max_context_tokens=4096,
    )
    assert [t.response_budget for t in group] == [50, 50] and group[0].response_lengths == [10] * 5


def test_invalid_turns_are_counted():
    """Every turn whose response the env could not use counts (the runner logs the invalid-output rate)."""
    seed = SPLITS["train"][2]
    env_list = [gym.make("freshrl/FrozenLake-v0", max_turns=3) for _ in range(2)]
    (group,) = rollout_groups(
        ScriptedEngine("no moves here", 4),
        CharacterRenderer(),
        env_list,
        [seed],
        2,
        SamplingConfig(max_tokens=8),
        max_context_tokens=4096,
    )
    assert [(t.num_turns, t.invalid_turns) for t in group] == [(3, 3), (3, 3)]
    (group,) = rollout_groups(
        ScriptedEngine("<answer>Down</answer>", 6),
        CharacterRenderer(),
        env_list,
        [seed],
        2,
        SamplingConfig(max_tokens=8),
        max_context_tokens=4096,
    )
    assert all(t.invalid_turns == 0 for t in group)
