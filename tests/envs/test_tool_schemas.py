"""Tool declarations (OpenAI function schemas) are checked when an env is built; arguments against them."""

from __future__ import annotations

import copy

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from envs.base import MultiTurnEnv
from envs.search_tools import ANSWER_TOOL, SEARCH_TOOL
from envs.tool_schemas import argument_error, check_tools, tool_names, tool_parameters

LOOKUP = {
    "type": "function",
    "function": {
        "name": "lookup",
        "description": "Look up cells.",
        "parameters": {
            "type": "object",
            "properties": {
                "row": {"type": "integer"},
                "scale": {"type": ["number", "null"]},
                "mode": {"type": "string", "enum": ["fast", "exact"]},
                "cells": {
                    "type": "array",
                    "items": {"type": "object", "properties": {"x": {"type": "boolean"}}},
                },
            },
            "required": ["row"],
            "additionalProperties": False,
        },
    },
}


def with_function(**changes):
    tool = copy.deepcopy(SEARCH_TOOL)
    tool["function"].update(changes)
    return tool


def test_declarations_are_accepted_and_read():
    assert check_tools([SEARCH_TOOL, ANSWER_TOOL, LOOKUP]) == (SEARCH_TOOL, ANSWER_TOOL, LOOKUP)
    assert tool_names((SEARCH_TOOL, LOOKUP)) == ("search", "lookup")
    assert tool_parameters((SEARCH_TOOL, LOOKUP), "lookup") is LOOKUP["function"]["parameters"]
    assert tool_parameters((SEARCH_TOOL,), "lookup") is None
    assert check_tools(()) == ()


@pytest.mark.parametrize(
    ("tools", "says"),
    [
        (SEARCH_TOOL, "must be a tuple"),
        ([{"function": SEARCH_TOOL["function"]}], '"type": "function"'),
        ([with_function(name="web search")], "1-64 letters"),
        ([SEARCH_TOOL, SEARCH_TOOL], "unique"),
        ([with_function(returns="str")], "takes the keys"),
        ([with_function(description=3)], "description must be a string"),
        ([with_function(parameters={"type": "string"})], '{"type": "object"}'),
        (
            [with_function(parameters={"type": "object", "properties": {"q": {"type": "text"}}})],
            "type must be",
        ),
        ([with_function(parameters={"type": "object", "properties": {"q": {"pattern": "a+"}}})], "'pattern'"),
        ([with_function(parameters={"type": "object", "required": ["q"]})], "required must list"),
        ([with_function(parameters={"type": "object", "additionalProperties": {}})], "true or false"),
        ([with_function(parameters={"type": "object", "default": float("nan")})], "not plain JSON"),
    ],
)
def test_bad_declarations_are_named(tools, says):
    with pytest.raises(ValueError, match=None) as raised:
        check_tools(tools)
    assert says in str(raised.value)


class Declares(MultiTurnEnv):
    tools = (with_function(name="bad name"),)


def test_an_env_with_bad_tools_is_not_built():
    with pytest.raises(ValueError, match="tools\\[0\\]: the name"):
        Declares(max_turns=1)


PARAMETERS = LOOKUP["function"]["parameters"]


@pytest.mark.parametrize(
    ("arguments", "says"),
    [
        ({"row": 1}, ""),
        ({"row": 2.0, "scale": None, "mode": "exact", "cells": [{"x": True}, {}]}, ""),
        ({}, "the required 'row' is missing"),
        ({"row": True}, "arguments.row must be integer, got boolean"),
        ({"row": 1.5}, "arguments.row must be integer, got number"),
        ({"row": float("nan")}, "got a non-finite number"),
        ({"row": 1, "scale": "big"}, "arguments.scale must be number or null, got string"),
        ({"row": 1, "mode": "slow"}, 'must be one of ["fast", "exact"]'),
        ({"row": 1, "cells": [{"x": 1}]}, "arguments.cells[0].x must be boolean"),
        ({"row": 1, "colour": "red"}, "unknown key 'colour'"),
    ],
)
def test_arguments_are_checked(arguments, says):
    error = argument_error(PARAMETERS, arguments)
    assert (says in error and bool(error)) if says else error == ""


@settings(max_examples=200, deadline=None)
@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
        lambda children: (
            st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=5), children, max_size=4)
        ),
        max_leaves=12,
    )
)
def test_argument_check_never_raises(value):
    assert isinstance(argument_error(PARAMETERS, value), str)
