"""NQSearch through tool calls: ``search`` and ``answer`` as OpenAI functions instead of text tags."""

from __future__ import annotations

from typing import Any

from envs.base import Parsed
from envs.search import NQSearchEnv
from envs.tool_calls import format_tool_call

SEARCH_TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "search",
        "description": "Search the corpus. Returns the top passages inside <information>...</information>.",
        "parameters": {
            "type": "object",
            "properties": {"query": {"type": "string", "description": "What to search for."}},
            "required": ["query"],
            "additionalProperties": False,
        },
    },
}
ANSWER_TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "answer",
        "description": "Give the final answer. Ends the episode.",
        "parameters": {
            "type": "object",
            "properties": {"answer": {"type": "string", "description": "Only the answer, nothing else."}},
            "required": ["answer"],
            "additionalProperties": False,
        },
    },
}
# The argument holding each tool's text.
ARGUMENT = {"search": "query", "answer": "answer"}
PROMPT = (
    "Answer the question. Call the search tool to look things up; you can search up to {max_searches} "
    "times. When you know the answer, call the answer tool with only the answer.\nQuestion: {question}"
)
FORMAT_REMINDER = (
    'Call one tool per turn: <tool_call>{"name": "search", "arguments": {"query": "..."}}</tool_call> or '
    '<tool_call>{"name": "answer", "arguments": {"answer": "..."}}</tool_call>.'
)


class NQSearchToolsEnv(NQSearchEnv):
    """NQSearch (``envs.search.NQSearchEnv``) with its two actions as tools, called in the OpenAI format.

    ## Description
    The same questions, splits, retriever, rewards, limits and arguments as ``freshrl/NQSearch-v0``; only the
    action format differs. The env declares two tools (``tools``: OpenAI function schemas), which the
    rollout renders into the prompt through the chat template's ``tools=`` (or the Hermes fallback,
    ``models/hermes_tools.py``): ``search(query)`` returns passages, ``answer(answer)`` ends the episode. The
    reply to a call is a ``tool`` message (``info["tool_call"]`` names the call it answers).

    ## Action Space
    Any string. Strict format: exactly one closed ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>``
    (the Hermes format: envs/tool_calls.py) with nothing but whitespace after it; text before it is allowed.
    Lenient (``info["format_ok"]`` False): an unclosed block at the end. Invalid: no call, several calls,
    malformed JSON, an unknown tool, missing or extra arguments, a non-string or empty query or answer;
    the ``invalid_output`` policy's observation says which.

    ## Observation Space, Starting State, Rewards, Episode End, Arguments
    As ``NQSearchEnv``; a search's observation is the ``<information>`` block, sent as the tool's result.

    ## Version History
    - v0: first version.
    """

    tools = (SEARCH_TOOL, ANSWER_TOOL)
    prompt_template = PROMPT
    reminder = FORMAT_REMINDER
    answer_hint = "the answer tool"

    def _parse(self, response: str) -> Parsed:
        parsed = self._parse_tool_call(response)
        if parsed.valid:
            name = parsed.tool_call.name
            content = parsed.tool_call.arguments[ARGUMENT[name]].strip()
            if not content:
                parsed = Parsed(False, False, error=f"{name}'s {ARGUMENT[name]} is empty")
            else:
                parsed.action = (name, content)
        self._all_format_ok &= parsed.format_ok  # the format reward needs every turn's verdict
        return parsed

    def _search_response(self, query: str) -> str:
        return format_tool_call("search", {"query": query})

    def _answer_response(self, answer: str) -> str:
        return format_tool_call("answer", {"answer": answer})
