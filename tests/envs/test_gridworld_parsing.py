"""The move-list answer format of Sokoban and FrozenLake: exact rules, and no string ever raises."""

import math
import re

import gymnasium as gym
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import envs  # noqa: F401  (registers the envs)
from envs.gridworld import format_instruction, format_moves, format_turns, last_answer, parse_moves

ENV_IDS = [
    "freshrl/Sokoban-v0",
    "freshrl/SokobanHard-v0",
    "freshrl/FrozenLake-v0",
    "freshrl/FrozenLakeVision-v0",
]


@pytest.mark.parametrize(
    ("response", "format_ok", "valid", "moves"),
    [
        ("<answer>Left, Up</answer>", True, True, ["Left", "Up"]),
        ("think first\n<answer> left  RIGHT,down </answer>", True, True, ["Left", "Right", "Down"]),
        ("<answer>Up</answer> then <ANSWER>Down</ANSWER>", True, True, ["Down"]),  # the last pair counts
        ("<answer>Up, Up, Up, Up, Up, Up</answer>", True, False, None),  # more than 5
        ("<answer>North</answer>", True, False, None),
        ("<answer>Left, 3</answer>", True, False, None),
        ("<answer> , </answer>", True, False, None),
        ("I go\nLeft then up", False, True, ["Left", "Up"]),  # fallback: last non-empty line
        ("Left\nno moves here\n\n", False, False, None),  # fallback only reads the last line
        ("<answer>Left, Up", False, True, ["Left", "Up"]),  # truncated tag: fallback
        ("upward leftovers", False, False, None),  # whole words only
        ("", False, False, None),
        ("up up up up up up", False, False, None),  # fallback also limited to 5
    ],
)
def test_parse_rules(response, format_ok, valid, moves):
    parsed = parse_moves(response, max_moves=5)
    assert (parsed.format_ok, parsed.valid) == (format_ok, valid)
    assert parsed.action == moves
    assert parsed.valid or parsed.error


def test_formatting_round_trips():
    moves = ["Left", "Up", "Up", "Right", "Down", "Down", "Left"]
    turns = format_turns(moves, 3)
    assert turns == [
        "<answer>Left, Up, Up</answer>",
        "<answer>Right, Down, Down</answer>",
        "<answer>Left</answer>",
    ]
    assert [m for t in turns for m in parse_moves(t, 3).action] == moves
    assert parse_moves(format_moves(["Right"]), 1).action == ["Right"]
    assert format_instruction(1).startswith("Answer with one move")
    assert "<answer>Left, Up</answer>" in format_instruction(2)


_FRAGMENTS = st.sampled_from(
    [
        "<answer>",
        "</answer>",
        "<ANSWER>",
        "Up",
        "down",
        "LEFT",
        "Right",
        ",",
        " ",
        "\n",
        "\r\n",
        "\x00",
        "x",
        "upward",
        "</answer",
        "<answer",
        "3",
        "\u00e9",
        "\U0001f600",
        "\t",
        "<answer></answer>",
    ]
)
RESPONSES = st.one_of(st.text(max_size=300), st.lists(_FRAGMENTS, max_size=30).map("".join))


@pytest.mark.parametrize("env_id", ENV_IDS)
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(responses=st.lists(RESPONSES, min_size=1, max_size=6))
def test_arbitrary_strings_never_raise_and_are_classified(env_id, responses):
    env = gym.make(env_id).unwrapped
    env.reset(seed=7)
    for response in responses:
        expected = parse_moves(response, env.max_actions_per_turn)
        obs, reward, terminated, truncated, info = env.step(response)
        assert env.observation_space.contains(obs)
        assert math.isfinite(reward)
        assert (info["format_ok"], info["action_valid"]) == (expected.format_ok, expected.valid)
        if not info["action_valid"]:
            assert reward == env.invalid_penalty and not info["action_effective"]
        if terminated or truncated:
            env.reset(seed=7)


_REFERENCE = re.compile(r"<answer>(.*?)</answer>", re.IGNORECASE | re.DOTALL)


@settings(max_examples=400, deadline=None)
@given(response=RESPONSES)
def test_last_answer_is_the_last_lazy_regex_match(response):
    matches = _REFERENCE.findall(response)
    assert last_answer(response) == (matches[-1] if matches else None)


def test_many_unclosed_tags_parse_in_one_pass():
    # The lazy regex rescanned to the end from each of these 20,000 tags (38 s); one pass takes milliseconds.
    response = "<answer>" * 20_000 + "Left</answer>"
    assert last_answer(response) == "<answer>" * 19_999 + "Left"
    assert parse_moves("<answer>" * 20_000, 5).valid is False
    assert parse_moves("<answer>" * 20_000 + "\nUp", 5).action == ["Up"]
