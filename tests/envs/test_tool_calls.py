"""The Hermes tool-call parser: never raises, reads what the template writes, names what is wrong."""

from __future__ import annotations

import json

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from envs.tool_calls import ToolCall, ToolCallText, format_tool_call, parse_tool_calls

CALL = '<tool_call>\n{"name": "search", "arguments": {"query": "Domo"}}\n</tool_call>'
SEARCH = ToolCall("search", {"query": "Domo"})
FRAGMENTS = st.sampled_from(
    ["<tool_call>", "</tool_call>", "<tool_call", '{"name": ', '"search"', '"arguments": ', "{", "}", "[",
     "]", '"query": ', '"x"', ", ", "1e999", "NaN", "9" * 5000, "\\ud800", "\x00", "\n", " ", "null", '"',
     "\\"]
)  # fmt: skip
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=8), children, max_size=3)
    ),
    max_leaves=10,
)


@settings(max_examples=150, deadline=None)
@given(st.text() | st.lists(FRAGMENTS, max_size=30).map("".join))
def test_never_raises_and_always_says_why_there_is_no_call(text):
    found = parse_tool_calls(text)
    assert isinstance(found, ToolCallText)
    assert bool(found.calls) != bool(found.error)
    assert all(isinstance(call.name, str) and isinstance(call.arguments, dict) for call in found.calls)


@settings(max_examples=200, deadline=None)
@given(
    name=st.from_regex(r"[A-Za-z0-9_-]{1,64}", fullmatch=True),
    arguments=st.dictionaries(st.text(), JSON_VALUES, max_size=4),
    before=st.text().filter(lambda t: "<tool_call>" not in t),
)
@example(name="0", arguments={"</tool_call>": None, "q": "a</tool_call>b"}, before="")  # the tag in a string
def test_what_format_tool_call_writes_parses_back(name, arguments, before):
    found = parse_tool_calls(before + format_tool_call(name, arguments))
    assert found == ToolCallText(calls=(ToolCall(name, arguments),), strict=True)


def test_the_template_rendering_of_a_call_is_the_oracle_format():
    # Qwen2.5's template writes '<tool_call>\n{"name": "' + name + '", "arguments": ' + arguments|tojson
    # + '}\n</tool_call>'.
    assert format_tool_call("search", {"query": "Domo"}) == CALL
    assert format_tool_call("answer", {"answer": "caf\u00e9"}).count("caf\u00e9") == 1  # not \u-escaped


@pytest.mark.parametrize(
    ("text", "calls", "strict"),
    [
        (CALL, (SEARCH,), True),
        ("I should look this up.\n" + CALL + "\n\n", (SEARCH,), True),
        (CALL + " and then some text", (SEARCH,), False),
        (
            '<tool_call>{"name": "search", "arguments": {"query": "Domo"}}',
            (SEARCH,),
            False,
        ),  # stopped at the tag
        (CALL + CALL, (SEARCH, SEARCH), True),
        ('<tool_call>{"name": "end"}</tool_call>', (ToolCall("end", {}),), True),
    ],
    ids=["strict", "reasoning-before", "text-after", "unclosed", "two-calls", "no-arguments"],
)
def test_calls_and_format(text, calls, strict):
    assert parse_tool_calls(text) == ToolCallText(calls=calls, strict=strict)


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("", "no tool call"),
        ("<answer>Domo</answer>", "no tool call"),
        ("<tool_call></tool_call>", "not valid JSON"),
        ("<tool_call>{'name': 'search'}</tool_call>", "not valid JSON"),
        ("<tool_call>" + "[" * 100_000 + "</tool_call>", "not valid JSON (RecursionError)"),
        ('<tool_call>{"name": "s", "arguments": {"n": ' + "9" * 5000 + "}}</tool_call>", "not valid JSON"),
        ("<tool_call>[1, 2]</tool_call>", "must be a JSON object"),
        ('<tool_call>{"arguments": {}}</tool_call>', 'no "name"'),
        (
            '<tool_call>{"name": "search", "arguments": "{\\"query\\": 1}"}</tool_call>',
            "must be a JSON object",
        ),
        ('<tool_call>{"name": "search", "query": "x"}</tool_call>', "unknown key 'query'"),
        (CALL + "<tool_call>{</tool_call>", "tool call 2 is not valid JSON"),
    ],
)
def test_what_is_wrong_is_named(text, says):
    found = parse_tool_calls(text)
    assert found.calls == () and says in found.error
    json.dumps(found.error)  # a plain string, safe to show the model


def test_long_adversarial_text_is_linear():
    found = parse_tool_calls("<tool_call>" * 50_000)
    assert found.calls == () and "not valid JSON" in found.error
