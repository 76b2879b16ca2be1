"""Every observation the base class builds fits the observation space, reprompts of a huge state included:
the error message stays whole and the state text loses its oldest characters, with a marker saying so."""

from __future__ import annotations

import re

import gymnasium as gym
import pytest

from envs.base import MAX_TEXT_CHARS, MultiTurnEnv, Outcome, Parsed, bounded_text
from envs.ecosystem import OPENENV_CLIENT_ID


class HugeStateEnv(MultiTurnEnv):
    """A state text of ``size`` characters, ending in a recognisable tail; "ok" is the only valid answer."""

    def __init__(self, size: int = MAX_TEXT_CHARS, **kwargs):
        super().__init__(max_turns=4, **kwargs)
        self.size = size

    def _new_task(self) -> str:
        return self._state_text()

    def _parse(self, response: str) -> Parsed:
        ok = response == "ok"
        return Parsed(format_ok=ok, valid=ok, action=response, error="the answer is not ok")

    def _apply(self, action: str) -> Outcome:
        return Outcome(0.0, "x" * (2 * MAX_TEXT_CHARS) + "NEWEST")

    def _state_text(self) -> str:  # the base class's hook; the tests read the same text through state()
        return self.state()

    def state(self) -> str:
        return "OLDEST" + "s" * (self.size - 12) + "NEWEST"

    def format_reminder(self) -> str:
        return "Answer like ok."


@pytest.mark.parametrize("size", [MAX_TEXT_CHARS - 20, MAX_TEXT_CHARS, 3 * MAX_TEXT_CHARS])
@pytest.mark.parametrize("response", ["", "not ok"])
def test_a_reprompt_of_a_huge_state_fits_and_keeps_the_message(size, response):
    env = HugeStateEnv(size=size)
    observation, _ = env.reset(seed=0)
    assert env.observation_space.contains(observation)
    observation, reward, *_ = env.step(response)
    assert env.observation_space.contains(observation), len(observation)
    assert len(observation) >= MAX_TEXT_CHARS - 1  # the marker's digits may leave one character spare
    assert observation.startswith("Invalid response: the answer is not ok. Answer like ok.\n[... ")
    cut = int(re.search(r"\[\.\.\. (\d+) characters cut\]", observation).group(1))
    state = env.state()
    kept = observation.split(" characters cut]\n", 1)[1]
    assert kept == state[cut:] and kept.endswith("NEWEST") and "OLDEST" not in observation
    assert reward == env.invalid_penalty


def test_noop_and_a_long_outcome_are_cut_from_their_start():
    env = HugeStateEnv(size=2 * MAX_TEXT_CHARS, invalid_output="noop")
    env.reset(seed=0)
    for response in ("bad", "ok"):
        observation = env.step(response)[0]
        assert MAX_TEXT_CHARS - 1 <= len(observation) <= MAX_TEXT_CHARS and observation.startswith("[... ")
        assert observation.endswith("NEWEST")


def test_short_observations_are_untouched():
    env = HugeStateEnv(size=100)
    env.reset(seed=0)
    observation = env.step("no")[0]
    assert observation == f"Invalid response: the answer is not ok. Answer like ok.\n{env.state()}"


def test_bounded_text_keeps_the_head_and_the_newest_text():
    assert bounded_text("a" * 10, limit=10) == "a" * 10
    text = bounded_text("0123456789" * 10, head="HEAD\n", limit=40)
    assert len(text) == 40 and text.startswith("HEAD\n[... ") and text.endswith("6789")
    cut = int(re.search(r"(\d+) characters cut", text).group(1))
    assert text.endswith(("0123456789" * 10)[cut:])
    assert bounded_text("body", head="h" * 50, limit=40) == "h" * 40  # a head over the limit is cut too


def test_an_openenv_reprompt_after_a_full_length_observation_fits():
    """The client cuts a server's observation to the limit; an invalid answer then reprompts with it."""
    env = gym.make(OPENENV_CLIENT_ID, base_url="http://127.0.0.1:1").unwrapped
    env._text = "o" * MAX_TEXT_CHARS  # what _render leaves after a reply of 65,536+ characters
    env.turn, env._done = 0, False
    observation = env.step("")[0]  # an empty response is invalid and never reaches the server
    assert env.observation_space.contains(observation)
    assert observation.startswith("Invalid response: the response is empty. Reply with a non-empty message.")
