"""NQSearchTools: NQSearch's tasks and rewards, with search and answer as tool calls."""

from __future__ import annotations

import gymnasium as gym
import pytest

import envs  # noqa: F401  (registers the envs)
from envs.search import NQSearchEnv
from envs.search_tools import ANSWER_TOOL, SEARCH_TOOL, NQSearchToolsEnv
from envs.seeds import seeds
from envs.tool_calls import format_tool_call

ENV_ID = "freshrl/NQSearchTools-v0"


def search(query: str) -> str:
    return format_tool_call("search", {"query": query})


def answer(text: str) -> str:
    return format_tool_call("answer", {"answer": text})


def test_same_tasks_as_nq_search_and_tools_declared():
    env = gym.make(ENV_ID, topk=2, max_turns=5).unwrapped
    plain = NQSearchEnv(topk=2, max_turns=5)
    assert env.tools == (SEARCH_TOOL, ANSWER_TOOL) and plain.tools == ()
    for seed in [*seeds("train", 3), *seeds("validation", 2), *seeds("test", 2)]:
        observation, _ = env.reset(seed=seed)
        plain.reset(seed=seed)
        assert (
            env.question == plain.question and "search tool" in observation and "<search>" not in observation
        )


def test_oracle_calls_the_tools_and_solves_the_task():
    env = NQSearchToolsEnv()
    env.reset(seed=seeds("train", 1)[0])
    queries = env.question.oracle_queries
    assert env.oracle_responses() == [*map(search, queries), answer(env.question.answers[0])]
    for turn, response in enumerate(env.oracle_responses(), start=1):
        observation, reward, terminated, truncated, info = env.step(response)
        assert info["format_ok"] and info["action_valid"]
        assert info["tool_call"]["id"] == f"call_{turn}"
    assert (reward, terminated, truncated) == (1.0, True, False) and info["success"]
    assert info["tool_call"] == {
        "id": f"call_{turn}",
        "name": "answer",
        "arguments": {"answer": env.question.answers[0]},
    }


def test_rewards_and_limits_are_nq_search_ones():
    env = NQSearchToolsEnv(max_searches=1, max_turns=3, format_reward=0.2)
    env.reset(seed=5)
    _, _, _, _, info = env.step(search("first"))
    assert info["searches"] == 1 and info["query"] == "first" and info["tool_call"]["name"] == "search"
    observation, reward, terminated, _, info = env.step(search("second"))
    assert observation == "Search limit reached (1). Answer with the answer tool."
    assert (reward, terminated, info["action_effective"]) == (0.0, False, False) and "tool_call" in info
    assert env.oracle_responses() == [answer(env.question.answers[0])]
    _, reward, terminated, _, info = env.step(answer("Nowhere Special"))
    assert (reward, terminated, info["exact_match"]) == (0.2, True, False)


@pytest.mark.parametrize(
    ("response", "says"),
    [
        ("<answer>Paris</answer>", "no tool call"),
        ("<tool_call>{'name': 'search'}</tool_call>", "not valid JSON"),
        ('<tool_call>{"name": "browse", "arguments": {"url": "x"}}</tool_call>', "no tool named 'browse'"),
        (
            '<tool_call>{"name": "search", "arguments": {"q": "x"}}</tool_call>',
            "the required 'query' is missing",
        ),
        ('<tool_call>{"name": "search", "arguments": {"query": 7}}</tool_call>', "query must be string"),
        (search("   "), "search's query is empty"),
        (search("a") + search("b"), "2 tool calls; make one tool call per turn"),
    ],
)
def test_bad_calls_are_invalid_and_the_observation_says_why(response, says):
    env = NQSearchToolsEnv(invalid_penalty=-0.1)
    env.reset(seed=6)
    observation, reward, terminated, _, info = env.step(response)
    assert (reward, terminated, info["action_valid"], info["format_ok"]) == (-0.1, False, False, False)
    assert observation.startswith("Invalid response:") and says in observation
    assert "<tool_call>" in observation and "tool_call" not in info  # the reminder; no call to answer


def test_lenient_calls_are_valid_but_cost_the_format_reward():
    env = NQSearchToolsEnv(format_reward=0.2)
    env.reset(seed=4)
    _, _, _, _, info = env.step(search("something").removesuffix("</tool_call>"))  # stopped at the tag
    assert info["action_valid"] and not info["format_ok"] and info["query"] == "something"
    _, reward, _, _, _ = env.step(answer("Nowhere Special"))
    assert reward == 0.0
    env.reset(seed=4)
    _, reward, _, _, _ = env.step("Let me answer.\n" + answer("Nowhere Special"))
    assert reward == 0.2
