"""ChatRenderer with tools: the schemas reach the prompt (the template's rendering, or the Hermes fallback for
templates that ignore ``tools=``), and tool replies are rendered token-in/token-out as the template renders
a conversation with tool calls and tool messages."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from transformers import AutoTokenizer

from envs.search_tools import ANSWER_TOOL, SEARCH_TOOL
from envs.tool_calls import format_tool_call
from models.chat import ChatRenderer, Segment
from models.hermes_tools import HERMES_TOOLS_TEMPLATE

TOOLS = (SEARCH_TOOL, ANSWER_TOOL)
OBSERVATIONS = [
    "Answer the question.\nQuestion: Who wrote The Last Orchard?",
    "<information>Doc 1 (Title: Domo) Domo wrote The Last Orchard.</information>",
    "<information>No results.</information>",
]
CALLS = [
    {"id": "call_1", "name": "search", "arguments": {"query": "The Last Orchard author"}},
    {"id": "call_2", "name": "search", "arguments": {"query": "Domo \u00e9crivain"}},
]
# A template that renders tools in a way of its own (a header the fallback never writes), as Qwen2.5's does.
OWN_TOOLS_TEMPLATE = HERMES_TOOLS_TEMPLATE.replace("# Tools", "# Functions of this template")


def tokenizer_with(lm_path: Path, template: str | None):
    tokenizer = AutoTokenizer.from_pretrained(lm_path)
    if template is not None:
        tokenizer.chat_template = template
    return tokenizer


def rendered(renderer: ChatRenderer, ended_with_eos: tuple[bool, ...]) -> list[int]:
    """The conversation as the rollout builds it: prompt with tools, each call as sampled, its tool reply."""
    pieces: list[Segment] = [renderer.prompt(OBSERVATIONS[0], tools=TOOLS)]
    for turn, call in enumerate(CALLS):
        ids = renderer.tokenizer.encode(
            format_tool_call(call["name"], call["arguments"]), add_special_tokens=False
        )
        pieces.append(Segment(ids + ([renderer.eos_token_id] if ended_with_eos[turn] else [])))
        pieces.append(renderer.continuation(OBSERVATIONS[turn + 1], ended_with_eos[turn], tool_call=call))
    return [token for piece in pieces for token in piece.token_ids]


def template_ids(tokenizer, template: str | None, system: str | None) -> list[int]:
    """The same conversation as OpenAI-style messages through ``apply_chat_template(tools=...)``."""
    messages = [] if system is None else [{"role": "system", "content": system}]
    messages.append({"role": "user", "content": OBSERVATIONS[0]})
    for turn, call in enumerate(CALLS):
        function = {"name": call["name"], "arguments": call["arguments"]}
        messages.append(
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [{"id": call["id"], "type": "function", "function": function}],
            }
        )
        messages.append({"role": "tool", "tool_call_id": call["id"], "content": OBSERVATIONS[turn + 1]})
    return tokenizer.apply_chat_template(
        messages, tools=list(TOOLS), chat_template=template, add_generation_prompt=True, return_dict=False
    )


def test_the_tiny_template_ignores_tools_so_the_prompt_takes_the_hermes_fallback(lm_path: Path):
    tokenizer = tokenizer_with(lm_path, None)
    plain = tokenizer.apply_chat_template([{"role": "user", "content": "q"}], tokenize=False)
    assert (
        tokenizer.apply_chat_template([{"role": "user", "content": "q"}], tools=list(TOOLS), tokenize=False)
        == plain
    )
    text = tokenizer.decode(ChatRenderer(tokenizer).prompt(OBSERVATIONS[0], tools=TOOLS).token_ids)
    assert text.startswith("<|im_start|>system\n# Tools\n")
    assert "<tools>" in text and '<tool_call>\n{"name": <function-name>' in text
    for tool in TOOLS:
        assert json.dumps(tool, ensure_ascii=False) in text


@pytest.mark.parametrize("system", [None, "You are a careful researcher."])
@pytest.mark.parametrize("ended_with_eos", [(True, True), (False, True)])
def test_fallback_conversation_is_what_the_hermes_template_renders(lm_path: Path, system, ended_with_eos):
    tokenizer = tokenizer_with(lm_path, None)
    renderer = ChatRenderer(tokenizer, system_prompt=system)
    assert rendered(renderer, ended_with_eos) == template_ids(tokenizer, HERMES_TOOLS_TEMPLATE, system)
    text = tokenizer.decode(rendered(renderer, ended_with_eos))
    assert text.count("<tool_response>\n") == 2 and "<|im_start|>tool" not in text
    if system is not None:
        assert text.startswith(f"<|im_start|>system\n{system}\n\n# Tools\n")


@pytest.mark.parametrize("ended_with_eos", [(True, True), (True, False)])
def test_a_template_that_renders_tools_renders_them_itself(lm_path: Path, ended_with_eos):
    tokenizer = tokenizer_with(lm_path, OWN_TOOLS_TEMPLATE)
    renderer = ChatRenderer(tokenizer)
    ids = rendered(renderer, ended_with_eos)
    assert ids == template_ids(tokenizer, None, None)
    assert "# Functions of this template" in tokenizer.decode(ids)


def test_without_tools_the_prompt_is_unchanged(lm_path: Path):
    renderer = ChatRenderer(tokenizer_with(lm_path, None))
    assert renderer.prompt(OBSERVATIONS[0], tools=()).token_ids == renderer.prompt(OBSERVATIONS[0]).token_ids
    reply = renderer.continuation(OBSERVATIONS[1], True, tool_call=None).token_ids
    assert reply == renderer.continuation(OBSERVATIONS[1], True).token_ids


def test_a_template_whose_tools_use_another_call_syntax_is_refused(lm_path: Path):
    tokenizer = tokenizer_with(lm_path, HERMES_TOOLS_TEMPLATE.replace("tool_call>", "function_call>"))
    with pytest.raises(ValueError, match="<tool_call>"):
        ChatRenderer(tokenizer).prompt(OBSERVATIONS[0], tools=TOOLS)
