"""envs.contract on envs that break one property each: the check fails, names the property and says why."""

import random
import re
import time
import warnings

import numpy as np
import pytest

from envs.base import MultiTurnEnv, Outcome, Parsed, draw_in_split
from envs.contract import PROPERTIES, ContractViolation, check_env_contract, check_property, random_responses
from envs.seeds import split_of_reset_seed
from envs.tool_calls import format_tool_call


class Find(MultiTurnEnv):
    """A well-behaved env: name the hidden number 1..9 whose double is shown (split by content)."""

    def __init__(self, max_turns: int = 3, **kwargs):
        super().__init__(max_turns=max_turns, **kwargs)

    def reset(self, *, seed=None, options=None):
        self._split = split_of_reset_seed(seed)
        return super().reset(seed=seed, options=options)

    def _draw(self) -> int:
        return int(self.np_random.integers(1, 100_000))

    def _new_task(self) -> str:
        self.secret = draw_in_split(self._draw, str, self._split, settings="Find")
        return f"What is half of {2 * self.secret}? {self.format_reminder()}"

    def format_reminder(self) -> str:
        return "Answer like <answer>7</answer>."

    def _parse(self, response: str) -> Parsed:
        found = re.findall(r"<answer>(\d{1,6})</answer>", response)
        if not found:
            return Parsed(False, False, error="no <answer>N</answer>")
        return Parsed(True, True, action=int(found[-1]))

    def _apply(self, guess: int) -> Outcome:
        right = guess == self.secret
        return Outcome(float(right), "Right." if right else "Wrong.", terminated=right, success=right)

    def _state_text(self) -> str:
        return f"What is half of {2 * self.secret}?"

    def _task_info(self) -> dict:
        return {"state_key": f"Find {self.secret}"}  # wrong guesses leave the state as it was

    def oracle_responses(self) -> list[str]:
        return [] if self._done else [f"<answer>{self.secret}</answer>"]


