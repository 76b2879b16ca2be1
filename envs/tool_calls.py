"""Tool calls in model text, Hermes format: ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>``.

It is the format Qwen2.5's chat template asks for and renders an assistant's calls in, and what vLLM's
``hermes`` tool parser reads (vLLM's hermes_tool_parser.py: the blocks ``<tool_call>(.*?)</tool_call>``, or
an unclosed ``<tool_call>`` running to the end of the text, each a JSON object). :func:`parse_tool_calls`
reads it in pure Python and never raises; :func:`format_tool_call` writes a call the way the chat template
renders it, for oracles.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

TOOL_CALL_OPEN = "<tool_call>"
TOOL_CALL_CLOSE = "</tool_call>"
# The closing tag as JSON may also spell it inside a string ("\/" is an escaped "/").
ESCAPED_CLOSE = "<\\/tool_call>"
# A name or key shown back in an error message is cut to this many characters.
ECHO_CHARS = 60


@dataclass(frozen=True)
class ToolCall:
    """One OpenAI-style call: the function's name and its arguments (a JSON object)."""

    name: str
    arguments: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ToolCallText:
    """What :func:`parse_tool_calls` read in a response.

    ``calls``: the calls decoded, in order (empty when ``error`` is set). ``error``: why the response holds no
    usable calls ("" when it does). ``strict``: every block was closed and only whitespace follows the last
    one (text before the first block, such as reasoning, is allowed).
    """

    calls: tuple[ToolCall, ...] = ()
    error: str = ""
    strict: bool = True


def parse_tool_calls(text: str) -> ToolCallText:
    """The calls in ``text``. Never raises, whatever the string; linear in its length."""
    if not isinstance(text, str):
        return ToolCallText(error=f"a response is text, got {type(text).__name__}", strict=False)
    bodies: list[str] = []
    strict = True
    at = text.find(TOOL_CALL_OPEN)
    if at < 0:
        return ToolCallText(
            error=f'no tool call; write {TOOL_CALL_OPEN}{{"name": ..., "arguments": {{}}}}{TOOL_CALL_CLOSE}',
            strict=False,
        )
    while at >= 0:
        start = at + len(TOOL_CALL_OPEN)
        close = text.find(TOOL_CALL_CLOSE, start)
        if close < 0:
            # An unclosed block at the end: a generation stopped at the closing tag without returning it.
            bodies.append(text[start:])
            strict = False
            break
        bodies.append(text[start:close])
        end = close + len(TOOL_CALL_CLOSE)
        at = text.find(TOOL_CALL_OPEN, end)
        if at < 0 and text[end:].strip():
            strict = False
    calls = []
    for number, body in enumerate(bodies, start=1):
        call = _decode(body, number if len(bodies) > 1 else None)
        if isinstance(call, str):
            return ToolCallText(error=call, strict=False)
        calls.append(call)
    return ToolCallText(calls=tuple(calls), strict=strict)


def format_tool_call(name: str, arguments: dict[str, Any]) -> str:
    """``name(arguments)`` as Qwen2.5's chat template renders an assistant's call (its ``tojson`` is
    ``json.dumps`` with ``ensure_ascii=False``): a demonstration holds what a rendered history holds. A
    closing tag inside a string is written ``<\\/tool_call>`` (JSON's escaped solidus, read back as ``/``), so
    the block cannot end inside its own JSON, where the template's rendering would cut it."""
    body = json.dumps({"name": name, "arguments": arguments}, ensure_ascii=False)
    return f"{TOOL_CALL_OPEN}\n{body.replace(TOOL_CALL_CLOSE, ESCAPED_CLOSE)}\n{TOOL_CALL_CLOSE}"


def _decode(body: str, number: int | None) -> ToolCall | str:
    """The call in one block's body, or what is wrong with it."""
    which = "the tool call" if number is None else f"tool call {number}"
    try:
        value = json.loads(body)
    except (ValueError, RecursionError) as exc:  # RecursionError: JSON nested deeper than Python's stack
        reason = exc.msg if isinstance(exc, json.JSONDecodeError) else type(exc).__name__
        return f"{which} is not valid JSON ({reason})"
    if not isinstance(value, dict):
        return f'{which} must be a JSON object {{"name": ..., "arguments": {{...}}}}'
    name = value.get("name")
    if not isinstance(name, str) or not name:
        return f'{which} has no "name" string'
    arguments = value.get("arguments", {})
    if not isinstance(arguments, dict):
        return f'{which} to {name[:ECHO_CHARS]!r}: "arguments" must be a JSON object'
    extra = sorted(set(value) - {"name", "arguments"})
    if extra:
        return f"{which} to {name[:ECHO_CHARS]!r} has the unknown key {extra[0][:ECHO_CHARS]!r}"
    return ToolCall(name, arguments)
