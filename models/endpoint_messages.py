"""A multi-turn episode as OpenAI chat messages: what a chat-completions server is sent.

The conversation is the one ``models.chat.ChatRenderer`` renders for a local model, as messages instead of
token ids, so the server's chat template renders the same prompt: an optional system message (only when
the run sets ``system_prompt``; otherwise the template's own default applies, as the renderer's does), the
env's first observation as the user message, then per turn the assistant's reply and the env's observation,
a ``tool`` message when it answers a tool call (``info["tool_call"]``), else a user message. An image
observation's image goes before its text, as the renderer places it, as a ``data:image/png;base64`` part.

A server with a tool parser (vLLM's ``--tool-call-parser hermes``) returns the model's calls as
``tool_calls``; :func:`response_text` writes them back in the Hermes text the envs parse
(``envs.tool_calls``), so the env reads the same action it would read from the local model's text.
"""

from __future__ import annotations

import base64
import io
import json
from typing import Any

import numpy as np
from PIL import Image

from envs.tool_calls import TOOL_CALL_CLOSE, TOOL_CALL_OPEN, format_tool_call
from models.chat_endpoint import ChatReply


def system_messages(system_prompt: str | None) -> list[dict[str, Any]]:
    """The system message of ``system_prompt``; none for None (the chat template's default applies)."""
    return [] if system_prompt is None else [{"role": "system", "content": system_prompt}]


def observation_content(observation: str | dict[str, Any]) -> str | list[dict[str, Any]]:
    """A message's content for an observation: its text, or an image part then a text part."""
    if isinstance(observation, str):
        return observation
    if not isinstance(observation, dict) or "text" not in observation:
        raise TypeError(
            f"an observation is a str or a dict with 'text' (and 'image'), got {observation!r:.80}"
        )
    if observation.get("image") is None:
        return observation["text"]
    image = {"type": "image_url", "image_url": {"url": png_data_url(observation["image"])}}
    return [image, {"type": "text", "text": observation["text"]}]


def user_message(observation: str | dict[str, Any]) -> dict[str, Any]:
    return {"role": "user", "content": observation_content(observation)}


def tool_message(call_id: str, observation: str | dict[str, Any]) -> dict[str, Any]:
    """The env's reply to the call ``call_id``."""
    return {"role": "tool", "tool_call_id": call_id, "content": observation_content(observation)}


def png_data_url(image: np.ndarray) -> str:
    """An HxWx3 uint8 image as a ``data:image/png;base64,...`` URL (lossless: the model sees its pixels)."""
    array = np.asarray(image)
    if array.ndim != 3 or array.shape[2] != 3 or array.dtype != np.uint8:
        raise ValueError(f"an image is an HxWx3 uint8 array, got shape {array.shape} dtype {array.dtype}")
    buffer = io.BytesIO()
    Image.fromarray(array).save(buffer, format="PNG")
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")


def response_text(reply: ChatReply) -> str:
    """The reply as the text an env parses: its content, then each tool call in the Hermes format."""
    calls = [_call_text(call) for call in reply.tool_calls]
    return "\n".join(part for part in [reply.content or "", *calls] if part) if calls else reply.content or ""


def assistant_message(reply: ChatReply, text: str, answered: dict[str, Any] | None) -> dict[str, Any]:
    """The assistant's turn in the history. ``answered``: the call the env answered (its
    ``info["tool_call"]``), which the message then carries as its one ``tool_calls`` entry: the server's own
    call (with its id) when it parsed one, else the env's reading of the text (a server without a tool
    parser returns calls as text), with the text before the call as content. Without an answered call the
    reply is the text alone, so no call goes without a reply (OpenAI's API rejects that)."""
    if answered is None:
        return {"role": "assistant", "content": text}
    if reply.tool_calls:
        call = {**reply.tool_calls[0], "id": reply.tool_calls[0].get("id") or answered["id"]}
        return {"role": "assistant", "content": reply.content, "tool_calls": [call]}
    function = {"name": answered["name"], "arguments": json.dumps(answered["arguments"], ensure_ascii=False)}
    before = text[: text.find(TOOL_CALL_OPEN)] if TOOL_CALL_OPEN in text else ""
    call = {"id": answered["id"], "type": "function", "function": function}
    return {"role": "assistant", "content": before.strip() or None, "tool_calls": [call]}


def answered_call_id(message: dict[str, Any]) -> str:
    """The id of the call an assistant message from :func:`assistant_message` carries."""
    return str(message["tool_calls"][0]["id"])


def _call_text(call: dict[str, Any]) -> str:
    """One returned call as Hermes text; arguments that are not a JSON object are kept as given, so the
    env reports the call as malformed (as it would the local model's)."""
    function = call.get("function") or {}
    name, arguments = function.get("name", ""), function.get("arguments", "{}")
    try:
        decoded = json.loads(arguments) if isinstance(arguments, str) else arguments
    except ValueError:
        decoded = None
    if isinstance(decoded, dict):
        return format_tool_call(str(name), decoded)
    raw = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return f'{TOOL_CALL_OPEN}\n{{"name": {json.dumps(name)}, "arguments": {raw}}}\n{TOOL_CALL_CLOSE}'