class RaisesOnZero(Find):
    def _apply(self, guess: int) -> Outcome:
        return Outcome(float(100 // guess == self.secret), "Hm.")  # ZeroDivisionError on "<answer>0</answer>"


class EchoesTheResponse(Find):
    # MultiTurnEnv bounds every observation it builds; an env that overrides the builder can still overflow.
    def _observation(self, text: str):
        return "You said " + "x" * 70_000  # longer than the observation space allows


class GlobalRandom(Find):
    def _draw(self) -> int:
        return random.randint(1, 100_000)


class Leaky(Find):
    def _new_task(self) -> str:
        self.secret = int(self.np_random.integers(1, 20))  # a seed split alone: tasks repeat across splits
        return f"What is half of {2 * self.secret}? {self.format_reminder()}"


class BadOracle(Find):
    def oracle_responses(self):
        return f"<answer>{self.secret}</answer>"  # a str, not a list of str


class WrongOracle(Find):
    def oracle_responses(self):
        return [] if self._done else ["<answer>0</answer>"]


class AlwaysTerminates(Find):
    def _invalid_outcome(self, parsed: Parsed) -> Outcome:
        return Outcome(self.invalid_penalty, "Bye.", terminated=True, effective=False)


class MemberChangesTheTask(Find):
    def reset(self, *, seed=None, options=None):
        self._member = (options or {}).get("member", 0)
        return super().reset(seed=seed, options=options)

    def _new_task(self) -> str:
        return f"{super()._new_task()} You are copy {self._member}."


class SlowOnLongResponses(Find):
    def _parse(self, response: str) -> Parsed:
        time.sleep(0.3 if len(response) > 40_000 else 0)  # a parser whose work grows too fast with length
        return super()._parse(response)


class FloatImage(Find):
    image_shape = (8, 8, 3)

    def _render_image(self) -> np.ndarray:
        return np.zeros(self.image_shape)  # float64, not the declared uint8


class NoStateKey(Find):
    def _task_info(self) -> dict:
        return {}


class StateKeyCountsTurns(Find):
    def _task_info(self) -> dict:
        return {"state_key": f"Find {self.secret} turn {self.turn}"}  # an invalid turn changes it


class StateKeyWithoutTask(Find):
    def _task_info(self) -> dict:
        return {"state_key": "start"}  # keys of different tasks collide


class UnhashableStateKey(Find):
    def _task_info(self) -> dict:
        return {"state_key": [self.secret]}


NUMBER_TOOL = {
    "type": "function",
    "function": {
        "name": "answer",
        "description": "Name the hidden number.",
        "parameters": {
            "type": "object",
            "properties": {"number": {"type": "integer"}},
            "required": ["number"],
        },
    },
}


class FindByTool(Find):
    """Find, answered by calling a tool."""

    tools = (NUMBER_TOOL,)

    def format_reminder(self) -> str:
        return MultiTurnEnv.format_reminder(self)  # the base's reminder of the tools

    def _parse(self, response: str) -> Parsed:
        parsed = self._parse_tool_call(response)
        if parsed.valid:
            parsed.action = int(parsed.tool_call.arguments["number"])
        return parsed

    def oracle_responses(self) -> list[str]:
        return [] if self._done else [format_tool_call("answer", {"number": self.secret})]


class ToolCallUnreported(FindByTool):
    def _parse(self, response: str) -> Parsed:
        parsed = super()._parse(response)
        parsed.tool_call = None  # the rollout could not tell that the observation answers a call
        return parsed


class BadToolName(FindByTool):
    tools = ({"type": "function", "function": {"name": "give answer"}},)


FAST = {"fresh_interpreter": False, "split_tasks": 100}


def test_a_well_behaved_env_passes_every_property():
    assert check_env_contract(Find, **FAST) == dict.fromkeys(PROPERTIES, "ok")


def test_a_well_behaved_tool_env_passes_every_property():
    assert check_env_contract(FindByTool, **FAST) == dict.fromkeys(PROPERTIES, "ok")


@pytest.mark.parametrize(
    ("env", "prop", "message"),
    [
        (RaisesOnZero, "never_raises", r"step\('<answer>0</answer>'\) raised ZeroDivisionError"),
        (EchoesTheResponse, "never_raises", "not in observation_space"),
        (GlobalRandom, "determinism", "two envs reset with seed 0"),
        (Leaky, "splits", "a task leaks across splits"),
        (BadOracle, "oracle", "returned str"),
        (WrongOracle, "oracle", "solved 0 of 16 train tasks"),
        (AlwaysTerminates, "invalid_output", "invalid_output='noop'.*the episode ended"),
        (MemberChangesTheTask, "group", "start from different observations"),
        (FloatImage, "check_env", "check_env"),
        (StateKeyCountsTurns, "state_key", "the invalid response left the state unchanged but changed"),
        (StateKeyWithoutTask, "state_key", "start different tasks with the same state_key"),
        (UnhashableStateKey, "state_key", "is not hashable"),
        (ToolCallUnreported, "tools", "calls none of the tools"),
        (BadToolName, "tools", "tools\\[0\\]: the name must be"),
    ],
    ids=lambda value: value.__name__ if isinstance(value, type) else None,
)
def test_each_broken_property_is_named(env, prop, message):
    check_property(Find, prop, **FAST)  # the property holds for the well-behaved env ...
    with pytest.raises(ContractViolation) as caught:
        check_env_contract(env, **FAST)
    assert prop in caught.value.failures  # ... and fails here, named, with the reason
    assert re.search(message, caught.value.failures[prop]), caught.value.failures[prop]
    assert f"[{prop}]" in str(caught.value)


class CollectsALeakedSocket(Find):
    """A well-behaved env during whose check the garbage collector reaches a socket something else leaked."""

    def reset(self, *, seed=None, options=None):
        warnings.warn("unclosed <socket.socket fd=13>", ResourceWarning, stacklevel=1)
        return super().reset(seed=seed, options=options)


class WarnsItself(Find):
    def reset(self, *, seed=None, options=None):
        warnings.warn("the env's own warning", UserWarning, stacklevel=1)
        return super().reset(seed=seed, options=options)


def test_check_env_counts_the_env_s_warnings_not_the_garbage_collector_s():
    assert check_property(CollectsALeakedSocket, "check_env", **FAST) == "ok"
    with pytest.raises(ContractViolation, match="check_env warned: the env's own warning"):
        check_property(WarnsItself, "check_env", **FAST)


def test_the_state_key_is_optional():
    assert check_property(NoStateKey, "state_key", **FAST).startswith("ok (no info['state_key']")


def test_a_step_slower_than_the_hang_guard_is_named():
    with pytest.raises(ContractViolation, match=r"\[never_raises\].*\(50000 chars\)\) took .* s again"):
        check_property(SlowOnLongResponses, "never_raises", max_step_seconds=0.1)


def test_random_responses_are_seeded_and_use_the_env_s_words():
    env = Find()
    first, again, other = (random_responses(env, 50, seed) for seed in (0, 0, 1))
    assert first == again != other
    assert any("<answer>" in response for response in first)


def test_unknown_property_is_rejected():
    with pytest.raises(ValueError, match="unknown contract properties"):
        check_env_contract(Find, properties=["fast"])
